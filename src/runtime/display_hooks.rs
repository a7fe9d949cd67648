//! MessageDisplay for text a front end prints as it streams (`chat`), as
//! Claude Code fires it in its terminal: while an assistant message of the
//! main session streams, once per batch of newly completed lines (`index`
//! 0, 1, …), and once more when the message ends (`final`: the rest of
//! its last line, empty when it ended with a newline). A hook's
//! `displayContent` is printed instead of that batch; the conversation,
//! the transcript and what the model is sent keep the model's words.
//!
//! A session whose front end fires these ([`Session::stream_display`])
//! does not fire MessageDisplay itself when the message is finished (the
//! way `run` and the stream-json output rewrite a whole message).

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::json;

use crate::config::HookEvent;

use super::Engine;
use super::Session;
use super::elicit_hooks::{MainPlace, fire};
use super::hooks::client_wants;

/// Fires MessageDisplay as the main session's, for a front end.
#[derive(Clone)]
pub struct DisplayHooks {
    here: MainPlace,
}

/// One batch of a streaming message's text.
pub struct Flush<'a> {
    /// The message's id (a UUID, the same for each of its batches).
    pub message_id: &'a str,
    /// Which batch of the message this is, from 0.
    pub index: u32,
    /// The message's last batch.
    pub last: bool,
    /// Whole lines, except in the last batch.
    pub delta: &'a str,
}

impl DisplayHooks {
    /// Whether a MessageDisplay hook listens now (a reload may add or
    /// remove one between messages).
    pub fn listening(&self) -> bool {
        let Some(engine) = self.here.0.upgrade() else {
            return false;
        };
        let snap = engine.snapshot.load();
        snap.hooks
            .0
            .iter()
            .any(|h| h.event == HookEvent::MessageDisplay)
            || client_wants(&engine, HookEvent::MessageDisplay.as_str())
    }

    /// Fires MessageDisplay for one batch: the text to print instead of
    /// it, when a hook answered `displayContent` (the last answer wins).
    pub async fn flush(&self, batch: &Flush<'_>) -> Option<String> {
        let turn_id = self
            .here
            .0
            .upgrade()
            .and_then(|e| e.prompt_id())
            .unwrap_or_default();
        let fields = json!({
            "turn_id": turn_id,
            "message_id": batch.message_id,
            "index": batch.index,
            "final": batch.last,
            "delta": batch.delta,
        });
        fire(&self.here, HookEvent::MessageDisplay, "", fields)
            .await?
            .display
    }
}

impl Session {
    /// From now on the front end fires this session's MessageDisplay
    /// hooks as it prints the streamed text, with the handle returned;
    /// the session no longer fires them for finished messages.
    pub fn stream_display(&mut self) -> DisplayHooks {
        self.display_streamed = true;
        let engine: &Arc<Engine> = &self.engine;
        let cwd: PathBuf = self.spec.cwd.clone();
        DisplayHooks {
            here: (Arc::downgrade(engine), cwd, Arc::clone(&self.transcript)),
        }
    }
}
