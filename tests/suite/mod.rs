//! Integration suites, plus the shared test kit.

pub mod harness;
pub mod kit;
mod agents;
mod provider;
mod run;
