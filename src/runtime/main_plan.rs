//! Deciding the main session, with no effects: the command line's choices,
//! the transcript header a resume reads back and one snapshot go in; the
//! session's agent, kind, model, permission mode, tools and turn limit come
//! out (or why the named agent cannot run).
//!
//! The same rules as a sub-agent's plan ([`super::plan`]) hold for what is
//! read back: a header is data a repository can ship, so it may only
//! narrow what the user's settings and flags give now (docs/sessions.md).
//! Opening the transcript, starting the team and wiring the engine are the
//! caller's (`cli::prepare`).

use std::path::PathBuf;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::catalog::AgentDef;
use crate::config::{Mode, Scope};
use crate::snapshot::Snapshot;

use super::plan::SessionPlan;
use super::resume::SessionHeader;
use super::session::{SessionSpec, TeamSeat};

/// The main session's inputs besides the snapshot, as values.
#[derive(Debug, Clone, Default)]
pub struct MainInput<'a> {
    /// The session kind for flag gates.
    pub interactive: bool,
    /// `--agent`.
    pub agent: Option<&'a str>,
    /// `--model`.
    pub model: Option<&'a str>,
    /// `--permission-mode` was given (its value is in the settings).
    pub mode_flag: bool,
    /// `--max-turns`.
    pub max_turns: Option<u32>,
    /// The header of the transcript a resume continues.
    pub resumed: Option<&'a SessionHeader>,
    /// The tools the engine offers, by name.
    pub available_tools: &'a [String],
    /// Only these tools (an SDK client's `tools`), when given.
    pub only_tools: Option<&'a [String]>,
    /// Never these tools (an SDK client's `disallowedTools`).
    pub remove_tools: &'a [String],
}

/// The main session as [`plan_main`] decided it: values only, so it
/// serialises like a sub-agent's [`super::plan::SpawnPlan`]; the agent
/// definition is named and resolved from the snapshot ([`MainPlan::def`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MainPlan {
    /// The agent it runs as, by name: `--agent`, else the resumed
    /// transcript's, else the one the mode names.
    pub agent: Option<String>,
    /// What the session is (depth 0), as a sub-agent's plan says it.
    pub core: SessionPlan,
    /// Where the model came from.
    pub model_source: MainModelSource,
}

/// Where the main session's model came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MainModelSource {
    /// Managed settings set `provider.model`.
    Managed,
    /// `--model`.
    Flag,
    /// The resumed transcript's.
    Transcript,
    /// The agent definition's `model`.
    Agent,
    /// The settings' `provider.model`.
    Settings,
}

impl MainModelSource {
    /// The word `init`'s `model_source` reports.
    pub fn as_str(self) -> &'static str {
        match self {
            MainModelSource::Managed => "managed",
            MainModelSource::Flag => "flag",
            MainModelSource::Transcript => "transcript",
            MainModelSource::Agent => "agent",
            MainModelSource::Settings => "settings",
        }
    }
}

/// Why the main session cannot be planned (a usage error).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MainRefusal {
    #[error("--agent {name}: no such agent. Available agents: {}", available.join(", "))]
    UnknownAgent {
        name: String,
        available: Vec<String>,
    },
}

/// Plans the main session.
///
/// - **kind**: the snapshot's for `interactive`; a resumed session keeps
///   the mode (coordinator or not) it was started in.
/// - **agent**: `--agent`, else the resumed transcript's, else the mode's
///   `main_agent`.
/// - **model**: managed settings, else `--model`, else the transcript's,
///   else the agent's (unless `inherit`), else the settings'.
/// - **mode**: `--permission-mode` (via the settings), else the agent's
///   `permissionMode`, else the settings'. The agent a transcript names
///   was not chosen on this command line: its mode only narrows the
///   settings' ([`crate::permissions::child_mode`]). `bypassPermissions`
///   is `default` while settings disable it.
/// - **tools**: the main pool of the agent; a resumed transcript's pool
///   (kept for its order and bytes) only narrows it; then the client's
///   `tools` and `disallowedTools`.
pub fn plan_main(snap: &Snapshot, input: &MainInput<'_>) -> Result<MainPlan, MainRefusal> {
    let settings = snap.settings();
    let recorded = input.resumed;
    let mut kind = snap.session_kind(input.interactive);
    if let Some(m) = recorded.and_then(|h| h.mode) {
        kind.coordinator = m == Mode::Coordinator;
    }
    let agent_name = match (input.agent, recorded) {
        (Some(a), _) => Some(a.to_string()),
        (None, Some(h)) => h.agent.clone(),
        (None, None) => settings.mode_main_agent().map(str::to_string),
    };
    let def = match agent_name {
        Some(name) => Some(snap.visible_agent(&name, kind).cloned().ok_or_else(|| {
            MainRefusal::UnknownAgent {
                available: snap
                    .visible_agents(kind)
                    .iter()
                    .map(|d| d.name.clone())
                    .collect(),
                name,
            }
        })?),
        None => None,
    };
    // A model set by managed settings is not for a user to change.
    let managed_model = snap
        .config
        .origins
        .of("provider.model")
        .is_some_and(|o| o.scope == Scope::Managed);
    let (model_written, model_source) =
        match (input.model, def.as_ref().and_then(|d| d.model.as_deref())) {
            _ if managed_model => (settings.provider.model.as_str(), MainModelSource::Managed),
            (Some(m), _) => (m, MainModelSource::Flag),
            // A resumed session keeps the model its transcript names.
            (None, _) if recorded.is_some() => (
                recorded.map_or("", |h| h.model.as_str()),
                MainModelSource::Transcript,
            ),
            (None, Some(m)) if !m.eq_ignore_ascii_case("inherit") => (m, MainModelSource::Agent),
            _ => (settings.provider.model.as_str(), MainModelSource::Settings),
        };
    let model = snap.resolve_alias(model_written).to_string();
    let mode = match def.as_ref().and_then(|d| d.permission_mode) {
        _ if input.mode_flag => settings.permissions.default_mode,
        Some(m) if input.agent.is_none() && recorded.is_some() => {
            crate::permissions::child_mode(settings.permissions.default_mode, Some(m))
        }
        Some(m) => m,
        None => settings.permissions.default_mode,
    };
    // `disableBypassPermissionsMode` holds for an `--agent` definition too.
    let mode = mode.unless_bypass_disabled(snap.config.bypass_disabled_by.is_some());
    let mut tools = super::main_tool_pool(input.available_tools, snap, kind, def.as_deref());
    if let Some(h) = recorded.filter(|h| !h.tool_names.is_empty()) {
        tools = h
            .tool_names
            .iter()
            .filter(|n| tools.contains(n))
            .cloned()
            .collect();
    }
    if let Some(only) = input.only_tools {
        tools.retain(|n| only.contains(n));
    }
    tools.retain(|n| !input.remove_tools.contains(n));
    let max_turns = input
        .max_turns
        .or_else(|| def.as_ref().and_then(|d| d.max_turns))
        .unwrap_or(settings.agents.default_max_turns);
    let effort = def.as_deref().and_then(super::plan::def_effort);
    Ok(MainPlan {
        agent: def.map(|d| d.name.clone()),
        core: SessionPlan {
            model,
            kind,
            mode,
            depth: 0,
            max_turns,
            tools,
            effort,
        },
        model_source,
    })
}

impl MainPlan {
    /// The transcript's header (its `session` line, a resume's `settings`)
    /// for the session the plan describes, working in `cwd`: what a
    /// resume reads back ([`MainInput::resumed`]).
    pub fn header(
        &self,
        snap: &Snapshot,
        session_id: String,
        cwd: PathBuf,
        forked_from: Option<String>,
    ) -> SessionHeader {
        let provider = &snap.settings().provider;
        SessionHeader {
            version: super::resume::TRANSCRIPT_VERSION,
            session_id,
            model: self.core.model.clone(),
            agent: self.agent.clone(),
            mode: Some(if self.core.kind.coordinator {
                Mode::Coordinator
            } else {
                Mode::Normal
            }),
            tool_names: self.core.tools.clone(),
            sampling: crate::message::Sampling {
                temperature: provider.temperature,
                thinking_budget: provider.thinking_budget,
                effort: None,
            },
            max_tokens: provider.max_tokens,
            generation: snap.generation,
            cwd: Some(cwd),
            forked_from,
        }
    }

    /// The agent definition the plan names, from `snap` (the snapshot it
    /// was planned from, or one that still has the agent).
    pub fn def(&self, snap: &Snapshot) -> Option<Arc<AgentDef>> {
        let name = self.agent.as_deref()?;
        snap.visible_agent(name, self.core.kind).cloned()
    }

    /// The session the plan describes, working in `cwd`, with its agent
    /// definition from `snap`.
    pub fn session(
        &self,
        snap: &Snapshot,
        cwd: PathBuf,
        wait_for_background: bool,
        team: Option<TeamSeat>,
    ) -> SessionSpec {
        let mut spec = self.core.spec("main".into(), None, self.def(snap), cwd);
        spec.wait_for_background = wait_for_background;
        spec.team = team;
        spec
    }
}
