//! Content digests: a leaf module that reading inputs, signing and verifying all use.

use sha2::{Digest, Sha256};

/// Lower-case hex SHA-256, as `sha256sum` prints it.
pub fn sha256_hex(bytes: &[u8]) -> String {
    let d = Sha256::digest(bytes);
    d.iter().map(|b| format!("{b:02x}")).collect()
}
