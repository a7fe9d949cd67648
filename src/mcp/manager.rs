//! [`McpManager`]: every MCP connection of one process and its state.
//!
//! Shared servers (settings and `.mcp.json`) are connected in background
//! tasks, each server on its own, so a slow one never holds up the others
//! or a turn; [`McpManager::sync`] brings the set in line with a snapshot
//! (new or changed servers connect, removed ones are closed). Servers that
//! an agent defines inline are started by [`McpManager::start_scoped`] for
//! one child session and closed by the returned [`ScopedServers`]. Every
//! change bumps [`McpManager::version`], which sessions use to know when to
//! render their tool list again.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::catalog::AgentMcpServer;
use crate::config::McpServerConfig;

use super::client::{Connection, Outcome, note_connection};
use super::select::required_matches;
use super::tool::McpTool;

/// Where one shared server is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerState {
    Connecting,
    Ready,
    Failed,
}

enum State {
    Connecting,
    Ready {
        conn: Arc<Connection>,
        tools: Vec<Arc<McpTool>>,
    },
    Failed {
        why: String,
        stderr: Vec<String>,
    },
}

struct Entry {
    config: McpServerConfig,
    state: State,
    /// Tells a finished connect task whether its entry is still the one it
    /// was started for (a reload may have replaced or removed it).
    epoch: u64,
}

struct Scoped {
    tools: Vec<Arc<McpTool>>,
    conns: Vec<Arc<Connection>>,
}

#[derive(Default)]
struct Inner {
    shared: BTreeMap<String, Entry>,
    /// Inline servers by the agent id of the session they belong to.
    scoped: HashMap<String, Scoped>,
}

/// The required servers of a spawn are not all ready.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequiredError {
    /// The patterns no ready server matches.
    pub missing: Vec<String>,
    /// The servers that are ready.
    pub available: Vec<String>,
}

/// Every MCP connection of one engine.
#[derive(Default)]
pub struct McpManager {
    inner: Mutex<Inner>,
    version: AtomicU64,
    epochs: AtomicU64,
    /// Woken at every version change (for [`McpManager::wait_settled`]).
    changed: tokio::sync::Notify,
    /// Folders besides the working directory given to servers as roots.
    extra_roots: Mutex<Vec<PathBuf>>,
    /// Answers servers' sampling requests (`mcp.sampling`).
    sampler: Mutex<Option<super::Sampler>>,
    /// Puts servers' requests for input to the user.
    elicitor: Mutex<Option<super::Elicitor>>,
    /// The hooks asked around every elicitation.
    elicit_hooks: Mutex<Option<super::ElicitHooks>>,
    /// Reaches an SDK client's in-process servers.
    local: Mutex<Option<super::LocalConnector>>,
    /// When set, only these shared servers are used (`--strict-mcp-config`).
    only: Mutex<Option<Vec<String>>>,
    /// What an SDK host changed: its own servers, the ones it switched off,
    /// and the last configured set (to apply a change at once).
    host: Mutex<HostServers>,
}

/// See [`McpManager::host`].
#[derive(Default)]
struct HostServers {
    /// `mcp_set_servers`: used beside the configured ones (which win a name).
    added: BTreeMap<String, McpServerConfig>,
    /// `mcp_toggle` with `enabled: false`.
    disabled: std::collections::BTreeSet<String>,
    /// The servers and folder of the last [`McpManager::sync`].
    last: Option<(BTreeMap<String, McpServerConfig>, PathBuf)>,
}

impl McpManager {
    pub fn new() -> Arc<McpManager> {
        Arc::new(McpManager::default())
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves plain data behind; keep going.
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn bump(&self) {
        self.version.fetch_add(1, Ordering::SeqCst);
        self.changed.notify_waiters();
    }

    /// Folders that servers get as roots after the working directory
    /// (`--add-dir`); for servers that connect from now on.
    pub fn set_extra_roots(&self, dirs: Vec<PathBuf>) {
        *self
            .extra_roots
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = dirs;
    }

    /// Uses only the shared servers named here, whatever else the settings
    /// list (`None`: all of them). Set before the first [`McpManager::sync`].
    pub fn set_only(&self, names: Option<Vec<String>>) {
        *self
            .only
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = names;
    }

    /// How servers of `type: "sdk"` are reached (set before they connect).
    pub fn set_local_connector(&self, local: Option<super::LocalConnector>) {
        *self
            .local
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = local;
    }

    /// Offers sampling, answered by `sampler`, to servers that connect from
    /// now on.
    pub fn set_sampler(&self, sampler: Option<super::Sampler>) {
        *self
            .sampler
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = sampler;
    }

    /// Puts servers' requests for input to the user through `elicitor`,
    /// for servers that connect from now on (without one they are
    /// declined).
    pub fn set_elicitor(&self, elicitor: Option<super::Elicitor>) {
        *self
            .elicitor
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = elicitor;
    }

    /// Asks `hooks` around every elicitation of servers that connect from
    /// now on.
    pub fn set_elicit_hooks(&self, hooks: Option<super::ElicitHooks>) {
        *self
            .elicit_hooks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = hooks;
    }

    /// How cadre answers one server. A shared server's tool-list changes
    /// are followed (an agent's inline servers keep their first list).
    fn client(self: &Arc<Self>, server: &str, cwd: &Path, shared: bool) -> super::client::Client {
        let mut roots = vec![cwd.to_path_buf()];
        roots.extend(
            self.extra_roots
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .iter()
                .cloned(),
        );
        super::client::Client {
            server: server.to_string(),
            roots,
            sampler: self
                .sampler
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clone(),
            progress: Default::default(),
            local: self
                .local
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clone(),
            elicitor: self
                .elicitor
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clone(),
            elicit_hooks: self
                .elicit_hooks
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clone(),
            on_tools_changed: shared.then(|| {
                let weak = Arc::downgrade(self);
                let name = server.to_string();
                Arc::new(move || {
                    if let Some(m) = weak.upgrade() {
                        m.refresh_tools(name.clone());
                    }
                }) as Arc<dyn Fn() + Send + Sync>
            }),
        }
    }

    /// Lists a ready shared server's tools again, in the background, and
    /// bumps the version so sessions render their tool list anew.
    fn refresh_tools(self: &Arc<Self>, name: String) {
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let this = Arc::clone(self);
        rt.spawn(async move {
            let conn = match this.lock().shared.get(&name).map(|e| &e.state) {
                Some(State::Ready { conn, .. }) => Arc::clone(conn),
                _ => return,
            };
            let list = match conn.fetch_tools().await {
                Ok(list) => list,
                Err(e) => {
                    report(&format!(
                        "MCP server `{name}` changed its tools, but listing them again failed: {e}"
                    ));
                    return;
                }
            };
            let fresh = tools_from(&name, &conn, list);
            let count = fresh.len();
            {
                let mut inner = this.lock();
                match inner.shared.get_mut(&name).map(|e| &mut e.state) {
                    Some(State::Ready { conn: c, tools }) if Arc::ptr_eq(c, &conn) => {
                        *tools = fresh;
                    }
                    // Reconnected or removed meanwhile.
                    _ => return,
                }
            }
            tracing::info!(server = %name, tools = count, "MCP server tool list changed");
            this.bump();
        });
    }

    /// Changes whenever a server connects, fails, is added or removed.
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::SeqCst)
    }

    /// Brings the shared servers in line with `servers`: servers that are
    /// new or whose configuration changed start connecting in the
    /// background; servers no longer listed are closed. Returns at once.
    /// Outside a Tokio runtime it does nothing.
    /// An SDK host's servers (`mcp_set_servers`) are used beside
    /// `servers`, and those it switched off are left out.
    pub fn sync(self: &Arc<Self>, servers: &BTreeMap<String, McpServerConfig>, cwd: &Path) {
        let all = {
            let mut host = self
                .host
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            host.last = Some((servers.clone(), cwd.to_path_buf()));
            let mut all = servers.clone();
            for (name, c) in &host.added {
                all.entry(name.clone()).or_insert_with(|| c.clone());
            }
            all.retain(|name, _| !host.disabled.contains(name));
            all
        };
        self.apply(&all, cwd);
    }

    /// Syncs again with the last configured set (after a host's change).
    fn resync(self: &Arc<Self>) {
        let last = self
            .host
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .last
            .clone();
        if let Some((servers, cwd)) = last {
            self.sync(&servers, &cwd);
        }
    }

    /// Whether `name` is a shared server, configured or the host's, on or
    /// off.
    pub fn knows(&self, name: &str) -> bool {
        let host = self
            .host
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        host.added.contains_key(name)
            || host.disabled.contains(name)
            || host
                .last
                .as_ref()
                .is_some_and(|(s, _)| s.contains_key(name))
    }

    /// Replaces the host's own servers (`mcp_set_servers`); the names
    /// added and removed. A name the configuration already has keeps the
    /// configured server.
    pub fn set_host_servers(
        self: &Arc<Self>,
        servers: BTreeMap<String, McpServerConfig>,
    ) -> (Vec<String>, Vec<String>) {
        let (added, removed) = {
            let mut host = self
                .host
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let added = servers
                .keys()
                .filter(|n| !host.added.contains_key(*n))
                .cloned()
                .collect();
            let removed = host
                .added
                .keys()
                .filter(|n| !servers.contains_key(*n))
                .cloned()
                .collect();
            host.added = servers;
            (added, removed)
        };
        self.resync();
        (added, removed)
    }

    /// Switches a shared server off (closed, its tools gone) or on again
    /// (`mcp_toggle`).
    pub fn set_enabled(self: &Arc<Self>, name: &str, enabled: bool) {
        {
            let mut host = self
                .host
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if enabled {
                host.disabled.remove(name);
            } else {
                host.disabled.insert(name.to_string());
            }
        }
        self.resync();
    }

    /// Whether a host switched `name` off.
    pub fn is_disabled(&self, name: &str) -> bool {
        self.host
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .disabled
            .contains(name)
    }

    /// Closes a shared server and connects it again (`mcp_reconnect`);
    /// returns at once (its state is `Connecting` until it is done).
    pub fn reconnect(self: &Arc<Self>, name: &str) {
        let closing = {
            let mut inner = self.lock();
            match inner.shared.remove(name) {
                Some(Entry {
                    state: State::Ready { conn, .. },
                    ..
                }) => Some(conn),
                _ => None,
            }
        };
        if let (Some(conn), Ok(rt)) = (closing, tokio::runtime::Handle::try_current()) {
            rt.spawn(async move { conn.close().await });
        }
        self.bump();
        self.resync();
    }

    /// Connects, and closes, so that the shared servers are `servers`.
    fn apply(self: &Arc<Self>, servers: &BTreeMap<String, McpServerConfig>, cwd: &Path) {
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let only = self
            .only
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        let kept: BTreeMap<String, McpServerConfig>;
        let servers = match only {
            Some(names) => {
                kept = servers
                    .iter()
                    .filter(|(n, _)| names.contains(n))
                    .map(|(n, c)| (n.clone(), c.clone()))
                    .collect();
                &kept
            }
            None => servers,
        };
        let mut closing = Vec::new();
        let mut starting = Vec::new();
        {
            let mut inner = self.lock();
            let removed: Vec<String> = inner
                .shared
                .iter()
                .filter(|(name, e)| servers.get(*name) != Some(&e.config))
                .map(|(name, _)| name.clone())
                .collect();
            for name in removed {
                if let Some(Entry {
                    state: State::Ready { conn, .. },
                    ..
                }) = inner.shared.remove(&name)
                {
                    closing.push(conn);
                }
                tracing::info!(server = %name, "MCP server removed");
            }
            for (name, config) in servers {
                if inner.shared.contains_key(name) {
                    continue;
                }
                let epoch = self.epochs.fetch_add(1, Ordering::SeqCst);
                inner.shared.insert(
                    name.clone(),
                    Entry {
                        config: config.clone(),
                        state: State::Connecting,
                        epoch,
                    },
                );
                starting.push((name.clone(), config.clone(), epoch));
            }
        }
        if closing.is_empty() && starting.is_empty() {
            return;
        }
        self.bump();
        for conn in closing {
            rt.spawn(async move { conn.close().await });
        }
        for (name, config, epoch) in starting {
            let this = Arc::clone(self);
            let cwd: PathBuf = cwd.to_path_buf();
            let client = self.client(&name, &cwd, true);
            rt.spawn(async move {
                let began = Instant::now();
                let result = Connection::connect(&config, &cwd, client).await;
                note_connection(&name, &config, began, outcome(&result));
                this.finish_connect(&name, epoch, result);
            });
        }
    }

    fn finish_connect(
        &self,
        name: &str,
        epoch: u64,
        result: Result<Connection, super::ConnectError>,
    ) {
        let stale = {
            let mut inner = self.lock();
            match inner.shared.get_mut(name) {
                Some(entry) if entry.epoch == epoch => {
                    entry.state = match result {
                        Ok(conn) => {
                            let conn = Arc::new(conn);
                            tracing::info!(server = %name, tools = conn.tools.len(), "MCP server ready");
                            State::Ready {
                                tools: tools_of(name, &conn),
                                conn,
                            }
                        }
                        Err(e) => {
                            report_failure(&format!("`{name}`"), &e);
                            State::Failed {
                                why: e.error.to_string(),
                                stderr: e.stderr,
                            }
                        }
                    };
                    None
                }
                // Replaced or removed while connecting.
                _ => result.ok(),
            }
        };
        match stale {
            Some(conn) => {
                if let Ok(rt) = tokio::runtime::Handle::try_current() {
                    rt.spawn(async move { conn.close().await });
                }
            }
            None => self.bump(),
        }
    }

    /// Every shared server and where it is.
    pub fn states(&self) -> BTreeMap<String, ServerState> {
        self.lock()
            .shared
            .iter()
            .map(|(name, e)| {
                let s = match e.state {
                    State::Connecting => ServerState::Connecting,
                    State::Ready { .. } => ServerState::Ready,
                    State::Failed { .. } => ServerState::Failed,
                };
                (name.clone(), s)
            })
            .collect()
    }

    /// The failure message of a shared server that failed.
    pub fn failure(&self, name: &str) -> Option<String> {
        match &self.lock().shared.get(name)?.state {
            State::Failed { why, .. } => Some(why.clone()),
            _ => None,
        }
    }

    /// The last lines a shared stdio server wrote on stderr (kept while it
    /// runs, and from its failed start).
    pub fn stderr_tail(&self, name: &str) -> Vec<String> {
        match &self.lock().shared.get(name).map(|e| &e.state) {
            Some(State::Ready { conn, .. }) => conn.stderr.lines(),
            Some(State::Failed { stderr, .. }) => stderr.clone(),
            _ => Vec::new(),
        }
    }

    /// Waits until no shared server is still connecting, at most `limit`.
    /// `on_change` is called with the states at the start and after every
    /// change. Returns the servers still connecting when it gave up
    /// (empty when every server is ready or has failed).
    pub async fn wait_settled(
        &self,
        limit: Duration,
        mut on_change: impl FnMut(&BTreeMap<String, ServerState>),
    ) -> Vec<String> {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            // Registered before looking, so a change in between is not missed.
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let states = self.states();
            on_change(&states);
            let pending: Vec<String> = states
                .iter()
                .filter(|(_, s)| **s == ServerState::Connecting)
                .map(|(n, _)| n.clone())
                .collect();
            if pending.is_empty() {
                return pending;
            }
            tokio::select! {
                () = &mut notified => {}
                () = tokio::time::sleep_until(deadline) => return pending,
            }
        }
    }

    /// The tools of every ready shared server, then those of the inline
    /// servers of `agent_ids` (a session's own id, then its parent's for a
    /// fork), sorted by name within each group.
    pub fn tools(&self, agent_ids: &[&str]) -> Vec<Arc<McpTool>> {
        let inner = self.lock();
        let mut out: Vec<Arc<McpTool>> = inner
            .shared
            .values()
            .filter_map(|e| match &e.state {
                State::Ready { tools, .. } => Some(tools.iter().cloned()),
                _ => None,
            })
            .flatten()
            .collect();
        out.sort_by(|a, b| crate::tools::Tool::name(&**a).cmp(crate::tools::Tool::name(&**b)));
        for id in agent_ids {
            if let Some(s) = inner.scoped.get(*id) {
                let mut own = s.tools.clone();
                own.sort_by(|a, b| {
                    crate::tools::Tool::name(&**a).cmp(crate::tools::Tool::name(&**b))
                });
                for t in own {
                    let name = crate::tools::Tool::name(&*t);
                    if !out.iter().any(|o| crate::tools::Tool::name(&**o) == name) {
                        out.push(t);
                    }
                }
            }
        }
        out
    }

    /// A ready shared server's connection.
    pub fn connection(&self, name: &str) -> Option<Arc<Connection>> {
        match &self.lock().shared.get(name)?.state {
            State::Ready { conn, .. } => Some(Arc::clone(conn)),
            _ => None,
        }
    }

    /// Every ready shared server, by name.
    pub fn ready_servers(&self) -> Vec<(String, Arc<Connection>)> {
        self.lock()
            .shared
            .iter()
            .filter_map(|(name, e)| match &e.state {
                State::Ready { conn, .. } => Some((name.clone(), Arc::clone(conn))),
                _ => None,
            })
            .collect()
    }

    /// The ready shared servers that declared the `resources` capability,
    /// by name.
    pub fn resource_servers(&self) -> Vec<(String, Arc<Connection>)> {
        self.lock()
            .shared
            .iter()
            .filter_map(|(name, e)| match &e.state {
                State::Ready { conn, .. } if conn.resources => {
                    Some((name.clone(), Arc::clone(conn)))
                }
                _ => None,
            })
            .collect()
    }

    /// One tool by its `mcp__…` name, as [`McpManager::tools`] would list it.
    pub fn tool(&self, agent_ids: &[&str], name: &str) -> Option<Arc<McpTool>> {
        self.tools(agent_ids)
            .into_iter()
            .find(|t| crate::tools::Tool::name(&**t) == name)
    }

    /// Whether every pattern matches a ready shared server.
    pub fn required_ready(&self, patterns: &[String]) -> bool {
        let states = self.states();
        patterns.iter().all(|p| {
            states
                .iter()
                .any(|(n, s)| *s == ServerState::Ready && required_matches(p, n))
        })
    }

    /// Waits until every pattern matches a ready shared server. While a
    /// matching server is still connecting it checks again every `poll`,
    /// up to `wait`; it stops early once a matching server has failed.
    pub async fn wait_required(
        &self,
        patterns: &[String],
        wait: Duration,
        poll: Duration,
    ) -> Result<(), RequiredError> {
        let started = Instant::now();
        loop {
            let states = self.states();
            let missing: Vec<String> = patterns
                .iter()
                .filter(|p| {
                    !states
                        .iter()
                        .any(|(n, s)| *s == ServerState::Ready && required_matches(p, n))
                })
                .cloned()
                .collect();
            if missing.is_empty() {
                return Ok(());
            }
            let matching = |want: ServerState| {
                missing.iter().any(|p| {
                    states
                        .iter()
                        .any(|(n, s)| *s == want && required_matches(p, n))
                })
            };
            let pending = matching(ServerState::Connecting);
            let failed = matching(ServerState::Failed);
            if !pending || failed || started.elapsed() >= wait {
                let available = states
                    .iter()
                    .filter(|(_, s)| **s == ServerState::Ready)
                    .map(|(n, _)| n.clone())
                    .collect();
                return Err(RequiredError { missing, available });
            }
            let left = wait.saturating_sub(started.elapsed());
            tokio::time::sleep(poll.min(left).max(Duration::from_millis(1))).await;
        }
    }

    /// Starts the inline servers of an agent definition's `mcpServers` for
    /// the session `agent_id` and waits for them to connect (concurrently).
    /// A server that fails is reported and left out. Names of shared
    /// servers are checked: an unknown name is reported. The servers stop
    /// when the returned value is stopped or dropped.
    pub async fn start_scoped(
        self: &Arc<Self>,
        agent_id: &str,
        agent_type: &str,
        entries: &[AgentMcpServer],
        cwd: &Path,
        child_env: Arc<crate::config::ChildEnv>,
    ) -> ScopedServers {
        // Resolved when the agent file was read; a bad entry was reported then.
        let mut names = Vec::new();
        let mut inline = Vec::new();
        for e in entries {
            match e {
                AgentMcpServer::Named(n) => names.push(n.clone()),
                AgentMcpServer::Inline { name, config } => {
                    let mut config = config.clone();
                    config.child_env = Some(Arc::clone(&child_env));
                    config.scope = Some("agent");
                    inline.push((name.clone(), config));
                }
            }
        }
        {
            let inner = self.lock();
            for n in names {
                if !inner.shared.contains_key(&n) {
                    report(&format!(
                        "agent `{agent_type}`: mcpServers names `{n}`, which is not a configured MCP server"
                    ));
                }
            }
        }
        let guard = ScopedServers {
            manager: Arc::clone(self),
            agent_id: agent_id.to_string(),
            active: !inline.is_empty(),
        };
        if inline.is_empty() {
            return guard;
        }
        let connecting = inline.iter().map(|(name, config)| {
            let client = self.client(name, cwd, false);
            async move {
                let began = Instant::now();
                let result = Connection::connect(config, cwd, client).await;
                note_connection(name, config, began, outcome(&result));
                (name.clone(), result)
            }
        });
        let results = futures_util::future::join_all(connecting).await;
        let mut scoped = Scoped {
            tools: Vec::new(),
            conns: Vec::new(),
        };
        for (name, r) in results {
            match r {
                Ok(conn) => {
                    let conn = Arc::new(conn);
                    tracing::info!(server = %name, agent_id, "agent MCP server ready");
                    scoped.tools.extend(tools_of(&name, &conn));
                    scoped.conns.push(conn);
                }
                Err(e) => report_failure(&format!("`{name}` (of agent `{agent_type}`)"), &e),
            }
        }
        self.lock().scoped.insert(agent_id.to_string(), scoped);
        self.bump();
        guard
    }

    /// Closes every connection, shared and scoped, and waits until their
    /// server processes are gone (process end). Shared servers are
    /// forgotten: a later `sync` would start them again.
    pub async fn shutdown(&self) {
        let conns: Vec<Arc<Connection>> = {
            let mut inner = self.lock();
            let mut conns: Vec<Arc<Connection>> = std::mem::take(&mut inner.shared)
                .into_values()
                .filter_map(|e| match e.state {
                    State::Ready { conn, .. } => Some(conn),
                    _ => None,
                })
                .collect();
            for (_, s) in inner.scoped.drain() {
                conns.extend(s.conns);
            }
            conns
        };
        self.bump();
        futures_util::future::join_all(conns.iter().map(|c| c.close())).await;
    }

    fn take_scoped(&self, agent_id: &str) -> Vec<Arc<Connection>> {
        let taken = self.lock().scoped.remove(agent_id);
        match taken {
            Some(s) => {
                self.bump();
                s.conns
            }
            None => Vec::new(),
        }
    }
}

/// The inline servers of one child session; [`ScopedServers::stop`] closes
/// them (a dropped value closes them in the background).
pub struct ScopedServers {
    manager: Arc<McpManager>,
    agent_id: String,
    active: bool,
}

impl ScopedServers {
    /// Closes the servers and waits until their processes are gone.
    pub async fn stop(mut self) {
        self.active = false;
        let conns = self.manager.take_scoped(&self.agent_id);
        futures_util::future::join_all(conns.iter().map(|c| c.close())).await;
    }
}

impl Drop for ScopedServers {
    fn drop(&mut self) {
        if !self.active {
            return;
        }
        let conns = self.manager.take_scoped(&self.agent_id);
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                futures_util::future::join_all(conns.iter().map(|c| c.close())).await;
            });
        }
    }
}

fn tools_of(server: &str, conn: &Arc<Connection>) -> Vec<Arc<McpTool>> {
    tools_from(server, conn, conn.tools.clone())
}

fn tools_from(
    server: &str,
    conn: &Arc<Connection>,
    list: Vec<super::client::ServerTool>,
) -> Vec<Arc<McpTool>> {
    list.into_iter()
        .map(|t| Arc::new(McpTool::new(server, t, Arc::clone(conn))))
        .collect()
}

/// What a connection attempt's result is, for telemetry.
fn outcome<T>(result: &Result<T, super::ConnectError>) -> Outcome<'_> {
    match result {
        Ok(_) => Outcome::Connected,
        Err(e) => Outcome::Failed(e),
    }
}

fn report_failure(label: &str, e: &super::ConnectError) {
    let mut message = format!(
        "MCP server {label} failed: {}; its tools are not available",
        e.error
    );
    if !e.stderr.is_empty() {
        message.push_str("\n  its last stderr lines:");
        for line in &e.stderr {
            message.push_str("\n    ");
            message.push_str(line);
        }
    }
    report(&message);
}

/// A warning for the user. Logs go to stderr and show warnings by default
/// (`CADRE_LOG`, `-v`), so this is the user-visible report too.
fn report(message: &str) {
    tracing::warn!("{message}");
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn failing(cmd: &str) -> McpServerConfig {
        McpServerConfig {
            command: Some(format!("/nonexistent/{cmd}")),
            ..Default::default()
        }
    }

    async fn settled(m: &McpManager) -> BTreeMap<String, ServerState> {
        for _ in 0..200 {
            let s = m.states();
            if s.values().all(|s| *s != ServerState::Connecting) {
                return s;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        m.states()
    }

    #[tokio::test]
    async fn sync_adds_new_drops_removed_and_reconnects_changed_servers() {
        let m = McpManager::new();
        let cwd = std::env::temp_dir();
        let mut servers = BTreeMap::new();
        servers.insert("a".to_string(), failing("a"));
        servers.insert("b".to_string(), failing("b"));
        m.sync(&servers, &cwd);
        let v0 = m.version();
        let s = settled(&m).await;
        assert_eq!(s.len(), 2);
        assert!(s.values().all(|s| *s == ServerState::Failed));
        assert!(m.failure("a").unwrap().contains("/nonexistent/a"));
        assert!(m.version() > v0, "a finished connect bumps the version");

        // Same set: nothing happens.
        let v1 = m.version();
        m.sync(&servers, &cwd);
        assert_eq!(m.version(), v1);

        // `a` removed, `b` changed, `c` added.
        servers.remove("a");
        servers.insert("b".to_string(), failing("b2"));
        servers.insert("c".to_string(), failing("c"));
        m.sync(&servers, &cwd);
        settled(&m).await;
        let names: Vec<String> = m.states().into_keys().collect();
        assert_eq!(names, ["b", "c"]);
        assert!(m.failure("b").unwrap().contains("/nonexistent/b2"));
    }

    #[tokio::test]
    async fn required_servers_fail_fast_when_a_match_failed_or_none_exists() {
        let m = McpManager::new();
        let mut servers = BTreeMap::new();
        servers.insert("GitHub".to_string(), failing("gh"));
        m.sync(&servers, &std::env::temp_dir());
        let started = Instant::now();
        let e = m
            .wait_required(
                &["github".to_string(), "slack".to_string()],
                Duration::from_secs(20),
                Duration::from_millis(20),
            )
            .await
            .unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(e.missing, ["github", "slack"]);
        assert!(e.available.is_empty());
        assert!(!m.required_ready(&["github".to_string()]));
        assert!(m.required_ready(&[]));
    }
}
