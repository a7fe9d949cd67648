//! Transcripts through the broker (the default, shared-nothing fleet): each
//! remote child's transcript lines are messages on its own subject of one
//! stream (`distributed.lines_stream`, subject `PREFIX.lines.SESSION.AGENT`),
//! in order, each with its line number in a header.
//!
//! - The parent publishes the child's first lines (spawn line, prompt, a
//!   fork's inherited request parts) before it publishes the plan, and a
//!   SendMessage line before it publishes the plan again.
//! - A worker makes its own copy of the file from the broker's before it
//!   starts the child (a takeover starts from what reached the broker), and
//!   publishes every line its writer appends, in order, as it appends it.
//! - The parent follows the session's subjects and appends each line it
//!   does not have to the child's transcript in its own session folder.
//!
//! Every publish names the sequence of the subject's last line it expects
//! (`Nats-Expected-Last-Subject-Sequence`): two writers can never
//! interleave lines, and a line whose acknowledgement was lost is found on
//! the broker instead of being written twice. A worker publishes a line
//! only after its fenced writer wrote it locally, so a worker past its
//! lease publishes nothing more either.

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::jetstream::{self, consumer, stream};
use bytes::Bytes;
use futures_util::StreamExt;

use super::broker::{Broker, FleetError};
use crate::runtime::transcript::{Transcript, WriteFence};

/// The header holding a line's number in its transcript (from 0).
pub const LINE_HEADER: &str = "Cadre-Line";

/// The most bytes of one transcript read through the broker.
pub const MAX_TRANSCRIPT_BYTES: u64 = 512 * 1024 * 1024;

/// The broker's copy of one transcript: how many lines, and the stream
/// sequence of the last (0: none).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tip {
    pub lines: u64,
    pub seq: u64,
}

fn line_number(headers: Option<&async_nats::HeaderMap>) -> Option<u64> {
    headers?.get(LINE_HEADER)?.as_str().parse().ok()
}

async fn lines_stream(broker: &Broker) -> Result<stream::Stream<()>, FleetError> {
    broker
        .js
        .get_stream_no_info(&broker.names.lines_stream)
        .await
        .map_err(FleetError::broker)
}

/// Where the broker's copy of the transcript stands.
pub async fn tip(broker: &Broker, session: &str, agent: &str) -> Result<Tip, FleetError> {
    let stream = lines_stream(broker).await?;
    let subject = broker.names.lines_subject(session, agent);
    match stream.get_last_raw_message_by_subject(&subject).await {
        Ok(m) => Ok(Tip {
            lines: line_number(Some(&m.headers)).map_or(0, |n| n + 1),
            seq: m.sequence,
        }),
        Err(e) if e.kind() == stream::LastRawMessageErrorKind::NoMessageFound => Ok(Tip::default()),
        Err(e) => Err(FleetError::broker(e)),
    }
}

/// Every line of the broker's copy, in order (without line ends).
pub async fn fetch(
    broker: &Broker,
    session: &str,
    agent: &str,
) -> Result<(Vec<Bytes>, Tip), FleetError> {
    let tip = tip(broker, session, agent).await?;
    if tip.lines == 0 {
        return Ok((Vec::new(), tip));
    }
    let stream = lines_stream(broker).await?;
    let consumer = stream
        .create_consumer(consumer::pull::OrderedConfig {
            filter_subject: broker.names.lines_subject(session, agent),
            deliver_policy: consumer::DeliverPolicy::All,
            ..Default::default()
        })
        .await
        .map_err(FleetError::broker)?;
    let mut messages = consumer.messages().await.map_err(FleetError::broker)?;
    let mut lines: Vec<Bytes> = Vec::new();
    let mut bytes = 0u64;
    let read = async {
        while let Some(m) = messages.next().await {
            let m = m.map_err(FleetError::broker)?;
            let seq = m.info().map_err(FleetError::broker)?.stream_sequence;
            match line_number(m.headers.as_ref()) {
                Some(n) if n == lines.len() as u64 => {
                    bytes += m.payload.len() as u64;
                    if bytes > MAX_TRANSCRIPT_BYTES {
                        return Err(FleetError::Broker(format!(
                            "the transcript of {agent} is larger than {MAX_TRANSCRIPT_BYTES} bytes"
                        )));
                    }
                    lines.push(m.payload.clone());
                }
                Some(n) if n < lines.len() as u64 => {}
                n => {
                    return Err(FleetError::Broker(format!(
                        "the transcript of {agent} on the broker has a gap (line {n:?} after {})",
                        lines.len()
                    )));
                }
            }
            if seq >= tip.seq {
                return Ok(());
            }
        }
        Err(FleetError::Broker(
            "the transcript stream ended early".into(),
        ))
    };
    tokio::time::timeout(Duration::from_secs(60), read)
        .await
        .map_err(|_| {
            FleetError::Broker(format!("reading the transcript of {agent} timed out"))
        })??;
    Ok((lines, tip))
}

/// The complete lines of a local transcript file: how many, and where the
/// last one ends.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Local {
    pub lines: u64,
    pub len: u64,
}

/// Counts the complete lines of `path` (none when it does not exist).
pub fn count(path: &Path) -> Local {
    let Ok(f) = std::fs::File::open(path) else {
        return Local::default();
    };
    let mut local = Local::default();
    let mut at = 0u64;
    let mut buf = vec![0u8; 64 * 1024];
    let mut f = f.take(MAX_TRANSCRIPT_BYTES);
    while let Ok(n) = f.read(&mut buf) {
        if n == 0 {
            break;
        }
        for (i, b) in buf[..n].iter().enumerate() {
            if *b == b'\n' {
                local.lines += 1;
                local.len = at + i as u64 + 1;
            }
        }
        at += n as u64;
    }
    local
}

/// Makes the file at `path` hold exactly `lines`: cut to them when it
/// starts with them (a copy that ran ahead of the broker: a dead worker's
/// lines that never reached it), else written over, in place.
pub fn write_copy(path: &Path, lines: &[Bytes]) -> std::io::Result<Local> {
    let mut want = Vec::with_capacity(lines.iter().map(|l| l.len() + 1).sum());
    for l in lines {
        want.extend_from_slice(l);
        want.push(b'\n');
    }
    if let Some(dir) = path.parent() {
        fs_err::create_dir_all(dir)?;
    }
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)?;
    let mut have = Vec::new();
    (&mut f).take(want.len() as u64).read_to_end(&mut have)?;
    if have != want {
        f.seek(SeekFrom::Start(0))?;
        f.write_all(&want)?;
    }
    f.set_len(want.len() as u64)?;
    Ok(Local {
        lines: lines.len() as u64,
        len: want.len() as u64,
    })
}

/// Publishes the lines of a local transcript that the broker's copy does
/// not have yet, in order.
pub struct Pusher {
    subject: String,
    path: PathBuf,
    /// Where the local file's first line not on the broker starts.
    offset: u64,
    tip: Tip,
    fence: Option<Arc<WriteFence>>,
}

impl Pusher {
    /// For `path`, whose first lines are the broker's copy (`tip`).
    pub fn new(
        broker: &Broker,
        session: &str,
        agent: &str,
        path: PathBuf,
        tip: Tip,
        fence: Option<Arc<WriteFence>>,
    ) -> Pusher {
        let offset = offset_of_line(&path, tip.lines);
        Pusher {
            subject: broker.names.lines_subject(session, agent),
            path,
            offset,
            tip,
            fence,
        }
    }

    /// For `path`, after asking the broker where its copy stands.
    pub async fn at_tip(
        broker: &Broker,
        session: &str,
        agent: &str,
        path: PathBuf,
    ) -> Result<Pusher, FleetError> {
        let tip = tip(broker, session, agent).await?;
        let at = path.clone();
        let offset = tokio::task::spawn_blocking(move || offset_of_line(&at, tip.lines))
            .await
            .map_err(FleetError::broker)?;
        Ok(Pusher {
            subject: broker.names.lines_subject(session, agent),
            path,
            offset,
            tip,
            fence: None,
        })
    }

    /// Publishes what the file has past the broker's copy. A publish that
    /// fails is tried again (`tries` times in all); `Err` when it never
    /// went through, or when another writer appended to the broker's copy
    /// meanwhile (a worker that lost its lease must stop).
    pub async fn push(&mut self, broker: &Broker, tries: u32) -> Result<(), FleetError> {
        let lines = self.pending().await?;
        self.publish(broker, lines, tries).await
    }

    /// The file's complete lines past the broker's copy.
    async fn pending(&self) -> Result<Vec<Bytes>, FleetError> {
        let (path, from) = (self.path.clone(), self.offset);
        tokio::task::spawn_blocking(move || lines_from(&path, from))
            .await
            .map_err(FleetError::broker)
    }

    /// Publishes `lines`, the file's next ones, as [`Pusher::push`] does.
    async fn publish(
        &mut self,
        broker: &Broker,
        lines: Vec<Bytes>,
        tries: u32,
    ) -> Result<(), FleetError> {
        for line in lines {
            let mut left = tries.max(1);
            loop {
                if self.fence.as_ref().is_some_and(|f| !f.open()) {
                    return Err(FleetError::Broker("the task's lease is lost".into()));
                }
                let message = jetstream::message::PublishMessage::build()
                    .payload(line.clone())
                    .header(LINE_HEADER, self.tip.lines.to_string().as_str())
                    .expected_last_subject_sequence(self.tip.seq);
                let sent = match broker.js.send_publish(self.subject.clone(), message).await {
                    Ok(ack) => ack.await.map_err(FleetError::broker),
                    Err(e) => Err(FleetError::broker(e)),
                };
                match sent {
                    Ok(ack) => {
                        self.advance(ack.sequence, line.len());
                        break;
                    }
                    Err(e) => {
                        // Stored, with its acknowledgement lost? Or another
                        // writer's line?
                        if let Some((seq, payload, n)) = last(broker, &self.subject).await {
                            if n == Some(self.tip.lines) && payload == line {
                                self.advance(seq, line.len());
                                break;
                            }
                            if seq != self.tip.seq {
                                return Err(FleetError::Broker(format!(
                                    "another writer appended to {} (line {n:?})",
                                    self.subject
                                )));
                            }
                        }
                        left -= 1;
                        if left == 0 {
                            return Err(e);
                        }
                        tracing::debug!("{}: {e}; trying again", self.subject);
                        tokio::time::sleep(Duration::from_millis(250)).await;
                    }
                }
            }
        }
        Ok(())
    }

    /// Publishes `wip`, tried again while the lease holds.
    async fn wip(&self, broker: &Broker, wip: &mut super::git::Wip) -> Result<(), FleetError> {
        let mine = || self.fence.as_ref().is_none_or(|f| f.open());
        loop {
            match wip.publish(broker, &mine).await {
                Ok(()) => return Ok(()),
                Err(e) if mine() => {
                    tracing::warn!("{}: the worktree's state: {e}; trying again", self.subject);
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
                Err(e) => return Err(e),
            }
        }
    }

    fn advance(&mut self, seq: u64, len: usize) {
        self.tip = Tip {
            lines: self.tip.lines + 1,
            seq,
        };
        self.offset += len as u64 + 1;
    }
}

/// Whether a transcript line holds a tool's result (a line that names one
/// in its text is escaped: `\"tool_result\"`, not matched).
fn holds_tool_result(line: &[u8]) -> bool {
    line.windows(13).any(|w| w == b"\"tool_result\"")
}

async fn last(broker: &Broker, subject: &str) -> Option<(u64, Bytes, Option<u64>)> {
    let stream = lines_stream(broker).await.ok()?;
    let m = stream.get_last_raw_message_by_subject(subject).await.ok()?;
    Some((m.sequence, m.payload, line_number(Some(&m.headers))))
}

/// The byte offset where line `n` (from 0) of `path` starts: its end when
/// it has fewer lines.
fn offset_of_line(path: &Path, n: u64) -> u64 {
    if n == 0 {
        return 0;
    }
    let Ok(bytes) = std::fs::read(path) else {
        return 0;
    };
    let mut seen = 0u64;
    for (i, b) in bytes.iter().enumerate() {
        if *b == b'\n' {
            seen += 1;
            if seen == n {
                return i as u64 + 1;
            }
        }
    }
    bytes.len() as u64
}

/// The complete lines of `path` from byte `from` on, without line ends.
fn lines_from(path: &Path, from: u64) -> Vec<Bytes> {
    let Ok(mut f) = std::fs::File::open(path) else {
        return Vec::new();
    };
    if f.seek(SeekFrom::Start(from)).is_err() {
        return Vec::new();
    }
    let mut rest = Vec::new();
    if f.take(MAX_TRANSCRIPT_BYTES).read_to_end(&mut rest).is_err() {
        return Vec::new();
    }
    let Some(end) = rest.iter().rposition(|b| *b == b'\n') else {
        return Vec::new();
    };
    let rest = Bytes::from(rest).slice(..end);
    let mut out = Vec::new();
    let mut start = 0;
    for (i, b) in rest.iter().enumerate() {
        if *b == b'\n' {
            out.push(rest.slice(start..i));
            start = i + 1;
        }
    }
    out.push(rest.slice(start..));
    out
}

/// Streams a worker's child's lines as its transcript writer appends them:
/// the writer wakes it ([`Transcript::notifying`]), it publishes what is new.
/// Dropped without [`Streamer::finish`] (the run was lost or handed
/// back: its fence is closed), it stops without publishing more.
pub struct Streamer {
    wake: Arc<tokio::sync::Notify>,
    done: tokio_util::sync::CancellationToken,
    handle: Option<tokio::task::JoinHandle<Result<(), FleetError>>>,
}

impl Streamer {
    /// `flushes`: a transcript's [`Transcript::flushed`] requests, each
    /// answered once what its file holds is on the broker. `wip`: a
    /// worktree child's work in progress, published before any line that
    /// holds a tool's result goes out, so that whatever a tool did to the
    /// files the broker's transcript says it did is in the broker's copy
    /// of the worktree too.
    pub fn start(
        broker: Arc<Broker>,
        mut pusher: Pusher,
        wake: Arc<tokio::sync::Notify>,
        mut flushes: tokio::sync::mpsc::UnboundedReceiver<tokio::sync::oneshot::Sender<()>>,
        mut wip: Option<super::git::Wip>,
    ) -> Self {
        let done = tokio_util::sync::CancellationToken::new();
        let (w, d) = (Arc::clone(&wake), done.clone());
        let handle = tokio::spawn(async move {
            loop {
                let (last_round, flush) = tokio::select! {
                    () = w.notified() => (false, None),
                    Some(f) = flushes.recv() => (false, Some(f)),
                    () = d.cancelled() => (true, None),
                };
                // A broker away (restarting) is waited for as long as the
                // lease holds (the fence says when it does not).
                let pushed = async {
                    let lines = pusher.pending().await?;
                    if let Some(w) = wip.as_mut()
                        && lines.iter().any(|l| holds_tool_result(l))
                    {
                        pusher.wip(&broker, w).await?;
                    }
                    pusher.publish(&broker, lines, u32::MAX).await
                };
                if let Err(e) = pushed.await {
                    if let Some(f) = &pusher.fence {
                        f.close();
                    }
                    return Err(e);
                }
                if let Some(f) = flush {
                    let _ = f.send(());
                }
                if last_round {
                    return Ok(());
                }
            }
        });
        Streamer {
            wake,
            done,
            handle: Some(handle),
        }
    }

    /// Publishes what is left and stops; `Err` when the lines did not all
    /// reach the broker (the run is then not this worker's to finish).
    pub async fn finish(mut self) -> Result<(), FleetError> {
        self.wake.notify_one();
        self.done.cancel();
        match self.handle.take() {
            Some(h) => h.await.map_err(FleetError::broker)?,
            None => Ok(()),
        }
    }
}

impl Drop for Streamer {
    fn drop(&mut self) {
        if let Some(h) = self.handle.take() {
            h.abort();
        }
    }
}

/// The parent's copies of its remote children's transcripts: what each
/// file holds, so a line is appended once, in order, whoever else (a
/// worker sharing the folder) writes there too.
#[derive(Default, Clone)]
pub struct Copies {
    files: Arc<Mutex<HashMap<PathBuf, Local>>>,
}

impl Copies {
    /// Appends line `n` to `path` if the file has exactly `n` lines now;
    /// a file that is not there (no child of this session) is left alone.
    pub fn apply(&self, path: &Path, n: u64, line: &[u8]) {
        let Ok(len) = std::fs::metadata(path).map(|m| m.len()) else {
            return;
        };
        let mut files = self
            .files
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let local = files
            .entry(path.to_path_buf())
            .or_insert_with(|| count(path));
        if local.len != len {
            *local = count(path);
        }
        if n != local.lines {
            return;
        }
        let before = local.len;
        Transcript::open(path.to_path_buf(), "", None).copied_line(line);
        let after = std::fs::metadata(path).map_or(before, |m| m.len());
        *local = Local {
            lines: local.lines + 1,
            len: after,
        };
    }

    /// Brings the copy of one child's transcript up to the broker's.
    pub async fn catch_up(
        &self,
        broker: &Broker,
        session: &str,
        agent: &str,
        path: &Path,
    ) -> Result<(), FleetError> {
        // A broker that just restarted may not serve the stream yet.
        let mut tries = 0;
        let lines = loop {
            match fetch(broker, session, agent).await {
                Ok((lines, _)) => break lines,
                Err(e) if tries >= 40 => return Err(e),
                Err(e) => {
                    tracing::debug!("transcript of {agent}: {e}; trying again");
                    tries += 1;
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
            }
        };
        let (copies, path) = (self.clone(), path.to_path_buf());
        tokio::task::spawn_blocking(move || {
            for (n, l) in lines.iter().enumerate() {
                copies.apply(&path, n as u64, l);
            }
        })
        .await
        .map_err(FleetError::broker)
    }
}

/// Follows the transcript lines of session `session` from the first one
/// and appends each to the child's file in `session_dir` (only children
/// whose file is there: this session's). Survives broker restarts.
pub fn follow(broker: Arc<Broker>, session: String, session_dir: PathBuf, copies: Copies) {
    tokio::spawn(async move {
        let mut next_seq = 0u64;
        loop {
            let consumer = async {
                lines_stream(&broker)
                    .await?
                    .create_consumer(consumer::pull::OrderedConfig {
                        filter_subject: broker.names.lines_of(&session),
                        deliver_policy: if next_seq == 0 {
                            consumer::DeliverPolicy::All
                        } else {
                            consumer::DeliverPolicy::ByStartSequence {
                                start_sequence: next_seq,
                            }
                        },
                        ..Default::default()
                    })
                    .await
                    .map_err(FleetError::broker)?
                    .messages()
                    .await
                    .map_err(FleetError::broker)
            };
            let mut messages = match consumer.await {
                Ok(m) => m,
                Err(e) => {
                    tracing::debug!("transcript lines: {e}");
                    tokio::time::sleep(Duration::from_millis(250)).await;
                    continue;
                }
            };
            while let Some(m) = messages.next().await {
                let Ok(m) = m else { break };
                if let Ok(info) = m.info() {
                    next_seq = info.stream_sequence + 1;
                }
                let (Some(agent), Some(n)) = (
                    m.subject.rsplit('.').next(),
                    line_number(m.headers.as_ref()),
                ) else {
                    continue;
                };
                if super::broker::check_token("agent id", agent).is_err() {
                    continue;
                }
                let path = crate::runtime::resume::sub_agent_transcript(&session_dir, agent);
                let (copies, line) = (copies.clone(), m.payload.clone());
                let _ = tokio::task::spawn_blocking(move || copies.apply(&path, n, &line)).await;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    });
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_local_copy_is_cut_or_written_to_the_broker_s() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a/agent-x.jsonl");
        let lines = [
            Bytes::from_static(b"{\"a\":1}"),
            Bytes::from_static(b"{\"b\":2}"),
        ];
        // None yet: written.
        assert_eq!(write_copy(&path, &lines).unwrap(), count(&path));
        // Ahead of the broker (a line that never reached it): cut.
        std::fs::write(&path, "{\"a\":1}\n{\"b\":2}\n{\"lost\":3}\n").unwrap();
        write_copy(&path, &lines).unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "{\"a\":1}\n{\"b\":2}\n"
        );
        // Different: written over.
        std::fs::write(&path, "{\"other\":0}\n").unwrap();
        let local = write_copy(&path, &lines).unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "{\"a\":1}\n{\"b\":2}\n"
        );
        assert_eq!(local, Local { lines: 2, len: 16 });
        assert_eq!(offset_of_line(&path, 1), 8);
        // A partial last line is not a line yet.
        std::fs::write(&path, "{\"a\":1}\n{\"b\":2}\n{\"par").unwrap();
        assert_eq!(lines_from(&path, 8), vec![Bytes::from_static(b"{\"b\":2}")]);
        assert_eq!(count(&path), Local { lines: 2, len: 16 });
    }

    #[test]
    fn a_copy_appends_each_line_once_and_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agent-x.jsonl");
        let copies = Copies::default();
        // No file: not this session's child.
        copies.apply(&path, 0, b"{}");
        assert!(!path.exists());
        std::fs::write(&path, "{\"n\":0}\n").unwrap();
        copies.apply(&path, 0, b"{\"n\":0}");
        copies.apply(&path, 2, b"{\"n\":2}");
        copies.apply(&path, 1, b"{\"n\":1}");
        copies.apply(&path, 1, b"{\"n\":1}");
        copies.apply(&path, 2, b"{\"n\":2}");
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "{\"n\":0}\n{\"n\":1}\n{\"n\":2}\n"
        );
    }
}
