//! `cadre watch [--json]`: watch the files, reload on change, and print one
//! line per reload attempt until interrupted (Ctrl-C or SIGTERM, exit 0).
//!
//! The first line says watching has started (`{"event":"ready",...}`);
//! each later line is a reload event as documented in `docs/reload.md`.

use clap::Args;
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use super::output::{SessionArg, print_line};
use super::{CliError, GlobalArgs, Overrides, load_snapshot};
use crate::reload::{ReloadEvent, Watcher};

#[derive(Debug, Args)]
pub struct WatchArgs {
    /// Print JSON lines (documented in docs/reload.md).
    #[arg(long)]
    json: bool,
    /// The session kind flags are evaluated for (`effective` in `flags_changed`).
    #[arg(long, value_enum, default_value = "non-interactive")]
    session: SessionArg,
}

/// A reload event as one JSON object, `"event":"reload"` first.
pub fn event_json(e: &ReloadEvent) -> Value {
    let mut m = Map::new();
    m.insert("event".into(), json!("reload"));
    if let Ok(Value::Object(o)) = serde_json::to_value(e) {
        m.extend(o);
    }
    Value::Object(m)
}

pub async fn watch(g: &GlobalArgs, args: WatchArgs) -> Result<(), CliError> {
    let (input, swap) = load_snapshot(g, &Overrides::default())?;
    let interactive = args.session.interactive();
    let watcher = Watcher::start(input, swap.clone(), interactive)
        .map_err(|e| CliError::Failed(e.to_string()))?;
    let snap = swap.load_full();
    let watching = watcher.watching();
    if args.json {
        let dirs: Vec<Value> = watching
            .iter()
            .map(|(p, recursive)| json!({"path": p, "recursive": recursive}))
            .collect();
        let ready = json!({
            "event": "ready",
            "generation": snap.generation,
            "debounce_ms": snap.settings().reload.debounce_ms,
            "config": snap.config.path,
            "watching": dirs,
            "diagnostics": snap.diagnostics,
        });
        print_line(&ready.to_string());
    } else {
        print_line(&format!(
            "watching {} folder(s), generation {}, debounce {} ms; Ctrl-C to stop",
            watching.len(),
            snap.generation,
            snap.settings().reload.debounce_ms
        ));
    }
    drop(snap);

    let cancel = CancellationToken::new();
    let stop = cancel.clone();
    tokio::spawn(async move {
        terminated().await;
        stop.cancel();
    });
    let json = args.json;
    watcher
        .run(cancel, move |e| {
            if json {
                print_line(&event_json(e).to_string());
            } else {
                print_line(&e.to_string());
            }
        })
        .await;
    Ok(())
}

/// Resolves on Ctrl-C or SIGTERM.
async fn terminated() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}
