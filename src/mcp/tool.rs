//! An MCP server's tool as a cadre [`Tool`]: named `mcp__SERVER__TOOL`,
//! with the server's description and input schema, calling through the
//! server's connection.

use std::sync::{Arc, OnceLock};

use futures_util::future::BoxFuture;
use serde_json::Value;

use super::texts::McpCallFailed;
use crate::message::ToolDefinition;
use crate::tools::outcome::{CallCancelled, McpResult};
use crate::tools::{Tool, ToolContext, ToolOutput};

use super::client::{Connection, ServerTool};

/// `mcp__SERVER__TOOL`, with characters outside `[A-Za-z0-9_-]` in either
/// part replaced by `_` (as Claude Code does), so the name is a valid API
/// tool name.
pub fn tool_name(server: &str, tool: &str) -> String {
    format!("mcp__{}__{}", normalize(server), normalize(tool))
}

fn normalize(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// One tool of one connected server.
pub struct McpTool {
    name: String,
    server: String,
    tool: ServerTool,
    conn: Arc<Connection>,
    validator: OnceLock<Option<Arc<jsonschema::Validator>>>,
}

impl McpTool {
    pub fn new(server: &str, tool: ServerTool, conn: Arc<Connection>) -> Self {
        McpTool {
            name: tool_name(server, &tool.name),
            server: server.to_string(),
            tool,
            conn,
            validator: OnceLock::new(),
        }
    }

    /// The server's name, as configured.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// The definition the model sees: the server's description and schema.
    pub fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: self.name.clone(),
            description: self.tool.description.clone(),
            input_schema: self.tool.input_schema.clone(),
        }
    }

    /// Checks `input` against the server's schema; `Err` lists the problems,
    /// each naming the field. A schema that does not compile rejects nothing.
    pub fn validate(&self, input: &Value) -> Result<(), Vec<String>> {
        let validator = self.validator.get_or_init(|| {
            jsonschema::validator_for(&self.tool.input_schema)
                .ok()
                .map(Arc::new)
        });
        let Some(v) = validator else {
            return Ok(());
        };
        crate::tools::schema_issues(v, input)
    }
}

impl Tool for McpTool {
    fn name(&self) -> &str {
        &self.name
    }

    /// Only when the server annotates the tool with `readOnlyHint: true`.
    fn read_only(&self) -> bool {
        self.tool.read_only
    }

    fn call<'a>(&'a self, input: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let call = self
                .conn
                .call(&self.tool.name, input, ctx.progress.as_ref());
            tokio::select! {
                r = call => match r {
                    Ok(out) => {
                        let text = McpResult { parts: out.parts };
                        let mut o = if out.is_error {
                            ToolOutput::error(text)
                        } else {
                            ToolOutput::ok(text)
                        };
                        o.images = out.images;
                        o
                    }
                    Err(e) => ToolOutput::error(McpCallFailed {
                        server: self.server.clone(),
                        tool: self.tool.name.clone(),
                        problem: e,
                    }),
                },
                () = ctx.cancel.cancelled() => ToolOutput::error(CallCancelled {}),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_prefixed_and_normalized() {
        assert_eq!(tool_name("echo", "echo"), "mcp__echo__echo");
        assert_eq!(
            tool_name("my server", "get.file"),
            "mcp__my_server__get_file"
        );
    }
}
