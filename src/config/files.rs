//! Where each layer's settings files are: the user's and the project's,
//! Claude Code's and cadre's, and the managed ones, in the order of
//! [`super::layers`] (the project's cadre file itself is found by
//! `load::discover`).

use std::path::PathBuf;

use super::layers::{Format, Scope};
use super::load::{ConfigError, LoadInput, discover, file_format_is_yaml};

/// The user's home folder, from the environment of the input.
pub(super) fn home(input: &LoadInput) -> Option<PathBuf> {
    input
        .env_var("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
}

/// The user's cadre folder: `$XDG_CONFIG_HOME/cadre`, default `~/.config/cadre`.
fn user_cadre_dir(input: &LoadInput) -> Option<PathBuf> {
    input
        .env_var("XDG_CONFIG_HOME")
        .filter(|s| !s.is_empty())
        .map(PathBuf::from)
        .or_else(|| home(input).map(|h| h.join(".config")))
        .map(|d| d.join("cadre"))
}

/// The root under which the managed files are looked for: `/`, or
/// `CADRE_MANAGED_ROOT` (for tests, and for admins who keep managed
/// settings elsewhere).
pub(super) fn managed_root(input: &LoadInput) -> PathBuf {
    input
        .env_var("CADRE_MANAGED_ROOT")
        .filter(|s| !s.is_empty())
        .map_or_else(|| PathBuf::from("/"), PathBuf::from)
}

/// One settings file a layer may read.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LayerFile {
    pub scope: Scope,
    pub path: PathBuf,
    pub format: Format,
    /// Whether the file exists (and so was read).
    pub read: bool,
}

/// Every settings file, in the order of [`super::layers`], whether it
/// exists or not (so a watcher can follow files created later).
pub fn layer_files(input: &LoadInput) -> Result<Vec<LayerFile>, ConfigError> {
    let mut out: Vec<LayerFile> = Vec::new();
    let mut push = |scope: Scope, path: PathBuf, format: Format| {
        if out.iter().any(|f| f.path == path) {
            return;
        }
        let read = path.is_file();
        out.push(LayerFile {
            scope,
            path,
            format,
            read,
        });
    };
    if let Some(h) = home(input) {
        push(
            Scope::User,
            h.join(".claude").join("settings.json"),
            Format::Claude,
        );
    }
    if let Some(d) = user_cadre_dir(input) {
        push(Scope::User, d.join("cadre.toml"), Format::Toml);
    }
    let claude_dir = input.cwd.join(".claude");
    push(
        Scope::Project,
        claude_dir.join("settings.json"),
        Format::Claude,
    );
    if let Some(p) = discover(input)? {
        let format = if file_format_is_yaml(&p) {
            Format::Yaml
        } else {
            Format::Toml
        };
        push(Scope::Project, p, format);
    }
    push(
        Scope::Local,
        claude_dir.join("settings.local.json"),
        Format::Claude,
    );
    let root = managed_root(input);
    push(
        Scope::Managed,
        root.join("etc/claude-code/managed-settings.json"),
        Format::Claude,
    );
    push(
        Scope::Managed,
        root.join("etc/cadre/cadre.toml"),
        Format::Toml,
    );
    Ok(out)
}
