//! Integration suites, plus the shared test kit.

mod agents;
mod background;
mod bad_input;
mod corpus;
mod faults;
pub mod harness;
mod headless;
mod hooks;
mod inspect;
pub mod kit;
mod load;
mod mcp;
mod newcomer;
mod provider;
mod reload;
mod run;
mod sdk;
mod text_tools;
mod worktrees;
