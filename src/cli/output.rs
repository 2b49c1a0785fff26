//! A command's result: a JSON document (stable field names, for scripts) and, for people,
//! a table rendered from the same data.

use serde_json::Value;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    #[default]
    Table,
    Json,
}

/// What a command prints on stdout.
pub struct Output {
    pub json: Value,
    pub table: String,
}

impl Output {
    pub fn new(json: Value, table: String) -> Output {
        Output { json, table }
    }

    /// Nothing to print in table form but a line (e.g. "created topic t").
    pub fn line(json: Value, line: impl Into<String>) -> Output {
        Output { json, table: format!("{}\n", line.into()) }
    }

    pub fn render(&self, format: Format) -> String {
        match format {
            Format::Table => self.table.clone(),
            Format::Json => format!("{}\n", serde_json::to_string_pretty(&self.json).unwrap_or_default()),
        }
    }

    /// Prints the output; one that streamed its records already (consume) has none.
    pub fn print(&self, format: Format) {
        use std::io::Write;
        if self.json.is_null() && self.table.is_empty() {
            return;
        }
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(self.render(format).as_bytes()).and_then(|()| out.flush());
    }
}

/// Left-aligned columns separated by two spaces, with a header row.
pub fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.len()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if let Some(w) = widths.get_mut(i) {
                *w = (*w).max(cell.chars().count());
            }
        }
    }
    let mut out = String::new();
    let mut line = |cells: Vec<&str>| {
        let mut l = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                l.push_str(cell);
            } else {
                l.push_str(&format!("{cell:<w$}  ", w = widths[i]));
            }
        }
        out.push_str(l.trim_end());
        out.push('\n');
    };
    line(headers.to_vec());
    for row in rows {
        line(row.iter().map(String::as_str).collect());
    }
    out
}
