//! Integration suites, plus the shared test kit.

mod agents;
mod corpus;
pub mod harness;
pub mod kit;
mod provider;
mod run;
mod text_tools;
