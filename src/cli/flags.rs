//! `cadre flags`: every flag, its value, where it was set, and whether it is
//! effective for a session kind (and if not, which gate blocks it).

use clap::Args;
use serde::Serialize;

use super::{CliError, GlobalArgs, Overrides, load_snapshot};
use crate::cli::output::SessionArg;

#[derive(Debug, Args)]
pub struct FlagsArgs {
    /// Print JSON (documented in docs/cli.md).
    #[arg(long)]
    json: bool,
    /// The session kind to evaluate gates for.
    #[arg(long, value_enum, default_value = "non-interactive")]
    session: SessionArg,
}

#[derive(Serialize)]
struct FlagRow<'a> {
    name: &'a str,
    value: bool,
    set_by: String,
    effective: bool,
    blocked_by: Option<&'static str>,
    gates: Vec<&'static str>,
    description: &'a str,
}

pub fn flags(g: &GlobalArgs, args: FlagsArgs) -> Result<(), CliError> {
    let (_, snap) = load_snapshot(g, &Overrides::default())?;
    let snap = snap.load_full();
    let kind = snap.session_kind(args.session.interactive());
    let rows: Vec<FlagRow<'_>> = snap
        .flags()
        .iter()
        .map(|f| FlagRow {
            name: &f.name,
            value: f.value,
            set_by: f.set_by.to_string(),
            effective: f.effective(kind),
            blocked_by: if f.value {
                f.blocked_by(kind).map(|g| g.as_str())
            } else {
                None
            },
            gates: f.decl.gates.iter().map(|g| g.as_str()).collect(),
            description: &f.decl.description,
        })
        .collect();
    if args.json {
        super::output::print_json(&rows)?;
        return Ok(());
    }
    let width = rows.iter().map(|r| r.name.len()).max().unwrap_or(4).max(4);
    outln!(
        "{:width$}  {:5}  {:7}  {:9}  BLOCKED BY",
        "FLAG",
        "VALUE",
        "SET BY",
        "EFFECTIVE"
    );
    for r in &rows {
        outln!(
            "{:width$}  {:5}  {:7}  {:9}  {}",
            r.name,
            if r.value { "on" } else { "off" },
            r.set_by,
            if r.effective { "yes" } else { "no" },
            r.blocked_by.unwrap_or("-"),
        );
    }
    Ok(())
}
