//! A failed request as the model may be told of it: a [`ProviderProblem`]
//! is data (a kind, an HTTP status, the server's own words), worded by the
//! `provider_problem` template. `ProviderError`'s `Display` is cadre's
//! account for people and never reaches the model.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::sse::clip;
use super::{ProviderError, ProviderErrorKind};

/// What a server said about a failure: the API's error type (e.g.
/// `overloaded_error`) and its message, on one line and at most
/// [`ServerSaid::MAX_CHARS`] characters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerSaid {
    pub error_type: Option<String>,
    pub message: String,
}

impl ServerSaid {
    /// The longest message kept; the rest is cut with an ellipsis.
    pub const MAX_CHARS: usize = 300;

    fn new(error_type: Option<&str>, message: &str) -> Option<ServerSaid> {
        let one_line = message.split_whitespace().collect::<Vec<_>>().join(" ");
        let error_type = error_type.filter(|t| !t.is_empty()).map(|t| clip(t, 60));
        if one_line.is_empty() && error_type.is_none() {
            return None;
        }
        Some(ServerSaid {
            error_type,
            message: clip(&one_line, Self::MAX_CHARS),
        })
    }

    /// From an error response's body: `{"error": {"type", "message"}}`,
    /// `{"error": "message"}`, or else the body's text itself.
    pub(crate) fn from_body(body: &str) -> Option<ServerSaid> {
        if let Ok(v) = serde_json::from_str::<Value>(body)
            && let Some(err) = v.get("error")
            && let Some(said) = ServerSaid::from_error(err)
        {
            return Some(said);
        }
        ServerSaid::new(None, body)
    }

    /// From the `error` member of a response or stream event.
    pub(crate) fn from_error(err: &Value) -> Option<ServerSaid> {
        match err {
            Value::String(message) => ServerSaid::new(None, message),
            Value::Object(o) => ServerSaid::new(
                o.get("type").and_then(Value::as_str),
                o.get("message").and_then(Value::as_str).unwrap_or_default(),
            ),
            _ => None,
        }
    }
}

/// Why a model request failed, for the model (template
/// `provider_problem`). `message` is the server's own text, if it sent any.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ProviderProblem {
    /// An HTTP error status other than the two below.
    Http {
        status: u16,
        message: Option<String>,
    },
    /// 429, or a `rate_limit_error`.
    RateLimited { message: Option<String> },
    /// 529, or an `overloaded_error`.
    Overloaded { message: Option<String> },
    /// Another error the server reported inside its stream.
    ServerError { message: Option<String> },
    /// No answer within the idle timeout.
    Timeout,
    /// The connection could not be made or failed.
    ConnectionFailed,
    /// The stream was cut before the message ended.
    StreamBroke,
    /// The answer was not what the API sends.
    BadResponse,
    /// The provider is not set up (no key, bad URL).
    Misconfigured,
}

impl From<&ProviderError> for ProviderProblem {
    fn from(e: &ProviderError) -> ProviderProblem {
        let message = e.server.as_ref().map(|s| s.message.clone());
        let error_type = e.server.as_ref().and_then(|s| s.error_type.as_deref());
        match (&e.kind, error_type) {
            (ProviderErrorKind::Status(429), _) | (_, Some("rate_limit_error")) => {
                ProviderProblem::RateLimited { message }
            }
            (ProviderErrorKind::Status(529), _) | (_, Some("overloaded_error")) => {
                ProviderProblem::Overloaded { message }
            }
            (ProviderErrorKind::Status(status), _) => ProviderProblem::Http {
                status: *status,
                message,
            },
            (ProviderErrorKind::Stream, _) if e.server.is_some() => {
                ProviderProblem::ServerError { message }
            }
            (ProviderErrorKind::Stream, _) => ProviderProblem::StreamBroke,
            (ProviderErrorKind::Timeout, _) => ProviderProblem::Timeout,
            (ProviderErrorKind::Network, _) => ProviderProblem::ConnectionFailed,
            (ProviderErrorKind::BadResponse, _) => ProviderProblem::BadResponse,
            (ProviderErrorKind::Config, _) => ProviderProblem::Misconfigured,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn status(code: u16, body: &str) -> ProviderProblem {
        ProviderProblem::from(&ProviderError {
            server: ServerSaid::from_body(body),
            ..ProviderError::new(ProviderErrorKind::Status(code), "cadre's words")
        })
    }

    #[test]
    fn statuses_and_server_types_pick_the_kind() {
        let body =
            r#"{"type":"error","error":{"type":"api_error","message":"Internal  server\n error"}}"#;
        assert_eq!(
            status(500, body),
            ProviderProblem::Http {
                status: 500,
                message: Some("Internal server error".into())
            }
        );
        assert_eq!(
            status(429, ""),
            ProviderProblem::RateLimited { message: None }
        );
        assert_eq!(
            status(
                400,
                r#"{"error":{"type":"overloaded_error","message":"busy"}}"#
            ),
            ProviderProblem::Overloaded {
                message: Some("busy".into())
            }
        );
        assert_eq!(
            status(502, "<html>bad gateway</html>"),
            ProviderProblem::Http {
                status: 502,
                message: Some("<html>bad gateway</html>".into())
            }
        );
        let cut = ProviderError::new(ProviderErrorKind::Stream, "the stream was cut: eof");
        assert_eq!(ProviderProblem::from(&cut), ProviderProblem::StreamBroke);
    }

    #[test]
    fn the_server_message_is_bounded() {
        let long = "x".repeat(5000);
        let said = ServerSaid::from_body(&long).unwrap();
        assert_eq!(said.message.chars().count(), ServerSaid::MAX_CHARS + 1);
        assert!(said.message.ends_with('…'));
        assert_eq!(ServerSaid::from_body("   "), None);
    }
}
