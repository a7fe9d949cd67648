//! File checkpoints for an SDK session (`enable_file_checkpointing`,
//! `CLAUDE_CODE_ENABLE_SDK_FILE_CHECKPOINTING`): before the Edit, Write or
//! NotebookEdit tool first changes a file during a user message, the
//! file's content (or its absence) is copied into the session folder;
//! `rewind_files` puts every file the tools changed back as it was when a
//! given user message arrived, and removes the files they created since.
//!
//! Only paths these tools wrote are ever restored or removed. A path that
//! has become a symlink or another non-regular file, or whose folder now
//! resolves somewhere else than when the copy was taken, is left alone and
//! counted (`skippedLinks`). Storage is bounded: a file larger than
//! [`MAX_FILE_BYTES`] is not copied, nor anything once the copies reach
//! [`MAX_TOTAL_BYTES`]; such a file is not rewound.
//!
//! In a session folder the checkpoints outlive the process: each message
//! and copy is also written as a line of `file-history/index.jsonl`, which
//! a resumed session reads back. What it reads is checked: a copy must be
//! a numbered file of the store itself, a path absolute, a message one
//! listed before it; a line that fails is skipped with a warning.

use std::collections::HashSet;
use std::io::{self, Read as _, Write as _};
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde_json::Value;

/// The largest file a checkpoint copies.
pub const MAX_FILE_BYTES: u64 = 16 << 20;
/// The most bytes of copies one session keeps.
pub const MAX_TOTAL_BYTES: u64 = 512 << 20;
/// Claude Code's words for a message without a checkpoint.
pub const NO_CHECKPOINT: &str = "No file checkpoint found for this message.";
/// The index of a session folder's checkpoints.
const INDEX: &str = "index.jsonl";
/// The largest index read back.
const MAX_INDEX_BYTES: u64 = 16 << 20;

/// One line of [`INDEX`].
#[derive(Debug, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Record {
    /// A user message arrived.
    Message { id: String },
    /// A file as it was when message number `message` arrived.
    Version {
        message: usize,
        path: PathBuf,
        before: Saved,
        folder: Option<PathBuf>,
    },
}

/// [`Before`] as the index keeps it: a copy by its name in the store.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
enum Saved {
    Absent,
    Copy { name: String },
    Unavailable,
}

/// The tools whose changes are checkpointed, with the input field naming
/// the file they change.
const TRACKED: &[(&str, &str)] = &[
    ("Edit", "file_path"),
    ("Write", "file_path"),
    ("NotebookEdit", "notebook_path"),
];

/// The file a call of `tool` with `input` changes, when it is one the
/// checkpoints track (relative paths against `cwd`).
pub fn target(tool: &str, input: &Value, cwd: &Path) -> Option<PathBuf> {
    let field = TRACKED.iter().find(|(t, _)| *t == tool)?.1;
    let path = Path::new(input.get(field)?.as_str()?);
    Some(crate::paths::lexical(&cwd.join(path)))
}

/// A file's state when a message arrived.
#[derive(Debug)]
enum Before {
    /// It did not exist.
    Absent,
    /// Its content, copied to this file of the store.
    Copy(PathBuf),
    /// It existed but was not copied (too large, over the budget, not
    /// readable): it cannot be rewound past this message.
    Unavailable,
}

/// One copy: `path` as it was when message `message` arrived.
#[derive(Debug)]
struct Version {
    message: usize,
    path: PathBuf,
    before: Before,
    /// Where the file's folder resolved to when the copy was taken.
    folder: Option<PathBuf>,
}

#[derive(Debug, Default)]
struct Inner {
    /// The user messages, in order, by id.
    messages: Vec<String>,
    versions: Vec<Version>,
    /// Paths copied during the current (last) message.
    copied_now: HashSet<PathBuf>,
    bytes: u64,
    next: u64,
}

/// The checkpoints of one session.
#[derive(Debug)]
pub struct FileHistory {
    dir: PathBuf,
    /// Holds a scratch folder when the session keeps no folder.
    _scratch: Option<tempfile::TempDir>,
    /// Whether the checkpoints are written to [`INDEX`] (in a session folder).
    kept: bool,
    inner: Mutex<Inner>,
}

/// What a rewind did or would do.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Rewind {
    pub files_changed: Vec<PathBuf>,
    pub insertions: u64,
    pub deletions: u64,
    pub skipped_links: u64,
}

impl FileHistory {
    /// Checkpoints kept in `session_dir/file-history`, or in a scratch
    /// folder when the session has no folder.
    pub fn new(session_dir: Option<&Path>) -> io::Result<Self> {
        let (dir, scratch) = match session_dir {
            Some(d) => (d.join("file-history"), None),
            None => {
                let t = tempfile::Builder::new()
                    .prefix("cadre-file-history")
                    .tempdir()?;
                (t.path().to_path_buf(), Some(t))
            }
        };
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)?;
        let kept = scratch.is_none();
        let inner = if kept { load(&dir) } else { Inner::default() };
        Ok(FileHistory {
            dir,
            _scratch: scratch,
            kept,
            inner: Mutex::new(inner),
        })
    }

    /// Appends `record` to the index (in a session folder).
    fn save(&self, record: &Record) {
        if !self.kept {
            return;
        }
        let Ok(mut line) = serde_json::to_string(record) else {
            return;
        };
        line.push('\n');
        let path = self.dir.join(INDEX);
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(&path)
            .and_then(|mut f| f.write_all(line.as_bytes()));
        if let Err(e) = written {
            tracing::warn!("file checkpoint: cannot write {}: {e}", path.display());
        }
    }

    /// A user message with this id arrived: later changes belong to it.
    pub fn begin(&self, message_id: &str) {
        if let Ok(mut g) = self.inner.lock() {
            g.messages.push(message_id.to_string());
            g.copied_now.clear();
            self.save(&Record::Message {
                id: message_id.to_string(),
            });
        }
    }

    /// A tool is about to change `path`: copies it, the first time in the
    /// current message.
    pub fn before_change(&self, path: &Path) {
        let Ok(mut g) = self.inner.lock() else {
            return;
        };
        let Some(message) = g.messages.len().checked_sub(1) else {
            return;
        };
        if !g.copied_now.insert(path.to_path_buf()) {
            return;
        }
        let folder = path.parent().map(crate::paths::resolve);
        let before = match std::fs::symlink_metadata(path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Before::Absent,
            Err(_) => Before::Unavailable,
            Ok(meta) if !meta.is_file() => Before::Unavailable,
            Ok(meta)
                if meta.len() > MAX_FILE_BYTES
                    || g.bytes.saturating_add(meta.len()) > MAX_TOTAL_BYTES =>
            {
                tracing::warn!(
                    "file checkpoint: {} not copied ({} bytes; at most {MAX_FILE_BYTES} a file, {MAX_TOTAL_BYTES} a session)",
                    path.display(),
                    meta.len()
                );
                Before::Unavailable
            }
            Ok(_) => {
                g.next += 1;
                let copy = self.dir.join(format!("{}", g.next));
                match copy_capped(path, &copy) {
                    Ok(n) => {
                        g.bytes = g.bytes.saturating_add(n);
                        Before::Copy(copy)
                    }
                    Err(e) => {
                        tracing::warn!("file checkpoint: cannot copy {}: {e}", path.display());
                        Before::Unavailable
                    }
                }
            }
        };
        let saved = match &before {
            Before::Absent => Saved::Absent,
            Before::Copy(c) => Saved::Copy {
                name: c
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
            },
            Before::Unavailable => Saved::Unavailable,
        };
        self.save(&Record::Version {
            message,
            path: path.to_path_buf(),
            before: saved,
            folder: folder.clone(),
        });
        g.versions.push(Version {
            message,
            path: path.to_path_buf(),
            before,
            folder,
        });
    }

    /// Puts the tracked files back as they were when message `message_id`
    /// arrived (`dry_run`: only says what would change). `Err`: no such
    /// message, or nothing could be restored.
    pub fn rewind(&self, message_id: &str, dry_run: bool) -> Result<Rewind, String> {
        let g = self.inner.lock().map_err(|_| NO_CHECKPOINT.to_string())?;
        let Some(m) = g.messages.iter().position(|id| id == message_id) else {
            return Err(NO_CHECKPOINT.into());
        };
        // Each path's state at `m`: its first copy taken at `m` or later.
        let mut seen = HashSet::new();
        let targets: Vec<&Version> = g
            .versions
            .iter()
            .filter(|v| v.message >= m && seen.insert(v.path.clone()))
            .collect();
        let mut out = Rewind::default();
        let mut failed = 0;
        for v in targets {
            let wanted = match &v.before {
                Before::Absent => None,
                Before::Copy(c) => match read_capped(c) {
                    Ok(b) => Some(b),
                    Err(e) => {
                        tracing::warn!(
                            "file checkpoint: copy of {} unreadable: {e}",
                            v.path.display()
                        );
                        failed += 1;
                        continue;
                    }
                },
                Before::Unavailable => {
                    failed += 1;
                    continue;
                }
            };
            let now = match std::fs::symlink_metadata(&v.path) {
                Err(e) if e.kind() == io::ErrorKind::NotFound => None,
                Ok(meta) if meta.is_file() => read_capped(&v.path).ok(),
                _ => {
                    if !dry_run {
                        out.skipped_links += 1;
                    }
                    continue;
                }
            };
            if now == wanted {
                continue;
            }
            let (ins, del) = line_changes(
                now.as_deref().unwrap_or(b""),
                wanted.as_deref().unwrap_or(b""),
            );
            if dry_run {
                out.files_changed.push(v.path.clone());
                out.insertions += ins;
                out.deletions += del;
                continue;
            }
            let folder_now = v.path.parent().map(crate::paths::resolve);
            if v.path.parent().is_some_and(Path::exists) && folder_now != v.folder {
                out.skipped_links += 1;
                continue;
            }
            let done = match &wanted {
                None => std::fs::remove_file(&v.path),
                Some(bytes) => write_regular(&v.path, bytes),
            };
            match done {
                Ok(()) => {
                    out.files_changed.push(v.path.clone());
                    out.insertions += ins;
                    out.deletions += del;
                }
                Err(e) => {
                    tracing::warn!("file checkpoint: cannot restore {}: {e}", v.path.display());
                    failed += 1;
                }
            }
        }
        if !dry_run && failed > 0 && out.files_changed.is_empty() {
            return Err(format!("{failed} file(s) could not be restored"));
        }
        Ok(out)
    }
}

/// The checkpoints an earlier process of the session kept in `dir` (none
/// when there is no index). Each line is checked; one that fails is
/// skipped with a warning naming it.
fn load(dir: &Path) -> Inner {
    let path = dir.join(INDEX);
    let mut g = Inner::default();
    let text = match crate::raw::read_text(&path, MAX_INDEX_BYTES) {
        Ok(t) => t,
        Err(e) => {
            if path.exists() {
                tracing::warn!("file checkpoint: {e}; earlier checkpoints are not used");
            }
            return g;
        }
    };
    for (n, line) in text.lines().enumerate() {
        let skip = |why: &str| {
            tracing::warn!(
                "file checkpoint: {}:{}: {why}; skipped",
                path.display(),
                n + 1
            );
        };
        let record = match serde_json::from_str::<Record>(line) {
            Ok(r) => r,
            Err(e) => {
                skip(&e.to_string());
                continue;
            }
        };
        match record {
            Record::Message { id } => g.messages.push(id),
            Record::Version {
                message,
                path: file,
                before,
                folder,
            } => {
                if message >= g.messages.len() || !file.is_absolute() {
                    skip("no such message, or a relative path");
                    continue;
                }
                let before = match before {
                    Saved::Absent => Before::Absent,
                    Saved::Unavailable => Before::Unavailable,
                    // Only a numbered file of the store itself.
                    Saved::Copy { name } => match name.parse::<u64>() {
                        Ok(k) if dir.join(&name).is_file() => {
                            g.next = g.next.max(k);
                            let copy = dir.join(&name);
                            let size = std::fs::metadata(&copy).map_or(0, |m| m.len());
                            g.bytes = g.bytes.saturating_add(size);
                            Before::Copy(copy)
                        }
                        _ => {
                            skip("not a copy in the store");
                            continue;
                        }
                    },
                };
                g.versions.push(Version {
                    message,
                    path: file,
                    before,
                    folder,
                });
            }
        }
    }
    g
}

/// Copies a regular file of at most [`MAX_FILE_BYTES`]; its size.
fn copy_capped(from: &Path, to: &Path) -> io::Result<u64> {
    let bytes = read_capped(from)?;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(to)?;
    f.write_all(&bytes)?;
    Ok(bytes.len() as u64)
}

/// Reads a file without following a final symlink, up to the cap.
fn read_capped(path: &Path) -> io::Result<Vec<u8>> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)?;
    if !f.metadata()?.is_file() {
        return Err(io::Error::other("not a regular file"));
    }
    let mut bytes = Vec::new();
    f.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(io::Error::other("larger than a checkpoint keeps"));
    }
    Ok(bytes)
}

/// Writes a regular file (its folder made when missing), never through a
/// symlink at the path.
fn write_regular(path: &Path, bytes: &[u8]) -> io::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)?;
    if !f.metadata()?.is_file() {
        return Err(io::Error::other("not a regular file"));
    }
    f.set_len(0)?;
    f.write_all(bytes)?;
    f.flush()
}

/// Lines added and removed going from `now` to `wanted`: the lines outside
/// their longest common subsequence (past a size where that costs too
/// much, every line between the common start and end).
fn line_changes(now: &[u8], wanted: &[u8]) -> (u64, u64) {
    let a: Vec<&[u8]> = lines(now);
    let b: Vec<&[u8]> = lines(wanted);
    let start = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let end = a[start..]
        .iter()
        .rev()
        .zip(b[start..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let (a, b) = (&a[start..a.len() - end], &b[start..b.len() - end]);
    let common = if a.len().saturating_mul(b.len()) <= 4_000_000 {
        let mut row = vec![0u32; b.len() + 1];
        for x in a {
            let mut diag = 0;
            for (j, y) in b.iter().enumerate() {
                let up = row[j + 1];
                row[j + 1] = if x == y { diag + 1 } else { up.max(row[j]) };
                diag = up;
            }
        }
        row[b.len()] as usize
    } else {
        0
    };
    ((b.len() - common) as u64, (a.len() - common) as u64)
}

fn lines(bytes: &[u8]) -> Vec<&[u8]> {
    if bytes.is_empty() {
        return Vec::new();
    }
    bytes
        .strip_suffix(b"\n")
        .unwrap_or(bytes)
        .split(|b| *b == b'\n')
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn line_changes_count_what_a_diff_shows() {
        assert_eq!(line_changes(b"changed\n", b"original\n"), (1, 1));
        assert_eq!(line_changes(b"bee\n", b""), (0, 1));
        assert_eq!(line_changes(b"a\nb\nc\n", b"a\nx\nb\nc\n"), (1, 0));
        assert_eq!(line_changes(b"same\n", b"same\n"), (0, 0));
    }

    #[test]
    fn rewinds_to_a_message_and_removes_files_made_after_it() {
        let dir = tempfile::tempdir().unwrap();
        let h = FileHistory::new(Some(&dir.path().join("s"))).unwrap();
        let a = dir.path().join("a.txt");
        let b = dir.path().join("sub/b.txt");
        std::fs::write(&a, "original\n").unwrap();
        h.begin("m1");
        h.before_change(&a);
        std::fs::write(&a, "changed\n").unwrap();
        h.before_change(&a);
        std::fs::write(&a, "changed twice\n").unwrap();
        h.begin("m2");
        h.before_change(&b);
        std::fs::create_dir_all(b.parent().unwrap()).unwrap();
        std::fs::write(&b, "bee\n").unwrap();
        assert_eq!(h.rewind("nope", true), Err(NO_CHECKPOINT.to_string()));
        let preview = h.rewind("m1", true).unwrap();
        assert_eq!(preview.files_changed, [a.clone(), b.clone()]);
        assert_eq!((preview.insertions, preview.deletions), (1, 2));
        assert!(b.exists());
        h.rewind("m2", false).unwrap();
        assert!(!b.exists());
        assert_eq!(std::fs::read_to_string(&a).unwrap(), "changed twice\n");
        h.rewind("m1", false).unwrap();
        assert_eq!(std::fs::read_to_string(&a).unwrap(), "original\n");
        assert_eq!(h.rewind("m1", true).unwrap(), Rewind::default());
    }

    #[test]
    fn checkpoints_of_a_session_folder_outlive_the_process() {
        let dir = tempfile::tempdir().unwrap();
        let session = dir.path().join("s");
        let a = dir.path().join("a.txt");
        let b = dir.path().join("b.txt");
        std::fs::write(&a, "original\n").unwrap();
        {
            let h = FileHistory::new(Some(&session)).unwrap();
            h.begin("m1");
            h.before_change(&a);
            std::fs::write(&a, "changed\n").unwrap();
        }
        // The next process of the session (a resume) goes on from there.
        let h = FileHistory::new(Some(&session)).unwrap();
        h.begin("m2");
        h.before_change(&a);
        h.before_change(&b);
        std::fs::write(&a, "changed again\n").unwrap();
        std::fs::write(&b, "new\n").unwrap();
        h.rewind("m2", false).unwrap();
        assert_eq!(std::fs::read_to_string(&a).unwrap(), "changed\n");
        assert!(!b.exists());
        h.rewind("m1", false).unwrap();
        assert_eq!(std::fs::read_to_string(&a).unwrap(), "original\n");
        // The second process's copy did not overwrite the first's.
        let copies = std::fs::read_dir(session.join("file-history"))
            .unwrap()
            .filter(|e| e.as_ref().unwrap().file_name() != INDEX)
            .count();
        assert_eq!(copies, 2);
    }

    #[test]
    fn an_index_line_naming_a_file_outside_the_store_is_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let session = dir.path().join("s");
        let victim = dir.path().join("victim.txt");
        std::fs::write(&victim, "keep me\n").unwrap();
        std::fs::create_dir_all(session.join("file-history")).unwrap();
        let lines = [
            json!({"kind": "message", "id": "m1"}),
            // A copy outside the store, and a relative path.
            json!({"kind": "version", "message": 0, "path": victim,
                   "before": {"state": "copy", "name": "../../etc/passwd"}, "folder": null}),
            json!({"kind": "version", "message": 0, "path": "rel.txt",
                   "before": {"state": "absent"}, "folder": null}),
            json!({"kind": "version", "message": 5, "path": victim,
                   "before": {"state": "absent"}, "folder": null}),
        ];
        let text: String = lines.iter().map(|l| format!("{l}\nnot json\n")).collect();
        std::fs::write(session.join("file-history").join(INDEX), text).unwrap();
        let h = FileHistory::new(Some(&session)).unwrap();
        assert_eq!(h.rewind("m1", false).unwrap(), Rewind::default());
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me\n");
    }

    #[test]
    fn a_path_that_became_a_symlink_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let h = FileHistory::new(None).unwrap();
        let a = dir.path().join("a.txt");
        let elsewhere = dir.path().join("elsewhere");
        std::fs::write(&a, "mine\n").unwrap();
        std::fs::write(&elsewhere, "not mine\n").unwrap();
        h.begin("m1");
        h.before_change(&a);
        std::fs::remove_file(&a).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &a).unwrap();
        let done = h.rewind("m1", false).unwrap();
        assert_eq!(done.skipped_links, 1);
        assert_eq!(std::fs::read_to_string(&elsewhere).unwrap(), "not mine\n");
    }
}
