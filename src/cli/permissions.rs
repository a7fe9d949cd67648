//! `cadre permissions check`: what the permission rules and mode decide for
//! one tool call, without running anything, so a team can test its rules.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use serde_json::{Value, json};

use super::output::print_json;
use super::{CliError, GlobalArgs, Overrides, load_snapshot, working_dir};
use crate::config::PermissionMode;
use crate::permissions::{self, Decision, Rules};
use crate::tools::sandbox;

#[derive(Debug, Subcommand)]
pub enum PermissionsCommand {
    /// Decide one tool call: allow, ask or deny, what decided, and for Bash
    /// the simple commands the shell would run.
    Check(CheckArgs),
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The tool: Bash, Read, Write, Edit, Glob, Grep, an MCP tool name, ...
    tool: String,
    /// The call's input: a JSON object, or for Bash the command itself and
    /// for path tools the path.
    input: String,
    /// Decide in the permission mode this agent runs in as the main agent
    /// (`cadre run --agent NAME`).
    #[arg(long, value_name = "NAME")]
    agent: Option<String>,
    /// Decide in this permission mode (wins over --agent's).
    #[arg(long, value_name = "MODE")]
    permission_mode: Option<PermissionMode>,
    /// A folder besides the working directory where edits need no rule;
    /// repeatable.
    #[arg(long = "add-dir", value_name = "DIR")]
    add_dirs: Vec<PathBuf>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

pub fn dispatch(g: &GlobalArgs, cmd: PermissionsCommand) -> Result<(), CliError> {
    let PermissionsCommand::Check(args) = cmd;
    let (input, swap) = load_snapshot(
        g,
        &Overrides {
            model: None,
            permission_mode: args.permission_mode,
            ..Overrides::default()
        },
    )?;
    let snap = swap.load_full();
    let settings = snap.settings();
    let cwd = working_dir(g)?;
    let mode = match &args.agent {
        Some(name) => {
            let kind = snap.session_kind(false);
            let def = snap
                .visible_agent(name, kind)
                .ok_or_else(|| CliError::Usage(format!("--agent {name}: no such agent")))?;
            match def.permission_mode {
                Some(m) if args.permission_mode.is_none() => m,
                _ => settings.permissions.default_mode,
            }
        }
        None => settings.permissions.default_mode,
    };
    let call = call_input(&args.tool, &args.input)?;
    // Parsed once with the snapshot; a malformed rule was reported with
    // its position when it was loaded.
    let rules: &Rules = &snap.rules;
    let add_dirs: Vec<PathBuf> = settings
        .permissions
        .additional_directories
        .iter()
        .chain(&args.add_dirs)
        .map(|d| cwd.join(d))
        .collect();
    let explained = permissions::explain(rules, mode, &args.tool, &call, &cwd, &add_dirs);
    let (commands, uncertain) = match call.get("command").and_then(Value::as_str) {
        Some(c) if args.tool == "Bash" => permissions::bash_commands(c),
        _ => (Vec::new(), Vec::new()),
    };
    let sandbox = (args.tool == "Bash").then(|| {
        let command = call.get("command").and_then(Value::as_str).unwrap_or("");
        sandbox_use(&settings.sandbox, command)
    });
    // A sandboxed command that only the mode would have asked about runs
    // without asking (autoAllowBashIfSandboxed), as `cadre run` does it.
    let auto_allowed = matches!(
        (&explained.decision, &sandbox),
        (
            Decision::Ask {
                reason: permissions::Reason::Mode(_)
            },
            Some((sandbox::Use::Sandboxed, _))
        )
    ) && settings.sandbox.auto_allow_bash_if_sandboxed;
    let decision = match &explained.decision {
        _ if auto_allowed => "allow",
        Decision::Allow => "allow",
        Decision::Ask { .. } => "ask",
        Decision::Deny { .. } => "deny",
    };
    let by = if auto_allowed {
        format!(
            "sandboxed, so it runs without asking (sandbox.autoAllowBashIfSandboxed); without the sandbox: {}",
            explained.by.words(&snap.templates)
        )
    } else {
        explained.by.words(&snap.templates)
    };
    let sandbox_words = sandbox.as_ref().map(|(_, words)| words.clone());
    let uncertain: Vec<String> = uncertain.iter().map(|u| u.words(&snap.templates)).collect();
    drop(input);
    if args.json {
        return print_json(&json!({
            "tool": args.tool,
            "input": call,
            "mode": mode.as_str(),
            "decision": decision,
            "by": by,
            "rule": explained.rule.as_ref().map(|c| json!({"rule": c.rule, "origin": c.origin})),
            "commands": commands,
            "uncertain": uncertain,
            "sandbox": sandbox_words,
        }));
    }
    outln!("{decision}: {by}");
    if let Some(c) = &explained.rule {
        outln!(
            "rule: {} (written in {})",
            c.rule,
            c.origin.as_deref().unwrap_or("origin unknown")
        );
    }
    outln!("mode: {}", mode.as_str());
    if let Some(words) = &sandbox_words {
        outln!("sandbox: {words}");
    }
    if args.tool == "Bash" {
        outln!("commands:");
        for c in &commands {
            outln!("  {c}");
        }
        if !uncertain.is_empty() {
            outln!("uncertain:");
            for u in &uncertain {
                outln!("  {u}");
            }
        }
    }
    Ok(())
}

/// How a Bash command would run with the sandbox settings, and why, in
/// words.
fn sandbox_use(settings: &crate::config::SandboxSettings, command: &str) -> (sandbox::Use, String) {
    let u = sandbox::classify(settings, command, false);
    let words = match &u {
        sandbox::Use::Off => "off (sandbox.enabled is not set): runs unsandboxed".to_string(),
        sandbox::Use::Excluded(entry) => format!(
            "excluded (sandbox.excludedCommands '{entry}'): runs unsandboxed, through the permission rules"
        ),
        sandbox::Use::Unsandboxed => "asked to run outside (dangerouslyDisableSandbox, sandbox.allowUnsandboxedCommands): runs unsandboxed, through the permission rules".to_string(),
        sandbox::Use::Unavailable { refused } => format!(
            "unavailable on this machine ({}): {}",
            sandbox::support().problems.join("; "),
            if *refused {
                "refused (sandbox.failIfUnavailable)"
            } else {
                "runs unsandboxed"
            }
        ),
        sandbox::Use::Sandboxed => {
            format!("sandboxed ({})", sandbox::support().mechanism())
        }
    };
    (u, words)
}

/// The call's input: a JSON object as given, else the text as the tool's
/// main field.
fn call_input(tool: &str, text: &str) -> Result<Value, CliError> {
    if let Ok(v @ Value::Object(_)) = serde_json::from_str::<Value>(text) {
        return Ok(v);
    }
    let key = match tool {
        "Bash" => "command",
        "Read" | "Write" | "Edit" => "file_path",
        "Glob" | "Grep" => "path",
        "NotebookEdit" => "notebook_path",
        _ => {
            return Err(CliError::Usage(format!(
                "INPUT for {tool} must be a JSON object, e.g. '{{\"key\": \"value\"}}'"
            )));
        }
    };
    Ok(json!({ key: text }))
}
