//! Small enumerations that settings and agent definitions share.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// How tool calls are approved (SPEC §17). `Bubble` is internal: a fork
/// sends its permission prompts to its parent's session. Claude Code's
/// `auto` (a classifier model approves what the user would) and `manual`
/// (its newer name for `default`) are read as `Default`: cadre has no
/// classifier, so under `auto` every call a rule does not settle is asked
/// (docs/claude-code-differences.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum PermissionMode {
    #[serde(rename = "default", alias = "auto", alias = "manual")]
    Default,
    #[serde(rename = "acceptEdits")]
    AcceptEdits,
    #[serde(rename = "bypassPermissions")]
    BypassPermissions,
    #[serde(rename = "dontAsk")]
    DontAsk,
    #[serde(rename = "plan")]
    Plan,
    #[serde(rename = "bubble")]
    Bubble,
}

impl PermissionMode {
    /// The one bypass rule: where `disableBypassPermissionsMode` is set
    /// (`bypass_disabled`), `bypassPermissions` runs as `default`; every
    /// other mode is kept. Applied wherever a session's mode is settled
    /// (settings, the main session's plan, a fleet task) and again at each
    /// tool call's decision, which covers a mode a client sets mid-session.
    pub fn unless_bypass_disabled(self, bypass_disabled: bool) -> PermissionMode {
        match self {
            PermissionMode::BypassPermissions if bypass_disabled => PermissionMode::Default,
            other => other,
        }
    }

    /// The names a user may write (not `bubble`, which is internal).
    pub const USER_NAMES: &'static [&'static str] = &[
        "default",
        "acceptEdits",
        "bypassPermissions",
        "dontAsk",
        "plan",
        "auto",
        "manual",
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            PermissionMode::Default => "default",
            PermissionMode::AcceptEdits => "acceptEdits",
            PermissionMode::BypassPermissions => "bypassPermissions",
            PermissionMode::DontAsk => "dontAsk",
            PermissionMode::Plan => "plan",
            PermissionMode::Bubble => "bubble",
        }
    }
}

impl fmt::Display for PermissionMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for PermissionMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "default" | "auto" | "manual" => PermissionMode::Default,
            "acceptEdits" => PermissionMode::AcceptEdits,
            "bypassPermissions" => PermissionMode::BypassPermissions,
            "dontAsk" => PermissionMode::DontAsk,
            "plan" => PermissionMode::Plan,
            "bubble" => PermissionMode::Bubble,
            _ => {
                return Err(format!(
                    "expected one of {}, found {s:?}",
                    PermissionMode::USER_NAMES.join(", ")
                ));
            }
        })
    }
}

/// Whether the main session coordinates workers (SPEC §4).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    #[default]
    Normal,
    Coordinator,
}

impl Mode {
    /// The name used in settings (`mode = "coordinator"`) and `[modes.NAME]`.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Normal => "normal",
            Mode::Coordinator => "coordinator",
        }
    }
}

/// What a session is, for flag gates and `x-when` conditions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SessionKind {
    pub interactive: bool,
    pub coordinator: bool,
}

impl SessionKind {
    pub const NON_INTERACTIVE: SessionKind = SessionKind {
        interactive: false,
        coordinator: false,
    };
    pub const INTERACTIVE: SessionKind = SessionKind {
        interactive: true,
        coordinator: false,
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_bypass_is_lowered_and_only_where_it_is_disabled() {
        use PermissionMode::*;
        for mode in [
            Default,
            AcceptEdits,
            BypassPermissions,
            DontAsk,
            Plan,
            Bubble,
        ] {
            assert_eq!(mode.unless_bypass_disabled(false), mode);
            let lowered = if mode == BypassPermissions {
                Default
            } else {
                mode
            };
            assert_eq!(mode.unless_bypass_disabled(true), lowered);
        }
    }

    /// Claude Code's `auto` and `manual` are read, from a flag and from
    /// settings, as `default`: nothing is approved that `default` asks about.
    #[test]
    fn auto_and_manual_read_as_default() {
        for name in ["auto", "manual", "default"] {
            assert_eq!(name.parse::<PermissionMode>(), Ok(PermissionMode::Default));
            let m: PermissionMode = serde_json::from_value(serde_json::json!(name)).unwrap();
            assert_eq!(m, PermissionMode::Default);
        }
        assert_eq!(PermissionMode::Default.as_str(), "default");
    }
}
