//! MCP servers: connecting to them, their tools as cadre tools, and which
//! of those tools a session gets.
//!
//! [`McpManager`] (held by the runtime's `Engine`) owns every connection:
//! the shared servers from settings and `.mcp.json`, connected in the
//! background and kept in step with the snapshot at each turn, and the
//! servers an agent defines inline, started for one child session and
//! stopped when it ends. A ready server's tools are [`McpTool`]s named
//! `mcp__SERVER__TOOL`, carrying the server's description and JSON schema.
//! This module does not know about turns, requests or permissions: the
//! runtime asks it for tools and applies its own checks.

mod client;
mod config;
mod elicit;
mod manager;
pub mod oauth;
mod progress;
mod prompts;
mod resources;
mod sampling;
mod select;
mod sse;
mod stdio;
mod task;
mod texts;
mod tool;

pub use client::{ConnectError, Connection, LocalConnector, McpError};
pub use config::{effective_servers, plugin_servers, read_mcp_json, read_mcp_json_placed};
pub use elicit::{ElicitAction, ElicitAnswer, ElicitHooks, Elicitation, Elicitor};
pub use manager::{McpManager, RequiredError, ServerState};
pub use prompts::{PromptCommand, prompt_commands, run_prompt_command};
pub use resources::{RESOURCE_TOOLS, ResourceTool};
pub use sampling::{Sample, SampleError, Sampled, Sampler};
pub use select::{matches_entry, required_matches, session_mcp_tools};

/// The samples of the MCP client's template contexts, as (template,
/// verbatim, values).
#[cfg(test)]
pub(crate) fn template_samples() -> Vec<(&'static str, bool, serde_json::Value)> {
    texts::samples()
}
pub use tool::{McpTool, tool_name};
