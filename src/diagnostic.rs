//! Diagnostics: one problem found in a user-written file, with where it is.
//!
//! Every module that reads files the user wrote (settings, agent definitions,
//! templates, tool schemas) reports problems as [`Diagnostic`]s. They render
//! as `path:line:col: severity: message`, the shape editors and terminals
//! turn into links. This module knows nothing about what the files mean.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Serialize;

/// How bad a problem is. Errors keep the thing they describe out of the
/// snapshot; warnings drop one value and let the rest load.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Warning,
    Error,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Severity::Warning => "warning",
            Severity::Error => "error",
        })
    }
}

/// One problem in one file. `line` and `column` are 1-based; they are absent
/// only when the problem concerns the whole file (it cannot be read at all).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Diagnostic {
    pub path: Option<PathBuf>,
    pub line: Option<usize>,
    pub column: Option<usize>,
    pub severity: Severity,
    pub message: String,
}

impl Diagnostic {
    pub fn error(path: Option<&Path>, pos: Option<Pos>, message: impl Into<String>) -> Self {
        Self::new(Severity::Error, path, pos, message)
    }

    pub fn warning(path: Option<&Path>, pos: Option<Pos>, message: impl Into<String>) -> Self {
        Self::new(Severity::Warning, path, pos, message)
    }

    pub fn new(
        severity: Severity,
        path: Option<&Path>,
        pos: Option<Pos>,
        message: impl Into<String>,
    ) -> Self {
        Diagnostic {
            path: path.map(Path::to_path_buf),
            line: pos.map(|p| p.line),
            column: pos.map(|p| p.column),
            severity,
            message: message.into(),
        }
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.path {
            Some(p) => write!(f, "{}", p.display())?,
            None => f.write_str("<input>")?,
        }
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
            if let Some(col) = self.column {
                write!(f, ":{col}")?;
            }
        }
        write!(f, ": {}: {}", self.severity, self.message)
    }
}

/// A 1-based line and column in a text file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Pos {
    pub line: usize,
    pub column: usize,
}

impl Pos {
    pub const START: Pos = Pos { line: 1, column: 1 };

    pub fn new(line: usize, column: usize) -> Self {
        Pos { line, column }
    }

    /// The line and column of byte offset `offset` in `text`. Columns count
    /// characters, not bytes, so they match what an editor shows.
    pub fn of_offset(text: &str, offset: usize) -> Pos {
        let offset = offset.min(text.len());
        let before = text.get(..offset).unwrap_or(text);
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let column = before.get(line_start..).map_or(0, |s| s.chars().count()) + 1;
        Pos { line, column }
    }

    /// This position moved down by `lines` lines (for text embedded in a file,
    /// such as frontmatter that starts after the opening `---`).
    pub fn shifted(self, lines: usize) -> Pos {
        Pos {
            line: self.line + lines,
            column: self.column,
        }
    }
}

/// A list of diagnostics with helpers for the common questions.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Diagnostics(pub Vec<Diagnostic>);

impl Diagnostics {
    pub fn push(&mut self, d: Diagnostic) {
        self.0.push(d);
    }

    pub fn extend(&mut self, other: impl IntoIterator<Item = Diagnostic>) {
        self.0.extend(other);
    }

    pub fn has_errors(&self) -> bool {
        self.0.iter().any(Diagnostic::is_error)
    }

    pub fn iter(&self) -> std::slice::Iter<'_, Diagnostic> {
        self.0.iter()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl IntoIterator for Diagnostics {
    type Item = Diagnostic;
    type IntoIter = std::vec::IntoIter<Diagnostic>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_map_to_one_based_line_and_char_column() {
        let text = "ab\ncdé\nf";
        assert_eq!(Pos::of_offset(text, 0), Pos::new(1, 1));
        assert_eq!(Pos::of_offset(text, 3), Pos::new(2, 1));
        // 'é' is two bytes; the 'f' line starts after it.
        assert_eq!(Pos::of_offset(text, text.len() - 1), Pos::new(3, 1));
        assert_eq!(Pos::of_offset(text, 7), Pos::new(2, 4));
    }

    #[test]
    fn display_is_path_line_col() {
        let d = Diagnostic::error(
            Some(Path::new("a/b.md")),
            Some(Pos::new(4, 8)),
            "tools: expected a list",
        );
        assert_eq!(d.to_string(), "a/b.md:4:8: error: tools: expected a list");
    }
}
