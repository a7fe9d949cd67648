//! The Anthropic Messages API: request body, error bodies and the streamed
//! event assembly.
//!
//! The body's keys come in a fixed order with `messages` last, so two
//! requests that differ only at the end of the conversation share every
//! byte before that point (what the prompt cache and forks rely on). Cache
//! breakpoints go on the last system block, the last tool and the last
//! block of the last message.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::retry::Failure;
use super::sse::{Assembler, Emit, clip, parse_data, tool_input};
use super::{ProviderError, ProviderErrorKind, ServerSaid, StreamEvent};
use crate::message::{ContentBlock, Message, ModelRequest, ModelResponse, StopReason, Usage};

pub(crate) const NAME: &str = "Anthropic";

fn ephemeral() -> Value {
    json!({"type": "ephemeral"})
}

/// The request body, byte for byte.
pub(crate) fn request_body(req: &ModelRequest) -> Vec<u8> {
    let mut out = request_head(req);
    write_messages(req, &mut out);
    out
}

/// The body up to its messages: an object's opening brace and every field
/// before `messages` (model and settings, system, tools), without the
/// closing brace. It depends only on the request's model, settings, system
/// prompt and tools, so requests that share those (the children of one
/// turn, whose system and tools are the same `Arc`s) can share it; see
/// [`write_messages`] for the rest.
pub(crate) fn request_head(req: &ModelRequest) -> Vec<u8> {
    let mut body = Map::new();
    body.insert("model".into(), Value::from(req.model.as_str()));
    body.insert("max_tokens".into(), Value::from(req.max_tokens));
    body.insert("stream".into(), Value::Bool(true));
    if let Some(t) = req.sampling.temperature {
        body.insert("temperature".into(), Value::from(t));
    }
    if let Some(budget) = req.sampling.thinking_budget {
        body.insert(
            "thinking".into(),
            json!({"type": "enabled", "budget_tokens": budget}),
        );
    }
    if let Some(effort) = &req.sampling.effort {
        body.insert("output_config".into(), json!({"effort": effort}));
    }
    if !req.system.is_empty() {
        body.insert(
            "system".into(),
            json!([{"type": "text", "text": &*req.system, "cache_control": ephemeral()}]),
        );
    }
    if !req.tools.is_empty() {
        let last = req.tools.len() - 1;
        let tools = req
            .tools
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let mut tool = Map::new();
                tool.insert("name".into(), Value::from(t.name.as_str()));
                tool.insert("description".into(), Value::from(t.description.as_str()));
                tool.insert("input_schema".into(), t.input_schema.clone());
                if i == last {
                    tool.insert("cache_control".into(), ephemeral());
                }
                Value::Object(tool)
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    if !req.server_tools.is_empty() {
        let tools = body
            .entry("tools")
            .or_insert_with(|| Value::Array(Vec::new()));
        if let Value::Array(list) = tools {
            list.extend(req.server_tools.iter().cloned());
        }
    }
    // The messages are written straight from the history, not through a
    // `Value` copy of it (a long session's history is megabytes); only
    // the last one, which carries the cache breakpoint, goes through a
    // `Value`. The bytes are those `to_value` then `to_vec` would give.
    let mut out = serde_json::to_vec(&Value::Object(body)).unwrap_or_default();
    if out.last() == Some(&b'}') {
        out.pop();
    }
    out
}

/// The rest of the body after [`request_head`]: `,"messages":[…]}`.
pub(crate) fn write_messages(req: &ModelRequest, out: &mut Vec<u8>) {
    out.extend_from_slice(b",\"messages\":[");
    let n = req.messages.len();
    for (i, m) in req.messages.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        if i + 1 < n {
            if serde_json::to_writer(&mut *out, &**m).is_err() {
                out.extend_from_slice(b"null");
            }
            continue;
        }
        let mut last = message_value(m);
        if let Some(Value::Array(blocks)) = last.get_mut("content") {
            // Thinking blocks cannot carry a breakpoint; use the last other block.
            let target = blocks.iter_mut().rev().find(|b| {
                !matches!(
                    b.get("type").and_then(Value::as_str),
                    Some("thinking" | "redacted_thinking")
                )
            });
            if let Some(Value::Object(block)) = target {
                block.insert("cache_control".into(), ephemeral());
            }
        }
        if serde_json::to_writer(&mut *out, &last).is_err() {
            out.extend_from_slice(b"null");
        }
    }
    out.extend_from_slice(b"]}");
}

fn message_value(m: &Message) -> Value {
    serde_json::to_value(m).unwrap_or(Value::Null)
}

/// A server-tool block as the API sent it, with a call's streamed input
/// put in place; `None` when it does not have the block's shape.
fn server_block(mut block: Value, json: &str) -> Option<ContentBlock> {
    if !json.trim().is_empty()
        && let (Ok(input), Some(obj)) = (serde_json::from_str::<Value>(json), block.as_object_mut())
    {
        obj.insert("input".into(), input);
    }
    serde_json::from_value(block).ok()
}

/// A readable error from a non-success response body.
pub(crate) fn describe_error(status: u16, body: &str) -> String {
    if let Ok(v) = serde_json::from_str::<Value>(body)
        && let Some(err) = v.get("error")
    {
        let kind = err.get("type").and_then(Value::as_str).unwrap_or("error");
        let message = err.get("message").and_then(Value::as_str).unwrap_or("");
        return format!("{NAME} API error {status} ({kind}): {message}");
    }
    let body = body.trim();
    if body.is_empty() {
        format!("{NAME} API error {status}")
    } else {
        format!("{NAME} API error {status}: {}", clip(body, 300))
    }
}

#[derive(Debug)]
enum Block {
    Text(String),
    Thinking {
        thinking: String,
        signature: String,
    },
    Redacted(String),
    Tool {
        id: String,
        name: String,
        json: String,
        input: Option<Value>,
    },
    /// A block the provider made with its own tools (`server_tool_use`,
    /// `web_search_tool_result`): the start block as it came, and for a
    /// server tool call its streamed input.
    Server {
        block: Value,
        json: String,
    },
    /// A block type this engine does not model; dropped.
    Other,
}

/// Assembles the Anthropic event stream.
#[derive(Debug, Default)]
pub(crate) struct AnthropicAssembler {
    blocks: BTreeMap<u64, Block>,
    usage: Usage,
    stop_reason: Option<StopReason>,
    model: String,
    invalid: Vec<(String, String)>,
    /// Bytes of content assembled so far.
    size: usize,
}

fn merge_usage(usage: &mut Usage, v: Option<&Value>) {
    let Some(v) = v else { return };
    let field = |name: &str| v.get(name).and_then(Value::as_u64);
    if let Some(n) = field("input_tokens") {
        usage.input_tokens = n;
    }
    if let Some(n) = field("output_tokens") {
        usage.output_tokens = n;
    }
    if let Some(n) = field("cache_creation_input_tokens") {
        usage.cache_creation_input_tokens = n;
    }
    if let Some(n) = field("cache_read_input_tokens") {
        usage.cache_read_input_tokens = n;
    }
    if let Some(n) = v
        .get("server_tool_use")
        .and_then(|s| s.get("web_search_requests"))
        .and_then(Value::as_u64)
    {
        usage.web_search_requests = n;
    }
}

fn str_field(v: &Value, name: &str) -> String {
    v.get(name)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

impl AnthropicAssembler {
    fn close(&mut self, index: u64) {
        if let Some(Block::Tool {
            id, json, input, ..
        }) = self.blocks.get_mut(&index)
            && input.is_none()
        {
            *input = Some(tool_input(id, json, &mut self.invalid));
        }
    }
}

impl Assembler for AnthropicAssembler {
    fn event(&mut self, name: &str, data: &str, emit: Emit<'_>) -> Result<bool, Failure> {
        match name {
            "ping" => return Ok(false),
            "message_stop" => return Ok(true),
            "message_start"
            | "content_block_start"
            | "content_block_delta"
            | "content_block_stop"
            | "message_delta"
            | "error" => {}
            // Event types added to the API later are skipped.
            _ => return Ok(false),
        }
        let v = parse_data(NAME, name, data)?;
        let index = v.get("index").and_then(Value::as_u64).unwrap_or(0);
        match name {
            "message_start" => {
                let message = v.get("message");
                if let Some(model) = message.and_then(|m| m.get("model")).and_then(Value::as_str) {
                    self.model = model.to_string();
                }
                merge_usage(&mut self.usage, message.and_then(|m| m.get("usage")));
            }
            "content_block_start" => {
                let cb = v.get("content_block").cloned().unwrap_or(Value::Null);
                let block = match cb.get("type").and_then(Value::as_str) {
                    Some("text") => Block::Text(str_field(&cb, "text")),
                    Some("thinking") => Block::Thinking {
                        thinking: str_field(&cb, "thinking"),
                        signature: str_field(&cb, "signature"),
                    },
                    Some("redacted_thinking") => Block::Redacted(str_field(&cb, "data")),
                    Some("tool_use") => {
                        let id = str_field(&cb, "id");
                        let name = str_field(&cb, "name");
                        emit(StreamEvent::ToolUseStart {
                            id: id.clone(),
                            name: name.clone(),
                        });
                        // A start block may already carry a complete input.
                        let json = match cb.get("input") {
                            Some(input @ Value::Object(o)) if !o.is_empty() => input.to_string(),
                            _ => String::new(),
                        };
                        Block::Tool {
                            id,
                            name,
                            json,
                            input: None,
                        }
                    }
                    Some("server_tool_use" | "web_search_tool_result") => {
                        if let (Some("server_tool_use"), Some(name)) = (
                            cb.get("type").and_then(Value::as_str),
                            cb.get("name").and_then(Value::as_str),
                        ) {
                            emit(StreamEvent::ToolUseStart {
                                id: str_field(&cb, "id"),
                                name: name.to_string(),
                            });
                        }
                        Block::Server {
                            block: cb,
                            json: String::new(),
                        }
                    }
                    _ => Block::Other,
                };
                self.size += match &block {
                    Block::Text(t) | Block::Redacted(t) => t.len(),
                    Block::Thinking { thinking, .. } => thinking.len(),
                    Block::Tool { json, .. } => json.len(),
                    Block::Server { block, .. } => block.to_string().len(),
                    Block::Other => 0,
                };
                if let Block::Text(t) = &block
                    && !t.is_empty()
                {
                    emit(StreamEvent::TextDelta(t.clone()));
                }
                self.blocks.insert(index, block);
            }
            "content_block_delta" => {
                let delta = v.get("delta").cloned().unwrap_or(Value::Null);
                let kind = delta.get("type").and_then(Value::as_str).unwrap_or("");
                match (kind, self.blocks.get_mut(&index)) {
                    ("text_delta", Some(Block::Text(text))) => {
                        let piece = str_field(&delta, "text");
                        self.size += piece.len();
                        text.push_str(&piece);
                        emit(StreamEvent::TextDelta(piece));
                    }
                    ("thinking_delta", Some(Block::Thinking { thinking, .. })) => {
                        let piece = str_field(&delta, "thinking");
                        self.size += piece.len();
                        thinking.push_str(&piece);
                        emit(StreamEvent::ThinkingDelta(piece));
                    }
                    ("signature_delta", Some(Block::Thinking { signature, .. })) => {
                        let piece = str_field(&delta, "signature");
                        self.size += piece.len();
                        signature.push_str(&piece);
                    }
                    (
                        "input_json_delta",
                        Some(Block::Tool {
                            json, input: None, ..
                        }),
                    ) => {
                        let piece = str_field(&delta, "partial_json");
                        self.size += piece.len();
                        json.push_str(&piece);
                    }
                    ("input_json_delta", Some(Block::Server { json, .. })) => {
                        let piece = str_field(&delta, "partial_json");
                        self.size += piece.len();
                        json.push_str(&piece);
                    }
                    _ => {}
                }
            }
            "content_block_stop" => self.close(index),
            "message_delta" => {
                if let Some(reason) = v
                    .get("delta")
                    .and_then(|d| d.get("stop_reason"))
                    .and_then(Value::as_str)
                {
                    self.stop_reason = Some(
                        serde_json::from_value(Value::from(reason))
                            .unwrap_or_else(|_| StopReason::Other(reason.to_string())),
                    );
                }
                merge_usage(&mut self.usage, v.get("usage"));
            }
            "error" => {
                let err = v.get("error").cloned().unwrap_or(Value::Null);
                let kind = str_field(&err, "type");
                let message = format!(
                    "{NAME} stream error ({kind}): {}",
                    str_field(&err, "message")
                );
                let error = ProviderError {
                    server: ServerSaid::from_error(&err),
                    ..ProviderError::new(ProviderErrorKind::Stream, message)
                };
                return Err(match kind.as_str() {
                    "overloaded_error" | "api_error" | "rate_limit_error" => Failure::Retry {
                        error,
                        retry_after: None,
                    },
                    _ => Failure::Fatal(error),
                });
            }
            _ => {}
        }
        Ok(false)
    }

    fn ended_early(&mut self) -> Result<(), Failure> {
        Err(Failure::retry(
            ProviderErrorKind::Stream,
            format!("the {NAME} stream ended before `message_stop`"),
        ))
    }

    fn content_bytes(&self) -> usize {
        self.size
    }

    fn finish(mut self) -> ModelResponse {
        let open: Vec<u64> = self.blocks.keys().copied().collect();
        for index in open {
            self.close(index);
        }
        let content = std::mem::take(&mut self.blocks)
            .into_values()
            .filter_map(|b| match b {
                Block::Text(text) => Some(ContentBlock::Text { text }),
                Block::Thinking {
                    thinking,
                    signature,
                } => Some(ContentBlock::Thinking {
                    thinking,
                    signature,
                }),
                Block::Redacted(data) => Some(ContentBlock::RedactedThinking { data }),
                Block::Tool {
                    id, name, input, ..
                } => Some(ContentBlock::ToolUse {
                    id,
                    name,
                    input: input.unwrap_or_else(|| json!({})),
                }),
                Block::Server { block, json } => server_block(block, &json),
                Block::Other => None,
            })
            .collect();
        ModelResponse {
            message: Message::assistant(content),
            stop_reason: self.stop_reason,
            usage: self.usage,
            model: self.model,
            invalid_tool_inputs: self.invalid,
            converted_tool_calls: Vec::new(),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::message::{History, Role, Sampling, ToolDefinition, ToolResultContent};
    use std::sync::Arc;

    /// The body as it was built before messages were written directly:
    /// every message through a `Value`.
    fn through_values(req: &ModelRequest) -> Vec<u8> {
        let mut v: Value = serde_json::from_slice(&request_body(&ModelRequest {
            messages: Vec::new(),
            ..req.clone()
        }))
        .unwrap();
        let mut messages: Vec<Value> = req.messages.iter().map(|m| message_value(m)).collect();
        if let Some(Value::Object(last)) = messages.last_mut()
            && let Some(Value::Array(blocks)) = last.get_mut("content")
            && let Some(Value::Object(block)) = blocks.iter_mut().rev().find(|b| {
                !matches!(
                    b.get("type").and_then(Value::as_str),
                    Some("thinking" | "redacted_thinking")
                )
            })
        {
            block.insert("cache_control".into(), ephemeral());
        }
        v["messages"] = Value::Array(messages);
        serde_json::to_vec(&v).unwrap()
    }

    #[test]
    fn messages_written_directly_have_the_bytes_of_values() {
        let history: History = vec![
            Message::user_text("a \"quoted\" prompt — with ünïcode\n and a tab\t"),
            Message {
                role: Role::Assistant,
                content: vec![
                    ContentBlock::Thinking {
                        thinking: "hm".into(),
                        signature: "sig".into(),
                    },
                    ContentBlock::RedactedThinking { data: "xx".into() },
                    ContentBlock::text("reading"),
                    ContentBlock::ToolUse {
                        id: "t1".into(),
                        name: "Read".into(),
                        input: json!({"b": 1.5, "a": [1, -2, {"z": null, "y": true}], "file_path": "/x"}),
                    },
                ],
            },
            Message::user(vec![
                ContentBlock::tool_result("t1", "body", false),
                ContentBlock::ToolResult {
                    tool_use_id: "t1".into(),
                    content: vec![
                        ToolResultContent::Text { text: "x".into() },
                        ToolResultContent::Image {
                            source: json!({"type": "base64", "media_type": "image/png", "data": "AAAA"}),
                        },
                    ],
                    is_error: true,
                },
                ContentBlock::Image {
                    source: json!({"type": "base64", "media_type": "image/png", "data": "BBBB"}),
                },
            ]),
            Message {
                role: Role::Assistant,
                content: vec![ContentBlock::Thinking {
                    thinking: "last".into(),
                    signature: String::new(),
                }],
            },
        ]
        .into_iter()
        .map(Arc::new)
        .collect();
        let tools: Arc<[ToolDefinition]> = Arc::from(vec![ToolDefinition {
            name: "Read".into(),
            description: "reads".into(),
            input_schema: json!({"type": "object"}),
        }]);
        for n in 0..=history.len() {
            let req = ModelRequest {
                model: "m".into(),
                system: Arc::from("sys"),
                tools: Arc::clone(&tools),
                messages: history[..n].to_vec(),
                max_tokens: 10,
                sampling: Sampling {
                    temperature: Some(0.5),
                    thinking_budget: Some(1024),
                    effort: None,
                },
                server_tools: Vec::new(),
            };
            assert_eq!(
                String::from_utf8(request_body(&req)).unwrap(),
                String::from_utf8(through_values(&req)).unwrap(),
                "{n} messages"
            );
        }
    }
}
