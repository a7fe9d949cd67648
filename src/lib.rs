//! cadre: a declarative, config-driven agent engine.
//!
//! Agents, feature flags, prompt templates and tool schemas are data, loaded
//! from files into an immutable snapshot and reloaded while the engine runs.
//! See `DESIGN.md` in the shared folder for the module map; dependencies
//! point down: cli → runtime → agent_tool → tools → provider → message →
//! snapshot → templates/catalog → config.

pub mod agent_tool;
pub mod catalog;
pub mod cli;
pub mod config;
pub mod diagnostic;
pub mod fleet;
pub mod mcp;
pub mod message;
pub mod permissions;
pub mod provider;
pub mod raw;
mod raw_simple;
pub mod reload;
pub mod runtime;
pub mod snapshot;
pub mod teams;
pub mod templates;
pub mod tools;

#[cfg(test)]
mod text_guard;
