//! The guard against model-facing text in Rust literals (a test only).
//!
//! Tool results are safe by construction: a `ToolOutput` can only be built
//! from a template context, and `Templates` renders only typed contexts.
//! What types cannot stop is a prose literal passed around as a `String`
//! (an `Err(format!("…"))` that becomes a tool result, a text block built
//! in place). So this test reads the modules that produce what the model
//! sees and fails on any string literal that reads as prose (two words in a
//! row), outside tests, logs, error-type attributes and the lines listed
//! below with the reason each is not model-facing. A second test watches
//! the functions that handle a session's error (a failed request, a
//! sub-agent's end, a task the worker fleet could not queue), in the same
//! modules and in `fleet/`: there, any error made text (`x.to_string()`,
//! `{x}`, `format!("…", x)` for every name bound to an error) is a finding
//! unless listed, since the model is told a typed problem.

use std::path::{Path, PathBuf};

/// Folders and files whose code builds what the model reads.
const SCOPE: &[&str] = &[
    "tools",
    "runtime",
    "agent_tool",
    "mcp/tool.rs",
    "mcp/resources.rs",
    "mcp/client.rs",
    "mcp/task.rs",
    "permissions",
    "agent_tool/pool.rs",
];

/// Files in scope that hold no model-facing text, and why.
const SKIP_FILES: &[(&str, &str)] = &[
    (
        "tools/outcome.rs",
        "context declarations: its literals are samples",
    ),
    (
        "tools/typed.rs",
        "tool results as data for programs (the SDKs' `tool_use_result`), never sent to the model",
    ),
    (
        "runtime/texts.rs",
        "context declarations: its literals are samples",
    ),
    (
        "runtime/team_texts.rs",
        "context declarations: its literals are samples",
    ),
    (
        "permissions/texts.rs",
        "context declarations: its literals are samples",
    ),
    (
        "agent_tool/texts.rs",
        "context declarations: its literals are samples",
    ),
    (
        "tools/spec.rs",
        "tool-schema file diagnostics, for the user",
    ),
    ("runtime/resume.rs", "transcript diagnostics, for the user"),
    (
        "runtime/file_history.rs",
        "rewind_files answers and errors, for the SDK client (never the model)",
    ),
    (
        "runtime/command_notes.rs",
        "the built-in command table for /help and notes on stderr, for the user",
    ),
    (
        "tools/sandbox/enter.rs",
        "the sandbox's own program (`cadre __sandbox-exec`): a setup failure is that program's stderr, as bash's own errors are",
    ),
    (
        "tools/sandbox/proxy.rs",
        "HTTP replies of the sandbox's proxy, read by the command's HTTP client",
    ),
    ("runtime/transcript.rs", "transcript file names"),
    (
        "runtime/sampling.rs",
        "errors for the MCP server that asked, and the question put to the user",
    ),
    (
        "agent_tool/effort.rs",
        "notes on the effort sent, for `agents show --effective`",
    ),
];

/// Functions in scope whose prose is not for the model: (file, the start
/// of the function's signature, why). The whole body is skipped.
const SKIP_FNS: &[(&str, &str, &str)] = &[
    (
        "runtime/hooks.rs",
        "pub async fn run_http(",
        "why an http hook failed: logged, never sent",
    ),
    (
        "runtime/hooks.rs",
        "pub async fn run_prompt(",
        "why a prompt hook failed: logged, never sent",
    ),
    (
        "runtime/hooks.rs",
        "pub async fn user_prompt_hooks(",
        "why a prompt was blocked: for the user (the result, chat), never sent",
    ),
    (
        "runtime/hooks.rs",
        "pub async fn pre_model_switch_hooks(",
        "why the model stays: for the user, never sent",
    ),
    (
        "runtime/exec.rs",
        "pub(super) fn hook_model(",
        "why a prompt hook's request failed: logged, never sent",
    ),
    (
        "runtime/hook_agent.rs",
        "async fn run(parent: Parent",
        "why an agent hook failed: logged, never sent; the synthetic agent's description is never listed",
    ),
    (
        "tools/sandbox/mod.rs",
        "pub fn mechanism(&self)",
        "the sandbox's mechanism, for `config show` and `permissions check`; the model sees it only as a value in the `error_sandbox_unavailable` template",
    ),
    (
        "tools/sandbox/mod.rs",
        "fn probe()",
        "why the machine cannot sandbox, for `config show` and the log",
    ),
    (
        "permissions/mod.rs",
        "pub fn parse(text: &str) -> Result<Rule, String>",
        "rule syntax errors, reported with the rule's place when settings load",
    ),
    (
        "permissions/mod.rs",
        "fn parse_kind(text: &str)",
        "rule syntax errors, for the user",
    ),
    (
        "permissions/mod.rs",
        "fn plain_name(spec: &str, what: &str)",
        "rule syntax errors, for the user",
    ),
    (
        "permissions/mod.rs",
        "fn bash_rule(spec: &str)",
        "rule syntax errors, for the user",
    ),
    (
        "permissions/mod.rs",
        "pub fn never_matches(&self)",
        "`config validate` warnings, for the user",
    ),
    (
        "runtime/structured.rs",
        "pub fn new(schema: Value) -> Result<StructuredSpec, String>",
        "a --json-schema usage error, for the user",
    ),
    (
        "runtime/structured.rs",
        "fn gave_up(failures: u32, last_error: &str) -> String",
        "the result's `errors` entry, for the caller, in Claude Code's words",
    ),
];

/// Single lines in scope whose prose is not for the model: (file, text
/// on the line, why).
const ALLOWED: &[(&str, &str, &str)] = &[
    (
        "tools/bash.rs",
        "trap {} EXIT; {command}",
        "the shell line that notes where a `cd` left the shell, run by bash",
    ),
    (
        "permissions/shell.rs",
        "<input from xargs>",
        "a placeholder word, shown as a command's argument",
    ),
    (
        "mcp/client.rs",
        "sampling is off in cadre",
        "an error for the MCP server",
    ),
    (
        "mcp/task.rs",
        "{status}: {message}",
        "a progress line for the user",
    ),
    (
        "mcp/client.rs",
        "requires task augmentation",
        "matches the MCP server's answer",
    ),
    (
        "mcp/client.rs",
        "cancelled by the user",
        "the reason sent to the MCP server with notifications/cancelled",
    ),
    (
        "runtime/exec.rs",
        "wants to use",
        "the question put to the user in chat",
    ),
    (
        "runtime/exec.rs",
        "needs your permission to use",
        "a Notification hook's message, for the user's notifier",
    ),
    (
        "runtime/compact.rs",
        "prompt is too long",
        "matches a provider's error",
    ),
    (
        "runtime/compact.rs",
        "maximum context length",
        "matches a provider's error",
    ),
    (
        "runtime/hooks.rs",
        "stopped by a {} hook",
        "a blocked prompt's reason, for the user (chat, -p's error result); the prompt is not sent",
    ),
    (
        "runtime/hooks.rs",
        "blocked by a {} hook",
        "a blocked prompt's reason, for the user (chat, -p's error result); the prompt is not sent",
    ),
    (
        "runtime/hooks.rs",
        "cannot start `{program}`",
        "logged, not sent",
    ),
    (
        "runtime/hooks.rs",
        "waiting for the hook failed",
        "logged, not sent",
    ),
    (
        "runtime/hooks.rs",
        "cannot start the sandbox's proxy",
        "logged, not sent",
    ),
    (
        "runtime/hooks.rs",
        "cannot start the sandbox: {e}",
        "logged, not sent",
    ),
    (
        "runtime/prompt.rs",
        "(no file)",
        "names an agent file in a spawn error",
    ),
    (
        "runtime/prompt.rs",
        "agent {} in {file}",
        "names an agent file in a spawn error",
    ),
    (
        "runtime/prompt.rs",
        "Run the tests before committing.",
        "a sample",
    ),
    (
        "tools/web_fetch.rs",
        "text/markdown, text/html",
        "an HTTP Accept header",
    ),
    (
        "agent_tool/pool.rs",
        "unknown tool",
        "`agents show --effective`, for the user",
    ),
    (
        "agent_tool/pool.rs",
        "denied by the permission rule",
        "`agents show --effective`",
    ),
    (
        "agent_tool/pool.rs",
        "listed in disallowedTools",
        "`agents show --effective`",
    ),
    (
        "agent_tool/pool.rs",
        "only an interactive main session",
        "`agents show --effective`",
    ),
    (
        "agent_tool/pool.rs",
        "only the main session, a team's lead",
        "`agents show --effective`",
    ),
    (
        "agent_tool/pool.rs",
        "sub-agent tools need `Agent`",
        "`agents show --effective`",
    ),
    (
        "agent_tool/pool.rs",
        "is not configured",
        "`agents show --effective`",
    ),
];

/// Statements whose literals are never sent to the model.
const QUIET: &[&str] = &[
    "tracing::",
    "warn!(",
    "info!(",
    "debug!(",
    "#[error(",
    ".expect(",
    "panic!(",
    "#[serde(",
    "#[arg(",
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The string literals on `line` (escapes kept), and whether the rest
/// after them is a comment. Raw strings are read like plain ones.
fn literals(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = line.chars().peekable();
    let mut prev = ' ';
    while let Some(c) = chars.next() {
        if c == '/' && chars.peek() == Some(&'/') {
            break;
        }
        // A char literal such as '"' is not a string.
        if c == '\'' && prev != 'b' {
            let rest: String = chars.clone().take(3).collect();
            if rest.starts_with("\"'") || rest.starts_with("\\\"'") {
                for _ in 0..rest.find('\'').unwrap_or(0) + 1 {
                    chars.next();
                }
                continue;
            }
        }
        if c == '"' {
            let mut s = String::new();
            while let Some(d) = chars.next() {
                match d {
                    '\\' => {
                        s.push(d);
                        if let Some(e) = chars.next() {
                            s.push(e);
                        }
                    }
                    '"' => break,
                    _ => s.push(d),
                }
            }
            out.push(s);
        }
        prev = c;
    }
    out
}

/// Two words in a row: text a person (or a model) reads.
fn is_prose(s: &str) -> bool {
    let word = |w: &str| {
        let w = w.trim_matches(|c: char| "`'({[<*_".contains(c));
        w.chars().take_while(char::is_ascii_alphabetic).count() >= 2
    };
    let tokens: Vec<&str> = s.split_whitespace().collect();
    tokens.windows(2).any(|p| word(p[0]) && word(p[1]))
}

/// The crate's src/ folder.
fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The Rust files of `SCOPE` under src/, sorted, each once.
fn scoped_files() -> Vec<PathBuf> {
    let src = src_dir();
    let mut files = Vec::new();
    for s in SCOPE {
        let p = src.join(s);
        if p.is_dir() {
            rust_files(&p, &mut files);
        } else {
            files.push(p);
        }
    }
    files.sort();
    files.dedup();
    files
}

#[test]
fn no_prose_literal_where_model_text_is_built() {
    let src = src_dir();
    let files = scoped_files();
    let mut found = Vec::new();
    let mut used = vec![false; ALLOWED.len()];
    let mut fns_used = vec![false; SKIP_FNS.len()];
    for file in &files {
        let rel = file
            .strip_prefix(&src)
            .unwrap_or(file)
            .to_string_lossy()
            .into_owned();
        let name = file.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if SKIP_FILES.iter().any(|(f, _)| *f == rel) || name.contains("tests") {
            continue;
        }
        let text = std::fs::read_to_string(file).unwrap_or_default();
        let mut quiet_depth: i64 = 0;
        let mut skip_depth: i64 = 0;
        for (n, line) in text.lines().enumerate() {
            if line.starts_with("#[cfg(test)]") {
                break;
            }
            let braces = line.matches('{').count() as i64 - line.matches('}').count() as i64;
            if skip_depth > 0 {
                skip_depth += braces;
                continue;
            }
            if let Some(i) = SKIP_FNS
                .iter()
                .position(|(f, sig, _)| *f == rel && line.contains(sig))
            {
                fns_used[i] = true;
                skip_depth = braces;
                continue;
            }
            let trimmed = line.trim_start();
            if trimmed.starts_with("//") {
                continue;
            }
            if quiet_depth <= 0 && QUIET.iter().any(|q| line.contains(q)) {
                quiet_depth = 0;
                quiet_depth += line.matches('(').count() as i64 - line.matches(')').count() as i64;
                continue;
            }
            if quiet_depth > 0 {
                quiet_depth += line.matches('(').count() as i64 - line.matches(')').count() as i64;
                continue;
            }
            for lit in literals(line).into_iter().filter(|l| is_prose(l)) {
                match ALLOWED
                    .iter()
                    .position(|(f, t, _)| *f == rel && line.contains(t))
                {
                    Some(i) => used[i] = true,
                    None => found.push(format!("src/{rel}:{}: \"{lit}\"", n + 1)),
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "text for the model belongs in a template (agents/templates/*.hbs with a typed \
         context in tools/outcome.rs or runtime/texts.rs), not in a Rust literal:\n{}",
        found.join("\n")
    );
    let stale: Vec<_> = ALLOWED
        .iter()
        .zip(&used)
        .filter(|(_, u)| !**u)
        .map(|((f, t, _), _)| format!("{f}: {t}"))
        .collect();
    assert!(stale.is_empty(), "allowed lines no longer found: {stale:?}");
    let gone: Vec<_> = SKIP_FNS
        .iter()
        .zip(&fns_used)
        .filter(|(_, u)| !**u)
        .map(|((f, sig, _), _)| format!("{f}: {sig}"))
        .collect();
    assert!(
        gone.is_empty(),
        "skipped functions no longer found: {gone:?}"
    );
}

/// What marks a function as handling a session's error (a failed model
/// request, a sub-agent's end, the worker fleet's failure): its types, and
/// the calls that return it. Their `Display` is cadre's account for
/// people; the model is told a typed `RunProblem` / `ProviderProblem` /
/// `QueueProblem` worded by a template.
const SESSION_ERROR_SOURCES: &[&str] = &[
    "RunError",
    "ProviderError",
    "FleetError",
    "QueueFailed",
    ".run().await",
    "provider.send(",
    "backend.submit(",
    "backend.resume(",
];

/// Where the session-error test looks beyond [`SCOPE`]: the worker fleet,
/// whose errors end remote tasks. Every function there is watched (an
/// error of the fleet may reach the model through a `String`, as the task
/// backend's errors once did).
const SESSION_ERROR_SCOPE: &[&str] = &["fleet"];

/// The names a function binds to an error: `Err(x)` patterns, the
/// argument of `map_err` / `unwrap_or_else` / `or_else` closures, and the
/// usual `e`, `err`, `error`.
fn error_bindings(body: &[&str]) -> Vec<String> {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut names: Vec<String> = ["e", "err", "error"].map(String::from).to_vec();
    for line in body {
        let mut found = Vec::new();
        for (at, pat) in line.match_indices("Err(") {
            let rest = line[at + pat.len()..].trim_start_matches("ref ");
            let name: String = rest.chars().take_while(|c| ident(*c)).collect();
            if rest[name.len()..].starts_with(')') {
                found.push(name);
            }
        }
        for pat in [
            "map_err(|",
            "unwrap_or_else(|",
            "or_else(|",
            "map_err(move |",
        ] {
            for (at, _) in line.match_indices(pat) {
                let rest = &line[at + pat.len()..];
                let name: String = rest.chars().take_while(|c| ident(*c)).collect();
                if rest[name.len()..].starts_with('|') {
                    found.push(name);
                }
            }
        }
        for name in found {
            if !name.is_empty() && name != "_" && !names.contains(&name) {
                names.push(name);
            }
        }
    }
    names
}

/// Whether `line` makes the error bound to `name` text: `name.to_string()`,
/// `{name}` or `{name:…}` in a format string, `name.message` (a provider
/// error's), or `name` as an argument of `format!` / `write!`.
fn stringifies(line: &str, name: &str) -> bool {
    if [format!("{name}.to_string()"), format!("{name}.message")]
        .iter()
        .any(|p| mentions(line, p))
        || line.contains(&format!("{{{name}}}"))
        || line.contains(&format!("{{{name}:"))
    {
        return true;
    }
    ["format!(", "write!(", "writeln!("]
        .iter()
        .filter_map(|m| line.find(m))
        .any(|at| {
            let args = &line[at..];
            [format!(", {name})"), format!(", {name},")]
                .iter()
                .any(|p| args.contains(p.as_str()))
        })
}

/// Lines in such functions that make an error text for people, not the
/// model: (file, text on the line, why).
const SESSION_ERROR_TEXT: &[(&str, &str, &str)] = &[
    (
        "runtime/exec.rs",
        ".map_err(|e| format!(\"the model request failed: {e:?}\"))?;",
        "why a prompt or agent hook's request failed: logged, never sent",
    ),
    (
        "runtime/hooks.rs",
        "\"error_details\": e.to_string(),",
        "a StopFailure hook's input: for the hook, never the model",
    ),
    (
        "runtime/spawn.rs",
        "limit.unwrap_or_else(|| e.to_string())",
        "the task's `error` for people: meta file, transcript, SDK events",
    ),
    (
        "runtime/team.rs",
        "Some((e.to_string(), super::RunProblem::from(e)))",
        "logged; the lead is told the RunProblem",
    ),
    (
        "runtime/compact.rs",
        "let m = e.message.to_ascii_lowercase();",
        "matched against the providers' overflow wording, not shown",
    ),
    (
        "runtime/sampling.rs",
        ".map_err(|e| e.to_string())",
        "the error answered to the MCP server that asked for sampling",
    ),
    (
        "fleet/broker.rs",
        "connect_err(format!(\"credentials {}: {e}\"",
        "a FleetError's own words, for people; the model is told its QueueProblem",
    ),
    (
        "fleet/broker.rs",
        ".map_err(|e| connect_err(e.to_string()))",
        "a FleetError's own words, for people; the model is told its QueueProblem",
    ),
    (
        "fleet/parent.rs",
        ".map_err(|e| FleetError::Broker(e.to_string()))",
        "a FleetError's own words, for people; the model is told its QueueProblem",
    ),
    (
        "fleet/lease.rs",
        "ack.await.map(|_| ()).map_err(|e| e.to_string())",
        "a worker's failed notice: logged, then a FleetError for the worker's log",
    ),
    (
        "fleet/lease.rs",
        "Err(e) => Err(e.to_string()),",
        "a worker's failed notice: logged, then a FleetError for the worker's log",
    ),
    (
        "fleet/lease.rs",
        "FleetError::Broker(format!(\"publishing the notice: {e}\"))",
        "a worker's failed notice: the worker logs it",
    ),
    (
        "fleet/lease.rs",
        "Renewal::Unreachable(e.to_string())",
        "a failed heartbeat: the worker logs it and keeps running",
    ),
];

/// Whether `line` has `pat` as whole words (`e.message`, not
/// `response.message` nor `e.messages`).
fn mentions(line: &str, pat: &str) -> bool {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    line.match_indices(pat).any(|(at, _)| {
        let before = line[..at].chars().next_back();
        let after = line[at + pat.len()..].chars().next();
        !before.is_some_and(|c| ident(c) || c == '.') && !after.is_some_and(ident)
    })
}

/// A session's error reaches the model only as a typed problem: in every
/// function of the scope that handles one (see `SESSION_ERROR_SOURCES`),
/// an error made text is a finding unless `SESSION_ERROR_TEXT` lists it.
#[test]
fn session_errors_reach_the_model_only_as_typed_problems() {
    let src = src_dir();
    let mut files = scoped_files();
    for s in SESSION_ERROR_SCOPE {
        rust_files(&src.join(s), &mut files);
    }
    let mut found = Vec::new();
    let mut used = vec![false; SESSION_ERROR_TEXT.len()];
    let mut watched_fns = 0;
    for file in &files {
        let rel = file
            .strip_prefix(&src)
            .unwrap_or(file)
            .to_string_lossy()
            .into_owned();
        let text = std::fs::read_to_string(file).unwrap_or_default();
        let code: Vec<&str> = text
            .lines()
            .take_while(|l| !l.starts_with("#[cfg(test)]"))
            .collect();
        // Functions: from one `fn` line to the next.
        let starts: Vec<usize> = (0..code.len())
            .filter(|&i| {
                let t = code[i].trim_start();
                t.split('(').next().is_some_and(|head| {
                    head.split_whitespace().any(|w| w == "fn") && !t.starts_with("//")
                })
            })
            .collect();
        for (k, &start) in starts.iter().enumerate() {
            let end = starts.get(k + 1).copied().unwrap_or(code.len());
            let body = &code[start..end];
            let watched = rel.starts_with("fleet/")
                || body.iter().any(|l| {
                    let t = l.trim();
                    !t.starts_with("//")
                        && (SESSION_ERROR_SOURCES.iter().any(|s| l.contains(s)) || t == ".provider")
                });
            if !watched {
                continue;
            }
            watched_fns += 1;
            let names = error_bindings(body);
            // Parentheses still open of a log or panic call begun on an
            // earlier line: its arguments are for people.
            let mut quiet_depth = 0i64;
            for (n, line) in body.iter().enumerate() {
                let t = line.trim_start();
                let depth = |l: &str| l.matches('(').count() as i64 - l.matches(')').count() as i64;
                let quiet = quiet_depth > 0 || QUIET.iter().any(|q| line.contains(q));
                if quiet_depth > 0 {
                    quiet_depth += depth(line);
                } else if let Some(at) = QUIET.iter().filter_map(|q| line.find(q)).min() {
                    quiet_depth = depth(&line[at..]).max(0);
                }
                if t.starts_with("//") || quiet || !names.iter().any(|x| stringifies(line, x)) {
                    continue;
                }
                match SESSION_ERROR_TEXT
                    .iter()
                    .position(|(f, l, _)| *f == rel && line.contains(l))
                {
                    Some(i) => used[i] = true,
                    None => found.push(format!("src/{rel}:{}: {}", start + n + 1, t)),
                }
            }
        }
    }
    // The scan must see the functions it guards (spawn, team, side calls).
    assert!(watched_fns >= 5, "only {watched_fns} functions watched");
    assert!(
        found.is_empty(),
        "a session's error reaches the model as a typed RunProblem / ProviderProblem / \
         QueueProblem (runtime/problem.rs, provider/problem.rs) worded by a template, \
         never as its Display text:\n{}",
        found.join("\n")
    );
    let stale: Vec<_> = SESSION_ERROR_TEXT
        .iter()
        .zip(&used)
        .filter(|(_, u)| !**u)
        .map(|((f, t, _), _)| format!("{f}: {t}"))
        .collect();
    assert!(stale.is_empty(), "listed lines no longer found: {stale:?}");
}

#[test]
fn the_prose_test_tells_prose_from_data() {
    assert!(is_prose("File does not exist: {shown}"));
    assert!(mentions("error: e.to_string(),", "e.to_string()"));
    assert!(mentions("format!(\"failed: {e}\")", "{e}"));
    assert!(!mentions("let a = response.message;", "e.message"));
    assert!(!mentions("e.messages.len()", "e.message"));
    assert!(!mentions("self.e.to_string()", "e.to_string()"));
    let body = [
        "match r { Err(problem) => x, Err(ref why) => y, Err(_) => z }",
        "a.map_err(|failure| failure.to_string())",
        "Err(format!(\"{e}\"))",
    ];
    assert_eq!(
        error_bindings(&body),
        ["e", "err", "error", "problem", "why", "failure"]
    );
    assert!(stringifies(
        "a.map_err(|failure| failure.to_string())",
        "failure"
    ));
    assert!(stringifies("Err(format!(\"task {id}: {why:?}\"))", "why"));
    assert!(stringifies("let s = format!(\"{}: {}\", id, why);", "why"));
    assert!(!stringifies("let s = format!(\"{}\", whyever);", "why"));
    assert!(!stringifies("return Err(problem);", "problem"));
    assert!(is_prose("`{key}` must be a string"));
    assert!(!is_prose("main.jsonl"));
    assert!(!is_prose("{line_no:>6}"));
    assert!(!is_prose("permissions.deny"));
    assert_eq!(
        literals(r#"let a = "x y"; f('"', "b c") // "not this""#),
        vec!["x y".to_string(), "b c".to_string()]
    );
}
