//! Claude Code's plugins: which plugin folders a session loads, and the
//! hooks they bring.
//!
//! A plugin is a folder with an optional `.claude-plugin/plugin.json`
//! (its `name`, `version`, and optionally the paths of its parts:
//! [`components`]), and any of `commands/`, `agents/`, `skills/`,
//! `output-styles/`, `hooks/hooks.json`, `.mcp.json` and `.lsp.json`. A
//! session loads:
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

/// What they get as the plugin's data folder: a folder of its own that
/// outlives updates of the plugin (Claude Code's
/// `~/.claude/plugins/data/ID`), created the first time a hook or server
/// of the plugin is given it.
pub const PLUGIN_DATA_VAR: &str = "CLAUDE_PLUGIN_DATA";

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
    /// Its data folder (`CLAUDE_PLUGIN_DATA`), when there is a home folder.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<PathBuf>,
    /// The LSP servers it declares (`.lsp.json`, `lspServers`): listed, not
    /// started (cadre has no LSP tool; docs/plugins.md).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub lsp_servers: Vec<String>,
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

impl Plugin {
    /// What of the plugin cadre does not run, in a line for `plugins list`
    /// and `config show`; `None` when everything is.
    pub fn unsupported_note(&self) -> Option<String> {
        (!self.lsp_servers.is_empty()).then(|| {
            format!(
                "lspServers {}: not supported (cadre has no LSP tool; docs/plugins.md)",
                self.lsp_servers.join(", ")
            )
        })
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
        // Its component paths are checked once here; the readers of each
        // part take the checked list quietly.
        let (parts, problems) = components(&root);
        diags.extend(problems);
        let source = source.unwrap_or_else(|| format!("{name}@inline"));
        out.push(Plugin {
            data: home.map(|h| data_dir(h, &source)),
            lsp_servers: lsp_names(&parts.lsp, &mut diags),
            source,
            name,
            path: root,
            version: m.get("version").and_then(Value::as_str).map(str::to_string),
            enabled_by,
            scope,
        });
    }
    (out, diags)
}

/// A part of a plugin: a file, or a value written inline in its
/// manifest (with the manifest's positions).
#[derive(Debug, Clone, PartialEq)]
pub enum Part {
    File(PathBuf),
    Inline(Node),
}

/// Where a plugin's parts are: the default folders and files, as its
/// manifest changes them. `commands`, `agents` and `outputStyles` in the
/// manifest replace their default folder (as in Claude Code: "when set,
/// the commands/ directory is not auto-loaded"); `skills`, `hooks`,
/// `mcpServers` and `lspServers` add to theirs. Every path is checked: it
/// starts with `./`, has no `..`, and does not lead out of the plugin's
/// folder through a symbolic link.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Components {
    /// Command files, and folders of them.
    pub commands: Vec<PathBuf>,
    /// Agent files, and folders of them.
    pub agents: Vec<PathBuf>,
    /// Skill folders (holding `SKILL.md`), and folders of them.
    pub skills: Vec<PathBuf>,
    /// Output style files, and folders of them.
    pub output_styles: Vec<PathBuf>,
    pub hooks: Vec<Part>,
    pub mcp: Vec<Part>,
    pub lsp: Vec<Part>,
    /// The commands of the mapping form of `commands` (`{"NAME":
    /// {"source" | "content", "description", ...}}`).
    pub named_commands: Vec<NamedCommand>,
}

/// A command the manifest's `commands` mapping names: `/PLUGIN:NAME`, read
/// from a file of the plugin (`source`) or written inline (`content`),
/// with the mapping's metadata over the file's frontmatter.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NamedCommand {
    pub name: String,
    pub file: Option<PathBuf>,
    pub content: Option<String>,
    pub description: Option<String>,
    pub argument_hint: Option<String>,
    pub model: Option<String>,
    pub allowed_tools: Option<Vec<String>>,
}

/// A plugin's manifest file.
pub fn manifest_path(root: &Path) -> PathBuf {
    root.join(".claude-plugin").join("plugin.json")
}

/// The parts of the plugin at `root` ([`Components`]), and a warning at
/// its place in `plugin.json` for each entry that is not used.
pub fn components(root: &Path) -> (Components, Vec<Diagnostic>) {
    let manifest = manifest_path(root);
    let mut diags = Vec::new();
    let tree = if manifest.is_file() {
        match raw::read_text(&manifest, MAX_MANIFEST_BYTES).and_then(|t| {
            serde_json::from_str::<Value>(&t)
                .map_err(|e| format!("{}:{}: not valid JSON: {e}", e.line(), e.column()))?;
            raw::parse_yaml(&t).map_err(|e| e.to_string())
        }) {
            Ok(node) => Some(node),
            Err(e) => {
                diags.push(Diagnostic::warning(Some(&manifest), None, e));
                None
            }
        }
    } else {
        None
    };
    let mut check = Check {
        root,
        real_root: crate::paths::resolve(root),
        manifest: &manifest,
        diags: &mut diags,
    };
    let tree = tree.as_ref();
    let field = |key: &str| tree.and_then(|t| t.get(key));
    let mut c = Components::default();
    // The folders a manifest entry replaces or adds to.
    let default = |sub: &str| vec![root.join(sub)];
    c.commands = match field("commands") {
        Some(n) if matches!(n.kind, raw::Kind::Map(_)) => {
            c.named_commands = check.named_commands(n);
            Vec::new()
        }
        Some(n) => check.paths(n, "commands", false),
        None => default("commands"),
    };
    // A command path that is a skill's folder is read as that skill.
    let (skill_dirs, commands): (Vec<PathBuf>, Vec<PathBuf>) = std::mem::take(&mut c.commands)
        .into_iter()
        .partition(|p| p.join("SKILL.md").is_file());
    c.commands = commands;
    c.agents =
        field("agents").map_or_else(|| default("agents"), |n| check.paths(n, "agents", false));
    c.skills = default("skills");
    if let Some(n) = field("skills") {
        c.skills.extend(check.paths(n, "skills", true));
    }
    c.skills.extend(skill_dirs);
    c.output_styles = field("outputStyles").map_or_else(
        || default("output-styles"),
        |n| check.paths(n, "outputStyles", false),
    );
    c.hooks = check.parts(
        field("hooks"),
        "hooks",
        &root.join("hooks").join("hooks.json"),
    );
    c.mcp = check.parts(field("mcpServers"), "mcpServers", &root.join(".mcp.json"));
    c.lsp = check.parts(field("lspServers"), "lspServers", &root.join(".lsp.json"));
    for list in [
        &mut c.commands,
        &mut c.agents,
        &mut c.skills,
        &mut c.output_styles,
    ] {
        dedup(list);
    }
    (c, diags)
}

/// The manifest's entries checked against the plugin's folder.
struct Check<'a> {
    root: &'a Path,
    real_root: PathBuf,
    manifest: &'a Path,
    diags: &'a mut Vec<Diagnostic>,
}

impl Check<'_> {
    fn warn(&mut self, at: &Node, why: impl Into<String>) {
        self.diags.push(Diagnostic::warning(
            Some(self.manifest),
            Some(at.pos),
            why.into(),
        ));
    }

    /// The paths of a component field: one path or a list of them.
    fn paths(&mut self, n: &Node, key: &str, dot: bool) -> Vec<PathBuf> {
        let items: Vec<&Node> = match &n.kind {
            raw::Kind::Seq(items) => items.iter().collect(),
            _ => vec![n],
        };
        items
            .into_iter()
            .filter_map(|item| self.path(item, key, dot))
            .collect()
    }

    /// One path of the manifest, if it names something inside the plugin.
    fn path(&mut self, n: &Node, key: &str, dot: bool) -> Option<PathBuf> {
        let Some(s) = n.as_str() else {
            self.warn(
                n,
                format!(
                    "{key}: expected a path inside the plugin (`./…`), found {}; ignored",
                    n.type_name()
                ),
            );
            return None;
        };
        let why = if Path::new(s).is_absolute() {
            Some("is an absolute path; a plugin names its parts inside its folder (`./…`)")
        } else if Path::new(s)
            .components()
            .any(|c| c == std::path::Component::ParentDir)
        {
            Some("leaves the plugin's folder (`..`)")
        } else if !(s.starts_with("./") || (dot && s == ".")) {
            Some("must start with `./` (a path inside the plugin's folder)")
        } else {
            None
        };
        if let Some(why) = why {
            self.warn(n, format!("{key}: {s:?} {why}; ignored"));
            return None;
        }
        let path = crate::paths::lexical(&self.root.join(s));
        if !path.exists() {
            self.warn(
                n,
                format!("{key}: {s:?}: no such file or folder in the plugin; ignored"),
            );
            return None;
        }
        let real = crate::paths::resolve(&path);
        if !real.starts_with(&self.real_root) {
            self.warn(
                n,
                format!(
                    "{key}: {s:?} leads out of the plugin's folder (a symbolic link to {}); ignored",
                    real.display()
                ),
            );
            return None;
        }
        Some(path)
    }

    /// The mapping form of `commands`: each entry a `source` file of the
    /// plugin or inline `content`, with `description`, `argumentHint`,
    /// `model` and `allowedTools`.
    fn named_commands(&mut self, n: &Node) -> Vec<NamedCommand> {
        const KEYS: [&str; 6] = [
            "source",
            "content",
            "description",
            "argumentHint",
            "model",
            "allowedTools",
        ];
        let mut out = Vec::new();
        for (key, entry) in n.entries() {
            let name = &key.name;
            if !matches!(entry.kind, raw::Kind::Map(_)) {
                self.warn(
                    entry,
                    format!(
                        "commands.{name}: expected a mapping, found {}; ignored",
                        entry.type_name()
                    ),
                );
                continue;
            }
            for (k, _) in entry.entries() {
                if !KEYS.contains(&k.name.as_str()) {
                    self.diags.push(Diagnostic::warning(
                        Some(self.manifest),
                        Some(k.pos),
                        format!("commands.{name}: unknown key `{}`; ignored", k.name),
                    ));
                }
            }
            let text = |k: &str| entry.get(k).and_then(Node::as_str).map(str::to_string);
            let mut c = NamedCommand {
                name: name.clone(),
                content: text("content"),
                description: text("description"),
                argument_hint: text("argumentHint"),
                model: text("model"),
                allowed_tools: entry.get("allowedTools").map(|v| match &v.kind {
                    raw::Kind::Seq(items) => items
                        .iter()
                        .filter_map(|i| i.as_str().map(str::to_string))
                        .collect(),
                    _ => v
                        .as_str()
                        .map(|t| t.split(',').map(|x| x.trim().to_string()).collect())
                        .unwrap_or_default(),
                }),
                ..NamedCommand::default()
            };
            if let Some(src) = entry.get("source") {
                c.file = self.path(src, &format!("commands.{name}.source"), false);
                if c.file.as_ref().is_some_and(|f| !f.is_file()) {
                    self.warn(src, format!("commands.{name}.source: not a file; ignored"));
                    c.file = None;
                }
                if c.file.is_none() {
                    continue;
                }
            } else if c.content.is_none() {
                self.warn(
                    entry,
                    format!("commands.{name}: neither `source` nor `content`; ignored"),
                );
                continue;
            }
            out.push(c);
        }
        out
    }

    /// The default file of `hooks`, `mcpServers` or `lspServers` (if it
    /// exists), and what the manifest adds: paths of JSON files and inline
    /// mappings, one or a list.
    fn parts(&mut self, n: Option<&Node>, key: &str, default: &Path) -> Vec<Part> {
        let mut out = Vec::new();
        if default.is_file() {
            out.push(Part::File(default.to_path_buf()));
        }
        let items: Vec<&Node> = match n.map(|n| &n.kind) {
            None => Vec::new(),
            Some(raw::Kind::Seq(items)) => items.iter().collect(),
            Some(_) => n.into_iter().collect(),
        };
        for item in items {
            match &item.kind {
                raw::Kind::Map(_) => out.push(Part::Inline(item.clone())),
                raw::Kind::Str(s) if s.ends_with(".mcpb") || s.ends_with(".dxt") => self.warn(
                    item,
                    format!(
                        "{key}: {s:?}: MCP bundles (.mcpb, .dxt) are not read by cadre; ignored"
                    ),
                ),
                _ => {
                    if let Some(p) = self.path(item, key, false)
                        && !out.contains(&Part::File(p.clone()))
                    {
                        out.push(Part::File(p));
                    }
                }
            }
        }
        out
    }
}

/// A list without repeats, in its order.
fn dedup(list: &mut Vec<PathBuf>) {
    let mut seen = std::collections::HashSet::new();
    list.retain(|p| seen.insert(p.clone()));
}

/// The part as a tree: an inline value as written, a file read bounded
/// (strictly JSON, with positions).
fn part_tree(part: &Part) -> Result<(PathBuf, Node, bool), (PathBuf, String)> {
    match part {
        Part::Inline(node) => Ok((PathBuf::new(), node.clone(), true)),
        Part::File(f) => raw::read_text(f, MAX_MANIFEST_BYTES)
            .and_then(|t| {
                serde_json::from_str::<Value>(&t)
                    .map_err(|e| format!("{}:{}: not valid JSON: {e}", e.line(), e.column()))?;
                raw::parse_yaml(&t).map_err(|e| e.message)
            })
            .map(|node| (f.clone(), node, false))
            .map_err(|e| (f.clone(), e)),
    }
}

/// The names of a plugin's LSP servers (each file's or mapping's keys,
/// with or without an `lspServers` wrapper).
fn lsp_names(parts: &[Part], diags: &mut Vec<Diagnostic>) -> Vec<String> {
    let mut out = Vec::new();
    for part in parts {
        match part_tree(part) {
            Ok((_, node, _)) => {
                let servers = node.get("lspServers").unwrap_or(&node);
                out.extend(servers.entries().iter().map(|(k, _)| k.name.clone()));
            }
            Err((f, e)) => diags.push(Diagnostic::warning(Some(&f), None, e)),
        }
    }
    out
}

/// The data folder of the plugin known as `source` (`NAME@MARKETPLACE`):
/// `~/.claude/plugins/data/NAME-MARKETPLACE`, named as Claude Code names
/// it (every character but letters, digits, `-` and `_` made `-`), so a
/// plugin finds the same folder under both.
pub fn data_dir(home: &Path, source: &str) -> PathBuf {
    let id: String = source
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect();
    plugins_home(home).join("data").join(id)
}

/// Creates a plugin's data folder if it is not there yet (the first time
/// one of its hooks or servers is given it).
pub fn ensure_data_dir(dir: &Path) {
    if let Err(e) = std::fs::create_dir_all(dir) {
        tracing::warn!("plugin data folder {}: {e}", dir.display());
    }
}

/// The hooks of one plugin as settings layers of the scope that enabled
/// it, one per file: `hooks/hooks.json` and the manifest's `hooks` (paths
/// inside the plugin, or mappings). Each hook is read strictly, as a
/// settings file's, and knows its plugin's folders.
pub fn hook_layers(plugin: &Plugin, warnings: &mut Vec<Diagnostic>) -> Vec<LayerDoc> {
    let root = &plugin.path;
    let manifest = manifest_path(root);
    let mut trees: Vec<(PathBuf, Node)> = Vec::new();
    for part in &components(root).0.hooks {
        match part_tree(part) {
            Ok((_, node, true)) => trees.push((manifest.clone(), node)),
            Ok((f, node, false)) => match node.get("hooks") {
                Some(h) => trees.push((f, h.clone())),
                None => continue,
            },
            Err((f, e)) => warnings.push(Diagnostic::warning(
                Some(&f),
                None,
                format!("{e}; the plugin's hooks here are not run"),
            )),
        }
    }
    let mut docs = Vec::new();
    for (path, h) in &trees {
        let mut hooks = Map::new();
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
                    if let Some(data) = &plugin.data {
                        h["plugin_data"] = Value::String(data.display().to_string());
                    }
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
/// without an `mcpServers` wrapper) and the manifest's `mcpServers`
/// (paths inside the plugin, or mappings), with the file each came from.
pub fn mcp_servers(root: &Path) -> (Vec<(String, Value, PathBuf)>, Vec<Diagnostic>) {
    let mut out = Vec::new();
    let mut diags = Vec::new();
    let manifest = manifest_path(root);
    for part in &components(root).0.mcp {
        let (path, doc) = match part {
            Part::Inline(node) => (manifest.clone(), node.to_json()),
            Part::File(f) => match read_json(f) {
                Ok(Some(v)) => (f.clone(), v),
                Ok(None) => continue,
                Err(e) => {
                    diags.push(Diagnostic::warning(
                        Some(f),
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

/// `${CLAUDE_PLUGIN_ROOT}` and `${CLAUDE_PLUGIN_DATA}` in a plugin's
/// text, replaced by its folders.
pub fn expand_vars(text: &str, root: &Path, data: Option<&Path>) -> String {
    let text = text.replace("${CLAUDE_PLUGIN_ROOT}", &root.display().to_string());
    match data {
        Some(d) => text.replace("${CLAUDE_PLUGIN_DATA}", &d.display().to_string()),
        None => text,
    }
}
