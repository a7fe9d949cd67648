//! Output helpers shared by subcommands: JSON printing, the session-kind
//! and output-format arguments, stream-json events, and sub-agent progress
//! lines.

use std::collections::HashMap;
use std::io::{IsTerminal, Write};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clap::ValueEnum;
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::Serialize;
use serde_json::{Value, json};

use super::CliError;
use crate::runtime::{EngineEvent, EventSink};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SessionArg {
    Interactive,
    NonInteractive,
}

impl SessionArg {
    pub fn interactive(self) -> bool {
        self == SessionArg::Interactive
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// The final answer as plain text.
    Text,
    /// One JSON object at the end (result, is_error, num_turns, duration_ms, usage, session_id).
    Json,
    /// One JSON event per line as things happen, then the result object.
    StreamJson,
}

/// Writes one line of command output. When stdout is closed (the reader
/// went away), there is nobody left to tell: exit quietly.
pub fn write_out(args: std::fmt::Arguments<'_>) {
    let mut out = std::io::stdout().lock();
    if let Err(e) = writeln!(out, "{args}").and_then(|()| out.flush())
        && e.kind() == std::io::ErrorKind::BrokenPipe
    {
        std::process::exit(0);
    }
}

/// Prints a value as pretty JSON on stdout.
pub fn print_json<T: Serialize>(value: &T) -> Result<(), CliError> {
    let text = serde_json::to_string_pretty(value).map_err(|e| CliError::Failed(e.to_string()))?;
    outln!("{text}");
    Ok(())
}

/// Writes one line to stdout and flushes it, ignoring a closed pipe.
pub fn print_line(line: &str) {
    write_out(format_args!("{line}"));
}

/// stream-json: one event per line. Text deltas and messages of every
/// session, tool calls, and the sub-agent lifecycle (`subagent_start`,
/// `subagent_progress`, `subagent_end`).
pub fn stream_json_sink() -> EventSink {
    Arc::new(|event: &EngineEvent| {
        if let Ok(line) = serde_json::to_string(event) {
            print_line(&line);
        }
    })
}

/// What a sub-agent progress line shows.
struct Running {
    bar: ProgressBar,
    label: String,
    tools: u32,
}

/// Progress lines on stderr, one per running sub-agent, updated in place:
/// `[Explore] find auth files … 5 tools, 3.2s`, then a final `done (…)`.
/// Optionally also streams the main session's text to stdout.
pub struct Progress {
    multi: MultiProgress,
    running: Mutex<HashMap<String, Running>>,
    stream_main_text: bool,
}

impl Progress {
    pub fn new(stream_main_text: bool) -> Arc<Progress> {
        let target = if std::io::stderr().is_terminal() {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        };
        Arc::new(Progress {
            multi: MultiProgress::with_draw_target(target),
            running: Mutex::new(HashMap::new()),
            stream_main_text,
        })
    }

    pub fn sink(self: &Arc<Self>) -> EventSink {
        let me = Arc::clone(self);
        Arc::new(move |e: &EngineEvent| me.on_event(e))
    }

    fn on_event(&self, event: &EngineEvent) {
        let Ok(mut running) = self.running.lock() else {
            return;
        };
        match event {
            EngineEvent::TextDelta { agent_id, text }
                if self.stream_main_text && agent_id == "main" =>
            {
                self.multi.suspend(|| {
                    let mut out = std::io::stdout().lock();
                    let _ = out.write_all(text.as_bytes());
                    let _ = out.flush();
                });
            }
            EngineEvent::SubagentStart {
                agent_id,
                agent_type,
                description,
                ..
            } => {
                let bar = self.multi.add(ProgressBar::new_spinner());
                // The seconds tick with the spinner, between progress events.
                let style = ProgressStyle::with_template("{spinner} {msg}, {secs}")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner())
                    .with_key(
                        "secs",
                        |state: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
                            let _ = write!(w, "{:.1}s", state.elapsed().as_secs_f64());
                        },
                    );
                bar.set_style(style);
                bar.enable_steady_tick(Duration::from_millis(200));
                let label = format!("[{agent_type}] {description}");
                bar.set_message(format!("{label} … 0 tools"));
                running.insert(
                    agent_id.clone(),
                    Running {
                        bar,
                        label,
                        tools: 0,
                    },
                );
            }
            EngineEvent::SubagentProgress { agent_id, .. } => {
                if let Some(r) = running.get_mut(agent_id) {
                    r.tools += 1;
                    r.bar
                        .set_message(format!("{} … {} tools", r.label, r.tools));
                }
            }
            EngineEvent::SubagentEnd {
                agent_id,
                status,
                tool_uses,
                duration_ms,
                total_tokens,
            } => {
                if let Some(r) = running.remove(agent_id) {
                    let word = if status == "completed" {
                        "done"
                    } else {
                        status.as_str()
                    };
                    let line = format!(
                        "  {} {word} ({tool_uses} tools, {:.1}s, {total_tokens} tokens)",
                        r.label,
                        *duration_ms as f64 / 1000.0
                    );
                    r.bar.finish_and_clear();
                    let _ = self.multi.println(line);
                }
            }
            _ => {}
        }
    }
}

/// The result object of `run --output-format json|stream-json`.
pub fn result_object(
    result: &str,
    is_error: bool,
    num_turns: u32,
    duration_ms: u64,
    usage: &Value,
    session_id: &str,
    stop_reason: &str,
) -> Value {
    json!({
        "type": "result",
        "result": result,
        "is_error": is_error,
        "num_turns": num_turns,
        "duration_ms": duration_ms,
        "usage": usage,
        "session_id": session_id,
        "stop_reason": stop_reason,
    })
}
