//! What happens outside a session's event sink that telemetry reports
//! (docs/observability.md): an MCP server connecting or failing to, a
//! plugin loaded. The module that sees it calls [`note`]; telemetry, when
//! it is on, [`watch`]es. What is noted before anyone watches is kept (the
//! latest [`MAX_KEPT`]) and handed to the watcher when it starts, so a
//! server that connected before telemetry was set up is still reported.
//! Nothing else listens: with telemetry off a note is a lock and a push.

use std::collections::VecDeque;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use super::layers::Scope;
use super::plugins::Plugin;

/// The most notes kept while nobody watches.
pub const MAX_KEPT: usize = 256;

/// One thing that happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Observed {
    /// An MCP server was connected to, could not be, or went away.
    McpConnection(McpConnection),
    /// A plugin was loaded from the settings (`enabledPlugins`,
    /// `--plugin-dir`); what telemetry says of it is
    /// [`PluginLoad::of`] it, read only when someone watches.
    PluginLoaded(Plugin),
    /// `cadre plugins install` installed one.
    PluginInstalled {
        name: String,
        marketplace: String,
        version: Option<String>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpConnection {
    /// The server's name as configured (`plugin:NAME:SERVER` for a
    /// plugin's).
    pub server: String,
    /// `stdio`, `http`, `sse`, …: the configuration's `type`, else what
    /// its `command` or `url` makes it.
    pub transport: String,
    /// Connected, or failed (with why).
    pub error: Option<String>,
    /// Why it failed, as a short code (`ENOENT`, `CONNECT_TIMEOUT`, …).
    pub error_code: Option<&'static str>,
    /// Where it was configured (`project`, `user`, `local`, `managed`,
    /// `dynamic`, `agent`).
    pub scope: Option<&'static str>,
    /// A connected server closed its side on its own (`duration_ms` is
    /// then how long it had been connected).
    pub disconnected: bool,
    /// The plugin that brought it, `NAME@MARKETPLACE`.
    pub plugin_source: Option<String>,
    pub duration_ms: u64,
    /// When it ended.
    pub at: SystemTime,
}

impl McpConnection {
    /// The plugin whose server this is (`plugin:NAME:SERVER`).
    pub fn plugin(&self) -> Option<&str> {
        self.server.strip_prefix("plugin:")?.split(':').next()
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginLoad {
    pub name: String,
    /// `None` for a `--plugin-dir` folder.
    pub marketplace: Option<String>,
    pub version: Option<String>,
    /// Turned on by the managed settings.
    pub managed: bool,
    /// It has hooks (`hooks/hooks.json` or the manifest's `hooks`).
    pub has_hooks: bool,
    /// It has MCP servers (`.mcp.json` or the manifest's `mcpServers`).
    pub has_mcp: bool,
}

impl PluginLoad {
    pub fn of(p: &Plugin) -> PluginLoad {
        let manifest = super::plugins::manifest(&p.path).unwrap_or_default();
        let has = |file: &Path, key: &str| file.is_file() || manifest.contains_key(key);
        PluginLoad {
            name: p.name.clone(),
            marketplace: p
                .source
                .rsplit_once('@')
                .map(|(_, m)| m.to_string())
                .filter(|m| m != "inline"),
            version: p.version.clone(),
            managed: p.scope == Scope::Managed,
            has_hooks: has(&p.path.join("hooks").join("hooks.json"), "hooks"),
            has_mcp: has(&p.path.join(".mcp.json"), "mcpServers"),
        }
    }
}

type Watcher = Arc<dyn Fn(Observed) + Send + Sync>;

#[derive(Default)]
struct Hub {
    watcher: Option<Watcher>,
    kept: VecDeque<Observed>,
}

static HUB: Mutex<Option<Hub>> = Mutex::new(None);

/// Reports `what` to the watcher, or keeps it for the one to come.
pub fn note(what: Observed) {
    let watcher = {
        let Ok(mut hub) = HUB.lock() else { return };
        let hub = hub.get_or_insert_with(Hub::default);
        match &hub.watcher {
            Some(w) => Arc::clone(w),
            None => {
                if hub.kept.len() >= MAX_KEPT {
                    hub.kept.pop_front();
                }
                hub.kept.push_back(what);
                return;
            }
        }
    };
    watcher(what);
}

/// The plugins a settings load found, each noted as loaded.
pub fn plugins_loaded(plugins: &[Plugin]) {
    for p in plugins {
        note(Observed::PluginLoaded(p.clone()));
    }
}

/// Makes `watcher` the one everything noted from now on goes to, and
/// returns what was noted before (oldest first). One watcher per process:
/// a second replaces the first.
pub fn watch(watcher: impl Fn(Observed) + Send + Sync + 'static) -> Vec<Observed> {
    let Ok(mut hub) = HUB.lock() else {
        return Vec::new();
    };
    let hub = hub.get_or_insert_with(Hub::default);
    hub.watcher = Some(Arc::new(watcher));
    hub.kept.drain(..).collect()
}
