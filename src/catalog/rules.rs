//! Rule files: `.claude/rules/**/*.md` of a project and `~/.claude/rules`
//! of the user, read as Claude Code reads them.
//!
//! A rule without a `paths` key in its frontmatter (or without
//! frontmatter) is memory like a `CLAUDE.md`: it goes with the project
//! memory into the first message. A rule with `paths` is *conditional*: it
//! enters the conversation the first time a tool touches a file one of its
//! globs matches (the runtime delivers it; see `runtime::instructions`).
//!
//! `paths` is a YAML list of globs or one string of globs separated by
//! commas. Globs are matched against the touched file's path relative to
//! the folder holding `.claude` (the project root, or the working
//! directory's project for user rules): `*` stays within one path segment,
//! `**` crosses any number, `{a,b}` and `[abc]` as usual; a glob without a
//! `/` matches a file name at any depth (as `.gitignore` lines do).
//!
//! In a folder the user has not trusted, a project rule file that resolves
//! outside the project (a symbolic link pointing elsewhere) is not read
//! (`config::trust::ProjectFiles`), as for `CLAUDE.md`.

use std::path::{Path, PathBuf};

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};

use crate::diagnostic::{Diagnostic, Pos};
use crate::raw::Kind;

/// The most rule files read from one rules folder.
const MAX_RULE_FILES: usize = 500;
/// How deep subfolders of a rules folder are searched.
const MAX_RULE_DEPTH: usize = 8;
/// Rule files larger than this are cut, with a warning.
pub const MAX_RULE_BYTES: usize = 256 * 1024;

/// A conditional rule: text that enters the conversation when a tool
/// touches a file matching one of its globs.
#[derive(Debug, Clone)]
pub struct PathRule {
    pub path: PathBuf,
    /// A user rule (`~/.claude/rules`), not the project's.
    pub user: bool,
    /// The folder globs are relative to.
    pub base: PathBuf,
    /// The globs as written.
    pub globs: Vec<String>,
    matcher: GlobSet,
    pub content: String,
}

impl PartialEq for PathRule {
    fn eq(&self, other: &Self) -> bool {
        self.path == other.path
            && self.user == other.user
            && self.base == other.base
            && self.globs == other.globs
            && self.content == other.content
    }
}
impl Eq for PathRule {}

impl serde::Serialize for PathRule {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("PathRule", 3)?;
        st.serialize_field("path", &self.path)?;
        st.serialize_field("scope", if self.user { "user" } else { "project" })?;
        st.serialize_field("paths", &self.globs)?;
        st.end()
    }
}

impl PathRule {
    /// Whether the rule applies to `file` (absolute, lexically clean).
    pub fn matches(&self, file: &Path) -> bool {
        file.strip_prefix(&self.base)
            .is_ok_and(|rel| !rel.as_os_str().is_empty() && self.matcher.is_match(rel))
    }
}

/// One rule file read: unconditional text, or a conditional rule.
#[derive(Debug)]
pub enum RuleFile {
    Always { path: PathBuf, content: String },
    Conditional(PathRule),
}

/// The `.md` files under `dir`, sorted, searched `MAX_RULE_DEPTH` deep,
/// at most `MAX_RULE_FILES`. A missing folder has none.
pub fn rule_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    walk(dir, 0, &mut out);
    out.sort();
    out
}

fn walk(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    if depth > MAX_RULE_DEPTH || out.len() >= MAX_RULE_FILES {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for p in entries {
        if out.len() >= MAX_RULE_FILES {
            return;
        }
        if p.is_dir() {
            walk(&p, depth + 1, out);
        } else if p.extension().is_some_and(|e| e == "md") && p.is_file() {
            out.push(p);
        }
    }
}

/// Reads one rule file whose globs are relative to `base`. `None` (with a
/// diagnostic) when it cannot be read or its frontmatter is broken.
pub fn read_rule(
    path: &Path,
    base: &Path,
    user: bool,
    diags: &mut Vec<Diagnostic>,
) -> Option<RuleFile> {
    let bytes = match crate::raw::read_prefix(path, MAX_RULE_BYTES as u64 + 1) {
        Ok((b, _)) => b,
        Err(e) => {
            diags.push(Diagnostic::warning(
                Some(path),
                None,
                format!("cannot read: {e}"),
            ));
            return None;
        }
    };
    let mut text = String::from_utf8_lossy(&bytes).into_owned();
    if text.len() > MAX_RULE_BYTES {
        let mut cut = MAX_RULE_BYTES;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        diags.push(Diagnostic::warning(
            Some(path),
            None,
            format!("rule file larger than {MAX_RULE_BYTES} bytes; the rest is left out"),
        ));
    }
    let text = text.replace("\r\n", "\n");
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    if !text.starts_with("---") {
        return Some(RuleFile::Always {
            path: path.to_path_buf(),
            content: text.to_string(),
        });
    }
    let (fm, doc) = super::frontmatter::read_frontmatter(text, path, "rule", diags)?;
    let at = |p: Pos| p.shifted(fm.yaml_line - 1);
    let content = fm.body.to_string();
    if let Some(g) = doc.get("globs").filter(|_| doc.get("paths").is_none()) {
        diags.push(Diagnostic::warning(
            Some(path),
            Some(at(g.pos)),
            "`globs` is not a rule key (Claude Code reads `paths`); the rule applies everywhere",
        ));
    }
    let Some(node) = doc.get("paths").filter(|n| !matches!(n.kind, Kind::Null)) else {
        return Some(RuleFile::Always {
            path: path.to_path_buf(),
            content,
        });
    };
    let mut written: Vec<(String, Pos)> = Vec::new();
    match &node.kind {
        Kind::Seq(items) => {
            for item in items {
                match item.scalar_text() {
                    Some(s) => written.push((s, item.pos)),
                    None => diags.push(Diagnostic::warning(
                        Some(path),
                        Some(at(item.pos)),
                        format!(
                            "paths: expected a glob, found {}; ignored",
                            item.type_name()
                        ),
                    )),
                }
            }
        }
        _ => match node.scalar_text() {
            Some(s) => written.extend(split_globs(&s).into_iter().map(|g| (g, node.pos))),
            None => diags.push(Diagnostic::warning(
                Some(path),
                Some(at(node.pos)),
                format!(
                    "paths: expected a list of globs or a comma-separated string, found {}",
                    node.type_name()
                ),
            )),
        },
    }
    let mut globs = Vec::new();
    let mut set = GlobSetBuilder::new();
    for (glob, pos) in written {
        let glob = glob.trim().trim_start_matches("./").to_string();
        if glob.is_empty() {
            continue;
        }
        let pattern = if glob.contains('/') {
            glob.trim_start_matches('/').to_string()
        } else {
            format!("**/{glob}")
        };
        match GlobBuilder::new(&pattern).literal_separator(true).build() {
            Ok(g) => {
                set.add(g);
                globs.push(glob);
            }
            Err(e) => diags.push(Diagnostic::warning(
                Some(path),
                Some(at(pos)),
                format!("paths: `{glob}` is not a glob ({e}); ignored"),
            )),
        }
    }
    let matcher = match set.build() {
        Ok(m) => m,
        Err(e) => {
            diags.push(Diagnostic::warning(
                Some(path),
                Some(at(node.pos)),
                format!("paths: {e}; rule skipped"),
            ));
            return None;
        }
    };
    if globs.is_empty() {
        // Nothing valid to match: the rule would never load.
        diags.push(Diagnostic::warning(
            Some(path),
            Some(at(node.pos)),
            "paths: no valid glob; the rule never loads",
        ));
        return None;
    }
    Some(RuleFile::Conditional(PathRule {
        path: path.to_path_buf(),
        user,
        base: base.to_path_buf(),
        globs,
        matcher,
        content,
    }))
}

/// A comma-separated string of globs split at the commas outside braces
/// (`src/*.{ts,tsx}, docs/**` is two globs).
fn split_globs(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut cur = String::new();
    for c in s.chars() {
        match c {
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                out.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    out.push(cur);
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn rule(text: &str) -> (Option<RuleFile>, Vec<Diagnostic>) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.md");
        std::fs::write(&p, text).unwrap();
        let mut d = Vec::new();
        let r = read_rule(&p, Path::new("/repo"), false, &mut d);
        (r, d)
    }

    #[test]
    fn paths_as_list_or_comma_string_and_glob_semantics() {
        let (r, d) = rule("---\npaths:\n  - \"src/**/*.ts\"\n  - \"*.md\"\n---\nBody\n");
        assert!(d.is_empty(), "{d:?}");
        let Some(RuleFile::Conditional(r)) = r else {
            panic!()
        };
        assert!(r.matches(Path::new("/repo/src/a.ts")));
        assert!(r.matches(Path::new("/repo/src/x/y/a.ts")));
        assert!(r.matches(Path::new("/repo/docs/deep/README.md")));
        assert!(!r.matches(Path::new("/repo/lib/a.ts")));
        assert!(!r.matches(Path::new("/other/src/a.ts")));
        assert_eq!(r.content, "Body\n");
        let (r, _) = rule("---\npaths: \"lib/*.rs, {a,b}/x.py\"\n---\nB\n");
        let Some(RuleFile::Conditional(r)) = r else {
            panic!()
        };
        assert!(r.matches(Path::new("/repo/lib/m.rs")));
        assert!(!r.matches(Path::new("/repo/lib/sub/m.rs")));
        assert!(r.matches(Path::new("/repo/b/x.py")));
    }

    #[test]
    fn no_paths_is_always_and_bad_frontmatter_is_placed() {
        assert!(matches!(
            rule("Just text\n").0,
            Some(RuleFile::Always { .. })
        ));
        assert!(matches!(
            rule("---\ndescription: x\n---\nT\n").0,
            Some(RuleFile::Always { .. })
        ));
        let (r, d) = rule("---\npaths: [unclosed\n---\nT\n");
        assert!(r.is_none());
        assert_eq!(d[0].line, Some(2), "{d:?}");
        let (_, d) = rule("---\npaths:\n  - {a: 1}\n  - \"a/[b\"\n---\nT\n");
        let lines: Vec<_> = d.iter().filter_map(|d| d.line).collect();
        assert_eq!(lines, [3, 4, 3], "{d:?}");
    }
}
