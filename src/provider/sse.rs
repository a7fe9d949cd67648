//! The streaming loop shared by both providers: bytes in, SSE events out,
//! each handed to a protocol-specific [`Assembler`].
//!
//! The loop owns the transport concerns: decoding SSE incrementally with
//! `eventsource-stream` (chunk boundaries fall anywhere), treating a stream
//! silent for the idle timeout as cut, and a stream that ends before its
//! final event as cut. The assembler owns the protocol: it turns events into
//! stream callbacks and, at the end, one `ModelResponse`.

use std::fmt::Display;
use std::time::Duration;

use eventsource_stream::{EventStreamError, Eventsource};
use futures_util::{Stream, StreamExt};
use serde_json::Value;

use super::retry::Failure;
use super::{ProviderErrorKind, StreamEvent};
use crate::message::ModelResponse;

/// Callback type for stream events.
pub(crate) type Emit<'a> = &'a (dyn Fn(StreamEvent) + Send + Sync);

/// Turns one protocol's SSE events into a response.
pub(crate) trait Assembler {
    /// Handles one event (`name` is the SSE `event:` field, `message` when
    /// absent). Returns `true` when it was the stream's final event.
    fn event(&mut self, name: &str, data: &str, emit: Emit<'_>) -> Result<bool, Failure>;

    /// Called when the byte stream ended without a final event. Returns the
    /// response if the protocol tolerates that, else a retryable failure.
    fn ended_early(&mut self) -> Result<(), Failure>;

    /// Builds the response from everything seen.
    fn finish(self) -> ModelResponse;
}

/// Feeds a byte stream through SSE decoding into `asm`. `idle` bounds the
/// wait for each chunk; `None` waits forever.
pub(crate) async fn drive<S, B, E, A>(
    stream: S,
    idle: Option<Duration>,
    mut asm: A,
    emit: Emit<'_>,
) -> Result<ModelResponse, Failure>
where
    S: Stream<Item = Result<B, E>>,
    B: AsRef<[u8]>,
    E: Display,
    A: Assembler,
{
    let events = stream.eventsource();
    let mut events = std::pin::pin!(events);
    loop {
        let next = match idle {
            Some(limit) => match tokio::time::timeout(limit, events.next()).await {
                Ok(next) => next,
                Err(_) => {
                    return Err(Failure::retry(
                        ProviderErrorKind::Stream,
                        format!("the stream sent nothing for {} ms", limit.as_millis()),
                    ));
                }
            },
            None => events.next().await,
        };
        match next {
            None => {
                asm.ended_early()?;
                return Ok(asm.finish());
            }
            Some(Ok(event)) => {
                let name = if event.event.is_empty() { "message" } else { event.event.as_str() };
                if asm.event(name, &event.data, emit)? {
                    return Ok(asm.finish());
                }
            }
            Some(Err(EventStreamError::Transport(e))) => {
                return Err(Failure::retry(ProviderErrorKind::Stream, format!("the stream was cut: {e}")));
            }
            Some(Err(EventStreamError::Utf8(e))) => {
                return Err(Failure::fatal(ProviderErrorKind::Stream, format!("the stream is not valid UTF-8: {e}")));
            }
            Some(Err(EventStreamError::Parser(e))) => {
                return Err(Failure::fatal(ProviderErrorKind::Stream, format!("the stream is not valid SSE: {e}")));
            }
        }
    }
}

/// Parses an event's JSON payload, naming the event when it is malformed.
pub(crate) fn parse_data(provider: &str, name: &str, data: &str) -> Result<Value, Failure> {
    serde_json::from_str(data).map_err(|e| {
        Failure::fatal(
            ProviderErrorKind::Stream,
            format!("malformed `{name}` event in the {provider} stream: {e} (data: {})", clip(data, 200)),
        )
    })
}

/// Turns a streamed tool input into a JSON object. Empty input is `{}`; an
/// unparseable or non-object input becomes `{}` and is recorded as invalid.
pub(crate) fn tool_input(id: &str, raw: &str, invalid: &mut Vec<(String, String)>) -> Value {
    if raw.trim().is_empty() {
        return Value::Object(Default::default());
    }
    match serde_json::from_str::<Value>(raw) {
        Ok(v @ Value::Object(_)) => v,
        Ok(_) => {
            invalid.push((id.to_string(), "tool input is not a JSON object".to_string()));
            Value::Object(Default::default())
        }
        Err(e) => {
            invalid.push((id.to_string(), format!("tool input is not valid JSON: {e}")));
            Value::Object(Default::default())
        }
    }
}

/// At most `max` characters of `s`, with an ellipsis when cut.
pub(crate) fn clip(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &s[..at]),
        None => s.to_string(),
    }
}
