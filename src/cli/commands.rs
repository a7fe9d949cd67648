//! The built-in commands `chat` and headless sessions both carry out
//! (`/compact`, `/help`, `/mcp`).

use tokio_util::sync::CancellationToken;

use crate::runtime::{self, Engine, RunError, Session};

/// `/compact [instructions]` (`chat`, a stream-json session): summarise
/// the conversation now; returns what to tell the user.
pub(super) async fn compact_now(
    session: &mut Session,
    engine: &Engine,
    instructions: &str,
) -> String {
    let cancel = CancellationToken::new();
    session.set_cancel(cancel.clone());
    let snap = engine.snapshot.load_full();
    let instructions = (!instructions.is_empty()).then_some(instructions);
    let before = session.history().len();
    let result = tokio::select! {
        r = session.compact(&snap, runtime::CompactTrigger::Manual, instructions) => r,
        _ = tokio::signal::ctrl_c() => { cancel.cancel(); Err(RunError::Cancelled) }
    };
    match result {
        Ok(true) => format!("compacted: {before} messages → {}", session.history().len()),
        Ok(false) => "nothing to compact yet".to_string(),
        Err(e) => format!("compaction failed, conversation unchanged: {e}"),
    }
}

/// `/help` (and `/mcp`): the built-in commands, the skills and commands
/// (`/name`), and the MCP prompts of the ready servers; `/mcp` lists only
/// the MCP prompts. One table for `chat` and headless sessions.
pub(super) async fn help_text(engine: &Engine, which: &str, chat: bool) -> String {
    let prompts = crate::mcp::prompt_commands(&engine.mcp).await;
    let mut text = String::new();
    if which != "mcp" {
        text.push_str("Built-in commands:");
        let chat_only = if chat {
            runtime::commands::CHAT_BUILTINS
        } else {
            &[]
        };
        let mut builtins: Vec<_> = runtime::commands::BUILTINS
            .iter()
            .chain(chat_only)
            .collect();
        builtins.sort_by_key(|(name, _, _)| *name);
        for (name, hint, what) in builtins {
            let usage = format!("/{name} {hint}");
            text.push_str(&format!("\n  {:28}  {what}", usage.trim_end()));
        }
        let snap = engine.snapshot.load();
        text.push_str("\nCommands and skills (docs/commands.md):");
        if snap.skills.skills.is_empty() {
            text.push_str("\n  none: add .claude/commands/NAME.md or .claude/skills/NAME/SKILL.md");
        }
        // A `user-invocable: false` skill cannot be typed: not listed.
        for s in snap.skills.skills.values().filter(|s| s.user_invocable) {
            let usage = format!("/{} {}", s.name, s.argument_hint.as_deref().unwrap_or(""));
            let desc = super::output::first_line(&s.description, 70);
            text.push_str(&format!(
                "\n  {:28}  {desc} ({} {}{})",
                usage.trim_end(),
                s.source,
                s.kind,
                if s.model_invocable { "" } else { ", user only" }
            ));
        }
        text.push('\n');
    }
    text.push_str("MCP prompts:");
    if prompts.is_empty() {
        text.push_str("\n  none: no ready server offers prompts");
    }
    for c in prompts {
        text.push_str(&format!("\n  {:28}  {}", c.usage(), c.description));
    }
    text
}
