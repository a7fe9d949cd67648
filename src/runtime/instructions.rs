//! Instructions that enter the conversation on demand: rule files with
//! `paths` (`.claude/rules`, `~/.claude/rules`) and the `CLAUDE.md` /
//! `CLAUDE.local.md` of folders below the working directory, delivered
//! the first time a tool reads or writes a file they concern, as Claude
//! Code delivers them.
//!
//! Each file goes into the user message that carries the tool results of
//! that turn, after them (the `path_instructions` template, one text block
//! per file): the system prompt, the tools and every earlier message keep
//! their bytes, so the cached prefix stays valid. A file is delivered once
//! per conversation: a `instructions` line in the transcript names what
//! was delivered, so a resumed session does not deliver it again. A
//! compaction drops the history that held them; after it, a file is
//! delivered again the next time a tool touches a file it concerns.
//!
//! [`Session::instructions_after_tools`] is the single place where
//! instructions load after the start of a session: an `InstructionsLoaded`
//! hook would fire there, once per file delivered (the memory of the first
//! message loads in `runtime::prompt::memory_block`).

use std::path::{Path, PathBuf};

use crate::catalog::MemoryScope;
use crate::message::{ContentBlock, Message};
use crate::snapshot::Snapshot;

use super::session::Session;
use super::texts::PathInstructions;

/// Tools whose `file_path` (or `notebook_path`) brings the instructions
/// of that file in, when the call succeeds.
const FILE_TOOLS: &[&str] = &["Read", "Edit", "MultiEdit", "Write", "NotebookEdit"];

/// One file's instructions about to be delivered.
struct Pending {
    path: PathBuf,
    kind: &'static str,
    file: PathBuf,
    content: String,
}

/// The files the assistant's successful file-tool calls touched, in call
/// order, absolute and lexically clean.
fn touched_files(cwd: &Path, assistant: &Message, results: &[ContentBlock]) -> Vec<PathBuf> {
    let failed = |id: &str| {
        results.iter().any(|b| {
            matches!(b, ContentBlock::ToolResult { tool_use_id, is_error: true, .. } if tool_use_id == id)
        })
    };
    let mut out = Vec::new();
    for (id, name, input) in assistant.tool_uses() {
        if !FILE_TOOLS.contains(&name) || failed(id) {
            continue;
        }
        let Some(p) = input
            .get("file_path")
            .or_else(|| input.get("notebook_path"))
            .and_then(|v| v.as_str())
        else {
            continue;
        };
        let p = Path::new(p);
        let abs = if p.is_absolute() {
            p.to_path_buf()
        } else {
            cwd.join(p)
        };
        let abs = crate::paths::lexical(&abs);
        if !out.contains(&abs) {
            out.push(abs);
        }
    }
    out
}

impl Session {
    /// The instructions the tool calls of `assistant` bring in (their
    /// results in `results`): for each file touched, the nested memory of
    /// its folders, then the rules whose `paths` match it, each not
    /// delivered before in this conversation. Returns the text blocks to
    /// append after the results, and records what was delivered.
    pub(super) fn instructions_after_tools(
        &mut self,
        snap: &Snapshot,
        assistant: &Message,
        results: &[ContentBlock],
    ) -> Vec<ContentBlock> {
        if !super::prompt::gets_memory(self.spec.def.as_deref()) {
            return Vec::new();
        }
        let mut pending: Vec<Pending> = Vec::new();
        for file in touched_files(&self.spec.cwd, assistant, results) {
            let (nested, outside) = snap.memory.nested_for(&file);
            for o in outside {
                tracing::warn!("{} not read: {}", o.file.display(), o.skipped().what);
            }
            for m in nested {
                if m.content.trim().is_empty() || self.was_delivered(&m.path, &pending) {
                    continue;
                }
                pending.push(Pending {
                    kind: if m.scope == MemoryScope::Local {
                        "local"
                    } else {
                        "nested"
                    },
                    path: m.path,
                    file: file.clone(),
                    content: m.content,
                });
            }
            for rule in snap.memory.path_rules.iter().filter(|r| r.matches(&file)) {
                if self.was_delivered(&rule.path, &pending) {
                    continue;
                }
                pending.push(Pending {
                    path: rule.path.clone(),
                    kind: "rule",
                    file: file.clone(),
                    content: rule.content.clone(),
                });
            }
        }
        if pending.is_empty() {
            return Vec::new();
        }
        // An `InstructionsLoaded` hook would fire here, per file.
        let paths: Vec<String> = pending
            .iter()
            .map(|p| p.path.display().to_string())
            .collect();
        self.transcript
            .record("instructions", serde_json::json!({ "paths": paths }));
        pending
            .into_iter()
            .map(|p| {
                self.delivered.insert(p.path.clone());
                ContentBlock::text(snap.templates.show(&PathInstructions {
                    path: p.path.display().to_string(),
                    kind: p.kind.to_string(),
                    file: p.file.display().to_string(),
                    content: p.content.trim_end().to_string(),
                }))
            })
            .collect()
    }

    fn was_delivered(&self, path: &Path, pending: &[Pending]) -> bool {
        self.delivered.contains(path) || pending.iter().any(|p| p.path == path)
    }

    /// The instruction files a resumed conversation already holds (its
    /// transcript's `instructions` lines since the last compaction).
    pub fn set_delivered(&mut self, paths: impl IntoIterator<Item = PathBuf>) {
        self.delivered.extend(paths);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn successful_file_calls_touch_their_files_once() {
        let assistant = Message {
            role: crate::message::Role::Assistant,
            content: vec![
                ContentBlock::ToolUse {
                    id: "a".into(),
                    name: "Read".into(),
                    input: json!({"file_path": "src/../src/x.ts"}),
                },
                ContentBlock::ToolUse {
                    id: "b".into(),
                    name: "Edit".into(),
                    input: json!({"file_path": "/r/y.ts"}),
                },
                ContentBlock::ToolUse {
                    id: "c".into(),
                    name: "Bash".into(),
                    input: json!({"command": "cat z"}),
                },
                ContentBlock::ToolUse {
                    id: "d".into(),
                    name: "Write".into(),
                    input: json!({"file_path": "/r/src/x.ts"}),
                },
            ],
        };
        let results = vec![ContentBlock::tool_result("b", "denied".to_string(), true)];
        assert_eq!(
            touched_files(Path::new("/r"), &assistant, &results),
            [PathBuf::from("/r/src/x.ts")]
        );
    }
}
