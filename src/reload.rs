//! Hot reload: rebuild the snapshot when its files change, and swap it in
//! only when it builds.
//!
//! Two halves. The pure half ([`diff`], [`apply`]) compares an old snapshot
//! with the result of a new build and says what changed (agents added,
//! removed or changed; flags whose value or effective value changed;
//! templates and tool specs changed), so a reload is unit-testable without
//! a watcher. The [`Watcher`] half watches the config file's folder, every
//! agent source folder (recursively; a folder that does not exist yet
//! through its nearest existing ancestor) and the builtin folder (templates
//! and tool specs), debounces bursts into one rebuild, swaps the
//! `ArcSwap` on success, keeps the old snapshot on a config error, re-arms
//! its watches after each reload, and treats `SIGHUP` as a forced reload.
//! Sessions read the snapshot once per turn, so a swap changes the next
//! turn and never the one in flight.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use notify::event::{AccessKind, AccessMode, ModifyKind};
use notify::{EventKind, RecommendedWatcher, RecursiveMode};
use notify_debouncer_full::{DebounceEventResult, Debouncer, RecommendedCache, new_debouncer};
use serde::Serialize;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::config::ConfigError;
use crate::diagnostic::Diagnostic;
use crate::snapshot::{self, Snapshot, SnapshotInput};

/// A flag whose value or effective value changed, as it is now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FlagChange {
    pub name: String,
    pub value: bool,
    /// Effective for the session kind the reload was evaluated for.
    pub effective: bool,
}

/// What differs between two snapshots. Every list is sorted by name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Changes {
    pub agents_added: Vec<String>,
    pub agents_removed: Vec<String>,
    pub agents_changed: Vec<String>,
    pub flags_changed: Vec<FlagChange>,
    pub templates_changed: Vec<String>,
    pub tools_changed: Vec<String>,
    /// Skills added, removed or changed (`SKILL.md` files).
    pub skills_changed: Vec<String>,
    /// Any other setting (provider, models, permissions, ...) changed.
    pub settings_changed: bool,
    /// Project memory (`CLAUDE.md` files and their imports) changed.
    pub memory_changed: bool,
    /// Team files (`.claude/teams/NAME.yaml`) added, removed or changed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub teams_changed: Vec<String>,
}

impl Changes {
    pub fn is_empty(&self) -> bool {
        self == &Changes::default()
    }
}

/// One reload attempt.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReloadEvent {
    /// Whether a new snapshot was swapped in.
    pub ok: bool,
    /// The generation in use after the attempt (unchanged when `ok` is false).
    pub generation: u64,
    /// Time spent building and applying, in milliseconds.
    pub duration_ms: f64,
    #[serde(flatten)]
    pub changes: Changes,
    /// On success the new snapshot's diagnostics (skipped agent files and
    /// the like); on failure why the config could not be loaded.
    pub diagnostics: Vec<Diagnostic>,
}

impl fmt::Display for ReloadEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.ok {
            write!(
                f,
                "reload failed, keeping generation {} ({:.1} ms)",
                self.generation, self.duration_ms
            )?;
            for d in &self.diagnostics {
                write!(f, "; {d}")?;
            }
            return Ok(());
        }
        write!(
            f,
            "reloaded: generation {} ({:.1} ms)",
            self.generation, self.duration_ms
        )?;
        let c = &self.changes;
        if c.is_empty() {
            f.write_str(", nothing changed")?;
        }
        let lists = [
            ("agents added", &c.agents_added),
            ("agents removed", &c.agents_removed),
            ("agents changed", &c.agents_changed),
            ("templates changed", &c.templates_changed),
            ("tools changed", &c.tools_changed),
            ("skills changed", &c.skills_changed),
            ("team files changed", &c.teams_changed),
        ];
        for (label, names) in lists {
            if !names.is_empty() {
                write!(f, "; {label}: {}", names.join(", "))?;
            }
        }
        if !c.flags_changed.is_empty() {
            let flags: Vec<String> = c
                .flags_changed
                .iter()
                .map(|fc| {
                    format!(
                        "{}={} (effective: {})",
                        fc.name,
                        if fc.value { "on" } else { "off" },
                        if fc.effective { "yes" } else { "no" }
                    )
                })
                .collect();
            write!(f, "; flags changed: {}", flags.join(", "))?;
        }
        if c.settings_changed {
            f.write_str("; settings changed")?;
        }
        if c.memory_changed {
            f.write_str("; project memory changed")?;
        }
        if !self.diagnostics.is_empty() {
            write!(f, "; {} diagnostic(s)", self.diagnostics.len())?;
        }
        Ok(())
    }
}

/// What changed from `old` to `new`. Flags are evaluated for a session
/// that is (or is not) interactive, each snapshot with its own coordinator
/// mode; a flag is listed when its value or its effective value changed.
pub fn diff(old: &Snapshot, new: &Snapshot, interactive: bool) -> Changes {
    let mut c = Changes::default();
    for (name, def) in &new.catalog.agents {
        match old.catalog.agents.get(name) {
            None => c.agents_added.push(name.clone()),
            // An agent read from an unchanged file is the same allocation
            // (see `catalog::load_incremental`): no need to compare it.
            Some(o) if !Arc::ptr_eq(o, def) && **o != **def => {
                c.agents_changed.push(name.clone());
            }
            Some(_) => {}
        }
    }
    c.agents_removed = old
        .catalog
        .agents
        .keys()
        .filter(|n| !new.catalog.agents.contains_key(*n))
        .cloned()
        .collect();

    let (old_kind, new_kind) = (old.session_kind(interactive), new.session_kind(interactive));
    let names: BTreeSet<&str> = old
        .flags()
        .iter()
        .chain(new.flags().iter())
        .map(|f| f.name.as_str())
        .collect();
    for name in names {
        let before = old
            .flags()
            .get(name)
            .map(|f| (f.value, f.effective(old_kind)));
        let after = new
            .flags()
            .get(name)
            .map(|f| (f.value, f.effective(new_kind)));
        if before != after {
            let (value, effective) = after.unwrap_or((false, false));
            c.flags_changed.push(FlagChange {
                name: name.to_string(),
                value,
                effective,
            });
        }
    }

    let (ot, nt) = (old.templates.origins(), new.templates.origins());
    c.templates_changed = differing(ot.keys(), nt.keys(), |n| {
        ot.get(n).map(|o| &o.text) != nt.get(n).map(|o| &o.text)
    });
    c.tools_changed = differing(old.tools.names(), new.tools.names(), |n| {
        old.tools.get(n).map(|s| &**s) != new.tools.get(n).map(|s| &**s)
    });
    let (osk, nsk) = (&old.skills.skills, &new.skills.skills);
    c.skills_changed = differing(osk.keys(), nsk.keys(), |n| osk.get(n) != nsk.get(n));

    // Flags are reported above; compare the rest of the settings.
    let mut os = old.settings().clone();
    let mut ns = new.settings().clone();
    os.features.clear();
    ns.features.clear();
    os.flags.clear();
    ns.flags.clear();
    c.settings_changed = os != ns;
    c.memory_changed = old.memory.files != new.memory.files;
    let (ot, nt) = (&old.teams.teams, &new.teams.teams);
    c.teams_changed = differing(ot.keys(), nt.keys(), |n| ot.get(n) != nt.get(n));
    c
}

/// The names in `old` or `new` for which `differs` holds, sorted, once each.
fn differing<'a, S: AsRef<str> + ?Sized + 'a>(
    old: impl Iterator<Item = &'a S>,
    new: impl Iterator<Item = &'a S>,
    differs: impl Fn(&str) -> bool,
) -> Vec<String> {
    let names: BTreeSet<&str> = old.chain(new).map(AsRef::as_ref).collect();
    names
        .into_iter()
        .filter(|n| differs(n))
        .map(str::to_string)
        .collect()
}

/// The outcome of [`apply`]: the event to report and, when the build
/// succeeded, the snapshot to swap in.
#[derive(Debug)]
pub struct Applied {
    pub event: ReloadEvent,
    pub snapshot: Option<Snapshot>,
}

/// Decides what a build result means for the engine: a snapshot that built
/// replaces `old` (its generation is the one it was built with); a config
/// error keeps `old` and reports why. Pure: nothing is swapped here.
pub fn apply(
    old: &Snapshot,
    built: Result<Snapshot, ConfigError>,
    interactive: bool,
    duration: Duration,
) -> Applied {
    let duration_ms = duration.as_secs_f64() * 1000.0;
    match built {
        Ok(new) => Applied {
            event: ReloadEvent {
                ok: true,
                generation: new.generation,
                duration_ms,
                changes: diff(old, &new, interactive),
                diagnostics: new.diagnostics.clone(),
            },
            snapshot: Some(new),
        },
        Err(e) => Applied {
            event: ReloadEvent {
                ok: false,
                generation: old.generation,
                duration_ms,
                changes: Changes::default(),
                diagnostics: e.diagnostics,
            },
            snapshot: None,
        },
    }
}

/// A snapshot built from the files, not applied yet.
#[derive(Debug)]
pub struct Built {
    old: Arc<Snapshot>,
    built: Result<Snapshot, ConfigError>,
    started: Instant,
}

/// Builds the next snapshot (generation + 1) from the files.
pub fn build_next(input: &SnapshotInput, swap: &ArcSwap<Snapshot>) -> Built {
    let started = Instant::now();
    let old = swap.load_full();
    let built = snapshot::build_after(input, old.generation + 1, Some(&old));
    Built {
        old,
        built,
        started,
    }
}

/// Applies a build: swaps on success, logs, and returns the event.
pub fn commit(b: Built, swap: &ArcSwap<Snapshot>, interactive: bool) -> ReloadEvent {
    let applied = apply(&b.old, b.built, interactive, b.started.elapsed());
    store(applied, swap, b.started)
}

fn store(applied: Applied, swap: &ArcSwap<Snapshot>, started: Instant) -> ReloadEvent {
    let Applied {
        mut event,
        snapshot,
    } = applied;
    if let Some(new) = snapshot {
        swap.store(Arc::new(new));
    }
    event.duration_ms = started.elapsed().as_secs_f64() * 1000.0;
    if event.ok {
        tracing::info!(
            generation = event.generation,
            agents_added = ?event.changes.agents_added,
            agents_removed = ?event.changes.agents_removed,
            agents_changed = ?event.changes.agents_changed,
            flags_changed = ?event.changes.flags_changed.iter().map(|f| &f.name).collect::<Vec<_>>(),
            templates_changed = ?event.changes.templates_changed,
            "{event}"
        );
    } else {
        tracing::warn!(generation = event.generation, "{event}");
    }
    event
}

/// Rebuilds from the files, swaps on success, logs, and returns the event.
/// With `quiet`, a successful build that changes nothing is neither swapped
/// nor logged, and `None` is returned.
pub fn reload_quiet(
    input: &SnapshotInput,
    swap: &ArcSwap<Snapshot>,
    interactive: bool,
    quiet: bool,
) -> Option<ReloadEvent> {
    let b = build_next(input, swap);
    let applied = apply(&b.old, b.built, interactive, b.started.elapsed());
    if quiet && applied.event.ok && applied.event.changes.is_empty() {
        return None;
    }
    Some(store(applied, swap, b.started))
}

/// Rebuilds from the files, swaps on success, logs, and returns the event.
pub fn reload(input: &SnapshotInput, swap: &ArcSwap<Snapshot>, interactive: bool) -> ReloadEvent {
    commit(build_next(input, swap), swap, interactive)
}

/// What the watcher must follow: files (watched through their folder, not
/// recursively) and folders (recursively).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Targets {
    pub files: Vec<PathBuf>,
    pub dirs: Vec<PathBuf>,
}

/// Config file names looked for in the working directory when no file is
/// named explicitly (see `config::discover`).
const CONFIG_CANDIDATES: &[&str] = &[
    "cadre.toml",
    "cadre.yaml",
    "config/cadre.toml",
    "config/cadre.yaml",
];

/// The files and folders a snapshot depends on.
pub fn targets(snap: &Snapshot, input: &SnapshotInput) -> Targets {
    let mut files: Vec<PathBuf> = snap.config.path.iter().cloned().collect();
    // Every layer's settings file, read now or not (created later).
    files.extend(
        snap.config
            .files
            .iter()
            .filter(|f| f.on_disk())
            .map(|f| f.path.clone()),
    );
    // Memory files and their imports.
    files.extend(snap.memory.watched.iter().cloned());
    let explicit = input.load.config.is_some() || input.load.env_var("CADRE_CONFIG").is_some();
    if !explicit {
        files.extend(CONFIG_CANDIDATES.iter().map(|c| input.cwd().join(c)));
    }
    files.sort();
    files.dedup();
    let mut dirs = snap.watched_dirs.clone();
    dirs.sort();
    dirs.dedup();
    Targets { files, dirs }
}

/// The deepest existing folder at or above `path`.
fn nearest_existing(path: &Path) -> Option<PathBuf> {
    path.ancestors().find(|p| p.is_dir()).map(Path::to_path_buf)
}

/// The watches that follow `t` given what exists now: an existing folder
/// recursively, a missing one (and a file's folder) through its nearest
/// existing ancestor, not recursively. Paths inside a recursive watch are
/// left out.
pub fn watch_plan(t: &Targets) -> BTreeMap<PathBuf, RecursiveMode> {
    let mut plan: BTreeMap<PathBuf, RecursiveMode> = BTreeMap::new();
    let mut add = |p: PathBuf, mode: RecursiveMode| {
        let e = plan.entry(p).or_insert(mode);
        if mode == RecursiveMode::Recursive {
            *e = mode;
        }
    };
    for d in &t.dirs {
        if d.is_dir() {
            add(d.clone(), RecursiveMode::Recursive);
        } else if let Some(a) = nearest_existing(d) {
            add(a, RecursiveMode::NonRecursive);
        }
    }
    for f in &t.files {
        if let Some(a) = f.parent().and_then(nearest_existing) {
            add(a, RecursiveMode::NonRecursive);
        }
    }
    let recursive: Vec<PathBuf> = plan
        .iter()
        .filter(|(_, m)| **m == RecursiveMode::Recursive)
        .map(|(p, _)| p.clone())
        .collect();
    plan.retain(|p, _| !recursive.iter().any(|r| p != r && p.starts_with(r)));
    plan
}

/// Whether a change at `path` can affect a snapshot that follows `t`: the
/// path is a watched file, lies in a watched folder, or is a folder on the
/// way to one (created or renamed).
pub fn relevant(path: &Path, t: &Targets) -> bool {
    t.files.iter().any(|f| f == path || f.starts_with(path))
        || t.dirs
            .iter()
            .any(|d| path.starts_with(d) || d.starts_with(path))
}

/// How far before a snapshot's `read_from` a change still counts as made
/// after it: file systems stamp times with a coarse clock (a few ms).
const STAMP_MARGIN: Duration = Duration::from_millis(50);

/// Whether a file or folder that `t` follows changed after `read_from`
/// (less [`STAMP_MARGIN`]): a target file or the folder it is in; a target
/// folder that exists, or anything under it (symbolic links followed); the
/// nearest existing folder above one that does not. A change is a newer
/// modification time or, on Unix, status-change time (a file moved into
/// place keeps its modification time). Only stats, no reading: this is the
/// check that decides whether the watcher's catch-up rebuild is needed.
pub fn changed_since(t: &Targets, read_from: std::time::SystemTime) -> bool {
    let since = read_from.checked_sub(STAMP_MARGIN).unwrap_or(read_from);
    let newer = |m: &std::fs::Metadata| changed_at(m).is_some_and(|c| c > since);
    let path_newer = |p: &Path| {
        std::fs::symlink_metadata(p).is_ok_and(|m| newer(&m))
            || std::fs::metadata(p).is_ok_and(|m| newer(&m))
    };
    let files = t.files.iter().any(|f| {
        path_newer(f)
            || f.parent()
                .and_then(nearest_existing)
                .is_some_and(|d| path_newer(&d))
    });
    files
        || t.dirs.iter().any(|d| {
            if d.is_dir() {
                tree_newer(d, &newer, &mut BTreeSet::new(), 0)
            } else {
                nearest_existing(d).is_some_and(|a| path_newer(&a))
            }
        })
}

/// The later of a file's modification and (Unix) status-change times.
fn changed_at(m: &std::fs::Metadata) -> Option<std::time::SystemTime> {
    let modified = m.modified().ok();
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let secs = u64::try_from(m.ctime()).ok();
        let nanos = u32::try_from(m.ctime_nsec()).ok();
        let ctime = secs
            .zip(nanos)
            .and_then(|(s, n)| std::time::UNIX_EPOCH.checked_add(Duration::new(s, n)));
        modified.max(ctime)
    }
    #[cfg(not(unix))]
    modified
}

/// Whether `dir` or anything under it is newer by `newer`, following
/// symbolic links (each real folder once; at most 64 levels deep).
fn tree_newer(
    dir: &Path,
    newer: &impl Fn(&std::fs::Metadata) -> bool,
    seen: &mut BTreeSet<PathBuf>,
    depth: usize,
) -> bool {
    let Ok(real) = std::fs::canonicalize(dir) else {
        return false;
    };
    if depth > 64 || !seen.insert(real) {
        return false;
    }
    if std::fs::metadata(dir).is_ok_and(|m| newer(&m)) {
        return true;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    for e in entries.flatten() {
        let path = e.path();
        if std::fs::symlink_metadata(&path).is_ok_and(|m| newer(&m)) {
            return true;
        }
        match std::fs::metadata(&path) {
            Ok(m) if m.is_dir() && tree_newer(&path, newer, seen, depth + 1) => return true,
            Ok(m) if !m.is_dir() && newer(&m) => return true,
            _ => {}
        }
    }
    false
}

/// Whether an event kind can change a file's contents (reads are not).
fn is_change(kind: &EventKind) -> bool {
    match kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        EventKind::Access(_) => false,
        _ => true,
    }
}

/// How long a file modified and not yet closed holds a reload back.
const WRITE_WAIT: Duration = Duration::from_secs(2);

/// The watcher could not start.
#[derive(Debug, thiserror::Error)]
#[error("cannot watch files for changes: {0}")]
pub struct WatchError(#[from] notify::Error);

/// Watches the files of a snapshot and reloads it when they change.
pub struct Watcher {
    input: SnapshotInput,
    swap: Arc<ArcSwap<Snapshot>>,
    interactive: bool,
    /// The quiet period that ends a burst of changes.
    debounce: Duration,
    debouncer: Debouncer<RecommendedWatcher, RecommendedCache>,
    rx: mpsc::UnboundedReceiver<DebounceEventResult>,
    armed: BTreeMap<PathBuf, RecursiveMode>,
    targets: Targets,
    /// Listening from `start` on, so a SIGHUP never finds the default
    /// action (terminate) once watching has been announced.
    hup: Hangup,
    /// Paths changed since the last reload.
    touched: BTreeSet<PathBuf>,
    /// Files modified and not closed yet, with the time of the change.
    open_writes: BTreeMap<PathBuf, Instant>,
    /// A change found by the catch-up rebuild in `start`, reported first.
    pending: Option<ReloadEvent>,
}

impl Watcher {
    /// Starts watching; every watch is in place when this returns. The
    /// debounce comes from `reload.debounce_ms` of the current snapshot.
    pub fn start(
        input: SnapshotInput,
        swap: Arc<ArcSwap<Snapshot>>,
        interactive: bool,
    ) -> Result<Watcher, WatchError> {
        let snap = swap.load_full();
        let debounce = Duration::from_millis(snap.settings().reload.debounce_ms.max(1));
        // notify-debouncer-full only delays each event by its timeout (it
        // does not wait for a quiet period), so it runs with a short timeout
        // to merge and order raw events; the quiet period of `debounce` is
        // kept in `run`, from the events' own times.
        let inner = (debounce / 3).clamp(Duration::from_millis(1), Duration::from_millis(25));
        let (tx, rx) = mpsc::unbounded_channel();
        // Its thread wakes every tick for the whole session, events or
        // not; its default tick, a quarter of the timeout, is 240 wake-ups
        // a second at the default debounce. A tick of one timeout still
        // hands an event over within two timeouts (2/3 of `debounce`),
        // before the quiet period it is measured against has passed.
        let debouncer = new_debouncer(inner, Some(inner), move |r: DebounceEventResult| {
            let _ = tx.send(r);
        })?;
        let mut w = Watcher {
            targets: targets(&snap, &input),
            input,
            swap,
            interactive,
            debounce,
            debouncer,
            rx,
            armed: BTreeMap::new(),
            hup: hangup(),
            open_writes: BTreeMap::new(),
            touched: BTreeSet::new(),
            pending: None,
        };
        w.arm();
        // Files may have changed between the first build and the watches:
        // rebuilt only then, found by their times rather than by reading
        // and parsing everything again.
        if changed_since(&w.targets, snap.read_from) {
            w.pending = w.settle();
        }
        Ok(w)
    }

    /// The folders watched now, and how.
    pub fn watching(&self) -> Vec<(PathBuf, bool)> {
        self.armed
            .iter()
            .map(|(p, m)| (p.clone(), *m == RecursiveMode::Recursive))
            .collect()
    }

    /// Brings the watches in line with the current snapshot and what exists
    /// on disk. Returns whether a watch was added.
    fn arm(&mut self) -> bool {
        self.targets = targets(&self.swap.load(), &self.input);
        let plan = watch_plan(&self.targets);
        let stale: Vec<PathBuf> = self
            .armed
            .iter()
            .filter(|(p, m)| plan.get(*p) != Some(*m))
            .map(|(p, _)| p.clone())
            .collect();
        for p in stale {
            if let Err(e) = self.debouncer.unwatch(&p) {
                tracing::debug!("unwatch {}: {e}", p.display());
            }
            self.armed.remove(&p);
        }
        let mut added = false;
        for (p, m) in plan {
            if self.armed.contains_key(&p) {
                continue;
            }
            match self.debouncer.watch(&p, m) {
                Ok(()) => {
                    tracing::debug!(
                        recursive = (m == RecursiveMode::Recursive),
                        "watching {}",
                        p.display()
                    );
                    self.armed.insert(p, m);
                    added = true;
                }
                // The folder may have gone between the check and the watch;
                // the next change re-arms.
                Err(e) => tracing::warn!("cannot watch {}: {e}", p.display()),
            }
        }
        added
    }

    /// Notes a batch: returns the time of its latest relevant change, if
    /// any, and follows which files are being written (modified and not
    /// yet closed). Watcher errors count as a change now (a rebuild is the
    /// safe answer).
    fn note(&mut self, batch: &DebounceEventResult) -> Option<Instant> {
        match batch {
            Ok(events) => {
                let mut latest = None;
                for e in events {
                    if !is_change(&e.kind)
                        || !(e.need_rescan() || e.paths.iter().any(|p| relevant(p, &self.targets)))
                    {
                        continue;
                    }
                    latest = latest.max(Some(e.time));
                    tracing::trace!(kind = ?e.kind, paths = ?e.paths, "change");
                    self.touched.extend(e.paths.iter().cloned());
                    match e.kind {
                        EventKind::Modify(ModifyKind::Data(_) | ModifyKind::Any) => {
                            for p in &e.paths {
                                self.open_writes.insert(p.clone(), e.time);
                            }
                        }
                        EventKind::Access(_)
                        | EventKind::Remove(_)
                        | EventKind::Modify(ModifyKind::Name(_)) => {
                            for p in &e.paths {
                                self.open_writes.remove(p);
                            }
                        }
                        _ => {}
                    }
                }
                latest
            }
            Err(errors) => {
                for e in errors {
                    tracing::warn!("file watcher: {e}");
                }
                Some(Instant::now())
            }
        }
    }

    /// Reloads on every relevant change and on `SIGHUP`, calling `on_event`
    /// with each attempt, until `cancel` fires. Changes closer together
    /// than the debounce form one reload, which runs once the files have
    /// been quiet for the debounce.
    pub async fn run(mut self, cancel: CancellationToken, mut on_event: impl FnMut(&ReloadEvent)) {
        let mut hup = std::mem::take(&mut self.hup);
        if let Some(e) = self.pending.take() {
            on_event(&e);
        }
        loop {
            // `None`: SIGHUP, reload at once; `Some(None)`: nothing relevant.
            let first: Option<Option<Instant>> = tokio::select! {
                _ = cancel.cancelled() => return,
                batch = self.rx.recv() => match batch {
                    Some(b) => Some(self.note(&b)),
                    None => return,
                },
                () = next_hangup(&mut hup) => {
                    tracing::info!("SIGHUP: reloading");
                    None
                }
            };
            let mut wait_from = match first {
                Some(None) => continue,
                None => {
                    while self.rx.try_recv().is_ok() {}
                    None
                }
                Some(t) => t,
            };
            let event = loop {
                if let Some(t) = wait_from
                    && !self.quiet_period(t, &cancel, &mut hup).await
                {
                    return;
                }
                let touched = std::mem::take(&mut self.touched);
                let reading = std::time::SystemTime::now();
                // Watch folders that appeared before reading them, so a file
                // written meanwhile is either read now or seen by the watch.
                self.arm();
                let built = build_next(&self.input, &self.swap);
                if self.written_since(&touched, reading) {
                    // A writer came back while the files were read: what was
                    // read may be half-written. Wait for quiet again.
                    tracing::debug!("files changed while reading them; waiting");
                    self.touched.extend(touched);
                    wait_from = Some(Instant::now());
                    continue;
                }
                break commit(built, &self.swap, self.interactive);
            };
            on_event(&event);
            if event.ok
                && self.arm()
                && changed_since(&self.targets, self.swap.load().read_from)
                && let Some(e) = self.settle()
            {
                // The new snapshot names folders not watched before, and
                // files may have landed in them before the watch.
                on_event(&e);
            }
        }
    }

    /// Waits until no relevant change happened for the debounce, starting
    /// from a change at `t`, and no file is half-written (modified and not
    /// closed yet, for at most [`WRITE_WAIT`]). Returns false when
    /// cancelled. SIGHUP ends the wait early.
    async fn quiet_period(
        &mut self,
        mut t: Instant,
        cancel: &CancellationToken,
        hup: &mut Hangup,
    ) -> bool {
        loop {
            let mut wake = t + self.debounce;
            if let Some(oldest) = self.open_writes.values().min() {
                wake = wake.max(*oldest + WRITE_WAIT);
            }
            tokio::select! {
                _ = cancel.cancelled() => return false,
                () = tokio::time::sleep_until(tokio::time::Instant::from_std(wake)) => {
                    // Batches for changes inside the window may still be
                    // queued.
                    let mut later = None;
                    while let Ok(b) = self.rx.try_recv() {
                        later = later.max(self.note(&b));
                    }
                    if let Some(t2) = later.filter(|t2| *t2 > t) {
                        t = t2;
                        continue;
                    }
                    let stale: Vec<PathBuf> = self
                        .open_writes
                        .iter()
                        .filter(|(_, m)| m.elapsed() >= WRITE_WAIT)
                        .map(|(p, _)| p.clone())
                        .collect();
                    for p in stale {
                        tracing::debug!("{} was modified and not closed; reloading anyway", p.display());
                        self.open_writes.remove(&p);
                    }
                    if !self.open_writes.is_empty() {
                        continue;
                    }
                    // Events can reach us late on a busy machine; the files'
                    // own modification times say whether they are quiet.
                    match self.youngest_touched_age() {
                        Some(age) if age < self.debounce => {
                            t = Instant::now().checked_sub(age).unwrap_or_else(Instant::now);
                        }
                        _ => {
                            self.touched.clear();
                            return true;
                        }
                    }
                }
                batch = self.rx.recv() => match batch {
                    Some(b) => {
                        if let Some(t2) = self.note(&b) {
                            t = t.max(t2);
                        }
                    }
                    None => return false,
                },
                () = next_hangup(hup) => return true,
            }
        }
    }

    /// Whether one of `paths` was modified after `t` (less a margin for the
    /// coarse clock file systems stamp modification times with).
    fn written_since(&self, paths: &BTreeSet<PathBuf>, t: std::time::SystemTime) -> bool {
        let margin = (self.debounce / 2).min(Duration::from_millis(20));
        let since = t.checked_sub(margin).unwrap_or(t);
        paths.iter().any(|p| {
            std::fs::symlink_metadata(p)
                .and_then(|m| m.modified())
                .is_ok_and(|m| m > since)
        })
    }

    /// How long ago the most recently modified of the files changed since
    /// the last reload was modified (by its mtime), if any still exists.
    fn youngest_touched_age(&self) -> Option<Duration> {
        let now = std::time::SystemTime::now();
        self.touched
            .iter()
            .filter_map(|p| std::fs::symlink_metadata(p).and_then(|m| m.modified()).ok())
            // A modification time in the future (clock skew) says nothing.
            .filter_map(|m| now.duration_since(m).ok())
            .min()
    }

    /// Rebuilds and reports only if something changed.
    fn settle(&mut self) -> Option<ReloadEvent> {
        let e = reload_quiet(&self.input, &self.swap, self.interactive, true)?;
        self.arm();
        Some(e)
    }
}

/// A running watcher for a session; dropping it stops the watcher.
pub struct ReloadHandle {
    cancel: CancellationToken,
}

impl Drop for ReloadHandle {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

/// Starts a watcher in the background for a session sharing `swap`.
/// Events are logged; a watcher that cannot start is a warning, and the
/// session runs on without reload.
///
/// Arming the watches and the catch-up rebuild read every watched folder
/// again, so they run on the blocking pool while the session sends its
/// first request; a file changed meanwhile is still caught by the catch-up
/// rebuild. `SIGHUP` is listened for at once.
pub fn spawn(
    input: SnapshotInput,
    swap: Arc<ArcSwap<Snapshot>>,
    interactive: bool,
) -> Option<ReloadHandle> {
    let hup = hangup();
    let cancel = CancellationToken::new();
    let token = cancel.clone();
    // No change can take effect before a debounce has passed, so the
    // watches are placed only then: the catch-up check in `start` finds
    // anything changed since the first build began reading, as it does
    // for changes made while the watches are being placed. A run that
    // ends sooner never opens an inotify instance, whose close waits for
    // a kernel grace period (8–16 ms measured, on the way out of the
    // process; bench/turn-notes.md).
    let delay = Duration::from_millis(swap.load().settings().reload.debounce_ms);
    tokio::spawn(async move {
        tokio::select! {
            () = token.cancelled() => return,
            () = tokio::time::sleep(delay) => {}
        }
        let started =
            tokio::task::spawn_blocking(move || Watcher::start(input, swap, interactive)).await;
        match started {
            Ok(Ok(mut w)) => {
                w.hup = hup;
                w.run(token, |_| {}).await;
            }
            Ok(Err(e)) => tracing::warn!("{e}; changes to the files will not be picked up"),
            Err(e) => tracing::warn!(
                "the file watcher did not start ({e}); changes to the files will not be picked up"
            ),
        }
    });
    Some(ReloadHandle { cancel })
}

#[cfg(unix)]
type Hangup = Option<tokio::signal::unix::Signal>;
#[cfg(not(unix))]
#[derive(Default)]
struct Hangup;

#[cfg(unix)]
fn hangup() -> Hangup {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::hangup()) {
        Ok(s) => Some(s),
        Err(e) => {
            tracing::warn!("cannot listen for SIGHUP: {e}");
            None
        }
    }
}

#[cfg(not(unix))]
fn hangup() -> Hangup {
    Hangup
}

#[cfg(unix)]
async fn next_hangup(h: &mut Hangup) {
    match h {
        Some(s) => {
            if s.recv().await.is_none() {
                *h = None;
                std::future::pending::<()>().await;
            }
        }
        None => std::future::pending::<()>().await,
    }
}

#[cfg(not(unix))]
async fn next_hangup(_: &mut Hangup) {
    std::future::pending::<()>().await
}

/// The most paths FileChanged hooks may have watched at once (the files
/// their matchers name and the `watchPaths` hooks answer); more are left
/// out with a warning.
pub const MAX_HOOK_WATCHED: usize = 64;

/// A change to a watched path: the path and Claude Code's word for what
/// happened (`add`, `change`, `unlink`).
pub type PathChange = (PathBuf, &'static str);

/// Watches single files and folders for FileChanged hooks, apart from the
/// snapshot's watcher: a folder with everything below it, a file through
/// its folder (so a file an editor replaces, or one not made yet, is still
/// seen). Dropping it stops the watches.
pub struct PathWatcher {
    debouncer: Debouncer<RecommendedWatcher, RecommendedCache>,
    targets: Arc<std::sync::Mutex<Vec<PathBuf>>>,
    armed: BTreeMap<PathBuf, RecursiveMode>,
}

impl PathWatcher {
    /// Starts a watcher (watching nothing yet) whose changes go to `tx`,
    /// one per path per burst of writes.
    pub fn start(tx: mpsc::UnboundedSender<PathChange>) -> Result<PathWatcher, WatchError> {
        use notify::event::{CreateKind, RemoveKind, RenameMode};
        let targets: Arc<std::sync::Mutex<Vec<PathBuf>>> = Arc::default();
        let seen = Arc::clone(&targets);
        let debouncer = new_debouncer(
            Duration::from_millis(200),
            None,
            move |r: DebounceEventResult| {
                let Ok(events) = r else { return };
                let targets = match seen.lock() {
                    Ok(t) => t.clone(),
                    Err(_) => return,
                };
                let mut changes: Vec<PathChange> = Vec::new();
                for e in events {
                    let word = match e.kind {
                        EventKind::Create(CreateKind::Folder) => continue,
                        EventKind::Create(_) => "add",
                        EventKind::Remove(RemoveKind::Folder) => continue,
                        EventKind::Remove(_) => "unlink",
                        EventKind::Modify(ModifyKind::Name(RenameMode::From)) => "unlink",
                        EventKind::Modify(ModifyKind::Name(RenameMode::To)) => "add",
                        EventKind::Modify(ModifyKind::Metadata(_)) => continue,
                        EventKind::Modify(_) => "change",
                        _ => continue,
                    };
                    for p in &e.paths {
                        let watched = targets.iter().any(|t| p == t || p.starts_with(t));
                        if watched && !changes.iter().any(|(c, _)| c == p) {
                            changes.push((p.clone(), word));
                        }
                    }
                }
                for c in changes {
                    let _ = tx.send(c);
                }
            },
        )?;
        Ok(PathWatcher {
            debouncer,
            targets,
            armed: BTreeMap::new(),
        })
    }

    /// Watches these paths too (absolute), up to [`MAX_HOOK_WATCHED`] in
    /// all; a path whose folder does not exist is skipped.
    pub fn add(&mut self, paths: impl IntoIterator<Item = PathBuf>) {
        for p in paths {
            let Ok(mut targets) = self.targets.lock() else {
                return;
            };
            if targets.contains(&p) {
                continue;
            }
            if targets.len() >= MAX_HOOK_WATCHED {
                tracing::warn!(
                    "FileChanged: not watching {}: {MAX_HOOK_WATCHED} paths are watched already",
                    p.display()
                );
                continue;
            }
            let (at, mode) = if p.is_dir() {
                (p.clone(), RecursiveMode::Recursive)
            } else {
                match p.parent() {
                    Some(d) if d.is_dir() => (d.to_path_buf(), RecursiveMode::NonRecursive),
                    _ => {
                        tracing::warn!("FileChanged: not watching {}: no such folder", p.display());
                        continue;
                    }
                }
            };
            let armed = self.armed.get(&at).copied();
            if armed != Some(RecursiveMode::Recursive) && armed != Some(mode) {
                if let Err(e) = self.debouncer.watch(&at, mode) {
                    tracing::warn!("FileChanged: cannot watch {}: {e}", at.display());
                    continue;
                }
                self.armed.insert(at, mode);
            }
            targets.push(p);
        }
    }

    /// The paths watched now.
    pub fn targets(&self) -> Vec<PathBuf> {
        self.targets.lock().map(|t| t.clone()).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::LoadInput;

    fn input(dir: &Path) -> SnapshotInput {
        SnapshotInput {
            load: LoadInput {
                cwd: dir.to_path_buf(),
                config: Some(dir.join("cadre.toml")),
                env: Vec::new(),
                // The test's own folder: its `builtin_dir` applies.
                cli: crate::config::CliOverrides {
                    trust: true,
                    ..Default::default()
                },
            },
            cli_agents: None,
            home: Some(dir.join("home")),
        }
    }

    fn write(p: &Path, text: &str) {
        if let Some(d) = p.parent() {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(p, text).unwrap();
    }

    #[test]
    fn flag_flip_is_reported_with_its_effective_value() {
        let t = tempfile::tempdir().unwrap();
        let cfg = t.path().join("cadre.toml");
        write(&cfg, "");
        let inp = input(t.path());
        let old = snapshot::build(&inp, 1).unwrap();
        write(&cfg, "[features]\nFORK_SUBAGENT = true\n");
        let new = snapshot::build(&inp, 2);
        let a = apply(&old, new, true, Duration::ZERO);
        assert!(a.event.ok);
        assert_eq!(a.event.generation, 2);
        assert_eq!(
            a.event.changes.flags_changed,
            vec![FlagChange {
                name: "FORK_SUBAGENT".into(),
                value: true,
                effective: true
            }]
        );
        // Non-interactive: the gate blocks it, but the value still changed.
        let new = snapshot::build(&inp, 2);
        let a = apply(&old, new, false, Duration::ZERO);
        assert!(!a.event.changes.flags_changed[0].effective);
        assert!(a.snapshot.is_some());
    }

    #[test]
    fn config_error_keeps_the_old_generation() {
        let t = tempfile::tempdir().unwrap();
        let cfg = t.path().join("cadre.toml");
        write(&cfg, "");
        let inp = input(t.path());
        let old = snapshot::build(&inp, 3).unwrap();
        write(&cfg, "[features\nFORK_SUBAGENT = true\n");
        let a = apply(&old, snapshot::build(&inp, 4), false, Duration::ZERO);
        assert!(!a.event.ok);
        assert_eq!(a.event.generation, 3);
        assert!(a.snapshot.is_none());
        assert!(!a.event.diagnostics.is_empty());
        assert!(a.event.changes.is_empty());
    }

    #[test]
    fn template_and_settings_changes_are_named() {
        let t = tempfile::tempdir().unwrap();
        let cfg = t.path().join("cadre.toml");
        write(&cfg, "[agents]\nbuiltin_dir = \"b\"\n");
        let inp = input(t.path());
        let old = snapshot::build(&inp, 1).unwrap();
        write(
            &t.path().join("b/templates/fork_child.hbs"),
            "changed {{directive}}\n",
        );
        let new = snapshot::build(&inp, 2).unwrap();
        let c = diff(&old, &new, false);
        assert_eq!(c.templates_changed, vec!["fork_child".to_string()]);
        assert!(!c.settings_changed);
        assert!(c.flags_changed.is_empty());
        write(
            &cfg,
            "[agents]\nbuiltin_dir = \"b\"\n[reload]\ndebounce_ms = 7\n",
        );
        let newer = snapshot::build(&inp, 3).unwrap();
        let c = diff(&new, &newer, false);
        assert!(c.settings_changed);
        assert!(c.templates_changed.is_empty());
        assert!(diff(&newer, &newer, false).is_empty());
    }

    /// A skill is a change of its own: the watcher's catch-up rebuild
    /// keeps a snapshot only when its changes are not empty.
    #[test]
    fn skills_added_changed_and_removed_are_named() {
        let t = tempfile::tempdir().unwrap();
        write(&t.path().join("cadre.toml"), "");
        let skill = |name: &str, desc: &str| {
            format!("---\nname: {name}\ndescription: {desc}\n---\nDo it.\n")
        };
        let notes = t.path().join(".claude/skills/notes/SKILL.md");
        write(&notes, &skill("notes", "Take notes"));
        let inp = input(t.path());
        let old = snapshot::build(&inp, 1).unwrap();
        let pdf = t.path().join(".claude/skills/pdf/SKILL.md");
        write(&pdf, &skill("pdf", "Fill in forms"));
        let added = snapshot::build(&inp, 2).unwrap();
        let c = diff(&old, &added, false);
        assert_eq!(c.skills_changed, vec!["pdf".to_string()]);
        assert!(c.agents_added.is_empty() && !c.settings_changed);
        write(&notes, &skill("notes", "Take better notes"));
        std::fs::remove_file(&pdf).unwrap();
        let changed = snapshot::build(&inp, 3).unwrap();
        assert_eq!(
            diff(&added, &changed, false).skills_changed,
            vec!["notes".to_string(), "pdf".to_string()]
        );
        assert!(diff(&changed, &changed, false).is_empty());
    }

    #[test]
    fn reload_swaps_only_on_success() {
        let t = tempfile::tempdir().unwrap();
        let cfg = t.path().join("cadre.toml");
        write(&cfg, "");
        let inp = input(t.path());
        let swap = ArcSwap::from_pointee(snapshot::build(&inp, 1).unwrap());
        write(&cfg, "not toml = = =");
        let e = reload(&inp, &swap, false);
        assert!(!e.ok);
        assert_eq!(swap.load().generation, 1);
        write(&cfg, "[features]\nDISABLE_BACKGROUND_TASKS = true\n");
        let e = reload(&inp, &swap, false);
        assert!(e.ok);
        assert_eq!(swap.load().generation, 2);
        assert_eq!(e.changes.flags_changed[0].name, "DISABLE_BACKGROUND_TASKS");
        // Quiet: nothing changed, nothing swapped.
        assert!(reload_quiet(&inp, &swap, false, true).is_none());
        assert_eq!(swap.load().generation, 2);
    }

    #[test]
    fn missing_folders_are_watched_through_their_nearest_ancestor() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path();
        std::fs::create_dir_all(root.join("agents")).unwrap();
        let tg = Targets {
            files: vec![root.join("conf/cadre.toml")],
            dirs: vec![root.join("agents"), root.join(".claude/agents")],
        };
        let plan = watch_plan(&tg);
        assert_eq!(
            plan.get(&root.join("agents")),
            Some(&RecursiveMode::Recursive)
        );
        assert_eq!(plan.get(root), Some(&RecursiveMode::NonRecursive));
        assert_eq!(plan.len(), 2);
        std::fs::create_dir_all(root.join(".claude/agents")).unwrap();
        let plan = watch_plan(&tg);
        assert_eq!(
            plan.get(&root.join(".claude/agents")),
            Some(&RecursiveMode::Recursive)
        );
        // Inside a recursive watch: left out.
        let tg2 = Targets {
            files: vec![root.join("agents/x/cadre.toml")],
            dirs: vec![root.join("agents")],
        };
        assert_eq!(watch_plan(&tg2).len(), 1);
    }

    #[test]
    fn relevance_follows_files_folders_and_their_ancestors() {
        let tg = Targets {
            files: vec![PathBuf::from("/p/cadre.toml")],
            dirs: vec![PathBuf::from("/p/.claude/agents")],
        };
        assert!(relevant(Path::new("/p/cadre.toml"), &tg));
        assert!(!relevant(Path::new("/p/other.toml"), &tg));
        assert!(!relevant(Path::new("/p/.cadre/sessions/x.jsonl"), &tg));
        assert!(relevant(Path::new("/p/.claude"), &tg));
        assert!(relevant(Path::new("/p/.claude/agents/a/b.md"), &tg));
    }

    #[test]
    fn the_catch_up_check_sees_changes_made_after_the_build_began_reading() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path();
        write(&root.join("cadre.toml"), "");
        write(&root.join(".claude/agents/deep/a.md"), "x");
        let tg = Targets {
            files: vec![root.join("cadre.toml")],
            dirs: vec![root.join(".claude/agents"), root.join("missing/agents")],
        };
        let later = std::time::SystemTime::now() + Duration::from_secs(5);
        let earlier = std::time::SystemTime::now() - Duration::from_secs(5);
        // Nothing written since a build that began reading "later".
        assert!(!changed_since(&tg, later));
        // Everything here was written after a build that began "earlier":
        // the config file, a file deep in an agents folder, and a missing
        // folder's nearest existing ancestor each say so on their own.
        assert!(changed_since(&tg, earlier));
        let only = |files: Vec<PathBuf>, dirs: Vec<PathBuf>| Targets { files, dirs };
        let old = std::time::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let age = |p: &Path| {
            std::fs::File::options()
                .write(true)
                .open(p)
                .unwrap()
                .set_modified(old)
                .unwrap();
        };
        // With the modification times in the past, the status-change time
        // (a file moved into place keeps its modification time) still counts.
        age(&root.join(".claude/agents/deep/a.md"));
        assert!(changed_since(
            &only(vec![], vec![root.join(".claude/agents")]),
            earlier
        ));
        assert!(changed_since(
            &only(vec![], vec![root.join("missing/agents")]),
            earlier
        ));
    }
}
