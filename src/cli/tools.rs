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
    /// Also connect to the configured MCP servers (trusted folders only)
    /// and list their tools, as a session's first request would.
    #[arg(long)]
    mcp: bool,
}

pub async fn dispatch(g: &GlobalArgs, cmd: ToolsCommand) -> Result<(), CliError> {
    let ToolsCommand::Schema(args) = cmd;
    let (input, swap) = load_snapshot(g, &Overrides::default())?;
    let snap = swap.load_full();
    let kind = snap.session_kind(args.session.interactive());
    let implemented = crate::tools::builtin_tools();
    let available = runtime::available_tools(&snap, implemented.iter().map(|t| t.name()));
    let mut names = runtime::main_tool_pool(&available, &snap, kind, None);
    let mut mcp_defs = Vec::new();
    if args.mcp
        && let Some(manager) = super::mcp::connect_all(&snap, &input.load.cwd).await
    {
        let rules: &crate::permissions::Rules = &snap.rules;
        let tools = crate::mcp::session_mcp_tools(manager.tools(&[]), None, rules, &input.load.cwd);
        for t in tools {
            mcp_defs.push(t.definition());
        }
        for (name, state) in manager.states() {
            if state != crate::mcp::ServerState::Ready {
                eprintln!(
                    "cadre: MCP server `{name}` is not ready ({}); its tools are missing",
                    manager
                        .failure(&name)
                        .unwrap_or_else(|| "still connecting".into())
                );
            }
        }
        manager.shutdown().await;
        names.extend(mcp_defs.iter().map(|d| d.name.clone()));
    }
    if let Some(only) = &args.tool {
        if !names.contains(only) {
            return Err(CliError::Usage(format!(
                "--tool {only}: no such tool. Tools: {}",
                names.join(", ")
            )));
        }
        names.retain(|n| n == only);
    }
    let builtin: Vec<String> = names
        .iter()
        .filter(|n| !mcp_defs.iter().any(|d| &d.name == *n))
        .cloned()
        .collect();
    let mut defs = runtime::render_tools(&snap, kind, &builtin)
        .map_err(|e| CliError::Failed(e.to_string()))?;
    defs.extend(mcp_defs.into_iter().filter(|d| names.contains(&d.name)));
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
