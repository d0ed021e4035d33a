//! Signed reports. `report --sign KEY` writes `MANIFEST.sha256` (the SHA-256 of every report
//! file and every input file in the bundle, in `sha256sum` format) and
//! `MANIFEST.sha256.sig`, an SSH signature (SSHSIG) of that manifest in the fixed namespace
//! [`NAMESPACE`]. A customer checks it with stock OpenSSH and coreutils, with `SIGNERS`
//! naming an `allowed_signers` file that holds the key the signer published (never the
//! bundle's own copy: a bundle re-signed by anyone is consistent with its own key):
//!
//! ```text
//! ssh-keygen -Y verify -f "$SIGNERS" -I fabcheck -n fabcheck-report \
//!     -s MANIFEST.sha256.sig < MANIFEST.sha256 && sha256sum -c MANIFEST.sha256
//! ```
//!
//! The signature covers the manifest, the manifest covers every byte of every file: a
//! changed byte anywhere breaks one of the two.

use std::fs;
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Component, Path};

use ssh_key::{Algorithm, HashAlg, LineEnding, PrivateKey, PublicKey, SshSig};

use verdict::error::{Error, Result};

/// SSHSIG namespace of fabcheck reports: a signature made for anything else (git commits,
/// files) can never be passed off as a report signature.
pub const NAMESPACE: &str = "fabcheck-report";
/// Manifest file name inside a report bundle.
pub const MANIFEST: &str = "MANIFEST.sha256";
/// Signature file name inside a report bundle.
pub const SIGNATURE: &str = "MANIFEST.sha256.sig";
/// `allowed_signers` file written beside the signature (OpenSSH format).
pub const ALLOWED_SIGNERS: &str = "allowed_signers";
/// Principal named in `allowed_signers` and in `ssh-keygen -Y verify -I`.
pub const DEFAULT_IDENTITY: &str = "fabcheck";

/// Checks a signer principal (`--identity`): it lands in `allowed_signers`, in the
/// printed `ssh-keygen -I` command and in every report, so it is kept to characters that
/// need no quoting anywhere: letters, digits and `. _ @ + -`.
pub fn check_identity(identity: &str) -> Result<()> {
    let ok = !identity.is_empty()
        && identity.len() <= 256
        && identity
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._@+-".contains(c));
    if ok {
        Ok(())
    } else {
        Err(Error::Usage(format!(
            "--identity {:?}: use letters, digits and . _ @ + - only (an SSH principal such as \
             fabcheck or acceptance@vendor.example)",
            verdict::escape::terminal(identity)
        )))
    }
}

/// The shell variable the customer-side command reads the trusted signers file from.
pub const SIGNERS_VAR: &str = "SIGNERS";

/// The exact customer-side command, for the terminal and the report footer: run in the
/// report directory with `$SIGNERS` naming an `allowed_signers` file that holds the
/// signer's published key (`IDENTITY ssh-ed25519 AAAA...`). The bundle's own
/// [`ALLOWED_SIGNERS`] proves only that the bundle agrees with itself, so the command
/// never names it.
pub fn verify_command(identity: &str) -> String {
    format!(
        "ssh-keygen -Y verify -f \"${SIGNERS_VAR}\" -I {identity} -n {NAMESPACE} -s {SIGNATURE} < {MANIFEST} && sha256sum -c {MANIFEST}"
    )
}

/// Writes a new Ed25519 key pair: `path` (private, mode 0600) and `path.pub`. Refuses to
/// overwrite either: replacing a signing key silently would orphan every report signed
/// with it.
pub fn keygen(path: &Path, comment: &str) -> Result<String> {
    let pub_path = path.with_file_name(format!(
        "{}.pub",
        path.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    ));
    for p in [path, pub_path.as_path()] {
        if p.exists() {
            return Err(Error::Signing(format!(
                "{} already exists; refusing to overwrite a key (choose another path or remove it yourself)",
                p.display()
            )));
        }
    }
    let mut key = PrivateKey::random(&mut ssh_key::rand_core::OsRng, Algorithm::Ed25519)
        .map_err(|e| Error::Signing(format!("cannot generate a key: {e}")))?;
    key.set_comment(comment);
    let private = key
        .to_openssh(LineEnding::LF)
        .map_err(|e| Error::Signing(format!("cannot encode the key: {e}")))?;
    let public = key
        .public_key()
        .to_openssh()
        .map_err(|e| Error::Signing(format!("cannot encode the public key: {e}")))?;
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| Error::Output(format!("{}: cannot create: {e}", path.display())))?;
    f.write_all(private.as_bytes())
        .and_then(|_| f.sync_all())
        .map_err(|e| Error::Output(format!("{}: cannot write: {e}", path.display())))?;
    results::write::write_atomic(&pub_path, format!("{public}\n").as_bytes())
        .map_err(|e| Error::Output(format!("{}: cannot write: {e}", pub_path.display())))?;
    Ok(key.public_key().fingerprint(HashAlg::Sha256).to_string())
}

/// Reads an unencrypted OpenSSH private key.
pub fn read_private(path: &Path) -> Result<PrivateKey> {
    let text = fs::read_to_string(path).map_err(|e| {
        Error::Signing(format!(
            "{}: cannot read the signing key: {e}",
            path.display()
        ))
    })?;
    let key = PrivateKey::from_openssh(&text).map_err(|e| {
        Error::Signing(format!(
            "{}: not an OpenSSH private key ({e}); make one with `aggregate keygen`",
            path.display()
        ))
    })?;
    if key.is_encrypted() {
        return Err(Error::Signing(format!(
            "{}: the key is passphrase-protected; sign with an unencrypted key kept offline \
             (`aggregate keygen`)",
            path.display()
        )));
    }
    Ok(key)
}

/// Manifest text: one `HASH  PATH` line per file (the `sha256sum` format), sorted by path.
pub fn manifest(entries: &[(String, String)]) -> String {
    let mut lines: Vec<&(String, String)> = entries.iter().collect();
    lines.sort_by(|a, b| a.0.cmp(&b.0));
    lines
        .iter()
        .map(|(path, hash)| format!("{hash}  {path}\n"))
        .collect()
}

/// Writes the manifest of `entries` (path relative to `dir`, SHA-256 of the bytes written
/// there), signs it, and writes the signature and an `allowed_signers` line for `identity`.
/// Returns the key fingerprint.
pub fn sign_bundle(
    dir: &Path,
    entries: &[(String, String)],
    key: &PrivateKey,
    identity: &str,
) -> Result<String> {
    let text = manifest(entries);
    let sig = key
        .sign(NAMESPACE, HashAlg::Sha512, text.as_bytes())
        .map_err(|e| Error::Signing(format!("cannot sign: {e}")))?;
    let pem = sig
        .to_pem(LineEnding::LF)
        .map_err(|e| Error::Signing(format!("cannot encode the signature: {e}")))?;
    let public = key
        .public_key()
        .to_openssh()
        .map_err(|e| Error::Signing(format!("cannot encode the public key: {e}")))?;
    let w = |name: &str, bytes: &[u8]| {
        results::write::write_atomic(&dir.join(name), bytes)
            .map_err(|e| Error::Output(format!("{}: cannot write: {e}", dir.join(name).display())))
    };
    w(MANIFEST, text.as_bytes())?;
    w(SIGNATURE, pem.as_bytes())?;
    w(ALLOWED_SIGNERS, format!("{identity} {public}\n").as_bytes())?;
    Ok(key.public_key().fingerprint(HashAlg::Sha256).to_string())
}

/// What `verify` found.
#[derive(Debug, Default)]
pub struct VerifyReport {
    pub fingerprint: String,
    pub signature_ok: bool,
    pub files_ok: usize,
    /// Files whose bytes differ from the manifest, or that are gone.
    pub bad_files: Vec<String>,
    /// Files in the bundle the manifest does not list (not covered by the signature).
    pub unlisted: Vec<String>,
    pub problems: Vec<String>,
}

impl VerifyReport {
    pub fn ok(&self) -> bool {
        self.signature_ok && self.bad_files.is_empty() && self.problems.is_empty()
    }
}

/// Checks a bundle: the signature of the manifest against `public` (or, when `None`,
/// against the key in the bundle's own `allowed_signers`, which proves integrity only if
/// the caller compares the printed fingerprint with the one the signer published), then
/// every file hash.
pub fn verify_bundle(dir: &Path, public: Option<&PublicKey>) -> Result<VerifyReport> {
    let read = |name: &str, limit: u64| {
        read_small(&dir.join(name), limit).map_err(|e| {
            Error::Input(format!(
                "{}: {e} (is {} a signed report directory?)",
                dir.join(name).display(),
                dir.display()
            ))
        })
    };
    let manifest_bytes = read(MANIFEST, MAX_MANIFEST_BYTES)?;
    let sig_bytes = read(SIGNATURE, MAX_KEY_BYTES)?;
    let mut rep = VerifyReport::default();
    let bundled;
    let key = match public {
        Some(k) => k,
        None => {
            let text = String::from_utf8_lossy(&read(ALLOWED_SIGNERS, MAX_KEY_BYTES)?).into_owned();
            let line = text.lines().next().unwrap_or_default();
            let key_text = line.split_once(' ').map(|x| x.1).unwrap_or_default();
            bundled = PublicKey::from_openssh(key_text.trim()).map_err(|e| {
                Error::Signing(format!(
                    "{}: no public key ({e}); pass the signer's key with --key",
                    dir.join(ALLOWED_SIGNERS).display()
                ))
            })?;
            &bundled
        }
    };
    rep.fingerprint = key.fingerprint(HashAlg::Sha256).to_string();
    match std::str::from_utf8(&sig_bytes)
        .map_err(|e| e.to_string())
        .and_then(|s| SshSig::from_pem(s).map_err(|e| e.to_string()))
    {
        Ok(sig) => match key.verify(NAMESPACE, &manifest_bytes, &sig) {
            Ok(()) => rep.signature_ok = true,
            Err(e) => rep
                .problems
                .push(format!("{SIGNATURE}: signature does not verify: {e}")),
        },
        Err(e) => rep
            .problems
            .push(format!("{SIGNATURE}: not an SSH signature: {e}")),
    }
    let text = String::from_utf8_lossy(&manifest_bytes);
    let mut listed = std::collections::BTreeSet::new();
    for (n, line) in text.lines().enumerate() {
        let Some((hash, path)) = line.split_once("  ") else {
            rep.problems
                .push(format!("{MANIFEST} line {}: not `HASH  PATH`", n + 1));
            continue;
        };
        let rel = Path::new(path);
        if rel.is_absolute() || rel.components().any(|c| !matches!(c, Component::Normal(_))) {
            rep.problems.push(format!(
                "{MANIFEST} line {}: path {path} leaves the report directory",
                n + 1
            ));
            continue;
        }
        if !listed.insert(path.to_string()) {
            rep.problems
                .push(format!("{MANIFEST} line {}: {path} is listed twice", n + 1));
            continue;
        }
        match sha256_file(&dir.join(rel)) {
            Ok(h) if h == hash => rep.files_ok += 1,
            Ok(_) => rep.bad_files.push(format!("{path}: content changed")),
            Err(e) => rep.bad_files.push(format!("{path}: {e}")),
        }
    }
    let mut all = Vec::new();
    list_files(dir, dir, &mut all);
    for f in all {
        if ![MANIFEST, SIGNATURE, ALLOWED_SIGNERS].contains(&f.as_str()) && !listed.contains(&f) {
            rep.unlisted.push(f);
        }
    }
    Ok(rep)
}

/// Every file under `dir` (symbolic links included, never followed), as a `/`-separated
/// path relative to `root`.
pub fn list_files(root: &Path, dir: &Path, out: &mut Vec<String>) {
    let Ok(rd) = fs::read_dir(dir) else { return };
    let mut entries: Vec<_> = rd
        .filter_map(|e| e.ok().and_then(|e| Some((e.path(), e.file_type().ok()?))))
        .collect();
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    for (p, kind) in entries {
        if kind.is_dir() {
            list_files(root, &p, out);
        } else if let Ok(rel) = p.strip_prefix(root) {
            out.push(rel.to_string_lossy().replace('\\', "/"));
        }
    }
}

/// Largest manifest read (a line per file: 64 MiB is over 600,000 files).
pub const MAX_MANIFEST_BYTES: u64 = 64 << 20;
/// Largest key, signature or `allowed_signers` file read.
pub const MAX_KEY_BYTES: u64 = 1 << 20;

/// Reads a small regular file (not through a symbolic link), at most `limit` bytes.
fn read_small(path: &Path, limit: u64) -> std::result::Result<Vec<u8>, String> {
    let f = open_regular(path)?;
    let mut bytes = Vec::new();
    f.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read: {e}"))?;
    if bytes.len() as u64 > limit {
        return Err(format!(
            "larger than {limit} bytes: not a file fabcheck writes"
        ));
    }
    Ok(bytes)
}

/// Opens a regular file that is not a symbolic link: a bundle's files are checked as
/// they are, and a link to a device or a FIFO would never end or never answer.
fn open_regular(path: &Path) -> std::result::Result<fs::File, String> {
    let meta = fs::symlink_metadata(path).map_err(|e| format!("cannot read: {e}"))?;
    if !meta.file_type().is_file() {
        return Err(
            "not a regular file (a link, directory or device is never part of a bundle)".into(),
        );
    }
    fs::File::open(path).map_err(|e| format!("cannot read: {e}"))
}

/// SHA-256 of a regular file, read as a stream (a bundle may hold gigabytes of inputs).
fn sha256_file(path: &Path) -> std::result::Result<String, String> {
    verdict::digest::sha256_hex_of(open_regular(path)?).map_err(|e| format!("cannot read: {e}"))
}

/// Reads a public key file (`KEY.pub`, OpenSSH one-line format).
pub fn read_public(path: &Path) -> Result<PublicKey> {
    let text = fs::read(path)
        .map_err(|e| e.to_string())
        .and_then(|b| {
            (b.len() as u64 <= MAX_KEY_BYTES)
                .then_some(b)
                .ok_or_else(|| "too large for a key".to_string())
        })
        .and_then(|b| String::from_utf8(b).map_err(|e| e.to_string()))
        .map_err(|e| Error::Signing(format!("{}: cannot read: {e}", path.display())))?;
    PublicKey::from_openssh(text.trim()).map_err(|e| {
        Error::Signing(format!(
            "{}: not an OpenSSH public key ({e}); pass the `.pub` file",
            path.display()
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use verdict::digest::sha256_hex;

    #[test]
    fn sign_then_verify_and_tamper() {
        let dir = tempfile::tempdir().unwrap();
        let key_path = dir.path().join("k");
        keygen(&key_path, "test").unwrap();
        assert!(
            keygen(&key_path, "test").is_err(),
            "must refuse to overwrite"
        );
        let mode = fs::metadata(&key_path).unwrap().permissions();
        assert_eq!(
            std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777,
            0o600
        );
        let bundle = dir.path().join("b");
        fs::create_dir_all(bundle.join("inputs")).unwrap();
        fs::write(bundle.join("report.md"), "hello").unwrap();
        fs::write(bundle.join("inputs/a.json"), "{}").unwrap();
        let key = read_private(&key_path).unwrap();
        let files = vec![
            ("report.md".to_string(), sha256_hex(b"hello")),
            ("inputs/a.json".to_string(), sha256_hex(b"{}")),
        ];
        sign_bundle(&bundle, &files, &key, DEFAULT_IDENTITY).unwrap();
        let public = read_public(&dir.path().join("k.pub")).unwrap();
        let rep = verify_bundle(&bundle, Some(&public)).unwrap();
        assert!(rep.ok(), "{rep:?}");
        assert_eq!(rep.files_ok, 2);
        fs::write(bundle.join("inputs/a.json"), "{ }").unwrap();
        let rep = verify_bundle(&bundle, Some(&public)).unwrap();
        assert!(!rep.ok());
        assert!(rep.bad_files[0].starts_with("inputs/a.json"));
        // A different key must not verify.
        let other = PrivateKey::random(&mut ssh_key::rand_core::OsRng, Algorithm::Ed25519).unwrap();
        let rep = verify_bundle(&bundle, Some(other.public_key())).unwrap();
        assert!(!rep.signature_ok);
    }
}
