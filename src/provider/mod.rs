//! Model providers: the Anthropic Messages API and OpenAI-compatible chat
//! completions, both streaming, with retries.
//!
//! A provider turns a [`ModelRequest`] into one [`ModelResponse`], calling
//! back with stream events as they arrive. Retryable failures (429, 500,
//! 502, 503, 529, connection errors, a stream cut mid-message) are retried
//! with exponential backoff and jitter, honouring `retry-after`; others fail
//! at once with the provider's message. The API key never appears in an
//! error. This module knows nothing of tools or agents.

use std::fmt;

use crate::config::ProviderSettings;
use crate::message::{ModelRequest, ModelResponse};

/// Something that happened while a response streamed in.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamEvent {
    TextDelta(String),
    ThinkingDelta(String),
    ToolUseStart {
        id: String,
        name: String,
    },
    /// An attempt failed and another will follow after `delay_ms`.
    Retrying {
        attempt: u32,
        delay_ms: u64,
        reason: String,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProviderErrorKind {
    /// The server answered with this HTTP status.
    Status(u16),
    /// Could not connect, or the connection failed.
    Network,
    /// The stream was cut, stalled or malformed.
    Stream,
    /// The provider is misconfigured (no key, bad URL).
    Config,
}

/// A request that failed for good (after any retries).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ProviderError {
    pub kind: ProviderErrorKind,
    pub message: String,
}

impl fmt::Display for ProviderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// A configured provider.
#[derive(Debug, Clone)]
pub struct Provider {
    settings: ProviderSettings,
}

impl Provider {
    /// Builds the provider from settings and the process environment
    /// (`ANTHROPIC_BASE_URL`, `ANTHROPIC_API_KEY`, or `api_key_env`).
    pub fn new(
        settings: &ProviderSettings,
        env: &[(String, String)],
    ) -> Result<Provider, ProviderError> {
        let _ = env;
        Ok(Provider {
            settings: settings.clone(),
        })
    }

    /// The exact bytes that `send` puts in the request body.
    pub fn request_body(&self, req: &ModelRequest) -> Vec<u8> {
        let _ = (req, &self.settings);
        Vec::new()
    }

    /// Sends the request, streaming; retries as described above.
    pub async fn send(
        &self,
        req: &ModelRequest,
        on_event: &(dyn Fn(StreamEvent) + Send + Sync),
    ) -> Result<ModelResponse, ProviderError> {
        let _ = (req, on_event);
        Err(ProviderError {
            kind: ProviderErrorKind::Config,
            message: "not implemented".into(),
        })
    }
}
