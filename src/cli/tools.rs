//! `cadre tools schema`: the tool definitions exactly as the main session
//! would send them now.

use clap::{Args, Subcommand};

use super::output::{SessionArg, print_json};
use super::{CliError, GlobalArgs, Overrides, load_snapshot};
use crate::runtime;

#[derive(Debug, Subcommand)]
pub enum ToolsCommand {
    /// Print the tool definitions (name, description, input_schema).
    Schema(SchemaArgs),
}

#[derive(Debug, Args)]
pub struct SchemaArgs {
    /// Print JSON: an array of {name, description, input_schema}.
    #[arg(long)]
    json: bool,
    /// Only this tool.
    #[arg(long, value_name = "NAME")]
    tool: Option<String>,
    /// The session kind to trim for.
    #[arg(long, value_enum, default_value = "non-interactive")]
    session: SessionArg,
}

pub fn dispatch(g: &GlobalArgs, cmd: ToolsCommand) -> Result<(), CliError> {
    let ToolsCommand::Schema(args) = cmd;
    let (_, swap) = load_snapshot(g, &Overrides::default())?;
    let snap = swap.load_full();
    let kind = snap.session_kind(args.session.interactive());
    let implemented = crate::tools::builtin_tools();
    let available = runtime::available_tools(&snap, implemented.iter().map(|t| t.name()));
    let mut names = runtime::main_tool_pool(&available, &snap, kind, None);
    if let Some(only) = &args.tool {
        if !names.contains(only) {
            return Err(CliError::Usage(format!(
                "--tool {only}: no such tool. Tools: {}",
                names.join(", ")
            )));
        }
        names.retain(|n| n == only);
    }
    let offer = runtime::tool_offer(&snap, implemented.iter().map(|t| t.name()));
    let defs = runtime::render_tools(&snap, kind, &names, Some(&offer))
        .map_err(|e| CliError::Failed(e.to_string()))?;
    if args.json {
        return print_json(&defs);
    }
    for (i, d) in defs.iter().enumerate() {
        if i > 0 {
            outln!();
        }
        outln!("## {}\n", d.name);
        outln!("{}\n", d.description);
        let schema = serde_json::to_string_pretty(&d.input_schema)
            .map_err(|e| CliError::Failed(e.to_string()))?;
        outln!("{schema}");
    }
    Ok(())
}
