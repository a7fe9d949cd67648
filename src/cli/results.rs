//! The `result` line that ends each prompt, built from the run's outcome
//! and the emitter's accounts; shared by `cadre run --output-format json`
//! and headless mode.

use std::time::Instant;

use serde_json::Value;

use super::emit::{Emitter, text_content};
use super::wire::{self, Output, ResultOut, ResultSubtype};
use crate::message::Usage;
use crate::provider::{ProviderError, ProviderErrorKind};
use crate::runtime::{self, Outcome, RunError, StopKind};

/// The numbers a result reports for one prompt.
pub(super) struct PromptStart {
    started: Instant,
    api_ms: u64,
    usage: Usage,
}

impl PromptStart {
    pub(super) fn now(emitter: &Emitter) -> Self {
        let a = emitter.accounts();
        PromptStart {
            started: Instant::now(),
            api_ms: a.api_ms,
            usage: a.usage,
        }
    }
}

/// The `result` that answers a stdin line longer than the cap: a prompt
/// that failed before it started (cadre could not know what the line was).
pub(super) fn too_long_result(
    emitter: &Emitter,
    session_id: &str,
    line: u64,
    bytes: u64,
    max: u64,
) -> ResultOut {
    let start = PromptStart::now(emitter);
    let mut result = result_of(emitter, session_id, &start, &Err(RunError::Cancelled), 0);
    let why = format!(
        "stdin line {line} ({bytes} bytes) is longer than the limit of {max} bytes \
         (--max-input-line-bytes); it was skipped unread"
    );
    result.result.clone_from(&why);
    result.errors = vec![why];
    result
}

/// The `result` of one prompt's run.
///
/// `turns` is how many model turns of this prompt completed, for a run
/// that failed (a failed model request counts as one more, as in Claude
/// Code).
pub(super) fn result_of(
    emitter: &Emitter,
    session_id: &str,
    start: &PromptStart,
    outcome: &Result<Outcome, RunError>,
    turns: u32,
) -> ResultOut {
    let a = emitter.accounts();
    let usage = a.usage.since(&start.usage);
    let (result_index, model_usage_since_last_result, subagent_stats) = emitter.next_result();
    let (safety_stops, begun_message_ids) = emitter.take_prompt_marks();
    let (subtype, result, num_turns, stop_reason, errors) = match outcome {
        // `--json-schema`: the answer is the structured output, as JSON.
        Ok(o) if o.structured_output.is_some() => (
            ResultSubtype::Success,
            o.structured_output
                .as_ref()
                .map(Value::to_string)
                .unwrap_or_default(),
            o.turns,
            Some("tool_use".to_string()),
            vec![],
        ),
        Ok(o) if o.structured_failure.is_some() => (
            ResultSubtype::ErrorMaxStructuredOutputRetries,
            String::new(),
            o.turns,
            Some("tool_use".to_string()),
            o.structured_failure.iter().cloned().collect(),
        ),
        Ok(o) => {
            let text = o.final_text.clone().unwrap_or_default().join("\n");
            // A run that answered nothing never reports success.
            match o.stop {
                StopKind::MaxTurns => (
                    ResultSubtype::ErrorMaxTurns,
                    text,
                    o.turns,
                    None,
                    vec![format!("Reached maximum number of turns ({})", o.turns)],
                ),
                StopKind::RepeatedCalls => (
                    ResultSubtype::ErrorDuringExecution,
                    text,
                    o.turns,
                    None,
                    vec![repeated_calls_error(o.turns)],
                ),
                StopKind::EndTurn | StopKind::MaxTokens if text.trim().is_empty() => (
                    ResultSubtype::ErrorDuringExecution,
                    text,
                    o.turns,
                    Some(o.stop.as_str().to_string()),
                    vec![empty_answer(o.stop.as_str(), o.turns)],
                ),
                StopKind::EndTurn | StopKind::MaxTokens => (
                    ResultSubtype::Success,
                    text,
                    o.turns,
                    Some(o.stop.as_str().to_string()),
                    vec![],
                ),
            }
        }
        Err(RunError::Cancelled) if a.over_budget => (
            ResultSubtype::ErrorMaxBudgetUsd,
            String::new(),
            0,
            None,
            vec![format!("Reached the maximum budget: spent ${:.4}", a.cost)],
        ),
        Err(RunError::Cancelled) => (
            ResultSubtype::ErrorDuringExecution,
            String::new(),
            0,
            None,
            vec!["interrupted".to_string()],
        ),
        // A failed model request: Claude Code's `success` with `is_error`
        // and the API's status.
        Err(RunError::Provider(p)) if api_error(p).is_some() => (
            ResultSubtype::Success,
            p.to_string(),
            turns.saturating_add(1),
            Some("stop_sequence".to_string()),
            vec![],
        ),
        Err(e) => (
            ResultSubtype::ErrorDuringExecution,
            e.to_string(),
            0,
            None,
            vec![e.to_string()],
        ),
    };
    let failed = match outcome {
        Err(RunError::Provider(p)) => api_error(p),
        _ => None,
    };
    let terminal_reason = match outcome {
        Ok(o) if o.structured_failure.is_some() => Some("structured_output_retry_exhausted"),
        Ok(o) => match o.stop {
            StopKind::MaxTurns => Some("max_turns"),
            StopKind::RepeatedCalls => None,
            StopKind::EndTurn | StopKind::MaxTokens => Some("completed"),
        },
        Err(RunError::Cancelled) if a.over_budget => Some("budget_exhausted"),
        Err(RunError::Cancelled) => Some("aborted_streaming"),
        Err(RunError::Provider(p)) if runtime::is_context_overflow(p) => Some("prompt_too_long"),
        Err(RunError::Provider(_)) if failed.is_some() => Some("api_error"),
        Err(_) => None,
    };
    ResultOut {
        is_error: subtype != ResultSubtype::Success || failed.is_some(),
        subtype,
        duration_ms: u64::try_from(start.started.elapsed().as_millis()).unwrap_or(u64::MAX),
        duration_api_ms: a.api_ms.saturating_sub(start.api_ms),
        num_turns,
        result,
        session_id: session_id.to_string(),
        total_cost_usd: a.cost,
        usage: Box::new(super::emit::result_usage(&usage)),
        model_usage: a.model_usage,
        model_usage_since_last_result: model_usage_since_last_result
            .filter(|_| subtype == ResultSubtype::Success),
        permission_denials: emitter.take_denials(),
        result_index,
        queued_turn_count: 0,
        subagent_stats: Box::new(subagent_stats),
        safety_stops,
        begun_message_ids,
        stop_reason,
        terminal_reason,
        api_error_status: failed.as_ref().and_then(|f| f.api_error_status),
        api_error_type: failed.and_then(|f| f.api_error_type),
        errors,
        structured_output: outcome
            .as_ref()
            .ok()
            .and_then(|o| o.structured_output.clone()),
        local_command: None,
        origin: None,
        uuid: wire::new_uuid(),
    }
}

/// How Claude Code reports a model request that failed for good (after
/// any retries): the SDKs' error category, the status and the API's error
/// type. `None` for failures before any request could be sent (no key, a
/// bad URL), which are cadre's configuration errors.
pub(super) fn api_error(p: &ProviderError) -> Option<wire::ApiErrorFields> {
    let status = match p.kind {
        ProviderErrorKind::Config => return None,
        ProviderErrorKind::Status(s) => Some(s),
        _ => None,
    };
    let error = match status {
        Some(401 | 403) => "authentication_failed",
        Some(402) => "billing_error",
        Some(404) => "model_not_found",
        Some(429) => "rate_limit",
        Some(400 | 413 | 422) => "invalid_request",
        Some(s) if s >= 500 => "server_error",
        _ => "unknown",
    };
    Some(wire::ApiErrorFields {
        error,
        is_api_error_message: true,
        api_error_status: status,
        api_error_type: p.server.as_ref().and_then(|s| s.error_type.clone()),
    })
}

/// The assistant message Claude Code sends in place of an answer when a
/// model request failed: its text is the result's.
pub(super) fn api_error_message(
    session_id: &str,
    text: &str,
    fields: wire::ApiErrorFields,
) -> Output {
    Output::Assistant(wire::AssistantOut {
        message: wire::ApiMessage {
            id: wire::new_uuid(),
            kind: "message",
            role: "assistant",
            model: "<synthetic>".into(),
            content: text_content(text),
            stop_reason: Some("stop_sequence".into()),
            stop_sequence: Some(String::new()),
            usage: wire::WireUsage::default(),
        },
        parent_tool_use_id: None,
        session_id: session_id.to_string(),
        uuid: wire::new_uuid(),
        timestamp: crate::clock::now_rfc3339(),
        api_error: Some(fields),
    })
}

/// The `result` of a prompt that sent nothing to the model: a built-in
/// command (`local_command`), or a command that stopped before (a refused
/// shell line); `text` is what the user is told.
pub(super) fn local_result(
    emitter: &Emitter,
    session_id: &str,
    start: &PromptStart,
    text: String,
    command: Option<&str>,
) -> ResultOut {
    let mut result = result_of(emitter, session_id, start, &Err(RunError::Cancelled), 0);
    result.subtype = ResultSubtype::Success;
    result.is_error = false;
    result.errors.clear();
    result.result = text;
    result.local_command = command.map(str::to_string);
    result.terminal_reason = Some("completed");
    result
}

/// What the user is told when a session ends without any answer text, so
/// an empty line on stdout never goes unexplained.
pub(super) fn empty_answer_warning(stop: &str, turns: u32) -> String {
    format!("warning: {}", empty_answer(stop, turns))
}

/// Why a run that ended without any answer text failed (the result's
/// `errors`, and stderr).
pub(super) fn empty_answer(stop: &str, turns: u32) -> String {
    format!(
        "the model ended without an answer: no reply of this session had text \
         (last stop: {stop}, after {turns} turn{})",
        if turns == 1 { "" } else { "s" }
    )
}

/// Why a run the repeated-call guard ended failed.
pub(super) fn repeated_calls_error(turns: u32) -> String {
    format!(
        "stopped after {turns} turn{}: the agent repeated a call the repeated-call guard \
         (agents.repeated_call_limit) had already held back, after being told to answer; \
         the answer printed, if any, is incomplete",
        if turns == 1 { "" } else { "s" }
    )
}
