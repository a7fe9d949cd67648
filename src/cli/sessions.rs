//! `cadre sessions list|show|rm`: the sessions kept in this project's
//! transcript folder, read back from their transcripts.

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use serde::Serialize;

use super::output::print_json;
use super::{CliError, GlobalArgs, Overrides, load_snapshot};
use crate::message::{Role, Usage};
use crate::runtime::resume::{self, Restored, ResumeError};
use crate::runtime::session_dirs::{Found, SessionDirs};

#[derive(Debug, Subcommand)]
pub enum SessionsCommand {
    /// Every session of this project: id, start, last activity, model,
    /// turns, tokens, sub-agents; newest last.
    List(JsonArg),
    /// One session: its summary and its messages.
    Show(ShowArgs),
    /// Remove a session's folder (its transcripts and sub-agents' files).
    Rm(RmArgs),
}

#[derive(Debug, Args)]
pub struct JsonArg {
    /// Print JSON (documented in docs/sessions.md).
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    id: String,
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
pub struct RmArgs {
    id: String,
}

/// One session, as `list` and `show` print it (and the web view lists it).
#[derive(Debug, Serialize)]
pub(super) struct Summary {
    id: String,
    started: Option<String>,
    pub(super) last_activity: Option<String>,
    model: Option<String>,
    agent: Option<String>,
    /// Model responses.
    turns: u32,
    /// Every token counted: input, cache writes and reads, output.
    tokens: u64,
    usage: Usage,
    messages: usize,
    compactions: u32,
    /// Sub-agent transcripts in the session's folder.
    children: usize,
    /// US dollars for the main agent's and its sub-agents' requests, from
    /// `[prices]`; `null` when a model has no price.
    cost_usd: Option<f64>,
    /// The first user text, cut to a line.
    title: Option<String>,
    version: u32,
    /// Found in the project's old `.cadre/sessions` (moved to the session
    /// folder when resumed by id; never picked by `--continue`).
    old_location: bool,
}

pub fn dispatch(g: &GlobalArgs, cmd: SessionsCommand) -> Result<(), CliError> {
    let (input, snap) = load_snapshot(g, &Overrides::default())?;
    let snap = snap.load_full();
    let dirs = SessionDirs::new(&snap.settings().transcripts.dir, &input.load.cwd);
    let prices = &snap.settings().prices;
    match cmd {
        SessionsCommand::List(a) => list(&dirs, a.json, prices),
        SessionsCommand::Show(a) => show(&dirs, &a.id, a.json, prices),
        SessionsCommand::Rm(a) => rm(&dirs, &a.id),
    }
}

/// The sessions of the project in `cwd`, newest first: (id, a line that
/// describes it), at most `n`. For chat's `/resume`.
pub(super) fn recent(
    snap: &crate::snapshot::Snapshot,
    cwd: &Path,
    n: usize,
) -> Vec<(String, String)> {
    let dirs = SessionDirs::new(&snap.settings().transcripts.dir, cwd);
    let prices = &snap.settings().prices;
    let mut rows: Vec<Summary> = dirs
        .all()
        .iter()
        .filter_map(|found| {
            let r = resume::load(&resume::main_file(&found.folder)).ok()?;
            Some(summary(found, &r, prices))
        })
        .filter(|s| s.messages > 0)
        .collect();
    rows.sort_by(|a, b| {
        (b.last_activity.as_deref(), &b.id).cmp(&(a.last_activity.as_deref(), &a.id))
    });
    rows.into_iter()
        .take(n)
        .map(|r| {
            let line = format!(
                "{}  {}  {} turns  {}",
                r.id,
                r.last_activity.as_deref().unwrap_or("?"),
                r.turns,
                r.title.as_deref().unwrap_or("")
            );
            (r.id, line)
        })
        .collect()
}

fn usage_error(e: ResumeError) -> CliError {
    CliError::Usage(e.to_string())
}

/// What the requests of a session folder cost: the main agent's usage at
/// its model's price, plus each sub-agent's (its transcript's usage lines,
/// its meta file's model), plus every tool's own requests (`side_usage`
/// lines, at the price of the model that answered). `None` when some model
/// has no price.
fn cost(prices: &Prices, folder: &Path, r: &Restored) -> Option<f64> {
    use crate::message::{cost_of, price_of};
    let side = |r: &Restored| -> Option<f64> {
        r.side_usage.iter().try_fold(0.0, |sum, (model, usage)| {
            Some(sum + cost_of(Some(price_of(prices, model)?), usage))
        })
    };
    let model = r.header.as_ref()?.model.clone();
    let mut total = cost_of(Some(price_of(prices, &model)?), &r.usage) + side(r)?;
    let entries = std::fs::read_dir(resume::subagents_dir_found(folder))
        .map_or_else(|_| Vec::new(), |d| d.flatten().collect());
    for e in entries {
        let path = e.path();
        let Some(stem) = path.to_str().and_then(|p| p.strip_suffix(".jsonl")) else {
            continue;
        };
        let meta: serde_json::Value = fs_err::read(format!("{stem}.meta.json"))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())?;
        let child_model = meta.get("model")?.as_str()?;
        let child = resume::load(&path).ok()?;
        total += cost_of(Some(price_of(prices, child_model)?), &child.usage) + side(&child)?;
    }
    Some(total)
}

pub(super) type Prices = std::collections::BTreeMap<String, crate::config::ModelPrice>;

pub(super) fn summary(found: &Found, r: &Restored, prices: &Prices) -> Summary {
    let (id, folder) = (found.id.as_str(), found.folder.as_path());
    let children = std::fs::read_dir(resume::subagents_dir_found(folder)).map_or(0, |d| {
        d.flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".jsonl"))
            .count()
    });
    let title = r
        .history
        .iter()
        .find(|m| m.role == Role::User)
        .and_then(|m| {
            // The user's own words, not a reminder cadre added to them.
            let mut texts = m.content.iter().rev().filter_map(|b| b.as_text());
            let last = texts.clone().next();
            texts
                .find(|t| !t.trim_start().starts_with("<system-reminder>"))
                .or(last)
        })
        .map(|t| {
            let line = t.lines().next().unwrap_or("");
            line.chars().take(60).collect::<String>()
        });
    Summary {
        id: id.to_string(),
        started: r.started.clone(),
        last_activity: r.last_activity.clone(),
        model: r.header.as_ref().map(|h| h.model.clone()),
        agent: r.header.as_ref().and_then(|h| h.agent.clone()),
        turns: r.turns,
        tokens: r.usage.total(),
        usage: r.usage,
        messages: r.history.len(),
        compactions: r.compactions,
        children,
        cost_usd: cost(prices, folder, r),
        title,
        version: r.header.as_ref().map_or(0, |h| h.version),
        old_location: found.old,
    }
}

fn list(dirs: &SessionDirs, json: bool, prices: &Prices) -> Result<(), CliError> {
    let mut rows = Vec::new();
    for found in dirs.all() {
        match resume::load(&resume::main_file(&found.folder)) {
            Ok(r) => rows.push(summary(&found, &r, prices)),
            Err(e) => eprintln!("warning: {e}"),
        }
    }
    rows.sort_by(|a, b| {
        (a.last_activity.as_deref(), &a.id).cmp(&(b.last_activity.as_deref(), &b.id))
    });
    if json {
        return print_json(&rows);
    }
    if rows.is_empty() {
        outln!("No sessions under {}.", dirs.dir.display());
        return Ok(());
    }
    for r in &rows {
        outln!(
            "{}{}  {}  {}  {} turns  {} tokens  {} sub-agents  {}",
            r.id,
            if r.old_location {
                " (old location)"
            } else {
                ""
            },
            r.last_activity.as_deref().unwrap_or("?"),
            r.model.as_deref().unwrap_or("?"),
            r.turns,
            r.tokens,
            r.children,
            r.title.as_deref().unwrap_or(""),
        );
    }
    Ok(())
}

fn show(dirs: &SessionDirs, id: &str, json: bool, prices: &Prices) -> Result<(), CliError> {
    let found = dirs.find(id).map_err(usage_error)?;
    let folder = found.folder.clone();
    let transcript = resume::main_file(&folder);
    let r = resume::load(&transcript).map_err(usage_error)?;
    let s = summary(&found, &r, prices);
    if json {
        #[derive(Serialize)]
        struct Shown<'a> {
            #[serde(flatten)]
            summary: &'a Summary,
            path: PathBuf,
            transcript: PathBuf,
            messages_list: &'a crate::message::History,
        }
        return print_json(&Shown {
            summary: &s,
            path: folder,
            transcript,
            messages_list: &r.history,
        });
    }
    outln!("session   {}", s.id);
    outln!("file      {}", transcript.display());
    outln!("started   {}", s.started.as_deref().unwrap_or("?"));
    outln!("last      {}", s.last_activity.as_deref().unwrap_or("?"));
    outln!("model     {}", s.model.as_deref().unwrap_or("?"));
    outln!("turns     {}", s.turns);
    outln!("tokens    {}", s.tokens);
    outln!("children  {}", s.children);
    if let Some(c) = s.cost_usd {
        outln!("cost      ${c:.4}");
    }
    for m in &r.history {
        let role = match m.role {
            Role::User => "user",
            Role::Assistant => "assistant",
        };
        let mut parts = Vec::new();
        for b in &m.content {
            if let Some(t) = b.as_text() {
                parts.push(t.lines().next().unwrap_or("").to_string());
            }
        }
        let calls: Vec<&str> = m.tool_uses().map(|(_, name, _)| name).collect();
        if !calls.is_empty() {
            parts.push(format!("[tools: {}]", calls.join(", ")));
        }
        outln!("{role:>9}: {}", parts.join(" | "));
    }
    Ok(())
}

fn rm(dirs: &SessionDirs, id: &str) -> Result<(), CliError> {
    let folder = dirs.find(id).map_err(usage_error)?.folder;
    let main = resume::main_file(&folder);
    // Only real files and folders, never a link to one elsewhere.
    for p in [&folder, &main] {
        let is_link = std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_symlink());
        if is_link {
            return Err(CliError::Usage(format!(
                "{}: a link, not a session's file; not removed",
                p.display()
            )));
        }
    }
    let failed = |e: std::io::Error| CliError::Failed(e.to_string());
    if main.parent() != Some(folder.as_path()) {
        fs_err::remove_file(&main).map_err(failed)?;
        outln!("removed {}", main.display());
    }
    if folder.is_dir() {
        fs_err::remove_dir_all(&folder).map_err(failed)?;
        outln!("removed {}", folder.display());
    }
    Ok(())
}
