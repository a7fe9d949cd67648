//! Worktree isolation end to end, in real git repositories: kept when the
//! child changed something, removed when it did not, reported in the
//! result trailer and the meta file, an error outside a repository,
//! siblings that cannot see each other, and `cadre worktrees`.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use super::harness::{Project, last_tool_results, result_text};
use super::kit::{FakeServer, RecordedRequest, anthropic};

const MAIN_MARKER: &str = "You are cadre";

pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A project that is a git repository with one commit.
pub fn repo(extra_config: &str) -> Project {
    let mut p = Project::new();
    p.config(extra_config);
    p.write("README.md", "hello\n");
    let d = p.path();
    git(d, &["init", "-q", "-b", "main"]);
    git(d, &["config", "user.name", "Test"]);
    git(d, &["config", "user.email", "test@example.com"]);
    git(d, &["config", "commit.gpgsign", "false"]);
    git(d, &["add", "."]);
    git(d, &["commit", "-qm", "init"]);
    p
}

fn is_main(r: &RecordedRequest) -> bool {
    r.system_text().contains(MAIN_MARKER)
}

fn assistant_turns(r: &RecordedRequest) -> usize {
    r.messages()
        .iter()
        .filter(|m| m["role"] == "assistant")
        .count()
}

/// The first user text of a request: a child's prompt.
fn prompt_of(r: &RecordedRequest) -> String {
    r.messages()[0]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Main calls Agent once per prompt (all in one message, each with
/// `isolation: worktree`), then says "all done". Each child plays
/// `script(prompt)`: one tool call per turn, then "finished".
fn server(
    prompts: Vec<&'static str>,
    script: fn(&str) -> Vec<(&'static str, Value)>,
) -> FakeServer {
    FakeServer::route(move |r| {
        if is_main(r) {
            if assistant_turns(r) == 0 {
                let mut m = anthropic::message().text("delegating");
                for (i, p) in prompts.iter().enumerate() {
                    m = m.tool_use(
                        &format!("toolu_{i}"),
                        "Agent",
                        json!({"description": format!("task {p}"), "prompt": p, "isolation": "worktree"}),
                    );
                }
                return m.reply();
            }
            return anthropic::text_reply("all done");
        }
        let steps = script(&prompt_of(r));
        match steps.get(assistant_turns(r)) {
            Some((name, input)) => anthropic::message()
                .tool_use(
                    &format!("toolu_c{}", assistant_turns(r)),
                    name,
                    input.clone(),
                )
                .reply(),
            None => anthropic::text_reply("finished"),
        }
    })
}

fn main_results(server: &FakeServer) -> Vec<Value> {
    let r = server
        .requests()
        .into_iter()
        .find(|r| is_main(r) && assistant_turns(r) == 1)
        .expect("main's second request");
    last_tool_results(&r.json)
}

fn worktrees_dir(p: &Project) -> PathBuf {
    p.path().canonicalize().unwrap().join(".cadre/worktrees")
}

fn line_value<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.lines()
        .find_map(|l| l.strip_prefix(key))
        .map(str::trim)
}

#[test]
fn a_child_that_writes_keeps_its_worktree_and_reports_it() {
    let p = repo("");
    let server = server(vec!["write"], |_| {
        vec![(
            "Write",
            json!({"file_path": "new.txt", "content": "from the child\n"}),
        )]
    });
    // The child inherits the main session's mode (SPEC §7), so it may write.
    p.run(
        Some(&server),
        &["run", "--permission-mode", "acceptEdits", "go"],
    )
    .ok();
    let results = main_results(&server);
    let text = result_text(&results[0]);
    assert_eq!(results[0]["is_error"], Value::Null, "{text}");
    let path = line_value(&text, "worktreePath:").expect(&text).to_string();
    let branch = line_value(&text, "worktreeBranch:")
        .expect(&text)
        .to_string();
    assert!(Path::new(&path).starts_with(worktrees_dir(&p)), "{path}");
    assert!(branch.starts_with("worktree-agent-"), "{branch}");
    assert_eq!(
        std::fs::read_to_string(Path::new(&path).join("new.txt")).unwrap(),
        "from the child\n"
    );
    assert!(
        !p.path().join("new.txt").exists(),
        "the main checkout is untouched"
    );
    assert!(git(p.path(), &["worktree", "list"]).contains(&path));
    assert!(git(p.path(), &["branch"]).contains(&branch));
    let meta = &p.meta_files()[0];
    assert_eq!(meta["worktree"]["path"], path.as_str());
    assert_eq!(meta["worktree"]["branch"], branch.as_str());

    // `cadre worktrees list` shows it with its agent; `remove` removes it.
    let list = p.run(None, &["worktrees", "list", "--json"]);
    let rows = list.ok().json();
    assert_eq!(rows.as_array().unwrap().len(), 1, "{rows}");
    assert_eq!(rows[0]["agent_type"], "general-purpose");
    assert_eq!(rows[0]["description"], "task write");
    assert_eq!(rows[0]["branch"], branch.as_str());
    assert_eq!(rows[0]["agent_id"], meta["agent_id"]);
    let human = p.run(None, &["worktrees", "list"]);
    assert!(human.ok().stdout.contains("task write"), "{}", human.stdout);
    let id = meta["agent_id"].as_str().unwrap();
    p.run(None, &["worktrees", "remove", id]).ok();
    assert!(!git(p.path(), &["worktree", "list"]).contains(&path));
    assert!(!git(p.path(), &["branch"]).contains(&branch));
    assert!(!Path::new(&path).exists());
    let rows = p.run(None, &["worktrees", "list", "--json"]).ok().json();
    assert_eq!(rows, json!([]));
    let again = p.run(None, &["worktrees", "remove", id]);
    assert_eq!(again.code, 1, "{}", again.stderr);
}

#[test]
fn a_child_that_changes_nothing_leaves_no_worktree_or_branch() {
    let p = repo("");
    let server = server(vec!["look"], |_| {
        vec![("Read", json!({"file_path": "README.md"}))]
    });
    p.run(Some(&server), &["run", "go"]).ok();
    let text = result_text(&main_results(&server)[0]);
    assert!(text.contains("agentId: a"), "{text}");
    assert!(!text.contains("worktreePath"), "{text}");
    // The child did run inside the worktree.
    let child = server
        .requests()
        .into_iter()
        .find(|r| !is_main(r) && assistant_turns(r) == 1)
        .unwrap();
    assert!(result_text(&last_tool_results(&child.json)[0]).contains("hello"));
    let list = git(p.path(), &["worktree", "list", "--porcelain"]);
    assert_eq!(list.matches("worktree ").count(), 1, "{list}");
    assert!(!git(p.path(), &["branch"]).contains("worktree-agent-"));
    assert_eq!(p.meta_files()[0]["worktree"], Value::Null);
}

#[test]
fn a_child_that_commits_keeps_its_worktree() {
    let p = repo("[permissions]\ndefault_mode = \"bypassPermissions\"\n");
    let server = server(vec!["commit"], |_| {
        vec![(
            "Bash",
            json!({"command": "echo c > c.txt && git add c.txt && git commit -qm child"}),
        )]
    });
    p.run(Some(&server), &["run", "go"]).ok();
    let text = result_text(&main_results(&server)[0]);
    let path = line_value(&text, "worktreePath:").expect(&text);
    let branch = line_value(&text, "worktreeBranch:").expect(&text);
    assert_eq!(git(Path::new(path), &["status", "--porcelain"]), "");
    assert_eq!(
        git(p.path(), &["log", "--format=%s", "-1", branch]).trim(),
        "child"
    );
    assert_eq!(git(p.path(), &["log", "--format=%s", "-1"]).trim(), "init");
}

#[test]
fn outside_a_repository_the_call_is_an_error() {
    let p = Project::new();
    let server = server(vec!["write"], |_| vec![]);
    p.run(Some(&server), &["run", "go"]).ok();
    let results = main_results(&server);
    assert_eq!(results[0]["is_error"], true);
    let text = result_text(&results[0]);
    assert!(text.contains("not in a git repository"), "{text}");
    assert!(
        server.requests().iter().all(is_main),
        "no child was started"
    );
}

#[test]
fn sibling_children_do_not_see_each_others_files() {
    let p = repo("");
    let server = server(vec!["alpha", "beta"], |prompt| {
        vec![
            (
                "Write",
                json!({"file_path": format!("{prompt}.txt"), "content": prompt}),
            ),
            ("Glob", json!({"pattern": "*.txt"})),
        ]
    });
    // The child inherits the main session's mode (SPEC §7), so it may write.
    p.run(
        Some(&server),
        &["run", "--permission-mode", "acceptEdits", "go"],
    )
    .ok();
    for (me, other) in [("alpha", "beta"), ("beta", "alpha")] {
        let glob = server
            .requests()
            .into_iter()
            .find(|r| !is_main(r) && prompt_of(r) == me && assistant_turns(r) == 2)
            .unwrap();
        let seen = result_text(&last_tool_results(&glob.json)[0]);
        assert!(seen.contains(&format!("{me}.txt")), "{me}: {seen}");
        assert!(!seen.contains(&format!("{other}.txt")), "{me}: {seen}");
    }
    let results = main_results(&server);
    let paths: Vec<String> = results
        .iter()
        .map(|r| {
            line_value(&result_text(r), "worktreePath:")
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(paths.len(), 2);
    assert_ne!(paths[0], paths[1]);
}

#[test]
fn a_fork_in_a_worktree_gets_the_notice_and_a_subfolder_cwd_carries_over() {
    let mut p = repo("[permissions]\nallow = [\"Write\"]\n");
    p.config("[features]\nFORK_SUBAGENT = true\n[flags.FORK_SUBAGENT]\ndescription = \"fork\"\ngates = [\"coordinator\"]\n");
    std::fs::create_dir_all(p.path().join("sub")).unwrap();
    p.write("sub/inner.txt", "inner\n");
    git(p.path(), &["add", "."]);
    git(p.path(), &["commit", "-qm", "sub"]);
    let server = FakeServer::route(|r| {
        let fork = r.body_str().contains("<fork-boilerplate>");
        if !fork {
            if assistant_turns(r) == 0 {
                return anthropic::message()
                    .tool_use(
                        "toolu_f",
                        "Agent",
                        json!({"description": "f", "prompt": "do it", "fork": true, "isolation": "worktree"}),
                    )
                    .reply();
            }
            return anthropic::text_reply("all done");
        }
        if r.last_user_text().contains("Your directive") {
            return anthropic::message()
                .tool_use(
                    "toolu_w",
                    "Write",
                    json!({"file_path": "forked.txt", "content": "f"}),
                )
                .reply();
        }
        anthropic::text_reply("fork finished")
    });
    // The config file stays in the project root.
    let config = p.path().join("cadre.toml");
    let config = config.to_str().unwrap();
    p.run(
        Some(&server),
        &["--config", config, "--cwd", "sub", "run", "go"],
    )
    .ok();
    let first_fork = server
        .requests()
        .into_iter()
        .find(|r| r.body_str().contains("<fork-boilerplate>"))
        .unwrap();
    let last = first_fork.last_user_text();
    assert!(last.contains("isolated git worktree"), "{last}");
    let main = server
        .requests()
        .into_iter()
        .find(|r| !r.body_str().contains("<fork-boilerplate>") && assistant_turns(r) == 1)
        .unwrap();
    let text = result_text(&last_tool_results(&main.json)[0]);
    let path = line_value(&text, "worktreePath:").expect(&text);
    assert!(Path::new(path).join("sub/forked.txt").exists(), "{text}");
    assert!(last.contains(&format!("{path}/sub")), "{last}");
}

/// Main makes one Agent call with `input`; the child's n-th request gets
/// `child(n)`.
fn one_child(input: Value, child: fn(usize) -> super::kit::Reply) -> FakeServer {
    FakeServer::route(move |r| {
        if is_main(r) {
            if assistant_turns(r) == 0 {
                return anthropic::message()
                    .tool_use("toolu_1", "Agent", input.clone())
                    .reply();
            }
            return anthropic::text_reply("all done");
        }
        child(assistant_turns(r))
    })
}

#[test]
fn explore_returns_the_trailer_only_when_it_kept_a_worktree() {
    let input = json!({"description": "e", "prompt": "explore", "subagent_type": "Explore", "isolation": "worktree"});
    let p = repo("[permissions]\ndefault_mode = \"bypassPermissions\"\n");
    let server = one_child(input.clone(), |n| match n {
        0 => anthropic::message()
            .tool_use(
                "toolu_b",
                "Bash",
                json!({"command": "echo notes > notes.txt"}),
            )
            .reply(),
        _ => anthropic::text_reply("explored"),
    });
    p.run(Some(&server), &["run", "go"]).ok();
    let text = result_text(&main_results(&server)[0]);
    assert!(text.starts_with("explored"), "{text}");
    assert!(text.contains("agentId: a"), "{text}");
    let path = line_value(&text, "worktreePath:").expect(&text);
    assert!(Path::new(path).join("notes.txt").exists());

    let p = repo("");
    let server = one_child(input, |_| anthropic::text_reply("explored"));
    p.run(Some(&server), &["run", "go"]).ok();
    let text = result_text(&main_results(&server)[0]);
    assert_eq!(text, "explored");
}

#[test]
fn a_failed_child_keeps_its_changed_worktree_and_says_so() {
    let p = repo("");
    let server = one_child(
        json!({"description": "breaks", "prompt": "p", "isolation": "worktree"}),
        |n| match n {
            0 => anthropic::message()
                .tool_use(
                    "toolu_w",
                    "Write",
                    json!({"file_path": "half.txt", "content": "half"}),
                )
                .reply(),
            _ => super::kit::Reply::anthropic_error(400, "invalid_request_error", "boom"),
        },
    );
    // The child inherits the main session's mode (SPEC §7), so it may write.
    p.run(
        Some(&server),
        &["run", "--permission-mode", "acceptEdits", "go"],
    )
    .ok();
    let results = main_results(&server);
    assert_eq!(results[0]["is_error"], true);
    let text = result_text(&results[0]);
    assert!(text.contains("failed") && text.contains("boom"), "{text}");
    let path = line_value(&text, "Its worktree was kept: worktreePath:").expect(&text);
    assert!(Path::new(path).join("half.txt").exists());
    assert!(line_value(&text, "worktreeBranch:").is_some(), "{text}");
    assert_eq!(p.meta_files()[0]["worktree"]["path"], path);
}

#[test]
fn a_background_child_reports_its_kept_worktree_in_the_notification() {
    let p = repo("");
    let server = FakeServer::route(|r| {
        if is_main(r) {
            return match assistant_turns(r) {
                0 => anthropic::tool_use_reply(
                    "toolu_bg",
                    "Agent",
                    json!({"description": "isolated", "prompt": "write", "isolation": "worktree", "run_in_background": true}),
                ),
                1 => anthropic::text_reply("waiting"),
                _ => anthropic::text_reply("done"),
            };
        }
        match assistant_turns(r) {
            0 => anthropic::tool_use_reply(
                "toolu_w",
                "Write",
                json!({"file_path": "bg.txt", "content": "x\n"}),
            ),
            _ => anthropic::text_reply("wrote bg.txt"),
        }
    });
    // The child inherits the main session's mode (SPEC §7), so it may write.
    p.run(
        Some(&server),
        &["run", "--permission-mode", "acceptEdits", "go"],
    )
    .ok();
    let last = server
        .requests()
        .into_iter()
        .filter(is_main)
        .max_by_key(|r| r.messages().len())
        .unwrap();
    let body = last.body_str();
    assert_eq!(body.matches("<task-notification>").count(), 1);
    assert!(body.contains("<worktree><worktreePath>"), "{body}");
    let expected = worktrees_dir(&p);
    assert!(body.contains(&expected.display().to_string()), "{body}");
    let meta = &p.meta_files()[0];
    assert_eq!(meta["status"], "completed");
    assert!(
        meta["worktree"]["branch"]
            .as_str()
            .unwrap()
            .starts_with("worktree-agent-")
    );
    assert!(
        !p.path().join("bg.txt").exists(),
        "the main checkout is untouched"
    );
}

#[test]
fn worktree_remove_hooks_run_in_an_unchanged_worktree_before_it_goes() {
    let p = repo(
        "[[hooks.WorktreeRemove]]\ncommand = 'cat > \"$CLAUDE_PROJECT_DIR/removed.json\"; pwd > \"$CLAUDE_PROJECT_DIR/removed-cwd.txt\"'\n",
    );
    let server = server(vec!["look", "write"], |prompt| {
        if prompt == "write" {
            vec![("Write", json!({"file_path": "new.txt", "content": "x"}))]
        } else {
            vec![("Read", json!({"file_path": "README.md"}))]
        }
    });
    p.run(
        Some(&server),
        &["run", "go", "--permission-mode", "acceptEdits"],
    )
    .ok();
    // Only the unchanged worktree is removed, and its hook saw it.
    let seen: Value = serde_json::from_str(&p.read("removed.json")).unwrap();
    assert_eq!(seen["hook_event_name"], "WorktreeRemove");
    let path = seen["worktree_path"].as_str().unwrap();
    assert_eq!(p.read("removed-cwd.txt").trim(), path);
    assert!(!Path::new(path).exists(), "removed after the hook");
    let list = git(p.path(), &["worktree", "list", "--porcelain"]);
    assert_eq!(
        list.matches("worktree ").count(),
        2,
        "the written one is kept: {list}"
    );
}

/// A project (not a git repository) whose `.claude/settings.json` has
/// these hooks.
fn hooked(hooks: Value) -> Project {
    let p = Project::new();
    p.write(
        ".claude/settings.json",
        &serde_json::to_string_pretty(&json!({"hooks": hooks})).unwrap(),
    );
    p
}

#[test]
fn a_worktree_create_hook_replaces_git_and_worktree_remove_then_fires_for_its_folder() {
    let cmd = |c: &str| json!([{"hooks": [{"type": "command", "command": c}]}]);
    let p = hooked(json!({
        "WorktreeCreate": cmd(
            "cat > \"$CLAUDE_PROJECT_DIR/create.json\"; d=\"$CLAUDE_PROJECT_DIR/.wt/made\"; \
             mkdir -p \"$d\"; echo 'made by the hook' > \"$d/marker.txt\"; echo \"$d\""
        ),
        "WorktreeRemove": cmd(
            "cat > \"$CLAUDE_PROJECT_DIR/removed.json\"; rm -rf \"$CLAUDE_PROJECT_DIR/.wt/made\""
        ),
    }));
    let server = server(vec!["look"], |_| {
        vec![("Read", json!({"file_path": "marker.txt"}))]
    });
    p.run(Some(&server), &["run", "go"]).ok();
    // The child ran in the hook's folder (no git repository needed).
    let child_read = server
        .requests()
        .into_iter()
        .find(|r| !is_main(r) && assistant_turns(r) == 1)
        .expect("the child's second request");
    let read = result_text(&last_tool_results(&child_read.json)[0]);
    assert!(read.contains("made by the hook"), "{read}");
    let results = main_results(&server);
    assert_ne!(results[0]["is_error"], true, "{results:?}");
    // The hook removed it: nothing is reported as kept.
    let text = result_text(&results[0]);
    assert!(line_value(&text, "worktreePath:").is_none(), "{text}");
    let created: Value = serde_json::from_str(&p.read("create.json")).unwrap();
    assert_eq!(created["hook_event_name"], "WorktreeCreate");
    assert!(
        created["name"]
            .as_str()
            .is_some_and(|n| n.starts_with("agent-")),
        "{created}"
    );
    let removed: Value = serde_json::from_str(&p.read("removed.json")).unwrap();
    assert_eq!(removed["hook_event_name"], "WorktreeRemove");
    assert!(
        removed["worktree_path"]
            .as_str()
            .is_some_and(|w| w.ends_with(".wt/made")),
        "{removed}"
    );
    assert!(!p.path().join(".wt/made").exists());
    assert!(!worktrees_dir(&p).exists(), "git made nothing");
}

#[test]
fn a_failing_worktree_create_hook_fails_the_spawn_with_its_stderr() {
    let p = hooked(json!({"WorktreeCreate": [{"hooks": [{"type": "command",
        "command": "echo 'the disk is full' >&2; exit 1"}]}]}));
    let server = server(vec!["look"], |_| vec![]);
    p.run(Some(&server), &["run", "go"]).ok();
    let results = main_results(&server);
    assert_eq!(results[0]["is_error"], true);
    let text = result_text(&results[0]);
    assert!(text.contains("WorktreeCreate hook failed"), "{text}");
    assert!(text.contains("the disk is full"), "{text}");
    assert!(
        !server.requests().iter().any(|r| !is_main(r)),
        "no child started"
    );
}
