//! The main agent's streamed text in `chat`, through the MessageDisplay
//! hooks on its way to the screen (docs/hooks.md): while a message
//! streams, each batch of newly completed lines is shown as a hook
//! rewrote it, and the rest of its last line when it ends. Without a
//! hook the text is printed piece by piece as it arrives.

use std::sync::Mutex;

use crate::runtime::display_hooks::{DisplayHooks, Flush};

/// The message being shown, while it streams.
struct Open {
    /// `None` when no hook listened as it began: its pieces go straight
    /// to the screen.
    hooks: Option<DisplayHooks>,
    id: String,
    /// Batches fired so far.
    index: u32,
    /// The text of its last line, not yet complete.
    pending: String,
}

/// What chat shows of the main agent's text.
#[derive(Default)]
pub struct Display {
    hooks: Mutex<Option<DisplayHooks>>,
    open: Mutex<Option<Open>>,
}

impl Display {
    /// The session whose hooks are fired from now on (a new one after
    /// `/clear` or `/resume`).
    pub fn fire_with(&self, hooks: DisplayHooks) {
        *self.hooks.lock().unwrap_or_else(|p| p.into_inner()) = Some(hooks);
    }

    /// A piece of the streamed text: what to show of it now.
    pub fn piece(&self, text: &str) -> String {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        let message = open.get_or_insert_with(|| Open {
            hooks: self
                .hooks
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone()
                .filter(DisplayHooks::listening),
            id: crate::runtime::transcript::new_uuid(),
            index: 0,
            pending: String::new(),
        });
        let Some(hooks) = message.hooks.clone() else {
            return text.to_string();
        };
        message.pending.push_str(text);
        let Some(end) = message.pending.rfind('\n') else {
            return String::new();
        };
        let rest = message.pending.split_off(end + 1);
        let lines = std::mem::replace(&mut message.pending, rest);
        let (id, index) = (message.id.clone(), message.index);
        message.index += 1;
        // The hooks may report what they did through the event sink: the
        // lock is not held while they run.
        drop(open);
        shown(&hooks, &id, index, false, lines)
    }

    /// The message ended (or its turn was cut): what is left to show of
    /// it, after the last batch went through the hooks.
    pub fn end(&self) -> String {
        let Some(message) = self.open.lock().unwrap_or_else(|p| p.into_inner()).take() else {
            return String::new();
        };
        match message.hooks {
            Some(hooks) => shown(&hooks, &message.id, message.index, true, message.pending),
            None => String::new(),
        }
    }
}

/// `delta` as the hooks would have it shown. The stream waits for them, as
/// Claude Code's does.
fn shown(hooks: &DisplayHooks, id: &str, index: u32, last: bool, delta: String) -> String {
    let batch = Flush {
        message_id: id,
        index,
        last,
        delta: &delta,
    };
    let rewritten = tokio::task::block_in_place(|| {
        tokio::runtime::Handle::current().block_on(hooks.flush(&batch))
    });
    rewritten.unwrap_or(delta)
}
