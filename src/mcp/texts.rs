//! The MCP client's texts for the model, as typed template contexts.

use super::client::CallError;
use crate::contexts;

contexts! {
    /// An MCP server failed to run a tool; `problem` is worded by the
    /// template (`kind`, and `detail`: rmcp's or the server's words).
    "error_mcp_call" => pub struct McpCallFailed {
        pub server: String = "db".into(),
        pub tool: String = "query".into(),
        pub problem: CallError = CallError::Request {
            method: "tasks/get".into(),
            error: "-32602: unknown task".into(),
        },
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::templates::Templates;

    /// The template words every kind as `Display` did before it moved
    /// there: the model's text did not change.
    #[test]
    fn every_call_error_is_worded_by_the_template_as_before() {
        let (t, _) = Templates::load(None);
        let all = [
            CallError::Protocol("connection closed".into()),
            CallError::UnexpectedAnswer,
            CallError::NewerTask,
            CallError::MoreInput,
            CallError::Request {
                method: "tasks/get".into(),
                error: "unknown task".into(),
            },
            CallError::NoTask("query".into()),
            CallError::TaskFailed("disk full".into()),
            CallError::TaskCancelled,
            CallError::TaskResult,
            CallError::MessageTooLong {
                bytes: 20_000_000,
                limit: 16_777_216,
            },
        ];
        for e in all {
            let text = t
                .render(&McpCallFailed {
                    server: "db".into(),
                    tool: "query".into(),
                    problem: e.clone(),
                })
                .unwrap();
            assert_eq!(text, format!("MCP server `db` failed to run `query`: {e}"));
        }
    }
}
