//! Source folders and their precedence — the one place that states it.
//!
//! Lowest precedence first, a later folder's agent replacing an earlier one
//! of the same name:
//!
//! 1. built-in (embedded; not a folder here),
//! 2. plugin folders (`agents.plugin_dirs`),
//! 3. user: `~/.claude/agents` (if `agents.load_user_home`), then
//!    `agents.user_dirs`,
//! 4. project: `agents.dirs`, then `.claude/agents` in each folder from the
//!    git root down to the working directory (if
//!    `agents.load_project_claude`), so the closest folder comes last and
//!    wins; `$HOME/.claude/agents` is never a project folder,
//! 5. `--agents` (not a folder; the loader places it here),
//! 6. managed folders (`agents.managed_dirs`).
//!
//! Folders are listed whether or not they exist, so that a watcher can
//! notice one created later; the loader skips missing ones silently.

use std::path::{Path, PathBuf};

use super::def::Source;
use crate::config::Settings;

/// One folder of agent files and the source it counts as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceDir {
    pub source: Source,
    pub path: PathBuf,
}

/// Every agent folder for these settings, lowest precedence first. With
/// `--setting-sources` (`sources`), `~/.claude/agents` is read only when
/// `user` is named and the project's `.claude/agents` only when `project`
/// is, as in Claude Code; folders the settings name are kept.
pub fn source_dirs(
    settings: &Settings,
    cwd: &Path,
    home: Option<&Path>,
    sources: Option<&[crate::config::Scope]>,
) -> Vec<SourceDir> {
    use crate::config::Scope;
    let wanted = |scope: Scope| sources.is_none_or(|s| s.contains(&scope));
    let a = &settings.agents;
    let resolve = |p: &PathBuf| resolve_path(p, cwd, home);
    let mut dirs = Vec::new();
    let mut push = |source: Source, path: PathBuf| dirs.push(SourceDir { source, path });

    for p in &a.plugin_dirs {
        push(Source::Plugin, resolve(p));
    }
    let home_agents = home.map(|h| crate::paths::user_claude_dir(h).join("agents"));
    if a.load_user_home
        && wanted(Scope::User)
        && let Some(h) = &home_agents
    {
        push(Source::User, h.clone());
    }
    for p in &a.user_dirs {
        push(Source::User, resolve(p));
    }
    for p in &a.dirs {
        push(Source::Project, resolve(p));
    }
    if a.load_project_claude && wanted(Scope::Project) {
        for dir in project_chain(cwd) {
            let agents = dir.join(".claude").join("agents");
            if home_agents.as_ref() != Some(&agents) {
                push(Source::Project, agents);
            }
        }
    }
    for p in &a.managed_dirs {
        push(Source::Managed, resolve(p));
    }
    dedup_keep_last(dirs)
}

/// The folders from the git root (nearest ancestor holding `.git`, a file
/// or a folder) down to `cwd`, root first. Without a git root, only `cwd`.
pub(super) fn project_chain(cwd: &Path) -> Vec<PathBuf> {
    let root = cwd.ancestors().find(|d| d.join(".git").exists());
    match root {
        None => vec![cwd.to_path_buf()],
        Some(root) => {
            let mut chain: Vec<PathBuf> = cwd
                .ancestors()
                .take_while(|d| *d != root)
                .map(Path::to_path_buf)
                .collect();
            chain.push(root.to_path_buf());
            chain.reverse();
            chain
        }
    }
}

/// `~/x` → under `home`; a relative path → under `cwd`.
fn resolve_path(p: &Path, cwd: &Path, home: Option<&Path>) -> PathBuf {
    if let (Ok(rest), Some(h)) = (p.strip_prefix("~"), home) {
        return h.join(rest);
    }
    if p.is_relative() {
        cwd.join(p)
    } else {
        p.to_path_buf()
    }
}

/// A folder listed twice is read once, at its highest precedence.
fn dedup_keep_last(dirs: Vec<SourceDir>) -> Vec<SourceDir> {
    let mut out: Vec<SourceDir> = Vec::with_capacity(dirs.len());
    for d in dirs.into_iter().rev() {
        if !out.iter().any(|o| o.path == d.path) {
            out.push(d);
        }
    }
    out.reverse();
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn settings() -> Settings {
        let mut s = Settings::default();
        s.agents.load_user_home = true;
        s.agents.load_project_claude = true;
        s
    }

    #[test]
    fn order_is_plugin_user_project_managed_with_closest_last() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("repo");
        let cwd = root.join("a").join("b");
        std::fs::create_dir_all(&cwd).unwrap();
        std::fs::create_dir_all(root.join(".git")).unwrap();
        let home = tmp.path().join("home");
        let mut s = settings();
        s.agents.plugin_dirs = vec![PathBuf::from("/plug")];
        s.agents.user_dirs = vec![PathBuf::from("~/more")];
        s.agents.dirs = vec![PathBuf::from("extra")];
        s.agents.managed_dirs = vec![PathBuf::from("/etc/managed")];
        let dirs = source_dirs(&s, &cwd, Some(&home), None);
        let got: Vec<(Source, PathBuf)> = dirs.into_iter().map(|d| (d.source, d.path)).collect();
        let ca = |p: &Path| p.join(".claude").join("agents");
        assert_eq!(
            got,
            vec![
                (Source::Plugin, PathBuf::from("/plug")),
                (Source::User, ca(&home)),
                (Source::User, home.join("more")),
                (Source::Project, cwd.join("extra")),
                (Source::Project, ca(&root)),
                (Source::Project, ca(&root.join("a"))),
                (Source::Project, ca(&cwd)),
                (Source::Managed, PathBuf::from("/etc/managed")),
            ]
        );
    }

    #[test]
    fn no_git_root_means_only_cwd_and_never_home_as_project() {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("home");
        let cwd = home.clone();
        std::fs::create_dir_all(&cwd).unwrap();
        let dirs = source_dirs(&settings(), &cwd, Some(&home), None);
        assert_eq!(
            dirs,
            vec![SourceDir {
                source: Source::User,
                path: home.join(".claude").join("agents")
            }]
        );

        let cwd = tmp.path().join("w");
        std::fs::create_dir_all(&cwd).unwrap();
        let mut s = settings();
        s.agents.load_user_home = false;
        let dirs = source_dirs(&s, &cwd, Some(&home), None);
        assert_eq!(
            dirs,
            vec![SourceDir {
                source: Source::Project,
                path: cwd.join(".claude").join("agents")
            }]
        );
        s.agents.load_project_claude = false;
        assert!(source_dirs(&s, &cwd, Some(&home), None).is_empty());
    }

    #[test]
    fn git_file_marks_a_root_too() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("wt");
        let cwd = root.join("sub");
        std::fs::create_dir_all(&cwd).unwrap();
        std::fs::write(root.join(".git"), "gitdir: elsewhere\n").unwrap();
        let mut s = settings();
        s.agents.load_user_home = false;
        let dirs = source_dirs(&s, &cwd, None, None);
        assert_eq!(dirs.len(), 2);
        assert_eq!(dirs[0].path, root.join(".claude").join("agents"));
        assert_eq!(dirs[1].path, cwd.join(".claude").join("agents"));
    }
}
