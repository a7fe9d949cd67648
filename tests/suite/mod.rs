//! Integration suites, plus the shared test kit.

mod agents;
mod background;
mod corpus;
pub mod harness;
mod inspect;
pub mod kit;
mod provider;
mod run;
