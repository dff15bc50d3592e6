//! The delimited-text (CSV) reader: one header row, `,`, `;` or a tab between fields, fields
//! optionally in double quotes (the UCI Bank Marketing files use `;` and quote every string).
//!
//! The response column is picked by name; every other column is a feature. A column's type is
//! decided from all its values, never from the first alone: a column of numbers (and missing
//! values) is numeric; a column of text is categorical, one-hot encoded with its levels in order
//! of first appearance and the first level dropped (it is the baseline absorbed by the
//! intercept), giving columns named `column=level`; a column that mixes numbers and text is an
//! error naming both, since either reading of it would be a guess. `inf` in a numeric column is
//! an error. Missing values (an empty field, `NA`, `N/A`, `NaN`, `null`, in any case) follow a
//! [`Missing`] policy: an error naming the column and line (the default), or the row dropped.
//! What the reader decided (categorical columns, dropped rows) is kept in [`Dataset::notes`], so
//! a run can show the user the model it is fitting.

use std::collections::HashMap;
use std::path::Path;

use super::Dataset;
use crate::{Error, Result};

/// The response column [`read_csv`] looks for unless told otherwise.
pub const DEFAULT_RESPONSE: &str = "y";

/// What to do with a row that has a missing value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Missing {
    /// Refuse the file, naming the column and line of the first missing value.
    #[default]
    Error,
    /// Leave out every row with a missing value (the count is noted).
    DropRows,
}

/// Reads a delimited file with a header row into a [`Dataset`], taking the column named
/// `response` as the binary response.
///
/// The delimiter is the one the header holds most of (outside quotes) among `,`, `;` and a
/// tab (a tab-separated file is read as it is, whatever its name), `,` if none. Responses may be `0`/`1`, `-1`/`1`, `yes`/`no` or `true`/`false`, in any case.
/// Ragged rows, missing values (unless dropped), unknown response values, a column mixing
/// numbers and text, a non-finite number, an empty file or a missing response column are
/// [`Error::Data`] errors naming the file and line.
///
/// The dense design matrix is sized before it is allocated: above `memory_limit` bytes (a text
/// column of identifiers would one-hot encode into one column per row) it is an
/// [`Error::MemoryLimit`] naming the widest categorical column. A file named `….gz` (such as
/// `bank-full.csv.gz`) is decompressed first, its text bounded by `memory_limit` too.
pub fn read_csv(
    path: impl AsRef<Path>,
    response: &str,
    missing: Missing,
    memory_limit: u64,
) -> Result<Dataset> {
    let path = path.as_ref();
    let text = super::file::read_text(path, memory_limit)?;
    parse_csv(&text, path, response, missing, memory_limit)
}

/// Whether a field stands for a missing value.
fn is_missing(field: &str) -> bool {
    field.is_empty()
        || ["na", "n/a", "nan", "null"]
            .iter()
            .any(|m| field.eq_ignore_ascii_case(m))
}

/// Parses the text of a delimited file as [`read_csv`] reads it from disk; `path` only names
/// the file in errors (text from a network or an archive has no file of its own).
pub fn parse_csv(
    text: &str,
    path: &Path,
    response: &str,
    missing: Missing,
    memory_limit: u64,
) -> Result<Dataset> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut reader = open_reader(text, path)?;
    let header = Header::read(&mut reader, path, response)?;
    let rows = Rows::read(&mut reader, path, &header, missing)?;
    let mut features = header.features(&rows, path)?;
    let values = read_values(&mut features, &rows, path)?;
    let layout = Layout::of(&features);
    let notes = notes(&features, &header, &rows.dropped);
    let (n, p) = (rows.y.len(), layout.names.len());
    super::check_size(&describe_design(path, &features, n, p), n, p, memory_limit)?;
    let x = one_hot(&features, &layout, &values, n);
    let mut data = Dataset::new(x, rows.y, n, p, layout.names)?;
    data.notes = notes;
    Ok(data)
}

/// An [`Error::Data`] on `line` of the file `path`.
fn data_error(path: &Path, line: u64, message: String) -> Error {
    Error::Data {
        path: path.to_path_buf(),
        line: line as usize,
        message,
    }
}

/// An error of the `csv` reader (a record it cannot read) as an [`Error::Data`] on the line it
/// names, or the first.
fn csv_error(path: &Path, e: csv::Error) -> Error {
    let line = e.position().map_or(1, |p| p.line());
    data_error(path, line, e.to_string())
}

/// A `csv` reader over `text`, its delimiter detected from the header line, which must not be
/// blank. The reader is flexible so that a ragged row reaches [`Rows::take`], whose error says
/// how many fields the header has.
fn open_reader<'t>(text: &'t str, path: &Path) -> Result<csv::Reader<&'t [u8]>> {
    let header_line = text.lines().next().unwrap_or("");
    if header_line.trim().is_empty() {
        return Err(data_error(
            path,
            1,
            "empty file: expected a header row naming the columns".into(),
        ));
    }
    Ok(csv::ReaderBuilder::new()
        .delimiter(detect_delimiter(header_line))
        .has_headers(true)
        .flexible(true)
        .trim(csv::Trim::All)
        .from_reader(text.as_bytes()))
}

/// The header row: every column's name, and which column is the response.
struct Header {
    names: Vec<String>,
    response: usize,
}

impl Header {
    /// Reads the header row and finds the column named `response` in it. Every name must be
    /// given and unique: the features are known by their names.
    fn read(reader: &mut csv::Reader<&[u8]>, path: &Path, response: &str) -> Result<Self> {
        let names: Vec<String> = reader
            .headers()
            .map_err(|e| csv_error(path, e))?
            .iter()
            .map(String::from)
            .collect();
        for (j, name) in names.iter().enumerate() {
            if name.is_empty() {
                return Err(data_error(
                    path,
                    1,
                    format!("column {} has an empty name", j + 1),
                ));
            }
            if names[..j].contains(name) {
                return Err(data_error(
                    path,
                    1,
                    format!("column name \"{name}\" appears twice"),
                ));
            }
        }
        let response = names.iter().position(|n| n == response).ok_or_else(|| {
            data_error(
                path,
                1,
                format!(
                    "no response column \"{response}\" in the header (columns: {})",
                    names.join(", ")
                ),
            )
        })?;
        Ok(Self { names, response })
    }

    /// Pass 2: every column but the response, in file order, its type decided from all its
    /// values (see [`Column::of`]).
    fn features(&self, rows: &Rows, path: &Path) -> Result<Vec<Feature<'_>>> {
        (0..self.names.len())
            .filter(|&j| j != self.response)
            .map(|j| {
                let name = self.names[j].as_str();
                let column = Column::of(j, name, rows, path)?;
                Ok(Feature {
                    field: j,
                    name,
                    column,
                })
            })
            .collect()
    }
}

/// The data rows, read in one pass before any feature is: a column's type needs all of its
/// values.
struct Rows {
    /// The rows kept, as text, each with its line for the errors of the later passes.
    records: Vec<(u64, csv::StringRecord)>,
    /// The kept rows' responses.
    y: Vec<f64>,
    /// The line of each row dropped for a missing value, and the column of its first one.
    dropped: Vec<(u64, usize)>,
}

impl Rows {
    /// Pass 1: every row checked, then kept or dropped (see [`Rows::take`]). A file left
    /// without rows is an error on line 2, the first row's.
    fn read(
        reader: &mut csv::Reader<&[u8]>,
        path: &Path,
        header: &Header,
        missing: Missing,
    ) -> Result<Self> {
        let mut rows = Rows {
            records: Vec::new(),
            y: Vec::new(),
            dropped: Vec::new(),
        };
        // A record knows its line (quoted newlines included); one that does not follows the
        // last.
        let mut last_line = 1;
        for record in reader.records() {
            let record = record.map_err(|e| csv_error(path, e))?;
            let line = record.position().map_or(last_line + 1, |p| p.line());
            last_line = line;
            rows.take(record, line, path, header, missing)?;
        }
        if rows.y.is_empty() {
            let why = if rows.dropped.is_empty() {
                "no data rows after the header".to_string()
            } else {
                format!(
                    "every one of the {} data rows has a missing value",
                    rows.dropped.len()
                )
            };
            return Err(data_error(path, 2, why));
        }
        Ok(rows)
    }

    /// Keeps the row `record` on `line` with its parsed response, or drops it if a value is
    /// missing and `missing` allows it. A row of the wrong width, a missing value (by
    /// default) and a response that is not binary are errors on its line.
    fn take(
        &mut self,
        record: csv::StringRecord,
        line: u64,
        path: &Path,
        header: &Header,
        missing: Missing,
    ) -> Result<()> {
        let names = &header.names;
        if record.len() != names.len() {
            return Err(data_error(
                path,
                line,
                format!(
                    "expected {} fields as in the header, found {}",
                    names.len(),
                    record.len()
                ),
            ));
        }
        if let Some(j) = (0..names.len()).find(|&j| is_missing(unquote(&record[j]))) {
            match missing {
                Missing::Error => {
                    return Err(data_error(
                        path,
                        line,
                        format!(
                            "missing value \"{}\" in column \"{}\" (drop such rows to go on \
                             without them)",
                            unquote(&record[j]),
                            names[j]
                        ),
                    ));
                }
                Missing::DropRows => {
                    self.dropped.push((line, j));
                    return Ok(());
                }
            }
        }
        let (value, response) = (&record[header.response], &names[header.response]);
        self.y.push(parse_response(value).ok_or_else(|| {
            data_error(
                path,
                line,
                format!(
                    "response \"{value}\" in column \"{response}\" is not 0/1, -1/1, yes/no \
                     or true/false"
                ),
            )
        })?);
        self.records.push((line, record));
        Ok(())
    }
}

/// A feature column: where it is in a row, its name, and how it is read.
struct Feature<'h> {
    field: usize,
    name: &'h str,
    column: Column,
}

/// How a feature column is read.
enum Column {
    /// Numbers, copied as they are.
    Numeric,
    /// Text levels, in order of first appearance.
    Categorical {
        levels: Vec<String>,
        index: HashMap<String, usize>,
    },
}

impl Column {
    /// The type of the column at `field` of `rows`, named `name`: numeric if every value is a
    /// number, categorical if none is; a mix is an error showing one of each, since reading
    /// either way would be a guess. The levels are found in pass 3 ([`read_values`]).
    fn of(field: usize, name: &str, rows: &Rows, path: &Path) -> Result<Self> {
        let number = rows
            .records
            .iter()
            .find(|(_, r)| unquote(&r[field]).parse::<f64>().is_ok());
        let text = rows
            .records
            .iter()
            .find(|(_, r)| unquote(&r[field]).parse::<f64>().is_err());
        match (number, text) {
            (Some((number_line, number)), Some((line, record))) => Err(data_error(
                path,
                *line,
                format!(
                    "column \"{name}\" mixes numbers and text: \"{}\" here, \"{}\" on line \
                     {number_line}",
                    unquote(&record[field]),
                    unquote(&number[field])
                ),
            )),
            (_, Some(_)) => Ok(Column::Categorical {
                levels: Vec::new(),
                index: HashMap::new(),
            }),
            _ => Ok(Column::Numeric),
        }
    }

    /// The value of `field` in this column: its number (`None` if not finite), or the index
    /// of its level, a level seen for the first time taking the next.
    fn value(&mut self, field: &str) -> Option<f64> {
        match self {
            Column::Numeric => parse_number(field),
            Column::Categorical { levels, index } => {
                let next = levels.len();
                let level = *index.entry(field.to_string()).or_insert(next);
                if level == next {
                    levels.push(field.to_string());
                }
                Some(level as f64)
            }
        }
    }
}

/// Pass 3: the features' values, row by row, categorical entries as level indices: how many
/// indicator columns a categorical column takes is known only once every level is seen. A
/// number that is not finite is an error on its line.
fn read_values(features: &mut [Feature<'_>], rows: &Rows, path: &Path) -> Result<Vec<f64>> {
    let mut values = Vec::with_capacity(rows.records.len() * features.len());
    for (line, record) in &rows.records {
        for feature in features.iter_mut() {
            let field = unquote(&record[feature.field]);
            values.push(feature.column.value(field).ok_or_else(|| {
                data_error(
                    path,
                    *line,
                    format!(
                        "column \"{}\": \"{field}\" is not a finite number",
                        feature.name
                    ),
                )
            })?);
        }
    }
    Ok(values)
}

/// The columns of the design matrix: a numeric feature's own, a categorical feature's
/// indicators of every level but the first (the baseline, which the intercept absorbs).
struct Layout {
    /// Every column's name: a numeric feature's, or `feature=level`.
    names: Vec<String>,
    /// The first column of each feature.
    offsets: Vec<usize>,
}

impl Layout {
    /// Pass 4: the columns of `features`, in order.
    fn of(features: &[Feature<'_>]) -> Self {
        let mut layout = Layout {
            names: Vec::new(),
            offsets: Vec::with_capacity(features.len()),
        };
        for feature in features {
            layout.offsets.push(layout.names.len());
            match &feature.column {
                Column::Numeric => layout.names.push(feature.name.to_string()),
                Column::Categorical { levels, .. } => layout.names.extend(
                    levels[1..]
                        .iter()
                        .map(|level| format!("{}={level}", feature.name)),
                ),
            }
        }
        layout
    }
}

/// What the reader decided, for a run to show the user ([`Dataset::notes`]): each categorical
/// column with its levels and baseline, then the rows dropped for a missing value.
fn notes(features: &[Feature<'_>], header: &Header, dropped: &[(u64, usize)]) -> Vec<String> {
    let mut notes: Vec<String> = features
        .iter()
        .filter_map(|feature| match &feature.column {
            Column::Categorical { levels, .. } => Some(format!(
                "column \"{}\" is categorical: {} levels, one-hot as {} against \"{}\"",
                feature.name,
                levels.len(),
                count(levels.len() - 1, "indicator"),
                levels[0]
            )),
            Column::Numeric => None,
        })
        .collect();
    if let Some(&(line, j)) = dropped.first() {
        notes.push(format!(
            "{} with a missing value dropped (the first on line {line}, column \"{}\")",
            count(dropped.len(), "row"),
            header.names[j]
        ));
    }
    notes
}

/// The `n × p` design matrix as a memory-limit error names it: with the widest categorical
/// column if there is one, as a column of identifiers is the likely reason it is too large.
fn describe_design(path: &Path, features: &[Feature<'_>], n: usize, p: usize) -> String {
    let widest = features
        .iter()
        .filter_map(|feature| match &feature.column {
            Column::Categorical { levels, .. } => Some((levels.len(), feature.name)),
            Column::Numeric => None,
        })
        .max_by_key(|&(levels, _)| levels);
    match widest {
        Some((levels, name)) => format!(
            "{}: the design matrix of {n} rows × {p} columns (column \"{name}\" is categorical \
             with {levels} levels)",
            path.display()
        ),
        None => format!(
            "{}: the design matrix of {n} rows × {p} columns",
            path.display()
        ),
    }
}

/// The dense `n`-row design matrix, row-major, once its size is checked: the numbers copied,
/// each categorical level a 1 in its indicator column (the baseline, level 0, has none).
fn one_hot(features: &[Feature<'_>], layout: &Layout, values: &[f64], n: usize) -> Vec<f64> {
    let p = layout.names.len();
    let mut x = vec![0.0; n * p];
    let rows = values.chunks_exact(features.len().max(1));
    for (row, raw_row) in x.chunks_exact_mut(p.max(1)).zip(rows) {
        for ((feature, &offset), &v) in features.iter().zip(&layout.offsets).zip(raw_row) {
            match feature.column {
                Column::Numeric => row[offset] = v,
                Column::Categorical { .. } => {
                    let level = v as usize;
                    if level > 0 {
                        row[offset + level - 1] = 1.0;
                    }
                }
            }
        }
    }
    x
}

/// `n thing` or `n things`.
fn count(n: usize, thing: &str) -> String {
    if n == 1 {
        format!("1 {thing}")
    } else {
        format!("{n} {thing}s")
    }
}

/// The separator the header line holds most of outside double quotes: a tab, `;`, else `,`.
fn detect_delimiter(header: &str) -> u8 {
    let (mut commas, mut semicolons, mut tabs, mut quoted) = (0usize, 0usize, 0usize, false);
    for c in header.chars() {
        match c {
            '"' => quoted = !quoted,
            ',' if !quoted => commas += 1,
            ';' if !quoted => semicolons += 1,
            '\t' if !quoted => tabs += 1,
            _ => {}
        }
    }
    if tabs > commas.max(semicolons) {
        b'\t'
    } else if semicolons > commas {
        b';'
    } else {
        b','
    }
}

/// Strips surrounding whitespace and any double quotes left around a field.
fn unquote(field: &str) -> &str {
    field.trim().trim_matches('"').trim()
}

/// A finite number, or `None`.
fn parse_number(field: &str) -> Option<f64> {
    field.parse::<f64>().ok().filter(|v| v.is_finite())
}

/// A response as 0 or 1: `1`, `yes`, `true` are 1; `0`, `-1`, `no`, `false` are 0.
fn parse_response(field: &str) -> Option<f64> {
    let field = unquote(field).to_ascii_lowercase();
    match field.as_str() {
        "yes" | "true" => Some(1.0),
        "no" | "false" => Some(0.0),
        _ => match parse_number(&field)? {
            1.0 => Some(1.0),
            0.0 | -1.0 => Some(0.0),
            _ => None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Dataset> {
        parse_csv(
            text,
            Path::new("test.csv"),
            DEFAULT_RESPONSE,
            Missing::Error,
            u64::MAX,
        )
    }

    /// Asserts that `text` fails with a data error on `line` whose message contains `needle`,
    /// and that the printed error starts with the file name and that line.
    fn assert_data_error(text: &str, line: usize, needle: &str) {
        let err = parse(text).expect_err("the file is malformed");
        crate::data::assert_data_error_at(err, "test.csv", line, needle);
    }

    #[test]
    fn reads_comma_file_with_numeric_and_categorical_columns() {
        let d = parse("a,y,job\n1.5,1,admin.\n-2,0,\"blue,collar\"\n3e1,1,admin.\n0,0,student\n")
            .unwrap();
        assert_eq!((d.n, d.p), (4, 3));
        assert_eq!(d.feature_names, vec!["a", "job=blue,collar", "job=student"]);
        assert_eq!(d.y, vec![1.0, 0.0, 1.0, 0.0]);
        assert_eq!(
            d.x,
            vec![1.5, 0.0, 0.0, -2.0, 1.0, 0.0, 30.0, 0.0, 0.0, 0.0, 0.0, 1.0]
        );
    }

    #[test]
    fn reads_semicolon_file_with_quotes_and_text_responses() {
        let text = "\"age\";\"job\";\"y\"\n56;\"housemaid\";\"no\"\n57;\"services\";\"YES\"\n\
                    41;\"housemaid\";\"True\"\n30;\"services\";\"false\"\n";
        let d = parse(text).unwrap();
        assert_eq!(d.feature_names, vec!["age", "job=services"]);
        assert_eq!(d.y, vec![0.0, 1.0, 1.0, 0.0]);
        assert_eq!(d.x, vec![56.0, 0.0, 57.0, 1.0, 41.0, 0.0, 30.0, 1.0]);
    }

    #[test]
    fn reads_minus_one_labels_crlf_and_a_named_response() {
        let d = parse_csv(
            "x1,label\r\n0.5,-1\r\n0.25,1\r\n",
            Path::new("t.csv"),
            "label",
            Missing::Error,
            u64::MAX,
        )
        .unwrap();
        assert_eq!(
            (d.y.clone(), d.x.clone()),
            (vec![0.0, 1.0], vec![0.5, 0.25])
        );
    }

    #[test]
    fn empty_file_is_an_error_on_line_1() {
        assert_data_error("", 1, "empty file");
        assert_data_error("\n\n", 1, "empty file");
    }

    #[test]
    fn header_without_rows_is_an_error_on_line_2() {
        assert_data_error("a,y\n", 2, "no data rows");
    }

    #[test]
    fn missing_response_column_is_an_error_on_line_1() {
        assert_data_error("a,b\n1,2\n", 1, "no response column \"y\"");
    }

    #[test]
    fn duplicate_or_empty_column_names_are_errors_on_line_1() {
        assert_data_error("a,a,y\n1,2,1\n", 1, "appears twice");
        assert_data_error("a,,y\n1,2,1\n", 1, "column 2 has an empty name");
    }

    #[test]
    fn ragged_rows_are_errors_on_their_line() {
        assert_data_error("a,y\n1,0\n2,1\n3\n4,1\n", 4, "expected 2 fields");
        assert_data_error("a,y\n1,0\n2,1,7\n", 3, "found 3");
    }

    #[test]
    fn bad_response_is_an_error_on_its_line() {
        assert_data_error("a,y\n1,0\n2,1\n3,maybe\n", 4, "\"maybe\"");
        assert_data_error("a;y\n1;2\n", 2, "\"2\"");
    }

    #[test]
    fn a_column_mixing_numbers_and_text_is_an_error_naming_both() {
        assert_data_error(
            "a,age,y\n1,30,0\n2,31,1\n3,old,1\n",
            4,
            "column \"age\" mixes numbers and text: \"old\" here, \"30\" on line 2",
        );
        // Text first, numbers later: the same error, not a categorical column.
        assert_data_error(
            "a,age,y\n1,old,0\n2,31,1\n",
            2,
            "column \"age\" mixes numbers and text",
        );
    }

    #[test]
    fn missing_values_are_errors_naming_column_and_line_by_default() {
        assert_data_error(
            "a,b,y\n1,x,0\n2,,1\n",
            3,
            "missing value \"\" in column \"b\"",
        );
        // A missing first value used to make a numeric column categorical.
        for token in ["NaN", "NA", "n/a", "null"] {
            let text = format!("a,y\n{token},0\n2,1\n3,0\n");
            assert_data_error(
                &text,
                2,
                &format!("missing value \"{token}\" in column \"a\""),
            );
        }
        assert_data_error("a,y\n1,NA\n2,1\n", 2, "column \"y\"");
    }

    #[test]
    fn infinite_values_are_errors() {
        assert_data_error(
            "a,y\ninf,0\n2,1\n",
            2,
            "column \"a\": \"inf\" is not a finite",
        );
    }

    #[test]
    fn rows_with_missing_values_can_be_dropped_and_are_reported() {
        let text = "a,b,y\nNaN,x,0\n2,x,1\n3,,1\n4,z,0\n";
        let d = parse_csv(
            text,
            Path::new("t.csv"),
            DEFAULT_RESPONSE,
            Missing::DropRows,
            u64::MAX,
        )
        .unwrap();
        assert_eq!((d.n, d.p), (2, 2));
        assert_eq!(d.x, vec![2.0, 0.0, 4.0, 1.0]);
        assert_eq!(d.y, vec![1.0, 0.0]);
        assert_eq!(
            d.notes,
            vec![
                "column \"b\" is categorical: 2 levels, one-hot as 1 indicator against \"x\"",
                "2 rows with a missing value dropped (the first on line 2, column \"a\")",
            ]
        );
        let all = parse_csv(
            "a,y\nNA,0\n",
            Path::new("t.csv"),
            DEFAULT_RESPONSE,
            Missing::DropRows,
            u64::MAX,
        );
        crate::data::assert_data_error_at(all.unwrap_err(), "t.csv", 2, "every one of the 1");
    }

    #[test]
    fn line_numbers_count_quoted_newlines() {
        // The record starting on line 3 spans two lines; the bad one starts on line 5.
        assert_data_error(
            "a,b,y\n1,x,0\n2,\"two\nlines\",1\n3,z,nope\n",
            5,
            "\"nope\"",
        );
    }

    #[test]
    fn an_identifier_column_too_wide_for_memory_is_refused_naming_it() {
        let text: String = std::iter::once("id,y\n".to_string())
            .chain((0..100).map(|i| format!("row{i},{}\n", i % 2)))
            .collect();
        let err = parse_csv(&text, Path::new("t.csv"), "y", Missing::Error, 10_000).unwrap_err();
        match err {
            Error::MemoryLimit { message, driver } => {
                assert_eq!(driver, "data");
                assert!(
                    message.starts_with(
                        "t.csv: the design matrix of 100 rows × 99 columns (column \"id\" is \
                         categorical with 100 levels) would need 85536 bytes"
                    ),
                    "{message}"
                );
            }
            other => panic!("{other:?}"),
        }
        let d = parse_csv(&text, Path::new("t.csv"), "y", Missing::Error, 85_536).unwrap();
        assert_eq!((d.n, d.p), (100, 99));
    }

    #[test]
    fn delimiter_detection_ignores_quoted_separators() {
        assert_eq!(detect_delimiter("\"a;b;c\",d,y"), b',');
        assert_eq!(detect_delimiter("\"a,b,c\";d;y"), b';');
        assert_eq!(detect_delimiter("y"), b',');
        assert_eq!(detect_delimiter("y\ta\t\"b,c\""), b'\t');
    }

    #[test]
    fn unreadable_file_is_an_io_error_naming_it() {
        let path = std::env::temp_dir().join(format!("shmc-missing-{}.csv", std::process::id()));
        let err = read_csv(&path, "y", Missing::Error, u64::MAX).unwrap_err();
        assert!(matches!(err, Error::Io { .. }));
        assert!(err.to_string().contains(&path.display().to_string()));
    }

    #[test]
    fn read_csv_reads_a_file_from_disk() {
        let path = std::env::temp_dir().join(format!(
            "shmc-data-test-{}-{:?}.csv",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::write(&path, "x;y\n1;yes\n2;no\n").unwrap();
        let d = read_csv(&path, "y", Missing::Error, u64::MAX);
        std::fs::remove_file(&path).unwrap();
        let d = d.unwrap();
        assert_eq!((d.n, d.p, d.y), (2, 1, vec![1.0, 0.0]));
    }
}
