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

/// Removes session folders under `dir` whose newest file is older than
/// `days` days (Claude Code's `cleanupPeriodDays`). Returns how many were
/// removed. Only real folders (not links) named like a session and holding
/// a `main.jsonl` are candidates, so a `transcripts.dir` pointed elsewhere
/// cannot make cadre delete anything else. Folders it cannot read are left
/// alone.
pub fn remove_old_sessions(dir: &Path, days: u32) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let max_age = std::time::Duration::from_secs(u64::from(days) * 24 * 60 * 60);
    let now = std::time::SystemTime::now();
    let mut removed = 0;
    for e in entries.flatten() {
        let path = e.path();
        let is_real_dir = e.file_type().is_ok_and(|t| t.is_dir());
        let named = e
            .file_name()
            .to_str()
            .is_some_and(super::resume::is_session_id);
        if !is_real_dir || !named || !path.join("main.jsonl").is_file() {
            continue;
        }
        let newest = newest_modification(&path);
        let old = newest
            .and_then(|t| now.duration_since(t).ok())
            .is_some_and(|age| age > max_age);
        if old && std::fs::remove_dir_all(&path).is_ok() {
            removed += 1;
        }
    }
    removed
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

/// One agent's transcript file. Writing never fails the run: an I/O error
/// is logged once and the transcript stops.
#[derive(Debug)]
pub struct Transcript {
    path: Option<PathBuf>,
    file: Mutex<Sink>,
    agent_id: String,
    parent_agent_id: Option<String>,
    /// Writes stop when it closes (a fleet worker's lease).
    fence: Option<std::sync::Arc<WriteFence>>,
    /// Woken after each line written (a fleet worker streams them).
    notify: Option<std::sync::Arc<tokio::sync::Notify>>,
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
            file: Mutex::new(Sink::Closed),
            agent_id: agent_id.into(),
            parent_agent_id: parent_agent_id.map(Into::into),
            fence: None,
            notify: None,
        }
    }

    /// Opens (creating folders) `path` for appending.
    pub fn open(path: PathBuf, agent_id: &str, parent_agent_id: Option<&str>) -> Self {
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
            path: Some(path),
            file: Mutex::new(file),
            agent_id: agent_id.into(),
            parent_agent_id: parent_agent_id.map(Into::into),
            fence: None,
            notify: None,
        }
    }

    /// A transcript for `path` whose file is created later, by
    /// [`Transcript::open_deferred`]; lines recorded until then are kept
    /// in memory and written first. A parent starting many sub-agents in
    /// one turn thus creates none of their files itself: each child
    /// creates its own when it starts.
    pub fn deferred(path: PathBuf, agent_id: &str, parent_agent_id: Option<&str>) -> Self {
        Transcript {
            path: Some(path),
            file: Mutex::new(Sink::Deferred(Vec::new())),
            agent_id: agent_id.into(),
            parent_agent_id: parent_agent_id.map(Into::into),
            fence: None,
            notify: None,
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
        let Sink::Deferred(kept) = &*guard else {
            return;
        };
        let opened = path
            .parent()
            .map_or(Ok(()), fs_err::create_dir_all)
            .and_then(|()| OpenOptions::new().create(true).append(true).open(path))
            .and_then(|mut f| f.write_all(kept).map(|()| f));
        *guard = match opened {
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

    /// Appends a message line.
    pub fn message(&self, message: &Message) {
        self.record_fields("message", &[("message", &message)]);
    }

    /// Appends a message line for blocks joined to the user message that
    /// ends the history (one never sent yet): a reader appends them to that
    /// message instead of starting a new one.
    pub fn joined_message(&self, message: &Message) {
        self.record_fields("message", &[("message", &message), ("joined", &true)]);
    }

    /// Appends a message line for an assistant message whose tool calls
    /// `converted` (ids) the provider read out of its text: the line carries
    /// `"converted_from_text": true` and the ids. Without any, a plain line.
    pub fn assistant_message(&self, message: &Message, converted: &[String]) {
        if converted.is_empty() {
            self.message(message);
        } else {
            self.record_fields(
                "message",
                &[
                    ("message", &message),
                    ("converted_from_text", &true),
                    ("converted_tool_calls", &converted),
                ],
            );
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
        for (i, (key, value)) in inserted(&head, fields).into_iter().enumerate() {
            bytes.push(if i == 0 { b'{' } else { b',' });
            if serde_json::to_writer(&mut bytes, key).is_err() {
                return;
            }
            bytes.push(b':');
            if value.write_json(&mut bytes).is_err() {
                return;
            }
        }
        bytes.extend_from_slice(b"}\n");
        self.write_line(&bytes);
    }

    fn write_line(&self, bytes: &[u8]) {
        let Ok(mut guard) = self.file.lock() else {
            return;
        };
        if self.fence.as_ref().is_some_and(|f| !f.open()) {
            return;
        }
        match &mut *guard {
            Sink::Open(f) => {
                if let Err(e) = f.write_all(bytes) {
                    tracing::warn!(
                        "transcript {}: {e}; further lines are dropped",
                        self.path.as_deref().unwrap_or(Path::new("?")).display()
                    );
                    *guard = Sink::Closed;
                } else if let Some(n) = &self.notify {
                    n.notify_one();
                }
            }
            Sink::Deferred(kept) => kept.extend_from_slice(bytes),
            Sink::Closed => {}
        }
    }
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
        Ok(()) => {}
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
        Ok(()) => {}
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
    if let Err(e) = result {
        tracing::warn!("cannot write {}: {e}", path.display());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Every kind of line, written straight to JSON, has the bytes of the
    /// same object built as a `Value` (as lines were written before).
    #[test]
    fn lines_have_the_bytes_of_values() {
        use crate::message::ContentBlock;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
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
            json!({"message": message, "joined": true}),
            json!({"message": message, "converted_from_text": true, "converted_tool_calls": converted}),
            json!({"model": "m", "tools": ["Read"], "n": 1.5}),
            json!({"timestamp": "mine", "x": null}),
            json!({}),
        ];
        let kinds = ["message", "message", "message", "spawn", "odd", "nothing"];
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 12);
        for (i, line) in lines.iter().enumerate() {
            let parent = if i < 6 { Value::Null } else { json!("main") };
            let written: Value = serde_json::from_str(line).unwrap();
            let mut expected = serde_json::Map::new();
            expected.insert("type".into(), json!(kinds[i % 6]));
            expected.insert("agent_id".into(), json!("a1"));
            expected.insert("parent_agent_id".into(), parent);
            expected.insert("timestamp".into(), written["timestamp"].clone());
            if let Value::Object(fields) = datas[i % 6].clone() {
                expected.extend(fields);
            }
            assert_eq!(*line, serde_json::to_string(&expected).unwrap(), "line {i}");
        }
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
        let p = dir.path().join("s/agents/agent-a2.jsonl");
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
        let p = dir.path().join("s/agents/agent-a1.jsonl");
        let t = Transcript::open(p.clone(), "a1", Some("main"));
        t.message(&Message::user_text("hi\nthere"));
        t.record("spawn", json!({"model": "m"}));
        let text = std::fs::read_to_string(&p).unwrap();
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0]["type"], "message");
        assert_eq!(lines[0]["agent_id"], "a1");
        assert_eq!(lines[0]["parent_agent_id"], "main");
        assert_eq!(lines[0]["message"]["content"][0]["text"], "hi\nthere");
        assert_eq!(lines[1]["model"], "m");
        assert!(lines[1]["timestamp"].as_str().unwrap().ends_with('Z'));
    }
}
