//! Hooks (SPEC §12): user commands, HTTP requests and small-model
//! questions run at points of a session's life — the events of `HookEvent`
//! that cadre fires (`docs/hooks.md` lists them) — from the settings (every
//! session) and from the running agent's frontmatter (that agent's
//! sessions only; its `Stop` means `SubagentStop`).
//!
//! A `command` hook is described below; an `http` hook POSTs the same
//! input ([`run_http`]) and a `prompt` hook asks the small model
//! ([`run_prompt`]); all three answer as a command does (exit 0 with
//! stdout, exit 2 with a reason). Every JSON answer, and an SDK client's
//! callback answers, is read by [`Fired::absorb`].
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
use std::time::{Duration, Instant};

use futures_util::future::{BoxFuture, join_all};
use nix::unistd::Pid;
use serde_json::{Map, Value, json};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

use crate::catalog::AgentDef;
pub use crate::config::HookEvent;
use crate::config::{ChildEnv, Hook, HookConfig, HookType, Hooks, plugins};
use crate::message::{ContentBlock, History, Message, ToolResultContent};
use crate::permissions::{HookDecision, HookVerdict};
use crate::snapshot::Snapshot;
use crate::templates::Templates;
use crate::tools::child::{Captured, GroupGuard};
use crate::tools::outcome::{Clip, Clipped};
use crate::tools::sandbox::{self, Policy};

use super::session::{Session, SessionSpec};
use super::texts::{HookBlocked, HookContext, HookFailure, HookStopFeedback, WorktreeHookFailure};
use super::transcript::Transcript;
use super::{Engine, EngineEvent, EventSink};

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
    // A definition's `Stop` is read as `SubagentStop`: under `--agent`,
    // it is the main session's stop.
    let own_event = match event {
        HookEvent::Stop => HookEvent::SubagentStop,
        e => e,
    };
    settings
        .select(event, target)
        .chain(own.into_iter().flat_map(|h| h.select(own_event, target)))
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
    /// Answers `prompt` hooks; `None` where no model is at hand (such a
    /// hook is then logged and decides nothing).
    pub model: Option<HookModel>,
    /// Answers `agent` hooks: runs the hook's sub-agent with the prompt
    /// and gives back its `{ok, reason}` as JSON text; `None` outside a
    /// session (such a hook is then logged and decides nothing).
    pub agent: Option<HookModel>,
    /// The sandbox command hooks run in when `sandbox.enabled` is set and
    /// this machine can sandbox (docs/sandbox.md, "Hooks").
    pub sandbox: Option<Arc<Policy>>,
    /// Where each run is told of when it ended (telemetry's hook spans);
    /// `None`: nowhere.
    pub report: Option<HookReport>,
}

/// The session a hook runs for: each run is emitted to its event sink as
/// an [`EngineEvent::HookRun`] of its agent.
#[derive(Clone)]
pub struct HookReport {
    pub events: EventSink,
    pub agent_id: String,
}

/// How one run ended, for its [`EngineEvent::HookRun`].
struct RunEnd {
    outcome: &'static str,
    exit_code: Option<i32>,
    error: Option<String>,
}

impl RunEnd {
    fn allow(code: Option<i32>) -> RunEnd {
        RunEnd {
            outcome: "allow",
            exit_code: code,
            error: None,
        }
    }

    fn block(code: Option<i32>) -> RunEnd {
        RunEnd {
            outcome: "block",
            exit_code: code,
            error: None,
        }
    }

    fn error(code: Option<i32>, why: String) -> RunEnd {
        RunEnd {
            outcome: "error",
            exit_code: code,
            error: Some(why),
        }
    }
}

impl HookReport {
    /// Emits the start of `event`'s `hooks`, or (with `ended`) their end.
    fn batch(&self, event: HookEvent, hooks: u32, ended: Option<super::HookTally>) {
        (self.events)(&EngineEvent::HookEvent {
            agent_id: self.agent_id.clone(),
            event: event.as_str(),
            hooks,
            ended,
        });
    }

    /// Emits one run of `event` that started at `started`.
    fn ran(
        &self,
        event: HookEvent,
        input: &Value,
        hook: Option<&HookConfig>,
        end: RunEnd,
        started: Instant,
    ) {
        (self.events)(&EngineEvent::HookRun {
            agent_id: self.agent_id.clone(),
            tool_use_id: input
                .get("tool_use_id")
                .and_then(Value::as_str)
                .map(str::to_string),
            event: event.as_str(),
            hook_type: hook.map_or("callback", |h| h.kind.as_str()),
            hook: hook.map(|h| h.label().to_string()).unwrap_or_default(),
            outcome: end.outcome,
            // A prompt or http hook's answer is read as an exit code; only
            // a command's is its own.
            exit_code: end
                .exit_code
                .filter(|_| hook.is_some_and(|h| h.kind == HookType::Command)),
            error: end.error,
            run_async: hook.is_some_and(|h| h.run_async),
            duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        });
    }
}

/// A small model's answer to a `prompt` hook: called with the hook's
/// `model` (or `None`: the small model) and the prompt, it answers with
/// the model's text.
pub type HookModel =
    Arc<dyn Fn(Option<String>, String) -> BoxFuture<'static, Result<String, String>> + Send + Sync>;

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
            model: None,
            agent: None,
            sandbox: hook_sandbox(snap, cwd),
            report: None,
        }
    }
}

/// Runs one hook of any type: a command ([`run_hook_in`], in `sandbox`
/// when one is given), a POST of the
/// input to a URL ([`run_http`]) or a question to a small model
/// ([`run_prompt`]). Each answer is read the same way: exit 0 with stdout,
/// exit 2 with stderr (a block), or a failure.
pub async fn run_any(
    hook: &HookConfig,
    input: &Value,
    cwd: &Path,
    env: &ChildEnv,
    asked: Asked<'_>,
    sandbox: Option<&Policy>,
) -> HookRun {
    match hook.kind {
        HookType::Command => run_hook_in(hook, input, cwd, env, sandbox).await,
        HookType::Http => run_http(hook, input, env).await,
        HookType::Prompt => run_prompt(hook, input, asked.model).await,
        HookType::Agent => run_prompt(hook, input, asked.agent).await,
    }
}

/// Who answers the hooks that ask: `prompt` hooks (a model) and `agent`
/// hooks (a sub-agent); `None` where there is none here.
#[derive(Clone, Copy, Default)]
pub struct Asked<'a> {
    pub model: Option<&'a HookModel>,
    pub agent: Option<&'a HookModel>,
}

/// Bytes of an `http` hook's response body that are read; a longer body
/// is a failure (it is not read as a decision).
pub const HTTP_HOOK_MAX_BYTES: usize = 1024 * 1024;

/// `$NAME` and `${NAME}` in a header value, replaced by the variable's
/// value for the names in `allowed` (from the hooks' environment, then the
/// process's); any other name is replaced by nothing, as Claude Code does,
/// so a project's hook cannot send a variable it was not allowed.
pub fn interpolate(value: &str, allowed: &[String], env: &ChildEnv) -> String {
    let lookup = |name: &str| -> String {
        if !allowed.iter().any(|a| a == name) {
            return String::new();
        }
        env.set
            .get(name)
            .cloned()
            .or_else(|| std::env::var(name).ok())
            .unwrap_or_default()
    };
    let mut out = String::new();
    let mut rest = value;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(inner) = after.strip_prefix('{')
            && let Some(end) = inner.find('}')
        {
            out.push_str(&lookup(&inner[..end]));
            rest = &inner[end + 1..];
            continue;
        }
        let len = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(after.len());
        if len == 0 {
            out.push('$');
        } else {
            out.push_str(&lookup(&after[..len]));
        }
        rest = &after[len..];
    }
    out.push_str(rest);
    out
}

/// POSTs `input` as JSON to the hook's URL, with its headers (variables
/// interpolated only from `allowed_env_vars`), within its timeout. A 2xx
/// answer is read as a command's stdout on exit 0; any other status, a
/// connection failure, a timeout or a body over [`HTTP_HOOK_MAX_BYTES`] is
/// a failure that decides nothing (as in Claude Code: to block, a server
/// answers 2xx with a decision).
pub async fn run_http(hook: &HookConfig, input: &Value, env: &ChildEnv) -> HookRun {
    let Some(url) = hook.url.as_deref() else {
        return HookRun::Failed("an http hook without a url".into());
    };
    let client = match crate::provider::tls::client_builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
    {
        Ok(c) => c,
        Err(e) => return HookRun::Failed(format!("no HTTP client: {e}")),
    };
    let mut request = client
        .post(url)
        .header("content-type", "application/json")
        .body(input.to_string());
    for (name, value) in &hook.headers {
        request = request.header(name, interpolate(value, &hook.allowed_env_vars, env));
    }
    let exchange = async {
        let mut response = request
            .send()
            .await
            .map_err(|e| format!("POST {url}: {e}"))?;
        let status = response.status();
        let mut body = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| format!("reading the answer of {url}: {e}"))?
        {
            if body.len() + chunk.len() > HTTP_HOOK_MAX_BYTES {
                return Err(format!(
                    "the answer of {url} is longer than {HTTP_HOOK_MAX_BYTES} bytes; not read"
                ));
            }
            body.extend_from_slice(&chunk);
        }
        Ok((status, String::from_utf8_lossy(&body).into_owned()))
    };
    match tokio::time::timeout(Duration::from_millis(hook.timeout_ms), exchange).await {
        Err(_) => HookRun::TimedOut,
        Ok(Err(e)) => HookRun::Failed(e),
        Ok(Ok((status, body))) if status.is_success() => HookRun::Exited {
            code: Some(0),
            stdout: Clip::whole(body),
            stderr: Clip::whole(String::new()),
        },
        Ok(Ok((status, body))) => HookRun::Failed(format!(
            "{url} answered {status}: {}",
            body.chars().take(200).collect::<String>().trim()
        )),
    }
}

/// Asks the small model (or the hook's `model`) the hook's prompt, with
/// `$ARGUMENTS` replaced by the input JSON (or the input appended when the
/// prompt does not say `$ARGUMENTS`). The model answers `{"ok": true}` or
/// `{"ok": false, "reason": "…"}`; `ok: false` is read as exit 2 with the
/// reason (a block where the event can block), as Claude Code does.
pub async fn run_prompt(hook: &HookConfig, input: &Value, model: Option<&HookModel>) -> HookRun {
    let Some(model) = model else {
        return HookRun::Failed(format!(
            "nothing can answer {} hook here",
            match hook.kind {
                HookType::Agent => "an agent",
                _ => "a prompt",
            }
        ));
    };
    let prompt = hook.prompt.as_deref().unwrap_or_default();
    let json = input.to_string();
    let text = if prompt.contains("$ARGUMENTS") {
        prompt.replace("$ARGUMENTS", &json)
    } else {
        format!("{prompt}\n\n{json}")
    };
    let asked = model(hook.model.clone(), text);
    let answer = match tokio::time::timeout(Duration::from_millis(hook.timeout_ms), asked).await {
        Err(_) => return HookRun::TimedOut,
        Ok(Err(e)) => return HookRun::Failed(e),
        Ok(Ok(a)) => a,
    };
    let Some(verdict) = prompt_verdict(&answer) else {
        return HookRun::Failed(format!(
            "the model's answer is not {{\"ok\": true|false, \"reason\": …}}: {}",
            answer.chars().take(200).collect::<String>().trim()
        ));
    };
    match verdict {
        Ok(()) => HookRun::Exited {
            code: Some(0),
            stdout: Clip::whole(String::new()),
            stderr: Clip::whole(String::new()),
        },
        Err(reason) => HookRun::Exited {
            code: Some(2),
            stdout: Clip::whole(String::new()),
            stderr: Clip::whole(reason),
        },
    }
}

/// A prompt hook's answer: the JSON object in the model's text (fenced or
/// not), `ok` true → `Ok`, false → `Err(reason)`.
pub fn prompt_verdict(answer: &str) -> Option<Result<(), String>> {
    let (start, end) = (answer.find('{')?, answer.rfind('}')?);
    let v: Value = serde_json::from_str(answer.get(start..=end)?).ok()?;
    match v.get("ok")?.as_bool()? {
        true => Some(Ok(())),
        // Without a reason it blocks as a silent exit 2 does.
        false => Some(Err(v
            .get("reason")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .trim()
            .to_string())),
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
    // A plugin's hook gets its folder as `CLAUDE_PLUGIN_ROOT` and its data
    // folder as `CLAUDE_PLUGIN_DATA`, in its environment and written into
    // its command and arguments.
    let with_root;
    let (hook, env) = match &hook.plugin_root {
        Some(root) => {
            let data = hook.plugin_data.as_deref();
            let mut h = hook.clone();
            h.command = plugins::expand_vars(&h.command, root, data);
            for a in h.args.iter_mut().flatten() {
                *a = plugins::expand_vars(a, root, data);
            }
            let mut e = env.clone();
            e.set.insert(
                plugins::PLUGIN_ROOT_VAR.to_string(),
                root.display().to_string(),
            );
            if let Some(d) = data {
                plugins::ensure_data_dir(d);
                e.set.insert(
                    plugins::PLUGIN_DATA_VAR.to_string(),
                    d.display().to_string(),
                );
            }
            with_root = (h, e);
            (&with_root.0, &with_root.1)
        }
        None => (hook, env),
    };
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
                match sandbox::proxy::Proxy::start(policy.allowed_domains.clone(), None) {
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
    /// stderr of every hook that exited with 2, and the `reason` of every
    /// `decision: "block"` (and of a prompt hook's `ok: false`).
    pub blocks: Vec<String>,
    /// `additionalContext` of every hook that exited with 0; for
    /// `SessionStart` and `UserPromptSubmit` also stdout that is not JSON,
    /// as Claude Code adds it.
    pub contexts: Vec<String>,
    /// The JSON decisions of hooks that exited with 0 (PreToolUse).
    pub decisions: Vec<ToolDecision>,
    /// `continue: false`: the `stopReason` (possibly empty) of the first
    /// hook that asked to stop.
    pub stop: Option<String>,
    /// `systemMessage`s, for the user.
    pub system_messages: Vec<String>,
    /// PermissionRequest: `hookSpecificOutput.decision` (`allow` or `deny`
    /// on the user's behalf); a deny wins.
    pub permission: Option<PermissionAnswer>,
    /// Elicitation, ElicitationResult: `hookSpecificOutput.action` (and
    /// `content`) answering the server; a `cancel` wins, else the last.
    pub elicit: Option<ElicitReply>,
    /// WorktreeCreate: the folder each hook made — a command's stdout
    /// (its first line), or `hookSpecificOutput.worktreePath`.
    pub worktree_paths: Vec<String>,
    /// What failed, for the events where a failure matters
    /// (WorktreeCreate): each hook that exited with a code other than 0
    /// or 2, timed out or could not start.
    pub failures: Vec<HookFailure>,
    /// PermissionDenied: a hook answered `hookSpecificOutput.retry: true`.
    pub retry: bool,
    /// SessionStart, CwdChanged, FileChanged: the paths a hook answered
    /// in `hookSpecificOutput.watchPaths`, for the FileChanged watcher.
    pub watch_paths: Vec<String>,
    /// MessageDisplay: the last `hookSpecificOutput.displayContent`.
    pub display: Option<String>,
}

/// Characters of a failed WorktreeCreate hook's output that the model is
/// shown.
pub const WORKTREE_HOOK_OUTPUT_CHARS: usize = 4000;

/// An Elicitation hook's answer for the user, or an ElicitationResult
/// hook's replacement answer.
#[derive(Debug, Clone, PartialEq)]
pub struct ElicitReply {
    /// `accept`, `decline` or `cancel`.
    pub action: String,
    pub content: Option<Value>,
}

/// A PermissionRequest hook's decision on the user's behalf.
#[derive(Debug, Clone, PartialEq)]
pub struct PermissionAnswer {
    pub allow: bool,
    /// `message` of a deny (for the model).
    pub message: String,
    /// `updatedInput` of an allow.
    pub updated_input: Option<Value>,
}

/// Events whose stdout, when it is not JSON, is context for the model.
fn plain_stdout_is_context(event: &str) -> bool {
    matches!(
        event,
        "SessionStart" | "UserPromptSubmit" | "UserPromptExpansion"
    )
}

/// Events a `decision: "block"` (or a prompt hook's `ok: false`) blocks.
fn decision_blocks(event: &str) -> bool {
    matches!(
        event,
        "UserPromptSubmit"
            | "UserPromptExpansion"
            | "Stop"
            | "SubagentStop"
            | "PostToolUse"
            | "PostToolUseFailure"
            | "PostToolBatch"
            | "ConfigChange"
            | "TeammateIdle"
            | "TaskCreated"
            | "TaskCompleted"
            | "Elicitation"
            | "ElicitationResult"
    )
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

/// How much a [`Fired`] held before one more hook's answer was added.
pub struct FiredMark {
    blocks: usize,
    decisions: usize,
    stopped: bool,
    denied: bool,
}

impl Fired {
    pub fn mark(&self) -> FiredMark {
        FiredMark {
            blocks: self.blocks.len(),
            decisions: self.decisions.len(),
            stopped: self.stop.is_some(),
            denied: self.denied(),
        }
    }

    fn denied(&self) -> bool {
        self.permission.as_ref().is_some_and(|p| !p.allow)
    }

    /// Whether what was added since `mark` blocks: a reason to block, a
    /// `deny`, `continue: false`.
    pub fn blocked_since(&self, mark: &FiredMark) -> bool {
        self.blocks.len() > mark.blocks
            || (self.stop.is_some() && !mark.stopped)
            || (self.denied() && !mark.denied)
            || self.decisions[mark.decisions..]
                .iter()
                .any(|d| d.decision == Some(HookDecision::Deny))
    }

    /// Adds what a hook answered on exit 0: a command's or an http hook's
    /// stdout, read as JSON when it is an object, else (for the events
    /// whose plain output is context) as text.
    pub fn absorb_stdout(&mut self, event: &str, stdout: &str) {
        match serde_json::from_str::<Value>(stdout.trim()) {
            Ok(v) if v.is_object() => self.absorb(event, &v),
            _ if event == "WorktreeCreate" => {
                let first = stdout.lines().map(str::trim).find(|l| !l.is_empty());
                self.worktree_paths.extend(first.map(str::to_string));
            }
            _ if plain_stdout_is_context(event) && !stdout.trim().is_empty() => {
                self.contexts.push(stdout.trim().to_string());
            }
            _ => {}
        }
    }

    /// Adds one hook's JSON answer — a command's stdout or what an SDK
    /// client's callback answered — in Claude Code's shape: the common
    /// fields `continue`/`stopReason`, `systemMessage`, `suppressOutput`,
    /// the older top-level `decision`/`reason`, and `hookSpecificOutput`.
    /// `event` is Claude Code's name of the event (`Stop` for the main
    /// session's stop).
    pub fn absorb(&mut self, event: &str, v: &Value) {
        let text = |k: &str| v.get(k).and_then(Value::as_str).map(str::trim);
        if let Some(m) = text("systemMessage").filter(|m| !m.is_empty()) {
            self.system_messages.push(m.to_string());
        }
        let stop = v.get("continue").and_then(Value::as_bool) == Some(false);
        if stop && self.stop.is_none() {
            self.stop = Some(text("stopReason").unwrap_or_default().to_string());
        }
        let block = text("decision") == Some("block");
        let reason = || text("reason").unwrap_or_default().to_string();
        let as_text = v.to_string();
        match event {
            "PreToolUse" => self.decisions.extend(tool_decision(&as_text)),
            "PermissionRequest" => self.permission_answer(v),
            "Elicitation" | "ElicitationResult" if block => self.blocks.push(reason()),
            "Elicitation" | "ElicitationResult" => self.elicit_reply(event, v),
            "PermissionDenied" => {
                self.retry |= v
                    .get("hookSpecificOutput")
                    .and_then(|h| h.get("retry"))
                    .and_then(Value::as_bool)
                    == Some(true);
            }
            "WorktreeCreate" => self.worktree_paths.extend(
                v.get("hookSpecificOutput")
                    .and_then(|h| h.get("worktreePath"))
                    .and_then(Value::as_str)
                    .map(str::trim)
                    .filter(|p| !p.is_empty())
                    .map(str::to_string),
            ),
            "MessageDisplay" => {
                if let Some(shown) = v
                    .get("hookSpecificOutput")
                    .and_then(|h| h.get("displayContent"))
                    .and_then(Value::as_str)
                {
                    self.display = Some(shown.to_string());
                }
            }
            "SessionStart" | "CwdChanged" | "FileChanged" => self.watch_paths.extend(
                v.get("hookSpecificOutput")
                    .and_then(|h| h.get("watchPaths"))
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .filter(|p| !p.trim().is_empty())
                    .map(str::to_string),
            ),
            // The tool has run: the reason reaches the model with its result
            // (as an exit 2's stderr does).
            "PostToolUse" | "PostToolUseFailure" if block => self.blocks.push(reason()),
            e if block && decision_blocks(e) => self.blocks.push(reason()),
            _ => {}
        }
        self.contexts.extend(additional_context(&as_text));
    }

    /// `hookSpecificOutput.action` (`accept`, `decline`, `cancel`) and
    /// `content`, read only with the event's own `hookEventName` (as
    /// Claude Code does). A `decline` also counts as a block (with the
    /// top-level `reason`); a `cancel` wins over every other answer.
    fn elicit_reply(&mut self, event: &str, v: &Value) {
        let Some(h) = v.get("hookSpecificOutput") else {
            return;
        };
        if h.get("hookEventName").and_then(Value::as_str) != Some(event) {
            return;
        }
        let Some(action) = h
            .get("action")
            .and_then(Value::as_str)
            .filter(|a| matches!(*a, "accept" | "decline" | "cancel"))
        else {
            return;
        };
        if action == "decline" {
            let reason = v.get("reason").and_then(Value::as_str).unwrap_or_default();
            self.blocks.push(reason.trim().to_string());
        }
        if self.elicit.as_ref().is_some_and(|r| r.action == "cancel") {
            return;
        }
        self.elicit = Some(ElicitReply {
            action: action.to_string(),
            content: h.get("content").filter(|c| c.is_object()).cloned(),
        });
    }

    /// `hookSpecificOutput.decision: {behavior, message?, updatedInput?}`.
    fn permission_answer(&mut self, v: &Value) {
        let Some(d) = v.get("hookSpecificOutput").and_then(|h| h.get("decision")) else {
            return;
        };
        let allow = match d.get("behavior").and_then(Value::as_str) {
            Some("allow") => true,
            Some("deny") => false,
            _ => return,
        };
        if self.permission.as_ref().is_some_and(|p| !p.allow) {
            return; // a deny already wins
        }
        self.permission = Some(PermissionAnswer {
            allow,
            message: d
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .trim()
                .to_string(),
            updated_input: d.get("updatedInput").filter(|i| i.is_object()).cloned(),
        });
    }

    /// Logs what is for the user: each `systemMessage`, and the reason of a
    /// `continue: false`.
    pub fn tell_user(&self, event: &str) {
        for m in &self.system_messages {
            tracing::warn!("{event} hook: {m}");
        }
        if let Some(r) = &self.stop {
            tracing::warn!("{event} hook stopped the session (continue: false): {r}");
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
        let started = Instant::now();
        let mark = fired.mark();
        for out in (c.call)(client_event, target.to_string(), input.clone()).await {
            fired.absorb(client_event, &out);
        }
        if let Some(r) = &place.report {
            let end = if fired.blocked_since(&mark) {
                RunEnd::block(None)
            } else {
                RunEnd::allow(None)
            };
            r.ran(event, input, None, end, started);
        }
    }
    fired
}

/// Whether the client registered callbacks for `event`.
pub(super) fn client_wants(engine: &Engine, event: &str) -> bool {
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
        let (model, agent) = (place.model.clone(), place.agent.clone());
        let sandbox = place.sandbox.clone();
        let report = place.report.clone();
        tokio::spawn(async move {
            let asked = Asked {
                model: model.as_ref(),
                agent: agent.as_ref(),
            };
            let started = Instant::now();
            let run = run_any(&hook, &input, &cwd, &env, asked, sandbox.as_deref()).await;
            let name = event.as_str();
            let command = hook.label();
            let end = match run {
                HookRun::Exited { code: Some(0), .. } => RunEnd::allow(Some(0)),
                HookRun::Exited { code, stderr, .. } => {
                    let shown = code.map_or_else(|| "a signal".to_string(), |c| c.to_string());
                    tracing::warn!(
                        "async {name} hook `{command}` exited with {shown} (an async hook decides nothing): {}",
                        stderr.head.trim()
                    );
                    RunEnd::error(code, exit_kind(code))
                }
                HookRun::TimedOut => {
                    tracing::warn!(
                        "async {name} hook `{command}` timed out after {} ms; its process group was killed",
                        hook.timeout_ms
                    );
                    RunEnd::error(None, "timeout".into())
                }
                HookRun::Failed(e) => {
                    tracing::warn!("async {name} hook `{command}`: {e}");
                    RunEnd::error(None, e)
                }
            };
            if let Some(r) = report {
                r.ran(event, &input, Some(&hook), end, started);
            }
        });
    }
    let asked = Asked {
        model: place.model.as_ref(),
        agent: place.agent.as_ref(),
    };
    let began = Instant::now();
    let batch = place
        .report
        .as_ref()
        .filter(|_| !awaited.is_empty())
        .map(|r| {
            let hooks = u32::try_from(awaited.len()).unwrap_or(u32::MAX);
            r.batch(event, hooks, None);
            (r, hooks)
        });
    let mut tally = super::HookTally::default();
    let runs = join_all(awaited.iter().map(|h| async move {
        let started = Instant::now();
        let run = run_any(
            h,
            input,
            place.cwd,
            &place.env,
            asked,
            place.sandbox.as_deref(),
        )
        .await;
        (run, started)
    }))
    .await;
    let mut fired = Fired::default();
    for (hook, (run, started)) in awaited.into_iter().zip(runs) {
        let name = event.as_str();
        let command = hook.label();
        let end = match run {
            HookRun::Exited {
                code: Some(0),
                stdout,
                ..
            } => {
                if stdout.cut > 0 {
                    tracing::warn!(
                        "{name} hook `{command}` wrote more than {} bytes to stdout; its output is not read",
                        2 * HOOK_KEEP_BYTES
                    );
                    RunEnd::error(Some(0), "output_too_long".into())
                } else {
                    let mark = fired.mark();
                    fired.absorb_stdout(name, &stdout.head);
                    if fired.blocked_since(&mark) {
                        RunEnd::block(Some(0))
                    } else {
                        RunEnd::allow(Some(0))
                    }
                }
            }
            HookRun::Exited {
                code: Some(2),
                stderr,
                ..
            } => {
                fired.blocks.push(clipped(place.templates, stderr));
                RunEnd::block(Some(2))
            }
            HookRun::Exited { code, stderr, .. } => {
                let output = clipped(place.templates, stderr);
                let shown = code.map_or_else(|| "a signal".to_string(), |c| c.to_string());
                tracing::warn!("{name} hook `{command}` exited with {shown}: {output}");
                fired.failures.push(HookFailure {
                    command: Some(command.to_string()),
                    code,
                    timed_out: false,
                    output,
                });
                RunEnd::error(code, exit_kind(code))
            }
            HookRun::TimedOut => {
                tracing::warn!(
                    "{name} hook `{command}` timed out after {} ms; its process group was killed",
                    hook.timeout_ms
                );
                fired.failures.push(HookFailure {
                    command: Some(command.to_string()),
                    code: None,
                    timed_out: true,
                    output: String::new(),
                });
                RunEnd::error(None, "timeout".into())
            }
            HookRun::Failed(e) => {
                tracing::warn!("{name} hook `{command}`: {e}");
                fired.failures.push(HookFailure {
                    command: Some(command.to_string()),
                    code: None,
                    timed_out: false,
                    output: e.clone(),
                });
                RunEnd::error(None, e)
            }
        };
        match end.outcome {
            "allow" => tally.success += 1,
            "block" => tally.blocking += 1,
            _ => tally.non_blocking_error += 1,
        }
        if let Some(r) = &place.report {
            r.ran(event, input, Some(hook), end, started);
        }
    }
    if let Some((r, hooks)) = batch {
        tally.duration_ms = u64::try_from(began.elapsed().as_millis()).unwrap_or(u64::MAX);
        r.batch(event, hooks, Some(tally));
    }
    fired
}

/// What ended a run that failed with `code`: `exit_code` (another
/// code than 0 or 2), or `signal`.
fn exit_kind(code: Option<i32>) -> String {
    if code.is_some() {
        "exit_code"
    } else {
        "signal"
    }
    .to_string()
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

/// Where each setting that differs between two snapshots was written (in
/// the new one, or the old one for a setting removed), as far as a file
/// set it.
fn changed_origins(old: &Snapshot, new: &Snapshot) -> Vec<crate::config::Origin> {
    fn walk(a: &Value, b: &Value, at: &mut Vec<String>, out: &mut Vec<String>) {
        match (a, b) {
            (Value::Object(x), Value::Object(y)) => {
                let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
                for k in keys {
                    at.push(k.clone());
                    walk(
                        x.get(k).unwrap_or(&Value::Null),
                        y.get(k).unwrap_or(&Value::Null),
                        at,
                        out,
                    );
                    at.pop();
                }
            }
            (a, b) if a != b => out.push(at.join(".")),
            _ => {}
        }
    }
    let (a, b) = (
        serde_json::to_value(old.settings()).unwrap_or_default(),
        serde_json::to_value(new.settings()).unwrap_or_default(),
    );
    let mut keys = Vec::new();
    walk(&a, &b, &mut Vec::new(), &mut keys);
    keys.iter()
        .filter_map(|k| {
            new.config
                .origins
                .of(k)
                .or_else(|| old.config.origins.of(k))
                .cloned()
        })
        .collect()
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
    if let Some(id) = engine.prompt_id() {
        m.insert("prompt_id".into(), json!(id));
    }
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
    let mut place = HookPlace::new(snap, &spec.cwd);
    place.report = Some(HookReport {
        events: Arc::clone(&engine.events),
        agent_id: spec.agent_id.clone(),
    });
    let fired = fire_all(
        engine,
        &hooks,
        event,
        (event.as_str(), agent_type(spec)),
        &input,
        &place,
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
        if self.is_hook_agent() {
            return Vec::new();
        }
        applicable(&snap.hooks, self.spec.def.as_deref(), event, target)
    }

    /// Whether the SDK client's callbacks for `event` are called here
    /// (never in an `agent` hook's own session, whose tool calls and stop
    /// fire no hooks: a hook must not set off itself).
    fn client_wants(&self, event: HookEvent) -> bool {
        !self.is_hook_agent() && client_wants(&self.engine, event.as_str())
    }

    /// Where this session's hooks run, with a model for `prompt` hooks.
    pub(super) fn hook_place<'a>(&'a self, snap: &'a Snapshot) -> HookPlace<'a> {
        let mut place = HookPlace::new(snap, &self.spec.cwd);
        place.model = Some(self.hook_model());
        place.agent = Some(self.hook_agent());
        place.report = Some(HookReport {
            events: Arc::clone(&self.engine.events),
            agent_id: self.spec.agent_id.clone(),
        });
        place
    }

    /// Whether anything listens to `event` for `target` here.
    fn hooked(&self, hooks: &[HookConfig], event: HookEvent) -> bool {
        !hooks.is_empty() || self.client_wants(event)
    }

    /// A hook answered `continue: false`: the run ends before the next
    /// request (the reason is logged for the user).
    pub(super) fn halt(&self, reason: String) {
        if let Ok(mut h) = self.halted.lock() {
            h.get_or_insert(reason);
        }
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
        let fired = fire_all(
            &self.engine,
            hooks,
            event,
            (event.as_str(), target),
            &Value::Object(input),
            &self.hook_place(snap),
        )
        .await;
        fired.tell_user(event.as_str());
        fired
    }

    /// Fires `event` with `fields` added to the common input, matching
    /// `target`; `None` when no hook listens.
    async fn fire_event(
        &self,
        snap: &Snapshot,
        event: HookEvent,
        target: &str,
        fields: Value,
    ) -> Option<Fired> {
        let hooks = self.hooks_for(snap, event, target);
        if !self.hooked(&hooks, event) {
            return None;
        }
        let mut m = self.hook_input(event);
        if let Value::Object(extra) = fields {
            m.extend(extra);
        }
        Some(self.fire_here(snap, &hooks, event, target, m).await)
    }

    /// Context texts as the blocks a user message carries.
    fn context_blocks(
        snap: &Snapshot,
        event: HookEvent,
        contexts: Vec<String>,
    ) -> Vec<ContentBlock> {
        contexts
            .into_iter()
            .map(|context| {
                ContentBlock::text(snap.templates.show(&HookContext {
                    event: event.as_str().to_string(),
                    context,
                }))
            })
            .collect()
    }

    /// SessionStart (`source`: `startup`, `resume`, `clear` or `compact`;
    /// the matcher's target): the hooks' `additionalContext`, and their
    /// plain stdout, as text blocks for the next user message — never the
    /// system prompt, so the cached prefix stays what it was. Exit 2 and
    /// `continue: false` are logged; a session start cannot be blocked.
    pub async fn session_start_hooks(&self, source: &str) -> Vec<ContentBlock> {
        let snap = self.engine.snapshot.load_full();
        let event = HookEvent::SessionStart;
        let fields = json!({"source": source});
        if source == "startup" {
            self.instructions_loaded_hooks(&snap).await;
        }
        let Some(fired) = self.fire_event(&snap, event, source, fields).await else {
            return Vec::new();
        };
        for b in &fired.blocks {
            tracing::warn!("SessionStart hook: {b}");
        }
        self.engine.watch_more(&self.spec.cwd, &fired.watch_paths);
        Self::context_blocks(&snap, event, fired.contexts)
    }

    /// InstructionsLoaded, when a new main session starts with the
    /// project memory in its first message: once per memory file, in
    /// order (`load_reason` `session_start`, or `include` for a file an
    /// `@import` brought in, with `parent_file_path`). Matcher: the load
    /// reason. For side effects only.
    async fn instructions_loaded_hooks(&self, snap: &Snapshot) {
        use crate::catalog::MemoryScope;
        let event = HookEvent::InstructionsLoaded;
        if !super::prompt::gets_memory(self.spec.def.as_deref()) {
            return;
        }
        for file in snap
            .memory
            .files
            .iter()
            .filter(|f| !f.content.trim().is_empty())
        {
            let memory_type = match file.scope {
                MemoryScope::Managed => "Managed",
                MemoryScope::User => "User",
                MemoryScope::Project => "Project",
                MemoryScope::Local => "Local",
            };
            let reason = if file.imported_from.is_some() {
                "include"
            } else {
                "session_start"
            };
            let mut fields = json!({
                "file_path": file.path,
                "memory_type": memory_type,
                "load_reason": reason,
            });
            if let Some(parent) = &file.imported_from {
                fields["parent_file_path"] = json!(parent);
            }
            self.fire_event(snap, event, reason, fields).await;
        }
    }

    /// SessionEnd (`reason`: `prompt_input_exit` when the input ended,
    /// `clear`, `other`; the matcher's target). It cannot block; what the
    /// hooks say is logged.
    pub async fn session_end_hooks(&self, reason: &str) {
        let snap = self.engine.snapshot.load_full();
        let event = HookEvent::SessionEnd;
        if let Some(fired) = self
            .fire_event(&snap, event, reason, json!({"reason": reason}))
            .await
        {
            for b in &fired.blocks {
                tracing::warn!("SessionEnd hook: {b}");
            }
        }
    }

    /// Setup (`trigger`: `init` for `--init` and `--init-only`,
    /// `maintenance` for `--maintenance`; the matcher's target), before
    /// SessionStart. As in Claude Code's headless runs, nothing the hooks
    /// say reaches the model and nothing is blocked: an exit 2 is logged.
    pub async fn setup_hooks(&self, trigger: &str) {
        let snap = self.engine.snapshot.load_full();
        let event = HookEvent::Setup;
        if let Some(fired) = self
            .fire_event(&snap, event, trigger, json!({"trigger": trigger}))
            .await
        {
            for b in &fired.blocks {
                tracing::warn!("Setup hook: {b}");
            }
        }
    }

    /// CwdChanged, when a Bash call's `cd` moved the session's shell
    /// (`old_cwd`, `new_cwd`; `cwd` is the new folder, as in Claude Code).
    /// It has no matcher and decides nothing.
    pub(super) async fn cwd_changed_hooks(&self, snap: &Snapshot, from: &Path, to: &Path) {
        let fields = json!({"cwd": to, "old_cwd": from, "new_cwd": to});
        if let Some(fired) = self
            .fire_event(snap, HookEvent::CwdChanged, "", fields)
            .await
        {
            for b in &fired.blocks {
                tracing::warn!("CwdChanged hook: {b}");
            }
            self.engine.watch_more(to, &fired.watch_paths);
        }
    }

    /// DirectoryAdded, after a folder was added to the session's working
    /// directories (`source`: `slash_command` for chat's `/add-dir`; the
    /// matcher's target). It decides nothing.
    pub async fn directory_added_hooks(&self, directory: &Path, source: &str) {
        let snap = self.engine.snapshot.load_full();
        let fields = json!({"directory": directory, "source": source});
        if let Some(fired) = self
            .fire_event(&snap, HookEvent::DirectoryAdded, source, fields)
            .await
        {
            for b in &fired.blocks {
                tracing::warn!("DirectoryAdded hook: {b}");
            }
        }
    }

    /// MessageDisplay, for a finished assistant message of the main
    /// session with text, before it is printed (`turn_id`, `message_id`,
    /// `index` 0, `final` true, `delta`: its text): the last
    /// `displayContent` a hook answered is printed instead — in the
    /// stream's `assistant` message and the `result` —
    /// while the conversation keeps what the model said. No matcher.
    /// Not when the front end fires them as it prints the stream
    /// ([`super::display_hooks`]).
    pub(super) async fn message_display_hooks(&self, message: &Message) -> Option<String> {
        if !self.spec.is_main
            || self.display_streamed
            || message.role != crate::message::Role::Assistant
        {
            return None;
        }
        let delta: String = message
            .content
            .iter()
            .filter_map(ContentBlock::as_text)
            .collect();
        if delta.is_empty() {
            return None;
        }
        let snap = self.engine.snapshot.load_full();
        let fields = json!({
            "turn_id": self.engine.prompt_id().unwrap_or_default(),
            "message_id": super::transcript::new_uuid(),
            "index": 0,
            "final": true,
            "delta": delta,
        });
        self.fire_event(&snap, HookEvent::MessageDisplay, "", fields)
            .await?
            .display
    }

    /// UserPromptSubmit, before a prompt joins the conversation: `Err` with
    /// the reason when a hook blocked it (exit 2, `decision: "block"`, a
    /// prompt hook's `ok: false`, or `continue: false`), else the context
    /// blocks to add to the prompt's message. Its matcher is not used (as
    /// in Claude Code).
    pub async fn user_prompt_hooks(&self, prompt: &str) -> Result<Vec<ContentBlock>, String> {
        if self.spec.is_main {
            self.engine.new_prompt_id();
        }
        let fields = json!({"permission_mode": self.spec.mode.as_str(), "prompt": prompt});
        self.prompt_gate(HookEvent::UserPromptSubmit, "", fields)
            .await
    }

    /// UserPromptExpansion, when a prompt the user typed as `/name args`
    /// is about to expand (`expansion_type`: `slash_command` for a command
    /// or skill, `mcp_prompt` for an MCP prompt; matcher: the command's
    /// name): as for UserPromptSubmit, a hook may block the expansion
    /// (`Err`: the reason, for the user; nothing is sent and no shell line
    /// runs) or add context for the model.
    pub async fn prompt_expansion_hooks(
        &self,
        expansion_type: &str,
        name: &str,
        args: &str,
        source: &str,
        prompt: &str,
    ) -> Result<Vec<ContentBlock>, String> {
        let fields = json!({
            "permission_mode": self.spec.mode.as_str(),
            "expansion_type": expansion_type,
            "command_name": name,
            "command_args": args,
            "command_source": source,
            "prompt": prompt,
        });
        self.prompt_gate(HookEvent::UserPromptExpansion, name, fields)
            .await
    }

    /// A prompt event's hooks: `Err` with the reason when one stops or
    /// blocks it, else the context they add.
    async fn prompt_gate(
        &self,
        event: HookEvent,
        target: &str,
        fields: Value,
    ) -> Result<Vec<ContentBlock>, String> {
        let snap = self.engine.snapshot.load_full();
        let Some(fired) = self.fire_event(&snap, event, target, fields).await else {
            return Ok(Vec::new());
        };
        if let Some(reason) = fired.stop {
            return Err(if reason.is_empty() {
                format!("stopped by a {} hook", event.as_str())
            } else {
                reason
            });
        }
        if !fired.blocks.is_empty() {
            let reasons: Vec<String> = fired.blocks.into_iter().filter(|b| !b.is_empty()).collect();
            return Err(if reasons.is_empty() {
                format!("blocked by a {} hook", event.as_str())
            } else {
                reasons.join("\n")
            });
        }
        Ok(Self::context_blocks(&snap, event, fired.contexts))
    }

    /// PermissionRequest, when a call would be put to the user (or the SDK
    /// client): a hook may allow or deny it on the user's behalf
    /// (`hookSpecificOutput.decision.behavior`); exit 2 denies it with
    /// stderr as the message. `None`: the user is asked.
    pub(super) async fn permission_request_hooks(
        &self,
        snap: &Snapshot,
        name: &str,
        input: &Value,
    ) -> Option<PermissionAnswer> {
        let event = HookEvent::PermissionRequest;
        let fields = json!({
            "permission_mode": self.spec.mode.as_str(),
            "tool_name": name,
            "tool_input": input,
            "permission_suggestions": [],
        });
        let fired = self.fire_event(snap, event, name, fields).await?;
        if let Some(reason) = fired.stop.clone() {
            self.halt(reason);
        }
        if !fired.blocks.is_empty() {
            return Some(PermissionAnswer {
                allow: false,
                message: fired.blocks.join("\n"),
                updated_input: None,
            });
        }
        fired.permission
    }

    /// PermissionDenied, when a call is refused because nobody could be
    /// asked (a session without a user or SDK client to ask, and no
    /// PermissionRequest hook answered) — cadre's counterpart of Claude
    /// Code's auto-mode classifier refusing on the user's behalf. Matcher:
    /// the tool's name. `true` when a hook answered `retry: true`: the
    /// model is told it may try the call again. The refusal stands.
    pub(super) async fn permission_denied_hooks(
        &self,
        snap: &Snapshot,
        id: &str,
        name: &str,
        input: &Value,
        reason: &str,
    ) -> bool {
        let fields = json!({
            "permission_mode": self.spec.mode.as_str(),
            "tool_name": name,
            "tool_input": input,
            "tool_use_id": id,
            "reason": reason,
        });
        self.fire_event(snap, HookEvent::PermissionDenied, name, fields)
            .await
            .is_some_and(|f| f.retry)
    }

    /// Notification (`kind`: `permission_prompt`, `idle_prompt`, …; the
    /// matcher's target): for side effects only.
    pub(super) async fn notification_hooks(&self, snap: &Snapshot, kind: &str, message: &str) {
        let fields = json!({"message": message, "title": "cadre", "notification_type": kind});
        self.fire_event(snap, HookEvent::Notification, kind, fields)
            .await;
    }

    /// PreSkillShellCommand, before a skill's or command's `` !`…` `` line
    /// runs (for the slash-command expander to call): `Err(reason)` when a
    /// hook denied it (exit 2 or `permissionDecision: "deny"`); an `ask`
    /// is returned as `Ok(Some(reason))` for the caller's permission step;
    /// `updatedInput` is never applied (as in Claude Code). Matcher: the
    /// command's name. `invoked_by`: `user`, `claude` or `other`.
    pub async fn pre_skill_shell_command_hooks(
        &self,
        command_name: &str,
        command: &str,
        invoked_by: &str,
    ) -> Result<Option<String>, String> {
        let snap = self.engine.snapshot.load_full();
        let event = HookEvent::PreSkillShellCommand;
        let fields = json!({
            "tool_name": "Bash",
            "tool_input": {"command": command},
            "command_name": command_name,
            "invoked_by": invoked_by,
        });
        let Some(fired) = self.fire_event(&snap, event, command_name, fields).await else {
            return Ok(None);
        };
        let mut decision = Fired {
            decisions: fired.decisions.clone(),
            ..Fired::default()
        };
        decision.decisions.retain(|d| d.decision.is_some());
        let (verdict, _) = decision.tool_verdict();
        if !fired.blocks.is_empty() {
            return Err(fired.blocks.join("\n"));
        }
        match verdict {
            Some(v) if v.decision == HookDecision::Deny => Err(v.reason),
            Some(v) if v.decision == HookDecision::Ask => Ok(Some(v.reason)),
            _ => Ok(None),
        }
    }

    /// PreModelSwitch, before the model changes (`source`: `sdk` for
    /// `set_model`): `Err(reason)` when a hook denied it (exit 2 or
    /// `permissionDecision: "deny"`; an `ask` is a denial, as in a headless
    /// Claude Code). Matcher: the model asked for.
    pub async fn pre_model_switch_hooks(&self, to: &str, source: &str) -> Result<(), String> {
        let snap = self.engine.snapshot.load_full();
        let event = HookEvent::PreModelSwitch;
        let fields = json!({
            "from_model": self.spec.model,
            "to_model": snap.resolve_alias(to),
            "requested_model": to,
            "source": source,
        });
        let Some(fired) = self.fire_event(&snap, event, to, fields).await else {
            return Ok(());
        };
        if !fired.blocks.is_empty() {
            return Err(fired.blocks.join("\n"));
        }
        match fired.tool_verdict().0 {
            Some(v) if v.decision != HookDecision::Allow => Err(if v.reason.is_empty() {
                "a PreModelSwitch hook refused the switch".to_string()
            } else {
                v.reason
            }),
            _ => Ok(()),
        }
    }

    /// PostModelSwitch, after the model changed from `from`: for side
    /// effects only.
    pub async fn post_model_switch_hooks(&self, from: &str, source: &str) {
        let snap = self.engine.snapshot.load_full();
        let fields = json!({"from_model": from, "to_model": self.spec.model, "source": source});
        let target = self.spec.model.clone();
        self.fire_event(&snap, HookEvent::PostModelSwitch, &target, fields)
            .await;
    }

    /// StopFailure, when the main session's turn ends on a model request
    /// that failed: for side effects only (its output is ignored, as in
    /// Claude Code). Matcher: the error's kind (`rate_limit`,
    /// `authentication_failed`, `billing_error`, `invalid_request`,
    /// `server_error`, `unknown`).
    pub(super) async fn stop_failure_hooks(
        &self,
        snap: &Snapshot,
        e: &crate::provider::ProviderError,
    ) {
        use crate::provider::ProviderErrorKind as K;
        if !self.spec.is_main {
            return;
        }
        let kind = match e.kind {
            K::Status(429) => "rate_limit",
            K::Status(401 | 403) => "authentication_failed",
            K::Status(402) => "billing_error",
            K::Status(400 | 404 | 413 | 422) => "invalid_request",
            K::Status(s) if s >= 500 => "server_error",
            _ => "unknown",
        };
        let last = super::session::last_text(&self.history).map(|t| t.join("\n"));
        let fields = json!({
            "error": kind,
            "error_details": e.to_string(),
            "last_assistant_message": last,
        });
        self.fire_event(snap, HookEvent::StopFailure, kind, fields)
            .await;
    }

    /// WorktreeCreate, when a child of this session is about to run in a
    /// worktree (`name`: the worktree's name): `None` when no hook listens
    /// (cadre makes a git worktree, as without hooks); else the folder the
    /// hooks made — the last path a hook printed on stdout (or answered as
    /// `hookSpecificOutput.worktreePath`), relative to this session's
    /// working directory — or why there is none (a hook failed, with its
    /// stderr; no path; a path that is not a folder).
    pub(super) async fn worktree_create_hooks(
        &self,
        snap: &Snapshot,
        name: &str,
    ) -> Option<Result<PathBuf, WorktreeHookFailure>> {
        let event = HookEvent::WorktreeCreate;
        let fired = self
            .fire_event(snap, event, "", json!({"name": name}))
            .await?;
        let mut why = WorktreeHookFailure {
            failures: fired
                .blocks
                .into_iter()
                .map(|output| HookFailure {
                    command: None,
                    code: Some(2),
                    timed_out: false,
                    output,
                })
                .chain(fired.failures)
                .collect(),
            ..WorktreeHookFailure::default()
        };
        if !why.failures.is_empty() {
            // The model gets the start of each hook's output.
            for f in &mut why.failures {
                if let Some((at, _)) = f.output.char_indices().nth(WORKTREE_HOOK_OUTPUT_CHARS) {
                    f.output.truncate(at);
                }
            }
            return Some(Err(why));
        }
        let Some(path) = fired.worktree_paths.last() else {
            why.no_path = true;
            return Some(Err(why));
        };
        let path = self.spec.cwd.join(path);
        if !path.is_dir() {
            why.not_a_folder = Some(path.display().to_string());
            return Some(Err(why));
        }
        Some(Ok(path))
    }

    /// WorktreeRemove, before the unchanged worktree this sub-agent ran
    /// in is removed (hooks run in it, while it exists): for side effects
    /// only.
    pub(super) async fn worktree_remove_hooks(&self, path: &Path) {
        let snap = self.engine.snapshot.load_full();
        let fields = json!({"worktree_path": path});
        self.fire_event(&snap, HookEvent::WorktreeRemove, "", fields)
            .await;
    }

    /// ConfigChange, at the first turn after a live reload swapped the
    /// snapshot this session last saw (`seen`): once per settings file
    /// whose values changed (`source`: `user_settings`, `project_settings`,
    /// `local_settings` or `policy_settings`, with its `file_path`), and
    /// once for `skills` when skills changed. The change is already in
    /// effect, so unlike in Claude Code a hook cannot block it (what it
    /// says is logged).
    pub(super) async fn config_change_hooks(&self, seen: &Snapshot, now: &Snapshot) {
        let event = HookEvent::ConfigChange;
        let own = self.spec.def.as_ref().and_then(|d| d.hooks.as_ref());
        let configured = now
            .hooks
            .0
            .iter()
            .chain(own.iter().flat_map(|h| h.0.iter()))
            .any(|h| h.event == event);
        if !configured && !self.client_wants(event) {
            return;
        }
        let changes = crate::reload::diff(seen, now, self.spec.kind.interactive);
        let mut sources: Vec<(&str, String)> = Vec::new();
        if changes.settings_changed {
            for origin in changed_origins(seen, now) {
                use crate::config::Scope;
                let source = match origin.scope {
                    Scope::User => "user_settings",
                    Scope::Project => "project_settings",
                    Scope::Local => "local_settings",
                    Scope::Managed => "policy_settings",
                    _ => continue,
                };
                if !sources.iter().any(|(_, f)| *f == origin.source) {
                    sources.push((source, origin.source));
                }
            }
        }
        if !changes.skills_changed.is_empty() {
            sources.push(("skills", String::new()));
        }
        for (source, file) in sources {
            let mut fields = json!({"source": source});
            if !file.is_empty() {
                fields["file_path"] = json!(file);
            }
            if let Some(fired) = self.fire_event(now, event, source, fields).await {
                for b in fired.blocks {
                    tracing::warn!("ConfigChange hook (the change is already in effect): {b}");
                }
            }
        }
    }

    /// PostCompact, after a compaction (`trigger`: `auto` or `manual`, the
    /// matcher's target), with the summary: for side effects only.
    pub(super) async fn post_compact_hooks(&self, snap: &Snapshot, trigger: &str, summary: &str) {
        let fields = json!({"trigger": trigger, "compact_summary": summary});
        self.fire_event(snap, HookEvent::PostCompact, trigger, fields)
            .await;
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
        if hooks.is_empty() && !self.client_wants(event) {
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
        if hooks.is_empty() && !self.client_wants(event) {
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
        if let Some(reason) = fired.stop {
            // `continue: false` stops the call (as a silent exit 2 does)
            // and then the session.
            blocks.push(reason.clone());
            self.halt(reason);
        }
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
        if hooks.is_empty() && !self.client_wants(event) {
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
        if let Some(reason) = fired.stop {
            self.halt(reason);
        }
        // The tool has run: an exit 2's stderr reaches the model with its
        // result, as Claude Code shows it to Claude.
        let said = fired.blocks.into_iter().filter(|b| !b.is_empty());
        for context in fired.contexts.into_iter().chain(said) {
            content.push(ToolResultContent::Text {
                text: snap.templates.show(&HookContext {
                    event: event.as_str().to_string(),
                    context,
                }),
            });
        }
    }

    /// PostToolBatch, once after every call of a turn has its result and
    /// before the next request (`PostToolUse` fires per call): the hooks
    /// see the whole batch. `additionalContext` (and a `decision: "block"`
    /// reason) joins the results as text blocks, for the model;
    /// `continue: false` ends the run. Its matcher is not used.
    pub(super) async fn post_tool_batch_hooks(
        &self,
        snap: &Snapshot,
        assistant: &Message,
        results: &mut Vec<ContentBlock>,
    ) {
        let event = HookEvent::PostToolBatch;
        let hooks = self.hooks_for(snap, event, "");
        if !self.hooked(&hooks, event) {
            return;
        }
        let calls: Vec<Value> = assistant
            .tool_uses()
            .map(|(id, name, input)| {
                let response = results.iter().find_map(|b| match b {
                    ContentBlock::ToolResult {
                        tool_use_id,
                        content,
                        ..
                    } if tool_use_id == id => Some(
                        content
                            .iter()
                            .filter_map(|c| match c {
                                ToolResultContent::Text { text } => Some(text.as_str()),
                                ToolResultContent::Image { .. } => None,
                            })
                            .collect::<Vec<_>>()
                            .join("\n"),
                    ),
                    _ => None,
                });
                json!({"tool_name": name, "tool_input": input, "tool_use_id": id,
                       "tool_response": response})
            })
            .collect();
        let mut m = self.hook_input(event);
        m.insert("tool_calls".into(), Value::Array(calls));
        let fired = self.fire_here(snap, &hooks, event, "", m).await;
        if let Some(reason) = fired.stop {
            self.halt(reason);
        }
        let said = fired.blocks.into_iter().filter(|b| !b.is_empty());
        results.extend(Self::context_blocks(
            snap,
            event,
            fired.contexts.into_iter().chain(said).collect(),
        ));
    }

    /// When an agent is about to stop: the main session's `Stop` hooks, a
    /// sub-agent's `SubagentStop` hooks. `Some(text)` is a user message
    /// that sends it back to work (a hook exited with 2 or answered
    /// `decision: "block"`, and it has been sent back fewer than
    /// [`MAX_STOP_BLOCKS`] times); `continue: false` lets it stop whatever
    /// the others say.
    pub(super) async fn subagent_stop_hooks(
        &self,
        snap: &Snapshot,
        times_blocked: u32,
    ) -> Option<String> {
        let event = if self.spec.is_main {
            HookEvent::Stop
        } else {
            HookEvent::SubagentStop
        };
        let last = super::session::last_text(&self.history).map(|t| t.join("\n"));
        let fields = json!({
            "permission_mode": self.spec.mode.as_str(),
            "stop_hook_active": times_blocked > 0,
            "last_assistant_message": last,
        });
        let fired = self
            .fire_event(snap, event, agent_type(&self.spec), fields)
            .await?;
        if fired.blocks.is_empty() || fired.stop.is_some() {
            return None;
        }
        if times_blocked >= MAX_STOP_BLOCKS {
            tracing::warn!(
                "{}: {} hooks blocked its stop {MAX_STOP_BLOCKS} times already; it stops now",
                self.spec.agent_id,
                event.as_str()
            );
            return None;
        }
        Some(snap.templates.show(&HookStopFeedback {
            event: event.as_str().to_string(),
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
        let hook = |event, matcher: Option<&str>, command: &str| {
            let config = HookConfig {
                matcher: matcher.map(str::to_string),
                timeout_ms: 1,
                ..HookConfig::command(command)
            };
            Hook::new(event, &config).unwrap()
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
    fn header_variables_are_replaced_only_when_allowed() {
        let mut env = ChildEnv::default();
        env.set.insert("TOKEN".into(), "t0k".into());
        env.set.insert("SECRET".into(), "s3".into());
        let allowed = vec!["TOKEN".to_string()];
        assert_eq!(
            interpolate("Bearer $TOKEN/${TOKEN}!", &allowed, &env),
            "Bearer t0k/t0k!"
        );
        assert_eq!(interpolate("x$SECRET${SECRET}y", &allowed, &env), "xy");
        assert_eq!(
            interpolate("cost: $5 and $", &allowed, &env),
            "cost:  and $"
        );
        assert_eq!(interpolate("${TOKEN", &allowed, &env), "${TOKEN");
    }

    #[test]
    fn a_prompt_hooks_answer_is_read_from_the_models_text() {
        assert_eq!(prompt_verdict(r#"{"ok": true}"#), Some(Ok(())));
        assert_eq!(
            prompt_verdict("```json\n{\"ok\": false, \"reason\": \" no tests \"}\n```"),
            Some(Err("no tests".into()))
        );
        assert_eq!(prompt_verdict(r#"{"ok": false}"#), Some(Err(String::new())));
        assert_eq!(prompt_verdict("yes"), None);
        assert_eq!(prompt_verdict(r#"{"ok": "yes"}"#), None);
    }

    #[test]
    fn json_output_common_fields_and_permission_answers() {
        let mut f = Fired::default();
        f.absorb_stdout(
            "Stop",
            r#"{"decision": "block", "reason": "more", "systemMessage": "hi", "continue": false, "stopReason": "why"}"#,
        );
        assert_eq!(f.blocks, ["more"]);
        assert_eq!(f.system_messages, ["hi"]);
        assert_eq!(f.stop.as_deref(), Some("why"));
        let mut f = Fired::default();
        f.absorb_stdout("SessionStart", "plain context\n");
        f.absorb_stdout("PostToolUse", "plain, ignored");
        f.absorb_stdout("SessionEnd", r#"{"decision": "block", "reason": "cannot"}"#);
        assert_eq!(f.contexts, ["plain context"]);
        assert!(f.blocks.is_empty(), "SessionEnd cannot block");
        let mut f = Fired::default();
        let deny = r#"{"hookSpecificOutput": {"decision": {"behavior": "deny", "message": "no"}}}"#;
        let allow = r#"{"hookSpecificOutput": {"decision": {"behavior": "allow", "updatedInput": {"a": 1}}}}"#;
        f.absorb_stdout("PermissionRequest", allow);
        assert_eq!(
            f.permission,
            Some(PermissionAnswer {
                allow: true,
                message: String::new(),
                updated_input: Some(json!({"a": 1}))
            })
        );
        f.absorb_stdout("PermissionRequest", deny);
        f.absorb_stdout("PermissionRequest", allow);
        assert_eq!(
            f.permission.map(|p| (p.allow, p.message)),
            Some((false, "no".into()))
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
            timeout_ms,
            ..HookConfig::command(command)
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
            model: None,
            agent: None,
            sandbox: None,
            report: None,
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
