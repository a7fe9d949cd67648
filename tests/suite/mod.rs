//! Integration suites, plus the shared test kit.

mod agents;
mod corpus;
pub mod harness;
mod hooks;
pub mod kit;
mod provider;
mod run;
mod worktrees;
