//! Layering of settings, written once: built-in defaults < config file <
//! `CADRE_*` environment < command line. Later layers win key by key.
//!
//! Also here: discovery of the config file, the report of unknown keys with
//! their position, and where each flag value was set.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use figment::Figment;
use figment::providers::{Format, Serialized};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::flags::{Flag, FlagDecl, Flags, Layer};
use super::mode::PermissionMode;
use super::settings::{OPEN_TABLES, Settings};
use crate::diagnostic::Diagnostic;
use crate::raw::{self, Kind, Node};

/// The embedded lowest layer: flag declarations and model aliases.
pub const DEFAULTS_TOML: &str = include_str!("../../config/defaults.toml");

/// Environment variables with the `CADRE_` prefix that are not settings.
const NON_SETTING_ENV: &[&str] = &["CADRE_CONFIG", "CADRE_SUBAGENT_MODEL", "CADRE_LOG"];

/// What the command line contributes to settings.
#[derive(Debug, Clone, Default)]
pub struct CliOverrides {
    /// `--feature NAME=on|off`, in order; a later one wins.
    pub features: Vec<(String, bool)>,
    pub model: Option<String>,
    pub permission_mode: Option<PermissionMode>,
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
    /// The config file that was read, if any.
    pub path: Option<PathBuf>,
    pub flags: Flags,
    /// Warnings (unknown keys and flags). Errors are returned as `Err`.
    pub diagnostics: Vec<Diagnostic>,
}

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
    fn one(d: Diagnostic) -> Self {
        ConfigError {
            diagnostics: vec![d],
        }
    }
}

/// Finds the config file: `--config`, then `CADRE_CONFIG`, then `cadre.toml`,
/// `cadre.yaml`, `config/cadre.toml`, `config/cadre.yaml` in the working
/// directory, then `$XDG_CONFIG_HOME/cadre/cadre.toml` (default
/// `~/.config`). `Ok(None)` means no file: built-in defaults apply.
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
    let xdg = input
        .env_var("XDG_CONFIG_HOME")
        .filter(|s| !s.is_empty())
        .map(PathBuf::from)
        .or_else(|| input.env_var("HOME").map(|h| Path::new(h).join(".config")));
    if let Some(dir) = xdg {
        let p = dir.join("cadre").join("cadre.toml");
        if p.is_file() {
            return Ok(Some(p));
        }
    }
    Ok(None)
}

/// Loads settings through every layer. Unknown keys are warnings, or errors
/// when the merged settings say `strict = true`.
pub fn load(input: &LoadInput) -> Result<LoadedConfig, ConfigError> {
    let path = discover(input)?;
    let mut warnings = Vec::new();

    // The file, parsed once into a tree with positions.
    let file = match &path {
        Some(p) => Some(read_file(p)?),
        None => None,
    };
    if let Some((p, node)) = &file {
        unknown_keys(p, node, &mut warnings);
    }

    let env_layer = env_layer(input, &mut warnings);
    let cli_layer = cli_layer(&input.cli);

    let mut figment = Figment::new()
        .merge(Serialized::defaults(Settings::default()))
        .merge(Toml::string(DEFAULTS_TOML));
    if let Some(p) = &path {
        figment = match FileFormat::of(p) {
            Some(FileFormat::Toml) => figment.merge(Toml::file_exact(p)),
            Some(FileFormat::Yaml) => figment.merge(Yaml::file_exact(p)),
            None => figment,
        };
    }
    let figment = figment
        .merge(Serialized::defaults(env_layer.clone()))
        .merge(Serialized::defaults(cli_layer));

    let mut settings: Settings = figment
        .extract()
        .map_err(|e| extraction_error(e, file.as_ref()))?;

    let strict = settings.strict;
    if strict && !warnings.is_empty() {
        for w in &mut warnings {
            w.severity = crate::diagnostic::Severity::Error;
        }
        return Err(ConfigError {
            diagnostics: warnings,
        });
    }

    resolve_paths(&mut settings, input, file.as_ref());
    let flags = build_flags(
        &settings,
        input,
        file.as_ref().map(|(_, n)| n),
        &env_layer,
        file.as_ref().map(|(p, _)| p.as_path()),
        &mut warnings,
    );

    Ok(LoadedConfig {
        settings,
        path,
        flags,
        diagnostics: warnings,
    })
}

#[derive(Clone, Copy)]
enum FileFormat {
    Toml,
    Yaml,
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
    let text = fs_err::read_to_string(path).map_err(|e| {
        ConfigError::one(Diagnostic::error(
            Some(path),
            None,
            format!("cannot read: {e}"),
        ))
    })?;
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
    let Some(known) = template.as_object() else {
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

/// `CADRE_A__B=v` → `{a: {b: v}}`. Segments are lowercased except names
/// under `features` and `flags`, which are written as declared.
fn env_layer(input: &LoadInput, warnings: &mut Vec<Diagnostic>) -> Value {
    let template = serde_json::to_value(Settings::default()).unwrap_or(Value::Null);
    let mut root = Map::new();
    for (key, value) in &input.env {
        let Some(rest) = key.strip_prefix("CADRE_") else {
            continue;
        };
        if NON_SETTING_ENV.contains(&key.as_str()) || rest.is_empty() {
            continue;
        }
        let mut segments = Vec::new();
        let mut keep_case = false;
        for seg in rest.split("__") {
            let s = if keep_case {
                seg.to_string()
            } else {
                seg.to_ascii_lowercase()
            };
            keep_case = segments.is_empty() && (s == "features" || s == "flags" || s == "models");
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
        insert_path(&mut root, &segments, env_value(value));
    }
    Value::Object(root)
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
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut map = root;
    for p in parents {
        let entry = map
            .entry(p.clone())
            .or_insert_with(|| Value::Object(Map::new()));
        if !entry.is_object() {
            *entry = Value::Object(Map::new());
        }
        let Value::Object(m) = entry else { return };
        map = m;
    }
    map.insert(last.clone(), value);
}

fn cli_layer(cli: &CliOverrides) -> Value {
    let mut root = Map::new();
    for (name, on) in &cli.features {
        insert_path(
            &mut root,
            &["features".into(), name.clone()],
            Value::Bool(*on),
        );
    }
    if let Some(m) = &cli.model {
        insert_path(
            &mut root,
            &["provider".into(), "model".into()],
            Value::String(m.clone()),
        );
    }
    if let Some(mode) = cli.permission_mode {
        insert_path(
            &mut root,
            &["permissions".into(), "default_mode".into()],
            Value::String(mode.as_str().into()),
        );
    }
    Value::Object(root)
}

/// Turns a figment error into a diagnostic at the offending key's position
/// when the key is in the file.
fn extraction_error(e: figment::Error, file: Option<&(PathBuf, Node)>) -> ConfigError {
    let mut diagnostics = Vec::new();
    for err in e {
        let key = err.path.join(".");
        let located = file.and_then(|(p, node)| {
            let parts: Vec<&str> = err.path.iter().map(String::as_str).collect();
            node.at_path(&parts).map(|n| (p.as_path(), n.pos))
        });
        let from_file = err
            .metadata
            .as_ref()
            .is_some_and(|m| m.source.as_ref().is_some_and(|s| s.file_path().is_some()));
        let (path, pos) = match located {
            Some((p, pos)) => (Some(p), Some(pos)),
            None if from_file => (file.map(|(p, _)| p.as_path()), None),
            None => (Some(Path::new("settings")), None),
        };
        let what = if key.is_empty() {
            String::new()
        } else {
            format!("`{key}`: ")
        };
        diagnostics.push(Diagnostic::error(path, pos, format!("{what}{}", err.kind)));
    }
    ConfigError { diagnostics }
}

/// Relative folders in the file are relative to the file's folder; from the
/// environment or command line, to the working directory.
fn resolve_paths(settings: &mut Settings, input: &LoadInput, file: Option<&(PathBuf, Node)>) {
    let file_dir = file.and_then(|(p, _)| p.parent().map(Path::to_path_buf));
    let from_file = |key: &str| file.is_some_and(|(_, n)| n.at_path(&["agents", key]).is_some());
    let base = |key: &str| -> PathBuf {
        match (&file_dir, from_file(key)) {
            (Some(dir), true) => dir.clone(),
            _ => input.cwd.clone(),
        }
    };
    let fix = |p: &mut PathBuf, base: &Path| {
        if p.is_relative() {
            *p = normalize(&base.join(&*p));
        }
    };
    let a = &mut settings.agents;
    if let Some(p) = a.builtin_dir.as_mut() {
        fix(p, &base("builtin_dir"));
    }
    for (key, list) in [
        ("dirs", &mut a.dirs),
        ("user_dirs", &mut a.user_dirs),
        ("plugin_dirs", &mut a.plugin_dirs),
        ("managed_dirs", &mut a.managed_dirs),
    ] {
        let b = base(key);
        for p in list.iter_mut() {
            fix(p, &b);
        }
    }
    fix(&mut settings.transcripts.dir, &input.cwd);
}

/// Removes `.` and `name/..` pairs without touching the file system, so
/// `config/../agents` shows as `agents`.
pub(crate) fn normalize(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            other => out.push(other),
        }
    }
    out
}

fn build_flags(
    settings: &Settings,
    input: &LoadInput,
    file: Option<&Node>,
    env: &Value,
    file_path: Option<&Path>,
    warnings: &mut Vec<Diagnostic>,
) -> Flags {
    let mut flags = BTreeMap::new();
    for (name, decl) in &settings.flags {
        let value = settings.features.get(name).map_or(decl.default, |v| v.0);
        let set_by = if input.cli.features.iter().any(|(n, _)| n == name) {
            Layer::Cli
        } else if env.get("features").and_then(|f| f.get(name)).is_some() {
            Layer::Env
        } else if file.and_then(|n| n.at_path(&["features", name])).is_some() {
            Layer::File
        } else {
            Layer::Default
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
        let pos = file
            .and_then(|n| n.get("features"))
            .and_then(|f| f.entry(name))
            .map(|(k, _)| k.pos);
        let path = if pos.is_some() { file_path } else { None };
        warnings.push(Diagnostic::warning(
            path.or(Some(Path::new("settings"))),
            pos,
            format!(
                "unknown feature flag `{name}`; declared flags: {}",
                declared.join(", ")
            ),
        ));
    }
    Flags::new(flags.into_values())
}

/// TOML for figment, with the toml 1.x crate.
struct Toml;

impl Format for Toml {
    type Error = toml::de::Error;
    const NAME: &'static str = "TOML";

    fn from_str<T: DeserializeOwned>(string: &str) -> Result<T, Self::Error> {
        toml::from_str(string)
    }
}

/// YAML for figment, with serde-saphyr (figment's own YAML uses the
/// unmaintained serde_yaml).
struct Yaml;

impl Format for Yaml {
    type Error = serde_saphyr::Error;
    const NAME: &'static str = "YAML";

    fn from_str<T: DeserializeOwned>(string: &str) -> Result<T, Self::Error> {
        if string.trim().is_empty() {
            return serde_saphyr::from_str("{}");
        }
        serde_saphyr::from_str(string)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{FORK_SUBAGENT, SessionKind};

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
