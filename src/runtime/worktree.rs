//! Worktree isolation (SPEC §13): a child with `isolation: worktree` runs
//! in its own `git worktree` under `GITROOT/.cadre/worktrees/agent-ID8`, on
//! the branch `worktree-agent-ID8`, made from the caller's `HEAD`.
//!
//! Everything here runs the `git` command line (no libgit2, no gix). When
//! the child ends — completed, failed, cancelled, or its future dropped —
//! the worktree is checked from inside: no uncommitted changes and no new
//! commits → the worktree and its branch are removed; otherwise (or when
//! any git command fails) both are kept and reported. Only the worktree's
//! own status counts, so the main checkout's `.cadre/` folder never does.
//! This module knows nothing of sessions; `spawn` and the CLI call it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use serde::Serialize;
use serde_json::{Value, json};

use crate::message::{ContentBlock, History, Message};
use crate::snapshot::Snapshot;

use super::texts::{WorktreeFailed, WorktreeNotice};
use super::transcript::{WriteFence, write_json_atomic};

/// Where agent worktrees live, relative to the repository's top level.
pub const WORKTREES_DIR: &str = ".cadre/worktrees";

/// A worktree made for one child.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Worktree {
    pub path: PathBuf,
    pub branch: String,
    /// The main repository's top level.
    pub git_root: PathBuf,
    /// The commit it was made from.
    pub base: String,
}

/// A worktree that was kept after its child ended: what results, meta
/// files and task notifications report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct KeptWorktree {
    pub path: PathBuf,
    pub branch: String,
}

impl KeptWorktree {
    /// `worktree_path` and `worktree_branch` for the templates that report
    /// a kept worktree (`result_trailer`, `task_notification`,
    /// `error_subagent_failed`); both `null` for `None`.
    pub fn template_fields(kept: Option<&KeptWorktree>) -> (Option<String>, Option<String>) {
        match kept {
            Some(k) => (Some(k.path.display().to_string()), Some(k.branch.clone())),
            None => (None, None),
        }
    }
}

/// Why no worktree could be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorktreeError {
    #[error("{} is not in a git repository", .0.display())]
    NotARepo(PathBuf),
    /// `HEAD` does not exist: a worktree needs a commit to start from.
    #[error("the repository at {} has no commits yet", .0.display())]
    NoCommits(PathBuf),
    #[error("{0}")]
    Git(GitError),
}

/// A git command that failed, as data: the `error_worktree` template words
/// it for the model; `Display` words it for the CLI. `kind` names the
/// variant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum GitError {
    /// `git` could not be started; `error` is the system's.
    #[error("cannot run git: {error}")]
    Spawn { error: String },
    /// `git ARGS` exited with an error; `stderr` is git's own message.
    #[error("git {args} failed: {stderr}")]
    Exit { args: String, stderr: String },
    /// The task that ran git ended abnormally; `error` is the runtime's.
    #[error("{error}")]
    Task { error: String },
}

/// Runs `git ARGS` in `dir`; `Ok` is stdout trimmed, `Err` says what failed.
pub fn git(dir: &Path, args: &[&str]) -> Result<String, GitError> {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .map_err(|e| GitError::Spawn {
            error: e.to_string(),
        })?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    } else {
        Err(GitError::Exit {
            args: args.join(" "),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }
}

/// The main repository's top level for `cwd`, even from inside a worktree:
/// the parent of the common git directory.
pub fn git_root(cwd: &Path) -> Result<PathBuf, WorktreeError> {
    let common = git(
        cwd,
        &["rev-parse", "--path-format=absolute", "--git-common-dir"],
    )
    .map_err(|_| WorktreeError::NotARepo(cwd.to_path_buf()))?;
    PathBuf::from(common)
        .parent()
        .map(Path::to_path_buf)
        .ok_or_else(|| WorktreeError::NotARepo(cwd.to_path_buf()))
}

/// `agent-ID8`: the first 8 characters of the agent id after its `a`.
pub fn slug(agent_id: &str) -> String {
    let id = agent_id.strip_prefix('a').unwrap_or(agent_id);
    format!("agent-{}", id.chars().take(8).collect::<String>())
}

/// The branch of the worktree named `slug`.
pub fn branch_for(slug: &str) -> String {
    format!("worktree-{slug}")
}

/// Makes the worktree for `agent_id` from `cwd`'s `HEAD`. Returns it and
/// the child's working directory: the same subfolder of the worktree as
/// `cwd` is of its checkout.
pub fn create(cwd: &Path, agent_id: &str) -> Result<(Worktree, PathBuf), WorktreeError> {
    create_from(cwd, agent_id, None)
}

/// The commit a worktree for a child of `cwd` starts from: its `HEAD`.
pub fn head_of(cwd: &Path) -> Result<String, WorktreeError> {
    let git_root = git_root(cwd)?;
    git(cwd, &["rev-parse", "--verify", "HEAD"]).map_err(|_| WorktreeError::NoCommits(git_root))
}

/// [`create`] from `base` (a commit) instead of `cwd`'s `HEAD` when given.
pub fn create_from(
    cwd: &Path,
    agent_id: &str,
    base: Option<&str>,
) -> Result<(Worktree, PathBuf), WorktreeError> {
    let git_root = git_root(cwd)?;
    let base = match base {
        Some(b) => b.to_string(),
        None => head_of(cwd)?,
    };
    let prefix = git(cwd, &["rev-parse", "--show-prefix"]).unwrap_or_default();
    let slug = slug(agent_id);
    let branch = branch_for(&slug);
    let path = git_root.join(WORKTREES_DIR).join(&slug);
    let path_str = path.to_string_lossy().into_owned();
    git(
        cwd,
        &[
            "worktree", "add", "--quiet", "-B", &branch, &path_str, &base,
        ],
    )
    .map_err(WorktreeError::Git)?;
    Ok(within(
        Worktree {
            path,
            branch,
            git_root,
            base,
        },
        &prefix,
    ))
}

/// Whether the git worktree of the child `agent_id` is there already in
/// the repository of `cwd` (a task taken over in a shared folder).
pub fn exists_for(cwd: &Path, agent_id: &str) -> bool {
    git_root(cwd).is_ok_and(|r| r.join(WORKTREES_DIR).join(slug(agent_id)).is_dir())
}

/// Whether `path` is one of the worktrees cadre makes in the repository
/// of `cwd` (not a folder a `WorktreeCreate` hook made).
pub fn is_cadre_worktree(cwd: &Path, path: &Path) -> bool {
    git_root(cwd).is_ok_and(|r| path.starts_with(r.join(WORKTREES_DIR)))
}

/// The worktree of `agent_id` for a child of `cwd` when it exists already
/// (a task taken over from a worker that died: the same worktree, with
/// whatever the child did in it), else a new one from `base`. The bool
/// says whether it was made now. Another process may be changing
/// worktrees of the same repository: a failed `git worktree add` is tried
/// again a few times.
pub fn open_or_create(
    cwd: &Path,
    agent_id: &str,
    base: Option<&str>,
) -> Result<(Worktree, PathBuf, bool), WorktreeError> {
    let _one_at_a_time = git_lock();
    let git_root = git_root(cwd)?;
    let slug = slug(agent_id);
    let path = git_root.join(WORKTREES_DIR).join(&slug);
    let top = git(&path, &["rev-parse", "--show-toplevel"]).ok();
    if path.is_dir()
        && top.is_some_and(|t| Path::new(&t) == path || same_file(Path::new(&t), &path))
    {
        let prefix = git(cwd, &["rev-parse", "--show-prefix"]).unwrap_or_default();
        let base = match base {
            Some(b) => b.to_string(),
            None => head_of(cwd)?,
        };
        let wt = Worktree {
            path,
            branch: branch_for(&slug),
            git_root,
            base,
        };
        let (wt, child_cwd) = within(wt, &prefix);
        return Ok((wt, child_cwd, false));
    }
    // A folder left by a `worktree add` cut short is not a worktree:
    // forget git's record of it before adding it again.
    let _ = git(&git_root, &["worktree", "prune"]);
    let mut tries = 0;
    loop {
        match create_from(cwd, agent_id, base) {
            Ok((wt, child_cwd)) => return Ok((wt, child_cwd, true)),
            Err(WorktreeError::Git(e)) if tries < 3 => {
                tracing::debug!("git worktree add: {e}; trying again");
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(100 << tries));
            }
            Err(e) => return Err(e),
        }
    }
}

fn same_file(a: &Path, b: &Path) -> bool {
    matches!((a.canonicalize(), b.canonicalize()), (Ok(x), Ok(y)) if x == y)
}

/// A worktree and the child's working directory in it: the same subfolder
/// (`prefix`) as the caller's of its checkout.
fn within(wt: Worktree, prefix: &str) -> (Worktree, PathBuf) {
    let path = wt.path.clone();
    let child_cwd = if prefix.is_empty() {
        path.clone()
    } else {
        let sub = path.join(prefix);
        if let Err(e) = fs_err::create_dir_all(&sub) {
            tracing::warn!("{e}");
        }
        sub
    };
    (wt, child_cwd)
}

/// Whether the worktree holds uncommitted changes or commits after its
/// base. A git command that fails counts as a change (keep, don't lose work).
pub fn has_changes(wt: &Worktree) -> bool {
    match git(&wt.path, &["status", "--porcelain"]) {
        Ok(s) if s.is_empty() => {}
        _ => return true,
    }
    let range = format!("{}..HEAD", wt.base);
    !matches!(
        git(&wt.path, &["rev-list", "--count", &range]).as_deref(),
        Ok("0")
    )
}

/// Removes a worktree and its branch (either may already be gone).
pub fn remove(git_root: &Path, path: &Path, branch: &str) -> Result<(), String> {
    let path_str = path.to_string_lossy().into_owned();
    let removed = git(git_root, &["worktree", "remove", "--force", &path_str]);
    let deleted = git(git_root, &["branch", "-D", branch]);
    match (removed, deleted) {
        (Err(a), Err(b)) => Err(format!("{a}; {b}")),
        _ => Ok(()),
    }
}

/// Ends a child's worktree: removed when unchanged, else kept and returned.
/// Sibling children start and end together; git's own locks (config, refs,
/// worktree admin files) make concurrent `worktree add`/`remove` in one
/// repository fail at random, so this process changes worktrees one at a
/// time.
fn git_lock() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

pub fn finish(wt: &Worktree) -> Option<KeptWorktree> {
    let _one_at_a_time = git_lock();
    if has_changes(wt) {
        return Some(KeptWorktree {
            path: wt.path.clone(),
            branch: wt.branch.clone(),
        });
    }
    if let Err(e) = remove(&wt.git_root, &wt.path, &wt.branch) {
        tracing::warn!("cannot remove worktree {}: {e}", wt.path.display());
    }
    None
}

/// Owns a child's worktree until it is finished: [`WorktreeGuard::finish`]
/// when the child ends, or — if the future running the child is dropped
/// first — the same check on drop, so no path leaves an unchanged worktree
/// behind.
#[derive(Debug)]
pub struct WorktreeGuard(Option<Worktree>, Option<Arc<WriteFence>>, bool);

impl WorktreeGuard {
    pub fn new(wt: Worktree) -> Self {
        WorktreeGuard(Some(wt), None, false)
    }

    /// A folder a `WorktreeCreate` hook made at `path` (the child's
    /// working directory): cadre runs no git on it and never removes it;
    /// when the child ends, the `WorktreeRemove` hooks do what they do,
    /// and a folder still there is reported as kept.
    pub fn made_by_hook(path: PathBuf) -> Self {
        let branch = git(&path, &["rev-parse", "--abbrev-ref", "HEAD"]).unwrap_or_default();
        let wt = Worktree {
            git_root: path.clone(),
            path,
            branch,
            base: String::new(),
        };
        WorktreeGuard(Some(wt), None, true)
    }

    /// Whether a `WorktreeCreate` hook made it.
    pub fn by_hook(&self) -> bool {
        self.2
    }

    /// A worktree of a task a fleet worker holds: once the task's lease is
    /// lost ([`WriteFence`]), the worktree belongs to whoever took the
    /// task over, and is neither checked nor removed here.
    #[must_use]
    pub fn fenced(mut self, fence: Arc<WriteFence>) -> Self {
        self.1 = Some(fence);
        self
    }

    fn fence_open(&self) -> bool {
        self.1.as_ref().is_none_or(|f| f.open())
    }

    pub fn worktree(&self) -> Option<&Worktree> {
        self.0.as_ref()
    }

    /// Removes the worktree when unchanged; returns it when kept. For the
    /// background-task notification's `<worktree>` element too.
    pub async fn finish(mut self) -> Option<KeptWorktree> {
        if !self.fence_open() {
            self.0 = None;
            return None;
        }
        let wt = self.0.take()?;
        if self.2 {
            return wt.path.exists().then_some(KeptWorktree {
                path: wt.path,
                branch: wt.branch,
            });
        }
        match tokio::task::spawn_blocking(move || finish(&wt)).await {
            Ok(kept) => kept,
            Err(e) => {
                tracing::warn!("worktree cleanup failed: {e}");
                None
            }
        }
    }
}

impl WorktreeGuard {
    /// The meta file's `worktree` value while the child runs.
    pub fn record(&self) -> Option<KeptWorktree> {
        self.0.as_ref().map(|w| KeptWorktree {
            path: w.path.clone(),
            branch: w.branch.clone(),
        })
    }
}

/// Ends a child's worktree (if it has one) and records the outcome in its
/// meta file under `session_dir` (`worktree`: the kept one, or `null`).
pub async fn finish_child(
    guard: Option<WorktreeGuard>,
    session_dir: Option<&Path>,
    agent_id: &str,
) -> Option<KeptWorktree> {
    let kept = guard?.finish().await;
    if let Some(dir) = session_dir {
        let path = super::resume::subagents_dir(dir).join(format!("agent-{agent_id}.meta.json"));
        if let Some(mut meta) = fs_err::read_to_string(&path)
            .ok()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        {
            meta["worktree"] = json!(kept);
            write_json_atomic(&path, &meta);
        }
    }
    kept
}

impl Drop for WorktreeGuard {
    fn drop(&mut self) {
        if !self.fence_open() || self.2 {
            return;
        }
        if let Some(wt) = self.0.take() {
            finish(&wt);
        }
    }
}

/// Adds the fork's worktree notice after its directive (the last block of
/// the last message of a fork child's starting history).
pub fn push_notice(history: &mut History, notice: String) {
    if let Some(last) = history.last_mut() {
        let mut m: Message = (**last).clone();
        m.content.push(ContentBlock::text(notice));
        *last = std::sync::Arc::new(m);
    }
}

/// Why the `WorktreeCreate` hooks made no worktree, worded by the
/// `error_worktree` template (the Agent call's error).
pub fn hook_failed_text(snap: &Snapshot, why: super::texts::WorktreeHookFailure) -> String {
    snap.templates.show(&WorktreeFailed {
        not_a_repo: false,
        cwd: String::new(),
        hook_failed: Some(why),
        no_commits: false,
        root: String::new(),
        error: None,
    })
}

/// Why no worktree could be made, worded by the `error_worktree` template
/// (the Agent call's error, or a remote task's problem).
pub fn failed_text(snap: &Snapshot, e: WorktreeError) -> String {
    let t = &snap.templates;
    let blank = WorktreeFailed {
        not_a_repo: false,
        cwd: String::new(),
        hook_failed: None,
        no_commits: false,
        root: String::new(),
        error: None,
    };
    match e {
        WorktreeError::NotARepo(cwd) => t.show(&WorktreeFailed {
            not_a_repo: true,
            cwd: cwd.display().to_string(),
            ..blank
        }),
        WorktreeError::NoCommits(root) => t.show(&WorktreeFailed {
            no_commits: true,
            root: root.display().to_string(),
            ..blank
        }),
        WorktreeError::Git(error) => t.show(&WorktreeFailed {
            error: Some(error),
            ..blank
        }),
    }
}

/// The commit a worktree for a child of `parent_cwd` will start from (its
/// `HEAD`), checked as [`isolate`] checks it, for a child whose worktree a
/// fleet worker makes. `Err` is the rendered error result.
pub async fn base_for(snap: &Snapshot, parent_cwd: &Path) -> Result<String, String> {
    let cwd = parent_cwd.to_path_buf();
    tokio::task::spawn_blocking(move || head_of(&cwd))
        .await
        .unwrap_or_else(|e| {
            Err(WorktreeError::Git(GitError::Task {
                error: e.to_string(),
            }))
        })
        .map_err(|e| failed_text(snap, e))
}

/// Makes the worktree for a child about to start from `parent_cwd`: the
/// guard and the child's working directory. A fork's starting history gets
/// the worktree notice. `Err` is the rendered error result.
pub async fn isolate(
    snap: &Snapshot,
    parent_cwd: &Path,
    agent_id: &str,
    fork_history: Option<&mut History>,
) -> Result<(WorktreeGuard, PathBuf), String> {
    let (cwd, id) = (parent_cwd.to_path_buf(), agent_id.to_string());
    let made = tokio::task::spawn_blocking(move || {
        let _one_at_a_time = git_lock();
        create(&cwd, &id)
    })
    .await
    .unwrap_or_else(|e| {
        Err(WorktreeError::Git(GitError::Task {
            error: e.to_string(),
        }))
    });
    let (wt, child_cwd) = made.map_err(|e| failed_text(snap, e))?;
    announce(snap, parent_cwd, &child_cwd, fork_history);
    Ok((WorktreeGuard::new(wt), child_cwd))
}

/// A fork's starting history gets the notice of the worktree it runs in.
pub fn announce(
    snap: &Snapshot,
    parent_cwd: &Path,
    child_cwd: &Path,
    fork_history: Option<&mut History>,
) {
    if let Some(history) = fork_history {
        push_notice(
            history,
            snap.templates.show(&WorktreeNotice {
                worktree_path: child_cwd.display().to_string(),
                parent_cwd: parent_cwd.display().to_string(),
            }),
        );
    }
}

/// One kept agent worktree of a repository, as `git worktree list` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    pub path: PathBuf,
    pub branch: Option<String>,
    /// `ID8` of `agent-ID8`.
    pub id8: String,
}

/// The agent worktrees (`GITROOT/.cadre/worktrees/agent-*`) of the
/// repository `cwd` is in.
pub fn list(cwd: &Path) -> Result<(PathBuf, Vec<Listed>), WorktreeError> {
    let root = git_root(cwd)?;
    let dir = root.join(WORKTREES_DIR);
    let out = git(&root, &["worktree", "list", "--porcelain"]).map_err(WorktreeError::Git)?;
    Ok((root, parse_list(&out, &dir)))
}

fn parse_list(porcelain: &str, dir: &Path) -> Vec<Listed> {
    let mut out = Vec::new();
    for record in porcelain.split("\n\n") {
        let mut path = None;
        let mut branch = None;
        for line in record.lines() {
            if let Some(p) = line.strip_prefix("worktree ") {
                path = Some(PathBuf::from(p));
            } else if let Some(b) = line.strip_prefix("branch ") {
                branch = Some(b.strip_prefix("refs/heads/").unwrap_or(b).to_string());
            }
        }
        let Some(path) = path else { continue };
        if path.parent() != Some(dir) {
            continue;
        }
        let Some(id8) = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_prefix("agent-"))
            .map(str::to_string)
        else {
            continue;
        };
        out.push(Listed { path, branch, id8 });
    }
    out
}

/// `ID8` from what a user may type: a full agent id (`a` + 16 hex), `ID8`,
/// `agent-ID8` or a branch name.
pub fn id8_of(id: &str) -> String {
    let id = id.trim();
    let id = id.strip_prefix("worktree-").unwrap_or(id);
    if let Some(rest) = id.strip_prefix("agent-") {
        return rest.to_string();
    }
    if id.len() > 8 && id.starts_with('a') {
        return id[1..].chars().take(8).collect();
    }
    id.to_string()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(slug("a0123456789abcdef"), "agent-01234567");
        assert_eq!(branch_for("agent-01234567"), "worktree-agent-01234567");
        for id in [
            "a0123456789abcdef",
            "01234567",
            "a01234567",
            "agent-01234567",
            "worktree-agent-01234567",
        ] {
            assert_eq!(id8_of(id), "01234567", "{id}");
        }
        assert_eq!(id8_of("abcdef01"), "abcdef01", "8 hex digits stay whole");
    }

    #[test]
    fn porcelain_list_keeps_agent_worktrees_only() {
        let text = "worktree /r\nHEAD 1\nbranch refs/heads/main\n\nworktree /r/.cadre/worktrees/agent-0123abcd\nHEAD 2\nbranch refs/heads/worktree-agent-0123abcd\n\nworktree /elsewhere/x\nHEAD 3\ndetached\n";
        let listed = parse_list(text, Path::new("/r/.cadre/worktrees"));
        assert_eq!(
            listed,
            vec![Listed {
                path: PathBuf::from("/r/.cadre/worktrees/agent-0123abcd"),
                branch: Some("worktree-agent-0123abcd".into()),
                id8: "0123abcd".into()
            }]
        );
    }
}
