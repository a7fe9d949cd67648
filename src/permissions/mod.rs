//! Permission rules and decisions (SPEC §17). Rules use Claude Code's
//! syntax and are parsed once, when settings load; [`decide`] then answers
//! allow, ask or deny for one tool call from the rules and the session's
//! permission mode. It does not prompt anyone, run hooks or know which agent
//! is calling: the caller turns an `Ask` into a prompt, a denial, or (in
//! `bubble` mode) a question for the parent session.
//!
//! Rule kinds, as written in settings:
//! - `Tool`: every use of that tool (`Read`, `Bash`, `mcp__fs__read`).
//! - `mcp__server__*` (or `mcp__server`): every tool of one MCP server;
//!   `mcp__*` every MCP tool.
//! - `Bash(prefix:*)` / `Bash(prefix *)`: commands whose words start with
//!   the words of `prefix`; `Bash(cmd)`: exactly that command; a `*`
//!   elsewhere (`Bash(npm*)`, `Bash(git * --dry-run)`) stands for any
//!   text, across words. Leading `NAME=value` words are assignments the
//!   command must make itself. Commands are parsed first ([`shell`]), and
//!   rules apply to each simple command.
//! - `Tool(glob)` for path tools: `Read`, `Write`, `Edit`, `Glob`, `Grep`.
//! - `Agent(T)` / `Task(T)`: spawning agents of type `T`.
//! - `Skill(name)`: loading that skill.
//! - `WebFetch(domain:example.com)`: fetches from that host;
//!   `WebFetch(domain:*.example.com)` from any host below it.

pub mod paths;
pub mod shell;
pub mod texts;
pub mod url;

use std::path::{Path, PathBuf};

use globset::{GlobBuilder, GlobMatcher};
use serde::Serialize;
use serde_json::Value;

use crate::config::{PermissionMode, PermissionSettings};
use crate::paths::lexical as normalize;
use paths::Resolved;
use shell::{Parsed, SimpleCommand, Word};

/// What the permission check says about one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Allow,
    /// Ask the user; `reason` names the rule or mode that asked.
    Ask {
        reason: Reason,
    },
    /// Refused; `reason` names the rule or mode that refused.
    Deny {
        reason: Reason,
    },
}

/// What decided a call, as data: the `permission_reason` template words it
/// (for the model's denial, the approval prompt and `cadre permissions
/// check`), so no sentence of it is Rust text. `kind` names the variant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Reason {
    /// A deny rule matched.
    DenyRule { rule: String },
    /// An ask rule matched.
    AskRule { rule: String },
    /// A deny or ask rule (`list`) might match a command that cannot be
    /// resolved; `doubts` say why.
    UnsureRule {
        list: RuleList,
        rule: String,
        doubts: Vec<Doubt>,
    },
    /// The permission mode decided.
    Mode(ModeReason),
    /// An edit outside the working directory and the added directories.
    OutsideDirs { path: String, mode: ModeReason },
    /// A PreToolUse hook denied; `said` is its reason (may be empty).
    HookDenied { said: String },
    /// A PreToolUse hook asked.
    HookAsked { said: String },
    /// A PreToolUse hook allowed, and no deny or ask rule applied.
    HookAllowed { said: String },
    /// `asked` would have asked, and the mode is `dontAsk`.
    DontAsk { asked: Box<Reason> },
    /// Allow rules covered the call.
    AllowRules { rules: Vec<String> },
    /// A tool every mode allows because it only reads or manages agents.
    ReadsOnly { tool: String },
    /// A tool every mode allows because it changes nothing outside the
    /// session.
    SessionOnly { tool: String },
}

impl shell::ShellDoubt {
    /// The doubt in words, through the `shell_doubt` template.
    pub fn words(&self, templates: &crate::templates::Templates) -> String {
        templates.show(&texts::ShellDoubtText {
            doubt: self.clone(),
        })
    }
}

impl Reason {
    /// The reason in words, through the `permission_reason` template.
    pub fn words(&self, templates: &crate::templates::Templates) -> String {
        templates.show(&texts::PermissionReason {
            reason: self.clone(),
        })
    }
}

/// Which rule list a rule is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RuleList {
    Deny,
    Ask,
}

/// The permission mode that decided, and what else the text says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ModeReason {
    pub mode: String,
    /// WebFetch: the host no rule allows (`None` with `bad_url`: the URL
    /// has no host WebFetch can fetch).
    pub domain: Option<String>,
    pub bad_url: bool,
    /// Bash: why no prefix rule could allow the command (empty if it could).
    pub uncoverable: Vec<Doubt>,
}

/// One reason a Bash command cannot be judged with certainty, or cannot be
/// allowed by a prefix rule. `kind` names the variant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Doubt {
    /// What the shell parser found uncertain.
    Shell { doubt: shell::ShellDoubt },
    /// A simple command with words only known when the shell runs.
    UnknownWords { command: String },
    /// A redirection to a known name after a change of directory.
    RedirectAfterCd { target: String },
    /// A redirection to a name only known when the shell runs.
    RedirectUnknown { target: String },
    /// An assignment to a variable that is not known to be safe.
    SetsVariable { name: String },
    /// A write outside the allowed folders.
    WritesOutside { path: String },
    /// A write to a name only known when the shell runs.
    WritesUnknown { target: String },
}

/// Tools allowed by every mode when no rule matches: they only read (MCP
/// resources included), or they manage agents (whose own calls are checked
/// in their own sessions), or coordinate a team (its task list lives in the
/// team's folder).
pub const READ_AND_AGENT_TOOLS: &[&str] = &[
    "Read",
    "Glob",
    "Grep",
    "ListMcpResources",
    "ReadMcpResource",
    "Agent",
    "SendMessage",
    "TaskOutput",
    "TaskStop",
    "TaskCreate",
    "TaskList",
    "TaskGet",
    "TaskUpdate",
    "TeamCreate",
    "TeamDelete",
];

/// Tools allowed by every mode when no rule matches because they change
/// nothing outside the session (TodoWrite keeps the session's own list;
/// Skill loads a skill's text; AskUserQuestion asks the user, who may
/// decline; StructuredOutput hands the caller the run's answer).
pub const SESSION_ONLY_TOOLS: &[&str] =
    &["TodoWrite", "Skill", "AskUserQuestion", "StructuredOutput"];

/// Tools that change files, allowed without asking in `acceptEdits`.
pub const EDIT_TOOLS: &[&str] = &["Write", "Edit", "NotebookEdit"];

/// One parsed rule. Two rules are equal when their text is.
#[derive(Debug, Clone)]
pub struct Rule {
    text: String,
    kind: RuleKind,
    /// Where the rule was written (`file:line:col`, a variable or a flag),
    /// when known; named in denials.
    origin: Option<String>,
}

#[derive(Debug, Clone)]
enum RuleKind {
    /// Every call of the named tool.
    Tool(String),
    /// Every tool whose name starts with this (MCP servers).
    ToolPrefix(String),
    /// Bash commands: the rule's leading assignments (name, value; `*` in
    /// a value stands for any text), each of which the command must make
    /// itself, and its words.
    Bash {
        env: Vec<(String, String)>,
        words: BashWords,
    },
    /// Path tools whose target path matches.
    Path {
        tools: &'static [&'static str],
        glob: GlobMatcher,
        anchor: Anchor,
    },
    /// Agent calls for this agent type.
    AgentType(String),
    /// WebFetch calls to this host (lower case); `*.` first: any host
    /// below the rest.
    Domain(String),
    /// Skill calls loading this skill.
    SkillName(String),
}

/// The words of a Bash rule.
#[derive(Debug, Clone)]
enum BashWords {
    /// Commands whose words start with these words (`git status:*`,
    /// `git status *`: the one `*` at the end).
    Prefix(Vec<String>),
    /// Exactly this command (as words).
    Exact(Vec<String>),
    /// A `*` elsewhere (`npm*`, `git * --dry-run`): the words joined by
    /// [`WORD_GAP`], where each `*` stands for any text, word gaps
    /// included.
    Wild(String),
}

/// What stands between two words when a [`BashWords::Wild`] pattern is
/// matched: a character no shell word can hold, so a space inside one
/// quoted word never passes for a gap between two.
const WORD_GAP: char = '\0';

/// What stands for a rule's `*` while its words are split like a command's
/// (so the shell parse does not read it as a glob).
const STAR: char = '\u{E000}';

/// What a path rule's glob is relative to.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Anchor {
    /// The session's working directory.
    Cwd,
    /// The file system root (the glob is absolute).
    Root,
}

impl PartialEq for Rule {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
    }
}

impl Eq for Rule {}

impl Rule {
    /// Parses one rule; the error says what is wrong with it.
    pub fn parse(text: &str) -> Result<Rule, String> {
        let kind =
            parse_kind(text.trim()).map_err(|why| format!("permission rule '{text}': {why}"))?;
        Ok(Rule {
            text: text.to_string(),
            kind,
            origin: None,
        })
    }

    /// The rule as written in settings.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The tool the rule names, by its current name (`Task(x)` names
    /// `Agent`); `None` for a rule over MCP names.
    pub fn tool(&self) -> Option<&str> {
        match &self.kind {
            RuleKind::ToolPrefix(_) => None,
            RuleKind::Tool(name) if name.starts_with("mcp__") => None,
            _ => {
                let t = self.text.trim();
                Some(canonical_tool(t.split('(').next().unwrap_or(t)))
            }
        }
    }

    /// Why a well-formed rule can still never match a call, if it cannot:
    /// a Bash rule whose text is more than one command (a rule is matched
    /// against each simple command on its own).
    pub fn never_matches(&self) -> Option<String> {
        let RuleKind::Bash { .. } = &self.kind else {
            return None;
        };
        let t = self.text.trim();
        let spec = t
            .split_once('(')
            .and_then(|(_, rest)| rest.strip_suffix(')'))?;
        let spec = spec.trim();
        let body = spec
            .strip_suffix(":*")
            .or_else(|| spec.strip_suffix(" *"))
            .unwrap_or(spec);
        let p = shell::parse(&body.replace('*', &STAR.to_string()));
        (p.commands.len() > 1).then(|| {
            let shown: Vec<String> = p
                .commands
                .iter()
                .map(|c| with_env(c).replace(STAR, "*"))
                .collect();
            format!(
                "permission rule '{}' holds {} commands ({}), but a rule is matched against one command at a time, so it never matches; write one rule for each",
                self.text,
                p.commands.len(),
                shown.join(", ")
            )
        })
    }

    /// Where the rule was written, if known.
    pub fn origin(&self) -> Option<&str> {
        self.origin.as_deref()
    }

    fn cited(&self) -> Cited {
        Cited {
            rule: self.text.clone(),
            origin: self.origin.clone(),
        }
    }

    /// Whether the rule covers this call, or might (a Bash command that
    /// cannot be resolved with certainty): the reading for deny and ask
    /// rules. Allow rules are applied more strictly by [`decide`].
    pub fn matches(&self, tool: &str, input: &Value, cwd: &Path) -> bool {
        let call = Call::new(tool, input, cwd);
        self.match_call(&call) != Match::No
    }

    fn match_call(&self, call: &Call) -> Match {
        let tool = call.tool;
        match &self.kind {
            RuleKind::Tool(name) => Match::from(name == tool),
            RuleKind::ToolPrefix(prefix) => Match::from(tool.starts_with(prefix.as_str())),
            RuleKind::Bash { .. } => match &call.bash {
                Some(b) if tool == "Bash" => self.match_bash(b),
                _ => Match::No,
            },
            // A Bash redirection that writes a file is an edit of it.
            RuleKind::Path { tools, .. } if tool == "Bash" && tools.contains(&"Write") => {
                let Some(b) = &call.bash else {
                    return Match::No;
                };
                let mut m = Match::No;
                for w in &b.writes {
                    match w {
                        Some(p) if self.matches_path(p, call.cwd) => return Match::Yes,
                        Some(_) => {}
                        None => m = Match::Maybe,
                    }
                }
                m
            }
            RuleKind::Path { tools, .. } => match &call.path {
                Some(p) if tools.contains(&tool) => Match::from(self.matches_path(p, call.cwd)),
                _ => Match::No,
            },
            // Agent-type rules are applied by the Agent tool after routing
            // (SPEC §6): a fork ignores `subagent_type`, and a denied type
            // gets its own message. See `Rules::denied_agent_type`.
            RuleKind::AgentType(_) => Match::No,
            RuleKind::SkillName(n) => Match::from(
                tool == "Skill"
                    && call
                        .input_skill
                        .as_deref()
                        .is_some_and(|s| s.trim().trim_start_matches('/') == n),
            ),
            RuleKind::Domain(d) => match &call.host {
                Some(h) if tool == "WebFetch" => Match::from(domain_matches(d, h)),
                _ => Match::No,
            },
        }
    }

    /// Deny/ask reading of a Bash rule: it matches if it matches any simple
    /// command, and might match when the parse is uncertain.
    fn match_bash(&self, b: &BashCall) -> Match {
        let mut result = Match::No;
        for c in &b.parsed.commands {
            match self.match_command(c, true) {
                Match::Yes => return Match::Yes,
                Match::Maybe => result = Match::Maybe,
                Match::No => {}
            }
        }
        if !b.parsed.uncertain.is_empty() {
            result = Match::Maybe;
        }
        result
    }

    /// Whether a path rule matches the path as written or as resolved.
    fn matches_path(&self, p: &Resolved, cwd: &Path) -> bool {
        let RuleKind::Path { glob, anchor, .. } = &self.kind else {
            return false;
        };
        path_matches(glob, anchor, &p.written, cwd)
            || path_matches(glob, anchor, &p.resolved, &crate::paths::resolve(cwd))
    }

    /// Whether a path rule matches both the path as written and as resolved
    /// (the reading for allow rules: a link inside an allowed folder does
    /// not make its target allowed).
    fn covers_path(&self, p: &Resolved, cwd: &Path) -> bool {
        let RuleKind::Path { glob, anchor, .. } = &self.kind else {
            return false;
        };
        path_matches(glob, anchor, &p.written, cwd)
            && path_matches(glob, anchor, &p.resolved, &crate::paths::resolve(cwd))
    }

    /// Whether the rule allows every use of Bash.
    fn is_whole_bash(&self) -> bool {
        matches!(&self.kind, RuleKind::Tool(name) if name == "Bash")
    }

    /// Matches one simple command: the rule's assignments against the
    /// command's own, then its words. `loose` (deny and ask rules) also
    /// matches a command run by path (`/bin/rm` for `rm`) and answers
    /// `Maybe` where an unknown word could make it match.
    fn match_command(&self, c: &SimpleCommand, loose: bool) -> Match {
        let RuleKind::Bash { env, words } = &self.kind else {
            return Match::No;
        };
        let mut by_env = Match::Yes;
        for (name, value) in env {
            match c.env.iter().rev().find(|(n, _)| n == name) {
                Some((_, Word::Known(v))) if wild_match(value, v) => {}
                Some((_, Word::Unknown(_))) if loose => by_env = Match::Maybe,
                _ => return Match::No,
            }
        }
        let by_words = match words {
            BashWords::Prefix(w) => match_words(w, true, c, loose),
            BashWords::Exact(w) => match_words(w, false, c, loose),
            BashWords::Wild(p) => match_wild(p, c, loose),
        };
        by_env.min(by_words)
    }
}

/// A Bash prefix or exact rule's words against a command, word by word.
fn match_words(rule: &[String], prefix: bool, c: &SimpleCommand, loose: bool) -> Match {
    for (i, r) in rule.iter().enumerate() {
        let Some(w) = c.words.get(i) else {
            return Match::No;
        };
        match w {
            Word::Known(w) => {
                let same = w == r
                    || (loose && i == 0 && w.contains('/') && w.rsplit('/').next() == Some(r));
                if !same {
                    return Match::No;
                }
            }
            // An expansion may stand for any number of words.
            Word::Unknown(_) => return if loose { Match::Maybe } else { Match::No },
        }
    }
    if prefix || c.words.len() == rule.len() {
        return Match::Yes;
    }
    let rest_unknown = c.words[rule.len()..]
        .iter()
        .all(|w| matches!(w, Word::Unknown(_)));
    if loose && rest_unknown {
        Match::Maybe
    } else {
        Match::No
    }
}

/// A wildcard rule against a command: its known words joined by
/// [`WORD_GAP`] must match the pattern. A word holding the gap character
/// matches nothing strictly. Loosely, a command run by path is also tried
/// by its base name, and an unknown word answers `Maybe` when the known
/// words before it agree with the pattern's text up to its first `*`.
fn match_wild(pattern: &str, c: &SimpleCommand, loose: bool) -> Match {
    let known: Vec<&str> = c.words.iter().map_while(Word::known).collect();
    let gap = WORD_GAP.to_string();
    let mut subjects = vec![known.join(&gap)];
    if loose
        && let Some(first) = known.first()
        && let Some((_, base)) = first.rsplit_once('/')
    {
        let mut k = known.clone();
        k[0] = base;
        subjects.push(k.join(&gap));
    }
    if known.len() == c.words.len() {
        if known.iter().any(|w| w.contains(WORD_GAP)) {
            return if loose { Match::Maybe } else { Match::No };
        }
        return Match::from(subjects.iter().any(|s| wild_match(pattern, s)));
    }
    if !loose {
        return Match::No;
    }
    // Some word is only known when the shell runs. A pattern ending in
    // `*` that matches the known words and a gap matches whatever follows.
    if pattern.ends_with('*')
        && subjects
            .iter()
            .any(|s| !s.is_empty() && wild_match(pattern, &format!("{s}{WORD_GAP}")))
    {
        return Match::Yes;
    }
    let head = pattern.split('*').next().unwrap_or("");
    let agrees = subjects.iter().any(|s| {
        let s = if s.is_empty() {
            String::new()
        } else {
            format!("{s}{WORD_GAP}")
        };
        s.starts_with(head) || head.starts_with(&s)
    });
    if agrees { Match::Maybe } else { Match::No }
}

/// Whether `text` matches `pattern`, where each `*` stands for any text
/// (none included) and every other character for itself.
fn wild_match(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti) = (0, 0);
    // The last `*` seen and the text position it was tried from.
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if pi < p.len() && p[pi] == t[ti] {
            pi += 1;
            ti += 1;
        } else if let Some((sp, st)) = star {
            // Let the last `*` take one more character.
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

/// How sure a rule is to apply (ordered: `No` < `Maybe` < `Yes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Match {
    No,
    /// The command cannot be resolved well enough to tell.
    Maybe,
    Yes,
}

impl From<bool> for Match {
    fn from(b: bool) -> Self {
        if b { Match::Yes } else { Match::No }
    }
}

/// One call, prepared once for every rule: the Bash parse or the resolved
/// path.
struct Call<'a> {
    tool: &'a str,
    cwd: &'a Path,
    bash: Option<BashCall>,
    path: Option<Resolved>,
    /// WebFetch's host, normalised as the fetch sees it.
    host: Option<String>,
    /// The Skill tool's `skill`.
    input_skill: Option<String>,
}

struct BashCall {
    parsed: Parsed,
    /// The files output redirections write, resolved; `None` for a target
    /// that is only known at run time (an expansion, or a relative path
    /// after `cd`).
    writes: Vec<Option<Resolved>>,
}

/// Variables a command may set in front of an allowed command without
/// losing the allow: they change no program's choice of what to run.
/// Anything else (`PATH`, `LD_PRELOAD`, `BASH_ENV`, `GIT_SSH_COMMAND`,
/// `PAGER`, …) could, so a prefix rule no longer covers the command.
const SAFE_VARIABLES: &[&str] = &[
    "CI",
    "DEBUG",
    "FORCE_COLOR",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "LC_MESSAGES",
    "NO_COLOR",
    "NODE_ENV",
    "PYTHONDONTWRITEBYTECODE",
    "PYTHONUNBUFFERED",
    "RUST_BACKTRACE",
    "RUST_LOG",
    "TERM",
    "TZ",
];

impl<'a> Call<'a> {
    fn new(tool: &'a str, input: &Value, cwd: &'a Path) -> Self {
        let tool = canonical_tool(tool);
        let bash = (tool == "Bash")
            .then(|| bash_command(input))
            .flatten()
            .map(|cmd| {
                let parsed = shell::parse(cmd);
                let writes = parsed
                    .writes
                    .iter()
                    .map(|w| match w.known() {
                        // The shell expands `~` and `~/…` to the home folder;
                        // `~user` is not known here.
                        Some(t) if t == "~" || t.starts_with("~/") => dirs::home_dir().map(|h| {
                            Resolved::new(
                                &h.join(t.trim_start_matches('~').trim_start_matches('/')),
                            )
                        }),
                        Some(t) if t.starts_with('~') => None,
                        Some(t) if parsed.changes_dir && !Path::new(t).is_absolute() => None,
                        Some(t) => Some(Resolved::new(&cwd.join(t))),
                        None => None,
                    })
                    .collect();
                BashCall { parsed, writes }
            });
        let path = target_path(tool, input, cwd).map(|p| Resolved::new(&p));
        let host = (tool == "WebFetch")
            .then(|| input.get("url").and_then(Value::as_str))
            .flatten()
            .and_then(url::url_host);
        let input_skill = (tool == "Skill")
            .then(|| {
                input
                    .get("skill")
                    .and_then(Value::as_str)
                    .map(str::to_string)
            })
            .flatten();
        Call {
            tool,
            cwd,
            bash,
            path,
            host,
            input_skill,
        }
    }
}

/// The words of a Bash rule's command, parsed as a command is (so
/// `Bash(git commit -m:*)` is three words and quoting works the same).
fn rule_words(text: &str) -> Vec<String> {
    // Plain words need no parse.
    if text
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c.is_ascii_whitespace() || "-_./:=@%+,".contains(c))
    {
        return text.split_whitespace().map(str::to_string).collect();
    }
    let p = shell::parse(text);
    match p.commands.as_slice() {
        [one] if p.uncertain.is_empty() => {
            // Leading assignments stay words here (`FOO=1 cmd`); the
            // rule reads them back as its own assignments.
            let env = one
                .env
                .iter()
                .map(|(n, v)| v.known().map(|v| format!("{n}={v}")));
            let known: Option<Vec<String>> = env
                .chain(one.words.iter().map(|w| w.known().map(str::to_string)))
                .collect();
            if let Some(k) = known {
                return k;
            }
        }
        _ => {}
    }
    text.split_whitespace().map(str::to_string).collect()
}

/// A `Bash(…)` rule's specifier, read as Claude Code reads it: a `*`
/// stands for any text, across words (`npm*` covers `npm test` and
/// `npmx`); a specifier whose one `*` ends it after a space or a colon
/// (`git status *`, `git status:*`) is a prefix of words, so it also
/// covers `git status` alone. Leading `NAME=value` words are assignments
/// the command must make itself.
fn bash_rule(spec: &str) -> Result<RuleKind, String> {
    if spec.contains([STAR, WORD_GAP]) {
        return Err("the specifier holds a character no command can have".to_string());
    }
    let (body, trailing) = match spec.strip_suffix(":*").or_else(|| spec.strip_suffix(" *")) {
        Some(body) => (body.trim_end(), true),
        None => (spec, false),
    };
    let wild = body.contains('*');
    let text = if wild { spec } else { body };
    let mut words: Vec<String> = rule_words(&text.replace('*', &STAR.to_string()))
        .into_iter()
        .map(|w| w.replace(STAR, "*"))
        .collect();
    let assignments = words.iter().take_while(|w| assignment(w).is_some()).count();
    let env: Vec<(String, String)> = words
        .drain(..assignments)
        .filter_map(|w| assignment(&w).map(|(n, v)| (n.to_string(), v.to_string())))
        .collect();
    if words.is_empty() && env.is_empty() {
        return Err("empty command prefix; write `Bash` to mean every command".to_string());
    }
    let words = if wild {
        // `git * push:*` ends as `git * push *` would.
        if let Some(last) = words.last_mut()
            && let Some(head) = last.strip_suffix(":*")
        {
            *last = head.to_string();
            words.push("*".to_string());
        }
        BashWords::Wild(words.join(&WORD_GAP.to_string()))
    } else if trailing {
        BashWords::Prefix(words)
    } else {
        BashWords::Exact(words)
    };
    Ok(RuleKind::Bash { env, words })
}

/// `NAME=value` as a leading shell assignment: the name and the value.
fn assignment(word: &str) -> Option<(&str, &str)> {
    let (name, value) = word.split_once('=')?;
    let mut chars = name.chars();
    let valid = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    valid.then_some((name, value))
}

/// Older tool names as their current ones (`Task` is `Agent`, `MultiEdit`
/// is `Edit`, `LS` is `Glob`).
fn canonical_tool(tool: &str) -> &str {
    crate::catalog::canonical_tool_name(tool)
}

/// The name inside `Agent(T)` or `Skill(T)`: one word, no parentheses.
fn plain_name(spec: &str, what: &str) -> Result<String, String> {
    if spec
        .chars()
        .any(|c| c.is_whitespace() || c == '(' || c == ')')
    {
        return Err(format!("{spec:?} is not {what}"));
    }
    Ok(spec.to_string())
}

fn valid_tool_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// Tools whose rule specifier is a path glob.
const PATH_TOOLS: &[&str] = &["Read", "Write", "Edit", "Glob", "Grep", "NotebookEdit"];

fn parse_kind(text: &str) -> Result<RuleKind, String> {
    if text.is_empty() {
        return Err("empty rule".to_string());
    }
    let Some(open) = text.find('(') else {
        if let Some(prefix) = text.strip_suffix('*') {
            if !prefix.starts_with("mcp__") || prefix.contains('*') {
                return Err(
                    "a trailing `*` is only allowed on MCP names (`mcp__server__*`)".to_string(),
                );
            }
            return Ok(RuleKind::ToolPrefix(prefix.to_string()));
        }
        if text.contains(')') || !valid_tool_name(text) {
            return Err("expected a tool name, `Tool(specifier)`, or `mcp__server__*`".to_string());
        }
        // `mcp__server` names a whole server.
        if let Some(rest) = text.strip_prefix("mcp__")
            && !rest.is_empty()
            && !rest.contains("__")
        {
            return Ok(RuleKind::ToolPrefix(format!("{text}__")));
        }
        return Ok(RuleKind::Tool(canonical_tool(text).to_string()));
    };
    let tool = &text[..open];
    let Some(spec) = text[open + 1..].strip_suffix(')') else {
        return Err("missing closing `)`".to_string());
    };
    if !valid_tool_name(tool) {
        return Err(format!("{tool:?} is not a tool name"));
    }
    let spec = spec.trim();
    if spec.is_empty() {
        return Err(format!("empty specifier; write `{tool}` to mean every use"));
    }
    // `Bash(*)` is `Bash`: every use. (For the file tools `*` stays a glob:
    // the files directly in the working directory.)
    if spec == "*" && !PATH_TOOLS.contains(&canonical_tool(tool)) {
        return Ok(RuleKind::Tool(canonical_tool(tool).to_string()));
    }
    match canonical_tool(tool) {
        "Bash" => bash_rule(spec),
        "Agent" => plain_name(spec, "an agent type").map(RuleKind::AgentType),
        "Skill" => plain_name(spec, "a skill name").map(RuleKind::SkillName),
        "WebFetch" => {
            let Some(domain) = spec.strip_prefix("domain:") else {
                return Err("expected `WebFetch(domain:HOST)`".to_string());
            };
            let domain = domain.trim().trim_end_matches('.').to_ascii_lowercase();
            let bare = domain.strip_prefix("*.").unwrap_or(&domain);
            if bare.is_empty()
                || !bare
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-.:_".contains(c))
            {
                return Err(format!(
                    "{domain:?} is not a host name (write `domain:example.com` or `domain:*.example.com`)"
                ));
            }
            Ok(RuleKind::Domain(domain))
        }
        "Read" | "Write" | "Edit" | "Glob" | "Grep" | "NotebookEdit" => {
            let tools: &'static [&'static str] = match canonical_tool(tool) {
                // As in Claude Code: Read rules cover every tool that reads
                // files, Edit rules every tool that changes them.
                "Read" => &["Read", "Glob", "Grep"],
                "Edit" => &["Edit", "Write", "NotebookEdit"],
                "Write" => &["Write"],
                "NotebookEdit" => &["NotebookEdit"],
                "Glob" => &["Glob"],
                _ => &["Grep"],
            };
            let (pattern, anchor) = if let Some(rest) = spec.strip_prefix("~/") {
                let home = dirs::home_dir().ok_or("`~` used but there is no home directory")?;
                (home.join(rest).display().to_string(), Anchor::Root)
            } else if let Some(rest) = spec.strip_prefix("//") {
                (format!("/{rest}"), Anchor::Root)
            } else if spec.starts_with('/') {
                (spec.to_string(), Anchor::Root)
            } else {
                (
                    spec.strip_prefix("./").unwrap_or(spec).to_string(),
                    Anchor::Cwd,
                )
            };
            let glob = GlobBuilder::new(&pattern)
                .literal_separator(true)
                .build()
                .map_err(|e| format!("invalid glob: {e}"))?
                .compile_matcher();
            Ok(RuleKind::Path {
                tools,
                glob,
                anchor,
            })
        }
        other => Err(format!(
            "{other} takes no specifier (only Bash, Read, Write, Edit, NotebookEdit, Glob, Grep, Agent, WebFetch and Skill do)"
        )),
    }
}

/// Whether a `domain:` rule covers `host`: the same host, or for
/// `*.rest` any host ending in `.rest`.
pub fn domain_matches(rule: &str, host: &str) -> bool {
    match rule.strip_prefix("*.") {
        Some(rest) => host
            .strip_suffix(rest)
            .is_some_and(|head| head.len() > 1 && head.ends_with('.')),
        None => rule == host,
    }
}

fn bash_command(input: &Value) -> Option<&str> {
    input.get("command").and_then(Value::as_str)
}

/// The path a path tool acts on, joined to the working directory as the
/// tool joins it.
fn target_path(tool: &str, input: &Value, cwd: &Path) -> Option<PathBuf> {
    let key = match tool {
        "Glob" | "Grep" => "path",
        "NotebookEdit" => "notebook_path",
        "Read" | "Write" | "Edit" => "file_path",
        _ => return None,
    };
    let raw = match input.get(key) {
        Some(Value::String(s)) => s.as_str(),
        // Glob and Grep search the working directory by default.
        None | Some(Value::Null) if key == "path" => ".",
        _ => return None,
    };
    Some(cwd.join(raw))
}

fn path_matches(glob: &GlobMatcher, anchor: &Anchor, path: &Path, cwd: &Path) -> bool {
    match anchor {
        Anchor::Root => glob.is_match(path),
        Anchor::Cwd => match path.strip_prefix(normalize(cwd)) {
            Ok(rel) if rel.as_os_str().is_empty() => glob.is_match("."),
            Ok(rel) => glob.is_match(rel),
            Err(_) => false,
        },
    }
}

/// The parsed allow/ask/deny rules.
/// The deny rules over paths, as an operating-system sandbox enforces them
/// ([`Rules::sandbox_paths`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SandboxPaths {
    /// No command may read these (files or folders).
    pub deny_read: Vec<PathBuf>,
    /// No command may change these.
    pub deny_write: Vec<PathBuf>,
    /// Rules whose glob has no fixed start: the rule engine applies them
    /// to the tools, the sandbox cannot.
    pub unenforced: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rules {
    pub allow: Vec<Rule>,
    pub ask: Vec<Rule>,
    pub deny: Vec<Rule>,
}

impl Rules {
    /// Parses the rules of the settings; malformed rules are logged and
    /// skipped. Use [`Rules::parse`] to report them instead.
    pub fn from_settings(p: &PermissionSettings) -> Self {
        let (rules, errors) = Rules::parse(p);
        for e in errors {
            tracing::warn!("{e}; the rule is ignored");
        }
        rules
    }

    /// Parses the rules of the settings, returning the well-formed rules and
    /// one message for each malformed rule (which is left out).
    pub fn parse(p: &PermissionSettings) -> (Rules, Vec<String>) {
        Rules::parse_lists(&p.allow, &p.ask, &p.deny)
    }

    /// [`Rules::parse`] over plain lists of rule texts.
    pub fn parse_lists<S: AsRef<str>>(allow: &[S], ask: &[S], deny: &[S]) -> (Rules, Vec<String>) {
        let mut errors = Vec::new();
        let mut list = |texts: &[S], what: &str| -> Vec<Rule> {
            texts
                .iter()
                .filter_map(|t| {
                    Rule::parse(t.as_ref())
                        .map_err(|e| errors.push(format!("{what}: {e}")))
                        .ok()
                })
                .collect()
        };
        let rules = Rules {
            allow: list(allow, "allow"),
            ask: list(ask, "ask"),
            deny: list(deny, "deny"),
        };
        (rules, errors)
    }

    /// Records where each rule was written: `origin(list, text)` for the
    /// lists `allow`, `ask` and `deny`.
    pub fn cite(&mut self, origin: impl Fn(&str, &str) -> Option<String>) {
        for (name, list) in [
            ("allow", &mut self.allow),
            ("ask", &mut self.ask),
            ("deny", &mut self.deny),
        ] {
            for r in list.iter_mut() {
                r.origin = origin(name, &r.text);
            }
        }
    }

    /// The deny rule that names `tool` as a whole (`Edit`, not `Edit(src/**)`):
    /// no use of it could ever be allowed, so the tool is not offered to the
    /// model at all (Claude Code drops such tools from the pool too).
    pub fn denies_whole_tool(&self, tool: &str) -> Option<&str> {
        let tool = canonical_tool(tool);
        self.deny
            .iter()
            .find(|r| matches!(&r.kind, RuleKind::Tool(name) if canonical_tool(name) == tool))
            .map(Rule::text)
    }

    /// The deny rule `Agent(T)` (or `Task(T)`) that forbids spawning `agent_type`.
    /// A bare `Agent` (or `Task`) deny rule forbids every type.
    pub fn denied_agent_type(&self, agent_type: &str) -> Option<&str> {
        self.deny
            .iter()
            .find(|r| match &r.kind {
                RuleKind::AgentType(t) => t == agent_type,
                RuleKind::Tool(name) => name == "Agent",
                _ => false,
            })
            .map(Rule::text)
    }

    /// What the deny rules over paths mean for an operating-system sandbox
    /// (docs/sandbox.md): the paths `Read(...)` deny rules forbid reading
    /// and those `Edit(...)` deny rules forbid changing, each as the folder
    /// or file its glob starts with (`secrets/**` → `CWD/secrets`). A glob
    /// with no fixed start (`**/.env`) cannot be a mount point: it is
    /// returned in the third list, for the report.
    pub fn sandbox_paths(&self, cwd: &Path) -> SandboxPaths {
        let mut out = SandboxPaths::default();
        for r in &self.deny {
            let RuleKind::Path {
                tools,
                glob,
                anchor,
            } = &r.kind
            else {
                continue;
            };
            let reads = tools.contains(&"Read");
            let writes = tools.contains(&"Edit") || tools.contains(&"Write");
            if !reads && !writes {
                continue;
            }
            let pattern = glob.glob().glob();
            let fixed: Vec<&str> = pattern
                .split('/')
                .take_while(|part| !part.contains(['*', '?', '[', '{']))
                .collect();
            let fixed = fixed.join("/");
            let path = match anchor {
                Anchor::Root if fixed.is_empty() || fixed == "/" => None,
                Anchor::Root => Some(PathBuf::from(&fixed)),
                Anchor::Cwd if fixed.is_empty() => None,
                Anchor::Cwd => Some(cwd.join(&fixed)),
            };
            match path {
                Some(p) => {
                    let p = crate::paths::lexical(&p);
                    if reads {
                        out.deny_read.push(p.clone());
                    }
                    if writes {
                        out.deny_write.push(p);
                    }
                }
                None => out.unenforced.push(r.text.clone()),
            }
        }
        out
    }

    /// The hosts `WebFetch(domain:…)` allow rules name: the sandbox's
    /// proxy lets commands reach them too, as Claude Code's does.
    pub fn allowed_domains(&self) -> Vec<String> {
        self.allow
            .iter()
            .filter_map(|r| match &r.kind {
                RuleKind::Domain(d) => Some(d.clone()),
                _ => None,
            })
            .collect()
    }

    /// Whether a `WebFetch(domain:…)` deny rule names `host`.
    pub fn denies_domain(&self, host: &str) -> bool {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        self.deny.iter().any(|r| match &r.kind {
            RuleKind::Domain(d) => domain_matches(&d.to_ascii_lowercase(), &host),
            _ => false,
        })
    }

    /// Whether a Glob or Grep walk run as `tool` must leave `path` out: a
    /// deny or ask rule covers it (as written or resolved). Asks cannot be
    /// put to the user for each file, so they hide too.
    pub fn hides(&self, tool: &str, path: &Path, cwd: &Path) -> bool {
        let tool = canonical_tool(tool);
        let p = Resolved::new(path);
        self.deny.iter().chain(&self.ask).any(|r| match &r.kind {
            RuleKind::Path { tools, .. } => tools.contains(&tool) && r.matches_path(&p, cwd),
            _ => false,
        })
    }

    /// Whether the allow rules cover the call, and if so which rules did
    /// (their texts). A Bash command is allowed by rules only when each of
    /// its simple commands is covered by some allow rule and nothing in it
    /// is uncertain, so `Bash(git status:*)` does not let
    /// `git status && rm -rf x` or `git status $(rm x)` through. A path rule
    /// must cover the path both as written and as resolved.
    fn allows(&self, call: &Call, dirs: &[PathBuf]) -> Option<Vec<String>> {
        if let Some(b) = &call.bash {
            if let Some(r) = self.allow.iter().find(|r| r.is_whole_bash()) {
                return Some(vec![r.text.clone()]);
            }
            if !b.parsed.uncertain.is_empty() || b.parsed.commands.is_empty() {
                return None;
            }
            // Rules name programs; they do not cover a file written
            // outside the allowed folders, nor a changed environment that
            // the rule does not write out itself.
            if !b
                .writes
                .iter()
                .all(|w| w.as_ref().is_some_and(|p| p.within(dirs)))
            {
                return None;
            }
            let mut unsafe_sets: Vec<&str> = b
                .parsed
                .assignments
                .iter()
                .map(String::as_str)
                .filter(|a| !SAFE_VARIABLES.contains(a))
                .collect();
            let mut by: Vec<String> = Vec::new();
            for c in &b.parsed.commands {
                let r = self
                    .allow
                    .iter()
                    .find(|r| r.match_command(c, false) == Match::Yes)?;
                // An assignment the rule names is covered, once.
                if let RuleKind::Bash { env, .. } = &r.kind {
                    for (name, _) in env {
                        if let Some(i) = unsafe_sets.iter().position(|a| a == name) {
                            unsafe_sets.remove(i);
                        }
                    }
                }
                if !by.contains(&r.text) {
                    by.push(r.text.clone());
                }
            }
            return unsafe_sets.is_empty().then_some(by);
        }
        self.allow
            .iter()
            .find(|r| match (&r.kind, &call.path) {
                (RuleKind::Path { tools, .. }, Some(p)) => {
                    tools.contains(&call.tool) && r.covers_path(p, call.cwd)
                }
                _ => r.match_call(call) == Match::Yes,
            })
            .map(|r| vec![r.text.clone()])
    }
}

/// Why a Bash command cannot be judged with certainty.
fn uncertainty(call: &Call) -> Vec<Doubt> {
    let Some(b) = &call.bash else {
        return Vec::new();
    };
    if !b.parsed.uncertain.is_empty() {
        return b
            .parsed
            .uncertain
            .iter()
            .map(|d| Doubt::Shell { doubt: d.clone() })
            .collect();
    }
    let mut doubts: Vec<Doubt> = b
        .parsed
        .commands
        .iter()
        .filter(|c| {
            c.words
                .iter()
                .chain(c.env.iter().map(|(_, v)| v))
                .any(|w| matches!(w, Word::Unknown(_)))
        })
        .map(|c| Doubt::UnknownWords {
            command: with_env(c),
        })
        .collect();
    for (w, r) in b.parsed.writes.iter().zip(&b.writes) {
        if r.is_none() {
            doubts.push(match w {
                Word::Known(t) => Doubt::RedirectAfterCd { target: t.clone() },
                Word::Unknown(raw) => Doubt::RedirectUnknown {
                    target: raw.clone(),
                },
            });
        }
    }
    doubts
}

/// A simple command as displayed, with its own assignments in front.
fn with_env(c: &SimpleCommand) -> String {
    let mut out: Vec<String> = c
        .env
        .iter()
        .map(|(n, v)| match v {
            Word::Known(v) => format!("{n}={}", shell::quote(v)),
            Word::Unknown(raw) => format!("{n}={raw}"),
        })
        .collect();
    out.push(c.display());
    out.join(" ")
}

/// Why no Bash prefix rule could allow this command, when the reason is not
/// just a missing rule; empty otherwise.
fn not_coverable(call: &Call, dirs: &[PathBuf]) -> Vec<Doubt> {
    let Some(b) = &call.bash else {
        return Vec::new();
    };
    if !b.parsed.uncertain.is_empty() {
        return uncertainty(call);
    }
    let mut why: Vec<Doubt> = b
        .parsed
        .assignments
        .iter()
        .filter(|a| !SAFE_VARIABLES.contains(&a.as_str()))
        .map(|a| Doubt::SetsVariable { name: a.clone() })
        .collect();
    why.dedup();
    for (w, r) in b.parsed.writes.iter().zip(&b.writes) {
        match r {
            Some(p) if p.within(dirs) => {}
            Some(p) => why.push(Doubt::WritesOutside {
                path: p.written.display().to_string(),
            }),
            None => why.push(Doubt::WritesUnknown {
                target: match w {
                    Word::Known(t) | Word::Unknown(t) => t.clone(),
                },
            }),
        }
    }
    why
}

/// Decides one call in the order of SPEC §17 (hooks have already run):
/// a matching deny rule, then ask rule, then allow rule; otherwise the mode.
/// Edits are bounded by the working directory alone; see [`decide_in`].
pub fn decide(
    rules: &Rules,
    mode: PermissionMode,
    tool: &str,
    input: &Value,
    cwd: &Path,
) -> Decision {
    decide_in(rules, mode, tool, input, cwd, &[])
}

/// [`decide`], with the directories besides `cwd` where edits may happen
/// without an explicit rule (`permissions.additionalDirectories`,
/// `--add-dir`).
pub fn decide_in(
    rules: &Rules,
    mode: PermissionMode,
    tool: &str,
    input: &Value,
    cwd: &Path,
    additional_dirs: &[PathBuf],
) -> Decision {
    explain(rules, mode, tool, input, cwd, additional_dirs).decision
}

/// A decision with what made it, for `cadre permissions check` and for
/// the denial text a model gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Explained {
    pub decision: Decision,
    /// The rule(s) or mode that decided (for an ask or a denial, the
    /// reason).
    pub by: Reason,
    /// The deny or ask rule that decided an ask or a denial, if one did.
    pub rule: Option<Cited>,
}

/// A rule named in a decision, with where it was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cited {
    pub rule: String,
    /// `file:line:col`, an environment variable or a command-line flag.
    pub origin: Option<String>,
}

/// [`decide_in`], also saying what decided an allow.
pub fn explain(
    rules: &Rules,
    mode: PermissionMode,
    tool: &str,
    input: &Value,
    cwd: &Path,
    additional_dirs: &[PathBuf],
) -> Explained {
    let d = decide_call(rules, mode, tool, input, cwd, additional_dirs);
    match d {
        Ok(by) => Explained {
            decision: Decision::Allow,
            by,
            rule: None,
        },
        Err((decision, rule)) => explained(decision, rule),
    }
}

fn explained(decision: Decision, rule: Option<&Rule>) -> Explained {
    let by = match &decision {
        Decision::Ask { reason } | Decision::Deny { reason } => reason.clone(),
        // Not reached: an allow is explained where it is decided.
        Decision::Allow => Reason::AllowRules { rules: Vec::new() },
    };
    Explained {
        decision,
        by,
        rule: rule.map(Rule::cited),
    }
}

/// An ask, in `dontAsk` a denial that names the mode.
fn dont_ask(mode: PermissionMode, reason: Reason) -> Decision {
    if mode == PermissionMode::DontAsk {
        Decision::Deny {
            reason: Reason::DontAsk {
                asked: Box::new(reason),
            },
        }
    } else {
        Decision::Ask { reason }
    }
}

/// What the deny and ask rules say of a call: a matching deny rule denies,
/// a matching ask rule asks, and a rule that might match a command that
/// cannot be resolved asks; `None` when no deny or ask rule applies.
fn rule_verdict<'r>(
    rules: &'r Rules,
    mode: PermissionMode,
    call: &Call,
) -> Option<(Decision, &'r Rule)> {
    let mut unsure: Option<(Reason, &Rule)> = None;
    for (list, what) in [(&rules.deny, RuleList::Deny), (&rules.ask, RuleList::Ask)] {
        for rule in list {
            match rule.match_call(call) {
                Match::Yes if what == RuleList::Deny => {
                    return Some((
                        Decision::Deny {
                            reason: Reason::DenyRule {
                                rule: rule.text.clone(),
                            },
                        },
                        rule,
                    ));
                }
                Match::Yes => {
                    let reason = Reason::AskRule {
                        rule: rule.text.clone(),
                    };
                    return Some((dont_ask(mode, reason), rule));
                }
                Match::Maybe if unsure.is_none() => {
                    unsure = Some((
                        Reason::UnsureRule {
                            list: what,
                            rule: rule.text.clone(),
                            doubts: uncertainty(call),
                        },
                        rule,
                    ));
                }
                Match::Maybe | Match::No => {}
            }
        }
    }
    unsure.map(|(reason, rule)| (dont_ask(mode, reason), rule))
}

/// `Ok(what allowed it)` or `Err(an ask or a denial, and the rule that
/// made it)`.
fn decide_call<'r>(
    rules: &'r Rules,
    mode: PermissionMode,
    tool: &str,
    input: &Value,
    cwd: &Path,
    additional_dirs: &[PathBuf],
) -> Result<Reason, (Decision, Option<&'r Rule>)> {
    let call = Call::new(tool, input, cwd);
    if let Some((d, rule)) = rule_verdict(rules, mode, &call) {
        return Err((d, Some(rule)));
    }
    let mut dirs = vec![cwd.to_path_buf()];
    dirs.extend(additional_dirs.iter().cloned());
    if let Some(by) = rules.allows(&call, &dirs) {
        return Ok(Reason::AllowRules { rules: by });
    }
    let tool = call.tool;
    let mut by_mode = ModeReason {
        mode: mode.as_str().to_string(),
        domain: None,
        bad_url: false,
        uncoverable: Vec::new(),
    };
    if READ_AND_AGENT_TOOLS.contains(&tool) {
        return Ok(Reason::ReadsOnly {
            tool: tool.to_string(),
        });
    }
    if SESSION_ONLY_TOOLS.contains(&tool) {
        return Ok(Reason::SessionOnly {
            tool: tool.to_string(),
        });
    }
    if tool == "WebFetch" && mode != PermissionMode::BypassPermissions {
        match &call.host {
            Some(h) => by_mode.domain = Some(h.clone()),
            None => by_mode.bad_url = true,
        }
    }
    if call.bash.is_some() && mode != PermissionMode::BypassPermissions {
        by_mode.uncoverable = not_coverable(&call, &dirs);
    }
    let edit = EDIT_TOOLS.contains(&tool);
    if edit
        && matches!(
            mode,
            PermissionMode::Default | PermissionMode::AcceptEdits | PermissionMode::Bubble
        )
        && let Some(p) = &call.path
        && !p.within(&dirs)
    {
        return Err((
            Decision::Ask {
                reason: Reason::OutsideDirs {
                    path: p.written.display().to_string(),
                    mode: by_mode,
                },
            },
            None,
        ));
    }
    let by_mode = Reason::Mode(by_mode);
    match mode {
        PermissionMode::Plan | PermissionMode::DontAsk => {
            Err((Decision::Deny { reason: by_mode }, None))
        }
        PermissionMode::BypassPermissions => Ok(by_mode),
        PermissionMode::AcceptEdits if edit => Ok(by_mode),
        PermissionMode::AcceptEdits | PermissionMode::Default | PermissionMode::Bubble => {
            Err((Decision::Ask { reason: by_mode }, None))
        }
    }
}

/// A PreToolUse hook's permission decision (`hookSpecificOutput.
/// permissionDecision`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookDecision {
    Allow,
    Ask,
    Deny,
}

/// The hooks' decision for one call and their reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookVerdict {
    pub decision: HookDecision,
    pub reason: String,
}

/// [`decide_in`] after PreToolUse hooks have decided, as Claude Code does:
/// a hook's `deny` denies; its `ask` asks (a deny rule still denies, and
/// `dontAsk` turns the ask into a denial); its `allow` skips the mode's
/// prompt but never a deny or ask rule, nor a command the rules cannot
/// judge.
pub fn decide_with_hook(
    rules: &Rules,
    mode: PermissionMode,
    tool: &str,
    input: &Value,
    cwd: &Path,
    additional_dirs: &[PathBuf],
    hook: Option<&HookVerdict>,
) -> Decision {
    explain_with_hook(rules, mode, tool, input, cwd, additional_dirs, hook).decision
}

/// [`decide_with_hook`], with the rule that decided (see [`Explained`]).
pub fn explain_with_hook(
    rules: &Rules,
    mode: PermissionMode,
    tool: &str,
    input: &Value,
    cwd: &Path,
    additional_dirs: &[PathBuf],
    hook: Option<&HookVerdict>,
) -> Explained {
    let Some(hook) = hook else {
        return explain(rules, mode, tool, input, cwd, additional_dirs);
    };
    let call = Call::new(tool, input, cwd);
    let by_rule = rule_verdict(rules, mode, &call);
    let said = hook.reason.clone();
    match hook.decision {
        HookDecision::Deny => explained(
            Decision::Deny {
                reason: Reason::HookDenied { said },
            },
            None,
        ),
        HookDecision::Ask => match by_rule {
            Some((d @ Decision::Deny { .. }, rule)) => explained(d, Some(rule)),
            _ => explained(dont_ask(mode, Reason::HookAsked { said }), None),
        },
        HookDecision::Allow => match by_rule {
            Some((d, rule)) => explained(d, Some(rule)),
            None => Explained {
                decision: Decision::Allow,
                by: Reason::HookAllowed { said },
                rule: None,
            },
        },
    }
}

/// The mode a sub-agent runs in (SPEC §7). A definition without
/// `permissionMode` inherits the parent's mode. A definition may narrow the
/// parent's mode but never widen it: under a `default`, `plan`, `dontAsk`
/// (or `bubble`) parent it cannot ask for `acceptEdits` or
/// `bypassPermissions`, and under `acceptEdits` not for `bypassPermissions`;
/// such a request falls back to the parent's mode. A `bypassPermissions`
/// parent wins over any definition, as in Claude Code. Forks do not come
/// here: they run in `bubble`.
pub fn child_mode(parent: PermissionMode, definition: Option<PermissionMode>) -> PermissionMode {
    use PermissionMode::*;
    let Some(wanted) = definition else {
        return parent;
    };
    match (parent, wanted) {
        (BypassPermissions, _) => BypassPermissions,
        (Default | Plan | DontAsk | Bubble, AcceptEdits | BypassPermissions) => parent,
        (AcceptEdits, BypassPermissions) => parent,
        // `bubble` only means something for a fork.
        (_, Bubble) => parent,
        (_, wanted) => wanted,
    }
}

/// The simple commands a Bash command line runs, as displayed by
/// `cadre permissions check`, and why any part is uncertain.
pub fn bash_commands(command: &str) -> (Vec<String>, Vec<shell::ShellDoubt>) {
    let p = shell::parse(command);
    (
        p.commands.iter().map(SimpleCommand::display).collect(),
        p.uncertain,
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
