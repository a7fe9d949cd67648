//! The frontmatter splitter: a Markdown agent file is a YAML block between
//! two `---` lines, then the body. Tolerates a UTF-8 byte-order mark and
//! CRLF line endings. It does not parse the YAML.

/// A markdown file split into its YAML frontmatter and body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frontmatter<'a> {
    /// The YAML between the `---` lines.
    pub yaml: &'a str,
    /// The line number (1-based) of the first YAML line.
    pub yaml_line: usize,
    pub body: &'a str,
}

/// True when `line` (without its line ending) is a `---` fence, allowing
/// trailing blanks.
fn is_fence(line: &str) -> bool {
    line.trim_end_matches([' ', '\t', '\r']) == "---"
}

/// True when `line` closes the frontmatter: a run of three or more dashes,
/// allowing trailing blanks. Claude Code's reader closes at the first
/// `---` after the opening line, so a longer line of dashes (`----`, a
/// Markdown rule some editors write) closes it there too. (Its reader then
/// leaves the extra dashes at the start of the body; here the whole line is
/// the fence.)
fn is_closing_fence(line: &str) -> bool {
    let line = line.trim_end_matches([' ', '\t', '\r']);
    line.len() >= 3 && line.bytes().all(|b| b == b'-')
}

/// Splits `text` (BOM and CRLF tolerated). `Err` says what is wrong: no
/// opening `---` line, or no closing one.
pub fn split_frontmatter(text: &str) -> Result<Frontmatter<'_>, String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let Some(first_end) = text.find('\n') else {
        return if is_fence(text) {
            Err("frontmatter is not closed: no `---` line after the opening one".into())
        } else {
            Err("no frontmatter: the file does not start with a `---` line".into())
        };
    };
    if !is_fence(&text[..first_end]) {
        return Err("no frontmatter: the file does not start with a `---` line".into());
    }
    let yaml_start = first_end + 1;
    let mut at = yaml_start;
    while at <= text.len() {
        let rest = &text[at..];
        let (line, next) = match rest.find('\n') {
            Some(i) => (&rest[..i], at + i + 1),
            None => (rest, text.len() + 1),
        };
        if is_closing_fence(line) {
            let body = text.get(next..).unwrap_or("");
            return Ok(Frontmatter {
                yaml: &text[yaml_start..at],
                yaml_line: 2,
                body,
            });
        }
        if next > text.len() {
            break;
        }
        at = next;
    }
    Err("frontmatter is not closed: no `---` line after the opening one".into())
}

/// A file's frontmatter split and its YAML parsed: the split file and the
/// YAML document, whose positions are the file's once shifted by
/// `yaml_line - 1`. A file that does not split or parse gets one error, at
/// its position, saying that `what` was skipped, and `None`.
pub fn read_frontmatter<'a>(
    text: &'a str,
    path: &std::path::Path,
    what: &str,
    diags: &mut Vec<crate::diagnostic::Diagnostic>,
) -> Option<(Frontmatter<'a>, crate::raw::Node)> {
    use crate::diagnostic::{Diagnostic, Pos};
    let fm = match split_frontmatter(text) {
        Ok(fm) => fm,
        Err(e) => {
            diags.push(Diagnostic::error(
                Some(path),
                Some(Pos::START),
                format!("{e}; {what} skipped"),
            ));
            return None;
        }
    };
    match crate::raw::parse_yaml(fm.yaml) {
        Ok(doc) => Some((fm, doc)),
        Err(e) => {
            diags.push(Diagnostic::error(
                Some(path),
                Some(e.pos.shifted(fm.yaml_line - 1)),
                format!("invalid YAML frontmatter: {}; {what} skipped", e.message),
            ));
            None
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn plain_file() {
        let f = split_frontmatter("---\nname: a\n---\nBody\n").unwrap();
        assert_eq!(f.yaml, "name: a\n");
        assert_eq!(f.yaml_line, 2);
        assert_eq!(f.body, "Body\n");
    }

    #[test]
    fn bom_and_crlf() {
        let f = split_frontmatter("\u{feff}---\r\nname: a\r\n---\r\nBody\r\n").unwrap();
        assert_eq!(f.yaml, "name: a\r\n");
        assert_eq!(f.body, "Body\r\n");
    }

    #[test]
    fn empty_block_and_no_body() {
        let f = split_frontmatter("---\n---").unwrap();
        assert_eq!(f.yaml, "");
        assert_eq!(f.body, "");
        let f = split_frontmatter("---  \nx: 1\n---\t\n").unwrap();
        assert_eq!(f.yaml, "x: 1\n");
        assert_eq!(f.body, "");
    }

    #[test]
    fn a_longer_line_of_dashes_closes_like_claude_codes_reader() {
        let f = split_frontmatter("---\nname: a\n----\nBody\n").unwrap();
        assert_eq!(f.yaml, "name: a\n");
        assert_eq!(f.body, "Body\n");
        let f = split_frontmatter("---\r\nname: a\r\n------  \r\nBody").unwrap();
        assert_eq!(f.yaml, "name: a\r\n");
        assert_eq!(f.body, "Body");
        // Two dashes, or dashes followed by text, are YAML, not a fence.
        assert!(split_frontmatter("---\nname: a\n--\n").is_err());
        assert!(split_frontmatter("---\nname: a\n---x\n").is_err());
    }

    #[test]
    fn fence_inside_body_is_body() {
        let f = split_frontmatter("---\na: 1\n---\ntext\n---\nmore").unwrap();
        assert_eq!(f.body, "text\n---\nmore");
    }

    #[test]
    fn errors() {
        assert!(
            split_frontmatter("")
                .unwrap_err()
                .starts_with("no frontmatter")
        );
        assert!(
            split_frontmatter("# Title\n---\n")
                .unwrap_err()
                .starts_with("no frontmatter")
        );
        assert!(
            split_frontmatter("----\na\n---\n")
                .unwrap_err()
                .starts_with("no frontmatter")
        );
        assert!(
            split_frontmatter("---\nname: a\n")
                .unwrap_err()
                .contains("not closed")
        );
        assert!(split_frontmatter("---").unwrap_err().contains("not closed"));
        assert!(
            split_frontmatter("---\n")
                .unwrap_err()
                .contains("not closed")
        );
    }

    proptest! {
        #[test]
        fn never_panics(s in any::<String>()) {
            if let Ok(f) = split_frontmatter(&s) {
                prop_assert!(f.yaml.len() + f.body.len() <= s.len());
            }
        }

        #[test]
        fn never_panics_on_fence_heavy_text(s in "(---|\r|\n|\u{feff}|a: b| )*") {
            let _ = split_frontmatter(&s);
        }
    }
}
