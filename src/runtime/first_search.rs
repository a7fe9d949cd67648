//! A search made for an agent before its first request of a prompt
//! (`agents.first_search`): a small model guesses one file name, finds
//! nothing and gives up, or answers a question about a file without
//! opening it. Only a user's prompt to the main session is searched for:
//! a sub-agent's task is the parent's own plan of what to search, and a
//! child handed the file it was asked to search answers from the file's
//! first lines instead of searching it (the README's demo broke so). The
//! steps are data — the setting lists which run, in a fixed order:
//!
//! - `read_named_files`: the files the prompt names (a path with a `/`, or
//!   a file name with an extension in the top folder) are read for it;
//! - `list_named_folders`: the folders the prompt names (`tests/`,
//!   `src/cli`) have their files listed;
//! - `find_named_files`: files whose name, without its extension, is a
//!   word of the prompt as written (`worker` finds `src/cli/worker.rs`,
//!   `Explore` finds `agents/Explore.md`) are listed, and read when only
//!   one matches and nothing else was read.
//!
//! Every step is a call of the Read or Glob tool through the tool-call
//! pipeline (permission rules, deny rules and hooks apply as to any call;
//! a tool the agent is not offered is not used), and only paths inside the
//! working directory are looked at. What is found joins the prompt's
//! message (template `first_search`), so the cached prefix before it stays
//! as it was; nothing is added when nothing is found.

use std::path::Path;
use std::sync::Arc;

use serde_json::json;

use crate::config::SearchStep;
use crate::message::{ContentBlock, Role};
use crate::snapshot::Snapshot;

use super::answer_check::{asked_text, files_named, inside, words};
use super::session::Session;
use super::texts::{CommandFile, FirstRead, FirstSearch, FolderFiles};

/// At most this many files are read, this many folders listed.
const MAX_READ: usize = 3;
/// A file is read up to this many lines (a tenth of the Read tool's
/// default), so that three of them leave a small model's context room for
/// the work: a 400-line script read whole overflowed a 16k context.
const MAX_READ_LINES: usize = 200;
const MAX_FOLDERS: usize = 3;
/// Files listed per folder, and files found by name in all.
const MAX_LISTED: usize = 30;
const MAX_NAMED: usize = 12;
/// A word that names more files than this is too common to help.
const MAX_PER_WORD: usize = 5;

impl Session {
    /// Runs the configured steps for the prompt just asked (the last
    /// message), and returns what joins it and the paths read; `None` when
    /// the setting is empty, the session is not the main one (a sub-agent's
    /// task, a fork's directive that keeps its siblings' bytes, a
    /// teammate's), the prompt is not a user's text, or nothing was found.
    pub(super) async fn first_search(
        &self,
        snap: &Arc<Snapshot>,
    ) -> Option<(Vec<ContentBlock>, Vec<String>)> {
        let steps = &snap.settings().agents.first_search;
        if steps.is_empty() || !self.spec.is_main || self.spec.frozen.is_some() {
            return None;
        }
        let prompt = self.history.last().filter(|m| m.role == Role::User)?;
        if prompt
            .content
            .iter()
            .any(|b| matches!(b, ContentBlock::ToolResult { .. }))
        {
            return None;
        }
        let asked = asked_text(prompt);
        let root = self.spec.cwd.clone();
        let mut found = Found::default();
        for step in [
            SearchStep::ReadNamedFiles,
            SearchStep::ListNamedFolders,
            SearchStep::FindNamedFiles,
        ] {
            if !steps.contains(&step) {
                continue;
            }
            match step {
                SearchStep::ReadNamedFiles => {
                    for path in files_named(&asked, &root) {
                        self.read_into(snap, &path, &mut found).await;
                    }
                }
                SearchStep::ListNamedFolders => {
                    for folder in folders_named(&asked, &root).into_iter().take(MAX_FOLDERS) {
                        let files = self.glob(snap, "*", Some(&folder), &root).await;
                        if !files.is_empty() {
                            found.folders.push(FolderFiles {
                                more: files.len().saturating_sub(MAX_LISTED),
                                files: files.into_iter().take(MAX_LISTED).collect(),
                                path: folder,
                            });
                        }
                    }
                }
                SearchStep::FindNamedFiles => {
                    let names = name_words(&asked);
                    if names.is_empty() {
                        continue;
                    }
                    let pattern = format!(
                        "**/{{{}}}",
                        names
                            .iter()
                            .flat_map(|w| [w.clone(), format!("{w}.*")])
                            .collect::<Vec<_>>()
                            .join(",")
                    );
                    let files = self.glob(snap, &pattern, None, &root).await;
                    let named = by_word(&names, files);
                    if let [only] = named.as_slice()
                        && found.read.is_empty()
                    {
                        let only = only.clone();
                        self.read_into(snap, &only, &mut found).await;
                    }
                    found.named = named.into_iter().take(MAX_NAMED).collect();
                }
            }
        }
        if found.read.is_empty()
            && found.not_read.is_empty()
            && found.folders.is_empty()
            && found.named.is_empty()
        {
            return None;
        }
        let read = found.read.iter().map(|r| r.path.clone()).collect();
        let mut blocks = found.texts;
        blocks.push(ContentBlock::text(
            snap.templates
                .show(&FirstSearch {
                    read: found.read,
                    not_read: found.not_read,
                    folders: found.folders,
                    named: found.named,
                })
                .trim_end(),
        ));
        Some((blocks, read))
    }

    /// Reads `path` for the agent (through the Read pipeline), once.
    async fn read_into(&self, snap: &Arc<Snapshot>, path: &str, found: &mut Found) {
        if found.read.len() >= MAX_READ
            || found.read.iter().any(|r| r.path == path)
            || found.not_read.iter().any(|p| p == path)
        {
            return;
        }
        match self.read_for_agent(snap, path, Some(MAX_READ_LINES)).await {
            Some(Ok((input, result))) => {
                found.texts.push(ContentBlock::text(
                    snap.templates.show(&CommandFile { input, result }),
                ));
                let lines = line_count(&self.spec.cwd.join(path));
                found.read.push(FirstRead {
                    path: path.to_string(),
                    more: lines.saturating_sub(MAX_READ_LINES),
                    offset: MAX_READ_LINES + 1,
                });
            }
            Some(Err(_)) => found.not_read.push(path.to_string()),
            None => {}
        }
    }

    /// The files a Glob call finds, relative to `root`, in its order;
    /// empty when the call is refused or fails.
    async fn glob(
        &self,
        snap: &Arc<Snapshot>,
        pattern: &str,
        folder: Option<&str>,
        root: &Path,
    ) -> Vec<String> {
        let mut input = json!({ "pattern": pattern });
        if let Some(folder) = folder {
            input["path"] = json!(root.join(folder).display().to_string());
        }
        match self.side_tool_call(snap, "Glob", input).await {
            Ok((text, false)) => text
                .lines()
                .filter_map(|l| Path::new(l).strip_prefix(root).ok())
                .map(|p| p.display().to_string())
                .collect(),
            _ => Vec::new(),
        }
    }
}

/// What the steps found, in the order they found it.
#[derive(Default)]
struct Found {
    /// The read files' texts, shown before the summary.
    texts: Vec<ContentBlock>,
    read: Vec<FirstRead>,
    not_read: Vec<String>,
    folders: Vec<FolderFiles>,
    named: Vec<String>,
}

/// The lines of the file at `path` (counted in its first 16 MiB; 0 when
/// it cannot be read).
fn line_count(path: &Path) -> usize {
    use std::io::Read;
    let Ok(file) = std::fs::File::open(path) else {
        return 0;
    };
    let mut bytes = Vec::new();
    if file.take(16 << 20).read_to_end(&mut bytes).is_err() {
        return 0;
    }
    let newlines = bytes.iter().filter(|b| **b == b'\n').count();
    newlines + usize::from(bytes.last().is_some_and(|b| *b != b'\n'))
}

/// The folders `text` names inside the project, as it wrote them, without
/// a trailing `/`: a word with a `/` that is a folder (`tests/`,
/// `src/cli`).
fn folders_named(text: &str, root: &Path) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    for w in words(text).filter(|w| w.contains('/')) {
        let w = w.trim_end_matches('/');
        if !w.is_empty()
            && inside(w, root).is_some_and(|p| p.is_dir())
            && !found.iter().any(|f| f == w)
        {
            found.push(w.to_string());
        }
    }
    found
}

/// The words of `text` that may be a file's name: letters, digits, `_`
/// and `-`, at least three characters, not a path; as written (a Glob is
/// case-sensitive), each once.
fn name_words(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for w in words(text) {
        let w = w.trim_end_matches("'s");
        if w.len() >= 3
            && w.chars()
                .all(|c| c.is_alphanumeric() || c == '_' || c == '-')
            && w.chars().any(char::is_alphabetic)
            && !out.iter().any(|o| o == w)
        {
            out.push(w.to_string());
        }
    }
    out
}

/// The files whose name (without its extension) is one of `words`,
/// leaving out the words that name more than [`MAX_PER_WORD`] files.
fn by_word(words: &[String], files: Vec<String>) -> Vec<String> {
    let stem = |f: &str| {
        let name = f.rsplit('/').next().unwrap_or(f).to_string();
        match name.split_once('.') {
            Some((head, _)) if !head.is_empty() => head.to_string(),
            _ => name,
        }
    };
    let mut kept = Vec::new();
    for w in words {
        let hits: Vec<&String> = files.iter().filter(|f| stem(f) == *w).collect();
        if hits.len() <= MAX_PER_WORD {
            for hit in hits {
                if !kept.contains(hit) {
                    kept.push(hit.clone());
                }
            }
        }
    }
    kept
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_words_that_may_name_a_file_are_taken_as_written() {
        assert_eq!(
            name_words(
                "Which file defines the Agent tool's input schema? See `cadre worker`, src/x.rs, a, 42."
            ),
            [
                "Which", "file", "defines", "the", "Agent", "tool", "input", "schema", "See",
                "cadre", "worker"
            ]
        );
    }

    #[test]
    fn a_word_that_names_many_files_is_left_out() {
        let files: Vec<String> = [
            "src/cli/worker.rs",
            "agents/worker.md",
            "a/mod.rs",
            "b/mod.rs",
            "c/mod.rs",
            "d/mod.rs",
            "e/mod.rs",
            "f/mod.rs",
            "scripts/run-main-job",
            "src/workers.rs",
        ]
        .map(String::from)
        .to_vec();
        let words = ["worker", "mod", "run-main-job"].map(String::from);
        assert_eq!(
            by_word(&words, files),
            [
                "src/cli/worker.rs",
                "agents/worker.md",
                "scripts/run-main-job"
            ]
        );
    }

    #[test]
    fn folders_are_found_inside_the_project_only() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("tests/suite")).unwrap();
        std::fs::write(dir.path().join("tests/all.rs"), "").unwrap();
        let q = "What is under tests/ and tests/suite, and ../ or /etc/ or tests/all.rs?";
        assert_eq!(folders_named(q, dir.path()), ["tests", "tests/suite"]);
    }
}
