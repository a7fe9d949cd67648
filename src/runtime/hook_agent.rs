//! `agent` hooks: a small sub-agent that looks at the project with
//! read-only tools and decides a hook's condition, as Claude Code's agent
//! hooks do. It answers `{ok, reason}` through the StructuredOutput tool
//! (the `--json-schema` machinery), and its answer is read like a
//! `prompt` hook's ([`super::hooks::run_prompt`]).
//!
//! The child runs as a session of this process, one level below the
//! session whose hook fired: the hook's `model` or the small model
//! (`haiku`), the tools Read, Grep and Glob, permission mode `dontAsk`
//! (nothing outside the rules' and the mode's own allowances runs), at
//! most [`HOOK_AGENT_MAX_TURNS`] turns, no transcript of its own. No hook
//! fires in its session — a `PreToolUse` or `SubagentStop` agent hook
//! would otherwise set off itself.

use std::sync::Arc;

use serde_json::json;

use crate::catalog::{AgentDef, Prompt, Source};
use crate::config::{PermissionMode, SessionKind};
use crate::message::Message;

use super::hooks::HookModel;
use super::plan::SessionPlan;
use super::session::Session;
use super::structured::StructuredSpec;
use super::texts::HookAgentSystem;
use super::transcript::Transcript;
use super::{Engine, new_agent_id};

/// The name the hook's sub-agent runs under (never listed or selectable).
pub const HOOK_AGENT: &str = "hook-agent";

/// The hook agent's turn limit, as Claude Code's.
pub const HOOK_AGENT_MAX_TURNS: u32 = 50;

/// The tools the hook agent is offered (those of them this engine has).
pub const HOOK_AGENT_TOOLS: &[&str] = &["Read", "Grep", "Glob"];

/// The spawning session's place, for the child's spec.
#[derive(Clone)]
struct Parent {
    engine: Arc<Engine>,
    agent_id: String,
    depth: u32,
    cwd: std::path::PathBuf,
    cancel: tokio_util::sync::CancellationToken,
}

impl Session {
    /// Whether this session is an `agent` hook's sub-agent.
    pub(super) fn is_hook_agent(&self) -> bool {
        self.spec
            .def
            .as_ref()
            .is_some_and(|d| d.synthetic && d.name == HOOK_AGENT)
    }

    /// Answers `agent` hooks fired in this session: runs the sub-agent
    /// with the hook's prompt and gives back its StructuredOutput as JSON
    /// text (`{"ok": …, "reason": …}`).
    pub(super) fn hook_agent(&self) -> HookModel {
        let parent = Parent {
            engine: Arc::clone(&self.engine),
            agent_id: self.spec.agent_id.clone(),
            depth: self.spec.depth,
            cwd: self.spec.cwd.clone(),
            cancel: self.cancel.clone(),
        };
        Arc::new(move |model: Option<String>, text: String| {
            let parent = parent.clone();
            Box::pin(async move { run(parent, model, text).await })
                as futures_util::future::BoxFuture<'static, Result<String, String>>
        })
    }
}

/// Runs one hook agent to its answer.
async fn run(parent: Parent, model: Option<String>, text: String) -> Result<String, String> {
    let engine = parent.engine;
    let snap = engine.snapshot.load_full();
    let system = snap.templates.show(&HookAgentSystem {});
    let tools: Vec<String> = HOOK_AGENT_TOOLS
        .iter()
        .filter(|t| engine.tools.contains_key(**t))
        .map(|t| (*t).to_string())
        .collect();
    let mut def = AgentDef::new(
        HOOK_AGENT,
        "checks an agent hook's condition",
        Source::Builtin,
    );
    def.tools = Some(tools.clone());
    def.permission_mode = Some(PermissionMode::DontAsk);
    def.max_turns = Some(HOOK_AGENT_MAX_TURNS);
    def.prompt = Prompt::Inline(system);
    def.synthetic = true;
    let agent_id = new_agent_id();
    // A hook's checker is no catalog agent and is not started by the
    // Agent tool (whose limits do not apply to it); its plan is written
    // here, and its spec comes from the plan as every session's does.
    let plan = SessionPlan {
        model: snap
            .resolve_alias(model.as_deref().unwrap_or("haiku"))
            .to_string(),
        kind: SessionKind::NON_INTERACTIVE,
        mode: PermissionMode::DontAsk,
        depth: parent.depth + 1,
        max_turns: HOOK_AGENT_MAX_TURNS,
        tools,
        effort: None,
    };
    let mut spec = plan.spec(
        agent_id.clone(),
        Some(parent.agent_id.clone()),
        Some(Arc::new(def)),
        parent.cwd,
    );
    spec.wait_for_background = false;
    let schema = json!({
        "type": "object",
        "properties": {"ok": {"type": "boolean"}, "reason": {"type": "string"}},
        "required": ["ok"],
    });
    let structured =
        StructuredSpec::new(schema).map_err(|e| format!("the answer's schema: {e}"))?;
    let mut child = Session::new(
        Arc::clone(&engine),
        spec,
        vec![Arc::new(Message::user_text(text))],
        Arc::new(Transcript::disabled(&agent_id, Some(&parent.agent_id))),
        parent.cancel.child_token(),
    );
    child.set_structured_output(structured);
    // Its work is not shown (as in Claude Code); its cost is counted.
    let _quiet = Quiet::new(&engine, &agent_id);
    let outcome = child
        .run()
        .await
        .map_err(|e| format!("the hook's agent failed: {e}"))?;
    match outcome.structured_output {
        Some(answer) => Ok(answer.to_string()),
        None => Err(format!(
            "the hook's agent ended without an answer ({:?} after {} turns)",
            outcome.stop, outcome.turns
        )),
    }
}

/// Keeps a session quiet while it lives ([`Engine::quiet`]).
struct Quiet {
    engine: Arc<Engine>,
    agent_id: String,
}

impl Quiet {
    fn new(engine: &Arc<Engine>, agent_id: &str) -> Quiet {
        engine.quiet(agent_id);
        Quiet {
            engine: Arc::clone(engine),
            agent_id: agent_id.to_string(),
        }
    }
}

impl Drop for Quiet {
    fn drop(&mut self) {
        self.engine.unquiet(&self.agent_id);
    }
}
