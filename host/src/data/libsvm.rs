//! The LIBSVM sparse-text reader: one observation per line, `label index:value index:value …`,
//! with 1-based, strictly increasing indices and absent entries meaning 0 (the format of the
//! `a9a` files). The rows are expanded into a dense [`Dataset`].

use std::path::Path;

use super::Dataset;
use crate::{Error, Result};

/// Reads a LIBSVM file into a dense [`Dataset`] with columns named `x.1 … x.p`.
///
/// Labels `+1`/`1` become 1 and `-1`/`0` become 0. The number of features `p` is `features`
/// when given (a test file whose largest index is smaller than the training file's, such as
/// `a9a.t`, is read with `Some(123)`), otherwise the largest index in the file. Blank lines and
/// trailing spaces are ignored. A bad label, a pair that is not `index:value`, an index that is
/// 0, out of range or not increasing, and a file with no data lines are [`Error::Data`] errors
/// naming the file and line. The dense matrix is sized before it is allocated: above
/// `memory_limit` bytes (one index of 10⁹ asks for 8 GB a row) it is an [`Error::MemoryLimit`].
/// A file named `….gz` is decompressed first, its text bounded by `memory_limit` too.
pub fn read_libsvm(
    path: impl AsRef<Path>,
    features: Option<usize>,
    memory_limit: u64,
) -> Result<Dataset> {
    let path = path.as_ref();
    let text = super::file::read_text(path, memory_limit)?;
    parse_libsvm(&text, path, features, memory_limit)
}

/// Parses the text of a LIBSVM file as [`read_libsvm`] reads it from disk; `path` only names
/// the file in errors.
pub fn parse_libsvm(
    text: &str,
    path: &Path,
    features: Option<usize>,
    memory_limit: u64,
) -> Result<Dataset> {
    let data_error = |line: usize, message: String| Error::Data {
        path: path.to_path_buf(),
        line,
        message,
    };
    if features == Some(0) {
        return Err(Error::invalid("a LIBSVM file needs at least one feature"));
    }
    let limit = features.unwrap_or(usize::MAX);
    let mut y = Vec::new();
    // Every non-zero entry as (0-based column, value), rows delimited by `starts`.
    let mut entries: Vec<(usize, f64)> = Vec::new();
    let mut starts = vec![0];
    let mut max_index = 0;
    for (k, line) in text.lines().enumerate() {
        let line_no = k + 1;
        let mut tokens = line.split_ascii_whitespace();
        let Some(label) = tokens.next() else {
            continue;
        };
        y.push(class(label, line_no).map_err(|message| data_error(line_no, message))?);
        let mut previous = 0;
        for pair in tokens {
            let (index, value) = pair
                .split_once(':')
                .and_then(|(i, v)| Some((i.parse::<usize>().ok()?, v.parse::<f64>().ok()?)))
                .filter(|(_, v)| v.is_finite())
                .ok_or_else(|| {
                    data_error(
                        line_no,
                        format!("\"{pair}\" is not an index:value pair with a finite value"),
                    )
                })?;
            if index == 0 {
                return Err(data_error(
                    line_no,
                    format!("feature index 0 in \"{pair}\": LIBSVM indices start at 1"),
                ));
            }
            if index > limit {
                return Err(data_error(
                    line_no,
                    format!(
                        "feature index {index} is out of range: the file is read with {limit} \
                         features"
                    ),
                ));
            }
            if index <= previous {
                return Err(data_error(
                    line_no,
                    format!("feature index {index} follows {previous}: indices must increase"),
                ));
            }
            previous = index;
            max_index = max_index.max(index);
            if value != 0.0 {
                entries.push((index - 1, value));
            }
        }
        starts.push(entries.len());
    }
    let n = y.len();
    if n == 0 {
        return Err(data_error(1, "no data lines in the file".into()));
    }
    let p = features.unwrap_or(max_index);
    let what = format!(
        "{}: the dense matrix of {n} rows × {p} features",
        path.display()
    );
    super::check_size(&what, n, p, memory_limit)?;
    let mut x = vec![0.0; n * p];
    for (i, bounds) in starts.windows(2).enumerate() {
        for &(j, v) in &entries[bounds[0]..bounds[1]] {
            x[i * p + j] = v;
        }
    }
    Dataset::new(x, y, n, p, crate::model::indexed_names("x", p))
}

/// The class of `label` on line `line_no`: 1 for +1 or 1, 0 for -1 or 0; else what is wrong.
fn class(label: &str, line_no: usize) -> std::result::Result<f64, String> {
    match label.parse::<f64>() {
        Ok(1.0) => Ok(1.0),
        Ok(0.0 | -1.0) => Ok(0.0),
        parsed => {
            // A header line (delimited text read as LIBSVM, such as a tab-separated file not
            // named .csv or .tsv) fails here first: say what the file looks like.
            let hint = if line_no == 1 && parsed.is_err() {
                ": the first line looks like a header, so the file may be delimited text \
                 (comma-, semicolon- or tab-separated), read in the csv format"
            } else {
                ""
            };
            Err(format!("label \"{label}\" is not +1/-1 or 1/0{hint}"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str, features: Option<usize>) -> Result<Dataset> {
        parse_libsvm(text, Path::new("train.svm"), features, u64::MAX)
    }

    fn assert_data_error(text: &str, features: Option<usize>, line: usize, needle: &str) {
        let err = parse(text, features).expect_err("the file is malformed");
        crate::data::assert_data_error_at(err, "train.svm", line, needle);
    }

    #[test]
    fn reads_sparse_rows_with_trailing_spaces_and_blank_lines() {
        let d = parse("+1 1:0.5 3:2 \n-1 2:1 \n\n0\n1 3:-1\n", None).unwrap();
        assert_eq!((d.n, d.p), (4, 3));
        assert_eq!(d.y, vec![1.0, 0.0, 0.0, 1.0]);
        assert_eq!(
            d.x,
            vec![0.5, 0.0, 2.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0]
        );
        assert_eq!(d.feature_names, vec!["x.1", "x.2", "x.3"]);
    }

    #[test]
    fn a_given_feature_count_widens_the_matrix() {
        let d = parse("-1 2:1\n", Some(5)).unwrap();
        assert_eq!((d.p, d.x.clone()), (5, vec![0.0, 1.0, 0.0, 0.0, 0.0]));
        assert!(matches!(parse("1 1:1\n", Some(0)), Err(Error::Invalid(_))));
    }

    #[test]
    fn bad_label_is_an_error_on_its_line() {
        assert_data_error("1 1:1\n2 1:1\n", None, 2, "label \"2\"");
        assert_data_error("1 1:1\n-1 1:1\nyes 2:1\n", None, 3, "label \"yes\"");
        assert_data_error("1:1 2:1\n", None, 1, "label \"1:1\"");
        assert_data_error("y\tx\n1\t2\n", None, 1, "may be delimited text");
    }

    #[test]
    fn bad_pair_is_an_error_on_its_line() {
        assert_data_error("1 1:1\n-1 3\n", None, 2, "\"3\" is not an index:value");
        assert_data_error("1 1:1\n1 1:1\n-1 a:1\n", None, 3, "\"a:1\"");
        assert_data_error("1 1:x\n", None, 1, "\"1:x\"");
        assert_data_error("1 1:1\n\n1 2:inf\n", None, 3, "\"2:inf\"");
    }

    #[test]
    fn zero_index_is_an_error_on_its_line() {
        assert_data_error("1 1:1\n-1 0:1 2:1\n", None, 2, "index 0");
    }

    #[test]
    fn out_of_range_index_is_an_error_on_its_line() {
        assert_data_error(
            "1 1:1\n-1 2:1 124:1\n",
            Some(123),
            2,
            "index 124 is out of range",
        );
    }

    #[test]
    fn non_increasing_indices_are_an_error_on_their_line() {
        assert_data_error("1 3:1 2:1\n", None, 1, "index 2 follows 3");
        assert_data_error("1 1:1\n1 2:1 2:1\n", None, 2, "index 2 follows 2");
    }

    #[test]
    fn a_huge_index_is_refused_before_the_matrix_is_allocated() {
        let err = parse_libsvm("1 1000000000:1\n", Path::new("t.svm"), None, 1 << 30);
        match err.unwrap_err() {
            Error::MemoryLimit { message, driver } => {
                assert_eq!(driver, "data");
                assert!(
                    message.starts_with(
                        "t.svm: the dense matrix of 1 rows × 1000000000 features would need \
                         72000000000 bytes"
                    ),
                    "{message}"
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn empty_file_is_an_error_on_line_1() {
        assert_data_error("", None, 1, "no data lines");
        assert_data_error("  \n\n", None, 1, "no data lines");
    }

    #[test]
    fn read_libsvm_reads_a_file_from_disk() {
        let path = std::env::temp_dir().join(format!(
            "shmc-libsvm-test-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::write(&path, "-1 3:1 \n+1 1:1 \n").unwrap();
        let d = read_libsvm(&path, None, u64::MAX);
        std::fs::remove_file(&path).unwrap();
        let d = d.unwrap();
        assert_eq!((d.n, d.p, d.y), (2, 3, vec![0.0, 1.0]));
    }
}
