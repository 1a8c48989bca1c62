//! What goes to stdout: a table (kubectl's plain aligned columns) for
//! people, or the catalog's own JSON — pretty JSON or YAML — for scripts.
//! Rendering is pure (strings in, a string out); `main` writes it.
//!
//! Every string a server supplied (the catalog's offers, contracts and
//! error messages, a Purchase's conditions) reaches a terminal only through
//! [`escape`]: tables and details escape their cells, [`error_line`] the
//! message after `error:`, `purchase follow` its lines. JSON and YAML need
//! no more: their encoders already escape control characters.

use std::borrow::Cow;
use std::fmt::Write as _;

use serde::Serialize;

use crate::exit::{Code, Failure};

/// `text` with every character a terminal would act on instead of show
/// written visibly, Rust-style: C0 controls (`\x1b`, `\r`, `\n`, `\t`, BEL
/// `\x07`…), DEL (`\x7f`), the C1 controls U+0080–U+009F (`\u{9b}`: some
/// terminals take the 8-bit CSI and OSC as ESC sequences), the bidi
/// embeddings, overrides and isolates U+202A–U+202E and U+2066–U+2069
/// (`\u{202e}`: they reorder what follows on the line), and the Unicode
/// line and paragraph separators U+2028/U+2029. A provider's description
/// once cleared the screen, retitled the window and wrote the clipboard
/// (OSC 52) this way, and `\r` or a newline let one cell overwrite or fake
/// a row (issue 41, F6). Everything else, backslashes included, is left as
/// it is: the output is for reading, not for parsing back (that is `-o
/// json`).
pub fn escape(text: &str) -> Cow<'_, str> {
    if !text.chars().any(needs_escape) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x80 && needs_escape(c) => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if needs_escape(c) => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

fn needs_escape(c: char) -> bool {
    matches!(c as u32,
        0x00..=0x1f | 0x7f | 0x80..=0x9f | 0x202a..=0x202e | 0x2066..=0x2069 | 0x2028 | 0x2029)
}

/// What stderr shows for a failed command: `error: ` and its message,
/// escaped (the message often quotes the catalog or the API server).
pub fn error_line(failure: &Failure) -> String {
    format!("error: {}\n", escape(&failure.message))
}

/// A table: a header row and data rows, each as many cells as the header.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Table {
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(header: &[&str]) -> Self {
        Self {
            header: header.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// Columns padded to their widest cell and three spaces apart, as
    /// `kubectl get` prints them; the last column is not padded. Widths
    /// count characters, so `…` and accents line up. Cells are
    /// [`escape`]d first, so one line is one row and widths are what shows.
    pub fn render(&self) -> String {
        self.render_with(true)
    }

    /// [`render`](Self::render), without the header row when `headers` is
    /// false (`--no-headers`, for `while read` loops and `wc -l`): the
    /// widths are then those of the rows alone, as kubectl's.
    pub fn render_with(&self, headers: bool) -> String {
        let columns = self.header.len();
        let header = headers.then_some(&self.header);
        let escaped: Vec<Vec<String>> = header
            .into_iter()
            .chain(&self.rows)
            .map(|row| row.iter().map(|cell| escape(cell).into_owned()).collect())
            .collect();
        let mut widths = vec![0; columns];
        for row in &escaped {
            for (width, cell) in widths.iter_mut().zip(row) {
                *width = (*width).max(cell.chars().count());
            }
        }
        let mut out = String::new();
        for row in &escaped {
            let mut line = String::new();
            for (i, cell) in row.iter().enumerate().take(columns) {
                line.push_str(cell);
                if i + 1 < columns {
                    let pad = widths[i] - cell.chars().count() + 3;
                    line.extend(std::iter::repeat_n(' ', pad));
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

/// Key/value lines (`Name:   value`), aligned, for one object's details;
/// values [`escape`]d, so each stays on its line.
pub fn details(pairs: &[(&str, String)]) -> String {
    let width = pairs.iter().map(|(k, _)| k.len()).max().unwrap_or(0) + 1;
    pairs
        .iter()
        .map(|(key, value)| format!("{:<width$} {}\n", format!("{key}:"), escape(value)))
        .collect()
}

/// `value` as pretty JSON (a trailing newline).
pub fn json<T: Serialize + ?Sized>(value: &T) -> Result<String, Failure> {
    serde_json::to_string_pretty(value)
        .map(|text| text + "\n")
        .map_err(|e| Failure::new(Code::Error, format!("cannot write JSON: {e}")))
}

/// `value` as YAML.
pub fn yaml<T: Serialize + ?Sized>(value: &T) -> Result<String, Failure> {
    serde_yaml_ng::to_string(value)
        .map_err(|e| Failure::new(Code::Error, format!("cannot write YAML: {e}")))
}

/// What a hostile server sends (the review's probes B-01..B-07, B-17):
/// ESC[2J (clear the screen), OSC 0 (the window title), OSC 52 (write the
/// clipboard), CR (overwrite the line), BEL, backspace, DEL, the 8-bit CSI,
/// OSC and ST, a bidi override and isolate, and a newline faking a row.
#[cfg(test)]
pub(crate) const HOSTILE: &str = "a\u{1b}[2J\u{1b}]0;pwned\u{7}\u{1b}]52;c;ZXZpbA==\u{7}\rEVIL\u{8}\u{7f}\u{9b}31m\u{9d}0;t\u{9c}\u{202e}gnp.exe\u{2066}x\u{2069}\nfake row";

/// `text` holds nothing a terminal acts on but the line ends between rows.
#[cfg(test)]
#[track_caller]
pub(crate) fn assert_terminal_safe(text: &str) {
    let raw: Vec<char> = text
        .chars()
        .filter(|&c| c != '\n' && needs_escape(c))
        .collect();
    assert!(raw.is_empty(), "raw control characters {raw:?} in {text:?}");
    assert!(!text.contains("pwned\u{7}"), "{text:?}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_shown_not_obeyed() {
        // B-01..B-07, B-17: every class of the review's probes.
        assert_eq!(
            escape(HOSTILE),
            "a\\x1b[2J\\x1b]0;pwned\\x07\\x1b]52;c;ZXZpbA==\\x07\\rEVIL\\x08\\x7f\\u{9b}31m\\u{9d}0;t\\u{9c}\\u{202e}gnp.exe\\u{2066}x\\u{2069}\\nfake row"
        );
        assert_terminal_safe(&escape(HOSTILE));
        assert_eq!(
            escape("\u{0}\u{1f}\u{80}\u{202a}\u{2028}"),
            "\\x00\\x1f\\u{80}\\u{202a}\\u{2028}"
        );
        // Text, accents, `…`, CJK and a backslash are left alone, unallocated.
        for plain in ["eu-west-1", "Größe … 東京", "C:\\path", ""] {
            assert!(matches!(escape(plain), Cow::Borrowed(p) if p == plain));
        }
    }

    #[test]
    fn a_cell_cannot_clear_the_screen_or_fake_a_row() {
        // B-01, B-03: one line per row, whatever a cell holds.
        let mut t = Table::new(&["OFFER", "COST"]);
        t.row(vec![HOSTILE.into(), "1".into()]);
        t.row(vec!["b".into(), "2".into()]);
        let text = t.render();
        assert_terminal_safe(&text);
        assert_eq!(text.lines().count(), 3, "{text}");
        let lines: Vec<&str> = text.lines().collect();
        // The widths are those of what shows, so the columns still line up.
        assert_eq!(lines[1].find(" 1"), lines[2].find(" 2"), "{text}");
    }

    #[test]
    fn a_detail_stays_on_its_line() {
        // B-02, B-07: `offers show`'s lines.
        let text = details(&[("Description", HOSTILE.into()), ("ID", "x".into())]);
        assert_terminal_safe(&text);
        assert_eq!(text.lines().count(), 2, "{text}");
        assert!(text.ends_with("ID:          x\n"), "{text}");
    }

    #[test]
    fn an_error_quoting_a_server_is_escaped() {
        // B-06: a catalog's 400/409 message after `error:`.
        let failure: Failure = catalog_client::Error::Rejected {
            what: "offer".into(),
            status: 409,
            message: HOSTILE.into(),
        }
        .into();
        let line = error_line(&failure);
        assert_terminal_safe(&line);
        assert!(
            line.starts_with("error: ") && line.ends_with("fake row\n"),
            "{line}"
        );
        assert_eq!(line.lines().count(), 1, "{line}");
    }

    #[test]
    fn columns_line_up_on_the_widest_cell() {
        let mut t = Table::new(&["OFFER", "COST", "RESOURCES"]);
        t.row(vec!["a".into(), "1.5".into(), "cpu=2".into()]);
        t.row(vec!["longer-id".into(), "10".into(), String::new()]);
        assert_eq!(
            t.render(),
            "OFFER       COST   RESOURCES\n\
             a           1.5    cpu=2\n\
             longer-id   10\n"
        );
    }

    #[test]
    fn no_headers_prints_the_rows_alone() {
        let mut t = Table::new(&["OFFER-WITH-A-LONG-HEADER", "COST"]);
        t.row(vec!["a".into(), "1.5".into()]);
        t.row(vec!["bb".into(), "10".into()]);
        assert_eq!(t.render_with(false), "a    1.5\nbb   10\n");
        assert_eq!(t.render_with(true), t.render());
        assert!(t.render().starts_with("OFFER-WITH-A-LONG-HEADER   COST\n"));
    }

    #[test]
    fn details_align_their_values() {
        assert_eq!(
            details(&[("ID", "x".into()), ("Provider", "p".into())]),
            "ID:       x\nProvider: p\n"
        );
    }

    #[test]
    fn scripts_get_json_and_yaml_of_the_same_value() {
        let v = serde_json::json!({"cost": "1.10", "n": 1});
        assert_eq!(
            json(&v).unwrap(),
            "{\n  \"cost\": \"1.10\",\n  \"n\": 1\n}\n"
        );
        assert_eq!(yaml(&v).unwrap(), "cost: '1.10'\nn: 1\n");
    }
}
