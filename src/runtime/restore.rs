//! Restoring the sub-agents of a resumed session: each one's files read
//! back ([`read_task`]) and its session planned again from
//! the current snapshot ([`super::plan::plan_resumed`]), so that nothing a
//! meta file or transcript says can widen what it may do.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use crate::message::{History, Message, Role};

use super::plan::Recorded;

use super::plan::{SpawnParent, plan_resumed};

/// Registers the sub-agents of a resumed session (from the meta files and
/// transcripts under `session_dir/agents`) as ended tasks of `engine`, so
/// SendMessage can resume them. Each is planned again as a child of
/// `parent` (the main session as it is now; see [`rebuild_task`]). One
/// that was still running when its process ended is recorded `killed`. A
/// sub-agent whose files do not read back, or that the planner refuses
/// now, is skipped with a warning. Sub-agents that ran on a task backend
/// (their meta names one) are left to it: their notice may still come.
/// Returns how many were registered.
pub fn restore_tasks(
    engine: &super::Engine,
    session_dir: &Path,
    parent: &SpawnParent<'_>,
) -> usize {
    let mut restored = 0;
    for (meta_path, meta) in sub_agent_metas(session_dir) {
        if meta.get("backend").is_some_and(|b| !b.is_null()) {
            continue;
        }
        let Some(rebuilt) = rebuild_task(engine, session_dir, meta_path, meta, parent, true) else {
            continue;
        };
        engine
            .tasks
            .insert_ended(rebuilt.task, rebuilt.status, rebuilt.history);
        restored += 1;
    }
    restored
}

/// Rebuilds the sub-agent `meta` describes: its files read back
/// ([`read_task`]), then its session planned again as a child of `parent`
/// from the current snapshot ([`plan_resumed`]), so that nothing the files
/// say can widen its permission mode or its tools. It works in the
/// worktree it kept when that is one of the project's agent worktrees
/// (`.cadre/worktrees/` of a folder `parent.cwd` is in), else in
/// `parent.cwd`. `None`, with a warning, when its files do not read back
/// or the planner refuses it now.
pub fn rebuild_task(
    engine: &super::Engine,
    session_dir: &Path,
    meta_path: std::path::PathBuf,
    meta: Value,
    parent: &SpawnParent<'_>,
    repair: bool,
) -> Option<RebuiltTask> {
    let read = read_task(engine, session_dir, meta_path, meta, repair)?;
    let snap = engine.snapshot.load_full();
    let planned = plan_resumed(&snap, parent, &read.recorded).and_then(|plan| plan.session(&snap));
    let (mut spec, _) = match planned {
        Ok(s) => s,
        Err(refusal) => {
            tracing::warn!(
                "{}: sub-agent not restored: {}",
                read.meta_path.display(),
                refusal.text(&snap.templates)
            );
            return None;
        }
    };
    if let Some(kept) = read
        .worktree
        .as_deref()
        .filter(|p| is_agent_worktree(p, parent.cwd))
    {
        spec.cwd = kept.to_path_buf();
    }
    Some(read.into_task(spec))
}

/// Whether `path` is an existing folder under the agent worktrees
/// (`.cadre/worktrees/`) of `cwd` or of a folder above it, links resolved.
fn is_agent_worktree(path: &Path, cwd: &Path) -> bool {
    let (Ok(path), Ok(cwd)) = (path.canonicalize(), cwd.canonicalize()) else {
        return false;
    };
    path.is_dir()
        && cwd.ancestors().any(|a| {
            let dir = a.join(super::worktree::WORKTREES_DIR);
            path.starts_with(&dir) && path != dir
        })
}

/// The meta files of a session's sub-agents (`subagents/agent-ID.meta.json`),
/// sorted by path, parsed; one that does not parse is skipped with a warning.
pub fn sub_agent_metas(session_dir: &Path) -> Vec<(PathBuf, Value)> {
    let Ok(entries) = std::fs::read_dir(super::resume::subagents_dir(session_dir)) else {
        return Vec::new();
    };
    let mut paths: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with(".meta.json"))
        .collect();
    paths.sort();
    paths
        .into_iter()
        .filter_map(|meta_path| {
            // Typed first: a field of the wrong type is named with its
            // line and column, and the file is left out.
            let read = crate::raw::read_text(&meta_path, MAX_META_BYTES)
                .map_err(|e| format!("{}: {e}", meta_path.display()))
                .and_then(|t| {
                    super::plan_record::SubagentMeta::parse(&meta_path, &t)
                        .map_err(|e| e.to_string())?;
                    serde_json::from_str(&t).map_err(|e| e.to_string())
                });
            match read {
                Ok(v) => Some((meta_path, v)),
                Err(e) => {
                    tracing::warn!("{e}; sub-agent not restored");
                    None
                }
            }
        })
        .collect()
}

/// A sub-agent rebuilt from its meta and transcript.
pub struct RebuiltTask {
    /// Ready to register (as ended, or to run again).
    pub task: super::tasks::NewTask,
    /// What the meta file says (`killed` for one still running).
    pub status: super::tasks::TaskStatus,
    /// Its history, a turn cut mid-way repaired (each tool call without a
    /// result gets a "cancelled" one, also appended to its transcript).
    pub history: History,
}

/// A sub-agent's files read back, before anything is planned from them.
pub struct ReadTask {
    /// What its meta file and `spawn` line say (not trusted).
    pub recorded: Recorded,
    /// The worktree it kept, as its meta file names it (not checked yet).
    pub worktree: Option<PathBuf>,
    pub status: super::tasks::TaskStatus,
    pub history: History,
    /// Where the meta file is.
    pub meta_path: PathBuf,
    meta: Value,
    output_file: PathBuf,
    tool_use_id: String,
}

/// Reads the sub-agent `meta` describes and its transcript under
/// `session_dir/subagents`. With `repair`, a turn cut mid-way gets its
/// "cancelled" tool results (also in the transcript); without, the file is
/// only read. `None`, with a warning, when its files do not read back.
pub fn read_task(
    engine: &super::Engine,
    session_dir: &Path,
    meta_path: PathBuf,
    meta: Value,
    repair: bool,
) -> Option<ReadTask> {
    use super::tasks::TaskStatus;
    let snap = engine.snapshot.load_full();
    let typed = match super::plan_record::SubagentMeta::deserialize(&meta) {
        Ok(t) => t,
        Err(e) => {
            tracing::warn!("{}: {e}; sub-agent not restored", meta_path.display());
            return None;
        }
    };
    // Only the ids are needed before the transcript is read.
    let ids = match typed.recorded(&meta_path, None) {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!("{e}");
            return None;
        }
    };
    let (id, parent) = (ids.agent_id.clone(), ids.parent_agent_id.clone());
    let output_file = super::resume::subagents_dir(session_dir).join(format!("agent-{id}.jsonl"));
    let loaded = super::resume::load(&output_file).and_then(|r| {
        if repair {
            super::resume::trim_partial_tail(&output_file, r.complete_len)?;
        }
        Ok(r)
    });
    let (mut history, spawn) = match loaded {
        Ok(r) => (r.history, r.spawn),
        Err(e) => {
            tracing::warn!("{e}; sub-agent {id} not restored");
            return None;
        }
    };
    // Killed mid-turn: each tool call gets its "cancelled" result.
    if let Some(last) = history
        .last()
        .filter(|m| repair && m.role == Role::Assistant)
    {
        let cancelled = snap.templates.show(&super::texts::ToolCancelled {});
        let results: Vec<crate::message::ContentBlock> = last
            .tool_uses()
            .map(|(id, _, _)| {
                crate::message::ContentBlock::tool_result(id, cancelled.clone(), true)
            })
            .collect();
        if !results.is_empty() {
            let repair = Message::user(results);
            super::transcript::Transcript::open(output_file.clone(), &id, Some(&parent))
                .message(&repair);
            history.push(std::sync::Arc::new(repair));
        }
    }
    let status = match meta.get("status").and_then(Value::as_str) {
        Some("completed") => TaskStatus::Completed,
        Some("failed") => TaskStatus::Failed,
        _ => TaskStatus::Killed,
    };
    // A fork sends the request parts it inherited, as its spawn line
    // recorded them.
    let frozen = typed
        .fork
        .then(|| {
            spawn.and_then(|s| {
                super::plan_record::RecordedSpawn::deserialize(Value::Object(s))
                    .ok()
                    .and_then(|s| s.frozen)
            })
        })
        .flatten();
    if typed.fork && frozen.is_none() {
        tracing::warn!("sub-agent {id}: no recorded fork request parts; they are rendered again");
    }
    let recorded = Recorded { frozen, ..ids };
    Some(ReadTask {
        recorded,
        tool_use_id: typed.tool_use_id(),
        worktree: typed.worktree.map(|w| w.path),
        status,
        history,
        meta,
        meta_path,
        output_file,
    })
}

impl ReadTask {
    /// The task to register, running as `spec`.
    pub fn into_task(self, spec: super::SessionSpec) -> RebuiltTask {
        let r = self.recorded;
        RebuiltTask {
            task: super::tasks::NewTask {
                id: r.agent_id,
                description: r.description,
                agent_type: r.agent_type,
                parent_agent_id: r.parent_agent_id,
                tool_use_id: self.tool_use_id,
                name: r.name,
                output_file: Some(self.output_file),
                meta_file: Some(self.meta_path),
                meta: self.meta,
                spec,
                background: true,
            },
            status: self.status,
            history: self.history,
        }
    }
}

/// The largest sub-agent meta file read back (a meta file holds ids,
/// names, the tool list and at most an error's text).
const MAX_META_BYTES: u64 = 16 * 1024 * 1024;

#[cfg(test)]
mod tests {
    use super::is_agent_worktree;

    #[test]
    fn only_the_projects_agent_worktrees_are_believed() {
        let root = tempfile::tempdir().unwrap();
        let project = root.path().join("project");
        let worktrees = project.join(super::super::worktree::WORKTREES_DIR);
        let kept = worktrees.join("agent-1234abcd");
        let elsewhere = root.path().join("elsewhere");
        for d in [&kept, &elsewhere, &project.join("sub")] {
            std::fs::create_dir_all(d).unwrap();
        }
        assert!(is_agent_worktree(&kept, &project));
        // From a folder inside the project too (the git root is above).
        assert!(is_agent_worktree(&kept, &project.join("sub")));
        assert!(
            !is_agent_worktree(&worktrees, &project),
            "the folder itself"
        );
        assert!(!is_agent_worktree(&elsewhere, &project));
        assert!(!is_agent_worktree(&project, &project));
        assert!(!is_agent_worktree(&worktrees.join("gone"), &project));
        // A link under the worktrees that points out is judged by its target.
        let link = worktrees.join("agent-link");
        std::os::unix::fs::symlink(&elsewhere, &link).unwrap();
        assert!(!is_agent_worktree(&link, &project));
        let dotted = worktrees.join("agent-1234abcd/../../../../elsewhere");
        assert!(!is_agent_worktree(&dotted, &project));
    }
}
