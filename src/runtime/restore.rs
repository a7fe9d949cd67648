//! Restoring the sub-agents of a resumed session: each one's files read
//! back ([`super::resume::read_task`]) and its session planned again from
//! the current snapshot ([`super::plan::plan_resumed`]), so that nothing a
//! meta file or transcript says can widen what it may do.

use std::path::Path;

use serde_json::Value;

use super::plan::{SpawnParent, plan_resumed};
use super::resume::{RebuiltTask, read_task, sub_agent_metas};

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
