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
use serde_json::Value;

use super::CliError;
use crate::runtime::todos::TodoStatus;
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
    /// The one `result` object at the end (Claude Code's shape, see docs/headless.md).
    Json,
    /// One JSON message per line as things happen, then the `result` (Claude Code's stream-json).
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

/// `--no-color` was given.
static NO_COLOUR_FLAG: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Colour and other escape sequences stay off for this process
/// (`--no-color`).
pub fn turn_colour_off() {
    NO_COLOUR_FLAG.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// Whether colour may be used at all: no `--no-color`, and `NO_COLOR`
/// unset or empty (as no-color.org asks).
pub fn colour_allowed() -> bool {
    !NO_COLOUR_FLAG.load(std::sync::atomic::Ordering::Relaxed)
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// How Markdown is drawn on stdout: `None` when stdout is not a terminal
/// (the text goes out as written), else the terminal's width and whether
/// colour is allowed.
pub fn markdown_on_stdout() -> Option<(usize, bool)> {
    if !std::io::stdout().is_terminal() {
        return None;
    }
    let (_, cols) = dialoguer::console::Term::stdout().size();
    Some((usize::from(cols), colour_allowed()))
}

/// `text` dimmed when stderr is a terminal that may show colour.
pub fn dim(text: &str) -> String {
    if colors_on_stderr() {
        format!("\x1b[2m{text}\x1b[0m")
    } else {
        text.to_string()
    }
}

/// Prints a model's answer: drawn as Markdown on a terminal
/// (src/cli/markdown.rs), as written anywhere else.
pub fn print_answer(text: &str) {
    match markdown_on_stdout() {
        Some((width, styled)) => {
            let drawn = super::markdown::Markdown::render(width, styled, text);
            write_out(format_args!("{}", drawn.trim_end_matches('\n')));
        }
        None => print_line(text),
    }
}

/// Writes one line to stdout and flushes it, ignoring a closed pipe.
/// The first line of `text`, at most `max` characters: a description in
/// a listing.
pub fn first_line(text: &str, max: usize) -> String {
    text.lines()
        .next()
        .unwrap_or("")
        .chars()
        .take(max)
        .collect()
}

pub fn print_line(line: &str) {
    write_out(format_args!("{line}"));
}

/// What a sub-agent progress line shows.
struct Running {
    /// Its line, on a terminal only (see [`Progress::on_event`]).
    bar: Option<ProgressBar>,
    label: String,
    agent_type: String,
    description: String,
    tools: u32,
    /// The `activeForm` of its todo item in progress.
    doing: Option<String>,
}

impl Running {
    /// Redraws its line with the latest figures.
    fn show(&self) {
        if let Some(bar) = &self.bar {
            bar.set_message(self.message());
        }
    }

    fn message(&self) -> String {
        match &self.doing {
            Some(d) => format!("{} … {} tools\n    └ {d}", self.label, self.tools),
            None => format!("{} … {} tools", self.label, self.tools),
        }
    }
}

/// A tool call waiting for its result, for the chat's tool lines.
struct PendingCall {
    /// `[TYPE] ` for a sub-agent's call, empty for the main session's.
    who: String,
    name: String,
    input: String,
}

/// Progress lines on stderr, one per running sub-agent, updated in place:
/// `[Explore] find auth files … 5 tools, 3.2s`, then a final `done (…)`.
/// In chat it also streams the main session's text to stdout and prints one
/// line per finished tool call (`  • [Explore] Grep FORK — ok`), so the
/// user sees every tool that ran and every failure, a failed spawn included.
pub struct Progress {
    multi: MultiProgress,
    visible: bool,
    running: Mutex<HashMap<String, Running>>,
    calls: Mutex<HashMap<String, PendingCall>>,
    /// Running tool calls by id: the tool's name, and the line of its
    /// progress once it reported some.
    progressing: Mutex<HashMap<String, (String, Option<ProgressBar>)>>,
    /// Chat: stream the main text and print tool lines.
    chat: bool,
    /// The main text streamed so far does not end with a newline.
    mid_line: std::sync::atomic::AtomicBool,
    /// Agents' `color` is shown: stderr is a terminal and `NO_COLOR` is
    /// not set.
    colored: bool,
    /// Without a terminal (a log file, a pipe): one line when a sub-agent
    /// starts and one when it ends, unless `--quiet`.
    lines: bool,
    /// Chat on a terminal: the main text is drawn as Markdown, a line at a
    /// time as it completes.
    markdown: Option<Mutex<super::markdown::Markdown>>,
    /// What each agent's model requests counted, for chat's `/cost` and
    /// `/context`.
    spent: Mutex<Spent>,
    /// The main text on its way to the screen, through the MessageDisplay
    /// hooks (chat).
    display: super::display::Display,
}

/// Model usage seen so far in this process.
#[derive(Debug, Default, Clone)]
pub struct Spent {
    /// By agent (`main`, or `[TYPE] description` for a sub-agent): its
    /// model, requests and usage.
    pub agents: std::collections::BTreeMap<String, (String, u32, crate::message::Usage)>,
    /// The main agent's last request: its model and the tokens it sent
    /// (the context it filled).
    pub last_main: Option<(String, u64)>,
}

/// `text` in an agent's colour (ANSI; orange and pink from the 256-colour
/// palette).
fn paint(color: crate::catalog::Color, text: &str) -> String {
    use crate::catalog::Color;
    use dialoguer::console::Style;
    let style = Style::new().force_styling(true);
    let style = match color {
        Color::Red => style.red(),
        Color::Blue => style.blue(),
        Color::Green => style.green(),
        Color::Yellow => style.yellow(),
        Color::Purple => style.magenta(),
        Color::Orange => style.color256(208),
        Color::Pink => style.color256(205),
        Color::Cyan => style.cyan(),
    };
    style.apply_to(text).to_string()
}

/// Whether colours may be written to stderr: a terminal, and no
/// `NO_COLOR` (any non-empty value turns colour off, as no-color.org asks).
fn colors_on_stderr() -> bool {
    std::io::stderr().is_terminal() && colour_allowed()
}

impl Progress {
    /// Progress on stderr: in place on a terminal, else plain lines
    /// (none with `quiet`, outside chat).
    pub fn new(chat: bool, quiet: bool) -> Arc<Progress> {
        let target = if std::io::stderr().is_terminal() {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        };
        Progress::with_target(chat, quiet, target)
    }

    fn with_target(chat: bool, quiet: bool, target: ProgressDrawTarget) -> Arc<Progress> {
        // indicatif also hides itself on a terminal it cannot draw on
        // (TERM=dumb); lines then go to stderr directly.
        let visible = !target.is_hidden();
        Arc::new(Progress {
            multi: MultiProgress::with_draw_target(target),
            visible,
            running: Mutex::new(HashMap::new()),
            calls: Mutex::new(HashMap::new()),
            progressing: Mutex::new(HashMap::new()),
            chat,
            mid_line: std::sync::atomic::AtomicBool::new(false),
            colored: visible && colors_on_stderr(),
            lines: !visible && (chat || !quiet),
            markdown: chat
                .then(markdown_on_stdout)
                .flatten()
                .map(|(width, styled)| Mutex::new(super::markdown::Markdown::new(width, styled))),
            spent: Mutex::new(Spent::default()),
            display: super::display::Display::default(),
        })
    }

    /// Prints one finished line on stderr above the progress bars. Without
    /// a terminal the bars are hidden and the line is printed as it is.
    fn println(&self, line: String) {
        use std::sync::atomic::Ordering;
        let newline_first = self.mid_line.swap(false, Ordering::Relaxed);
        if self.visible {
            self.multi.suspend(|| {
                if newline_first {
                    outln!();
                }
            });
            let _ = self.multi.println(line);
        } else if self.lines {
            if newline_first {
                outln!();
            }
            eprintln!("{line}");
        }
    }

    fn tool_event(&self, event: &EngineEvent, running: &HashMap<String, Running>) {
        let Ok(mut calls) = self.calls.lock() else {
            return;
        };
        match event {
            EngineEvent::ToolUse {
                agent_id,
                tool_use_id,
                name,
                input,
            } => {
                let who = match running.get(agent_id) {
                    Some(r) => format!("[{}] ", r.agent_type),
                    None => String::new(),
                };
                calls.insert(
                    tool_use_id.clone(),
                    PendingCall {
                        who,
                        name: name.clone(),
                        input: short_input(name, input),
                    },
                );
            }
            EngineEvent::ToolResult {
                tool_use_id, error, ..
            } => {
                if let Some(call) = calls.remove(tool_use_id) {
                    let outcome = match error {
                        Some(e) => format!("error: {}", shown(e)),
                        None => "ok".to_string(),
                    };
                    let sep = if call.input.is_empty() { "" } else { " " };
                    self.println(format!(
                        "  • {}{}{sep}{} — {outcome}",
                        call.who, call.name, call.input
                    ));
                }
            }
            _ => {}
        }
    }

    /// Hides the progress bars while something else uses the terminal
    /// (a question to the user); [`Progress::show`] brings them back.
    pub fn hide(&self) {
        if self.visible {
            self.multi.clear().ok();
            self.multi.set_draw_target(ProgressDrawTarget::hidden());
        }
    }

    pub fn show(&self) {
        if self.visible {
            self.multi.set_draw_target(ProgressDrawTarget::stderr());
        }
    }

    /// A spinner line of its own (`{spinner} MSG, 1.2s`) until the bar is
    /// finished; hidden without a terminal.
    pub fn status(&self, message: String) -> ProgressBar {
        let bar = self.multi.add(ProgressBar::new_spinner());
        bar.set_style(spinner_style());
        self.tick(&bar);
        bar.set_message(message);
        bar
    }

    /// Animates a spinner, on a terminal only: indicatif starts a thread
    /// per ticking bar, and a hidden bar has nothing to show (a turn that
    /// starts 1,000 background sub-agents started 1,000 threads).
    fn tick(&self, bar: &ProgressBar) {
        if self.visible {
            bar.enable_steady_tick(Duration::from_millis(200));
        }
    }

    pub fn sink(self: &Arc<Self>) -> EventSink {
        let me = Arc::clone(self);
        Arc::new(move |e: &EngineEvent| me.on_event(e))
    }

    /// A tool call's progress: a spinner line of its own on a terminal
    /// (`mcp__s__long: 3/5: step 3`), cleared when the call ends; in chat
    /// without a terminal one line per report.
    fn call_progress(&self, event: &EngineEvent) {
        let Ok(mut calls) = self.progressing.lock() else {
            return;
        };
        match event {
            EngineEvent::ToolUse {
                tool_use_id, name, ..
            } => {
                calls.insert(tool_use_id.clone(), (name.clone(), None));
            }
            EngineEvent::ToolProgress {
                tool_use_id,
                message,
                ..
            } => {
                let Some((name, bar)) = calls.get_mut(tool_use_id) else {
                    return;
                };
                let line = format!("{name}: {message}");
                if self.visible {
                    bar.get_or_insert_with(|| {
                        let b = self.multi.add(ProgressBar::new_spinner());
                        b.set_style(spinner_style());
                        b.enable_steady_tick(Duration::from_millis(200));
                        b
                    })
                    .set_message(line);
                } else if self.chat {
                    drop(calls);
                    self.println(format!("  … {line}"));
                }
            }
            EngineEvent::ToolResult { tool_use_id, .. } => {
                if let Some((_, Some(bar))) = calls.remove(tool_use_id) {
                    bar.finish_and_clear();
                }
            }
            _ => {}
        }
    }

    /// Clears the progress lines of tool calls that will never report a
    /// result (their turn was cancelled).
    pub fn clear_calls(&self) {
        if let Ok(mut calls) = self.progressing.lock() {
            for (_, (_, bar)) in calls.drain() {
                if let Some(bar) = bar {
                    bar.finish_and_clear();
                }
            }
        }
    }

    /// Writes drawn text to stdout above the progress lines.
    fn write_text(&self, text: &str) {
        if text.is_empty() {
            return;
        }
        self.multi.suspend(|| {
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(text.as_bytes());
            let _ = out.flush();
        });
    }

    /// The main agent's message is over (or its turn was cut): draws the
    /// Markdown still held back (a last line without a newline, a table).
    pub fn end_text(&self) {
        let rest = self.display.end();
        if !rest.is_empty() {
            self.show_text(&rest);
        }
        if let Some(md) = &self.markdown {
            let drawn = md.lock().map(|mut md| md.finish()).unwrap_or_default();
            self.write_text(&drawn);
        }
    }

    /// From now on the main text goes through `hooks` (the session chat
    /// runs now) on its way to the screen.
    pub fn display_through(&self, hooks: crate::runtime::display_hooks::DisplayHooks) {
        self.display.fire_with(hooks);
    }

    /// What the model requests of this process counted so far.
    pub fn spent(&self) -> Spent {
        self.spent.lock().map(|s| s.clone()).unwrap_or_default()
    }

    fn count(&self, agent_id: &str, model: &str, usage: &crate::message::Usage) {
        let label = match self.running.lock() {
            Ok(running) => running.get(agent_id).map_or_else(
                || agent_id.to_string(),
                |r| format!("[{}] {}", r.agent_type, r.description),
            ),
            Err(_) => agent_id.to_string(),
        };
        let Ok(mut spent) = self.spent.lock() else {
            return;
        };
        let entry = spent
            .agents
            .entry(label)
            .or_insert_with(|| (model.to_string(), 0, crate::message::Usage::default()));
        entry.1 += 1;
        let u = &mut entry.2;
        u.input_tokens += usage.input_tokens;
        u.output_tokens += usage.output_tokens;
        u.cache_read_input_tokens += usage.cache_read_input_tokens;
        u.cache_creation_input_tokens += usage.cache_creation_input_tokens;
        u.web_search_requests += usage.web_search_requests;
        if agent_id == "main" {
            let sent = usage.input_tokens
                + usage.cache_read_input_tokens
                + usage.cache_creation_input_tokens;
            spent.last_main = Some((model.to_string(), sent));
        }
    }

    fn on_event(&self, event: &EngineEvent) {
        match event {
            EngineEvent::ModelResponse {
                agent_id,
                model,
                usage,
                ..
            } if self.chat => self.count(agent_id, model, usage),
            // Before the sub-agents' lock: the MessageDisplay hooks the
            // text goes through report through this sink too.
            EngineEvent::TextDelta { agent_id, text } if self.chat && agent_id == "main" => {
                self.stream_text(text);
                return;
            }
            EngineEvent::Message {
                agent_id, message, ..
            } if agent_id == "main" && message.role == crate::message::Role::Assistant => {
                self.end_text();
            }
            EngineEvent::ToolUse { .. }
            | EngineEvent::ToolProgress { .. }
            | EngineEvent::ToolResult { .. } => self.call_progress(event),
            _ => {}
        }
        let Ok(mut running) = self.running.lock() else {
            return;
        };
        match event {
            EngineEvent::ToolUse { .. } | EngineEvent::ToolResult { .. } if self.chat => {
                self.tool_event(event, &running);
            }
            // Without a terminal, `run` shows the main agent's phases as
            // lines: each model answer and each of its tool calls (a
            // sub-agent's start and end have lines of their own).
            EngineEvent::ToolUse { agent_id, .. } | EngineEvent::ToolResult { agent_id, .. }
                if self.lines && agent_id == "main" =>
            {
                self.tool_event(event, &running);
            }
            EngineEvent::ModelResponse {
                agent_id,
                usage,
                api_ms,
                ..
            } if self.lines && !self.chat && agent_id == "main" => {
                self.println(format!(
                    "  model answered in {:.1}s ({} tokens in, {} out)",
                    *api_ms as f64 / 1000.0,
                    usage.input_tokens
                        + usage.cache_read_input_tokens
                        + usage.cache_creation_input_tokens,
                    usage.output_tokens
                ));
            }
            EngineEvent::SubagentStart {
                agent_id,
                agent_type,
                description,
                color,
                ..
            } => self.sub_agent_started(&mut running, agent_id, agent_type, description, *color),
            EngineEvent::SubagentProgress { agent_id, .. } => {
                if let Some(r) = running.get_mut(agent_id) {
                    r.tools += 1;
                    r.show();
                }
            }
            EngineEvent::Todos { agent_id, todos } => {
                self.todos_changed(&mut running, agent_id, todos);
            }
            EngineEvent::SubagentEnd {
                agent_id,
                status,
                tool_uses,
                duration_ms,
                total_tokens,
            } => {
                if let Some(r) = running.remove(agent_id) {
                    self.sub_agent_ended(&r, status, *tool_uses, *duration_ms, *total_tokens);
                }
            }
            _ => {}
        }
    }

    /// A sub-agent ended: its bar goes, a last line says how it went.
    fn sub_agent_ended(
        &self,
        r: &Running,
        status: &str,
        tool_uses: u32,
        duration_ms: u64,
        total_tokens: u64,
    ) {
        let word = if status == "completed" {
            "done"
        } else {
            status
        };
        let line = format!(
            "  {} {word} ({tool_uses} tools, {:.1}s, {total_tokens} tokens)",
            r.label,
            duration_ms as f64 / 1000.0
        );
        if let Some(bar) = &r.bar {
            bar.finish_and_clear();
        }
        self.println(line);
    }

    /// A piece of the main agent's text in chat, as the MessageDisplay
    /// hooks let it be shown: drawn as Markdown on a terminal, else
    /// written as it is.
    fn stream_text(&self, text: &str) {
        let shown = self.display.piece(text);
        self.show_text(&shown);
    }

    fn show_text(&self, text: &str) {
        if let Some(md) = &self.markdown {
            let drawn = md.lock().map(|mut md| md.push(text)).unwrap_or_default();
            self.write_text(&drawn);
            return;
        }
        if let Some(last) = text.chars().last() {
            self.mid_line
                .store(last != '\n', std::sync::atomic::Ordering::Relaxed);
        }
        self.multi.suspend(|| {
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(text.as_bytes());
            let _ = out.flush();
        });
    }

    /// A sub-agent started: its line (a bar on a terminal, else a start
    /// line), remembered until it ends.
    fn sub_agent_started(
        &self,
        running: &mut HashMap<String, Running>,
        agent_id: &str,
        agent_type: &str,
        description: &str,
        color: Option<crate::catalog::Color>,
    ) {
        // Without a terminal nothing is drawn: no bar (a template parse
        // and a place in the `MultiProgress` each; a turn may start 1,000
        // sub-agents); a start line is printed instead, unless quiet, and
        // then nothing is remembered.
        if !self.visible && !self.lines {
            return;
        }
        let bar = self.visible.then(|| {
            let bar = self.multi.add(ProgressBar::new_spinner());
            bar.set_style(spinner_style());
            self.tick(&bar);
            bar
        });
        let tag = format!("[{agent_type}]");
        let tag = match color {
            Some(c) if self.colored => paint(c, &tag),
            _ => tag,
        };
        let label = format!("{tag} {}", shown(description));
        match &bar {
            Some(bar) => bar.set_message(format!("{label} … 0 tools")),
            None => self.println(format!("  {label} started")),
        }
        running.insert(
            agent_id.to_string(),
            Running {
                bar,
                label,
                agent_type: agent_type.to_string(),
                description: description.to_string(),
                tools: 0,
                doing: None,
            },
        );
    }

    /// A todo list changed: a sub-agent's item in progress under its
    /// line; in chat, the main agent's whole list.
    fn todos_changed(
        &self,
        running: &mut HashMap<String, Running>,
        agent_id: &str,
        todos: &[crate::runtime::todos::Todo],
    ) {
        if let Some(r) = running.get_mut(agent_id) {
            r.doing = todos
                .iter()
                .find(|t| t.status == TodoStatus::InProgress)
                .map(|t| t.active_form.clone());
            r.show();
        } else if self.chat && agent_id == "main" {
            for t in todos {
                let mark = match t.status {
                    TodoStatus::Completed => "[x]",
                    TodoStatus::InProgress => "[~]",
                    TodoStatus::Pending => "[ ]",
                };
                self.println(format!("  {mark} {}", t.content));
            }
        }
    }
}

/// `{spinner} MSG, 3.2s`: the seconds tick with the spinner, between
/// progress events.
fn spinner_style() -> ProgressStyle {
    ProgressStyle::with_template("{spinner} {msg}, {secs}")
        .unwrap_or_else(|_| ProgressStyle::default_spinner())
        .with_key(
            "secs",
            |state: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
                let _ = write!(w, "{:.1}s", state.elapsed().as_secs_f64());
            },
        )
}

/// A tool call's input in a few words for a progress line: the field that
/// says what the call is about (the command, the path, the pattern, the
/// agent), on one line and at most 80 characters.
/// Text a model or a tool wrote, made safe to print on a terminal: its
/// control characters shown as symbols (see `markdown::visible`).
pub fn shown(text: &str) -> String {
    text.chars().filter_map(super::markdown::visible).collect()
}

pub fn short_input(tool: &str, input: &Value) -> String {
    let field = |k: &str| input.get(k).and_then(Value::as_str);
    let text = match tool {
        "Bash" => field("command").map(str::to_string),
        "Read" | "Write" | "Edit" | "NotebookEdit" => field("file_path").map(str::to_string),
        "Glob" | "Grep" => field("pattern").map(str::to_string),
        "Agent" => {
            let kind = field("subagent_type").unwrap_or("general-purpose");
            Some(match field("description") {
                Some(d) => format!("{kind}: {d}"),
                None => kind.to_string(),
            })
        }
        _ => None,
    };
    let text = text.unwrap_or_else(|| match input {
        Value::Object(m) if m.is_empty() => String::new(),
        Value::Null => String::new(),
        other => other.to_string(),
    });
    let one_line = shown(&text.split_whitespace().collect::<Vec<_>>().join(" "));
    match one_line.char_indices().nth(80) {
        Some((cut, _)) => format!("{}…", &one_line[..cut]),
        None => one_line,
    }
}

/// A notice on stderr, unless `--quiet`.
pub(super) fn note(g: &super::GlobalArgs, text: &str) {
    if !g.quiet {
        eprintln!("cadre: {text}");
    }
}

#[cfg(test)]
mod color_tests {
    use super::*;

    #[test]
    fn agent_colours_are_ansi_sequences() {
        use crate::catalog::Color;
        assert_eq!(paint(Color::Red, "[x]"), "\u{1b}[31m[x]\u{1b}[0m");
        assert_eq!(paint(Color::Orange, "[x]"), "\u{1b}[38;5;208m[x]\u{1b}[0m");
    }
}

#[cfg(test)]
mod tests {
    use super::{Progress, short_input};
    use crate::runtime::EngineEvent;
    use indicatif::ProgressDrawTarget;
    use serde_json::json;

    fn start(p: &Progress, id: &str) {
        p.on_event(&EngineEvent::SubagentStart {
            agent_id: id.into(),
            parent_agent_id: "main".into(),
            agent_type: "general-purpose".into(),
            description: "job".into(),
            model: "m".into(),
            fork: false,
            tool_use_id: format!("toolu_{id}"),
            color: None,
            prompt: String::new(),
            background: false,
            depth: 1,
        });
    }

    #[test]
    fn without_a_terminal_sub_agents_get_no_bar() {
        // Quiet, not chat: nothing is drawn or printed, so nothing is kept.
        let quiet = Progress::with_target(false, true, ProgressDrawTarget::hidden());
        for i in 0..100 {
            start(&quiet, &format!("a{i}"));
        }
        assert!(quiet.running.lock().unwrap().is_empty());
        // Otherwise a line is printed when a sub-agent ends: remembered,
        // no bar.
        for chat in [true, false] {
            let p = Progress::with_target(chat, false, ProgressDrawTarget::hidden());
            start(&p, "a1");
            let running = p.running.lock().unwrap();
            assert!(running["a1"].bar.is_none());
            assert_eq!(running["a1"].agent_type, "general-purpose");
        }
    }

    #[test]
    fn a_tool_line_shows_no_escape_sequence_of_the_model() {
        let line = short_input(
            "Bash",
            &json!({"command": "echo \u{1b}]52;c;ZXZpbA==\u{7} done"}),
        );
        assert_eq!(line, "echo ␛]52;c;ZXZpbA==␇ done");
    }

    #[test]
    fn short_input_picks_the_telling_field() {
        assert_eq!(
            short_input("Bash", &json!({"command": "cargo test\n  --locked"})),
            "cargo test --locked"
        );
        assert_eq!(
            short_input("Read", &json!({"file_path": "src/main.rs", "limit": 3})),
            "src/main.rs"
        );
        assert_eq!(
            short_input(
                "Agent",
                &json!({"description": "find flags", "prompt": "…", "subagent_type": "Explore"})
            ),
            "Explore: find flags"
        );
        assert_eq!(
            short_input("Agent", &json!({"description": "x", "prompt": "y"})),
            "general-purpose: x"
        );
        assert_eq!(short_input("TaskStop", &json!({})), "");
        assert_eq!(
            short_input("mcp__fs__read", &json!({"path": "a"})),
            r#"{"path":"a"}"#
        );
    }

    #[test]
    fn short_input_is_cut_on_a_character_boundary() {
        let long = "é".repeat(200);
        let s = short_input("Glob", &json!({ "pattern": long }));
        assert_eq!(s.chars().count(), 81);
        assert!(s.ends_with('…'));
    }
}
