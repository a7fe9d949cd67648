//! `cadre run` and `cadre render`: a one-shot main session against the
//! configured provider (`render` only shows the first request).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::args::{RenderArgs, RunArgs, read_prompt};
use super::commands::{compact_now, help_text};
use super::emit::{Emitter, Print, event_sink};
use super::output::{OutputFormat, Progress, print_answer, print_line};
use super::prepare::{
    Mode, Prepared, first_message, first_message_with, prepare, wait_for_servers,
};
use super::results::{PromptStart, local_result, result_of};
use super::wire::Output;
use super::{CliError, GlobalArgs};
use crate::message::{ContentBlock, Message};
use crate::provider::ProviderErrorKind;
use crate::runtime::{self, EventSink, RunError, StopKind};

pub async fn run(g: &GlobalArgs, args: RunArgs) -> Result<(), CliError> {
    let prompt = read_prompt(args.prompt)?;
    let print = match args.output_format {
        OutputFormat::StreamJson => Print::Messages,
        _ => Print::Nothing,
    };
    let progress = match args.output_format {
        OutputFormat::StreamJson => None,
        _ => Some(Progress::new(false, g.quiet)),
    };
    // The accounts (cost, usage) and, for stream-json, the protocol lines.
    let emitter = Emitter::new(print, String::new(), String::new(), BTreeMap::new(), None);
    let events = event_sink(&emitter, progress.as_ref());
    let resumed = args.session.resuming();
    let prepared = prepare(
        g,
        &args.session,
        Mode {
            interactive: args.kind.interactive(),
            write_transcripts: true,
            wait_for_background: true,
            connect_mcp: true,
        },
        events,
        None,
    )?;
    let _reload = prepared.watch();
    emitter.configure(
        &prepared.engine.session_id,
        &prepared.session.spec().model,
        prepared.engine.snapshot.load().settings(),
    );
    let Prepared {
        mut session,
        engine,
        def,
        ..
    } = prepared;
    let start = PromptStart::now(&emitter);
    let source = if resumed { "resume" } else { "startup" };
    let start_context = session.session_start_hooks(source).await;
    // UserPromptSubmit sees the prompt as typed, before a slash command is
    // expanded.
    let contexts = match session.user_prompt_hooks(&prompt).await {
        Ok(c) => c,
        Err(reason) => {
            session.session_end_hooks("other").await;
            engine.shutdown(std::time::Duration::from_secs(5)).await;
            return Err(CliError::Failed(format!(
                "UserPromptSubmit hook blocked the prompt: {reason}"
            )));
        }
    };
    // A slash command: expanded (its shell lines run now); a built-in or
    // a refused shell line answers without the model.
    let (content, active) = match session.prompted(vec![ContentBlock::text(prompt)]).await {
        runtime::commands::Prompted::Send {
            blocks,
            skill,
            notes,
        } => sent(blocks, skill, notes),
        runtime::commands::Prompted::Local(text) => {
            session.session_end_hooks("other").await;
            engine.shutdown(std::time::Duration::from_secs(5)).await;
            let r = local_result(&emitter, &engine.session_id, &start, text, None);
            print_local(args.output_format, &r);
            return Ok(());
        }
        runtime::commands::Prompted::Builtin(name, instructions) => {
            let text = match name {
                "compact" => compact_now(&mut session, &engine, &instructions).await,
                "clear" => String::new(),
                other => help_text(&engine, other, false).await,
            };
            session.session_end_hooks("other").await;
            engine.shutdown(std::time::Duration::from_secs(5)).await;
            let r = local_result(&emitter, &engine.session_id, &start, text, Some(name));
            print_local(args.output_format, &r);
            return Ok(());
        }
    };
    let mut message = if resumed {
        Message::user(content)
    } else {
        first_message_with(&engine, def.as_deref(), content)
    };
    message.content.extend(contexts);
    message.content.extend(start_context);
    session.push_user_with(message, active);
    let cancel = CancellationToken::new();
    session.set_cancel(cancel.clone());
    // SIGINT and SIGTERM end the run alike (cli/signals.rs).
    let mut signal = None;
    let startup =
        std::time::Duration::from_millis(engine.snapshot.load().settings().mcp.startup_timeout_ms);
    let result = tokio::select! {
        r = async {
            wait_for_servers(&engine, progress.as_deref(), startup).await;
            session.run().await
        } => r,
        name = super::signals::interrupted() => {
            cancel.cancel();
            signal = Some(name);
            Err(RunError::Cancelled)
        }
    };
    session.session_end_hooks("other").await;
    // Anything still running ends with the process: record it as killed.
    engine.shutdown(std::time::Duration::from_secs(5)).await;
    let status = match &result {
        Ok(_) => "completed",
        Err(RunError::Cancelled) => "killed",
        Err(_) => "failed",
    };
    session.transcript().record(
        "end",
        serde_json::json!({"status": status, "signal": signal}),
    );
    let wire_result = result_of(
        &emitter,
        &engine.session_id,
        &start,
        &result,
        session.turns_this_prompt(),
    );
    print_outcome(g, args.output_format, result, &wire_result)
}

/// What `cadre run` prints and how it exits, once the run is over.
fn print_outcome(
    g: &GlobalArgs,
    format: OutputFormat,
    result: Result<runtime::Outcome, RunError>,
    wire_result: &super::wire::ResultOut,
) -> Result<(), CliError> {
    let line = || serde_json::to_string(&Output::Result(wire_result.clone())).unwrap_or_default();
    match result {
        Ok(outcome) => {
            let text = outcome.final_text.clone().unwrap_or_default().join("\n");
            if outcome.stop == StopKind::MaxTokens && !g.quiet {
                eprintln!("warning: the answer was cut at provider.max_tokens");
            }
            // A run that ended without an answer (the turn limit, the
            // repeated-call guard, no text at all) says why, whatever
            // --quiet says.
            for e in &wire_result.errors {
                eprintln!("error: {e}");
            }
            match format {
                OutputFormat::Text if wire_result.is_error && text.trim().is_empty() => {}
                OutputFormat::Text => print_answer(&text),
                OutputFormat::Json | OutputFormat::StreamJson => print_line(&line()),
            }
            // As Claude Code: an error result (the turn limit) exits 1.
            if wire_result.is_error {
                return Err(CliError::Exit(1));
            }
            Ok(())
        }
        Err(e) => {
            let msg = e.to_string();
            let config_problem =
                matches!(&e, RunError::Provider(p) if p.kind == ProviderErrorKind::Config);
            match format {
                OutputFormat::Text if config_problem => Err(CliError::Usage(msg)),
                OutputFormat::Text => Err(CliError::Failed(msg)),
                OutputFormat::Json | OutputFormat::StreamJson => {
                    print_line(&line());
                    eprintln!("error: {msg}");
                    Err(CliError::Exit(1))
                }
            }
        }
    }
}

/// A prompt to send: its blocks and the command to mark active; its
/// notes (shell lines not run, files not read) are said on stderr.
pub(super) fn sent(
    blocks: Vec<ContentBlock>,
    skill: Option<runtime::todos::ActiveSkill>,
    notes: Vec<String>,
) -> (Vec<ContentBlock>, Option<runtime::todos::ActiveSkill>) {
    for n in notes {
        eprintln!("cadre: {n}");
    }
    (blocks, skill)
}

/// A result that did not reach the model (a built-in, a refused shell
/// line), printed as the output format wants it.
fn print_local(format: OutputFormat, r: &super::wire::ResultOut) {
    match format {
        OutputFormat::Text => print_line(&r.result),
        OutputFormat::Json | OutputFormat::StreamJson => {
            print_line(&serde_json::to_string(&Output::Result(r.clone())).unwrap_or_default())
        }
    }
}

pub async fn render(g: &GlobalArgs, args: RenderArgs) -> Result<(), CliError> {
    let prompt = read_prompt(args.prompt)?;
    let events: EventSink = Arc::new(|_: &runtime::EngineEvent| {});
    let Prepared {
        mut session,
        engine,
        def,
        ..
    } = prepare(
        g,
        &args.session,
        Mode {
            interactive: args.kind.interactive(),
            write_transcripts: false,
            wait_for_background: true,
            connect_mcp: false,
        },
        events,
        None,
    )?;
    // Rendering sends nothing and starts nothing: MCP servers (processes,
    // connections) are left alone, so their tools are not in the body.
    let servers = engine.snapshot.load().mcp_servers.len();
    if servers > 0 && !g.quiet {
        eprintln!(
            "cadre: render starts no MCP server, so the tools of the {servers} configured \
             server(s) are not in this request; `cadre tools schema --mcp` lists them"
        );
    }
    let message = if args.session.resuming() {
        Message::user_text(prompt)
    } else {
        first_message(&engine, def.as_deref(), prompt)
    };
    session.push_user(message);
    let request = session
        .next_request()
        .map_err(|e| CliError::Failed(e.to_string()))?;
    let body = engine.provider.request_body(&request);
    let value: Value = serde_json::from_slice(&body)
        .map_err(|e| CliError::Failed(format!("request body is not JSON: {e}")))?;
    super::output::print_json(&value)
}
