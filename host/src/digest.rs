//! SHA-256 digests in lowercase hex: what identifies a file by its bytes (a run's data file, a
//! compiled Stan library in its cache), whatever path names it.

use std::path::Path;

use sha2::{Digest, Sha256};

use crate::{Error, Result};

/// `bytes` as lowercase hex, two digits a byte.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The SHA-256 of the file at `path`, read as a stream (a large file is never held whole).
pub fn file_sha256(path: &Path) -> Result<String> {
    let mut file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let mut hasher = Sha256::new();
    std::io::copy(&mut file, &mut hasher).map_err(|e| Error::io(path, e))?;
    Ok(hex(&hasher.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_files_digest_is_the_sha256_of_its_bytes() {
        let path = std::env::temp_dir().join(format!("shmc-digest-{}", std::process::id()));
        std::fs::write(&path, "abc").unwrap();
        // FIPS 180-2's first example: SHA-256("abc").
        assert_eq!(
            file_sha256(&path).unwrap(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        let _ = std::fs::remove_file(&path);
    }
}
