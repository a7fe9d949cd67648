//! `cadre plugins list|install|remove`: Claude Code's plugins, installed
//! where Claude Code keeps them (`~/.claude/plugins/`: `cache/MARKET/NAME/
//! VERSION/`, `installed_plugins.json`, `known_marketplaces.json`,
//! `marketplaces/MARKET/` for a marketplace cloned with git) and enabled in
//! the chosen settings file's `enabledPlugins` (docs/plugins.md).

use std::path::{Path, PathBuf};
use std::process::Command;

use clap::{Args, Subcommand};
use serde_json::{Map, Value, json};

use super::output::print_json;
use super::{CliError, GlobalArgs, Overrides, load_snapshot};
use crate::config::edit::edit_json_settings;
use crate::config::plugins::{
    Plugin, manifest, marketplace_entry, plugin_name, plugins_home, read_json,
};

/// A plugin copied into the cache has at most this many files…
const MAX_FILES: usize = 10_000;
/// …and this many bytes in all.
const MAX_BYTES: u64 = 200 * 1024 * 1024;

#[derive(Debug, Subcommand)]
pub enum PluginsCommand {
    /// The plugins this folder's sessions load, and those installed.
    List(ListArgs),
    /// Installs NAME@MARKETPLACE from a marketplace that settings declare
    /// (`extraKnownMarketplaces`) or Claude Code recorded, and enables it.
    Install(InstallArgs),
    /// Removes an installed plugin and turns it off in the settings file.
    Remove(InstallArgs),
}

#[derive(Debug, Args)]
pub struct ListArgs {
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
pub struct InstallArgs {
    /// NAME@MARKETPLACE.
    id: String,
    /// The settings file that enables it: `user` (~/.claude/settings.json,
    /// the default), `project` (.claude/settings.json) or `local`.
    #[arg(long, default_value = "user")]
    scope: String,
}

pub fn dispatch(g: &GlobalArgs, cmd: PluginsCommand) -> Result<(), CliError> {
    let (_, swap) = load_snapshot(g, &Overrides::default())?;
    let snap = swap.load_full();
    let home = dirs::home_dir()
        .ok_or_else(|| CliError::Usage("no home folder: plugins live under ~/.claude".into()))?;
    match cmd {
        PluginsCommand::List(a) => list(&snap.config.plugins, &home, a.json),
        PluginsCommand::Install(a) => {
            let settings_file = settings_file(&a.scope, &snap.config.project_dir, &home)?;
            let (id, path) = install(&a.id, &snap.settings().plugins, &home)?;
            crate::telemetry::plugin_installed(
                &snap.settings().env,
                &snap.settings().prices,
                &id,
                &path,
            );
            edit_json_settings(&settings_file, |o| {
                let enabled = o
                    .entry("enabledPlugins")
                    .or_insert_with(|| Value::Object(Map::new()));
                if !enabled.is_object() {
                    *enabled = Value::Object(Map::new());
                }
                enabled[&id] = Value::Bool(true);
            })
            .map_err(CliError::Failed)?;
            outln!(
                "Installed {id} in {} and enabled it in {}",
                path.display(),
                settings_file.display()
            );
            Ok(())
        }
        PluginsCommand::Remove(a) => {
            let settings_file = settings_file(&a.scope, &snap.config.project_dir, &home)?;
            let removed = remove(&a.id, &home)?;
            edit_json_settings(&settings_file, |o| {
                if let Some(Value::Object(e)) = o.get_mut("enabledPlugins") {
                    e.remove(&a.id);
                }
            })
            .map_err(CliError::Failed)?;
            match removed {
                Some(p) => outln!("Removed {} ({})", a.id, p.display()),
                None => outln!(
                    "{} was not installed; it is no longer enabled in {}",
                    a.id,
                    settings_file.display()
                ),
            }
            Ok(())
        }
    }
}

fn settings_file(scope: &str, project: &Path, home: &Path) -> Result<PathBuf, CliError> {
    match scope {
        "user" => Ok(crate::paths::user_claude_dir(home).join("settings.json")),
        "project" => Ok(project.join(".claude").join("settings.json")),
        "local" => Ok(project.join(".claude").join("settings.local.json")),
        other => Err(CliError::Usage(format!(
            "--scope {other}: expected user, project or local"
        ))),
    }
}

fn list(loaded: &[Plugin], home: &Path, as_json: bool) -> Result<(), CliError> {
    let records = read_json(&plugins_home(home).join("installed_plugins.json"))
        .map_err(CliError::Failed)?
        .and_then(|v| v.get("plugins").cloned())
        .unwrap_or(Value::Null);
    let installed: Vec<(String, String)> = records
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(id, list)| {
            let p = list.get(0_usize)?.get("installPath")?.as_str()?;
            Some((id.clone(), p.to_string()))
        })
        .collect();
    if as_json {
        let inst: Vec<Value> = installed
            .iter()
            .map(|(id, p)| json!({"id": id, "path": p}))
            .collect();
        return print_json(&json!({"loaded": loaded, "installed": inst}));
    }
    if loaded.is_empty() && installed.is_empty() {
        outln!(
            "No plugins. Load one with --plugin-dir DIR, or enable NAME@MARKETPLACE in enabledPlugins and run `cadre plugins install NAME@MARKETPLACE` (docs/plugins.md)."
        );
        return Ok(());
    }
    for p in loaded {
        outln!(
            "{}  {}  loaded (enabled by {})",
            p.source,
            p.path.display(),
            p.enabled_by
        );
        if let Some(d) = &p.data {
            outln!("    data folder: {}", d.display());
        }
        if let Some(note) = p.unsupported_note() {
            outln!("    {note}");
        }
    }
    for (id, path) in installed {
        if !loaded.iter().any(|p| p.source == id) {
            outln!("{id}  {path}  installed, not enabled here");
        }
    }
    Ok(())
}

/// Runs git with these arguments; the error carries its stderr.
fn git(args: &[&str]) -> Result<(), CliError> {
    let out = Command::new("git")
        .args(args)
        .env("GIT_TERMINAL_PROMPT", "0")
        .output()
        .map_err(|e| CliError::Failed(format!("cannot run git: {e}")))?;
    if out.status.success() {
        return Ok(());
    }
    let err = String::from_utf8_lossy(&out.stderr);
    Err(CliError::Failed(format!(
        "git {}: {}",
        args.join(" "),
        err.trim().chars().take(2000).collect::<String>()
    )))
}

/// A git source's URL: `{"source": "git", "url"}`, `{"source": "github",
/// "repo": "owner/name"}`, or `{"source": "url", "url"}`.
fn git_url(src: &Value) -> Option<String> {
    match src.get("source").and_then(Value::as_str)? {
        "git" | "url" => src.get("url").and_then(Value::as_str).map(str::to_string),
        "github" => src
            .get("repo")
            .and_then(Value::as_str)
            .map(|r| format!("https://github.com/{r}.git")),
        _ => None,
    }
}

/// Clones (or updates) `url` into `dest`.
fn clone_into(url: &str, dest: &Path) -> Result<(), CliError> {
    let d = dest.display().to_string();
    if dest.join(".git").exists() {
        return git(&["-C", &d, "pull", "--quiet", "--ff-only"]);
    }
    if let Some(parent) = dest.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| CliError::Failed(format!("{}: {e}", parent.display())))?;
    }
    git(&["clone", "--quiet", "--depth", "1", url, &d])
}

/// The marketplace `market` on this machine: a folder source as it is, a
/// git source cloned into `~/.claude/plugins/marketplaces/MARKET` and
/// recorded in `known_marketplaces.json`, as Claude Code does.
fn marketplace(
    market: &str,
    settings: &crate::config::PluginSettings,
    home: &Path,
) -> Result<PathBuf, CliError> {
    let known_path = plugins_home(home).join("known_marketplaces.json");
    let known = read_json(&known_path).map_err(CliError::Failed)?;
    let source = settings
        .marketplaces
        .get(market)
        .and_then(|m| m.get("source"))
        .or_else(|| known.as_ref()?.get(market)?.get("source"))
        .cloned()
        .ok_or_else(|| {
            CliError::Failed(format!(
                "marketplace `{market}` is not known: declare it in extraKnownMarketplaces \
                 (a trusted folder's .claude/settings.json, or ~/.claude/settings.json)"
            ))
        })?;
    let location = match git_url(&source) {
        Some(url) => {
            let dest = plugins_home(home).join("marketplaces").join(market);
            clone_into(&url, &dest)?;
            dest
        }
        None => crate::config::plugins::marketplace_dir(market, settings, Some(home), false)
            .ok_or_else(|| {
                CliError::Failed(format!(
                    "marketplace `{market}`: unsupported source {source}"
                ))
            })?,
    };
    let mut all = match known {
        Some(Value::Object(m)) => m,
        _ => Map::new(),
    };
    all.insert(
        market.to_string(),
        json!({
            "source": source,
            "installLocation": location.display().to_string(),
            "lastUpdated": crate::clock::now_rfc3339(),
        }),
    );
    write_json(&known_path, &Value::Object(all))?;
    Ok(location)
}

fn write_json(path: &Path, v: &Value) -> Result<(), CliError> {
    edit_json_settings(path, |o| {
        if let Value::Object(m) = v {
            *o = m.clone();
        }
    })
    .map_err(CliError::Failed)
}

/// Installs `id` (NAME@MARKETPLACE): the plugin's folder copied into
/// `~/.claude/plugins/cache/MARKET/NAME/VERSION/` and recorded in
/// `installed_plugins.json`. Returns the id and the folder.
fn install(
    id: &str,
    settings: &crate::config::PluginSettings,
    home: &Path,
) -> Result<(String, PathBuf), CliError> {
    let (name, market) = id
        .rsplit_once('@')
        .ok_or_else(|| CliError::Usage(format!("{id}: expected NAME@MARKETPLACE")))?;
    let dir = marketplace(market, settings, home)?;
    let (entry, folder) = marketplace_entry(&dir, name).map_err(CliError::Failed)?;
    // A plugin kept in its own git repository is cloned beside the cache
    // first, then copied in like any folder.
    let staging = plugins_home(home)
        .join("cache")
        .join(".staging")
        .join(format!("{market}-{name}"));
    let from = match folder {
        Some(f) => f,
        None => {
            let src = entry.get("source").cloned().unwrap_or(Value::Null);
            let url = git_url(&src).ok_or_else(|| {
                CliError::Failed(format!("{id}: unsupported plugin source {src}"))
            })?;
            if staging.exists() {
                let _ = std::fs::remove_dir_all(&staging);
            }
            clone_into(&url, &staging)?;
            staging.clone()
        }
    };
    if !from.is_dir() {
        return Err(CliError::Failed(format!(
            "{id}: {} is not a folder",
            from.display()
        )));
    }
    let m = manifest(&from).map_err(CliError::Failed)?;
    if plugin_name(&from, &m) != name {
        return Err(CliError::Failed(format!(
            "{id}: the plugin at {} names itself `{}`",
            from.display(),
            plugin_name(&from, &m)
        )));
    }
    let version = m
        .get("version")
        .or_else(|| entry.get("version"))
        .and_then(Value::as_str)
        .unwrap_or("unversioned")
        .to_string();
    if version.contains(['/', '\\']) || version.starts_with('.') {
        return Err(CliError::Failed(format!(
            "{id}: version {version:?} is not a folder name"
        )));
    }
    let dest = plugins_home(home)
        .join("cache")
        .join(market)
        .join(name)
        .join(&version);
    if dest.exists() {
        std::fs::remove_dir_all(&dest)
            .map_err(|e| CliError::Failed(format!("{}: {e}", dest.display())))?;
    }
    let mut budget = (MAX_FILES, MAX_BYTES);
    let copied = copy_plugin(&from, &dest, &mut budget);
    if staging.exists() {
        let _ = std::fs::remove_dir_all(&staging);
    }
    copied?;
    let records_path = plugins_home(home).join("installed_plugins.json");
    let mut records = match read_json(&records_path).map_err(CliError::Failed)? {
        Some(Value::Object(m)) => m,
        _ => Map::new(),
    };
    records.insert("version".into(), json!(2));
    let now = crate::clock::now_rfc3339();
    let plugins = records
        .entry("plugins")
        .or_insert_with(|| Value::Object(Map::new()));
    if !plugins.is_object() {
        *plugins = Value::Object(Map::new());
    }
    plugins[id] = json!([{
        "scope": "user",
        "installPath": dest.display().to_string(),
        "version": version,
        "installedAt": now,
        "lastUpdated": now,
    }]);
    write_json(&records_path, &Value::Object(records))?;
    Ok((id.to_string(), dest))
}

/// Copies a plugin folder without its `.git`, refusing symbolic links
/// (a plugin names its own files) and stopping at the budget of files and
/// bytes.
fn copy_plugin(from: &Path, to: &Path, budget: &mut (usize, u64)) -> Result<(), CliError> {
    let fail = |p: &Path, e: std::io::Error| CliError::Failed(format!("{}: {e}", p.display()));
    std::fs::create_dir_all(to).map_err(|e| fail(to, e))?;
    for entry in std::fs::read_dir(from).map_err(|e| fail(from, e))? {
        let entry = entry.map_err(|e| fail(from, e))?;
        let name = entry.file_name();
        if name == ".git" {
            continue;
        }
        let src = entry.path();
        let kind = entry.file_type().map_err(|e| fail(&src, e))?;
        if kind.is_symlink() {
            return Err(CliError::Failed(format!(
                "{}: a symbolic link; plugins are copied without links",
                src.display()
            )));
        }
        if budget.0 == 0 {
            return Err(CliError::Failed(format!(
                "{}: more than {MAX_FILES} files",
                from.display()
            )));
        }
        budget.0 -= 1;
        if kind.is_dir() {
            copy_plugin(&src, &to.join(&name), budget)?;
        } else {
            let len = entry.metadata().map_err(|e| fail(&src, e))?.len();
            if len > budget.1 {
                return Err(CliError::Failed(format!(
                    "{}: the plugin is larger than {MAX_BYTES} bytes",
                    from.display()
                )));
            }
            budget.1 -= len;
            std::fs::copy(&src, to.join(&name)).map_err(|e| fail(&src, e))?;
        }
    }
    Ok(())
}

/// Removes `id`'s installed copies and its record; the folder removed, if
/// it was installed.
fn remove(id: &str, home: &Path) -> Result<Option<PathBuf>, CliError> {
    let records_path = plugins_home(home).join("installed_plugins.json");
    let Some(Value::Object(mut records)) = read_json(&records_path).map_err(CliError::Failed)?
    else {
        return Ok(None);
    };
    let Some(list) = records
        .get_mut("plugins")
        .and_then(Value::as_object_mut)
        .and_then(|p| p.remove(id))
    else {
        return Ok(None);
    };
    let cache = plugins_home(home).join("cache");
    let mut removed = None;
    for p in list
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e.get("installPath")?.as_str())
    {
        let p = crate::paths::lexical(Path::new(p));
        // Only what cadre or Claude Code put in the cache is deleted.
        if p.starts_with(&cache) && p.is_dir() {
            std::fs::remove_dir_all(&p)
                .map_err(|e| CliError::Failed(format!("{}: {e}", p.display())))?;
            removed = Some(p);
        }
    }
    write_json(&records_path, &Value::Object(records))?;
    Ok(removed)
}
