//! The Agent tool's logic: routing a call (the decision table), resolving a
//! child's model and tool pool, building a fork's messages, and the texts
//! returned to the caller.
//!
//! Everything here is a pure function of its inputs so it can be tested row
//! by row; the runtime calls these to start and finish a child. This module
//! does not talk to a provider and does not run anything.

mod effort;
mod fork;
mod model;
mod pool;
mod route;
pub mod texts;

pub use effort::{
    Effort, LEVELS as EFFORT_LEVELS, accepted as accepted_effort_levels, trim_effort,
};
pub use fork::{fork_messages, has_fork_boilerplate, without_incomplete_tool_calls};
pub use model::{ModelSource, ResolvedModel, resolve_fork_model, resolve_model};
pub use pool::{
    MEMORY_TOOLS, ToolOffer, Withheld, WithheldTool, default_type, spawnable_types, tool_pool,
    tools_summary, withheld_tools,
};
pub use route::{AgentInput, Route, RouteError, route};
pub use texts::ToolsColumn;

/// The tool's name as the model calls it.
pub const AGENT_TOOL: &str = "Agent";
/// Claude Code's older name for the Agent tool, accepted in rules.
pub const AGENT_TOOL_ALIAS: &str = "Task";
