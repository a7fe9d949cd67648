//! Checking an answer against the project (`agents.check_answers`, on in
//! `config/local.toml`): a small model tends to answer a question about a
//! file without reading it, and to name paths that do not exist. When an
//! agent is about to stop, its answer is checked once per prompt:
//!
//! - a file the prompt names that exists and that no tool call of this
//!   prompt has read (or whose text no result holds) is "unread";
//! - a path the answer names that does not exist in the project is
//!   "missing".
//!
//! Either sends the agent back once (template `answer_check`), with the
//! unread files read for it through the Read tool's pipeline (permission
//! rules, deny rules and hooks apply as to any call; a link that leads out
//! of the project is not followed; shown as an `@path` file is), to answer
//! again. What is still missing in the final answer is
//! said after it (template `answer_unverified`), so an invented path never
//! stands as if it were found. Only paths inside the working directory are
//! looked at: nothing outside the project is touched.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::message::{ContentBlock, Message, Role};
use crate::snapshot::Snapshot;

use super::session::Session;
use super::texts::{AnswerCheck, AnswerUnverified, CommandFile};

/// At most this many of a prompt's files are read for one check.
const MAX_FILES: usize = 3;

impl Session {
    /// What sends the agent back to check its answer — the files the
    /// prompt names that no call has read (read now, at most
    /// [`MAX_FILES`]), then the template's words — when there are such
    /// files or the answer names paths that do not exist; `None` when the
    /// answer stands (or checks are off). `asked_at` is where this
    /// prompt's messages start in the history.
    pub(super) async fn answer_check(
        &self,
        snap: &Arc<Snapshot>,
        asked_at: usize,
    ) -> Option<Vec<ContentBlock>> {
        if !snap.settings().agents.check_answers {
            return None;
        }
        let root = &self.spec.cwd;
        let this_prompt = self.history.get(asked_at.saturating_sub(1)..)?;
        let asked = this_prompt
            .first()
            .filter(|m| m.role == Role::User)
            .map(|m| asked_text(m))
            .unwrap_or_default();
        let reads = reads_of(this_prompt);
        let unread: Vec<String> = files_named(&asked, root)
            .into_iter()
            .filter(|f| !reads.iter().any(|r| r.contains(f.as_str())))
            .filter(|f| !self.pre_read.contains(f))
            .take(MAX_FILES)
            .collect();
        let answer = super::session::last_text(&self.history)?.join("\n");
        let missing = missing_paths(&answer, root);
        if unread.is_empty() && missing.is_empty() {
            return None;
        }
        let mut blocks = Vec::new();
        let mut read = Vec::new();
        let mut not_read = Vec::new();
        for path in unread {
            match self.read_for_agent(snap, &path, None).await {
                Some(Ok((input, result))) => {
                    blocks.push(ContentBlock::text(
                        snap.templates.show(&CommandFile { input, result }),
                    ));
                    read.push(path);
                }
                Some(Err(_)) | None => not_read.push(path),
            }
        }
        let words = snap.templates.show(&AnswerCheck {
            read,
            not_read,
            missing,
        });
        blocks.push(ContentBlock::text(words.trim_end()));
        Some(blocks)
    }

    /// The line said after a final answer that still names paths missing
    /// from the project; `None` when it names none (or checks are off).
    pub(super) fn unverified_note(&self, snap: &Snapshot, answer: &[String]) -> Option<String> {
        if !snap.settings().agents.check_answers {
            return None;
        }
        let missing = missing_paths(&answer.join("\n"), &self.spec.cwd);
        (!missing.is_empty()).then(|| snap.templates.show(&AnswerUnverified { missing }))
    }
}

/// What the asker wrote in a prompt's message: its text blocks but
/// cadre's own reminders (the agent listing, what a first search found)
/// and task notifications.
pub(super) fn asked_text(prompt: &Message) -> String {
    prompt
        .content
        .iter()
        .filter_map(ContentBlock::as_text)
        .filter(|t| {
            let t = t.trim_start();
            !t.starts_with("<system-reminder>") && !t.starts_with("<task-notification>")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The inputs of this prompt's calls that read a file's text: Read, a
/// shell command, a Grep that shows matching lines, and a sub-agent's
/// prompt (the child is checked in its turn). A Glob, or a Grep that only
/// lists files, has not read anything.
fn reads_of(messages: &[Arc<Message>]) -> Vec<String> {
    messages
        .iter()
        .filter(|m| m.role == Role::Assistant)
        .flat_map(|m| m.tool_uses())
        .filter(|(_, name, input)| match *name {
            "Grep" => input["output_mode"] == "content",
            "Glob" => false,
            _ => true,
        })
        .map(|(_, _, input)| input.to_string())
        .collect()
}

/// The words of `text` that may be paths: split at spaces, quotes,
/// brackets and the like, without trailing punctuation or a `:line`
/// suffix; links left out.
pub(super) fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| c.is_whitespace() || "`'\"()[]{}<>,;*|".contains(c))
        .filter(|w| !w.contains("://") && !w.starts_with("www."))
        .map(|w| {
            let w = w.trim_end_matches(['.', ':', '!', '?']);
            // `src/x.rs:42` or `src/x.rs:42:7` names src/x.rs.
            let mut w = w;
            while let Some((head, tail)) = w.rsplit_once(':') {
                if tail.is_empty() || !tail.bytes().all(|b| b.is_ascii_digit()) {
                    break;
                }
                w = head;
            }
            w
        })
        .filter(|w| !w.is_empty())
}

/// Whether a word with a `/` reads as a path rather than prose ("and/or"):
/// its last part has an extension, it starts at the root, at `.` or `..`,
/// or its first part is an entry of the project's top folder.
fn looks_like_path(word: &str, root: &Path) -> bool {
    let last = word.trim_end_matches('/').rsplit('/').next().unwrap_or("");
    let first = word.split('/').next().unwrap_or("");
    last.trim_start_matches('.').contains('.')
        || word.starts_with(['/', '.'])
        || (!first.is_empty() && root.join(first).exists())
}

/// `word` as a path inside `root`, or `None` when it leaves the project.
pub(super) fn inside(word: &str, root: &Path) -> Option<PathBuf> {
    let root = crate::paths::lexical(root);
    let path = crate::paths::lexical(&root.join(word));
    (path.starts_with(&root) && path != root).then_some(path)
}

/// The files `text` names that exist in the project, as it wrote them: a
/// path with a `/`, or a bare file name with an extension in the top
/// folder (`Cargo.toml`).
pub(super) fn files_named(text: &str, root: &Path) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    for w in words(text) {
        let candidate = if w.contains('/') {
            looks_like_path(w, root)
        } else {
            w.trim_start_matches('.').contains('.')
        };
        if candidate
            && inside(w, root).is_some_and(|p| p.is_file())
            && !found.iter().any(|f| f == w)
        {
            found.push(w.to_string());
        }
    }
    found
}

/// The paths `text` names (with a `/`) that do not exist in the project;
/// paths outside it are not looked at.
fn missing_paths(text: &str, root: &Path) -> Vec<String> {
    let mut missing: Vec<String> = Vec::new();
    for w in words(text).filter(|w| w.contains('/')) {
        if !looks_like_path(w, root) {
            continue;
        }
        if let Some(p) = inside(w, root)
            && !p.exists()
            && !missing.iter().any(|m| m == w)
        {
            missing.push(w.to_string());
        }
    }
    missing
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn project() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("src/cli")).unwrap();
        std::fs::write(dir.path().join("src/cli/worker.rs"), "").unwrap();
        std::fs::write(dir.path().join("Cargo.toml"), "").unwrap();
        std::fs::create_dir_all(dir.path().join("config")).unwrap();
        std::fs::write(dir.path().join("config/defaults.toml"), "").unwrap();
        dir
    }

    #[test]
    fn an_answer_naming_a_path_that_does_not_exist_is_caught() {
        let p = project();
        let root = p.path();
        let abs = root.join("src/nowhere.rs");
        let answer = format!(
            "It is `src/cli/worker.rs:12`, called from src/cli/runner.rs and {}. \
             See https://example.com/a/b.rs and and/or, input/output.",
            abs.display()
        );
        assert_eq!(
            missing_paths(&answer, root),
            vec!["src/cli/runner.rs".to_string(), abs.display().to_string()]
        );
    }

    #[test]
    fn paths_outside_the_project_are_not_looked_at() {
        let p = project();
        let root = p.path();
        let answer = "It reads /etc/nothing-here.conf and ../elsewhere/x.rs and src/../../y.rs";
        assert!(missing_paths(answer, root).is_empty());
        assert!(files_named("what is in /etc/passwd or ../x.toml?", root).is_empty());
    }

    #[test]
    fn the_files_a_question_names_are_found_as_written() {
        let p = project();
        let root = p.path();
        let q = "What is `lease_ms` in config/defaults.toml? Look in Cargo.toml, \
                 and in src/missing.rs, and the config folder.";
        assert_eq!(
            files_named(q, root),
            vec!["config/defaults.toml".to_string(), "Cargo.toml".to_string()]
        );
    }
}
