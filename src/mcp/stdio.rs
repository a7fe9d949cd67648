//! A stdio MCP server: the child process and the transport to it, with a
//! cap on one message.
//!
//! rmcp drops a line longer than its limit and goes on reading, so the
//! request it answered would wait for ever. Here the server's stdout is
//! read by cadre first ([`crate::raw::lines`]): lines within the cap go on
//! to rmcp unchanged; an over-long one is never held, but its top-level
//! `id` is picked out as it goes by, and when it was an answer, rmcp gets
//! an error answer for that id instead ([`too_long`] recognises it), so
//! the call fails at once and the session goes on.

use std::time::Duration;

use rmcp::RoleClient;
use rmcp::model::ErrorData;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::transport::async_rw::AsyncRwTransport;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWriteExt as _, DuplexStream};
use tokio::process::{Child, ChildStderr, ChildStdin};

/// The longest message cadre takes from an MCP server (stdio or an SDK
/// client's in-process server): rmcp's own limit, which is also the limit
/// of one event from a streamable-HTTP server.
pub const MAX_MESSAGE_BYTES: usize = rmcp::transport::async_rw::DEFAULT_MAX_LINE_LENGTH;

/// The JSON-RPC error code (implementation-defined range) of the answer
/// put in place of an over-long one.
const TOO_LONG_CODE: i32 = -32_090;

/// How long a closing server gets to exit, before SIGTERM and again
/// before SIGKILL (as rmcp waits for its own child processes).
const EXIT_GRACE: Duration = Duration::from_secs(3);

/// A running stdio server and the transport to it.
pub struct StdioServer {
    /// Spawned with `kill_on_drop`: dropping the transport ends it.
    child: Option<Child>,
    transport: AsyncRwTransport<RoleClient, DuplexStream, ChildStdin>,
}

impl StdioServer {
    /// Starts `cmd` with piped stdio; `server` names it in messages.
    pub fn spawn(
        mut cmd: tokio::process::Command,
        server: &str,
    ) -> std::io::Result<(StdioServer, Option<ChildStderr>)> {
        cmd.stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd.spawn()?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(std::io::Error::other("the server's stdio was not piped"));
        };
        let stderr = child.stderr.take();
        let transport = client_transport(server, stdout, stdin);
        Ok((
            StdioServer {
                child: Some(child),
                transport,
            },
            stderr,
        ))
    }

    /// The server's process id.
    pub fn id(&self) -> Option<u32> {
        self.child.as_ref()?.id()
    }

    /// Closes stdin and waits for the server to exit; SIGTERM, then
    /// SIGKILL, if it does not (the MCP specification's stdio shutdown).
    async fn shutdown(&mut self) -> std::io::Result<()> {
        self.transport.close().await?;
        let Some(child) = self.child.as_mut() else {
            return Ok(());
        };
        if tokio::time::timeout(EXIT_GRACE, child.wait()).await.is_ok() {
            self.child = None;
            return Ok(());
        }
        if let Some(pid) = child.id().and_then(|p| i32::try_from(p).ok()) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGTERM,
            );
            if tokio::time::timeout(EXIT_GRACE, child.wait()).await.is_ok() {
                self.child = None;
                return Ok(());
            }
        }
        let killed = child.kill().await;
        self.child = None;
        killed
    }
}

impl Transport<RoleClient> for StdioServer {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.transport.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        self.transport.receive().await
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.shutdown()
    }
}

/// An rmcp client transport over `read` and `write` (a server's stdout and
/// stdin, or a stream to an in-process server) whose incoming messages
/// pass the cap first.
pub fn client_transport<R, W>(
    server: &str,
    read: R,
    write: W,
) -> AsyncRwTransport<RoleClient, DuplexStream, W>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: tokio::io::AsyncWrite + Send + Unpin + 'static,
{
    // Nothing longer than the cap (or the short error put in place of a
    // longer line) reaches rmcp; its own limit only has to let that pass.
    AsyncRwTransport::new_client(capped(server, read, MAX_MESSAGE_BYTES), write)
        .with_max_line_length(MAX_MESSAGE_BYTES.max(64 * 1024) + 2)
}

/// The lines of `read`, each at most `max` bytes, on a stream of their own;
/// an over-long answer becomes an error answer for its id.
fn capped<R>(server: &str, read: R, max: usize) -> DuplexStream
where
    R: AsyncRead + Send + Unpin + 'static,
{
    let (ours, mut theirs) = tokio::io::duplex(64 * 1024);
    let server = server.to_string();
    tokio::spawn(async move {
        let mut input = tokio::io::BufReader::with_capacity(64 * 1024, read);
        let mut line = Vec::new();
        loop {
            let mut head = Head::default();
            let read =
                crate::raw::lines::next_line(&mut input, &mut line, max, |b| head.feed(b)).await;
            let out = match read {
                Ok(Some(crate::raw::lines::Line::Whole)) => {
                    line.push(b'\n');
                    std::mem::take(&mut line)
                }
                Ok(Some(crate::raw::lines::Line::TooLong(bytes))) => match head.answer_id() {
                    Some(id) => {
                        tracing::warn!(
                            "MCP server `{server}` answered with a message of {bytes} bytes, \
                                 over the limit of {max} bytes; the call fails"
                        );
                        let mut l = too_long_answer(id, bytes, max).into_bytes();
                        l.push(b'\n');
                        l
                    }
                    None => {
                        tracing::warn!(
                            "MCP server `{server}` sent a message of {bytes} bytes, over \
                                 the limit of {max} bytes; dropped"
                        );
                        continue;
                    }
                },
                Ok(None) => break,
                Err(e) => {
                    tracing::debug!("MCP server `{server}`: cannot read its output: {e}");
                    break;
                }
            };
            if theirs.write_all(&out).await.is_err() {
                // The transport is gone.
                break;
            }
            line = out;
        }
    });
    ours
}

/// The error answer that stands in for an over-long one.
fn too_long_answer(id: Value, bytes: u64, max: usize) -> String {
    json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {
            "code": TOO_LONG_CODE,
            "message": format!("the answer was {bytes} bytes, over the limit of {max} bytes"),
            "data": {"cadre": "message_too_long", "bytes": bytes, "limit": max},
        },
    })
    .to_string()
}

/// The size and the limit, when `e` is the error answer cadre put in place
/// of an over-long one.
pub fn too_long(e: &ErrorData) -> Option<(u64, u64)> {
    let data = e.data.as_ref()?;
    if e.code.0 != TOO_LONG_CODE || data.get("cadre")? != "message_too_long" {
        return None;
    }
    Some((data.get("bytes")?.as_u64()?, data.get("limit")?.as_u64()?))
}

/// Follows a JSON object byte by byte without keeping it, noting its
/// top-level `id` (kept only if short) and whether it has a `method`.
#[derive(Default)]
struct Head {
    depth: u32,
    in_string: bool,
    escaped: bool,
    /// The next string at depth 1 is a key.
    expect_key: bool,
    in_key: bool,
    key: Vec<u8>,
    /// The top-level key whose value comes next.
    last_key: Vec<u8>,
    /// The bytes of the `id` value, while it is being read.
    capture: Option<Vec<u8>>,
    id: Option<Vec<u8>>,
    has_method: bool,
}

/// Longest key and id value followed.
const SHORT: usize = 256;

impl Head {
    fn feed(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.byte(b);
        }
    }

    fn keep(&mut self, b: u8) {
        if let Some(c) = &mut self.capture {
            if c.len() < SHORT {
                c.push(b);
            } else {
                self.capture = None;
            }
        }
    }

    fn byte(&mut self, b: u8) {
        if self.in_string {
            self.keep(b);
            let closing = b == b'"' && !self.escaped;
            if self.in_key && !closing && self.key.len() < SHORT {
                self.key.push(b);
            }
            if self.escaped {
                self.escaped = false;
            } else if b == b'\\' {
                self.escaped = true;
            } else if closing {
                self.in_string = false;
                if self.in_key {
                    self.in_key = false;
                    self.last_key = std::mem::take(&mut self.key);
                }
            }
            return;
        }
        match b {
            b'"' => {
                self.in_string = true;
                if self.depth == 1 && self.expect_key {
                    self.in_key = true;
                    self.key.clear();
                }
                self.keep(b);
            }
            b'{' | b'[' => {
                self.depth += 1;
                if self.depth == 1 {
                    self.expect_key = b == b'{';
                } else {
                    self.keep(b);
                }
            }
            b'}' | b']' => {
                if self.depth == 1 {
                    self.end_value();
                } else {
                    self.keep(b);
                }
                self.depth = self.depth.saturating_sub(1);
            }
            b',' if self.depth == 1 => {
                self.end_value();
                self.expect_key = true;
            }
            b':' if self.depth == 1 => {
                self.expect_key = false;
                if self.last_key == b"id" {
                    self.capture = Some(Vec::new());
                } else if self.last_key == b"method" {
                    self.has_method = true;
                }
            }
            _ => self.keep(b),
        }
    }

    fn end_value(&mut self) {
        if let Some(c) = self.capture.take() {
            self.id = Some(c);
        }
    }

    /// The id of an answer (a message with an `id` that is a number or a
    /// string and no `method`).
    fn answer_id(&self) -> Option<Value> {
        if self.has_method {
            return None;
        }
        match serde_json::from_slice::<Value>(self.id.as_deref()?).ok()? {
            v @ (Value::Number(_) | Value::String(_)) => Some(v),
            _ => None,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn id_of(line: &str) -> Option<Value> {
        let mut h = Head::default();
        // Fed in small pieces, as a long line arrives.
        for piece in line.as_bytes().chunks(3) {
            h.feed(piece);
        }
        h.answer_id()
    }

    #[test]
    fn the_top_level_id_of_an_answer_is_found_wherever_it_is() {
        assert_eq!(
            id_of(r#"{"jsonrpc":"2.0","id":7,"result":{"id":1}}"#),
            Some(json!(7))
        );
        assert_eq!(
            id_of(r#"{"result":{"content":[{"id":"x","t":"a\"id\":3"}]}, "id" : "r-1" }"#),
            Some(json!("r-1"))
        );
        // A request or notification from the server is not an answer.
        assert_eq!(
            id_of(r#"{"jsonrpc":"2.0","id":7,"method":"x","params":{}}"#),
            None
        );
        assert_eq!(id_of(r#"{"jsonrpc":"2.0","result":{"id":1}}"#), None);
        assert_eq!(id_of(r#"{"id":{"a":1},"result":1}"#), None);
    }

    #[tokio::test]
    async fn an_over_long_answer_becomes_an_error_for_its_id() {
        let big = "x".repeat(100);
        let input = format!(
            "{{\"id\":1,\"result\":\"ok\"}}\n{{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":\"{big}\"}}\n{{\"id\":3}}\n"
        );
        let mut out = capped("s", std::io::Cursor::new(input.into_bytes()), 50);
        let mut text = String::new();
        tokio::io::AsyncReadExt::read_to_string(&mut out, &mut text)
            .await
            .unwrap();
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[0], json!({"id": 1, "result": "ok"}));
        assert_eq!(lines[1]["id"], 2);
        let e: ErrorData = serde_json::from_value(lines[1]["error"].clone()).unwrap();
        assert_eq!(too_long(&e), Some((136, 50)));
        assert_eq!(lines[2], json!({"id": 3}));
    }
}
