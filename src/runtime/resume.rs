//! Reading a session back from its transcript: the header line, the
//! messages in the order the session's history held them, and the usage of
//! every turn. Used by `--resume`, `--continue` and `cadre sessions`.
//!
//! The file is read line by line. A last line without its newline is what
//! a crash in the middle of a write leaves: it is ignored (and cut off
//! before anything is appended). Any other line that is not a JSON object,
//! or a message line whose message does not parse, is an error naming the
//! file, line and column. Unknown line types are skipped, so newer event
//! lines do not stop an older reader.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::message::{History, Message, Role, Sampling, Usage};

/// The transcript format this build writes (the `version` of the
/// `session` line). Files without a `session` line are version 0: their
/// messages are read the same way; the model and tool pool then come from
/// the current settings.
pub const TRANSCRIPT_VERSION: u32 = 1;

/// The first line of a main transcript (`"type": "session"`): what the
/// session was started with, so that it can be rebuilt from the file alone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionHeader {
    pub version: u32,
    pub session_id: String,
    /// The resolved model id the session sends.
    pub model: String,
    /// The `--agent` it runs as, if any.
    #[serde(default)]
    pub agent: Option<String>,
    /// `normal` or `coordinator`; a resumed session keeps it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<crate::config::Mode>,
    /// The tools offered to the model, in order.
    #[serde(default)]
    pub tool_names: Vec<String>,
    #[serde(default)]
    pub sampling: Sampling,
    #[serde(default)]
    pub max_tokens: u32,
    /// The snapshot generation the session started on.
    #[serde(default)]
    pub generation: u64,
    #[serde(default)]
    pub cwd: Option<PathBuf>,
    /// The session this one was forked from (`--fork-session`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forked_from: Option<String>,
}

/// A session as its transcript holds it.
#[derive(Debug, Clone, Default)]
pub struct Restored {
    pub header: Option<SessionHeader>,
    pub history: History,
    /// The agent types and skills the conversation was last told of (the
    /// last `listing` line since the last compaction).
    pub listing: Option<super::Listing>,
    /// Instruction files delivered on demand since the last compaction
    /// (`instructions` lines).
    pub instructions: Vec<super::instructions::Delivered>,
    /// Model responses recorded (one `usage` line each).
    pub turns: u32,
    pub usage: Usage,
    /// Tools' own model requests (`side_usage` lines: WebFetch's reader,
    /// WebSearch's search), as (model, usage).
    pub side_usage: Vec<(String, Usage)>,
    /// Compactions recorded.
    pub compactions: u32,
    /// Timestamp of the first line and of the last complete line.
    pub started: Option<String>,
    pub last_activity: Option<String>,
    /// Bytes of the file that hold complete lines; anything after is a
    /// line cut by a crash.
    pub complete_len: u64,
    /// A sub-agent transcript's `spawn` line (a fork's `frozen` request
    /// parts among its fields).
    pub spawn: Option<serde_json::Map<String, Value>>,
    /// The timestamp of the `end` line a run writes when it ends, when no
    /// message or later run followed it (the session is not running).
    pub ended: Option<String>,
    /// The `uuid` of the last message line (the parent of the next one).
    pub last_uuid: Option<String>,
    /// The API id of the assistant message a Claude Code line added last.
    foreign_assistant_id: Option<String>,
}

/// Why a transcript cannot be read back.
#[derive(Debug, thiserror::Error)]
pub enum ResumeError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}:{line}:{col}: {message}")]
    Bad {
        path: PathBuf,
        line: usize,
        col: usize,
        message: String,
    },
    #[error(
        "{path}: transcript version {version} is newer than this cadre reads ({TRANSCRIPT_VERSION})"
    )]
    TooNew { path: PathBuf, version: u32 },
    #[error("{0}: no session with that id")]
    NotFound(String),
    #[error("no session to continue under {0}")]
    NoneToContinue(PathBuf),
    #[error("{0:?} is not a session id (a UUID, like 0b7d5c9e-1111-4222-8333-444455556666)")]
    BadId(String),
    #[error("cannot move session {from} to {to}: {source}")]
    Move {
        from: PathBuf,
        to: PathBuf,
        source: std::io::Error,
    },
}

/// The folder, inside a session's folder, of its sub-agents' transcripts
/// and meta files (Claude Code's `<session id>/subagents/`).
pub const SUBAGENTS_DIR: &str = "subagents";

/// Where the sub-agents of the session in `session_dir` keep their files.
pub fn subagents_dir(session_dir: &Path) -> PathBuf {
    session_dir.join(SUBAGENTS_DIR)
}

/// Where the sub-agents' files of the session in `session_dir` are read
/// from: [`subagents_dir`], or `agents/` in the folder of a session an
/// older cadre wrote that was not migrated yet.
pub fn subagents_dir_found(session_dir: &Path) -> PathBuf {
    if is_real_file(&session_dir.join(OLD_MAIN)) {
        session_dir.join(OLD_AGENTS)
    } else {
        subagents_dir(session_dir)
    }
}

/// A session id: a UUID (`0b7d5c9e-1111-4222-8333-444455556666`, as
/// Claude Code and the SDKs name sessions, lower-case hex), or an id an
/// older cadre gave (`20260101T120000-0123abcd`).
pub fn is_session_id(name: &str) -> bool {
    is_uuid(name) || is_old_session_id(name)
}

/// Whether `name` is a UUID in its canonical form (hex digits, lower or
/// upper case, hyphens after 8, 12, 16 and 20 of them).
pub fn is_uuid(name: &str) -> bool {
    let b = name.as_bytes();
    b.len() == 36
        && b.iter().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => *c == b'-',
            _ => c.is_ascii_hexdigit(),
        })
}

/// An id an older cadre gave its sessions (`20260101T120000-0123abcd`).
pub fn is_old_session_id(name: &str) -> bool {
    let b = name.as_bytes();
    b.len() == 24
        && b[..8].iter().all(u8::is_ascii_digit)
        && b[8] == b'T'
        && b[9..15].iter().all(u8::is_ascii_digit)
        && b[15] == b'-'
        && b[16..]
            .iter()
            .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(c))
}

/// The main transcript of the session whose folder is `session_dir`:
/// `<dir>/<id>.jsonl` beside the folder (Claude Code's layout), or the
/// folder's `main.jsonl` for a session an older cadre wrote and that was
/// not migrated yet ([`migrate_layout`]).
pub fn main_file(session_dir: &Path) -> PathBuf {
    let old = session_dir.join(OLD_MAIN);
    if is_real_file(&old) {
        return old;
    }
    let mut name = session_dir.file_name().unwrap_or_default().to_os_string();
    name.push(".jsonl");
    session_dir.with_file_name(name)
}

/// The main transcript's name in an older cadre's session folder.
const OLD_MAIN: &str = "main.jsonl";
/// The sub-agents' folder in an older cadre's session folder.
const OLD_AGENTS: &str = "agents";

fn is_real_file(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_file())
}

/// Moves a session an older cadre wrote (`<id>/main.jsonl`,
/// `<id>/agents/`) into Claude Code's layout (`<id>.jsonl`,
/// `<id>/subagents/`). Renames only; a session already in the new layout
/// is left as it is. Links are not followed.
pub fn migrate_layout(session_dir: &Path) -> std::io::Result<bool> {
    let old = session_dir.join(OLD_MAIN);
    if !is_real_file(&old) {
        return Ok(false);
    }
    let main = {
        let mut name = session_dir.file_name().unwrap_or_default().to_os_string();
        name.push(".jsonl");
        session_dir.with_file_name(name)
    };
    if std::fs::symlink_metadata(&main).is_ok() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::AlreadyExists,
            format!("{} is in the way", main.display()),
        ));
    }
    let agents = session_dir.join(OLD_AGENTS);
    if std::fs::symlink_metadata(&agents).is_ok_and(|m| m.is_dir()) {
        std::fs::rename(&agents, subagents_dir(session_dir))?;
    }
    std::fs::rename(&old, &main)?;
    Ok(true)
}

/// The folder of session `id` under `dir` (which may not exist: a session
/// without sub-agents has only its transcript, `<dir>/<id>.jsonl`). The
/// id must look like a session id (so `../x` cannot name a file
/// elsewhere) and its transcript must exist.
pub fn session_folder(dir: &Path, id: &str) -> Result<PathBuf, ResumeError> {
    if !is_session_id(id) {
        return Err(ResumeError::BadId(id.to_string()));
    }
    let folder = dir.join(id);
    if main_file(&folder).is_file() {
        Ok(folder)
    } else {
        Err(ResumeError::NotFound(id.to_string()))
    }
}

/// The session under `dir` with the most recent activity (the newest
/// main transcript).
pub fn latest_session(dir: &Path) -> Result<String, ResumeError> {
    let mut best: Option<(std::time::SystemTime, String)> = None;
    for (id, folder) in session_folders(dir) {
        let Ok(t) = std::fs::metadata(main_file(&folder)).and_then(|m| m.modified()) else {
            continue;
        };
        if best.as_ref().is_none_or(|(b, bid)| (t, &id) > (*b, bid)) {
            best = Some((t, id));
        }
    }
    best.map(|(_, id)| id)
        .ok_or_else(|| ResumeError::NoneToContinue(dir.to_path_buf()))
}

/// Every session under `dir`, sorted by id, as (id, folder): each
/// `<id>.jsonl` named by a session id (Claude Code's sessions included),
/// and each folder of an older cadre holding a `main.jsonl`. The folder
/// may not exist (see [`session_folder`]).
pub fn session_folders(dir: &Path) -> Vec<(String, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<(String, PathBuf)> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_str()?.to_string();
            let t = e.file_type().ok()?;
            if t.is_file() {
                let id = name.strip_suffix(".jsonl")?;
                is_session_id(id).then(|| (id.to_string(), dir.join(id)))
            } else if t.is_dir() && is_session_id(&name) && is_real_file(&e.path().join(OLD_MAIN)) {
                Some((name, e.path()))
            } else {
                None
            }
        })
        .collect();
    out.sort();
    out.dedup_by(|a, b| a.0 == b.0);
    out
}

/// The `uuid` of the last message line of the transcript at `path`, read
/// from its end (cadre writes `uuid` second in a message line), so that a
/// writer appending to it continues Claude Code's `parentUuid` chain.
/// `None` when there is no file or no such line in its last MiB.
pub fn last_line_uuid(path: &Path) -> Option<String> {
    use std::io::{Read as _, Seek as _};
    const TAIL: u64 = 1024 * 1024;
    let mut f = std::fs::File::open(path).ok()?;
    let len = f.metadata().ok()?.len();
    if len == 0 {
        return None;
    }
    let start = len.saturating_sub(TAIL);
    f.seek(std::io::SeekFrom::Start(start)).ok()?;
    let mut buf = Vec::new();
    f.take(TAIL).read_to_end(&mut buf).ok()?;
    buf.split(|b| *b == b'\n').rev().find_map(|line| {
        let rest = line
            .strip_prefix(br#"{"type":"user","uuid":""#.as_slice())
            .or_else(|| line.strip_prefix(br#"{"type":"assistant","uuid":""#.as_slice()))?;
        let id = std::str::from_utf8(rest.get(..36)?).ok()?;
        (is_uuid(id) && rest.get(36) == Some(&b'"')).then(|| id.to_string())
    })
}

/// Sub-agent `agent_id`'s transcript in the session's folder (as
/// [`subagents_dir_found`] finds the sub-agents' files).
pub fn sub_agent_transcript(folder: &Path, agent_id: &str) -> PathBuf {
    subagents_dir_found(folder).join(format!("agent-{agent_id}.jsonl"))
}

/// The longest transcript line read back (a message with its tool
/// results; images included). A longer line is an error, not a reason to
/// hold an unbounded buffer.
pub const MAX_LINE_BYTES: usize = 64 * 1024 * 1024;

/// Reads a transcript file back, streaming it line by line: what it holds
/// at any moment is the rebuilt history plus one line.
pub fn load(path: &Path) -> Result<Restored, ResumeError> {
    let file = fs_err::File::open(path).map_err(|e| ResumeError::Io {
        path: path.to_path_buf(),
        source: e,
    })?;
    read(path, std::io::BufReader::with_capacity(256 * 1024, file))
}

/// [`load`] on bytes already read (`path` names them in errors).
pub fn parse(path: &Path, bytes: &[u8]) -> Result<Restored, ResumeError> {
    read(path, bytes)
}

/// One transcript line as the reader needs it. Fields are kept as raw
/// JSON and decoded only for the line types that use them, so a line is
/// parsed once, straight into the history's types.
#[derive(Deserialize)]
struct Line<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow, default)]
    timestamp: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow, default)]
    message: Option<&'a serde_json::value::RawValue>,
    #[serde(borrow, default)]
    joined: Option<&'a serde_json::value::RawValue>,
    #[serde(borrow, default)]
    usage: Option<&'a serde_json::value::RawValue>,
    #[serde(borrow, default)]
    compaction: Option<&'a serde_json::value::RawValue>,
    #[serde(borrow, default)]
    kept: Option<&'a serde_json::value::RawValue>,
    #[serde(borrow, default)]
    settings: Option<&'a serde_json::value::RawValue>,
    /// The model of a `side_usage` line.
    #[serde(borrow, default)]
    model: Option<std::borrow::Cow<'a, str>>,
    /// A message line's id (Claude Code's `uuid`).
    #[serde(borrow, default)]
    uuid: Option<std::borrow::Cow<'a, str>>,
    /// Present on every line cadre writes; a `user` or `assistant` line
    /// without it was written by Claude Code.
    #[serde(borrow, default)]
    agent_id: Option<&'a serde_json::value::RawValue>,
    /// Claude Code's `system` lines: `compact_boundary` starts the history
    /// again (the summary follows).
    #[serde(borrow, default)]
    subtype: Option<std::borrow::Cow<'a, str>>,
    /// Lines cadre writes only for Claude Code's readers (its view of a
    /// compaction): cadre reads the `compact` line instead.
    #[serde(borrow, default)]
    shadow: Option<&'a serde_json::value::RawValue>,
}

/// The API id of an assistant message Claude Code wrote: it writes one line
/// per content block, each with the whole message's id.
#[derive(Deserialize)]
struct MessageId<'a> {
    #[serde(borrow, default)]
    id: Option<std::borrow::Cow<'a, str>>,
}

fn is_true(v: Option<&serde_json::value::RawValue>) -> bool {
    v.is_some_and(|v| v.get() == "true")
}

/// The next transcript line of `r` into `buf` (cleared first), at most
/// [`MAX_LINE_BYTES`] + 1 bytes of it; the bytes read (0 at the end).
fn read_line(
    path: &Path,
    r: &mut impl std::io::BufRead,
    buf: &mut Vec<u8>,
) -> Result<usize, ResumeError> {
    use std::io::{BufRead as _, Read as _};
    let limit = u64::try_from(MAX_LINE_BYTES).unwrap_or(u64::MAX);
    buf.clear();
    r.take(limit + 1)
        .read_until(b'\n', buf)
        .map_err(|e| ResumeError::Io {
            path: path.to_path_buf(),
            source: e,
        })
}

/// Reads transcript lines from `r` (see [`load`]).
fn read(path: &Path, mut r: impl std::io::BufRead) -> Result<Restored, ResumeError> {
    let mut out = Restored::default();
    let mut buf: Vec<u8> = Vec::new();
    let mut line_no = 0usize;
    let mut last_ts = String::new();
    loop {
        let n = read_line(path, &mut r, &mut buf)?;
        if n == 0 {
            break;
        }
        if buf.last() != Some(&b'\n') {
            if buf.len() > MAX_LINE_BYTES {
                return Err(ResumeError::Bad {
                    path: path.to_path_buf(),
                    line: line_no + 1,
                    col: 1,
                    message: format!("line longer than {MAX_LINE_BYTES} bytes"),
                });
            }
            // The last line, cut by a crash: ignored.
            break;
        }
        line_no += 1;
        out.complete_len += n as u64;
        let raw = &buf[..n - 1];
        if let Some(ts) = apply_line(path, line_no, raw, &mut out)? {
            last_ts = ts;
        }
    }
    if !last_ts.is_empty() {
        out.last_activity = Some(last_ts);
    }
    Ok(out)
}

/// Adds one complete line to `out`; returns the line's timestamp.
fn apply_line(
    path: &Path,
    line_no: usize,
    raw: &[u8],
    out: &mut Restored,
) -> Result<Option<String>, ResumeError> {
    let bad = |col: usize, message: String| ResumeError::Bad {
        path: path.to_path_buf(),
        line: line_no,
        col,
        message,
    };
    let Some(first) = raw.iter().position(|b| !b.is_ascii_whitespace()) else {
        return Ok(None);
    };
    if raw[first] != b'{' {
        // Say what it is, as JSON would, or that it is not JSON at all.
        return Err(match serde_json::from_slice::<serde::de::IgnoredAny>(raw) {
            Ok(_) => bad(first + 1, "not a JSON object".into()),
            Err(e) => bad(e.column(), format!("not a JSON line: {e}")),
        });
    }
    let line: Line<'_> = serde_json::from_slice(raw)
        .map_err(|e| bad(e.column(), format!("not a JSON line: {e}")))?;
    // The column of a field's value, for errors inside it.
    let col_of = |v: &serde_json::value::RawValue, inner: usize| {
        (v.get().as_ptr() as usize).saturating_sub(raw.as_ptr() as usize) + inner.max(1)
    };
    let ts = line.timestamp.as_deref().map(str::to_string);
    if out.started.is_none() {
        out.started.clone_from(&ts);
    }
    if matches!(line.kind.as_deref(), Some("message" | "resume")) {
        out.ended = None;
    }
    match line.kind.as_deref() {
        Some("session") if out.header.is_none() => {
            let header: SessionHeader = serde_json::from_slice(raw)
                .map_err(|e| bad(1, format!("bad session line: {e}")))?;
            if header.version > TRANSCRIPT_VERSION {
                return Err(ResumeError::TooNew {
                    path: path.to_path_buf(),
                    version: header.version,
                });
            }
            out.header = Some(header);
        }
        // A later run of the session: its settings replace the header's.
        Some("resume") => {
            if let Some(h) = line
                .settings
                .and_then(|v| serde_json::from_str::<SessionHeader>(v.get()).ok())
            {
                out.header = Some(h);
            }
        }
        Some("end") => out.ended.clone_from(&ts),
        Some("spawn") if out.spawn.is_none() => {
            out.spawn = serde_json::from_slice(raw).ok();
        }
        // Claude Code's message lines (cadre's since it writes its format;
        // `message` lines before).
        Some(kind @ ("message" | "user" | "assistant")) => {
            let Some(m) = line.message else {
                return Err(bad(1, "bad message: no `message` field".into()));
            };
            let message: Message = serde_json::from_str(m.get())
                .map_err(|e| bad(col_of(m, e.column()), format!("bad message: {e}")))?;
            if let Some(u) = &line.uuid {
                out.last_uuid = Some(u.to_string());
            }
            if is_true(line.shadow) {
                return Ok(ts);
            }
            if kind != "message" && line.agent_id.is_none() {
                add_foreign(out, message, m);
                return Ok(ts);
            }
            out.foreign_assistant_id = None;
            match out.history.last_mut() {
                // Blocks added to a user message that was never sent
                // (see `Session::join_last_user_message`).
                Some(last)
                    if is_true(line.joined)
                        && last.role == Role::User
                        && message.role == Role::User =>
                {
                    std::sync::Arc::make_mut(last)
                        .content
                        .extend(message.content);
                }
                _ => out.history.push(std::sync::Arc::new(message)),
            }
        }
        Some("usage") => {
            if let Some(u) = line
                .usage
                .and_then(|u| serde_json::from_str::<Usage>(u.get()).ok())
            {
                out.usage.add(&u);
            }
            if !is_true(line.compaction) {
                out.turns += 1;
            }
        }
        Some("side_usage") => {
            if let Some(u) = line
                .usage
                .and_then(|u| serde_json::from_str::<Usage>(u.get()).ok())
            {
                let model = line.model.as_deref().unwrap_or("").to_string();
                out.side_usage.push((model, u));
            }
        }
        // Claude Code compacted: the summary (the next user line) starts
        // the history again.
        Some("system") if is_true(line.shadow) => {
            if let Some(u) = &line.uuid {
                out.last_uuid = Some(u.to_string());
            }
        }
        Some("system") if line.subtype.as_deref() == Some("compact_boundary") => {
            out.history.clear();
            out.foreign_assistant_id = None;
            out.compactions += 1;
        }
        // The summary replaced all but the last `kept` messages.
        Some("compact") => {
            let kept = line
                .kept
                .and_then(|k| serde_json::from_str::<u64>(k.get()).ok());
            let message: Option<Message> = line
                .message
                .and_then(|m| serde_json::from_str(m.get()).ok());
            let (Some(kept), Some(message)) = (kept, message) else {
                return Err(bad(
                    1,
                    "bad compact line: needs `message` and `kept`".into(),
                ));
            };
            let kept = usize::try_from(kept).unwrap_or(usize::MAX);
            if kept > out.history.len() {
                return Err(bad(
                    1,
                    format!(
                        "compact line keeps {kept} messages of {}",
                        out.history.len()
                    ),
                ));
            }
            let tail = out.history.split_off(out.history.len() - kept);
            out.history = std::iter::once(std::sync::Arc::new(message))
                .chain(tail)
                .collect();
            out.compactions += 1;
            // A compaction drops the announced listings with the history.
            out.listing = None;
            out.instructions.clear();
        }
        // What the session has been told of agents and skills so far.
        // Rules and nested memory delivered on demand.
        Some("instructions") => {
            #[derive(serde::Deserialize)]
            struct Line {
                #[serde(default)]
                delivered: Vec<super::instructions::Delivered>,
            }
            if let Ok(l) = serde_json::from_slice::<Line>(raw) {
                for d in l.delivered {
                    if !out.instructions.iter().any(|x| x.path == d.path) {
                        out.instructions.push(d);
                    }
                }
            }
        }
        Some("listing") => {
            // The line's own `type` and `timestamp` are ignored fields.
            out.listing = serde_json::from_slice::<super::Listing>(raw).ok();
        }
        _ => {}
    }
    Ok(ts)
}

/// Adds a message line Claude Code wrote: an assistant message comes one
/// content block a line, each line with the message's API id, so lines of
/// one id make one message; user messages in a row are one message, as
/// Claude Code sends them.
fn add_foreign(out: &mut Restored, message: Message, raw: &serde_json::value::RawValue) {
    let id = serde_json::from_str::<MessageId<'_>>(raw.get())
        .ok()
        .and_then(|m| m.id)
        .map(|c| c.into_owned());
    let same = |last: &Message| match message.role {
        Role::User => last.role == Role::User,
        Role::Assistant => {
            last.role == Role::Assistant && id.is_some() && out.foreign_assistant_id == id
        }
    };
    let join = out.history.last().is_some_and(|last| same(last));
    out.foreign_assistant_id = if message.role == Role::Assistant {
        id
    } else {
        None
    };
    match out.history.last_mut() {
        Some(last) if join => std::sync::Arc::make_mut(last)
            .content
            .extend(message.content),
        _ => out.history.push(std::sync::Arc::new(message)),
    }
}

/// Where a truncating resume (`--resume-session-at UUID`) cuts a
/// transcript: after the line of message `UUID`.
#[derive(Debug, Clone, PartialEq)]
pub struct Cut {
    /// Bytes of the file up to and including that line.
    pub len: u64,
    /// The message lines after it, in order: what the cut leaves out.
    pub after: Vec<Dropped>,
}

/// A message line a [`Cut`] leaves out.
#[derive(Debug, Clone, PartialEq)]
pub struct Dropped {
    /// `user` or `assistant`.
    pub kind: String,
    pub uuid: String,
    /// A user's prompt (not tool results, not text cadre joined).
    pub prompt: bool,
}

impl Cut {
    /// `--resume-drops-turn TURN`: what the cut leaves out must be exactly
    /// the turn whose prompt is `turn` — it starts with that prompt and
    /// holds no other prompt. The refusal says why, as Claude Code's does.
    pub fn check_drops_turn(&self, at: &str, turn: &str) -> Result<(), String> {
        let why = |reason: &str, i: usize, d: &Dropped| {
            format!(
                "Resume rejected by --resume-drops-turn: resuming at {at} would discard entries \
                 not attributable to turn {turn}: {reason}; first discarded entry {i} \
                 [type={}, uuid={}]",
                d.kind, d.uuid
            )
        };
        let Some(first) = self.after.first() else {
            return Err(format!(
                "Resume rejected by --resume-drops-turn: resuming at {at} discards nothing, \
                 not turn {turn}"
            ));
        };
        if first.uuid != turn || !first.prompt {
            return Err(why(
                "range does not start with the declared turn prompt",
                0,
                first,
            ));
        }
        if let Some((i, d)) = self
            .after
            .iter()
            .enumerate()
            .skip(1)
            .find(|(_, d)| d.prompt)
        {
            return Err(why("range holds another turn's prompt", i, d));
        }
        Ok(())
    }
}

/// Finds message `uuid` in the transcript at `path` (a line of type
/// `user`, `assistant` or `message` with that `uuid`) and what comes after
/// it; `None` when no message has it.
pub fn find_cut(path: &Path, uuid: &str) -> Result<Option<Cut>, ResumeError> {
    #[derive(Deserialize)]
    struct Head<'a> {
        #[serde(rename = "type", borrow, default)]
        kind: Option<std::borrow::Cow<'a, str>>,
        #[serde(borrow, default)]
        uuid: Option<std::borrow::Cow<'a, str>>,
        #[serde(default, rename = "isMeta")]
        is_meta: bool,
        #[serde(default)]
        joined: bool,
        #[serde(default)]
        shadow: bool,
        #[serde(borrow, default)]
        message: Option<&'a serde_json::value::RawValue>,
    }
    let file = fs_err::File::open(path).map_err(|e| ResumeError::Io {
        path: path.to_path_buf(),
        source: e,
    })?;
    let mut r = std::io::BufReader::with_capacity(256 * 1024, file);
    let mut buf = Vec::new();
    let mut offset = 0u64;
    let mut cut: Option<Cut> = None;
    loop {
        let n = read_line(path, &mut r, &mut buf)?;
        if n == 0 || buf.last() != Some(&b'\n') {
            break;
        }
        offset += n as u64;
        let Ok(line) = serde_json::from_slice::<Head<'_>>(&buf) else {
            continue;
        };
        let (Some(kind), Some(id)) = (line.kind.as_deref(), line.uuid.as_deref()) else {
            continue;
        };
        if !matches!(kind, "user" | "assistant" | "message") || line.shadow {
            continue;
        }
        match &mut cut {
            None if id == uuid => {
                cut = Some(Cut {
                    len: offset,
                    after: Vec::new(),
                });
            }
            None => {}
            Some(c) => {
                let role_user = kind == "user"
                    || line
                        .message
                        .is_some_and(|m| m.get().starts_with(r#"{"role":"user""#));
                let results = line
                    .message
                    .is_some_and(|m| m.get().contains(r#""type":"tool_result""#));
                c.after.push(Dropped {
                    kind: if role_user { "user" } else { "assistant" }.to_string(),
                    uuid: id.to_string(),
                    prompt: role_user && !results && !line.is_meta && !line.joined,
                });
            }
        }
    }
    Ok(cut)
}

/// Cuts a line left incomplete by a crash off the end of `path`, so that
/// lines appended later start on a line of their own.
pub fn trim_partial_tail(path: &Path, complete_len: u64) -> Result<(), ResumeError> {
    let io = |e| ResumeError::Io {
        path: path.to_path_buf(),
        source: e,
    };
    let f = fs_err::OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(io)?;
    let len = f.metadata().map_err(io)?.len();
    if len > complete_len {
        tracing::warn!(
            "{}: dropping {} byte(s) of a line cut by a crash",
            path.display(),
            len - complete_len
        );
        f.set_len(complete_len).map_err(io)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::ContentBlock;
    use crate::runtime::transcript::Transcript;
    use serde_json::json;
    use std::sync::Arc;

    fn header() -> SessionHeader {
        SessionHeader {
            version: TRANSCRIPT_VERSION,
            session_id: "20260101T120000-0123abcd".into(),
            model: "m".into(),
            agent: None,
            mode: None,
            tool_names: vec!["Read".into()],
            sampling: Sampling::default(),
            max_tokens: 100,
            generation: 1,
            cwd: None,
            forked_from: None,
        }
    }

    fn sample(path: &Path) -> History {
        let t = Transcript::open(path.to_path_buf(), "main", None);
        t.record("session", serde_json::to_value(header()).unwrap());
        let msgs = vec![
            Message::user_text("one"),
            Message::assistant(vec![ContentBlock::ToolUse {
                id: "t1".into(),
                name: "Read".into(),
                input: json!({"file_path": "/x"}),
            }]),
            Message::user(vec![ContentBlock::tool_result("t1", "body", false)]),
            Message::assistant(vec![ContentBlock::text("done")]),
        ];
        for m in &msgs {
            t.message(m);
            if m.role == Role::Assistant {
                t.record("usage", json!({"usage": Usage { input_tokens: 5, output_tokens: 2, ..Usage::default() }}));
            }
        }
        msgs.into_iter().map(Arc::new).collect()
    }

    #[test]
    fn a_written_session_reads_back_whole() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("main.jsonl");
        let written = sample(&p);
        let r = load(&p).unwrap();
        assert_eq!(r.header, Some(header()));
        assert_eq!(r.history, written);
        assert_eq!(r.turns, 2);
        assert_eq!(r.usage.input_tokens, 10);
    }

    #[test]
    fn joined_lines_rebuild_one_user_message() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("main.jsonl");
        let t = Transcript::open(p.clone(), "main", None);
        t.message(&Message::user_text("a"));
        t.joined_message(&Message::user_text("b"));
        let listing = crate::runtime::Listing::default();
        t.record("listing", serde_json::to_value(&listing).unwrap());
        let r = load(&p).unwrap();
        assert_eq!(r.history.len(), 1);
        let texts: Vec<&str> = r.history[0]
            .content
            .iter()
            .filter_map(ContentBlock::as_text)
            .collect();
        assert_eq!(texts, ["a", "b"]);
        assert_eq!(r.listing, Some(listing));
    }

    #[test]
    fn an_old_file_without_a_session_line_still_reads() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("main.jsonl");
        std::fs::write(
            &p,
            "{\"type\":\"message\",\"agent_id\":\"main\",\"parent_agent_id\":null,\"timestamp\":\"t\",\"message\":{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"hi\"}]}}\n{\"type\":\"end\",\"status\":\"completed\"}\n",
        )
        .unwrap();
        let r = load(&p).unwrap();
        assert!(r.header.is_none());
        assert_eq!(r.history.len(), 1);
    }

    #[test]
    fn a_run_has_ended_until_a_message_or_a_later_run_follows_its_end_line() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("main.jsonl");
        let message = "{\"type\":\"message\",\"timestamp\":\"t1\",\"message\":{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"hi\"}]}}\n";
        let end = "{\"type\":\"end\",\"timestamp\":\"t2\",\"status\":\"completed\"}\n";
        std::fs::write(&p, message).unwrap();
        assert_eq!(load(&p).unwrap().ended, None, "still running");
        std::fs::write(&p, format!("{message}{end}")).unwrap();
        assert_eq!(load(&p).unwrap().ended.as_deref(), Some("t2"));
        std::fs::write(&p, format!("{message}{end}{message}")).unwrap();
        assert_eq!(load(&p).unwrap().ended, None, "resumed and running again");
    }

    #[test]
    fn a_damaged_line_is_an_error_with_its_position() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("main.jsonl");
        std::fs::write(&p, "{\"type\":\"end\"}\n{\"type\": oops}\n").unwrap();
        let e = load(&p).unwrap_err().to_string();
        assert!(e.contains("main.jsonl:2:"), "{e}");
    }

    #[test]
    fn a_newer_version_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("main.jsonl");
        let mut h = serde_json::to_value(header()).unwrap();
        h["version"] = json!(TRANSCRIPT_VERSION + 1);
        Transcript::open(p.clone(), "main", None).record("session", h);
        assert!(matches!(load(&p), Err(ResumeError::TooNew { .. })));
    }

    /// Lines as Claude Code writes them: a prompt as a string, an
    /// assistant message one block a line (one API id), a tool result as
    /// a string, attachments and its own events (skipped), a compaction.
    #[test]
    fn claude_codes_lines_read_back_as_the_messages_it_sends() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.jsonl");
        let lines = [
            json!({"type": "queue-operation", "operation": "enqueue", "content": "x"}),
            json!({"type": "user", "uuid": "u0", "parentUuid": null, "message": {"role": "user", "content": "old"}}),
            json!({"type": "system", "subtype": "compact_boundary", "uuid": "b", "parentUuid": null}),
            json!({"type": "user", "uuid": "u1", "parentUuid": "b", "message": {"role": "user", "content": "hi"}}),
            json!({"type": "attachment", "uuid": "x1", "parentUuid": "u1", "attachment": {"type": "date"}}),
            json!({"type": "assistant", "uuid": "a1", "parentUuid": "x1", "message": {"id": "msg_1", "role": "assistant", "model": "m", "content": [{"type": "text", "text": "looking"}]}}),
            json!({"type": "assistant", "uuid": "a2", "parentUuid": "a1", "message": {"id": "msg_1", "role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Read", "input": {}}]}}),
            json!({"type": "user", "uuid": "u2", "parentUuid": "a2", "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "body"}]}, "toolUseResult": {}}),
            json!({"type": "user", "uuid": "u3", "parentUuid": "u2", "message": {"role": "user", "content": "and then"}}),
            json!({"type": "assistant", "uuid": "a3", "parentUuid": "u3", "message": {"id": "msg_2", "role": "assistant", "content": [{"type": "text", "text": "done"}]}}),
            json!({"type": "last-prompt", "lastPrompt": "hi"}),
        ];
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        std::fs::write(&p, text).unwrap();
        let r = load(&p).unwrap();
        let expected = vec![
            Message::user_text("hi"),
            Message::assistant(vec![
                ContentBlock::text("looking"),
                ContentBlock::ToolUse {
                    id: "t1".into(),
                    name: "Read".into(),
                    input: json!({}),
                },
            ]),
            Message::user(vec![
                ContentBlock::tool_result("t1", "body", false),
                ContentBlock::text("and then"),
            ]),
            Message::assistant(vec![ContentBlock::text("done")]),
        ];
        assert_eq!(
            r.history,
            expected.into_iter().map(Arc::new).collect::<History>()
        );
        assert_eq!(r.last_uuid.as_deref(), Some("a3"));
        assert_eq!(r.compactions, 1);
        assert!(r.header.is_none());
    }

    /// A truncating resume cuts after the named message; the turn it drops
    /// must start with the declared prompt and hold no other prompt.
    #[test]
    fn a_cut_names_what_it_drops_and_checks_the_declared_turn() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.jsonl");
        let t = Transcript::open(p.clone(), "main", None);
        t.message(&Message::user_text("one"));
        let keep = t
            .message(&Message::assistant(vec![ContentBlock::text("1")]))
            .unwrap();
        t.record("usage", json!({"usage": Usage::default()}));
        let two = t.message(&Message::user_text("two")).unwrap();
        t.joined_message(&Message::user_text("a listing"));
        t.message(&Message::assistant(vec![ContentBlock::text("2")]));
        let cut = find_cut(&p, &keep).unwrap().unwrap();
        let r = parse(
            &p,
            &std::fs::read(&p).unwrap()[..usize::try_from(cut.len).unwrap()],
        )
        .unwrap();
        assert_eq!(r.history.len(), 2);
        assert_eq!(r.last_uuid.as_deref(), Some(keep.as_str()));
        assert_eq!(cut.after.len(), 3);
        assert!(cut.check_drops_turn(&keep, &two).is_ok());
        let e = cut.check_drops_turn(&keep, "other").unwrap_err();
        assert!(
            e.starts_with("Resume rejected by --resume-drops-turn:"),
            "{e}"
        );
        assert!(
            e.contains("range does not start with the declared turn prompt"),
            "{e}"
        );
        // Two turns dropped: refused, naming the second prompt.
        let three = t.message(&Message::user_text("three")).unwrap();
        let cut = find_cut(&p, &keep).unwrap().unwrap();
        let e = cut.check_drops_turn(&keep, &two).unwrap_err();
        assert!(e.contains(&three), "{e}");
        assert_eq!(find_cut(&p, "no-such-uuid").unwrap(), None);
    }

    #[test]
    fn session_ids_are_uuids_or_an_older_cadres() {
        assert!(is_session_id("0b7d5c9e-1111-4222-8333-444455556666"));
        assert!(is_session_id("0B7D5C9E-1111-4222-8333-444455556666"));
        assert!(is_session_id("20260101T120000-0123abcd"));
        for bad in [
            "0b7d5c9e-1111-4222-8333-44445555666",
            "0b7d5c9e_1111-4222-8333-444455556666",
            "../0b7d5c9e-1111-4222-8333-4444555566",
            "",
        ] {
            assert!(!is_session_id(bad), "{bad}");
        }
    }

    #[test]
    fn ids_that_could_leave_the_folder_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        for id in ["../x", "/etc", "20260101T120000-0123abc/", ""] {
            assert!(matches!(
                session_folder(dir.path(), id),
                Err(ResumeError::BadId(_))
            ));
        }
    }

    /// A crash can stop a write anywhere: every prefix of a transcript
    /// either reads back as a prefix of its messages (the cut line
    /// dropped) or — never, for files cadre wrote — fails with a position.
    #[test]
    fn every_cut_point_reads_back_a_prefix() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("main.jsonl");
        let written = sample(&p);
        let bytes = std::fs::read(&p).unwrap();
        let mut seen = 0;
        for cut in 0..=bytes.len() {
            let r = parse(&p, &bytes[..cut]).unwrap_or_else(|e| panic!("cut {cut}: {e}"));
            assert_eq!(r.history[..], written[..r.history.len()], "cut {cut}");
            assert!(
                r.history.len() >= seen,
                "cut {cut}: fewer messages than a shorter cut"
            );
            seen = r.history.len();
            assert!(r.complete_len <= cut as u64);
        }
        assert_eq!(seen, written.len());
    }
}
