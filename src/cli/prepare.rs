//! Session preparation: a main session set up from its arguments — the
//! snapshot loaded, the main session planned (`runtime::main_plan`), a
//! resumed session read back, the engine wired (team, fleet, MCP, file
//! checkpoints) and the transcript opened. `run`, `chat`, `render` and
//! headless mode all start here.

use std::io::Read;
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::args::SessionArgs;
use super::output::Progress;
use super::{CliError, GlobalArgs, Overrides, load_snapshot};
use crate::catalog::AgentDef;
use crate::message::{ContentBlock, Message};
use crate::provider::Provider;
use crate::reload::{self, ReloadHandle};
use crate::runtime::{self, Engine, EventSink, Session, transcript::Transcript};
use crate::snapshot::SnapshotInput;

/// What the headless flags add to a main session's setup.
#[derive(Default, Clone)]
pub(super) struct Extras {
    /// Settings given as `CADRE_*` variables (`--mcp-config` servers).
    pub env: Vec<(String, String)>,
    /// `--allowedTools`/`--disallowedTools`: the command-line layer's rules.
    pub allow: Vec<String>,
    pub deny: Vec<String>,
    /// `--tools`: only these built-in tools (`None` = all).
    pub tools: Option<Vec<String>>,
    /// Tools removed from the main session's pool (bare names of `--disallowedTools`).
    pub remove_tools: Vec<String>,
    pub session_id: Option<String>,
    pub main_prompt: runtime::MainPrompt,
    pub client_hooks: Option<runtime::ClientHooks>,
    /// Who answers MCP servers' requests for input (`None` declines them).
    pub elicitor: Option<crate::mcp::Elicitor>,
    /// Who answers AskUserQuestion (`None`: nobody; the model decides).
    pub questioner: Option<runtime::ask_user::Questioner>,
    /// Reaches the SDK client's in-process MCP servers.
    pub mcp_local: Option<crate::mcp::LocalConnector>,
    /// `--strict-mcp-config`: only these MCP servers.
    pub mcp_only: Option<Vec<String>>,
    /// Keep file checkpoints for `rewind_files`
    /// (`CLAUDE_CODE_ENABLE_SDK_FILE_CHECKPOINTING`).
    pub file_checkpoints: bool,
}

/// A main session ready to run.
pub(super) struct Prepared {
    pub session: Session,
    pub engine: Arc<Engine>,
    pub def: Option<Arc<AgentDef>>,
    /// Where the main model came from: `flag`, `agent`, `settings` or `managed`.
    pub model_source: &'static str,
    /// What the snapshot was built from, for the reload watcher.
    input: SnapshotInput,
    interactive: bool,
}

impl Prepared {
    /// Starts reloading the engine's snapshot when its files change; the
    /// watcher stops when the handle is dropped.
    pub fn watch(&self) -> Option<ReloadHandle> {
        reload::spawn(
            self.input.clone(),
            Arc::clone(&self.engine.snapshot),
            self.interactive,
        )
    }
}

/// How a main session is set up.
pub(super) struct Mode {
    /// The session kind for flag gates.
    pub interactive: bool,
    pub write_transcripts: bool,
    /// `run` waits for background children before it ends; `chat` does not.
    pub wait_for_background: bool,
    /// Start the MCP servers (`render` starts no process).
    pub connect_mcp: bool,
}

pub(super) fn prepare(
    g: &GlobalArgs,
    args: &SessionArgs,
    how: Mode,
    events: EventSink,
    asker: Option<runtime::Asker>,
) -> Result<Prepared, CliError> {
    prepare_with(g, args, how, events, asker, Extras::default())
}

pub(super) fn prepare_with(
    g: &GlobalArgs,
    args: &SessionArgs,
    how: Mode,
    events: EventSink,
    asker: Option<runtime::Asker>,
    extras: Extras,
) -> Result<Prepared, CliError> {
    let Mode {
        interactive,
        write_transcripts,
        wait_for_background,
        connect_mcp,
    } = how;
    let overrides = Overrides {
        model: args.model.clone(),
        permission_mode: args.permission_mode,
        env: extras.env.clone(),
        allow: extras.allow.clone(),
        deny: extras.deny.clone(),
    };
    let (input, swap) = load_snapshot(g, &overrides)?;
    let snap = swap.load_full();
    let sessions_dir = snap.settings().transcripts.dir.clone();
    let restored = read_back(args, &sessions_dir, &input)?;
    let settings = snap.settings();
    let tools = crate::tools::builtin_tools();
    let available = runtime::available_tools(&snap, tools.iter().map(|t| t.name()));
    let resumed_header = restored.as_ref().and_then(|(_, r)| r.header.as_ref());
    let plan = plan(
        &snap,
        args,
        &extras,
        resumed_header,
        &available,
        interactive,
    )?;
    let provider = Provider::new(&settings.provider, &input.load.env)
        .map_err(|e| CliError::Usage(e.to_string()))?;
    let resumed = restored.as_ref().map(|(id, r)| (id.clone(), r));
    let (session_id, forked_from) = session_id(resumed.as_ref().map(|(id, _)| id), args, &extras);
    let session_dir = session_folder(
        (write_transcripts, settings, &sessions_dir),
        &session_id,
        resumed.is_none() || args.fork_session,
        extras.session_id.as_deref(),
    )?;
    let (team, lead_prompt) = team_seat(&snap, args, &input, &plan, &session_id)?;
    // Telemetry records after the session's own sink, when it is on; a
    // session that runs nothing (`render`) starts none.
    let events = if connect_mcp {
        let start_type = start_type(resumed.is_some(), args.continue_latest);
        with_telemetry(events, settings, &input, &session_id, start_type)
    } else {
        events
    };
    let mut engine = Engine::new(
        Arc::clone(&swap),
        provider,
        tools,
        input.load.env.clone(),
        session_dir.clone(),
        session_id,
        events,
        asker,
    );
    let wired = wire_engine(
        &mut engine,
        extras,
        lead_prompt,
        (&input, &swap, &snap, interactive),
        &args.add_dirs,
        session_dir.as_deref(),
    )?;
    let engine = Arc::new(engine);
    let session = start_main(
        &engine,
        &plan,
        (&snap, &input, &available),
        Place {
            resumed,
            session_dir: session_dir.as_deref(),
            sessions_dir: &sessions_dir,
            forked_from,
        },
        wired,
        (connect_mcp, wait_for_background),
        team,
    )?;
    Ok(Prepared {
        session,
        engine,
        def: plan.def(&snap),
        model_source: plan.model_source.as_str(),
        input,
        interactive,
    })
}

/// The session `--resume`/`--continue` name, read back (`None` for a new
/// session).
fn read_back(
    args: &SessionArgs,
    sessions_dir: &std::path::Path,
    input: &SnapshotInput,
) -> Result<Option<(String, runtime::resume::Restored)>, CliError> {
    if args.fork_session && !args.resuming() {
        return Err(CliError::Usage(
            "--fork-session needs --resume ID or --continue".into(),
        ));
    }
    if !args.resuming() {
        return Ok(None);
    }
    let dirs = runtime::session_dirs::SessionDirs::new(sessions_dir, &input.load.cwd);
    Ok(Some(restore(&dirs, args)?))
}

/// The session's id, and the one it was forked from: a resumed session
/// keeps its id, unless forked; a new one takes the one given
/// (`--session-id`) or a fresh one.
fn session_id(
    resumed: Option<&String>,
    args: &SessionArgs,
    extras: &Extras,
) -> (String, Option<String>) {
    match resumed {
        Some(id) if !args.fork_session => (id.clone(), None),
        resumed => (
            extras.session_id.clone().unwrap_or_else(new_session_id),
            resumed.cloned(),
        ),
    }
}

/// The session's folder, when transcripts are written; a `new` one is
/// checked (`given`: the `--session-id` it must not share) and old ones
/// are cleaned up.
fn session_folder(
    (write_transcripts, settings, sessions_dir): (bool, &crate::config::Settings, &std::path::Path),
    session_id: &str,
    new: bool,
    given: Option<&str>,
) -> Result<Option<PathBuf>, CliError> {
    let session_dir: Option<PathBuf> =
        (write_transcripts && settings.transcripts.enabled).then(|| sessions_dir.join(session_id));
    if let Some(dir) = &session_dir {
        check_session_dir(dir, given.filter(|_| new), sessions_dir, settings)?;
    }
    Ok(session_dir)
}

/// How the session started, as telemetry names it.
fn start_type(resumed: bool, continue_latest: bool) -> &'static str {
    match (resumed, continue_latest) {
        (false, _) => "fresh",
        (true, true) => "continue",
        (true, false) => "resume",
    }
}

/// Where the main session is written, and what it continues.
struct Place<'a> {
    /// The session read back, by its id.
    resumed: Option<(String, &'a runtime::resume::Restored)>,
    /// Its own folder (none without transcripts).
    session_dir: Option<&'a std::path::Path>,
    sessions_dir: &'a std::path::Path,
    /// The session a `--fork-session` copies.
    forked_from: Option<String>,
}

/// The main session on its engine: a resumed session's children known
/// again, its transcript opened, the mode set, the MCP servers connecting
/// (in the background; each turn re-syncs them with the snapshot), and
/// the session itself.
fn start_main(
    engine: &Arc<Engine>,
    plan: &runtime::main_plan::MainPlan,
    (snap, input, available): (&crate::snapshot::Snapshot, &SnapshotInput, &[String]),
    Place {
        resumed,
        session_dir,
        sessions_dir,
        forked_from,
    }: Place<'_>,
    wired: Wired,
    (connect_mcp, wait_for_background): (bool, bool),
    team: Option<runtime::TeamSeat>,
) -> Result<Session, CliError> {
    if let (Some((id, r)), Some(dir)) = (&resumed, session_dir) {
        restore_children(
            engine,
            (id, r),
            dir,
            plan,
            input,
            available,
            wired.fleet.as_ref(),
        );
    }
    let transcript = open_transcript(
        session_dir,
        sessions_dir,
        resumed.as_ref().map(|(id, r)| (id.as_str(), *r)),
        forked_from.is_some(),
    )?;
    *engine
        .main_mode
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = plan.core.mode;
    if connect_mcp {
        start_mcp(
            engine,
            snap,
            input,
            &transcript,
            &plan.core.model,
            wired.elicitor,
        );
    }
    let spec = plan.session(snap, input.load.cwd.clone(), wait_for_background, team);
    let header = plan.header(
        snap,
        engine.session_id.clone(),
        spec.cwd.clone(),
        forked_from,
    );
    Ok(open_session(engine, spec, &header, transcript, resumed))
}

/// The main session planned (`runtime::main_plan`) from its arguments.
fn plan(
    snap: &crate::snapshot::Snapshot,
    args: &SessionArgs,
    extras: &Extras,
    resumed: Option<&runtime::resume::SessionHeader>,
    available: &[String],
    interactive: bool,
) -> Result<runtime::main_plan::MainPlan, CliError> {
    runtime::main_plan::plan_main(
        snap,
        &runtime::main_plan::MainInput {
            interactive,
            agent: args.agent.as_deref(),
            model: args.model.as_deref(),
            mode_flag: args.permission_mode.is_some(),
            max_turns: args.max_turns,
            resumed,
            available_tools: available,
            only_tools: extras.tools.as_deref(),
            remove_tools: &extras.remove_tools,
        },
    )
    .map_err(|e| CliError::Usage(e.to_string()))
}

/// The main session's transcript (disabled without a session folder); a
/// resumed one continues the file (a fork, a copy of it).
fn open_transcript(
    session_dir: Option<&std::path::Path>,
    sessions_dir: &std::path::Path,
    resumed: Option<(&str, &runtime::resume::Restored)>,
    forked: bool,
) -> Result<Arc<Transcript>, CliError> {
    let main_file = session_dir.map(runtime::resume::main_file);
    if let (Some((id, r)), Some(file)) = (resumed, &main_file) {
        continue_transcript(
            &sessions_dir.join(id),
            file,
            r.complete_len,
            session_dir.filter(|_| forked),
        )?;
    }
    let transcript = Arc::new(match main_file {
        Some(f) => Transcript::open(f, "main", None),
        None => Transcript::disabled("main", None),
    });
    // The new messages continue the chain of the last one read back
    // (lines another program wrote included).
    transcript.chain_after(resumed.and_then(|(_, r)| r.last_uuid.clone()));
    Ok(transcript)
}

/// The session's events, also recorded by telemetry when it is on.
fn with_telemetry(
    events: EventSink,
    settings: &crate::config::Settings,
    input: &SnapshotInput,
    session_id: &str,
    start_type: &'static str,
) -> EventSink {
    crate::telemetry::start(
        events,
        &crate::telemetry::Start {
            settings_env: &settings.env,
            process_env: &input.load.env,
            session_id,
            start_type: Some(start_type),
            prices: &settings.prices,
        },
    )
}

/// A new session's folder: its id (`--session-id`, `given`) must not be
/// one a session already has; old session folders are cleaned up.
fn check_session_dir(
    dir: &std::path::Path,
    given: Option<&str>,
    sessions_dir: &std::path::Path,
    settings: &crate::config::Settings,
) -> Result<(), CliError> {
    if let Some(given) = given
        && runtime::resume::main_file(dir).exists()
    {
        return Err(CliError::Usage(format!(
            "Session ID {given} is already in use."
        )));
    }
    if let Some(days) = settings.transcripts.cleanup_period_days {
        let n = runtime::transcript::remove_old_sessions(sessions_dir, days);
        if n > 0 {
            tracing::info!("removed {n} session folder(s) older than {days} days");
        }
    }
    Ok(())
}

/// The session itself: its transcript's first line (`session`, or
/// `resume` with what it continues), and a resumed conversation's history
/// and state read back.
fn open_session(
    engine: &Arc<Engine>,
    spec: runtime::SessionSpec,
    header: &impl serde::Serialize,
    transcript: Arc<Transcript>,
    resumed: Option<(String, &runtime::resume::Restored)>,
) -> Session {
    let header = serde_json::to_value(header).unwrap_or(Value::Null);
    let history = match &resumed {
        Some((id, r)) => {
            transcript.record(
                "resume",
                serde_json::json!({"from": id, "settings": header}),
            );
            r.history.clone()
        }
        None => {
            transcript.record("session", header);
            Vec::new()
        }
    };
    let mut session = Session::new(
        Arc::clone(engine),
        spec,
        history,
        transcript,
        CancellationToken::new(),
    );
    if let Some((_, r)) = &resumed {
        if let Some(listing) = r.listing.clone() {
            session.set_announced(listing);
        }
        session.set_delivered(r.instructions.iter().cloned());
        // A turn cut by a crash or kill: its tool calls get one
        // "cancelled" result each, so every tool_use keeps exactly one.
        session.repair_after_cancel();
    }
    session
}

/// With AGENT_TEAMS on, the main session leads a team: its seat, and the
/// team file's words for the lead (joined to its system prompt).
fn team_seat(
    snap: &crate::snapshot::Snapshot,
    args: &SessionArgs,
    input: &SnapshotInput,
    plan: &runtime::main_plan::MainPlan,
    session_id: &str,
) -> Result<(Option<runtime::TeamSeat>, Option<String>), CliError> {
    let settings = snap.settings();
    if !snap.teams_effective(plan.core.kind) {
        if let Some(name) = &args.team {
            return Err(CliError::Usage(format!(
                "--team {name}: agent teams are off; turn on AGENT_TEAMS (--feature AGENT_TEAMS=on or CLAUDE_CODE_EXPERIMENTAL_AGENT_TEAMS=1)"
            )));
        }
        return Ok((None, None));
    }
    let name = args.team.clone().unwrap_or_else(|| session_id.to_string());
    let dir = input.load.cwd.join(&settings.agents.teams_dir);
    let store = crate::teams::TeamStore::open(&dir, &name)
        .map_err(|e| CliError::Usage(format!("--team {name}: {e}")))?;
    store
        .join(crate::teams::Member {
            name: crate::teams::LEAD.into(),
            agent_id: "main".into(),
            agent_type: plan.agent.as_deref().unwrap_or("main").into(),
            status: crate::teams::MemberStatus::Active,
            session_id: session_id.to_string(),
            joined: crate::clock::now_rfc3339(),
        })
        .map_err(|e| CliError::Failed(e.to_string()))?;
    // A team file (`.claude/teams/NAME.yaml`): checked now, its tasks
    // added (once per subject), its members started at the first turn.
    // The snapshot read it (a broken one is an error here, before
    // anything runs).
    let file = snap.teams.get(&name);
    if let Some(f) = file.filter(|f| !f.errors.is_empty()) {
        return Err(CliError::Usage(
            f.errors
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("\n"),
        ));
    }
    let mut lead_prompt = None;
    if let Some(def) = file.and_then(|f| f.def.as_ref()) {
        let existing = store.tasks().map_err(|e| CliError::Failed(e.to_string()))?;
        for t in &def.tasks {
            if !existing.iter().any(|x| x.subject == t.subject) {
                store
                    .create_task(&t.subject, &t.description)
                    .map_err(|e| CliError::Failed(e.to_string()))?;
            }
        }
        lead_prompt.clone_from(&def.lead_prompt);
    }
    let seat = runtime::TeamSeat {
        store,
        member: crate::teams::LEAD.into(),
        from_file: file.is_some(),
        after_plan: None,
    };
    Ok((Some(seat), lead_prompt))
}

/// What [`wire_engine`] set up that is used after the engine is shared.
struct Wired {
    fleet: Option<Arc<crate::fleet::parent::NatsBackend>>,
    elicitor: Option<crate::mcp::Elicitor>,
}

/// The engine's parts beyond what `Engine::new` takes: the extras of the
/// headless flags, the lead's words, the snapshot catch-up, the fleet,
/// file checkpoints and `--add-dir` folders.
fn wire_engine(
    engine: &mut Engine,
    extras: Extras,
    lead_prompt: Option<String>,
    (input, swap, snap, interactive): (
        &SnapshotInput,
        &Arc<arc_swap::ArcSwap<crate::snapshot::Snapshot>>,
        &crate::snapshot::Snapshot,
        bool,
    ),
    add_dirs: &[PathBuf],
    session_dir: Option<&std::path::Path>,
) -> Result<Wired, CliError> {
    engine.main_prompt = extras.main_prompt;
    // A lead's turn brings the snapshot up to date with its team file.
    engine.catch_up = Some({
        let (input, swap) = (input.clone(), Arc::clone(swap));
        Arc::new(move |dirs: &[PathBuf]| {
            let t = reload::Targets {
                files: Vec::new(),
                dirs: dirs.to_vec(),
            };
            if reload::changed_since(&t, swap.load().read_from) {
                reload::reload_quiet(&input, &swap, interactive, true);
            }
        })
    });
    // An SDK host's `apply_flag_settings`, `update_settings` and reloads.
    engine.apply_settings = Some({
        let (input, swap) = (input.clone(), Arc::clone(swap));
        Arc::new(move |patch| {
            let host = &input.load.cli.host_settings;
            let before = host.get();
            if let Some(p) = patch {
                host.merge(p);
            }
            let event = reload::reload(&input, &swap, interactive);
            if event.ok {
                Ok(())
            } else {
                host.set(before);
                Err(event.to_string())
            }
        })
    });
    // The team file's words for the lead join its system prompt.
    if let Some(lead) = lead_prompt {
        let append = match engine.main_prompt.append.take() {
            Some(a) => format!("{a}\n\n{lead}"),
            None => lead,
        };
        engine.main_prompt.append = Some(append);
    }
    engine.client_hooks = extras.client_hooks;
    // `[distributed] backend = "nats"`: background children run on workers.
    let settings = snap.settings();
    let fleet = (settings.distributed.backend == crate::config::TaskBackendKind::Nats)
        .then(|| crate::fleet::parent::NatsBackend::new(settings.distributed.clone()));
    if let Some(f) = &fleet {
        engine.backend = Some(Arc::clone(f) as Arc<dyn runtime::backend::TaskBackend>);
    }
    engine.questioner = extras.questioner;
    if extras.file_checkpoints {
        let history = runtime::file_history::FileHistory::new(session_dir)
            .map_err(|e| CliError::Failed(format!("file checkpoints: {e}")))?;
        engine.file_history = Some(Arc::new(history));
    }
    engine.mcp.set_local_connector(extras.mcp_local);
    engine.mcp.set_only(extras.mcp_only);
    for d in add_dirs {
        let d =
            added_dir(&input.load.cwd, d).map_err(|e| CliError::Usage(format!("--add-dir {e}")))?;
        engine.add_dirs.push(d);
    }
    Ok(Wired {
        fleet,
        elicitor: extras.elicitor,
    })
}

/// The sub-agents of the resumed session, for SendMessage, planned again
/// as children of this session as it is now; tasks on workers wait for
/// their notice.
fn restore_children(
    engine: &Arc<Engine>,
    (id, r): (&str, &runtime::resume::Restored),
    dir: &std::path::Path,
    plan: &runtime::main_plan::MainPlan,
    input: &SnapshotInput,
    available: &[String],
    fleet: Option<&Arc<crate::fleet::parent::NatsBackend>>,
) {
    let def = plan.def(&engine.snapshot.load());
    let parent = runtime::plan::SpawnParent {
        agent_id: "main",
        session_id: &engine.session_id,
        kind: plan.core.kind,
        depth: 0,
        model: &plan.core.model,
        mode: plan.core.mode,
        def: def.as_deref(),
        cwd: &input.load.cwd,
        is_fork_child: false,
        env_model: engine.subagent_model.as_deref(),
        available_tools: available,
        turn: None,
    };
    let n = runtime::restore::restore_tasks(engine, dir, &parent);
    if n > 0 {
        tracing::info!("restored {n} sub-agent(s) of session {id}");
    }
    if let Some(f) = fleet {
        let n = f.restore(engine, dir, &parent, &r.history);
        if n > 0 {
            tracing::info!("{n} background task(s) on workers wait for their notice");
        }
    }
}

/// The resumed session's transcript, made ready to continue: a fork
/// (`fork_to`, its session folder) starts as a copy of the complete lines
/// with its sub-agents' files; otherwise a partial last line is trimmed.
fn continue_transcript(
    original_dir: &std::path::Path,
    file: &std::path::Path,
    complete_len: u64,
    fork_to: Option<&std::path::Path>,
) -> Result<(), CliError> {
    let failed = |e: std::io::Error| CliError::Failed(e.to_string());
    let Some(to) = fork_to else {
        return runtime::resume::trim_partial_tail(file, complete_len)
            .map_err(|e| CliError::Failed(e.to_string()));
    };
    let original = runtime::resume::main_file(original_dir);
    let bytes = fs_err::read(&original).map_err(failed)?;
    let keep = usize::try_from(complete_len)
        .unwrap_or(bytes.len())
        .min(bytes.len());
    if let Some(d) = file.parent() {
        fs_err::create_dir_all(d).map_err(failed)?;
    }
    fs_err::write(file, &bytes[..keep]).map_err(failed)?;
    copy_agent_files(original_dir, to)
}

/// A folder to add to the session's working directories (`--add-dir`,
/// `/add-dir`): relative to `cwd`; `Err` names it when it is no directory.
pub(super) fn added_dir(cwd: &std::path::Path, d: &std::path::Path) -> Result<PathBuf, String> {
    let d = cwd.join(d);
    if d.is_dir() {
        Ok(d)
    } else {
        Err(format!("{}: not a directory", d.display()))
    }
}

/// The MCP servers start connecting, with the session's roots, elicitor,
/// elicitation hooks and (unless off) sampling.
fn start_mcp(
    engine: &Arc<Engine>,
    snap: &crate::snapshot::Snapshot,
    input: &SnapshotInput,
    transcript: &Arc<Transcript>,
    model: &str,
    elicitor: Option<crate::mcp::Elicitor>,
) {
    let settings = snap.settings();
    engine.mcp.set_extra_roots(engine.add_dirs.clone());
    engine.mcp.set_elicitor(elicitor);
    engine
        .mcp
        .set_elicit_hooks(Some(runtime::elicit_hooks::elicit_hooks(
            Arc::downgrade(engine),
            input.load.cwd.clone(),
            Arc::clone(transcript),
        )));
    if settings.mcp.sampling != crate::config::SamplingPolicy::Off {
        engine.mcp.set_sampler(Some(runtime::sampling::sampler(
            Arc::downgrade(engine),
            model.to_string(),
            settings.provider.max_tokens,
            settings.mcp.sampling,
            Arc::clone(transcript),
        )));
    }
    engine.mcp.sync(&snap.mcp_servers, &input.load.cwd);
    runtime::file_hooks::spawn(engine, input.load.cwd.clone(), Arc::clone(transcript));
}

/// `--fork-session`: the sub-agents' transcripts and meta files go with
/// the copy, so the fork can resume them without touching the original.
fn copy_agent_files(from: &std::path::Path, to: &std::path::Path) -> Result<(), CliError> {
    let failed = |e: std::io::Error| CliError::Failed(e.to_string());
    let (from, to) = (
        runtime::resume::subagents_dir(from),
        runtime::resume::subagents_dir(to),
    );
    let Ok(entries) = std::fs::read_dir(&from) else {
        return Ok(());
    };
    fs_err::create_dir_all(&to).map_err(failed)?;
    for e in entries.flatten() {
        let is_file = e.file_type().is_ok_and(|t| t.is_file());
        let name = e.file_name();
        let wanted = name.to_string_lossy().ends_with(".jsonl")
            || name.to_string_lossy().ends_with(".meta.json");
        if is_file && wanted {
            fs_err::copy(e.path(), to.join(&name)).map_err(failed)?;
        }
    }
    Ok(())
}

/// The session `--resume ID` or `--continue` names, read back from its
/// transcript. `--continue` takes the newest session of the session folder
/// only; `--resume ID` of a session in the project's old `.cadre/sessions`
/// moves it into the session folder first, and says so.
fn restore(
    dirs: &runtime::session_dirs::SessionDirs,
    args: &SessionArgs,
) -> Result<(String, runtime::resume::Restored), CliError> {
    use runtime::resume;
    let usage = |e: resume::ResumeError| CliError::Usage(e.to_string());
    let id = match &args.resume {
        Some(id) => id.clone(),
        None => dirs.latest().map_err(usage)?,
    };
    let found = dirs.find(&id).map_err(usage)?;
    if found.old {
        // Read with the same rule as any other: the session is re-planned
        // from the current settings (runtime::restore).
        eprintln!(
            "cadre: session {id} is in the project's old {} (a repository can ship files there); moving it to {} and resuming it under the current settings",
            found.folder.display(),
            dirs.dir.display()
        );
    }
    let folder = dirs
        .adopt(&found)
        .map_err(|e| CliError::Failed(e.to_string()))?;
    let path = resume::main_file(&folder);
    let Some(at) = &args.resume_session_at else {
        return Ok((id, resume::load(&path).map_err(usage)?));
    };
    // Truncating resume: the transcript up to the message `at`, read
    // back as a whole one; the fork copies just that part.
    if !args.fork_session {
        return Err(CliError::Usage(
            "--resume-session-at: cadre resumes part of a session only into a new one; \
             add --fork-session (the original session is left as it was)"
                .into(),
        ));
    }
    let cut = resume::find_cut(&path, at)
        .map_err(usage)?
        .ok_or_else(|| CliError::Usage(format!("No message found with message.uuid of: {at}")))?;
    if let Some(turn) = &args.resume_drops_turn {
        cut.check_drops_turn(at, turn).map_err(CliError::Usage)?;
    }
    // Only the part kept is read (the file may have grown since).
    let mut bytes = Vec::new();
    fs_err::File::open(&path)
        .and_then(|f| f.take(cut.len).read_to_end(&mut bytes))
        .map_err(|e| CliError::Failed(e.to_string()))?;
    Ok((id, resume::parse(&path, &bytes).map_err(usage)?))
}

/// A new session's id: a random UUID, as Claude Code names sessions.
pub(super) fn new_session_id() -> String {
    runtime::transcript::new_uuid()
}

/// The first user message: project memory (unless the agent is one that
/// goes without it), the agent's `initialPrompt` (for `--agent`), then the
/// prompt.
pub(super) fn first_message(
    engine: &runtime::Engine,
    def: Option<&AgentDef>,
    prompt: String,
) -> Message {
    first_message_with(engine, def, vec![ContentBlock::text(prompt)])
}

/// [`first_message`] for a prompt given as content blocks (stream-json input).
pub(super) fn first_message_with(
    engine: &runtime::Engine,
    def: Option<&AgentDef>,
    prompt: Vec<ContentBlock>,
) -> Message {
    let mut blocks = Vec::new();
    if runtime::gets_memory(def)
        && let Some(memory) = runtime::memory_block(&engine.snapshot.load())
    {
        blocks.push(ContentBlock::text(memory));
    }
    if let Some(initial) = def.and_then(|d| d.initial_prompt.clone()) {
        blocks.push(ContentBlock::text(initial));
    }
    blocks.extend(prompt);
    Message::user(blocks)
}

/// Before the first request of a one-shot run: waits until every MCP
/// server is ready or has failed (failures are reported as they happen),
/// at most `limit`, with the wait on a progress line. Servers still
/// connecting after that are reported; the run goes on without them, and
/// their tools join a later turn if they become ready.
pub(super) async fn wait_for_servers(
    engine: &Engine,
    progress: Option<&Progress>,
    limit: std::time::Duration,
) {
    use crate::mcp::ServerState;
    if engine.mcp.states().is_empty() {
        return;
    }
    let bar = progress.map(|p| p.status(String::new()));
    let pending = engine
        .mcp
        .wait_settled(limit, |states| {
            if let Some(bar) = &bar {
                let ready = states
                    .values()
                    .filter(|s| **s == ServerState::Ready)
                    .count();
                let waiting: Vec<&str> = states
                    .iter()
                    .filter(|(_, s)| **s == ServerState::Connecting)
                    .map(|(n, _)| n.as_str())
                    .collect();
                bar.set_message(format!(
                    "MCP servers: {ready} of {} ready, waiting for {}",
                    states.len(),
                    waiting.join(", ")
                ));
            }
        })
        .await;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    if !pending.is_empty() {
        tracing::warn!(
            "MCP server(s) {} still connecting after {} ms (mcp.startup_timeout_ms); \
             the first turn goes without their tools",
            pending
                .iter()
                .map(|n| format!("`{n}`"))
                .collect::<Vec<_>>()
                .join(", "),
            limit.as_millis()
        );
    }
}
