//! An agent file's frontmatter `hooks`, resolved once when the file is
//! read: Claude Code's shape `{Event: [{matcher?, hooks: [{type: command,
//! command, args?, timeout? (seconds), async?}]}]}` or the flat `{Event:
//! [{matcher?, command, args?, timeout_ms?, async?}]}`; a single object
//! stands for a list of one. Each entry is read as settings read theirs
//! (`config::read_hook_entry`); each bad entry is dropped with a diagnostic
//! at its position (a matcher that is not a valid regular expression is an
//! error: that hook would never fire); the rest of the agent's hooks stay.

use crate::config::{
    Hook, HookEntry, HookEvent, Hooks, Matcher, hook_group_problems, read_hook_entry,
};
use crate::raw::{Kind, Node};

use super::resolve::Ctx;

/// Resolves a `hooks` value that is a mapping of event names.
pub(super) fn frontmatter_hooks(v: &Node, ctx: &mut Ctx<'_>) -> Hooks {
    let mut out = Vec::new();
    for (key, entries) in v.entries() {
        let Some(event) = HookEvent::from_frontmatter(&key.name) else {
            ctx.warn(
                key.pos,
                format!(
                    "hooks.{}: unknown event; cadre fires SubagentStart, SubagentStop (Stop), PreToolUse, PostToolUse, PostToolUseFailure and PreCompact; ignored",
                    key.name
                ),
            );
            continue;
        };
        let at = format!("hooks.{}", key.name);
        for entry in as_list(entries) {
            if !matches!(entry.kind, Kind::Map(_)) {
                ctx.warn(
                    entry.pos,
                    format!(
                        "{at}: expected a mapping, found {}; ignored",
                        entry.type_name()
                    ),
                );
                continue;
            }
            // The flat form's entry is checked as an entry, below.
            let problems = if entry.get("hooks").is_some() {
                hook_group_problems(entry)
            } else {
                Vec::new()
            };
            if !problems.is_empty() {
                for (pos, why) in problems {
                    ctx.warn(
                        pos,
                        format!("{at}: {why}; the hooks of this group are not run"),
                    );
                }
                continue;
            }
            let matcher_node = entry.get("matcher");
            let matcher_text = matcher_node.and_then(scalar_string);
            let matcher = match Matcher::new(matcher_text.as_deref()) {
                Ok(m) => m,
                Err(why) => {
                    let pos = matcher_node.map_or(entry.pos, |m| m.pos);
                    ctx.error(pos, format!("{at}: {why}; this hook never fires"));
                    continue;
                }
            };
            let commands = match entry.get("hooks") {
                Some(inner) => as_list(inner),
                None => vec![entry],
            };
            for h in commands {
                if let Some(hook) = command_hook(h, event, &matcher, &at, ctx) {
                    out.push(hook);
                }
            }
        }
    }
    Hooks(out)
}

fn as_list(v: &Node) -> Vec<&Node> {
    match &v.kind {
        Kind::Seq(items) => items.iter().collect(),
        Kind::Null => Vec::new(),
        _ => vec![v],
    }
}

fn scalar_string(v: &Node) -> Option<String> {
    match &v.kind {
        Kind::Str(s) => Some(s.trim().to_string()),
        Kind::Int(_) | Kind::Float(_) => v.scalar_text(),
        _ => None,
    }
}

/// One hook entry, read strictly ([`read_hook_entry`]): one with a problem
/// is reported at its position and left out, never run in part.
fn command_hook(
    v: &Node,
    event: HookEvent,
    matcher: &Matcher,
    at: &str,
    ctx: &mut Ctx<'_>,
) -> Option<Hook> {
    match read_hook_entry(v, true) {
        Ok(HookEntry::Hook(mut config)) => {
            config.matcher = matcher.text().map(str::to_string);
            Some(Hook {
                event,
                matcher: matcher.clone(),
                config: *config,
            })
        }
        Ok(HookEntry::OtherType { kind, pos }) => {
            ctx.warn(
                pos,
                format!("{at}: {}", crate::config::hook_other_type_note(&kind)),
            );
            None
        }
        Err(problems) => {
            for (pos, why) in problems {
                ctx.warn(pos, format!("{at}: {why}; this hook is not run"));
            }
            None
        }
    }
}
