//! Signals that end a session: SIGINT (Ctrl-C) and SIGTERM (`kill`, a
//! service manager, a container stop) are handled alike, so that running
//! tasks, their Bash process groups and MCP servers are stopped and every
//! meta file and transcript gets its final status before the process
//! exits. SIGHUP is not one of them: it forces a reload (see `reload`).

use tokio::signal::unix::{SignalKind, signal};

/// Waits for SIGINT or SIGTERM and returns its name. If a handler cannot
/// be installed, that signal is simply not waited for.
pub async fn interrupted() -> &'static str {
    let mut term = signal(SignalKind::terminate()).ok();
    let sigterm = async {
        match term.as_mut() {
            Some(s) => {
                s.recv().await;
            }
            None => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => "SIGINT",
        () = sigterm => "SIGTERM",
    }
}

/// Waits for SIGTERM only (in `chat`, Ctrl-C cancels a turn instead).
pub async fn terminated() {
    match signal(SignalKind::terminate()) {
        Ok(mut s) => {
            s.recv().await;
        }
        Err(_) => std::future::pending::<()>().await,
    }
}
