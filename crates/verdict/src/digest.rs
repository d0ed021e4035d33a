//! Content digests: a leaf module that reading inputs, signing and verifying all use.

use sha2::{Digest, Sha256};

/// Lower-case hex SHA-256, as `sha256sum` prints it.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// [`sha256_hex`] of everything `r` yields, read as a stream in constant memory.
pub fn sha256_hex_of(mut r: impl std::io::Read) -> std::io::Result<String> {
    let mut h = Sha256::new();
    std::io::copy(&mut r, &mut h)?;
    Ok(hex(&h.finalize()))
}

/// Lower-case hex of a finished digest.
pub(crate) fn hex(d: &[u8]) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}
