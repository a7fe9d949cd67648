//! Loading a whole catalog: built-ins, every source folder (read
//! recursively, files parsed in parallel), and `--agents`, merged by the
//! precedence stated in `sources.rs`. Never fails: an unreadable or invalid
//! file becomes a diagnostic and the rest loads.

use std::collections::{BTreeMap, HashSet};
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::builtin::builtin_agents;
use super::def::{AgentDef, AgentMcpServer, Source};
use super::parse::{ParseOptions, parse_agent_text, parse_cli_agents_with};
use super::sources::SourceDir;
use crate::config::trust::{Outside, ProjectFiles};
use crate::diagnostic::Diagnostic;

/// Files larger than this are reported and skipped.
pub const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// Extensions of agent files.
const EXTENSIONS: &[&str] = &["md", "yaml", "yml", "toml"];

/// Below this many files, parsing stays on the calling thread.
const PARALLEL_THRESHOLD: usize = 64;

/// What a catalog is built from.
#[derive(Debug, Clone, Default)]
pub struct CatalogInput {
    /// A folder whose agent files replace the embedded built-ins by name.
    pub builtin_dir: Option<PathBuf>,
    /// Source folders, lowest precedence first.
    pub dirs: Vec<SourceDir>,
    /// `--agents JSON`.
    pub cli_json: Option<String>,
    /// Names of the tools that exist. When non-empty, `tools` and
    /// `disallowedTools` entries naming other tools (except `mcp__…`) are
    /// warned about.
    pub known_tools: Vec<String>,
    /// Which files of project folders may be read: in a folder the user
    /// has not trusted, a project agent file (or folder) that links
    /// outside the project is skipped. `None`: every file is read (a
    /// caller that judges no project, such as `agents validate PATH`).
    pub project_files: Option<crate::config::trust::ProjectFiles>,
}

/// An agent hidden by a same-named agent from a later source.
#[derive(Debug, Clone, PartialEq)]
pub struct Shadowed {
    pub def: Arc<AgentDef>,
    pub shadowed_by: Source,
}

/// Every loaded agent, the effective one per name, and what went wrong.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Catalog {
    /// Effective agents by name (includes the synthetic `fork`).
    pub agents: BTreeMap<String, Arc<AgentDef>>,
    pub shadowed: Vec<Shadowed>,
    pub diagnostics: Vec<Diagnostic>,
    /// How many files were read.
    pub files: usize,
    /// Project files and folders not read because they link outside the
    /// project (see [`CatalogInput::project_files`]).
    pub outside: Vec<Outside>,
}

impl Catalog {
    pub fn get(&self, name: &str) -> Option<&Arc<AgentDef>> {
        self.agents.get(name)
    }

    /// Removes what a definition may not carry from where it comes from.
    /// Plugin agents keep no `permissionMode`, `hooks` or `mcpServers`
    /// (Claude Code ignores them there). In a folder the user has not
    /// trusted, project agents keep no `hooks` and no inline `mcpServers`
    /// (both start processes); servers named by reference stay, since the
    /// shared servers are themselves subject to trust. Returns what was
    /// removed from project agents: (agent, field, file).
    pub fn restrict(&mut self, trusted: bool) -> Vec<(String, &'static str, Option<PathBuf>)> {
        let mut removed = Vec::new();
        for def in self.agents.values_mut() {
            let plugin = def.source == Source::Plugin;
            let untrusted_project = !trusted && def.source == Source::Project;
            if !plugin && !untrusted_project {
                continue;
            }
            let has_inline = def.mcp_servers.iter().any(AgentMcpServer::is_inline);
            if !(def.hooks.is_some() || has_inline || (plugin && def.permission_mode.is_some())) {
                continue;
            }
            let d = Arc::make_mut(def);
            if d.hooks.take().is_some() && untrusted_project {
                removed.push((d.name.clone(), "hooks", d.path.clone()));
            }
            if plugin {
                d.permission_mode = None;
                d.mcp_servers.clear();
            } else if has_inline {
                d.mcp_servers.retain(|s| !s.is_inline());
                removed.push((d.name.clone(), "mcpServers", d.path.clone()));
            }
        }
        removed
    }

    /// Puts `def` in `agents`, moving a same-named agent to `shadowed`.
    /// Within one source the later file wins, with a warning naming both.
    fn insert(&mut self, agents: &mut Agents, def: impl Into<Arc<AgentDef>>) {
        let def: Arc<AgentDef> = def.into();
        self.insert_named(agents, def.name.clone(), def);
    }

    /// [`Catalog::insert`] with `key` equal to `def.name`, copied by the
    /// thread that parsed the file: a new name is put in without reading
    /// the definition (made on another thread, so likely not in this
    /// core's cache).
    fn insert_named(&mut self, agents: &mut Agents, key: String, def: Arc<AgentDef>) {
        use std::collections::hash_map::Entry;
        let mut entry = match agents.entry(key) {
            Entry::Vacant(v) => {
                v.insert(def);
                return;
            }
            Entry::Occupied(o) => o,
        };
        let old = entry.insert(def);
        let def = entry.get();
        if old.source == def.source && def.source != Source::Builtin {
            let shown = |p: &Option<PathBuf>| {
                p.as_ref()
                    .map_or_else(|| "--agents".to_string(), |p| p.display().to_string())
            };
            self.diagnostics.push(Diagnostic::warning(
                def.path.as_deref(),
                None,
                format!(
                    "agent `{}` is defined twice in the {} source ({} and {}); the later one wins",
                    def.name,
                    def.source,
                    shown(&old.path),
                    shown(&def.path)
                ),
            ));
        }
        self.shadowed.push(Shadowed {
            def: old,
            shadowed_by: def.source,
        });
    }
}

/// The agents while a load merges its sources, by name. Sorted into the
/// catalog's map once at the end: one sort costs fewer comparisons than
/// searching the ordered map for every file.
type Agents = std::collections::HashMap<String, Arc<AgentDef>>;

/// One step of the merge, in precedence order.
enum Layer<'a> {
    Dir(&'a SourceDir),
    Cli(&'a str),
}

impl Layer<'_> {
    fn source(&self) -> Source {
        match self {
            Layer::Dir(d) => d.source,
            Layer::Cli(_) => Source::Cli,
        }
    }
}

/// Loads every source. Never fails: problems become diagnostics.
pub fn load(input: &CatalogInput) -> Catalog {
    load_with(input, None).0
}

/// [`load`] for a reload: a file whose [`Stamp`] is the one `previous`
/// recorded (and that had settled then) is not read again; its earlier
/// result is reused. Returns the catalog and what to pass to the next
/// reload.
pub fn load_incremental(input: &CatalogInput, previous: &FileCache) -> (Catalog, FileCache) {
    let (cat, cache) = load_with(input, Some(previous));
    (cat, cache.unwrap_or_default())
}

fn load_with(input: &CatalogInput, previous: Option<&FileCache>) -> (Catalog, Option<FileCache>) {
    let opts = ParseOptions {
        known_tools: &input.known_tools,
    };
    let mut cat = Catalog::default();
    let mut agents = Agents::new();

    let (builtins, diags, files) = builtin_agents(input.builtin_dir.as_deref(), opts);
    cat.diagnostics.extend(diags);
    cat.files += files;
    for def in builtins {
        cat.insert(&mut agents, def);
    }

    // `--agents` sits between project and managed folders; a stable sort
    // keeps the given order of folders within one source.
    let mut layers: Vec<Layer<'_>> = input.dirs.iter().map(Layer::Dir).collect();
    if let Some(json) = &input.cli_json {
        layers.push(Layer::Cli(json));
    }
    layers.sort_by_key(Layer::source);

    // Entries made for other tool names would carry other warnings.
    let reuse = previous.filter(|p| p.known_tools == input.known_tools);
    let record = previous.map(|p| (p.settle, std::time::SystemTime::now()));
    // The folders are walked on this thread while other threads already
    // read and parse the files found so far.
    let sources: Vec<(Source, &Path)> = layers
        .iter()
        .filter_map(|l| match l {
            Layer::Dir(d) => Some((d.source, d.path.as_path())),
            Layer::Cli(_) => None,
        })
        .collect();
    let work = Work {
        opts,
        reuse,
        record: record.is_some(),
    };
    // Only an untrusted folder's links need judging.
    let guard = input.project_files.as_ref().filter(|f| !f.trusted());
    let mut seen = Seen {
        diags: &mut cat.diagnostics,
        outside: &mut cat.outside,
        guard: None,
    };
    let parsed = walk_and_parse(&sources, guard, &work, &mut seen);
    let count: usize = parsed.iter().map(Vec::len).sum();
    cat.files += count;
    agents.reserve(count);
    let mut cache = record.map(|(settle, started)| {
        let settled_before = started.checked_sub(settle).unwrap_or(std::time::UNIX_EPOCH);
        let files = std::collections::HashMap::with_capacity(count);
        (
            settled_before,
            FileCache {
                known_tools: input.known_tools.clone(),
                settle,
                files,
            },
        )
    });
    let mut parsed = parsed.into_iter().flatten().peekable();
    let mut dir = 0;

    for layer in &layers {
        match layer {
            Layer::Dir(d) => {
                let plugin = (d.source == Source::Plugin).then(|| plugin_name(&d.path));
                let this = dir;
                dir += 1;
                while let Some(loaded) = parsed.next_if(|l| l.dir == this) {
                    if let (Some((settled_before, cache)), Some(path), Some(stamp)) =
                        (&mut cache, &loaded.path, loaded.stamp)
                        && stamp.settled(*settled_before)
                    {
                        let entry = CachedFile {
                            source: loaded.source,
                            stamp,
                            def: loaded.def.clone(),
                            diags: loaded.diags.clone(),
                        };
                        cache.files.insert(path.clone(), entry);
                    }
                    cat.diagnostics.extend(loaded.diags);
                    let (Some(mut def), Some(mut key)) = (loaded.def, loaded.key) else {
                        continue;
                    };
                    if let Some(p) = &plugin {
                        let d = Arc::make_mut(&mut def);
                        d.name = format!("{p}:{}", d.name);
                        key.clone_from(&d.name);
                    }
                    cat.insert_named(&mut agents, key, def);
                }
            }
            Layer::Cli(json) => {
                let (defs, diags) = parse_cli_agents_with(json, opts);
                cat.diagnostics.extend(diags);
                for def in defs {
                    cat.insert(&mut agents, def);
                }
            }
        }
    }
    let mut sorted: Vec<(String, Arc<AgentDef>)> = agents.into_iter().collect();
    sorted.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    cat.agents = sorted.into_iter().collect();
    (cat, cache.map(|(_, c)| c))
}

/// What identifies a file's contents without reading them: device, inode,
/// size, and modification and change times to the nanosecond. The change
/// time cannot be set back by a program, so a file rewritten in place gets
/// a new one even if its modification time is restored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    dev: u64,
    ino: u64,
    len: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    fn of(m: &std::fs::Metadata) -> Stamp {
        use std::os::unix::fs::MetadataExt;
        Stamp {
            dev: m.dev(),
            ino: m.ino(),
            len: m.len(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
        }
    }

    /// Both times are before `t`. File systems stamp times from a coarse
    /// clock, so a file written twice within one tick (same size) can keep
    /// its stamp: a file changed shortly before it was read is not trusted
    /// and is read again by the next reload.
    fn settled(&self, t: std::time::SystemTime) -> bool {
        let Ok(d) = t.duration_since(std::time::UNIX_EPOCH) else {
            return false;
        };
        let t = (
            i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
            i64::from(d.subsec_nanos()),
        );
        self.mtime < t && self.ctime < t
    }
}

/// What a load read from each agent file in the source folders, for the
/// next reload: only files whose [`Stamp`] changed (or that were changed
/// shortly before they were read) are read and parsed again. Immutable
/// once built; each snapshot holds its own.
#[derive(Clone)]
pub struct FileCache {
    known_tools: Vec<String>,
    /// How long before the read a change must be for a file to be trusted.
    settle: std::time::Duration,
    files: std::collections::HashMap<PathBuf, CachedFile>,
}

/// Two seconds: more than the coarsest common timestamp granularity.
const SETTLE: std::time::Duration = std::time::Duration::from_secs(2);

impl Default for FileCache {
    fn default() -> Self {
        FileCache {
            known_tools: Vec::new(),
            settle: SETTLE,
            files: std::collections::HashMap::new(),
        }
    }
}

impl FileCache {
    /// How many files it holds.
    pub fn len(&self) -> usize {
        self.files.len()
    }

    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// An empty cache that trusts files changed up to `settle` before they
    /// were read (tests use zero).
    pub fn with_settle(settle: std::time::Duration) -> FileCache {
        FileCache {
            settle,
            ..FileCache::default()
        }
    }
}

impl std::fmt::Debug for FileCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "FileCache({} files)", self.files.len())
    }
}

#[derive(Debug, Clone)]
struct CachedFile {
    source: Source,
    stamp: Stamp,
    def: Option<Arc<AgentDef>>,
    diags: Vec<Diagnostic>,
}

/// Where a plugin folder's agents are: the folders and files of its
/// manifest's `agents` (by default its `agents/`). A folder that is no
/// plugin's root (cadre's `agents.plugin_dirs` may name a plugin's
/// `agents/`, or any folder of agent files) is read as it is.
fn plugin_agent_roots(dir: &Path) -> Vec<PathBuf> {
    const PLUGIN_PARTS: [&str; 8] = [
        ".claude-plugin",
        "agents",
        "commands",
        "skills",
        "output-styles",
        "hooks",
        ".mcp.json",
        ".lsp.json",
    ];
    if !PLUGIN_PARTS.iter().any(|p| dir.join(p).exists()) {
        return vec![dir.to_path_buf()];
    }
    crate::config::plugins::components(dir).0.agents
}

/// A plugin's name, which prefixes its agents' names (`plugin:agent`, as in
/// Claude Code): `name` in `.claude-plugin/plugin.json` of the folder or of
/// its parent; else the folder's name, or its parent's when the folder is
/// the plugin's `agents/`.
pub(crate) fn plugin_name(dir: &Path) -> String {
    let manifest_name = |d: &Path| -> Option<String> {
        // Bounded: a project may name a plugin folder (`agents.plugin_dirs`).
        let text =
            crate::raw::read_text(&d.join(".claude-plugin/plugin.json"), MAX_FILE_BYTES).ok()?;
        let v: serde_json::Value = serde_json::from_str(&text).ok()?;
        v.get("name")?.as_str().map(str::to_string)
    };
    let parent = dir.parent();
    if let Some(n) = manifest_name(dir).or_else(|| parent.and_then(manifest_name)) {
        return n;
    }
    let own = dir.file_name().map(|n| n.to_string_lossy().into_owned());
    match (own.as_deref(), parent.and_then(Path::file_name)) {
        (Some("agents"), Some(p)) => p.to_string_lossy().into_owned(),
        (Some(n), _) => n.to_string(),
        (None, _) => "plugin".to_string(),
    }
}

type Parsed = (Option<AgentDef>, Vec<Diagnostic>);

/// One file's result in a load.
struct Loaded {
    /// The index of its source folder in the load.
    dir: usize,
    source: Source,
    def: Option<Arc<AgentDef>>,
    /// A copy of the definition's name, made by the thread that parsed it.
    key: Option<String>,
    diags: Vec<Diagnostic>,
    /// When recording for the next reload: the file's stamp and path.
    stamp: Option<Stamp>,
    path: Option<PathBuf>,
}

/// What every file of a load is read with.
struct Work<'a> {
    opts: ParseOptions<'a>,
    /// Results of the previous load to reuse for unchanged files.
    reuse: Option<&'a FileCache>,
    /// Whether to keep each file's stamp and path for the next reload.
    record: bool,
}

impl Work<'_> {
    /// Reads and parses one file, or reuses what the previous load had for
    /// it when its stamp has not changed. A panic (a parser bug) becomes a
    /// diagnostic about that file; the rest of the load goes on.
    fn one(&self, file: Found) -> Loaded {
        let Found {
            dir,
            source,
            path,
            folder,
        } = file;
        let folder = folder.as_ref().map(|f| &f.0);
        let run = std::panic::AssertUnwindSafe(|| self.read(source, &path, folder));
        let (def, diags, stamp) = std::panic::catch_unwind(run).unwrap_or_else(|_| {
            let msg = "internal error while parsing this file; skipped";
            (None, vec![Diagnostic::error(Some(&path), None, msg)], None)
        });
        let key = def.as_ref().map(|d| d.name.clone());
        let mut path = Some(path);
        let def = def.map(|mut def| {
            // A fresh definition gets the path moved in, not copied.
            if def.path.is_none()
                && let Some(d) = Arc::get_mut(&mut def)
            {
                d.path = if self.record {
                    path.clone()
                } else {
                    path.take()
                };
            }
            def
        });
        Loaded {
            dir,
            source,
            def,
            key,
            diags,
            stamp,
            path: path.filter(|_| self.record),
        }
    }

    fn read(
        &self,
        source: Source,
        path: &Path,
        folder: Option<&std::fs::File>,
    ) -> (Option<Arc<AgentDef>>, Vec<Diagnostic>, Option<Stamp>) {
        if let Some(cached) = self.reuse.and_then(|c| c.files.get(path))
            && cached.source == source
            && std::fs::metadata(path).is_ok_and(|m| Stamp::of(&m) == cached.stamp)
        {
            return (cached.def.clone(), cached.diags.clone(), Some(cached.stamp));
        }
        let at = At { path, folder };
        let ((def, diags), stamp) = read_and_parse_stamped(at, source, self.opts, self.record);
        (def.map(Arc::new), diags, stamp)
    }
}

/// Where a file is: its path and, when the walk could open it, the folder
/// it is in, so that it is opened by name relative to the folder instead
/// of by walking every component of its path again.
#[derive(Clone, Copy)]
struct At<'a> {
    path: &'a Path,
    folder: Option<&'a std::fs::File>,
}

/// Files handed to a parsing thread at a time.
const BATCH: usize = PARALLEL_THRESHOLD;

/// An agent file found by the walk: the index of its source folder, the
/// source, its path and its folder if open.
struct Found {
    dir: usize,
    source: Source,
    path: PathBuf,
    folder: Option<Arc<Folder>>,
}

/// A run of consecutive files of a load: the index of the first, and the
/// files.
type Batch = (usize, Vec<Found>);

/// Walks the folders of `sources` in order and reads and parses every
/// agent file found: once more than [`PARALLEL_THRESHOLD`] files are found,
/// threads parse batches of them while the walk goes on, and this thread
/// joins them when the walk is done. Returns the results in walk order, in
/// parts.
fn walk_and_parse<'a>(
    sources: &[(Source, &Path)],
    guard: Option<&'a ProjectFiles>,
    work: &Work<'_>,
    seen: &mut Seen<'a>,
) -> Vec<Vec<Loaded>> {
    let mut found = 0;
    let mut pending: Vec<Found> = Vec::new();
    let mut done: Vec<(usize, Vec<Loaded>)> = Vec::new();
    // A few batches per thread may wait; when the queue is full the walk
    // parses the batch itself, so it never blocks and never runs far
    // ahead (each waiting file holds its folder open).
    let (tx, rx) = std::sync::mpsc::sync_channel::<Batch>(2 * threads());
    let rx = std::sync::Mutex::new(rx);
    std::thread::scope(|scope| {
        let rx = &rx;
        let mut workers = Vec::new();
        for (dir, (source, root)) in sources.iter().enumerate() {
            seen.guard = guard.filter(|_| *source == Source::Project);
            let mut on_found = |path: PathBuf, folder: Option<&Arc<Folder>>| {
                pending.push(Found {
                    dir,
                    source: *source,
                    path,
                    folder: folder.cloned(),
                });
                found += 1;
                if pending.len() < BATCH {
                    return;
                }
                if workers.is_empty() {
                    for _ in 0..threads() {
                        workers.push(scope.spawn(move || drain(rx, work)));
                    }
                }
                let batch = std::mem::replace(&mut pending, Vec::with_capacity(BATCH));
                use std::sync::mpsc::TrySendError::{Disconnected, Full};
                if let Err(Full((start, batch)) | Disconnected((start, batch))) =
                    tx.try_send((found - BATCH, batch))
                {
                    done.push((start, batch.into_iter().map(|f| work.one(f)).collect()));
                }
            };
            // A plugin's agents are in the folders and files its manifest
            // names (by default its `agents/`), not anywhere in its folder.
            let roots = if *source == Source::Plugin {
                plugin_agent_roots(root)
            } else {
                vec![root.to_path_buf()]
            };
            for r in roots {
                if r.is_file() {
                    if is_agent_file(&r) {
                        on_found(r, None);
                    }
                } else {
                    walk_each(&r, seen, &mut on_found);
                }
            }
        }
        let last = std::mem::take(&mut pending);
        let start = found - last.len();
        drop(tx);
        done.push((start, last.into_iter().map(|f| work.one(f)).collect()));
        done.extend(drain(rx, work));
        for w in workers {
            // Parser panics are caught per file, so a worker does not die
            // with batches in hand; if one ever does, the check below
            // reports the files it took.
            if let Ok(part) = w.join() {
                done.extend(part);
            }
        }
    });
    done.sort_unstable_by_key(|(start, _)| *start);
    let parsed: usize = done.iter().map(|(_, part)| part.len()).sum();
    if parsed < found {
        seen.diags.push(Diagnostic::error(
            None,
            None,
            format!(
                "internal error: {} agent files were not loaded",
                found - parsed
            ),
        ));
    }
    // Returned as the parts, not copied into one list.
    done.into_iter().map(|(_, part)| part).collect()
}

/// Parses batches from `rx` until it is closed; returns each with the
/// index of its first file.
fn drain(
    rx: &std::sync::Mutex<std::sync::mpsc::Receiver<Batch>>,
    work: &Work<'_>,
) -> Vec<(usize, Vec<Loaded>)> {
    let mut out = Vec::new();
    loop {
        let next = match rx.lock() {
            Ok(rx) => rx.recv(),
            Err(poisoned) => poisoned.into_inner().recv(),
        };
        let Ok((start, files)) = next else {
            return out;
        };
        let parsed = files.into_iter().map(|f| work.one(f)).collect();
        out.push((start, parsed));
    }
}

/// How many threads parse a large load: the available parallelism, asked
/// once per process (the answer reads the cgroup's CPU quota files).
fn threads() -> usize {
    static THREADS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *THREADS.get_or_init(|| {
        std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(16)
    })
}

/// Reads one file (size, binary and UTF-8 checks) and parses it. The
/// bytes go into a buffer kept per thread, so a load of many files
/// allocates none for their text.
pub(super) fn read_and_parse(path: &Path, source: Source, opts: ParseOptions<'_>) -> Parsed {
    let at = At { path, folder: None };
    let (def, diags) = read_and_parse_stamped(at, source, opts, false).0;
    let def = def.map(|mut d| {
        d.path = Some(path.to_path_buf());
        d
    });
    (def, diags)
}

/// [`read_and_parse`], with the stamp of the file that was read when
/// `stamp` is asked for (taken from the open file, before reading).
fn read_and_parse_stamped(
    at: At<'_>,
    source: Source,
    opts: ParseOptions<'_>,
    stamp: bool,
) -> (Parsed, Option<Stamp>) {
    thread_local! {
        static BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    /// A buffer grown beyond this by a large file is not kept.
    const KEEP: usize = 256 * 1024;
    BUF.with_borrow_mut(|buf| {
        buf.clear();
        let parsed = read_and_parse_in(at, source, opts, buf, stamp);
        if buf.capacity() > KEEP {
            *buf = Vec::new();
        }
        parsed
    })
}

fn read_and_parse_in(
    at: At<'_>,
    source: Source,
    opts: ParseOptions<'_>,
    buf: &mut Vec<u8>,
    want_stamp: bool,
) -> (Parsed, Option<Stamp>) {
    let path = at.path;
    let fail = |msg: String| ((None, vec![Diagnostic::error(Some(path), None, msg)]), None);
    let stamp = match read_limited(at, buf, want_stamp) {
        Ok((true, stamp)) => stamp,
        Ok((false, _)) => {
            return fail(format!(
                "file is over the {MAX_FILE_BYTES}-byte limit for agent files; skipped"
            ));
        }
        Err(e) => return fail(format!("cannot read: {e}; skipped")),
    };
    // From here on the result depends only on the bytes read, so a broken
    // file is remembered with its stamp like a good one.
    let fail = |msg: String| {
        (
            (None, vec![Diagnostic::error(Some(path), None, msg)]),
            stamp,
        )
    };
    if memchr::memchr(0, &buf[..buf.len().min(8192)]).is_some() {
        return fail("binary file (contains NUL bytes); skipped".into());
    }
    match std::str::from_utf8(buf) {
        Ok(text) => (parse_agent_text(path, text, source, opts), stamp),
        Err(e) => fail(format!(
            "not valid UTF-8 (at byte {}); skipped",
            e.valid_up_to()
        )),
    }
}

/// Reads the file into `buf`; false when it is larger than
/// [`MAX_FILE_BYTES`]. One open and reads (and a `stat` of the open file when its stamp is
/// wanted); never more than the
/// limit plus one byte in memory. Opened without blocking, so a file
/// replaced by a FIFO after the folder was read cannot hang the load.
fn read_limited(
    at: At<'_>,
    buf: &mut Vec<u8>,
    want_stamp: bool,
) -> std::io::Result<(bool, Option<Stamp>)> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let file = match (at.folder, at.path.file_name()) {
        (Some(folder), Some(name)) => {
            use nix::fcntl::OFlag;
            let flags = OFlag::O_RDONLY | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
            let fd = nix::fcntl::openat(folder, name, flags, nix::sys::stat::Mode::empty())
                .map_err(std::io::Error::from)?;
            std::fs::File::from(fd)
        }
        _ => std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(at.path)?,
    };
    let stamp = if want_stamp {
        file.metadata().ok().map(|m| Stamp::of(&m))
    } else {
        None
    };
    buf.reserve(16 * 1024);
    file.take(MAX_FILE_BYTES + 1).read_to_end(buf)?;
    Ok((buf.len() as u64 <= MAX_FILE_BYTES, stamp))
}

/// Every agent file under `root`, sorted. Symbolic links are followed; a
/// link back to a folder already being read is reported, not followed. A
/// missing root is silently empty.
#[cfg(test)]
pub(super) fn walk(root: &Path, diags: &mut Vec<Diagnostic>) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut outside = Vec::new();
    let mut seen = Seen {
        diags,
        outside: &mut outside,
        guard: None,
    };
    walk_each(root, &mut seen, &mut |p, _| out.push(p));
    out
}

/// Where a walk reports: problems, and the links it did not follow
/// because they lead out of the project (`guard`: the project's files in
/// a folder not trusted; `None` for other sources).
struct Seen<'a> {
    diags: &'a mut Vec<Diagnostic>,
    outside: &'a mut Vec<Outside>,
    guard: Option<&'a ProjectFiles>,
}

impl Seen<'_> {
    /// Whether `path` (resolved: `real`) may be read; if not, it is
    /// recorded. Only the root and links are judged: a plain file or
    /// folder below an admitted folder is inside it.
    fn admits(&mut self, path: &Path, real: &Path) -> bool {
        match self.guard {
            Some(g) if !g.holds(real) => {
                self.outside.push(Outside {
                    file: path.to_path_buf(),
                    target: real.to_path_buf(),
                });
                false
            }
            _ => true,
        }
    }
}

/// [`walk`], handing each file to `found` as soon as it is listed, with
/// its folder opened (`None` if that failed; the path still works).
fn walk_each(
    root: &Path,
    out: &mut Seen<'_>,
    found: &mut dyn FnMut(PathBuf, Option<&Arc<Folder>>),
) {
    let canonical_root = match std::fs::canonicalize(root) {
        Ok(c) if c.is_dir() => c,
        Ok(_) => {
            out.diags.push(Diagnostic::warning(
                Some(root),
                None,
                "agent source is not a folder; skipped",
            ));
            return;
        }
        Err(e) if e.kind() == ErrorKind::NotFound => return,
        Err(e) => {
            out.diags.push(Diagnostic::error(
                Some(root),
                None,
                format!("cannot read folder: {e}"),
            ));
            return;
        }
    };
    if !out.admits(root, &canonical_root) {
        return;
    }
    let mut seen: HashSet<PathBuf> = HashSet::from([canonical_root]);
    // Depth first, each folder's entries in name order: the files come out
    // in path order without sorting every path at the end (comparing paths
    // component by component cost more than the walk at 100,000 files).
    // Each list is kept in reverse, so `pop` gives the next name.
    let mut stack = vec![(read_sorted(root, out.diags), open_folder(root))];
    while let Some((top, folder)) = stack.last_mut() {
        let Some((path, ft)) = top.pop() else {
            stack.pop();
            continue;
        };
        let mut ft = ft;
        if ft.is_symlink() {
            match std::fs::metadata(&path) {
                Ok(m) => ft = m.file_type(),
                Err(e) => {
                    if is_agent_file(&path) {
                        out.diags.push(Diagnostic::warning(
                            Some(&path),
                            None,
                            format!("broken symbolic link ({e}); skipped"),
                        ));
                    }
                    continue;
                }
            }
            if ft.is_dir() {
                match std::fs::canonicalize(&path) {
                    Ok(c) if !out.admits(&path, &c) => continue,
                    Ok(c) if !seen.insert(c.clone()) => {
                        out.diags.push(Diagnostic::warning(
                            Some(&path),
                            None,
                            format!("symbolic link to a folder already read ({}), possibly a loop; not followed", c.display()),
                        ));
                        continue;
                    }
                    Ok(_) => {}
                    Err(e) => {
                        out.diags.push(Diagnostic::error(
                            Some(&path),
                            None,
                            format!("cannot resolve link: {e}"),
                        ));
                        continue;
                    }
                }
            } else if out.guard.is_some()
                && is_agent_file(&path)
                && let Ok(c) = std::fs::canonicalize(&path)
                && !out.admits(&path, &c)
            {
                continue;
            }
        } else if ft.is_dir() {
            // Record real folders so a link to one is read only once;
            // one already read through a link is not read again.
            if let Ok(c) = std::fs::canonicalize(&path)
                && !seen.insert(c)
            {
                continue;
            }
        }
        if ft.is_dir() {
            let entries = read_sorted(&path, out.diags);
            stack.push((entries, open_folder(&path)));
        } else if ft.is_file() && is_agent_file(&path) {
            found(path, folder.as_ref());
        }
    }
}

/// At most this many folders are held open by loads at a time (in the
/// whole process); beyond it, files are opened by their path.
pub(super) const MAX_OPEN_FOLDERS: usize = 64;

/// Folders held open by loads.
pub(super) static OPEN_FOLDERS: std::sync::atomic::AtomicUsize =
    std::sync::atomic::AtomicUsize::new(0);

/// An open folder, counted in [`OPEN_FOLDERS`] while it lives.
struct Folder(std::fs::File);

impl Drop for Folder {
    fn drop(&mut self) {
        OPEN_FOLDERS.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// A folder opened for opening its files by name, unless
/// [`MAX_OPEN_FOLDERS`] are open already or it cannot be opened.
/// `O_DIRECTORY`: a folder replaced by a FIFO since it was listed is
/// refused, not waited on.
fn open_folder(dir: &Path) -> Option<Arc<Folder>> {
    use std::os::unix::fs::OpenOptionsExt;
    use std::sync::atomic::Ordering;
    if OPEN_FOLDERS.fetch_add(1, Ordering::Relaxed) >= MAX_OPEN_FOLDERS {
        OPEN_FOLDERS.fetch_sub(1, Ordering::Relaxed);
        return None;
    }
    match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(dir)
    {
        Ok(f) => Some(Arc::new(Folder(f))),
        Err(_) => {
            OPEN_FOLDERS.fetch_sub(1, Ordering::Relaxed);
            None
        }
    }
}

/// The entries of one folder with their types, in reverse name order.
/// Problems become diagnostics.
fn read_sorted(dir: &Path, diags: &mut Vec<Diagnostic>) -> Vec<(PathBuf, std::fs::FileType)> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) => {
            diags.push(Diagnostic::error(
                Some(dir),
                None,
                format!("cannot read folder: {e}"),
            ));
            return Vec::new();
        }
    };
    let mut list = Vec::new();
    for entry in entries {
        let entry = match entry {
            Ok(e) => e,
            Err(e) => {
                diags.push(Diagnostic::error(
                    Some(dir),
                    None,
                    format!("cannot read folder entry: {e}"),
                ));
                continue;
            }
        };
        let path = entry.path();
        let Ok(ft) = entry.file_type() else {
            diags.push(Diagnostic::error(
                Some(&path),
                None,
                "cannot tell the file type; skipped",
            ));
            continue;
        };
        // Only folders, links and agent files matter; skip the rest early.
        if ft.is_dir() || ft.is_symlink() || is_agent_file(&path) {
            list.push((path, ft));
        }
    }
    // Names within one folder in byte order, as paths compare them; all
    // share the folder's prefix, so whole paths compare the same.
    list.sort_unstable_by(|a, b| b.0.as_os_str().cmp(a.0.as_os_str()));
    list
}

fn is_agent_file(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| EXTENSIONS.iter().any(|x| x.eq_ignore_ascii_case(e)))
}
