//! Integration suites, plus the shared test kit.

mod agents;
mod corpus;
pub mod harness;
pub mod kit;
mod mcp;
mod provider;
mod run;
