//! The Glob tool: files whose path, relative to the search folder, matches a
//! glob pattern, newest first. The walk honours `.gitignore` (also outside a
//! git repository), includes hidden files, and never enters `.git`. Also
//! owns the walker that Grep shares, so both tools see the same files.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use futures_util::FutureExt as _;
use futures_util::future::BoxFuture;
use globset::GlobBuilder;
use ignore::WalkBuilder;
use serde_json::Value;

use super::outcome::{BadPattern, GlobFiles, GlobNone, NotADirectory, ToolFailed};
use super::{Input, PathFilter, Tool, ToolContext, ToolOutput};

/// At most this many paths are returned.
pub const MAX_RESULTS: usize = 100;

#[derive(Debug, Clone, Copy, Default)]
pub struct GlobTool;

impl Tool for GlobTool {
    fn name(&self) -> &str {
        "Glob"
    }

    fn read_only(&self) -> bool {
        true
    }

    fn call<'a>(&'a self, input: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        async move {
            let i = Input(&input);
            let (pattern, path) = match (i.str("pattern"), i.opt_str("path")) {
                (Ok(p), Ok(d)) => (p.to_string(), d),
                (Err(e), _) | (_, Err(e)) => return ToolOutput::error(e),
            };
            let root = path.map_or_else(|| ctx.cwd.clone(), |p| ctx.resolve(p));
            let hidden = ctx.hidden.clone();
            match tokio::task::spawn_blocking(move || glob(&pattern, &root, hidden)).await {
                Ok(Ok(out)) | Ok(Err(out)) => out,
                Err(e) => ToolOutput::error(ToolFailed {
                    tool: "Glob".into(),
                    error: e.to_string(),
                }),
            }
        }
        .boxed()
    }
}

/// The walker both Glob and Grep use: `.gitignore` and `.ignore` files are
/// honoured even outside a git repository; hidden files are included; `.git`
/// folders are skipped, and so is every path `hidden` names (permission
/// rules that deny reading it): a hidden folder is not entered.
pub(crate) fn walker(root: &Path, hidden: Option<PathFilter>) -> WalkBuilder {
    let mut w = WalkBuilder::new(root);
    w.hidden(false).require_git(false).filter_entry(move |e| {
        e.file_name() != ".git" && !hidden.as_ref().is_some_and(|h| h(e.path()))
    });
    w
}

fn glob(pattern: &str, root: &Path, hidden: Option<PathFilter>) -> Result<ToolOutput, ToolOutput> {
    if !root.is_dir() {
        return Err(ToolOutput::error(NotADirectory {
            path: root.display().to_string(),
        }));
    }
    let matcher = GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
        .map_err(|e| {
            ToolOutput::error(BadPattern {
                tool: "Glob".into(),
                kind: "glob".into(),
                pattern: format!("{pattern:?}"),
                error: e.to_string(),
            })
        })?
        .compile_matcher();
    let started = std::time::Instant::now();
    let mut found: Vec<(SystemTime, PathBuf)> = Vec::new();
    for entry in walker(root, hidden).build().flatten() {
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let Ok(rel) = entry.path().strip_prefix(root) else {
            continue;
        };
        if matcher.is_match(rel) {
            let mtime = entry
                .metadata()
                .ok()
                .and_then(|m| m.modified().ok())
                .unwrap_or(SystemTime::UNIX_EPOCH);
            found.push((mtime, entry.into_path()));
        }
    }
    let typed = |filenames: Vec<String>, total: usize| super::typed::GlobResult {
        num_files: filenames.len(),
        truncated: total > filenames.len(),
        filenames,
        duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        total_matches: total,
        count_is_complete: true,
    };
    if found.is_empty() {
        return Ok(ToolOutput::ok(GlobNone {}).with_typed(typed(Vec::new(), 0)));
    }
    // Newest first; equal times by path, so the order is stable.
    found.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    let total = found.len();
    let out: Vec<String> = found
        .into_iter()
        .take(MAX_RESULTS)
        .map(|(_, p)| p.display().to_string())
        .collect();
    let done = ToolOutput::ok(GlobFiles {
        files: out.join("\n"),
        more: total > MAX_RESULTS,
        shown: out.len(),
        total,
    });
    Ok(done.with_typed(typed(out, total)))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::time::Duration;

    fn touch(path: &Path, age_secs: u64) {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(path, "x").unwrap();
        let t = SystemTime::now() - Duration::from_secs(age_secs);
        std::fs::File::options()
            .write(true)
            .open(path)
            .unwrap()
            .set_modified(t)
            .unwrap();
    }

    async fn run(dir: &Path, input: Value) -> ToolOutput {
        GlobTool.call(input, &ToolContext::new(dir)).await
    }

    #[tokio::test]
    async fn matches_relative_paths_newest_first() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        touch(&d.join("old.rs"), 300);
        touch(&d.join("src/new.rs"), 10);
        touch(&d.join("src/mid.rs"), 100);
        touch(&d.join("src/notes.md"), 5);
        let out = run(d, json!({"pattern": "**/*.rs"})).await;
        let expect = [d.join("src/new.rs"), d.join("src/mid.rs"), d.join("old.rs")]
            .map(|p| p.display().to_string())
            .join("\n");
        assert!(!out.is_error);
        assert_eq!(out.text(), expect);
        // `*` does not cross folders.
        let out = run(d, json!({"pattern": "*.rs"})).await;
        assert_eq!(out.text(), d.join("old.rs").display().to_string());
        // A search folder makes patterns relative to it.
        let out = run(d, json!({"pattern": "*.md", "path": "src"})).await;
        assert_eq!(out.text(), d.join("src/notes.md").display().to_string());
    }

    #[tokio::test]
    async fn honours_gitignore_and_skips_dot_git() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join(".gitignore"), "target/\n*.log\n").unwrap();
        touch(&d.join("target/out.txt"), 1);
        touch(&d.join("run.log"), 1);
        touch(&d.join(".git/config.txt"), 1);
        touch(&d.join(".hidden/kept.txt"), 1);
        touch(&d.join("kept.txt"), 2);
        let out = run(d, json!({"pattern": "**/*.txt"})).await;
        let expect = [d.join(".hidden/kept.txt"), d.join("kept.txt")]
            .map(|p| p.display().to_string())
            .join("\n");
        assert_eq!(out.text(), expect);
        let out = run(d, json!({"pattern": "**/*.log"})).await;
        assert_eq!(out.text(), "No files found");
    }

    #[tokio::test]
    async fn caps_results_with_a_note() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..105 {
            touch(&dir.path().join(format!("f{i:03}.txt")), i);
        }
        let out = run(dir.path(), json!({"pattern": "*.txt"})).await;
        let text = out.text();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 101);
        assert!(lines[0].ends_with("f000.txt"));
        assert!(lines[100].contains("100 newest of 105"));
    }

    #[tokio::test]
    async fn bad_pattern_and_missing_folder_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let out = run(dir.path(), json!({"pattern": "a[b"})).await;
        assert!(out.is_error && out.text().contains("invalid glob pattern"));
        let out = run(dir.path(), json!({"pattern": "*", "path": "nope"})).await;
        assert!(out.is_error && out.text().contains("is not a directory"));
    }
}
