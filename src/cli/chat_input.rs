//! The chat's input line (rustyline): history kept across sessions in the
//! user's state folder, Ctrl-R to search it, a line continued with a `\`
//! at its end (or a new line with Alt-Enter), Tab completion of slash
//! commands and of file paths after `@`, and Shift-Tab to cycle the
//! permission mode.

use std::borrow::Cow;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use rustyline::completion::{Completer, FilenameCompleter, Pair};
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::history::FileHistory;
use rustyline::validate::{ValidationContext, ValidationResult, Validator};
use rustyline::{
    Cmd, ConditionalEventHandler, Config, Context, Editor, Event, EventContext, EventHandler,
    Helper, KeyCode, KeyEvent, Modifiers, RepeatCount,
};

use super::CliError;
use crate::config::PermissionMode;

/// Entries kept in the history file.
const HISTORY_ENTRIES: usize = 1000;

/// The history file: `$XDG_STATE_HOME/cadre/chat-history`, else
/// `~/.local/state/cadre/chat-history`.
pub fn history_path() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_STATE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| dirs::home_dir().map(|h| h.join(".local").join("state")))?;
    Some(base.join("cadre").join("chat-history"))
}

struct ChatHelper {
    commands: Vec<String>,
    /// `agent-NAME` for each agent a prompt may name with `@`.
    agents: Vec<String>,
    files: FilenameCompleter,
}

impl Completer for ChatHelper {
    type Candidate = Pair;

    fn complete(
        &self,
        line: &str,
        pos: usize,
        ctx: &Context<'_>,
    ) -> rustyline::Result<(usize, Vec<Pair>)> {
        let before = &line[..pos];
        let start = before.rfind(char::is_whitespace).map_or(0, |i| {
            i + before[i..].chars().next().map_or(1, char::len_utf8)
        });
        let word = &before[start..];
        if start == 0 && word.starts_with('/') {
            let found = self
                .commands
                .iter()
                .filter(|c| c.starts_with(word))
                .map(|c| Pair {
                    display: c.clone(),
                    replacement: format!("{c} "),
                })
                .collect();
            return Ok((0, found));
        }
        if let Some(path) = word.strip_prefix('@') {
            let (at, mut found) = self.files.complete_path(path, path.len())?;
            let _ = ctx;
            let agents = self.agents.iter().filter(|a| a.starts_with(path));
            if at == 0 {
                found.extend(agents.map(|a| Pair {
                    display: a.clone(),
                    replacement: format!("{a} "),
                }));
            }
            return Ok((start + 1 + at, found));
        }
        Ok((pos, Vec::new()))
    }
}

impl Hinter for ChatHelper {
    type Hint = String;
}

impl Highlighter for ChatHelper {
    fn highlight_prompt<'b, 's: 'b, 'p: 'b>(
        &'s self,
        prompt: &'p str,
        _default: bool,
    ) -> Cow<'b, str> {
        Cow::Borrowed(prompt)
    }
}

impl Validator for ChatHelper {
    /// A line ending with `\` goes on: Enter starts the next line.
    fn validate(&self, ctx: &mut ValidationContext<'_>) -> rustyline::Result<ValidationResult> {
        Ok(if ctx.input().ends_with('\\') {
            ValidationResult::Incomplete
        } else {
            ValidationResult::Valid(None)
        })
    }
}

impl Helper for ChatHelper {}

/// Tells telemetry of each key pressed (nothing when it is off).
struct KeyActivity;

impl ConditionalEventHandler for KeyActivity {
    fn handle(&self, _: &Event, _: RepeatCount, _: bool, _: &EventContext<'_>) -> Option<Cmd> {
        crate::telemetry::user_activity();
        None
    }
}

/// What the prompt line gave.
pub enum Read {
    /// A prompt, entered.
    Prompt(String),
    /// Shift-Tab was pressed: the permission mode goes to the next one,
    /// and this text (what was on the line) is put back on it.
    NextMode(String),
    /// Ctrl-D on an empty line.
    End,
}

/// Shift-Tab: keeps the line as it is and leaves the editor (as Ctrl-C
/// does, with the line remembered).
struct NextModeKey(Arc<Mutex<Option<String>>>);

impl ConditionalEventHandler for NextModeKey {
    fn handle(&self, _: &Event, _: RepeatCount, _: bool, ctx: &EventContext<'_>) -> Option<Cmd> {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = Some(ctx.line().to_string());
        Some(Cmd::Interrupt)
    }
}

/// The mode Shift-Tab goes to from `now`, as Claude Code cycles them:
/// default → acceptEdits → plan → default, with bypassPermissions after
/// plan when the session was started in it; from any other mode
/// (`dontAsk`), default.
pub fn next_mode(now: PermissionMode, bypass_offered: bool) -> PermissionMode {
    match now {
        PermissionMode::Default => PermissionMode::AcceptEdits,
        PermissionMode::AcceptEdits => PermissionMode::Plan,
        PermissionMode::Plan if bypass_offered => PermissionMode::BypassPermissions,
        _ => PermissionMode::Default,
    }
}

/// The chat's line editor.
pub struct ChatInput {
    editor: Editor<ChatHelper, FileHistory>,
    history: Option<PathBuf>,
    /// The line as it was when Shift-Tab was pressed.
    next_mode: Arc<Mutex<Option<String>>>,
}

impl ChatInput {
    /// An editor completing `commands` (each with its `/`), with the
    /// history of earlier sessions loaded.
    /// `agents`: the names a prompt may mention as `@agent-NAME`.
    pub fn new(commands: Vec<String>, agents: &[String]) -> Result<ChatInput, CliError> {
        let config = Config::builder()
            .max_history_size(HISTORY_ENTRIES)
            .map_err(|e| CliError::Failed(format!("cannot start the line editor: {e}")))?
            .auto_add_history(false)
            .completion_type(rustyline::CompletionType::List)
            .build();
        let mut editor = Editor::with_config(config)
            .map_err(|e| CliError::Failed(format!("cannot start the line editor: {e}")))?;
        editor.set_helper(Some(ChatHelper {
            commands,
            agents: agents.iter().map(|a| format!("agent-{a}")).collect(),
            files: FilenameCompleter::new(),
        }));
        // Not Ctrl-J: an Enter pressed just before the editor takes the
        // terminal arrives as a line feed (the terminal's normal mode turns
        // CR into LF), and must send the line, not continue it.
        editor.bind_sequence(KeyEvent(KeyCode::Enter, Modifiers::ALT), Cmd::Newline);
        // Every other key is a person's activity, for telemetry's
        // `active_time` of type `user`; the key does what it does anyway.
        editor.bind_sequence(Event::Any, EventHandler::Conditional(Box::new(KeyActivity)));
        let next_mode = Arc::new(Mutex::new(None));
        editor.bind_sequence(
            KeyEvent(KeyCode::BackTab, Modifiers::NONE),
            EventHandler::Conditional(Box::new(NextModeKey(Arc::clone(&next_mode)))),
        );
        let history = history_path();
        if let Some(path) = &history
            && path.exists()
            && let Err(e) = editor.load_history(path)
        {
            tracing::warn!("chat history {}: {e}; starting without it", path.display());
        }
        Ok(ChatInput {
            editor,
            history,
            next_mode,
        })
    }

    /// Reads one prompt ([`Read::End`] at Ctrl-D). A `\` that ended a
    /// line joins it to the next with a newline.
    /// `typed` is already on the line, with the cursor after it (what was
    /// typed while the last turn ran).
    pub fn read(
        &mut self,
        prompt: &str,
        typed: &str,
    ) -> Result<Read, rustyline::error::ReadlineError> {
        // On a terminal the editor cannot drive (TERM=dumb and the like) it
        // reads a plain line and drops the initial text: the text typed
        // during the last turn is then shown after the prompt and put in
        // front of what is read.
        let (prompt, typed, ahead) = if plain_terminal() && !typed.is_empty() {
            (format!("{prompt}{typed}"), "", typed)
        } else {
            (prompt.to_string(), typed, "")
        };
        let read = self.editor.readline_with_initial(&prompt, (typed, ""));
        let shift_tab = self
            .next_mode
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        match (read, shift_tab) {
            (Err(rustyline::error::ReadlineError::Interrupted), Some(line)) => {
                Ok(Read::NextMode(line))
            }
            (Ok(line), _) => Ok(Read::Prompt(format!("{ahead}{line}").replace("\\\n", "\n"))),
            (Err(rustyline::error::ReadlineError::Eof), _) => Ok(Read::End),
            (Err(e), _) => Err(e),
        }
    }

    /// Adds a prompt to the history, and to the file (created readable by
    /// the user only: prompts may hold anything).
    pub fn remember(&mut self, line: &str) {
        let _ = self.editor.add_history_entry(line);
        let Some(path) = &self.history else { return };
        if !path.exists() {
            let created = path
                .parent()
                .map_or(Ok(()), std::fs::create_dir_all)
                .and_then(|()| {
                    use std::os::unix::fs::OpenOptionsExt;
                    std::fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .mode(0o600)
                        .open(path)
                        .map(drop)
                });
            if let Err(e) = created {
                tracing::warn!("chat history {}: {e}; not kept", path.display());
                self.history = None;
                return;
            }
        }
        if let Err(e) = self.editor.append_history(path) {
            tracing::warn!("chat history {}: {e}; not kept", path.display());
            self.history = None;
        }
    }
}

/// Whether the line editor treats this terminal as one it cannot drive
/// (the `TERM` names rustyline reads plain lines on).
fn plain_terminal() -> bool {
    std::env::var("TERM").is_ok_and(|t| ["dumb", "cons25", "emacs"].contains(&t.as_str()))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn shift_tab_cycles_the_modes_as_claude_code_does() {
        use PermissionMode as M;
        let cycle = |from, bypass| {
            let mut seen = vec![from];
            let mut now = next_mode(from, bypass);
            while now != from && seen.len() < 8 {
                seen.push(now);
                now = next_mode(now, bypass);
            }
            seen
        };
        assert_eq!(
            cycle(M::Default, false),
            [M::Default, M::AcceptEdits, M::Plan]
        );
        assert_eq!(
            cycle(M::BypassPermissions, true),
            [M::BypassPermissions, M::Default, M::AcceptEdits, M::Plan]
        );
        assert_eq!(next_mode(M::DontAsk, false), M::Default);
    }

    #[test]
    fn commands_and_at_paths_complete() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("notes.md"), "").unwrap();
        let helper = ChatHelper {
            commands: vec!["/compact".into(), "/clear".into(), "/mcp".into()],
            agents: vec!["agent-reviewer".into(), "agent-Explore".into()],
            files: FilenameCompleter::new(),
        };
        let history = FileHistory::new();
        let ctx = Context::new(&history);
        let (at, found) = helper.complete("/c", 2, &ctx).unwrap();
        let names: Vec<&str> = found.iter().map(|p| p.display.as_str()).collect();
        assert_eq!((at, names), (0, vec!["/compact", "/clear"]));
        // A slash later in the line is not a command.
        assert!(helper.complete("see /c", 6, &ctx).unwrap().1.is_empty());
        let line = format!("read @{}/no", dir.path().display());
        let (at, found) = helper.complete(&line, line.len(), &ctx).unwrap();
        assert_eq!(&line[..at], "read @");
        let want = format!("{}/notes.md", dir.path().display());
        assert_eq!(found[0].replacement, want);
        // `@agent-` completes the agents' names.
        let (at, found) = helper.complete("ask @agent-r", 12, &ctx).unwrap();
        let names: Vec<&str> = found.iter().map(|p| p.replacement.as_str()).collect();
        assert_eq!((at, names), (5, vec!["agent-reviewer "]));
    }
}
