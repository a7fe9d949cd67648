//! What `initialize`, `init` and the control requests list: the MCP
//! servers with their states, the commands, the models. A leaf of the
//! headless files: headless mode and `control` both read it.

use super::wire;
use crate::runtime;

/// The MCP servers and their states, as `init` and `mcp_status` report them.
pub(super) fn server_statuses(mcp: &crate::mcp::McpManager) -> Vec<wire::McpServerStatus> {
    mcp.states()
        .into_iter()
        .map(|(name, s)| wire::McpServerStatus {
            name,
            status: match s {
                crate::mcp::ServerState::Connecting => "pending",
                crate::mcp::ServerState::Ready => "connected",
                crate::mcp::ServerState::Failed => "failed",
            }
            .into(),
        })
        .collect()
}

/// `initialize`'s `commands`: the skills and commands of the catalog, then
/// the built-ins (`builtin: true`, as Claude Code marks its own).
pub(super) fn command_list(snap: &crate::snapshot::Snapshot) -> Vec<wire::CommandEntry> {
    let entries = snap.skills.skills.values().map(|s| wire::CommandEntry {
        name: s.name.clone(),
        description: s.description.clone(),
        argument_hint: s.argument_hint.clone().unwrap_or_default(),
        builtin: None,
    });
    let builtins = runtime::commands::BUILTINS
        .iter()
        .map(|(name, hint, what)| wire::CommandEntry {
            name: name.to_string(),
            description: what.to_string(),
            argument_hint: hint.to_string(),
            builtin: Some(true),
        });
    entries.chain(builtins).collect()
}

/// `initialize`'s `models`, in Claude Code's shape: `default` (the
/// configured model) first, then each alias of `[models]`. None offers
/// Claude Code's `auto` permission mode (`supportsAutoMode`), which cadre
/// runs as `default`; effort levels are those of `effort_levels`.
pub(super) fn model_list(snap: &crate::snapshot::Snapshot) -> Vec<wire::ModelEntry> {
    let settings = snap.settings();
    let entry = |value: &str, model: &str, name: &str, description: String| {
        let levels = crate::agent_tool::accepted_effort_levels(model, &settings.effort_levels)
            .unwrap_or_default();
        wire::ModelEntry {
            value: value.to_string(),
            resolved_model: model.to_string(),
            display_name: name.to_string(),
            description,
            supports_effort: !levels.is_empty(),
            supported_effort_levels: levels.to_vec(),
            supports_adaptive_thinking: false,
            supports_fast_mode: false,
            supports_auto_mode: false,
            supports_thinking_off: true,
        }
    };
    let main = snap.resolve_alias(&settings.provider.model);
    let mut out = vec![entry(
        "default",
        main,
        "Default",
        format!("The configured model ({main})"),
    )];
    for (alias, model) in &settings.models {
        out.push(entry(alias, model, alias, model.clone()));
    }
    out
}
