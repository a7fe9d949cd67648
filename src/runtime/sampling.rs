//! MCP sampling answered by the engine: a server's `sampling/createMessage`
//! is a model call the server asks for, so it is approved like a tool call
//! that asks (by `mcp.sampling`, the main session's permission mode, or
//! whoever answers permission questions), sent through the engine's
//! provider with the main session's model and no tools, and recorded in
//! the main transcript as an `mcp_sampling` line, answered or refused.

use std::sync::{Arc, Weak};

use serde_json::{Value, json};

use crate::config::{PermissionMode, SamplingPolicy};
use crate::mcp::{Sample, SampleError, Sampled, Sampler};
use crate::message::{ContentBlock, StopReason};

use super::transcript::Transcript;
use super::{AskRequest, Engine};

/// What the approval step decided.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Approval {
    Allowed(&'static str),
    Refused(String),
}

/// Answers MCP sampling requests with the engine's provider and the main
/// session's model, without tools; the server's `maxTokens` is capped at
/// `max_tokens`. Holds the engine weakly (the engine holds the MCP
/// manager, which holds this).
pub fn sampler(
    engine: Weak<Engine>,
    model: String,
    max_tokens: u32,
    policy: SamplingPolicy,
    transcript: Arc<Transcript>,
) -> Sampler {
    Arc::new(move |sample: Sample| {
        let engine = engine.clone();
        let model = model.clone();
        let transcript = Arc::clone(&transcript);
        Box::pin(async move {
            let engine = engine
                .upgrade()
                .ok_or_else(|| SampleError::Failed("the session has ended".into()))?;
            let max_tokens = sample.max_tokens.clamp(1, max_tokens.max(1));
            let mut line = json!({
                "server": sample.server,
                "system": sample.system,
                "messages": sample.messages,
                "max_tokens": max_tokens,
                "model": model,
            });
            let approval = approve(&engine, policy, &sample, max_tokens).await;
            let by = match approval {
                Approval::Allowed(by) => by,
                Approval::Refused(why) => {
                    tracing::warn!(
                        "MCP server `{}` asked for a model completion; refused: {why}",
                        sample.server
                    );
                    line["refused"] = Value::from(why.clone());
                    transcript.record("mcp_sampling", line);
                    return Err(SampleError::Refused(why));
                }
            };
            line["approved_by"] = Value::from(by);
            let answer = ask_model(&engine, model, sample, max_tokens).await;
            match &answer {
                Ok((sampled, usage)) => {
                    line["response"] = json!({
                        "text": sampled.text,
                        "model": sampled.model,
                        "stop_reason": sampled.stop_reason,
                    });
                    line["usage"] = serde_json::to_value(usage).unwrap_or(Value::Null);
                }
                Err(e) => line["error"] = Value::from(e.clone()),
            }
            transcript.record("mcp_sampling", line);
            answer
                .map(|(sampled, _)| sampled)
                .map_err(SampleError::Failed)
        })
    })
}

/// Whether this request may be sent: `mcp.sampling = "allow"` or the
/// `bypassPermissions` mode say yes; `dontAsk` says no; otherwise whoever
/// answers permission questions (the user in `chat`, an SDK client's
/// `can_use_tool`) is asked, and without one the request is refused.
async fn approve(
    engine: &Engine,
    policy: SamplingPolicy,
    sample: &Sample,
    max_tokens: u32,
) -> Approval {
    let mode = *engine
        .main_mode
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    match decide(policy, mode, engine.asker.is_some()) {
        Some(a) => a,
        None => {
            let Some(asker) = &engine.asker else {
                return Approval::Refused("no one to ask".into());
            };
            let answer = asker(AskRequest {
                question: question(sample, max_tokens),
                agent_id: "main".into(),
                tool_use_id: String::new(),
                tool: SAMPLING_TOOL.into(),
                input: json!({
                    "server": sample.server,
                    "systemPrompt": sample.system,
                    "messages": sample.messages,
                    "maxTokens": max_tokens,
                }),
                reason: "mcp.sampling = \"ask\"".into(),
            })
            .await;
            if answer.allow {
                Approval::Allowed("user")
            } else {
                Approval::Refused(
                    answer
                        .message
                        .unwrap_or_else(|| "the user declined the sampling request".into()),
                )
            }
        }
    }
}

/// The name a sampling approval carries where a tool name is expected (an
/// SDK client's `can_use_tool`).
pub const SAMPLING_TOOL: &str = "McpSampling";

/// The decision that needs nobody: `Some` when the settings or the mode
/// settle it, `None` when someone must be asked.
fn decide(policy: SamplingPolicy, mode: PermissionMode, can_ask: bool) -> Option<Approval> {
    match (policy, mode) {
        (SamplingPolicy::Off, _) => Some(Approval::Refused(
            "sampling is off in cadre (mcp.sampling = false)".into(),
        )),
        (SamplingPolicy::Allow, _) => Some(Approval::Allowed("settings")),
        (SamplingPolicy::Ask, PermissionMode::BypassPermissions) => {
            Some(Approval::Allowed("bypassPermissions"))
        }
        (SamplingPolicy::Ask, PermissionMode::DontAsk) => Some(Approval::Refused(
            "sampling needs approval and the permission mode is dontAsk; \
             set mcp.sampling = \"allow\" to answer without asking"
                .into(),
        )),
        (SamplingPolicy::Ask, _) if !can_ask => Some(Approval::Refused(
            "sampling needs approval and this session cannot ask anyone \
             (non-interactive); set mcp.sampling = \"allow\" to answer without asking"
                .into(),
        )),
        (SamplingPolicy::Ask, _) => None,
    }
}

/// The question put to the user: who asks, how much, and the start of the
/// last message.
fn question(sample: &Sample, max_tokens: u32) -> String {
    let last: String = sample
        .messages
        .last()
        .map(|m| {
            m.content
                .iter()
                .filter_map(|b| match b {
                    ContentBlock::Text { text } => Some(text.as_str()),
                    _ => None,
                })
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default();
    let mut shown: String = last.chars().take(300).collect();
    if shown.len() < last.len() {
        shown.push('…');
    }
    format!(
        "MCP server `{}` asks the model for a completion ({} message(s), up to {max_tokens} tokens):\n  {shown}",
        sample.server,
        sample.messages.len()
    )
}

async fn ask_model(
    engine: &Engine,
    model: String,
    sample: Sample,
    max_tokens: u32,
) -> Result<(Sampled, crate::message::Usage), String> {
    let request = crate::message::ModelRequest {
        model,
        system: Arc::from(sample.system.unwrap_or_default()),
        tools: Arc::from(Vec::new()),
        messages: sample.messages.into_iter().map(Arc::new).collect(),
        max_tokens,
        sampling: crate::message::Sampling::default(),
        server_tools: Vec::new(),
    };
    let response = engine
        .provider
        .send(&request, &|_| {})
        .await
        .map_err(|e| e.to_string())?;
    let text: Vec<&str> = response
        .message
        .content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    tracing::info!(
        server = %sample.server,
        output_tokens = response.usage.output_tokens,
        "MCP sampling request answered"
    );
    let stop_reason = response.stop_reason.map(|r| {
        match r {
            StopReason::MaxTokens => "maxTokens",
            StopReason::StopSequence => "stopSequence",
            _ => "endTurn",
        }
        .to_string()
    });
    Ok((
        Sampled {
            text: text.join(""),
            model: response.model,
            stop_reason,
        },
        response.usage,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_and_mode_decide_before_anyone_is_asked() {
        use PermissionMode::*;
        use SamplingPolicy::*;
        let refused = |a: Option<Approval>| matches!(a, Some(Approval::Refused(_)));
        assert!(refused(decide(Off, BypassPermissions, true)));
        assert_eq!(
            decide(Allow, Default, false),
            Some(Approval::Allowed("settings"))
        );
        assert_eq!(
            decide(Ask, BypassPermissions, false),
            Some(Approval::Allowed("bypassPermissions"))
        );
        assert!(refused(decide(Ask, DontAsk, true)));
        assert!(refused(decide(Ask, Default, false)));
        assert!(refused(decide(Ask, AcceptEdits, false)));
        assert_eq!(decide(Ask, Default, true), None);
        assert_eq!(decide(Ask, Plan, true), None);
    }
}
