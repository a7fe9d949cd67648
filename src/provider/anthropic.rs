//! The Anthropic Messages API: request body, error bodies and the streamed
//! event assembly.
//!
//! The body's keys come in a fixed order with `messages` last, so two
//! requests that differ only at the end of the conversation share every
//! byte before that point (what the prompt cache and forks rely on). Cache
//! breakpoints go on the last system block, the last tool and the last
//! block of the last message.

use std::borrow::Cow;
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
    match req.sampling.thinking_budget {
        None => {}
        // Off on purpose (`--thinking disabled`, `MAX_THINKING_TOKENS=0`),
        // said as Claude Code says it.
        Some(0) => {
            body.insert("thinking".into(), json!({"type": "disabled"}));
        }
        // The API wants the budget below max_tokens.
        Some(budget) => {
            let budget = budget.min(req.max_tokens.saturating_sub(1)).max(1);
            body.insert(
                "thinking".into(),
                json!({"type": "enabled", "budget_tokens": budget}),
            );
        }
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
        write_last_message(m, out);
    }
    out.extend_from_slice(b"]}");
}

/// The last message with the cache breakpoint on its last block that is
/// not thinking (which cannot carry one), written straight from the
/// message: the bytes `to_value`, inserting `cache_control` into that
/// block's object and `to_vec` give, without building the `Value` (the
/// last message of a parent that started a thousand children holds a
/// thousand tool results or notifications).
fn write_last_message(m: &Message, out: &mut Vec<u8>) {
    let target = m.content.iter().rposition(|b| {
        !matches!(
            b,
            ContentBlock::Thinking { .. } | ContentBlock::RedactedThinking { .. }
        )
    });
    out.extend_from_slice(b"{\"role\":");
    if serde_json::to_writer(&mut *out, &m.role).is_err() {
        out.extend_from_slice(b"null");
    }
    out.extend_from_slice(b",\"content\":[");
    for (i, block) in m.content.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        let start = out.len();
        if serde_json::to_writer(&mut *out, block).is_err() {
            out.truncate(start);
            out.extend_from_slice(b"null");
            continue;
        }
        if Some(i) != target {
            continue;
        }
        let written = &out[start..];
        if written.last() == Some(&b'}')
            && memchr::memmem::find(written, b"\"cache_control\"").is_none()
        {
            let empty = written.len() == 2;
            out.pop();
            if !empty {
                out.push(b',');
            }
            out.extend_from_slice(b"\"cache_control\":{\"type\":\"ephemeral\"}}");
        } else {
            // A block that already names a breakpoint (kept as a provider
            // sent it): the `Value` path replaces it where it stands.
            let mut value = serde_json::to_value(block).unwrap_or(Value::Null);
            if let Value::Object(obj) = &mut value {
                obj.insert("cache_control".into(), ephemeral());
            }
            out.truncate(start);
            if serde_json::to_writer(&mut *out, &value).is_err() {
                out.extend_from_slice(b"null");
            }
        }
    }
    out.extend_from_slice(b"]}");
}

#[cfg(test)]
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
    /// Tests: read every event through `Value` (the typed path off).
    #[cfg(test)]
    untyped: bool,
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
    if let Some(t) = v
        .get("service_tier")
        .and_then(|t| serde_json::from_value(t.clone()).ok())
    {
        usage.service_tier = Some(t);
    }
    let nested = |outer: &str, inner: &str| v.get(outer)?.get(inner)?.as_u64();
    for (to, outer, inner) in [
        (
            &mut usage.web_search_requests,
            "server_tool_use",
            "web_search_requests",
        ),
        (
            &mut usage.web_fetch_requests,
            "server_tool_use",
            "web_fetch_requests",
        ),
        (
            &mut usage.cache_creation_5m_input_tokens,
            "cache_creation",
            "ephemeral_5m_input_tokens",
        ),
        (
            &mut usage.cache_creation_1h_input_tokens,
            "cache_creation",
            "ephemeral_1h_input_tokens",
        ),
        (
            &mut usage.thinking_tokens,
            "output_tokens_details",
            "thinking_tokens",
        ),
    ] {
        if let Some(n) = nested(outer, inner) {
            *to = n;
        }
    }
}

/// The field of a `content_block_delta`'s delta that holds its text.
fn delta_field(kind: &str) -> Option<&'static str> {
    match kind {
        "text_delta" => Some("text"),
        "thinking_delta" => Some("thinking"),
        "signature_delta" => Some("signature"),
        "input_json_delta" => Some("partial_json"),
        _ => None,
    }
}

/// The frequent stream events as typed structs (see
/// [`AnthropicAssembler::typed_event`]). Strings borrow from the event's
/// text unless they hold escapes. A missing field is `None`; a field of
/// another type fails the parse (and the `Value` path reads the event).
mod wire {
    use std::borrow::Cow;

    use serde::Deserialize;
    use serde_json::value::RawValue;

    use crate::message::Usage;

    #[derive(Deserialize)]
    pub struct Delta<'a> {
        #[serde(default)]
        pub index: u64,
        #[serde(borrow)]
        pub delta: Fields<'a>,
    }

    #[derive(Deserialize)]
    pub struct Start<'a> {
        #[serde(default)]
        pub index: u64,
        #[serde(borrow)]
        pub content_block: Fields<'a>,
    }

    /// A start block's or a delta's fields (each kind has some of them).
    #[derive(Deserialize)]
    pub struct Fields<'a> {
        #[serde(rename = "type", borrow)]
        pub kind: Cow<'a, str>,
        #[serde(borrow, default)]
        pub text: Option<Cow<'a, str>>,
        #[serde(borrow, default)]
        pub thinking: Option<Cow<'a, str>>,
        #[serde(borrow, default)]
        pub signature: Option<Cow<'a, str>>,
        #[serde(borrow, default)]
        pub partial_json: Option<Cow<'a, str>>,
        #[serde(borrow, default)]
        pub data: Option<Cow<'a, str>>,
        #[serde(borrow, default)]
        pub id: Option<Cow<'a, str>>,
        #[serde(borrow, default)]
        pub name: Option<Cow<'a, str>>,
        #[serde(borrow, default)]
        pub input: Option<&'a RawValue>,
    }

    #[derive(Deserialize)]
    pub struct Stop {
        #[serde(default)]
        pub index: u64,
    }

    #[derive(Deserialize)]
    pub struct MessageStart<'a> {
        #[serde(borrow, default)]
        pub message: Option<StartMessage<'a>>,
    }

    #[derive(Deserialize)]
    pub struct StartMessage<'a> {
        #[serde(borrow, default)]
        pub model: Option<Cow<'a, str>>,
        #[serde(default)]
        pub usage: Option<WireUsage>,
    }

    #[derive(Deserialize)]
    pub struct MessageDelta<'a> {
        #[serde(borrow, default)]
        pub delta: Option<StopDelta<'a>>,
        #[serde(default)]
        pub usage: Option<WireUsage>,
    }

    #[derive(Deserialize)]
    pub struct StopDelta<'a> {
        #[serde(borrow, default)]
        pub stop_reason: Option<Cow<'a, str>>,
    }

    #[derive(Deserialize)]
    pub struct WireUsage {
        #[serde(default)]
        service_tier: Option<crate::message::ServiceTier>,
        input_tokens: Option<u64>,
        output_tokens: Option<u64>,
        cache_creation_input_tokens: Option<u64>,
        cache_read_input_tokens: Option<u64>,
        #[serde(default)]
        server_tool_use: Option<ServerUsage>,
        #[serde(default)]
        cache_creation: Option<CacheCreation>,
        #[serde(default)]
        output_tokens_details: Option<OutputDetails>,
    }

    #[derive(Deserialize)]
    struct ServerUsage {
        web_search_requests: Option<u64>,
        web_fetch_requests: Option<u64>,
    }

    #[derive(Deserialize)]
    struct CacheCreation {
        ephemeral_5m_input_tokens: Option<u64>,
        ephemeral_1h_input_tokens: Option<u64>,
    }

    #[derive(Deserialize)]
    struct OutputDetails {
        thinking_tokens: Option<u64>,
    }

    impl WireUsage {
        /// The counts this event names replace those before.
        pub fn merge_into(self, usage: &mut Usage) {
            let set = |to: &mut u64, from: Option<u64>| {
                if let Some(n) = from {
                    *to = n;
                }
            };
            set(&mut usage.input_tokens, self.input_tokens);
            set(&mut usage.output_tokens, self.output_tokens);
            set(
                &mut usage.cache_creation_input_tokens,
                self.cache_creation_input_tokens,
            );
            set(
                &mut usage.cache_read_input_tokens,
                self.cache_read_input_tokens,
            );
            if let Some(s) = self.server_tool_use {
                set(&mut usage.web_search_requests, s.web_search_requests);
                set(&mut usage.web_fetch_requests, s.web_fetch_requests);
            }
            if let Some(c) = self.cache_creation {
                set(
                    &mut usage.cache_creation_5m_input_tokens,
                    c.ephemeral_5m_input_tokens,
                );
                set(
                    &mut usage.cache_creation_1h_input_tokens,
                    c.ephemeral_1h_input_tokens,
                );
            }
            if let Some(d) = self.output_tokens_details {
                set(&mut usage.thinking_tokens, d.thinking_tokens);
            }
            if self.service_tier.is_some() {
                usage.service_tier = self.service_tier;
            }
        }
    }
}

fn str_field(v: &Value, name: &str) -> String {
    v.get(name)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

impl AnthropicAssembler {
    /// A block starts: counted, announced (a tool call's start, a block's
    /// first text) and kept until it closes.
    fn open_block(&mut self, index: u64, block: Block, emit: Emit<'_>) {
        match &block {
            Block::Tool { id, name, .. } => emit(StreamEvent::ToolUseStart {
                id: id.clone(),
                name: name.clone(),
            }),
            Block::Server { block, .. } => {
                if let (Some("server_tool_use"), Some(name)) = (
                    block.get("type").and_then(Value::as_str),
                    block.get("name").and_then(Value::as_str),
                ) {
                    emit(StreamEvent::ToolUseStart {
                        id: str_field(block, "id"),
                        name: name.to_string(),
                    });
                }
            }
            _ => {}
        }
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

    /// A delta of `kind` whose text (the field [`delta_field`] names) is
    /// `piece`, for the block at `index`.
    fn apply_delta(&mut self, index: u64, kind: &str, piece: String, emit: Emit<'_>) {
        match (kind, self.blocks.get_mut(&index)) {
            ("text_delta", Some(Block::Text(text))) => {
                self.size += piece.len();
                text.push_str(&piece);
                emit(StreamEvent::TextDelta(piece));
            }
            ("thinking_delta", Some(Block::Thinking { thinking, .. })) => {
                self.size += piece.len();
                thinking.push_str(&piece);
                emit(StreamEvent::ThinkingDelta(piece));
            }
            ("signature_delta", Some(Block::Thinking { signature, .. })) => {
                self.size += piece.len();
                signature.push_str(&piece);
                emit(StreamEvent::SignatureDelta(piece));
            }
            (
                "input_json_delta",
                Some(
                    Block::Tool {
                        json, input: None, ..
                    }
                    | Block::Server { json, .. },
                ),
            ) => {
                self.size += piece.len();
                json.push_str(&piece);
            }
            _ => {}
        }
    }

    fn stop_reason(&mut self, reason: &str) {
        self.stop_reason = Some(
            serde_json::from_value(Value::from(reason))
                .unwrap_or_else(|_| StopReason::Other(reason.to_string())),
        );
    }

    /// The frequent events read into typed structs that borrow from the
    /// event's text, instead of a `Value` (a map per object); `None` when
    /// the event is another kind or does not have the expected types, and
    /// then the `Value` path reads it with its tolerance of odd shapes.
    /// Both paths have the same effect on an event both can read.
    fn typed_event(&mut self, name: &str, data: &str, emit: Emit<'_>) -> Option<bool> {
        match name {
            "content_block_delta" => {
                let e: wire::Delta<'_> = serde_json::from_str(data).ok()?;
                let piece = match e.delta.kind.as_ref() {
                    "text_delta" => e.delta.text,
                    "thinking_delta" => e.delta.thinking,
                    "signature_delta" => e.delta.signature,
                    "input_json_delta" => e.delta.partial_json,
                    _ => None,
                };
                let kind = e.delta.kind;
                self.apply_delta(
                    e.index,
                    &kind,
                    piece.map(Cow::into_owned).unwrap_or_default(),
                    emit,
                );
            }
            "content_block_start" => {
                let e: wire::Start<'_> = serde_json::from_str(data).ok()?;
                let b = e.content_block;
                let text = |f: Option<Cow<'_, str>>| f.map(Cow::into_owned).unwrap_or_default();
                let block = match b.kind.as_ref() {
                    "text" => Block::Text(text(b.text)),
                    "thinking" => Block::Thinking {
                        thinking: text(b.thinking),
                        signature: text(b.signature),
                    },
                    "redacted_thinking" => Block::Redacted(text(b.data)),
                    "tool_use" => {
                        let json = match b.input {
                            None => String::new(),
                            Some(raw) => {
                                let input: Value = serde_json::from_str(raw.get()).ok()?;
                                match &input {
                                    Value::Object(o) if !o.is_empty() => input.to_string(),
                                    _ => String::new(),
                                }
                            }
                        };
                        Block::Tool {
                            id: text(b.id),
                            name: text(b.name),
                            json,
                            input: None,
                        }
                    }
                    // Server blocks are kept whole, as a `Value`.
                    _ => return None,
                };
                self.open_block(e.index, block, emit);
            }
            "content_block_stop" => {
                let e: wire::Stop = serde_json::from_str(data).ok()?;
                self.close(e.index);
            }
            "message_start" => {
                let e: wire::MessageStart<'_> = serde_json::from_str(data).ok()?;
                if let Some(m) = e.message {
                    if let Some(model) = m.model {
                        self.model = model.into_owned();
                    }
                    if let Some(u) = m.usage {
                        u.merge_into(&mut self.usage);
                    }
                }
            }
            "message_delta" => {
                let e: wire::MessageDelta<'_> = serde_json::from_str(data).ok()?;
                if let Some(reason) = e.delta.and_then(|d| d.stop_reason) {
                    self.stop_reason(&reason);
                }
                if let Some(u) = e.usage {
                    u.merge_into(&mut self.usage);
                }
            }
            _ => return None,
        }
        Some(false)
    }

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
        #[cfg(test)]
        let typed = !self.untyped;
        #[cfg(not(test))]
        let typed = true;
        if typed && let Some(done) = self.typed_event(name, data, emit) {
            return Ok(done);
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
                    Some("tool_use") => Block::Tool {
                        id: str_field(&cb, "id"),
                        name: str_field(&cb, "name"),
                        // A start block may already carry a complete input.
                        json: match cb.get("input") {
                            Some(input @ Value::Object(o)) if !o.is_empty() => input.to_string(),
                            _ => String::new(),
                        },
                        input: None,
                    },
                    Some("server_tool_use" | "web_search_tool_result") => Block::Server {
                        block: cb,
                        json: String::new(),
                    },
                    _ => Block::Other,
                };
                self.open_block(index, block, emit);
            }
            "content_block_delta" => {
                let delta = v.get("delta").cloned().unwrap_or(Value::Null);
                let kind = delta.get("type").and_then(Value::as_str).unwrap_or("");
                let piece = delta_field(kind).map_or_else(String::new, |f| str_field(&delta, f));
                self.apply_delta(index, kind, piece, emit);
            }
            "content_block_stop" => self.close(index),
            "message_delta" => {
                if let Some(reason) = v
                    .get("delta")
                    .and_then(|d| d.get("stop_reason"))
                    .and_then(Value::as_str)
                {
                    self.stop_reason(reason);
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
    use std::sync::{Arc, Mutex};

    /// Feeds `events` to an assembler; what it emitted, its size count and
    /// its response (or the first failure).
    fn assemble(events: &[(&str, &str)], untyped: bool) -> String {
        let mut a = AnthropicAssembler {
            untyped,
            ..AnthropicAssembler::default()
        };
        let seen = Mutex::new(Vec::new());
        let emit = |e: StreamEvent| seen.lock().unwrap().push(format!("{e:?}"));
        for (name, data) in events {
            if let Err(f) = a.event(name, data, &emit) {
                return format!("failed: {f:?}");
            }
        }
        let size = a.content_bytes();
        format!("{:?}\n{size}\n{:?}", seen.lock().unwrap(), a.finish())
    }

    /// The API's `usage.service_tier` is kept, by both paths.
    #[test]
    fn the_service_tier_the_api_names_is_kept() {
        let events = [(
            "message_start",
            r#"{"type":"message_start","message":{"id":"m","model":"claude-x","usage":{"input_tokens":1,"output_tokens":1,"service_tier":"priority"}}}"#,
        )];
        for untyped in [false, true] {
            let out = assemble(&events, untyped);
            assert!(out.contains("service_tier: Some(Priority)"), "{out}");
        }
    }

    /// Events the typed path reads and odd ones it leaves to the `Value`
    /// path: both give the same emitted events, size and response.
    #[test]
    fn typed_events_read_as_values_do() {
        let streams: Vec<Vec<(&str, &str)>> = vec![
            vec![
                (
                    "message_start",
                    r#"{"type":"message_start","message":{"id":"m","model":"claude-x","usage":{"input_tokens":10,"cache_read_input_tokens":4,"output_tokens":1,"service_tier":"priority"}}}"#,
                ),
                (
                    "content_block_start",
                    r#"{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}"#,
                ),
                (
                    "content_block_delta",
                    r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hm \"q\" \u00e9"}}"#,
                ),
                (
                    "content_block_delta",
                    r#"{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"sig"}}"#,
                ),
                (
                    "content_block_stop",
                    r#"{"type":"content_block_stop","index":0}"#,
                ),
                (
                    "content_block_start",
                    r#"{"type":"content_block_start","index":1,"content_block":{"type":"text","text":"Hi\n"}}"#,
                ),
                (
                    "content_block_delta",
                    r#"{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"there ünï"}}"#,
                ),
                (
                    "content_block_delta",
                    r#"{"type":"content_block_delta","index":1,"delta":{"type":"citations_delta","citation":{"x":1}}}"#,
                ),
                (
                    "content_block_stop",
                    r#"{"type":"content_block_stop","index":1}"#,
                ),
                (
                    "content_block_start",
                    r#"{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"t1","name":"Read","input":{}}}"#,
                ),
                (
                    "content_block_delta",
                    r#"{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"file_path\": "}}"#,
                ),
                (
                    "content_block_delta",
                    r#"{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"\"/x\"}"}}"#,
                ),
                (
                    "content_block_stop",
                    r#"{"type":"content_block_stop","index":2}"#,
                ),
                (
                    "content_block_start",
                    r#"{"type":"content_block_start","index":3,"content_block":{"type":"tool_use","id":"t2","name":"Glob","input":{"pattern":"*"}}}"#,
                ),
                (
                    "content_block_stop",
                    r#"{"type":"content_block_stop","index":3}"#,
                ),
                (
                    "content_block_start",
                    r#"{"type":"content_block_start","index":4,"content_block":{"type":"redacted_thinking","data":"xx"}}"#,
                ),
                (
                    "message_delta",
                    r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":42,"server_tool_use":{"web_search_requests":2}}}"#,
                ),
                ("message_stop", r#"{"type":"message_stop"}"#),
            ],
            vec![
                // Odd shapes: wrong types, a string index, a float count,
                // an input that is not an object, an unknown stop reason,
                // a repeated key, server blocks.
                (
                    "message_start",
                    r#"{"message":{"model":7,"usage":{"input_tokens":"many","output_tokens":3}}}"#,
                ),
                (
                    "content_block_start",
                    r#"{"index":"0","content_block":{"type":"text","text":5}}"#,
                ),
                (
                    "content_block_delta",
                    r#"{"index":0,"delta":{"type":"text_delta","text":{"no":1}}}"#,
                ),
                (
                    "content_block_delta",
                    r#"{"index":0,"delta":{"type":"text_delta","text":"a","text":"b"}}"#,
                ),
                (
                    "content_block_start",
                    r#"{"index":1,"content_block":{"type":"tool_use","id":"t","name":"N","input":"str"}}"#,
                ),
                (
                    "content_block_delta",
                    r#"{"index":1,"delta":{"type":"input_json_delta","partial_json":"[1]"}}"#,
                ),
                ("content_block_stop", r#"{"index":1}"#),
                (
                    "content_block_start",
                    r#"{"index":2,"content_block":{"type":"server_tool_use","id":"s","name":"web_search","input":{}}}"#,
                ),
                (
                    "content_block_delta",
                    r#"{"index":2,"delta":{"type":"input_json_delta","partial_json":"{\"query\":\"q\"}"}}"#,
                ),
                ("content_block_stop", r#"{"index":2}"#),
                (
                    "content_block_start",
                    r#"{"index":3,"content_block":{"type":"web_search_tool_result","tool_use_id":"s","content":[]}}"#,
                ),
                ("content_block_delta", r#"{"delta":{"type":"text_delta"}}"#),
                ("content_block_delta", r#"{"index":9}"#),
                ("content_block_stop", r#"{}"#),
                (
                    "message_delta",
                    r#"{"delta":{"stop_reason":"weird"},"usage":{"output_tokens":1.5,"input_tokens":-1}}"#,
                ),
                ("message_delta", r#"{"delta":null,"usage":null}"#),
                ("message_stop", r#"{}"#),
            ],
            vec![("message_start", "not json")],
        ];
        for (i, events) in streams.iter().enumerate() {
            assert_eq!(
                assemble(events, false),
                assemble(events, true),
                "stream {i}"
            );
        }
        // The typed path reads every event of the first stream
        // (message_stop is known by its name alone).
        let mut a = AnthropicAssembler::default();
        let emit = |_: StreamEvent| {};
        let untyped: Vec<&str> = streams[0]
            .iter()
            .filter(|(name, data)| a.typed_event(name, data, &emit).is_none())
            .map(|(name, _)| *name)
            .collect();
        assert_eq!(untyped, vec!["message_stop"]);
    }

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
            // Text naming the breakpoint's key, and a block whose own
            // object already has one (the key stays where it is).
            Message::user_text("set \"cache_control\": {} here"),
            Message {
                role: Role::Assistant,
                content: vec![ContentBlock::ToolUse {
                    id: "t2".into(),
                    name: "X".into(),
                    input: json!({"cache_control": {"type": "ephemeral"}}),
                }],
            },
            Message::user(vec![ContentBlock::ToolResult {
                tool_use_id: "t2".into(),
                content: Vec::new(),
                is_error: false,
            }]),
            Message {
                role: Role::Assistant,
                content: vec![serde_json::from_value(json!({
                    "type": "server_tool_use", "id": "s1", "name": "web_search",
                    "input": {"query": "q"}, "cache_control": {"type": "ephemeral"}, "extra": 1
                }))
                .unwrap()],
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
