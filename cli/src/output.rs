//! What goes to stdout: a table (kubectl's plain aligned columns) for
//! people, or the catalog's own JSON — pretty JSON or YAML — for scripts.
//! Rendering is pure (strings in, a string out); `main` writes it.

use serde::Serialize;

use crate::exit::{Code, Failure};

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
    /// count characters, so `…` and accents line up.
    pub fn render(&self) -> String {
        let columns = self.header.len();
        let mut widths = vec![0; columns];
        for row in std::iter::once(&self.header).chain(&self.rows) {
            for (width, cell) in widths.iter_mut().zip(row) {
                *width = (*width).max(cell.chars().count());
            }
        }
        let mut out = String::new();
        for row in std::iter::once(&self.header).chain(&self.rows) {
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

/// Key/value lines (`Name:   value`), aligned, for one object's details.
pub fn details(pairs: &[(&str, String)]) -> String {
    let width = pairs.iter().map(|(k, _)| k.len()).max().unwrap_or(0) + 1;
    pairs
        .iter()
        .map(|(key, value)| format!("{:<width$} {value}\n", format!("{key}:")))
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
    serde_yaml::to_string(value)
        .map_err(|e| Failure::new(Code::Error, format!("cannot write YAML: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

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
