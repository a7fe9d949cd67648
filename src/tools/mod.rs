//! Tools: the `Tool` trait, the built-in tools, permission checks, and tool
//! schemas as data with their trimming rules.
//!
//! Built-in tools take Claude Code's names and input fields (Bash, Read,
//! Write, Edit, Glob, Grep) so agent files written for it work unchanged.
//! Relative paths resolve against the session's working directory, given in
//! [`ToolContext`]. This module does not know which agent is running.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures_util::future::BoxFuture;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

pub mod permissions;
pub mod spec;

/// What a tool call may use from its session.
#[derive(Debug, Clone)]
pub struct ToolContext {
    /// The session's working directory; relative paths resolve against it.
    pub cwd: PathBuf,
    /// Cancelled when the call's turn is cancelled; long-running tools stop
    /// (Bash kills its process group).
    pub cancel: CancellationToken,
}

impl ToolContext {
    pub fn new(cwd: impl Into<PathBuf>) -> Self {
        ToolContext {
            cwd: cwd.into(),
            cancel: CancellationToken::new(),
        }
    }

    /// `path` made absolute against the working directory.
    pub fn resolve(&self, path: &str) -> PathBuf {
        let p = Path::new(path);
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.cwd.join(p)
        }
    }
}

/// The result of one tool call, as text for the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutput {
    pub text: String,
    pub is_error: bool,
}

impl ToolOutput {
    pub fn ok(text: impl Into<String>) -> Self {
        ToolOutput {
            text: text.into(),
            is_error: false,
        }
    }

    pub fn error(text: impl Into<String>) -> Self {
        ToolOutput {
            text: text.into(),
            is_error: true,
        }
    }
}

/// A tool the engine can run. Input has already been validated against the
/// tool's schema when `call` runs.
pub trait Tool: Send + Sync {
    fn name(&self) -> &str;
    /// Read-only tools of one turn run concurrently; others run in order.
    fn read_only(&self) -> bool;
    fn call<'a>(&'a self, input: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput>;
}

/// The built-in tools that run in-process: Bash, Edit, Glob, Grep, Read,
/// Write. (The Agent tool is the runtime's.)
pub fn builtin_tools() -> Vec<Arc<dyn Tool>> {
    Vec::new()
}
