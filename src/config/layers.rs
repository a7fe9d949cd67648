//! Settings layers and their precedence — the one place that states it.
//!
//! Lowest first; a later layer wins for a single value:
//!
//! | scope | files or source |
//! | --- | --- |
//! | default | built-in defaults (`Settings::default()`, `config/defaults.toml`) |
//! | user | `~/.claude/settings.json`, then `$XDG_CONFIG_HOME/cadre/cadre.toml` |
//! | project | `.claude/settings.json`, then the project's cadre file (`--config`, `CADRE_CONFIG`, or the first of `cadre.toml`, `cadre.yaml`, `config/cadre.toml`, `config/cadre.yaml`); a file named by `--config` or `CADRE_CONFIG` that lies outside the project root (links resolved) keeps this place but is the user's own (scope `user`: it needs no trust) |
//! | local | `.claude/settings.local.json` |
//! | flag | `--settings FILE\|JSON` (Claude Code's "flag settings") |
//! | env | `CADRE_*` variables and the `CLAUDE_CODE_*` ones with a cadre meaning |
//! | cli | command-line flags (`--model`, `--permission-mode`, `--allowedTools`, …) |
//! | managed | `/etc/claude-code/managed-settings.json`, then `/etc/cadre/cadre.toml` |
//!
//! Merge rules: mappings merge key by key; a scalar or a plain list is
//! replaced by a higher layer; the permission lists (`allow`, `ask`,
//! `deny`, `additional_directories`), hook lists, the `.mcp.json` approval
//! lists and `pass_env` are the union of every layer (so a `deny` from any
//! layer meets an `allow` from any other, and deny wins in the decision).
//! An entry of `[mcp_servers]` or `[flags]` is replaced whole. Only the
//! managed layer may set `agents.managed_dirs`. In a folder the user has not
//! trusted, the project and local layers lose the keys of
//! [`super::trust::GUARDED_KEYS`]. The origin of every key (file:line:col or
//! variable) is kept for `cadre config show --origin` and for messages.
//!
//! `--setting-sources user,project,local` limits which of the user, project
//! and local layers are read (a cadre file named by `--config` or
//! `CADRE_CONFIG` is read all the same); the other layers always are.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::diagnostic::Pos;
use crate::raw::{Kind, Node};

/// Where a layer sits in the order (lowest first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    Default,
    User,
    Project,
    Local,
    /// `--settings FILE|JSON`.
    Flag,
    Env,
    Cli,
    Managed,
}

impl Scope {
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Default => "default",
            Scope::User => "user",
            Scope::Project => "project",
            Scope::Local => "local",
            Scope::Flag => "flag",
            Scope::Env => "env",
            Scope::Cli => "cli",
            Scope::Managed => "managed",
        }
    }

    /// Layers a cloned repository controls.
    pub fn from_repository(self) -> bool {
        matches!(self, Scope::Project | Scope::Local)
    }

    /// A `--setting-sources` name (`user`, `project`, `local`).
    pub fn from_source_name(name: &str) -> Option<Scope> {
        match name {
            "user" => Some(Scope::User),
            "project" => Some(Scope::Project),
            "local" => Some(Scope::Local),
            _ => None,
        }
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where one value was set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Origin {
    pub scope: Scope,
    /// A file path, an environment variable, `command line` or `built-in`.
    pub source: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub column: Option<usize>,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)?;
        if let Some(l) = self.line {
            write!(f, ":{l}")?;
            if let Some(c) = self.column {
                write!(f, ":{c}")?;
            }
        }
        Ok(())
    }
}

impl Origin {
    /// A diagnostic about the value this origin points at.
    pub fn diagnostic(
        &self,
        severity: crate::diagnostic::Severity,
        message: impl Into<String>,
    ) -> crate::diagnostic::Diagnostic {
        let pos = self.line.map(|l| Pos::new(l, self.column.unwrap_or(1)));
        crate::diagnostic::Diagnostic::new(severity, Some(Path::new(&self.source)), pos, message)
    }
}

/// The format of a settings file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// cadre's own file (`.toml`).
    Toml,
    /// cadre's own file (`.yaml`, `.yml`).
    Yaml,
    /// A Claude Code `settings*.json` file.
    Claude,
}

/// One settings document, in cadre's shape, with where its keys are.
#[derive(Debug, Clone)]
pub struct LayerDoc {
    pub scope: Scope,
    /// The file, or a word (`environment`, `command line`, `built-in`).
    pub source: String,
    pub value: Map<String, Value>,
    /// Dotted key (list items as `list[item]`) → position in the file.
    pub positions: BTreeMap<String, Pos>,
    /// Dotted key → environment variable that set it.
    pub vars: BTreeMap<String, String>,
}

impl LayerDoc {
    pub fn new(scope: Scope, source: impl Into<String>, value: Map<String, Value>) -> Self {
        LayerDoc {
            scope,
            source: source.into(),
            value,
            positions: BTreeMap::new(),
            vars: BTreeMap::new(),
        }
    }

    /// A cadre file's tree: the value, and every key's position.
    pub fn from_node(scope: Scope, path: &Path, node: &Node) -> Self {
        let mut doc = LayerDoc::new(
            scope,
            path.display().to_string(),
            match node.to_json() {
                Value::Object(m) => m,
                _ => Map::new(),
            },
        );
        collect_positions(node, &mut String::new(), &mut doc.positions);
        doc
    }

    /// The origin of a key of this layer, from the nearest position known.
    pub fn origin(&self, key: &str) -> Origin {
        if let Some(var) = self.lookup(&self.vars, key) {
            return Origin {
                scope: self.scope,
                source: var.clone(),
                line: None,
                column: None,
            };
        }
        let pos = self.lookup(&self.positions, key);
        Origin {
            scope: self.scope,
            source: self.source.clone(),
            line: pos.map(|p| p.line),
            column: pos.map(|p| p.column),
        }
    }

    fn lookup<'a, T>(&self, map: &'a BTreeMap<String, T>, key: &str) -> Option<&'a T> {
        let mut k = key;
        loop {
            if let Some(v) = map.get(k) {
                return Some(v);
            }
            let cut = k.rfind(['.', '['])?;
            k = &k[..cut];
        }
    }

    /// Removes the value at a dotted path; returns it if it was there.
    pub fn take(&mut self, path: &[&str]) -> Option<Value> {
        let (last, parents) = path.split_last()?;
        let mut map = &mut self.value;
        for p in parents {
            map = map.get_mut(*p)?.as_object_mut()?;
        }
        map.remove(*last)
    }

    /// Makes relative agent folder names absolute against `base`.
    /// (`permissions.additional_directories` stays relative to the working
    /// directory, where the permission check resolves it.)
    pub fn resolve_dirs(&mut self, base: &Path) {
        let fix = |v: &mut Value| {
            if let Value::String(s) = v
                && Path::new(s.as_str()).is_relative()
            {
                *s = crate::paths::lexical(&base.join(&*s)).display().to_string();
            }
        };
        if let Some(agents) = self.value.get_mut("agents").and_then(Value::as_object_mut) {
            if let Some(b) = agents.get_mut("builtin_dir") {
                fix(b);
            }
            for key in ["dirs", "user_dirs", "plugin_dirs", "managed_dirs"] {
                if let Some(Value::Array(items)) = agents.get_mut(key) {
                    items.iter_mut().for_each(fix);
                }
            }
        }
        if let Some(plugins) = self.value.get_mut("plugins").and_then(Value::as_object_mut) {
            if let Some(Value::Array(items)) = plugins.get_mut("dirs") {
                items.iter_mut().for_each(fix);
            }
            // A marketplace in a folder (`{"source": "directory", "path"}`).
            if let Some(Value::Object(markets)) = plugins.get_mut("marketplaces") {
                for m in markets.values_mut() {
                    if let Some(path) = m.get_mut("source").and_then(|s| s.get_mut("path")) {
                        fix(path);
                    }
                }
            }
        }
    }
}

fn collect_positions(node: &Node, at: &mut String, out: &mut BTreeMap<String, Pos>) {
    match &node.kind {
        Kind::Map(entries) => {
            for (k, v) in entries {
                let len = at.len();
                if !at.is_empty() {
                    at.push('.');
                }
                at.push_str(&k.name);
                out.insert(at.clone(), k.pos);
                collect_positions(v, at, out);
                at.truncate(len);
            }
        }
        Kind::Seq(items) => {
            for item in items {
                let text = match &item.kind {
                    // A hook is known by its command, URL or prompt.
                    Kind::Map(_) => ["command", "url", "prompt"]
                        .iter()
                        .find_map(|k| item.get(k).and_then(Node::scalar_text)),
                    _ => item.scalar_text(),
                };
                if let Some(t) = text {
                    out.insert(format!("{at}[{t}]"), item.pos);
                }
            }
        }
        _ => {}
    }
}

/// Whether the list at this dotted key is the union of every layer.
pub fn is_union_list(key: &str) -> bool {
    matches!(
        key,
        "permissions.allow"
            | "permissions.ask"
            | "permissions.deny"
            | "permissions.additional_directories"
            | "enabled_mcpjson_servers"
            | "disabled_mcpjson_servers"
            | "pass_env"
            | "plugins.dirs"
            | "denied_models"
            | "claude_md_excludes"
    ) || key.strip_prefix("hooks.").is_some_and(|e| !e.contains('.'))
}

/// Entries of these tables are replaced whole by a higher layer.
fn replaced_whole(key: &str) -> bool {
    let mut parts = key.split('.');
    matches!(
        (parts.next(), parts.next(), parts.next()),
        (Some("mcp_servers" | "flags"), Some(_), None)
    )
}

/// The position key of the `n`th item (from 1) with the text `text` in
/// the list `list` of one layer: `list[text]`, then `list[text]#2`, …
pub fn nth_item_key(list: &str, text: &str, n: usize) -> String {
    if n <= 1 {
        format!("{list}[{text}]")
    } else {
        format!("{list}[{text}]#{n}")
    }
}

/// The text an item of a merged list is known by (a rule, a folder, a
/// hook's command).
pub fn item_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Object(m) => ["command", "url", "prompt"]
            .iter()
            .find_map(|k| m.get(*k).and_then(Value::as_str))
            .map_or_else(|| v.to_string(), str::to_string),
        other => other.to_string(),
    }
}

/// Where every effective value came from.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Origins {
    /// Dotted key → the layer that set its value (for merged lists, the
    /// highest layer that added to it).
    pub keys: BTreeMap<String, Origin>,
    /// Dotted key of a merged list → each item and the layer that added it.
    pub items: BTreeMap<String, Vec<(String, Origin)>>,
}

impl Origins {
    /// The origin of one key, or of the nearest enclosing key that has one.
    pub fn of(&self, key: &str) -> Option<&Origin> {
        let mut k = key;
        loop {
            if let Some(o) = self.keys.get(k) {
                return Some(o);
            }
            let cut = k.rfind('.')?;
            k = &k[..cut];
        }
    }

    /// Where the item `text` of the merged list `list` was written (the
    /// first layer that added it).
    pub fn of_item(&self, list: &str, text: &str) -> Option<&Origin> {
        self.items
            .get(list)?
            .iter()
            .find(|(t, _)| t == text)
            .map(|(_, o)| o)
    }
}

/// Merges `layer` on top of `acc`, recording origins.
pub fn merge(acc: &mut Map<String, Value>, layer: &LayerDoc, origins: &mut Origins) {
    merge_at(acc, &layer.value, &mut String::new(), layer, origins);
}

fn merge_at(
    acc: &mut Map<String, Value>,
    over: &Map<String, Value>,
    at: &mut String,
    layer: &LayerDoc,
    origins: &mut Origins,
) {
    for (k, v) in over {
        let len = at.len();
        if !at.is_empty() {
            at.push('.');
        }
        at.push_str(k);
        let key = at.clone();
        match v {
            Value::Array(items) if is_union_list(&key) => {
                let slot = acc
                    .entry(k.clone())
                    .or_insert_with(|| Value::Array(Vec::new()));
                if !slot.is_array() {
                    *slot = Value::Array(Vec::new());
                }
                if let Value::Array(list) = slot {
                    let added = origins.items.entry(key.clone()).or_default();
                    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
                    for item in items {
                        let text = item_text(item);
                        let n = seen.entry(text.clone()).or_default();
                        *n += 1;
                        if !list.contains(item) {
                            list.push(item.clone());
                            let item_key = nth_item_key(&key, &text, *n);
                            // A hook's matcher, written apart from the
                            // hook (Claude Code's groups): its own place.
                            let matcher = format!("{item_key}.matcher");
                            if layer.positions.contains_key(&matcher) {
                                origins.keys.insert(matcher.clone(), layer.origin(&matcher));
                            }
                            let o = layer.origin(&item_key);
                            added.push((text, o));
                        }
                    }
                }
                origins.keys.insert(key.clone(), layer.origin(&key));
            }
            Value::Object(sub) if !replaced_whole(&key) => {
                let slot = acc
                    .entry(k.clone())
                    .or_insert_with(|| Value::Object(Map::new()));
                if !slot.is_object() {
                    *slot = Value::Object(Map::new());
                }
                if let Value::Object(m) = slot {
                    merge_at(m, sub, at, layer, origins);
                }
                if sub.is_empty() {
                    origins
                        .keys
                        .entry(key.clone())
                        .or_insert(layer.origin(&key));
                }
            }
            _ => {
                acc.insert(k.clone(), v.clone());
                let prefix = format!("{key}.");
                origins.keys.retain(|kk, _| !kk.starts_with(&prefix));
                origins.keys.insert(key.clone(), layer.origin(&key));
            }
        }
        at.truncate(len);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc(scope: Scope, v: Value) -> LayerDoc {
        let Value::Object(m) = v else { panic!() };
        LayerDoc::new(scope, scope.as_str(), m)
    }

    proptest::proptest! {
        /// Whatever each layer says, every rule of every layer is in the
        /// merged list exactly once, and each keeps the first layer that
        /// wrote it as its origin.
        #[test]
        fn merged_rule_lists_keep_every_layers_rules(
            layers in proptest::collection::vec(
                proptest::collection::vec("(Bash|Read|Edit)\\([a-c]\\)", 0..4), 1..6)
        ) {
            let scopes = [Scope::User, Scope::Project, Scope::Local, Scope::Env, Scope::Cli, Scope::Managed];
            let mut acc = Map::new();
            let mut o = Origins::default();
            for (rules, scope) in layers.iter().zip(scopes) {
                merge(&mut acc, &doc(scope, json!({"permissions": {"deny": rules}})), &mut o);
            }
            let merged: Vec<String> = acc["permissions"]["deny"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_str().unwrap().to_string())
                .collect();
            for (rules, scope) in layers.iter().zip(scopes) {
                for r in rules {
                    proptest::prop_assert_eq!(merged.iter().filter(|m| *m == r).count(), 1);
                    let first = layers
                        .iter()
                        .zip(scopes)
                        .find(|(l, _)| l.contains(r))
                        .map(|(_, s)| s)
                        .unwrap();
                    proptest::prop_assert_eq!(o.of_item("permissions.deny", r).unwrap().scope, first);
                    proptest::prop_assert!(first <= scope);
                }
            }
        }
    }

    #[test]
    fn lists_union_and_scalars_take_the_higher_layer() {
        let mut acc = Map::new();
        let mut o = Origins::default();
        merge(
            &mut acc,
            &doc(
                Scope::User,
                json!({"permissions": {"deny": ["Bash(rm:*)"], "default_mode": "plan"}, "agents": {"dirs": ["a"]}}),
            ),
            &mut o,
        );
        merge(
            &mut acc,
            &doc(
                Scope::Project,
                json!({"permissions": {"allow": ["Bash(rm:*)"], "deny": ["Read(.env)", "Bash(rm:*)"], "default_mode": "acceptEdits"}, "agents": {"dirs": ["b"]}}),
            ),
            &mut o,
        );
        let v = Value::Object(acc);
        assert_eq!(
            v["permissions"]["deny"],
            json!(["Bash(rm:*)", "Read(.env)"])
        );
        assert_eq!(v["permissions"]["allow"], json!(["Bash(rm:*)"]));
        assert_eq!(v["permissions"]["default_mode"], "acceptEdits");
        assert_eq!(v["agents"]["dirs"], json!(["b"]));
        assert_eq!(
            o.of_item("permissions.deny", "Bash(rm:*)").unwrap().scope,
            Scope::User
        );
        assert_eq!(
            o.of("permissions.default_mode").unwrap().scope,
            Scope::Project
        );
    }
}
