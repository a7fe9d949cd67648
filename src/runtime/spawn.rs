//! Starting a sub-agent from an Agent call: plan it ([`super::plan`], pure),
//! carry the plan out (required MCP servers, worktree, transcript, task),
//! run the child session, format its result.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;

use serde_json::{Value, json};

use crate::agent_tool::{AgentInput, has_fork_boilerplate};
use crate::catalog::{Isolation, ONE_SHOT_AGENTS};
use crate::message::{History, ToolResultContent, Usage};

use super::exec::text_content;
use super::hooks;
use super::plan::{ParentTurn, SpawnParent, SpawnPlan, plan_spawn};
use super::plan_record::{SpawnLine, SubagentMeta};
use super::problem::RunProblem;
use super::session::{Frozen, RunError, Session, SessionSpec, Turn, last_text};
use super::tasks::{NewTask, Task, TaskResult, TaskStatus};
use super::texts::{
    AsyncLaunched, InvalidInput, LimitStall, LimitTaskTimeout, McpRequired, ResultEmpty,
    ResultTrailer, SubagentCancelled, SubagentFailed, TaskBackendFailed, TaskNotification,
};
use super::transcript::Transcript;
use super::worktree::{self, KeptWorktree, WorktreeGuard};
use super::{Engine, EngineEvent, new_agent_id, total_tokens};
use crate::snapshot::Snapshot;

impl Session {
    /// Handles one Agent call. `Ok` is the result content and the child's
    /// usage; `Err` is the error text for an `is_error` result.
    pub(super) async fn agent_call(
        &self,
        turn: &Turn,
        tool_use_id: &str,
        input: Value,
    ) -> Result<(Vec<ToolResultContent>, Usage), String> {
        let snap = &turn.snap;
        let t = &snap.templates;
        // Fields trimmed from this turn's schema (for example `isolation`
        // under MINIMAL_AGENT_SCHEMA) are ignored if the model sends them.
        let input = match turn.request.tools.iter().find(|t| t.name == "Agent") {
            Some(def) => crate::tools::spec::drop_unoffered_fields(input, def),
            None => input,
        };
        let input: AgentInput = serde_json::from_value(input).map_err(|e| {
            t.show(&InvalidInput {
                tool: "Agent".into(),
                issues: e.to_string(),
                plural: false,
            })
        })?;
        let kind = self.spec.kind;
        // In a team, a named spawn is a teammate (only the lead starts them).
        if let Some(name) = input.name.clone()
            && self.seat().is_some()
            && snap.teams_effective(kind)
        {
            return self.spawn_teammate(&turn.snap, &input, &name).await;
        }
        let available_tools = self.engine.available_tools(snap);
        let parent = self.spawn_parent(
            &available_tools,
            Some(ParentTurn {
                messages: &turn.request.messages,
                assistant: &turn.assistant,
                frozen: Frozen {
                    system: Arc::clone(&turn.request.system),
                    tools: Arc::clone(&turn.request.tools),
                    tool_names: Arc::clone(&turn.tool_names),
                    sampling: turn.request.sampling.clone(),
                    max_tokens: turn.request.max_tokens,
                },
            }),
        );
        let plan = plan_spawn(snap, &parent, &input, new_agent_id()).map_err(|r| r.text(t))?;
        let (mut spec, mut history) = plan.session(snap).map_err(|r| r.text(t))?;
        if !plan.fork
            && let Some(def) = &spec.def
        {
            let agents = &snap.settings().agents;
            if let Err(e) = self
                .engine
                .mcp
                .wait_required(
                    &def.required_mcp_servers,
                    Duration::from_millis(agents.required_mcp_wait_ms),
                    Duration::from_millis(agents.required_mcp_poll_ms),
                )
                .await
            {
                return Err(t.show(&McpRequired {
                    agent_type: def.name.clone(),
                    missing: e.missing.join(", "),
                    available: e.available.join(", "),
                }));
            }
        }
        let caller_can_read = turn.tool_names.iter().any(|n| n == "Read" || n == "Bash");
        // A background child that goes to the engine's task backend (the
        // worker fleet) gets its worktree there, made by the worker from
        // the commit checked out here now.
        let remote_worktree = plan.isolation == Some(Isolation::Worktree)
            && plan.background
            && self.engine.backend.is_some();
        let worktree_base = if remote_worktree {
            Some(worktree::base_for(snap, &self.spec.cwd).await?)
        } else {
            None
        };
        let worktree = if plan.isolation == Some(Isolation::Worktree) && !remote_worktree {
            let fork_history = plan.fork.then_some(&mut history);
            // A WorktreeCreate hook replaces git: the folder it made.
            let name = worktree::slug(&plan.agent_id);
            let (guard, cwd) = match self.worktree_create_hooks(snap, &name).await {
                Some(Ok(path)) => {
                    worktree::announce(snap, &self.spec.cwd, &path, fork_history);
                    (WorktreeGuard::made_by_hook(path.clone()), path)
                }
                Some(Err(why)) => return Err(worktree::hook_failed_text(snap, why)),
                None => {
                    worktree::isolate(snap, &self.spec.cwd, &plan.agent_id, fork_history).await?
                }
            };
            spec.cwd = cwd;
            Some(guard)
        } else {
            None
        };
        self.run_child(ChildStart {
            spec,
            history,
            agent_type: plan.agent.name.clone(),
            background: plan.background,
            plan,
            input,
            tool_use_id: tool_use_id.to_string(),
            caller_can_read,
            worktree,
            worktree_base,
            snap: Arc::clone(&turn.snap),
        })
        .await
    }

    /// This session as the parent of a spawn, as the planner reads it:
    /// `available_tools` are the tools the engine offers now, `turn` the
    /// turn that made the call (a fork continues it).
    pub(super) fn spawn_parent<'a>(
        &'a self,
        available_tools: &'a [String],
        turn: Option<ParentTurn<'a>>,
    ) -> SpawnParent<'a> {
        SpawnParent {
            agent_id: &self.spec.agent_id,
            session_id: &self.engine.session_id,
            kind: self.spec.kind,
            depth: self.spec.depth,
            model: &self.spec.model,
            mode: self.spec.mode,
            def: self.spec.def.as_deref(),
            cwd: &self.spec.cwd,
            is_fork_child: self.spec.started_by_fork || has_fork_boilerplate(&self.history),
            env_model: self.engine.subagent_model.as_deref(),
            available_tools,
            turn,
        }
    }

    /// Registers the child as a task, starts it, and either waits for it
    /// (foreground, until `agents.auto_background_ms`) or returns at once
    /// with `async_launched`. Returns a boxed future: the call graph is
    /// recursive (a child may start children), and naming the future's
    /// type here is what lets the compiler see that it is `Send`.
    fn run_child(
        &self,
        c: ChildStart,
    ) -> BoxFuture<'_, Result<(Vec<ToolResultContent>, Usage), String>> {
        Box::pin(async move {
            let engine = Arc::clone(&self.engine);
            // The calling turn's snapshot: a reload mid-turn changes nothing here.
            let snap = Arc::clone(&c.snap);
            let t = &snap.templates;
            let agent_id = c.spec.agent_id.clone();
            // A background child without a worktree of its own runs on the
            // engine's backend when it has one (the worker fleet).
            let backend = engine
                .backend
                .clone()
                .filter(|_| c.background && c.worktree.is_none());
            // The meta file is the plan's, with the call and where it runs.
            let mut meta = SubagentMeta::of(
                &c.plan,
                &c.tool_use_id,
                c.worktree.as_ref().and_then(WorktreeGuard::record),
                backend.as_ref().map(|b| b.name().to_string()),
            );
            meta.worktree_base.clone_from(&c.worktree_base);
            let (transcript, meta_file) = match &engine.session_dir {
                Some(dir) => {
                    let agents = super::resume::subagents_dir(dir);
                    let path = agents.join(format!("agent-{agent_id}.jsonl"));
                    // The child creates its files when it starts (see
                    // `start_task`): a turn that starts many children
                    // neither waits for nor serialises their creation.
                    (
                        Transcript::deferred(path, &agent_id, Some(&self.spec.agent_id)),
                        Some(agents.join(format!("agent-{agent_id}.meta.json"))),
                    )
                }
                None => (
                    Transcript::disabled(&agent_id, Some(&self.spec.agent_id)),
                    None,
                ),
            };
            let transcript = Arc::new(transcript);
            transcript.record_line("spawn", &SpawnLine::of(&c.plan));
            engine.emit(EngineEvent::SubagentStart {
                agent_id: agent_id.clone(),
                parent_agent_id: self.spec.agent_id.clone(),
                agent_type: c.agent_type.clone(),
                description: c.input.description.clone(),
                model: c.spec.model.clone(),
                fork: c.spec.started_by_fork,
                tool_use_id: c.tool_use_id.clone(),
                color: c.spec.def.as_ref().and_then(|d| d.color),
                prompt: c.input.prompt.clone(),
                background: c.background,
                depth: c.spec.depth,
            });
            let mut history = c.history;
            hooks::subagent_start(&engine, &snap, &c.spec, &transcript, &mut history).await;
            // Every message of the child's starting history goes to its transcript.
            for m in &history {
                transcript.message(m);
            }
            let (task, rx) = engine.tasks.create(NewTask {
                id: agent_id.clone(),
                description: c.input.description.clone(),
                agent_type: c.agent_type.clone(),
                parent_agent_id: self.spec.agent_id.clone(),
                tool_use_id: c.tool_use_id.clone(),
                name: c.input.name.clone(),
                output_file: transcript.path().map(Path::to_path_buf),
                meta_file,
                meta: meta.to_value(),
                spec: c.spec.clone(),
                background: c.background,
            });
            match backend {
                Some(backend) => {
                    // A worker writes on in the files made here: create them
                    // now (see `start_task` for a child run in this process).
                    let (files_task, files_transcript) =
                        (Arc::clone(&task), Arc::clone(&transcript));
                    if tokio::task::spawn_blocking(move || {
                        files_transcript.open_deferred();
                        files_task.write_first_meta();
                    })
                    .await
                    .is_err()
                    {
                        tracing::warn!("{agent_id}: the transcript or meta file was not written");
                    }
                    drop(transcript);
                    if let Err(failed) = backend.submit(&engine, &task, &c.plan).await {
                        fail_unqueued(&engine, &task, history, backend.name(), failed);
                    }
                }
                None => start_task(
                    Arc::clone(&engine),
                    Arc::clone(&task),
                    c.spec,
                    history,
                    transcript,
                    c.background,
                    c.worktree,
                ),
            }

            let launched = || -> Vec<ToolResultContent> {
                let output_file = task
                    .output_file
                    .as_ref()
                    .map_or_else(String::new, |p| p.display().to_string());
                text_content([t.show(&AsyncLaunched {
                    agent_id: agent_id.clone(),
                    output_file,
                    can_read_output: c.caller_can_read && task.output_file.is_some(),
                })])
            };
            let Some(mut rx) = rx else {
                return Ok((launched(), Usage::default()));
            };
            // A foreground child dies with its caller: if this future is
            // dropped or cancelled, the guard cancels the child.
            let guard = task.cancel.clone().drop_guard();
            let auto_ms = snap.settings().agents.auto_background_ms;
            let auto = async move {
                if auto_ms == 0 {
                    std::future::pending::<()>().await;
                } else {
                    tokio::time::sleep(Duration::from_millis(auto_ms)).await;
                }
            };
            let result = tokio::select! {
                r = &mut rx => r,
                () = auto => {
                    if engine.tasks.move_to_background(&task) {
                        guard.disarm();
                        tracing::info!("agent {agent_id} moved to the background after {auto_ms} ms");
                        return Ok((launched(), Usage::default()));
                    }
                    // It finished at the same moment: its result is in the channel.
                    rx.await
                }
                () = self.cancel.cancelled() => return Err(t.show(&SubagentCancelled {})),
            };
            guard.disarm();
            let result = result.map_err(|_| t.show(&SubagentCancelled {}))?;
            foreground_result(
                &snap,
                &c.agent_type,
                &agent_id,
                &c.input.description,
                result,
            )
        })
    }
}

/// What `run_child` needs to start a child.
struct ChildStart {
    spec: SessionSpec,
    history: History,
    /// The decision the child was made from (what a task backend runs).
    plan: SpawnPlan,
    agent_type: String,
    input: AgentInput,
    tool_use_id: String,
    background: bool,
    caller_can_read: bool,
    /// The child's worktree, when it runs isolated; cleaned up when it ends.
    worktree: Option<WorktreeGuard>,
    /// The commit its worktree starts from, when a task backend's worker
    /// makes it.
    worktree_base: Option<String>,
    /// The snapshot of the turn that made the call.
    snap: Arc<Snapshot>,
}

/// The tool result for a foreground child that ended.
fn foreground_result(
    snap: &Snapshot,
    agent_type: &str,
    agent_id: &str,
    description: &str,
    r: TaskResult,
) -> Result<(Vec<ToolResultContent>, Usage), String> {
    let t = &snap.templates;
    let (worktree_path, worktree_branch) = KeptWorktree::template_fields(r.worktree.as_ref());
    match r.status {
        TaskStatus::Completed => {
            let mut texts = r
                .texts
                .clone()
                .unwrap_or_else(|| vec![t.show(&ResultEmpty {})]);
            // Explore and Plan omit the trailer unless a worktree was kept.
            if !ONE_SHOT_AGENTS.contains(&agent_type) || r.worktree.is_some() {
                texts.push(t.show(&ResultTrailer {
                    agent_id: agent_id.to_string(),
                    worktree_path,
                    worktree_branch,
                    total_tokens: r.total_tokens,
                    tool_uses: r.tool_uses,
                    duration_ms: r.duration_ms,
                }));
            }
            Ok((text_content(texts), r.usage))
        }
        TaskStatus::Killed => Err(t.show(&SubagentCancelled {})),
        TaskStatus::Failed | TaskStatus::Running => Err(t.show(&SubagentFailed {
            description: description.to_string(),
            problem: r.problem.unwrap_or(RunProblem::Cancelled),
            worktree_path,
            worktree_branch,
        })),
    }
}

/// WorktreeCreate for a child a fleet worker is about to run in a new
/// worktree (`spec`: the child, working in the worker's folder): the hooks
/// of the engine's snapshot — the worker's own settings, read from its
/// folder as its trust allows — as a local spawn fires its session's.
/// `None` when no hook listens (the worker makes a git worktree); else
/// the folder the hooks made, or why there is none.
pub(crate) async fn worker_worktree_create_hooks(
    engine: &Arc<Engine>,
    spec: &SessionSpec,
    name: &str,
) -> Option<Result<std::path::PathBuf, super::texts::WorktreeHookFailure>> {
    let snap = engine.snapshot.load_full();
    let session = Session::new(
        Arc::clone(engine),
        spec.clone(),
        History::new(),
        Arc::new(Transcript::disabled(&spec.agent_id, None)),
        tokio_util::sync::CancellationToken::new(),
    );
    session.worktree_create_hooks(&snap, name).await
}

/// Runs a child session as a tokio task and records its end: status,
/// transcript line, event, and exactly one delivery of its result.
pub(crate) fn start_task(
    engine: Arc<Engine>,
    task: Arc<Task>,
    spec: SessionSpec,
    history: History,
    transcript: Arc<Transcript>,
    background: bool,
    worktree: Option<WorktreeGuard>,
) {
    tokio::spawn(async move {
        // The child's files (its transcript, with the lines its parent
        // recorded, then its meta file) are created beside it, off the
        // async workers, a few at a time: files created in one folder
        // wait on the folder's lock, so a thread per child (hundreds when
        // a turn starts many) only adds threads, memory and contention.
        // The child does not wait for them (its lines are kept until the
        // file exists); its end does, so that the output file is complete
        // when the notification goes out.
        let files = {
            let (task, transcript) = (Arc::clone(&task), Arc::clone(&transcript));
            tokio::spawn(async move {
                let _slot = FILE_SLOTS.acquire().await;
                tokio::task::spawn_blocking(move || {
                    transcript.open_deferred();
                    task.write_first_meta();
                })
                .await
            })
        };
        // Background tasks queue for a slot (agents.max_concurrent).
        let _permit = if background {
            Arc::clone(&engine.tasks.limit).acquire_owned().await.ok()
        } else {
            None
        };
        let agent_id = spec.agent_id.clone();
        let mut child = Session::new(
            Arc::clone(&engine),
            spec,
            history,
            Arc::clone(&transcript),
            task.cancel.clone(),
        );
        // Preloaded skills (`skills:`) are active for the whole child.
        if let Some(def) = child.spec().def.clone()
            && !child.spec().started_by_fork
            && !def.skills.is_empty()
        {
            let snap = engine.snapshot.load();
            child.activate_skills(
                def.skills
                    .iter()
                    .filter_map(|n| snap.skills.get(n))
                    .map(super::todos::ActiveSkill::of)
                    .collect(),
            );
        }
        // An agent's inline MCP servers live exactly as long as its session.
        let scoped = match child
            .spec()
            .def
            .as_ref()
            .filter(|_| !child.spec().started_by_fork)
        {
            Some(def) if !def.mcp_servers.is_empty() => Some(
                engine
                    .mcp
                    .start_scoped(
                        &agent_id,
                        &def.name,
                        &def.mcp_servers,
                        &child.spec().cwd,
                        Arc::new(engine.snapshot.load().settings().child_env()),
                    )
                    .await,
            ),
            _ => None,
        };
        child.set_task(Arc::clone(&task));
        task.touch();
        let watchdog = tokio::spawn(watch_limits(Arc::clone(&engine), Arc::clone(&task)));
        let outcome = child.run().await;
        watchdog.abort();
        if let Some(s) = scoped {
            s.stop().await;
        }
        // WorktreeRemove hooks run in a worktree about to be removed (one
        // without changes), while it still exists.
        // A folder a WorktreeCreate hook made is the hooks' to remove: they
        // always run for it.
        if let Some(wt) = worktree.as_ref().and_then(WorktreeGuard::worktree).cloned() {
            let path = wt.path.clone();
            let by_hook = worktree.as_ref().is_some_and(WorktreeGuard::by_hook);
            let unchanged = by_hook
                || tokio::task::spawn_blocking(move || !worktree::has_changes(&wt))
                    .await
                    .unwrap_or(false);
            if unchanged {
                child.worktree_remove_hooks(&path).await;
            }
        }
        // The meta file is rewritten below with the outcome, worktree included.
        let kept = worktree::finish_child(worktree, None, &agent_id).await;
        let elapsed = u64::try_from(task.started_at.elapsed().as_millis()).unwrap_or(u64::MAX);
        let result = match outcome {
            Ok(o) => TaskResult {
                status: TaskStatus::Completed,
                total_tokens: total_tokens(&o.last_usage, &o.usage),
                texts: o.final_text,
                error: None,
                problem: None,
                usage: o.usage,
                tool_uses: o.tool_uses,
                duration_ms: elapsed,
                worktree: kept,
            },
            Err(e) => {
                let stats = child.stats();
                // A limit cancelled it: it failed, and says which limit.
                let limit = task.limit_reached();
                let problem = RunProblem::ended(&e, limit.clone());
                TaskResult {
                    status: if matches!(e, RunError::Cancelled) && limit.is_none() {
                        TaskStatus::Killed
                    } else {
                        TaskStatus::Failed
                    },
                    texts: last_text(child.history()),
                    error: Some(limit.unwrap_or_else(|| e.to_string())),
                    problem: Some(problem),
                    total_tokens: total_tokens(&stats.last_usage, &stats.usage),
                    usage: stats.usage,
                    tool_uses: stats.tool_uses,
                    duration_ms: elapsed,
                    worktree: kept,
                }
            }
        };
        transcript.record(
            "result",
            json!({"status": result.status, "error": result.error, "total_tokens": result.total_tokens,
                   "tool_uses": result.tool_uses, "duration_ms": result.duration_ms}),
        );
        engine.emit(EngineEvent::SubagentEnd {
            agent_id,
            status: result.status.as_str().to_string(),
            tool_uses: result.tool_uses,
            duration_ms: result.duration_ms,
            total_tokens: result.total_tokens,
        });
        let snap = engine.snapshot.load_full();
        if !matches!(files.await, Ok(Ok(()))) {
            tracing::warn!("{}: the transcript or meta file was not written", task.id);
        }
        engine
            .tasks
            .finish(&task, result, child.history().clone(), |r| {
                notification_text(&snap, &task, r)
            });
    });
}

/// The `<task-notification>` a parent receives when `task` ends with `r`.
pub(crate) fn notification_text(snap: &Snapshot, task: &Task, r: &TaskResult) -> String {
    let (worktree_path, worktree_branch) = KeptWorktree::template_fields(r.worktree.as_ref());
    snap.templates.show(&TaskNotification {
        task_id: task.id.clone(),
        tool_use_id: task.tool_use_id.clone(),
        output_file: task
            .output_file
            .as_ref()
            .map_or_else(String::new, |p| p.display().to_string()),
        status: r.status,
        description: task.description.clone(),
        problem: r.problem.clone(),
        result: r.texts.as_ref().map(|t| t.join("\n")),
        total_tokens: r.total_tokens,
        tool_uses: r.tool_uses,
        duration_ms: r.duration_ms,
        worktree_path,
        worktree_branch,
    })
}

/// A background child its backend (`backend`, by name) could not queue:
/// it ends `failed` (the model told the typed problem through the
/// `error_task_backend` template, people the backend's own detail), and
/// its parent gets the one notification.
pub(super) fn fail_unqueued(
    engine: &Engine,
    task: &Task,
    history: History,
    backend: &str,
    failed: super::QueueFailed,
) {
    tracing::warn!("{}: {}", task.id, failed.detail);
    let snap = engine.snapshot.load_full();
    let text = snap.templates.show(&TaskBackendFailed {
        stage: "queue".into(),
        backend: backend.into(),
        worker: String::new(),
        detail: String::new(),
        problem: Some(failed.problem),
    });
    let result = TaskResult {
        status: TaskStatus::Failed,
        texts: None,
        error: Some(failed.detail),
        problem: Some(super::RunProblem::Backend { text }),
        usage: Usage::default(),
        total_tokens: 0,
        tool_uses: 0,
        duration_ms: 0,
        worktree: None,
    };
    engine
        .tasks
        .finish(task, result, history, |r| notification_text(&snap, task, r));
}

/// How many children may be creating their files at once (see
/// [`start_task`]).
static FILE_SLOTS: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(2);

/// Ends `task` when it passes a limit: `agents.task_timeout_ms` of running
/// time, or (in the background, with no children of its own pending)
/// `agents.stall_timeout_ms` without progress. Progress is a streamed
/// delta, a message, a tool call running (its own timeout bounds it), or
/// the progress of a foreground sub-agent it waits for
/// ([`super::tasks::TaskRegistry::quiet_for`]). Runs until the task ends.
async fn watch_limits(engine: Arc<Engine>, task: Arc<super::tasks::Task>) {
    loop {
        let snap = engine.snapshot.load_full();
        let agents = &snap.settings().agents;
        let (stall, wall) = (agents.stall_timeout_ms, agents.task_timeout_ms);
        let shortest = [stall, wall].into_iter().filter(|&v| v > 0).min();
        let Some(shortest) = shortest else {
            // No limit now; settings may change with a reload.
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        };
        tokio::time::sleep(Duration::from_millis((shortest / 4).clamp(5, 1000))).await;
        if task.status() != TaskStatus::Running {
            return;
        }
        let ms = |v: u64| Duration::from_millis(v);
        let reason = if wall > 0 && task.started_at.elapsed() >= ms(wall) {
            Some(snap.templates.show(&LimitTaskTimeout { ms: wall }))
        } else if stall > 0
            && task.is_background()
            && !engine.tasks.has_pending(&task.id)
            && engine.tasks.quiet_for(&task) >= ms(stall)
        {
            Some(snap.templates.show(&LimitStall { ms: stall }))
        } else {
            None
        };
        if let Some(reason) = reason {
            tracing::info!("agent {}: {reason}", task.id);
            task.end_by_limit(reason);
            return;
        }
    }
}
