//! Claude Code's plugins: which plugin folders a session loads, and the
//! hooks they bring.
//!
//! A plugin is a folder with an optional `.claude-plugin/plugin.json`
//! (its `name`, `version`, and optionally `hooks` and `mcpServers`), and
//! any of `commands/`, `agents/`, `skills/`, `output-styles/`,
//! `hooks/hooks.json` and `.mcp.json`. A session loads:
//!
//! - every folder named by `--plugin-dir` (`NAME@inline`, as Claude Code
//!   reports it);
//! - every `NAME@MARKETPLACE` that `enabledPlugins` turns on: the copy
//!   installed under `~/.claude/plugins/` (`installed_plugins.json`, as
//!   Claude Code and `cadre plugins install` write it), else the plugin's
//!   folder inside a marketplace that is a local folder
//!   (`extraKnownMarketplaces` with `{"source": "directory", "path": …}`,
//!   or one recorded in `known_marketplaces.json`).
//!
//! The plugin's agents, skills, commands and output styles are read by the
//! catalog (as `agents.plugin_dirs`), its MCP servers by the snapshot, its
//! hooks here, as one more settings layer. Every file is read bounded.
//! Which plugins a repository may enable is decided by trust before this
//! runs: `plugins.*` of an untrusted project is skipped like its hooks.

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{Map, Value};

use super::layers::{LayerDoc, Origins, Scope};
use super::settings::PluginSettings;
use crate::diagnostic::Diagnostic;
use crate::raw::{self, Node};

/// A manifest, a marketplace file or the install records are at most this
/// large (each is a page of JSON).
pub const MAX_MANIFEST_BYTES: u64 = 1024 * 1024;

/// What a plugin's hooks and MCP servers get as the plugin's folder.
pub const PLUGIN_ROOT_VAR: &str = "CLAUDE_PLUGIN_ROOT";

/// One plugin the session loads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Plugin {
    /// The manifest's `name`, else the folder's name: the prefix of its
    /// commands, skills, agents and styles (`NAME:command`).
    pub name: String,
    /// `NAME@MARKETPLACE`, or `NAME@inline` for `--plugin-dir`.
    pub source: String,
    /// The plugin's folder.
    pub path: PathBuf,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Where it was turned on: `--plugin-dir`, or a settings file and line.
    pub enabled_by: String,
    /// The layer that turned it on.
    #[serde(skip)]
    pub scope: Scope,
}

impl Plugin {
    /// The plugin as `init.plugins` lists it (Claude Code's fields).
    pub fn init_entry(&self) -> Value {
        let mut v = serde_json::json!({
            "name": self.name,
            "path": self.path.display().to_string(),
            "source": self.source,
        });
        if let Some(version) = &self.version {
            v["version"] = Value::String(version.clone());
        }
        v
    }
}

/// `~/.claude/plugins`, where Claude Code (and `cadre plugins`) keep
/// marketplaces, installed plugins and their records.
pub fn plugins_home(home: &Path) -> PathBuf {
    crate::paths::user_claude_dir(home).join("plugins")
}

/// Reads a JSON file of at most [`MAX_MANIFEST_BYTES`]; `Ok(None)` when it
/// does not exist. The error names the file, with line and column.
pub fn read_json(path: &Path) -> Result<Option<Value>, String> {
    if !path.exists() {
        return Ok(None);
    }
    let text = raw::read_text(path, MAX_MANIFEST_BYTES)?;
    serde_json::from_str(&text).map(Some).map_err(|e| {
        format!(
            "{}:{}:{}: not valid JSON: {e}",
            path.display(),
            e.line(),
            e.column()
        )
    })
}

/// A plugin folder's manifest (`.claude-plugin/plugin.json`), or an empty
/// object when it has none.
pub fn manifest(root: &Path) -> Result<Map<String, Value>, String> {
    let path = root.join(".claude-plugin").join("plugin.json");
    match read_json(&path)? {
        None => Ok(Map::new()),
        Some(Value::Object(m)) => Ok(m),
        Some(_) => Err(format!("{}: expected a JSON object", path.display())),
    }
}

/// A plugin's name: the manifest's `name`, else its folder's name.
pub fn plugin_name(root: &Path, manifest: &Map<String, Value>) -> String {
    manifest
        .get("name")
        .and_then(Value::as_str)
        .filter(|n| !n.trim().is_empty())
        .map(str::to_string)
        .or_else(|| root.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "plugin".into())
}

/// Where a marketplace's files are on this machine: a `directory` (or
/// `file`) source's folder, else (unless `local_only`) the clone recorded
/// in `known_marketplaces.json` (`installLocation`). A session loads
/// plugins straight from a local marketplace only; one cloned from git is
/// installed first.
pub fn marketplace_dir(
    name: &str,
    settings: &PluginSettings,
    home: Option<&Path>,
    local_only: bool,
) -> Option<PathBuf> {
    if let Some(src) = settings
        .marketplaces
        .get(name)
        .and_then(|m| m.get("source"))
    {
        // What the settings declare wins over an older record.
        return local_source(src).or_else(|| {
            (!local_only)
                .then(|| recorded(name, home?))
                .flatten()
                .and_then(|e| e.get("installLocation")?.as_str().map(PathBuf::from))
        });
    }
    let entry = recorded(name, home?)?;
    match entry.get("source").and_then(local_source) {
        Some(dir) => Some(dir),
        None if local_only => None,
        None => entry
            .get("installLocation")
            .and_then(Value::as_str)
            .map(PathBuf::from),
    }
}

/// A marketplace's entry in `known_marketplaces.json`.
fn recorded(name: &str, home: &Path) -> Option<Value> {
    let known = read_json(&plugins_home(home).join("known_marketplaces.json")).ok()??;
    known.get(name).cloned()
}

/// A marketplace source that is a folder on this machine.
fn local_source(src: &Value) -> Option<PathBuf> {
    match src.get("source").and_then(Value::as_str)? {
        "directory" => src.get("path").and_then(Value::as_str).map(PathBuf::from),
        "file" => src
            .get("path")
            .and_then(Value::as_str)
            .map(Path::new)
            .and_then(|p| p.parent()?.parent())
            .map(Path::to_path_buf),
        _ => None,
    }
}

/// The entry of plugin `name` in the marketplace at `dir`
/// (`.claude-plugin/marketplace.json`), and the folder its `source`
/// names when that is a path inside the marketplace.
pub fn marketplace_entry(dir: &Path, name: &str) -> Result<(Value, Option<PathBuf>), String> {
    let path = dir.join(".claude-plugin").join("marketplace.json");
    let doc = read_json(&path)?.ok_or_else(|| format!("{}: not found", path.display()))?;
    let entry = doc
        .get("plugins")
        .and_then(Value::as_array)
        .and_then(|list| {
            list.iter()
                .find(|p| p.get("name").and_then(Value::as_str) == Some(name))
        })
        .cloned()
        .ok_or_else(|| format!("{}: no plugin named `{name}`", path.display()))?;
    let base = doc
        .get("metadata")
        .and_then(|m| m.get("pluginRoot"))
        .and_then(Value::as_str)
        .map_or_else(|| dir.to_path_buf(), |r| dir.join(r));
    let folder = match entry.get("source") {
        Some(Value::String(s)) => {
            let p = crate::paths::lexical(&base.join(s));
            // A marketplace names folders inside itself.
            if !p.starts_with(dir) {
                return Err(format!(
                    "{}: plugin `{name}`: source {s:?} lies outside the marketplace",
                    path.display()
                ));
            }
            Some(p)
        }
        _ => None,
    };
    Ok((entry, folder))
}

/// The folder `installed_plugins.json` records for `id`, if it exists.
fn installed_path(id: &str, home: &Path) -> Option<PathBuf> {
    let doc = read_json(&plugins_home(home).join("installed_plugins.json")).ok()??;
    doc.get("plugins")?
        .get(id)?
        .as_array()?
        .iter()
        .filter_map(|e| e.get("installPath").and_then(Value::as_str))
        .map(PathBuf::from)
        .find(|p| p.is_dir())
}

/// Every plugin the settings load, in order (`--plugin-dir` first), with a
/// warning for each that cannot be found.
pub fn resolve(
    settings: &PluginSettings,
    origins: &Origins,
    home: Option<&Path>,
) -> (Vec<Plugin>, Vec<Diagnostic>) {
    let mut diags = Vec::new();
    // (folder, NAME@MARKETPLACE, enabled by, scope), in order.
    let mut found: Vec<(PathBuf, Option<String>, String, Scope)> = Vec::new();
    for dir in &settings.dirs {
        if dir.is_dir() {
            found.push((dir.clone(), None, "--plugin-dir".into(), Scope::Cli));
        } else {
            diags.push(Diagnostic::warning(
                None,
                None,
                format!("--plugin-dir {}: not a folder; ignored", dir.display()),
            ));
        }
    }
    for (id, on) in &settings.enabled {
        if !on {
            continue;
        }
        let origin = origins.of(&format!("plugins.enabled.{id}"));
        let enabled_by = origin.map_or_else(|| "settings".into(), ToString::to_string);
        let scope = origin.map_or(Scope::User, |o| o.scope);
        let warn = |why: String| match origin {
            Some(o) => o.diagnostic(crate::diagnostic::Severity::Warning, why),
            None => Diagnostic::warning(None, None, why),
        };
        let Some((name, market)) = id.rsplit_once('@') else {
            diags.push(warn(format!(
                "enabledPlugins: `{id}` is not NAME@MARKETPLACE; ignored"
            )));
            continue;
        };
        if let Some(p) = home.and_then(|h| installed_path(id, h)) {
            found.push((p, Some(id.clone()), enabled_by, scope));
            continue;
        }
        let folder = match marketplace_dir(market, settings, home, true) {
            None => Err(format!(
                "enabledPlugins: `{id}` is not installed (marketplace `{market}` is not a local folder); \
                 run `cadre plugins install {id}`"
            )),
            Some(dir) => match marketplace_entry(&dir, name) {
                Ok((_, Some(folder))) if folder.is_dir() => Ok(folder),
                Ok(_) => Err(format!(
                    "enabledPlugins: `{id}` is not installed; run `cadre plugins install {id}`"
                )),
                Err(e) => Err(format!("enabledPlugins: `{id}`: {e}")),
            },
        };
        match folder {
            Ok(folder) => found.push((folder, Some(id.clone()), enabled_by, scope)),
            Err(why) => diags.push(warn(format!("{why}; the plugin is not loaded"))),
        }
    }
    let mut out: Vec<Plugin> = Vec::new();
    for (root, source, enabled_by, scope) in found {
        let m = match manifest(&root) {
            Ok(m) => m,
            Err(e) => {
                diags.push(Diagnostic::warning(
                    None,
                    None,
                    format!("plugin {}: {e}; the plugin is not loaded", root.display()),
                ));
                continue;
            }
        };
        let name = plugin_name(&root, &m);
        if out.iter().any(|p| p.name == name) {
            diags.push(Diagnostic::warning(
                None,
                None,
                format!(
                    "plugin `{name}` ({}) is loaded already; this copy is not",
                    root.display()
                ),
            ));
            continue;
        }
        out.push(Plugin {
            source: source.unwrap_or_else(|| format!("{name}@inline")),
            name,
            path: root,
            version: m.get("version").and_then(Value::as_str).map(str::to_string),
            enabled_by,
            scope,
        });
    }
    (out, diags)
}

/// The hooks of one plugin as settings layers of the scope that enabled
/// it, one per file: `hooks/hooks.json` and the manifest's `hooks` (an
/// object, or a path inside the plugin). Each hook is read strictly, as a
/// settings file's, and knows its plugin's folder.
pub fn hook_layers(plugin: &Plugin, warnings: &mut Vec<Diagnostic>) -> Vec<LayerDoc> {
    let root = &plugin.path;
    let mut files = vec![root.join("hooks").join("hooks.json")];
    let mut inline = None;
    match manifest(root).ok().and_then(|mut m| m.remove("hooks")) {
        Some(Value::String(p)) => {
            let p = crate::paths::lexical(&root.join(p));
            if p.starts_with(root) {
                files.push(p);
            }
        }
        Some(v @ Value::Object(_)) => inline = Some(v),
        _ => {}
    }
    let mut trees: Vec<(PathBuf, Node)> = Vec::new();
    for f in files.iter().filter(|f| f.is_file()) {
        match raw::read_text(f, MAX_MANIFEST_BYTES).and_then(|t| {
            serde_json::from_str::<Value>(&t)
                .map_err(|e| format!("{}:{}: not valid JSON: {e}", e.line(), e.column()))?;
            raw::parse_yaml(&t).map_err(|e| e.message)
        }) {
            Ok(node) => trees.push((f.clone(), node)),
            Err(e) => warnings.push(Diagnostic::warning(
                Some(f),
                None,
                format!("{e}; the plugin's hooks here are not run"),
            )),
        }
    }
    if let Some(v) = inline
        && let Ok(node) = raw::parse_yaml(&serde_json::json!({ "hooks": v }).to_string())
    {
        trees.push((root.join(".claude-plugin").join("plugin.json"), node));
    }
    let mut docs = Vec::new();
    for (path, node) in &trees {
        let mut hooks = Map::new();
        let Some(h) = node.get("hooks") else {
            continue;
        };
        let mut t = super::claude::Translated::default();
        super::claude::hooks(path, h, &mut t);
        warnings.extend(t.problems);
        for (key, pos) in t.ignored {
            warnings.push(Diagnostic::warning(
                Some(path),
                Some(pos),
                format!("{key}: not a hook event; ignored"),
            ));
        }
        let Some(Value::Object(events)) = t.value.remove("hooks") else {
            continue;
        };
        for (event, list) in events {
            let Value::Array(list) = list else { continue };
            let into = hooks
                .entry(event)
                .or_insert_with(|| Value::Array(Vec::new()));
            if let Value::Array(into) = into {
                for mut h in list {
                    h["plugin_root"] = Value::String(root.display().to_string());
                    into.push(h);
                }
            }
        }
        if hooks.is_empty() {
            continue;
        }
        let mut doc = LayerDoc::new(plugin.scope, path.display().to_string(), Map::new());
        doc.positions.extend(t.positions);
        doc.value.insert("hooks".into(), Value::Object(hooks));
        docs.push(doc);
    }
    docs
}

/// A plugin's MCP servers as written: `.mcp.json` at its root (with or
/// without an `mcpServers` wrapper) and the manifest's `mcpServers` (an
/// object, or a path inside the plugin), with the file each came from.
pub fn mcp_servers(root: &Path) -> (Vec<(String, Value, PathBuf)>, Vec<Diagnostic>) {
    let mut out = Vec::new();
    let mut diags = Vec::new();
    let manifest_path = root.join(".claude-plugin").join("plugin.json");
    let mut sources: Vec<(PathBuf, Option<Value>)> = vec![(root.join(".mcp.json"), None)];
    match manifest(root).ok().and_then(|mut m| m.remove("mcpServers")) {
        Some(Value::String(p)) => {
            let p = crate::paths::lexical(&root.join(p));
            if p.starts_with(root) {
                sources.push((p, None));
            }
        }
        Some(v @ Value::Object(_)) => sources.push((manifest_path, Some(v))),
        _ => {}
    }
    for (path, inline) in sources {
        let doc = match inline {
            Some(v) => v,
            None => match read_json(&path) {
                Ok(Some(v)) => v,
                Ok(None) => continue,
                Err(e) => {
                    diags.push(Diagnostic::warning(
                        Some(&path),
                        None,
                        format!("{e}; the plugin's MCP servers here are not started"),
                    ));
                    continue;
                }
            },
        };
        let servers = match doc.get("mcpServers") {
            Some(Value::Object(m)) => m.clone(),
            _ => match doc {
                Value::Object(m) => m,
                _ => Map::new(),
            },
        };
        for (name, v) in servers {
            out.push((name, v, path.clone()));
        }
    }
    (out, diags)
}

/// `${CLAUDE_PLUGIN_ROOT}` in a plugin's text, replaced by its folder.
pub fn expand_root(text: &str, root: &Path) -> String {
    text.replace("${CLAUDE_PLUGIN_ROOT}", &root.display().to_string())
}
