//! Building a fork child's messages (SPEC §8).
//!
//! A fork's request is its parent's request, extended by exactly two
//! messages. Nothing here renders or copies: the parent's messages are
//! shared by `Arc`, and only a message that must change (an assistant
//! message holding a tool_use that never got a result) is rebuilt.

use std::collections::HashSet;
use std::sync::Arc;

use crate::message::{ContentBlock, History, Message, Role};

/// The marker that opens every fork directive; its presence in a user
/// message means the conversation belongs to a fork child.
pub const FORK_BOILERPLATE_TAG: &str = "<fork-boilerplate>";

/// The history with every tool_use that has no tool_result removed (at the
/// block level). Untouched messages keep their `Arc`.
pub fn without_incomplete_tool_calls(history: &History) -> History {
    let answered: HashSet<&str> = history
        .iter()
        .flat_map(|m| m.content.iter())
        .filter_map(|b| match b {
            ContentBlock::ToolResult { tool_use_id, .. } => Some(tool_use_id.as_str()),
            _ => None,
        })
        .collect();
    history
        .iter()
        .filter_map(|m| {
            let incomplete = m.role == Role::Assistant
                && m.content.iter().any(|b| matches!(b, ContentBlock::ToolUse { id, .. } if !answered.contains(id.as_str())));
            if !incomplete {
                return Some(Arc::clone(m));
            }
            let content: Vec<ContentBlock> = m
                .content
                .iter()
                .filter(|b| !matches!(b, ContentBlock::ToolUse { id, .. } if !answered.contains(id.as_str())))
                .cloned()
                .collect();
            if content.is_empty() { None } else { Some(Arc::new(Message::assistant(content))) }
        })
        .collect()
}

/// The fork child's history: the parent's history before its current
/// assistant turn (incomplete tool calls dropped), the current assistant
/// message itself (every block, shared), and one user message holding a
/// `placeholder` tool_result for each of its tool_uses followed by the
/// rendered directive and, for a fork in a worktree, the notice.
pub fn fork_messages(
    prior: &History,
    assistant: &Arc<Message>,
    placeholder: &str,
    directive: String,
    worktree_notice: Option<String>,
) -> History {
    let mut history = without_incomplete_tool_calls(prior);
    let mut results: Vec<ContentBlock> = assistant
        .tool_uses()
        .map(|(id, _, _)| ContentBlock::tool_result(id, placeholder, false))
        .collect();
    results.push(ContentBlock::text(directive));
    if let Some(notice) = worktree_notice {
        results.push(ContentBlock::text(notice));
    }
    if assistant.content.is_empty() {
        history.push(Arc::new(Message::user(results)));
        return history;
    }
    history.push(Arc::clone(assistant));
    history.push(Arc::new(Message::user(results)));
    history
}

/// Whether any user text block in `history` carries the fork marker (the
/// fallback recursion guard: it survives a rewritten history).
pub fn has_fork_boilerplate(history: &History) -> bool {
    history.iter().filter(|m| m.role == Role::User).any(|m| {
        m.content.iter().any(
            |b| matches!(b, ContentBlock::Text { text } if text.contains(FORK_BOILERPLATE_TAG)),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool_use(id: &str) -> ContentBlock {
        ContentBlock::ToolUse {
            id: id.into(),
            name: "Agent".into(),
            input: json!({"prompt": id}),
        }
    }

    #[test]
    fn siblings_differ_only_in_the_directive_and_share_the_prefix() {
        let prior: History = vec![Arc::new(Message::user_text("task"))];
        let assistant = Arc::new(Message::assistant(vec![
            ContentBlock::Thinking {
                thinking: "plan".into(),
                signature: "s".into(),
            },
            ContentBlock::text("forking"),
            tool_use("a"),
            tool_use("b"),
        ]));
        let one = fork_messages(
            &prior,
            &assistant,
            "Fork started",
            "<fork-boilerplate>x</fork-boilerplate>\nA".into(),
            None,
        );
        let two = fork_messages(
            &prior,
            &assistant,
            "Fork started",
            "<fork-boilerplate>x</fork-boilerplate>\nB".into(),
            None,
        );
        assert_eq!(one.len(), 3);
        assert!(
            Arc::ptr_eq(&one[0], &prior[0]),
            "history is shared, not copied"
        );
        assert!(Arc::ptr_eq(&one[1], &assistant));
        let last = &one[2].content;
        assert_eq!(
            last.len(),
            3,
            "one placeholder per tool_use, then the directive"
        );
        assert_eq!(
            last[0],
            ContentBlock::tool_result("a", "Fork started", false)
        );
        assert_eq!(
            last[1],
            ContentBlock::tool_result("b", "Fork started", false)
        );
        let a = serde_json::to_string(&one).unwrap();
        let b = serde_json::to_string(&two).unwrap();
        let common = a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
        assert_eq!(&a[common..], "A\"}]}]");
        assert!(has_fork_boilerplate(&one));
        assert!(!has_fork_boilerplate(&prior));
    }

    #[test]
    fn unanswered_tool_uses_are_dropped_block_by_block() {
        let history: History = vec![
            Arc::new(Message::user_text("go")),
            Arc::new(Message::assistant(vec![
                ContentBlock::text("t"),
                tool_use("done"),
                tool_use("lost"),
            ])),
            Arc::new(Message::user(vec![ContentBlock::tool_result(
                "done", "ok", false,
            )])),
            Arc::new(Message::assistant(vec![tool_use("orphan")])),
        ];
        let out = without_incomplete_tool_calls(&history);
        assert_eq!(out.len(), 3, "an assistant message left empty is dropped");
        assert!(Arc::ptr_eq(&out[0], &history[0]));
        assert_eq!(
            out[1].content,
            vec![ContentBlock::text("t"), tool_use("done")]
        );
    }
}
