//! Unit tests for field parsing, diagnostics positions and the loader's
//! precedence rules, across formats.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::json;

use super::*;
use crate::config::{HookEvent, PermissionMode};
use crate::diagnostic::{Diagnostic, Severity};

fn md(front: &str) -> String {
    format!("---\n{front}---\nThe prompt.\n")
}

fn parse_md(front: &str) -> (Option<AgentDef>, Vec<Diagnostic>) {
    parse_agent_file(Path::new("a.md"), &md(front), Source::Project)
}

fn ok_md(front: &str) -> (AgentDef, Vec<Diagnostic>) {
    let (def, diags) = parse_md(front);
    (
        def.unwrap_or_else(|| panic!("not loaded: {diags:?}")),
        diags,
    )
}

/// The single warning of a file, as `line:col message`.
/// Each diagnostic as `line:col message`.
fn located(diags: &[Diagnostic]) -> Vec<String> {
    diags
        .iter()
        .map(|d| format!("{}:{} {}", d.line.unwrap(), d.column.unwrap(), d.message))
        .collect()
}

fn one_warning(diags: &[Diagnostic]) -> String {
    assert_eq!(diags.len(), 1, "{diags:?}");
    let d = &diags[0];
    assert_eq!(d.severity, Severity::Warning, "{d}");
    format!(
        "{}:{} {}",
        d.line.unwrap_or(0),
        d.column.unwrap_or(0),
        d.message
    )
}

const HEAD: &str = "name: a\ndescription: d\n";

#[test]
fn minimal_markdown() {
    let (def, diags) = ok_md(HEAD);
    assert!(diags.is_empty(), "{diags:?}");
    assert_eq!(def.name, "a");
    assert_eq!(def.description, "d");
    assert_eq!(def.tools, None);
    assert!(def.disallowed_tools.is_empty());
    assert_eq!(def.prompt, Prompt::Inline("The prompt.".into()));
    assert_eq!(def.path.as_deref(), Some(Path::new("a.md")));
}

#[test]
fn bom_and_crlf_load_the_same() {
    let plain = md("name: a\ndescription: d\ntools: Read, Grep\n");
    let crlf = format!("\u{feff}{}", plain.replace('\n', "\r\n"));
    let a = parse_agent_file(Path::new("a.md"), &plain, Source::User);
    let b = parse_agent_file(Path::new("a.md"), &crlf, Source::User);
    assert_eq!(a, b);
}

#[test]
fn missing_name_and_description() {
    let (def, diags) = parse_md("description: d\n");
    assert!(def.is_none());
    assert_eq!(diags[0].severity, Severity::Warning);
    assert!(diags[0].message.contains("no `name`"));

    let (def, diags) = parse_md("name: a\n");
    assert!(def.is_none());
    assert!(
        diags[0].is_error() && diags[0].message.contains("description"),
        "{diags:?}"
    );

    let (def, diags) = parse_agent_file(Path::new("a.yaml"), "description: d\n", Source::User);
    assert!(def.is_none() && diags[0].is_error());
    let (def, diags) = parse_agent_file(Path::new("a.toml"), "name = \"a\"\n", Source::User);
    assert!(def.is_none() && diags[0].is_error());
    let (def, diags) = parse_md("name: a\ndescription: \"  \"\n");
    assert!(def.is_none() && diags[0].is_error());
}

#[test]
fn no_frontmatter_is_a_warning_and_unterminated_an_error() {
    let (def, diags) = parse_agent_file(Path::new("README.md"), "# Notes\n", Source::Project);
    assert!(def.is_none());
    assert_eq!(diags.len(), 1);
    assert_eq!(diags[0].severity, Severity::Warning);
    assert_eq!(diags[0].message, "no frontmatter; skipped");
    let (def, diags) = parse_agent_file(Path::new("a.md"), "---\nname: a\n", Source::Project);
    assert!(def.is_none() && diags[0].is_error());
}

#[test]
fn description_escapes_and_trim() {
    let (def, _) = ok_md("name: a\ndescription:   one\\ntwo  \n");
    assert_eq!(def.description, "one\ntwo");
}

#[test]
fn tools_forms() {
    let tools = |v: &str| ok_md(&format!("{HEAD}tools:{v}\n")).0.tools;
    assert_eq!(tools(""), Some(vec![]));
    assert_eq!(tools(" \"\""), Some(vec![]));
    assert_eq!(tools(" []"), Some(vec![]));
    assert_eq!(tools(" ~"), Some(vec![]));
    assert_eq!(
        tools(" Read, Bash(git log:*) Grep"),
        Some(vec!["Read".into(), "Bash(git log:*)".into(), "Grep".into()])
    );
    assert_eq!(
        tools("\n  - Read\n  - Bash(npm run test:*)"),
        Some(vec!["Read".into(), "Bash(npm run test:*)".into()])
    );
    assert_eq!(tools(" Read, *"), None);
    assert_eq!(tools("\n  - '*'"), None);
    let (def, diags) = ok_md(&format!("{HEAD}tools: {{a: 1}}\n"));
    assert_eq!(def.tools, None);
    assert_eq!(
        one_warning(&diags),
        "4:8 tools: expected a string or a list of strings, found a mapping; ignored"
    );
    let (def, diags) = ok_md(&format!("{HEAD}tools:\n  - Read\n  - [x]\n"));
    assert_eq!(def.tools, Some(vec!["Read".into()]));
    assert!(one_warning(&diags).starts_with("6:5 tools: expected a tool name"));
}

#[test]
fn disallowed_tools() {
    let (def, diags) = ok_md(&format!("{HEAD}disallowedTools: Agent, Bash(rm:*)\n"));
    assert!(diags.is_empty());
    assert_eq!(def.disallowed_tools, ["Agent", "Bash(rm:*)"]);
    let (def, diags) = ok_md(&format!("{HEAD}disallowedTools: '*'\n"));
    assert!(def.disallowed_tools.is_empty());
    assert_eq!(diags.len(), 1);
}

#[test]
fn known_tools_warn_about_unknown_names() {
    let known = vec!["Read".to_string(), "Bash".to_string()];
    let opts = ParseOptions {
        known_tools: &known,
    };
    let text = md(&format!(
        "{HEAD}tools: Read, Bash(ls:*), Nope, mcp__x__y\ndisallowedTools:\n  - Zap\n"
    ));
    let (def, diags) = parse_agent_file_with(Path::new("a.md"), &text, Source::User, opts);
    assert!(def.is_some());
    let msgs = located(&diags);
    assert_eq!(
        msgs,
        [
            "4:8 tools: unknown tool `Nope`; the agent runs without it",
            "6:5 disallowedTools: unknown tool `Zap`"
        ]
    );
}

#[test]
fn model_and_permission_mode() {
    let (def, diags) = ok_md(&format!(
        "{HEAD}model: '  Inherit '\npermissionMode: plan\n"
    ));
    assert!(diags.is_empty());
    assert_eq!(def.model.as_deref(), Some("Inherit"));
    assert_eq!(def.permission_mode, Some(PermissionMode::Plan));
    let (def, diags) = ok_md(&format!("{HEAD}model: ''\n"));
    assert_eq!(def.model, None);
    assert_eq!(
        one_warning(&diags),
        "4:8 model: expected a model name, alias or `inherit`, found \"\"; ignored"
    );
    let (def, diags) = ok_md(&format!("{HEAD}permissionMode: bubble\n"));
    assert_eq!(def.permission_mode, None);
    assert!(one_warning(&diags).starts_with("4:17 permissionMode: `bubble` is internal"));
    let (_, diags) = ok_md(&format!("{HEAD}permissionMode: yolo\n"));
    assert!(one_warning(&diags).contains("expected one of default, acceptEdits"));
}

#[test]
fn max_turns_background_isolation() {
    let (def, diags) = ok_md(&format!(
        "{HEAD}maxTurns: '7'\nbackground: 'true'\nisolation: worktree\n"
    ));
    assert!(diags.is_empty());
    assert_eq!(def.max_turns, Some(7));
    assert!(def.background);
    assert_eq!(def.isolation, Some(Isolation::Worktree));
    let (def, _) = ok_md(&format!("{HEAD}maxTurns: 12\nbackground: true\n"));
    assert_eq!(def.max_turns, Some(12));
    assert!(def.background);
    for bad in ["0", "-3", "1.5", "lots", "[1]"] {
        let (def, diags) = ok_md(&format!("{HEAD}maxTurns: {bad}\n"));
        assert_eq!(def.max_turns, None);
        assert!(
            one_warning(&diags).starts_with("4:11 maxTurns: expected a positive integer"),
            "{bad}: {diags:?}"
        );
    }
    let (def, diags) = ok_md(&format!("{HEAD}background: yes please\n"));
    assert!(!def.background);
    assert!(one_warning(&diags).starts_with("4:13 background: expected true or false"));
    let (def, diags) = ok_md(&format!("{HEAD}isolation: remote\n"));
    assert_eq!(def.isolation, None);
    assert!(one_warning(&diags).starts_with("4:12 isolation: expected `worktree`"));
}

#[test]
fn color() {
    let (def, _) = ok_md(&format!("{HEAD}color: cyan\n"));
    assert_eq!(def.color, Some(Color::Cyan));
    let (def, diags) = ok_md(&format!("{HEAD}color: magenta\n"));
    assert_eq!(def.color, None);
    assert_eq!(
        one_warning(&diags),
        "4:8 color: expected one of red, blue, green, yellow, purple, orange, pink, cyan, found \"magenta\"; ignored"
    );
}

#[test]
fn hooks() {
    let (def, diags) = ok_md(&format!("{HEAD}hooks:\n  Stop:\n    - command: echo hi\n"));
    assert!(diags.is_empty());
    let hooks = def.hooks.unwrap();
    assert_eq!(hooks.0.len(), 1);
    assert_eq!(hooks.0[0].event, HookEvent::SubagentStop);
    assert_eq!(hooks.0[0].config.command, "echo hi");
    let (def, diags) = ok_md(&format!("{HEAD}hooks: [a]\n"));
    assert_eq!(def.hooks, None);
    assert!(one_warning(&diags).starts_with("4:8 hooks: expected a mapping"));
}

/// What a resolved hook list says, as (event, matcher, command, timeout).
fn hook_rows(def: &AgentDef) -> Vec<(HookEvent, Option<String>, String, u64)> {
    def.hooks
        .iter()
        .flat_map(|h| h.0.iter())
        .map(|h| {
            (
                h.event,
                h.matcher.text().map(str::to_string),
                h.config.command.clone(),
                h.config.timeout_ms,
            )
        })
        .collect()
}

#[test]
fn hooks_in_claude_code_shape_with_timeout_in_seconds() {
    let (def, diags) = ok_md(&format!(
        "{HEAD}hooks:\n  PreToolUse:\n    - matcher: Bash\n      hooks:\n        - {{type: command, command: ./check.sh, timeout: 5}}\n        - {{type: command, command: ./log.sh}}\n  Stop:\n    - hooks: [{{type: command, command: ./done.sh, timeout: \"2\"}}]\n"
    ));
    assert!(diags.is_empty(), "{diags:?}");
    let bash = Some("Bash".to_string());
    assert_eq!(
        hook_rows(&def),
        [
            (
                HookEvent::PreToolUse,
                bash.clone(),
                "./check.sh".into(),
                5000
            ),
            (
                HookEvent::PreToolUse,
                bash,
                "./log.sh".into(),
                crate::config::DEFAULT_HOOK_TIMEOUT_MS
            ),
            (HookEvent::SubagentStop, None, "./done.sh".into(), 2000),
        ]
    );
}

#[test]
fn hooks_in_the_flat_shape_and_single_objects() {
    let (def, diags) = ok_md(&format!(
        "{HEAD}hooks:\n  PostToolUse: {{matcher: Read, command: echo hi, timeout_ms: \"250\"}}\n  SubagentStart: [{{command: echo start}}]\n"
    ));
    assert!(diags.is_empty(), "{diags:?}");
    assert_eq!(
        hook_rows(&def),
        [
            (
                HookEvent::PostToolUse,
                Some("Read".into()),
                "echo hi".into(),
                250
            ),
            (
                HookEvent::SubagentStart,
                None,
                "echo start".into(),
                crate::config::DEFAULT_HOOK_TIMEOUT_MS
            ),
        ]
    );
}

#[test]
fn frontmatter_hooks_keep_args_and_async_and_an_entry_with_a_typo_never_runs() {
    let (def, diags) = ok_md(&format!(
        "{HEAD}hooks:\n  PreToolUse:\n    - hooks:\n        - {{type: command, command: bash, args: [check.sh, two words], async: true}}\n        - {{type: command, command: bash, arg: [check.sh]}}\n        - {{type: command, command: ./x.sh, once: true}}\n"
    ));
    let hooks = &def.hooks.as_ref().unwrap().0;
    assert_eq!(hooks.len(), 1, "{hooks:?}");
    assert_eq!(hooks[0].config.command, "bash");
    assert_eq!(
        hooks[0].config.args,
        Some(vec!["check.sh".to_string(), "two words".to_string()])
    );
    assert!(hooks[0].config.run_async);
    let texts = located(&diags);
    assert_eq!(texts.len(), 2, "{texts:?}");
    assert!(
        texts[0].starts_with("8:42 hooks.PreToolUse: unknown key `arg`"),
        "{texts:?}"
    );
    assert!(texts[0].ends_with("this hook is not run"), "{texts:?}");
    assert!(
        texts[1].starts_with(
            "9:44 hooks.PreToolUse: `once` is a Claude Code hook setting cadre does not implement"
        ),
        "{texts:?}"
    );
}

#[test]
fn bad_hook_entries_are_dropped_one_by_one_at_their_position() {
    let (def, diags) = ok_md(&format!(
        "{HEAD}hooks:\n  Notifications: [{{command: x}}]\n  PreToolUse:\n    - matcher: Bash\n    - hooks: [{{type: mcp_tool, server: judge}}]\n    - echo\n    - matcher: \"[\"\n      command: never\n    - command: ok\n"
    ));
    let rows = hook_rows(&def);
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0].2, "ok");
    let texts = located(&diags);
    assert_eq!(texts.len(), 5, "{texts:?}");
    assert!(
        texts[0].starts_with("5:3 hooks.Notifications: unknown event"),
        "{texts:?}"
    );
    assert!(
        texts[1].starts_with("7:7 hooks.PreToolUse: a command hook needs a `command`"),
        "{texts:?}"
    );
    assert!(
        texts[2].contains("hook type \"mcp_tool\" is not supported"),
        "{texts:?}"
    );
    assert!(
        texts[3].starts_with("9:7 hooks.PreToolUse: expected a mapping"),
        "{texts:?}"
    );
    assert!(
        texts[4]
            .starts_with("10:16 hooks.PreToolUse: matcher \"[\" is not a valid regular expression"),
        "{texts:?}"
    );
    assert!(diags[4].is_error());
}

#[test]
fn mcp_servers_and_required() {
    let front = format!(
        "{HEAD}mcpServers:\n  - github\n  - local:\n      command: srv\n  - 3\n  - {{a: {{}}, b: {{}}}}\nrequiredMcpServers: [github, '', x]\n"
    );
    let (def, diags) = ok_md(&front);
    assert_eq!(
        def.mcp_servers,
        vec![
            AgentMcpServer::Named("github".into()),
            AgentMcpServer::Inline {
                name: "local".into(),
                config: crate::config::McpServerConfig {
                    command: Some("srv".into()),
                    ..Default::default()
                }
            }
        ]
    );
    assert_eq!(
        serde_json::to_value(&def.mcp_servers).unwrap(),
        json!(["github", {"local": {"command": "srv", "args": [], "env": {}, "headers": {}}}])
    );
    assert_eq!(def.required_mcp_servers, ["github", "x"]);
    let pos: Vec<(usize, usize)> = diags
        .iter()
        .map(|d| (d.line.unwrap(), d.column.unwrap()))
        .collect();
    assert_eq!(pos, [(8, 5), (9, 5), (10, 30)], "{diags:?}");
    assert!(diags.iter().all(|d| d.severity == Severity::Warning));
}

#[test]
fn skills_memory_effort_initial_prompt() {
    let (def, diags) = ok_md(&format!(
        "{HEAD}skills: a, b(c d)\nmemory: project\neffort: xhigh\ninitialPrompt: go\n"
    ));
    assert!(diags.is_empty(), "{diags:?}");
    assert_eq!(def.skills, ["a", "b(c d)"]);
    assert_eq!(def.memory.as_deref(), Some("project"));
    assert_eq!(def.effort, Some(EffortSetting::Level("xhigh".into())));
    assert_eq!(def.initial_prompt.as_deref(), Some("go"));
    let (def, _) = ok_md(&format!("{HEAD}effort: 3\n"));
    assert_eq!(def.effort, Some(EffortSetting::Number(3)));
    let (def, diags) = ok_md(&format!(
        "{HEAD}memory: global\neffort: extreme\ninitialPrompt: ' '\n"
    ));
    assert_eq!(
        (def.memory, def.effort, def.initial_prompt),
        (None, None, None)
    );
    let pos: Vec<(usize, usize)> = diags
        .iter()
        .map(|d| (d.line.unwrap(), d.column.unwrap()))
        .collect();
    assert_eq!(pos, [(4, 9), (5, 9), (6, 16)]);
}

#[test]
fn when_condition() {
    let (def, _) = ok_md(&format!("{HEAD}when: fork_subagent, !coordinator\n"));
    assert_eq!(
        def.when.map(|c| c.to_string()).as_deref(),
        Some("fork_subagent, !coordinator")
    );
    let (def, _) = ok_md(&format!("{HEAD}when: [a, '!b']\n"));
    assert_eq!(def.when.map(|c| c.to_string()).as_deref(), Some("a, !b"));
    let (def, diags) = ok_md(&format!("{HEAD}when: 'bad name'\n"));
    assert_eq!(def.when, None);
    assert!(one_warning(&diags).starts_with("4:7 when: expected a flag name"));
}

#[test]
fn unknown_fields_warn() {
    let (def, diags) = ok_md(&format!("{HEAD}max_turns: 3\nfrobnicate: 1\n"));
    assert_eq!(def.max_turns, None);
    assert_eq!(diags.len(), 2);
    assert_eq!((diags[0].line, diags[0].column), (Some(4), Some(1)));
    assert!(
        diags[0].message.contains("did you mean `maxTurns`"),
        "{}",
        diags[0]
    );
    assert_eq!(diags[1].message, "unknown field `frobnicate`; ignored");
}

#[test]
fn fork_is_reserved() {
    let (def, diags) = parse_md("name: fork\ndescription: d\n");
    assert!(def.is_none());
    assert!(diags[0].is_error() && diags[0].message.contains("reserved"));
    assert_eq!(diags[0].line, Some(2));
}

#[test]
fn invalid_yaml_is_retried_with_quoted_values() {
    let front = "name: a\ndescription: Use it when: the user asks. It's fine\ntools: Read\n";
    let (def, diags) = ok_md(front);
    assert!(diags.is_empty(), "{diags:?}");
    assert_eq!(def.description, "Use it when: the user asks. It's fine");
    assert_eq!(def.tools, Some(vec!["Read".into()]));

    // Continued on indented lines.
    let front = "name: a\ndescription: Use when: x\n  and more: y\nmodel: opus\n";
    let (def, _) = ok_md(front);
    assert_eq!(def.description, "Use when: x and more: y");
    assert_eq!(def.model.as_deref(), Some("opus"));

    // Still broken after quoting: the first error's position, shifted.
    let (def, diags) = parse_md("name: a\ndescription: d\ntools: [Read\n");
    assert!(def.is_none());
    assert!(diags[0].is_error() && diags[0].message.starts_with("invalid YAML frontmatter"));
    assert!(diags[0].line.unwrap() >= 4, "{:?}", diags[0]);

    // Needs quoting and is still broken: the original error is reported.
    let (def, diags) = parse_md("name: a\ndescription: a: b\ntools: [Read\n");
    assert!(def.is_none());
    assert!(
        diags[0].is_error() && diags[0].line.unwrap() >= 3,
        "{:?}",
        diags[0]
    );

    // A value with a ` #` is quoted before the first parse, as Claude Code
    // (2.1.214 on) does: the `#` and what follows are text, not a comment.
    let (def, diags) = ok_md("name: a\ndescription: plain # note: x\n");
    assert!(diags.is_empty(), "{diags:?}");
    assert_eq!(def.description, "plain # note: x");
    let (def, diags) = ok_md("name: promo\ndescription: Our app just hit #1 on the charts\n");
    assert!(diags.is_empty(), "{diags:?}");
    assert_eq!(def.description, "Our app just hit #1 on the charts");
    // A `#` with no blank before it was never a comment.
    let (def, _) = ok_md("name: a\ndescription: issue#1 fixed\n");
    assert_eq!(def.description, "issue#1 fixed");

    // In the retry (another line needs quoting), ` #` is text: the whole
    // value is kept, as Claude Code keeps it. (Valid YAML is read as YAML,
    // by both: there ` #` starts a comment.)
    let (def, _) = ok_md("name: a\ndescription: Our app just hit #1 on launch day\nnote: x: y\n");
    assert_eq!(def.description, "Our app just hit #1 on launch day");
}

#[test]
fn quoting_keeps_lines_and_doubles_quotes() {
    let q = parse::quote_plain_values(
        "name: a\ndescription: it's: x\n  more\n\ntools: [A]\nmodel: 'q'\n",
    );
    assert_eq!(
        q,
        "name: 'a'\ndescription: 'it''s: x\n  more'\n\ntools: [A]\nmodel: 'q'\n"
    );
    assert_eq!(
        parse::quote_plain_values("description: hit #1 # really\n"),
        "description: 'hit #1 # really'\n"
    );
    assert_eq!(
        parse::quote_hash_values("a: x #1\r\nb: 'q #'\n  c: d #\ne: #f\ng: it's #2\n"),
        "a: 'x #1'\r\nb: 'q #'\n  c: d #\ne: '#f'\ng: 'it''s #2'\n"
    );
}

#[test]
fn yaml_and_toml_files() {
    let yaml = "name: y\ndescription: Y\ntools: [Read]\nprompt: |\n  Be brief.\nmaxTurns: nope\n";
    let (def, diags) = parse_agent_file(Path::new("y.yml"), yaml, Source::User);
    let def = def.unwrap();
    assert_eq!(def.prompt, Prompt::Inline("Be brief.".into()));
    assert_eq!(def.tools, Some(vec!["Read".into()]));
    assert_eq!((diags[0].line, diags[0].column), (Some(6), Some(11)));

    let toml = "name = \"t\"\ndescription = \"T\"\nprompt_template = \"agents/t.hbs\"\ncolor = 3\n";
    let (def, diags) = parse_agent_file(Path::new("t.toml"), toml, Source::User);
    let def = def.unwrap();
    assert_eq!(def.prompt, Prompt::Template("agents/t.hbs".into()));
    assert_eq!((diags[0].line, diags[0].column), (Some(4), Some(9)));

    let (def, diags) = parse_agent_file(Path::new("t.toml"), "name = \n", Source::User);
    assert!(def.is_none());
    assert!(diags[0].is_error() && diags[0].line == Some(1));

    let (def, diags) = parse_agent_file(
        Path::new("n.yaml"),
        "name: n\ndescription: N\n",
        Source::User,
    );
    assert_eq!(def.unwrap().prompt, Prompt::Inline(String::new()));
    assert_eq!(diags.len(), 1);
}

#[test]
fn cli_agents_drop_only_bad_entries() {
    let json = r#"{
  "reviewer": {"description": "Reviews", "prompt": "Review it.", "tools": ["Read", "Grep"], "model": "sonnet"},
  "broken": {"prompt": "x"},
  "colors": {"description": "C", "prompt": "p", "maxTurns": -1},
  "fork": {"description": "f", "prompt": "p"},
  "noprompt": {"description": "n"}
}"#;
    let (defs, diags) = parse_cli_agents(json);
    let names: Vec<&str> = defs.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["reviewer", "colors"]);
    assert_eq!(defs[0].tools, Some(vec!["Read".into(), "Grep".into()]));
    assert_eq!(defs[0].source, Source::Cli);
    assert_eq!(defs[0].path, None);
    assert_eq!(defs[1].max_turns, None);
    assert!(
        diags
            .iter()
            .all(|d| d.path.as_deref() == Some(Path::new("--agents")) && d.line.is_some())
    );
    let errors = diags.iter().filter(|d| d.is_error()).count();
    assert_eq!(errors, 3, "{diags:?}");
    let warn = diags.iter().find(|d| !d.is_error()).unwrap();
    assert_eq!((warn.line, warn.column), (Some(4), Some(61)));

    let (defs, diags) = parse_cli_agents("{not json");
    assert!(defs.is_empty() && diags[0].is_error());
    let (defs, diags) = parse_cli_agents("[1]");
    assert!(defs.is_empty() && diags[0].is_error());
}

// ---------------------------------------------------------------- load ---

fn write(dir: &Path, rel: &str, text: &str) -> PathBuf {
    let p = dir.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(&p, text).unwrap();
    p
}

fn agent(name: &str, desc: &str) -> String {
    format!("---\nname: {name}\ndescription: {desc}\n---\nprompt of {name}\n")
}

#[test]
fn load_precedence_and_shadowing() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    write(t, "plugin/x.md", &agent("x", "plugin"));
    write(t, "user/x.md", &agent("x", "user"));
    write(t, "user/Explore.md", &agent("Explore", "user explore"));
    write(
        t,
        "proj/deep/x.yaml",
        "name: x\ndescription: project\nprompt: p\n",
    );
    write(
        t,
        "managed/x.toml",
        "name = \"x\"\ndescription = \"managed\"\nprompt = \"p\"\n",
    );
    let dirs = vec![
        SourceDir {
            source: Source::Plugin,
            path: t.join("plugin"),
        },
        SourceDir {
            source: Source::User,
            path: t.join("user"),
        },
        SourceDir {
            source: Source::Project,
            path: t.join("proj"),
        },
        SourceDir {
            source: Source::Project,
            path: t.join("missing"),
        },
        SourceDir {
            source: Source::Managed,
            path: t.join("managed"),
        },
    ];
    let cli = r#"{"x": {"description": "cli", "prompt": "p"}, "y": {"description": "cli y", "prompt": "p"}}"#;
    let cat = load(&CatalogInput {
        dirs,
        cli_json: Some(cli.into()),
        ..Default::default()
    });
    assert!(cat.diagnostics.is_empty(), "{:?}", cat.diagnostics);
    assert_eq!(cat.files, 5);
    assert_eq!(cat.get("x").unwrap().description, "managed");
    assert_eq!(cat.get("y").unwrap().source, Source::Cli);
    assert_eq!(cat.get("Explore").unwrap().source, Source::User);
    assert!(cat.get("fork").unwrap().synthetic);
    let chain: Vec<(&str, Source)> = cat
        .shadowed
        .iter()
        .map(|s| (s.def.description.as_str(), s.shadowed_by))
        .filter(|(_, _)| true)
        .collect();
    // Plugin agents are namespaced by their plugin (`plugin:x`), so the
    // user's `x` does not replace them.
    assert_eq!(cat.get("plugin:x").unwrap().source, Source::Plugin);
    assert!(chain.contains(&("user", Source::Project)));
    assert!(chain.contains(&("project", Source::Cli)));
    assert!(chain.contains(&("cli", Source::Managed)));
    assert!(
        cat.shadowed
            .iter()
            .any(|s| s.def.name == "Explore" && s.def.source == Source::Builtin)
    );
}

#[test]
fn closest_project_folder_wins_with_a_warning() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("repo");
    let cwd = root.join("sub");
    std::fs::create_dir_all(root.join(".git")).unwrap();
    let far = write(&root, ".claude/agents/r.md", &agent("r", "root"));
    let near = write(&cwd, ".claude/agents/r.md", &agent("r", "sub"));
    let mut settings = crate::config::Settings::default();
    settings.agents.load_user_home = false;
    let dirs = source_dirs(&settings, &cwd, None, None);
    let cat = load(&CatalogInput {
        dirs,
        ..Default::default()
    });
    assert_eq!(cat.get("r").unwrap().description, "sub");
    assert_eq!(cat.diagnostics.len(), 1);
    let msg = &cat.diagnostics[0].message;
    assert!(
        msg.contains(&far.display().to_string()) && msg.contains(&near.display().to_string()),
        "{msg}"
    );
}

#[test]
fn load_reports_bad_files_and_keeps_going() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    write(t, "a/good.md", &agent("good", "fine"));
    write(t, "a/notes.md", "# just notes\n");
    write(t, "a/ignored.txt", "whatever");
    std::fs::write(t.join("a/bin.md"), b"---\0\x01\x02").unwrap();
    std::fs::write(t.join("a/latin1.md"), b"---\nname: caf\xe9\n---\n").unwrap();
    std::fs::write(
        t.join("a/huge.md"),
        vec![b'a'; (MAX_FILE_BYTES + 1) as usize],
    )
    .unwrap();
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(t.join("a"), t.join("a/loop")).unwrap();
        std::os::unix::fs::symlink(t.join("nowhere.md"), t.join("a/dangling.md")).unwrap();
    }
    let dirs = vec![SourceDir {
        source: Source::Project,
        path: t.join("a"),
    }];
    let cat = load(&CatalogInput {
        dirs,
        ..Default::default()
    });
    assert!(cat.get("good").is_some());
    for d in &cat.diagnostics {
        assert!(d.path.is_some(), "{d}");
    }
    let about = |name: &str| {
        cat.diagnostics
            .iter()
            .any(|d| d.path.as_ref().is_some_and(|p| p.ends_with(name)))
    };
    for name in ["notes.md", "bin.md", "latin1.md", "huge.md"] {
        assert!(about(name), "{name}: {:?}", cat.diagnostics);
    }
    #[cfg(unix)]
    {
        assert!(about("loop"));
        assert!(about("dangling.md"));
    }
}

#[test]
fn parallel_load_matches_sequential_order() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    for i in 0..150 {
        write(
            t,
            &format!("p/{i:03}.md"),
            &agent(&format!("a{}", i % 100), &format!("d{i}")),
        );
    }
    let dirs = vec![SourceDir {
        source: Source::Project,
        path: t.join("p"),
    }];
    let cat = load(&CatalogInput {
        dirs,
        ..Default::default()
    });
    assert_eq!(cat.files, 150);
    // Files are sorted; for a duplicate, the later path wins.
    assert_eq!(cat.get("a7").unwrap().description, "d107");
    assert_eq!(cat.diagnostics.len(), 50);
}

/// Folders large enough to be parsed by several threads while the walk
/// goes on, with a small one between them and `--agents` after them: each
/// file lands in its own source, in path order, so precedence, shadowing
/// and the order of diagnostics are those of a file-by-file load.
#[test]
fn files_parsed_while_the_walk_goes_on_keep_their_source_and_order() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    for i in 0..200 {
        write(
            t,
            &format!("user/{i:03}.md"),
            &agent(&format!("a{}", i % 100), &format!("u{i}")),
        );
    }
    write(t, "user2/only.md", &agent("only", "user2"));
    for i in 0..130 {
        write(
            t,
            &format!("proj/{i:03}.md"),
            &agent(&format!("a{}", i % 100), &format!("p{i}")),
        );
    }
    write(t, "proj/broken.md", "---\nname: [\n---\n");
    let dirs = vec![
        SourceDir {
            source: Source::User,
            path: t.join("user"),
        },
        SourceDir {
            source: Source::User,
            path: t.join("user2"),
        },
        SourceDir {
            source: Source::Project,
            path: t.join("proj"),
        },
    ];
    let cli = r#"{"a5": {"description": "cli", "prompt": "p"}}"#;
    let cat = load(&CatalogInput {
        dirs,
        cli_json: Some(cli.into()),
        ..Default::default()
    });
    assert_eq!(cat.files, 332);
    assert_eq!(cat.get("only").unwrap().source, Source::User);
    for k in 0..100 {
        let want = match k {
            5 => "cli".to_string(),
            0..30 => format!("p{}", 100 + k),
            _ => format!("p{k}"),
        };
        let def = cat.get(&format!("a{k}")).unwrap();
        assert_eq!(def.description, want);
        if k != 5 {
            assert_eq!(
                def.path.as_deref(),
                Some(
                    t.join(format!("proj/{:03}.md", want[1..].parse::<u32>().unwrap()))
                        .as_path()
                )
            );
        }
    }
    // 100 user names defined twice, 100 user agents hidden by the project,
    // 30 project names defined twice, one project agent hidden by --agents.
    assert_eq!(cat.shadowed.len(), 231);
    let twice: Vec<&Path> = cat
        .diagnostics
        .iter()
        .filter(|d| d.message.contains("defined twice"))
        .filter_map(|d| d.path.as_deref())
        .collect();
    let expected: Vec<PathBuf> = (100..200)
        .map(|i| t.join(format!("user/{i:03}.md")))
        .chain((100..130).map(|i| t.join(format!("proj/{i:03}.md"))))
        .collect();
    assert_eq!(
        twice,
        expected.iter().map(PathBuf::as_path).collect::<Vec<_>>()
    );
    // The broken file is reported in its place: after the project's
    // numbered files (`broken.md` sorts after them), before nothing else.
    let last = cat.diagnostics.last().unwrap();
    assert!(
        last.path.as_ref().unwrap().ends_with("proj/broken.md"),
        "{last}"
    );
    assert_eq!(cat.diagnostics.len(), 131);
}

/// Files are opened by name relative to their open folder: links to files
/// and folders elsewhere (relative ones included) still load, in a folder
/// large enough to be parsed on several threads.
#[cfg(unix)]
#[test]
fn files_opened_relative_to_their_folder_follow_links() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    for i in 0..100 {
        write(t, &format!("p/{i:03}.md"), &agent(&format!("a{i}"), "d"));
    }
    write(
        t,
        "outside/x.md",
        &agent("linked", "through a relative link"),
    );
    write(
        t,
        "outside/sub/y.md",
        &agent("in-linked-folder", "through a folder link"),
    );
    std::os::unix::fs::symlink("../outside/x.md", t.join("p/x.md")).unwrap();
    std::os::unix::fs::symlink(t.join("outside/sub"), t.join("p/sub")).unwrap();
    let cat = load(&dir_input(&t.join("p")));
    assert!(cat.diagnostics.is_empty(), "{:?}", cat.diagnostics);
    assert_eq!(cat.files, 102);
    assert_eq!(
        cat.get("linked").unwrap().path.as_deref(),
        Some(t.join("p/x.md").as_path())
    );
    assert_eq!(
        cat.get("in-linked-folder").unwrap().path.as_deref(),
        Some(t.join("p/sub/y.md").as_path())
    );
}

/// When loads already hold as many folders open as they may, files are
/// opened by their whole path instead, and load the same. (Other tests
/// loading meanwhile only lose the shortcut.)
#[test]
fn with_no_folder_handles_left_files_are_opened_by_path() {
    use std::sync::atomic::Ordering;
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    for i in 0..100 {
        write(
            t,
            &format!("p/g{}/{i:03}.md", i % 7),
            &agent(&format!("a{i}"), "d"),
        );
    }
    let with_handles = load(&dir_input(&t.join("p")));
    super::load::OPEN_FOLDERS.fetch_add(super::load::MAX_OPEN_FOLDERS, Ordering::Relaxed);
    let by_path = load(&dir_input(&t.join("p")));
    super::load::OPEN_FOLDERS.fetch_sub(super::load::MAX_OPEN_FOLDERS, Ordering::Relaxed);
    assert!(by_path.diagnostics.is_empty(), "{:?}", by_path.diagnostics);
    assert_eq!(by_path.files, 100);
    assert_eq!(by_path, with_handles);
}

mod props {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn parsing_never_panics(
            body in "(---\n|name: |description: |tools: |\\[|\\]|: |'|\"|\n|  |-|x|\r\n|#|\\{|\\}|maxTurns: 3\n|\u{feff})*",
            ext in prop::sample::select(vec!["md", "yaml", "toml"]),
        ) {
            let path = PathBuf::from(format!("p.{ext}"));
            let (_, diags) = parse_agent_file(&path, &body, Source::Project);
            for d in diags {
                prop_assert!(d.path.is_some());
            }
            let _ = parse::quote_plain_values(&body);
        }

        #[test]
        fn cli_parsing_never_panics(s in any::<String>()) {
            let _ = parse_cli_agents(&s);
        }
    }
}

#[test]
fn plugin_agents_are_namespaced_and_keep_no_mode_hooks_or_servers() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let risky = "---\nname: r\ndescription: d\npermissionMode: bypassPermissions\nhooks:\n  PreToolUse:\n    - command: touch x\nmcpServers:\n  - shared\n  - inline:\n      command: sh\n---\nbody\n";
    write(
        t,
        "tools-plugin/.claude-plugin/plugin.json",
        r#"{"name": "toolbox"}"#,
    );
    write(t, "tools-plugin/agents/r.md", risky);
    write(t, "proj/r.md", risky);
    let mut cat = load(&CatalogInput {
        dirs: vec![
            SourceDir {
                source: Source::Plugin,
                path: t.join("tools-plugin/agents"),
            },
            SourceDir {
                source: Source::Project,
                path: t.join("proj"),
            },
        ],
        ..Default::default()
    });
    let removed = cat.restrict(false);
    let p = cat.get("toolbox:r").unwrap();
    assert_eq!(p.permission_mode, None);
    assert!(p.hooks.is_none() && p.mcp_servers.is_empty());
    let r = cat.get("r").unwrap();
    assert_eq!(
        r.permission_mode,
        Some(crate::config::PermissionMode::BypassPermissions)
    );
    assert!(r.hooks.is_none());
    assert_eq!(r.mcp_servers, vec![AgentMcpServer::Named("shared".into())]);
    let fields: Vec<(&str, &str)> = removed.iter().map(|(a, f, _)| (a.as_str(), *f)).collect();
    assert_eq!(fields, [("r", "hooks"), ("r", "mcpServers")]);

    let mut trusted = load(&CatalogInput {
        dirs: vec![SourceDir {
            source: Source::Project,
            path: t.join("proj"),
        }],
        ..Default::default()
    });
    assert!(trusted.restrict(true).is_empty());
    assert!(trusted.get("r").unwrap().hooks.is_some());
}

#[test]
fn inline_mcp_servers_are_checked_when_read_and_bad_ones_left_out() {
    let (def, diags) = ok_md(&format!(
        "{HEAD}mcpServers:\n  - local:\n      command: srv\n      args: [a]\n  - broken:\n      args: []\n  - mistyped:\n      type: http\n      command: srv\n"
    ));
    let names: Vec<&str> = def.mcp_servers.iter().map(AgentMcpServer::name).collect();
    assert_eq!(names, ["local"]);
    let texts = located(&diags);
    assert_eq!(texts.len(), 2, "{texts:?}");
    assert!(
        texts[0].starts_with("8:5 mcpServers.broken: needs a `command`"),
        "{texts:?}"
    );
    assert!(
        texts[1].starts_with("10:5 mcpServers.mistyped: has `type: \"http\"`"),
        "{texts:?}"
    );
    assert!(diags.iter().all(Diagnostic::is_error));
}

#[test]
fn compaction_window_and_threshold() {
    let (def, diags) = ok_md(&format!(
        "{HEAD}autoCompactWindow: 60000\ncompactThreshold: 0.6\n"
    ));
    assert!(diags.is_empty(), "{diags:?}");
    assert_eq!(def.auto_compact_window, Some(60_000));
    assert_eq!(def.compact_threshold, Some(0.6));
    let (def, diags) = ok_md(&format!(
        "{HEAD}autoCompactWindow: '5000'\ncompact_threshold: 1\n"
    ));
    assert!(diags.is_empty(), "{diags:?}");
    assert_eq!(def.auto_compact_window, Some(5000));
    assert_eq!(def.compact_threshold, Some(1.0));
    for bad in ["0", "-1", "big", "1.5"] {
        let (def, diags) = ok_md(&format!("{HEAD}autoCompactWindow: {bad}\n"));
        assert_eq!(def.auto_compact_window, None);
        assert!(
            one_warning(&diags).contains("autoCompactWindow: expected a positive number of tokens"),
            "{bad}: {diags:?}"
        );
    }
    for bad in ["0", "1.2", "-0.5", "half"] {
        let (def, diags) = ok_md(&format!("{HEAD}compactThreshold: {bad}\n"));
        assert_eq!(def.compact_threshold, None);
        assert!(
            one_warning(&diags).contains("compactThreshold: expected a fraction"),
            "{bad}: {diags:?}"
        );
    }
}

#[test]
fn the_walk_lists_agent_files_in_path_order_without_a_final_sort() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    // Names where byte order of whole paths and path order differ
    // (`a/…` sorts before `a-b`, `a b` and `a.md` by component).
    for p in [
        "a/z.md",
        "a/b/c.md",
        "a-b/x.yaml",
        "a b/y.toml",
        "a.md",
        "B.md",
        "b.md",
        "a/b.md",
        "notes.txt",
        "deep/er/est/f.yml",
    ] {
        let p = root.join(p);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, "x").unwrap();
    }
    let mut diags = Vec::new();
    let files = super::load::walk(root, &mut diags);
    assert!(diags.is_empty(), "{diags:?}");
    let mut sorted = files.clone();
    sorted.sort();
    assert_eq!(files, sorted);
    assert_eq!(files.len(), 9);
    assert!(!files.iter().any(|p| p.ends_with("notes.txt")));
}

fn agent_text(name: &str, description: &str) -> String {
    format!("---\nname: {name}\ndescription: {description}\n---\nYou are {name}.\n")
}

fn dir_input(root: &Path) -> CatalogInput {
    CatalogInput {
        dirs: vec![SourceDir {
            source: Source::Project,
            path: root.to_path_buf(),
        }],
        ..Default::default()
    }
}

/// The same catalog as a full load, agents and diagnostics alike.
fn assert_same_as_full(input: &CatalogInput, cat: &Catalog) {
    let full = load(input);
    assert_eq!(&full, cat);
}

#[test]
fn an_incremental_load_reuses_unchanged_files_and_sees_every_change() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    std::fs::write(root.join("keep.md"), agent_text("keep", "Stays")).unwrap();
    std::fs::write(root.join("edit.md"), agent_text("edit", "Before")).unwrap();
    std::fs::write(root.join("gone.md"), agent_text("gone", "Removed later")).unwrap();
    std::fs::write(root.join("move.md"), agent_text("move", "Renamed later")).unwrap();
    std::fs::write(root.join("swap.md"), agent_text("swap", "Replaced AAA")).unwrap();
    std::fs::write(root.join("bad.md"), "---\nname: [\n---\n").unwrap();
    let input = dir_input(root);
    // Trust every stamp at once (the default waits two seconds).
    let empty = FileCache::with_settle(std::time::Duration::ZERO);
    let (first, cache) = load_incremental(&input, &empty);
    assert_same_as_full(&input, &first);
    assert_eq!(cache.len(), 6);
    assert!(
        first
            .diagnostics
            .iter()
            .any(|d| d.path.as_deref() == Some(&root.join("bad.md")))
    );

    // Nothing changed: every definition is the one read before.
    let (again, cache) = load_incremental(&input, &cache);
    assert_same_as_full(&input, &again);
    for name in ["keep", "edit", "gone", "move", "swap"] {
        assert!(
            Arc::ptr_eq(&first.agents[name], &again.agents[name]),
            "{name}"
        );
    }
    // The broken file is still reported, with its position.
    assert_eq!(first.diagnostics, again.diagnostics);

    // Edited (another size), removed, renamed, replaced by another file of
    // the same size and modification time (a new inode), and a new file.
    std::fs::write(root.join("edit.md"), agent_text("edit", "After, longer")).unwrap();
    std::fs::remove_file(root.join("gone.md")).unwrap();
    std::fs::rename(root.join("move.md"), root.join("moved.md")).unwrap();
    let old = std::fs::metadata(root.join("swap.md")).unwrap();
    let replacement = root.join("swap.tmp");
    std::fs::write(&replacement, agent_text("swap", "Replaced BBB")).unwrap();
    std::fs::File::options()
        .write(true)
        .open(&replacement)
        .unwrap()
        .set_modified(old.modified().unwrap())
        .unwrap();
    std::fs::rename(&replacement, root.join("swap.md")).unwrap();
    std::fs::write(root.join("new.md"), agent_text("new", "Added")).unwrap();

    let (third, cache) = load_incremental(&input, &cache);
    assert_same_as_full(&input, &third);
    assert_eq!(third.agents["edit"].description, "After, longer");
    assert!(third.get("gone").is_none());
    assert_eq!(
        third.agents["move"].path.as_deref(),
        Some(root.join("moved.md").as_path())
    );
    assert_eq!(third.agents["swap"].description, "Replaced BBB");
    assert!(third.get("new").is_some());
    assert!(Arc::ptr_eq(&first.agents["keep"], &third.agents["keep"]));
    assert_eq!(cache.len(), 6);
}

#[test]
fn a_file_changed_just_before_it_was_read_is_read_again() {
    // Rewritten in place with the same size and its old modification time
    // restored: only the change time differs, and that can stay equal
    // within one tick of the file system's clock. With the default settle
    // time a file that young is never taken from the cache.
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let path = root.join("a.md");
    std::fs::write(&path, agent_text("a", "Version AAA")).unwrap();
    let input = dir_input(root);
    let (first, cache) = load_incremental(&input, &FileCache::default());
    assert_eq!(first.agents["a"].description, "Version AAA");
    assert!(cache.is_empty(), "a file written just now is not trusted");
    let mtime = std::fs::metadata(&path).unwrap().modified().unwrap();
    std::fs::write(&path, agent_text("a", "Version BBB")).unwrap();
    std::fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
    let (second, _) = load_incremental(&input, &cache);
    assert_eq!(second.agents["a"].description, "Version BBB");
}

#[test]
fn other_tool_names_make_the_cache_unused() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    std::fs::write(
        root.join("a.md"),
        "---\nname: a\ndescription: d\ntools: Read, Frobnicate\n---\nx\n",
    )
    .unwrap();
    let mut input = dir_input(root);
    input.known_tools = vec!["Read".into(), "Frobnicate".into()];
    let empty = FileCache::with_settle(std::time::Duration::ZERO);
    let file = root.join("a.md");
    let of_file = |c: &Catalog| {
        c.diagnostics
            .iter()
            .filter(|d| d.path.as_deref() == Some(file.as_path()))
            .count()
    };
    let (first, cache) = load_incremental(&input, &empty);
    assert_eq!(of_file(&first), 0, "{:?}", first.diagnostics);
    input.known_tools = vec!["Read".into()];
    let (second, _) = load_incremental(&input, &cache);
    assert_same_as_full(&input, &second);
    assert_eq!(of_file(&second), 1, "{:?}", second.diagnostics);
}

#[test]
fn a_plugin_manifest_linked_to_a_device_is_not_read() {
    let root = tempfile::tempdir().unwrap();
    let plugin = root.path().join("kit");
    std::fs::create_dir_all(plugin.join(".claude-plugin")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", plugin.join(".claude-plugin/plugin.json")).unwrap();
    assert_eq!(super::load::plugin_name(&plugin), "kit");
}
