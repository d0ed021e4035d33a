//! An output bundle: a directory `aggregate` owns (a report, a trend), written file by
//! file atomically, each file's SHA-256 kept for the signed manifest.

use std::fs;
use std::path::{Path, PathBuf};

use serde::Serialize;
use ssh_key::PrivateKey;

use crate::clock::PhaseClock;
use crate::sign;
use crate::templates::Templates;
use verdict::error::{Error, Result};

fn err_io(p: &Path, e: std::io::Error) -> Error {
    Error::Output(format!("{}: {e}", p.display()))
}

/// The files written so far into one output directory.
pub struct Bundle {
    pub dir: PathBuf,
    /// (path relative to `dir`, SHA-256 of the bytes written).
    pub files: Vec<(String, String)>,
}

impl Bundle {
    /// Prepares `dir` before any work, so a long run never ends in "cannot write", and
    /// never mixes new files with an old bundle's. `owned` are the names the command
    /// writes: present ones are an error, or removed with `force`.
    pub fn prepare(dir: &Path, force: bool, owned: &[&str]) -> Result<Bundle> {
        fs::create_dir_all(dir).map_err(|e| err_io(dir, e))?;
        let present: Vec<&str> = owned
            .iter()
            .copied()
            .filter(|n| dir.join(n).exists())
            .collect();
        if !present.is_empty() {
            if !force {
                return Err(Error::Usage(format!(
                    "{} already holds a report ({}); pass --force to replace it or choose another --out",
                    dir.display(),
                    present.join(", ")
                )));
            }
            for n in present {
                let p = dir.join(n);
                let r = if p.is_dir() {
                    fs::remove_dir_all(&p)
                } else {
                    fs::remove_file(&p)
                };
                r.map_err(|e| err_io(&p, e))?;
            }
        }
        results::write::check_writable(&dir.join(owned.first().copied().unwrap_or("probe")))
            .map_err(|e| err_io(dir, e))?;
        Ok(Bundle {
            dir: dir.to_path_buf(),
            files: Vec::new(),
        })
    }

    /// Writes `rel` atomically and records its hash (`hash` when the caller already has
    /// it, as for input copies hashed at load).
    pub fn write(&mut self, rel: &str, bytes: &[u8], hash: Option<&str>) -> Result<()> {
        let p = self.dir.join(rel);
        if let Some(parent) = p.parent() {
            fs::create_dir_all(parent).map_err(|e| err_io(parent, e))?;
        }
        results::write::write_atomic(&p, bytes).map_err(|e| err_io(&p, e))?;
        let hash = hash.map_or_else(|| verdict::digest::sha256_hex(bytes), str::to_string);
        self.files.push((rel.to_string(), hash));
        Ok(())
    }

    /// Moves `from` (already in the bundle's directory: a streamed input's link or copy)
    /// to `rel` and records `hash`, the SHA-256 of the bytes that were read from it.
    pub fn adopt(&mut self, from: &Path, rel: &str, hash: &str) -> Result<()> {
        let p = self.dir.join(rel);
        fs::rename(from, &p).map_err(|e| err_io(&p, e))?;
        self.files.push((rel.to_string(), hash.to_string()));
        Ok(())
    }

    /// Signs every file written: manifest, signature, allowed_signers. Returns the key
    /// fingerprint.
    pub fn sign(&self, key: &PrivateKey, identity: &str) -> Result<String> {
        sign::sign_bundle(&self.dir, &self.files, key, identity)
    }

    /// The tail every bundle shares, in the order the signature needs: each page rendered
    /// from `ctx`, `summary.json` from `summary`, then (with a key) the manifest signed
    /// over everything written, so the signature covers the pages and the summary alike.
    /// `signer` is the key and the identity it signs as; returns the key's fingerprint.
    pub(crate) fn finish<C: Serialize, S: Serialize>(
        &mut self,
        pages: &[&str],
        templates: &Templates,
        ctx: &C,
        summary: &S,
        signer: Option<(&PrivateKey, &str)>,
        clock: &mut PhaseClock,
    ) -> Result<Option<String>> {
        for name in pages {
            let text = templates.render(name, ctx)?;
            self.write(name, text.as_bytes(), None)?;
        }
        let summary = serde_json::to_vec_pretty(summary)
            .map_err(|e| Error::Output(format!("summary.json: {e}")))?;
        self.write("summary.json", &summary, None)?;
        clock.lap("render");
        let fingerprint = signer
            .map(|(key, identity)| self.sign(key, identity))
            .transpose()?;
        clock.lap("sign");
        Ok(fingerprint)
    }
}

/// The tool that wrote a bundle, for its templates.
#[derive(Serialize)]
pub struct ToolInfo {
    pub version: &'static str,
    pub git_commit: &'static str,
}

impl ToolInfo {
    pub fn this() -> ToolInfo {
        ToolInfo {
            version: results::provenance::TOOL_VERSION,
            git_commit: results::provenance::GIT_COMMIT,
        }
    }
}

/// How a signed bundle is checked, for its templates' footer.
#[derive(Serialize)]
pub struct SignatureInfo {
    pub manifest: &'static str,
    pub file: &'static str,
    pub namespace: &'static str,
    pub identity: String,
    pub fingerprint: String,
    pub command: String,
}

impl SignatureInfo {
    pub fn of(key: &PrivateKey, identity: &str) -> SignatureInfo {
        SignatureInfo {
            manifest: sign::MANIFEST,
            file: sign::SIGNATURE,
            namespace: sign::NAMESPACE,
            identity: identity.to_string(),
            fingerprint: key
                .public_key()
                .fingerprint(ssh_key::HashAlg::Sha256)
                .to_string(),
            command: sign::verify_command(identity),
        }
    }
}
