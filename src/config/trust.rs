//! Workspace trust: which folders the user lets start processes and choose
//! where credentials go.
//!
//! Settings read from a project (`.claude/settings.json`, the project's
//! cadre file, `.claude/settings.local.json`) may name commands (hooks, MCP
//! servers) and a provider URL or key variable. A cloned repository must not
//! be able to do either before its user says so. Trust is recorded in the
//! user's own configuration folder, never in the project:
//! `$XDG_CONFIG_HOME/cadre/trusted.toml` (default `~/.config/cadre`), a list
//! of absolute folders. A folder is trusted when it or one of its ancestors
//! is on the list.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The keys of a project or local layer that take effect only in a trusted
/// folder: they start processes or direct credentials.
pub const GUARDED_KEYS: &[&[&str]] = &[
    &["provider", "base_url"],
    &["provider", "api_key_env"],
    &["provider", "kind"],
    &["agents", "builtin_dir"],
    &["hooks"],
    &["mcp_servers"],
    &["env"],
    &["pass_env"],
    // Loosening permissions lets commands run without anyone asked.
    &["permissions", "allow"],
    &["permissions", "additional_directories"],
    // Agent files read from these count as the user's own (not project), so
    // their hooks and servers would escape the project restrictions.
    &["agents", "user_dirs"],
    // Deletes session folders (through a linked `.cadre`, maybe another
    // project's).
    &["transcripts", "cleanup_period_days"],
    // Where transcripts (everything the session read) are written: a
    // repository must not send them into its own tree or elsewhere.
    &["transcripts", "dir"],
    // Where WebSearch sends the user's queries.
    &["web_search", "searxng_url"],
    // Where background tasks (their prompts and transcripts' owners) go,
    // and with whose credentials.
    &["distributed", "backend"],
    &["distributed", "url"],
    &["distributed", "credentials"],
    &["distributed", "tasks_stream"],
    &["distributed", "notices_stream"],
    &["distributed", "state_bucket"],
    &["distributed", "lines_stream"],
    &["distributed", "git_bucket"],
    // Replaces the system prompt's instructions (a style may drop the
    // coding ones): the user's choice, not a clone's.
    &["output_style"],
    // Runs a command before every chat prompt.
    &["status_line"],
    &["distributed", "subject_prefix"],
    // Plugins run their hooks and MCP servers and bring their own agents,
    // skills and commands: a project's plugins load once it is trusted.
    &["plugins", "enabled"],
    &["plugins", "marketplaces"],
    &["plugins", "dirs"],
];

/// Permission modes a project may set without trust: those that ask at
/// least as much as `default`.
pub const UNTRUSTED_MODES: &[&str] = &["default", "plan", "dontAsk"];

#[derive(Debug, Default, Serialize, Deserialize)]
struct TrustFile {
    #[serde(default)]
    folders: Vec<PathBuf>,
}

/// The user's trust list, where it lives and what it holds.
#[derive(Debug, Clone, Default)]
pub struct TrustStore {
    /// `None` when neither `XDG_CONFIG_HOME` nor `HOME` is set: nothing is
    /// trusted and nothing can be recorded.
    pub path: Option<PathBuf>,
    pub folders: Vec<PathBuf>,
}

/// The trust file for an environment (`XDG_CONFIG_HOME`, else `HOME/.config`).
pub fn store_path(env_var: impl Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let base = env_var("XDG_CONFIG_HOME")
        .filter(|s| !s.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            env_var("HOME")
                .filter(|s| !s.is_empty())
                .map(|h| Path::new(&h).join(".config"))
        })?;
    Some(base.join("cadre").join("trusted.toml"))
}

/// The folder a trust decision is about: the git root holding `dir`, or
/// `dir` itself outside a repository; symbolic links resolved.
pub fn project_root(dir: &Path) -> PathBuf {
    let dir = crate::paths::resolve(dir);
    dir.ancestors()
        .find(|d| d.join(".git").exists())
        .map_or_else(|| dir.clone(), Path::to_path_buf)
}

/// A key a repository set that was not applied because the folder is not
/// trusted.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Skipped {
    /// The dotted cadre key (`provider.base_url`, `hooks`, …) or, for things
    /// skipped outside settings, what it was (`.mcp.json server x`).
    pub what: String,
    /// Where it was written (file:line:col).
    pub origin: String,
}

/// Which files a repository supplies may be read: the one check every
/// reader of project files (memory, rules, skills, agent files) makes.
/// In a trusted folder, all of them; otherwise only those that resolve,
/// symbolic links followed, inside the project root. A clone could
/// otherwise link `CLAUDE.md` to `~/.aws/credentials` and have it sent to
/// the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProjectFiles {
    /// The project root, links resolved.
    root: PathBuf,
    trusted: bool,
}

/// A project file left unread because it resolves outside the project in
/// a folder that is not trusted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outside {
    /// The file (or folder) as the project names it.
    pub file: PathBuf,
    /// Where it resolves to.
    pub target: PathBuf,
}

impl Outside {
    /// How the skip is listed with the other skipped settings (stderr and
    /// `cadre config show`).
    pub fn skipped(&self) -> Skipped {
        // A folder named outside (an `agents.dirs` entry) is no link.
        let what = if self.target == crate::paths::lexical(&self.file) {
            "outside the project".to_string()
        } else {
            format!("link to {}, outside the project", self.target.display())
        };
        Skipped {
            what,
            origin: self.file.display().to_string(),
        }
    }
}

impl ProjectFiles {
    pub fn new(root: &Path, trusted: bool) -> ProjectFiles {
        ProjectFiles {
            root: crate::paths::resolve(root),
            trusted,
        }
    }

    /// Every file may be read (a trusted folder, or a reader of the
    /// user's own files).
    pub fn any() -> ProjectFiles {
        ProjectFiles {
            root: PathBuf::new(),
            trusted: true,
        }
    }

    /// Whether the folder is trusted (so [`ProjectFiles::admit`] admits
    /// every file).
    pub fn trusted(&self) -> bool {
        self.trusted
    }

    /// Whether `path` resolves inside the project root, trusted or not.
    pub fn holds(&self, path: &Path) -> bool {
        !self.root.as_os_str().is_empty() && crate::paths::resolve(path).starts_with(&self.root)
    }

    /// `Ok` when the project file `path` may be read; otherwise where it
    /// resolves to. A path that does not exist is judged by its nearest
    /// existing folder.
    pub fn admit(&self, path: &Path) -> Result<(), Outside> {
        if self.trusted {
            return Ok(());
        }
        let target = crate::paths::resolve(path);
        if target.starts_with(&self.root) {
            Ok(())
        } else {
            Err(Outside {
                file: path.to_path_buf(),
                target,
            })
        }
    }
}

impl TrustStore {
    /// Reads the list; a missing file is an empty list.
    pub fn load(path: Option<PathBuf>) -> Result<TrustStore, String> {
        let Some(p) = path else {
            return Ok(TrustStore::default());
        };
        let folders = match std::fs::read_to_string(&p) {
            Ok(text) => {
                toml::from_str::<TrustFile>(&text)
                    .map_err(|e| format!("{}: {e}", p.display()))?
                    .folders
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(format!("{}: {e}", p.display())),
        };
        Ok(TrustStore {
            path: Some(p),
            folders,
        })
    }

    /// Whether `dir` is a listed folder or lies inside one.
    pub fn trusts(&self, dir: &Path) -> bool {
        let dir = crate::paths::resolve(dir);
        self.folders
            .iter()
            .any(|f| dir.starts_with(crate::paths::resolve(f)))
    }

    /// Adds `dir` (made absolute and canonical); false if already there.
    pub fn grant(&mut self, dir: &Path) -> bool {
        let dir = crate::paths::resolve(dir);
        if self.folders.iter().any(|f| crate::paths::resolve(f) == dir) {
            return false;
        }
        self.folders.push(dir);
        true
    }

    /// Removes `dir`; false if it was not listed.
    pub fn revoke(&mut self, dir: &Path) -> bool {
        let dir = crate::paths::resolve(dir);
        let before = self.folders.len();
        self.folders
            .retain(|f| crate::paths::resolve(f) != dir && f != &dir);
        self.folders.len() != before
    }

    /// Writes the list back, creating the folder.
    pub fn save(&self) -> Result<(), String> {
        let Some(p) = &self.path else {
            return Err("no HOME or XDG_CONFIG_HOME: nowhere to record trust".into());
        };
        if let Some(dir) = p.parent() {
            fs_err::create_dir_all(dir).map_err(|e| e.to_string())?;
        }
        let mut text = String::from(
            "# Folders whose project settings cadre obeys in full: hooks, MCP servers,\n\
             # provider URL and key variable. Managed with `cadre trust`.\n",
        );
        let body = toml::to_string(&TrustFile {
            folders: self.folders.clone(),
        })
        .map_err(|e| e.to_string())?;
        text.push_str(&body);
        fs_err::write(p, text).map_err(|e| e.to_string())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn project_files_outside_the_root_need_trust() {
        let proj = tempfile::tempdir().unwrap();
        let away = tempfile::tempdir().unwrap();
        std::fs::write(away.path().join("secret"), "x").unwrap();
        std::fs::write(proj.path().join("own.md"), "x").unwrap();
        let link = proj.path().join("CLAUDE.md");
        std::os::unix::fs::symlink(away.path().join("secret"), &link).unwrap();
        let inner = proj.path().join("inner.md");
        std::os::unix::fs::symlink(proj.path().join("own.md"), &inner).unwrap();
        let untrusted = ProjectFiles::new(proj.path(), false);
        assert_eq!(untrusted.admit(&inner), Ok(()));
        assert_eq!(untrusted.admit(&proj.path().join("own.md")), Ok(()));
        let out = untrusted.admit(&link).unwrap_err();
        assert_eq!(out.file, link);
        assert_eq!(
            out.target,
            away.path().join("secret").canonicalize().unwrap()
        );
        assert_eq!(ProjectFiles::new(proj.path(), true).admit(&link), Ok(()));
        assert!(out.skipped().what.starts_with("link to "));
        // A folder named outside, with no link, is said as such.
        let named = away.path().canonicalize().unwrap();
        let out = untrusted.admit(&named).unwrap_err();
        assert_eq!(out.skipped().what, "outside the project");
    }

    #[test]
    fn grant_covers_subfolders_and_revoke_removes() {
        let home = tempfile::tempdir().unwrap();
        let proj = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(proj.path().join("a/b")).unwrap();
        let path = store_path(|k| (k == "HOME").then(|| home.path().display().to_string()));
        let mut s = TrustStore::load(path.clone()).unwrap();
        assert!(!s.trusts(proj.path()));
        assert!(s.grant(proj.path()));
        assert!(!s.grant(proj.path()));
        s.save().unwrap();
        let s2 = TrustStore::load(path.clone()).unwrap();
        assert!(s2.trusts(&proj.path().join("a/b")));
        assert!(!s2.trusts(home.path()));
        let mut s3 = s2.clone();
        assert!(s3.revoke(proj.path()));
        s3.save().unwrap();
        assert!(!TrustStore::load(path).unwrap().trusts(proj.path()));
    }
}
