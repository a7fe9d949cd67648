//! The parent's side: with `[distributed] backend = "nats"`, a background
//! spawn is published as its plan instead of run here; one listener per
//! process takes the session's notices and ends each waiting task with its
//! notice (the task registry puts the notification in the parent's mailbox
//! exactly once), then acks; SendMessage and TaskStop for a remote task
//! are forwarded to its worker; `--resume` re-registers the remote tasks
//! whose notice is not in the conversation yet, and the listener (which
//! reads the session's notices from the start) delivers those that came
//! meanwhile.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Weak};
use std::time::Duration;

use async_nats::jetstream::{self, consumer};
use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use tokio::sync::OnceCell;

use crate::config::DistributedSettings;
use crate::message::{ContentBlock, History, Role};
use crate::runtime::backend::TaskBackend;
use crate::runtime::plan::SpawnParent;
use crate::runtime::plan::SpawnPlan;
use crate::runtime::restore::rebuild_task;
use crate::runtime::restore::sub_agent_metas;
use crate::runtime::resume;
use crate::runtime::spawn::notification_text;
use crate::runtime::tasks::{Task, TaskStatus};
use crate::runtime::{Engine, EngineEvent, QueueFailed};

use super::broker::{Broker, FleetError};
use super::lease::{queued_record, run_message_id};
use super::state::{TaskRecord, now_ms};
use super::wire::{Control, ControlReply, Notice, Progress, TaskPlan, plan_of};
use crate::runtime::transcript::{write_json_atomic, write_json_new};

/// The NATS JetStream task backend of one parent process.
pub struct NatsBackend {
    settings: DistributedSettings,
    pool: String,
    broker: OnceCell<Arc<Broker>>,
    listening: OnceCell<()>,
    /// The last failed connection attempt: spawns within one connect
    /// timeout of it fail at once instead of each waiting that long.
    failed: std::sync::Mutex<Option<(std::time::Instant, FleetError)>>,
    /// The run each resumed task waits for (see [`TaskPlan::run`]); a task
    /// not listed waits for run 0. A notice of another run is ignored.
    runs: Runs,
    /// This process's copies of its remote children's transcripts.
    copies: super::lines::Copies,
}

type Runs = Arc<std::sync::Mutex<HashMap<String, u32>>>;

fn expected_run(runs: &Runs, agent: &str) -> u32 {
    runs.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .get(agent)
        .copied()
        .unwrap_or(0)
}

/// Where the parent keeps a remote task's plan (beside its transcript), to
/// publish it again when SendMessage resumes the task after it ended.
fn plan_path(session_dir: &Path, agent_id: &str) -> std::path::PathBuf {
    crate::runtime::resume::subagents_dir(session_dir).join(format!("agent-{agent_id}.plan.json"))
}

impl NatsBackend {
    pub fn new(settings: DistributedSettings) -> Arc<NatsBackend> {
        Arc::new(NatsBackend {
            pool: settings.pool.clone(),
            settings,
            broker: OnceCell::new(),
            listening: OnceCell::new(),
            failed: std::sync::Mutex::new(None),
            runs: Arc::default(),
            copies: super::lines::Copies::default(),
        })
    }

    /// The connection, made at first use.
    pub async fn broker(&self) -> Result<Arc<Broker>, FleetError> {
        let recent = Duration::from_millis(self.settings.connect_timeout_ms.max(1));
        let failed = |f: &Self| {
            f.failed
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clone()
        };
        if let Some((at, error)) = failed(self)
            && self.broker.get().is_none()
            && at.elapsed() < recent
        {
            return Err(error);
        }
        let connected = self
            .broker
            .get_or_try_init(|| async { Broker::connect(&self.settings).await.map(Arc::new) })
            .await
            .cloned();
        if let Err(e) = &connected {
            *self
                .failed
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) =
                Some((std::time::Instant::now(), e.clone()));
        }
        connected
    }

    /// Starts taking this session's notices and progress lines (once).
    pub async fn listen(&self, engine: &Arc<Engine>) -> Result<(), FleetError> {
        let broker = self.broker().await?;
        self.listening
            .get_or_try_init(|| async {
                let copies = (!self.settings.shared_folder).then(|| self.copies.clone());
                if let (Some(copies), Some(dir)) = (&copies, &engine.session_dir) {
                    super::lines::follow(
                        Arc::clone(&broker),
                        engine.session_id.clone(),
                        dir.clone(),
                        copies.clone(),
                    );
                }
                start_listener(Arc::clone(&broker), engine, Arc::clone(&self.runs), copies).await?;
                start_progress(&broker, engine).await;
                Ok::<(), FleetError>(())
            })
            .await?;
        Ok(())
    }

    async fn publish(
        &self,
        engine: &Arc<Engine>,
        task: &Arc<Task>,
        spawn: &SpawnPlan,
    ) -> Result<(), FleetError> {
        if engine.session_dir.is_none() {
            return Err(FleetError::NoTranscripts);
        }
        let broker = self.broker().await?;
        self.listen(engine).await?;
        let publishing = std::time::Instant::now();
        let mut plan = plan_of(task, spawn, &engine.session_id, &self.pool);
        plan.shared_folder = self.settings.shared_folder;
        if !plan.shared_folder {
            let sharing = std::time::Instant::now();
            self.share(&broker, task, &mut plan).await?;
            tracing::debug!(
                "task {}: broker_ms lines={:.3}",
                task.id,
                sharing.elapsed().as_secs_f64() * 1000.0
            );
        }
        let record = queued_record(&plan);
        let bytes = serde_json::to_vec(&record).map_err(FleetError::broker)?;
        if let Err(e) = broker.state.create(&plan.agent_id, bytes.into()).await
            && e.kind() != jetstream::kv::CreateErrorKind::AlreadyExists
        {
            return Err(FleetError::broker(e));
        }
        if let Some(dir) = &engine.session_dir {
            let (path, kept) = (plan_path(dir, &plan.agent_id), plan.clone());
            let _ = tokio::task::spawn_blocking(move || write_json_new(&path, &kept)).await;
        }
        if let Err(e) = send_plan(&broker, &plan).await {
            // The task ends here (failed); its state must not say queued.
            let _ = broker.state.purge(&plan.agent_id).await;
            return Err(e);
        }
        // For the benchmark (bench/fleet.py): time spent in the broker.
        tracing::debug!(
            "task {}: broker_ms publish={:.3}",
            task.id,
            publishing.elapsed().as_secs_f64() * 1000.0
        );
        forward_controls(broker, Arc::downgrade(engine), Arc::clone(task));
        Ok(())
    }
}

impl NatsBackend {
    /// A shared-nothing fleet: the child's first lines go to the broker,
    /// and a worktree child's starting commit (the parent's checkout,
    /// uncommitted changes included) to the object store; the plan names
    /// that commit.
    async fn share(
        &self,
        broker: &Broker,
        task: &Task,
        plan: &mut TaskPlan,
    ) -> Result<(), FleetError> {
        push_lines(broker, task, &plan.session_id).await?;
        let Some(head) = plan.meta.worktree_base.clone() else {
            return Ok(());
        };
        let cwd = task.spec.cwd.clone();
        let at = cwd.clone();
        let (base, remote) = tokio::task::spawn_blocking(move || {
            let base = super::git::snapshot(&at, &head)?;
            // Only `HEAD` itself can be on a remote (a snapshot of
            // uncommitted changes is made here).
            let remote = (base == head)
                .then(|| super::git::pushed_to(&at, &base))
                .flatten();
            Ok::<_, FleetError>((base, remote))
        })
        .await
        .map_err(FleetError::broker)??;
        if remote.is_none() {
            super::git::publish_base(broker, &cwd, &base).await?;
        }
        plan.meta.worktree_base = Some(base);
        plan.meta.worktree_remote = remote;
        Ok(())
    }
}

/// Publishes the lines of `task`'s transcript here that the broker's copy
/// lacks (its first lines; a SendMessage line).
async fn push_lines(broker: &Broker, task: &Task, session: &str) -> Result<(), FleetError> {
    let Some(path) = task.output_file.clone() else {
        return Err(FleetError::NoTranscripts);
    };
    super::lines::Pusher::at_tip(broker, session, &task.id, path)
        .await?
        .push(broker, 3)
        .await
}

/// Publishes `plan` to its pool's queue. A lost acknowledgement (a
/// timeout under load, a reconnect) is retried with the same message id:
/// the stream drops a copy that did arrive, so the run is queued once
/// either way.
async fn send_plan(broker: &Broker, plan: &TaskPlan) -> Result<(), FleetError> {
    let payload = serde_json::to_vec(plan).map_err(FleetError::broker)?;
    // The child's trace context (with telemetry on): the worker's spans
    // continue this session's trace under the child's span.
    let trace = crate::telemetry::trace_headers(&plan.agent_id);
    let mut published = Err(FleetError::Broker(String::new()));
    for attempt in 0..3u32 {
        let sending = std::time::Instant::now();
        let mut message = jetstream::message::PublishMessage::build()
            .payload(payload.clone().into())
            .message_id(run_message_id(&plan.agent_id, plan.run));
        for (name, value) in &trace {
            message = message.header(name.as_str(), value.as_str());
        }
        let sent = broker
            .js
            .send_publish(broker.names.task_subject(&plan.pool), message)
            .await;
        published = match sent {
            Ok(ack) => ack.await.map(|_| ()).map_err(FleetError::broker),
            Err(e) => Err(FleetError::broker(e)),
        };
        match &published {
            Ok(()) => break,
            Err(e) => tracing::warn!(
                "task {}: publishing its plan failed after {:?} ({e}); trying again",
                plan.agent_id,
                sending.elapsed()
            ),
        }
        tokio::time::sleep(Duration::from_millis(100 << attempt)).await;
    }
    published
}

impl NatsBackend {
    /// SendMessage to a remote task that has ended (its message already
    /// appended to its transcript): its state goes back to `queued` as its
    /// next run (a compare-and-set from its end state), and its plan is
    /// published again with that run, so a worker continues the child
    /// from its transcript, as a local task resumes in the background.
    async fn republish(&self, engine: &Arc<Engine>, task: &Arc<Task>) -> Result<(), FleetError> {
        let dir = engine
            .session_dir
            .clone()
            .ok_or(FleetError::NoTranscripts)?;
        let broker = self.broker().await?;
        self.listen(engine).await?;
        let path = plan_path(&dir, &task.id);
        let read = tokio::task::spawn_blocking(move || fs_err::read(&path))
            .await
            .map_err(FleetError::broker)?
            .map_err(FleetError::broker)?;
        let mut plan: TaskPlan = serde_json::from_slice(&read).map_err(FleetError::broker)?;
        let entry = broker
            .state
            .entry(&task.id)
            .await
            .map_err(FleetError::broker)?
            .filter(|e| e.operation == jetstream::kv::Operation::Put)
            .ok_or_else(|| {
                FleetError::Broker(format!("task {} has no state on the broker", task.id))
            })?;
        let record: TaskRecord =
            serde_json::from_slice(&entry.value).map_err(FleetError::broker)?;
        let next = record
            .reopen(now_ms())
            .map_err(|e| FleetError::Broker(e.to_string()))?;
        let bytes = serde_json::to_vec(&next).map_err(FleetError::broker)?;
        broker
            .state
            .update(&task.id, bytes.into(), entry.revision)
            .await
            .map_err(FleetError::broker)?;
        plan.run = next.run;
        if !plan.shared_folder {
            push_lines(&broker, task, &plan.session_id).await?;
        }
        // The plan file names the latest run, for `--resume` to know which
        // notice the task waits for.
        let (path, kept) = (plan_path(&dir, &task.id), plan.clone());
        let _ = tokio::task::spawn_blocking(move || write_json_atomic(&path, &kept)).await;
        self.runs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(task.id.clone(), plan.run);
        send_plan(&broker, &plan).await?;
        forward_controls(broker, Arc::downgrade(engine), Arc::clone(task));
        Ok(())
    }
}

impl TaskBackend for NatsBackend {
    fn resume<'a>(
        &'a self,
        engine: &'a Arc<Engine>,
        task: &'a Arc<Task>,
    ) -> BoxFuture<'a, Result<(), QueueFailed>> {
        Box::pin(async move {
            self.republish(engine, task)
                .await
                .map_err(|e| e.queue_failed())
        })
    }

    fn submit<'a>(
        &'a self,
        engine: &'a Arc<Engine>,
        task: &'a Arc<Task>,
        plan: &'a SpawnPlan,
    ) -> BoxFuture<'a, Result<(), QueueFailed>> {
        Box::pin(async move {
            self.publish(engine, task, plan)
                .await
                .map_err(|e| e.queue_failed())
        })
    }

    fn name(&self) -> &'static str {
        "nats"
    }
}

/// The session's notices from the first one: a task still waiting here
/// ends with its notice (once: a task that already ended is skipped), and
/// the notice is acked. When the consumer is lost (a broker restart), a
/// new one reads from the start again.
async fn start_listener(
    broker: Arc<Broker>,
    engine: &Arc<Engine>,
    runs: Runs,
    copies: Option<super::lines::Copies>,
) -> Result<(), FleetError> {
    let session = engine.session_id.clone();
    let consumer = notice_consumer(&broker, &session).await?;
    let engine = Arc::downgrade(engine);
    tokio::spawn(async move {
        let mut consumer = Some(consumer);
        loop {
            let c = match consumer.take() {
                Some(c) => c,
                None => match notice_consumer(&broker, &session).await {
                    Ok(c) => c,
                    Err(e) => {
                        tracing::debug!("notices: {e}");
                        tokio::time::sleep(Duration::from_millis(250)).await;
                        continue;
                    }
                },
            };
            let mut messages = match c.messages().await {
                Ok(m) => m,
                Err(e) => {
                    tracing::debug!("notices: {e}");
                    tokio::time::sleep(Duration::from_millis(250)).await;
                    continue;
                }
            };
            let mut errors = 0;
            while let Some(m) = messages.next().await {
                match m {
                    Ok(msg) => {
                        errors = 0;
                        let Some(engine) = engine.upgrade() else {
                            return;
                        };
                        deliver(&engine, &msg.payload, &runs, &broker, copies.as_ref()).await;
                        let _ = msg.ack().await;
                    }
                    Err(e) => {
                        errors += 1;
                        tracing::debug!("notices: {e}");
                        if errors >= 3 {
                            break;
                        }
                    }
                }
            }
            if engine.strong_count() == 0 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    });
    Ok(())
}

async fn notice_consumer(
    broker: &Broker,
    session: &str,
) -> Result<consumer::PullConsumer, FleetError> {
    let stream = broker
        .js
        .get_stream(&broker.names.notices_stream)
        .await
        .map_err(FleetError::broker)?;
    stream
        .create_consumer(consumer::pull::Config {
            filter_subject: broker.names.notices_of(session),
            deliver_policy: consumer::DeliverPolicy::All,
            ack_policy: consumer::AckPolicy::Explicit,
            inactive_threshold: Duration::from_secs(300),
            ..Default::default()
        })
        .await
        .map_err(FleetError::broker)
}

/// Ends the waiting task a notice is for. Anything else (a task this
/// process does not know, one already ended) is left alone.
async fn deliver(
    engine: &Engine,
    payload: &[u8],
    runs: &Runs,
    broker: &Broker,
    copies: Option<&super::lines::Copies>,
) {
    let notice: Notice = match serde_json::from_slice(payload) {
        Ok(n) => n,
        Err(e) => {
            tracing::warn!("a notice that does not parse ({e}); skipped");
            return;
        }
    };
    let Some(task) = engine.tasks.get(&notice.agent_id) else {
        return;
    };
    if task.status() != TaskStatus::Running
        || !task.is_remote()
        || notice.run != expected_run(runs, &notice.agent_id)
    {
        return;
    }
    // A shared-nothing fleet: the transcript here gets every line the
    // worker published before its notice, and a kept worktree's branch
    // comes into this repository.
    let mut result = notice.result();
    if let Some(copies) = copies {
        if let Some(path) = &task.output_file
            && let Err(e) = copies
                .catch_up(broker, &engine.session_id, &task.id, path)
                .await
        {
            tracing::warn!("task {}: its transcript here is not complete: {e}", task.id);
        }
        if let (Some(object), Some(kept)) = (&notice.branch_object, &notice.worktree) {
            match super::git::receive_branch(broker, &task.spec.cwd, &task.id, &kept.branch, object)
                .await
            {
                Ok(here) => result.worktree = Some(here),
                Err(e) => {
                    tracing::warn!("task {}: its branch did not come back: {e}", task.id);
                    result.worktree = None;
                }
            }
        }
    }
    // Its history, for SendMessage to resume it here later (read off the
    // async workers; this listener is the only one that finishes tasks, so
    // the status checked above still holds).
    let path = task.output_file.clone();
    let history = tokio::task::spawn_blocking(move || {
        path.as_deref()
            .and_then(|p| resume::load(p).ok())
            .map(|r| r.history)
    })
    .await
    .ok()
    .flatten()
    .unwrap_or_default();
    engine.emit(EngineEvent::SubagentEnd {
        agent_id: task.id.clone(),
        status: result.status.as_str().to_string(),
        tool_uses: result.tool_uses,
        duration_ms: result.duration_ms,
        total_tokens: result.total_tokens,
    });
    let snap = engine.snapshot.load_full();
    engine.tasks.finish(&task, result, history, |r| {
        notification_text(&snap, &task, r)
    });
}

/// Remote tasks' tool calls as progress events of this engine.
async fn start_progress(broker: &Broker, engine: &Arc<Engine>) {
    let subject = broker.names.progress_subject(&engine.session_id, "*");
    let Ok(mut sub) = broker.client.subscribe(subject).await else {
        return;
    };
    let engine = Arc::downgrade(engine);
    tokio::spawn(async move {
        while let Some(m) = sub.next().await {
            let Some(engine) = engine.upgrade() else {
                return;
            };
            if let Ok(p) = serde_json::from_slice::<Progress>(&m.payload) {
                engine.emit(EngineEvent::SubagentProgress {
                    agent_id: p.agent_id,
                    tool_uses: p.tool_uses,
                    duration_ms: p.duration_ms,
                    last_tool: p.last_tool,
                });
            }
        }
    });
}

/// Forwards SendMessage texts queued for a remote task, and its TaskStop,
/// to the worker running it, until the task ends. A text the worker did
/// not take (no worker holds the task at this moment) is tried again.
fn forward_controls(broker: Arc<Broker>, engine: Weak<Engine>, task: Arc<Task>) {
    tokio::spawn(async move {
        let subject = broker.names.control_subject(&task.id);
        let mut pending: Vec<String> = Vec::new();
        let mut stop_sent = false;
        loop {
            let Some(e) = engine.upgrade() else { return };
            if task.status() != TaskStatus::Running {
                if !pending.is_empty() {
                    tracing::warn!(
                        "{}: {} message(s) not delivered before it ended",
                        task.id,
                        pending.len()
                    );
                }
                return;
            }
            pending.extend(e.tasks.take_inbox(&task.id));
            drop(e);
            let mut kept = Vec::new();
            for text in pending.drain(..) {
                if !send_control(&broker, &subject, &Control::Message { text: text.clone() }).await
                {
                    kept.push(text);
                }
            }
            pending = kept;
            if task.cancel.is_cancelled() && !stop_sent {
                stop_sent = send_control(&broker, &subject, &Control::Stop).await;
            }
            let wait = if pending.is_empty() && (stop_sent || !task.cancel.is_cancelled()) {
                Duration::from_millis(200)
            } else {
                Duration::from_millis(500)
            };
            tokio::select! {
                () = task.cancel.cancelled(), if !stop_sent => {}
                () = tokio::time::sleep(wait) => {}
            }
        }
    });
}

async fn send_control(broker: &Broker, subject: &str, c: &Control) -> bool {
    let Ok(body) = serde_json::to_vec(c) else {
        return false;
    };
    let asked = tokio::time::timeout(
        Duration::from_secs(2),
        broker.client.request(subject.to_string(), body.into()),
    )
    .await;
    match asked {
        Ok(Ok(reply)) => matches!(
            serde_json::from_slice::<ControlReply>(&reply.payload),
            Ok(ControlReply::Accepted)
        ),
        _ => false,
    }
}

/// Whether the conversation already holds task `agent_id`'s notification
/// (a text block of a user message naming it; tool results do not count).
pub fn notified(history: &History, agent_id: &str) -> bool {
    notifications_of(history, agent_id) > 0
}

/// How many of task `agent_id`'s notifications the conversation holds
/// (text blocks of user messages naming it): one per run delivered.
fn notifications_of(history: &History, agent_id: &str) -> usize {
    history
        .iter()
        .filter(|m| m.role == Role::User)
        .flat_map(|m| m.content.iter().filter_map(ContentBlock::as_text))
        .filter(|t| t.contains(agent_id))
        .count()
}

impl NatsBackend {
    /// `--resume` of a session whose background tasks ran on workers: each
    /// one whose notification is in `main_history` is registered as ended;
    /// every other one waits again for its notice, which the listener
    /// started here delivers (at once when it came while no parent ran).
    /// Returns how many wait.
    pub fn restore(
        self: &Arc<Self>,
        engine: &Arc<Engine>,
        session_dir: &Path,
        parent: &SpawnParent<'_>,
        main_history: &History,
    ) -> usize {
        let mut waiting = Vec::new();
        // Tasks whose notification is in the conversation, with how many
        // of their notifications are (one per run delivered).
        let mut notified_runs = Vec::new();
        for (meta_path, meta) in sub_agent_metas(session_dir) {
            if meta.get("backend").is_none_or(serde_json::Value::is_null) {
                continue;
            }
            // The worker may be writing its transcript: read only.
            let Some(rebuilt) = rebuild_task(engine, session_dir, meta_path, meta, parent, false)
            else {
                continue;
            };
            if notified(main_history, &rebuilt.task.id) {
                let status = match rebuilt.status {
                    TaskStatus::Killed | TaskStatus::Running => TaskStatus::Completed,
                    s => s,
                };
                let delivered = notifications_of(main_history, &rebuilt.task.id);
                let task = engine
                    .tasks
                    .insert_ended(rebuilt.task, status, rebuilt.history);
                notified_runs.push((task, delivered));
            } else {
                waiting.push(engine.tasks.create(rebuilt.task).0);
            }
        }
        // A task resumed by SendMessage whose latest run (its plan file
        // says which) has no notification in the conversation yet waits
        // again, for that run's notice.
        for (task, delivered) in notified_runs {
            let run = fs_err::read(plan_path(session_dir, &task.id))
                .ok()
                .and_then(|b| serde_json::from_slice::<TaskPlan>(&b).ok())
                .map_or(0, |p| p.run);
            if run > 0 && run as usize >= delivered && engine.tasks.restart(&task).is_some() {
                self.runs
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .insert(task.id.clone(), run);
                waiting.push(task);
            }
        }
        let n = waiting.len();
        if n > 0 {
            let (this, engine) = (Arc::clone(self), Arc::clone(engine));
            tokio::spawn(async move {
                match this.listen(&engine).await {
                    Ok(()) => {
                        if let Ok(broker) = this.broker().await {
                            for task in waiting {
                                forward_controls(
                                    Arc::clone(&broker),
                                    Arc::downgrade(&engine),
                                    task,
                                );
                            }
                        }
                    }
                    Err(e) => tracing::warn!("{n} background task(s) wait for their notice: {e}"),
                }
            });
        }
        n
    }
}

/// Every task state in the bucket (for `cadre tasks list`); entries that do
/// not parse are skipped with a warning.
pub async fn task_records(broker: &Broker) -> Result<Vec<super::state::TaskRecord>, FleetError> {
    let mut keys = broker.state.keys().await.map_err(FleetError::broker)?;
    let mut names = Vec::new();
    while let Some(k) = keys.next().await {
        names.push(k.map_err(FleetError::broker)?);
    }
    let mut out = Vec::new();
    for k in names {
        let Some(bytes) = broker.state.get(&k).await.map_err(FleetError::broker)? else {
            continue;
        };
        match serde_json::from_slice(&bytes) {
            Ok(r) => out.push(r),
            Err(e) => tracing::warn!("task state {k}: {e}; skipped"),
        }
    }
    Ok(out)
}
