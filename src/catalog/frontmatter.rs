//! Frontmatter splitter. (Stub: implemented by the catalog work.)

/// A markdown file split into its YAML frontmatter and body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frontmatter<'a> {
    /// The YAML between the `---` lines.
    pub yaml: &'a str,
    /// The line number (1-based) of the first YAML line.
    pub yaml_line: usize,
    pub body: &'a str,
}

/// Splits `text` (BOM and CRLF tolerated). `Err` says what is wrong.
pub fn split_frontmatter(text: &str) -> Result<Frontmatter<'_>, String> {
    let _ = text;
    Err("not implemented".into())
}
