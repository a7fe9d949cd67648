//! The agent catalog: definitions, where they come from, and which one wins.
//!
//! Owns [`AgentDef`], parsing agent files (`*.md` with YAML frontmatter,
//! `*.yaml`/`*.yml`, `*.toml`) from raw documents into definitions with
//! diagnostics, the source folders and their precedence, the built-in agents
//! (embedded; a folder on disk may replace them), the synthetic `fork`, and
//! project memory (`CLAUDE.md` and its imports).
//! It runs nothing and knows nothing of tools beyond their names.

pub mod agent_memory;
mod builtin;
mod def;
mod frontmatter;
mod hooks;
mod load;
mod memory;
mod parse;
mod resolve;
pub mod rules;
pub mod skills;
mod sources;
pub mod styles;
pub mod teams;
mod tokens;

pub use builtin::builtin_agents;
pub use def::{AgentDef, AgentMcpServer, Color, EffortSetting, Isolation, Prompt, Source};
pub use frontmatter::{Frontmatter, split_frontmatter};
pub use load::{
    Catalog, CatalogInput, FileCache, MAX_FILE_BYTES, Shadowed, load, load_incremental,
};
pub use memory::{
    MAX_IMPORT_DEPTH, Memory, MemoryFile, MemoryInput, MemoryScope, imports, load_memory,
};
pub use parse::{
    ParseOptions, parse_agent_file, parse_agent_file_with, parse_cli_agents, parse_cli_agents_with,
};
pub use skills::{
    PartDir, Skill, SkillKind, SkillSource, Skills, command_dirs, load_commands,
    load_named_commands, load_skills, skill_dirs,
};
pub use sources::{SourceDir, source_dirs};
pub use tokens::{
    LEGACY_TOOL_NAMES, agent_spec_types, base_name, canonical_tool_name, canonical_tool_spec,
    tokenize_tools,
};

/// Name of the synthetic agent reached only by the fork route.
pub const FORK_AGENT: &str = "fork";
/// The agent used when an Agent call names no type.
pub const GENERAL_PURPOSE: &str = "general-purpose";
/// Built-in agents that return their result without the usage trailer.
pub const ONE_SHOT_AGENTS: &[&str] = &["Explore", "Plan"];

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests;
