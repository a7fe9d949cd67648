//! Transcripts: append-only JSONL, one line per message or event, written as
//! things happen.
//!
//! Each line is serialised completely in memory and written with a single
//! `write_all` on a file opened for appending, so a crash can lose at most
//! the line being written and never damages an earlier one. A meta file is
//! created in place the first time (nothing earlier to damage) and
//! rewritten through a temporary name renamed into place.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::Value;

use crate::message::Message;

/// Removes sessions under `dir` whose newest file is older than `days`
/// days (Claude Code's `cleanupPeriodDays`): a session's transcript
/// `<id>.jsonl` and its folder `<id>/`. Returns how many were removed.
/// Only sessions cadre wrote are candidates (a transcript named by a
/// session id whose first line is cadre's `session` line, or an older
/// cadre's folder holding a `main.jsonl`), never a link, so neither a
/// `transcripts.dir` pointed elsewhere nor Claude Code's own sessions
/// beside them are touched. Files it cannot read are left alone.
pub fn remove_old_sessions(dir: &Path, days: u32) -> usize {
    let max_age = std::time::Duration::from_secs(u64::from(days) * 24 * 60 * 60);
    let now = std::time::SystemTime::now();
    let real_dir = |p: &Path| std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_dir());
    let mut removed = 0;
    for (_, folder) in super::resume::session_folders(dir) {
        let main = super::resume::main_file(&folder);
        let old_layout = main.parent() == Some(folder.as_path());
        let ours = if old_layout {
            real_dir(&folder)
        } else {
            std::fs::symlink_metadata(&main).is_ok_and(|m| m.file_type().is_file())
                && written_by_cadre(&main)
        };
        if !ours {
            continue;
        }
        let mut newest = std::fs::metadata(&main).and_then(|m| m.modified()).ok();
        if real_dir(&folder)
            && let Some(t) = newest_modification(&folder)
        {
            newest = Some(newest.map_or(t, |n| n.max(t)));
        }
        let old = newest
            .and_then(|t| now.duration_since(t).ok())
            .is_some_and(|age| age > max_age);
        if !old {
            continue;
        }
        let folder_gone = !real_dir(&folder) || std::fs::remove_dir_all(&folder).is_ok();
        let main_gone = old_layout || std::fs::remove_file(&main).is_ok();
        if folder_gone && main_gone {
            removed += 1;
        }
    }
    removed
}

/// Whether the transcript at `path` starts with cadre's `session` line.
fn written_by_cadre(path: &Path) -> bool {
    use std::io::Read as _;
    let mut head = [0u8; 17];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut head))
        .is_ok_and(|()| &head == br#"{"type":"session""#)
}

fn newest_modification(dir: &Path) -> Option<std::time::SystemTime> {
    let mut newest = std::fs::metadata(dir).and_then(|m| m.modified()).ok();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).ok()?.flatten() {
            let Ok(meta) = e.metadata() else { continue };
            if meta.is_dir() {
                stack.push(e.path());
            }
            if let Ok(t) = meta.modified() {
                newest = Some(newest.map_or(t, |n| n.max(t)));
            }
        }
    }
    newest
}

/// A deadline after which a process may no longer write a task's files:
/// a worker of the fleet holds a task's lease until a deadline it renews
/// with each heartbeat the broker confirmed, and once that deadline has
/// passed another worker may have taken the task over. Every transcript
/// line, meta file and worktree cleanup of the task checks the fence just
/// before it writes; the first refused write closes the fence for good and
/// cancels `on_close` (the child stops). A process stalled past its lease
/// (SIGSTOP, a long pause) thus writes nothing when it wakes up, whatever
/// runs first.
#[derive(Debug)]
pub struct WriteFence {
    base: Instant,
    /// Milliseconds after `base` until which writes are allowed.
    until_ms: AtomicU64,
    closed: AtomicBool,
    /// Cancelled when the fence closes (the child's own token).
    on_close: std::sync::OnceLock<tokio_util::sync::CancellationToken>,
}

impl WriteFence {
    pub fn new(until: Instant) -> WriteFence {
        let base = Instant::now();
        let fence = WriteFence {
            base,
            until_ms: AtomicU64::new(0),
            closed: AtomicBool::new(false),
            on_close: std::sync::OnceLock::new(),
        };
        fence.extend(until);
        fence
    }

    /// Cancels `token` when the fence closes (at once if it is closed).
    pub fn on_close(&self, token: tokio_util::sync::CancellationToken) {
        let _ = self.on_close.set(token);
        if self.is_closed() {
            self.close();
        }
    }

    /// Moves the deadline to `until` (never back; nothing once closed).
    pub fn extend(&self, until: Instant) {
        let ms = u64::try_from(until.saturating_duration_since(self.base).as_millis())
            .unwrap_or(u64::MAX);
        self.until_ms.fetch_max(ms, Ordering::SeqCst);
    }

    /// The deadline as it is now.
    pub fn until(&self) -> Instant {
        self.base + Duration::from_millis(self.until_ms.load(Ordering::SeqCst))
    }

    /// Whether a write may happen now; past the deadline the fence closes
    /// (for good) and stops the child.
    pub fn open(&self) -> bool {
        if self.closed.load(Ordering::SeqCst) {
            return false;
        }
        if Instant::now() < self.until() {
            return true;
        }
        self.close();
        false
    }

    /// Closes the fence: no write passes any more, and the child stops.
    pub fn close(&self) {
        if !self.closed.swap(true, Ordering::SeqCst) {
            tracing::warn!(
                "lease deadline passed or task released: this process writes nothing more for the task"
            );
        }
        if let Some(t) = self.on_close.get() {
            t.cancel();
        }
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }
}

/// Where a transcript's lines go.
#[derive(Debug)]
enum Sink {
    /// Nowhere: transcripts are off, or writing failed.
    Closed,
    /// Kept in memory until [`Transcript::open_deferred`] creates the file.
    Deferred(Vec<u8>),
    Open(File),
}

/// The sink and the `uuid` of the last message line written, kept
/// together so that each message line names the one written before it
/// (`parentUuid`) in file order.
#[derive(Debug)]
struct State {
    sink: Sink,
    last_uuid: Option<String>,
}

/// One agent's transcript file. Writing never fails the run: an I/O error
/// is logged once and the transcript stops.
///
/// Message lines are Claude Code's transcript entries (`"type": "user"` or
/// `"assistant"`, with `uuid`, `parentUuid`, `sessionId`, `isSidechain`,
/// `cwd`, `version`, the message), so that Claude Code's `--resume` and the
/// SDKs' session readers read them; every other line is one of cadre's own
/// types, which those readers skip.
#[derive(Debug)]
pub struct Transcript {
    path: Option<PathBuf>,
    file: Mutex<State>,
    agent_id: String,
    parent_agent_id: Option<String>,
    /// The session the file belongs to (Claude Code's `sessionId`): the
    /// main transcript's name, or the session folder of a sub-agent's.
    session_id: String,
    /// Writes stop when it closes (a fleet worker's lease).
    fence: Option<std::sync::Arc<WriteFence>>,
    /// Woken after each line written (a fleet worker streams them).
    notify: Option<std::sync::Arc<tokio::sync::Notify>>,
    /// Asked, before each model request, to confirm that the lines
    /// written so far went where they are copied (a fleet worker: the
    /// broker).
    flush: Option<FlushRequests>,
}

/// Where a transcript asks for its lines to be copied out before a model
/// request: each request carries the sender its answer goes to (dropped
/// unanswered when they cannot be: the waiter goes on).
pub type FlushRequests = tokio::sync::mpsc::UnboundedSender<tokio::sync::oneshot::Sender<()>>;

/// The session id a transcript at `path` belongs to: `<dir>/<id>.jsonl`,
/// or `<dir>/<id>/subagents/agent-….jsonl` for a sub-agent.
fn session_id_of(path: &Path) -> String {
    let in_subagents = path
        .parent()
        .and_then(Path::file_name)
        .is_some_and(|n| n == super::resume::SUBAGENTS_DIR);
    let named = if in_subagents {
        path.parent()
            .and_then(Path::parent)
            .and_then(Path::file_name)
    } else {
        path.file_stem()
    };
    named
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The working directory written in message lines (`cwd`).
fn process_cwd() -> &'static str {
    static CWD: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    CWD.get_or_init(|| {
        std::env::current_dir()
            .map(|d| d.display().to_string())
            .unwrap_or_default()
    })
}

/// Where every transcript line and sub-agent meta file also goes, when
/// set: the SDKs' session store (`--session-mirror`). Called with the
/// transcript's path and the lines written (each a JSON object and a
/// newline), after they are in the file.
pub type Mirror = Box<dyn Fn(&Path, &[u8]) + Send + Sync>;

static MIRROR: std::sync::OnceLock<Mirror> = std::sync::OnceLock::new();

/// Sends every line written from now on to `mirror` too (once per
/// process; a second call is ignored).
pub fn set_mirror(mirror: Mirror) {
    let _ = MIRROR.set(mirror);
}

fn mirror(path: Option<&Path>, lines: &[u8]) {
    if let (Some(m), Some(p)) = (MIRROR.get(), path)
        && !lines.is_empty()
    {
        m(p, lines);
    }
}

/// A sub-agent's meta file written to `path`: mirrored as Claude Code
/// mirrors its sidecar, an `agent_metadata` entry of the sub-agent's
/// transcript.
fn mirror_meta<T: Serialize>(path: &Path, value: &T) {
    if MIRROR.get().is_none() {
        return;
    }
    let Some(stem) = path.to_str().and_then(|p| p.strip_suffix(".meta.json")) else {
        return;
    };
    let Ok(Value::Object(fields)) = serde_json::to_value(value) else {
        return;
    };
    let mut entry = serde_json::Map::new();
    entry.insert("type".into(), Value::from("agent_metadata"));
    entry.extend(fields);
    let mut line = serde_json::to_vec(&entry).unwrap_or_default();
    line.push(b'\n');
    mirror(Some(Path::new(&format!("{stem}.jsonl"))), &line);
}

/// The `version` written in message lines.
const WRITER_VERSION: &str = concat!("cadre-", env!("CARGO_PKG_VERSION"));

/// A new random (version 4) UUID, as Claude Code names sessions and lines.
pub fn new_uuid() -> String {
    let b: [u8; 16] = rand::random();
    let v = (u128::from_be_bytes(b) & !(0xf_u128 << 76) & !(0x3_u128 << 62))
        | (0x4_u128 << 76)
        | (0x2_u128 << 62);
    let h = format!("{v:032x}");
    format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    )
}

impl Transcript {
    /// Writes only while `fence` is open (see [`WriteFence`]).
    #[must_use]
    pub fn fenced(mut self, fence: std::sync::Arc<WriteFence>) -> Self {
        self.fence = Some(fence);
        self
    }

    /// Wakes `notify` after each line it writes (a fleet worker publishes
    /// the new lines to the broker).
    #[must_use]
    pub fn notifying(mut self, notify: std::sync::Arc<tokio::sync::Notify>) -> Self {
        self.notify = Some(notify);
        self
    }

    /// Makes [`Transcript::flushed`] wait for `requests`' answer (a fleet
    /// worker: the lines written so far are on the broker, so that a
    /// takeover after a kill sees whatever the model was sent).
    #[must_use]
    pub fn flushing(mut self, requests: FlushRequests) -> Self {
        self.flush = Some(requests);
        self
    }

    /// Waits until the lines written so far went where they are copied
    /// (at once when they are not copied anywhere).
    pub async fn flushed(&self) {
        if let Some(requests) = &self.flush {
            let (done, answer) = tokio::sync::oneshot::channel();
            if requests.send(done).is_ok() {
                let _ = answer.await;
            }
        }
    }

    /// Appends a line another process's writer made (a fleet worker's,
    /// through the broker), as it is.
    pub fn copied_line(&self, line: &[u8]) {
        let mut bytes = Vec::with_capacity(line.len() + 1);
        bytes.extend_from_slice(line);
        bytes.push(b'\n');
        self.write_line(&bytes);
    }

    /// A transcript that writes nothing (transcripts disabled).
    pub fn disabled(agent_id: &str, parent_agent_id: Option<&str>) -> Self {
        Transcript {
            path: None,
            file: Mutex::new(State {
                sink: Sink::Closed,
                last_uuid: None,
            }),
            agent_id: agent_id.into(),
            parent_agent_id: parent_agent_id.map(Into::into),
            session_id: String::new(),
            fence: None,
            notify: None,
            flush: None,
        }
    }

    /// Opens (creating folders) `path` for appending. The first message
    /// line written names the last one already in the file as its parent
    /// (see [`super::resume::last_line_uuid`]).
    pub fn open(path: PathBuf, agent_id: &str, parent_agent_id: Option<&str>) -> Self {
        let last_uuid = super::resume::last_line_uuid(&path);
        let file = path
            .parent()
            .map_or(Ok(()), fs_err::create_dir_all)
            .and_then(|()| OpenOptions::new().create(true).append(true).open(&path));
        let file = match file {
            Ok(f) => Sink::Open(f),
            Err(e) => {
                tracing::warn!("cannot open transcript {}: {e}", path.display());
                Sink::Closed
            }
        };
        Transcript {
            session_id: session_id_of(&path),
            path: Some(path),
            file: Mutex::new(State {
                sink: file,
                last_uuid,
            }),
            agent_id: agent_id.into(),
            parent_agent_id: parent_agent_id.map(Into::into),
            fence: None,
            notify: None,
            flush: None,
        }
    }

    /// Makes the next message line's parent `uuid` (the last message of a
    /// transcript read back, when another writer's lines end the file).
    pub fn chain_after(&self, uuid: Option<String>) {
        if let (Some(u), Ok(mut g)) = (uuid, self.file.lock()) {
            g.last_uuid = Some(u);
        }
    }

    /// A transcript for `path` whose file is created later, by
    /// [`Transcript::open_deferred`]; lines recorded until then are kept
    /// in memory and written first. A parent starting many sub-agents in
    /// one turn thus creates none of their files itself: each child
    /// creates its own when it starts.
    pub fn deferred(path: PathBuf, agent_id: &str, parent_agent_id: Option<&str>) -> Self {
        Transcript {
            session_id: session_id_of(&path),
            path: Some(path),
            file: Mutex::new(State {
                sink: Sink::Deferred(Vec::new()),
                last_uuid: None,
            }),
            agent_id: agent_id.into(),
            parent_agent_id: parent_agent_id.map(Into::into),
            fence: None,
            notify: None,
            flush: None,
        }
    }

    /// Creates the file of a [`Transcript::deferred`] (and its folders)
    /// and writes the lines kept so far. Blocking; does nothing for a
    /// transcript already open or closed.
    pub fn open_deferred(&self) {
        let Some(path) = &self.path else { return };
        let Ok(mut guard) = self.file.lock() else {
            return;
        };
        let Sink::Deferred(kept) = &guard.sink else {
            return;
        };
        let opened = path
            .parent()
            .map_or(Ok(()), fs_err::create_dir_all)
            .and_then(|()| OpenOptions::new().create(true).append(true).open(path))
            .and_then(|mut f| f.write_all(kept).map(|()| f));
        if opened.is_ok() {
            mirror(Some(path), kept);
        }
        guard.sink = match opened {
            Ok(f) => Sink::Open(f),
            Err(e) => {
                tracing::warn!("cannot open transcript {}: {e}", path.display());
                Sink::Closed
            }
        };
    }

    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    pub fn agent_id(&self) -> &str {
        &self.agent_id
    }

    /// Appends a message line; returns its `uuid` (none when nothing was
    /// written).
    pub fn message(&self, message: &Message) -> Option<String> {
        self.message_line(message, &[])
    }

    /// Appends a message line for blocks joined to the user message that
    /// ends the history (one never sent yet): a reader appends them to that
    /// message instead of starting a new one (Claude Code joins two user
    /// messages in a row when it sends them, too).
    /// The line is `isMeta` for Claude Code's readers: what is joined is
    /// never typed by the user (listings, notifications), so the SDKs'
    /// `get_session_messages` leaves it out as it leaves out Claude Code's
    /// own meta messages, and `--resume` still sends it.
    pub fn joined_message(&self, message: &Message) -> Option<String> {
        self.message_line(message, &[("isMeta", &true), ("joined", &true)])
    }

    /// Appends a message line for an assistant message whose tool calls
    /// `converted` (ids) the provider read out of its text: the line carries
    /// `"converted_from_text": true` and the ids. Without any, a plain line.
    pub fn assistant_message(&self, message: &Message, converted: &[String]) -> Option<String> {
        if converted.is_empty() {
            self.message(message)
        } else {
            self.message_line(
                message,
                &[
                    ("converted_from_text", &true as &dyn JsonField),
                    ("converted_tool_calls", &converted),
                ],
            )
        }
    }

    /// Appends an event line: `kind` plus the fields of `data` (an object).
    pub fn record(&self, kind: &str, data: Value) {
        let Value::Object(fields) = data else {
            return self.record_fields(kind, &[]);
        };
        let pairs: Vec<(&str, &dyn JsonField)> = fields
            .iter()
            .map(|(k, v)| (k.as_str(), v as &dyn JsonField))
            .collect();
        self.record_fields(kind, &pairs);
    }

    /// Appends a line: the line's own fields (kind, agent ids, time), then
    /// `fields` in order, inserted as into a map (see [`inserted`]) and
    /// written straight to JSON: a message is not copied into a `Value`
    /// first (a parent's message holding a thousand tool results is
    /// large). The bytes are those of the same object built as a `Value`.
    pub(crate) fn record_fields(&self, kind: &str, fields: &[(&str, &dyn JsonField)]) {
        let mut bytes = Vec::with_capacity(256);
        let time = crate::clock::now_rfc3339();
        let head: [(&str, &dyn JsonField); 4] = [
            ("type", &kind),
            ("agent_id", &self.agent_id),
            ("parent_agent_id", &self.parent_agent_id),
            ("timestamp", &time),
        ];
        if write_object(&mut bytes, &inserted(&head, fields)).is_err() {
            return;
        }
        self.write_line(&bytes);
    }

    /// Appends a line: the line's own fields (kind, agent ids, time), then
    /// `body`'s (a struct), written by serde. Same bytes as
    /// [`Transcript::record_fields`] with those fields, none of which may
    /// be one of the line's own.
    pub(crate) fn record_line<T: Serialize>(&self, kind: &str, body: &T) {
        #[derive(Serialize)]
        struct Line<'a, T> {
            #[serde(rename = "type")]
            kind: &'a str,
            agent_id: &'a str,
            parent_agent_id: &'a Option<String>,
            timestamp: &'a str,
            #[serde(flatten)]
            body: &'a T,
        }
        let time = crate::clock::now_rfc3339();
        let line = Line {
            kind,
            agent_id: &self.agent_id,
            parent_agent_id: &self.parent_agent_id,
            timestamp: &time,
            body,
        };
        let mut bytes = Vec::with_capacity(256);
        if serde_json::to_writer(&mut bytes, &line).is_err() {
            return;
        }
        bytes.push(b'\n');
        self.write_line(&bytes);
    }

    /// After cadre's own `compact` line: the compaction as Claude Code
    /// writes one, so that its `--resume` and the SDKs' readers go on from
    /// the summary. A `system` `compact_boundary` line that starts a new
    /// chain (`parentUuid` null, `logicalParentUuid` the last message),
    /// the summary as an `isCompactSummary` user line, then a copy of each
    /// message the compaction `kept`. Every one is marked `"shadow": true`:
    /// cadre's reader rebuilds the history from the `compact` line and
    /// skips them. One line per write, as any other.
    pub fn compaction_view(
        &self,
        trigger: &str,
        summary: &Message,
        kept: &[std::sync::Arc<Message>],
    ) {
        {
            let Ok(mut guard) = self.file.lock() else {
                return;
            };
            if matches!(guard.sink, Sink::Closed) {
                return;
            }
            let uuid = new_uuid();
            let time = crate::clock::now_rfc3339();
            let logical = guard.last_uuid.clone();
            let sidechain = self.parent_agent_id.is_some();
            let meta = serde_json::json!({"trigger": trigger});
            let fields: [(&str, &dyn JsonField); 15] = [
                ("type", &"system"),
                ("subtype", &"compact_boundary"),
                ("content", &"Conversation compacted"),
                ("uuid", &uuid),
                ("parentUuid", &None::<String>),
                ("logicalParentUuid", &logical),
                ("isSidechain", &sidechain),
                ("isMeta", &false),
                ("level", &"info"),
                ("compactMetadata", &meta),
                ("sessionId", &self.session_id),
                ("timestamp", &time),
                ("agent_id", &self.agent_id),
                ("parent_agent_id", &self.parent_agent_id),
                ("shadow", &true),
            ];
            let mut bytes = Vec::with_capacity(512);
            if write_object(&mut bytes, &fields).is_err() {
                return;
            }
            if !self.write_locked(&mut guard, &bytes) {
                return;
            }
            guard.last_uuid = Some(uuid);
        }
        self.message_line(
            summary,
            &[
                ("isCompactSummary", &true as &dyn JsonField),
                ("shadow", &true),
            ],
        );
        for m in kept {
            self.message_line(m, &[("shadow", &true)]);
        }
    }

    /// Appends a message as Claude Code's transcript entry: `type` is the
    /// role, then the entry's ids (`uuid`, `parentUuid`: the message line
    /// before it), `isSidechain` (and `agentId`) for a sub-agent, the
    /// session, time, folder and writer; then cadre's own `agent_id`,
    /// `parent_agent_id`, the message and `extra` (which Claude Code's
    /// readers ignore).
    fn message_line(&self, message: &Message, extra: &[(&str, &dyn JsonField)]) -> Option<String> {
        let role = match message.role {
            crate::message::Role::User => "user",
            crate::message::Role::Assistant => "assistant",
        };
        let time = crate::clock::now_rfc3339();
        let uuid = new_uuid();
        let sidechain = self.parent_agent_id.is_some();
        let cwd = process_cwd();
        let written = AsWritten(message);
        let Ok(mut guard) = self.file.lock() else {
            return None;
        };
        if matches!(guard.sink, Sink::Closed) {
            return None;
        }
        let parent = guard.last_uuid.clone();
        let mut fields: Vec<(&str, &dyn JsonField)> = vec![
            ("type", &role),
            ("uuid", &uuid),
            ("parentUuid", &parent),
            ("isSidechain", &sidechain),
        ];
        if sidechain {
            fields.push(("agentId", &self.agent_id));
        }
        fields.extend([
            ("sessionId", &self.session_id as &dyn JsonField),
            ("timestamp", &time),
            ("cwd", &cwd),
            ("version", &WRITER_VERSION),
            ("userType", &"external"),
            ("agent_id", &self.agent_id),
            ("parent_agent_id", &self.parent_agent_id),
            ("message", &written),
        ]);
        let mut bytes = Vec::with_capacity(512);
        write_object(&mut bytes, &inserted(&fields, extra)).ok()?;
        if !self.write_locked(&mut guard, &bytes) {
            return None;
        }
        guard.last_uuid = Some(uuid.clone());
        Some(uuid)
    }

    fn write_line(&self, bytes: &[u8]) {
        let Ok(mut guard) = self.file.lock() else {
            return;
        };
        self.write_locked(&mut guard, bytes);
    }

    /// Writes one line (a single `write_all`) unless the fence is closed;
    /// whether it was written or kept.
    fn write_locked(&self, state: &mut State, bytes: &[u8]) -> bool {
        if self.fence.as_ref().is_some_and(|f| !f.open()) {
            return false;
        }
        match &mut state.sink {
            Sink::Open(f) => {
                if let Err(e) = f.write_all(bytes) {
                    tracing::warn!(
                        "transcript {}: {e}; further lines are dropped",
                        self.path.as_deref().unwrap_or(Path::new("?")).display()
                    );
                    state.sink = Sink::Closed;
                    return false;
                }
                if let Some(n) = &self.notify {
                    n.notify_one();
                }
                mirror(self.path.as_deref(), bytes);
                true
            }
            Sink::Deferred(kept) => {
                kept.extend_from_slice(bytes);
                true
            }
            Sink::Closed => false,
        }
    }
}

/// Writes `fields` as one JSON object and a newline.
fn write_object(out: &mut Vec<u8>, fields: &[(&str, &dyn JsonField)]) -> serde_json::Result<()> {
    for (i, (key, value)) in fields.iter().enumerate() {
        out.push(if i == 0 { b'{' } else { b',' });
        serde_json::to_writer(&mut *out, key)?;
        out.push(b':');
        value.write_json(out)?;
    }
    if fields.is_empty() {
        out.push(b'{');
    }
    out.extend_from_slice(b"}\n");
    Ok(())
}

/// The entries of a JSON object that holds `base` after `updates` were
/// inserted into it in order, as into a map: a key already there keeps its
/// place and takes the last value given for it; a new key goes at the end,
/// once, with its last value.
pub(crate) fn inserted<'a, V: ?Sized>(
    base: &[(&'a str, &'a V)],
    updates: &[(&'a str, &'a V)],
) -> Vec<(&'a str, &'a V)> {
    fn last<'a, V: ?Sized>(updates: &[(&'a str, &'a V)], key: &str, or: &'a V) -> &'a V {
        updates
            .iter()
            .rev()
            .find(|(k, _)| *k == key)
            .map_or(or, |(_, v)| *v)
    }
    let mut out: Vec<(&str, &V)> = base
        .iter()
        .map(|(k, v)| (*k, last(updates, k, *v)))
        .collect();
    for (i, (key, value)) in updates.iter().enumerate() {
        let new =
            !base.iter().any(|(k, _)| k == key) && !updates[..i].iter().any(|(k, _)| k == key);
        if new {
            out.push((*key, last(updates, key, *value)));
        }
    }
    out
}

/// A message as a message line holds it: a user message that is one text
/// block (a prompt) has its text as `content`, as Claude Code writes a
/// prompt (the SDKs compare it with the prompt sent); everything else as
/// the message serialises. Both read back to the same message.
struct AsWritten<'a>(&'a Message);

impl JsonField for AsWritten<'_> {
    fn write_json(&self, out: &mut Vec<u8>) -> serde_json::Result<()> {
        match (self.0.role, self.0.content.as_slice()) {
            (crate::message::Role::User, [crate::message::ContentBlock::Text { text }]) => {
                out.extend_from_slice(br#"{"role":"user","content":"#);
                serde_json::to_writer(&mut *out, text)?;
                out.push(b'}');
                Ok(())
            }
            _ => serde_json::to_writer(out, self.0),
        }
    }
}

/// A value a transcript line writes as JSON (the fields of one line have
/// different types).
pub(crate) trait JsonField {
    fn write_json(&self, out: &mut Vec<u8>) -> serde_json::Result<()>;
}

impl<T: serde::Serialize + ?Sized> JsonField for T {
    fn write_json(&self, out: &mut Vec<u8>) -> serde_json::Result<()> {
        serde_json::to_writer(out, self)
    }
}

/// Writes `value` as pretty JSON to `path` if no file is there yet:
/// created and written at once (one new file instead of a temporary one
/// and a rename). An existing file is left as it is.
pub fn write_json_new<T: Serialize>(path: &Path, value: &T) {
    let result = (|| -> std::io::Result<()> {
        let bytes = serde_json::to_vec_pretty(value).map_err(std::io::Error::other)?;
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)
            .and_then(|mut f| f.write_all(&bytes))
    })();
    match result {
        Ok(()) => mirror_meta(path, value),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => tracing::warn!("cannot write {}: {e}", path.display()),
    }
}

/// Writes `value` as pretty JSON over the file at `path`, in place: the
/// same file written from its start and cut to the new length, without a
/// temporary file and a rename. A rename over a file deletes the old one,
/// and on ext4 each file created soon after skips every inode deleted in
/// the last seconds: a thousand children ending at once made each new
/// file cost more than the one before. Falls back to
/// [`write_json_atomic`] when there is no file yet. A reader at that very
/// moment may see a mix of the two versions (a few hundred bytes, one
/// `write`): used only where such a reader skips the file and loses
/// nothing by it.
pub fn write_json_over<T: Serialize>(path: &Path, value: &T) {
    let result = (|| -> std::io::Result<()> {
        let bytes = serde_json::to_vec_pretty(value).map_err(std::io::Error::other)?;
        let mut f = OpenOptions::new().write(true).open(path)?;
        f.write_all(&bytes)?;
        f.set_len(u64::try_from(bytes.len()).unwrap_or(u64::MAX))
    })();
    match result {
        Ok(()) => mirror_meta(path, value),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => write_json_atomic(path, value),
        Err(e) => tracing::warn!("cannot write {}: {e}", path.display()),
    }
}

/// Writes `value` as pretty JSON to `path` atomically (temp file + rename).
pub fn write_json_atomic<T: Serialize>(path: &Path, value: &T) {
    let result = (|| -> std::io::Result<()> {
        if let Some(dir) = path.parent() {
            fs_err::create_dir_all(dir)?;
        }
        let tmp = path.with_extension("json.tmp");
        let bytes = serde_json::to_vec_pretty(value).map_err(std::io::Error::other)?;
        fs_err::write(&tmp, bytes)?;
        fs_err::rename(&tmp, path)
    })();
    match result {
        Ok(()) => mirror_meta(path, value),
        Err(e) => tracing::warn!("cannot write {}: {e}", path.display()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A flushing transcript's `flushed` ends only once its flush is
    /// answered (or can no longer be); without one it ends at once.
    #[tokio::test]
    async fn flushed_waits_for_the_copy_to_answer() {
        let dir = tempfile::tempdir().unwrap();
        let plain = Transcript::open(dir.path().join("a.jsonl"), "a", None);
        plain.flushed().await;
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let t = Transcript::open(dir.path().join("b.jsonl"), "b", None).flushing(tx);
        let waiting = tokio::spawn(async move {
            t.flushed().await;
            t
        });
        let done = rx.recv().await.unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiting.is_finished(), "flushed before its answer");
        done.send(()).unwrap();
        let t = waiting.await.unwrap();
        // The copy is gone: nothing to wait for.
        drop(rx);
        t.flushed().await;
    }

    /// Every kind of line, written straight to JSON, has the bytes of the
    /// same object built as a `Value`: message lines as Claude Code's
    /// entries (its fields first, each line's `parentUuid` the `uuid` of
    /// the message line before it, across a reopening of the file), the
    /// others as cadre's own lines.
    #[test]
    fn lines_have_the_bytes_of_values() {
        use crate::message::ContentBlock;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s1.jsonl");
        let message = Message::user(vec![
            ContentBlock::tool_result("t1", "a \"quoted\" ünïcode result\n", true),
            ContentBlock::text("and text"),
        ]);
        let converted = vec!["t1".to_string()];
        for parent in [None, Some("main")] {
            let t = Transcript::open(path.clone(), "a1", parent);
            t.message(&message);
            t.joined_message(&message);
            t.assistant_message(&message, &converted);
            t.record("spawn", json!({"model": "m", "tools": ["Read"], "n": 1.5}));
            t.record("odd", json!({"timestamp": "mine", "x": null}));
            t.record("nothing", Value::Null);
        }
        let datas = [
            json!({"message": message}),
            json!({"message": message, "isMeta": true, "joined": true}),
            json!({"message": message, "converted_from_text": true, "converted_tool_calls": converted}),
            json!({"model": "m", "tools": ["Read"], "n": 1.5}),
            json!({"timestamp": "mine", "x": null}),
            json!({}),
        ];
        let kinds = ["user", "user", "user", "spawn", "odd", "nothing"];
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 12);
        let mut last_uuid = Value::Null;
        for (i, line) in lines.iter().enumerate() {
            let parent = if i < 6 { Value::Null } else { json!("main") };
            let written: Value = serde_json::from_str(line).unwrap();
            let mut expected = serde_json::Map::new();
            expected.insert("type".into(), json!(kinds[i % 6]));
            if i % 6 < 3 {
                assert!(super::super::resume::is_uuid(
                    written["uuid"].as_str().unwrap()
                ));
                expected.insert("uuid".into(), written["uuid"].clone());
                expected.insert("parentUuid".into(), last_uuid.clone());
                expected.insert("isSidechain".into(), json!(i >= 6));
                if i >= 6 {
                    expected.insert("agentId".into(), json!("a1"));
                }
                expected.insert("sessionId".into(), json!("s1"));
                expected.insert("timestamp".into(), written["timestamp"].clone());
                expected.insert("cwd".into(), written["cwd"].clone());
                expected.insert("version".into(), json!(WRITER_VERSION));
                expected.insert("userType".into(), json!("external"));
                last_uuid = written["uuid"].clone();
            }
            expected.insert("agent_id".into(), json!("a1"));
            expected.insert("parent_agent_id".into(), parent);
            expected.insert("timestamp".into(), written["timestamp"].clone());
            if let Value::Object(fields) = datas[i % 6].clone() {
                expected.extend(fields);
            }
            assert_eq!(*line, serde_json::to_string(&expected).unwrap(), "line {i}");
        }
    }

    /// A prompt (a user message of one text block) is written with its
    /// text as `content`, as Claude Code writes it, and reads back as the
    /// same message.
    #[test]
    fn a_prompt_is_written_as_claude_code_writes_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s1.jsonl");
        let t = Transcript::open(path.clone(), "main", None);
        let prompt = Message::user_text("say \"hi\"\n");
        t.message(&prompt);
        let line: Value =
            serde_json::from_str(std::fs::read_to_string(&path).unwrap().trim_end()).unwrap();
        assert_eq!(
            line["message"],
            json!({"role": "user", "content": "say \"hi\"\n"})
        );
        let back = super::super::resume::load(&path).unwrap();
        assert_eq!(*back.history[0], prompt);
    }

    #[test]
    fn new_uuids_are_version_4() {
        let a = new_uuid();
        assert!(super::super::resume::is_uuid(&a), "{a}");
        assert_eq!(&a[14..15], "4");
        assert!(matches!(&a[19..20], "8" | "9" | "a" | "b"), "{a}");
        assert_ne!(a, new_uuid());
    }

    /// Lines pass while the fence's deadline is ahead; an extension moves
    /// it; past it the line is dropped, the fence stays closed (a later
    /// extension does not reopen it) and the child's token is cancelled.
    #[test]
    fn a_fenced_transcript_writes_nothing_past_its_deadline() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        let fence =
            std::sync::Arc::new(WriteFence::new(Instant::now() + Duration::from_secs(3600)));
        let child = tokio_util::sync::CancellationToken::new();
        fence.on_close(child.clone());
        let t = Transcript::open(path.clone(), "a1", Some("main"))
            .fenced(std::sync::Arc::clone(&fence));
        t.record("first", json!({}));
        let far = fence.until();
        fence.extend(Instant::now());
        assert_eq!(fence.until(), far, "a deadline never moves back");
        assert!(fence.open() && !child.is_cancelled());
        let short = WriteFence::new(Instant::now());
        short.on_close(child.clone());
        let t2 =
            Transcript::open(path.clone(), "a1", Some("main")).fenced(std::sync::Arc::new(short));
        t2.record("late", json!({}));
        assert!(child.is_cancelled(), "a refused write stops the child");
        fence.close();
        fence.extend(Instant::now() + Duration::from_secs(7200));
        t.record("after close", json!({}));
        let text = fs_err::read_to_string(&path).unwrap();
        let kinds: Vec<String> = text
            .lines()
            .map(|l| {
                serde_json::from_str::<Value>(l).unwrap()["type"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect();
        assert_eq!(kinds, ["first"]);
    }

    #[test]
    fn a_deferred_transcript_writes_its_kept_lines_first_when_opened() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s/subagents/agent-a2.jsonl");
        let t = Transcript::deferred(p.clone(), "a2", Some("main"));
        t.record("spawn", json!({"n": 1}));
        assert!(!p.exists(), "no file before it is opened");
        t.open_deferred();
        t.record("result", json!({"n": 2}));
        t.open_deferred();
        let text = std::fs::read_to_string(&p).unwrap();
        let kinds: Vec<String> = text
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap()["type"].to_string())
            .collect();
        assert_eq!(kinds, ["\"spawn\"", "\"result\""]);
    }

    #[test]
    fn a_new_json_file_is_written_once_and_an_existing_one_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("m.meta.json");
        write_json_new(&p, &json!({"status": "running"}));
        write_json_atomic(&p, &json!({"status": "killed"}));
        write_json_new(&p, &json!({"status": "running"}));
        let v: Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
        assert_eq!(v["status"], "killed");
    }

    /// An existing file is rewritten in place (same inode, no temporary
    /// file left) and cut to the new length; a missing one is created.
    #[test]
    fn a_json_file_is_rewritten_in_place_and_cut_to_its_new_length() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("m.meta.json");
        write_json_over(
            &p,
            &json!({"status": "running", "note": "a longer first version"}),
        );
        let inode = std::fs::metadata(&p).unwrap().ino();
        write_json_over(&p, &json!({"status": "killed"}));
        assert_eq!(std::fs::metadata(&p).unwrap().ino(), inode);
        let v: Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
        assert_eq!(v, json!({"status": "killed"}));
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("m.meta.json")]);
    }

    #[test]
    fn every_line_is_one_json_object_with_ids() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s/subagents/agent-a1.jsonl");
        let t = Transcript::open(p.clone(), "a1", Some("main"));
        t.message(&Message::user_text("hi\nthere"));
        t.record("spawn", json!({"model": "m"}));
        let text = std::fs::read_to_string(&p).unwrap();
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0]["type"], "user");
        assert_eq!(lines[0]["agent_id"], "a1");
        assert_eq!(lines[0]["parent_agent_id"], "main");
        assert_eq!(lines[0]["message"]["content"], "hi\nthere");
        assert_eq!(lines[0]["sessionId"], "s");
        assert_eq!(lines[0]["agentId"], "a1");
        assert_eq!(lines[0]["isSidechain"], true);
        assert_eq!(lines[1]["model"], "m");
        assert!(lines[1]["timestamp"].as_str().unwrap().ends_with('Z'));
    }
}
