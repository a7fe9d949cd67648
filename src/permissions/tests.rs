//! Table tests for permission rules: every mode, every rule kind, and the
//! order deny → ask → allow → mode.

use serde_json::{Value, json};

use super::*;
use crate::config::PermissionMode::{self, *};

const CWD: &str = "/work/proj";

fn rules(allow: &[&str], ask: &[&str], deny: &[&str]) -> Rules {
    let (rules, errors) = Rules::parse_lists(allow, ask, deny);
    assert!(errors.is_empty(), "{errors:?}");
    rules
}

fn bash(cmd: &str) -> Value {
    json!({"command": cmd})
}

fn file(p: &str) -> Value {
    json!({"file_path": p})
}

/// `"allow"`, `"ask: REASON"` or `"deny: REASON"`.
fn show(d: &Decision) -> String {
    match d {
        Decision::Allow => "allow".to_string(),
        Decision::Ask { reason } => format!("ask: {reason}"),
        Decision::Deny { reason } => format!("deny: {reason}"),
    }
}

struct Case {
    allow: &'static [&'static str],
    ask: &'static [&'static str],
    deny: &'static [&'static str],
    mode: PermissionMode,
    tool: &'static str,
    input: Value,
    expect: &'static str,
}

fn case(mode: PermissionMode, tool: &'static str, input: Value, expect: &'static str) -> Case {
    Case {
        allow: &[],
        ask: &[],
        deny: &[],
        mode,
        tool,
        input,
        expect,
    }
}

fn with(
    allow: &'static [&'static str],
    ask: &'static [&'static str],
    deny: &'static [&'static str],
    c: Case,
) -> Case {
    Case {
        allow,
        ask,
        deny,
        ..c
    }
}

fn check(cases: Vec<Case>) {
    let mut failures = Vec::new();
    for (i, c) in cases.iter().enumerate() {
        let r = rules(c.allow, c.ask, c.deny);
        let got = show(&decide(&r, c.mode, c.tool, &c.input, Path::new(CWD)));
        if got != c.expect {
            failures.push(format!(
                "#{i} {} {} {} (allow {:?} ask {:?} deny {:?}): expected {:?}, got {:?}",
                c.mode, c.tool, c.input, c.allow, c.ask, c.deny, c.expect, got
            ));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

#[test]
#[rustfmt::skip] // one table row per line
fn modes_without_rules() {
    let e = json!({});
    let mut cases = Vec::new();
    for mode in [Default, AcceptEdits, BypassPermissions, DontAsk, Plan, Bubble] {
        for tool in ["Read", "Glob", "Grep", "Agent", "Task", "SendMessage", "TaskOutput", "TaskStop"] {
            cases.push(case(mode, tool, e.clone(), "allow"));
        }
    }
    cases.extend([
        case(Default, "Write", file("a"), "ask: permission mode 'default'"),
        case(Default, "Edit", file("a"), "ask: permission mode 'default'"),
        case(Default, "Bash", bash("ls"), "ask: permission mode 'default'"),
        case(Default, "mcp__fs__read", e.clone(), "ask: permission mode 'default'"),
        case(Bubble, "Write", file("a"), "ask: permission mode 'bubble'"),
        case(Bubble, "Bash", bash("ls"), "ask: permission mode 'bubble'"),
        case(AcceptEdits, "Write", file("a"), "allow"),
        case(AcceptEdits, "Edit", file("a"), "allow"),
        case(AcceptEdits, "Bash", bash("ls"), "ask: permission mode 'acceptEdits'"),
        case(AcceptEdits, "mcp__fs__write", e.clone(), "ask: permission mode 'acceptEdits'"),
        case(BypassPermissions, "Write", file("a"), "allow"),
        case(BypassPermissions, "Bash", bash("rm -rf /"), "allow"),
        case(BypassPermissions, "mcp__fs__write", e.clone(), "allow"),
        case(DontAsk, "Write", file("a"), "deny: permission mode 'dontAsk'"),
        case(DontAsk, "Bash", bash("ls"), "deny: permission mode 'dontAsk'"),
        case(Plan, "Write", file("a"), "deny: permission mode 'plan'"),
        case(Plan, "Edit", file("a"), "deny: permission mode 'plan'"),
        case(Plan, "Bash", bash("ls"), "deny: permission mode 'plan'"),
        case(Plan, "mcp__fs__read", e.clone(), "deny: permission mode 'plan'"),
    ]);
    check(cases);
}

#[test]
#[rustfmt::skip] // one table row per line
fn bash_rules() {
    const RM: &[&str] = &["Bash(rm:*)"];
    const GIT: &[&str] = &["Bash(git status:*)", "Bash(git diff:*)", "Bash(npm test)"];
    check(vec![
        // Deny rules win in every mode and see through compound commands.
        with(&[], &[], RM, case(BypassPermissions, "Bash", bash("rm -rf /"), "deny: deny rule 'Bash(rm:*)'")),
        with(&[], &[], RM, case(Default, "Bash", bash("rm"), "deny: deny rule 'Bash(rm:*)'")),
        with(&[], &[], RM, case(BypassPermissions, "Bash", bash("ls && rm x"), "deny: deny rule 'Bash(rm:*)'")),
        with(&[], &[], RM, case(BypassPermissions, "Bash", bash("ls | (rm x)"), "deny: deny rule 'Bash(rm:*)'")),
        with(&["Bash"], &[], RM, case(Default, "Bash", bash("echo hi;rm x"), "deny: deny rule 'Bash(rm:*)'")),
        // The prefix is a whole word, and quoted text is not a command.
        with(&[], &[], RM, case(BypassPermissions, "Bash", bash("rmdir x"), "allow")),
        with(&[], &[], RM, case(BypassPermissions, "Bash", bash("echo 'a; rm b'"), "allow")),
        // Allow rules: prefix and exact.
        with(GIT, &[], &[], case(Default, "Bash", bash("git status"), "allow")),
        with(GIT, &[], &[], case(Default, "Bash", bash("git status --short"), "allow")),
        with(GIT, &[], &[], case(Default, "Bash", bash("git statusx"), "ask: permission mode 'default'")),
        with(GIT, &[], &[], case(Default, "Bash", bash("npm test"), "allow")),
        with(GIT, &[], &[], case(Default, "Bash", bash("npm test --watch"), "ask: permission mode 'default'")),
        // Every part of a compound command must be allowed, and substitutions never are.
        with(GIT, &[], &[], case(Default, "Bash", bash("git status && git diff"), "allow")),
        with(GIT, &[], &[], case(Default, "Bash", bash("git status && rm x"), "ask: permission mode 'default'")),
        with(GIT, &[], &[], case(Default, "Bash", bash("git diff $(rm x)"), "ask: permission mode 'default'")),
        with(GIT, &[], &[], case(Default, "Bash", bash("git diff `rm x`"), "ask: permission mode 'default'")),
        with(&["Bash(git *)"], &[], &[], case(Default, "Bash", bash("git log"), "allow")),
        // A bare tool name covers every use.
        with(&["Bash"], &[], &[], case(Default, "Bash", bash("anything $(at all)"), "allow")),
        // Allow rules apply before the mode, even in plan mode.
        with(&["Bash(ls:*)"], &[], &[], case(Plan, "Bash", bash("ls -la"), "allow")),
        with(&["Bash(ls:*)"], &[], &[], case(Plan, "Bash", bash("cat x"), "deny: permission mode 'plan'")),
        with(&["Bash(ls:*)"], &[], &[], case(DontAsk, "Bash", bash("ls"), "allow")),
    ]);
}

#[test]
#[rustfmt::skip] // one table row per line
fn ask_rules_and_order() {
    const ALLOW: &[&str] = &["Bash"];
    const ASK: &[&str] = &["Bash(git:*)"];
    const DENY: &[&str] = &["Bash(git push:*)"];
    check(vec![
        with(ALLOW, ASK, DENY, case(Default, "Bash", bash("git push origin"), "deny: deny rule 'Bash(git push:*)'")),
        with(ALLOW, ASK, DENY, case(Default, "Bash", bash("git log"), "ask: ask rule 'Bash(git:*)'")),
        with(ALLOW, ASK, DENY, case(Default, "Bash", bash("ls"), "allow")),
        // An ask rule asks even in bypassPermissions and plan...
        with(&[], ASK, &[], case(BypassPermissions, "Bash", bash("git log"), "ask: ask rule 'Bash(git:*)'")),
        with(&[], ASK, &[], case(Plan, "Bash", bash("git log"), "ask: ask rule 'Bash(git:*)'")),
        with(&[], &["Read"], &[], case(Default, "Read", file("a"), "ask: ask rule 'Read'")),
        // ...and dontAsk turns it into a denial that still names the rule.
        with(
            &[],
            ASK,
            &[],
            case(
                DontAsk,
                "Bash",
                bash("git log"),
                "deny: ask rule 'Bash(git:*)' in permission mode 'dontAsk', which denies instead of asking",
            ),
        ),
        // Tool-name rules.
        with(&[], &[], &["Write"], case(BypassPermissions, "Write", file("a"), "deny: deny rule 'Write'")),
        with(&[], &[], &["Read"], case(Plan, "Read", file("a"), "deny: deny rule 'Read'")),
        with(&["Write"], &[], &[], case(Default, "Write", file("a"), "allow")),
    ]);
}

#[test]
#[rustfmt::skip] // one table row per line
fn path_rules() {
    const SECRETS: &[&str] = &["Edit(secrets/**)", "Read(**/*.env)", "Read(//etc/**)"];
    check(vec![
        with(&[], &[], SECRETS, case(BypassPermissions, "Edit", file("secrets/a/b.txt"), "deny: deny rule 'Edit(secrets/**)'")),
        // Edit rules cover Write; paths are normalised and may be absolute.
        with(&[], &[], SECRETS, case(AcceptEdits, "Write", file("secrets/k"), "deny: deny rule 'Edit(secrets/**)'")),
        with(&[], &[], SECRETS, case(AcceptEdits, "Edit", file("src/../secrets/k"), "deny: deny rule 'Edit(secrets/**)'")),
        with(&[], &[], SECRETS, case(AcceptEdits, "Edit", file("/work/proj/secrets/k"), "deny: deny rule 'Edit(secrets/**)'")),
        with(&[], &[], SECRETS, case(AcceptEdits, "Edit", file("other/secrets/k"), "allow")),
        // Outside the working directory an edit asks even in acceptEdits.
        with(&[], &[], SECRETS, case(AcceptEdits, "Edit", file("/elsewhere/secrets/k"), "ask: '/elsewhere/secrets/k' is outside the working directory and the added directories (permission mode 'acceptEdits')")),
        with(&[], &[], SECRETS, case(Default, "Edit", file("src/main.rs"), "ask: permission mode 'default'")),
        // Read rules cover Read, Glob and Grep (which match their `path`).
        with(&[], &[], SECRETS, case(Default, "Read", file(".env"), "deny: deny rule 'Read(**/*.env)'")),
        with(&[], &[], SECRETS, case(Default, "Read", file("config/prod.env"), "deny: deny rule 'Read(**/*.env)'")),
        with(
            &[],
            &[],
            SECRETS,
            case(Default, "Grep", json!({"pattern": "x", "path": "config/prod.env"}), "deny: deny rule 'Read(**/*.env)'"),
        ),
        with(&[], &[], SECRETS, case(Default, "Read", file("/etc/passwd"), "deny: deny rule 'Read(//etc/**)'")),
        with(&[], &[], SECRETS, case(Default, "Read", file("../../etc/passwd"), "deny: deny rule 'Read(//etc/**)'")),
        with(&[], &[], SECRETS, case(Default, "Read", file("etc/passwd"), "allow")),
        // `*` stays within one folder.
        with(&[], &[], &["Edit(*.lock)"], case(AcceptEdits, "Edit", file("Cargo.lock"), "deny: deny rule 'Edit(*.lock)'")),
        with(&[], &[], &["Edit(*.lock)"], case(AcceptEdits, "Edit", file("sub/Cargo.lock"), "allow")),
        // Allow rules for paths, and Glob/Grep default to the working directory.
        with(&["Write(docs/**)"], &[], &[], case(Default, "Write", file("docs/a.md"), "allow")),
        with(&["Write(docs/**)"], &[], &[], case(Default, "Write", file("src/a.rs"), "ask: permission mode 'default'")),
        with(&["Write(docs/**)"], &[], &[], case(Default, "Edit", file("docs/a.md"), "ask: permission mode 'default'")),
        with(&[], &[], &["Glob(.)"], case(Default, "Glob", json!({"pattern": "*"}), "deny: deny rule 'Glob(.)'")),
        with(&[], &["Grep(vendor/**)"], &[], case(Default, "Grep", json!({"pattern": "x", "path": "vendor/a"}), "ask: ask rule 'Grep(vendor/**)'")),
        // A path rule never matches a call without a usable path.
        with(&[], &[], &["Edit(**)"], case(AcceptEdits, "Edit", json!({"file_path": 5}), "allow")),
    ]);
}

#[test]
#[rustfmt::skip] // one table row per line
fn mcp_and_agent_rules() {
    check(vec![
        with(&["mcp__fs__*"], &[], &[], case(Default, "mcp__fs__read", json!({}), "allow")),
        with(&["mcp__fs__*"], &[], &[], case(Default, "mcp__fsx__read", json!({}), "ask: permission mode 'default'")),
        with(&["mcp__git"], &[], &[], case(Default, "mcp__git__log", json!({}), "allow")),
        with(&["mcp__git__log"], &[], &[], case(Default, "mcp__git__log", json!({}), "allow")),
        with(&["mcp__git__log"], &[], &[], case(Default, "mcp__git__push", json!({}), "ask: permission mode 'default'")),
        with(&[], &[], &["mcp__*"], case(BypassPermissions, "mcp__any__thing", json!({}), "deny: deny rule 'mcp__*'")),
        // Agent-type rules do not decide the call: the Agent tool applies
        // them after routing (see `denied_agent_type`), since a fork ignores
        // `subagent_type`.
        with(&[], &[], &["Agent(Explore)"], case(BypassPermissions, "Agent", json!({"subagent_type": "Explore"}), "allow")),
        with(&[], &[], &["Task(Plan)"], case(Default, "Agent", json!({"subagent_type": "Plan"}), "allow")),
        with(&[], &[], &["Agent"], case(BypassPermissions, "Agent", json!({"subagent_type": "Plan"}), "deny: deny rule 'Agent'")),
        with(&[], &["Agent"], &[], case(Plan, "Agent", json!({}), "ask: ask rule 'Agent'")),
        with(&[], &["Task"], &[], case(Default, "Agent", json!({}), "ask: ask rule 'Task'")),
    ]);
}

#[test]
fn denied_agent_type_names_the_rule() {
    let r = rules(
        &["Agent(Explore)"],
        &[],
        &["Bash", "Task(Plan)", "Agent(review)"],
    );
    assert_eq!(r.denied_agent_type("Plan"), Some("Task(Plan)"));
    assert_eq!(r.denied_agent_type("review"), Some("Agent(review)"));
    assert_eq!(r.denied_agent_type("Explore"), None);
    let all = rules(&[], &[], &["Agent"]);
    assert_eq!(all.denied_agent_type("anything"), Some("Agent"));
    assert_eq!(rules(&[], &[], &[]).denied_agent_type("x"), None);
}

#[test]
fn malformed_rules_are_reported_and_skipped() {
    let bad = [
        "",
        "Bash(",
        "Bash()",
        "Bash(:*)",
        "WebFetch(domain:example.com)",
        "Edit(a[b)",
        "foo*",
        "Bad Name",
        "Agent(two words)",
        "mcp__fs(x)",
    ];
    let (r, errors) = Rules::parse_lists(&["Read"], &[], &bad);
    assert_eq!(r.allow.len(), 1);
    assert!(r.deny.is_empty());
    assert_eq!(errors.len(), bad.len(), "{errors:#?}");
    for (e, text) in errors.iter().zip(bad) {
        assert!(
            e.starts_with(&format!("deny: permission rule '{text}': ")),
            "{e}"
        );
    }
    let settings = PermissionSettings {
        allow: vec!["Bash(".to_string(), "Read".to_string()],
        ..PermissionSettings::default()
    };
    assert_eq!(
        Rules::from_settings(&settings).allow,
        vec![Rule::parse("Read").unwrap()]
    );
}

#[test]
fn compound_commands_split_outside_quotes() {
    let shown = |c: &str| bash_commands(c).0;
    assert_eq!(
        shown("a && b || c; d | e & f\ng"),
        ["a", "b", "c", "d", "e", "f", "g"]
    );
    assert_eq!(
        shown("echo 'x; y' \"a && b\" c\\;d"),
        ["echo 'x; y' 'a && b' 'c;d'"]
    );
    assert_eq!(shown("(cd x && rm y)"), ["cd x", "rm y"]);
}
