//! `cadre worker`: pulls task plans from its pool's consumer, holds each
//! task's lease while its child runs (bucket heartbeat by compare-and-set,
//! then `AckProgress` on the message), finishes the task by compare-and-set
//! in the bucket, publishes its one notice, and only then acks the plan.
//!
//! A worker that loses its lease (the bucket entry moved on without it: it
//! stalled past the lease and another worker took the task) stops its
//! child and neither finishes nor acks. A worker that is stopped releases
//! its tasks (a negative ack: the broker hands them out again at once).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use async_nats::jetstream::{self, AckKind};
use futures_util::StreamExt;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::catalog::Isolation;
use crate::message::Role;
use crate::runtime::restore::read_task;
use crate::runtime::resume::is_session_id;
use crate::runtime::spawn::{notification_text, start_task};
use crate::runtime::tasks::{Task, TaskResult, TaskStatus};
use crate::runtime::texts::{TaskBackendFailed, WorktreeNotice};
use crate::runtime::transcript::{FlushRequests, Transcript, WriteFence};
use crate::runtime::worktree::{self, WorktreeGuard};
use crate::runtime::{Engine, EngineEvent, EventSink, RunProblem, last_text};

use super::broker::{Broker, FleetError, check_token};
use super::lease::{Claim, Renewal, claim, finish, publish_notice, renew};
use super::state::TaskRecord;
use super::wire::{Control, ControlReply, Notice, Progress, TaskPlan};

/// Builds the engine a task runs on: this host's snapshot, provider, keys
/// and tools, with the plan's session (its transcript folder) and `events`
/// as its sink. `Err` is a sentence.
pub type EngineFactory =
    Arc<dyn Fn(&TaskPlan, EventSink) -> Result<Arc<Engine>, String> + Send + Sync>;

/// How a worker runs.
pub struct WorkerOptions {
    pub pool: String,
    /// This worker's name in task states (`host-pid-xxxx`).
    pub id: String,
    /// Tasks this worker runs at once.
    pub concurrency: usize,
    /// Tasks running at once across the pool (`agents.max_concurrent`):
    /// the consumer's `max_ack_pending`.
    pub max_running: usize,
    /// The project folder: child sessions work here.
    pub cwd: PathBuf,
}

struct Ctx {
    broker: Arc<Broker>,
    opts: WorkerOptions,
    make_engine: EngineFactory,
    /// Tasks released on stop whose hand-back the server did not confirm.
    unreleased: std::sync::atomic::AtomicUsize,
}

/// A name for this worker: host, process id and a random suffix.
pub fn worker_id() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "host".to_string());
    format!(
        "{host}-{}-{:04x}",
        std::process::id(),
        rand::random::<u16>()
    )
}

/// How long one pull request waits for a task.
/// Heartbeats per lease: a worker is taken for dead after missing all but
/// one of them (with the default 8 s lease, a heartbeat every 2 s, and a
/// dead worker's tasks move 6–8 s after it died).
const HEARTBEATS_PER_LEASE: u32 = 4;

const FETCH_EXPIRY: Duration = Duration::from_secs(2);

/// Runs until `stop` is cancelled, then releases its running tasks.
pub async fn run(
    broker: Arc<Broker>,
    opts: WorkerOptions,
    make_engine: EngineFactory,
    stop: CancellationToken,
) -> Result<Stopped, FleetError> {
    let consumer = broker.pool_consumer(&opts.pool, opts.max_running).await?;
    let slots = Arc::new(Semaphore::new(opts.concurrency.max(1)));
    let ctx = Arc::new(Ctx {
        broker,
        opts,
        make_engine,
        unreleased: std::sync::atomic::AtomicUsize::new(0),
    });
    tracing::info!(
        "worker {} pulling pool {} ({} at once here, {} across the pool)",
        ctx.opts.id,
        ctx.opts.pool,
        ctx.opts.concurrency,
        ctx.opts.max_running
    );
    let mut running = tokio::task::JoinSet::new();
    loop {
        let permit = tokio::select! {
            p = Arc::clone(&slots).acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
            () = stop.cancelled() => break,
        };
        // The broker's lease on what this pull delivers starts after this.
        let fetched_at = Instant::now();
        // While the server is away the client holds the pull request until
        // it reconnects: stopping must not wait for that.
        let fetched = tokio::select! {
            biased;
            () = stop.cancelled() => break,
            f = consumer.fetch().max_messages(1).expires(FETCH_EXPIRY).messages() => f,
        };
        let mut batch = match fetched {
            Ok(b) => b,
            Err(e) => {
                tracing::warn!("fetching a task: {e}");
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_millis(500)) => continue,
                    () = stop.cancelled() => break,
                }
            }
        };
        let next = tokio::select! {
            // Stopping wins over a task that arrives at the same moment.
            biased;
            () = stop.cancelled() => {
                // The pull request stays open on the server until it
                // expires; whatever it still delivers (a task another
                // worker, or this one, just released) goes back at once.
                // (Nothing comes while the server is away.)
                let until = tokio::time::Instant::now() + FETCH_EXPIRY * 2;
                while connected(&ctx.broker) {
                    let Ok(Some(m)) = tokio::time::timeout_at(until, batch.next()).await else {
                        break;
                    };
                    if let Ok(m) = m {
                        let _ = m.double_ack_with(AckKind::Nak(None)).await;
                    }
                }
                break;
            }
            m = batch.next() => m,
        };
        // One worker picks up nothing while it waits here: say when a pull
        // took far longer than its expiry (a lost answer from the server
        // costs the client library's expiry + 5 s).
        if fetched_at.elapsed() > FETCH_EXPIRY + Duration::from_secs(1) {
            tracing::warn!("a pull for a task took {:?}", fetched_at.elapsed());
        }
        match next {
            Some(Ok(msg)) if stop.is_cancelled() => {
                let _ = msg.double_ack_with(AckKind::Nak(None)).await;
                break;
            }
            Some(Ok(msg)) => {
                let ctx = Arc::clone(&ctx);
                let stop = stop.clone();
                running.spawn(async move {
                    handle(&ctx, msg, fetched_at, &stop).await;
                    drop(permit);
                });
            }
            Some(Err(e)) => {
                tracing::warn!("fetching a task: {e}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            None => {}
        }
        // Reap finished handlers.
        while running.try_join_next().is_some() {}
    }
    // Stopping: every handler releases its task; what is still buffered
    // goes out before the process ends. With the server away neither can
    // finish, so both get `STOP_GRACE` and no more: a task not handed back
    // moves to another worker when its lease runs out.
    let _ = tokio::time::timeout(STOP_GRACE, async {
        while running.join_next().await.is_some() {}
    })
    .await;
    let unreleased = running.len() + ctx.unreleased.load(Ordering::SeqCst);
    running.abort_all();
    if connected(&ctx.broker) {
        let _ = tokio::time::timeout(Duration::from_secs(1), ctx.broker.client.flush()).await;
    }
    Ok(match unreleased {
        0 => Stopped::Clean,
        tasks => Stopped::Unconfirmed { tasks },
    })
}

fn connected(broker: &Broker) -> bool {
    broker.client.connection_state() == async_nats::connection::State::Connected
}

/// How long a stopping worker tries to hand its tasks back to the broker.
pub const STOP_GRACE: Duration = Duration::from_secs(5);

/// How a worker's run ended after it was asked to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopped {
    /// Every running task was handed back (or none ran).
    Clean,
    /// The broker did not confirm within `STOP_GRACE` (it is away): this
    /// many tasks, at most, stay with this worker's lease until it runs
    /// out and another worker takes them.
    Unconfirmed { tasks: usize },
}

async fn handle(ctx: &Ctx, msg: jetstream::Message, fetched_at: Instant, stop: &CancellationToken) {
    let plan: TaskPlan = match serde_json::from_slice(&msg.payload) {
        Ok(p) => p,
        Err(e) => {
            tracing::warn!("a task message that is not a plan ({e}); dropped");
            let _ = msg.ack_with(AckKind::Term).await;
            return;
        }
    };
    // The ids name files in the transcript folder: nothing else is allowed.
    if check_token("agent id", &plan.agent_id).is_err() || !is_session_id(&plan.session_id) {
        tracing::warn!(
            "a plan with agent id {:?} / session {:?}; dropped",
            plan.agent_id,
            plan.session_id
        );
        let _ = msg.ack_with(AckKind::Term).await;
        return;
    }
    let id = plan.agent_id.clone();
    let claimed_in = Instant::now();
    let (record, revision) = match claim(&ctx.broker, &ctx.opts.id, &plan).await {
        Ok(Claim::Held(r, rev)) => (r, rev),
        Ok(Claim::Ended(r)) => {
            // Its finisher died between the end state and the notice, or
            // before the ack: the notice (once) and the ack are done here.
            if let Some(n) = &r.notice
                && let Err(e) = publish_notice(&ctx.broker, n).await
            {
                tracing::warn!("task {id}: {e}");
                return;
            }
            let _ = msg.double_ack().await;
            return;
        }
        Ok(Claim::Stale) => {
            let _ = msg.double_ack().await;
            return;
        }
        Ok(Claim::Busy) => {
            let _ = msg
                .ack_with(AckKind::Nak(Some(ctx.broker.lease() / 2)))
                .await;
            return;
        }
        Err(e) => {
            tracing::warn!("task {id}: {e}");
            let _ = msg
                .ack_with(AckKind::Nak(Some(Duration::from_millis(500))))
                .await;
            return;
        }
    };
    let claim_ms = claimed_in.elapsed().as_secs_f64() * 1000.0;
    tracing::info!("task {id}: attempt {} on {}", record.attempt, ctx.opts.id);
    // Until the broker has this progress ack, the lease runs from the
    // delivery, which came after the pull request.
    let fence = Arc::new(WriteFence::new(fetched_at + ctx.broker.lease()));
    extend_lease(&ctx.broker, &msg, &fence).await;
    let outcome = run_task(ctx, &plan, &msg, record, revision, &fence, stop).await;
    match outcome {
        Ran::Finished(record, revision) => {
            let finishing = Instant::now();
            finish(&ctx.broker, &ctx.opts.id, &plan, &msg, *record, revision).await;
            if !plan.shared_folder && plan.spawn.isolation == Some(Isolation::Worktree) {
                let object = super::git::wip_object(&plan.agent_id, plan.run);
                super::git::forget_wip(&ctx.broker, &object).await;
            }
            // For the benchmark (bench/fleet.py): time spent in the broker.
            tracing::debug!(
                "task {id}: broker_ms claim={claim_ms:.3} finish={:.3}",
                finishing.elapsed().as_secs_f64() * 1000.0
            );
        }
        Ran::Lost => {
            tracing::warn!("task {id}: lease lost to another worker; this worker's run is dropped")
        }
        Ran::Released => {
            // Confirmed by the server: the process exits right after.
            let handed = connected(&ctx.broker)
                && match msg.double_ack_with(AckKind::Nak(None)).await {
                    Ok(()) => true,
                    Err(e) => {
                        tracing::warn!("task {id}: the negative ack failed: {e}");
                        false
                    }
                };
            if handed {
                tracing::info!("task {id}: released (worker stopping)");
            } else {
                ctx.unreleased.fetch_add(1, Ordering::SeqCst);
                tracing::warn!("task {id}: not handed back; it moves when its lease runs out");
            }
        }
    }
}

enum Ran {
    /// The child ended; the record (still `running`, holding the result)
    /// and its revision.
    Finished(Box<TaskRecord>, u64),
    /// Another worker holds the task now.
    Lost,
    /// This worker is stopping; the task goes back to the queue.
    Released,
}

/// Tells the broker this worker still works on the task (`AckProgress`)
/// and, once the server confirms it has read it (a flush's round trip),
/// moves the task's write fence to a lease from just before it was sent:
/// the broker's lease runs at least that long.
async fn extend_lease(broker: &Broker, msg: &jetstream::Message, fence: &WriteFence) {
    let sent_at = Instant::now();
    // A flush waits for a reconnect when the server is away; the lease
    // cannot be extended then anyway.
    let confirmed = async {
        msg.ack_with(AckKind::Progress).await.is_ok() && broker.client.flush().await.is_ok()
    };
    if let Ok(true) = tokio::time::timeout(broker.lease() / HEARTBEATS_PER_LEASE, confirmed).await {
        fence.extend(sent_at + broker.lease());
    }
}

/// Runs `work`, telling the broker every quarter of a lease that this
/// worker still holds the task (before its child runs: fetching what it
/// needs).
async fn keeping_lease<T>(
    broker: &Broker,
    msg: &jetstream::Message,
    fence: &WriteFence,
    work: impl std::future::Future<Output = T>,
) -> T {
    let beat = broker.lease() / HEARTBEATS_PER_LEASE;
    tokio::pin!(work);
    loop {
        tokio::select! {
            r = &mut work => return r,
            () = tokio::time::sleep(beat) => extend_lease(broker, msg, fence).await,
        }
    }
}

async fn run_task(
    ctx: &Ctx,
    plan: &TaskPlan,
    msg: &jetstream::Message,
    mut record: TaskRecord,
    mut revision: u64,
    fence: &Arc<WriteFence>,
    stop: &CancellationToken,
) -> Ran {
    let id = plan.agent_id.clone();
    let events = progress_sink(&ctx.broker, plan);
    let started = Instant::now();
    let wake = Arc::new(tokio::sync::Notify::new());
    let (flush, flushes) = tokio::sync::mpsc::unbounded_channel();
    let mut tip = None;
    let mut wip = None;
    let begun = match (ctx.make_engine)(plan, events) {
        Err(e) => Started::Done(Box::new(failed(e))),
        Ok(engine) => {
            continue_trace(plan, msg);
            if !plan.shared_folder {
                let fetching = Instant::now();
                // A fetch from a remote may take a while: the lease is
                // kept meanwhile.
                match keeping_lease(&ctx.broker, msg, fence, materialise(ctx, plan, &engine)).await
                {
                    Ok((t, w)) => {
                        tracing::debug!(
                            "task {id}: broker_ms fetch={:.3}",
                            fetching.elapsed().as_secs_f64() * 1000.0
                        );
                        tip = Some(t);
                        wip = w;
                    }
                    Err(e) => {
                        // The broker is away or lost the copy: tried again
                        // when the task comes back (after its lease).
                        tracing::warn!(
                            "task {id}: its transcript could not be read from the broker: {e}"
                        );
                        fence.close();
                        return Ran::Lost;
                    }
                }
            }
            start(
                ctx,
                plan,
                engine,
                fence,
                tip.map(|_| (Arc::clone(&wake), flush)),
                wip.as_deref(),
            )
            .await
        }
    };
    let (engine, task, wip) = match begun {
        Started::Running(engine, task, wip) => (engine, task, wip),
        Started::Done(result) => {
            return match ended(ctx, plan, msg, fence, record, &result).await {
                Some(record) => Ran::Finished(Box::new(record), revision),
                None => Ran::Lost,
            };
        }
    };
    // Its lines as they are written (and any the rebuild added: a
    // cut-off call's "cancelled" results).
    let streamer = match (tip, &task.output_file) {
        (Some(tip), Some(path)) => {
            let pusher = super::lines::Pusher::new(
                &ctx.broker,
                &plan.session_id,
                &id,
                path.clone(),
                tip,
                Some(Arc::clone(fence)),
            );
            wake.notify_one();
            Some(super::lines::Streamer::start(
                Arc::clone(&ctx.broker),
                pusher,
                Arc::clone(&wake),
                flushes,
                wip,
            ))
        }
        _ => None,
    };
    let mut control = ctx
        .broker
        .client
        .subscribe(ctx.broker.names.control_subject(&id))
        .await
        .ok();
    // A heartbeat every quarter of the lease, whatever else wakes the
    // loop: the lease survives three missed ones.
    let beat = ctx.broker.lease() / HEARTBEATS_PER_LEASE;
    let mut heartbeat = tokio::time::interval_at(tokio::time::Instant::now() + beat, beat);
    heartbeat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_renewed = Instant::now();
    loop {
        tokio::select! {
            status = task.wait(Duration::from_secs(3600)) => {
                if status != TaskStatus::Running {
                    break;
                }
            }
            _ = heartbeat.tick() => {
                match renew(&ctx.broker, &ctx.opts.id, &id, &record, revision).await {
                    Renewal::Renewed(r, rev) => {
                        record = *r;
                        revision = rev;
                        last_renewed = Instant::now();
                        extend_lease(&ctx.broker, msg, fence).await;
                    }
                    Renewal::Lost => {
                        stop_child(&task).await;
                        return Ran::Lost;
                    }
                    Renewal::Unreachable(e) => {
                        // The broker is away (restarting): keep running; the
                        // record's revision decides later whether this
                        // worker still holds the task.
                        tracing::warn!("task {id}: heartbeat failed ({e}); {:?} since the last", last_renewed.elapsed());
                    }
                }
            }
            // The lease ran out without a confirmed renewal (the broker
            // unreachable for a whole lease, or this process stalled):
            // another worker may hold the task now.
            () = tokio::time::sleep_until(fence.until().into()) => {
                if !fence.open() {
                    stop_child(&task).await;
                    return Ran::Lost;
                }
            }
            req = next_control(&mut control) => {
                if let Some(req) = req {
                    answer_control(&ctx.broker, &engine, &task, req).await;
                }
            }
            () = stop.cancelled() => {
                // Handed back as a dead worker's task would be: nothing
                // more is written (no `killed` end in its files), and its
                // worktree stays for the worker that continues it.
                fence.close();
                stop_child(&task).await;
                return Ran::Released;
            }
        }
    }
    drop(control);
    // Every line reaches the broker before the end is recorded.
    if let Some(s) = streamer {
        let flushing = Instant::now();
        if let Err(e) = s.finish().await {
            tracing::warn!("task {id}: its last transcript lines did not reach the broker: {e}");
            return Ran::Lost;
        }
        tracing::debug!(
            "task {id}: broker_ms flush={:.3}",
            flushing.elapsed().as_secs_f64() * 1000.0
        );
    }
    // Its last lines were refused: what it did past its lease is not its
    // result (another worker's run is).
    if !fence.open() {
        return Ran::Lost;
    }
    let result = task.state().result.clone().unwrap_or_else(|| {
        tracing::warn!(
            "task {id}: ended without a result after {:?}",
            started.elapsed()
        );
        let snap = engine.snapshot.load_full();
        failed(snap.templates.show(&TaskBackendFailed {
            stage: "no_result".into(),
            backend: "nats".into(),
            worker: ctx.opts.id.clone(),
            detail: String::new(),
            problem: None,
        }))
    });
    // The mailbox copy of the notification is not needed here.
    let _ = engine.tasks.take_notifications(&plan.parent_agent_id);
    match ended(ctx, plan, msg, fence, record, &result).await {
        Some(record) => Ran::Finished(Box::new(record), revision),
        None => Ran::Lost,
    }
}

/// The record carrying the task's end; on a shared-nothing fleet a kept
/// worktree's branch goes to the object store first (its bundle is named
/// in the notice), the lease kept meanwhile. `None` when the lease was
/// lost on the way (the broker away for longer than it): the task is
/// another worker's.
async fn ended(
    ctx: &Ctx,
    plan: &TaskPlan,
    msg: &jetstream::Message,
    fence: &Arc<WriteFence>,
    record: TaskRecord,
    result: &TaskResult,
) -> Option<TaskRecord> {
    let branch = match (&result.worktree, plan.shared_folder) {
        // A folder a WorktreeCreate hook made stays where the hook put it:
        // no branch of it is sent.
        (Some(kept), false) if worktree::is_cadre_worktree(&ctx.opts.cwd, &kept.path) => {
            let attempt = record.attempt;
            keeping_lease(
                &ctx.broker,
                msg,
                fence,
                send_branch(ctx, plan, attempt, kept, fence),
            )
            .await
        }
        _ => None,
    };
    if !fence.open() {
        return None;
    }
    Some(record_result(record, &ctx.opts.id, plan, result, branch))
}

/// A shared-nothing fleet: this worker's copy of the child's transcript
/// becomes the broker's (a takeover continues from what reached it), and
/// a worktree child's starting commit is fetched when this clone lacks
/// it, with the work in progress an earlier worker of the task published.
/// Returns where the broker's copy stands, and that work in progress.
async fn materialise(
    ctx: &Ctx,
    plan: &TaskPlan,
    engine: &Engine,
) -> Result<(super::lines::Tip, Option<String>), FleetError> {
    let dir = engine
        .session_dir
        .clone()
        .ok_or(FleetError::NoTranscripts)?;
    let (lines, tip) = super::lines::fetch(&ctx.broker, &plan.session_id, &plan.agent_id).await?;
    if lines.is_empty() {
        return Err(FleetError::Broker("the broker has no line of it".into()));
    }
    let path = crate::runtime::resume::sub_agent_transcript(&dir, &plan.agent_id);
    tokio::task::spawn_blocking(move || super::lines::write_copy(&path, &lines))
        .await
        .map_err(FleetError::broker)?
        .map_err(FleetError::broker)?;
    if plan.spawn.isolation == Some(Isolation::Worktree)
        && let Some(base) = plan.meta.worktree_base.as_deref()
    {
        // A remote named in the plan is only a hint: one this clone has.
        let remote = plan.meta.worktree_remote.as_ref();
        super::git::ensure_base(&ctx.broker, &ctx.opts.cwd, base, remote).await?;
        let object = super::git::wip_object(&plan.agent_id, plan.run);
        let wip = super::git::fetch_wip(&ctx.broker, &ctx.opts.cwd, &object).await?;
        return Ok((tip, wip));
    }
    Ok((tip, None))
}

/// A shared-nothing fleet: the kept worktree's branch goes to the object
/// store (its uncommitted changes committed first) and the worktree is
/// removed here; the name of the bundle, for the notice.
async fn send_branch(
    ctx: &Ctx,
    plan: &TaskPlan,
    attempt: u32,
    kept: &crate::runtime::worktree::KeptWorktree,
    fence: &WriteFence,
) -> Option<String> {
    let base = plan.meta.worktree_base.as_deref()?;
    let object = super::git::branch_object(&plan.agent_id, plan.run, attempt);
    match super::git::send_branch(&ctx.broker, kept, base, &object, || fence.open()).await {
        Ok(()) => Some(object),
        Err(e) => {
            tracing::warn!(
                "task {}: its branch {} stays in this worker's clone: {e}",
                plan.agent_id,
                kept.branch
            );
            None
        }
    }
}

/// The most text a notice carries (it travels in one message and in the
/// task's bucket entry, both bounded by the server's payload limit, 1 MiB
/// by default); the whole answer stays in the child's transcript.
pub const NOTICE_TEXT_LIMIT: usize = 256 * 1024;

/// The record carrying the end (still `running`: `finish` moves it).
fn record_result(
    record: TaskRecord,
    worker: &str,
    plan: &TaskPlan,
    result: &TaskResult,
    branch_object: Option<String>,
) -> TaskRecord {
    let mut notice = Notice::of(
        &plan.agent_id,
        &plan.session_id,
        result,
        worker,
        record.attempt,
    );
    notice.run = plan.run;
    notice.branch_object = branch_object;
    notice.bound_texts(NOTICE_TEXT_LIMIT);
    TaskRecord {
        notice: Some(notice),
        ..record
    }
}

enum Started {
    /// Running, with its worktree's work in progress to publish (a
    /// worktree child on a shared-nothing fleet).
    Running(Arc<Engine>, Arc<Task>, Option<super::git::Wip>),
    /// Nothing to run: the transcript already ends with the child's answer,
    /// or the child could not be rebuilt (a failed result).
    Done(Box<TaskResult>),
}

/// A task that could not run here: `text` (an `error_task_backend`
/// rendering) is both the people's error and the model's problem.
fn failed(text: String) -> TaskResult {
    TaskResult {
        status: TaskStatus::Failed,
        texts: None,
        error: Some(text.clone()),
        problem: Some(RunProblem::Backend { text }),
        usage: crate::message::Usage::default(),
        total_tokens: 0,
        tool_uses: 0,
        duration_ms: 0,
        worktree: None,
    }
}

/// Rebuilds the child from its plan and its transcript in the shared
/// folder, and starts it (or finds it already answered).
async fn start(
    ctx: &Ctx,
    plan: &TaskPlan,
    engine: Arc<Engine>,
    fence: &Arc<WriteFence>,
    lines: Option<(Arc<tokio::sync::Notify>, FlushRequests)>,
    wip: Option<&str>,
) -> Started {
    let snap = engine.snapshot.load_full();
    let problem = |stage: &str, detail: String| {
        Started::Done(Box::new(failed(snap.templates.show(&TaskBackendFailed {
            stage: stage.into(),
            backend: "nats".into(),
            worker: ctx.opts.id.clone(),
            detail,
            problem: None,
        }))))
    };
    let Some(session_dir) = engine.session_dir.clone() else {
        return problem("transcripts_off", String::new());
    };
    // The session the plan describes, with this worker's definition of its
    // agent; the child works in this worker's project folder.
    let (mut spec, _) = match plan.spawn.session(&snap) {
        Ok(s) => s,
        Err(refused) => return problem("refused", refused.text(&snap.templates)),
    };
    spec.cwd = ctx.opts.cwd.clone();
    let meta_path = crate::runtime::resume::subagents_dir(&session_dir)
        .join(format!("agent-{}.meta.json", plan.agent_id));
    let Some(read) = read_task(&engine, &session_dir, meta_path, plan.meta.to_value(), true) else {
        let path = crate::runtime::resume::subagents_dir(&session_dir)
            .join(format!("agent-{}.jsonl", plan.agent_id));
        return problem("no_transcript", path.display().to_string());
    };
    // Its history is the transcript's (what earlier attempts added
    // included); its spec is the plan's.
    let rebuilt = read.into_task(spec);
    let history = rebuilt.history;
    let mut new_task = rebuilt.task;
    // A worker whose own settings disable bypassPermissions does not run a
    // plan in it.
    new_task.spec.mode = new_task
        .spec
        .mode
        .unless_bypass_disabled(snap.config.bypass_disabled_by.is_some());
    let (task, _) = engine.tasks.create(new_task);
    task.set_fence(Arc::clone(fence));
    fence.on_close(task.cancel.clone());
    // A child whose last message is its answer ended on an earlier attempt
    // (its worker died before finishing the task): its answer stands.
    if let Some(last) = history.last()
        && last.role == Role::Assistant
        && last.tool_uses().next().is_none()
    {
        // Its worktree (what it did there, from the shared folder or the
        // published work in progress) is kept or removed as at any end.
        let worktree = (plan.spawn.isolation == Some(Isolation::Worktree))
            .then(|| answered_worktree(plan, &ctx.opts.cwd, wip))
            .flatten();
        let result = TaskResult {
            status: TaskStatus::Completed,
            texts: last_text(&history),
            error: None,
            problem: None,
            worktree,
            ..failed(String::new())
        };
        engine.tasks.finish(&task, result.clone(), history, |r| {
            notification_text(&snap, &task, r)
        });
        return Started::Done(Box::new(result));
    }
    let mut transcript = match &task.output_file {
        Some(p) => Transcript::open(p.clone(), &task.id, Some(&task.parent_agent_id)),
        None => Transcript::disabled(&task.id, Some(&task.parent_agent_id)),
    }
    .fenced(Arc::clone(fence));
    if let Some((n, flush)) = lines {
        transcript = transcript.notifying(n).flushing(flush);
    }
    let transcript = Arc::new(transcript);
    let mut spec = task.spec.clone();
    let mut history = history;
    let mut progress = None;
    // A new worktree is the worker's WorktreeCreate hooks' to make when it
    // has any (its own settings, as its trust allows); one that exists
    // already (a task taken over in a shared folder) or that is rebuilt
    // from published work in progress is git's.
    let by_hooks = if plan.spawn.isolation == Some(Isolation::Worktree)
        && wip.is_none()
        && !worktree::exists_for(&ctx.opts.cwd, &plan.agent_id)
    {
        let name = worktree::slug(&plan.agent_id);
        crate::runtime::spawn::worker_worktree_create_hooks(&engine, &spec, &name).await
    } else {
        None
    };
    let worktree = if let Some(made) = by_hooks {
        match made {
            Ok(path) => {
                fork_notice(&snap, plan, &ctx.opts.cwd, &path, &transcript, &mut history);
                spec.cwd.clone_from(&path);
                Some(WorktreeGuard::made_by_hook(path).fenced(Arc::clone(fence)))
            }
            Err(why) => {
                let result = failed(worktree::hook_failed_text(&snap, why));
                engine.tasks.finish(&task, result.clone(), history, |r| {
                    notification_text(&snap, &task, r)
                });
                return Started::Done(Box::new(result));
            }
        }
    } else if plan.spawn.isolation == Some(Isolation::Worktree) {
        match isolate(&snap, plan, &ctx.opts.cwd, &transcript, &mut history, wip) {
            Ok((guard, cwd)) => {
                spec.cwd = cwd;
                progress = work_in_progress(plan, &guard);
                Some(guard.fenced(Arc::clone(fence)))
            }
            Err(text) => {
                let result = failed(text);
                engine.tasks.finish(&task, result.clone(), history, |r| {
                    notification_text(&snap, &task, r)
                });
                return Started::Done(Box::new(result));
            }
        }
    } else {
        None
    };
    start_task(
        Arc::clone(&engine),
        Arc::clone(&task),
        spec,
        history,
        transcript,
        true,
        worktree,
    );
    Started::Running(engine, task, progress)
}

/// The worktree of a child that an earlier attempt saw answer (its worker
/// died before finishing the task): reopened, or made again from the base
/// with the work in progress `wip`, then kept or removed by the local rule.
fn answered_worktree(
    plan: &TaskPlan,
    cwd: &std::path::Path,
    wip: Option<&str>,
) -> Option<worktree::KeptWorktree> {
    let base = plan.meta.worktree_base.as_deref();
    let (wt, _, _) = worktree::open_or_create(cwd, &plan.agent_id, base)
        .inspect_err(|e| tracing::warn!("task {}: its worktree: {e}", plan.agent_id))
        .ok()?;
    if let Some(wip) = wip
        && let Err(e) = super::git::restore_wip(&wt.path, wip)
    {
        tracing::warn!("task {}: its work in progress: {e}", plan.agent_id);
    }
    worktree::finish(&wt)
}

/// The work in progress a worktree child on a shared-nothing fleet
/// publishes as it goes (none with a shared folder: a takeover finds the
/// worktree there).
fn work_in_progress(plan: &TaskPlan, guard: &WorktreeGuard) -> Option<super::git::Wip> {
    // A folder a WorktreeCreate hook made is the hooks' (no git of cadre's
    // runs on it).
    if plan.shared_folder || guard.by_hook() {
        return None;
    }
    let wt = guard.worktree()?;
    let object = super::git::wip_object(&plan.agent_id, plan.run);
    super::git::Wip::new(&wt.path, &wt.base, object)
        .inspect_err(|e| {
            tracing::warn!(
                "task {}: its worktree's state cannot be published ({e}): a worker taking it over starts from the base commit",
                plan.agent_id
            );
        })
        .ok()
}

/// The child's worktree (`isolation: worktree`), made here as a local
/// spawn makes it, in this worker's checkout of the shared repository and
/// from the commit the parent had checked out; a task taken over from a
/// worker that died continues in the worktree that one made (a shared
/// folder) or from the work in progress `wip` that one published (shared
/// nothing: the worktree is made from the base, then given the child's
/// commits and files as they were). A fork whose
/// worktree is new gets the worktree notice after its directive, as a
/// line joined to it in its transcript. `Err` is the `error_worktree`
/// text.
fn isolate(
    snap: &crate::snapshot::Snapshot,
    plan: &TaskPlan,
    cwd: &std::path::Path,
    transcript: &Transcript,
    history: &mut crate::message::History,
    wip: Option<&str>,
) -> Result<(WorktreeGuard, PathBuf), String> {
    let base = plan.meta.worktree_base.as_deref();
    let (wt, child_cwd, made) = worktree::open_or_create(cwd, &plan.agent_id, base)
        .map_err(|e| worktree::failed_text(snap, e))?;
    if let Some(wip) = wip {
        super::git::restore_wip(&wt.path, wip)
            .map_err(|e| worktree::failed_text(snap, worktree::WorktreeError::Git(e)))?;
    }
    if made {
        fork_notice(snap, plan, cwd, &child_cwd, transcript, history);
    }
    Ok((WorktreeGuard::new(wt), child_cwd))
}

/// A fork whose worktree is new gets the worktree notice after its
/// directive, as a line joined to it in its transcript.
fn fork_notice(
    snap: &crate::snapshot::Snapshot,
    plan: &TaskPlan,
    cwd: &std::path::Path,
    child_cwd: &std::path::Path,
    transcript: &Transcript,
    history: &mut crate::message::History,
) {
    if plan.spawn.fork && history.last().is_some_and(|m| m.role == Role::User) {
        let notice = snap.templates.show(&WorktreeNotice {
            worktree_path: child_cwd.display().to_string(),
            parent_cwd: cwd.display().to_string(),
        });
        let block = crate::message::ContentBlock::text(notice.clone());
        transcript.joined_message(&crate::message::Message::user(vec![block]));
        worktree::push_notice(history, notice);
    }
}

async fn stop_child(task: &Task) {
    task.cancel.cancel();
    task.wait(Duration::from_secs(10)).await;
}

async fn next_control(sub: &mut Option<async_nats::Subscriber>) -> Option<async_nats::Message> {
    match sub {
        Some(s) => s.next().await,
        None => std::future::pending().await,
    }
}

/// SendMessage and TaskStop from the parent, answered on the request's
/// reply subject.
async fn answer_control(
    broker: &Broker,
    engine: &Engine,
    task: &Arc<Task>,
    req: async_nats::Message,
) {
    let reply = match serde_json::from_slice::<Control>(&req.payload) {
        Ok(Control::Message { text }) => {
            if engine.tasks.send(task, text) {
                ControlReply::Accepted
            } else {
                ControlReply::Ending
            }
        }
        Ok(Control::Stop) => {
            task.cancel.cancel();
            ControlReply::Accepted
        }
        Err(e) => {
            tracing::warn!(
                "task {}: a control request that does not parse ({e})",
                task.id
            );
            return;
        }
    };
    if let (Some(to), Ok(body)) = (req.reply, serde_json::to_vec(&reply)) {
        let _ = broker.client.publish(to, body.into()).await;
    }
}

/// An event sink that sends the task's tool calls as progress lines on its
/// plain subject (at most once; nothing waits for them).
/// The parent's trace context from the message's headers (with telemetry
/// on here): the child's span continues the parent's trace.
fn continue_trace(plan: &TaskPlan, msg: &jetstream::Message) {
    let Some(headers) = &msg.headers else { return };
    let carried: Vec<(String, String)> = ["traceparent", "tracestate"]
        .into_iter()
        .filter_map(|name| {
            let value = headers.get(name)?.as_str();
            // A header is the peer's: bounded before it is parsed.
            (value.len() <= 512).then(|| (name.to_string(), value.to_string()))
        })
        .collect();
    let agent_type = plan.meta.agent_type.as_deref().unwrap_or("agent");
    crate::telemetry::continue_trace(&plan.agent_id, agent_type, &carried);
}

fn progress_sink(broker: &Broker, plan: &TaskPlan) -> EventSink {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Progress>();
    let client = broker.client.clone();
    let subject = broker
        .names
        .progress_subject(&plan.session_id, &plan.agent_id);
    tokio::spawn(async move {
        while let Some(p) = rx.recv().await {
            if let Ok(body) = serde_json::to_vec(&p) {
                let _ = client.publish(subject.clone(), body.into()).await;
            }
        }
    });
    let agent = plan.agent_id.clone();
    let started = Instant::now();
    let count = Arc::new(AtomicU32::new(0));
    Arc::new(move |e: &EngineEvent| {
        if let EngineEvent::ToolUse { agent_id, name, .. } = e
            && *agent_id == agent
        {
            let n = count.fetch_add(1, Ordering::Relaxed) + 1;
            let _ = tx.send(Progress {
                agent_id: agent.clone(),
                tool_uses: n,
                duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
                last_tool: name.clone(),
            });
        }
    })
}
