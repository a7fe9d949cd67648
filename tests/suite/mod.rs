//! Integration suites, plus the shared test kit.

mod agents;
mod background;
mod bad_input;
mod bounded;
mod corpus;
mod faults;
pub mod harness;
mod hooks;
mod hostile;
mod inspect;
pub mod kit;
mod load;
mod mcp;
mod newcomer;
mod notebook;
mod permissions;
mod provider;
mod races;
mod reload;
mod run;
mod settings;
mod shutdown;
mod skills;
mod text_tools;
mod todos;
mod web;
pub mod worktrees;
