//! Integration suites, plus the shared test kit.

mod agents;
mod background;
mod corpus;
pub mod harness;
mod hooks;
mod inspect;
pub mod kit;
mod provider;
mod run;
mod worktrees;
