//! The command line: clap definitions, one file per subcommand, output
//! formats and exit codes (0 success, 1 a task or validation failed, 2 bad
//! usage or configuration). Uses only the public API of the modules below.

/// `println!` for command output: a closed stdout (`cadre … | head`) ends
/// the program quietly instead of panicking.
macro_rules! outln {
    () => { $crate::cli::output::write_out(format_args!("")) };
    ($($arg:tt)*) => { $crate::cli::output::write_out(format_args!($($arg)*)) };
}

mod agents;
mod args;
mod ask;
mod auth;
mod chat;
mod chat_input;
mod commands;
mod config;
mod control;
mod display;
mod elicit;
mod emit;
mod flags;
mod headless;
mod headless_flags;
mod listings;
mod markdown;
mod mcp;
mod output;
mod permissions;
mod plugins;
mod prepare;
mod remember;
mod results;
mod run;
mod sessions;
mod signals;
mod skills;
mod teams;
mod tools;
mod trust;
mod turn_keys;
mod ui;
mod watch;
pub mod wire;
mod worker;
mod worktrees;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use arc_swap::ArcSwap;
use clap::{Args, Parser, Subcommand};

use crate::config::{CliOverrides, ConfigError, FlagValue, LoadInput, PermissionMode, Scope};
use crate::snapshot::{self, Snapshot, SnapshotInput};

/// cadre: a declarative agent engine. Agents, feature flags, prompt
/// templates and tool schemas are files; cadre loads them, reloads them
/// when they change, and runs agents and their sub-agents against a model.
#[derive(Debug, Parser)]
#[command(name = "cadre", disable_version_flag = true, max_term_width = 100)]
#[command(
    after_help = "Settings layers, lowest first: defaults < user (~/.claude/settings.json, ~/.config/cadre/cadre.toml) < \
project (.claude/settings.json, then --config PATH, CADRE_CONFIG, or cadre.toml, cadre.yaml, config/cadre.toml, \
config/cadre.yaml in the working directory) < local (.claude/settings.local.json) < --settings FILE|JSON < CADRE_* environment \
(CADRE_PROVIDER__MODEL=...) < command line < managed (/etc/claude-code/managed-settings.json, /etc/cadre/cadre.toml). \
`--setting-sources user,project,local` limits which of those three are read. \
`cadre config show --origin` shows where each value came from; a project's hooks, MCP servers and provider settings \
need `cadre trust`.\n\nHeadless mode: `cadre -p \"task\"` takes Claude Code's flags (--output-format, --input-format, --allowedTools, ...; see docs/headless.md).\n\nExit codes: 0 success, 1 the task or validation failed, 2 bad usage or configuration."
)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(flatten)]
    pub headless: args::HeadlessArgs,
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Clone, Args)]
pub struct GlobalArgs {
    /// Config file (TOML or YAML, by extension).
    #[arg(long, global = true, value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// Set a feature flag for this run; repeatable.
    #[arg(long = "feature", global = true, value_name = "NAME=on|off")]
    pub features: Vec<String>,
    /// Extra agents as a JSON object of name → definition (the `cli` source).
    #[arg(long, global = true, value_name = "JSON")]
    pub agents: Option<String>,
    /// Treat DIR as the working directory (discovery, tools, transcripts).
    #[arg(long, global = true, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// More log output on stderr (-v info, -vv debug, -vvv trace).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Only errors on stderr.
    #[arg(short, long, global = true)]
    pub quiet: bool,
    /// No colours or other escape sequences in what cadre draws (as
    /// `NO_COLOR` set to anything non-empty).
    #[arg(long, global = true)]
    pub no_color: bool,
    /// Print the version (the Claude Code version cadre is compatible with, then cadre's).
    #[arg(short = 'V', long, global = true)]
    pub version: bool,
    /// Obey this folder's project settings in full for this run (hooks, MCP
    /// servers, provider URL and key) without recording trust.
    #[arg(long, global = true)]
    pub trust: bool,
    /// One more settings layer, above the local one: a settings file (Claude
    /// Code's JSON, or cadre's TOML/YAML by extension) or a JSON object.
    #[arg(long, global = true, value_name = "FILE|JSON")]
    pub settings: Option<String>,
    /// Read only these of the user, project and local settings layers
    /// (comma separated; empty for none). Managed settings are always read.
    #[arg(long, global = true, value_name = "SOURCES")]
    pub setting_sources: Option<String>,
    /// Coordinator mode for this run (`mode = "coordinator"`): the main
    /// session directs background workers and keeps only the tools for that.
    #[arg(long, global = true)]
    pub coordinator: bool,
    /// A plugin folder to load for this run (Claude Code's `--plugin-dir`;
    /// repeatable).
    #[arg(long = "plugin-dir", global = true, value_name = "DIR")]
    pub plugin_dirs: Vec<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run one task to completion, non-interactively (PROMPT or stdin).
    Run(args::RunArgs),
    /// An interactive session: type prompts, see answers stream in.
    Chat(args::ChatArgs),
    /// Print the first request body that `run` would send, without sending it.
    Render(args::RenderArgs),
    /// Inspect and check agent definitions.
    #[command(subcommand)]
    Agents(agents::AgentsCommand),
    /// Inspect tool definitions.
    #[command(subcommand)]
    Tools(tools::ToolsCommand),
    /// Inspect skills and slash commands (SKILL.md folders, .claude/commands;
    /// `cadre commands` is the same command).
    #[command(subcommand, alias = "commands")]
    Skills(skills::SkillsCommand),
    /// Claude Code plugins: list those loaded and installed, install one
    /// from a marketplace, remove one (docs/plugins.md).
    #[command(subcommand, alias = "plugin")]
    Plugins(plugins::PluginsCommand),
    /// Every feature flag: value, where it was set, effective or not.
    Flags(flags::FlagsArgs),
    /// Agent worktrees kept under the current repository.
    #[command(subcommand)]
    Worktrees(worktrees::WorktreesCommand),
    /// Agent teams (AGENT_TEAMS): members, inboxes and tasks.
    #[command(subcommand)]
    Teams(teams::TeamsCommand),
    /// Watch the files and print one line per reload until interrupted.
    Watch(watch::WatchArgs),
    /// Show the effective settings and where each came from, or check them.
    #[command(subcommand)]
    Config(config::ConfigCommand),
    /// Trust a folder (its hooks, MCP servers, provider settings), list or revoke.
    Trust(trust::TrustArgs),
    /// Test permission rules against a tool call.
    #[command(subcommand)]
    Permissions(permissions::PermissionsCommand),
    /// Sessions kept in this project's transcript folder: list, show, rm.
    #[command(subcommand)]
    Sessions(sessions::SessionsCommand),
    /// Connect to the configured MCP servers and show them (trusted folders only).
    #[command(subcommand)]
    Mcp(mcp::McpCommand),
    /// Run background sub-agents published to a NATS JetStream pool
    /// (`[distributed] backend = "nats"`; docs/distributed.md).
    Worker(worker::WorkerArgs),
    /// Background tasks across the worker fleet.
    #[command(subcommand)]
    Tasks(worker::TasksCommand),
    /// Which API key the model provider uses (`auth status [--json]`, as
    /// Claude Code's, for editors' ACP adapters).
    #[command(subcommand)]
    Auth(auth::AuthCommand),
    /// A live web view of this project's sessions on 127.0.0.1: agent
    /// trees, transcripts, the fleet's tasks (docs/observability.md).
    Ui(ui::UiArgs),
}

/// How a command failed, which decides the exit code.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// Bad usage or configuration: exit 2.
    #[error("{0}")]
    Usage(String),
    #[error("{0}")]
    Config(#[from] ConfigError),
    /// The task or the check failed: exit 1.
    #[error("{0}")]
    Failed(String),
    /// Already reported; exit with this code.
    #[error("")]
    Exit(u8),
}

impl CliError {
    fn code(&self) -> u8 {
        match self {
            CliError::Usage(_) | CliError::Config(_) => 2,
            CliError::Failed(_) => 1,
            CliError::Exit(c) => *c,
        }
    }
}

/// Makes this process non-dumpable (`PR_SET_DUMPABLE` 0): the commands
/// cadre starts run as the same user, and without this could read the
/// provider key from `/proc/<cadre>/environ` or cadre's memory through
/// `/proc/<cadre>/mem`. A non-dumpable process's `/proc` files belong to
/// root, it leaves no core dump, and only a process with `CAP_SYS_PTRACE`
/// (root) may read or trace it. Children are not affected: `execve` makes
/// every new program dumpable again. (Removing the key from the
/// environment would not help: `/proc/PID/environ` shows the block the
/// process started with, whatever `unsetenv` does later.)
#[cfg(target_os = "linux")]
fn protect_process() -> nix::Result<()> {
    nix::sys::prctl::set_dumpable(false)
}

#[cfg(not(target_os = "linux"))]
fn protect_process() -> Result<(), std::convert::Infallible> {
    Ok(())
}

/// The entry point: parses arguments, runs the command, returns the exit code.
pub fn main() -> ExitCode {
    // The sandbox's own program (`cadre __sandbox-exec`) runs before
    // anything else: no command line tree, no runtime, no logging.
    if let Some(code) = crate::tools::sandbox::enter::main_if_asked() {
        return code;
    }
    let unprotected = protect_process().err();
    // `cadre --version` alone is answered before the command line is
    // parsed: building the whole command tree was most of that start.
    if version_only(std::env::args_os().skip(1)) {
        outln!("{}", wire::version_line());
        return ExitCode::SUCCESS;
    }
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    if cli.global.version {
        outln!("{}", wire::version_line());
        return ExitCode::SUCCESS;
    }
    if cli.global.no_color {
        output::turn_colour_off();
    }
    init_logging(&cli.global, cli.command.is_none());
    if let Some(e) = unprotected {
        tracing::warn!(
            "cannot make cadre's process unreadable to the commands it runs (prctl: {e}); \
             they may read the provider key from /proc"
        );
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let result = runtime.block_on(dispatch(cli));
    // The last metrics, events and spans go out before the process ends
    // (the exports run on the runtime, which is still there).
    crate::telemetry::shutdown();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let msg = e.to_string();
            if !msg.is_empty() {
                match &e {
                    CliError::Config(c) => {
                        for d in &c.diagnostics {
                            eprintln!("{d}");
                        }
                    }
                    _ => eprintln!("error: {msg}"),
                }
            }
            ExitCode::from(e.code())
        }
    }
}

/// Whether the arguments are exactly `--version` or `-V`.
fn version_only(mut args: impl Iterator<Item = std::ffi::OsString>) -> bool {
    matches!(
        (args.next(), args.next()),
        (Some(a), None) if a == "--version" || a == "-V"
    )
}

async fn dispatch(cli: Cli) -> Result<(), CliError> {
    let g = cli.global;
    let Some(command) = cli.command else {
        if cli.headless.selected() {
            return headless::headless(&g, cli.headless).await;
        }
        if cli.headless.init || cli.headless.maintenance {
            return Err(CliError::Usage(
                "--init and --maintenance run the Setup hooks before a headless session: \
                 add -p \"task\" (or use --init-only to run the hooks and exit)"
                    .into(),
            ));
        }
        if let Some(word) = &cli.headless.prompt {
            return Err(CliError::Usage(format!(
                "unknown command `{word}` (see cadre --help); to run it as a prompt: cadre -p {word:?}"
            )));
        }
        use clap::CommandFactory;
        let _ = Cli::command().print_help();
        return Err(CliError::Usage(
            "no command: give a subcommand (cadre run \"task\") or -p \"task\"".into(),
        ));
    };
    if cli.headless.any() {
        return Err(CliError::Usage(
            "Claude Code's flags (-p, --output-format, --allowedTools, …) go without a subcommand: \
             cadre -p \"task\" [FLAGS]; subcommands take their own options (cadre run --help)"
                .into(),
        ));
    }
    match command {
        Command::Run(args) => run::run(&g, args).await,
        Command::Chat(args) => chat::chat(&g, args).await,
        Command::Render(args) => run::render(&g, args).await,
        Command::Agents(cmd) => agents::dispatch(&g, cmd).await,
        Command::Skills(cmd) => skills::dispatch(&g, cmd),
        Command::Plugins(cmd) => plugins::dispatch(&g, cmd),
        Command::Tools(cmd) => tools::dispatch(&g, cmd).await,
        Command::Mcp(cmd) => mcp::dispatch(&g, cmd).await,
        Command::Flags(args) => flags::flags(&g, args),
        Command::Auth(cmd) => auth::dispatch(&g, cmd),
        Command::Worktrees(cmd) => worktrees::dispatch(&g, cmd),
        Command::Teams(cmd) => teams::dispatch(&g, cmd),
        Command::Watch(args) => watch::watch(&g, args).await,
        Command::Trust(args) => trust::trust(&g, args),
        Command::Config(cmd) => config::dispatch(&g, cmd),
        Command::Permissions(cmd) => permissions::dispatch(&g, cmd),
        Command::Sessions(cmd) => sessions::dispatch(&g, cmd),
        Command::Worker(args) => worker::worker(&g, args).await,
        Command::Tasks(cmd) => worker::dispatch(&g, cmd).await,
        Command::Ui(args) => ui::ui(&g, args).await,
    }
}

fn init_logging(g: &GlobalArgs, headless: bool) {
    // Claude Code's `--verbose` (which the SDKs always pass) is about
    // stream-json output, not logging: in headless mode one -v is not a level.
    let level = if headless {
        g.verbose.saturating_sub(1)
    } else {
        g.verbose
    };
    let default = if g.quiet {
        "error"
    } else {
        match level {
            // rmcp logs transport errors that cadre reports itself.
            0 => "warn,rmcp=off",
            1 => "info",
            2 => "debug",
            _ => "trace",
        }
    };
    let filter = std::env::var("CADRE_LOG")
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| default.to_string());
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
        .with_writer(std::io::stderr)
        .with_target(false)
        .without_time()
        .try_init();
}

/// Extra settings a subcommand contributes.
#[derive(Debug, Default, Clone)]
pub struct Overrides {
    pub model: Option<String>,
    pub permission_mode: Option<PermissionMode>,
    /// Settings as `CADRE_*` variables, after the process environment.
    pub env: Vec<(String, String)>,
    /// `--allowedTools`/`--disallowedTools`: rules of the `cli` layer.
    pub allow: Vec<String>,
    pub deny: Vec<String>,
}

/// The working directory commands act on.
pub fn working_dir(g: &GlobalArgs) -> Result<PathBuf, CliError> {
    let cwd = std::env::current_dir()
        .map_err(|e| CliError::Usage(format!("cannot read the working directory: {e}")))?;
    match &g.cwd {
        Some(d) => {
            let d = if d.is_relative() {
                cwd.join(d)
            } else {
                d.clone()
            };
            if !d.is_dir() {
                return Err(CliError::Usage(format!(
                    "--cwd {}: not a directory",
                    d.display()
                )));
            }
            Ok(d)
        }
        None => Ok(cwd),
    }
}

/// The inputs of a snapshot for this invocation.
pub fn snapshot_input(g: &GlobalArgs, o: &Overrides) -> Result<SnapshotInput, CliError> {
    let mut features = Vec::new();
    for f in &g.features {
        let (name, value) = f.split_once('=').ok_or_else(|| {
            CliError::Usage(format!("--feature {f}: expected NAME=on or NAME=off"))
        })?;
        let on = FlagValue::parse(value).ok_or_else(|| {
            CliError::Usage(format!(
                "--feature {f}: expected on or off after `=`, found {value:?}"
            ))
        })?;
        features.push((name.trim().to_string(), on));
    }
    let setting_sources = match &g.setting_sources {
        None => None,
        Some(list) => {
            let mut scopes = Vec::new();
            for name in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                scopes.push(Scope::from_source_name(name).ok_or_else(|| {
                    CliError::Usage(format!(
                        "--setting-sources: unknown source {name:?} (expected user, project, local)"
                    ))
                })?);
            }
            Some(scopes)
        }
    };
    Ok(SnapshotInput {
        load: LoadInput {
            cwd: working_dir(g)?,
            config: g.config.clone(),
            env: std::env::vars().chain(o.env.iter().cloned()).collect(),
            cli: CliOverrides {
                features,
                model: o.model.clone(),
                permission_mode: o.permission_mode,
                trust: g.trust,
                settings: g.settings.clone(),
                setting_sources,
                allow: o.allow.clone(),
                deny: o.deny.clone(),
                mode: g.coordinator.then_some(crate::config::Mode::Coordinator),
                plugin_dirs: g.plugin_dirs.clone(),
                host_settings: Default::default(),
            },
        },
        cli_agents: g.agents.clone(),
        home: dirs::home_dir(),
    })
}

/// Says on stderr what an untrusted folder's settings asked for and did
/// not get, and how to trust the folder.
pub fn report_untrusted(snap: &Snapshot) {
    let c = &snap.config;
    if c.skipped.is_empty() {
        return;
    }
    eprintln!(
        "cadre: {} is not a trusted folder; these project settings were skipped:",
        c.trust_root.display()
    );
    for s in &c.skipped {
        eprintln!("  {} ({})", s.what, s.origin);
    }
    eprintln!(
        "Trust the folder with `cadre trust {}` (or pass --trust for one run).",
        c.trust_root.display()
    );
}

/// Builds the snapshot and prints its warnings (unless `--quiet`).
pub fn load_snapshot(
    g: &GlobalArgs,
    o: &Overrides,
) -> Result<(SnapshotInput, Arc<ArcSwap<Snapshot>>), CliError> {
    let input = snapshot_input(g, o)?;
    let snap = snapshot::build(&input, 1)?;
    if !g.quiet {
        for d in &snap.diagnostics {
            eprintln!("{d}");
        }
        report_untrusted(&snap);
    }
    Ok((input, Arc::new(ArcSwap::from_pointee(snap))))
}

#[cfg(test)]
mod tests {
    use super::version_only;

    #[test]
    fn only_a_lone_version_flag_skips_the_parser() {
        let args = |a: &[&str]| a.iter().map(std::ffi::OsString::from).collect::<Vec<_>>();
        assert!(version_only(args(&["--version"]).into_iter()));
        assert!(version_only(args(&["-V"]).into_iter()));
        // Anything else goes through clap (which also knows `run -V`).
        assert!(!version_only(args(&[]).into_iter()));
        assert!(!version_only(args(&["--version", "run"]).into_iter()));
        assert!(!version_only(args(&["run", "--version"]).into_iter()));
        assert!(!version_only(args(&["--versio"]).into_iter()));
    }
}
