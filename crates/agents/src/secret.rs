//! The shared secret of the agents' control plane, and the proofs built from it.
//!
//! An agent runs whatever test it is told to, on every node: a door that must be locked.
//! Coordinator and agents share a secret (a key file, or a token in the environment as a
//! Kubernetes Secret provides it). Each side sends a fresh random nonce; each proves it
//! holds the secret with HMAC-SHA256 over both nonces and its role, so a proof cannot be
//! replayed, reflected back, or learnt by listening. The secret itself never crosses the
//! wire and never appears in a document, a log line or the process list (it is read from a
//! file or the environment, never from an argument).

use std::fmt;
use std::path::Path;

use anyhow::{bail, Context, Result};
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The environment variable that carries the secret when no file is given.
pub const ENV: &str = "FABCHECK_SECRET";

/// The shared secret; its `Debug` never shows it.
#[derive(Clone)]
pub struct Secret(Vec<u8>);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

impl Secret {
    /// From `--secret-file`, else from `FABCHECK_SECRET`. A missing or empty secret is an
    /// error that says how to provide one.
    pub fn load(file: Option<&Path>) -> Result<Self> {
        if let Some(path) = file {
            let bytes = std::fs::read(path)
                .with_context(|| format!("cannot read the secret file {}", path.display()))?;
            warn_if_readable_by_others(path);
            let trimmed = trim_newline(&bytes);
            if trimmed.is_empty() {
                bail!("the secret file {} is empty: put a random token in it (e.g. `head -c 32 /dev/urandom | base64 > FILE`)", path.display());
            }
            return Ok(Secret(trimmed.to_vec()));
        }
        match std::env::var_os(ENV) {
            Some(v) if !v.is_empty() => Ok(Secret(trim_newline(v.as_encoded_bytes()).to_vec())),
            _ => bail!(
                "the agents' control plane needs a shared secret: pass --secret-file FILE (the same \
                 file on the coordinator and every agent) or set {ENV} (a Kubernetes Secret as an \
                 environment variable)"
            ),
        }
    }

    /// For tests.
    pub fn from_bytes(b: &[u8]) -> Self {
        Secret(b.to_vec())
    }

    /// HMAC-SHA256 over the protocol's domain, `role` and the two nonces in order.
    fn mac(&self, role: &str, first: &[u8; 32], second: &[u8; 32]) -> Hmac<Sha256> {
        let mut mac =
            <Hmac<Sha256> as Mac>::new_from_slice(&self.0).expect("HMAC takes any key length");
        mac.update(b"fabcheck-agents-v1\0");
        mac.update(role.as_bytes());
        mac.update(b"\0");
        mac.update(first);
        mac.update(second);
        mac
    }

    /// The proof that the side `role` (`agent` or `coordinator`) holds the secret, bound to
    /// both nonces in the order (its own first).
    pub fn proof(&self, role: &str, mine: &[u8; 32], theirs: &[u8; 32]) -> [u8; 32] {
        self.mac(role, mine, theirs).finalize().into_bytes().into()
    }

    /// Checks `proof` in constant time.
    pub fn verify(
        &self,
        role: &str,
        their_nonce: &[u8; 32],
        my_nonce: &[u8; 32],
        proof: &[u8],
    ) -> bool {
        self.mac(role, their_nonce, my_nonce)
            .verify_slice(proof)
            .is_ok()
    }
}

/// A fresh random nonce.
pub fn nonce() -> [u8; 32] {
    let mut n = [0u8; 32];
    getrandom::getrandom(&mut n).expect("the OS random source");
    n
}

fn trim_newline(b: &[u8]) -> &[u8] {
    let mut end = b.len();
    while end > 0 && matches!(b[end - 1], b'\n' | b'\r') {
        end -= 1;
    }
    &b[..end]
}

fn warn_if_readable_by_others(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    if let Ok(m) = std::fs::metadata(path) {
        if m.permissions().mode() & 0o077 != 0 {
            eprintln!(
                "warning: the secret file {} can be read by other users: chmod 600 it",
                path.display()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proofs_bind_role_secret_and_both_nonces() {
        let s = Secret::from_bytes(b"k1");
        let (a, c) = (nonce(), nonce());
        let p = s.proof("agent", &a, &c);
        assert!(s.verify("agent", &a, &c, &p));
        assert!(
            !s.verify("coordinator", &a, &c, &p),
            "a proof cannot be reflected"
        );
        assert!(!s.verify("agent", &c, &a, &p), "nonces in order");
        assert!(
            !Secret::from_bytes(b"k2").verify("agent", &a, &c, &p),
            "another secret"
        );
        assert!(
            !s.verify("agent", &a, &nonce(), &p),
            "a fresh nonce defeats replay"
        );
        assert_eq!(format!("{s:?}"), "Secret(<redacted>)");
    }

    #[test]
    fn secrets_come_from_a_file_or_say_how() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("k");
        std::fs::write(&f, "tok\n").unwrap();
        assert_eq!(Secret::load(Some(&f)).unwrap().0, b"tok");
        std::fs::write(&f, "\n").unwrap();
        assert!(Secret::load(Some(&f))
            .unwrap_err()
            .to_string()
            .contains("empty"));
        let e = Secret::load(Some(&d.path().join("nope"))).unwrap_err();
        assert!(e.to_string().contains("cannot read the secret file"), "{e}");
    }
}
