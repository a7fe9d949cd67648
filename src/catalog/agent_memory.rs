//! Agent memory (`memory: user|project|local` in an agent file): a folder
//! per agent and scope that outlives sessions, as Claude Code keeps it.
//!
//! - `user`: `~/.claude/agent-memory/NAME/`, for every project;
//! - `project`: `PROJECT/.claude/agent-memory/NAME/`, meant to be checked in;
//! - `local`: `PROJECT/.claude/agent-memory-local/NAME/`, kept out of git.
//!
//! PROJECT is the git root holding the working directory (or the working
//! directory). The head of the folder's `MEMORY.md` (at most
//! [`MAX_LINES`] lines and [`MAX_BYTES`] bytes) goes into the agent's system
//! prompt when its session starts; the runtime lets the agent read and
//! write inside the folder. This module only finds and reads; it runs
//! nothing.

use std::path::{Path, PathBuf};

use serde::Serialize;

/// Lines of `MEMORY.md` put into the prompt.
pub const MAX_LINES: usize = 200;
/// Bytes of `MEMORY.md` read at most.
pub const MAX_BYTES: u64 = 25 * 1024;

/// An agent's memory folder and the head of its `MEMORY.md`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AgentMemory {
    pub scope: String,
    pub dir: PathBuf,
    /// The head of `MEMORY.md`; empty when there is none yet.
    pub content: String,
    /// `MEMORY.md` has more than what `content` holds.
    pub truncated: bool,
    /// No folder between the scope's base (home or project root) and `dir`
    /// is a symbolic link, so `dir` is where it looks. Only then do Read,
    /// Write and Edit in it go without asking: a repository could
    /// otherwise point its memory folder at the user's home.
    pub plain: bool,
    /// A project or local `MEMORY.md` not read because it resolves outside
    /// the project in a folder the user has not trusted.
    #[serde(skip)]
    pub outside: Option<crate::config::trust::Outside>,
}

/// The folder of `agent`'s memory in `scope`; `None` for an unknown scope,
/// or for `user` without a home folder.
pub fn agent_memory_dir(
    scope: &str,
    agent: &str,
    home: Option<&Path>,
    cwd: &Path,
) -> Option<PathBuf> {
    // Plugin agents are named `plugin:agent`; a folder name cannot hold
    // every character a name may.
    let name: String = agent
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '-'
            }
        })
        .collect();
    let name = name.trim_matches('.');
    if name.is_empty() {
        return None;
    }
    let project = || crate::config::trust::project_root(cwd);
    Some(match scope {
        "user" => crate::paths::user_claude_dir(home?)
            .join("agent-memory")
            .join(name),
        "project" => project().join(".claude/agent-memory").join(name),
        "local" => project().join(".claude/agent-memory-local").join(name),
        _ => return None,
    })
}

/// `agent`'s memory in `scope`: its folder and the head of its `MEMORY.md`.
/// A project or local `MEMORY.md` is read only where `files` admits it.
pub fn agent_memory(
    scope: &str,
    agent: &str,
    home: Option<&Path>,
    cwd: &Path,
    files: &crate::config::trust::ProjectFiles,
) -> Option<AgentMemory> {
    let dir = agent_memory_dir(scope, agent, home, cwd)?;
    let base = match scope {
        "user" => home?.to_path_buf(),
        _ => crate::config::trust::project_root(cwd),
    };
    let outside = match scope {
        "user" => None,
        _ => files.admit(&dir.join("MEMORY.md")).err(),
    };
    let mut memory = match outside {
        None => load_agent_memory(scope, dir),
        Some(o) => AgentMemory {
            scope: scope.to_string(),
            dir,
            content: String::new(),
            truncated: false,
            plain: false,
            outside: Some(o),
        },
    };
    memory.plain = memory.outside.is_none() && symlink_free(&base, &memory.dir);
    Some(memory)
}

/// Whether no existing folder from `base` (exclusive) down to `dir` is a
/// symbolic link.
fn symlink_free(base: &Path, dir: &Path) -> bool {
    let Ok(rest) = dir.strip_prefix(base) else {
        return false;
    };
    let mut at = base.to_path_buf();
    for part in rest.components() {
        at.push(part);
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.file_type().is_symlink() => return false,
            Ok(_) => {}
            // Not there yet: nothing below can be a link either.
            Err(_) => return true,
        }
    }
    true
}

/// Reads the head of `dir/MEMORY.md` (a missing file is empty memory).
pub fn load_agent_memory(scope: &str, dir: PathBuf) -> AgentMemory {
    // Bounded, and a FIFO or device in the project is refused, not waited on.
    let (bytes, mut truncated) =
        crate::raw::read_prefix(&dir.join("MEMORY.md"), MAX_BYTES).unwrap_or_default();
    let text = String::from_utf8_lossy(&bytes);
    let mut lines: Vec<&str> = text.lines().collect();
    if lines.len() > MAX_LINES {
        lines.truncate(MAX_LINES);
        truncated = true;
    }
    AgentMemory {
        scope: scope.to_string(),
        dir,
        content: lines.join("\n").trim_end().to_string(),
        truncated,
        plain: false,
        outside: None,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn folders_follow_the_scope() {
        let home = Path::new("/home/u");
        let cwd = tempfile::tempdir().unwrap();
        let root = crate::config::trust::project_root(cwd.path());
        assert_eq!(
            agent_memory_dir("user", "reviewer", Some(home), cwd.path()).unwrap(),
            home.join(".claude/agent-memory/reviewer")
        );
        assert_eq!(
            agent_memory_dir("project", "reviewer", Some(home), cwd.path()).unwrap(),
            root.join(".claude/agent-memory/reviewer")
        );
        assert_eq!(
            agent_memory_dir("local", "plug:rev/x", None, cwd.path()).unwrap(),
            root.join(".claude/agent-memory-local/plug-rev-x")
        );
        assert_eq!(agent_memory_dir("user", "r", None, cwd.path()), None);
        assert_eq!(agent_memory_dir("team", "r", Some(home), cwd.path()), None);
        assert_eq!(agent_memory_dir("user", "..", Some(home), cwd.path()), None);
    }

    #[test]
    fn a_linked_memory_folder_is_not_plain() {
        let home = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let cwd = tempfile::tempdir().unwrap();
        let any = crate::config::trust::ProjectFiles::any();
        let m = agent_memory("user", "r", Some(home.path()), cwd.path(), &any).unwrap();
        assert!(m.plain, "nothing there yet");
        std::fs::create_dir_all(home.path().join(".claude")).unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), home.path().join(".claude/agent-memory"))
            .unwrap();
        let m = agent_memory("user", "r", Some(home.path()), cwd.path(), &any).unwrap();
        assert!(!m.plain);
    }

    #[test]
    fn only_the_head_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let m = load_agent_memory("user", dir.path().to_path_buf());
        assert_eq!((m.content.as_str(), m.truncated), ("", false));
        let long: String = (1..=250).map(|i| format!("line {i}\n")).collect();
        std::fs::write(dir.path().join("MEMORY.md"), long).unwrap();
        let m = load_agent_memory("user", dir.path().to_path_buf());
        assert!(m.truncated);
        assert!(m.content.ends_with("line 200"));
        assert!(!m.content.contains("line 201"));
        // A FIFO is refused at once, not waited on.
        std::fs::remove_file(dir.path().join("MEMORY.md")).unwrap();
        let made = std::process::Command::new("mkfifo")
            .arg(dir.path().join("MEMORY.md"))
            .status()
            .unwrap();
        assert!(made.success());
        let m = load_agent_memory("user", dir.path().to_path_buf());
        assert_eq!((m.content.as_str(), m.truncated), ("", false));
    }
}
