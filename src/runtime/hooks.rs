//! Hooks (SPEC §12): user commands run at points of a session's life —
//! `SubagentStart`, `SubagentStop`, `PreToolUse`, `PostToolUse` and the
//! other events of `HookEvent` — from the settings (every session) and
//! from the running agent's frontmatter (that agent's sessions only; its
//! `Stop` means `SubagentStop`).
//!
//! A hook gets a JSON object on stdin and runs in the session's working
//! directory — a `command` with `bash -c`, or a `command` with `args` as
//! that program with those arguments and no shell — with
//! `CLAUDE_PROJECT_DIR` set, in its own process group, which is killed
//! when the hook's timeout passes. Only the head and tail of its output
//! are kept; an `async` hook is started and not waited for. Exit 0 goes on
//! (stdout JSON may carry `additionalContext`); exit 2 blocks where the
//! event can block (a tool call, a sub-agent's stop); any other exit is
//! logged and ignored. This module decides which hooks apply and runs
//! them; the query loop and the tool executor call it at a few points and
//! do not know about commands.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;
use nix::unistd::Pid;
use serde_json::{Map, Value, json};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

use crate::catalog::AgentDef;
pub use crate::config::HookEvent;
use crate::config::{ChildEnv, Hook, HookConfig, Hooks};
use crate::message::{ContentBlock, History, Message, ToolResultContent};
use crate::permissions::{HookDecision, HookVerdict};
use crate::snapshot::Snapshot;
use crate::templates::Templates;
use crate::tools::child::{Captured, GroupGuard};
use crate::tools::outcome::{Clip, Clipped};
use crate::tools::sandbox::{self, Policy};

use super::Engine;
use super::session::{Session, SessionSpec};
use super::texts::{HookBlocked, HookContext, HookStopFeedback};
use super::transcript::Transcript;

/// How many times SubagentStop hooks may send one child back to work.
pub const MAX_STOP_BLOCKS: u32 = 3;

/// The hooks of `event` that fire for `target` in a session running as
/// `def`: the settings' hooks (resolved once with the snapshot), then the
/// definition's own (resolved when its file was read), each in the order
/// written.
pub fn applicable(
    settings: &Hooks,
    def: Option<&AgentDef>,
    event: HookEvent,
    target: &str,
) -> Vec<HookConfig> {
    let own = def.and_then(|d| d.hooks.as_ref());
    settings
        .select(event, target)
        .chain(own.into_iter().flat_map(|h| h.select(event, target)))
        .map(Hook::config)
        .collect()
}

/// Bytes of a hook's stdout, and of its stderr, kept at each end; the
/// middle of longer output is counted as it streams past, not stored.
pub const HOOK_KEEP_BYTES: usize = 512 * 1024;

/// The variable that names the project's folder to a hook, as in Claude
/// Code.
pub const PROJECT_DIR_VAR: &str = "CLAUDE_PROJECT_DIR";

/// Where the hooks of one session run and with what: its working
/// directory, the children's environment of the settings with
/// `CLAUDE_PROJECT_DIR` added, and the texts that word output cut short.
pub struct HookPlace<'a> {
    pub cwd: &'a Path,
    pub env: ChildEnv,
    pub templates: &'a Templates,
    /// The sandbox command hooks run in when `sandbox.enabled` is set and
    /// this machine can sandbox (docs/sandbox.md, "Hooks").
    pub sandbox: Option<Arc<Policy>>,
}

impl<'a> HookPlace<'a> {
    pub fn new(snap: &'a Snapshot, cwd: &'a Path) -> HookPlace<'a> {
        let mut env = snap.settings().child_env();
        env.set.insert(
            PROJECT_DIR_VAR.to_string(),
            snap.config.project_dir.display().to_string(),
        );
        HookPlace {
            cwd,
            env,
            templates: &snap.templates,
            sandbox: hook_sandbox(snap, cwd),
        }
    }
}

/// The sandbox of a session's command hooks: the Bash policy of the
/// settings' rules and folders, when the sandbox is on and usable.
fn hook_sandbox(snap: &Snapshot, cwd: &Path) -> Option<Arc<Policy>> {
    let settings = snap.settings();
    if !settings.sandbox.enabled || !sandbox::support().usable() {
        return None;
    }
    let add_dirs: Vec<PathBuf> = settings
        .permissions
        .additional_directories
        .iter()
        .map(|d| cwd.join(d))
        .collect();
    Some(Arc::new(sandbox::policy(
        &settings.sandbox,
        &snap.rules,
        cwd,
        &add_dirs,
        sandbox::support(),
    )))
}

/// How one hook run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookRun {
    /// It exited; its output kept at head and tail ([`HOOK_KEEP_BYTES`]).
    Exited {
        code: Option<i32>,
        stdout: Clip,
        stderr: Clip,
    },
    TimedOut,
    /// It could not be started.
    Failed(String),
}

/// Runs one hook in `cwd` with `input` on stdin, in its own process group,
/// which is killed when the command ends or times out (so nothing it
/// started outlives it). With `args`, `command` is the program and runs
/// with exactly those arguments, no shell; without, `command` is a shell
/// command for `bash -c`. Its stdout and stderr are read as they come, and
/// only their heads and tails are kept, so a hook that writes without end
/// costs a fixed amount of memory until its timeout stops it.
pub async fn run_hook(hook: &HookConfig, input: &Value, cwd: &Path, env: &ChildEnv) -> HookRun {
    run_hook_in(hook, input, cwd, env, None).await
}

/// [`run_hook`], inside the sandbox when `sandbox` is given (with its own
/// filtering proxy for the run, as a Bash call has).
pub async fn run_hook_in(
    hook: &HookConfig,
    input: &Value,
    cwd: &Path,
    env: &ChildEnv,
    sandbox: Option<&Policy>,
) -> HookRun {
    // A relative path (`./x.sh`, `.claude/hooks/x`) is the working
    // directory's; a bare name is looked up on `PATH`.
    let (program, argv): (&str, Vec<String>) = match &hook.args {
        Some(args) => {
            let path = Path::new(&hook.command);
            let first = if path.is_relative() && hook.command.contains('/') {
                cwd.join(path).display().to_string()
            } else {
                hook.command.clone()
            };
            (
                hook.command.as_str(),
                std::iter::once(first).chain(args.iter().cloned()).collect(),
            )
        }
        None => (
            "bash -c",
            vec!["bash".into(), "-c".into(), hook.command.clone()],
        ),
    };
    let mut proxy = None;
    let (exe, args) = match sandbox {
        Some(policy) => {
            let mut policy = policy.clone();
            if policy.isolate_network {
                match sandbox::proxy::Proxy::start(policy.allowed_domains.clone()) {
                    Ok(p) => {
                        policy.proxy = Some(p.socket.clone());
                        proxy = Some(p);
                    }
                    Err(e) => {
                        return HookRun::Failed(format!("cannot start the sandbox's proxy: {e}"));
                    }
                }
            }
            let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
            match sandbox::wrap(&policy, &argv) {
                Ok((exe, args)) => (exe, args),
                Err(e) => return HookRun::Failed(format!("cannot start the sandbox: {e}")),
            }
        }
        None => {
            let mut argv = argv;
            let first = argv.remove(0);
            (PathBuf::from(first), argv)
        }
    };
    let mut cmd = tokio::process::Command::new(exe);
    cmd.args(args);
    env.apply(&mut cmd);
    cmd.current_dir(cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return HookRun::Failed(format!("cannot start `{program}`: {e}")),
    };
    // Kills the group when the hook ends, times out, or this future is
    // dropped (a cancelled turn; cadre exiting under an async hook).
    let mut group = GroupGuard::new(
        child
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .map(Pid::from_raw),
    );
    if let Some(mut stdin) = child.stdin.take() {
        let data = input.to_string().into_bytes();
        // A hook that never reads its stdin must not block on a full pipe.
        tokio::spawn(async move {
            let _ = stdin.write_all(&data).await;
        });
    }
    let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
    let waited = tokio::time::timeout(Duration::from_millis(hook.timeout_ms), async {
        let (status, stdout, stderr) = tokio::join!(child.wait(), drain(stdout), drain(stderr));
        status.map(|s| (s, stdout, stderr))
    })
    .await;
    group.kill();
    drop(proxy);
    let text = |kept: Captured| kept.text(2 * HOOK_KEEP_BYTES);
    match waited {
        Ok(Ok((status, stdout, stderr))) => HookRun::Exited {
            code: status.code(),
            stdout: text(stdout),
            stderr: text(stderr),
        },
        Ok(Err(e)) => HookRun::Failed(format!("waiting for the hook failed: {e}")),
        Err(_) => HookRun::TimedOut,
    }
}

/// Reads a pipe to its end, keeping its head and tail.
async fn drain<R: AsyncRead + Unpin>(pipe: Option<R>) -> Captured {
    let mut kept = Captured::new(HOOK_KEEP_BYTES);
    let Some(mut pipe) = pipe else {
        return kept;
    };
    let mut buf = vec![0u8; 64 * 1024];
    while let Ok(n @ 1..) = pipe.read(&mut buf).await {
        kept.push(&buf[..n]);
    }
    kept
}

/// `hookSpecificOutput.additionalContext` or a top-level
/// `additionalContext` from a hook's stdout, when it is a JSON object.
pub fn additional_context(stdout: &str) -> Option<String> {
    let v: Value = serde_json::from_str(stdout.trim()).ok()?;
    v.get("hookSpecificOutput")
        .and_then(|h| h.get("additionalContext"))
        .or_else(|| v.get("additionalContext"))
        .and_then(Value::as_str)
        .filter(|s| !s.trim().is_empty())
        .map(str::to_string)
}

/// What the PreToolUse hooks made of a call.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum PreTool {
    /// Blocked (exit 2 or `deny`): the error result for the model.
    Blocked(String),
    /// The call goes on to the permission check, with the hooks' decision
    /// and a replacement input, if any.
    Go {
        verdict: Option<HookVerdict>,
        input: Option<Value>,
    },
}

/// A PreToolUse hook's JSON answer on stdout (exit 0), in Claude Code's
/// shape: `hookSpecificOutput.permissionDecision` (`allow`, `deny`, `ask`),
/// `permissionDecisionReason` and `updatedInput`. The older top-level
/// `decision` (`approve`, `block`) and `reason` are read too.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct ToolDecision {
    pub decision: Option<HookDecision>,
    pub reason: String,
    /// A replacement for the call's input.
    pub updated_input: Option<Value>,
}

/// Parses a PreToolUse hook's stdout; `None` when it says nothing of the
/// call (not JSON, or no decision and no new input).
pub fn tool_decision(stdout: &str) -> Option<ToolDecision> {
    let v: Value = serde_json::from_str(stdout.trim()).ok()?;
    let specific = v.get("hookSpecificOutput");
    let field = |name: &str| specific.and_then(|h| h.get(name));
    let (decision, reason) = match field("permissionDecision").and_then(Value::as_str) {
        Some(d) => (d, field("permissionDecisionReason")),
        None => match v.get("decision").and_then(Value::as_str) {
            Some("approve") => ("allow", v.get("reason")),
            Some("block") => ("deny", v.get("reason")),
            _ => ("", None),
        },
    };
    let decision = match decision {
        "allow" => Some(HookDecision::Allow),
        "ask" => Some(HookDecision::Ask),
        "deny" => Some(HookDecision::Deny),
        _ => None,
    };
    let updated_input = field("updatedInput").filter(|i| i.is_object()).cloned();
    if decision.is_none() && updated_input.is_none() {
        return None;
    }
    Some(ToolDecision {
        decision,
        reason: reason
            .and_then(Value::as_str)
            .unwrap_or_default()
            .trim()
            .to_string(),
        updated_input,
    })
}

/// What the hooks of one event said, in hook order.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Fired {
    /// stderr of every hook that exited with 2.
    pub blocks: Vec<String>,
    /// `additionalContext` of every hook that exited with 0.
    pub contexts: Vec<String>,
    /// The JSON decisions of hooks that exited with 0 (PreToolUse).
    pub decisions: Vec<ToolDecision>,
}

impl Fired {
    /// The decision of several PreToolUse hooks: a denial wins over an ask,
    /// an ask over an allow (as in Claude Code); the reasons of the winning
    /// kind are joined. The first replacement input in hook order is used.
    pub fn tool_verdict(&self) -> (Option<HookVerdict>, Option<Value>) {
        let updated = self.decisions.iter().find_map(|d| d.updated_input.clone());
        for kind in [HookDecision::Deny, HookDecision::Ask, HookDecision::Allow] {
            let reasons: Vec<&str> = self
                .decisions
                .iter()
                .filter(|d| d.decision == Some(kind))
                .map(|d| d.reason.as_str())
                .filter(|r| !r.is_empty())
                .collect();
            if self.decisions.iter().any(|d| d.decision == Some(kind)) {
                return (
                    Some(HookVerdict {
                        decision: kind,
                        reason: reasons.join("; "),
                    }),
                    updated,
                );
            }
        }
        (None, updated)
    }
}

impl Fired {
    /// Adds what an SDK client's hook callback answered (Claude Code's hook
    /// output: `decision`/`reason`, `continue`/`stopReason`,
    /// `systemMessage`, `hookSpecificOutput`). `event` is the name the
    /// client registered for (`Stop` for the main session's stop).
    pub fn absorb_client(&mut self, event: &str, v: &Value) {
        let text = |k: &str| v.get(k).and_then(Value::as_str).map(str::trim);
        if let Some(m) = text("systemMessage").filter(|m| !m.is_empty()) {
            tracing::warn!("{event} hook: {m}");
        }
        let stop = v.get("continue").and_then(Value::as_bool) == Some(false);
        let block = text("decision") == Some("block");
        let reason = || text("reason").unwrap_or_default().to_string();
        let as_text = v.to_string();
        match event {
            "PreToolUse" => {
                self.decisions.extend(tool_decision(&as_text));
                if stop {
                    // Without a reason it blocks as a silent exit 2 does.
                    self.blocks
                        .push(text("stopReason").unwrap_or_default().to_string());
                }
            }
            "Stop" | "SubagentStop" if block => self.blocks.push(reason()),
            // The tool has run: the reason reaches the model with its result.
            "PostToolUse" | "PostToolUseFailure" if block => self.contexts.push(reason()),
            _ => {}
        }
        self.contexts.extend(additional_context(&as_text));
        if stop && event != "PreToolUse" {
            tracing::warn!(
                "{event} hook answered `continue: false`; cadre does not end the session from this event (ignored)"
            );
        }
    }
}

/// Runs the configured `hooks` and the client's callbacks for `event`
/// (`client`: the event's name for the client and the matcher target), and
/// collects what they said.
pub(super) async fn fire_all(
    engine: &Engine,
    hooks: &[HookConfig],
    event: HookEvent,
    client: (&'static str, &str),
    input: &Value,
    place: &HookPlace<'_>,
) -> Fired {
    let mut fired = if hooks.is_empty() {
        Fired::default()
    } else {
        fire(hooks, event, input, place).await
    };
    let (client_event, target) = client;
    if let Some(c) = engine
        .client_hooks
        .as_ref()
        .filter(|c| c.wants(client_event))
    {
        for out in (c.call)(client_event, target.to_string(), input.clone()).await {
            fired.absorb_client(client_event, &out);
        }
    }
    fired
}

/// Whether the client registered callbacks for `event`.
fn client_wants(engine: &Engine, event: &str) -> bool {
    engine.client_hooks.as_ref().is_some_and(|c| c.wants(event))
}

/// Runs `hooks` concurrently and collects what they said. An `async` hook
/// is started and left to run: the event does not wait for it and its
/// output decides nothing (its failures are logged). Timeouts, failures
/// and exit codes other than 0 and 2 are logged.
pub async fn fire(
    hooks: &[HookConfig],
    event: HookEvent,
    input: &Value,
    place: &HookPlace<'_>,
) -> Fired {
    let (background, awaited): (Vec<&HookConfig>, Vec<&HookConfig>) =
        hooks.iter().partition(|h| h.run_async);
    for hook in background {
        let (hook, input) = (hook.clone(), input.clone());
        let (cwd, env) = (place.cwd.to_path_buf(), place.env.clone());
        let sandbox = place.sandbox.clone();
        tokio::spawn(async move {
            let run = run_hook_in(&hook, &input, &cwd, &env, sandbox.as_deref()).await;
            let event = event.as_str();
            let command = &hook.command;
            match run {
                HookRun::Exited { code: Some(0), .. } => {}
                HookRun::Exited { code, stderr, .. } => {
                    let code = code.map_or_else(|| "a signal".to_string(), |c| c.to_string());
                    tracing::warn!(
                        "async {event} hook `{command}` exited with {code} (an async hook decides nothing): {}",
                        stderr.head.trim()
                    );
                }
                HookRun::TimedOut => tracing::warn!(
                    "async {event} hook `{command}` timed out after {} ms; its process group was killed",
                    hook.timeout_ms
                ),
                HookRun::Failed(e) => tracing::warn!("async {event} hook `{command}`: {e}"),
            }
        });
    }
    let runs = join_all(
        awaited
            .iter()
            .map(|h| run_hook_in(h, input, place.cwd, &place.env, place.sandbox.as_deref())),
    )
    .await;
    let mut fired = Fired::default();
    for (hook, run) in awaited.into_iter().zip(runs) {
        let event = event.as_str();
        let command = &hook.command;
        match run {
            HookRun::Exited {
                code: Some(0),
                stdout,
                ..
            } => {
                if stdout.cut > 0 {
                    tracing::warn!(
                        "{event} hook `{command}` wrote more than {} bytes to stdout; its output is not read",
                        2 * HOOK_KEEP_BYTES
                    );
                    continue;
                }
                fired.contexts.extend(additional_context(&stdout.head));
                if event == HookEvent::PreToolUse.as_str() {
                    fired.decisions.extend(tool_decision(&stdout.head));
                }
            }
            HookRun::Exited {
                code: Some(2),
                stderr,
                ..
            } => fired.blocks.push(clipped(place.templates, stderr)),
            HookRun::Exited { code, stderr, .. } => {
                let code = code.map_or_else(|| "a signal".to_string(), |c| c.to_string());
                tracing::warn!(
                    "{event} hook `{command}` exited with {code}: {}",
                    clipped(place.templates, stderr)
                );
            }
            HookRun::TimedOut => tracing::warn!(
                "{event} hook `{command}` timed out after {} ms; its process group was killed",
                hook.timeout_ms
            ),
            HookRun::Failed(e) => tracing::warn!("{event} hook `{command}`: {e}"),
        }
    }
    fired
}

/// A hook's output as text, with a note of what was cut from its middle.
fn clipped(templates: &Templates, out: Clip) -> String {
    let Clip {
        head,
        cut,
        about,
        tail,
    } = out;
    templates
        .show(&Clipped {
            head,
            cut,
            about,
            tail,
        })
        .trim()
        .to_string()
}

/// The fields every hook input has.
fn base_input(
    engine: &Engine,
    spec: &SessionSpec,
    transcript: &Transcript,
    event: HookEvent,
) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("hook_event_name".into(), json!(event.as_str()));
    m.insert("session_id".into(), json!(engine.session_id));
    m.insert("agent_id".into(), json!(spec.agent_id));
    m.insert("agent_type".into(), json!(agent_type(spec)));
    m.insert("cwd".into(), json!(spec.cwd));
    m.insert("transcript_path".into(), json!(transcript.path()));
    m
}

fn agent_type(spec: &SessionSpec) -> &str {
    spec.def.as_ref().map_or("main", |d| d.name.as_str())
}

/// SubagentStart: runs the hooks for a child about to start and appends
/// each `additionalContext` as a text block to the last message of its
/// starting history (the message its first turn sends).
pub(super) async fn subagent_start(
    engine: &Engine,
    snap: &Snapshot,
    spec: &SessionSpec,
    transcript: &Transcript,
    history: &mut History,
) {
    let event = HookEvent::SubagentStart;
    let hooks = applicable(&snap.hooks, spec.def.as_deref(), event, agent_type(spec));
    if hooks.is_empty() && !client_wants(engine, event.as_str()) {
        return;
    }
    let input = Value::Object(base_input(engine, spec, transcript, event));
    let fired = fire_all(
        engine,
        &hooks,
        event,
        (event.as_str(), agent_type(spec)),
        &input,
        &HookPlace::new(snap, &spec.cwd),
    )
    .await;
    if fired.contexts.is_empty() {
        return;
    }
    let Some(last) = history.last_mut() else {
        return;
    };
    let mut message: Message = (**last).clone();
    for context in fired.contexts {
        message
            .content
            .push(ContentBlock::text(snap.templates.show(&HookContext {
                event: event.as_str().to_string(),
                context,
            })));
    }
    *last = Arc::new(message);
}

impl Session {
    pub(super) fn hook_input(&self, event: HookEvent) -> Map<String, Value> {
        base_input(&self.engine, &self.spec, &self.transcript, event)
    }

    pub(super) fn hooks_for(
        &self,
        snap: &Snapshot,
        event: HookEvent,
        target: &str,
    ) -> Vec<HookConfig> {
        applicable(&snap.hooks, self.spec.def.as_deref(), event, target)
    }

    /// [`fire_all`] in this session.
    async fn fire_here(
        &self,
        snap: &Snapshot,
        hooks: &[HookConfig],
        event: HookEvent,
        target: &str,
        input: Map<String, Value>,
    ) -> Fired {
        fire_all(
            &self.engine,
            hooks,
            event,
            (event.as_str(), target),
            &Value::Object(input),
            &HookPlace::new(snap, &self.spec.cwd),
        )
        .await
    }

    /// PreCompact: runs the hooks for a compaction about to start. They
    /// cannot stop it (as in Claude Code); what they print on stderr with
    /// exit 2 is logged.
    pub(super) async fn pre_compact_hooks(
        &self,
        snap: &Snapshot,
        trigger: &str,
        instructions: Option<&str>,
    ) {
        let event = HookEvent::PreCompact;
        let hooks = self.hooks_for(snap, event, trigger);
        if hooks.is_empty() && !client_wants(&self.engine, event.as_str()) {
            return;
        }
        let mut m = self.hook_input(event);
        m.insert("trigger".into(), json!(trigger));
        m.insert(
            "custom_instructions".into(),
            json!(instructions.unwrap_or("")),
        );
        let fired = self.fire_here(snap, &hooks, event, trigger, m).await;
        for b in fired.blocks {
            tracing::warn!("PreCompact hook: {b}");
        }
    }

    /// PreToolUse: what the hooks said of a call. Exit 2 or a `deny`
    /// blocks it; otherwise they may decide (`allow`/`ask`) and replace its
    /// input.
    pub(super) async fn pre_tool_hooks(
        &self,
        snap: &Snapshot,
        tool_use_id: &str,
        name: &str,
        input: &Value,
    ) -> PreTool {
        let event = HookEvent::PreToolUse;
        let hooks = self.hooks_for(snap, event, name);
        if hooks.is_empty() && !client_wants(&self.engine, event.as_str()) {
            return PreTool::Go {
                verdict: None,
                input: None,
            };
        }
        let mut m = self.hook_input(event);
        m.insert("permission_mode".into(), json!(self.spec.mode.as_str()));
        m.insert("tool_name".into(), json!(name));
        m.insert("tool_input".into(), input.clone());
        m.insert("tool_use_id".into(), json!(tool_use_id));
        let fired = self.fire_here(snap, &hooks, event, name, m).await;
        let (verdict, updated) = fired.tool_verdict();
        let mut blocks = fired.blocks;
        if let Some(v) = &verdict
            && v.decision == HookDecision::Deny
        {
            blocks.push(v.reason.clone());
        }
        if !blocks.is_empty() {
            blocks.retain(|b| !b.is_empty());
            return PreTool::Blocked(snap.templates.show(&HookBlocked {
                tool: name.to_string(),
                reason: blocks.join("\n"),
            }));
        }
        PreTool::Go {
            verdict,
            input: updated,
        }
    }

    /// After a call ran: PostToolUse when it succeeded, PostToolUseFailure
    /// when its result is an error (as Claude Code fires them); appends
    /// each `additionalContext` to the result block.
    pub(super) async fn post_tool_hooks(
        &self,
        snap: &Snapshot,
        name: &str,
        input: &Value,
        block: &mut ContentBlock,
    ) {
        let ContentBlock::ToolResult {
            tool_use_id,
            content,
            is_error,
        } = block
        else {
            return;
        };
        let event = if *is_error {
            HookEvent::PostToolUseFailure
        } else {
            HookEvent::PostToolUse
        };
        let hooks = self.hooks_for(snap, event, name);
        if hooks.is_empty() && !client_wants(&self.engine, event.as_str()) {
            return;
        }
        let response: Vec<&str> = content
            .iter()
            .filter_map(|c| match c {
                ToolResultContent::Text { text } => Some(text.as_str()),
                ToolResultContent::Image { .. } => None,
            })
            .collect();
        let mut m = self.hook_input(event);
        m.insert("tool_name".into(), json!(name));
        m.insert("tool_input".into(), input.clone());
        m.insert("tool_use_id".into(), json!(tool_use_id));
        if *is_error {
            m.insert("error".into(), json!(response.join("\n")));
            m.insert("is_interrupt".into(), json!(false));
        } else {
            m.insert(
                "tool_response".into(),
                json!({"content": response.join("\n"), "is_error": false}),
            );
        }
        let fired = self.fire_here(snap, &hooks, event, name, m).await;
        for context in fired.contexts {
            content.push(ToolResultContent::Text {
                text: snap.templates.show(&HookContext {
                    event: event.as_str().to_string(),
                    context,
                }),
            });
        }
    }

    /// SubagentStop, when a sub-agent is about to stop: `Some(text)` is a
    /// user message that sends it back to work (a hook exited with 2, and
    /// it has been sent back fewer than [`MAX_STOP_BLOCKS`] times).
    pub(super) async fn subagent_stop_hooks(
        &self,
        snap: &Snapshot,
        times_blocked: u32,
    ) -> Option<String> {
        let event = HookEvent::SubagentStop;
        // The main session's stop is Claude Code's `Stop`; cadre's
        // configured hooks have no such event, a client's callbacks do.
        let (client_event, hooks) = if self.spec.is_main {
            ("Stop", Vec::new())
        } else {
            (
                event.as_str(),
                self.hooks_for(snap, event, agent_type(&self.spec)),
            )
        };
        if hooks.is_empty() && !client_wants(&self.engine, client_event) {
            return None;
        }
        let last = super::session::last_text(&self.history).map(|t| t.join("\n"));
        let mut m = self.hook_input(event);
        m.insert("hook_event_name".into(), json!(client_event));
        m.insert("stop_hook_active".into(), json!(times_blocked > 0));
        m.insert("last_assistant_message".into(), json!(last));
        let fired = fire_all(
            &self.engine,
            &hooks,
            event,
            (client_event, agent_type(&self.spec)),
            &Value::Object(m),
            &HookPlace::new(snap, &self.spec.cwd),
        )
        .await;
        if fired.blocks.is_empty() {
            return None;
        }
        if times_blocked >= MAX_STOP_BLOCKS {
            tracing::warn!(
                "{}: SubagentStop hooks blocked its stop {MAX_STOP_BLOCKS} times already; it stops now",
                self.spec.agent_id
            );
            return None;
        }
        Some(snap.templates.show(&HookStopFeedback {
            reason: fired.blocks.join("\n"),
        }))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn applicable_merges_settings_then_frontmatter_by_event_and_matcher() {
        let hook = |event, matcher: Option<&str>, command: &str| Hook {
            event,
            matcher: crate::config::Matcher::new(matcher).unwrap(),
            command: command.into(),
            args: None,
            timeout_ms: 1,
            run_async: false,
        };
        let settings = Hooks(vec![
            hook(HookEvent::PreToolUse, Some("Bash"), "settings-bash"),
            hook(HookEvent::PreToolUse, Some("Read"), "settings-read"),
        ]);
        let mut def = AgentDef::new("worker", "w", crate::catalog::Source::Project);
        def.hooks = Some(Hooks(vec![
            hook(HookEvent::PreToolUse, None, "fm-any"),
            hook(HookEvent::SubagentStop, None, "fm-stop"),
        ]));
        let names = |hs: Vec<HookConfig>| hs.into_iter().map(|h| h.command).collect::<Vec<_>>();
        assert_eq!(
            names(applicable(
                &settings,
                Some(&def),
                HookEvent::PreToolUse,
                "Bash"
            )),
            ["settings-bash", "fm-any"]
        );
        assert_eq!(
            names(applicable(&settings, None, HookEvent::PreToolUse, "Bash")),
            ["settings-bash"]
        );
        assert_eq!(
            names(applicable(
                &settings,
                Some(&def),
                HookEvent::SubagentStop,
                "worker"
            )),
            ["fm-stop"]
        );
    }

    #[test]
    fn additional_context_in_either_place() {
        assert_eq!(
            additional_context(r#"{"hookSpecificOutput": {"additionalContext": "a"}}"#),
            Some("a".into())
        );
        assert_eq!(
            additional_context(r#"{"additionalContext": "b"}"#),
            Some("b".into())
        );
        assert_eq!(additional_context("plain text"), None);
        assert_eq!(additional_context(""), None);
    }

    #[test]
    fn pre_tool_use_decisions_and_their_precedence() {
        let d = tool_decision(
            r#"{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "ask",
                "permissionDecisionReason": " check it ", "updatedInput": {"command": "ls"}}}"#,
        )
        .unwrap();
        assert_eq!(d.decision, Some(HookDecision::Ask));
        assert_eq!(d.reason, "check it");
        assert_eq!(d.updated_input, Some(json!({"command": "ls"})));
        let legacy = tool_decision(r#"{"decision": "approve", "reason": "ok"}"#).unwrap();
        assert_eq!(legacy.decision, Some(HookDecision::Allow));
        assert_eq!(
            tool_decision(r#"{"decision": "block"}"#).unwrap().decision,
            Some(HookDecision::Deny)
        );
        // Unknown decisions, non-object inputs and plain text say nothing.
        assert_eq!(
            tool_decision(r#"{"hookSpecificOutput": {"permissionDecision": "defer"}}"#),
            None
        );
        assert_eq!(
            tool_decision(r#"{"hookSpecificOutput": {"updatedInput": "rm -rf /"}}"#),
            None
        );
        assert_eq!(tool_decision("allow"), None);

        let said = |d: Option<HookDecision>, reason: &str, input: Option<Value>| ToolDecision {
            decision: d,
            reason: reason.to_string(),
            updated_input: input,
        };
        let fired = Fired {
            decisions: vec![
                said(
                    Some(HookDecision::Allow),
                    "fine",
                    Some(json!({"command": "a"})),
                ),
                said(
                    Some(HookDecision::Ask),
                    "look",
                    Some(json!({"command": "b"})),
                ),
                said(Some(HookDecision::Ask), "again", None),
            ],
            ..Fired::default()
        };
        let (verdict, input) = fired.tool_verdict();
        assert_eq!(
            verdict,
            Some(HookVerdict {
                decision: HookDecision::Ask,
                reason: "look; again".into()
            })
        );
        assert_eq!(input, Some(json!({"command": "a"})));
        let mut fired = fired;
        fired
            .decisions
            .push(said(Some(HookDecision::Deny), "", None));
        assert_eq!(fired.tool_verdict().0.unwrap().decision, HookDecision::Deny);
        assert_eq!(Fired::default().tool_verdict(), (None, None));
    }

    fn hook(command: &str, timeout_ms: u64) -> HookConfig {
        HookConfig {
            matcher: None,
            command: command.into(),
            args: None,
            timeout_ms,
            run_async: false,
        }
    }

    #[tokio::test]
    async fn args_run_the_program_with_exactly_those_arguments() {
        let dir = tempfile::tempdir().unwrap();
        let mut h = hook("printf", 10_000);
        h.args = Some(vec!["%s|".into(), "$(touch x); echo y".into(), "*".into()]);
        let run = run_hook(&h, &json!({}), dir.path(), &ChildEnv::default()).await;
        let HookRun::Exited { code, stdout, .. } = run else {
            panic!("{run:?}");
        };
        assert_eq!(code, Some(0));
        assert_eq!(stdout.head, "$(touch x); echo y|*|");
        assert!(!dir.path().join("x").exists());
        // A link, not a script written here: no file is open for writing
        // while another test thread starts a process.
        std::os::unix::fs::symlink("/bin/echo", dir.path().join("say")).unwrap();
        let mut relative = hook("./say", 10_000);
        relative.args = Some(vec!["it; rm -rf x".into()]);
        let run = run_hook(&relative, &json!({}), dir.path(), &ChildEnv::default()).await;
        assert!(
            matches!(&run, HookRun::Exited { code: Some(0), stdout, .. } if stdout.head == "it; rm -rf x\n"),
            "{run:?}"
        );
        let mut missing = hook("no-such-program-here", 10_000);
        missing.args = Some(Vec::new());
        let run = run_hook(&missing, &json!({}), dir.path(), &ChildEnv::default()).await;
        assert!(
            matches!(&run, HookRun::Failed(e) if e.starts_with("cannot start `no-such-program-here`")),
            "{run:?}"
        );
    }

    #[tokio::test]
    async fn output_is_kept_at_head_and_tail_only() {
        let dir = tempfile::tempdir().unwrap();
        let run = run_hook(
            &hook(
                "echo FIRST; head -c 5000000 /dev/zero | tr '\\0' y; echo; echo LAST >&2",
                60_000,
            ),
            &json!({}),
            dir.path(),
            &ChildEnv::default(),
        )
        .await;
        let HookRun::Exited { stdout, stderr, .. } = run else {
            panic!("{run:?}");
        };
        assert!(stdout.head.starts_with("FIRST\ny"));
        assert!(stdout.about && stdout.cut >= 5_000_000 - 2 * HOOK_KEEP_BYTES as u64);
        assert!(stdout.head.len() <= HOOK_KEEP_BYTES && stdout.tail.len() <= HOOK_KEEP_BYTES);
        assert_eq!(stderr.head, "LAST\n");
        assert_eq!(stderr.cut, 0);
    }

    #[tokio::test]
    async fn exit_codes_stdin_and_timeout() {
        let dir = tempfile::tempdir().unwrap();
        let input = json!({"tool_name": "Bash"});
        let (templates, _) = Templates::load(None);
        let place = HookPlace {
            cwd: dir.path(),
            env: ChildEnv::default(),
            templates: &templates,
            sandbox: None,
        };
        let fired = fire(
            &[
                hook("cat > seen.json; echo blocked >&2; exit 2", 10_000),
                hook(r#"echo '{"additionalContext": "ctx"}'"#, 10_000),
                hook("exit 1", 10_000),
                hook("sleep 30", 200),
            ],
            HookEvent::PreToolUse,
            &input,
            &place,
        )
        .await;
        assert_eq!(fired.blocks, ["blocked"]);
        assert_eq!(fired.contexts, ["ctx"]);
        let seen: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.path().join("seen.json")).unwrap())
                .unwrap();
        assert_eq!(seen, input);
        assert_eq!(
            run_hook(
                &hook("sleep 30", 100),
                &input,
                dir.path(),
                &ChildEnv::default()
            )
            .await,
            HookRun::TimedOut
        );
    }
}
