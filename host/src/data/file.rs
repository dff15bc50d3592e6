//! A data file's text, plain or gzip-compressed: a file whose name ends in `.gz` is read through
//! a gzip decoder, so the readers take `a9a.gz` as they take `a9a` (the data sets in the
//! repository's `data/` folder ship compressed).
//!
//! A compressed file's size says little about its text: a megabyte of gzip can unpack to a
//! gigabyte. So its text is decompressed only up to the memory limit, and one byte more is an
//! [`Error::MemoryLimit`]; a plain file's text is the file as it is on disk. Either way the
//! readers then size the dense matrix from the rows and columns they counted before allocating
//! it.

use std::ffi::OsStr;
use std::io::{self, Read};
use std::path::Path;

use flate2::read::MultiGzDecoder;

use crate::{Error, Result};

/// Whether `path` names a gzip file: its name ends in `.gz`, in any case.
pub fn is_gzip(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("gz"))
}

/// The extension of what the file holds: `csv` for `bank.csv.gz` as for `bank.csv`, so that a
/// format guessed from the name does not change when the file is compressed.
pub fn content_extension(path: &Path) -> Option<&OsStr> {
    if is_gzip(path) {
        Path::new(path.file_stem()?).extension()
    } else {
        path.extension()
    }
}

/// The text of the file at `path`, decompressed if its name ends in `.gz`. A file that cannot
/// be opened, a `.gz` file that is not valid gzip (corrupt, truncated, empty) and text that is
/// not UTF-8 are [`Error::Io`] errors naming the file; a `.gz` file whose text is longer than
/// `memory_limit` bytes is an [`Error::MemoryLimit`].
pub(crate) fn read_text(path: &Path, memory_limit: u64) -> Result<String> {
    if !is_gzip(path) {
        return std::fs::read_to_string(path).map_err(|e| Error::io(path, e));
    }
    let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let mut bytes = Vec::new();
    MultiGzDecoder::new(io::BufReader::new(file))
        .take(memory_limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| Error::io(path, not_gzip(e)))?;
    if bytes.len() as u64 > memory_limit {
        return Err(Error::MemoryLimit {
            message: format!(
                "{}: the decompressed text would need more than the memory limit of \
                 {memory_limit} bytes",
                path.display()
            ),
            driver: "data",
        });
    }
    String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let why = format!("the decompressed text is not UTF-8 (byte {at})");
        Error::io(path, io::Error::new(io::ErrorKind::InvalidData, why))
    })
}

/// The decoder's error, said to be about the file's gzip format when it is (a bad header, a
/// corrupt stream, a checksum mismatch, the end of the file mid-stream), not about the disk.
fn not_gzip(e: io::Error) -> io::Error {
    match e.kind() {
        io::ErrorKind::InvalidInput | io::ErrorKind::InvalidData | io::ErrorKind::UnexpectedEof => {
            io::Error::new(e.kind(), format!("not a valid gzip file: {e}"))
        }
        _ => e,
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::path::PathBuf;

    use super::*;
    use crate::data::{Missing, read_csv, read_libsvm};

    /// A fresh folder of the test's own under the system's temporary folder.
    fn temp_dir(test: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("shmc-data-{}-{test}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// `bytes` gzip-compressed, as `gzip -9n` would.
    fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        encoder.write_all(bytes).unwrap();
        encoder.finish().unwrap()
    }

    const CSV: &str = "\"age\";\"job\";\"y\"\n56;\"housemaid\";\"no\"\n57;\"services\";\"yes\"\n";
    const LIBSVM: &str = "-1 3:1 11:1 \n+1 1:1 2:0.5 \n\n-1 2:1 \n";

    #[test]
    fn a_gz_file_reads_to_the_same_dataset_as_its_plain_text() {
        let dir = temp_dir("same");
        for (name, text) in [("bank.csv", CSV), ("train.svm", LIBSVM)] {
            let plain = dir.join(name);
            let packed = dir.join(format!("{name}.GZ"));
            std::fs::write(&plain, text).unwrap();
            std::fs::write(&packed, gzip(text.as_bytes())).unwrap();
            let read = |path: &Path| match name {
                "bank.csv" => read_csv(path, "y", Missing::Error, u64::MAX).unwrap(),
                _ => read_libsvm(path, None, u64::MAX).unwrap(),
            };
            assert_eq!(read(&packed), read(&plain), "{name}");
            assert!(read(&plain).n > 1);
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_bad_gz_file_is_one_error_naming_it() {
        let dir = temp_dir("bad");
        let packed = gzip(CSV.as_bytes());
        let cases: [(&str, &[u8]); 5] = [
            ("truncated.csv.gz", &packed[..packed.len() - 12]),
            ("no-trailer.csv.gz", &packed[..packed.len() - 4]),
            ("plain.csv.gz", CSV.as_bytes()),
            ("empty.csv.gz", b""),
            ("latin1.csv.gz", &gzip(b"a;y\n\xe9;1\n")),
        ];
        for (name, bytes) in cases {
            let path = dir.join(name);
            std::fs::write(&path, bytes).unwrap();
            let err = read_csv(&path, "y", Missing::Error, u64::MAX).unwrap_err();
            let shown = err.to_string();
            assert!(matches!(err, Error::Io { .. }), "{name}: {shown}");
            assert!(
                shown.starts_with(&format!("{}: ", path.display())),
                "{shown}"
            );
            assert!(!shown.contains('\n'), "{shown}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_gz_file_unpacking_past_the_memory_limit_is_refused() {
        let dir = temp_dir("limit");
        let path = dir.join("zeros.svm.gz");
        let text = "-1 1:0 \n".repeat(1000);
        std::fs::write(&path, gzip(text.as_bytes())).unwrap();
        assert!(read_text(&path, 8000).is_ok());
        let err = read_libsvm(&path, None, 7999).unwrap_err();
        match err {
            Error::MemoryLimit { message, driver } => {
                assert_eq!(driver, "data");
                assert!(
                    message.contains("zeros.svm.gz: the decompressed text"),
                    "{message}"
                );
            }
            other => panic!("{other:?}"),
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_content_extension_looks_through_gz() {
        fn ext(p: &str) -> Option<&str> {
            content_extension(Path::new(p)).and_then(OsStr::to_str)
        }
        assert_eq!(ext("data/bank-full.csv.gz"), Some("csv"));
        assert_eq!(ext("bank.csv"), Some("csv"));
        assert_eq!(ext("a9a.t.gz"), Some("t"));
        assert_eq!(ext("a9a.gz"), None);
        assert!(is_gzip(Path::new("x.Gz")) && !is_gzip(Path::new("gz")));
    }
}
