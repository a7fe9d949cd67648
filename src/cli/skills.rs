//! `cadre skills list|show` (also `cadre commands list|show`): skills and
//! slash commands are one list, as in Claude Code, so one command shows
//! both, with their kind.

use clap::{Args, Subcommand};
use serde_json::{Value, json};

use super::output::print_json;
use super::{CliError, GlobalArgs, Overrides, load_snapshot};
use crate::catalog::Skill;
use crate::diagnostic::Diagnostic;

#[derive(Debug, Subcommand)]
pub enum SkillsCommand {
    /// Every skill, one per name, with the problems found in skill files.
    List(ListArgs),
    /// One skill in full: its fields, base folder and instructions.
    Show(ShowArgs),
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// Print JSON (documented in docs/skills.md).
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    name: String,
    #[arg(long)]
    json: bool,
}

pub fn dispatch(g: &GlobalArgs, cmd: SkillsCommand) -> Result<(), CliError> {
    let (_, swap) = load_snapshot(g, &Overrides::default())?;
    let snap = swap.load_full();
    let skills = &snap.skills;
    match cmd {
        SkillsCommand::List(a) => {
            if a.json {
                let list: Vec<Value> = skills
                    .skills
                    .values()
                    .map(|s| skill_json(s, false))
                    .collect();
                return print_json(&json!({"skills": list, "diagnostics": skills.diagnostics}));
            }
            for d in &skills.diagnostics {
                eprintln_diag(d);
            }
            if skills.skills.is_empty() {
                outln!(
                    "No skills or commands. Put SKILL.md folders in .claude/skills/ or commands in .claude/commands/ (docs/skills.md, docs/commands.md)."
                );
                return Ok(());
            }
            let w = skills
                .skills
                .keys()
                .map(|k| k.chars().count())
                .max()
                .unwrap_or(4)
                .max(4);
            outln!("{:w$}  {:7}  {:7}  DESCRIPTION", "NAME", "KIND", "SOURCE");
            for s in skills.skills.values() {
                let desc = super::output::first_line(&s.description, 70);
                let user_only = match (s.model_invocable, s.user_invocable) {
                    (false, _) => " [user only]",
                    (true, false) => " [model only]",
                    (true, true) => "",
                };
                outln!(
                    "{:w$}  {:7}  {:7}  {desc}{user_only}",
                    s.name,
                    s.kind.to_string(),
                    s.source.to_string()
                );
            }
            Ok(())
        }
        SkillsCommand::Show(a) => {
            let s = skills.get(&a.name).ok_or_else(|| {
                let names: Vec<&str> = skills.skills.keys().map(String::as_str).collect();
                CliError::Usage(format!(
                    "no skill or command named `{}`. Skills and commands: {}",
                    a.name,
                    if names.is_empty() {
                        "none".to_string()
                    } else {
                        names.join(", ")
                    }
                ))
            })?;
            if a.json {
                return print_json(&skill_json(s, true));
            }
            outln!("name:          {}", s.name);
            outln!("kind:          {}", s.kind);
            outln!("source:        {} ({})", s.source, s.path.display());
            outln!("description:   {}", s.description);
            if let Some(h) = &s.argument_hint {
                outln!("usage:         /{} {h}", s.name);
            }
            outln!(
                "model may use: {}",
                if s.model_invocable {
                    "yes (Skill tool)"
                } else {
                    "no (disable-model-invocation)"
                }
            );
            outln!(
                "user may type: {}",
                if s.user_invocable {
                    "yes"
                } else {
                    "no (user-invocable: false)"
                }
            );
            if !s.shell_allowed {
                outln!("shell lines:   not run (the folder is not trusted)");
            }
            if let Some(t) = &s.allowed_tools {
                outln!("allowed-tools: {}", t.join(", "));
            }
            if let Some(m) = &s.model {
                outln!("model:         {m}");
            }
            outln!("base folder:   {}", s.dir.display());
            outln!("\n{}", s.body);
            Ok(())
        }
    }
}

fn eprintln_diag(d: &Diagnostic) {
    eprintln!("{d}");
}

/// The JSON shape of one skill (docs/skills.md).
fn skill_json(s: &Skill, body: bool) -> Value {
    let mut v = json!({
        "name": s.name,
        "description": s.description,
        "source": s.source,
        "path": s.path,
        "dir": s.dir,
        "allowed_tools": s.allowed_tools,
        "model": s.model,
        "kind": s.kind,
        "argument_hint": s.argument_hint,
        "model_invocable": s.model_invocable,
        "user_invocable": s.user_invocable,
        "when_to_use": s.when_to_use,
        "shell_allowed": s.shell_allowed,
    });
    if body && let Value::Object(m) = &mut v {
        m.insert("body".into(), json!(s.body));
    }
    v
}
