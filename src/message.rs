//! The provider-neutral conversation: messages, content blocks, usage.
//!
//! Values here serialise in the Anthropic Messages wire shape, which is also
//! the shape of transcript lines; the OpenAI provider maps to and from it.
//! Messages are immutable once built and shared behind `Arc`, so a parent
//! and its forks hold one copy of a history. This module knows nothing about
//! HTTP, tools or agents.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::config::ModelPrice;
use serde_json::Value;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    User,
    Assistant,
}

/// One block of a message's content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentBlock {
    Text {
        text: String,
    },
    Thinking {
        thinking: String,
        #[serde(default)]
        signature: String,
    },
    RedactedThinking {
        data: String,
    },
    ToolUse {
        id: String,
        name: String,
        input: Value,
    },
    ToolResult {
        tool_use_id: String,
        #[serde(deserialize_with = "text_or_blocks")]
        content: Vec<ToolResultContent>,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
    },
    /// Images pass through untouched (`source` is the provider's object).
    Image {
        source: Value,
    },
    /// A call of a tool the provider runs itself (Anthropic's web search).
    /// Kept exactly as it arrived, fields this engine does not know
    /// included, because the API wants it back unchanged.
    ServerToolUse {
        id: String,
        name: String,
        input: Value,
        #[serde(flatten)]
        rest: serde_json::Map<String, Value>,
    },
    /// The provider's result of its own web search, kept exactly.
    WebSearchToolResult {
        tool_use_id: String,
        content: Value,
        #[serde(flatten)]
        rest: serde_json::Map<String, Value>,
    },
}

/// What a tool result may hold.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToolResultContent {
    Text { text: String },
    Image { source: Value },
}

impl ContentBlock {
    pub fn text(text: impl Into<String>) -> Self {
        ContentBlock::Text { text: text.into() }
    }

    pub fn tool_result(
        tool_use_id: impl Into<String>,
        text: impl Into<String>,
        is_error: bool,
    ) -> Self {
        ContentBlock::ToolResult {
            tool_use_id: tool_use_id.into(),
            content: vec![ToolResultContent::Text { text: text.into() }],
            is_error,
        }
    }

    pub fn as_text(&self) -> Option<&str> {
        match self {
            ContentBlock::Text { text } => Some(text),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub role: Role,
    #[serde(deserialize_with = "text_or_blocks")]
    pub content: Vec<ContentBlock>,
}

/// Content as the Messages API accepts it: a list of blocks, or a string
/// (one text block), as Claude Code writes a prompt in its transcripts.
fn text_or_blocks<'de, D, B>(d: D) -> Result<Vec<B>, D::Error>
where
    D: serde::Deserializer<'de>,
    B: Deserialize<'de> + FromText,
{
    struct V<B>(std::marker::PhantomData<B>);
    impl<'de, B: Deserialize<'de> + FromText> serde::de::Visitor<'de> for V<B> {
        type Value = Vec<B>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a list of content blocks or a string")
        }
        fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Vec<B>, E> {
            Ok(vec![B::from_text(v.to_string())])
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, seq: A) -> Result<Vec<B>, A::Error> {
            Vec::<B>::deserialize(serde::de::value::SeqAccessDeserializer::new(seq))
        }
    }
    d.deserialize_any(V(std::marker::PhantomData))
}

/// A content block holding `text`.
trait FromText {
    fn from_text(text: String) -> Self;
}

impl FromText for ContentBlock {
    fn from_text(text: String) -> Self {
        ContentBlock::Text { text }
    }
}

impl FromText for ToolResultContent {
    fn from_text(text: String) -> Self {
        ToolResultContent::Text { text }
    }
}

impl Message {
    pub fn user(content: Vec<ContentBlock>) -> Self {
        Message {
            role: Role::User,
            content,
        }
    }

    pub fn user_text(text: impl Into<String>) -> Self {
        Message::user(vec![ContentBlock::text(text)])
    }

    pub fn assistant(content: Vec<ContentBlock>) -> Self {
        Message {
            role: Role::Assistant,
            content,
        }
    }

    /// The tool_use blocks of this message as (id, name, input).
    pub fn tool_uses(&self) -> impl Iterator<Item = (&str, &str, &Value)> {
        self.content.iter().filter_map(|b| match b {
            ContentBlock::ToolUse { id, name, input } => Some((id.as_str(), name.as_str(), input)),
            _ => None,
        })
    }

    /// The text blocks of this message joined with newlines, or `None` when
    /// it holds no text.
    pub fn joined_text(&self) -> Option<String> {
        let texts: Vec<&str> = self
            .content
            .iter()
            .filter_map(ContentBlock::as_text)
            .collect();
        if texts.is_empty() {
            None
        } else {
            Some(texts.join("\n"))
        }
    }
}

/// A conversation: a list of shared messages. Cloning copies pointers only.
pub type History = Vec<Arc<Message>>;

/// Token usage of one model response, with the prompt-cache counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    #[serde(default)]
    pub input_tokens: u64,
    #[serde(default)]
    pub output_tokens: u64,
    #[serde(default)]
    pub cache_creation_input_tokens: u64,
    #[serde(default)]
    pub cache_read_input_tokens: u64,
    /// Searches Anthropic's server-side web search ran (billed per search,
    /// not per token; `usage.server_tool_use.web_search_requests`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub web_search_requests: u64,
    /// Fetches Anthropic's server-side web fetch ran
    /// (`usage.server_tool_use.web_fetch_requests`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub web_fetch_requests: u64,
    /// Of `cache_creation_input_tokens`, those written to the 5-minute
    /// and to the 1-hour cache (`usage.cache_creation`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_creation_5m_input_tokens: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_creation_1h_input_tokens: u64,
    /// Of `output_tokens`, thinking (`usage.output_tokens_details`), when
    /// the API says.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub thinking_tokens: u64,
    /// The capacity the response was served from, when the API says
    /// (Anthropic's `usage.service_tier`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_tier: Option<ServiceTier>,
}

/// Anthropic's `usage.service_tier`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ServiceTier {
    Standard,
    Priority,
    Batch,
    /// A tier this version does not know.
    #[serde(other)]
    Other,
}

impl ServiceTier {
    pub fn as_str(self) -> &'static str {
        match self {
            ServiceTier::Standard => "standard",
            ServiceTier::Priority => "priority",
            ServiceTier::Batch => "batch",
            ServiceTier::Other => "other",
        }
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Usage {
    /// Everything the request and response counted: input (fresh, cache
    /// writes and cache reads) plus output.
    pub fn total(&self) -> u64 {
        self.input_tokens
            + self.cache_creation_input_tokens
            + self.cache_read_input_tokens
            + self.output_tokens
    }

    pub fn add(&mut self, other: &Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cache_creation_input_tokens += other.cache_creation_input_tokens;
        self.cache_read_input_tokens += other.cache_read_input_tokens;
        self.web_search_requests += other.web_search_requests;
        self.web_fetch_requests += other.web_fetch_requests;
        self.cache_creation_5m_input_tokens += other.cache_creation_5m_input_tokens;
        self.cache_creation_1h_input_tokens += other.cache_creation_1h_input_tokens;
        self.thinking_tokens += other.thinking_tokens;
        // The latest response's tier stands for the total.
        if other.service_tier.is_some() {
            self.service_tier = other.service_tier;
        }
    }

    /// What was counted since `start` (an earlier reading of the same
    /// running total).
    pub fn since(&self, start: &Usage) -> Usage {
        Usage {
            input_tokens: self.input_tokens.saturating_sub(start.input_tokens),
            output_tokens: self.output_tokens.saturating_sub(start.output_tokens),
            cache_creation_input_tokens: self
                .cache_creation_input_tokens
                .saturating_sub(start.cache_creation_input_tokens),
            cache_read_input_tokens: self
                .cache_read_input_tokens
                .saturating_sub(start.cache_read_input_tokens),
            web_search_requests: self
                .web_search_requests
                .saturating_sub(start.web_search_requests),
            web_fetch_requests: self
                .web_fetch_requests
                .saturating_sub(start.web_fetch_requests),
            cache_creation_5m_input_tokens: self
                .cache_creation_5m_input_tokens
                .saturating_sub(start.cache_creation_5m_input_tokens),
            cache_creation_1h_input_tokens: self
                .cache_creation_1h_input_tokens
                .saturating_sub(start.cache_creation_1h_input_tokens),
            thinking_tokens: self.thinking_tokens.saturating_sub(start.thinking_tokens),
            service_tier: self.service_tier,
        }
    }
}

/// Why the model stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    EndTurn,
    ToolUse,
    MaxTokens,
    StopSequence,
    PauseTurn,
    Refusal,
    #[serde(untagged)]
    Other(String),
}

/// A tool as the model sees it: already rendered and trimmed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDefinition {
    pub name: String,
    pub description: String,
    pub input_schema: Value,
}

/// Everything a provider needs for one request. The system prompt and tool
/// definitions are shared (`Arc`) so a fork sends its parent's exact bytes.
#[derive(Debug, Clone)]
pub struct ModelRequest {
    pub model: String,
    pub system: Arc<str>,
    pub tools: Arc<[ToolDefinition]>,
    pub messages: History,
    pub max_tokens: u32,
    pub sampling: Sampling,
    /// Tools the provider runs itself, as the provider's own definitions
    /// (Anthropic's `web_search_20250305`); sent after `tools`.
    pub server_tools: Vec<Value>,
}

/// Sampling and thinking settings; inherited unchanged by forks.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Sampling {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// Extended thinking budget in tokens; `None` leaves thinking off.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thinking_budget: Option<u32>,
    /// Reasoning effort (`low`, `medium`, `high`, `max`), already trimmed
    /// to what the model supports; `None` sends nothing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub effort: Option<String>,
}

/// One complete model response.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelResponse {
    pub message: Message,
    pub stop_reason: Option<StopReason>,
    pub usage: Usage,
    pub model: String,
    /// Tool calls whose streamed input was not valid JSON, as (tool_use id,
    /// parse error). Their `input` in `message` is `{}`; the engine answers
    /// them with an error result instead of running the tool.
    pub invalid_tool_inputs: Vec<(String, String)>,
    /// Ids of tool_use blocks that the provider made from JSON in the
    /// reply's text (`provider.tool_call_fallback`), not native calls.
    pub converted_tool_calls: Vec<String>,
}

/// What a response cost, in dollars.
pub fn cost_of(price: Option<&ModelPrice>, u: &Usage) -> f64 {
    let Some(p) = price else { return 0.0 };
    let m = |tokens: u64, per_million: f64| tokens as f64 * per_million / 1_000_000.0;
    m(u.input_tokens, p.input)
        + m(u.output_tokens, p.output)
        + m(u.cache_read_input_tokens, p.cache_read)
        + m(u.cache_creation_input_tokens, p.cache_write)
        + u.web_search_requests as f64 * p.web_search / 1000.0
}

/// The price of a model: its id, else the longest configured prefix.
pub fn price_of<'a>(
    prices: &'a std::collections::BTreeMap<String, ModelPrice>,
    model: &str,
) -> Option<&'a ModelPrice> {
    prices.get(model).or_else(|| {
        prices
            .iter()
            .filter(|(id, _)| model.starts_with(id.as_str()))
            .max_by_key(|(id, _)| id.len())
            .map(|(_, p)| p)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn blocks_serialise_in_the_anthropic_shape() {
        let m = Message::user(vec![
            ContentBlock::tool_result("toolu_1", "done", true),
            ContentBlock::text("next"),
        ]);
        let v = serde_json::to_value(&m).unwrap();
        assert_eq!(
            v,
            json!({"role":"user","content":[
                {"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"done"}],"is_error":true},
                {"type":"text","text":"next"}]})
        );
        let back: Message = serde_json::from_value(v).unwrap();
        assert_eq!(back, m);
    }

    #[test]
    fn successful_results_omit_is_error() {
        let v = serde_json::to_value(ContentBlock::tool_result("t", "ok", false)).unwrap();
        assert!(v.get("is_error").is_none());
    }

    #[test]
    fn total_counts_cache_reads_and_writes() {
        let u = Usage {
            input_tokens: 1,
            output_tokens: 2,
            cache_creation_input_tokens: 3,
            cache_read_input_tokens: 4,
            web_search_requests: 5,
            ..Usage::default()
        };
        assert_eq!(u.total(), 10, "searches are not tokens");
    }
}
