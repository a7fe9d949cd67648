//! The `Elicitation` and `ElicitationResult` hook events: an MCP server
//! asks the user for input during one of its calls. The MCP layer asks
//! the [`ElicitHooks`] made here before anyone (an Elicitation hook may
//! answer for the user: accept with values, decline or cancel) and after
//! the answer (an ElicitationResult hook may change it), as Claude Code
//! does. Servers are shared by every session of the process, so these
//! hooks fire as the main session's: its id, `main`, its working
//! directory, transcript and permission mode. Matcher: the server's name.

use std::path::PathBuf;
use std::sync::{Arc, Weak};

use serde_json::{Map, Value, json};

use crate::mcp::{ElicitAction, ElicitAnswer, ElicitHooks, Elicitation};

use super::Engine;
use super::exec::{SideCall, hook_model};
use super::hooks::{ElicitReply, Fired, HookEvent, HookPlace, applicable, client_wants, fire_all};
use super::transcript::Transcript;

/// The hooks around every elicitation of the process's MCP servers.
pub fn elicit_hooks(
    engine: Weak<Engine>,
    cwd: PathBuf,
    transcript: Arc<Transcript>,
) -> ElicitHooks {
    let here = Arc::new((engine, cwd, transcript));
    let before = {
        let here = Arc::clone(&here);
        Arc::new(move |ask: Elicitation| {
            let here = Arc::clone(&here);
            Box::pin(async move {
                let fields = json!({
                    "mcp_server_name": ask.server,
                    "message": ask.message,
                    "mode": ask.mode,
                    "url": ask.url,
                    "elicitation_id": ask.elicitation_id,
                    "requested_schema": ask.requested_schema,
                });
                let fired = fire(&here, HookEvent::Elicitation, &ask.server, fields).await?;
                if !fired.blocks.is_empty() {
                    tracing::warn!(
                        "an Elicitation hook declined MCP server `{}`'s request for input: {}",
                        ask.server,
                        fired.blocks.join("; ")
                    );
                    return Some(ElicitAnswer::declined());
                }
                fired.elicit.map(|reply| answer(reply, None))
            }) as futures_util::future::BoxFuture<'static, Option<ElicitAnswer>>
        })
    };
    let after = Arc::new(move |ask: Elicitation, given: ElicitAnswer| {
        let here = Arc::clone(&here);
        Box::pin(async move {
            let fields = json!({
                "mcp_server_name": ask.server,
                "elicitation_id": ask.elicitation_id,
                "mode": ask.mode,
                "action": action_name(given.action),
                "content": given.content,
            });
            let Some(fired) = fire(&here, HookEvent::ElicitationResult, &ask.server, fields).await
            else {
                return given;
            };
            if !fired.blocks.is_empty() {
                tracing::warn!(
                    "an ElicitationResult hook declined the answer to MCP server `{}`: {}",
                    ask.server,
                    fired.blocks.join("; ")
                );
                return ElicitAnswer::declined();
            }
            match fired.elicit {
                Some(reply) => answer(reply, given.content),
                None => given,
            }
        }) as futures_util::future::BoxFuture<'static, ElicitAnswer>
    });
    ElicitHooks { before, after }
}

/// The main session as hooks fired outside its turns see it: its engine
/// (gone once the session ended), working directory and transcript.
pub(super) type MainPlace = (Weak<Engine>, PathBuf, Arc<Transcript>);

/// Fires `event` as the main session's, matching `target`; `None` when
/// nothing listens (or the session has ended). Also FileChanged's way.
pub(super) async fn fire(
    here: &MainPlace,
    event: HookEvent,
    target: &str,
    fields: Value,
) -> Option<Fired> {
    let (engine, cwd, transcript) = here;
    let engine = engine.upgrade()?;
    let snap = engine.snapshot.load_full();
    let hooks = applicable(&snap.hooks, None, event, target);
    if hooks.is_empty() && !client_wants(&engine, event.as_str()) {
        return None;
    }
    let mode = *engine
        .main_mode
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut input = Map::new();
    input.insert("hook_event_name".into(), json!(event.as_str()));
    input.insert("session_id".into(), json!(engine.session_id));
    input.insert("agent_id".into(), json!("main"));
    input.insert("agent_type".into(), json!("main"));
    input.insert("cwd".into(), json!(cwd));
    input.insert("transcript_path".into(), json!(transcript.path()));
    input.insert("permission_mode".into(), json!(mode.as_str()));
    if let Value::Object(extra) = fields {
        input.extend(extra);
    }
    let mut place = HookPlace::new(&snap, cwd);
    place.model = Some(hook_model(SideCall::new(
        Arc::clone(&engine),
        "main",
        Arc::clone(transcript),
        "hook",
    )));
    let fired = fire_all(
        &engine,
        &hooks,
        event,
        (event.as_str(), target),
        &Value::Object(input),
        &place,
    )
    .await;
    fired.tell_user(event.as_str());
    Some(fired)
}

/// A hook's reply as the answer to the server; a reply without values
/// keeps `fallback`'s (an ElicitationResult hook that only changes the
/// action keeps the user's values).
fn answer(reply: ElicitReply, fallback: Option<Map<String, Value>>) -> ElicitAnswer {
    let action = match reply.action.as_str() {
        "accept" => ElicitAction::Accept,
        "cancel" => ElicitAction::Cancel,
        _ => ElicitAction::Decline,
    };
    let content = match reply.content {
        Some(Value::Object(m)) => Some(m),
        _ => fallback,
    };
    ElicitAnswer {
        action,
        content: (action == ElicitAction::Accept)
            .then_some(content)
            .flatten(),
    }
}

fn action_name(action: ElicitAction) -> &'static str {
    match action {
        ElicitAction::Accept => "accept",
        ElicitAction::Decline => "decline",
        ElicitAction::Cancel => "cancel",
    }
}
