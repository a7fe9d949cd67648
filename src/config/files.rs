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

/// Claude Code's folder of the user: `CLAUDE_CONFIG_DIR`, default
/// `~/.claude` (as Claude Code and the Agent SDKs find it).
pub(super) fn claude_dir(input: &LoadInput) -> Option<PathBuf> {
    input
        .env_var("CLAUDE_CONFIG_DIR")
        .filter(|s| !s.is_empty())
        .map(PathBuf::from)
        .or_else(|| home(input).map(|h| h.join(".claude")))
}

/// The longest project folder name Claude Code writes before it cuts the
/// name and adds a hash (`MAX_SANITIZED_LENGTH` of the Agent SDKs).
const MAX_PROJECT_KEY: usize = 200;

/// The name Claude Code gives a project's folder under
/// `~/.claude/projects/`: the path with every character other than an
/// ASCII letter or digit replaced by `-` (one per UTF-16 unit, as
/// JavaScript counts), and a path longer than 200 cut there and followed
/// by `-` and a hash of the whole path (the SDKs' `simpleHash`: a 32-bit
/// `h * 31 + unit` over UTF-16 units, absolute value, base 36).
pub fn project_key(path: &std::path::Path) -> String {
    let text = path.to_string_lossy();
    let mut key = String::new();
    for c in text.chars() {
        if c.is_ascii_alphanumeric() {
            key.push(c);
        } else {
            key.extend(std::iter::repeat_n('-', c.len_utf16()));
        }
    }
    if key.len() <= MAX_PROJECT_KEY {
        return key;
    }
    let hash = text
        .encode_utf16()
        .fold(0i32, |h, u| h.wrapping_mul(31).wrapping_add(i32::from(u)));
    let mut n = hash.unsigned_abs();
    let mut digits = Vec::new();
    loop {
        // `n % 36` is below 36, so `from_digit` always has a digit.
        digits.push(char::from_digit(n % 36, 36).unwrap_or('0'));
        n /= 36;
        if n == 0 {
            break;
        }
    }
    // Only ASCII was kept, so byte 200 is a character boundary.
    key.truncate(MAX_PROJECT_KEY);
    key.push('-');
    key.extend(digits.iter().rev());
    key
}

/// Where the sessions of the project in `input.cwd` live by default:
/// `<Claude Code's folder>/projects/<project key>/`, the key made from the
/// working directory with links resolved (as Claude Code and the SDKs'
/// `list_sessions` do). `None` without `HOME` or `CLAUDE_CONFIG_DIR`.
pub(super) fn user_sessions_dir(input: &LoadInput) -> Option<PathBuf> {
    let cwd = std::fs::canonicalize(&input.cwd).unwrap_or_else(|_| input.cwd.clone());
    Some(claude_dir(input)?.join("projects").join(project_key(&cwd)))
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
    /// The file; for settings given inline (`--settings '{…}'`) the word
    /// `--settings`.
    pub path: PathBuf,
    pub format: Format,
    /// Whether the file exists (and so was read).
    pub read: bool,
    /// The text of settings given inline rather than in a file.
    #[serde(skip)]
    pub inline: Option<String>,
}

impl LayerFile {
    /// A file on disk (not inline settings), which a watcher can follow.
    pub fn on_disk(&self) -> bool {
        self.inline.is_none()
    }
}

/// The label `--settings` JSON given inline is known by in origins.
pub const INLINE_SETTINGS: &str = "--settings";

/// The label of the settings an SDK host applied (`apply_flag_settings`).
pub const HOST_SETTINGS: &str = "apply_flag_settings";

fn format_of(path: &std::path::Path) -> Format {
    if file_format_is_yaml(path) {
        Format::Yaml
    } else if path.extension().is_some_and(|e| e == "toml") {
        Format::Toml
    } else {
        Format::Claude
    }
}

/// Every settings file, in the order of [`super::layers`], whether it
/// exists or not (so a watcher can follow files created later). The user,
/// project and local files are left out when `--setting-sources` does not
/// name their scope (a cadre file named by `--config` or `CADRE_CONFIG`
/// stays: it was asked for by name).
pub fn layer_files(input: &LoadInput) -> Result<Vec<LayerFile>, ConfigError> {
    let sources = input.cli.setting_sources.as_deref();
    let wanted = |scope: Scope| sources.is_none_or(|s| s.contains(&scope));
    let mut out: Vec<LayerFile> = Vec::new();
    fn push(out: &mut Vec<LayerFile>, scope: Scope, path: PathBuf, format: Format) {
        if out.iter().any(|f| f.path == path) {
            return;
        }
        let read = path.is_file();
        out.push(LayerFile {
            scope,
            path,
            format,
            read,
            inline: None,
        });
    }
    if wanted(Scope::User) {
        if let Some(h) = claude_dir(input) {
            let p = h.join("settings.json");
            push(&mut out, Scope::User, p, Format::Claude);
        }
        if let Some(d) = user_cadre_dir(input) {
            push(&mut out, Scope::User, d.join("cadre.toml"), Format::Toml);
        }
    }
    let claude_dir = input.cwd.join(".claude");
    if wanted(Scope::Project) {
        let p = claude_dir.join("settings.json");
        push(&mut out, Scope::Project, p, Format::Claude);
    }
    let named = input.config.is_some() || input.env_var("CADRE_CONFIG").is_some();
    if (named || wanted(Scope::Project))
        && let Some(p) = discover(input)?
    {
        let format = if file_format_is_yaml(&p) {
            Format::Yaml
        } else {
            Format::Toml
        };
        // A file the user names that lies outside the project is the
        // user's own, at the project's place in the order.
        let scope = if named && !in_project(&p, &super::trust::project_root(&input.cwd)) {
            Scope::User
        } else {
            Scope::Project
        };
        push(&mut out, scope, p, format);
    }
    if wanted(Scope::Local) {
        let p = claude_dir.join("settings.local.json");
        push(&mut out, Scope::Local, p, Format::Claude);
    }
    if let Some(f) = flag_layer(input)? {
        out.push(f);
    }
    let host = input.cli.host_settings.get();
    if !host.is_empty() {
        out.push(LayerFile {
            scope: Scope::Flag,
            path: PathBuf::from(HOST_SETTINGS),
            format: Format::Claude,
            read: true,
            inline: Some(serde_json::Value::Object(host).to_string()),
        });
    }
    let root = managed_root(input);
    let p = root.join("etc/claude-code/managed-settings.json");
    push(&mut out, Scope::Managed, p, Format::Claude);
    push(
        &mut out,
        Scope::Managed,
        root.join("etc/cadre/cadre.toml"),
        Format::Toml,
    );
    Ok(out)
}

/// Whether a cadre file named by `--config` or `CADRE_CONFIG` belongs to
/// the project at `root` (canonical): when the path as named (its folders'
/// links resolved) or the file it finally resolves to lies inside. A link
/// in the project pointing out, or a link outside pointing in, is the
/// project's either way: the repository decides what it reads.
fn in_project(path: &std::path::Path, root: &std::path::Path) -> bool {
    let named = match (path.parent(), path.file_name()) {
        (Some(dir), Some(name)) => crate::paths::resolve(dir).join(name),
        _ => crate::paths::resolve(path),
    };
    named.starts_with(root) || crate::paths::resolve(path).starts_with(root)
}

/// The `--settings` layer: a JSON object given inline, or a file (JSON as
/// Claude Code's, or cadre's TOML or YAML by extension) that must exist.
fn flag_layer(input: &LoadInput) -> Result<Option<LayerFile>, ConfigError> {
    let Some(arg) = &input.cli.settings else {
        return Ok(None);
    };
    let t = arg.trim();
    if t.starts_with('{') {
        return Ok(Some(LayerFile {
            scope: Scope::Flag,
            path: PathBuf::from(INLINE_SETTINGS),
            format: Format::Claude,
            read: true,
            inline: Some(t.to_string()),
        }));
    }
    let path = input.cwd.join(t);
    if !path.is_file() {
        return Err(ConfigError::one(crate::diagnostic::Diagnostic::error(
            Some(&path),
            None,
            "--settings: no such file (give a settings file or a JSON object)",
        )));
    }
    Ok(Some(LayerFile {
        scope: Scope::Flag,
        format: format_of(&path),
        path,
        read: true,
        inline: None,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The expected names are what the Python Agent SDK's `_sanitize_path`
    /// gives for the same paths.
    #[test]
    fn project_key_is_claude_codes_folder_name() {
        assert_eq!(
            project_key(std::path::Path::new("/home/me/src/my_proj.v2")),
            "-home-me-src-my-proj-v2"
        );
        let long = format!("/tmp/{}/x", "a".repeat(250));
        let key = project_key(std::path::Path::new(&long));
        assert_eq!(key.len(), 200 + "-ou4pgw".len());
        assert!(key.ends_with("aaaaa-ou4pgw"), "{key}");
        // One `-` per UTF-16 unit, as Claude Code (JavaScript) counts; the
        // Python SDK counts code points and would give `---` here.
        assert_eq!(project_key(std::path::Path::new("/é𝄞")), "----");
    }

    #[test]
    fn sessions_go_under_claude_config_dir_when_set() {
        let input = |env: &[(&str, &str)]| LoadInput {
            cwd: PathBuf::from("/nonexistent/p"),
            env: env
                .iter()
                .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
                .collect(),
            ..LoadInput::default()
        };
        assert_eq!(
            user_sessions_dir(&input(&[("HOME", "/h")])),
            Some(PathBuf::from("/h/.claude/projects/-nonexistent-p"))
        );
        assert_eq!(
            user_sessions_dir(&input(&[("HOME", "/h"), ("CLAUDE_CONFIG_DIR", "/c")])),
            Some(PathBuf::from("/c/projects/-nonexistent-p"))
        );
        assert_eq!(user_sessions_dir(&input(&[])), None);
    }
}
