//! `aggregate verify`: check a signed bundle: the signature of its manifest and every file hash.

use super::*;

/// Check a signed report: the signature of its manifest and every file hash.
#[derive(Args)]
pub struct VerifyArgs {
    /// Report directory.
    dir: PathBuf,
    /// The signer's public key (KEY.pub). Without it, the key in the bundle's
    /// allowed_signers is used and its fingerprint printed: compare it with the one the
    /// signer published, or anyone could have re-signed the bundle.
    #[arg(long)]
    key: Option<PathBuf>,
}

impl VerifyArgs {
    pub fn run(self) -> Result<u8> {
        let Self { dir, key } = self;
        let public = key.as_deref().map(sign::read_public).transpose()?;
        let rep = sign::verify_bundle(&dir, public.as_ref())?;
        if public.is_none() {
            println!(
                "key: {} from the bundle's {}; trust it only if it matches the signer's published fingerprint",
                rep.fingerprint,
                sign::ALLOWED_SIGNERS
            );
        } else {
            println!("key: {}", rep.fingerprint);
        }
        println!(
            "signature: {}",
            if rep.signature_ok { "good" } else { "BAD" }
        );
        for p in &rep.problems {
            println!("problem: {}", terminal(p));
        }
        for f in &rep.bad_files {
            println!("CHANGED: {}", terminal(f));
        }
        for f in &rep.unlisted {
            println!("not covered by the signature: {}", terminal(f));
        }
        if rep.ok() {
            println!("verified: {} files match the signed manifest", rep.files_ok);
            Ok(exit::OK)
        } else {
            println!("verification FAILED");
            Ok(exit::FAILED)
        }
    }
}
