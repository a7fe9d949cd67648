//! `cadre chat`: an interactive main session in the terminal — the prompt
//! line, permission questions, built-in commands, the status line.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::args::{ChatArgs, SessionArgs};
use super::commands::{compact_now, help_text};
use super::output::Progress;
use super::prepare::{Extras, Mode, Prepared, first_message_with, new_session_id, prepare_with};
use super::results::empty_answer_warning;
use super::run::sent;
use super::{CliError, GlobalArgs};
use crate::message::{ContentBlock, Message, Role};
use crate::runtime::{self, Engine, RunError, Session};
/// A permission question as chat puts it: who asks, the exact command (a
/// Bash call) or the whole input, and why the rules ask. The model's text
/// is shown with its control characters as symbols.
fn permission_question(ask: &runtime::AskRequest) -> String {
    let what = match ask.input.get("command").and_then(serde_json::Value::as_str) {
        Some(command) if ask.tool == "Bash" => {
            format!(
                "{} wants to run this command:\n    {}",
                ask.agent_id,
                super::output::shown(command)
            )
        }
        _ if ask.tool == crate::tools::sandbox::proxy::SANDBOX_NETWORK_ACCESS => format!(
            "{}'s sandboxed command wants to reach this host:\n    {}",
            ask.agent_id,
            super::output::shown(ask.input["host"].as_str().unwrap_or_default())
        ),
        _ => format!(
            "{} wants to use {}:\n    {}",
            ask.agent_id,
            ask.tool,
            super::output::shown(&ask.input.to_string())
        ),
    };
    format!("{what}\n  ({})", super::output::shown(&ask.reason))
}

/// The line above each chat prompt: the output of the settings'
/// `statusLine` command (Claude Code's), else the model, the permission
/// mode, the context the last request filled, and the tasks running.
async fn status_line(session: &Session, engine: &Arc<Engine>, progress: &Progress) -> String {
    let snap = engine.snapshot.load_full();
    let model = session.spec().model.clone();
    let spent = progress.spent();
    let window = snap.settings().compact.window(&model);
    let filled = spent.last_main.as_ref().map_or(0, |(_, sent)| *sent);
    let running = engine
        .tasks
        .all()
        .iter()
        .filter(|t| t.status() == runtime::tasks::TaskStatus::Running)
        .count();
    let plain = format!(
        "{model} · {} · context {:.0}% · {running} task(s) running",
        session.spec().mode.as_str(),
        filled as f64 * 100.0 / window.max(1) as f64
    );
    let Some(setting) = &snap.settings().status_line else {
        return plain;
    };
    let cwd = session.spec().cwd.clone();
    let cost: f64 = spent
        .agents
        .values()
        .map(|(m, _, u)| {
            crate::message::cost_of(crate::message::price_of(&snap.settings().prices, m), u)
        })
        .sum();
    let input = serde_json::json!({
        "hook_event_name": "Status",
        "session_id": engine.session_id,
        "transcript_path": session.transcript().path(),
        "cwd": cwd,
        "model": {"id": model, "display_name": model},
        "workspace": {"current_dir": cwd, "project_dir": cwd},
        "version": env!("CARGO_PKG_VERSION"),
        "output_style": {"name": snap.output_style_name()},
        "cost": {"total_cost_usd": cost},
    });
    let mut hook = crate::config::HookConfig::command(&setting.command);
    hook.timeout_ms = STATUS_LINE_TIMEOUT_MS;
    let place = runtime::hooks::HookPlace::new(&snap, &cwd);
    match runtime::hooks::run_any(
        &hook,
        &input,
        &cwd,
        &place.env,
        runtime::hooks::Asked::default(),
        place.sandbox.as_deref(),
    )
    .await
    {
        runtime::hooks::HookRun::Exited {
            code: Some(0),
            stdout,
            ..
        } => {
            let line = stdout.head.lines().next().unwrap_or_default();
            super::output::first_line(line, 200)
        }
        _ => format!("{plain} (statusLine command failed)"),
    }
}

/// How long the `statusLine` command may take before each prompt.
const STATUS_LINE_TIMEOUT_MS: u64 = 2000;

enum ChatDone {
    Exit,
    Shown,
    /// `/resume ID`: continue that session instead.
    Resume(String),
}

/// The answers chat's permission question takes; "always" names what it
/// remembers.
fn allow_choices(always: Option<&super::remember::Offer>) -> String {
    match always {
        Some(offer) => format!("Allow? [y]es · [a]lways: {} · [N]o", offer.words),
        None => "Allow? [y/N]".to_string(),
    }
}

/// `/add-dir PATH` in chat: the folder joins this session's working
/// directories (as an SDK client's `addDirectories` update does: the
/// permission checks, the sandbox and the shell's `cd` count it), and
/// DirectoryAdded fires. A folder already inside one is left as it is.
async fn add_dir(session: &Session, engine: &Engine, args: &str) -> String {
    if args.is_empty() {
        return "usage: /add-dir PATH".into();
    }
    let cwd = session.spec().cwd.clone();
    let dir = match super::prepare::added_dir(&cwd, Path::new(args)) {
        Ok(d) => crate::paths::lexical(&d),
        Err(e) => return format!("not added: {e}"),
    };
    let snap = engine.snapshot.load_full();
    let real = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let dirs: Vec<PathBuf> = std::iter::once(cwd.clone())
        .chain(engine.added_dirs(&snap, &cwd))
        .collect();
    if let Some(within) = dirs.iter().find(|w| real(&dir).starts_with(real(w))) {
        return format!(
            "{} is already a working directory (it is in {})",
            dir.display(),
            within.display()
        );
    }
    if let Ok(mut grants) = engine.grants.lock() {
        grants.apply(&runtime::grants::PermissionUpdate::AddDirectories(vec![
            dir.clone(),
        ]));
    }
    session.directory_added_hooks(&dir, "slash_command").await;
    format!(
        "Added {} as a working directory for this session",
        dir.display()
    )
}

/// Chat's own built-in commands (`CHAT_BUILTINS`) and the answer to an
/// unknown `/name`; `None` for anything else (a prompt, a command, a skill,
/// another built-in).
async fn chat_builtin(
    line: &str,
    session: &mut Session,
    engine: &Arc<Engine>,
    progress: &Progress,
) -> Option<ChatDone> {
    let rest = line.trim().strip_prefix('/')?;
    let (name, args) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
    let args = args.trim();
    let snap = engine.snapshot.load_full();
    match name {
        "exit" | "quit" => return Some(ChatDone::Exit),
        "add-dir" => eprintln!("{}", add_dir(session, engine, args).await),
        "model" if args.is_empty() => eprintln!("model: {}", session.spec().model),
        "model" => {
            let model = snap.resolve_alias(args).to_string();
            let from = session.spec().model.clone();
            match session.pre_model_switch_hooks(args, "command").await {
                Err(why) => eprintln!("the model stays {from}: {why}"),
                Ok(()) => {
                    session.set_model(model.clone());
                    session.post_model_switch_hooks(&from, "command").await;
                    eprintln!("model: {model} (was {from}), from the next request on");
                }
            }
        }
        "agents" => {
            if let Err(e) = super::agents::print_list(&snap, &super::agents::ListArgs::default()) {
                eprintln!("{e}");
            }
        }
        "config" => {
            let settings = serde_json::to_value(&snap.config.settings).unwrap_or_default();
            super::config::print_settings(&snap.config, &settings, true, "");
        }
        "permissions" if args.is_empty() => {
            let settings = serde_json::to_value(&snap.config.settings).unwrap_or_default();
            super::config::print_settings(&snap.config, &settings, true, "permissions.");
            eprintln!("{}", session_rules(engine));
        }
        "permissions" => eprintln!("{}", edit_session_rules(engine, args)),
        "memory" => super::config::show_instructions(&snap),
        "resume" => {
            let cwd = session.spec().cwd.clone();
            let recent = super::sessions::recent(&snap, &cwd, 10);
            if args.is_empty() {
                if recent.is_empty() {
                    eprintln!("no earlier session of this project to resume");
                }
                for (i, (id, line)) in recent.iter().enumerate() {
                    let this = if *id == engine.session_id {
                        "  (this chat)"
                    } else {
                        ""
                    };
                    eprintln!("{:>3}  {}{this}", i + 1, super::output::shown(line));
                }
                eprintln!("/resume N or /resume SESSION-ID continues one of them here");
            } else {
                let id = match args.parse::<usize>() {
                    Ok(n) if (1..=recent.len()).contains(&n) => recent[n - 1].0.clone(),
                    _ => args.to_string(),
                };
                if id == engine.session_id {
                    eprintln!("{id} is this chat");
                } else {
                    return Some(ChatDone::Resume(id));
                }
            }
        }
        "cost" | "usage" => eprintln!("{}", cost_text(&progress.spent(), &snap)),
        "context" => {
            let spent = progress.spent();
            let model = session.spec().model.clone();
            let window = snap.settings().compact.window(&model);
            match spent.last_main {
                None => eprintln!("context: no request sent yet; window {window} tokens ({model})"),
                Some((_, sent)) => eprintln!(
                    "context: {sent} of {window} tokens ({:.0}%) in the last request; compaction at {} ({model})",
                    sent as f64 * 100.0 / window.max(1) as f64,
                    snap.settings().compact.limit(&model)
                ),
            }
        }
        _ => {
            // Anything `prompted` knows goes on; a word that is not a
            // command is an unknown one, not a prompt.
            let known = runtime::commands::BUILTINS
                .iter()
                .any(|(b, _, _)| *b == name)
                || snap.skills.skills.contains_key(name)
                || name.starts_with("mcp__");
            let word = !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ':' | '.'));
            if known || !word {
                return None;
            }
            eprintln!("unknown command /{name} (type /help for the list)");
        }
    }
    Some(ChatDone::Shown)
}

/// `/permissions`' last part: the rules this session added (an "always"
/// answer, `/permissions allow …`), and how to change them.
fn session_rules(engine: &Engine) -> String {
    let Ok(grants) = engine.grants.lock() else {
        return String::new();
    };
    let mut text = String::from("added in this session:");
    let mut any = false;
    for (behavior, rules) in grants.own() {
        for r in rules {
            any = true;
            text.push_str(&format!("\n  {} {r}", behavior.as_str()));
        }
    }
    if !any {
        text.push_str("\n  none");
    }
    text.push_str(
        "\n/permissions allow|ask|deny RULE adds a rule for this session; /permissions remove RULE takes one of these away (settings files are edited in the files)",
    );
    text
}

/// `/permissions allow|ask|deny RULE` and `/permissions remove RULE`: the
/// session's own rules (added to the settings' rules; a deny rule of any
/// layer still binds).
fn edit_session_rules(engine: &Engine, args: &str) -> String {
    use runtime::grants::{Behavior, PermissionUpdate};
    let (verb, rule) = args.split_once(char::is_whitespace).unwrap_or((args, ""));
    let rule = rule.trim().to_string();
    if rule.is_empty() {
        return "usage: /permissions allow|ask|deny RULE, or /permissions remove RULE".into();
    }
    let update = match verb {
        "allow" | "ask" | "deny" => {
            let behavior = match verb {
                "allow" => Behavior::Allow,
                "ask" => Behavior::Ask,
                _ => Behavior::Deny,
            };
            if let Err(e) = crate::permissions::Rule::parse(&rule) {
                return format!("not a permission rule: {rule}: {e}");
            }
            PermissionUpdate::AddRules {
                behavior,
                rules: vec![rule.clone()],
            }
        }
        "remove" => {
            let Ok(mut g) = engine.grants.lock() else {
                return String::new();
            };
            let found = g.own().iter().any(|(_, rules)| rules.contains(&rule));
            if !found {
                return format!("{rule} is not a rule this session added (see /permissions)");
            }
            for behavior in [Behavior::Allow, Behavior::Ask, Behavior::Deny] {
                g.apply(&PermissionUpdate::RemoveRules {
                    behavior,
                    rules: vec![rule.clone()],
                });
            }
            return format!("removed {rule} for this session");
        }
        other => return format!("unknown /permissions {other}: use allow, ask, deny or remove"),
    };
    let Ok(mut g) = engine.grants.lock() else {
        return String::new();
    };
    g.apply(&update);
    format!("{verb} {rule} for the rest of this session")
}

/// `/cost`: per agent, its requests, tokens, cache-read share and cost.
fn cost_text(spent: &super::output::Spent, snap: &crate::snapshot::Snapshot) -> String {
    let prices = &snap.settings().prices;
    let mut text = String::from("cost so far (this chat):");
    if spent.agents.is_empty() {
        text.push_str("\n  nothing sent yet");
        return text;
    }
    let mut total = 0.0;
    for (agent, (model, requests, u)) in &spent.agents {
        let cost = crate::message::cost_of(crate::message::price_of(prices, model), u);
        total += cost;
        let sent = u.input_tokens + u.cache_read_input_tokens + u.cache_creation_input_tokens;
        let share = u.cache_read_input_tokens as f64 * 100.0 / sent.max(1) as f64;
        text.push_str(&format!(
            "\n  {agent}: {requests} requests, {sent} tokens in ({share:.0}% read from cache), {} out, ${cost:.4} ({model})",
            u.output_tokens
        ));
    }
    text.push_str(&format!("\n  total: ${total:.4}"));
    text
}

/// What Tab completes at the start of a chat line: the built-in commands,
/// the commands and skills, and the prompts of the MCP servers ready when
/// the chat starts.
async fn chat_commands(engine: &Engine) -> Vec<String> {
    let mut names: Vec<String> = runtime::commands::BUILTINS
        .iter()
        .chain(runtime::commands::CHAT_BUILTINS)
        .map(|(name, _, _)| format!("/{name}"))
        .collect();
    names.extend(
        engine
            .snapshot
            .load()
            .skills
            .skills
            .keys()
            .map(|name| format!("/{name}")),
    );
    names.extend(
        crate::mcp::prompt_commands(&engine.mcp)
            .await
            .into_iter()
            .map(|c| format!("/{}", c.command)),
    );
    names
}

/// In a terminal, asks whether to trust a folder whose project settings
/// were skipped, and records the answer with the user's trust list.
fn offer_trust(g: &GlobalArgs) -> Result<(), CliError> {
    use std::io::IsTerminal;
    if g.trust || !std::io::stdin().is_terminal() {
        return Ok(());
    }
    let input = super::snapshot_input(g, &super::Overrides::default())?;
    let snap = crate::snapshot::build(&input, 1)?;
    if snap.config.trusted || snap.config.skipped.is_empty() {
        return Ok(());
    }
    super::report_untrusted(&snap);
    eprint!(
        "Trust {} and use these settings? [y/N] ",
        snap.config.trust_root.display()
    );
    let mut line = String::new();
    if std::io::stdin().read_line(&mut line).is_err() || !matches!(line.trim(), "y" | "Y" | "yes") {
        return Ok(());
    }
    let mut store = crate::config::trust::TrustStore::load(crate::config::trust::store_path(|k| {
        std::env::var(k).ok()
    }))
    .map_err(CliError::Usage)?;
    store.grant(&snap.config.trust_root);
    store.save().map_err(CliError::Failed)?;
    eprintln!("trusted: {}", snap.config.trust_root.display());
    Ok(())
}

/// MCP servers' requests for input, asked on the terminal (stderr, stdin)
/// while the turn waits.
fn terminal_elicitor() -> crate::mcp::Elicitor {
    Arc::new(|ask: crate::mcp::Elicitation| {
        Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                use std::io::Write;
                let _terminal = super::turn_keys::hold_terminal();
                let mut read = || {
                    let mut line = String::new();
                    match std::io::stdin().read_line(&mut line) {
                        Ok(0) | Err(_) => None,
                        Ok(_) => Some(line),
                    }
                };
                let mut write = |s: &str| {
                    let mut err = std::io::stderr();
                    let _ = err.write_all(s.as_bytes());
                    let _ = err.flush();
                };
                super::elicit::dialogue(&ask, &mut read, &mut write)
            })
            .await
            .unwrap_or(crate::mcp::ElicitAnswer {
                action: crate::mcp::ElicitAction::Cancel,
                content: None,
            })
        })
    })
}

pub async fn chat(g: &GlobalArgs, args: ChatArgs) -> Result<(), CliError> {
    offer_trust(g)?;
    let mut chat = Chat::open(g, &args.session)?;
    let current = cancel_on_sigterm(&chat);
    let mut editor = line_editor(&chat).await?;
    eprintln!(
        "cadre chat — type a task; a \\ at the end of a line (or Alt-Enter) goes on to the next; Esc or Ctrl-C cancels a running turn, Ctrl-D quits."
    );
    let source = if args.session.resuming() {
        "resume"
    } else {
        "startup"
    };
    chat.start_context = chat.session.session_start_hooks(source).await;
    // What was typed while the last turn ran, for the next prompt.
    let mut typed = String::new();
    loop {
        chat.show_status().await;
        let line = match chat.read_line(&mut editor, &mut typed).await? {
            Next::End => break,
            Next::Again => continue,
            Next::Line(line) => line,
        };
        editor.remember(&line);
        // Chat's own built-ins (a person at a terminal), and an unknown
        // `/name`, are answered here and never reach the model.
        match chat_builtin(&line, &mut chat.session, &chat.engine, &chat.progress).await {
            Some(ChatDone::Exit) => break,
            Some(ChatDone::Shown) => continue,
            Some(ChatDone::Resume(id)) => {
                chat.resume(id).await;
                continue;
            }
            None => {}
        }
        let Some(prompt) = chat.expand(&line).await? else {
            continue;
        };
        let (result, before) = chat.run_turn(prompt, &current, &mut typed).await;
        chat.report_turn(result, before);
    }
    chat.end_session(
        "prompt_input_exit",
        serde_json::json!({"status": "completed"}),
    )
    .await;
    Ok(())
}

/// A permission question asked on the terminal: yes, no, or (when the
/// rules can keep it) always.
fn terminal_asker() -> runtime::Asker {
    Arc::new(|ask: runtime::AskRequest| {
        let question = permission_question(&ask);
        let suggested = super::wire::permission_answer(&serde_json::json!({
            "behavior": "allow",
            "updatedPermissions": super::wire::permission_suggestions(&ask.tool, &ask.input),
        }));
        let always = super::remember::offer(suggested.updates);
        Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                let _terminal = super::turn_keys::hold_terminal();
                eprint!("{question}\n{} ", allow_choices(always.as_ref()));
                let mut line = String::new();
                if std::io::stdin().read_line(&mut line).is_err() {
                    return false.into();
                }
                match (line.trim(), always) {
                    ("y" | "Y" | "yes", _) => true.into(),
                    ("a" | "A" | "always", Some(offer)) => runtime::AskAnswer {
                        allow: true,
                        updates: super::remember::keep(offer.updates),
                        ..runtime::AskAnswer::default()
                    },
                    _ => false.into(),
                }
            })
            .await
            .unwrap_or_else(|_| false.into())
        })
    })
}

/// How chat's sessions are set up.
fn chat_mode() -> Mode {
    Mode {
        interactive: true,
        write_transcripts: true,
        wait_for_background: false,
        connect_mcp: true,
    }
}

/// What the prompt line gave the chat loop.
enum Next {
    Line(String),
    /// Nothing to send (an empty line, Ctrl-C at the prompt): ask again.
    Again,
    End,
}

/// A prompt as the model gets it: its blocks, the skill it activated, and
/// the UserPromptSubmit hooks' context.
type Expanded = (
    Vec<ContentBlock>,
    Option<runtime::todos::ActiveSkill>,
    Vec<ContentBlock>,
);

/// The chat's session now, and what it takes to make the next one
/// (`/clear`, `/resume`).
struct Chat<'a> {
    g: &'a GlobalArgs,
    args: &'a SessionArgs,
    progress: Arc<Progress>,
    asker: runtime::Asker,
    extras: Extras,
    session: Session,
    engine: Arc<Engine>,
    def: Option<Arc<crate::catalog::AgentDef>>,
    /// The reload watcher of the session's snapshot (stops when dropped).
    reload: Option<crate::reload::ReloadHandle>,
    /// The next prompt is the session's first (it carries the memory).
    first: bool,
    /// What the SessionStart hooks said, for the next prompt.
    start_context: Vec<ContentBlock>,
    /// The chat began in bypassPermissions: Shift-Tab offers it again.
    bypass_offered: bool,
}

impl<'a> Chat<'a> {
    /// The chat's first session.
    fn open(g: &'a GlobalArgs, args: &'a SessionArgs) -> Result<Chat<'a>, CliError> {
        let progress = Progress::new(true, g.quiet);
        let asker = terminal_asker();
        let extras = Extras {
            elicitor: Some(terminal_elicitor()),
            questioner: Some(super::ask::terminal_questioner(Arc::clone(&progress))),
            ..Extras::default()
        };
        let prepared = prepare_with(
            g,
            args,
            chat_mode(),
            progress.sink(),
            Some(Arc::clone(&asker)),
            extras.clone(),
        )?;
        let reload = prepared.watch();
        let Prepared {
            mut session,
            def,
            engine,
            ..
        } = prepared;
        progress.display_through(session.stream_display());
        let bypass_offered =
            session.spec().mode == crate::config::PermissionMode::BypassPermissions;
        Ok(Chat {
            g,
            args,
            progress,
            asker,
            extras,
            session,
            engine,
            def,
            reload,
            first: !args.resuming(),
            start_context: Vec::new(),
            bypass_offered,
        })
    }

    /// A main session for `args`, set up as the chat's are.
    fn prepare(&self, args: &SessionArgs, extras: Extras) -> Result<Prepared, CliError> {
        prepare_with(
            self.g,
            args,
            chat_mode(),
            self.progress.sink(),
            Some(Arc::clone(&self.asker)),
            extras,
        )
    }

    /// `prepared` becomes the chat's session.
    fn take(&mut self, prepared: Prepared, first: bool) {
        self.reload = prepared.watch();
        self.session = prepared.session;
        self.engine = prepared.engine;
        self.def = prepared.def;
        self.first = first;
        self.progress.display_through(self.session.stream_display());
    }

    /// The session ends: its SessionEnd hooks (`reason`), its tasks and
    /// MCP servers stopped, the transcript's last line (`end`).
    async fn end_session(&mut self, reason: &str, end: serde_json::Value) {
        self.session.session_end_hooks(reason).await;
        self.engine
            .shutdown(std::time::Duration::from_secs(5))
            .await;
        self.session.transcript().record("end", end);
    }

    /// `/resume ID`: that session goes on here. It is checked before this
    /// one ends: a wrong id leaves the chat as it was.
    async fn resume(&mut self, id: String) {
        let resumed = SessionArgs {
            resume: Some(id.clone()),
            continue_latest: false,
            fork_session: false,
            ..self.args.clone()
        };
        let prepared = match self.prepare(&resumed, self.extras.clone()) {
            Ok(p) => p,
            Err(e) => {
                eprintln!("cannot resume {id}: {e}");
                return;
            }
        };
        self.end_session(
            "resume",
            serde_json::json!({"status": "completed", "resumed_other": id}),
        )
        .await;
        self.take(prepared, false);
        self.start_context = self.session.session_start_hooks("resume").await;
        eprintln!(
            "resumed session {} ({} messages)",
            self.engine.session_id,
            self.session.history().len()
        );
    }

    /// `/clear`: a new session; the old one ends (its transcript stays).
    async fn clear(&mut self) -> Result<(), CliError> {
        self.end_session(
            "clear",
            serde_json::json!({"status": "completed", "cleared": true}),
        )
        .await;
        let fresh = SessionArgs {
            resume: None,
            continue_latest: false,
            fork_session: false,
            ..self.args.clone()
        };
        let mut extras = self.extras.clone();
        extras.session_id = Some(new_session_id());
        let prepared = self.prepare(&fresh, extras)?;
        self.take(prepared, true);
        self.start_context = self.session.session_start_hooks("clear").await;
        eprintln!("cleared: new session {}", self.engine.session_id);
        Ok(())
    }

    /// The dimmed line above the prompt.
    async fn show_status(&self) {
        let status = status_line(&self.session, &self.engine, &self.progress).await;
        eprintln!("{}", super::output::dim(&status));
    }

    /// The next prompt: a line typed and entered while the last turn ran,
    /// else one read on the prompt line (a line typed there without Enter
    /// waits on it). Shift-Tab moves to the next permission mode and
    /// keeps what was on the line.
    async fn read_line(
        &mut self,
        editor: &mut super::chat_input::ChatInput,
        typed: &mut String,
    ) -> Result<Next, CliError> {
        use super::chat_input::Read;
        if typed.starts_with(super::turn_keys::END) {
            return Ok(Next::End);
        }
        let line = if let Some((line, rest)) = typed.split_once('\n') {
            let line = line.to_string();
            *typed = rest.to_string();
            eprintln!("› {line}");
            line
        } else {
            let mut on_line = std::mem::take(typed);
            loop {
                match editor.read("› ", &on_line) {
                    Ok(Read::Prompt(line)) => break line,
                    Ok(Read::NextMode(kept)) => {
                        self.next_mode();
                        self.show_status().await;
                        on_line = kept;
                    }
                    Ok(Read::End) => return Ok(Next::End),
                    Err(rustyline::error::ReadlineError::Interrupted) => return Ok(Next::Again),
                    Err(e) => return Err(CliError::Failed(format!("input: {e}"))),
                }
            }
        };
        Ok(if line.trim().is_empty() {
            Next::Again
        } else {
            Next::Line(line)
        })
    }

    /// Shift-Tab: the next permission mode, from the next tool call on (a
    /// mode an "always" answer set counts as the current one).
    fn next_mode(&mut self) {
        let granted = self
            .engine
            .grants
            .lock()
            .ok()
            .and_then(|mut g| g.mode.take());
        let now = granted.unwrap_or(self.session.spec().mode);
        let next = super::chat_input::next_mode(now, self.bypass_offered);
        self.session.set_mode(next, "shift_tab");
    }

    /// The typed line as the model gets it, or `None` when it was answered
    /// here: UserPromptSubmit sees it as typed, before a slash command is
    /// expanded; a skill or command is expanded (its shell lines run now,
    /// asking as any call would); built-ins run here.
    async fn expand(&mut self, line: &str) -> Result<Option<Expanded>, CliError> {
        let contexts = match self.session.user_prompt_hooks(line).await {
            Ok(c) => c,
            Err(reason) => {
                eprintln!("UserPromptSubmit hook blocked the prompt: {reason}");
                return Ok(None);
            }
        };
        let prompted = self
            .session
            .prompted(vec![ContentBlock::text(line.to_string())])
            .await;
        match prompted {
            runtime::commands::Prompted::Send {
                blocks,
                skill,
                notes,
            } => {
                let (blocks, skill) = sent(blocks, skill, notes);
                return Ok(Some((blocks, skill, contexts)));
            }
            runtime::commands::Prompted::Local(text) => eprintln!("{text}"),
            runtime::commands::Prompted::Builtin("compact", instructions) => eprintln!(
                "{}",
                compact_now(&mut self.session, &self.engine, &instructions).await
            ),
            runtime::commands::Prompted::Builtin("clear", _) => self.clear().await?,
            runtime::commands::Prompted::Builtin(name, _) => {
                eprintln!("{}", help_text(&self.engine, name, true).await);
            }
        }
        Ok(None)
    }

    /// Runs one prompt until the model answers, Esc or Ctrl-C cancels it
    /// (`None`), or it fails; `typed` gets what was typed meanwhile. Also
    /// gives where this prompt's replies start in the history.
    async fn run_turn(
        &mut self,
        (prompt, active, contexts): Expanded,
        current: &std::sync::Mutex<CancellationToken>,
        typed: &mut String,
    ) -> (Option<Result<runtime::Outcome, RunError>>, usize) {
        let mut message = if self.first {
            first_message_with(&self.engine, self.def.as_deref(), prompt)
        } else {
            Message::user(prompt)
        };
        message.content.extend(contexts);
        message.content.append(&mut self.start_context);
        self.first = false;
        let session = &mut self.session;
        session.push_user_with(message, active);
        let before = session.history().len();
        let cancel = CancellationToken::new();
        if let Ok(mut c) = current.lock() {
            *c = cancel.clone();
        }
        session.set_cancel(cancel.clone());
        session.begin_prompt();
        // Esc cancels the turn as Ctrl-C does.
        let keys = super::turn_keys::TurnKeys::watch(cancel.clone());
        let result = tokio::select! {
            r = session.run() => Some(r),
            _ = tokio::signal::ctrl_c() => { cancel.cancel(); None }
            () = cancel.cancelled() => None,
        };
        *typed = keys.finish();
        self.progress.end_text();
        outln!();
        (result, before)
    }

    /// After a turn: a warning when the model gave no answer to this
    /// prompt, the error, or the cancelled turn repaired.
    fn report_turn(&mut self, result: Option<Result<runtime::Outcome, RunError>>, before: usize) {
        match result {
            Some(Ok(outcome)) => {
                // Only this prompt's replies count: an earlier answer in the
                // conversation does not answer this one.
                let replies = self.session.history().get(before..).unwrap_or_default();
                let answered = replies.iter().any(|m| {
                    m.role == Role::Assistant
                        && m.content
                            .iter()
                            .filter_map(ContentBlock::as_text)
                            .any(|t| !t.trim().is_empty())
                });
                if !answered {
                    eprintln!(
                        "{}",
                        empty_answer_warning(outcome.stop.as_str(), outcome.turns)
                    );
                }
            }
            Some(Err(e)) if !matches!(e, RunError::Cancelled) => eprintln!("error: {e}"),
            Some(Err(_)) | None => {
                self.session.repair_after_cancel();
                self.progress.clear_calls();
                eprintln!("(cancelled)");
            }
        }
    }
}

/// SIGTERM ends the chat at any point, even at the prompt: the turn in
/// flight is cancelled (its Bash groups killed), tasks and MCP servers are
/// stopped, the transcript gets its final line, then the process exits
/// with 143 (128 + SIGTERM). Gives the slot for the running turn's token.
fn cancel_on_sigterm(chat: &Chat<'_>) -> Arc<std::sync::Mutex<CancellationToken>> {
    let current: Arc<std::sync::Mutex<CancellationToken>> =
        Arc::new(std::sync::Mutex::new(CancellationToken::new()));
    let slot = Arc::clone(&current);
    let engine = Arc::clone(&chat.engine);
    let transcript = Arc::clone(chat.session.transcript());
    tokio::spawn(async move {
        super::signals::terminated().await;
        if let Ok(c) = slot.lock() {
            c.cancel();
        }
        engine.shutdown(std::time::Duration::from_secs(5)).await;
        transcript.record(
            "end",
            serde_json::json!({"status": "killed", "signal": "SIGTERM"}),
        );
        // The exports run on this runtime: this thread leaves it while
        // the last ones go out.
        tokio::task::block_in_place(crate::telemetry::shutdown);
        super::turn_keys::restore_terminal();
        std::process::exit(143);
    });
    current
}

/// The prompt line, completing the chat's commands and the agents a
/// prompt may name.
async fn line_editor(chat: &Chat<'_>) -> Result<super::chat_input::ChatInput, CliError> {
    let agents: Vec<String> = chat
        .engine
        .snapshot
        .load()
        .visible_agents(chat.session.spec().kind)
        .iter()
        .map(|d| d.name.clone())
        .collect();
    super::chat_input::ChatInput::new(chat_commands(&chat.engine).await, &agents)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn ask(tool: &str, input: serde_json::Value) -> runtime::AskRequest {
        runtime::AskRequest {
            question: String::new(),
            agent_id: "main".into(),
            tool_use_id: "toolu_1".into(),
            tool: tool.into(),
            input,
            reason: "permission mode 'default'".into(),
        }
    }

    #[test]
    fn a_permission_question_shows_the_exact_command_and_why() {
        let q = permission_question(&ask(
            "Bash",
            serde_json::json!({"command": "rm -rf build \u{1b}]52;c;eA==\u{7}", "description": "clean"}),
        ));
        assert_eq!(
            q,
            "main wants to run this command:\n    rm -rf build ␛]52;c;eA==␇\n  (permission mode 'default')"
        );
        let q = permission_question(&ask("Write", serde_json::json!({"file_path": "/etc/x"})));
        assert_eq!(
            q,
            "main wants to use Write:\n    {\"file_path\":\"/etc/x\"}\n  (permission mode 'default')"
        );
    }
}
