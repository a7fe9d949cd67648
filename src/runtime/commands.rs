//! Slash commands: what a prompt that starts with `/NAME` becomes, for
//! every way a user sends one (`cadre run`, `-p`, a stream-json user
//! message, `cadre chat`), and the one table of built-in commands.
//!
//! A `/NAME ARGS` prompt is, in this order:
//!
//! - a built-in ([`BUILTINS`]: `/clear`, `/compact`, `/help`, `/mcp`),
//!   which the caller carries out (it owns the conversation);
//! - an MCP prompt, `/mcp__SERVER__PROMPT ARGS`;
//! - a skill or a command (`.claude/commands/**/*.md`; one list,
//!   `crate::catalog::skills`), expanded here ([`Session::expand`]):
//!   `$ARGUMENTS`, `$ARGUMENTS[N]` and `$N` (0-based, words split as a shell
//!   would, quotes grouping), `` !`command` `` lines run through the
//!   tool-call pipeline as Bash calls (the permission rules, the mode, the
//!   hooks; the entry's `allowed-tools` grant while it is active), and
//!   `@path` references read through the same pipeline as Read calls;
//! - anything else starting with `/NAME`: sent as written, after a note
//!   to the model that no such command exists (Claude Code's behaviour in
//!   `-p`).
//!
//! The Skill tool expands a skill or command the same way
//! ([`Session::expand`] with [`InvokedBy::Model`]), without `@path` reads.

use std::path::Path;
use std::sync::Arc;

use serde_json::json;

use super::EngineEvent;
use super::session::Session;
use super::texts::{
    CommandFile, CommandInvoked, CommandShellDenied, CommandShellDisabled, CommandShellFailed,
    CommandShellSkipped, UnknownCommand,
};
use super::todos::ActiveSkill;
use crate::catalog::Skill;
use crate::message::{ContentBlock, ToolResultContent};
use crate::snapshot::Snapshot;

use super::command_notes::Note;
pub use super::command_notes::{BUILTINS, CHAT_BUILTINS};
pub use super::todos::InvokedBy;

/// `/NAME ARGS` split: `None` unless `text` starts with `/` and a name
/// (letters, digits, `-`, `_`, `:`, `.`) followed by white space or the
/// end — so `/usr/bin/env` or `/ hi` are plain prompts.
pub fn split(text: &str) -> Option<(&str, &str)> {
    let rest = text.trim_start().strip_prefix('/')?;
    let end = rest
        .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | ':' | '.')))
        .unwrap_or(rest.len());
    let (name, after) = rest.split_at(end);
    if name.is_empty() || !(after.is_empty() || after.starts_with(char::is_whitespace)) {
        return None;
    }
    Some((name, after.trim()))
}

/// The text of a prompt given as blocks, when it is text only.
pub fn prompt_text(blocks: &[ContentBlock]) -> Option<String> {
    let texts: Vec<&str> = blocks
        .iter()
        .map(ContentBlock::as_text)
        .collect::<Option<_>>()?;
    (!texts.is_empty()).then(|| texts.join("\n"))
}

/// What a prompt the user typed becomes.
#[derive(Debug)]
pub enum Prompted {
    /// Send these blocks as the user's message; when `skill` is set, mark
    /// it active once the message is pushed ([`Session::push_user_with`]).
    Send {
        blocks: Vec<ContentBlock>,
        skill: Option<ActiveSkill>,
        /// Notes for the user (stderr): shell lines not run, files not read.
        notes: Vec<String>,
    },
    /// A built-in command (name, the rest of the line) for the caller.
    Builtin(&'static str, String),
    /// Nothing is sent; tell the user this (a refused shell line, a failed
    /// MCP prompt).
    Local(String),
}

/// An expanded skill or command.
#[derive(Debug, Default)]
pub struct Expanded {
    /// The text with the arguments and the shell lines' output in place.
    pub text: String,
    /// Whether the text placed the arguments itself (`$ARGUMENTS`, `$N`);
    /// otherwise a non-empty argument line is appended (`ARGUMENTS: …`).
    pub placed_args: bool,
    /// `@path` files read (user invocations): (input, result) per file.
    pub files: Vec<(String, String)>,
    pub notes: Vec<String>,
}

impl Session {
    /// What `blocks`, a prompt the user typed, becomes (see the module
    /// documentation). Shell lines run now, before anything is sent.
    pub async fn prompted(&self, blocks: Vec<ContentBlock>) -> Prompted {
        let Some(text) = prompt_text(&blocks) else {
            return send(blocks);
        };
        let Some((name, args)) = split(&text) else {
            return self.with_references(blocks, &text).await;
        };
        if let Some((b, _, _)) = BUILTINS.iter().find(|(b, _, _)| *b == name) {
            return Prompted::Builtin(b, args.to_string());
        }
        // As in Claude Code, folders are added headless with --add-dir
        // only (`cadre chat` carries `/add-dir` out before this point).
        if name == "add-dir" {
            return Prompted::Local(Note::ChatOnly { name: "add-dir" }.to_string());
        }
        let snap = self.engine.snapshot.load_full();
        if name.starts_with("mcp__") {
            let context = match self
                .prompt_expansion_hooks("mcp_prompt", name, args, "mcp", &text)
                .await
            {
                Ok(c) => c,
                Err(why) => return Prompted::Local(why),
            };
            return match crate::mcp::run_prompt_command(
                &self.engine.mcp,
                &snap.templates,
                name,
                args,
            )
            .await
            {
                Some(Ok(blocks)) => send(context.into_iter().chain(blocks).collect()),
                Some(Err(why)) => Prompted::Local(why),
                None => Prompted::Local(
                    Note::NoMcpPrompt {
                        name: name.to_string(),
                    }
                    .to_string(),
                ),
            };
        }
        let Some(skill) = snap.skills.get(name).cloned() else {
            let mut known: Vec<String> = snap
                .skills
                .skills
                .values()
                .filter(|s| s.user_invocable)
                .map(|s| format!("/{}", s.name))
                .collect();
            known.extend(BUILTINS.iter().map(|(b, _, _)| format!("/{b}")));
            let shown = 16.min(known.len());
            let more = known.len() - shown;
            known.truncate(shown);
            let note = snap.templates.show(&UnknownCommand {
                name: name.to_string(),
                known: known.join(", "),
                more,
            });
            let mut out = vec![ContentBlock::text(note)];
            out.extend(blocks);
            return send(out);
        };
        if !skill.user_invocable {
            return Prompted::Local(
                Note::NotUserInvocable {
                    name: skill.name.clone(),
                }
                .to_string(),
            );
        }
        let source = skill.source.settings_name();
        let context = match self
            .prompt_expansion_hooks("slash_command", name, args, source, &text)
            .await
        {
            Ok(c) => c,
            Err(why) => return Prompted::Local(why),
        };
        let active = ActiveSkill::of(&skill);
        // The entry's `allowed-tools` grant while its shell lines run.
        self.activate_skills(vec![active.clone()]);
        let expanded = match self.expand(&snap, &skill, args, InvokedBy::User).await {
            Ok(e) => e,
            Err(why) => return Prompted::Local(why),
        };
        let t = &snap.templates;
        let mut out: Vec<ContentBlock> = context;
        out.extend(expanded.files.iter().map(|(input, result)| {
            ContentBlock::text(t.show(&CommandFile {
                input: input.clone(),
                result: result.clone(),
            }))
        }));
        out.push(ContentBlock::text(t.show(&CommandInvoked {
            name: skill.name.clone(),
            args: args.to_string(),
        })));
        let mut body = expanded.text;
        if !expanded.placed_args && !args.is_empty() {
            body.push_str(&format!("\n\nARGUMENTS: {args}"));
        }
        out.push(ContentBlock::text(body));
        Prompted::Send {
            blocks: out,
            skill: Some(active),
            notes: expanded.notes,
        }
    }

    /// Expands `skill` for `args`: the arguments, then its shell lines
    /// (each a Bash call through the pipeline, refused as any call would
    /// be; not run at all for an entry whose folder is not trusted), then,
    /// for the user, its `@path` references. `Err` is why nothing is sent:
    /// a shell line was refused.
    pub(super) async fn expand(
        &self,
        snap: &Arc<Snapshot>,
        skill: &Skill,
        args: &str,
        by: InvokedBy,
    ) -> Result<Expanded, String> {
        self.engine.emit(EngineEvent::SkillActivated {
            agent_id: self.spec.agent_id.clone(),
            name: skill.name.clone(),
            trigger: match by {
                InvokedBy::User => "user",
                InvokedBy::Model => "model",
            },
            source: skill.source.settings_name(),
        });
        let (text, placed_args) = substitute(&skill.body, args);
        let mut out = Expanded {
            placed_args,
            ..Expanded::default()
        };
        let mut done = String::with_capacity(text.len());
        let mut rest = text.as_str();
        while let Some((before, command, after)) = next_shell_line(rest) {
            done.push_str(before);
            rest = after;
            if snap.settings().disable_skill_shell_execution {
                out.notes.push(
                    Note::ShellDisabled {
                        what: skill.what(),
                        name: skill.name.clone(),
                        command: command.to_string(),
                    }
                    .to_string(),
                );
                done.push_str(&snap.templates.show(&CommandShellDisabled {
                    command: command.to_string(),
                }));
                continue;
            }
            if !skill.shell_allowed {
                out.notes.push(
                    Note::ShellNotRun {
                        what: skill.what(),
                        name: skill.name.clone(),
                        command: command.to_string(),
                        path: skill.path.clone(),
                    }
                    .to_string(),
                );
                done.push_str(&snap.templates.show(&CommandShellSkipped {
                    command: command.to_string(),
                }));
                continue;
            }
            // PreSkillShellCommand hooks may refuse the line; what they
            // allow or ask about still goes through the permission
            // decision of the Bash call below.
            let invoked_by = match by {
                InvokedBy::User => "user",
                InvokedBy::Model => "claude",
            };
            if let Err(reason) = self
                .pre_skill_shell_command_hooks(&skill.name, command, invoked_by)
                .await
            {
                return Err(snap.templates.show(&CommandShellDenied {
                    command: command.to_string(),
                    reason: first_line(&reason),
                }));
            }
            let input = json!({
                "command": command,
                "description": super::command_notes::shell_call_description(&skill.name),
            });
            match self.side_tool_call(snap, "Bash", input).await {
                Ok((output, false)) => done.push_str(output.trim_end()),
                // A command that fails stops the expansion too, as in
                // Claude Code.
                Ok((output, true)) => {
                    return Err(snap.templates.show(&CommandShellFailed {
                        command: command.to_string(),
                        output: output.trim().to_string(),
                    }));
                }
                Err(reason) => {
                    return Err(snap.templates.show(&CommandShellDenied {
                        command: command.to_string(),
                        reason: first_line(&reason),
                    }));
                }
            }
        }
        done.push_str(rest);
        out.text = done;
        if by == InvokedBy::User {
            self.read_references(snap, &out.text, &mut out.files, &mut out.notes)
                .await;
        }
        Ok(out)
    }

    /// Reads the `@path` files `text` names (inside the project, through
    /// the Read tool's pipeline) into `files`; what is not read is a note.
    async fn read_references(
        &self,
        snap: &Arc<Snapshot>,
        text: &str,
        files: &mut Vec<(String, String)>,
        notes: &mut Vec<String>,
    ) {
        for path in file_references(text) {
            match self.read_for_agent(snap, &path, None).await {
                Some(Ok(file)) => files.push(file),
                Some(Err(note)) => notes.push(note.to_string()),
                None => {}
            }
        }
    }

    /// Reads `path` (relative to the working directory) for the agent, as
    /// the Read tool would: only a file inside the project, through the
    /// tool's pipeline (rules, hooks). `Some(Ok((input, text)))` with the
    /// call's input; `Some(Err(note))` when it is outside or the call was
    /// refused or failed; `None` when it is no file. `limit` caps the lines
    /// read, as the tool's own `limit` does.
    pub(super) async fn read_for_agent(
        &self,
        snap: &Arc<Snapshot>,
        path: &str,
        limit: Option<usize>,
    ) -> Option<Result<(String, String), Note>> {
        let file = self.spec.cwd.join(path);
        if !file.is_file() {
            return None;
        }
        let path = path.to_string();
        if !snap.project_files.holds(&file) {
            return Some(Err(Note::Outside { path }));
        }
        let mut input = json!({"file_path": file.display().to_string()});
        if let Some(limit) = limit {
            input["limit"] = json!(limit);
        }
        Some(
            match self.side_tool_call(snap, "Read", input.clone()).await {
                Ok((result, false)) => Ok((input.to_string(), result)),
                Ok((why, true)) | Err(why) => Err(Note::NotRead {
                    path,
                    why: first_line(&why),
                }),
            },
        )
    }

    /// A plain prompt (no `/command`): its `@path` files, read as a
    /// command's are, come first, then the prompt as typed (Claude Code
    /// expands `@path` in every prompt the user types).
    async fn with_references(&self, blocks: Vec<ContentBlock>, text: &str) -> Prompted {
        if file_references(text).is_empty() {
            return send(blocks);
        }
        let snap = self.engine.snapshot.load_full();
        // `@agent-NAME` of an agent this session may start: a note that
        // asks the model to hand the request to it (after the prompt).
        let visible = snap.visible_agents(self.spec.kind);
        let mentions: Vec<ContentBlock> = file_references(text)
            .iter()
            .filter_map(|r| r.strip_prefix("agent-"))
            .filter(|name| visible.iter().any(|d| d.name == *name))
            .map(|name| {
                ContentBlock::text(snap.templates.show(&super::texts::AgentMention {
                    name: name.to_string(),
                }))
            })
            .collect();
        let (mut files, mut notes) = (Vec::new(), Vec::new());
        self.read_references(&snap, text, &mut files, &mut notes)
            .await;
        let mut out: Vec<ContentBlock> = files
            .into_iter()
            .map(|(input, result)| {
                ContentBlock::text(snap.templates.show(&CommandFile { input, result }))
            })
            .collect();
        out.extend(blocks);
        out.extend(mentions);
        Prompted::Send {
            blocks: out,
            skill: None,
            notes,
        }
    }
}

fn send(blocks: Vec<ContentBlock>) -> Prompted {
    Prompted::Send {
        blocks,
        skill: None,
        notes: Vec::new(),
    }
}

fn first_line(text: &str) -> String {
    text.lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim()
        .to_string()
}

/// The text of a tool result.
pub(super) fn result_text(block: &ContentBlock) -> String {
    match block {
        ContentBlock::ToolResult { content, .. } => content
            .iter()
            .filter_map(|c| match c {
                ToolResultContent::Text { text } => Some(text.as_str()),
                ToolResultContent::Image { .. } => None,
            })
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// The words of `args` as a shell splits them: white space separates,
/// single and double quotes group (and are dropped).
pub fn split_args(args: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut started = false;
    let mut quote: Option<char> = None;
    for c in args.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => word.push(c),
            None if c == '"' || c == '\'' => {
                quote = Some(c);
                started = true;
            }
            None if c.is_whitespace() => {
                if started {
                    out.push(std::mem::take(&mut word));
                    started = false;
                }
            }
            None => {
                word.push(c);
                started = true;
            }
        }
    }
    if started {
        out.push(word);
    }
    out
}

/// `body` with `$ARGUMENTS[N]`, `$ARGUMENTS` and `$N` replaced (N from 0,
/// a missing word is empty), and whether any placeholder was there.
pub fn substitute(body: &str, args: &str) -> (String, bool) {
    let words = split_args(args);
    let word = |n: &str| -> String {
        n.parse::<usize>()
            .ok()
            .and_then(|i| words.get(i).cloned())
            .unwrap_or_default()
    };
    let mut out = String::with_capacity(body.len());
    let mut placed = false;
    let mut rest = body;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(a) = after.strip_prefix("ARGUMENTS") {
            let indexed = a.strip_prefix('[').and_then(|x| {
                let end = x.find(']')?;
                let n = &x[..end];
                (!n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())).then(|| (n, &x[end + 1..]))
            });
            match indexed {
                Some((n, tail)) => {
                    out.push_str(&word(n));
                    rest = tail;
                }
                None => {
                    out.push_str(args);
                    rest = a;
                }
            }
            placed = true;
            continue;
        }
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0 {
            out.push_str(&word(&after[..digits]));
            rest = &after[digits..];
            placed = true;
            continue;
        }
        out.push('$');
        rest = after;
    }
    out.push_str(rest);
    (out, placed)
}

/// The next `` !`command` `` in `text` (the `!` at the start or after
/// white space, the command on one line): (text before, command, text
/// after).
fn next_shell_line(text: &str) -> Option<(&str, &str, &str)> {
    let mut from = 0;
    while let Some(i) = text[from..].find("!`").map(|i| i + from) {
        let starts = text[..i]
            .chars()
            .next_back()
            .is_none_or(char::is_whitespace);
        let inner = &text[i + 2..];
        if starts
            && let Some(end) = inner.find(['`', '\n'])
            && inner[end..].starts_with('`')
            && !inner[..end].trim().is_empty()
        {
            return Some((&text[..i], inner[..end].trim(), &inner[end + 1..]));
        }
        from = i + 2;
    }
    None
}

/// The `@path` references in `text` (the `@` at the start or after white
/// space), each once, trailing punctuation dropped.
pub fn file_references(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (i, _) in text.match_indices('@') {
        if !text[..i]
            .chars()
            .next_back()
            .is_none_or(char::is_whitespace)
        {
            continue;
        }
        let rest = &text[i + 1..];
        let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
        let path = rest[..end].trim_end_matches(['.', ',', ';', ':', '!', '?', ')', '"', '\'']);
        if path.is_empty() || Path::new(path).is_absolute() && path.len() == 1 {
            continue;
        }
        if !out.iter().any(|p| p == path) {
            out.push(path.to_string());
        }
    }
    out
}

/// The headless `slash_commands` list: the built-ins, then every skill
/// and command.
pub fn slash_commands(snap: &Snapshot) -> Vec<String> {
    let mut out: Vec<String> = snap.skills.skills.keys().cloned().collect();
    out.extend(BUILTINS.iter().map(|(b, _, _)| (*b).to_string()));
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_command_line_splits_into_name_and_arguments() {
        assert_eq!(split("/greet Bob  Smith "), Some(("greet", "Bob  Smith")));
        assert_eq!(split("/frontend:comp"), Some(("frontend:comp", "")));
        assert_eq!(split("/usr/bin/env ls"), None);
        assert_eq!(split("/ hi"), None);
        assert_eq!(split("hello /greet"), None);
    }

    #[test]
    fn arguments_are_placed_as_claude_code_places_them() {
        let (t, placed) = substitute(
            "Hello $ARGUMENTS! first=$1 zero=$0 idx=$ARGUMENTS[1] none=$7 cost=$",
            "Bob \"New York\" extra",
        );
        assert!(placed);
        assert_eq!(
            t,
            "Hello Bob \"New York\" extra! first=New York zero=Bob idx=New York none= cost=$"
        );
        assert_eq!(substitute("Plain.\n", "x"), ("Plain.\n".to_string(), false));
        assert_eq!(split_args(" a 'b c' \"\" d"), ["a", "b c", "", "d"]);
    }

    #[test]
    fn shell_lines_and_file_references_are_found() {
        assert_eq!(
            next_shell_line("Out: !`echo hi` and"),
            Some(("Out: ", "echo hi", " and"))
        );
        assert_eq!(next_shell_line("no!`echo`"), None);
        assert_eq!(next_shell_line("!`open\nline`"), None);
        assert_eq!(
            file_references("See @notes.txt, and @src/a.rs. mail@example.com @notes.txt"),
            ["notes.txt", "src/a.rs"]
        );
    }
}
