//! Background sub-agents end to end: async launch, exactly one
//! notification, waiting for tasks, auto-background without restart,
//! SendMessage, TaskStop, and many concurrent children.

use std::time::Duration;

use serde_json::json;

use super::harness::{
    Project, assistant_turns, child_requests_of, is_main_session as is_main, last_tool_results,
    result_text, user_texts,
};
use super::kit::{FakeServer, RecordedRequest, anthropic};

fn child_requests(server: &FakeServer) -> Vec<RecordedRequest> {
    child_requests_of(server, true)
}

fn main_requests(server: &FakeServer) -> Vec<RecordedRequest> {
    server.requests().into_iter().filter(is_main).collect()
}

fn count(haystack: &str, needle: &str) -> usize {
    haystack.matches(needle).count()
}

#[test]
fn a_background_spawn_returns_at_once_and_notifies_exactly_once() {
    let p = Project::new();
    let server = FakeServer::route(|r| {
        if is_main(r) {
            return match assistant_turns(r) {
                0 => anthropic::tool_use_reply(
                    "toolu_bg",
                    "Agent",
                    json!({"description": "slow survey", "prompt": "survey", "run_in_background": true}),
                ),
                1 => anthropic::text_reply("launched; waiting"),
                _ => anthropic::text_reply("final: the survey is done"),
            };
        }
        // The child answers only after a delay, so the parent must not wait for it.
        anthropic::text_reply("survey result").delayed(Duration::from_millis(800))
    });
    let run = p.run(Some(&server), &["run", "go"]);
    run.ok();
    assert_eq!(
        run.stdout.trim(),
        "final: the survey is done",
        "run waits for its task, then prints the final result"
    );
    let mains = main_requests(&server);
    assert_eq!(mains.len(), 3);
    let launched = result_text(&last_tool_results(&mains[1].json)[0]);
    assert!(
        launched.starts_with("Async agent launched successfully."),
        "{launched}"
    );
    assert!(
        launched.contains("output_file: "),
        "the caller has Read, so it gets the output file: {launched}"
    );
    let last = user_texts(&mains[2]);
    assert_eq!(count(&last, "<task-notification>"), 1, "{last}");
    assert!(last.contains("<tool-use-id>toolu_bg</tool-use-id>"));
    assert!(last.contains("<status>completed</status>"));
    assert!(last.contains("<summary>Agent \"slow survey\" completed</summary>"));
    assert!(last.contains("<result>survey result</result>"));
    // The notification is appended after everything sent before.
    let m = mains[2].messages();
    assert_eq!(m.len(), mains[1].messages().len() + 2);
    let meta = p.meta_files();
    assert_eq!(meta.len(), 1);
    assert_eq!(meta[0]["status"], "completed");
    assert_eq!(meta[0]["background"], true);
}

#[test]
fn the_fork_flag_never_forces_the_background() {
    let mut p = Project::new();
    p.config("[features]\nFORK_SUBAGENT = true\n[flags.FORK_SUBAGENT]\ndescription = \"f\"\ngates = []\n");
    let server = FakeServer::route(|r| {
        if is_main(r) {
            return if assistant_turns(r) == 0 {
                anthropic::message()
                    .tool_use("toolu_plain", "Agent", json!({"description": "plain", "prompt": "p"}))
                    .tool_use("toolu_fork", "Agent", json!({"description": "fork fg", "prompt": "f", "fork": true}))
                    .tool_use("toolu_forkbg", "Agent", json!({"description": "fork bg", "prompt": "g", "fork": true, "run_in_background": true}))
                    .reply()
            } else {
                anthropic::text_reply("done")
            };
        }
        anthropic::text_reply("child text")
    });
    p.run(Some(&server), &["run", "go"]).ok();
    let results = last_tool_results(&main_requests(&server)[1].json);
    assert_eq!(results.len(), 3);
    assert!(
        result_text(&results[0]).starts_with("child text"),
        "a plain spawn stays in the foreground"
    );
    assert!(
        result_text(&results[1]).starts_with("child text"),
        "a fork without run_in_background is foreground"
    );
    assert!(
        result_text(&results[2]).starts_with("Async agent launched"),
        "a fork with run_in_background is background"
    );
}

#[test]
fn disabled_background_tasks_run_in_the_foreground() {
    let mut p = Project::new();
    p.config("[features]\nDISABLE_BACKGROUND_TASKS = true\n");
    let server = FakeServer::route(|r| {
        if is_main(r) {
            return if assistant_turns(r) == 0 {
                anthropic::tool_use_reply(
                    "toolu_1",
                    "Agent",
                    json!({"description": "d", "prompt": "p", "run_in_background": true}),
                )
            } else {
                anthropic::text_reply("done")
            };
        }
        anthropic::text_reply("foreground answer")
    });
    p.run(Some(&server), &["run", "go"]).ok();
    let first = &main_requests(&server)[0].json;
    let agent = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "Agent")
        .unwrap();
    assert!(
        agent["input_schema"]["properties"]
            .get("run_in_background")
            .is_none()
    );
    assert!(
        result_text(&last_tool_results(&main_requests(&server)[1].json)[0])
            .starts_with("foreground answer")
    );
}

#[test]
fn auto_background_keeps_the_child_running_where_it_is() {
    let mut p = Project::new();
    p.config("[agents]\nauto_background_ms = 300\n");
    let server = FakeServer::route(|r| {
        if is_main(r) {
            return match assistant_turns(r) {
                0 => anthropic::tool_use_reply(
                    "toolu_1",
                    "Agent",
                    json!({"description": "long job", "prompt": "work hard"}),
                ),
                1 => anthropic::text_reply("it went to the background"),
                _ => anthropic::text_reply("finished"),
            };
        }
        match assistant_turns(r) {
            0 => anthropic::tool_use_reply("toolu_c", "Glob", json!({"pattern": "*.rs"}))
                .delayed(Duration::from_millis(700)),
            _ => anthropic::text_reply("job result"),
        }
    });
    p.run(Some(&server), &["run", "go"]).ok();
    let launched = result_text(&last_tool_results(&main_requests(&server)[1].json)[0]);
    assert!(launched.starts_with("Async agent launched"), "{launched}");
    let children = child_requests(&server);
    assert_eq!(children.len(), 2, "the child was not restarted");
    assert_eq!(
        assistant_turns(&children[1]),
        1,
        "its second request continues its first turn"
    );
    assert_eq!(
        children.iter().filter(|c| assistant_turns(c) == 0).count(),
        1,
        "the prompt was sent once"
    );
    let last = user_texts(main_requests(&server).last().unwrap());
    assert_eq!(count(&last, "<task-notification>"), 1);
    assert!(last.contains("<result>job result</result>"));
}

#[test]
fn send_message_reaches_a_running_child_at_its_next_turn() {
    let p = Project::new();
    let server = FakeServer::route(|r| {
        if is_main(r) {
            return match assistant_turns(r) {
                0 => anthropic::tool_use_reply(
                    "toolu_1",
                    "Agent",
                    json!({"description": "worker", "prompt": "start", "name": "worker", "run_in_background": true}),
                ),
                1 => anthropic::tool_use_reply(
                    "toolu_2",
                    "SendMessage",
                    json!({"to": "worker", "message": "EXTRA INFO"}),
                ),
                2 => anthropic::text_reply("sent"),
                _ => anthropic::text_reply("all done"),
            };
        }
        match assistant_turns(r) {
            0 => anthropic::tool_use_reply("toolu_c", "Glob", json!({"pattern": "*"}))
                .delayed(Duration::from_millis(800)),
            _ => anthropic::text_reply(if user_texts(r).contains("EXTRA INFO") {
                "saw the message"
            } else {
                "no message"
            }),
        }
    });
    p.run(Some(&server), &["run", "go"]).ok();
    let queued = result_text(&last_tool_results(&main_requests(&server)[2].json)[0]);
    assert!(queued.contains("queued"), "{queued}");
    let second = &child_requests(&server)[1];
    let last = second.messages().last().unwrap()["content"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(
        last[0]["type"], "tool_result",
        "the tool result comes first"
    );
    assert_eq!(last.last().unwrap()["text"], "EXTRA INFO");
    assert!(
        user_texts(main_requests(&server).last().unwrap())
            .contains("<result>saw the message</result>")
    );
}

#[test]
fn send_message_to_a_finished_child_resumes_it_and_unknown_names_fail() {
    let p = Project::new();
    let server = FakeServer::route(|r| {
        if is_main(r) {
            let texts = user_texts(r);
            return match assistant_turns(r) {
                0 => anthropic::tool_use_reply(
                    "toolu_1",
                    "Agent",
                    json!({"description": "helper", "prompt": "first job", "name": "helper", "run_in_background": true}),
                ),
                1 => anthropic::text_reply("waiting"),
                2 => anthropic::message()
                    .tool_use(
                        "toolu_2",
                        "SendMessage",
                        json!({"to": "helper", "message": "second job"}),
                    )
                    .tool_use(
                        "toolu_3",
                        "SendMessage",
                        json!({"to": "nobody", "message": "x"}),
                    )
                    .reply(),
                3 => anthropic::text_reply("waiting again"),
                _ if texts.contains("did second job") => anthropic::text_reply("both jobs done"),
                _ => anthropic::text_reply("unexpected"),
            };
        }
        if user_texts(r).contains("second job") {
            anthropic::text_reply("did second job")
        } else {
            anthropic::text_reply("did first job")
        }
    });
    let run = p.run(Some(&server), &["run", "go"]);
    run.ok();
    assert_eq!(run.stdout.trim(), "both jobs done");
    let mains = main_requests(&server);
    let results = last_tool_results(&mains[3].json);
    assert!(
        result_text(&results[0]).contains("resumed"),
        "{}",
        result_text(&results[0])
    );
    assert_eq!(results[1]["is_error"], true);
    assert!(result_text(&results[1]).contains("No agent named 'nobody'"));
    let resumed = child_requests(&server)
        .into_iter()
        .find(|c| user_texts(c).contains("second job"))
        .unwrap();
    assert!(
        user_texts(&resumed).contains("first job"),
        "resumed with its whole conversation"
    );
}

#[test]
fn task_stop_kills_the_child_and_still_notifies() {
    let p = Project::new();
    let server = FakeServer::route(|r| {
        if is_main(r) {
            return match assistant_turns(r) {
                0 => anthropic::tool_use_reply(
                    "toolu_1",
                    "Agent",
                    json!({"description": "endless", "prompt": "p", "name": "endless", "run_in_background": true}),
                ),
                1 => {
                    anthropic::tool_use_reply("toolu_2", "TaskStop", json!({"task_id": "endless"}))
                }
                2 => anthropic::text_reply("stopped it"),
                _ => anthropic::text_reply("final"),
            };
        }
        anthropic::text_reply("too late").delayed(Duration::from_secs(20))
    });
    let run = p.run(Some(&server), &["run", "go"]);
    run.ok();
    let mains = main_requests(&server);
    assert!(result_text(&last_tool_results(&mains[2].json)[0]).contains("was stopped"));
    let last = user_texts(mains.last().unwrap());
    assert_eq!(count(&last, "<task-notification>"), 1);
    assert!(last.contains("<status>killed</status>"));
    assert!(last.contains("<summary>Agent \"endless\" was stopped</summary>"));
}

#[test]
fn task_output_reports_status_and_output() {
    let p = Project::new();
    let server = FakeServer::route(|r| {
        if is_main(r) {
            return match assistant_turns(r) {
                0 => anthropic::tool_use_reply(
                    "toolu_1",
                    "Agent",
                    json!({"description": "quick", "prompt": "p", "name": "quick", "run_in_background": true}),
                ),
                1 => anthropic::tool_use_reply(
                    "toolu_2",
                    "TaskOutput",
                    json!({"task_id": "quick", "block": true, "timeout_ms": 10000}),
                ),
                _ => anthropic::text_reply("done"),
            };
        }
        anthropic::text_reply("quick output")
    });
    p.run(Some(&server), &["run", "go"]).ok();
    let out = result_text(&last_tool_results(&main_requests(&server)[2].json)[0]);
    assert!(
        out.contains("<status>completed</status>") && out.contains("quick output"),
        "{out}"
    );
}

/// A parent that starts three background children whose answers come
/// 300, 700 and 1,100 ms later, then waits; the main session's requests.
fn three_staggered_children(p: &Project) -> Vec<RecordedRequest> {
    let server = FakeServer::route(|r| {
        if is_main(r) {
            if assistant_turns(r) == 0 {
                let mut m = anthropic::message();
                for i in 0..3 {
                    m = m.tool_use(
                        &format!("toolu_{i}"),
                        "Agent",
                        json!({"description": format!("job {i}"), "prompt": format!("job {i}"), "run_in_background": true}),
                    );
                }
                return m.reply();
            }
            return anthropic::text_reply("noted");
        }
        let job = r.last_user_text();
        let delay = match job.trim() {
            "job 0" => 300,
            "job 1" => 700,
            _ => 1100,
        };
        anthropic::text_reply(&format!("result of {job}")).delayed(Duration::from_millis(delay))
    });
    p.run(Some(&server), &["run", "go"]).ok();
    server.assert_invariants();
    main_requests(&server)
}

/// How many notifications each wake-up request brought (the requests
/// after the one that answered the spawns).
fn notifications_per_wake_up(mains: &[RecordedRequest]) -> Vec<usize> {
    mains
        .iter()
        .skip(2)
        .map(|r| count(&r.last_user_text(), "<task-notification>"))
        .collect()
}

#[test]
fn children_ending_within_the_gap_are_answered_in_one_request() {
    let mut p = Project::new();
    p.config("[agents]\nnotification_gap_ms = 1000\n");
    let mains = three_staggered_children(&p);
    assert_eq!(notifications_per_wake_up(&mains), vec![3]);
}

#[test]
fn by_default_children_ending_apart_wake_the_parent_one_by_one() {
    let p = Project::new();
    let mains = three_staggered_children(&p);
    // The default gap (10 ms) does not hold the first answer back for
    // siblings that end hundreds of milliseconds later.
    assert_eq!(notifications_per_wake_up(&mains), vec![1, 1, 1]);
    let firsts: Vec<bool> = mains
        .iter()
        .skip(2)
        .map(|r| {
            r.last_user_text()
                .contains("<result>result of job 0</result>")
        })
        .collect();
    assert_eq!(firsts, vec![true, false, false]);
}

#[test]
fn a_hundred_background_children_each_notify_exactly_once() {
    const N: usize = 100;
    let p = Project::new();
    let server = FakeServer::route(|r| {
        if is_main(r) {
            if assistant_turns(r) == 0 {
                let mut m = anthropic::message();
                for i in 0..N {
                    m = m.tool_use(
                        &format!("toolu_{i}"),
                        "Agent",
                        json!({"description": format!("job {i}"), "prompt": format!("job {i}"), "run_in_background": true}),
                    );
                }
                return m.reply();
            }
            return anthropic::text_reply("waiting");
        }
        let job = r.last_user_text();
        anthropic::text_reply(&format!("result of {job}"))
    });
    p.run(Some(&server), &["run", "go"]).ok();
    let last = main_requests(&server)
        .into_iter()
        .max_by_key(|r| r.messages().len())
        .unwrap();
    let texts = user_texts(&last);
    assert_eq!(count(&texts, "<task-notification>"), N);
    for i in 0..N {
        assert_eq!(
            count(&texts, &format!("<tool-use-id>toolu_{i}</tool-use-id>")),
            1,
            "toolu_{i}"
        );
        assert_eq!(
            count(&texts, &format!("<result>result of job {i}</result>")),
            1,
            "job {i}"
        );
    }
    server.assert_invariants();
}

#[test]
fn interrupting_run_marks_running_tasks_killed() {
    let p = Project::new();
    let server = FakeServer::route(|r| {
        if is_main(r) {
            return match assistant_turns(r) {
                0 => anthropic::tool_use_reply(
                    "toolu_1",
                    "Agent",
                    json!({"description": "forever", "prompt": "p", "run_in_background": true}),
                ),
                _ => anthropic::text_reply("waiting"),
            };
        }
        anthropic::text_reply("never").delayed(Duration::from_secs(60))
    });
    let mut child = p
        .command(Some(&server))
        .args(["run", "go"])
        .spawn()
        .unwrap();
    assert!(
        server.wait_for_requests(3, Duration::from_secs(20)),
        "main twice and the child once"
    );
    let status = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let code = child.wait().unwrap().code();
    assert_eq!(code, Some(1), "an interrupted run fails");
    let metas = p.meta_files();
    assert_eq!(metas.len(), 1);
    assert_eq!(metas[0]["status"], "killed");
    for line in p.transcript_lines() {
        assert!(line["type"].is_string());
    }
}
