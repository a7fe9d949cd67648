//! Compaction: replacing the older part of a long history with a summary
//! the model writes, without giving up the prompt cache.
//!
//! The compaction request is the request the session would send next
//! (same system prompt, tools, sampling and messages) with the summary
//! instruction added as the last block of its last user message, so
//! everything before that block is a prefix the provider has cached. The
//! answer's text replaces every message but the last exchange (the last
//! assistant message and the user message after it, kept as they are, so
//! each tool_use keeps its result). Until the answer is complete nothing
//! changes: a failed, cut or cancelled compaction leaves the history and
//! transcript as they were.

use std::sync::Arc;

use serde_json::json;

use crate::message::{ContentBlock, Message, Role, Usage};
use crate::provider::{ProviderError, ProviderErrorKind};
use crate::snapshot::Snapshot;

use super::EngineEvent;
use super::session::{RunError, Session};
use super::texts::{CompactRequest, CompactSummary};

/// Messages kept after the summary mid-turn: the last assistant message
/// and the user message that answers it.
const KEPT: usize = 2;

/// Whether a provider error says the request no longer fits the model's
/// context (Anthropic's `prompt is too long`, OpenAI's
/// `context_length_exceeded`).
pub fn is_context_overflow(e: &ProviderError) -> bool {
    if !matches!(e.kind, ProviderErrorKind::Status(400 | 413)) {
        return false;
    }
    let m = e.message.to_ascii_lowercase();
    m.contains("prompt is too long")
        || m.contains("context_length_exceeded")
        || m.contains("maximum context length")
}

/// Why a session compacted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// The estimated context passed `compact.threshold` of the window.
    Threshold,
    /// The provider refused the request as too long.
    Overflow,
    /// Asked for (`/compact`, or an embedder).
    Manual,
}

impl Trigger {
    fn as_str(self) -> &'static str {
        match self {
            Trigger::Threshold => "threshold",
            Trigger::Overflow => "overflow",
            Trigger::Manual => "manual",
        }
    }
}

impl Session {
    /// The estimated size of the next request: everything the last
    /// response counted (its input, cached or not, and its output).
    pub fn context_estimate(&self) -> u64 {
        self.last_usage.total()
    }

    /// Compacts when `compact.auto` is on and the estimate passed the
    /// threshold. A failure is logged and leaves the history as it was.
    pub(super) async fn compact_if_due(&mut self, snap: &Arc<Snapshot>) {
        let c = &snap.settings().compact;
        let def = self.spec.def.as_deref();
        let limit = c.limit_for(
            &self.spec.model,
            def.and_then(|d| d.auto_compact_window),
            def.and_then(|d| d.compact_threshold),
        );
        if !c.auto || self.context_estimate() <= limit {
            return;
        }
        if let Err(e) = self.compact(snap, Trigger::Threshold, None).await {
            tracing::warn!("{}: compaction failed: {e}", self.spec.agent_id);
        }
    }

    /// Summarises all but the last exchange. `Ok(false)` when there is too
    /// little history to compact (or the summary came back empty); the
    /// history changes only on `Ok(true)`.
    pub async fn compact(
        &mut self,
        snap: &Arc<Snapshot>,
        trigger: Trigger,
        instructions: Option<&str>,
    ) -> Result<bool, RunError> {
        if self.compactable().is_none() {
            return Ok(false);
        }
        let began = std::time::Instant::now();
        let pre_tokens = self.context_estimate();
        let done = self.compact_history(snap, trigger, instructions).await;
        let (success, error) = match &done {
            Ok(true) => (true, None),
            Ok(false) => (false, Some("empty_summary")),
            Err(RunError::Cancelled) => (false, Some("cancelled")),
            Err(_) => (false, Some("request_failed")),
        };
        self.engine.emit(EngineEvent::Compacted {
            agent_id: self.spec.agent_id.clone(),
            trigger: match trigger {
                Trigger::Manual => "manual",
                Trigger::Threshold | Trigger::Overflow => "auto",
            },
            success,
            duration_ms: u64::try_from(began.elapsed().as_millis()).unwrap_or(u64::MAX),
            pre_tokens,
            post_tokens: success.then(|| self.context_estimate()),
            error,
        });
        done
    }

    /// How many of the last messages a compaction now keeps; `None` when
    /// there is too little history to compact. Mid-turn the history ends
    /// with a user message (a prompt or tool results) and the last
    /// exchange is kept; between turns (`/compact` at the prompt) it ends
    /// with the answer and all of it is replaced.
    fn compactable(&self) -> Option<usize> {
        let n = self.history.len();
        let mid_turn = self.history.last().is_some_and(|m| m.role == Role::User);
        let ok = if mid_turn {
            n > KEPT && self.history[n - KEPT].role == Role::Assistant
        } else {
            n >= 2
        };
        ok.then_some(if mid_turn { KEPT } else { 0 })
    }

    async fn compact_history(
        &mut self,
        snap: &Arc<Snapshot>,
        trigger: Trigger,
        instructions: Option<&str>,
    ) -> Result<bool, RunError> {
        let n = self.history.len();
        let Some(kept) = self.compactable() else {
            return Ok(false);
        };
        let mid_turn = kept > 0;
        let hook_trigger = match trigger {
            Trigger::Manual => "manual",
            Trigger::Threshold | Trigger::Overflow => "auto",
        };
        self.pre_compact_hooks(snap, hook_trigger, instructions)
            .await;
        let (mut request, _) = self.build_request(snap)?;
        let instruction = snap.templates.render(&CompactRequest {
            instructions: instructions.map(str::to_string),
        })?;
        let instruction = ContentBlock::text(instruction.trim_end().to_string());
        if mid_turn {
            let mut last = (*request.messages[n - 1]).clone();
            last.content.push(instruction);
            request.messages[n - 1] = Arc::new(last);
        } else {
            request
                .messages
                .push(Arc::new(Message::user(vec![instruction])));
        }
        let sent = std::time::Instant::now();
        let response = tokio::select! {
            r = self.engine.provider.send(&request, &|_| {}) => r?,
            () = self.cancel.cancelled() => return Err(RunError::Cancelled),
        };
        // Counted like any response (cost, budgets).
        self.engine.model_response(
            &self.spec.agent_id,
            &request.model,
            response.usage,
            u64::try_from(sent.elapsed().as_millis()).unwrap_or(u64::MAX),
            response.stop_reason == Some(crate::message::StopReason::Refusal),
        );
        self.usage.add(&response.usage);
        self.transcript.record(
            "usage",
            json!({"usage": response.usage, "compaction": true}),
        );
        let Some(summary) = response
            .message
            .joined_text()
            .filter(|t| !t.trim().is_empty())
        else {
            tracing::warn!(
                "{}: the compaction answer had no text; history kept",
                self.spec.agent_id
            );
            return Ok(false);
        };
        let replaced = n - kept;
        let text = snap.templates.render(&CompactSummary {
            summary: summary.trim().to_string(),
            replaced,
            kept,
        })?;
        // Rules and nested memory delivered in the replaced messages come
        // back in the summary's message.
        let again = super::instructions::after_compaction(
            snap,
            &mut self.delivered,
            &self.history[n - kept..],
        );
        self.post_compact_hooks(snap, hook_trigger, summary.trim())
            .await;
        let mut message = Message::user_text(text.trim_end().to_string());
        message.content.extend(again);
        // The main session starts again from the summary: SessionStart
        // hooks (source `compact`) add their context to it, before it is
        // ever sent.
        if self.spec.is_main {
            message
                .content
                .extend(self.session_start_hooks("compact").await);
        }
        self.transcript.record(
            "compact",
            json!({"message": message, "kept": kept, "replaced": replaced,
                   "trigger": trigger.as_str(), "estimate": self.context_estimate()}),
        );
        tracing::info!(
            "{}: compacted {replaced} messages ({})",
            self.spec.agent_id,
            trigger.as_str()
        );
        self.transcript
            .compaction_view(trigger.as_str(), &message, &self.history[n - kept..]);
        let tail = self.history.split_off(n - kept);
        self.history = std::iter::once(Arc::new(message)).chain(tail).collect();
        // The summary need not name every agent type and skill: the next
        // turn announces the whole listing again.
        self.announced = Arc::default();
        // After the `compact` line: what the conversation holds now.
        if !self.delivered.is_empty() {
            self.transcript
                .record("instructions", json!({ "delivered": self.delivered }));
        }
        // Unknown until the next response counts it.
        self.last_usage = Usage::default();
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overflow_errors_are_recognised_by_status_and_text() {
        let e = |kind, m: &str| ProviderError::new(kind, m);
        let s400 = ProviderErrorKind::Status(400);
        assert!(is_context_overflow(&e(
            s400.clone(),
            "invalid_request_error: prompt is too long: 210000 tokens > 200000 maximum"
        )));
        assert!(is_context_overflow(&e(
            s400.clone(),
            "context_length_exceeded"
        )));
        assert!(!is_context_overflow(&e(s400, "max_tokens: too large")));
        assert!(!is_context_overflow(&e(
            ProviderErrorKind::Stream,
            "prompt is too long"
        )));
    }
}
