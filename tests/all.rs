//! The integration-test binary: every suite module links into this one
//! executable so the crate is linked once.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
