//! Settings and feature flags.
//!
//! Owns the layering of settings (built-in defaults < config file <
//! `CADRE_*` environment < command line), the discovery of the config file,
//! the report of unknown keys, and the flag registry with its gates. It
//! knows nothing of agents or providers beyond the plain values it holds.

mod condition;
mod flags;
mod load;
mod mode;
mod settings;

pub use condition::{Condition, Term};
pub use flags::{
    DISABLE_BACKGROUND_TASKS, FORK_SUBAGENT, Flag, FlagDecl, FlagValue, Flags, Gate, Layer,
};
pub use load::{CliOverrides, ConfigError, LoadInput, LoadedConfig, discover, load};
pub use mode::{Mode, PermissionMode, SessionKind};
pub use settings::{
    AgentSettings, DEFAULT_HOOK_TIMEOUT_MS, HookConfig, HookSettings, McpServerConfig, ModelPrice,
    PermissionSettings, ProviderKind, ProviderSettings, ReloadSettings, Settings, ToolCallFallback,
    TranscriptSettings,
};
