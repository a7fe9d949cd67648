//! Builders for OpenAI chat-completions chunk streams.
//!
//! [`chat`] builds a streamed reply: a role chunk, content in two pieces,
//! each tool call as a header chunk (id, name) followed by argument
//! fragments, a finish chunk, a usage chunk and `data: [DONE]`.

use serde_json::{Value, json};

use super::anthropic::split;
use super::server::{Reply, SseEvent};

/// A streamed chat completion under construction.
#[derive(Debug, Clone)]
pub struct ChatBuilder {
    text: Option<String>,
    calls: Vec<(String, String, String)>,
    finish: Option<String>,
    usage: Option<(u64, u64)>,
    model: String,
    done: bool,
}

/// Starts a reply (model `gpt-test`, usage 10 prompt / 5 completion).
pub fn chat() -> ChatBuilder {
    ChatBuilder { text: None, calls: Vec::new(), finish: None, usage: Some((10, 5)), model: "gpt-test".into(), done: true }
}

impl ChatBuilder {
    pub fn text(mut self, text: &str) -> Self {
        self.text = Some(text.to_string());
        self
    }

    pub fn tool_call(self, id: &str, name: &str, arguments: Value) -> Self {
        self.tool_call_raw(id, name, &arguments.to_string())
    }

    /// A tool call whose streamed arguments are exactly `raw`.
    pub fn tool_call_raw(mut self, id: &str, name: &str, raw: &str) -> Self {
        self.calls.push((id.to_string(), name.to_string(), raw.to_string()));
        self
    }

    /// Default: `tool_calls` when there are calls, else `stop`.
    pub fn finish_reason(mut self, reason: &str) -> Self {
        self.finish = Some(reason.to_string());
        self
    }

    /// `None` leaves the usage chunk out.
    pub fn usage(mut self, usage: Option<(u64, u64)>) -> Self {
        self.usage = usage;
        self
    }

    /// Leaves out the closing `data: [DONE]`.
    pub fn without_done(mut self) -> Self {
        self.done = false;
        self
    }

    fn chunk(&self, delta: Value, finish: Value) -> SseEvent {
        SseEvent::data(
            json!({"id": "chatcmpl-test", "object": "chat.completion.chunk", "model": self.model,
                   "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
            .to_string(),
        )
    }

    pub fn events(&self) -> Vec<SseEvent> {
        let mut out = vec![self.chunk(json!({"role": "assistant", "content": ""}), Value::Null)];
        if let Some(text) = &self.text {
            for piece in split(text, 2) {
                out.push(self.chunk(json!({"content": piece}), Value::Null));
            }
        }
        for (index, (id, name, raw)) in self.calls.iter().enumerate() {
            out.push(self.chunk(
                json!({"tool_calls": [{"index": index, "id": id, "type": "function",
                                       "function": {"name": name, "arguments": ""}}]}),
                Value::Null,
            ));
            for piece in split(raw, 3) {
                out.push(self.chunk(json!({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}), Value::Null));
            }
        }
        let finish = self.finish.clone().unwrap_or_else(|| if self.calls.is_empty() { "stop" } else { "tool_calls" }.into());
        out.push(self.chunk(json!({}), Value::from(finish)));
        if let Some((prompt, completion)) = self.usage {
            out.push(SseEvent::data(
                json!({"id": "chatcmpl-test", "object": "chat.completion.chunk", "model": self.model, "choices": [],
                       "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                                 "total_tokens": prompt + completion}})
                .to_string(),
            ));
        }
        if self.done {
            out.push(SseEvent::data("[DONE]"));
        }
        out
    }

    pub fn reply(&self) -> Reply {
        Reply::Sse(self.events())
    }
}

/// A reply with text only.
pub fn text_reply(text: &str) -> Reply {
    chat().text(text).reply()
}

/// A reply with one tool call.
pub fn tool_call_reply(id: &str, name: &str, arguments: Value) -> Reply {
    chat().tool_call(id, name, arguments).reply()
}
