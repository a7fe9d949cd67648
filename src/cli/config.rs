//! `cadre config show|validate`: the effective settings with where each
//! value came from, and every problem of every layer (cadre's files,
//! Claude Code's settings, `.mcp.json`, agents' frontmatter `hooks` and
//! `mcpServers`) with its position.

use clap::{Args, Subcommand};
use serde::Serialize;
use serde_json::{Value, json};

use super::output::print_json;
use super::{CliError, GlobalArgs, Overrides, snapshot_input};
use crate::config::{IgnoredKey, LayerFile, Origin, Skipped};
use crate::diagnostic::{Diagnostic, Severity};
use crate::snapshot::{self, Snapshot};

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// The effective settings; with --origin, the file:line or variable of each.
    Show(ShowArgs),
    /// Check every settings layer and what it names; exit 1 if any error.
    Validate(ValidateArgs),
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    /// Print JSON (documented in docs/cli.md).
    #[arg(long)]
    json: bool,
    /// Name the layer, file and line (or variable) that set each value.
    #[arg(long)]
    origin: bool,
}

#[derive(Debug, Args)]
pub struct ValidateArgs {
    #[arg(long)]
    json: bool,
}

pub fn dispatch(g: &GlobalArgs, cmd: ConfigCommand) -> Result<(), CliError> {
    match cmd {
        ConfigCommand::Show(a) => show(g, a),
        ConfigCommand::Validate(a) => validate(g, a),
    }
}

fn build(g: &GlobalArgs) -> Result<Snapshot, CliError> {
    let input = snapshot_input(g, &Overrides::default())?;
    Ok(snapshot::build(&input, 1)?)
}

#[derive(Serialize)]
struct ShowJson<'a> {
    settings: Value,
    /// Dotted key → where it was set (keys left at their default are absent).
    origins: &'a std::collections::BTreeMap<String, Origin>,
    /// Merged lists: each item and where it was written.
    items: Value,
    files: &'a [LayerFile],
    ignored: &'a [IgnoredKey],
    skipped: &'a [Skipped],
    trusted: bool,
    trust_root: String,
    instructions: Value,
    /// The slash commands read (`.claude/commands`, user, plugins): honoured.
    commands: Vec<Value>,
    /// The plugins loaded (`--plugin-dir`, `enabledPlugins`).
    plugins: &'a [crate::config::plugins::Plugin],
    /// The MCP servers a session connects to, each with where it was
    /// written (`.mcp.json` entries, settings, plugins).
    mcp_servers: Vec<Value>,
}

/// The MCP servers of the snapshot with where each was written, for `show`.
fn mcp_servers(snap: &Snapshot) -> Vec<Value> {
    snap.mcp_servers
        .keys()
        .map(|name| json!({"name": name, "origin": snap.mcp_origins.get(name)}))
        .collect()
}

/// What the model is told beside the settings: memory files and rules
/// (first message), rules with `paths` and nested memory (on demand), and
/// the output style (system prompt).
fn instructions(snap: &Snapshot) -> Value {
    let m = &snap.memory;
    json!({
        "memory": m.files.iter().map(|f| json!({
            "path": f.path, "scope": f.scope, "rule": f.rule,
            "imported_from": f.imported_from,
        })).collect::<Vec<_>>(),
        "path_rules": m.path_rules,
        "nested_memory": m.nested_files(),
        "nested_imports": nested_imports(m).iter().map(|(path, from)| json!({
            "path": path, "imported_from": from,
        })).collect::<Vec<_>>(),
        "output_style": snap.output_style_name(),
        "output_styles": snap.output_styles.styles.values().collect::<Vec<_>>(),
    })
}

pub(super) fn show_instructions(snap: &Snapshot) {
    let m = &snap.memory;
    if !m.files.is_empty() {
        outln!("# memory, in the first message (honoured)");
    }
    for f in &m.files {
        let what = match (f.rule, &f.imported_from) {
            (true, _) => "rule".to_string(),
            (false, Some(from)) => format!("imported by {}", from.display()),
            (false, None) => "memory".to_string(),
        };
        let scope = serde_json::to_value(f.scope).unwrap_or(Value::Null);
        outln!(
            "#   {:<8} {}    {what}",
            scope.as_str().unwrap_or(""),
            f.path.display()
        );
    }
    if !m.path_rules.is_empty() {
        outln!("# rules with paths, when a tool reads or writes a matching file (honoured)");
        for r in &m.path_rules {
            outln!("#   {}    paths: {}", r.path.display(), r.globs.join(", "));
        }
    }
    let nested = m.nested_files();
    if !nested.is_empty() {
        outln!("# nested memory, when a tool reads or writes a file below its folder (honoured)");
        for f in nested {
            outln!("#   {}", f.display());
        }
        for (path, from) in nested_imports(m) {
            outln!("#   {}    imported by {}", path.display(), from.display());
        }
    }
    let active = snap.output_style_name();
    outln!("# output styles (active: {active})");
    for s in snap.output_styles.styles.values() {
        let from = s
            .path
            .as_ref()
            .map_or_else(|| "built-in".to_string(), |p| p.display().to_string());
        let mark = if s.name == active { "*" } else { " " };
        outln!("#  {mark}{}    {from}", s.name);
    }
}

/// The files the nested memory files import (`@path`), each with its
/// importer: read with them, by the same loader a session uses.
fn nested_imports(m: &crate::catalog::Memory) -> Vec<(std::path::PathBuf, std::path::PathBuf)> {
    let mut out: Vec<(std::path::PathBuf, std::path::PathBuf)> = Vec::new();
    for f in m.nested_files() {
        for file in m.nested_for(&f).0 {
            if let Some(from) = file.imported_from
                && !out.iter().any(|(p, _)| *p == file.path)
            {
                out.push((file.path, from));
            }
        }
    }
    out
}

/// The slash commands of the snapshot (name, source, path), for `show`.
fn commands(snap: &Snapshot) -> Vec<Value> {
    snap.skills
        .skills
        .values()
        .filter(|s| s.kind == crate::catalog::SkillKind::Command)
        .map(|s| json!({"name": s.name, "source": s.source, "path": s.path}))
        .collect()
}

fn show(g: &GlobalArgs, args: ShowArgs) -> Result<(), CliError> {
    let snap = build(g)?;
    let c = &snap.config;
    let settings = serde_json::to_value(&c.settings).unwrap_or(Value::Null);
    if args.json {
        let items: serde_json::Map<String, Value> = c
            .origins
            .items
            .iter()
            .map(|(k, list)| {
                let v: Vec<Value> = list
                    .iter()
                    .map(|(item, o)| json!({"item": item, "origin": o}))
                    .collect();
                (k.clone(), Value::Array(v))
            })
            .collect();
        return print_json(&ShowJson {
            settings,
            origins: &c.origins.keys,
            items: Value::Object(items),
            files: &c.files,
            ignored: &c.ignored,
            skipped: &c.skipped,
            trusted: c.trusted,
            trust_root: c.trust_root.display().to_string(),
            instructions: instructions(&snap),
            commands: commands(&snap),
            plugins: &c.plugins,
            mcp_servers: mcp_servers(&snap),
        });
    }
    print_settings(c, &settings, args.origin, "");
    outln!();
    outln!("# settings files, lowest precedence first");
    for f in &c.files {
        let state = if f.read { "read" } else { "absent" };
        outln!("#   {:<8} {} ({state})", f.scope.as_str(), f.path.display());
    }
    show_instructions(&snap);
    print_rest(c, &snap);
    Ok(())
}

/// The settings whose dotted key starts with `prefix`, one per line, with
/// where each came from when `origin` (chat's `/config` and `/permissions`
/// too).
pub(super) fn print_settings(
    c: &crate::config::LoadedConfig,
    settings: &Value,
    origin: bool,
    prefix: &str,
) {
    let mut lines = Vec::new();
    flatten(settings, &mut String::new(), &mut lines);
    for (key, value) in lines {
        if !key.starts_with(prefix) {
            continue;
        }
        if !origin {
            outln!("{key} = {value}");
            continue;
        }
        match c.origins.items.get(&key) {
            Some(items) if !items.is_empty() => {
                outln!("{key} =");
                for (item, o) in items {
                    outln!("  {item}    # {} {o}", o.scope);
                }
            }
            _ => match c.origins.of(&key) {
                Some(o) => outln!("{key} = {value}    # {} {o}", o.scope),
                None => outln!("{key} = {value}    # default"),
            },
        }
    }
}

/// `config show`'s notes after the settings: ignored keys, commands, the
/// sandbox, what was skipped.
fn print_rest(c: &crate::config::LoadedConfig, snap: &Snapshot) {
    if !c.ignored.is_empty() {
        outln!("# Claude Code keys cadre does not implement (ignored)");
        for k in &c.ignored {
            outln!("#   {}    {}", k.key, k.origin);
        }
    }
    if !c.plugins.is_empty() {
        outln!(
            "# plugins (honoured: commands, agents, skills, hooks, MCP servers, output styles; docs/plugins.md)"
        );
        for p in &c.plugins {
            outln!(
                "#   {}    {}    enabled by {}",
                p.source,
                p.path.display(),
                p.enabled_by
            );
            if let Some(note) = p.unsupported_note() {
                outln!("#     {note}");
            }
        }
    }
    let servers = mcp_servers(snap);
    if !servers.is_empty() {
        outln!("# MCP servers (honoured: started by a session; `cadre mcp list` connects)");
        for v in &servers {
            outln!(
                "#   {}    {}",
                v["name"].as_str().unwrap_or_default(),
                v["origin"].as_str().unwrap_or_default()
            );
        }
    }
    let cmds = commands(snap);
    if !cmds.is_empty() {
        outln!("# slash commands (honoured: /NAME, the Skill tool; docs/commands.md)");
        for c in &cmds {
            outln!(
                "#   /{}    {} {}",
                c["name"].as_str().unwrap_or_default(),
                c["source"].as_str().unwrap_or_default(),
                c["path"].as_str().unwrap_or_default()
            );
        }
    }
    if c.settings.sandbox.enabled {
        let support = crate::tools::sandbox::support();
        outln!("# sandbox: on; mechanism: {}", support.mechanism());
        for p in &support.problems {
            outln!("#   {p}");
        }
    }
    if !c.skipped.is_empty() && c.trusted {
        outln!("# skipped from the repository's settings");
        for s in &c.skipped {
            outln!("#   {}    {}", s.what, s.origin);
        }
    } else if !c.skipped.is_empty() {
        outln!(
            "# skipped because {} is not trusted (`cadre trust`)",
            c.trust_root.display()
        );
        for s in &c.skipped {
            outln!("#   {}    {}", s.what, s.origin);
        }
    }
}

/// Leaf values by dotted key; lists and empty tables are leaves.
fn flatten(v: &Value, at: &mut String, out: &mut Vec<(String, String)>) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, sub) in m {
                let len = at.len();
                if !at.is_empty() {
                    at.push('.');
                }
                at.push_str(k);
                flatten(sub, at, out);
                at.truncate(len);
            }
        }
        other => out.push((at.clone(), other.to_string())),
    }
}

fn validate(g: &GlobalArgs, args: ValidateArgs) -> Result<(), CliError> {
    let snap = match build(g) {
        Ok(s) => s,
        Err(CliError::Config(e)) => {
            report(&e.diagnostics, args.json)?;
            return Err(CliError::Exit(1));
        }
        Err(e) => return Err(e),
    };
    // Agents' frontmatter `hooks` and inline `mcpServers` were resolved,
    // and their problems placed, when the files were read.
    let diags = snap.diagnostics.clone();
    report(&diags, args.json)?;
    if diags.iter().any(|d| d.severity == Severity::Error) {
        return Err(CliError::Exit(1));
    }
    Ok(())
}

fn report(diags: &[Diagnostic], json: bool) -> Result<(), CliError> {
    if json {
        return print_json(&diags);
    }
    for d in diags {
        outln!("{d}");
    }
    let errors = diags.iter().filter(|d| d.is_error()).count();
    outln!("{errors} error(s), {} warning(s)", diags.len() - errors);
    Ok(())
}
