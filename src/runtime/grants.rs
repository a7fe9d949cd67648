//! Permission changes made while a session runs: the `updatedPermissions`
//! an SDK client returns with a `can_use_tool` answer (Claude Code's
//! permission updates). Updates for the session live here until the
//! process ends; they add to the snapshot's rules, never replace them, so a
//! deny rule from any settings layer still binds. Updates for a settings
//! file are also written there (see [`crate::config::edit`]).

use std::path::PathBuf;

use serde_json::{Map, Value};

use crate::config::PermissionMode;
use crate::permissions::{Rule, Rules};

/// Which list a rule update is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Behavior {
    Allow,
    Ask,
    Deny,
}

impl Behavior {
    /// The list's name in Claude Code's settings (`permissions.allow`…).
    pub fn as_str(self) -> &'static str {
        match self {
            Behavior::Allow => "allow",
            Behavior::Ask => "ask",
            Behavior::Deny => "deny",
        }
    }
}

/// One permission update, as Claude Code's protocol has them.
#[derive(Debug, Clone, PartialEq)]
pub enum PermissionUpdate {
    AddRules {
        behavior: Behavior,
        rules: Vec<String>,
    },
    /// Replaces the session's own rules of this behaviour (the settings
    /// layers' rules stay).
    ReplaceRules {
        behavior: Behavior,
        rules: Vec<String>,
    },
    RemoveRules {
        behavior: Behavior,
        rules: Vec<String>,
    },
    SetMode(PermissionMode),
    AddDirectories(Vec<PathBuf>),
    RemoveDirectories(Vec<PathBuf>),
}

/// Where a permission update is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Destination {
    Session,
    /// Also written to `.claude/settings.local.json`.
    LocalSettings,
    /// Also written to `.claude/settings.json`.
    ProjectSettings,
    /// Also written to `~/.claude/settings.json`.
    UserSettings,
}

/// What the session's updates add to the settings.
#[derive(Debug, Clone, Default)]
pub struct Grants {
    allow: Vec<String>,
    ask: Vec<String>,
    deny: Vec<String>,
    /// Parsed from the lists above after each change.
    rules: Rules,
    pub add_dirs: Vec<PathBuf>,
    /// The main session's mode, when an update set it.
    pub mode: Option<PermissionMode>,
}

impl Grants {
    /// Applies one update; the messages name rules that do not parse
    /// (they are left out).
    pub fn apply(&mut self, update: &PermissionUpdate) -> Vec<String> {
        match update {
            PermissionUpdate::AddRules { behavior, rules } => {
                let list = self.list(*behavior);
                for r in rules {
                    if !list.contains(r) {
                        list.push(r.clone());
                    }
                }
            }
            PermissionUpdate::ReplaceRules { behavior, rules } => {
                *self.list(*behavior) = rules.clone();
            }
            PermissionUpdate::RemoveRules { behavior, rules } => {
                self.list(*behavior).retain(|r| !rules.contains(r));
            }
            PermissionUpdate::SetMode(m) => self.mode = Some(*m),
            PermissionUpdate::AddDirectories(dirs) => {
                for d in dirs {
                    if !self.add_dirs.contains(d) {
                        self.add_dirs.push(d.clone());
                    }
                }
            }
            PermissionUpdate::RemoveDirectories(dirs) => {
                self.add_dirs.retain(|d| !dirs.contains(d));
            }
        }
        let (rules, errors) = Rules::parse_lists(&self.allow, &self.ask, &self.deny);
        self.rules = rules;
        errors
    }

    /// The rules the session added, by list (allow, ask, deny).
    pub fn own(&self) -> [(Behavior, &[String]); 3] {
        [
            (Behavior::Allow, &self.allow),
            (Behavior::Ask, &self.ask),
            (Behavior::Deny, &self.deny),
        ]
    }

    fn list(&mut self, behavior: Behavior) -> &mut Vec<String> {
        match behavior {
            Behavior::Allow => &mut self.allow,
            Behavior::Ask => &mut self.ask,
            Behavior::Deny => &mut self.deny,
        }
    }

    /// The snapshot's rules with the session's added; `None` when the
    /// session added none (use the snapshot's as they are).
    pub fn merged(&self, base: &Rules) -> Option<Rules> {
        let own = &self.rules;
        if own.allow.is_empty() && own.ask.is_empty() && own.deny.is_empty() {
            return None;
        }
        let join = |a: &[Rule], b: &[Rule]| a.iter().chain(b).cloned().collect::<Vec<_>>();
        Some(Rules {
            allow: join(&base.allow, &own.allow),
            ask: join(&base.ask, &own.ask),
            deny: join(&base.deny, &own.deny),
        })
    }
}

/// Applies an update to a Claude Code settings object (`permissions.allow`,
/// `.ask`, `.deny`, `.defaultMode`, `.additionalDirectories`), for an update
/// that is kept in a settings file.
pub fn edit_settings(settings: &mut Map<String, Value>, update: &PermissionUpdate) {
    let permissions = settings
        .entry("permissions")
        .or_insert_with(|| Value::Object(Map::new()));
    if !permissions.is_object() {
        *permissions = Value::Object(Map::new());
    }
    let Some(p) = permissions.as_object_mut() else {
        return;
    };
    let key = Behavior::as_str;
    let mut edit_list = |k: &str, f: &dyn Fn(&mut Vec<Value>)| {
        let list = p.entry(k).or_insert_with(|| Value::Array(Vec::new()));
        if !list.is_array() {
            *list = Value::Array(Vec::new());
        }
        if let Some(a) = list.as_array_mut() {
            f(a);
        }
    };
    let strings = |v: &[String]| {
        v.iter()
            .map(|s| Value::String(s.clone()))
            .collect::<Vec<_>>()
    };
    let paths = |v: &[PathBuf]| {
        v.iter()
            .map(|d| Value::String(d.display().to_string()))
            .collect::<Vec<_>>()
    };
    let add = |a: &mut Vec<Value>, new: Vec<Value>| {
        for v in new {
            if !a.contains(&v) {
                a.push(v);
            }
        }
    };
    match update {
        PermissionUpdate::AddRules { behavior, rules } => {
            edit_list(key(*behavior), &|a| add(a, strings(rules)));
        }
        PermissionUpdate::ReplaceRules { behavior, rules } => {
            edit_list(key(*behavior), &|a| *a = strings(rules));
        }
        PermissionUpdate::RemoveRules { behavior, rules } => {
            let gone = strings(rules);
            edit_list(key(*behavior), &|a| a.retain(|v| !gone.contains(v)));
        }
        PermissionUpdate::SetMode(m) => {
            p.insert("defaultMode".into(), Value::String(m.as_str().into()));
        }
        PermissionUpdate::AddDirectories(dirs) => {
            edit_list("additionalDirectories", &|a| add(a, paths(dirs)));
        }
        PermissionUpdate::RemoveDirectories(dirs) => {
            let gone = paths(dirs);
            edit_list("additionalDirectories", &|a| {
                a.retain(|v| !gone.contains(v))
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::permissions::{Decision, decide};
    use serde_json::json;
    use std::path::Path;

    #[test]
    fn session_rules_add_to_the_settings_and_a_settings_deny_still_binds() {
        let (base, _) = Rules::parse_lists(&["Read"], &[] as &[&str], &["Bash(rm:*)"]);
        let mut g = Grants::default();
        assert!(g.merged(&base).is_none());
        g.apply(&PermissionUpdate::AddRules {
            behavior: Behavior::Allow,
            rules: vec!["Bash(rm:*)".into(), "Bash(ls:*)".into()],
        });
        let rules = g.merged(&base).unwrap();
        let cwd = Path::new("/tmp");
        let mode = PermissionMode::Default;
        assert_eq!(
            decide(&rules, mode, "Bash", &json!({"command": "ls -l"}), cwd),
            Decision::Allow
        );
        assert!(matches!(
            decide(&rules, mode, "Bash", &json!({"command": "rm -rf x"}), cwd),
            Decision::Deny { .. }
        ));
        g.apply(&PermissionUpdate::RemoveRules {
            behavior: Behavior::Allow,
            rules: vec!["Bash(ls:*)".into(), "Bash(rm:*)".into()],
        });
        assert!(g.merged(&base).is_none());
        let errors = g.apply(&PermissionUpdate::ReplaceRules {
            behavior: Behavior::Deny,
            rules: vec!["Bash(".into()],
        });
        assert_eq!(errors.len(), 1, "{errors:?}");
    }

    #[test]
    fn updates_kept_in_a_file_edit_its_permissions() {
        let mut o = serde_json::json!({"model": "opus", "permissions": {"allow": ["Read"]}})
            .as_object()
            .cloned()
            .unwrap();
        for u in [
            PermissionUpdate::AddRules {
                behavior: Behavior::Allow,
                rules: vec!["Read".into(), "Bash(ls:*)".into()],
            },
            PermissionUpdate::AddRules {
                behavior: Behavior::Deny,
                rules: vec!["WebFetch".into()],
            },
            PermissionUpdate::SetMode(PermissionMode::AcceptEdits),
            PermissionUpdate::AddDirectories(vec!["../lib".into()]),
        ] {
            edit_settings(&mut o, &u);
        }
        assert_eq!(
            Value::Object(o),
            json!({"model": "opus", "permissions": {
                "allow": ["Read", "Bash(ls:*)"], "deny": ["WebFetch"],
                "defaultMode": "acceptEdits", "additionalDirectories": ["../lib"]}})
        );
    }
}
