//! Builders for Anthropic Messages SSE streams.
//!
//! [`message`] builds any assistant message block by block; text is sent
//! in two deltas and tool input JSON in several `input_json_delta`s, so the
//! client's accumulation is always exercised. [`text_reply`] and
//! [`tool_use_reply`] cover the common cases in one call.

use serde_json::{Value, json};

use super::server::{Reply, SseEvent};

#[derive(Debug, Clone)]
enum Block {
    Text(String),
    Thinking {
        thinking: String,
        signature: String,
    },
    Redacted(String),
    /// The input as raw JSON text (may be invalid on purpose).
    ToolUse {
        id: String,
        name: String,
        raw_input: String,
    },
}

/// A streamed assistant message under construction.
#[derive(Debug, Clone)]
pub struct MessageBuilder {
    id: String,
    blocks: Vec<Block>,
    model: String,
    stop_reason: Option<String>,
    input_tokens: u64,
    output_tokens: u64,
    cache_creation: u64,
    cache_read: u64,
    /// Of `cache_creation`, written for 5 minutes and for an hour.
    cache_split: Option<(u64, u64)>,
}

/// Starts a message (model `claude-test`, usage 10 in / 5 out).
pub fn message() -> MessageBuilder {
    MessageBuilder {
        id: "msg_test".to_string(),
        blocks: Vec::new(),
        model: "claude-test".to_string(),
        stop_reason: None,
        input_tokens: 10,
        output_tokens: 5,
        cache_creation: 0,
        cache_read: 0,
        cache_split: None,
    }
}

/// Splits `s` into about `parts` pieces on character boundaries.
pub fn split(s: &str, parts: usize) -> Vec<String> {
    let chars: Vec<char> = s.chars().collect();
    if chars.is_empty() {
        return vec![String::new()];
    }
    let size = chars.len().div_ceil(parts.max(1)).max(1);
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}

impl MessageBuilder {
    pub fn text(mut self, text: &str) -> Self {
        self.blocks.push(Block::Text(text.to_string()));
        self
    }

    pub fn thinking(mut self, thinking: &str, signature: &str) -> Self {
        self.blocks.push(Block::Thinking {
            thinking: thinking.to_string(),
            signature: signature.to_string(),
        });
        self
    }

    pub fn redacted_thinking(mut self, data: &str) -> Self {
        self.blocks.push(Block::Redacted(data.to_string()));
        self
    }

    pub fn tool_use(self, id: &str, name: &str, input: Value) -> Self {
        self.tool_use_raw(id, name, &input.to_string())
    }

    /// A tool_use whose streamed input is exactly `raw` (e.g. broken JSON).
    pub fn tool_use_raw(mut self, id: &str, name: &str, raw: &str) -> Self {
        self.blocks.push(Block::ToolUse {
            id: id.to_string(),
            name: name.to_string(),
            raw_input: raw.to_string(),
        });
        self
    }

    /// The message id (default `msg_test`). Claude Code joins assistant
    /// messages that share an id, as the parts of one streamed message.
    pub fn id(mut self, id: &str) -> Self {
        self.id = id.to_string();
        self
    }

    pub fn model(mut self, model: &str) -> Self {
        self.model = model.to_string();
        self
    }

    /// The stop reason; default `tool_use` when there is a tool_use block,
    /// else `end_turn`.
    pub fn stop_reason(mut self, reason: &str) -> Self {
        self.stop_reason = Some(reason.to_string());
        self
    }

    pub fn usage(mut self, input: u64, output: u64) -> Self {
        self.input_tokens = input;
        self.output_tokens = output;
        self
    }

    pub fn cache(mut self, creation: u64, read: u64) -> Self {
        self.cache_creation = creation;
        self.cache_read = read;
        self
    }

    /// `usage.cache_creation`: the 5-minute and 1-hour cache writes.
    pub fn cache_split(mut self, five_minutes: u64, one_hour: u64) -> Self {
        self.cache_split = Some((five_minutes, one_hour));
        self
    }

    /// The full event list, `message_start` to `message_stop`.
    pub fn events(&self) -> Vec<SseEvent> {
        let ev = |v: Value| {
            let name = v
                .get("type")
                .and_then(Value::as_str)
                .unwrap_or("message")
                .to_string();
            SseEvent::named(name, v.to_string())
        };
        let mut usage = json!({"input_tokens": self.input_tokens, "output_tokens": 1,
                      "cache_creation_input_tokens": self.cache_creation,
                      "cache_read_input_tokens": self.cache_read});
        if let Some((five_minutes, one_hour)) = self.cache_split {
            usage["cache_creation"] = json!({"ephemeral_5m_input_tokens": five_minutes,
                                             "ephemeral_1h_input_tokens": one_hour});
        }
        let mut out = vec![ev(json!({"type": "message_start", "message": {
            "id": self.id, "type": "message", "role": "assistant", "model": self.model,
            "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": usage}}))];
        out.push(ev(json!({"type": "ping"})));
        for (index, block) in self.blocks.iter().enumerate() {
            let delta =
                |d: Value| ev(json!({"type": "content_block_delta", "index": index, "delta": d}));
            match block {
                Block::Text(text) => {
                    out.push(ev(json!({"type": "content_block_start", "index": index,
                                       "content_block": {"type": "text", "text": ""}})));
                    for piece in split(text, 2) {
                        out.push(delta(json!({"type": "text_delta", "text": piece})));
                    }
                }
                Block::Thinking {
                    thinking,
                    signature,
                } => {
                    out.push(ev(json!({"type": "content_block_start", "index": index,
                                       "content_block": {"type": "thinking", "thinking": "", "signature": ""}})));
                    for piece in split(thinking, 2) {
                        out.push(delta(json!({"type": "thinking_delta", "thinking": piece})));
                    }
                    out.push(delta(
                        json!({"type": "signature_delta", "signature": signature}),
                    ));
                }
                Block::Redacted(data) => {
                    out.push(ev(json!({"type": "content_block_start", "index": index,
                                       "content_block": {"type": "redacted_thinking", "data": data}})));
                }
                Block::ToolUse {
                    id,
                    name,
                    raw_input,
                } => {
                    out.push(ev(json!({"type": "content_block_start", "index": index,
                                       "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}})));
                    for piece in split(raw_input, 4) {
                        out.push(delta(
                            json!({"type": "input_json_delta", "partial_json": piece}),
                        ));
                    }
                }
            }
            out.push(ev(json!({"type": "content_block_stop", "index": index})));
        }
        let has_tool = self
            .blocks
            .iter()
            .any(|b| matches!(b, Block::ToolUse { .. }));
        let stop = self
            .stop_reason
            .clone()
            .unwrap_or_else(|| if has_tool { "tool_use" } else { "end_turn" }.into());
        out.push(ev(
            json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
                           "usage": {"output_tokens": self.output_tokens}}),
        ));
        out.push(ev(json!({"type": "message_stop"})));
        out
    }

    /// The stream as a reply.
    pub fn reply(&self) -> Reply {
        Reply::Sse(self.events())
    }
}

/// A reply with one text block.
pub fn text_reply(text: &str) -> Reply {
    message().text(text).reply()
}

/// A reply with one tool_use block (stop reason `tool_use`).
pub fn tool_use_reply(id: &str, name: &str, input: Value) -> Reply {
    message().tool_use(id, name, input).reply()
}

/// An in-stream `error` event.
pub fn error_event(kind: &str, message: &str) -> SseEvent {
    SseEvent::named(
        "error",
        json!({"type": "error", "error": {"type": kind, "message": message}}).to_string(),
    )
}

/// A 200 stream that fails at once with `overloaded_error`.
pub fn overloaded_stream() -> Reply {
    Reply::Sse(vec![error_event("overloaded_error", "Overloaded")])
}

/// The events that open a stream with one text block at index 0, for
/// streams that go on with [`text_delta`] events.
pub fn text_stream_head() -> Vec<SseEvent> {
    message().text("").events()[..3].to_vec()
}

/// One `text_delta` event for block 0.
pub fn text_delta(text: &str) -> SseEvent {
    SseEvent::named(
        "content_block_delta",
        json!({"type": "content_block_delta", "index": 0,
               "delta": {"type": "text_delta", "text": text}})
        .to_string(),
    )
}

/// A `ping` event.
pub fn ping() -> SseEvent {
    SseEvent::named("ping", json!({"type": "ping"}).to_string())
}
