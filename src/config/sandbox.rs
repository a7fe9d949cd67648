//! Claude Code's `sandbox` settings key: read from every Claude Code
//! settings file into cadre's `[sandbox]` table, and narrowed where a
//! repository wrote it.
//!
//! Every layer may set the sandbox; the managed layer is merged last, so
//! what it says is forced. A project's or local file (they come with the
//! repository) may only make the sandbox stricter, and only in a trusted
//! folder: [`narrow`] drops what would widen it and says why.

use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::diagnostic::{Diagnostic, Pos};
use crate::raw::{Kind, Node};

/// `[sandbox]`: whether Bash commands (and command hooks) run inside an
/// operating-system sandbox, and what it lets them reach
/// (docs/sandbox.md).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SandboxSettings {
    /// Run Bash commands and command hooks in the sandbox.
    pub enabled: bool,
    /// A sandboxed Bash command runs without asking, unless a deny or ask
    /// rule matches it.
    pub auto_allow_bash_if_sandboxed: bool,
    /// Commands (a command name, or a prefix of words, `docker compose`)
    /// that run outside the sandbox, through the normal permission flow.
    pub excluded_commands: Vec<String>,
    /// Whether a call may ask to run unsandboxed
    /// (`dangerouslyDisableSandbox`), and then only through the normal
    /// permission flow.
    pub allow_unsandboxed_commands: bool,
    /// Refuse to run Bash when this machine cannot sandbox, instead of
    /// warning and running unsandboxed.
    pub fail_if_unavailable: bool,
    pub network: SandboxNetwork,
    pub filesystem: SandboxFilesystem,
}

impl Default for SandboxSettings {
    fn default() -> Self {
        SandboxSettings {
            enabled: false,
            auto_allow_bash_if_sandboxed: true,
            excluded_commands: Vec::new(),
            allow_unsandboxed_commands: true,
            fail_if_unavailable: false,
            network: SandboxNetwork::default(),
            filesystem: SandboxFilesystem::default(),
        }
    }
}

/// `[sandbox.network]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SandboxNetwork {
    /// Hosts commands may reach through cadre's proxy (`*.example.com`
    /// matches subdomains); `WebFetch(domain:…)` allow rules add to them.
    pub allowed_domains: Vec<String>,
    /// Commands may listen on loopback ports inside the sandbox.
    pub allow_local_binding: bool,
    /// Unix socket paths commands may connect to.
    pub allow_unix_sockets: Vec<String>,
    /// Commands may connect to any Unix socket.
    pub allow_all_unix_sockets: bool,
}

/// `[sandbox.filesystem]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SandboxFilesystem {
    /// Folders (or files) writable besides the working directory, the
    /// added directories and the session's temporary folder.
    pub allow_write: Vec<String>,
    /// Paths not writable, even inside a writable folder.
    pub deny_write: Vec<String>,
    /// Paths no command can read.
    pub deny_read: Vec<String>,
}

/// Keys of Claude Code's `sandbox` object cadre reads, as Claude Code
/// spells them, with cadre's key.
const TOP: &[(&str, &str)] = &[
    ("enabled", "enabled"),
    ("autoAllowBashIfSandboxed", "auto_allow_bash_if_sandboxed"),
    ("allowUnsandboxedCommands", "allow_unsandboxed_commands"),
    ("failIfUnavailable", "fail_if_unavailable"),
];
const NETWORK: &[(&str, &str)] = &[
    ("allowLocalBinding", "allow_local_binding"),
    ("allowAllUnixSockets", "allow_all_unix_sockets"),
];
const NETWORK_LISTS: &[(&str, &str)] = &[
    ("allowedDomains", "allowed_domains"),
    ("allowUnixSockets", "allow_unix_sockets"),
];
const FILESYSTEM_LISTS: &[(&str, &str)] = &[
    ("allowWrite", "allow_write"),
    ("denyWrite", "deny_write"),
    ("denyRead", "deny_read"),
];
/// Valid Claude Code keys cadre does not implement: listed as ignored,
/// not warned about.
const KNOWN_UNUSED: &[&str] = &[
    "ignoreViolations",
    "enableWeakerNestedSandbox",
    "enableWeakerNetworkIsolation",
    "ripgrep",
    "credentials",
    "bwrapPath",
    "socatPath",
    "enabledPlatforms",
    "allowAppleEvents",
    "allowNestedUserNamespaces",
];
const KNOWN_UNUSED_NETWORK: &[&str] =
    &["allowManagedDomainsOnly", "httpProxyPort", "socksProxyPort"];
const KNOWN_UNUSED_FILESYSTEM: &[&str] = &["allowRead", "allowManagedReadPathsOnly", "disabled"];

/// Claude Code's `sandbox` object in cadre's shape, with what the
/// translation of a settings file keeps beside it.
#[derive(Debug, Default)]
pub(super) struct Parts {
    /// The `sandbox` table.
    pub value: Map<String, Value>,
    /// Dotted cadre key (`sandbox.network.allowed_domains`) → position.
    pub positions: Vec<(String, Pos)>,
    /// Claude Code keys cadre does not implement.
    pub ignored: Vec<(String, Pos)>,
    pub problems: Vec<Diagnostic>,
}

/// Reads Claude Code's `sandbox` object into `sandbox` of cadre's shape.
/// A key of the wrong type is a warning at its position; a key Claude Code
/// does not know either is a warning too (a typo would otherwise leave the
/// sandbox looser than meant).
pub(super) fn translate(path: &Path, node: &Node, t: &mut Parts) {
    if !matches!(node.kind, Kind::Map(_)) {
        t.problems.push(wrong(path, node, "sandbox", "an object"));
        return;
    }
    for (key, value) in node.entries() {
        let name = key.name.as_str();
        if let Some((_, to)) = TOP.iter().find(|(k, _)| *k == name) {
            let dotted = format!("sandbox.{to}");
            if let Some(v) = boolean(path, value, &dotted, &format!("sandbox.{name}"), t) {
                t.value.insert(to.to_string(), v);
            }
        } else if name == "excludedCommands" {
            let dotted = "sandbox.excluded_commands";
            if let Some(v) = list(path, value, dotted, "sandbox.excludedCommands", t) {
                t.value.insert("excluded_commands".into(), v);
            }
        } else if name == "network" {
            section(
                path,
                value,
                "network",
                NETWORK,
                NETWORK_LISTS,
                KNOWN_UNUSED_NETWORK,
                t,
            );
        } else if name == "filesystem" {
            section(
                path,
                value,
                "filesystem",
                &[],
                FILESYSTEM_LISTS,
                KNOWN_UNUSED_FILESYSTEM,
                t,
            );
        } else if KNOWN_UNUSED.contains(&name) {
            t.ignored.push((format!("sandbox.{name}"), key.pos));
        } else {
            t.problems
                .push(unknown(path, key.pos, &format!("sandbox.{name}")));
        }
    }
}

fn section(
    path: &Path,
    node: &Node,
    name: &str,
    booleans: &[(&str, &str)],
    lists: &[(&str, &str)],
    unused: &[&str],
    t: &mut Parts,
) {
    if !matches!(node.kind, Kind::Map(_)) {
        t.problems
            .push(wrong(path, node, &format!("sandbox.{name}"), "an object"));
        return;
    }
    let mut table = match t.value.remove(name) {
        Some(Value::Object(m)) => m,
        _ => Map::new(),
    };
    for (key, value) in node.entries() {
        let k = key.name.as_str();
        let shown = format!("sandbox.{name}.{k}");
        if let Some((_, to)) = booleans.iter().find(|(b, _)| *b == k) {
            if let Some(v) = boolean(path, value, &format!("sandbox.{name}.{to}"), &shown, t) {
                table.insert(to.to_string(), v);
            }
        } else if let Some((_, to)) = lists.iter().find(|(l, _)| *l == k) {
            if let Some(v) = list(path, value, &format!("sandbox.{name}.{to}"), &shown, t) {
                table.insert(to.to_string(), v);
            }
        } else if unused.contains(&k) {
            t.ignored.push((shown, key.pos));
        } else {
            t.problems.push(unknown(path, key.pos, &shown));
        }
    }
    t.value.insert(name.to_string(), Value::Object(table));
}

/// A boolean value, its position kept under `dotted`.
fn boolean(path: &Path, value: &Node, dotted: &str, shown: &str, t: &mut Parts) -> Option<Value> {
    match value.kind {
        Kind::Bool(b) => {
            t.positions.push((dotted.to_string(), value.pos));
            Some(Value::Bool(b))
        }
        _ => {
            t.problems.push(wrong(path, value, shown, "true or false"));
            None
        }
    }
}

/// A list of strings, each item's position kept as `dotted[item]`.
fn list(path: &Path, value: &Node, dotted: &str, shown: &str, t: &mut Parts) -> Option<Value> {
    let Kind::Seq(items) = &value.kind else {
        t.problems
            .push(wrong(path, value, shown, "a list of strings"));
        return None;
    };
    let mut out = Vec::new();
    for item in items {
        match &item.kind {
            Kind::Str(s) => {
                t.positions.push((format!("{dotted}[{s}]"), item.pos));
                out.push(Value::String(s.clone()));
            }
            _ => t.problems.push(wrong(path, item, shown, "a string")),
        }
    }
    t.positions.push((dotted.to_string(), value.pos));
    Some(Value::Array(out))
}

fn wrong(path: &Path, value: &Node, key: &str, what: &str) -> Diagnostic {
    Diagnostic::warning(
        Some(path),
        Some(value.pos),
        format!(
            "{key}: expected {what}, found {}; ignored",
            value.type_name()
        ),
    )
}

fn unknown(path: &Path, pos: Pos, key: &str) -> Diagnostic {
    Diagnostic::warning(
        Some(path),
        Some(pos),
        format!("{key}: not a sandbox setting Claude Code or cadre knows; ignored"),
    )
}

/// What a repository's layer (project or local settings) may not set in
/// `sandbox`, because it would widen the sandbox: the dotted key and the
/// value that widens (`None`: any non-empty value).
const WIDENING: &[(&[&str], Option<bool>)] = &[
    (&["enabled"], Some(false)),
    (&["allow_unsandboxed_commands"], Some(true)),
    (&["fail_if_unavailable"], Some(false)),
    (&["excluded_commands"], None),
    (&["network", "allowed_domains"], None),
    (&["network", "allow_local_binding"], Some(true)),
    (&["network", "allow_unix_sockets"], None),
    (&["network", "allow_all_unix_sockets"], Some(true)),
    (&["filesystem", "allow_write"], None),
];

/// The dotted keys [`narrow`] may drop (`sandbox.network.allowed_domains`).
pub(super) fn widening_keys() -> impl Iterator<Item = String> {
    WIDENING
        .iter()
        .map(|(path, _)| format!("sandbox.{}", path.join(".")))
}

/// Drops from a repository layer's `sandbox` table what would widen the
/// sandbox (turn it off, exclude commands, allow domains, sockets or
/// writes); returns the dotted keys dropped. What narrows it (turning it
/// on, denying reads and writes, refusing to fall back) stays.
pub(super) fn narrow(sandbox: &mut Map<String, Value>) -> Vec<String> {
    let mut dropped = Vec::new();
    for (path, widens_when) in WIDENING {
        let Some((last, parents)) = path.split_last() else {
            continue;
        };
        let mut at = Some(&mut *sandbox);
        for p in parents {
            at = at
                .and_then(|m| m.get_mut(*p))
                .and_then(Value::as_object_mut);
        }
        let Some(map) = at else { continue };
        let widens = match (map.get(*last), widens_when) {
            (None, _) => false,
            (Some(v), Some(b)) => v.as_bool() == Some(*b),
            (Some(v), None) => v.as_array().is_none_or(|a| !a.is_empty()),
        };
        if widens {
            map.remove(*last);
            dropped.push(format!("sandbox.{}", path.join(".")));
        }
    }
    dropped
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_repository_layer_keeps_only_what_narrows() {
        let mut m = json!({
            "enabled": true,
            "fail_if_unavailable": true,
            "allow_unsandboxed_commands": true,
            "excluded_commands": ["docker"],
            "network": {"allowed_domains": ["x.example"], "allow_local_binding": false},
            "filesystem": {"deny_read": ["secret"], "allow_write": ["/tmp/x"]}
        });
        let dropped = narrow(m.as_object_mut().unwrap());
        assert_eq!(
            dropped,
            [
                "sandbox.allow_unsandboxed_commands",
                "sandbox.excluded_commands",
                "sandbox.network.allowed_domains",
                "sandbox.filesystem.allow_write"
            ]
        );
        assert_eq!(
            m,
            json!({
                "enabled": true,
                "fail_if_unavailable": true,
                "network": {"allow_local_binding": false},
                "filesystem": {"deny_read": ["secret"]}
            })
        );
    }
}
