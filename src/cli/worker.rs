//! `cadre worker [--pool NAME]`: runs background sub-agents published by
//! parents with `[distributed] backend = "nats"` (docs/distributed.md), and
//! `cadre tasks list [--json]`: every task the fleet knows of.

use std::sync::Arc;

use clap::{Args, Subcommand};
use serde::Serialize;

use super::output::print_json;
use super::{CliError, GlobalArgs, Overrides, load_snapshot};
use crate::fleet::state::{TaskRecord, now_ms};
use crate::fleet::worker::{EngineFactory, STOP_GRACE, Stopped, WorkerOptions, worker_id};
use crate::fleet::{Broker, FleetError};
use crate::provider::Provider;
use crate::runtime::Engine;

#[derive(Debug, Args)]
pub struct WorkerArgs {
    /// The pool to take tasks from (default: `distributed.pool`, "default").
    #[arg(long, value_name = "NAME")]
    pool: Option<String>,
    /// Tasks this worker runs at once (default: `agents.max_concurrent`).
    /// The whole pool never runs more than `agents.max_concurrent` at once.
    #[arg(long, value_name = "N")]
    concurrency: Option<usize>,
}

#[derive(Debug, Subcommand)]
pub enum TasksCommand {
    /// Background tasks across the fleet: id, status, owner (worker), lease
    /// age, attempts, session, type, description.
    List(ListArgs),
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// Print JSON (documented in docs/distributed.md).
    #[arg(long)]
    json: bool,
}

fn failed(e: FleetError) -> CliError {
    CliError::Failed(e.to_string())
}

/// Runs until SIGINT or SIGTERM; tasks still running then are released to
/// the pool (another worker continues them from their transcripts).
pub async fn worker(g: &GlobalArgs, args: WorkerArgs) -> Result<(), CliError> {
    let (input, swap) = load_snapshot(g, &Overrides::default())?;
    let snap = swap.load_full();
    let settings = snap.settings();
    let d = settings.distributed.clone();
    let pool = args.pool.unwrap_or_else(|| d.pool.clone());
    let broker = Arc::new(Broker::connect(&d).await.map_err(failed)?);
    let provider = Provider::new(&settings.provider, &input.load.env)
        .map_err(|e| CliError::Usage(e.to_string()))?;
    let cwd = input.load.cwd.clone();
    let sessions_dir = settings.transcripts.dir.clone();
    let max_running = settings.agents.max_concurrent;
    let env = input.load.env.clone();
    let _reload = crate::reload::spawn(input.clone(), Arc::clone(&swap), false);
    // The project's MCP servers (`.mcp.json` and `[mcp_servers]`, as this
    // worker's own settings and trust decision for its folder allow) run
    // once per worker and serve every child it runs, as a parent's serve
    // its local children. They settle before the first task is taken, as
    // a parent's do before its first turn.
    let mcp = crate::mcp::McpManager::new();
    mcp.sync(&snap.mcp_servers, &cwd);
    let pending = mcp
        .wait_settled(
            std::time::Duration::from_millis(settings.mcp.startup_timeout_ms),
            |_| {},
        )
        .await;
    if !pending.is_empty() {
        tracing::warn!(
            "MCP server(s) {} still connecting after mcp.startup_timeout_ms; children start without their tools",
            pending.join(", ")
        );
    }
    let id = worker_id();
    // With telemetry on here, each child's signals go to this worker's
    // collector, and its spans continue its parent's trace (the plan's
    // headers carry the context). `session.id` is the worker's name.
    let settings_env = settings.env.clone();
    let prices = settings.prices.clone();
    let telemetry_id = id.clone();
    let factory: EngineFactory = {
        let swap = Arc::clone(&swap);
        let mcp = Arc::clone(&mcp);
        Arc::new(move |plan, events| {
            let events = crate::telemetry::start(
                events,
                &crate::telemetry::Start {
                    settings_env: &settings_env,
                    process_env: &env,
                    session_id: &telemetry_id,
                    start_type: None,
                    prices: &prices,
                },
            );
            let mut engine = Engine::new(
                Arc::clone(&swap),
                provider.clone(),
                crate::tools::builtin_tools(),
                env.clone(),
                Some(sessions_dir.join(&plan.session_id)),
                plan.session_id.clone(),
                events,
                None,
            );
            engine.mcp = Arc::clone(&mcp);
            Ok(Arc::new(engine))
        })
    };
    let opts = WorkerOptions {
        pool,
        id,
        concurrency: args.concurrency.unwrap_or(max_running).max(1),
        max_running,
        cwd,
    };
    let stop = tokio_util::sync::CancellationToken::new();
    let on_signal = stop.clone();
    tokio::spawn(async move {
        let name = super::signals::interrupted().await;
        tracing::info!("{name}: releasing running tasks");
        on_signal.cancel();
        // A second signal while the first is being handled ends the
        // process at once (128 + the signal's number, as a shell reports).
        let again = super::signals::interrupted().await;
        eprintln!("{again} again: exiting without waiting for the broker");
        std::process::exit(if again == "SIGINT" { 130 } else { 143 });
    });
    let ran = crate::fleet::worker::run(broker, opts, factory, stop).await;
    let _ = tokio::time::timeout(std::time::Duration::from_secs(5), mcp.shutdown()).await;
    match ran.map_err(failed)? {
        Stopped::Clean => Ok(()),
        Stopped::Unconfirmed { tasks } => Err(CliError::Failed(format!(
            "stopped, but the NATS server did not confirm the hand-back of {tasks} running task(s) \
             within {}s; another worker takes them when their lease ({}s) runs out",
            STOP_GRACE.as_secs(),
            d.lease_ms / 1000
        ))),
    }
}

/// One line of `tasks list`.
#[derive(Debug, Serialize)]
pub(super) struct Row {
    agent_id: String,
    status: &'static str,
    owner: Option<String>,
    /// Milliseconds since the holder's last heartbeat (running tasks).
    lease_age_ms: Option<u64>,
    attempt: u32,
    /// 0 for the spawn; n after the n-th SendMessage resumed it.
    run: u32,
    pool: String,
    session_id: String,
    parent_agent_id: String,
    agent_type: String,
    description: String,
    queued_at_ms: u64,
    ended_at_ms: Option<u64>,
}

pub async fn dispatch(g: &GlobalArgs, cmd: TasksCommand) -> Result<(), CliError> {
    let TasksCommand::List(args) = cmd;
    let (_, swap) = load_snapshot(g, &Overrides::default())?;
    let d = swap.load().settings().distributed.clone();
    let broker = Broker::connect(&d).await.map_err(failed)?;
    let rows = rows(
        crate::fleet::parent::task_records(&broker)
            .await
            .map_err(failed)?,
    );
    if args.json {
        return print_json(&rows);
    }
    if rows.is_empty() {
        outln!("no tasks");
        return Ok(());
    }
    outln!(
        "{:<18} {:<9} {:<28} {:>9} {:>3}  {:<24} DESCRIPTION",
        "ID",
        "STATUS",
        "OWNER",
        "LEASE",
        "TRY",
        "SESSION"
    );
    for r in rows {
        let lease = r.lease_age_ms.map_or_else(
            || "-".to_string(),
            |ms| format!("{:.1}s", ms as f64 / 1000.0),
        );
        outln!(
            "{:<18} {:<9} {:<28} {:>9} {:>3}  {:<24} {}",
            r.agent_id,
            r.status,
            r.owner.as_deref().unwrap_or("-"),
            lease,
            r.attempt,
            r.session_id,
            r.description
        );
    }
    Ok(())
}

/// The lines of `tasks list` (and the web view's fleet table), oldest
/// task first.
pub(super) fn rows(records: Vec<TaskRecord>) -> Vec<Row> {
    let mut rows: Vec<Row> = records.into_iter().map(row).collect();
    rows.sort_by(|a, b| (a.queued_at_ms, &a.agent_id).cmp(&(b.queued_at_ms, &b.agent_id)));
    rows
}

fn row(r: TaskRecord) -> Row {
    let running = r.status == crate::fleet::state::FleetStatus::Running;
    Row {
        lease_age_ms: r
            .lease_at_ms
            .filter(|_| running)
            .map(|at| now_ms().saturating_sub(at)),
        status: r.status.as_str(),
        agent_id: r.agent_id,
        owner: r.owner,
        attempt: r.attempt,
        run: r.run,
        pool: r.pool,
        session_id: r.session_id,
        parent_agent_id: r.parent_agent_id,
        agent_type: r.agent_type,
        description: r.description,
        queued_at_ms: r.queued_at_ms,
        ended_at_ms: r.ended_at_ms,
    }
}
