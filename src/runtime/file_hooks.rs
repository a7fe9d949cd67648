//! The FileChanged hook event, as Claude Code fires it: the files named by
//! the FileChanged hooks' matchers (`.envrc|.env`: each name, relative to
//! the project's folder) are watched, and so are the paths that
//! SessionStart, CwdChanged and FileChanged hooks answer in
//! `hookSpecificOutput.watchPaths`. When one of them is added, changed or
//! removed, FileChanged fires as the main session's (its id, working
//! directory and transcript; `file_path`, `event`: `add`, `change` or
//! `unlink`); the matcher is tested against the file's name. At most
//! [`MAX_HOOK_WATCHED`] paths are watched, and only in a trusted folder.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::json;
use tokio::sync::mpsc;

use crate::config::HookEvent;
use crate::reload::{MAX_HOOK_WATCHED, PathWatcher};

use super::Engine;
use super::elicit_hooks::{MainPlace, fire};
use super::hooks::client_wants;
use super::transcript::Transcript;

/// Starts watching for the FileChanged hooks of `engine`'s snapshot, when
/// there are any and the folder is trusted; the watcher stops when the
/// engine is dropped.
pub fn spawn(engine: &Arc<Engine>, cwd: PathBuf, transcript: Arc<Transcript>) {
    let snap = engine.snapshot.load_full();
    let hooks: Vec<_> = snap
        .hooks
        .0
        .iter()
        .filter(|h| h.event == HookEvent::FileChanged)
        .collect();
    if !snap.config.trusted
        || (hooks.is_empty() && !client_wants(engine, HookEvent::FileChanged.as_str()))
    {
        return;
    }
    let named: Vec<PathBuf> = hooks
        .iter()
        .filter_map(|h| h.config.matcher.as_deref())
        .flat_map(|m| m.split('|'))
        .map(str::trim)
        .filter(|name| !name.is_empty() && *name != "*")
        .map(|name| cwd.join(name))
        .take(MAX_HOOK_WATCHED)
        .collect();
    let (more_tx, mut more) = mpsc::unbounded_channel::<Vec<PathBuf>>();
    if let Ok(mut slot) = engine.watch_more.lock() {
        *slot = Some(more_tx);
    }
    let here: MainPlace = (Arc::downgrade(engine), cwd, transcript);
    tokio::spawn(async move {
        let (tx, mut changes) = mpsc::unbounded_channel();
        let mut watcher = match PathWatcher::start(tx) {
            Ok(w) => w,
            Err(e) => {
                tracing::warn!("FileChanged hooks will not fire: {e}");
                return;
            }
        };
        watcher.add(named);
        loop {
            tokio::select! {
                change = changes.recv() => {
                    let Some((path, event)) = change else { return };
                    let name = path
                        .file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_default();
                    let fields = json!({"file_path": path, "event": event});
                    if let Some(fired) = fire(&here, HookEvent::FileChanged, &name, fields).await {
                        watcher.add(fired.watch_paths.iter().map(|p| here.1.join(p)));
                    }
                }
                // The engine (and its sender) is gone: the session ended.
                paths = more.recv() => match paths {
                    Some(paths) => watcher.add(paths),
                    None => return,
                },
            }
        }
    });
}
