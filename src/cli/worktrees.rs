//! `cadre worktrees list` and `cadre worktrees remove ID`: the agent
//! worktrees kept under the current repository (`.cadre/worktrees`), with
//! the agent each belongs to, read from the agents' meta files.

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use serde::Serialize;
use serde_json::Value;

use super::output::print_json;
use super::{CliError, GlobalArgs, Overrides, load_snapshot, working_dir};
use crate::runtime::worktree::{self, WorktreeError};

#[derive(Debug, Subcommand)]
pub enum WorktreesCommand {
    /// Kept agent worktrees: path, branch, agent id, type and description.
    List(ListArgs),
    /// Remove an agent worktree and its branch (ID: agent id, its first
    /// 8 hex digits, `agent-ID8` or the branch name).
    Remove(RemoveArgs),
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// Print JSON (documented in docs/worktrees.md).
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
pub struct RemoveArgs {
    id: String,
}

/// One row of `cadre worktrees list --json`.
#[derive(Debug, Serialize)]
struct Row {
    id: String,
    path: PathBuf,
    branch: Option<String>,
    agent_id: Option<String>,
    agent_type: Option<String>,
    description: Option<String>,
    session_id: Option<String>,
}

pub fn dispatch(g: &GlobalArgs, cmd: WorktreesCommand) -> Result<(), CliError> {
    let cwd = working_dir(g)?;
    match cmd {
        WorktreesCommand::List(args) => list(g, &cwd, &args),
        WorktreesCommand::Remove(args) => remove(&cwd, &args.id),
    }
}

fn repo_error(e: WorktreeError) -> CliError {
    match e {
        WorktreeError::NotARepo(_) | WorktreeError::NoCommits(_) => CliError::Usage(e.to_string()),
        WorktreeError::Git(m) => CliError::Failed(m.to_string()),
    }
}

fn list(g: &GlobalArgs, cwd: &Path, args: &ListArgs) -> Result<(), CliError> {
    let (root, listed) = worktree::list(cwd).map_err(repo_error)?;
    let metas = read_metas(&session_dirs(g, cwd, &root));
    let rows: Vec<Row> = listed
        .into_iter()
        .map(|l| {
            let meta = metas.iter().find(|(_, m)| {
                m["agent_id"]
                    .as_str()
                    .is_some_and(|id| worktree::id8_of(id) == l.id8)
            });
            let field = |k: &str| meta.and_then(|(_, m)| m[k].as_str().map(str::to_string));
            Row {
                id: l.id8.clone(),
                path: l.path,
                branch: l.branch,
                agent_id: field("agent_id"),
                agent_type: field("agent_type"),
                description: field("description"),
                session_id: meta.map(|(s, _)| s.clone()),
            }
        })
        .collect();
    if args.json {
        return print_json(&rows);
    }
    if rows.is_empty() {
        println!("No kept agent worktrees under {}.", root.display());
        return Ok(());
    }
    for r in &rows {
        println!(
            "{}  {}  {}  {}",
            r.id,
            r.branch.as_deref().unwrap_or("(detached)"),
            r.agent_type.as_deref().unwrap_or("?"),
            r.description.as_deref().unwrap_or(""),
        );
        println!("    {}", r.path.display());
    }
    Ok(())
}

/// Where meta files may be: the session folder (`transcripts.dir`), and
/// the old `.cadre/sessions` of the working directory and of the
/// repository.
fn session_dirs(g: &GlobalArgs, cwd: &Path, root: &Path) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Ok((_, snap)) = load_snapshot(g, &Overrides::default()) {
        dirs.push(snap.load().settings().transcripts.dir.clone());
    }
    for d in [cwd, root] {
        let d = d.join(crate::config::OLD_SESSIONS_DIR);
        if !dirs.contains(&d) {
            dirs.push(d);
        }
    }
    dirs
}

/// Every `SESSIONS/*/subagents/*.meta.json` (`agents/` of an older
/// cadre's session), parsed, with its session id.
fn read_metas(dirs: &[PathBuf]) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for dir in dirs {
        let Ok(sessions) = std::fs::read_dir(dir) else {
            continue;
        };
        for session in sessions.flatten() {
            let session_id = session.file_name().to_string_lossy().into_owned();
            let agents = crate::runtime::resume::subagents_dir_found(&session.path());
            let Ok(files) = std::fs::read_dir(agents) else {
                continue;
            };
            for f in files.flatten() {
                let name = f.file_name().to_string_lossy().into_owned();
                if !name.ends_with(".meta.json") {
                    continue;
                }
                if let Some(v) = std::fs::read_to_string(f.path())
                    .ok()
                    .and_then(|t| serde_json::from_str::<Value>(&t).ok())
                {
                    out.push((session_id.clone(), v));
                }
            }
        }
    }
    out
}

fn remove(cwd: &Path, id: &str) -> Result<(), CliError> {
    let root = worktree::git_root(cwd).map_err(repo_error)?;
    let slug = format!("agent-{}", worktree::id8_of(id));
    let path = root.join(worktree::WORKTREES_DIR).join(&slug);
    let branch = worktree::branch_for(&slug);
    worktree::remove(&root, &path, &branch)
        .map_err(|e| CliError::Failed(format!("no agent worktree {slug}: {e}")))?;
    println!("Removed {} and branch {branch}.", path.display());
    Ok(())
}
