//! The snapshot: everything loaded from files, as one immutable value.
//!
//! Building a snapshot is a plain function of the files and the inputs
//! (working directory, environment, command line): settings and flags,
//! the agent catalog, templates and tool specs. A session reads one snapshot
//! at the start of each turn and uses it for the whole turn; a reload swaps
//! in a new one for the turns that start afterwards.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::catalog::{self, AgentDef, Catalog, CatalogInput};
use crate::config::{
    self, ConfigError, DISABLE_BACKGROUND_TASKS, FORK_SUBAGENT, Flags, LoadInput, LoadedConfig,
    Mode, SessionKind, Settings,
};
use crate::diagnostic::Diagnostic;
use crate::templates::Templates;
use crate::tools::spec::ToolSpecs;

/// The condition word that holds while the sandbox is on and a Bash call
/// may ask to run outside it (`sandbox.allowUnsandboxedCommands`): the
/// Bash tool's `dangerouslyDisableSandbox` is offered only then.
pub const UNSANDBOXED_COMMANDS: &str = "unsandboxed_commands";

/// What a snapshot is built from, besides the files themselves.
#[derive(Debug, Clone, Default)]
pub struct SnapshotInput {
    pub load: LoadInput,
    /// `--agents JSON`.
    pub cli_agents: Option<String>,
    /// The user's home folder (for `~/.claude/agents`).
    pub home: Option<PathBuf>,
}

impl SnapshotInput {
    pub fn cwd(&self) -> &Path {
        &self.load.cwd
    }
}

/// One consistent view of every file cadre reads.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// Counts builds in one process: 1 for the first, +1 per successful reload.
    pub generation: u64,
    pub config: LoadedConfig,
    pub catalog: Catalog,
    pub templates: Templates,
    pub tools: ToolSpecs,
    /// Every non-fatal problem found while building, from all parts.
    pub diagnostics: Vec<Diagnostic>,
    /// Folders whose contents the snapshot depends on (for the watcher).
    pub watched_dirs: Vec<PathBuf>,
    /// The shared MCP servers: `.mcp.json` files under `[mcp_servers]`.
    pub mcp_servers: std::collections::BTreeMap<String, config::McpServerConfig>,
    /// Where each of `mcp_servers` was written: `FILE:LINE:COL` of a
    /// `.mcp.json` entry, a settings origin, or `plugin`.
    pub mcp_origins: std::collections::BTreeMap<String, String>,
    /// Project memory (`CLAUDE.md` and its imports, rule files), in order.
    pub memory: catalog::Memory,
    /// Every output style, and the one `output_style` chose.
    pub output_styles: catalog::styles::OutputStyles,
    /// The merged permission rules, parsed once here (a malformed rule was
    /// reported with its position and is left out).
    pub rules: Arc<crate::permissions::Rules>,
    /// The settings' hooks, matchers compiled once here (a hook whose
    /// matcher is invalid was reported with its position and is left out).
    pub hooks: Arc<config::Hooks>,
    /// Skills (`SKILL.md` folders) by name.
    pub skills: Arc<catalog::Skills>,
    /// Team files (`.claude/teams/NAME.yaml`) by team name, typed.
    pub teams: Arc<catalog::teams::TeamFiles>,
    /// Which files the project supplies may be read (every reader of them
    /// asks this one judge; see `config::trust::ProjectFiles`).
    pub project_files: config::trust::ProjectFiles,
    /// What the catalog read from each agent file, so the next reload
    /// reads again only the files that changed (empty after a first build).
    pub catalog_files: Arc<catalog::FileCache>,
    /// When the build began reading files: a file modified later may not
    /// be in this snapshot (the watcher's catch-up check compares with it).
    pub read_from: std::time::SystemTime,
}

/// Builds a snapshot. Fails only when settings cannot be loaded; a broken
/// agent file, template or tool spec is a diagnostic and is skipped.
pub fn build(input: &SnapshotInput, generation: u64) -> Result<Snapshot, ConfigError> {
    build_after(input, generation, None)
}

/// [`build`] for a reload: agent files unchanged since `previous` was
/// built are not read again (see [`catalog::load_incremental`]). The result
/// is the snapshot a full build would give.
pub fn build_after(
    input: &SnapshotInput,
    generation: u64,
    previous: Option<&Snapshot>,
) -> Result<Snapshot, ConfigError> {
    let read_from = std::time::SystemTime::now();
    let mut config = config::load(&input.load)?;
    let settings = &config.settings;
    let builtin_dir = settings.agents.builtin_dir.clone();
    let (templates, template_diags) =
        Templates::load(builtin_dir.as_ref().map(|d| d.join("templates")).as_deref());
    let (tools, tool_diags) =
        ToolSpecs::load(builtin_dir.as_ref().map(|d| d.join("tools")).as_deref());

    // `--setting-sources` leaves out the user's or the project's agents,
    // skills and commands with their settings, as Claude Code does.
    let sources = input.load.cli.setting_sources.as_deref();
    let wanted = |scope: config::Scope| sources.is_none_or(|s| s.contains(&scope));
    let dirs = catalog::source_dirs(settings, &input.load.cwd, input.home.as_deref(), sources);
    let mut watched_dirs: Vec<PathBuf> = dirs.iter().map(|d| d.path.clone()).collect();
    let plugin_dirs: Vec<PathBuf> = dirs
        .iter()
        .filter(|d| d.source == catalog::Source::Plugin)
        .map(|d| d.path.clone())
        .collect();
    if let Some(b) = &builtin_dir {
        watched_dirs.push(b.clone());
    }
    // Which files the project supplies may be read: every reader of them
    // asks this one judge.
    let project_files = config::trust::ProjectFiles::new(&config.trust_root, config.trusted);
    let catalog_input = CatalogInput {
        builtin_dir,
        dirs,
        cli_json: input.cli_agents.clone(),
        known_tools: tools.names().map(str::to_string).collect(),
        project_files: Some(project_files.clone()),
    };
    let (mut catalog, catalog_files) = match previous {
        Some(p) => {
            let (c, files) = catalog::load_incremental(&catalog_input, &p.catalog_files);
            (c, Arc::new(files))
        }
        None => (catalog::load(&catalog_input), Arc::default()),
    };

    let (mut mcp_json, mcp_placed, mcp_diags) =
        crate::mcp::read_mcp_json_placed(&input.load.cwd, &input.load.env);
    let mut skipped = Vec::new();
    // A repository's `.mcp.json` starts processes: only in a trusted folder,
    // and then as Claude Code's per-server approvals say. A server left out
    // is said, with why, where it was written.
    mcp_json.retain(|name, _| {
        let why = if !config.trusted {
            Some("")
        } else if settings.disabled_mcpjson_servers.contains(name) {
            Some(" (in disabledMcpjsonServers)")
        } else if !(settings.enable_all_project_mcp_servers
            || settings.enabled_mcpjson_servers.is_empty()
            || settings.enabled_mcpjson_servers.contains(name))
        {
            Some(" (not in enabledMcpjsonServers)")
        } else {
            None
        };
        if let Some(why) = why {
            skipped.push(config::Skipped {
                what: format!(".mcp.json server `{name}`{why}"),
                origin: mcp_placed
                    .get(name)
                    .cloned()
                    .unwrap_or_else(|| ".mcp.json".into()),
            });
        }
        why.is_none()
    });
    let mut mcp_servers = crate::mcp::effective_servers(&mcp_json, &settings.mcp_servers);
    // Where each server came from, for `config show`: a `.mcp.json` entry,
    // a settings file, or a plugin.
    let mut mcp_origins = std::collections::BTreeMap::new();
    for (name, server) in &mut mcp_servers {
        let (at, scope) = match (
            settings.mcp_servers.contains_key(name),
            mcp_placed.get(name),
        ) {
            (false, Some(at)) => (at.clone(), "project"),
            _ => {
                let origin = config.origins.of(&format!("mcp_servers.{name}"));
                (
                    origin.map_or_else(|| "settings".into(), ToString::to_string),
                    origin.map_or("dynamic", |o| mcp_scope(o.scope)),
                )
            }
        };
        server.scope = Some(scope);
        mcp_origins.insert(name.clone(), at);
    }
    // The plugins' servers (`plugin:NAME:SERVER`); a plugin a project
    // enables is loaded only in a trusted folder (config::plugins).
    let (plugin_servers, plugin_mcp_diags) =
        crate::mcp::plugin_servers(&config.plugins, &input.load.env);
    for (name, mut server) in plugin_servers {
        mcp_origins
            .entry(name.clone())
            .or_insert_with(|| "plugin".into());
        server.scope = Some("dynamic");
        mcp_servers.entry(name).or_insert(server);
    }
    let child_env = Arc::new(settings.child_env());
    for server in mcp_servers.values_mut() {
        server.child_env = Some(Arc::clone(&child_env));
    }
    for (agent, field, path) in catalog.restrict(config.trusted) {
        skipped.push(config::Skipped {
            what: format!("agent `{agent}`: frontmatter `{field}`"),
            origin: path.map_or_else(|| "--agents".into(), |p| p.display().to_string()),
        });
    }
    let home = input.home.clone().or_else(|| input.load.home());
    let (memory, memory_diags) = catalog::load_memory(&catalog::MemoryInput {
        cwd: &input.load.cwd,
        home: home.as_deref(),
        managed_root: &input.load.managed_root(),
        files: &project_files,
        sources: input.load.cli.setting_sources.as_deref(),
        excludes: &config.settings.claude_md_excludes,
    });
    for (from, target) in &memory.skipped_imports {
        skipped.push(config::Skipped {
            what: format!(
                "memory import of {} (outside the project)",
                target.display()
            ),
            origin: from.display().to_string(),
        });
    }
    skipped.extend(
        catalog
            .outside
            .iter()
            .chain(&memory.outside)
            .map(config::trust::Outside::skipped),
    );

    let mut diagnostics = config.diagnostics.clone();
    let known_tools: Vec<&str> = tools.names().collect();
    diagnostics.extend(check_settings(&config, &known_tools));
    diagnostics.extend(mcp_diags);
    diagnostics.extend(plugin_mcp_diags);
    diagnostics.extend(memory_diags);
    diagnostics.extend(template_diags);
    diagnostics.extend(tool_diags);
    diagnostics.extend(catalog.diagnostics.iter().cloned());
    let by_source = |(source, _, _): &catalog::PartDir| match source {
        catalog::SkillSource::User => wanted(config::Scope::User),
        catalog::SkillSource::Project => wanted(config::Scope::Project),
        catalog::SkillSource::Plugin => true,
    };
    let mut skill_dirs = catalog::skill_dirs(&input.load.cwd, home.as_deref(), &plugin_dirs);
    skill_dirs.retain(by_source);
    let mut command_dirs = catalog::command_dirs(&input.load.cwd, home.as_deref(), &plugin_dirs);
    command_dirs.retain(by_source);
    // Existing skill and command folders are watched; a missing one is not
    // (watching its nearest existing ancestor slowed busy runs down
    // measurably: see the load test). A folder created later is read at
    // the next reload.
    watched_dirs.extend(
        skill_dirs
            .iter()
            .chain(&command_dirs)
            .filter(|(_, d, _)| d.is_dir())
            .map(|(_, d, _)| d.clone()),
    );
    watched_dirs.extend(memory.rule_dirs.iter().cloned());
    let (output_styles, style_diags) = catalog::styles::load_styles(
        &catalog::styles::style_dirs(
            &input.load.cwd,
            home.as_deref(),
            &plugin_dirs,
            input.load.cli.setting_sources.as_deref(),
        ),
        &project_files,
    );
    watched_dirs.extend(output_styles.dirs.iter().cloned());
    diagnostics.extend(style_diags);
    skipped.extend(
        output_styles
            .outside
            .iter()
            .map(config::trust::Outside::skipped),
    );
    if let Some(name) = &config.settings.output_style
        && !name.eq_ignore_ascii_case("default")
        && output_styles.find(name).is_none()
    {
        let message = format!(
            "output_style: no style named `{name}` (known: {}); the default is used",
            output_styles.names().join(", ")
        );
        diagnostics.push(match config.origins.of("output_style") {
            Some(o) => o.diagnostic(crate::diagnostic::Severity::Warning, message),
            None => Diagnostic::warning(None, None, message),
        });
    }
    // Skills and slash commands are one list (Claude Code's view): read
    // the same way, a skill winning over a command of the same name.
    let mut skills = catalog::load_skills(&skill_dirs, &project_files);
    skills.add_commands(catalog::load_commands(&command_dirs, &project_files));
    skills.add_commands(catalog::load_named_commands(&plugin_dirs));
    diagnostics.extend(skills.diagnostics.iter().cloned());
    diagnostics.extend(check_skill_rules(&skills));
    skipped.extend(skills.outside.iter().map(config::trust::Outside::skipped));
    for (what, path) in skills.restrict(&project_files) {
        skipped.push(config::Skipped {
            what,
            origin: path.display().to_string(),
        });
    }
    config.skipped.extend(skipped);
    // Claude Code keys of skills that cadre does not act on: listed with
    // the settings keys it does not implement.
    for skill in skills.skills.values() {
        let scope = match skill.source {
            catalog::SkillSource::User => config::Scope::User,
            catalog::SkillSource::Project | catalog::SkillSource::Plugin => config::Scope::Project,
        };
        for (key, pos) in &skill.unimplemented {
            config.ignored.push(config::IgnoredKey {
                key: format!("{} `{}`: {key}", skill.kind, skill.name),
                origin: config::Origin {
                    scope,
                    source: skill.path.display().to_string(),
                    line: Some(pos.line),
                    column: Some(pos.column),
                },
            });
        }
    }
    for def in catalog.agents.values() {
        for name in &def.skills {
            if skills.get(name).is_none() {
                diagnostics.push(Diagnostic::warning(
                    def.path.as_deref(),
                    None,
                    format!(
                        "agent `{}`: skills: no skill named `{name}`; it is not preloaded",
                        def.name
                    ),
                ));
            }
        }
        if let Some(when) = &def.when {
            for name in when.names() {
                if !config.flags.knows(name) && name != UNSANDBOXED_COMMANDS {
                    diagnostics.push(Diagnostic::warning(
                        def.path.as_deref(),
                        None,
                        format!("agent `{}`: `when` names unknown flag `{name}`; the agent stays hidden", def.name),
                    ));
                }
            }
        }
    }
    // Malformed rules were reported above, with their positions.
    let mut rules = crate::permissions::Rules::parse(&config.settings.permissions).0;
    rules.cite(|list, text| {
        config
            .origins
            .of_item(&format!("permissions.{list}"), text)
            .map(|o| o.to_string())
    });
    let rules = Arc::new(rules);
    // Bad matchers were reported above, with their positions.
    let hooks = Arc::new(config::Hooks::from_settings(&config.settings.hooks).0);
    // Team files, read once here: a broken one keeps its last good form.
    let (teams, team_diags) = catalog::teams::load_team_files(
        &input.load.cwd,
        &project_files,
        previous.map(|p| p.teams.as_ref()),
    );
    diagnostics.extend(team_diags);
    let teams_dir = input.load.cwd.join(catalog::teams::TEAMS_DIR);
    if teams_dir.is_dir() {
        watched_dirs.push(teams_dir);
    }
    Ok(Snapshot {
        teams: Arc::new(teams),
        generation,
        rules,
        hooks,
        config,
        catalog,
        templates,
        tools,
        diagnostics,
        watched_dirs,
        mcp_servers,
        mcp_origins,
        memory,
        output_styles,
        skills: Arc::new(skills),
        project_files,
        catalog_files,
        read_from,
    })
}

/// Checks each skill's `allowed-tools` with the parser of permission rules
/// (they are allow rules while the skill is active): an entry that is not
/// a rule is an error naming the skill's file, and grants nothing.
fn check_skill_rules(skills: &catalog::Skills) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for s in skills.skills.values() {
        for entry in s.allowed_tools.iter().flatten() {
            if let Err(e) = crate::permissions::Rule::parse(entry) {
                out.push(Diagnostic::error(
                    Some(&s.path),
                    None,
                    format!("allowed-tools: {e}; it grants nothing"),
                ));
            }
        }
    }
    out
}

/// Checks the parts of the merged settings that are languages of their
/// own — permission rules and hook matchers (regexes) — once, here, each
/// problem at the position of the layer that wrote it. A bad rule or
/// matcher is an error diagnostic; the rest of the settings still load.
fn check_settings(config: &LoadedConfig, known_tools: &[&str]) -> Vec<Diagnostic> {
    use crate::diagnostic::Severity;
    let mut out = Vec::new();
    let at = |list: &str, item: &str, msg: String| match config.origins.of_item(list, item) {
        Some(o) => o.diagnostic(Severity::Error, msg),
        None => Diagnostic::error(Some(Path::new("settings")), None, msg),
    };
    let warn = |list: &str, item: &str, msg: String| match config.origins.of_item(list, item) {
        Some(o) => o.diagnostic(Severity::Warning, msg),
        None => Diagnostic::warning(Some(Path::new("settings")), None, msg),
    };
    let p = &config.settings.permissions;
    for (name, list) in [("allow", &p.allow), ("ask", &p.ask), ("deny", &p.deny)] {
        let list_name = format!("permissions.{name}");
        for rule in list {
            match crate::permissions::Rule::parse(rule) {
                Err(e) => out.push(at(&list_name, rule, e)),
                Ok(r) => {
                    if let Some(why) = r.never_matches() {
                        out.push(warn(&list_name, rule, why));
                    } else if let Some(tool) = r.tool()
                        && !known_tools.contains(&tool)
                    {
                        out.push(warn(
                            &list_name,
                            rule,
                            format!("permission rule '{rule}': cadre has no tool named `{tool}`, so it never matches"),
                        ));
                    }
                }
            }
        }
    }
    for (event, hook, why) in config::Hooks::from_settings(&config.settings.hooks).1 {
        let list = format!("hooks.{}", event.as_str());
        let msg = format!("hooks.{}: {why}; this hook never fires", event.as_str());
        // At the matcher when it was written apart from the hook.
        let matcher = format!(
            "{}.matcher",
            config::layers::nth_item_key(&list, hook.label(), 1)
        );
        out.push(match config.origins.keys.get(&matcher) {
            Some(o) => o.diagnostic(Severity::Error, msg),
            None => at(&list, hook.label(), msg),
        });
    }
    out
}

impl Snapshot {
    /// The name of the output style the settings choose, as `init`
    /// reports it: `default` when none (or an unknown one) is chosen.
    pub fn output_style_name(&self) -> String {
        self.settings()
            .output_style
            .as_deref()
            .and_then(|n| self.output_styles.find(n))
            .map_or_else(|| "default".to_string(), |s| s.name.clone())
    }

    /// The style the settings choose, by the name they give it, even one
    /// no file defines (which runs as the default, with a warning):
    /// `init`'s `output_style`, as Claude Code reports it.
    pub fn chosen_output_style(&self) -> String {
        self.settings().output_style.as_deref().map_or_else(
            || "default".to_string(),
            |n| {
                self.output_styles
                    .find(n)
                    .map_or_else(|| n.to_string(), |s| s.name.clone())
            },
        )
    }

    pub fn settings(&self) -> &Settings {
        &self.config.settings
    }

    pub fn flags(&self) -> &Flags {
        &self.config.flags
    }

    /// Whether a `when`/`x-when` condition holds for a session of `kind`:
    /// flags, the session words (`interactive`, `coordinator`), and
    /// [`UNSANDBOXED_COMMANDS`] from the sandbox settings.
    pub fn holds(&self, cond: &crate::config::Condition, kind: SessionKind) -> bool {
        let sandbox = &self.settings().sandbox;
        let escape = sandbox.enabled && sandbox.allow_unsandboxed_commands;
        cond.holds(|name| {
            if name == UNSANDBOXED_COMMANDS {
                escape
            } else {
                self.flags().is_on(name, kind)
            }
        })
    }

    /// The session kind for a session that is or is not interactive, with
    /// coordinator mode from settings.
    pub fn session_kind(&self, interactive: bool) -> SessionKind {
        SessionKind {
            interactive,
            coordinator: self.settings().mode == Mode::Coordinator,
        }
    }

    pub fn fork_effective(&self, kind: SessionKind) -> bool {
        self.flags().effective(FORK_SUBAGENT, kind)
    }

    /// Agent teams (docs/teams.md) are on.
    pub fn teams_effective(&self, kind: SessionKind) -> bool {
        self.flags().effective("AGENT_TEAMS", kind)
    }

    pub fn background_enabled(&self, kind: SessionKind) -> bool {
        !self.flags().effective(DISABLE_BACKGROUND_TASKS, kind)
    }

    /// Agents the model may name: registered, not synthetic, `when` holds.
    /// Sorted by name, case-insensitive.
    pub fn visible_agents(&self, kind: SessionKind) -> Vec<&Arc<AgentDef>> {
        let mut v: Vec<&Arc<AgentDef>> = self
            .catalog
            .agents
            .values()
            .filter(|d| !d.synthetic)
            .filter(|d| d.when.as_ref().is_none_or(|c| self.holds(c, kind)))
            .collect();
        v.sort_by_cached_key(|d| (d.name.to_lowercase(), d.name.clone()));
        v
    }

    /// A visible agent by exact name.
    pub fn visible_agent(&self, name: &str, kind: SessionKind) -> Option<&Arc<AgentDef>> {
        self.catalog
            .get(name)
            .filter(|d| !d.synthetic && d.when.as_ref().is_none_or(|c| self.holds(c, kind)))
    }

    /// The alias names of `[models]`, sorted.
    pub fn model_aliases(&self) -> Vec<String> {
        self.settings().models.keys().cloned().collect()
    }

    /// An alias resolved through `[models]`; anything else as it is.
    pub fn resolve_alias<'a>(&'a self, model: &'a str) -> &'a str {
        self.settings()
            .models
            .get(model)
            .map_or(model, String::as_str)
    }
}

/// A settings layer as Claude Code names the scope of an MCP server
/// configured there (telemetry's `server_scope`).
fn mcp_scope(layer: config::layers::Scope) -> &'static str {
    use config::layers::Scope;
    match layer {
        Scope::User | Scope::Default => "user",
        Scope::Project => "project",
        Scope::Local => "local",
        Scope::Managed => "managed",
        Scope::Flag | Scope::Env | Scope::Cli => "dynamic",
    }
}
