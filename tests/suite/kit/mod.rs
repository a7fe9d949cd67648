//! The model-API test kit: a fake server for the Anthropic and OpenAI wire
//! protocols that plays scripted replies, records every request and checks
//! conversation invariants on it, plus SSE builders for both protocols.
//!
//! ```ignore
//! let server = FakeServer::start([anthropic::text_reply("hi")]);
//! let provider = Provider::new(&kit::anthropic_settings(), &server.anthropic_env())?;
//! // ... send, then assert on server.requests()
//! ```

#![allow(dead_code, unused_imports)]

pub mod anthropic;
pub mod invariants;
pub mod nats;
pub mod openai;
mod server;
pub mod shape;
pub mod wire_schema;

use cadre::config::{ProviderKind, ProviderSettings};

pub use server::{FakeServer, RecordedRequest, Reply, SseEvent, TEST_CA, TEST_KEY, encode};

/// Provider settings for tests: short timeouts and near-instant backoff so
/// retry paths run fast. Base URL and key come from the environment
/// (see [`FakeServer::anthropic_env`]).
pub fn anthropic_settings() -> ProviderSettings {
    ProviderSettings {
        kind: ProviderKind::Anthropic,
        base_url: None,
        model: "claude-test".to_string(),
        api_key_env: None,
        max_tokens: 1024,
        temperature: None,
        thinking_budget: None,
        connect_timeout_ms: 2_000,
        idle_timeout_ms: 5_000,
        max_retries: 3,
        retry_base_ms: 1,
        retry_max_ms: 5,
        tool_call_fallback: None,
        ..ProviderSettings::default()
    }
}

/// Like [`anthropic_settings`] for an OpenAI-compatible server at `url`.
pub fn openai_settings(url: &str) -> ProviderSettings {
    ProviderSettings {
        kind: ProviderKind::Openai,
        base_url: Some(url.to_string()),
        model: "gpt-test".to_string(),
        ..anthropic_settings()
    }
}
