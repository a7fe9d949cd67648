//! Integration suites, plus the shared test kit.

pub mod kit;
mod provider;
mod reload;
