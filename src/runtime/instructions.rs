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
//! per conversation: an `instructions` line in the transcript names what
//! was delivered, so a resumed session does not deliver it again. They
//! survive a compaction: the files delivered in the messages the summary
//! replaces are delivered again (as they read now) in the summary's
//! message, and an `instructions` line after the `compact` line names all
//! that the conversation holds.
//!
//! [`after_tools`] (called by the session after each turn's tool calls)
//! is the single place where instructions load after the start of a
//! session: an `InstructionsLoaded` hook would fire there, once per file
//! delivered (the memory of the first message loads in
//! `runtime::prompt::memory_block`). This file imports no sibling of the
//! runtime: the session keeps the list and records the transcript lines.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::catalog::MemoryScope;
use crate::message::{ContentBlock, Message};
use crate::snapshot::Snapshot;

crate::contexts! {
    /// Memory that entered the conversation after a tool touched a file:
    /// a rule file whose `paths` match it, or a `CLAUDE.md` of a folder
    /// below the working directory.
    "path_instructions" => pub struct PathInstructions {
        pub path: String = "/repo/src/api/CLAUDE.md".into(),
        /// `rule`, `nested` or `local` (a nested `CLAUDE.local.md`).
        pub kind: String = "nested".into(),
        /// The file the tool touched.
        pub file: String = "/repo/src/api/handler.ts".into(),
        pub content: String = "- tabs".into(),
    }
}

/// Tools whose `file_path` (or `notebook_path`) brings the instructions
/// of that file in, when the call succeeds.
const FILE_TOOLS: &[&str] = &["Read", "Edit", "MultiEdit", "Write", "NotebookEdit"];

/// One instruction file delivered to a conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Delivered {
    /// The rule or memory file.
    pub path: PathBuf,
    /// `rule`, `nested` or `local`.
    pub kind: String,
    /// The file whose touch brought it in.
    pub file: PathBuf,
}

/// The text block that delivers one file.
fn block(snap: &Snapshot, path: &Path, kind: &str, file: &Path, content: &str) -> String {
    snap.templates.show(&PathInstructions {
        path: path.display().to_string(),
        kind: kind.to_string(),
        file: file.display().to_string(),
        content: content.trim_end().to_string(),
    })
}

/// What a delivered file holds now (`None` when it is gone).
fn content_now(snap: &Snapshot, d: &Delivered) -> Option<String> {
    if d.kind == "rule" {
        return snap
            .memory
            .path_rules
            .iter()
            .find(|r| r.path == d.path)
            .map(|r| r.content.clone());
    }
    snap.memory
        .nested_for(&d.file)
        .0
        .into_iter()
        .find(|m| m.path == d.path)
        .map(|m| m.content)
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

/// The instructions the tool calls of `assistant` (their results in
/// `results`, the session working in `cwd`) bring in: for each file
/// touched, the nested memory of its folders, then the rules whose `paths`
/// match it, each not in `delivered` yet. A file whose text the
/// `history` already carries (a fork inherits its parent's messages; a
/// sub-agent resumed by SendMessage keeps its own) counts as delivered
/// without a new block. Returns the text blocks to append after the
/// results and what the conversation now holds that `delivered` did not
/// (already added to it).
pub fn after_tools(
    snap: &Snapshot,
    cwd: &Path,
    delivered: &mut Vec<Delivered>,
    history: &[Arc<Message>],
    assistant: &Message,
    results: &[ContentBlock],
) -> (Vec<ContentBlock>, Vec<Delivered>) {
    let mut blocks = Vec::new();
    let mut new = Vec::new();
    let carried = |d: &Delivered, content: &str| {
        let path = d.path.display().to_string();
        let content = content.trim_end();
        history.iter().any(|m| {
            m.role == crate::message::Role::User
                && m.content
                    .iter()
                    .filter_map(ContentBlock::as_text)
                    .any(|t| t.contains(&path) && t.contains(content))
        })
    };
    let mut give = |d: Delivered, content: &str, delivered: &mut Vec<Delivered>| {
        if content.trim().is_empty() || delivered.iter().any(|x| x.path == d.path) {
            return;
        }
        if !carried(&d, content) {
            // An `InstructionsLoaded` hook would fire here.
            blocks.push(ContentBlock::text(block(
                snap, &d.path, &d.kind, &d.file, content,
            )));
        }
        delivered.push(d.clone());
        new.push(d);
    };
    for file in touched_files(cwd, assistant, results) {
        let (nested, outside) = snap.memory.nested_for(&file);
        for o in outside {
            tracing::warn!("{} not read: {}", o.file.display(), o.skipped().what);
        }
        for m in nested {
            let kind = if m.scope == MemoryScope::Local {
                "local"
            } else {
                "nested"
            };
            let d = Delivered {
                path: m.path,
                kind: kind.into(),
                file: file.clone(),
            };
            give(d, &m.content, delivered);
        }
        for rule in snap.memory.path_rules.iter().filter(|r| r.matches(&file)) {
            let d = Delivered {
                path: rule.path.clone(),
                kind: "rule".into(),
                file: file.clone(),
            };
            give(d, &rule.content, delivered);
        }
    }
    (blocks, new)
}

/// At a compaction whose summary replaces every message but `kept`: the
/// blocks that deliver again the files delivered in the replaced messages
/// (as they read now; a file gone is forgotten), for the summary's
/// message. Files delivered in the kept messages stay where they are.
pub fn after_compaction(
    snap: &Snapshot,
    delivered: &mut Vec<Delivered>,
    kept: &[Arc<Message>],
) -> Vec<ContentBlock> {
    let kept_texts: Vec<&str> = kept
        .iter()
        .flat_map(|m| m.content.iter().filter_map(ContentBlock::as_text))
        .collect();
    let mut blocks = Vec::new();
    delivered.retain(|d| {
        let Some(content) = content_now(snap, d) else {
            return false;
        };
        let text = block(snap, &d.path, &d.kind, &d.file, &content);
        if !kept_texts.contains(&text.as_str()) {
            blocks.push(ContentBlock::text(text));
        }
        true
    });
    blocks
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
