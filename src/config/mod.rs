//! Settings and feature flags.
//!
//! Owns every settings layer (Claude Code's `settings*.json` files and
//! cadre's own, user / project / local / managed, the environment and the
//! command line) merged with precedence written once (`layers`), the origin
//! of each key, workspace trust, the report of unknown keys, and the flag
//! registry with its gates. It knows nothing of agents or providers beyond
//! the plain values it holds.

mod claude;
mod condition;
pub mod edit;
mod env;
mod files;
mod flags;
mod hooks;
pub mod layers;
mod load;
mod mode;
pub mod observed;
pub mod plugins;
mod sandbox;
mod settings;
pub mod trust;

pub use condition::{Condition, Term};
pub use env::subagent_model;
pub use files::project_key;
pub use flags::{
    DISABLE_BACKGROUND_TASKS, FORK_SUBAGENT, Flag, FlagDecl, FlagValue, Flags, Gate, Layer,
};
pub use hooks::{
    DEFAULT_HOOK_TIMEOUT_MS, Entry as HookEntry, Hook, HookConfig, HookEvent, HookSettings,
    HookType, Hooks, Matcher, group_problems as hook_group_problems,
    other_type_note as hook_other_type_note, read_entry as read_hook_entry,
};
pub use layers::{Origin, Origins, Scope};
pub use load::{
    CliOverrides, ConfigError, HostSettings, IgnoredKey, LayerFile, LoadInput, LoadedConfig,
    MAX_SETTINGS_BYTES, OLD_SESSIONS_DIR, discover, layer_files, load,
};
pub use mode::{Mode, PermissionMode, SessionKind};
pub use sandbox::{SandboxFilesystem, SandboxNetwork, SandboxSettings};
pub use settings::{
    AgentSettings, BashSettings, ChildEnv, CompactSettings, DistributedSettings, EFFORT_LEVELS,
    McpServerConfig, ModelPrice, PermissionSettings, PluginSettings, ProviderKind,
    ProviderSettings, ReloadSettings, SCRUBBED_ENV, SamplingPolicy, SearchBackend, SearchStep,
    Settings, StatusLineSetting, TaskBackendKind, ToolCallFallback, TranscriptSettings,
    WebFetchSettings, WebSearchSettings,
};
pub use trust::Skipped;
