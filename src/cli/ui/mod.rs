//! `cadre ui`: a live web view of this project's sessions on 127.0.0.1 —
//! each session's agent tree (status, current tool, tokens, cache-read
//! share, cost, elapsed time), each agent's transcript, and the fleet's
//! tasks when the nats backend is configured (docs/observability.md).
//!
//! The live state comes from the files the sessions write (`state`), not
//! from a connection to each running process; the page gets it as
//! server-sent events (`server`). The page itself (`assets/`) is plain
//! HTML, CSS and JavaScript embedded in the binary: nothing to build,
//! nothing fetched from the internet.

mod server;
mod state;

use std::sync::Arc;

use clap::Args;

use super::{CliError, GlobalArgs, Overrides, load_snapshot};
use crate::runtime::session_dirs::SessionDirs;

#[derive(Debug, Args)]
pub struct UiArgs {
    /// Port to listen on (127.0.0.1 only); a free one by default.
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Print the address without opening a browser.
    #[arg(long)]
    no_open: bool,
}

pub async fn ui(g: &GlobalArgs, args: UiArgs) -> Result<(), CliError> {
    let (input, snap) = load_snapshot(g, &Overrides::default())?;
    let snap = snap.load_full();
    let settings = snap.settings();
    let dirs = SessionDirs::new(&settings.transcripts.dir, &input.load.cwd);
    let fleet = (settings.distributed.backend == crate::config::TaskBackendKind::Nats)
        .then(|| settings.distributed.clone());
    let source = Arc::new(state::Source::new(dirs, settings.prices.clone()));
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", args.port))
        .await
        .map_err(|e| CliError::Failed(format!("cannot listen on 127.0.0.1:{}: {e}", args.port)))?;
    let port = listener
        .local_addr()
        .map_err(|e| CliError::Failed(e.to_string()))?
        .port();
    let token = format!("{:032x}", rand::random::<u128>());
    let url = format!("http://127.0.0.1:{port}/?token={token}");
    outln!("{url}");
    eprintln!(
        "cadre ui: sessions under {}; Ctrl-C stops",
        source.folder().display()
    );
    if !args.no_open {
        open(&url);
    }
    let app = Arc::new(server::App {
        token,
        port,
        source,
        fleet,
        broker: tokio::sync::Mutex::new(None),
    });
    tokio::select! {
        r = server::serve(listener, app) => r.map_err(|e| CliError::Failed(e.to_string())),
        _ = tokio::signal::ctrl_c() => Ok(()),
    }
}

/// Opens `url` in the user's browser (`xdg-open`, or `open` on macOS);
/// the address is printed either way.
fn open(url: &str) {
    let program = if cfg!(target_os = "macos") {
        "open"
    } else {
        "xdg-open"
    };
    let spawned = std::process::Command::new(program)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    match spawned {
        // Reaped when it exits.
        Ok(mut child) => drop(std::thread::spawn(move || child.wait())),
        Err(_) => eprintln!("cadre ui: could not start {program}; open the address above"),
    }
}
