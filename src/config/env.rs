//! The environment and command-line layers: `CADRE_*` variables (and the
//! `CLAUDE_CODE_*` ones with a cadre meaning) and the flags that set
//! settings, each turned into a layer document in cadre's shape, with the
//! variable that set each key as its origin.

use std::path::Path;

use serde_json::{Map, Value};

use super::claude;
use super::layers::{LayerDoc, Scope};
use super::load::{CliOverrides, LoadInput};
use super::settings::{OPEN_TABLES, Settings};
use crate::diagnostic::Diagnostic;

/// Environment variables with the `CADRE_` prefix that are not settings.
pub(super) const NON_SETTING_ENV: &[&str] = &[
    "CADRE_CONFIG",
    "CADRE_SUBAGENT_MODEL",
    "CADRE_LOG",
    "CADRE_MANAGED_ROOT",
];

/// The model every sub-agent and teammate runs on, from the environment:
/// `CADRE_SUBAGENT_MODEL`, else `CLAUDE_CODE_SUBAGENT_MODEL` (the last
/// value of a variable set twice). Read once, when an engine is made, and
/// passed to the planner from there; an empty value is no override.
pub fn subagent_model(env: &[(String, String)]) -> Option<String> {
    let var = |name: &str| {
        env.iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.trim())
            .filter(|v| !v.is_empty())
    };
    var("CADRE_SUBAGENT_MODEL")
        .or_else(|| var("CLAUDE_CODE_SUBAGENT_MODEL"))
        .map(str::to_string)
}

/// Claude Code's variables that have a cadre setting: variable, dotted
/// key. `CADRE_*` variables win over these.
const CLAUDE_CODE_ENV: &[(&str, &str)] = &[
    ("CLAUDE_CODE_FORK_SUBAGENT", "features.FORK_SUBAGENT"),
    (
        "CLAUDE_CODE_DISABLE_BACKGROUND_TASKS",
        "features.DISABLE_BACKGROUND_TASKS",
    ),
    ("CLAUDE_CODE_MAX_SUBAGENT_SPAWN_DEPTH", "agents.max_depth"),
    ("CLAUDE_CODE_COORDINATOR_MODE", "mode"),
    (
        "CLAUDE_CODE_EXPERIMENTAL_AGENT_TEAMS",
        "features.AGENT_TEAMS",
    ),
    ("ANTHROPIC_MODEL", "provider.model"),
    ("CLAUDE_CODE_MAX_OUTPUT_TOKENS", "provider.max_tokens"),
    ("MAX_THINKING_TOKENS", "provider.thinking_budget"),
    ("CLAUDE_CODE_MAX_RETRIES", "provider.max_retries"),
    ("BASH_DEFAULT_TIMEOUT_MS", "bash.default_timeout_ms"),
    ("BASH_MAX_TIMEOUT_MS", "bash.max_timeout_ms"),
];

/// The environment layer: Claude Code's variables that have a cadre
/// meaning — read from the settings' `env` table (the layers below,
/// `acc`, where a project's `env` counts only in a trusted folder) before
/// the process environment, since Claude Code applies its settings' `env`
/// over the shell's — then `CADRE_A__B=v` → `{a: {b: v}}`. Segments are lowercased,
/// except the names inside open tables (`[models]`, `[features]`, …): those
/// take the case of the key they override in a lower layer (`acc`), or stay
/// as written when no such key exists.
pub(super) fn env_layer(
    input: &LoadInput,
    acc: &Map<String, Value>,
    warnings: &mut Vec<Diagnostic>,
) -> LayerDoc {
    let template = serde_json::to_value(Settings::default()).unwrap_or(Value::Null);
    let mut doc = LayerDoc::new(Scope::Env, "environment", Map::new());
    let set = |doc: &mut LayerDoc, segments: Vec<String>, var: &str, value: Value| {
        let key = segments.join(".");
        insert_path(&mut doc.value, &segments, value);
        doc.vars.insert(key, var.to_string());
    };
    let settings_env = acc.get("env").and_then(Value::as_object);
    for (var, key) in CLAUDE_CODE_ENV {
        let from_settings = settings_env
            .and_then(|e| e.get(*var))
            .and_then(Value::as_str);
        let Some(text) = from_settings.or_else(|| input.env_var(var)) else {
            continue;
        };
        let origin = match from_settings {
            Some(_) => format!("{var} (settings env)"),
            None => var.to_string(),
        };
        let var = origin.as_str();
        let value = match *key {
            "mode" => Value::String(
                if matches!(text.trim(), "1" | "true") {
                    "coordinator"
                } else {
                    "normal"
                }
                .into(),
            ),
            k if k.starts_with("features.") => Value::Bool(matches!(
                text.trim().to_ascii_lowercase().as_str(),
                "1" | "true" | "on" | "yes"
            )),
            _ => env_value(text),
        };
        set(
            &mut doc,
            key.split('.').map(str::to_string).collect(),
            var,
            value,
        );
    }
    for (key, value) in &input.env {
        let Some(rest) = key.strip_prefix("CADRE_") else {
            continue;
        };
        if NON_SETTING_ENV.contains(&key.as_str()) || rest.is_empty() {
            continue;
        }
        let mut segments: Vec<String> = Vec::new();
        for seg in rest.split("__") {
            let in_open_table = segments.len() == 1 && OPEN_TABLES.contains(&segments[0].as_str());
            let s = if in_open_table {
                acc.get(&segments[0])
                    .and_then(Value::as_object)
                    .and_then(|t| t.keys().find(|k| k.eq_ignore_ascii_case(seg)).cloned())
                    .unwrap_or_else(|| seg.to_string())
            } else {
                seg.to_ascii_lowercase()
            };
            segments.push(s);
        }
        if template.get(&segments[0]).is_none() {
            // `CADRE_SOMETHING` without `__` that names no setting belongs to
            // a script (`CADRE_BIN`, `CADRE_LOCAL_MODEL_PORT`); a nested key
            // with an unknown head is a typo worth reporting.
            if segments.len() == 1 {
                continue;
            }
            warnings.push(Diagnostic::warning(
                Some(Path::new("environment")),
                None,
                format!("{key}: unknown setting `{}`", segments.join(".")),
            ));
            continue;
        }
        set(&mut doc, segments, key, env_value(value));
    }
    doc
}

fn env_value(text: &str) -> Value {
    let t = text.trim();
    if (t.starts_with('[') || t.starts_with('{'))
        && let Ok(v) = serde_json::from_str(t)
    {
        return v;
    }
    match t {
        "true" => return Value::Bool(true),
        "false" => return Value::Bool(false),
        _ => {}
    }
    if let Ok(i) = t.parse::<i64>() {
        return Value::from(i);
    }
    if let Ok(f) = t.parse::<f64>()
        && f.is_finite()
    {
        return Value::from(f);
    }
    Value::String(text.to_string())
}

fn insert_path(root: &mut Map<String, Value>, path: &[String], value: Value) {
    let keys: Vec<&str> = path.iter().map(String::as_str).collect();
    claude::insert(root, &keys, value);
}

pub(super) fn cli_layer(cli: &CliOverrides) -> LayerDoc {
    let mut doc = LayerDoc::new(Scope::Cli, "command line", Map::new());
    let mut set = |segments: &[&str], flag: &str, value: Value| {
        claude::insert(&mut doc.value, segments, value);
        doc.vars.insert(segments.join("."), flag.to_string());
    };
    for (name, on) in &cli.features {
        set(&["features", name], "--feature", Value::Bool(*on));
    }
    if let Some(m) = &cli.model {
        set(&["provider", "model"], "--model", Value::String(m.clone()));
    }
    if let Some(mode) = cli.mode {
        set(
            &["mode"],
            "--coordinator",
            Value::String(mode.as_str().into()),
        );
    }
    if let Some(mode) = cli.permission_mode {
        set(
            &["permissions", "default_mode"],
            "--permission-mode",
            Value::String(mode.as_str().into()),
        );
    }
    if !cli.plugin_dirs.is_empty() {
        set(
            &["plugins", "dirs"],
            "--plugin-dir",
            Value::Array(
                cli.plugin_dirs
                    .iter()
                    .map(|d| Value::String(d.display().to_string()))
                    .collect(),
            ),
        );
    }
    let rules = |list: &[String]| Value::Array(list.iter().cloned().map(Value::String).collect());
    if !cli.allow.is_empty() {
        set(
            &["permissions", "allow"],
            "--allowedTools",
            rules(&cli.allow),
        );
    }
    if !cli.deny.is_empty() {
        set(
            &["permissions", "deny"],
            "--disallowedTools",
            rules(&cli.deny),
        );
    }
    doc
}

#[cfg(test)]
mod tests {
    use super::subagent_model;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn the_subagent_model_is_cadres_variable_else_claude_codes() {
        assert_eq!(subagent_model(&env(&[])), None);
        let both = env(&[
            ("CADRE_SUBAGENT_MODEL", "haiku"),
            ("CLAUDE_CODE_SUBAGENT_MODEL", "opus"),
        ]);
        assert_eq!(subagent_model(&both).as_deref(), Some("haiku"));
        let claude = env(&[("CLAUDE_CODE_SUBAGENT_MODEL", "opus")]);
        assert_eq!(subagent_model(&claude).as_deref(), Some("opus"));
        // Set twice: the last value; set empty: no override.
        let twice = env(&[("CADRE_SUBAGENT_MODEL", "a"), ("CADRE_SUBAGENT_MODEL", "b")]);
        assert_eq!(subagent_model(&twice).as_deref(), Some("b"));
        let empty = env(&[
            ("CADRE_SUBAGENT_MODEL", " "),
            ("CLAUDE_CODE_SUBAGENT_MODEL", "opus"),
        ]);
        assert_eq!(subagent_model(&empty).as_deref(), Some("opus"));
    }
}
