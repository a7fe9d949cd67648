//! Claude Code's `settings.json` files, read into cadre's settings shape.
//!
//! A Claude Code settings file (user `~/.claude/settings.json`, project
//! `.claude/settings.json`, local `.claude/settings.local.json`, managed
//! `managed-settings.json`) is parsed once into a positioned tree, then each
//! key cadre honours is moved to where cadre keeps it, remembering the
//! position it was written at. Keys cadre does not implement are kept in a
//! list (shown by `cadre config show`), not warned about: they are valid
//! Claude Code settings.

use std::path::Path;

use serde_json::{Map, Value};

use super::hooks::{Entry as HookEntry, group_problems, read_entry};
use crate::diagnostic::{Diagnostic, Pos};
use crate::raw::{Kind, Node};

/// A Claude Code file in cadre's shape.
#[derive(Debug, Default)]
pub struct Translated {
    /// The settings, shaped like cadre's own file.
    pub value: Map<String, Value>,
    /// Where each translated key was written: dotted cadre key → position.
    /// List items of merged lists are keyed `list[item]`.
    pub positions: Vec<(String, Pos)>,
    /// Keys of the file that cadre does not implement, with their position.
    pub ignored: Vec<(String, Pos)>,
    /// Values of the wrong shape: each one dropped with a warning.
    pub problems: Vec<Diagnostic>,
    /// `permissions.disableBypassPermissionsMode: "disable"`, where written.
    pub disables_bypass: Option<Pos>,
}

/// Translates one Claude Code settings document (already parsed).
pub fn translate(path: &Path, doc: &Node) -> Translated {
    let mut t = Translated::default();
    for (key, value) in doc.entries() {
        match key.name.as_str() {
            "$schema" => {}
            "permissions" => permissions(path, value, &mut t),
            "hooks" => hooks(path, value, &mut t),
            "sandbox" => {
                let mut parts = super::sandbox::Parts::default();
                super::sandbox::translate(path, value, &mut parts);
                t.value.insert("sandbox".into(), Value::Object(parts.value));
                t.positions.extend(parts.positions);
                t.ignored.extend(parts.ignored);
                t.problems.extend(parts.problems);
            }
            "env" => match &value.kind {
                Kind::Map(entries) => {
                    let mut env = Map::new();
                    for (k, v) in entries {
                        match v.scalar_text() {
                            Some(text) => {
                                env.insert(k.name.clone(), Value::String(text));
                                t.positions.push((format!("env.{}", k.name), k.pos));
                            }
                            None => t.problems.push(Diagnostic::warning(
                                Some(path),
                                Some(v.pos),
                                format!(
                                    "env.{}: expected a string, found {}; ignored",
                                    k.name,
                                    v.type_name()
                                ),
                            )),
                        }
                    }
                    t.value.insert("env".into(), Value::Object(env));
                }
                _ => t.problems.push(expected(path, value, "env", "an object")),
            },
            "model" => scalar(path, value, "model", &["provider", "model"], &mut t, true),
            "outputStyle" => scalar(path, value, "outputStyle", &["output_style"], &mut t, true),
            "statusLine" => status_line(path, value, &mut t),
            "enabledPlugins" => enabled_plugins(path, value, &mut t),
            "extraKnownMarketplaces" => match &value.kind {
                Kind::Map(entries) => {
                    for (k, v) in entries {
                        if !matches!(v.get("source").map(|s| &s.kind), Some(Kind::Map(_))) {
                            t.problems.push(expected(
                                path,
                                v,
                                &format!("extraKnownMarketplaces.{}", k.name),
                                "an object with a `source` object",
                            ));
                            continue;
                        }
                        insert(
                            &mut t.value,
                            &["plugins", "marketplaces", &k.name],
                            v.to_json(),
                        );
                        t.positions
                            .push((format!("plugins.marketplaces.{}", k.name), k.pos));
                    }
                }
                _ => t
                    .problems
                    .push(expected(path, value, &key.name, "an object")),
            },
            "enableAllProjectMcpServers" => scalar(
                path,
                value,
                &key.name,
                &["enable_all_project_mcp_servers"],
                &mut t,
                false,
            ),
            "enabledMcpjsonServers" => {
                string_list(path, value, &key.name, "enabled_mcpjson_servers", &mut t)
            }
            "disabledMcpjsonServers" => {
                string_list(path, value, &key.name, "disabled_mcpjson_servers", &mut t)
            }
            "autoCompactWindow" => match &value.kind {
                Kind::Int(n) if *n > 0 => {
                    insert(
                        &mut t.value,
                        &["compact", "auto_compact_window"],
                        Value::from(*n),
                    );
                    t.positions
                        .push(("compact.auto_compact_window".into(), key.pos));
                }
                _ => t.problems.push(expected(
                    path,
                    value,
                    &key.name,
                    "a positive number of tokens",
                )),
            },
            "apiKeyHelper" => scalar(
                path,
                value,
                &key.name,
                &["provider", "api_key_helper"],
                &mut t,
                true,
            ),
            "disableSkillShellExecution" => scalar(
                path,
                value,
                &key.name,
                &["disable_skill_shell_execution"],
                &mut t,
                false,
            ),
            "disableAllHooks" => scalar(
                path,
                value,
                &key.name,
                &["disable_all_hooks"],
                &mut t,
                false,
            ),
            "maxEffortLevel" => scalar(path, value, &key.name, &["max_effort_level"], &mut t, true),
            "availableModels" => string_list(path, value, &key.name, "available_models", &mut t),
            "deniedModels" => string_list(path, value, &key.name, "denied_models", &mut t),
            "claudeMdExcludes" => string_list(path, value, &key.name, "claude_md_excludes", &mut t),
            "bashOutputMaxChars" => match &value.kind {
                Kind::Int(n) if *n > 0 => {
                    insert(
                        &mut t.value,
                        &["bash", "max_output_chars"],
                        Value::from((*n).clamp(4_000, 128_000)),
                    );
                    t.positions.push(("bash.max_output_chars".into(), key.pos));
                }
                _ => t.problems.push(expected(
                    path,
                    value,
                    &key.name,
                    "a positive number of characters",
                )),
            },
            "cleanupPeriodDays" => match &value.kind {
                Kind::Int(n) if *n >= 0 => {
                    insert(
                        &mut t.value,
                        &["transcripts", "cleanup_period_days"],
                        Value::from(*n),
                    );
                    t.positions
                        .push(("transcripts.cleanup_period_days".into(), key.pos));
                }
                _ => t
                    .problems
                    .push(expected(path, value, &key.name, "a whole number of days")),
            },
            _ => t.ignored.push((key.name.clone(), key.pos)),
        }
    }
    t
}

/// `enabledPlugins`: `{"NAME@MARKETPLACE": true|false}` (or Claude Code's
/// older list of enabled ids).
fn enabled_plugins(path: &Path, value: &Node, t: &mut Translated) {
    let set = |id: &str, on: bool, pos: Pos, t: &mut Translated| {
        insert(&mut t.value, &["plugins", "enabled", id], Value::Bool(on));
        t.positions.push((format!("plugins.enabled.{id}"), pos));
    };
    match &value.kind {
        Kind::Map(entries) => {
            for (k, v) in entries {
                match &v.kind {
                    Kind::Bool(on) => set(&k.name, *on, k.pos, t),
                    _ => t.problems.push(expected(
                        path,
                        v,
                        &format!("enabledPlugins.{}", k.name),
                        "true or false",
                    )),
                }
            }
        }
        Kind::Seq(items) => {
            for item in items {
                match &item.kind {
                    Kind::Str(id) => set(id, true, item.pos, t),
                    _ => t
                        .problems
                        .push(expected(path, item, "enabledPlugins", "a string")),
                }
            }
        }
        _ => t
            .problems
            .push(expected(path, value, "enabledPlugins", "an object")),
    }
}

/// `statusLine: {"type": "command", "command": "…", "padding": N}`: the
/// command is kept; `padding` (spacing in Claude Code's own screen) means
/// nothing here and is accepted quietly.
fn status_line(path: &Path, value: &Node, t: &mut Translated) {
    let Kind::Map(entries) = &value.kind else {
        t.problems
            .push(expected(path, value, "statusLine", "an object"));
        return;
    };
    let mut command = None;
    for (k, v) in entries {
        match (k.name.as_str(), &v.kind) {
            ("type", Kind::Str(s)) if s == "command" => {}
            ("command", Kind::Str(s)) => command = Some((s.clone(), v.pos)),
            ("padding", _) => {}
            (other, _) => t.problems.push(Diagnostic::warning(
                Some(path),
                Some(k.pos),
                format!("statusLine.{other}: not a key cadre knows here (type \"command\", command, padding); ignored"),
            )),
        }
    }
    match command {
        Some((c, pos)) => {
            insert(&mut t.value, &["status_line", "command"], Value::String(c));
            t.positions.push(("status_line.command".into(), pos));
            t.positions.push(("status_line".into(), pos));
        }
        None => t.problems.push(expected(
            path,
            value,
            "statusLine",
            "an object with a `command`",
        )),
    }
}

fn expected(path: &Path, value: &Node, key: &str, what: &str) -> Diagnostic {
    Diagnostic::warning(
        Some(path),
        Some(value.pos),
        format!(
            "{key}: expected {what}, found {}; ignored",
            value.type_name()
        ),
    )
}

/// Inserts `value` at a path of object keys, creating the objects.
pub(crate) fn insert(root: &mut Map<String, Value>, path: &[&str], value: Value) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut map = root;
    for p in parents {
        let entry = map
            .entry(p.to_string())
            .or_insert_with(|| Value::Object(Map::new()));
        if !entry.is_object() {
            *entry = Value::Object(Map::new());
        }
        let Value::Object(m) = entry else { return };
        map = m;
    }
    map.insert(last.to_string(), value);
}

/// A string (`string = true`) or boolean value moved to `to`.
fn scalar(path: &Path, value: &Node, key: &str, to: &[&str], t: &mut Translated, string: bool) {
    let v = match (&value.kind, string) {
        (Kind::Str(s), true) => Value::String(s.clone()),
        (Kind::Bool(b), false) => Value::Bool(*b),
        _ => {
            let what = if string { "a string" } else { "true or false" };
            t.problems.push(expected(path, value, key, what));
            return;
        }
    };
    insert(&mut t.value, to, v);
    t.positions.push((to.join("."), value.pos));
}

fn string_list(path: &Path, value: &Node, key: &str, to: &str, t: &mut Translated) {
    let Kind::Seq(items) = &value.kind else {
        t.problems
            .push(expected(path, value, key, "a list of strings"));
        return;
    };
    let mut out = Vec::new();
    for item in items {
        match &item.kind {
            Kind::Str(s) => {
                t.positions.push((format!("{to}[{s}]"), item.pos));
                out.push(Value::String(s.clone()));
            }
            _ => t.problems.push(expected(path, item, key, "a string")),
        }
    }
    t.positions.push((to.to_string(), value.pos));
    t.value.insert(to.to_string(), Value::Array(out));
}

fn permissions(path: &Path, node: &Node, t: &mut Translated) {
    if !matches!(node.kind, Kind::Map(_)) {
        t.problems
            .push(expected(path, node, "permissions", "an object"));
        return;
    }
    let mut perms = Map::new();
    for (key, value) in node.entries() {
        let to = match key.name.as_str() {
            "allow" => "allow",
            "deny" => "deny",
            "ask" => "ask",
            "additionalDirectories" => "additional_directories",
            "defaultMode" => {
                match value.as_str() {
                    Some(mode) => {
                        perms.insert("default_mode".into(), Value::String(mode.into()));
                        t.positions
                            .push(("permissions.default_mode".into(), value.pos));
                    }
                    None => t.problems.push(expected(
                        path,
                        value,
                        "permissions.defaultMode",
                        "a string",
                    )),
                }
                continue;
            }
            "disableBypassPermissionsMode" => {
                if value.as_str() == Some("disable") {
                    t.disables_bypass = Some(value.pos);
                } else {
                    t.ignored
                        .push(("permissions.disableBypassPermissionsMode".into(), key.pos));
                }
                continue;
            }
            other => {
                t.ignored.push((format!("permissions.{other}"), key.pos));
                continue;
            }
        };
        let Kind::Seq(items) = &value.kind else {
            t.problems.push(expected(
                path,
                value,
                &format!("permissions.{}", key.name),
                "a list of strings",
            ));
            continue;
        };
        let mut list = Vec::new();
        for item in items {
            match &item.kind {
                Kind::Str(s) => {
                    t.positions
                        .push((format!("permissions.{to}[{s}]"), item.pos));
                    list.push(Value::String(s.clone()));
                }
                _ => t.problems.push(expected(
                    path,
                    item,
                    &format!("permissions.{}", key.name),
                    "a string",
                )),
            }
        }
        t.positions.push((format!("permissions.{to}"), value.pos));
        perms.insert(to.into(), Value::Array(list));
    }
    t.value.insert("permissions".into(), Value::Object(perms));
}

/// `{Event: [{matcher?, hooks: [{type: "command", command, args?, timeout?,
/// async?}]}]}` → `hooks.Event = [{matcher, command, args, timeout_ms,
/// async}]`. Each entry is read strictly ([`read_entry`]):
/// one with a problem is reported and left out, never run in part.
pub(super) fn hooks(path: &Path, node: &Node, t: &mut Translated) {
    if !matches!(node.kind, Kind::Map(_)) {
        t.problems.push(expected(path, node, "hooks", "an object"));
        return;
    }
    let mut out = Map::new();
    for (event, groups) in node.entries() {
        if super::hooks::HookEvent::from_name(&event.name).is_none() {
            t.ignored.push((format!("hooks.{}", event.name), event.pos));
            continue;
        }
        // An empty list asks for nothing: it is not shown as a setting.
        if matches!(&groups.kind, Kind::Seq(g) if g.is_empty()) {
            continue;
        }
        let at = format!("hooks.{}", event.name);
        let Kind::Seq(groups) = &groups.kind else {
            t.problems
                .push(expected(path, groups, &at, "a list of matcher groups"));
            continue;
        };
        let mut list = Vec::new();
        // How often each command has come up in this event: the second
        // hook with the same command gets its own position (`[cmd]#2`,
        // as `layers::merge` looks it up).
        let mut seen: std::collections::BTreeMap<String, usize> = Default::default();
        for group in groups {
            if !matches!(group.kind, Kind::Map(_)) {
                t.problems
                    .push(expected(path, group, &at, "an object with `hooks`"));
                continue;
            }
            let report = |problems: Vec<(Pos, String)>, t: &mut Translated, what: &str| {
                t.problems.extend(problems.into_iter().map(|(pos, why)| {
                    Diagnostic::warning(Some(path), Some(pos), format!("{at}: {why}; {what}"))
                }));
            };
            let problems = group_problems(group);
            if !problems.is_empty() {
                report(problems, t, "the hooks of this group are not run");
                continue;
            }
            let matcher = group.get("matcher").and_then(Node::scalar_text);
            let Some(Kind::Seq(commands)) = group.get("hooks").map(|h| &h.kind) else {
                t.problems.push(Diagnostic::warning(
                    Some(path),
                    Some(group.pos),
                    format!("{at}: a matcher group needs a `hooks` list; ignored"),
                ));
                continue;
            };
            for h in commands {
                let mut entry = match read_entry(h, false) {
                    Ok(HookEntry::Hook(c)) => *c,
                    Ok(HookEntry::OtherType { kind, pos }) => {
                        t.problems.push(Diagnostic::warning(
                            Some(path),
                            Some(pos),
                            format!("{at}: {}", super::hooks::other_type_note(&kind)),
                        ));
                        continue;
                    }
                    Err(problems) => {
                        report(problems, t, "this hook is not run");
                        continue;
                    }
                };
                let n = seen.entry(entry.label().to_string()).or_default();
                *n += 1;
                let item = super::layers::nth_item_key(&at, entry.label(), *n);
                if matcher.is_some()
                    && let Some(mp) = group.get("matcher")
                {
                    t.positions.push((format!("{item}.matcher"), mp.pos));
                }
                entry.matcher = matcher.clone();
                let Ok(Value::Object(mut entry)) = serde_json::to_value(&entry) else {
                    continue;
                };
                if entry.get("matcher").is_some_and(Value::is_null) {
                    entry.remove("matcher");
                }
                if h.get("timeout").is_none() {
                    // Left to the default of the merged settings.
                    entry.remove("timeout_ms");
                }
                // Each hook is shown at its own entry (its matcher has its
                // own position, `….matcher`): two hooks of one group are two
                // items, each at its line.
                t.positions.push((item, h.pos));
                list.push(Value::Object(entry));
            }
        }
        t.positions.push((at.clone(), event.pos));
        out.insert(event.name.clone(), Value::Array(list));
    }
    t.value.insert("hooks".into(), Value::Object(out));
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn every_honoured_key_moves_and_the_rest_is_listed() {
        let text = r#"{
  "permissions": {"allow": ["Bash(npm test:*)"], "deny": ["Read(./.env)"], "defaultMode": "acceptEdits",
                  "additionalDirectories": ["../lib"], "disableBypassPermissionsMode": "disable"},
  "env": {"FOO": "bar", "N": 3},
  "model": "opus",
  "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "echo hi", "timeout": 5}]}],
            "SessionStart": []},
  "enableAllProjectMcpServers": true,
  "enabledMcpjsonServers": ["a"],
  "cleanupPeriodDays": 7,
  "autoCompactWindow": 150000,
  "statusLine": {"type": "command", "command": "x", "padding": 0},
  "theme": "dark"
}"#;
        let node = crate::raw::parse_yaml(text).unwrap();
        let t = translate(Path::new("s.json"), &node);
        let v = Value::Object(t.value);
        assert_eq!(v["permissions"]["allow"][0], "Bash(npm test:*)");
        assert_eq!(v["permissions"]["default_mode"], "acceptEdits");
        assert_eq!(v["permissions"]["additional_directories"][0], "../lib");
        assert_eq!(v["env"]["N"], "3");
        assert_eq!(v["provider"]["model"], "opus");
        assert_eq!(
            v["hooks"]["PreToolUse"][0],
            serde_json::json!({"matcher": "Bash", "command": "echo hi", "timeout_ms": 5000})
        );
        assert_eq!(v["enable_all_project_mcp_servers"], true);
        assert_eq!(v["transcripts"]["cleanup_period_days"], 7);
        assert_eq!(v["compact"]["auto_compact_window"], 150000);
        assert_eq!(v["status_line"]["command"], "x");
        let ignored: Vec<&str> = t.ignored.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            ignored,
            ["theme"],
            "an empty SessionStart list is no setting"
        );
        assert_eq!(t.disables_bypass.map(|p| p.line), Some(3));
        let deny = t
            .positions
            .iter()
            .find(|(k, _)| k == "permissions.deny[Read(./.env)]")
            .unwrap();
        assert_eq!(deny.1.line, 2);
        assert!(t.problems.is_empty(), "{:?}", t.problems);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod json_shapes {
    #[test]
    fn tab_indented_and_compact_json_parse_with_positions() {
        for text in [
            "{\n\t\"permissions\": {\n\t\t\"deny\": [\"Bash\"]\n\t}\n}\n",
            "{\"permissions\":{\"deny\":[\"Bash\"]},\"model\":\"x\"}",
            "{\r\n  \"a\": 1\r\n}\r\n",
            "{\"s\": \"caf\\u00e9 \\\"q\\\" \\\\ \\/\"}",
        ] {
            let node = crate::raw::parse_yaml(text);
            assert!(node.is_ok(), "{text:?}: {:?}", node.err());
        }
        let node = crate::raw::parse_yaml("{\"s\": \"caf\\u00e9 \\\"q\\\" \\/\"}").unwrap();
        assert_eq!(node.get("s").unwrap().as_str(), Some("café \"q\" /"));
    }
}
