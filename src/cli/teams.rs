//! `cadre teams list` and `cadre teams show NAME`: the agent teams kept
//! under `agents.teams_dir`, with their members, inboxes and tasks.

use clap::{Args, Subcommand};
use serde_json::json;

use super::output::print_json;
use super::{CliError, GlobalArgs, Overrides, load_snapshot, working_dir};
use crate::teams::{TeamError, TeamStore};

#[derive(Debug, Subcommand)]
pub enum TeamsCommand {
    /// Teams under `agents.teams_dir`: members and tasks, counted.
    List(ListArgs),
    /// One team: every member with its status and unread mail, every
    /// task with its owner and status.
    Show(ShowArgs),
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// Print JSON (documented in docs/teams.md).
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    name: String,
    /// Print JSON (documented in docs/teams.md).
    #[arg(long)]
    json: bool,
}

fn failed(e: TeamError) -> CliError {
    CliError::Failed(e.to_string())
}

pub fn dispatch(g: &GlobalArgs, cmd: TeamsCommand) -> Result<(), CliError> {
    let (_, swap) = load_snapshot(g, &Overrides::default())?;
    let dir = working_dir(g)?.join(&swap.load().settings().agents.teams_dir);
    match cmd {
        TeamsCommand::List(args) => {
            let mut rows = Vec::new();
            for name in TeamStore::list(&dir) {
                let Some(store) = TeamStore::existing(&dir, &name) else {
                    continue;
                };
                let team = store.team().map_err(failed)?;
                let tasks = store.tasks().map_err(failed)?;
                let open = tasks
                    .iter()
                    .filter(|t| t.status != crate::teams::TaskStatus::Completed)
                    .count();
                rows.push(json!({"name": name, "members": team.members.len(),
                                 "tasks": tasks.len(), "open_tasks": open}));
            }
            if args.json {
                return print_json(&rows);
            }
            if rows.is_empty() {
                outln!("no teams under {}", dir.display());
            }
            for r in rows {
                outln!(
                    "{}  {} member(s)  {} task(s), {} open",
                    r["name"].as_str().unwrap_or_default(),
                    r["members"],
                    r["tasks"],
                    r["open_tasks"]
                );
            }
            Ok(())
        }
        TeamsCommand::Show(args) => {
            let store = TeamStore::existing(&dir, &args.name).ok_or_else(|| {
                CliError::Usage(format!("no team {:?} under {}", args.name, dir.display()))
            })?;
            let team = store.team().map_err(failed)?;
            let tasks = store.tasks().map_err(failed)?;
            let mut members = Vec::new();
            for m in &team.members {
                let inbox = store.inbox(&m.name).map_err(failed)?;
                let unread = inbox.iter().filter(|x| !x.read).count();
                members.push(json!({"member": m, "messages": inbox.len(), "unread": unread}));
            }
            if args.json {
                return print_json(&json!({"name": team.name, "description": team.description,
                                          "members": members, "tasks": tasks}));
            }
            outln!("team {}", store.name);
            if let Some(d) = &team.description {
                outln!("description: {d}");
            }
            outln!("members:");
            for (m, row) in team.members.iter().zip(&members) {
                outln!(
                    "  {}  {}  {}  {} message(s), {} unread",
                    m.name,
                    m.agent_type,
                    serde_json::to_value(m.status)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_string))
                        .unwrap_or_default(),
                    row["messages"],
                    row["unread"]
                );
            }
            outln!("tasks:");
            for t in &tasks {
                outln!(
                    "  #{}  {}  {}  {}",
                    t.id,
                    serde_json::to_value(t.status)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_string))
                        .unwrap_or_default(),
                    t.owner.as_deref().unwrap_or("-"),
                    t.subject
                );
            }
            Ok(())
        }
    }
}
