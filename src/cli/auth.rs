//! `cadre auth status [--json]`: which credentials the model provider
//! uses, in the shape of Claude Code's `claude auth status --json` (the ACP
//! adapters run it to show the editor which account a session pays with).
//! cadre has no login of its own: a provider is "logged in" when its API
//! key variable is set.

use clap::{Args, Subcommand};
use serde_json::json;

use super::{CliError, GlobalArgs, Overrides, load_snapshot};
use crate::config::ProviderKind;

#[derive(Debug, Subcommand)]
pub enum AuthCommand {
    /// Which API key the model provider uses (exit 1 when there is none).
    Status(StatusArgs),
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Print JSON, as `claude auth status --json` does.
    #[arg(long)]
    json: bool,
}

pub fn dispatch(g: &GlobalArgs, cmd: AuthCommand) -> Result<(), CliError> {
    let AuthCommand::Status(args) = cmd;
    let (input, snap) = load_snapshot(g, &Overrides::default())?;
    let snap = snap.load_full();
    let provider = &snap.settings().provider;
    let name = match provider.kind {
        ProviderKind::Anthropic => "Anthropic",
        ProviderKind::Openai => "OpenAI-compatible",
    };
    let api_provider = crate::provider::api_provider(provider.kind);
    let key_env = crate::provider::key_env(provider);
    let has_key = input
        .load
        .env
        .iter()
        .any(|(k, v)| *k == key_env && !v.is_empty());
    if args.json {
        super::output::print_json(&json!({
            "loggedIn": has_key,
            "authMethod": if has_key { "api_key" } else { "none" },
            "apiProvider": api_provider,
            "apiKeySource": has_key.then_some(&key_env),
        }))?;
    } else if has_key {
        outln!("{name} provider: API key in {key_env}");
    } else {
        outln!("{name} provider: no API key ({key_env} is not set)");
    }
    if has_key {
        Ok(())
    } else {
        Err(CliError::Exit(1))
    }
}
