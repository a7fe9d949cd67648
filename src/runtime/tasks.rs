//! Background tasks: the registry of sub-agents that run on their own, the
//! mailboxes through which their notifications and SendMessage texts reach
//! a session, and the concurrency limit.
//!
//! Every child gets a [`Task`], foreground ones too, so that a foreground
//! child can be moved to the background while it runs (auto-background)
//! without restarting. A task's result is delivered exactly once: to the
//! waiting caller while it is in the foreground, otherwise as one
//! notification in its parent's mailbox.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{Value, json};
use tokio::sync::{Notify, Semaphore, oneshot};
use tokio_util::sync::CancellationToken;

use crate::message::{History, Usage};

use super::session::SessionSpec;
use super::transcript::{inserted, write_json_atomic, write_json_new, write_json_over};
use super::worktree::KeptWorktree;
use crate::clock::now_rfc3339;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TaskStatus {
    Running,
    Completed,
    Failed,
    Killed,
}

impl TaskStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Running => "running",
            TaskStatus::Completed => "completed",
            TaskStatus::Failed => "failed",
            TaskStatus::Killed => "killed",
        }
    }
}

/// How a finished child reports: the text and numbers of its result.
#[derive(Debug, Clone)]
pub struct TaskResult {
    pub status: TaskStatus,
    /// Final (or, when killed, latest) text blocks.
    pub texts: Option<Vec<String>>,
    /// Why it failed or was stopped, for people (meta file, transcript).
    pub error: Option<String>,
    /// The same, for the model (worded by `run_problem`).
    pub problem: Option<super::RunProblem>,
    pub usage: Usage,
    pub total_tokens: u64,
    pub tool_uses: u32,
    pub duration_ms: u64,
    /// The child's worktree, when it was kept (changes were made).
    pub worktree: Option<KeptWorktree>,
}

/// Where a task's result goes.
enum Delivery {
    /// A caller is waiting for it.
    Foreground(oneshot::Sender<TaskResult>),
    /// It goes to the parent's mailbox as a notification.
    Background,
    /// Already delivered.
    Done,
}

/// The mutable part of a task.
pub struct TaskState {
    pub status: TaskStatus,
    pub result: Option<TaskResult>,
    /// The child's history when it ended (for SendMessage to resume it).
    pub history: Option<History>,
    /// The latest text the child produced, for TaskOutput and partial results.
    pub latest_text: Option<Vec<String>>,
    pub ended: Option<String>,
    delivery: Delivery,
    /// Messages from SendMessage waiting for the child's next turn.
    pub inbox: Vec<String>,
    /// Whether SendMessage may still queue for the running child. Closed
    /// (atomically with a last look at the inbox) when the child decides to
    /// end, so a message is either read by a turn or refused and the child
    /// resumed with it, never left behind.
    inbox_open: bool,
}

/// A tool call in progress (from [`Task::tool_running`]).
pub struct ToolRunning(Arc<Task>);

impl Drop for ToolRunning {
    fn drop(&mut self) {
        self.0.touch();
        self.0.tools_running.fetch_sub(1, Ordering::SeqCst);
    }
}

/// One sub-agent, foreground or background.
pub struct Task {
    pub id: String,
    pub description: String,
    pub agent_type: String,
    pub parent_agent_id: String,
    pub tool_use_id: String,
    pub name: Option<String>,
    /// The child's transcript (its output file).
    pub output_file: Option<PathBuf>,
    pub meta_file: Option<PathBuf>,
    pub started: String,
    pub started_at: Instant,
    pub spec: SessionSpec,
    /// Cancels the child (TaskStop, process end, or its foreground caller).
    pub cancel: CancellationToken,
    meta: Value,
    /// Ran (or was moved) in the background at some point.
    backgrounded: AtomicBool,
    /// Milliseconds from `started_at` to the child's last progress (a
    /// streamed delta, a message, a tool result).
    progress_ms: AtomicU64,
    /// Tool calls of the child running now (see [`Task::tool_running`]).
    tools_running: AtomicU32,
    /// Set when a limit ends the task: the text its result reports.
    limit: Mutex<Option<String>>,
    state: Mutex<TaskState>,
    done: Notify,
    /// Held while the meta file is written: two writers never share its
    /// temporary file, and the last one to finish wrote the latest state.
    meta_writing: Mutex<()>,
    /// Set on a fleet worker: the meta file is written only while the
    /// task's lease holds ([`super::transcript::WriteFence`]).
    fence: std::sync::OnceLock<Arc<super::transcript::WriteFence>>,
    /// Resumed in this process (SendMessage after it ended) although it
    /// first ran on a task backend: it is local from then on.
    resumed_here: AtomicBool,
}

impl Task {
    /// Fences this task's meta file writes (a fleet worker's lease).
    pub fn set_fence(&self, fence: Arc<super::transcript::WriteFence>) {
        let _ = self.fence.set(fence);
    }

    /// The fence set by [`Task::set_fence`].
    pub fn fence(&self) -> Option<&Arc<super::transcript::WriteFence>> {
        self.fence.get()
    }

    pub fn state(&self) -> MutexGuard<'_, TaskState> {
        // A poisoned lock only means a panic elsewhere; the data is still usable.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub fn status(&self) -> TaskStatus {
        self.state().status
    }

    /// Records progress of the child now (the stall timer restarts).
    pub fn touch(&self) {
        let ms = u64::try_from(self.started_at.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.progress_ms.fetch_max(ms, Ordering::Relaxed);
    }

    /// How long since the child's last progress.
    pub fn idle(&self) -> Duration {
        let last = Duration::from_millis(self.progress_ms.load(Ordering::Relaxed));
        self.started_at.elapsed().saturating_sub(last)
    }

    /// Marks a tool call of the child as running until the guard drops.
    /// A running tool call is progress: the stall limit does not end a
    /// task during one (the tool's own time limit bounds it), and the
    /// stall timer restarts when it returns.
    pub fn tool_running(self: &Arc<Self>) -> ToolRunning {
        self.touch();
        self.tools_running.fetch_add(1, Ordering::SeqCst);
        ToolRunning(Arc::clone(self))
    }

    /// Whether a tool call of the child is running now.
    pub fn in_tool_call(&self) -> bool {
        self.tools_running.load(Ordering::SeqCst) > 0
    }

    /// Ends the task because of a limit: `reason` becomes its error and it
    /// is cancelled. Only the first limit counts; later calls do nothing.
    pub fn end_by_limit(&self, reason: String) {
        {
            let mut slot = lock(&self.limit);
            if slot.is_some() || self.status() != TaskStatus::Running {
                return;
            }
            *slot = Some(reason);
        }
        self.cancel.cancel();
    }

    /// The limit that ended the task, if one did.
    pub fn limit_reached(&self) -> Option<String> {
        lock(&self.limit).clone()
    }

    /// Whether the result will go to the parent's mailbox.
    /// Running, with its result going to its parent's mailbox: one
    /// notification still to come.
    fn notifies_later(&self) -> bool {
        let s = self.state();
        s.status == TaskStatus::Running && matches!(s.delivery, Delivery::Background)
    }

    pub fn is_background(&self) -> bool {
        matches!(self.state().delivery, Delivery::Background)
    }

    /// Waits until the task has ended, or `timeout` passed.
    pub async fn wait(&self, timeout: Duration) -> TaskStatus {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let notified = self.done.notified();
            let status = self.status();
            if status != TaskStatus::Running {
                return status;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return self.status();
            }
        }
    }

    /// What the meta file records besides the status (agent type, model,
    /// tools, permission mode, …), as given when the task was created.
    pub fn meta(&self) -> &Value {
        &self.meta
    }

    /// Whether it runs on a task backend (another host), not here.
    pub fn is_remote(&self) -> bool {
        self.meta.get("backend").is_some_and(|b| !b.is_null())
            && !self.resumed_here.load(Ordering::SeqCst)
    }

    /// It ran on a task backend, and now runs in this process (resumed by
    /// SendMessage after it ended): a notice of its earlier run does not
    /// end it, and it stops with this process like any local task.
    pub fn mark_resumed_here(&self) {
        self.resumed_here.store(true, Ordering::SeqCst);
    }

    /// Writes the meta file with the current status: in place (see
    /// [`write_json_over`]), or through a temporary file and a rename for a
    /// child with a worktree, whose meta file `cadre worktrees` reads to
    /// tell whether the worktree is still in use.
    pub fn write_meta(&self, extra: Value) {
        let has_worktree = self.meta.get("worktree").is_some_and(|w| !w.is_null())
            || self
                .state()
                .result
                .as_ref()
                .is_some_and(|r| r.worktree.is_some());
        if has_worktree {
            self.write_meta_with(extra, MetaWrite::Atomic);
        } else {
            self.write_meta_with(extra, MetaWrite::InPlace);
        }
    }

    /// Writes the meta file a child's start creates (blocking), unless
    /// something already wrote it (a restart, or a status change that
    /// came first: either wrote a state at least as recent).
    pub fn write_first_meta(&self) {
        self.write_meta_with(json!({}), MetaWrite::New);
    }

    fn write_meta_with(&self, extra: Value, how: MetaWrite) {
        let Some(path) = &self.meta_file else { return };
        let _writing = lock(&self.meta_writing);
        if self.fence.get().is_some_and(|f| !f.open()) {
            return;
        }
        let updates = self.meta_updates(extra);
        let empty = serde_json::Map::new();
        let base = match &self.meta {
            Value::Object(base) => base,
            // Never made so; the status is still written.
            _ => &empty,
        };
        let file = MetaFile {
            base,
            updates: &updates,
        };
        match how {
            MetaWrite::New => write_json_new(path, &file),
            MetaWrite::InPlace => write_json_over(path, &file),
            MetaWrite::Atomic => write_json_atomic(path, &file),
        }
    }

    /// What the meta file adds to [`Task::meta`] now, in order: the
    /// status, times, the result's fields, then `extra`'s.
    fn meta_updates(&self, extra: Value) -> Vec<(String, Value)> {
        let state = self.state();
        let mut updates = vec![
            ("status".to_string(), json!(state.status)),
            (
                "background".to_string(),
                json!(self.backgrounded.load(Ordering::SeqCst)),
            ),
            ("started".to_string(), json!(self.started)),
            ("ended".to_string(), json!(state.ended)),
        ];
        if let Some(r) = &state.result {
            updates.push(("worktree".into(), json!(r.worktree)));
            if let Some(e) = &r.error {
                updates.push(("error".into(), json!(e)));
            }
            updates.push((
                "usage".into(),
                json!({"total_tokens": r.total_tokens, "tool_uses": r.tool_uses, "duration_ms": r.duration_ms}),
            ));
        }
        drop(state);
        if let Value::Object(e) = extra {
            updates.extend(e);
        }
        updates
    }
}

/// A meta file's object: the task's fixed fields with `updates` inserted
/// (see [`inserted`]), serialized without copying the fixed fields.
pub(super) struct MetaFile<'a> {
    base: &'a serde_json::Map<String, Value>,
    updates: &'a [(String, Value)],
}

impl Serialize for MetaFile<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let base: Vec<(&str, &Value)> = self.base.iter().map(|(k, v)| (k.as_str(), v)).collect();
        let updates: Vec<(&str, &Value)> =
            self.updates.iter().map(|(k, v)| (k.as_str(), v)).collect();
        let mut map = s.serialize_map(None)?;
        for (key, value) in inserted(&base, &updates) {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

/// How a meta file is written (see the `write_json_*` functions).
#[derive(Clone, Copy)]
enum MetaWrite {
    New,
    InPlace,
    Atomic,
}

/// What a new task is made of.
pub struct NewTask {
    pub id: String,
    pub description: String,
    pub agent_type: String,
    pub parent_agent_id: String,
    pub tool_use_id: String,
    pub name: Option<String>,
    pub output_file: Option<PathBuf>,
    pub meta_file: Option<PathBuf>,
    pub meta: Value,
    pub spec: SessionSpec,
    pub background: bool,
}

/// Text waiting for a session's next turn.
#[derive(Default)]
struct Mailbox {
    notifications: Vec<String>,
    messages: Vec<String>,
}

/// Every task of the process, and the mailboxes of every session.
pub struct TaskRegistry {
    tasks: Mutex<HashMap<String, Arc<Task>>>,
    /// The same tasks by parent agent id, so that a session's questions
    /// about its own children (asked on every wake-up) look at those only,
    /// not at every task of the process.
    children: Mutex<HashMap<String, Vec<Arc<Task>>>>,
    names: Mutex<HashMap<String, String>>,
    mailboxes: Mutex<HashMap<String, Mailbox>>,
    /// Signalled whenever a mailbox gains something or a task ends.
    changed: Notify,
    /// Limits background tasks running at once; further ones queue.
    pub limit: Arc<Semaphore>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl TaskRegistry {
    pub fn new(max_concurrent: usize) -> Self {
        TaskRegistry {
            tasks: Mutex::new(HashMap::new()),
            children: Mutex::new(HashMap::new()),
            names: Mutex::new(HashMap::new()),
            mailboxes: Mutex::new(HashMap::new()),
            changed: Notify::new(),
            limit: Arc::new(Semaphore::new(max_concurrent.max(1))),
        }
    }

    /// Registers a task. For a foreground task, the receiver yields its
    /// result unless it is moved to the background first.
    pub fn create(&self, t: NewTask) -> (Arc<Task>, Option<oneshot::Receiver<TaskResult>>) {
        let (delivery, rx) = if t.background {
            (Delivery::Background, None)
        } else {
            let (tx, rx) = oneshot::channel();
            (Delivery::Foreground(tx), Some(rx))
        };
        let task = Arc::new(Task {
            id: t.id.clone(),
            description: t.description,
            agent_type: t.agent_type,
            parent_agent_id: t.parent_agent_id,
            tool_use_id: t.tool_use_id,
            name: t.name.clone(),
            output_file: t.output_file,
            meta_file: t.meta_file,
            started: now_rfc3339(),
            started_at: Instant::now(),
            spec: t.spec,
            cancel: CancellationToken::new(),
            meta: t.meta,
            backgrounded: AtomicBool::new(t.background),
            progress_ms: AtomicU64::new(0),
            tools_running: AtomicU32::new(0),
            limit: Mutex::new(None),
            meta_writing: Mutex::new(()),
            fence: std::sync::OnceLock::new(),
            resumed_here: AtomicBool::new(false),
            state: Mutex::new(TaskState {
                status: TaskStatus::Running,
                result: None,
                history: None,
                latest_text: None,
                ended: None,
                delivery,
                inbox: Vec::new(),
                inbox_open: true,
            }),
            done: Notify::new(),
        });
        let replaced = lock(&self.tasks).insert(t.id.clone(), Arc::clone(&task));
        {
            let mut children = lock(&self.children);
            if let Some(old) = replaced
                && let Some(list) = children.get_mut(&old.parent_agent_id)
            {
                list.retain(|c| !Arc::ptr_eq(c, &old));
            }
            children
                .entry(task.parent_agent_id.clone())
                .or_default()
                .push(Arc::clone(&task));
        }
        if let Some(name) = t.name {
            lock(&self.names).insert(name, t.id);
        }
        (task, rx)
    }

    pub fn get(&self, id_or_name: &str) -> Option<Arc<Task>> {
        let tasks = lock(&self.tasks);
        if let Some(t) = tasks.get(id_or_name) {
            return Some(Arc::clone(t));
        }
        let id = lock(&self.names).get(id_or_name).cloned()?;
        tasks.get(&id).cloned()
    }

    pub fn all(&self) -> Vec<Arc<Task>> {
        lock(&self.tasks).values().cloned().collect()
    }

    /// Moves a running foreground task to the background. `false` when it
    /// has already finished (its result is then waiting in the receiver).
    pub fn move_to_background(&self, task: &Task) -> bool {
        let mut state = task.state();
        match state.delivery {
            Delivery::Foreground(_) if state.status == TaskStatus::Running => {
                state.delivery = Delivery::Background;
                task.backgrounded.store(true, Ordering::SeqCst);
                true
            }
            Delivery::Background => true,
            _ => false,
        }
    }

    /// Registers a task of an earlier process (a resumed session) as
    /// ended: `status` (a task that was still running is `killed`), its
    /// `history` kept so that SendMessage can resume it. Nothing is
    /// delivered.
    pub fn insert_ended(&self, t: NewTask, status: TaskStatus, history: History) -> Arc<Task> {
        let (task, _) = self.create(NewTask {
            background: true,
            ..t
        });
        {
            let mut state = task.state();
            state.status = status;
            state.history = Some(history);
            state.ended = Some(now_rfc3339());
            state.delivery = Delivery::Done;
            state.inbox_open = false;
        }
        task.write_meta(json!({}));
        task
    }

    /// Makes an ended task run again (SendMessage to a finished agent): it
    /// runs in the background and will deliver one more notification when
    /// it ends. Returns its history and any messages it never read, or
    /// `None` when it is running (someone else restarted it first).
    pub fn restart(&self, task: &Task) -> Option<(History, Vec<String>)> {
        let mut state = task.state();
        if state.status == TaskStatus::Running {
            return None;
        }
        state.status = TaskStatus::Running;
        state.result = None;
        state.ended = None;
        state.delivery = Delivery::Background;
        state.inbox_open = true;
        let history = state.history.clone().unwrap_or_default();
        let unread = std::mem::take(&mut state.inbox);
        drop(state);
        task.backgrounded.store(true, Ordering::SeqCst);
        task.write_meta(json!({}));
        Some((history, unread))
    }

    /// Records the end of a task and delivers its result exactly once:
    /// to the waiting caller, or as `notification` in the parent's mailbox.
    pub fn finish(
        &self,
        task: &Task,
        result: TaskResult,
        history: History,
        notification: impl FnOnce(&TaskResult) -> String,
    ) {
        // Only a background task's notification goes to the mailbox, so only
        // then is it rendered, before any lock is taken; a task moved to the
        // background meanwhile renders it under the lock below.
        let mut notification = Some(notification);
        let background = matches!(task.state().delivery, Delivery::Background);
        let text = if background {
            notification.take().map(|f| f(&result))
        } else {
            None
        };
        {
            // The mailbox lock is held across the status change and the
            // push, so `has_pending` never sees the task ended with its
            // notification not yet in the mailbox (the race that lost
            // notifications: the parent concluded nothing was pending and
            // ended). Lock order: mailboxes, then a task's state.
            let mut mailboxes = lock(&self.mailboxes);
            let mut state = task.state();
            state.status = result.status;
            state.ended = Some(now_rfc3339());
            state.history = Some(history);
            state.result = Some(result.clone());
            state.inbox_open = false;
            match std::mem::replace(&mut state.delivery, Delivery::Done) {
                Delivery::Foreground(tx) => {
                    // The caller may be gone (cancelled); nothing else to do then.
                    let _ = tx.send(result);
                }
                Delivery::Background => {
                    let text = text
                        .or_else(|| notification.take().map(|f| f(&result)))
                        .unwrap_or_default();
                    mailboxes
                        .entry(task.parent_agent_id.clone())
                        .or_default()
                        .notifications
                        .push(text);
                }
                Delivery::Done => {}
            }
        }
        task.write_meta(json!({}));
        task.done.notify_waiters();
        self.changed.notify_waiters();
    }

    /// Queues a SendMessage text for a running task's next turn. `false`
    /// when the task no longer reads its inbox (it is ending or ended):
    /// the caller then waits for the end and resumes it with the message.
    pub fn send(&self, task: &Task, message: String) -> bool {
        {
            let mut state = task.state();
            if state.status != TaskStatus::Running || !state.inbox_open {
                return false;
            }
            state.inbox.push(message);
        }
        self.changed.notify_waiters();
        true
    }

    /// The child with this agent id is about to end: returns the messages
    /// queued for it (it must take another turn with them), or closes its
    /// inbox so later messages resume it instead. Empty for a session that
    /// is not a task (the main session).
    pub fn close_inbox(&self, agent_id: &str) -> Vec<String> {
        let Some(task) = self.get(agent_id) else {
            return Vec::new();
        };
        let mut state = task.state();
        if state.inbox.is_empty() {
            state.inbox_open = false;
        }
        std::mem::take(&mut state.inbox)
    }

    /// Takes the messages queued for the task with this agent id.
    pub fn take_inbox(&self, agent_id: &str) -> Vec<String> {
        let Some(task) = self.get(agent_id) else {
            return Vec::new();
        };
        std::mem::take(&mut task.state().inbox)
    }

    /// Takes the notifications waiting for `agent_id`, in arrival order.
    pub fn take_notifications(&self, agent_id: &str) -> Vec<String> {
        lock(&self.mailboxes)
            .get_mut(agent_id)
            .map(|m| std::mem::take(&mut m.notifications))
            .unwrap_or_default()
    }

    /// Whether `agent_id` has background children whose notification has
    /// not been taken yet (running, or ended and waiting in the mailbox).
    pub fn has_pending(&self, agent_id: &str) -> bool {
        // Held throughout: `finish` changes a task's status and fills the
        // mailbox under this lock, so the two checks agree.
        let mailboxes = lock(&self.mailboxes);
        let waiting = mailboxes
            .get(agent_id)
            .is_some_and(|m| !m.notifications.is_empty() || !m.messages.is_empty());
        waiting || self.with_children(agent_id, |c| c.iter().any(|t| t.notifies_later()))
    }

    /// How long `task` has made no progress: its own idle time, zero while
    /// one of its tool calls runs, and no more than the quiet time of a
    /// foreground child it is waiting for (a sub-agent's progress is its
    /// caller's).
    pub fn quiet_for(&self, task: &Task) -> Duration {
        if task.in_tool_call() {
            return Duration::ZERO;
        }
        let foreground: Vec<Arc<Task>> = self.with_children(&task.id, |c| {
            c.iter()
                .filter(|t| t.status() == TaskStatus::Running && !t.is_background())
                .cloned()
                .collect()
        });
        foreground
            .iter()
            .map(|c| self.quiet_for(c))
            .fold(task.idle(), Duration::min)
    }

    /// How many notifications `agent_id` still has to receive: waiting in
    /// its mailbox plus background children still running.
    pub fn pending_count(&self, agent_id: &str) -> usize {
        let mailboxes = lock(&self.mailboxes);
        let waiting = mailboxes.get(agent_id).map_or(0, |m| m.notifications.len());
        let running = self.with_children(agent_id, |c| {
            c.iter().filter(|t| t.notifies_later()).count()
        });
        waiting + running
    }

    /// Waits until something changes (a task ends, a message arrives).
    pub async fn changed(&self) {
        self.changed.notified().await;
    }

    /// Whether the mailbox of `agent_id` holds notifications right now.
    pub fn has_notifications(&self, agent_id: &str) -> bool {
        self.notification_count(agent_id) > 0
    }

    /// How many notifications the mailbox of `agent_id` holds right now.
    fn notification_count(&self, agent_id: &str) -> usize {
        lock(&self.mailboxes)
            .get(agent_id)
            .map_or(0, |m| m.notifications.len())
    }

    /// Stops every running task of this process (process end) and waits up
    /// to `grace` for them to record their end.
    pub async fn kill_all(&self, grace: Duration) {
        // Tasks on another host outlive this process: their notices wait
        // in the broker for `--resume`.
        let running: Vec<Arc<Task>> = self
            .all()
            .into_iter()
            .filter(|t| t.status() == TaskStatus::Running && !t.is_remote())
            .collect();
        for t in &running {
            t.cancel.cancel();
        }
        for t in &running {
            t.wait(grace).await;
        }
    }

    /// Running children of `agent_id` whose results go to its mailbox.
    pub fn running_background_children(&self, agent_id: &str) -> Vec<Arc<Task>> {
        self.with_children(agent_id, |c| {
            c.iter()
                .filter(|t| t.status() == TaskStatus::Running && t.is_background())
                .cloned()
                .collect()
        })
    }

    /// `f` of every task whose parent is `agent_id`, in the order they were
    /// made. Lock order: mailboxes, children, then a task's state.
    fn with_children<R>(&self, agent_id: &str, f: impl FnOnce(&[Arc<Task>]) -> R) -> R {
        f(lock(&self.children)
            .get(agent_id)
            .map_or(&[][..], Vec::as_slice))
    }

    /// Waits until `agent_id` has a notification or no pending children.
    pub async fn wait_for_notification(&self, agent_id: &str, cancel: &CancellationToken) {
        loop {
            let changed = self.changed.notified();
            if self.has_notifications(agent_id)
                || !self.has_pending(agent_id)
                || cancel.is_cancelled()
            {
                return;
            }
            tokio::select! {
                () = changed => {}
                () = cancel.cancelled() => return,
                // A safety net against a missed wake-up.
                () = tokio::time::sleep(Duration::from_millis(500)) => {}
            }
        }
    }

    /// Called when `agent_id` is idle and has notifications to answer:
    /// while more of its background children are still running, waits
    /// until `gap` passes with no further notification (never more than
    /// [`GATHER_GAPS`] gaps in all), so that children ending together are
    /// answered in one request instead of one request each. Returns at
    /// once when every child has reported (the usual case of one child),
    /// with a zero `gap`, or on cancellation.
    pub async fn gather_notifications(
        &self,
        agent_id: &str,
        gap: Duration,
        cancel: &CancellationToken,
    ) {
        if gap.is_zero() {
            return;
        }
        // Everything that can still arrive: new children cannot start
        // while their parent is idle, so this only shrinks.
        let expected = self.pending_count(agent_id);
        let deadline = Instant::now() + gap * GATHER_GAPS;
        let mut seen = self.notification_count(agent_id);
        let mut quiet_until = (Instant::now() + gap).min(deadline);
        loop {
            let changed = self.changed.notified();
            let now = self.notification_count(agent_id);
            if now == 0 || now >= expected || cancel.is_cancelled() {
                return;
            }
            if now != seen {
                seen = now;
                quiet_until = (Instant::now() + gap).min(deadline);
            }
            tokio::select! {
                () = changed => {}
                () = cancel.cancelled() => return,
                () = tokio::time::sleep_until(quiet_until.into()) => return,
            }
        }
    }
}

/// How many gaps of `agents.notification_gap_ms` an idle agent waits at
/// most for further notifications before answering those it has.
pub const GATHER_GAPS: u32 = 10;

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::config::{PermissionMode, SessionKind};

    fn spec(id: &str) -> SessionSpec {
        SessionSpec {
            agent_id: id.to_string(),
            parent_agent_id: Some("parent".to_string()),
            def: None,
            is_main: false,
            model: "m".to_string(),
            kind: SessionKind::NON_INTERACTIVE,
            mode: PermissionMode::Default,
            depth: 1,
            frozen: None,
            started_by_fork: false,
            max_turns: 1,
            cwd: PathBuf::from("."),
            tool_names: Vec::new(),
            wait_for_background: true,
            team: None,
            effort: None,
        }
    }

    fn background(reg: &TaskRegistry, id: &str) -> Arc<Task> {
        reg.create(NewTask {
            id: id.to_string(),
            description: "d".to_string(),
            agent_type: "t".to_string(),
            parent_agent_id: "parent".to_string(),
            tool_use_id: "u".to_string(),
            name: None,
            output_file: None,
            meta_file: None,
            meta: json!({}),
            spec: spec(id),
            background: true,
        })
        .0
    }

    fn result() -> TaskResult {
        TaskResult {
            status: TaskStatus::Completed,
            texts: None,
            error: None,
            problem: None,
            usage: Usage::default(),
            total_tokens: 0,
            tool_uses: 0,
            duration_ms: 0,
            worktree: None,
        }
    }

    /// Runs the end of a task against a parent deciding whether to wait,
    /// many times: whenever the parent sees nothing pending, the
    /// notification must already be in its hands. (Before `finish` held
    /// the mailbox lock across the status change, the parent could see the
    /// task ended and the mailbox empty, and leave without it.)
    #[test]
    fn a_notification_is_never_lost_when_the_parent_stops_waiting() {
        let rounds: usize = std::env::var("CADRE_STRESS_ROUNDS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(1_000);
        for round in 0..rounds {
            let reg = Arc::new(TaskRegistry::new(4));
            let task = background(&reg, &format!("a{round}"));
            let finisher = {
                let reg = Arc::clone(&reg);
                std::thread::spawn(move || {
                    reg.finish(&task, result(), Vec::new(), |_| format!("n{round}"));
                })
            };
            let mut got = Vec::new();
            loop {
                got.extend(reg.take_notifications("parent"));
                if !got.is_empty() {
                    break;
                }
                if !reg.has_pending("parent") {
                    got.extend(reg.take_notifications("parent"));
                    break;
                }
                std::hint::spin_loop();
            }
            finisher.join().unwrap();
            assert_eq!(got, vec![format!("n{round}")], "round {round}");
            assert!(reg.take_notifications("parent").is_empty());
        }
    }

    /// A SendMessage racing the child's last look at its inbox: the
    /// message is read by the child, or refused (and then resumes it),
    /// never accepted and left unread.
    #[test]
    fn a_message_racing_the_end_is_read_or_refused() {
        let rounds: usize = std::env::var("CADRE_STRESS_ROUNDS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(1_000);
        for round in 0..rounds {
            let reg = Arc::new(TaskRegistry::new(4));
            let id = format!("b{round}");
            let task = background(&reg, &id);
            let sender = {
                let reg = Arc::clone(&reg);
                let task = Arc::clone(&task);
                std::thread::spawn(move || reg.send(&task, "hello".to_string()))
            };
            // The child: a last look, a turn if something came, then the end.
            let mut read = reg.close_inbox(&id);
            if !read.is_empty() {
                read.extend(reg.close_inbox(&id));
            }
            let accepted = sender.join().unwrap();
            let late = if read.is_empty() {
                Vec::new()
            } else {
                // The extra turn ran; its own last look closes the inbox.
                reg.close_inbox(&id)
            };
            reg.finish(&task, result(), Vec::new(), |_| String::new());
            let unread = reg.restart(&task).map(|(_, u)| u).unwrap_or_default();
            let delivered = read.len() + late.len();
            if accepted {
                assert_eq!(delivered, 1, "round {round}: accepted but not read");
                assert!(unread.is_empty(), "round {round}");
            } else {
                assert_eq!(delivered, 0, "round {round}: refused but read");
            }
        }
    }

    /// A meta file has the bytes of its fixed fields copied into a map
    /// with each update inserted in turn (as meta files were written
    /// before): keys already there keep their place, new ones follow once.
    #[test]
    fn meta_files_apply_updates_as_map_inserts_do() {
        let base = json!({"agent_id": "a1", "status": "old", "worktree": null, "tools": ["Read"], "depth": 1});
        let Value::Object(base) = base else {
            unreachable!()
        };
        let update_lists: Vec<Vec<(&str, Value)>> = vec![
            vec![],
            vec![("status", json!("running")), ("background", json!(true))],
            vec![
                ("status", json!("completed")),
                ("worktree", json!({"path": "/w"})),
                ("usage", json!({"total_tokens": 3})),
                ("usage", json!({"total_tokens": 4})),
                ("depth", json!(2)),
                ("extra", json!([1, 2])),
                ("status", json!("killed")),
            ],
        ];
        for updates in update_lists {
            let updates: Vec<(String, Value)> = updates
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect();
            let mut expected = base.clone();
            for (k, v) in &updates {
                expected.insert(k.clone(), v.clone());
            }
            let file = MetaFile {
                base: &base,
                updates: &updates,
            };
            assert_eq!(
                String::from_utf8(serde_json::to_vec_pretty(&file).unwrap()).unwrap(),
                String::from_utf8(serde_json::to_vec_pretty(&Value::Object(expected)).unwrap())
                    .unwrap()
            );
        }
    }

    /// Ends `task` from another thread after `after`.
    fn finish_later(
        reg: &Arc<TaskRegistry>,
        task: Arc<Task>,
        after: Duration,
    ) -> std::thread::JoinHandle<()> {
        let reg = Arc::clone(reg);
        std::thread::spawn(move || {
            std::thread::sleep(after);
            let id = task.id.clone();
            reg.finish(&task, result(), Vec::new(), |_| id);
        })
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap()
    }

    /// Gathers for `parent` with `gap`; how long it took.
    fn gather(reg: &TaskRegistry, gap: Duration) -> Duration {
        let start = Instant::now();
        runtime().block_on(reg.gather_notifications("parent", gap, &CancellationToken::new()));
        start.elapsed()
    }

    #[test]
    fn gathering_returns_at_once_when_every_child_has_reported() {
        let reg = Arc::new(TaskRegistry::new(4));
        let only = background(&reg, "only");
        reg.finish(&only, result(), Vec::new(), |_| "only".into());
        // A gap this long would fail the test if it were waited for.
        assert!(gather(&reg, Duration::from_secs(30)) < Duration::from_secs(10));
        assert_eq!(reg.take_notifications("parent"), vec!["only"]);
    }

    #[test]
    fn gathering_waits_for_siblings_ending_within_the_gap() {
        let reg = Arc::new(TaskRegistry::new(4));
        let (a, b, c) = (
            background(&reg, "a"),
            background(&reg, "b"),
            background(&reg, "c"),
        );
        reg.finish(&a, result(), Vec::new(), |_| "a".into());
        let later = [
            finish_later(&reg, b, Duration::from_millis(50)),
            finish_later(&reg, c, Duration::from_millis(100)),
        ];
        // Returns when the last sibling reports, not after the gap.
        assert!(gather(&reg, Duration::from_secs(30)) < Duration::from_secs(10));
        assert_eq!(reg.take_notifications("parent"), vec!["a", "b", "c"]);
        for h in later {
            h.join().unwrap();
        }
    }

    #[test]
    fn gathering_stops_after_a_quiet_gap_while_a_child_still_runs() {
        let reg = Arc::new(TaskRegistry::new(4));
        let (a, slow) = (background(&reg, "a"), background(&reg, "slow"));
        reg.finish(&a, result(), Vec::new(), |_| "a".into());
        let took = gather(&reg, Duration::from_millis(50));
        assert!(took >= Duration::from_millis(50), "{took:?}");
        assert!(took < Duration::from_secs(10), "{took:?}");
        assert_eq!(slow.status(), TaskStatus::Running);
        assert_eq!(reg.take_notifications("parent"), vec!["a"]);
    }

    #[test]
    fn gathering_ends_while_notifications_keep_coming() {
        let reg = Arc::new(TaskRegistry::new(64));
        let first = background(&reg, "first");
        reg.finish(&first, result(), Vec::new(), |_| "first".into());
        // One child ends every 20 ms for 4 s: each arrives within the gap,
        // so only the limit of GATHER_GAPS gaps (1 s) ends the wait.
        let stream: Vec<Arc<Task>> = (0..200)
            .map(|i| background(&reg, &format!("s{i}")))
            .collect();
        let finisher = {
            let reg = Arc::clone(&reg);
            std::thread::spawn(move || {
                for t in stream {
                    std::thread::sleep(Duration::from_millis(20));
                    reg.finish(&t, result(), Vec::new(), |_| String::new());
                }
            })
        };
        let took = gather(&reg, Duration::from_millis(100));
        let got = reg.take_notifications("parent").len();
        assert!(
            got < 201,
            "returned before the stream ended ({got} notifications)"
        );
        assert!(took >= Duration::from_millis(100), "{took:?}");
        assert!(took < Duration::from_secs(3), "{took:?}");
        finisher.join().unwrap();
    }

    #[test]
    fn no_gap_or_a_cancelled_session_means_no_gathering() {
        let reg = Arc::new(TaskRegistry::new(4));
        let (a, _running) = (background(&reg, "a"), background(&reg, "b"));
        reg.finish(&a, result(), Vec::new(), |_| "a".into());
        assert!(gather(&reg, Duration::ZERO) < Duration::from_secs(10));
        let cancel = CancellationToken::new();
        cancel.cancel();
        let start = Instant::now();
        runtime().block_on(reg.gather_notifications("parent", Duration::from_secs(30), &cancel));
        assert!(start.elapsed() < Duration::from_secs(10));
    }
}
