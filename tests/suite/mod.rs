//! Integration suites, plus the shared test kit.

mod agents;
mod bad_input;
mod corpus;
mod faults;
pub mod harness;
pub mod kit;
mod load;
mod provider;
mod run;
