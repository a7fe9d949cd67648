//! `cadre agents list|show|validate`.

use std::path::PathBuf;
use std::sync::Arc;

use clap::{Args, Subcommand};
use serde::Serialize;
use serde_json::{Value, json};

use super::output::print_json;
use super::{CliError, GlobalArgs, Overrides, load_snapshot, snapshot_input};
use crate::agent_tool::{AgentInput, ToolOffer, WithheldTool, withheld_tools};
use crate::catalog::{self, AgentDef, CatalogInput, Source, SourceDir};
use crate::diagnostic::{Diagnostic, Severity};
use crate::runtime;
use crate::runtime::plan::{SpawnParent, plan_spawn};
use crate::snapshot::{self, Snapshot};

#[derive(Debug, Subcommand)]
pub enum AgentsCommand {
    /// The effective agents, one per name.
    List(ListArgs),
    /// One agent in full.
    Show(ShowArgs),
    /// Check agent files and report every problem; exit 1 if any is an error.
    Validate(ValidateArgs),
}

#[derive(Debug, Default, Args)]
pub struct ListArgs {
    /// Print JSON (documented in docs/cli.md).
    #[arg(long)]
    json: bool,
    /// Also list shadowed agents, the synthetic `fork`, and agents whose
    /// `when` does not hold now (coordinator mode's `coordinator` and `worker`).
    #[arg(long)]
    all: bool,
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    name: String,
    #[arg(long)]
    json: bool,
    /// Add the model and tools the agent would really get as a sub-agent of the main session.
    #[arg(long)]
    effective: bool,
}

#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// Files or folders to check; without any, everything cadre would load.
    paths: Vec<PathBuf>,
    #[arg(long)]
    json: bool,
}

pub async fn dispatch(g: &GlobalArgs, cmd: AgentsCommand) -> Result<(), CliError> {
    match cmd {
        AgentsCommand::List(a) => list(g, a),
        AgentsCommand::Show(a) => show(g, a).await,
        AgentsCommand::Validate(a) => validate(g, a),
    }
}

/// The JSON shape of one agent (docs/cli.md).
fn agent_json(d: &AgentDef) -> Value {
    json!({
        "name": d.name,
        "description": d.description,
        "source": d.source,
        "path": d.path,
        "tools": d.tools,
        "disallowed_tools": d.disallowed_tools,
        "model": d.model,
        "permission_mode": d.permission_mode,
        "max_turns": d.max_turns,
        "background": d.background,
        "isolation": d.isolation,
        "color": d.color,
        "when": d.when,
        "mcp_servers": d.mcp_servers,
        "required_mcp_servers": d.required_mcp_servers,
        "hooks": d.hooks,
        "skills": d.skills,
        "memory": d.memory,
        "effort": d.effort,
        "initial_prompt": d.initial_prompt,
        "synthetic": d.synthetic,
    })
}

fn list(g: &GlobalArgs, args: ListArgs) -> Result<(), CliError> {
    let (_, swap) = load_snapshot(g, &Overrides::default())?;
    print_list(&swap.load_full(), &args)
}

/// The agents of `snap` as `agents list` prints them (chat's `/agents`
/// too).
pub(super) fn print_list(snap: &Snapshot, args: &ListArgs) -> Result<(), CliError> {
    // Without --all: the agents a session could start now (not synthetic,
    // `when` holding; `--coordinator` shows coordinator mode's agents).
    let kind = snap.session_kind(false);
    let visible: Vec<&str> = snap
        .visible_agents(kind)
        .iter()
        .map(|d| d.name.as_str())
        .collect();
    let mut rows: Vec<(Arc<AgentDef>, Option<Source>)> = snap
        .catalog
        .agents
        .values()
        .filter(|d| args.all || visible.contains(&d.name.as_str()))
        .map(|d| (Arc::clone(d), None))
        .collect();
    if args.all {
        rows.extend(
            snap.catalog
                .shadowed
                .iter()
                .map(|s| (Arc::clone(&s.def), Some(s.shadowed_by))),
        );
    }
    rows.sort_by_cached_key(|(d, s)| {
        (d.name.to_lowercase(), d.name.clone(), s.is_some(), d.source)
    });
    if args.json {
        let out: Vec<Value> = rows
            .iter()
            .map(|(d, shadowed_by)| {
                let mut v = agent_json(d);
                if args.all
                    && let Value::Object(m) = &mut v
                {
                    m.insert("shadowed_by".into(), json!(shadowed_by));
                }
                v
            })
            .collect();
        return print_json(&out);
    }
    let w = rows
        .iter()
        .map(|(d, _)| d.name.chars().count())
        .max()
        .unwrap_or(4)
        .max(4);
    outln!("{:w$}  {:8}  {:22}  DESCRIPTION", "NAME", "SOURCE", "MODEL");
    for (d, shadowed_by) in &rows {
        let mut desc = super::output::first_line(&d.description, 70);
        if d.description.chars().count() > desc.chars().count() {
            desc.push('…');
        }
        let source = match shadowed_by {
            Some(by) => format!("{} (shadowed by {by})", d.source),
            None => d.source.to_string(),
        };
        outln!(
            "{:w$}  {:8}  {:22}  {desc}",
            d.name,
            source,
            d.model.as_deref().unwrap_or("inherit")
        );
    }
    Ok(())
}

/// The offer of the built-in tools in this snapshot.
fn offer(snap: &Snapshot) -> ToolOffer {
    let implemented = crate::tools::builtin_tools();
    runtime::tool_offer(snap, implemented.iter().map(|t| t.name()))
}

/// The tools `d` names that it would not get as a child of the main session.
fn withheld_for(snap: &Snapshot, d: &AgentDef) -> Vec<WithheldTool> {
    withheld_tools(d, &offer(snap), 1)
}

fn effective_json(
    snap: &Snapshot,
    d: &AgentDef,
    env: &[(String, String)],
    cwd: &std::path::Path,
) -> Value {
    let settings = snap.settings();
    let env_model = crate::config::subagent_model(env);
    let parent_model = snap.resolve_alias(&settings.provider.model).to_string();
    let implemented = crate::tools::builtin_tools();
    let available = runtime::available_tools(snap, implemented.iter().map(|t| t.name()));
    // The spawn of `d` with an empty prompt by a main session in the
    // configured mode (SPEC §7): the planner the Agent tool uses.
    let parent = SpawnParent {
        agent_id: "main",
        session_id: "",
        kind: snap.session_kind(false),
        depth: 0,
        model: &parent_model,
        mode: settings.permissions.default_mode,
        def: None,
        cwd,
        is_fork_child: false,
        env_model: env_model.as_deref(),
        available_tools: &available,
        turn: None,
    };
    let input = AgentInput {
        subagent_type: Some(d.name.clone()),
        fork: (d.name == catalog::FORK_AGENT).then_some(true),
        ..AgentInput::default()
    };
    let plan = match plan_spawn(snap, &parent, &input, String::new()) {
        Ok(plan) => plan,
        Err(refusal) => return json!({"refused": refusal.text(&snap.templates)}),
    };
    let withheld = withheld_for(snap, d);
    let effort = plan.effort_for_model(&settings.effort_levels);
    let home = env
        .iter()
        .rev()
        .find(|(k, _)| k == "HOME")
        .map(|(_, v)| std::path::PathBuf::from(v));
    let memory = d.memory.as_deref().and_then(|scope| {
        let dir =
            crate::catalog::agent_memory::agent_memory_dir(scope, &d.name, home.as_deref(), cwd)?;
        Some(json!({"scope": scope, "dir": dir}))
    });
    let mut v = json!({"model": plan.core.model, "model_source": plan.model_source, "tools": plan.core.tools, "withheld_tools": withheld, "permission_mode": plan.core.mode.as_str()});
    if let Value::Object(m) = &mut v {
        if let Some(e) = effort {
            m.insert("effort".into(), json!(e));
        }
        if let Some(mem) = memory {
            m.insert("memory".into(), mem);
        }
    }
    v
}

/// The MCP tools `d` would get as a child of the main session, by name,
/// from the configured servers (connected now, then closed); `None` when
/// the folder is not trusted (nothing is started; stderr says so). Servers
/// the definition starts itself (inline `mcpServers`) are not started here.
async fn effective_mcp_tools(
    snap: &Snapshot,
    d: &AgentDef,
    cwd: &std::path::Path,
) -> Option<Vec<String>> {
    let manager = super::mcp::connect_all(snap, cwd).await?;
    let tools = crate::mcp::session_mcp_tools(manager.tools(&[]), Some(d), &snap.rules, cwd);
    manager.shutdown().await;
    Some(
        tools
            .iter()
            .map(|t| crate::tools::Tool::name(&**t).to_string())
            .collect(),
    )
}

async fn show(g: &GlobalArgs, args: ShowArgs) -> Result<(), CliError> {
    let (input, swap) = load_snapshot(g, &Overrides::default())?;
    let snap = swap.load_full();
    let d = snap.catalog.get(&args.name).ok_or_else(|| {
        let names: Vec<&str> = snap.catalog.agents.keys().map(String::as_str).collect();
        CliError::Usage(format!(
            "no agent named `{}`. Agents: {}",
            args.name,
            names.join(", ")
        ))
    })?;
    let mut v = agent_json(d);
    if args.effective
        && let Value::Object(m) = &mut v
    {
        let mut e = effective_json(&snap, d, &input.load.env, &input.load.cwd);
        // Only where servers are configured (they are started to list them).
        if !snap.mcp_servers.is_empty() {
            e["mcp_tools"] = match effective_mcp_tools(&snap, d, &input.load.cwd).await {
                Some(names) => json!(names),
                None => Value::Null,
            };
        }
        m.insert("effective".into(), e);
    }
    if args.json {
        return print_json(&v);
    }
    outln!("name:        {}", d.name);
    outln!(
        "source:      {}{}",
        d.source,
        d.path
            .as_ref()
            .map(|p| format!(" ({})", p.display()))
            .unwrap_or_default()
    );
    outln!("description: {}", d.description);
    outln!(
        "tools:       {}",
        crate::agent_tool::tools_summary(d, None).words(&snap.templates)
    );
    outln!("model:       {}", d.model.as_deref().unwrap_or("inherit"));
    if let Some(m) = d.permission_mode {
        outln!("permission:  {m}");
    }
    if let Some(t) = d.max_turns {
        outln!("max turns:   {t}");
    }
    if let Some(w) = &d.when {
        outln!("when:        {w}");
    }
    if let Some(refused) = v.pointer("/effective/refused").and_then(Value::as_str) {
        outln!("effective:   not spawnable now: {refused}");
    } else if let Some(e) = v.get("effective") {
        outln!(
            "effective:   model {} (from {}), mode {}, tools {}",
            e["model"].as_str().unwrap_or(""),
            e["model_source"].as_str().unwrap_or(""),
            e["permission_mode"].as_str().unwrap_or(""),
            e["tools"]
                .as_array()
                .map(|a| a
                    .iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(", "))
                .unwrap_or_default()
        );
    }
    if let Some(e) = v.get("effective")
        && let Some(mcp) = e.get("mcp_tools")
    {
        let shown = match mcp.as_array() {
            Some(a) if a.is_empty() => "none".to_string(),
            Some(a) => a
                .iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(", "),
            None => "not listed: the folder is not trusted, so no server was started".into(),
        };
        outln!("mcp tools:   {shown}");
    }
    if let Some(e) = v.pointer("/effective/effort") {
        outln!(
            "effort:      {}{}",
            e["sent"].as_str().unwrap_or("not sent"),
            e["note"]
                .as_str()
                .map(|n| format!(" ({n})"))
                .unwrap_or_default()
        );
    }
    if let Some(m) = v.pointer("/effective/memory") {
        outln!(
            "memory:      {} ({})",
            m["dir"].as_str().unwrap_or(""),
            m["scope"].as_str().unwrap_or("")
        );
    }
    if args.effective {
        for w in withheld_for(&snap, d) {
            outln!("not given:   {} ({})", w.tool, w.why);
        }
    }
    if let catalog::Prompt::Inline(body) = &d.prompt
        && !body.is_empty()
    {
        outln!("\n{body}");
    }
    Ok(())
}

/// A warning for each tool `d` asks for and will not get, except unknown
/// ones (the parser already reported those at their position).
fn withheld_diagnostics(d: &AgentDef, offer: &ToolOffer) -> Vec<Diagnostic> {
    withheld_tools(d, offer, 1)
        .into_iter()
        .filter(|w| w.why != crate::agent_tool::Withheld::Unknown)
        .map(|w| {
            Diagnostic::warning(
                d.path.as_deref(),
                None,
                format!(
                    "agent `{}` will not get tool `{}`: {}",
                    d.name, w.tool, w.why
                ),
            )
        })
        .collect()
}

#[derive(Serialize)]
struct ValidateReport {
    files: usize,
    agents: usize,
    diagnostics: Vec<Diagnostic>,
}

fn validate(g: &GlobalArgs, args: ValidateArgs) -> Result<(), CliError> {
    let report = if args.paths.is_empty() {
        let input = snapshot_input(g, &Overrides::default())?;
        let snap = snapshot::build(&input, 1)?;
        let agents = snap
            .catalog
            .agents
            .values()
            .filter(|d| !d.synthetic)
            .count();
        let mut diagnostics = snap.diagnostics.clone();
        let offer = offer(&snap);
        for d in snap.catalog.agents.values().filter(|d| !d.synthetic) {
            diagnostics.extend(withheld_diagnostics(d, &offer));
        }
        ValidateReport {
            files: snap.catalog.files,
            agents,
            diagnostics,
        }
    } else {
        let cwd = super::working_dir(g)?;
        // The settings say which tools exist and which are denied; without
        // loadable settings, only the files themselves are checked.
        let offer = snapshot_input(g, &Overrides::default())
            .ok()
            .and_then(|input| snapshot::build(&input, 1).ok())
            .map(|snap| offer(&snap));
        let known = offer.as_ref().map(|o| o.known.clone()).unwrap_or_default();
        let mut files = 0;
        let mut agents = 0;
        let mut diagnostics = Vec::new();
        for p in &args.paths {
            let p = if p.is_relative() {
                cwd.join(p)
            } else {
                p.clone()
            };
            if p.is_dir() {
                let cat = catalog::load(&CatalogInput {
                    dirs: vec![SourceDir {
                        source: Source::Project,
                        path: p.clone(),
                    }],
                    known_tools: known.clone(),
                    ..Default::default()
                });
                if let Some(o) = &offer {
                    for d in cat.agents.values().filter(|d| d.source == Source::Project) {
                        diagnostics.extend(withheld_diagnostics(d, o));
                    }
                }
                files += cat.files;
                agents += cat
                    .agents
                    .values()
                    .filter(|d| d.source == Source::Project)
                    .count()
                    + cat
                        .shadowed
                        .iter()
                        .filter(|s| s.def.source == Source::Project)
                        .count();
                diagnostics.extend(cat.diagnostics);
            } else {
                files += 1;
                match fs_err::read(&p) {
                    Ok(bytes) => match String::from_utf8(bytes) {
                        Ok(text) => {
                            let (def, diags) = catalog::parse_agent_file_with(
                                &p,
                                &text,
                                Source::Project,
                                catalog::ParseOptions {
                                    known_tools: &known,
                                },
                            );
                            agents += usize::from(def.is_some());
                            diagnostics.extend(diags);
                            if let (Some(d), Some(o)) = (&def, &offer) {
                                diagnostics.extend(withheld_diagnostics(d, o));
                            }
                        }
                        Err(_) => diagnostics.push(Diagnostic::error(
                            Some(&p),
                            None,
                            "not a UTF-8 text file",
                        )),
                    },
                    Err(e) => diagnostics.push(Diagnostic::error(
                        Some(&p),
                        None,
                        format!("cannot read: {e}"),
                    )),
                }
            }
        }
        ValidateReport {
            files,
            agents,
            diagnostics,
        }
    };
    let errors = report
        .diagnostics
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .count();
    if args.json {
        print_json(&report)?;
    } else {
        for d in &report.diagnostics {
            outln!("{d}");
        }
        outln!(
            "{} file(s), {} agent(s), {} error(s), {} warning(s)",
            report.files,
            report.agents,
            errors,
            report.diagnostics.len() - errors
        );
    }
    if errors > 0 {
        Err(CliError::Exit(1))
    } else {
        Ok(())
    }
}
