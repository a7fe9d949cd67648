//! Sampling: a server's `sampling/createMessage` answered by the session's
//! provider and model. Only offered when `mcp.sampling` is on; the CLI
//! supplies the [`Sampler`] (this module knows no provider).

use std::sync::Arc;

use futures_util::future::BoxFuture;
#[allow(deprecated)]
use rmcp::model::CreateMessageRequestParams;
use serde_json::Value;

use crate::message::{ContentBlock, Message};

/// One sampling request, in cadre's terms.
#[derive(Debug, Clone)]
pub struct Sample {
    /// The server that asked.
    pub server: String,
    pub system: Option<String>,
    pub messages: Vec<Message>,
    pub max_tokens: u32,
}

/// The model's answer.
#[derive(Debug, Clone)]
pub struct Sampled {
    pub text: String,
    pub model: String,
    /// MCP's words: `endTurn`, `maxTokens`, `stopSequence`.
    pub stop_reason: Option<String>,
}

/// Why a sampling request got no answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SampleError {
    /// Nobody approved it (the user, the SDK client, the settings).
    Refused(String),
    /// The model call failed.
    Failed(String),
}

/// Answers sampling requests (with the session's provider and model).
pub type Sampler =
    Arc<dyn Fn(Sample) -> BoxFuture<'static, Result<Sampled, SampleError>> + Send + Sync>;

/// The request's messages as cadre messages: text and images; any other
/// content (audio, tool use, tool results) is refused with a reason.
// Sampling is deprecated by a newer protocol revision (SEP-2577) that
// cadre's servers do not speak yet.
#[allow(deprecated)]
pub fn to_messages(params: &CreateMessageRequestParams) -> Result<Vec<Message>, String> {
    let mut out = Vec::new();
    for m in &params.messages {
        let v = serde_json::to_value(m).map_err(|e| e.to_string())?;
        let items: Vec<Value> = match v.get("content") {
            Some(Value::Array(a)) => a.clone(),
            Some(one) => vec![one.clone()],
            None => Vec::new(),
        };
        let mut blocks = Vec::new();
        for c in items {
            let field = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or("").to_string();
            match field("type").as_str() {
                "text" => blocks.push(ContentBlock::text(field("text"))),
                "image" => blocks.push(ContentBlock::Image {
                    source: serde_json::json!({
                        "type": "base64",
                        "media_type": field("mimeType"),
                        "data": field("data"),
                    }),
                }),
                other => {
                    return Err(format!(
                        "sampling content of type `{other}` is not supported"
                    ));
                }
            }
        }
        out.push(match v.get("role").and_then(Value::as_str) {
            Some("assistant") => Message::assistant(blocks),
            _ => Message::user(blocks),
        });
    }
    if out.is_empty() {
        return Err("the sampling request has no messages".into());
    }
    Ok(out)
}
