//! Tool results as data, in the shapes Claude Code gives them to the
//! SDKs (`tool_use_result` on the `user` message that carries the result):
//! what a program reads instead of parsing the text the model reads.
//! Checked against Claude Code by `tests/suite/conformance.rs`, scenario
//! `tool-results`.

use serde::Serialize;

/// Read of a text file.
#[derive(Debug, Serialize)]
pub struct ReadText {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub file: ReadFile,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReadFile {
    pub file_path: String,
    /// The lines shown, as in the file (no line numbers).
    pub content: String,
    pub num_lines: u64,
    pub start_line: u64,
    /// Lines in the file (those counted, when the read stopped early).
    pub total_lines: u64,
}

/// Edit.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EditResult {
    pub file_path: String,
    pub old_string: String,
    pub new_string: String,
    pub original_file: String,
    pub structured_patch: Vec<Hunk>,
    pub user_modified: bool,
    pub replace_all: bool,
}

/// Write: `create` or `update`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WriteResult {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub file_path: String,
    pub content: String,
    pub structured_patch: Vec<Hunk>,
    /// The file before (`null` for a new file, or one too large to keep).
    pub original_file: Option<String>,
    pub user_modified: bool,
}

/// Bash.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BashResult {
    pub stdout: String,
    pub stderr: String,
    pub interrupted: bool,
    pub is_image: bool,
    pub no_output_expected: bool,
}

/// Glob.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GlobResult {
    pub filenames: Vec<String>,
    pub duration_ms: u64,
    pub num_files: usize,
    pub truncated: bool,
    pub total_matches: usize,
    pub count_is_complete: bool,
}

/// Grep.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GrepResult {
    /// `files_with_matches`, `content` or `count`.
    pub mode: String,
    pub filenames: Vec<String>,
    pub num_files: usize,
    /// `content` and `count` modes: the text the model reads.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub num_lines: Option<usize>,
    pub total_files: usize,
}

/// One hunk of a unified diff, as Claude Code's `structuredPatch`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Hunk {
    pub old_start: usize,
    pub old_lines: usize,
    pub new_start: usize,
    pub new_lines: usize,
    /// ` ` context, `-` removed, `+` added, each with its line.
    pub lines: Vec<String>,
}

/// A clipped output as one text, the cut marked.
pub fn clip_text(c: &super::outcome::Clip) -> String {
    if c.cut == 0 {
        c.head.clone()
    } else {
        format!("{}\n[… {} characters cut …]\n{}", c.head, c.cut, c.tail)
    }
}

/// Lines of context around a change.
const CONTEXT: usize = 3;

/// The change from `old` to `new` as one hunk (the lines between the
/// common head and tail, with up to three lines of context); none when
/// they are equal.
pub fn patch(old: &str, new: &str) -> Vec<Hunk> {
    let a: Vec<&str> = old.lines().collect();
    let b: Vec<&str> = new.lines().collect();
    let head = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let max_tail = a.len().min(b.len()) - head;
    let tail = a
        .iter()
        .rev()
        .zip(b.iter().rev())
        .take(max_tail)
        .take_while(|(x, y)| x == y)
        .count();
    if head == a.len() && head == b.len() {
        return Vec::new();
    }
    let start = head.saturating_sub(CONTEXT);
    let (a_end, b_end) = (a.len() - tail, b.len() - tail);
    let after = tail.min(CONTEXT);
    let mut lines: Vec<String> = a[start..head].iter().map(|l| format!(" {l}")).collect();
    lines.extend(a[head..a_end].iter().map(|l| format!("-{l}")));
    lines.extend(b[head..b_end].iter().map(|l| format!("+{l}")));
    lines.extend(a[a_end..a_end + after].iter().map(|l| format!(" {l}")));
    let old_lines = a_end + after - start;
    let new_lines = b_end + after - start;
    // An empty side starts at the line before, as unified diffs count.
    let first = |n: usize| if n == 0 { start } else { start + 1 };
    vec![Hunk {
        old_start: first(old_lines),
        old_lines,
        new_start: first(new_lines),
        new_lines,
        lines,
    }]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_patch_is_the_changed_lines_with_their_context() {
        assert_eq!(patch("a\n", "a\n"), vec![]);
        assert_eq!(
            patch("hello\n", "goodbye\n"),
            vec![Hunk {
                old_start: 1,
                old_lines: 1,
                new_start: 1,
                new_lines: 1,
                lines: vec!["-hello".into(), "+goodbye".into()],
            }]
        );
        let old = "1\n2\n3\n4\n5\n6\n7\n8\n";
        let new = "1\n2\n3\n4\nfive\n6\n7\n8\n";
        let h = &patch(old, new)[0];
        assert_eq!((h.old_start, h.old_lines, h.new_lines), (2, 7, 7));
        assert_eq!(h.lines[3], "-5");
        assert_eq!(h.lines[4], "+five");
        let created = &patch("", "x\ny\n")[0];
        assert_eq!(
            (created.old_start, created.old_lines, created.new_start),
            (0, 0, 1)
        );
    }
}
