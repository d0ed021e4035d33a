//! `aggregate keygen`: a new Ed25519 signing key pair.

use super::*;

/// Write a new Ed25519 signing key pair (KEY, mode 0600, and KEY.pub).
#[derive(Args)]
pub struct KeygenArgs {
    /// Private key path; KEY.pub is written beside it. Never overwritten.
    key: PathBuf,
    /// Comment stored in the key.
    #[arg(long, default_value = "fabcheck report signing key")]
    comment: String,
}

impl KeygenArgs {
    pub fn run(self) -> Result<u8> {
        let Self { key, comment } = self;
        let fp = sign::keygen(&key, &comment)?;
        println!(
            "private key: {} (mode 0600; keep it offline)",
            key.display()
        );
        println!("public key:  {}.pub", key.display());
        println!("fingerprint: {fp} (publish this so customers can check signatures)");
        Ok(exit::OK)
    }
}
