//! OpenAI-compatible chat completions: mapping the neutral history to chat
//! messages, error bodies, and the streamed chunk assembly.
//!
//! Works with OpenAI and the servers that copy its API (llama.cpp's
//! `llama-server`, vLLM, Ollama). The neutral history maps as follows: the
//! system prompt becomes the first `system` message; an assistant message
//! becomes `content` plus `tool_calls` (arguments as a JSON string); each
//! tool_result becomes its own `tool` message, and user text after them a
//! `user` message. Thinking blocks are dropped.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::retry::Failure;
use super::sse::{Assembler, Emit, clip, parse_data, tool_input};
use super::{ProviderError, ProviderErrorKind, ServerSaid, StreamEvent};
use crate::message::{
    ContentBlock, Message, ModelRequest, ModelResponse, Role, StopReason, ToolResultContent, Usage,
};

pub(crate) const NAME: &str = "OpenAI-compatible";

/// The request body, byte for byte.
pub(crate) fn request_body(req: &ModelRequest) -> Vec<u8> {
    let mut body = Map::new();
    body.insert("model".into(), Value::from(req.model.as_str()));
    body.insert("max_tokens".into(), Value::from(req.max_tokens));
    body.insert("stream".into(), Value::Bool(true));
    body.insert("stream_options".into(), json!({"include_usage": true}));
    if let Some(t) = req.sampling.temperature {
        body.insert("temperature".into(), Value::from(t));
    }
    if let Some(effort) = &req.sampling.effort {
        body.insert("reasoning_effort".into(), Value::from(effort.as_str()));
    }
    if !req.tools.is_empty() {
        let tools = req
            .tools
            .iter()
            .map(|t| {
                json!({"type": "function", "function": {
                    "name": t.name, "description": t.description, "parameters": t.input_schema}})
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    let mut messages = Vec::new();
    if !req.system.is_empty() {
        messages.push(json!({"role": "system", "content": &*req.system}));
    }
    for m in &req.messages {
        map_message(m, &mut messages);
    }
    body.insert("messages".into(), Value::Array(messages));
    serde_json::to_vec(&Value::Object(body)).unwrap_or_default()
}

/// An image block as a chat content part, when it is a base64 or URL source.
fn image_part(source: &Value) -> Option<Value> {
    let url = match source.get("type").and_then(Value::as_str)? {
        "base64" => format!(
            "data:{};base64,{}",
            source.get("media_type").and_then(Value::as_str)?,
            source.get("data").and_then(Value::as_str)?
        ),
        "url" => source.get("url").and_then(Value::as_str)?.to_string(),
        _ => return None,
    };
    Some(json!({"type": "image_url", "image_url": {"url": url}}))
}

fn map_message(m: &Message, out: &mut Vec<Value>) {
    match m.role {
        Role::Assistant => {
            let mut text = Vec::new();
            let mut calls = Vec::new();
            for block in &m.content {
                match block {
                    ContentBlock::Text { text: t } => text.push(t.as_str()),
                    ContentBlock::ToolUse { id, name, input } => calls.push(json!({
                        "id": id, "type": "function",
                        "function": {"name": name, "arguments": input.to_string()}})),
                    _ => {}
                }
            }
            let mut msg = Map::new();
            msg.insert("role".into(), Value::from("assistant"));
            msg.insert(
                "content".into(),
                if text.is_empty() {
                    Value::Null
                } else {
                    Value::from(text.join("\n"))
                },
            );
            if !calls.is_empty() {
                msg.insert("tool_calls".into(), Value::Array(calls));
            }
            out.push(Value::Object(msg));
        }
        Role::User => {
            let mut parts: Vec<Value> = Vec::new();
            let mut has_image = false;
            for block in &m.content {
                match block {
                    ContentBlock::ToolResult {
                        tool_use_id,
                        content,
                        is_error,
                    } => {
                        // A `tool` message holds text only: images go in
                        // the user message that follows the tool messages,
                        // introduced by a line naming the call.
                        let mut images = 0;
                        let mut text: Vec<&str> = Vec::new();
                        for c in content {
                            match c {
                                ToolResultContent::Text { text: t } => text.push(t.as_str()),
                                ToolResultContent::Image { source } => {
                                    if let Some(p) = image_part(source) {
                                        if images == 0 {
                                            parts.push(json!({"type": "text", "text": format!("Image(s) returned by tool call {tool_use_id}:")}));
                                        }
                                        images += 1;
                                        has_image = true;
                                        parts.push(p);
                                    }
                                }
                            }
                        }
                        if images > 0 {
                            text.push("[image(s) in the next user message]");
                        }
                        if *is_error {
                            text.insert(0, "Error:");
                        }
                        out.push(json!({"role": "tool", "tool_call_id": tool_use_id, "content": text.join("\n")}));
                    }
                    ContentBlock::Text { text } => {
                        parts.push(json!({"type": "text", "text": text}))
                    }
                    ContentBlock::Image { source } => {
                        if let Some(p) = image_part(source) {
                            has_image = true;
                            parts.push(p);
                        }
                    }
                    _ => {}
                }
            }
            if parts.is_empty() {
                return;
            }
            let content = if has_image {
                Value::Array(parts)
            } else {
                let texts: Vec<&str> = parts
                    .iter()
                    .filter_map(|p| p.get("text").and_then(Value::as_str))
                    .collect();
                Value::from(texts.join("\n"))
            };
            out.push(json!({"role": "user", "content": content}));
        }
    }
}

/// A readable error from a non-success response body. Understands
/// `{"error": {"message", "type"}}` and `{"error": "message"}`.
pub(crate) fn describe_error(status: u16, body: &str) -> String {
    if let Ok(v) = serde_json::from_str::<Value>(body) {
        match v.get("error") {
            Some(Value::String(message)) => return format!("{NAME} API error {status}: {message}"),
            Some(err @ Value::Object(_)) => {
                let message = err.get("message").and_then(Value::as_str).unwrap_or("");
                return match err.get("type").and_then(Value::as_str) {
                    Some(kind) => format!("{NAME} API error {status} ({kind}): {message}"),
                    None => format!("{NAME} API error {status}: {message}"),
                };
            }
            _ => {}
        }
    }
    let body = body.trim();
    if body.is_empty() {
        format!("{NAME} API error {status}")
    } else {
        format!("{NAME} API error {status}: {}", clip(body, 300))
    }
}

#[derive(Debug, Default)]
struct Call {
    id: String,
    name: String,
    arguments: String,
}

/// Assembles the chat-completions chunk stream.
#[derive(Debug, Default)]
pub(crate) struct OpenAiAssembler {
    text: String,
    calls: BTreeMap<u64, Call>,
    usage: Usage,
    finish: Option<StopReason>,
    model: String,
    /// Bytes of content assembled so far.
    size: usize,
}

impl Assembler for OpenAiAssembler {
    fn event(&mut self, name: &str, data: &str, emit: Emit<'_>) -> Result<bool, Failure> {
        if data.trim() == "[DONE]" {
            return Ok(true);
        }
        let v = parse_data(NAME, name, data)?;
        if let Some(err) = v.get("error") {
            let message = match err {
                Value::String(s) => s.clone(),
                other => other
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
            };
            return Err(Failure::Fatal(ProviderError {
                server: ServerSaid::from_error(err),
                ..ProviderError::new(
                    ProviderErrorKind::Stream,
                    format!("{NAME} stream error: {message}"),
                )
            }));
        }
        if let Some(model) = v.get("model").and_then(Value::as_str)
            && self.model.is_empty()
        {
            self.model = model.to_string();
        }
        if let Some(usage) = v.get("usage").filter(|u| u.is_object()) {
            let prompt = usage
                .get("prompt_tokens")
                .and_then(Value::as_u64)
                .unwrap_or(0);
            let cached = usage
                .get("prompt_tokens_details")
                .and_then(|d| d.get("cached_tokens"))
                .and_then(Value::as_u64)
                .unwrap_or(0)
                .min(prompt);
            self.usage = Usage {
                input_tokens: prompt - cached,
                output_tokens: usage
                    .get("completion_tokens")
                    .and_then(Value::as_u64)
                    .unwrap_or(0),
                cache_creation_input_tokens: 0,
                cache_read_input_tokens: cached,
                ..Usage::default()
            };
        }
        let Some(choice) = v
            .get("choices")
            .and_then(Value::as_array)
            .and_then(|c| c.first())
        else {
            return Ok(false);
        };
        if let Some(delta) = choice.get("delta") {
            if let Some(piece) = delta.get("content").and_then(Value::as_str)
                && !piece.is_empty()
            {
                self.size += piece.len();
                self.text.push_str(piece);
                emit(StreamEvent::TextDelta(piece.to_string()));
            }
            let reasoning = delta
                .get("reasoning_content")
                .or_else(|| delta.get("reasoning"));
            if let Some(piece) = reasoning.and_then(Value::as_str)
                && !piece.is_empty()
            {
                emit(StreamEvent::ThinkingDelta(piece.to_string()));
            }
            for tc in delta
                .get("tool_calls")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let index = tc.get("index").and_then(Value::as_u64).unwrap_or(0);
                let call = self.calls.entry(index).or_default();
                if let Some(id) = tc.get("id").and_then(Value::as_str)
                    && !id.is_empty()
                    && call.id.is_empty()
                {
                    call.id = id.to_string();
                }
                let function = tc.get("function");
                if let Some(name) = function.and_then(|f| f.get("name")).and_then(Value::as_str)
                    && !name.is_empty()
                    && call.name.is_empty()
                {
                    call.name = name.to_string();
                    if call.id.is_empty() {
                        call.id = format!("call_{index}");
                    }
                    emit(StreamEvent::ToolUseStart {
                        id: call.id.clone(),
                        name: call.name.clone(),
                    });
                }
                if let Some(args) = function
                    .and_then(|f| f.get("arguments"))
                    .and_then(Value::as_str)
                {
                    self.size += args.len();
                    call.arguments.push_str(args);
                }
            }
        }
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            self.finish = Some(match reason {
                "stop" => StopReason::EndTurn,
                "tool_calls" | "function_call" => StopReason::ToolUse,
                "length" => StopReason::MaxTokens,
                "content_filter" => StopReason::Refusal,
                other => StopReason::Other(other.to_string()),
            });
        }
        Ok(false)
    }

    fn ended_early(&mut self) -> Result<(), Failure> {
        // Some servers close without `[DONE]`; a finish reason is enough.
        if self.finish.is_some() {
            Ok(())
        } else {
            Err(Failure::retry(
                ProviderErrorKind::Stream,
                format!("the {NAME} stream ended before a finish reason"),
            ))
        }
    }

    fn content_bytes(&self) -> usize {
        self.size
    }

    fn finish(self) -> ModelResponse {
        let mut content = Vec::new();
        if !self.text.is_empty() {
            content.push(ContentBlock::Text { text: self.text });
        }
        let mut invalid = Vec::new();
        for (index, call) in self.calls {
            let id = if call.id.is_empty() {
                format!("call_{index}")
            } else {
                call.id
            };
            let input = tool_input(&id, &call.arguments, &mut invalid);
            content.push(ContentBlock::ToolUse {
                id,
                name: call.name,
                input,
            });
        }
        ModelResponse {
            message: Message::assistant(content),
            stop_reason: self.finish,
            usage: self.usage,
            model: self.model,
            invalid_tool_inputs: invalid,
            converted_tool_calls: Vec::new(),
        }
    }
}
