//! The repeated-call guard (`agents.repeated_call_limit`): small models
//! tend to make again a call whose result they already have instead of
//! answering. The guard answers such a call for the tool (template
//! `error_repeated_call`, which also tells the agent to answer from what
//! it has); the second time in one run it has to, the run ends, with the
//! best partial answer the session has, labelled as incomplete (template
//! `answer_incomplete`), instead of spending every turn that is left.

use serde_json::Value;

use crate::agent_tool::AGENT_TOOL;
use crate::message::{ContentBlock, Role, ToolResultContent};
use crate::snapshot::Snapshot;

use super::session::{Session, Turn, last_text};
use super::texts::{AnswerIncomplete, ResultEmpty};

impl Session {
    /// With `agents.repeated_call_limit` set: how many assistant turns in
    /// a row, just before this one, made this very call (same tool, same
    /// input), when that reaches the limit; `None` when the call may run.
    pub(super) fn repeated_streak(
        &self,
        snap: &Snapshot,
        name: &str,
        input: &Value,
    ) -> Option<u32> {
        let limit = snap.settings().agents.repeated_call_limit;
        if limit == 0 {
            return None;
        }
        // The last assistant message is this turn's own; count the ones
        // before it that made the same call, stopping at the first that
        // did not.
        let streak = self
            .history
            .iter()
            .rev()
            .filter(|m| m.role == Role::Assistant)
            .skip(1)
            .take_while(|m| m.tool_uses().any(|(_, n, i)| n == name && i == input))
            .count();
        let streak = u32::try_from(streak).unwrap_or(u32::MAX);
        (streak >= limit).then_some(streak)
    }

    /// With `agents.repeated_call_limit` set: the id of an earlier call of
    /// this turn's message that is this very call (same tool, same input),
    /// which runs in its place — a small model may write one call dozens
    /// of times in one message. `None` when it is the first such call.
    pub(super) fn made_earlier_this_turn(
        &self,
        turn: &Turn,
        id: &str,
        name: &str,
        input: &Value,
    ) -> Option<String> {
        if turn.snap.settings().agents.repeated_call_limit == 0 {
            return None;
        }
        turn.assistant
            .tool_uses()
            .take_while(|(i, _, _)| *i != id)
            .find(|(_, n, i)| *n == name && *i == input)
            .map(|(i, _, _)| i.to_string())
    }

    /// Whether the guard holds back any call of this turn.
    pub(super) fn guard_holds_back(&self, turn: &Turn) -> bool {
        turn.assistant
            .tool_uses()
            .any(|(_, name, input)| self.repeated_streak(&turn.snap, name, input).is_some())
    }

    /// The answer of a run the guard ended: the last report a sub-agent
    /// gave (a report of nothing found does not count), or else the
    /// agent's own last text, labelled as incomplete; `None` when the
    /// session has neither.
    pub(super) fn partial_answer(&self) -> Option<Vec<String>> {
        let snap = self.engine.snapshot.load_full();
        let empty = snap.templates.show(&ResultEmpty {});
        let agent_calls: Vec<&str> = self
            .history
            .iter()
            .filter(|m| m.role == Role::Assistant)
            .flat_map(|m| m.tool_uses())
            .filter(|(_, name, _)| *name == AGENT_TOOL)
            .map(|(id, _, _)| id)
            .collect();
        let report = self
            .history
            .iter()
            .rev()
            .filter(|m| m.role == Role::User)
            .flat_map(|m| m.content.iter().rev())
            .find_map(|b| match b {
                ContentBlock::ToolResult {
                    tool_use_id,
                    content,
                    is_error: false,
                } if agent_calls.contains(&tool_use_id.as_str()) => {
                    // The child's own text comes first; a trailer follows.
                    content.iter().find_map(|c| match c {
                        ToolResultContent::Text { text }
                            if !text.trim().is_empty() && text.trim() != empty.trim() =>
                        {
                            Some(text.clone())
                        }
                        _ => None,
                    })
                }
                _ => None,
            });
        let (partial, from_subagent) = match report {
            Some(r) => (r, true),
            None => (last_text(&self.history)?.join("\n"), false),
        };
        Some(vec![snap.templates.show(&AnswerIncomplete {
            partial,
            from_subagent,
        })])
    }
}
