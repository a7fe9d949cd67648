//! Permission rules and decisions (SPEC §17). (Stub: implemented by the tools work.)

use std::path::Path;

use serde_json::Value;

use crate::config::{PermissionMode, PermissionSettings};

/// What the permission check says about one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Allow,
    /// Ask the user; `reason` names the rule or mode that asked.
    Ask {
        reason: String,
    },
    /// Refused; `reason` names the rule or mode that refused.
    Deny {
        reason: String,
    },
}

/// The parsed allow/ask/deny rules.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rules {
    pub allow: Vec<String>,
    pub ask: Vec<String>,
    pub deny: Vec<String>,
}

impl Rules {
    pub fn from_settings(p: &PermissionSettings) -> Self {
        Rules {
            allow: p.allow.clone(),
            ask: p.ask.clone(),
            deny: p.deny.clone(),
        }
    }

    /// The deny rule `Agent(T)` (or `Task(T)`) that forbids spawning `agent_type`.
    pub fn denied_agent_type(&self, agent_type: &str) -> Option<&str> {
        let _ = agent_type;
        None
    }
}

/// Decides one call in the order of SPEC §17 (hooks have already run).
pub fn decide(
    rules: &Rules,
    mode: PermissionMode,
    tool: &str,
    input: &Value,
    cwd: &Path,
) -> Decision {
    let _ = (rules, mode, tool, input, cwd);
    Decision::Allow
}
