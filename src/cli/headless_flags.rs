//! What headless mode's flags turn into before the session starts: the
//! checks Claude Code makes on them, the main session's arguments and
//! extras, the input and output formats.

use std::path::PathBuf;

use serde_json::{Map, Value, json};

use super::args::{HeadlessArgs, InputFormat, SessionArgs, split_rules};
use super::emit::send;
use super::output::{OutputFormat, note};
use super::prepare::Extras;
use super::wire::{self, Output};
use super::{CliError, GlobalArgs};
use crate::config::PermissionMode;
use crate::runtime;

/// Reads a flag value that is a JSON string or the path of a JSON file.
fn json_arg(flag: &str, value: &str) -> Result<Value, CliError> {
    let t = value.trim();
    let (text, origin) = if t.starts_with('{') {
        (t.to_string(), format!("{flag} (inline JSON)"))
    } else {
        let text = std::fs::read_to_string(t)
            .map_err(|e| CliError::Usage(format!("{flag} {t}: cannot read: {e}")))?;
        (text, format!("{flag} {t}"))
    };
    serde_json::from_str(&text).map_err(|e| {
        CliError::Usage(format!(
            "{origin}:{}:{}: not valid JSON: {e}",
            e.line(),
            e.column()
        ))
    })
}

/// What the flags turn into before the session starts.
pub(super) struct Plan {
    pub(super) session: SessionArgs,
    pub(super) extras: Extras,
    pub(super) output: OutputFormat,
    pub(super) input: InputFormat,
    pub(super) stdio_permissions: bool,
    /// In-process MCP servers of the SDK client.
    pub(super) sdk_servers: Vec<String>,
    /// `--json-schema`, compiled.
    pub(super) structured: Option<runtime::structured::StructuredSpec>,
}

pub(super) fn plan(g: &GlobalArgs, h: &HeadlessArgs) -> Result<Plan, CliError> {
    let output = h.output_format.unwrap_or(OutputFormat::Text);
    let input = h.input_format.unwrap_or(InputFormat::Text);
    check(h, input, output)?;
    note_unsupported(g, h);
    if h.session_mirror {
        mirror_transcripts();
    }
    check_replay(h, input)?;

    let mut extras = Extras::default();
    let mut session = SessionArgs {
        agent: h.agent.clone(),
        model: h.model.clone(),
        max_turns: h.max_turns,
        permission_mode: h.permission_mode,
        add_dirs: h.add_dir.clone(),
        resume: h.resume.clone(),
        continue_latest: h.continue_session,
        fork_session: h.fork_session,
        resume_session_at: h.resume_session_at.clone(),
        resume_drops_turn: h.resume_drops_turn.clone(),
        team: None,
    };
    if h.dangerously_skip_permissions {
        session.permission_mode = Some(PermissionMode::BypassPermissions);
    }
    extras.allow.extend(split_rules(&h.allowed_tools));
    let deny = split_rules(&h.disallowed_tools);
    extras.remove_tools = deny.iter().filter(|r| !r.contains('(')).cloned().collect();
    extras.deny.extend(deny);
    if !h.tools.is_empty() {
        let names = split_rules(&h.tools);
        if !(names.len() == 1 && names[0] == "default") {
            extras.tools = Some(names);
        }
    }
    extras.main_prompt = main_prompt(h)?;
    if let Some(id) = &h.session_id {
        // As Claude Code: a UUID, and not one a session already has.
        if !runtime::resume::is_uuid(id) {
            return Err(CliError::Usage(format!(
                "--session-id {id:?}: invalid session ID. Must be a valid UUID."
            )));
        }
        extras.session_id = Some(id.clone());
    }
    let sdk_servers = mcp_servers(g, h, input, &mut extras)?;
    // Thinking is one setting, provider.thinking_budget (0: off); these
    // flags set it above every other layer.
    let budget = match (h.thinking.as_deref(), h.max_thinking_tokens) {
        (Some("disabled"), _) => Some(0),
        (_, Some(n)) => Some(n),
        // As Claude Code on a model without adaptive thinking: the most
        // the answer leaves room for (cut to max_tokens - 1 when sent).
        (Some(_), None) => Some(u32::MAX),
        (None, None) => None,
    };
    if let Some(b) = budget {
        extras
            .env
            .push(("CADRE_PROVIDER__THINKING_BUDGET".into(), b.to_string()));
    }
    let stdio_permissions = stdio_permissions(g, h, input)?;
    let structured = structured(h)?;
    Ok(Plan {
        session,
        extras,
        output,
        input,
        stdio_permissions,
        sdk_servers,
        structured,
    })
}

/// Claude Code's checks of the flags together, before anything else.
fn check(h: &HeadlessArgs, input: InputFormat, output: OutputFormat) -> Result<(), CliError> {
    if h.resume.as_deref() == Some("") {
        return Err(CliError::Usage(
            "--resume needs a session id here (cadre has no session picker); \
             `cadre sessions list` shows them, or use --continue for the latest"
                .into(),
        ));
    }
    if h.fork_session && h.resume.is_none() && !h.continue_session {
        return Err(CliError::Usage(
            "--fork-session goes with --resume ID or --continue".into(),
        ));
    }
    if h.resume_drops_turn.is_some() && h.resume_session_at.is_none() {
        return Err(CliError::Usage(
            "--resume-drops-turn requires --resume-session-at".into(),
        ));
    }
    if h.resume_session_at.is_some() && h.resume.is_none() && !h.continue_session {
        return Err(CliError::Usage(
            "--resume-session-at goes with --resume ID".into(),
        ));
    }
    if input == InputFormat::StreamJson && output != OutputFormat::StreamJson {
        return Err(CliError::Usage(
            "--input-format stream-json requires --output-format stream-json".into(),
        ));
    }
    if h.max_input_line_bytes.is_some() && input != InputFormat::StreamJson {
        return Err(CliError::Usage(
            "--max-input-line-bytes goes with --input-format stream-json".into(),
        ));
    }
    if h.include_partial_messages && output != OutputFormat::StreamJson {
        return Err(CliError::Usage(
            "--include-partial-messages requires --output-format stream-json".into(),
        ));
    }
    if let Some(b) = h.max_budget_usd
        && !(b.is_finite() && b > 0.0)
    {
        return Err(CliError::Usage(format!(
            "--max-budget-usd {b}: expected a positive amount of dollars"
        )));
    }
    Ok(())
}

/// `--replay-user-messages` takes no value and needs stream-json input.
fn check_replay(h: &HeadlessArgs, input: InputFormat) -> Result<(), CliError> {
    if let Some(v) = &h.replay_user_messages {
        if !v.is_empty() {
            return Err(CliError::Usage(format!(
                "--replay-user-messages takes no value, found {v:?}"
            )));
        }
        if input != InputFormat::StreamJson {
            return Err(CliError::Usage(
                "--replay-user-messages requires --input-format stream-json and --output-format stream-json"
                    .into(),
            ));
        }
    }
    Ok(())
}

/// Flags accepted and ignored, each named on stderr.
fn note_unsupported(g: &GlobalArgs, h: &HeadlessArgs) {
    let mut unsupported = Vec::new();
    if h.fallback_model.is_some() {
        unsupported.push("--fallback-model (cadre has no fallback model; ignored)");
    }
    if h.include_hook_events {
        unsupported.push("--include-hook-events (hook events are not reported; ignored)");
    }
    if !h.betas.is_empty() {
        unsupported.push("--betas (ignored)");
    }
    if h.thinking_display.is_some() {
        unsupported.push("--thinking-display (cadre sends no display choice; ignored)");
    }
    for u in unsupported {
        note(g, &format!("not supported: {u}"));
    }
}

/// `--session-mirror`, the SDKs' session store: every transcript line
/// (and sub-agent meta file) also goes to stdout as a `transcript_mirror`
/// frame, after it is on disk.
fn mirror_transcripts() {
    // The SDKs' session store: every transcript line (and sub-agent
    // meta file) also goes to stdout as a `transcript_mirror` frame,
    // after it is on disk.
    // Each line goes out as written (a line that is not JSON, which
    // cadre never writes, is left out).
    runtime::transcript::set_mirror(Box::new(|path, lines| {
        let entries = std::str::from_utf8(lines)
            .unwrap_or_default()
            .lines()
            .filter(|l| !l.is_empty())
            .filter_map(|l| serde_json::value::RawValue::from_string(l.to_string()).ok())
            .collect();
        send(&Output::TranscriptMirror(wire::TranscriptMirror {
            file_path: path.display().to_string(),
            entries,
        }));
    }));
}

/// `--system-prompt[-file]` and `--append-system-prompt[-file]`.
fn main_prompt(h: &HeadlessArgs) -> Result<runtime::MainPrompt, CliError> {
    let mut prompt = runtime::MainPrompt::default();
    let read = |flag: &str, p: &PathBuf| {
        std::fs::read_to_string(p)
            .map_err(|e| CliError::Usage(format!("{flag} {}: cannot read: {e}", p.display())))
    };
    prompt.replace = match (&h.system_prompt, &h.system_prompt_file) {
        (Some(_), Some(_)) => {
            return Err(CliError::Usage(
                "give --system-prompt or --system-prompt-file, not both".into(),
            ));
        }
        (Some(t), None) => Some(t.clone()),
        (None, Some(p)) => Some(read("--system-prompt-file", p)?),
        (None, None) => None,
    };
    let mut append = Vec::new();
    if let Some(t) = &h.append_system_prompt {
        append.push(t.clone());
    }
    if let Some(p) = &h.append_system_prompt_file {
        append.push(read("--append-system-prompt-file", p)?);
    }
    if !append.is_empty() {
        prompt.append = Some(append.join("\n\n"));
    }
    Ok(prompt)
}

/// `--mcp-config` and `--strict-mcp-config`: the servers as a settings
/// layer; the SDK client's in-process servers (`"type": "sdk"`) by name.
fn mcp_servers(
    g: &GlobalArgs,
    h: &HeadlessArgs,
    input: InputFormat,
    extras: &mut Extras,
) -> Result<Vec<String>, CliError> {
    let mut sdk_servers = Vec::new();
    let mut strict_names = Vec::new();
    if !h.mcp_config.is_empty() {
        let mut servers = Map::new();
        for c in &h.mcp_config {
            let v = json_arg("--mcp-config", c)?;
            let Some(list) = v.get("mcpServers").and_then(Value::as_object) else {
                return Err(CliError::Usage(format!(
                    "--mcp-config {c}: expected an object with `mcpServers`"
                )));
            };
            for (name, server) in list {
                if server.get("type").and_then(Value::as_str) == Some("sdk") {
                    if input != InputFormat::StreamJson {
                        note(
                            g,
                            &format!(
                                "not supported: SDK MCP server `{name}` without --input-format stream-json (no client to reach it); its tools are not offered"
                            ),
                        );
                        continue;
                    }
                    sdk_servers.push(name.clone());
                    servers.insert(name.clone(), json!({"type": "sdk"}));
                    continue;
                }
                servers.insert(name.clone(), server.clone());
            }
        }
        strict_names = servers.keys().cloned().collect();
        if !servers.is_empty() {
            extras.env.push((
                "CADRE_MCP_SERVERS".into(),
                Value::Object(servers).to_string(),
            ));
        }
    }
    if h.strict_mcp_config {
        extras.mcp_only = Some(strict_names);
    }
    Ok(sdk_servers)
}

/// `--permission-prompt-tool stdio`: questions go to the SDK client.
fn stdio_permissions(
    g: &GlobalArgs,
    h: &HeadlessArgs,
    input: InputFormat,
) -> Result<bool, CliError> {
    Ok(match h.permission_prompt_tool.as_deref() {
        None => false,
        Some("stdio") if input == InputFormat::StreamJson => true,
        Some("stdio") => {
            return Err(CliError::Usage(
                "--permission-prompt-tool stdio needs --input-format stream-json (the answers come on stdin)"
                    .into(),
            ));
        }
        Some(other) => {
            note(
                g,
                &format!(
                    "not supported: --permission-prompt-tool {other} (only `stdio`); questions are denied"
                ),
            );
            false
        }
    })
}

/// `--json-schema`, compiled.
fn structured(h: &HeadlessArgs) -> Result<Option<runtime::structured::StructuredSpec>, CliError> {
    Ok(match &h.json_schema {
        None => None,
        Some(text) => {
            let schema: Value = serde_json::from_str(text).map_err(|e| {
                CliError::Usage(format!(
                    "--json-schema:{}:{}: not JSON: {e}",
                    e.line(),
                    e.column()
                ))
            })?;
            Some(
                runtime::structured::StructuredSpec::new(schema).map_err(|e| {
                    CliError::Usage(format!("--json-schema: not a JSON Schema: {e}"))
                })?,
            )
        }
    })
}
