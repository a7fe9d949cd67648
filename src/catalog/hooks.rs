//! An agent file's frontmatter `hooks`, resolved once when the file is
//! read: Claude Code's shape `{Event: [{matcher?, hooks: [{type: command,
//! command, timeout? (seconds)}]}]}` or the flat `{Event: [{matcher?,
//! command, timeout_ms?}]}`; a single object stands for a list of one.
//! Each bad entry is dropped with a diagnostic at its position (a matcher
//! that is not a valid regular expression is an error: that hook would
//! never fire); the rest of the agent's hooks stay.

use crate::config::{DEFAULT_HOOK_TIMEOUT_MS, Hook, HookEvent, Hooks, Matcher};
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
                    "hooks.{}: unknown event; cadre fires SubagentStart, SubagentStop (Stop), PreToolUse, PostToolUse and PreCompact; ignored",
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

fn scalar_u64(v: &Node) -> Option<u64> {
    match &v.kind {
        Kind::Int(i) => u64::try_from(*i).ok(),
        Kind::Float(f) if *f >= 0.0 && f.is_finite() => Some(*f as u64),
        Kind::Str(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// One `{type?, command, timeout?, timeout_ms?}` mapping.
fn command_hook(
    v: &Node,
    event: HookEvent,
    matcher: &Matcher,
    at: &str,
    ctx: &mut Ctx<'_>,
) -> Option<Hook> {
    if !matches!(v.kind, Kind::Map(_)) {
        ctx.warn(
            v.pos,
            format!(
                "{at}: expected a hook mapping, found {}; ignored",
                v.type_name()
            ),
        );
        return None;
    }
    if let Some(kind) = v.get("type")
        && let Some(k) = kind.as_str()
        && k != "command"
    {
        ctx.warn(
            kind.pos,
            format!("{at}: hook type {k:?} is not supported; only `command` hooks run; ignored"),
        );
        return None;
    }
    let Some(command) = v
        .get("command")
        .and_then(scalar_string)
        .filter(|c| !c.is_empty())
    else {
        ctx.warn(v.pos, format!("{at}: a hook needs a `command`; ignored"));
        return None;
    };
    let timeout_ms = v
        .get("timeout_ms")
        .and_then(scalar_u64)
        .or_else(|| {
            v.get("timeout")
                .and_then(scalar_u64)
                .map(|s| s.saturating_mul(1000))
        })
        .unwrap_or(DEFAULT_HOOK_TIMEOUT_MS);
    Some(Hook {
        event,
        matcher: matcher.clone(),
        command,
        timeout_ms,
    })
}
