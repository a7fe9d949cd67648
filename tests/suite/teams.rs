//! Agent teams end to end (docs/teams.md): teammates started by the lead,
//! the shared task list with its claims, mailboxes (broadcast, waking an
//! idle teammate), the task hooks, and two processes sharing one team.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use super::harness::{Project, assistant_turns, is_main_session, last_tool_results, result_text};
use super::kit::{FakeServer, RecordedRequest, anthropic};

fn teams_project() -> Project {
    let mut p = Project::new();
    p.env("CLAUDE_CODE_EXPERIMENTAL_AGENT_TEAMS", "1");
    p
}

/// The teammate a request comes from (its first message names it).
fn teammate(r: &RecordedRequest) -> Option<&'static str> {
    let body = r.body_str();
    ["alice", "bob"]
        .into_iter()
        .find(|n| body.contains(&format!("You are {n}, a member of the agent team")))
}

fn last_result(r: &RecordedRequest) -> String {
    last_tool_results(&r.json)
        .first()
        .map(result_text)
        .unwrap_or_default()
}

fn task_file(p: &Project, team: &str, id: &str) -> Value {
    serde_json::from_str(&p.read(&format!(".cadre/teams/{team}/tasks/{id}.json"))).unwrap()
}

#[test]
fn two_teammates_claim_different_tasks_hear_a_broadcast_and_idle_between() {
    let mut p = teams_project();
    p.config(
        // A file per run: the teammates may complete their tasks at the same
        // moment, and two hooks appending to one file could interleave.
        "[[hooks.TaskCompleted]]\ncommand = \"cat > \\\"$(mktemp completed-XXXXXX)\\\"\"\n",
    );
    let server = FakeServer::route(|r| {
        if is_main_session(r) {
            let body = r.body_str();
            return match assistant_turns(r) {
                0 => anthropic::message()
                    .tool_use("toolu_t1", "TaskCreate", json!({"subject": "task A"}))
                    .tool_use("toolu_t2", "TaskCreate", json!({"subject": "task B"}))
                    .reply(),
                1 => anthropic::message()
                    .tool_use(
                        "toolu_a",
                        "Agent",
                        json!({"description": "alice", "prompt": "take a task", "name": "alice"}),
                    )
                    .tool_use(
                        "toolu_b",
                        "Agent",
                        json!({"description": "bob", "prompt": "take a task", "name": "bob"}),
                    )
                    .reply(),
                _ if body.contains("Message sent to") => anthropic::text_reply("all done"),
                // Once both have gone idle, wake them with a broadcast.
                _ if body.contains("alice finished its turn")
                    && body.contains("bob finished its turn") =>
                {
                    anthropic::tool_use_reply(
                        "toolu_bc",
                        "SendMessage",
                        json!({"to": "*", "message": "wrap up now"}),
                    )
                }
                _ => anthropic::text_reply("team started"),
            };
        }
        let Some(_me) = teammate(r) else {
            return anthropic::text_reply("?");
        };
        let last = last_result(r);
        let texts = super::harness::user_texts(r);
        if assistant_turns(r) == 0 {
            return anthropic::tool_use_reply(
                "toolu_c1",
                "TaskUpdate",
                json!({"taskId": "1", "status": "in_progress"}),
            );
        }
        if last.contains("already owned") {
            return anthropic::tool_use_reply(
                "toolu_c2",
                "TaskUpdate",
                json!({"taskId": "2", "status": "in_progress"}),
            );
        }
        for id in ["1", "2"] {
            if last.contains(&format!("Updated task #{id}: status in_progress")) {
                return anthropic::tool_use_reply(
                    "toolu_done",
                    "TaskUpdate",
                    json!({"taskId": id, "status": "completed"}),
                );
            }
        }
        if texts.contains("wrap up now") && !r.body_str().contains("\"bye\"") {
            return anthropic::text_reply("bye");
        }
        anthropic::text_reply("my task is done")
    });
    let r = p.run(Some(&server), &["run", "--team", "crew", "split the work"]);
    r.ok();
    assert_eq!(r.stdout.trim(), "all done");
    server.assert_invariants();
    let (one, two) = (task_file(&p, "crew", "1"), task_file(&p, "crew", "2"));
    assert_eq!(one["status"], "completed");
    assert_eq!(two["status"], "completed");
    let owners = [
        one["owner"].as_str().unwrap(),
        two["owner"].as_str().unwrap(),
    ];
    assert!(
        owners == ["alice", "bob"] || owners == ["bob", "alice"],
        "each teammate owns one task: {owners:?}"
    );
    let events: Vec<Value> = std::fs::read_dir(p.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|f| {
            f.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("completed-"))
        })
        .map(|f| serde_json::from_str(&std::fs::read_to_string(f).unwrap()).unwrap())
        .collect();
    assert_eq!(events.len(), 2, "TaskCompleted once per task: {events:?}");
    let mut ids: Vec<&str> = events
        .iter()
        .map(|e| e["task_id"].as_str().unwrap())
        .collect();
    ids.sort();
    assert_eq!(ids, ["1", "2"]);
    assert!(
        events
            .iter()
            .all(|e| e["hook_event_name"] == "TaskCompleted" && e["team_name"] == "crew")
    );
    for name in ["alice", "bob"] {
        let mine: Vec<RecordedRequest> = server
            .requests()
            .into_iter()
            .filter(|r| teammate(r) == Some(name))
            .collect();
        let woken = mine
            .iter()
            .find(|r| super::harness::user_texts(r).contains("wrap up now"))
            .unwrap_or_else(|| panic!("the broadcast reached {name}"));
        assert!(
            woken.body_str().contains("my task is done"),
            "{name} had ended a turn (idle) before the broadcast woke it"
        );
        assert!(
            super::harness::user_texts(woken).contains("<teammate-message from=\"team-lead\">"),
            "{name}: the message comes as a teammate message"
        );
    }
    let team: Value = serde_json::from_str(&p.read(".cadre/teams/crew/team.json")).unwrap();
    let statuses: Vec<&str> = team["members"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["name"] != "team-lead")
        .map(|m| m["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["ended", "ended"], "shut down with the process");
    let shown = p.run(None, &["teams", "show", "crew", "--json"]);
    shown.ok();
    let v = shown.json();
    let names: Vec<&str> = v["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["member"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 3, "{v}");
    for n in ["team-lead", "alice", "bob"] {
        assert!(names.contains(&n), "{names:?}");
    }
    assert_eq!(v["tasks"].as_array().unwrap().len(), 2);
    let listed = p.run(None, &["teams", "list", "--json"]);
    listed.ok();
    assert_eq!(listed.json()[0]["name"], "crew");
    assert_eq!(listed.json()[0]["open_tasks"], 0);
}

#[test]
fn teammates_cannot_start_teammates_and_tools_need_the_flag() {
    let p = teams_project();
    // An agent type that may spawn sub-agents.
    p.write(
        ".claude/agents/nester.md",
        "---\nname: nester\ndescription: spawns\ntools: Agent, Read\n---\nYou nest.\n",
    );
    let server = FakeServer::route(|r| {
        if is_main_session(r) {
            return match assistant_turns(r) {
                0 => anthropic::tool_use_reply(
                    "toolu_a",
                    "Agent",
                    json!({"description": "alice", "prompt": "go", "name": "alice", "subagent_type": "nester"}),
                ),
                _ => anthropic::text_reply("ok"),
            };
        }
        if assistant_turns(r) == 0 {
            return anthropic::tool_use_reply(
                "toolu_x",
                "Agent",
                json!({"description": "x", "prompt": "go", "name": "carol"}),
            );
        }
        anthropic::text_reply("could not")
    });
    p.run(Some(&server), &["run", "go"]).ok();
    let refused = server
        .requests()
        .into_iter()
        .find(|r| teammate(r) == Some("alice") && assistant_turns(r) == 1)
        .map(|r| last_result(&r))
        .unwrap_or_default();
    assert!(
        refused.contains("Teammates cannot spawn other teammates"),
        "{refused}"
    );
    let teams_dir = p.path().join(".cadre/teams");
    let team = std::fs::read_dir(&teams_dir)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let file = std::fs::read_to_string(team.join("team.json")).unwrap();
    assert!(!file.contains("carol"), "{file} / {refused}");

    let plain = Project::new();
    let r = plain.run(None, &["render", "hi"]);
    let body: Value = serde_json::from_str(&r.stdout).unwrap();
    let names = super::harness::tool_names(&body);
    assert!(
        !names
            .iter()
            .any(|n| n.starts_with("Task") && n != "TaskOutput" && n != "TaskStop"),
        "{names:?}"
    );
    let on = teams_project().run(None, &["render", "hi"]);
    let body: Value = serde_json::from_str(&on.stdout).unwrap();
    let names = super::harness::tool_names(&body);
    for t in ["TaskCreate", "TaskGet", "TaskList", "TaskUpdate"] {
        assert!(names.iter().any(|n| n == t), "{t}: {names:?}");
    }
}

#[test]
fn two_processes_share_one_team_folder() {
    let p = teams_project();
    // Alice's answers wait until process B has sent her its message (so
    // that process A is still running then).
    let (b_done, gate) = tokio::sync::watch::channel(false);
    let a = FakeServer::route(move |r| {
        if is_main_session(r) {
            return match assistant_turns(r) {
                0 => anthropic::message()
                    .tool_use(
                        "toolu_t",
                        "TaskCreate",
                        json!({"subject": "made by process A"}),
                    )
                    .tool_use(
                        "toolu_a",
                        "Agent",
                        json!({"description": "alice", "prompt": "wait for mail", "name": "alice"}),
                    )
                    .reply(),
                _ => anthropic::text_reply("A done"),
            };
        }
        let texts = super::harness::user_texts(r);
        if texts.contains("hello from B") {
            return anthropic::text_reply("got it");
        }
        anthropic::text_reply("working").held(gate.clone(), Duration::from_secs(120))
    });
    let child = p
        .command(Some(&a))
        .args(["run", "--team", "shared", "start"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let team_file = p.path().join(".cadre/teams/shared/team.json");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !std::fs::read_to_string(&team_file).is_ok_and(|t| t.contains("\"alice\"")) {
        assert!(
            std::time::Instant::now() < deadline,
            "process A never started alice"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let b = FakeServer::route(|r| match assistant_turns(r) {
        0 => anthropic::message()
            .tool_use("toolu_l", "TaskList", json!({}))
            .tool_use(
                "toolu_s",
                "SendMessage",
                json!({"to": "alice", "message": "hello from B"}),
            )
            .reply(),
        _ => anthropic::text_reply("B done"),
    });
    let rb = p.run(Some(&b), &["run", "--team", "shared", "look"]);
    let _ = b_done.send(true);
    rb.ok();
    let results = last_tool_results(&b.requests()[1].json);
    assert!(
        result_text(&results[0]).contains("made by process A"),
        "{results:?}"
    );
    assert!(
        result_text(&results[1]).contains("Message sent to alice"),
        "{results:?}"
    );
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let heard = a.requests().into_iter().any(|r| {
        teammate(&r) == Some("alice") && super::harness::user_texts(&r).contains("hello from B")
    });
    assert!(heard, "alice (process A) read the message process B sent");
}

#[test]
fn a_team_file_starts_its_members_and_adds_its_tasks() {
    let p = teams_project();
    p.write(
        ".claude/teams/squad.yaml",
        "lead_prompt: Keep the squad on the task list.\nmembers:\n  - name: alice\n    prompt: take a task\n  - name: bob\n    agent: Explore\n    prompt: take a task\ntasks:\n  - subject: task A\n  - subject: task B\n    description: the second one\n",
    );
    let server = FakeServer::route(|r| {
        if is_main_session(r) {
            return if r.body_str().contains("is idle") {
                anthropic::text_reply("the squad is idle")
            } else {
                anthropic::text_reply("waiting for the squad")
            };
        }
        if assistant_turns(r) == 0 {
            return anthropic::tool_use_reply("toolu_l", "TaskList", json!({}));
        }
        anthropic::text_reply("seen the list")
    });
    let r = p.run(Some(&server), &["run", "--team", "squad", "go"]);
    r.ok();
    let lead = server.requests().into_iter().find(is_main_session).unwrap();
    assert!(
        lead.system_text()
            .contains("Keep the squad on the task list.")
    );
    for name in ["alice", "bob"] {
        let listed = server
            .requests()
            .into_iter()
            .find(|r| teammate(r) == Some(name) && assistant_turns(r) == 1)
            .unwrap_or_else(|| panic!("{name} started from the team file"));
        let list = last_result(&listed);
        assert!(
            list.contains("#1 [pending] task A") && list.contains("#2 [pending] task B"),
            "{list}"
        );
    }
    let team: Value = serde_json::from_str(&p.read(".cadre/teams/squad/team.json")).unwrap();
    let bob = team["members"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "bob")
        .unwrap();
    assert_eq!(bob["agent_type"], "Explore");
    assert_eq!(task_file(&p, "squad", "2")["description"], "the second one");

    // A second run of the same team adds no task twice.
    let again = FakeServer::route(|_| anthropic::text_reply("ok"));
    p.write(
        ".claude/teams/squad.yaml",
        "members: []\ntasks:\n  - subject: task A\n",
    );
    p.run(Some(&again), &["run", "--team", "squad", "again"])
        .ok();
    assert!(!p.path().join(".cadre/teams/squad/tasks/3.json").exists());

    // A bad file is an error with its position, and nothing runs.
    p.write(".claude/teams/squad.yaml", "members:\n  - name: carol\n");
    let bad = p.run(Some(&again), &["run", "--team", "squad", "x"]);
    assert_eq!(bad.code, 2, "{}", bad.stderr);
    assert!(bad.stderr.contains("squad.yaml:2:"), "{}", bad.stderr);
    assert!(bad.stderr.contains("needs a `prompt`"), "{}", bad.stderr);
}

#[test]
fn a_member_added_to_the_team_file_joins_at_the_leads_next_turn() {
    let p = teams_project();
    let file = p.write(
        ".claude/teams/grow.toml",
        "[[members]]\nname = \"alice\"\nprompt = \"say hi\"\n",
    );
    let server = FakeServer::route(move |r| {
        if is_main_session(r) {
            if assistant_turns(r) == 0 {
                // The file gains a member while the lead works.
                std::fs::write(
                    &file,
                    "[[members]]\nname = \"alice\"\nprompt = \"say hi\"\n[[members]]\nname = \"bob\"\nprompt = \"say hi too\"\n",
                )
                .unwrap();
            }
            return anthropic::text_reply("noted");
        }
        anthropic::text_reply("hi")
    });
    p.run(Some(&server), &["run", "--team", "grow", "go"]).ok();
    let bob_ran = server
        .requests()
        .into_iter()
        .any(|r| teammate(&r) == Some("bob"));
    assert!(bob_ran, "bob joined after the file changed");
    let first_lead = server.requests().into_iter().find(is_main_session).unwrap();
    assert_eq!(assistant_turns(&first_lead), 0);
}

#[test]
fn a_team_file_broken_mid_session_is_reported_with_its_position_and_its_last_good_form_counts() {
    let p = teams_project();
    let file = p.write(
        ".claude/teams/keep.yaml",
        "members:\n  - name: alice\n    prompt: say hi\n",
    );
    let server = FakeServer::route(move |r| {
        if is_main_session(r) {
            if assistant_turns(r) == 0 {
                // While the lead works, the file gains a member without a
                // prompt: it no longer validates.
                std::fs::write(
                    &file,
                    "members:\n  - name: alice\n    prompt: say hi\n  - name: bob\n",
                )
                .unwrap();
            }
            return anthropic::text_reply("noted");
        }
        anthropic::text_reply("hi")
    });
    let r = p.run(Some(&server), &["run", "--team", "keep", "go"]);
    r.ok();
    let requests = server.requests();
    assert!(
        requests.iter().any(|r| teammate(r) == Some("alice")),
        "alice, from the file as first read, ran"
    );
    assert!(
        !requests.iter().any(|r| teammate(r) == Some("bob")),
        "bob, from the broken file, did not join"
    );
    let leads = requests.iter().filter(|r| is_main_session(r)).count();
    assert!(leads >= 2, "the lead had a turn after the file broke");
    assert!(r.stderr.contains("keep.yaml:4:"), "{}", r.stderr);
    assert!(r.stderr.contains("needs a `prompt`"), "{}", r.stderr);
}

/// Everything the last user message of a request says: its text blocks and
/// its tool results, joined.
fn last_user_message(r: &RecordedRequest) -> String {
    let Some(last) = r.messages().last().cloned() else {
        return String::new();
    };
    last["content"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|b| match b["type"].as_str() {
            Some("tool_result") => result_text(b),
            _ => b["text"].as_str().unwrap_or_default().to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn team_create_makes_a_team_and_team_delete_waits_for_its_members() {
    let p = teams_project();
    let root = p.path().to_path_buf();
    let seen_team: std::sync::Arc<std::sync::Mutex<Option<Value>>> = Default::default();
    let seen = std::sync::Arc::clone(&seen_team);
    let server = FakeServer::route(move |r| {
        if is_main_session(r) {
            let last = last_user_message(r);
            if assistant_turns(r) == 0 {
                return anthropic::tool_use_reply(
                    "toolu_c",
                    "TeamCreate",
                    json!({"team_name": "alpha", "description": "port the parser"}),
                );
            }
            if last.contains("Team \"alpha\" created") {
                return anthropic::tool_use_reply(
                    "toolu_a",
                    "Agent",
                    json!({"description": "alice", "prompt": "say ready", "name": "alice"}),
                );
            }
            if last.contains("Spawned successfully") {
                let team = std::fs::read_to_string(root.join(".cadre/teams/alpha/team.json"))
                    .ok()
                    .and_then(|t| serde_json::from_str(&t).ok());
                *seen.lock().unwrap() = team;
                // A second team while leading one, and deleting this one
                // while alice runs: both refused.
                return anthropic::message()
                    .tool_use("toolu_c2", "TeamCreate", json!({"team_name": "beta"}))
                    .tool_use("toolu_d1", "TeamDelete", json!({}))
                    .reply();
            }
            if last.contains("deleted: its member list") {
                return anthropic::text_reply("team gone");
            }
            let asked_to_stop = r.body_str().contains("toolu_stop");
            if last.contains("cannot be deleted") && !asked_to_stop {
                return anthropic::tool_use_reply(
                    "toolu_stop",
                    "SendMessage",
                    json!({"to": "alice", "type": "shutdown_request", "message": "stop now"}),
                );
            }
            if asked_to_stop {
                // Until alice has stopped, TeamDelete is refused: ask again.
                return anthropic::tool_use_reply("toolu_d2", "TeamDelete", json!({}))
                    .delayed(Duration::from_millis(200));
            }
            return anthropic::text_reply("waiting");
        }
        if super::harness::user_texts(r).contains("stop now") {
            return anthropic::text_reply("bye");
        }
        anthropic::text_reply("ready")
    });
    let r = p.run(Some(&server), &["run", "make a team"]);
    r.ok();
    assert_eq!(r.stdout.trim(), "team gone");
    server.assert_invariants();
    let requests = server.requests();
    let lead_tools = super::harness::tool_names(&requests[0].json);
    for t in ["TeamCreate", "TeamDelete"] {
        assert!(lead_tools.iter().any(|n| n == t), "{t}: {lead_tools:?}");
    }
    let alice: Vec<&RecordedRequest> = requests
        .iter()
        .filter(|r| teammate(r) == Some("alice"))
        .collect();
    assert!(!alice.is_empty());
    let alice_tools = super::harness::tool_names(&alice[0].json);
    assert!(
        !alice_tools.iter().any(|n| n.starts_with("Team")),
        "a teammate neither creates nor deletes teams: {alice_tools:?}"
    );
    assert!(
        alice_tools.iter().any(|n| n == "TaskUpdate"),
        "{alice_tools:?}"
    );
    // The team as it was while alice ran: its description, the lead, alice.
    let team = seen_team
        .lock()
        .unwrap()
        .clone()
        .expect("alpha's team.json");
    assert_eq!(team["description"], "port the parser");
    let names: Vec<&str> = team["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["team-lead", "alice"], "{team}");
    // Both refusals, with what to do.
    let refused = requests
        .iter()
        .find(|r| is_main_session(r) && r.body_str().contains("toolu_d1"))
        .map(|r| {
            last_tool_results(&r.json)
                .iter()
                .map(result_text)
                .collect::<Vec<_>>()
        })
        .unwrap();
    assert!(
        refused[0].contains("You already lead the team \"alpha\""),
        "{refused:?}"
    );
    assert!(
        refused[1].contains("cannot be deleted while members still run: alice"),
        "{refused:?}"
    );
    // The team's folder is gone, and so is the session's own first team
    // (nothing had used it).
    let left: Vec<String> = std::fs::read_dir(p.path().join(".cadre/teams"))
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn a_teammate_in_plan_mode_only_reads_until_the_lead_approves_its_plan() {
    let p = teams_project();
    // Whether plan.txt existed when alice asked again after her early
    // Write (before any approval): `None` until that request came.
    let early_file: Arc<Mutex<Option<bool>>> = Arc::default();
    let (seen, plan_file) = (Arc::clone(&early_file), p.path().join("plan.txt"));
    let server = FakeServer::route(move |r| {
        let last = last_user_message(r);
        if is_main_session(r) {
            if assistant_turns(r) == 0 {
                return anthropic::message()
                    .tool_use(
                        "toolu_x",
                        "Agent",
                        json!({"description": "x", "prompt": "x", "mode": "plan"}),
                    )
                    .tool_use(
                        "toolu_a",
                        "Agent",
                        json!({"description": "alice", "prompt": "write plan.txt", "name": "alice", "mode": "plan"}),
                    )
                    .reply();
            }
            if last.contains("type=\"plan_approval_request\"") && last.contains("plan v1") {
                return anthropic::tool_use_reply(
                    "toolu_no",
                    "SendMessage",
                    json!({"to": "alice", "type": "plan_approval_response", "approve": false,
                           "message": "add a test step"}),
                );
            }
            if last.contains("type=\"plan_approval_request\"") && last.contains("plan v2") {
                return anthropic::tool_use_reply(
                    "toolu_yes",
                    "SendMessage",
                    json!({"to": "alice", "type": "plan_approval_response", "approve": true,
                           "message": "go ahead"}),
                );
            }
            if last.contains("done writing") {
                return anthropic::text_reply("all done");
            }
            return anthropic::text_reply("waiting");
        }
        if teammate(r) != Some("alice") {
            return anthropic::text_reply("?");
        }
        if assistant_turns(r) == 1 {
            *seen.lock().unwrap() = Some(plan_file.exists());
        }
        if assistant_turns(r) == 0 {
            // In plan mode: a write is refused, and only the lead answers
            // plans; the plan goes to the lead.
            return anthropic::message()
                .tool_use(
                    "toolu_w1",
                    "Write",
                    json!({"file_path": "plan.txt", "content": "too early"}),
                )
                .tool_use(
                    "toolu_self",
                    "SendMessage",
                    json!({"to": "team-lead", "type": "plan_approval_response", "approve": true,
                           "message": "approving myself"}),
                )
                .tool_use(
                    "toolu_p1",
                    "SendMessage",
                    json!({"to": "team-lead", "type": "plan_approval_request", "message": "plan v1"}),
                )
                .reply();
        }
        if last.contains("approve=\"false\"") {
            return anthropic::tool_use_reply(
                "toolu_p2",
                "SendMessage",
                json!({"to": "team-lead", "type": "plan_approval_request",
                       "message": "plan v2, with a test step"}),
            );
        }
        if last.contains("approve=\"true\"") {
            return anthropic::tool_use_reply(
                "toolu_w2",
                "Write",
                json!({"file_path": "plan.txt", "content": "done"}),
            );
        }
        if r.body_str().contains("toolu_w2") {
            return anthropic::text_reply("done writing");
        }
        anthropic::text_reply("plan sent")
    });
    let r = p.run(
        Some(&server),
        &[
            "run",
            "--team",
            "crew",
            "--permission-mode",
            "acceptEdits",
            "plan first",
        ],
    );
    r.ok();
    assert_eq!(r.stdout.trim(), "all done");
    server.assert_invariants();
    assert_eq!(p.read("plan.txt"), "done", "written after the approval");
    let requests = server.requests();
    // `mode` without `name` is refused.
    let lead = requests
        .iter()
        .find(|r| is_main_session(r) && assistant_turns(r) == 1)
        .unwrap();
    let results = last_tool_results(&lead.json);
    assert!(
        result_text(&results[0]).contains("`mode` applies to teammates only"),
        "{results:?}"
    );
    let alice: Vec<&RecordedRequest> = requests
        .iter()
        .filter(|r| teammate(r) == Some("alice"))
        .collect();
    assert!(
        super::harness::user_texts(alice[0]).contains("You start in plan mode"),
        "the intro says so"
    );
    let first = alice.iter().find(|r| assistant_turns(r) == 1).unwrap();
    let results: Vec<String> = last_tool_results(&first.json)
        .iter()
        .map(result_text)
        .collect();
    assert_eq!(
        *early_file.lock().unwrap(),
        Some(false),
        "plan.txt was not written before the approval"
    );
    let write = &last_tool_results(&first.json)[0];
    assert_eq!(
        write["is_error"], true,
        "write refused in plan mode: {write}"
    );
    assert!(
        results[0].contains("Permission to use Write was denied by permission mode 'plan'"),
        "write refused in plan mode: {results:?}"
    );
    assert!(
        results[1].contains("Only the team lead answers plans"),
        "{results:?}"
    );
    assert!(
        results[2].contains("Message sent to team-lead"),
        "{results:?}"
    );
    // The refusal came back with its feedback, and alice stayed in plan mode.
    let rejected = alice
        .iter()
        .find(|r| last_user_message(r).contains("approve=\"false\""))
        .expect("alice read the rejection");
    let text = last_user_message(rejected);
    assert!(text.contains("add a test step"), "{text}");
    assert!(text.contains("did not approve"), "{text}");
    let approved = alice
        .iter()
        .find(|r| last_user_message(r).contains("approve=\"true\""))
        .expect("alice read the approval");
    assert!(last_user_message(approved).contains("out of plan mode"));
    // The verdicts are kept in alice's mailbox.
    let inbox: Value =
        serde_json::from_str(&p.read(".cadre/teams/crew/inboxes/alice.json")).unwrap();
    let verdicts: Vec<&Value> = inbox
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["type"] == "plan_approval_response")
        .map(|m| &m["approve"])
        .collect();
    assert_eq!(verdicts, [&json!(false), &json!(true)]);
}

/// A teammate is planned like any sub-agent: the lead's own `Agent(A, B)`
/// limits the types it may start, and a deny rule on the resolved type
/// refuses it, with the same words a sub-agent spawn gets.
#[test]
fn a_teammate_spawn_obeys_the_leads_agent_limit_and_deny_rules() {
    let mut p = teams_project();
    p.config("[permissions]\ndeny = [\"Agent(reviewer)\"]\n");
    p.write(
        ".claude/agents/lead.md",
        "---\nname: lead\ndescription: Leads\ntools: Agent(helper, reviewer), Read\n---\nYou lead.\n",
    );
    for name in ["helper", "reviewer"] {
        p.write(
            &format!(".claude/agents/{name}.md"),
            &format!("---\nname: {name}\ndescription: {name}\ntools: Read\n---\nYou help.\n"),
        );
    }
    let is_member = |r: &RecordedRequest| r.body_str().contains("a member of the agent team");
    let server = FakeServer::route(move |r| {
        if is_member(r) {
            return anthropic::text_reply("hello from a teammate");
        }
        match assistant_turns(r) {
            0 => anthropic::message()
                .tool_use(
                    "toolu_a",
                    "Agent",
                    json!({"description": "a", "prompt": "go", "name": "alice", "subagent_type": "Explore"}),
                )
                .tool_use(
                    "toolu_b",
                    "Agent",
                    json!({"description": "b", "prompt": "go", "name": "bob", "subagent_type": "reviewer"}),
                )
                .tool_use(
                    "toolu_d",
                    "Agent",
                    json!({"description": "d", "prompt": "go", "name": "dave", "subagent_type": "Reviewer"}),
                )
                .tool_use(
                    "toolu_c",
                    "Agent",
                    json!({"description": "c", "prompt": "go", "name": "carol", "subagent_type": "helper"}),
                )
                .reply(),
            _ => anthropic::text_reply("ok"),
        }
    });
    let r = p.run(
        Some(&server),
        &["run", "--team", "crew", "--agent", "lead", "go"],
    );
    r.ok();
    server.assert_invariants();
    let requests = server.requests();
    let lead = requests
        .iter()
        .find(|r| !is_member(r) && assistant_turns(r) == 1)
        .expect("the lead's second request");
    let results: Vec<String> = last_tool_results(&lead.json)
        .iter()
        .map(result_text)
        .collect();
    assert_eq!(
        results[0],
        "Agent type 'Explore' is not available to this agent. Its tools allow spawning only: helper, reviewer.",
        "{results:?}"
    );
    let denied = format!(
        "Agent type 'reviewer' has been denied by permission rule 'Agent(reviewer)' from {}",
        p.path().join("cadre.toml").display()
    );
    // The rule holds for the name a type in another case resolves to.
    for denial in &results[1..3] {
        assert!(denial.starts_with(&denied), "{results:?}");
    }
    assert!(results[3].contains("carol"), "{results:?}");
    let team: Value = serde_json::from_str(&p.read(".cadre/teams/crew/team.json")).unwrap();
    let names: Vec<&str> = team["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["team-lead", "carol"], "{team}");
    let started: Vec<String> = requests
        .iter()
        .filter(|r| is_member(r))
        .map(super::harness::user_texts)
        .collect();
    assert!(
        started.iter().all(|t| t.contains("You are carol")),
        "only carol ever ran: {started:?}"
    );
}
