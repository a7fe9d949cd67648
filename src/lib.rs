//! cadre: a declarative, config-driven agent engine.
//!
//! Agents, feature flags, prompt templates and tool schemas are data, loaded
//! from files into an immutable snapshot and reloaded while the engine runs.
//! `docs/architecture.md` draws the layers of the modules below (a test
//! holds the code to it): each imports only the layers under it.

pub mod agent_tool;
pub mod catalog;
pub mod cli;
pub mod clock;
pub mod config;
pub mod diagnostic;
pub mod fleet;
pub mod mcp;
pub mod message;
pub mod paths;
pub mod permissions;
pub mod provider;
pub mod raw;
pub mod reload;
pub mod runtime;
pub mod snapshot;
pub mod teams;
pub mod telemetry;
pub mod templates;
pub mod tools;

#[cfg(test)]
mod layer_guard;
#[cfg(test)]
mod text_guard;
