//! The HTML of one self-contained page: inline CSS and inline SVG, no script, no external asset,
//! so the file opens anywhere (a browser offline, a mail attachment, a CI artifact) and shows the
//! same.

use crate::output::folder::REPORT_GENERATOR;

/// Escapes `text` for HTML text and attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A number as a table shows it: three decimals, or three significant digits in scientific
/// notation when it is very large or small.
pub fn number(x: f64) -> String {
    let a = x.abs();
    if !x.is_finite() {
        format!("{x}")
    } else if a != 0.0 && !(1e-3..1e5).contains(&a) {
        format!("{x:.2e}")
    } else {
        format!("{x:.3}")
    }
}

const STYLE: &str = "
body { font-family: sans-serif; margin: 1.5em auto; max-width: 1300px; padding: 0 1em;
       color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 1.6em;
       border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; font-size: 0.9em; margin: 0.5em 0; }
th, td { padding: 0.2em 0.6em; border-bottom: 1px solid #e4e4e4; text-align: right; }
th:first-child, td:first-child { text-align: left; }
td.flag { background: #fde0dc; font-weight: bold; }
.row { display: flex; flex-wrap: wrap; gap: 0.5em; align-items: flex-start; }
figure { margin: 0.3em; } figcaption { font-size: 0.85em; color: #555; max-width: 640px; }
svg { max-width: 100%; height: auto; }
.notes { background: #fff4d6; border-left: 4px solid #e0a800; padding: 0.4em 1em; }
.approximate { background: #fde0dc; border-left: 4px solid #c0392b; padding: 0.4em 1em; }
.swatch { display: inline-block; width: 0.9em; height: 0.9em; vertical-align: middle;
          margin: 0 0.2em 0 0.8em; }
code { background: #f3f3f3; padding: 0 0.2em; }
";

/// A page being written, section by section.
#[derive(Debug, Default)]
pub struct Page {
    body: String,
}

impl Page {
    /// A page whose `<h1>` is `title`.
    pub fn new(title: &str) -> Self {
        let mut page = Self::default();
        page.body.push_str(&format!("<h1>{}</h1>\n", escape(title)));
        page
    }

    /// Adds raw HTML (already escaped).
    pub fn html(&mut self, html: &str) {
        self.body.push_str(html);
        self.body.push('\n');
    }

    /// Adds a section heading.
    pub fn heading(&mut self, text: &str) {
        self.html(&format!("<h2>{}</h2>", escape(text)));
    }

    /// Adds a paragraph of `text`, with CSS class `class` if not empty.
    pub fn paragraph(&mut self, class: &str, text: &str) {
        let class = match class {
            "" => String::new(),
            c => format!(" class=\"{c}\""),
        };
        self.html(&format!("<p{class}>{}</p>", escape(text)));
    }

    /// Adds a table: a header row, then `rows` of cells, each `(text, flagged)`; a flagged
    /// cell is highlighted.
    pub fn table(&mut self, header: &[&str], rows: &[Vec<(String, bool)>]) {
        let mut html = String::from("<table>\n<tr>");
        for h in header {
            html.push_str(&format!("<th>{}</th>", escape(h)));
        }
        html.push_str("</tr>\n");
        for row in rows {
            html.push_str("<tr>");
            for (text, flagged) in row {
                let class = if *flagged { " class=\"flag\"" } else { "" };
                html.push_str(&format!("<td{class}>{}</td>", escape(text)));
            }
            html.push_str("</tr>\n");
        }
        html.push_str("</table>");
        self.html(&html);
    }

    /// The whole page, titled `title`, marked as shmc's by [`REPORT_GENERATOR`].
    pub fn finish(self, title: &str) -> String {
        format!(
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
             <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
             {REPORT_GENERATOR}\n<title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n{}</body>\n</html>\n",
            escape(title),
            self.body
        )
    }
}

/// A figure: the SVG `svg` under the name `plot` (its `data-plot` attribute, which tests and
/// scripts find it by), with a caption if `caption` is not empty.
pub fn figure(plot: &str, svg: &str, caption: &str) -> String {
    let caption = match caption {
        "" => String::new(),
        c => format!("<figcaption>{}</figcaption>", escape(c)),
    };
    format!(
        "<figure data-plot=\"{}\">{svg}{caption}</figure>",
        escape(plot)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped_and_numbers_are_short() {
        assert_eq!(
            escape("a<b & \"c\" 'd'>"),
            "a&lt;b &amp; &quot;c&quot; &#39;d&#39;&gt;"
        );
        assert_eq!(number(1.23456), "1.235");
        assert_eq!(number(-0.0001234), "-1.23e-4");
        assert_eq!(number(123456.0), "1.23e5");
        assert_eq!(number(0.0), "0.000");
        assert_eq!(number(f64::NAN), "NaN");
        let mut page = Page::new("t<1>");
        page.table(&["a"], &[vec![("x&y".into(), true)]]);
        let html = page.finish("t<1>");
        assert!(
            html.contains("<h1>t&lt;1&gt;</h1>") && html.contains("<td class=\"flag\">x&amp;y")
        );
        assert!(!html.contains("<script") && !html.contains("src="));
    }
}
