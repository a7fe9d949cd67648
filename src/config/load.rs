//! Loading settings: reading every layer's file (cadre's TOML or YAML,
//! Claude Code's JSON; found by `files`), adding the environment and
//! command-line layers (`env`), and merging in the order [`super::layers`]
//! states. Also here: the report of unknown keys with their position, and
//! where each flag value was set.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use figment::providers::Serialized;
use serde_json::{Map, Value};

use super::claude;
use super::env::{cli_layer, env_layer};
pub use super::files::{LayerFile, layer_files};
use super::files::{home, managed_root};
use super::flags::{Flag, FlagDecl, Flags, Layer};
use super::hooks::{Entry as HookEntry, read_entry as read_hook_entry};
use super::layers::{self, Format, LayerDoc, Origin, Origins, Scope};
use super::mode::PermissionMode;
use super::settings::{OPEN_TABLES, Settings};
use super::trust::Skipped;
use super::trust::{self, TrustStore};
use crate::diagnostic::{Diagnostic, Pos};
use crate::raw::{self, Kind, Node};

/// Settings files larger than this are an error (a settings file is a
/// page or two; this bounds what a repository's file can make cadre read).
pub const MAX_SETTINGS_BYTES: u64 = 4 * 1024 * 1024;

/// The embedded lowest layer: flag declarations and model aliases.
pub const DEFAULTS_TOML: &str = include_str!("../../config/defaults.toml");

/// What the command line contributes to settings.
#[derive(Debug, Clone, Default)]
pub struct CliOverrides {
    /// `--feature NAME=on|off`, in order; a later one wins.
    pub features: Vec<(String, bool)>,
    pub model: Option<String>,
    pub permission_mode: Option<PermissionMode>,
    /// `--trust`: obey the project's settings in full for this run, as if
    /// the folder were trusted.
    pub trust: bool,
    /// `--settings FILE|JSON`: the `flag` layer (a file's path, or a JSON
    /// object as text).
    pub settings: Option<String>,
    /// `--setting-sources`: the user, project and local layers to read
    /// (`None`: all of them).
    pub setting_sources: Option<Vec<Scope>>,
    /// `--allowedTools` and `--disallowedTools`: rules the `cli` layer adds
    /// to the permission lists.
    pub allow: Vec<String>,
    pub deny: Vec<String>,
    /// `--coordinator`.
    pub mode: Option<super::Mode>,
    /// `--plugin-dir`, in order.
    pub plugin_dirs: Vec<PathBuf>,
    /// Settings an SDK host applied while the session runs
    /// (`apply_flag_settings`): read after `--settings`, at the flag
    /// layer's place, so managed settings still win. Shared by every copy
    /// of the input (the reload watcher's too).
    pub host_settings: HostSettings,
}

/// See [`CliOverrides::host_settings`].
#[derive(Debug, Clone, Default)]
pub struct HostSettings(Arc<std::sync::Mutex<Map<String, Value>>>);

impl HostSettings {
    /// Merges `patch` in: each top-level key replaces the one before; a
    /// `null` value removes it.
    pub fn merge(&self, patch: Map<String, Value>) {
        let mut m = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for (k, v) in patch {
            if v.is_null() {
                m.remove(&k);
            } else {
                m.insert(k, v);
            }
        }
    }

    /// The settings applied so far (empty when none).
    pub fn get(&self) -> Map<String, Value> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Puts back what [`HostSettings::get`] returned (a change that did not load).
    pub fn set(&self, m: Map<String, Value>) {
        *self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = m;
    }
}

/// Everything settings depend on, so that loading is a plain function.
#[derive(Debug, Clone, Default)]
pub struct LoadInput {
    /// The working directory used for discovery and relative paths.
    pub cwd: PathBuf,
    /// `--config PATH`.
    pub config: Option<PathBuf>,
    /// The process environment (all of it; only `CADRE_*` and a few
    /// well-known variables are read).
    pub env: Vec<(String, String)>,
    pub cli: CliOverrides,
}

impl LoadInput {
    /// Where managed files are looked for: `/`, or `CADRE_MANAGED_ROOT`.
    pub fn managed_root(&self) -> PathBuf {
        managed_root(self)
    }

    /// The user's home folder, from `HOME` in the input's environment.
    pub fn home(&self) -> Option<PathBuf> {
        home(self)
    }

    pub fn env_var(&self, name: &str) -> Option<&str> {
        self.env
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Settings after layering, with the flags and any warnings.
#[derive(Debug, Clone)]
pub struct LoadedConfig {
    pub settings: Settings,
    /// The cadre config file found in the project or named by `--config`
    /// or `CADRE_CONFIG` (then maybe the user's own), if any.
    pub path: Option<PathBuf>,
    pub flags: Flags,
    /// Warnings (unknown keys and flags). Errors are returned as `Err`.
    pub diagnostics: Vec<Diagnostic>,
    /// Every settings file of every layer, read or not.
    pub files: Vec<LayerFile>,
    /// Where each effective value came from.
    pub origins: Origins,
    /// Claude Code keys that cadre does not implement.
    pub ignored: Vec<IgnoredKey>,
    /// What the project and local layers set that was not applied because
    /// the folder is not trusted.
    pub skipped: Vec<Skipped>,
    /// Whether the project's settings apply in full.
    pub trusted: bool,
    /// The folder trust is decided for (the git root, or the working directory).
    pub trust_root: PathBuf,
    /// The folder cadre was started in, whose `.claude` holds the project's
    /// settings: what hooks get as `CLAUDE_PROJECT_DIR`.
    pub project_dir: PathBuf,
    /// Where `disableBypassPermissionsMode: "disable"` was set, if in any
    /// layer: no session may then run in `bypassPermissions`.
    pub bypass_disabled_by: Option<Origin>,
    /// The plugins this session loads (docs/plugins.md).
    pub plugins: Vec<super::plugins::Plugin>,
}

/// The one place the session folder is decided: `transcripts.dir` as a
/// layer set it (relative to the working directory), or by default the
/// user's folder for this project in Claude Code's place
/// (`~/.claude/projects/<project key>/`). Without a home folder the
/// project's old `.cadre/sessions` is used, with a logged warning.
fn transcripts_dir(input: &LoadInput, set: &Path) -> PathBuf {
    if !set.as_os_str().is_empty() {
        return crate::paths::lexical(&input.cwd.join(set));
    }
    if let Some(d) = super::files::user_sessions_dir(input) {
        return d;
    }
    let old = input.cwd.join(OLD_SESSIONS_DIR);
    tracing::warn!(
        "neither HOME nor CLAUDE_CONFIG_DIR is set: sessions are written to {}",
        old.display()
    );
    old
}

/// Where sessions lived before they moved out of the project, relative to
/// the working directory; still read (docs/sessions.md, "Old sessions in
/// the project").
pub const OLD_SESSIONS_DIR: &str = ".cadre/sessions";

/// Settings could not be loaded. Each diagnostic names the file and, where
/// there is one, the line and column.
#[derive(Debug, Clone, thiserror::Error, miette::Diagnostic)]
#[diagnostic(code(cadre::config))]
pub struct ConfigError {
    pub diagnostics: Vec<Diagnostic>,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, d) in self.diagnostics.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{d}")?;
        }
        Ok(())
    }
}

impl ConfigError {
    pub(super) fn one(d: Diagnostic) -> Self {
        ConfigError {
            diagnostics: vec![d],
        }
    }
}

/// Finds the project's cadre config file: `--config`, then `CADRE_CONFIG`,
/// then `cadre.toml`, `cadre.yaml`, `config/cadre.toml`, `config/cadre.yaml`
/// in the working directory. `Ok(None)` means there is none. (The user's
/// `$XDG_CONFIG_HOME/cadre/cadre.toml` is a layer of its own, read as
/// well: see [`super::layers`].)
pub fn discover(input: &LoadInput) -> Result<Option<PathBuf>, ConfigError> {
    let explicit = input
        .config
        .clone()
        .or_else(|| input.env_var("CADRE_CONFIG").map(PathBuf::from));
    if let Some(path) = explicit {
        let path = if path.is_relative() {
            input.cwd.join(path)
        } else {
            path
        };
        if !path.is_file() {
            return Err(ConfigError::one(Diagnostic::error(
                Some(&path),
                None,
                "config file not found (given by --config or CADRE_CONFIG)",
            )));
        }
        return Ok(Some(path));
    }
    for name in [
        "cadre.toml",
        "cadre.yaml",
        "config/cadre.toml",
        "config/cadre.yaml",
    ] {
        let p = input.cwd.join(name);
        if p.is_file() {
            return Ok(Some(p));
        }
    }
    Ok(None)
}

/// A Claude Code key that cadre read but does not implement.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct IgnoredKey {
    pub key: String,
    pub origin: Origin,
}

/// Loads settings through every layer (see [`super::layers`]). Unknown keys
/// of cadre's files are warnings, or errors when the merged settings say
/// `strict = true`.
pub fn load(input: &LoadInput) -> Result<LoadedConfig, ConfigError> {
    let mut warnings = Vec::new();
    let trust_root = trust::project_root(&input.cwd);
    let store = match TrustStore::load(trust::store_path(|k| input.env_var(k).map(str::to_string)))
    {
        Ok(s) => s,
        Err(e) => {
            warnings.push(Diagnostic::warning(
                None,
                None,
                format!("trust list unreadable, no folder is trusted: {e}"),
            ));
            TrustStore::default()
        }
    };
    let trusted = input.cli.trust || store.trusts(&trust_root);

    let files = layer_files(input)?;
    // The cadre file found or named (a named one may be the user's own).
    let project_config = discover(input)?.filter(|p| files.iter().any(|f| &f.path == p));

    // Built-in defaults.
    let mut acc = match serde_json::to_value(Settings::default()) {
        Ok(Value::Object(m)) => m,
        _ => Map::new(),
    };
    let mut origins = Origins::default();
    let defaults: Map<String, Value> = toml::from_str(DEFAULTS_TOML).unwrap_or_default();
    layers::merge(
        &mut acc,
        &LayerDoc::new(Scope::Default, "built-in", defaults),
        &mut origins,
    );
    origins.keys.clear();
    origins.items.clear();

    let mut ignored = Vec::new();
    let mut skipped = Vec::new();
    let mut bypass_disabled_by = None;
    let mut managed = Vec::new();
    for f in files.iter().filter(|f| f.read) {
        let mut doc = read_layer(f, &mut warnings, &mut ignored, &mut bypass_disabled_by)?;
        let base = match f.format {
            // `--settings` names folders relative to the working directory.
            _ if f.scope == Scope::Flag => input.cwd.clone(),
            // `.claude/settings.json` names folders relative to the project.
            Format::Claude => f
                .path
                .parent()
                .and_then(Path::parent)
                .map_or_else(|| input.cwd.clone(), Path::to_path_buf),
            _ => f
                .path
                .parent()
                .map_or_else(|| input.cwd.clone(), Path::to_path_buf),
        };
        doc.resolve_dirs(&base);
        if f.scope != Scope::Managed {
            let origin = doc.origin("agents.managed_dirs");
            let taken = doc.take(&["agents", "managed_dirs"]);
            if taken.is_some_and(|v| v.as_array().is_none_or(|a| !a.is_empty())) {
                warnings.push(Diagnostic::warning(
                    Some(&f.path),
                    origin.line.map(|l| Pos::new(l, origin.column.unwrap_or(1))),
                    "`agents.managed_dirs` is ignored here: only managed settings (/etc/cadre/cadre.toml) may set it",
                ));
            }
        }
        if f.scope.from_repository() {
            narrow_sandbox(&mut doc, trusted, &mut skipped);
            // A repository never chooses the command that makes your key,
            // trusted or not (Claude Code reads `apiKeyHelper` from user
            // and managed settings only).
            let origin = doc.origin("provider.api_key_helper");
            if doc.take(&["provider", "api_key_helper"]).is_some() {
                warnings.push(origin.diagnostic(
                    crate::diagnostic::Severity::Warning,
                    "apiKeyHelper is read from your own (~/.claude/settings.json) and managed settings only; ignored here",
                ));
            }
        }
        if f.scope.from_repository() && !trusted {
            let mode = doc
                .value
                .get("permissions")
                .and_then(|p| p.get("default_mode"))
                .and_then(Value::as_str);
            if mode.is_some_and(|m| !trust::UNTRUSTED_MODES.contains(&m)) {
                let origin = doc.origin("permissions.default_mode");
                doc.take(&["permissions", "default_mode"]);
                skipped.push(Skipped {
                    what: "permissions.default_mode".into(),
                    origin: origin.to_string(),
                });
            }
            for key in trust::GUARDED_KEYS {
                let origin = doc.origin(&key.join("."));
                let empty = |v: &Value| match v {
                    Value::Null => true,
                    Value::Array(a) => a.is_empty(),
                    Value::Object(m) => m.values().all(|x| x.as_array().is_some_and(Vec::is_empty)),
                    _ => false,
                };
                let below = key
                    .iter()
                    .try_fold(None::<&Value>, |at, k| match at {
                        None => acc.get(*k).map(Some),
                        Some(v) => v.get(*k).map(Some),
                    })
                    .flatten();
                // An empty table or list, or the value already in effect,
                // asks for nothing: drop it quietly.
                if doc
                    .take(key)
                    .is_some_and(|v| !empty(&v) && below != Some(&v))
                {
                    skipped.push(Skipped {
                        what: key.join("."),
                        origin: origin.to_string(),
                    });
                }
            }
        }
        if f.scope == Scope::Managed {
            managed.push(doc);
        } else {
            layers::merge(&mut acc, &doc, &mut origins);
        }
    }
    let mut env = env_layer(input, &acc, &mut warnings);
    if let Some(v) = env.take(&["agents", "managed_dirs"]) {
        let var = env.origin("agents.managed_dirs").source;
        if v.as_array().is_none_or(|a| !a.is_empty()) {
            warnings.push(Diagnostic::warning(
                Some(Path::new(&var)),
                None,
                "`agents.managed_dirs` is ignored here: only managed settings (/etc/cadre/cadre.toml) may set it",
            ));
        }
    }
    layers::merge(&mut acc, &env, &mut origins);
    let mut cli = cli_layer(&input.cli);
    cli.resolve_dirs(&input.cwd);
    layers::merge(&mut acc, &cli, &mut origins);
    for doc in &managed {
        layers::merge(&mut acc, doc, &mut origins);
    }
    // Plugins, as the layers above left them: their hooks join the
    // settings' as a layer of the scope that enabled each plugin.
    let plugin_settings: super::settings::PluginSettings = acc
        .get("plugins")
        .and_then(|v| serde_json::from_value(v.clone()).ok())
        .unwrap_or_default();
    let (plugins, plugin_diags) =
        super::plugins::resolve(&plugin_settings, &origins, input.home().as_deref());
    super::observed::plugins_loaded(&plugins);
    warnings.extend(plugin_diags);
    for p in &plugins {
        for doc in super::plugins::hook_layers(p, &mut warnings) {
            layers::merge(&mut acc, &doc, &mut origins);
        }
    }

    let mut settings: Settings = figment::Figment::from(Serialized::defaults(Value::Object(acc)))
        .extract()
        .map_err(|e| extraction_error(e, &origins))?;

    if settings.strict && !warnings.is_empty() {
        for w in &mut warnings {
            w.severity = crate::diagnostic::Severity::Error;
        }
        return Err(ConfigError {
            diagnostics: warnings,
        });
    }

    if let Some(o) = &bypass_disabled_by
        && settings.permissions.default_mode == PermissionMode::BypassPermissions
    {
        settings.permissions.default_mode = settings
            .permissions
            .default_mode
            .unless_bypass_disabled(true);
        warnings.push(o.diagnostic(
            crate::diagnostic::Severity::Warning,
            "bypassPermissions is disabled here (disableBypassPermissionsMode); the permission mode is `default`",
        ));
    }
    settings.transcripts.dir = transcripts_dir(input, &settings.transcripts.dir);
    fit_thinking_budget(&mut settings, &origins);
    apply_limits(&mut settings, &origins, &mut warnings)?;
    // The catalog reads a plugin's agents, skills, commands and styles.
    settings
        .agents
        .plugin_dirs
        .extend(plugins.iter().map(|p| p.path.clone()));
    let flags = build_flags(&settings, &origins, &mut warnings);

    Ok(LoadedConfig {
        settings,
        path: project_config,
        flags,
        diagnostics: warnings,
        files,
        origins,
        ignored,
        skipped,
        trusted,
        trust_root,
        project_dir: input.cwd.clone(),
        bypass_disabled_by,
        plugins,
    })
}

/// Claude Code's switches that limit what a session may do, applied once
/// here: `disableAllHooks` (no settings or plugin hook, no status line),
/// `maxEffortLevel` (every model's accepted levels capped), and the model
/// policy (`deniedModels`, `availableModels`) checked for the main model;
/// a refused model is an error at the position of the key that chose it.
fn apply_limits(
    settings: &mut Settings,
    origins: &Origins,
    warnings: &mut Vec<Diagnostic>,
) -> Result<(), ConfigError> {
    if settings.disable_all_hooks {
        settings.hooks = Default::default();
        settings.status_line = None;
    }
    if let Some(max) = settings.max_effort_level.clone() {
        let max = max.trim().to_ascii_lowercase();
        match super::settings::EFFORT_LEVELS
            .iter()
            .position(|l| *l == max)
        {
            Some(rank) => {
                let allowed = &super::settings::EFFORT_LEVELS[..=rank];
                for levels in settings.effort_levels.values_mut() {
                    levels.retain(|l| allowed.contains(&l.as_str()));
                }
            }
            None => {
                let why = format!(
                    "maxEffortLevel: `{max}` is not a level ({}); no cap applies",
                    super::settings::EFFORT_LEVELS.join(", ")
                );
                warnings.push(match origins.of("max_effort_level") {
                    Some(o) => o.diagnostic(crate::diagnostic::Severity::Warning, why),
                    None => Diagnostic::warning(None, None, why),
                });
            }
        }
    }
    let model = settings.provider.model.clone();
    if !model.is_empty()
        && let Some(why) = settings.model_refusal(&model)
    {
        let at = origins
            .of("provider.model")
            .or_else(|| origins.of("denied_models"))
            .or_else(|| origins.of("available_models"));
        let message = format!("{why}; choose another model");
        return Err(ConfigError::one(match at {
            Some(o) => o.diagnostic(crate::diagnostic::Severity::Error, message),
            None => Diagnostic::error(None, None, message),
        }));
    }
    Ok(())
}

/// A repository's layer may only make the sandbox stricter, and only in a
/// trusted folder: untrusted, its whole `sandbox` table is skipped;
/// trusted, what would widen the sandbox is.
fn narrow_sandbox(doc: &mut LayerDoc, trusted: bool, skipped: &mut Vec<Skipped>) {
    if !trusted {
        let origin = doc.origin("sandbox");
        if doc
            .take(&["sandbox"])
            .is_some_and(|v| v.as_object().is_some_and(|m| !m.is_empty()))
        {
            skipped.push(Skipped {
                what: "sandbox".into(),
                origin: origin.to_string(),
            });
        }
        return;
    }
    let origins: Vec<(String, String)> = super::sandbox::widening_keys()
        .map(|k| {
            let origin = doc.origin(&k).to_string();
            (k, origin)
        })
        .collect();
    let Some(Value::Object(sandbox)) = doc.value.get_mut("sandbox") else {
        return;
    };
    for what in super::sandbox::narrow(sandbox) {
        let origin = origins
            .iter()
            .find(|(k, _)| *k == what)
            .map(|(_, o)| o.clone())
            .unwrap_or_default();
        skipped.push(Skipped {
            what: format!("{what} (a repository may only narrow the sandbox)"),
            origin,
        });
    }
}

/// Claude Code's output limit when nothing sets one (`max_tokens` of its
/// requests; measured with 2.1.330 on Sonnet, Opus and Haiku 4.5).
const CLAUDE_CODE_MAX_OUTPUT_TOKENS: u32 = 32_000;

/// A thinking budget (`MAX_THINKING_TOKENS`, `--max-thinking-tokens`, …)
/// that cadre's default `max_tokens` could not hold is given Claude Code's
/// output limit, as Claude Code sends it: `MAX_THINKING_TOKENS=32000` in a
/// team's settings asks for 31,999 tokens of thinking in 32,000, not for
/// 8,191 in cadre's default 8,192. A `max_tokens` someone set stays (the
/// budget is then cut below it, as Claude Code cuts it).
fn fit_thinking_budget(settings: &mut Settings, origins: &layers::Origins) {
    let p = &mut settings.provider;
    if let Some(budget) = p.thinking_budget
        && budget >= p.max_tokens
        && !origins.keys.contains_key("provider.max_tokens")
    {
        p.max_tokens = p.max_tokens.max(CLAUDE_CODE_MAX_OUTPUT_TOKENS);
    }
}

/// Reads one settings file into a layer document.
fn read_layer(
    f: &LayerFile,
    warnings: &mut Vec<Diagnostic>,
    ignored: &mut Vec<IgnoredKey>,
    bypass_disabled_by: &mut Option<Origin>,
) -> Result<LayerDoc, ConfigError> {
    let path = &f.path;
    if f.format != Format::Claude {
        let (p, node) = read_file(path)?;
        unknown_keys(&p, &node, warnings);
        let mut doc = LayerDoc::from_node(f.scope, &p, &node);
        read_hooks(&p, &node, &mut doc, warnings);
        return Ok(doc);
    }
    let text = match &f.inline {
        Some(t) => t.clone(),
        None => raw::read_text(path, MAX_SETTINGS_BYTES)
            .map_err(|e| ConfigError::one(Diagnostic::error(Some(path), None, e)))?,
    };
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    if text.trim().is_empty() {
        return Ok(LayerDoc::new(
            f.scope,
            path.display().to_string(),
            Map::new(),
        ));
    }
    // JSON's own parser decides what is valid JSON; the positioned tree
    // comes from the YAML reader (JSON is YAML).
    if let Err(e) = serde_json::from_str::<Value>(text) {
        return Err(ConfigError::one(Diagnostic::error(
            Some(path),
            Some(Pos::new(e.line().max(1), e.column().max(1))),
            format!("not valid JSON: {e}"),
        )));
    }
    let node = raw::parse_yaml(text)
        .map_err(|e| ConfigError::one(Diagnostic::error(Some(path), Some(e.pos), e.message)))?;
    if !matches!(node.kind, Kind::Map(_)) {
        return Err(ConfigError::one(Diagnostic::error(
            Some(path),
            Some(node.pos),
            format!("expected an object of settings, found {}", node.type_name()),
        )));
    }
    let t = claude::translate(path, &node);
    warnings.extend(t.problems);
    if let Some(pos) = t.disables_bypass {
        *bypass_disabled_by = Some(Origin {
            scope: f.scope,
            source: path.display().to_string(),
            line: Some(pos.line),
            column: Some(pos.column),
        });
    }
    let mut doc = LayerDoc::new(f.scope, path.display().to_string(), t.value);
    doc.positions = t.positions.into_iter().collect();
    for (key, pos) in t.ignored {
        ignored.push(IgnoredKey {
            key,
            origin: Origin {
                scope: f.scope,
                source: path.display().to_string(),
                line: Some(pos.line),
                column: Some(pos.column),
            },
        });
    }
    Ok(doc)
}

#[derive(Clone, Copy)]
enum FileFormat {
    Toml,
    Yaml,
}

/// Whether a cadre file is read as YAML (by extension).
pub(super) fn file_format_is_yaml(path: &Path) -> bool {
    matches!(FileFormat::of(path), Some(FileFormat::Yaml))
}

impl FileFormat {
    fn of(path: &Path) -> Option<FileFormat> {
        match path.extension().and_then(|e| e.to_str()) {
            Some("toml") => Some(FileFormat::Toml),
            Some("yaml" | "yml") => Some(FileFormat::Yaml),
            _ => None,
        }
    }
}

fn read_file(path: &Path) -> Result<(PathBuf, Node), ConfigError> {
    let format = FileFormat::of(path).ok_or_else(|| {
        ConfigError::one(Diagnostic::error(
            Some(path),
            None,
            "unsupported config file extension; expected .toml, .yaml or .yml",
        ))
    })?;
    let text = raw::read_text(path, MAX_SETTINGS_BYTES)
        .map_err(|e| ConfigError::one(Diagnostic::error(Some(path), None, e)))?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    let parsed = match format {
        FileFormat::Toml => raw::parse_toml(text),
        FileFormat::Yaml => raw::parse_yaml(text),
    };
    let node = parsed
        .map_err(|e| ConfigError::one(Diagnostic::error(Some(path), Some(e.pos), e.message)))?;
    if !matches!(node.kind, Kind::Map(_)) {
        return Err(ConfigError::one(Diagnostic::error(
            Some(path),
            Some(node.pos),
            format!("expected a table of settings, found {}", node.type_name()),
        )));
    }
    Ok((path.to_path_buf(), node))
}

/// Reads each `[[hooks.EVENT]]` entry of a cadre file as the entries of
/// Claude Code's files are read ([`read_hook_entry`]): the layer keeps the
/// entry as read (a `timeout` in seconds becomes `timeout_ms`), and an
/// entry with a problem is reported at its position and left out, never
/// run in part.
fn read_hooks(path: &Path, node: &Node, doc: &mut LayerDoc, warnings: &mut Vec<Diagnostic>) {
    let Some(hooks) = node.get("hooks") else {
        return;
    };
    for (event, list) in hooks.entries() {
        let at = format!("hooks.{}", event.name);
        let Kind::Seq(items) = &list.kind else {
            continue; // a wrong shape is the settings' type error
        };
        let mut kept = Vec::new();
        for item in items {
            match read_hook_entry(item, true) {
                Ok(HookEntry::Hook(config)) => {
                    kept.extend(serde_json::to_value(config).ok());
                }
                Ok(HookEntry::OtherType { kind, pos }) => warnings.push(Diagnostic::warning(
                    Some(path),
                    Some(pos),
                    format!("{at}: {}", super::hooks::other_type_note(&kind)),
                )),
                Err(problems) => {
                    for (pos, why) in problems {
                        warnings.push(Diagnostic::warning(
                            Some(path),
                            Some(pos),
                            format!("{at}: {why}; this hook is not run"),
                        ));
                    }
                }
            }
        }
        if let Some(Value::Object(h)) = doc.value.get_mut("hooks") {
            h.insert(event.name.clone(), Value::Array(kept));
        }
    }
}

/// Reports keys of `node` that `Settings` does not have. The known keys are
/// read off `Settings::default()` serialised, so they cannot drift.
fn unknown_keys(path: &Path, node: &Node, out: &mut Vec<Diagnostic>) {
    let template = serde_json::to_value(Settings::default()).unwrap_or(Value::Null);
    walk_unknown(path, node, &template, &mut Vec::new(), out);
}

fn walk_unknown(
    path: &Path,
    node: &Node,
    template: &Value,
    at: &mut Vec<String>,
    out: &mut Vec<Diagnostic>,
) {
    // An empty table in the template takes any names (`plugins.enabled`).
    let Some(known) = template.as_object().filter(|k| !k.is_empty()) else {
        return;
    };
    for (key, value) in node.entries() {
        at.push(key.name.clone());
        let dotted = at.join(".");
        match known.get(&key.name) {
            Some(sub) if at.len() == 1 && OPEN_TABLES.contains(&key.name.as_str()) => {
                let decl = match key.name.as_str() {
                    "flags" => serde_json::to_value(FlagDecl::default()).ok(),
                    "mcp_servers" => {
                        serde_json::to_value(super::settings::McpServerConfig::default())
                            .ok()
                            .map(|mut v| {
                                // Optional fields are left out of the default's
                                // form; `env` and `headers` take any names.
                                for k in ["type", "command", "url", "env", "headers"] {
                                    v[k] = Value::Null;
                                }
                                v
                            })
                    }
                    _ => None,
                };
                if let Some(decl) = decl {
                    for (_, entry) in value.entries() {
                        walk_unknown(
                            path,
                            entry,
                            &decl,
                            &mut vec![key.name.clone(), "*".into()],
                            out,
                        );
                    }
                }
                let _ = sub;
            }
            Some(sub) => walk_unknown(path, value, sub, at, out),
            None => {
                let mut names: Vec<&str> = known.keys().map(String::as_str).collect();
                names.sort_unstable();
                out.push(Diagnostic::warning(
                    Some(path),
                    Some(key.pos),
                    format!(
                        "unknown key `{dotted}`; expected one of: {}",
                        names.join(", ")
                    ),
                ));
            }
        }
        at.pop();
    }
}

/// Turns a figment error into a diagnostic at the position of the key
/// that holds the bad value, in whichever layer set it.
fn extraction_error(e: figment::Error, origins: &Origins) -> ConfigError {
    let mut diagnostics = Vec::new();
    for err in e {
        let key = err.path.join(".");
        let origin = origins.of(&key);
        let path = origin.map_or_else(|| PathBuf::from("settings"), |o| PathBuf::from(&o.source));
        let pos = origin.and_then(|o| o.line.map(|l| Pos::new(l, o.column.unwrap_or(1))));
        let what = if key.is_empty() {
            String::new()
        } else {
            format!("`{key}`: ")
        };
        diagnostics.push(Diagnostic::error(
            Some(&path),
            pos,
            format!("{what}{}", err.kind),
        ));
    }
    ConfigError { diagnostics }
}

fn build_flags(settings: &Settings, origins: &Origins, warnings: &mut Vec<Diagnostic>) -> Flags {
    let mut flags = BTreeMap::new();
    for (name, decl) in &settings.flags {
        let value = settings.features.get(name).map_or(decl.default, |v| v.0);
        let set_by = match origins
            .keys
            .get(&format!("features.{name}"))
            .map(|o| o.scope)
        {
            None | Some(Scope::Default) => Layer::Default,
            Some(Scope::Env) => Layer::Env,
            Some(Scope::Cli) => Layer::Cli,
            Some(_) => Layer::File,
        };
        flags.insert(
            name.clone(),
            Flag {
                name: name.clone(),
                decl: decl.clone(),
                value,
                set_by,
            },
        );
    }
    let declared: Vec<&str> = settings.flags.keys().map(String::as_str).collect();
    for name in settings.features.keys() {
        if settings.flags.contains_key(name) {
            continue;
        }
        let origin = origins.keys.get(&format!("features.{name}"));
        let pos = origin.and_then(|o| o.line.map(|l| Pos::new(l, o.column.unwrap_or(1))));
        let path = origin.map_or_else(|| PathBuf::from("settings"), |o| PathBuf::from(&o.source));
        warnings.push(Diagnostic::warning(
            Some(&path),
            pos,
            format!(
                "unknown feature flag `{name}`; declared flags: {}",
                declared.join(", ")
            ),
        ));
    }
    Flags::new(flags.into_values())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{FORK_SUBAGENT, HookConfig, SessionKind};

    fn input(dir: &Path) -> LoadInput {
        LoadInput {
            cwd: dir.to_path_buf(),
            ..Default::default()
        }
    }

    #[test]
    fn defaults_declare_the_shipped_flags() {
        let dir = tempfile::tempdir().unwrap();
        let loaded = load(&input(dir.path())).unwrap();
        let fork = loaded.flags.get(FORK_SUBAGENT).unwrap();
        assert!(!fork.value);
        assert_eq!(fork.set_by, Layer::Default);
        assert_eq!(fork.decl.gates.len(), 2);
        assert_eq!(
            loaded.settings.models.get("haiku").map(String::as_str),
            Some("claude-haiku-4-5")
        );
        assert!(loaded.path.is_none());
    }

    #[test]
    fn layers_apply_in_order_file_env_cli() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("cadre.toml"),
            "[provider]\nmodel = \"from-file\"\nmax_tokens = 10\n[features]\nFORK_SUBAGENT = true\n",
        )
        .unwrap();
        let mut i = input(dir.path());
        let loaded = load(&i).unwrap();
        assert_eq!(loaded.settings.provider.model, "from-file");
        assert_eq!(loaded.flags.get(FORK_SUBAGENT).unwrap().set_by, Layer::File);

        i.env = vec![
            ("CADRE_PROVIDER__MODEL".into(), "from-env".into()),
            ("CADRE_FEATURES__FORK_SUBAGENT".into(), "off".into()),
        ];
        let loaded = load(&i).unwrap();
        assert_eq!(loaded.settings.provider.model, "from-env");
        assert_eq!(loaded.settings.provider.max_tokens, 10);
        let f = loaded.flags.get(FORK_SUBAGENT).unwrap();
        assert!(!f.value);
        assert_eq!(f.set_by, Layer::Env);

        i.cli.model = Some("from-cli".into());
        i.cli.features = vec![(FORK_SUBAGENT.into(), true)];
        let loaded = load(&i).unwrap();
        assert_eq!(loaded.settings.provider.model, "from-cli");
        let f = loaded.flags.get(FORK_SUBAGENT).unwrap();
        assert!(f.value && f.set_by == Layer::Cli);
        assert!(
            loaded
                .flags
                .effective(FORK_SUBAGENT, SessionKind::INTERACTIVE)
        );
        assert!(
            !loaded
                .flags
                .effective(FORK_SUBAGENT, SessionKind::NON_INTERACTIVE)
        );
    }

    #[test]
    fn unknown_keys_are_located_and_strict_makes_them_errors() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("cadre.yaml");
        std::fs::write(&p, "provider:\n  modle: x\n").unwrap();
        let loaded = load(&input(dir.path())).unwrap();
        assert_eq!(loaded.diagnostics.len(), 1);
        let d = &loaded.diagnostics[0];
        assert_eq!((d.line, d.column), (Some(2), Some(3)));
        assert!(d.message.contains("provider.modle"), "{}", d.message);

        std::fs::write(&p, "strict: true\nprovider:\n  modle: x\n").unwrap();
        let err = load(&input(dir.path())).unwrap_err();
        assert!(err.diagnostics[0].is_error());
        assert_eq!(err.diagnostics[0].line, Some(3));
    }

    #[test]
    fn hook_entries_of_a_cadre_file_are_read_strictly() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("cadre.toml"),
            "[[hooks.PreToolUse]]\ncommand = \"bash\"\narg = [\"check.sh\"]\n\n[[hooks.PreToolUse]]\nmatcher = \"Bash\"\ncommand = \"bash\"\nargs = [\"check.sh\"]\ntimeout = 2\nasync = true\n",
        )
        .unwrap();
        let mut i = input(dir.path());
        i.cli.trust = true;
        let loaded = load(&i).unwrap();
        let hooks = &loaded.settings.hooks.pre_tool_use;
        assert_eq!(
            hooks,
            &[HookConfig {
                matcher: Some("Bash".into()),
                args: Some(vec!["check.sh".into()]),
                timeout_ms: 2000,
                run_async: true,
                ..HookConfig::command("bash")
            }]
        );
        let d = &loaded.diagnostics;
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!((d[0].line, d[0].column), (Some(3), Some(1)));
        assert!(
            d[0].message
                .starts_with("hooks.PreToolUse: unknown key `arg`"),
            "{}",
            d[0].message
        );
    }

    #[test]
    fn type_errors_name_the_key_and_its_line() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("cadre.toml"),
            "\n[agents]\nmax_depth = \"deep\"\n",
        )
        .unwrap();
        let err = load(&input(dir.path())).unwrap_err();
        let d = &err.diagnostics[0];
        assert_eq!(d.line, Some(3), "{d}");
        assert!(d.message.contains("agents.max_depth"), "{d}");
    }

    #[test]
    fn syntax_errors_have_positions_and_missing_explicit_file_fails() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("cadre.toml"), "a = 1\nb = \n").unwrap();
        let err = load(&input(dir.path())).unwrap_err();
        assert_eq!(err.diagnostics[0].line, Some(2), "{err}");
        let mut i = input(dir.path());
        i.config = Some("nope.toml".into());
        assert!(load(&i).is_err());
    }

    #[test]
    fn discovery_order() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("config")).unwrap();
        std::fs::write(dir.path().join("config/cadre.toml"), "").unwrap();
        assert_eq!(
            discover(&input(dir.path())).unwrap(),
            Some(dir.path().join("config/cadre.toml"))
        );
        std::fs::write(dir.path().join("cadre.yaml"), "").unwrap();
        assert_eq!(
            discover(&input(dir.path())).unwrap(),
            Some(dir.path().join("cadre.yaml"))
        );
        let mut i = input(dir.path());
        i.env = vec![("CADRE_CONFIG".into(), "config/cadre.toml".into())];
        assert_eq!(
            discover(&i).unwrap(),
            Some(dir.path().join("config/cadre.toml"))
        );
    }

    #[test]
    fn unknown_environment_settings() {
        let dir = tempfile::tempdir().unwrap();
        let mut i = input(dir.path());
        i.env = vec![
            ("CADRE_BIN".into(), "/x/cadre".into()),
            ("CADRE_PROVIDR__MODEL".into(), "m".into()),
            ("CADRE_AGENTS__MAX_DEPTH".into(), "2".into()),
        ];
        let loaded = load(&i).unwrap();
        assert_eq!(loaded.settings.agents.max_depth, 2);
        assert_eq!(loaded.diagnostics.len(), 1, "{:?}", loaded.diagnostics);
        assert!(
            loaded.diagnostics[0]
                .message
                .contains("CADRE_PROVIDR__MODEL")
        );
    }

    fn write(p: &Path, text: &str) {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    #[test]
    fn every_layer_contributes_and_origins_name_them() {
        let dir = tempfile::tempdir().unwrap();
        let home = tempfile::tempdir().unwrap();
        let root = tempfile::tempdir().unwrap();
        let d = dir.path();
        write(
            &home.path().join(".claude/settings.json"),
            r#"{"permissions": {"deny": ["Bash(rm:*)"]}, "model": "user-model"}"#,
        );
        write(
            &home.path().join(".config/cadre/cadre.toml"),
            "[models]\nhaiku = \"user-haiku\"\n",
        );
        write(
            &d.join(".claude/settings.json"),
            r#"{"permissions": {"allow": ["Bash(rm:*)"], "defaultMode": "plan"}}"#,
        );
        write(&d.join("cadre.toml"), "[provider]\nmax_tokens = 7\n");
        write(
            &d.join(".claude/settings.local.json"),
            r#"{"permissions": {"defaultMode": "dontAsk"}}"#,
        );
        write(
            &root.path().join("etc/cadre/cadre.toml"),
            "[provider]\nmax_tokens = 99\n",
        );
        let mut i = input(d);
        i.env = vec![
            ("HOME".into(), home.path().display().to_string()),
            (
                "CADRE_MANAGED_ROOT".into(),
                root.path().display().to_string(),
            ),
            ("CADRE_MODELS__OPUS".into(), "env-opus".into()),
        ];
        i.cli.trust = true;
        let c = load(&i).unwrap();
        let s = &c.settings;
        assert_eq!(s.permissions.deny, ["Bash(rm:*)"]);
        assert_eq!(s.permissions.allow, ["Bash(rm:*)"]);
        assert_eq!(s.permissions.default_mode, PermissionMode::DontAsk);
        assert_eq!(s.provider.model, "user-model");
        assert_eq!(s.provider.max_tokens, 99);
        assert_eq!(s.models["haiku"], "user-haiku");
        assert_eq!(s.models["opus"], "env-opus");
        assert!(!s.models.contains_key("OPUS"));
        let o = &c.origins;
        assert_eq!(o.of("provider.max_tokens").unwrap().scope, Scope::Managed);
        assert_eq!(o.of("models.opus").unwrap().source, "CADRE_MODELS__OPUS");
        let deny = o.of_item("permissions.deny", "Bash(rm:*)").unwrap();
        assert_eq!((deny.scope, deny.line), (Scope::User, Some(1)));
        assert!(deny.source.ends_with(".claude/settings.json"));
        assert!(c.diagnostics.is_empty(), "{:?}", c.diagnostics);
    }

    #[test]
    fn an_untrusted_project_loses_what_runs_or_redirects() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        write(
            &d.join("cadre.toml"),
            "[provider]\nbase_url = \"http://evil\"\nmax_tokens = 5\n[agents]\nmanaged_dirs = [\"x\"]\n[[hooks.PreToolUse]]\ncommand = \"true\"\n",
        );
        write(
            &d.join(".claude/settings.json"),
            r#"{"permissions": {"allow": ["Bash"], "deny": ["Read"], "defaultMode": "bypassPermissions"}, "env": {"A": "b"}}"#,
        );
        let c = load(&input(d)).unwrap();
        assert!(!c.trusted);
        let s = &c.settings;
        assert_eq!(s.provider.base_url, None);
        assert_eq!(s.provider.max_tokens, 5);
        assert!(s.hooks.pre_tool_use.is_empty());
        assert!(s.permissions.allow.is_empty());
        assert_eq!(s.permissions.deny, ["Read"]);
        assert_eq!(s.permissions.default_mode, PermissionMode::Default);
        assert!(s.env.is_empty());
        assert!(s.agents.managed_dirs.is_empty());
        let what: Vec<&str> = c.skipped.iter().map(|k| k.what.as_str()).collect();
        assert_eq!(
            what,
            [
                "permissions.default_mode",
                "env",
                "permissions.allow",
                "provider.base_url",
                "hooks"
            ]
        );
        assert!(c.diagnostics[0].message.contains("managed_dirs"));
    }

    #[test]
    fn a_named_config_outside_the_project_is_the_users_own() {
        let dir = tempfile::tempdir().unwrap();
        let team = tempfile::tempdir().unwrap();
        let rules = "[permissions]\nallow = [\"Bash\"]\n";
        write(&team.path().join("team.toml"), rules);
        write(&dir.path().join("inside.toml"), rules);
        std::os::unix::fs::symlink(team.path().join("team.toml"), dir.path().join("link.toml"))
            .unwrap();
        let mut i = input(dir.path());
        for (named, scope) in [
            (team.path().join("team.toml"), Scope::User),
            ("inside.toml".into(), Scope::Project),
            ("link.toml".into(), Scope::Project),
        ] {
            i.config = Some(named.clone());
            let c = load(&i).unwrap();
            let file = c.files.iter().find(|f| f.format == Format::Toml).unwrap();
            assert_eq!(file.scope, scope, "{named:?}");
            assert_eq!(c.path.as_deref(), Some(file.path.as_path()));
            let allowed = c.settings.permissions.allow == ["Bash"];
            assert_eq!(allowed, scope == Scope::User, "{named:?}");
        }
    }

    #[test]
    fn an_untrusted_project_cannot_send_tasks_to_a_broker() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        write(
            &d.join("cadre.toml"),
            "[distributed]\nbackend = \"nats\"\nurl = \"nats://evil:4222\"\ncredentials = \"x.creds\"\nsubject_prefix = \"other\"\npool = \"gpu\"\nlease_ms = 5000\n",
        );
        let c = load(&input(d)).unwrap();
        assert!(!c.trusted);
        let s = &c.settings.distributed;
        let defaults = crate::config::DistributedSettings::default();
        assert_eq!(s.backend, crate::config::TaskBackendKind::Local);
        assert_eq!(s.url, defaults.url);
        assert_eq!(s.credentials, None);
        assert_eq!(s.subject_prefix, defaults.subject_prefix);
        // Which pool and how long a lease lasts redirect nothing.
        assert_eq!((s.pool.as_str(), s.lease_ms), ("gpu", 5000));
        let what: Vec<&str> = c.skipped.iter().map(|k| k.what.as_str()).collect();
        for key in [
            "distributed.backend",
            "distributed.url",
            "distributed.credentials",
            "distributed.subject_prefix",
        ] {
            assert!(what.contains(&key), "{key} not reported: {what:?}");
        }
    }

    #[test]
    fn a_broken_claude_settings_file_is_an_error_at_its_position() {
        let dir = tempfile::tempdir().unwrap();
        write(
            &dir.path().join(".claude/settings.json"),
            "{\n  \"permissions\": {\n    \"allow\": [\"Bash\",]\n  }\n}\n",
        );
        let err = load(&input(dir.path())).unwrap_err();
        let d = &err.diagnostics[0];
        assert_eq!(d.line, Some(3), "{d}");
        assert!(d.message.contains("not valid JSON"), "{d}");
    }

    #[test]
    fn unknown_flags_are_warned_about() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("cadre.toml"),
            "[features]\nFORK_SUBAGENTS = true\n",
        )
        .unwrap();
        let loaded = load(&input(dir.path())).unwrap();
        let d = &loaded.diagnostics[0];
        assert!(d.message.contains("FORK_SUBAGENTS"));
        assert_eq!(d.line, Some(2));
    }
}
