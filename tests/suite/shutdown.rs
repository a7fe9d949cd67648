//! SIGTERM ends `cadre run` as cleanly as Ctrl-C: the foreground Bash
//! command of the main session and the Bash command of a background child
//! are killed with their process groups, nothing is left in cadre's own
//! process group (its MCP server included), every meta file has a final
//! status, and the main transcript ends with an `end` line.

use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use serde_json::json;

use super::harness::{Project, assistant_turns, is_main_session as is_main};
use super::kit::{FakeServer, anthropic};

/// The number in a file the test's Bash commands write, once it exists.
fn wait_for_pid(path: &Path, within: Duration) -> i32 {
    let deadline = Instant::now() + within;
    loop {
        if let Ok(text) = std::fs::read_to_string(path)
            && let Ok(n) = text.trim().parse()
        {
            return n;
        }
        assert!(
            Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether any process is left in the process group.
fn group_alive(pgid: i32) -> bool {
    !matches!(killpg(Pid::from_raw(pgid), None), Err(Errno::ESRCH))
}

/// `[mcp_servers.echo]`: this test binary started as the suite's echo MCP
/// server (see `suite::mcp::mcp_server_mode`), writing its pid to `pidfile`.
fn echo_server_toml(pidfile: &Path) -> String {
    let exe = std::env::current_exe().unwrap();
    let args = [
        "--exact",
        "suite::mcp::mcp_server_mode",
        "--nocapture",
        "--quiet",
        "--test-threads=1",
    ];
    format!(
        "[mcp_servers.echo]\ncommand = {}\nargs = {}\nenv = {{ CADRE_TEST_MCP_SERVER = \"echo\", CADRE_TEST_MCP_PIDFILE = {} }}\n",
        serde_json::to_string(&exe.display().to_string()).unwrap(),
        serde_json::to_string(&args).unwrap(),
        serde_json::to_string(&pidfile.display().to_string()).unwrap(),
    )
}

#[test]
fn sigterm_leaves_no_process_and_no_running_task_behind() {
    let mut p = Project::new();
    let mcp_pidfile = p.path().join("mcp.pid");
    p.config(&echo_server_toml(&mcp_pidfile));
    let server = FakeServer::route(|r| {
        if is_main(r) {
            return match assistant_turns(r) {
                0 => anthropic::message()
                    .tool_use(
                        "toolu_bg",
                        "Agent",
                        json!({"description": "sleeper", "prompt": "sleep", "run_in_background": true}),
                    )
                    .tool_use(
                        "toolu_fg",
                        "Bash",
                        json!({"command": "echo $$ > fg.pgid; sleep 300; echo never"}),
                    )
                    .reply(),
                _ => anthropic::text_reply("not reached"),
            };
        }
        match assistant_turns(r) {
            0 => anthropic::tool_use_reply(
                "toolu_child",
                "Bash",
                json!({"command": "echo $$ > bg.pgid; sleep 300; echo never"}),
            ),
            _ => anthropic::text_reply("not reached"),
        }
    });
    let mut child = p
        .command(Some(&server))
        .args([
            "run",
            "--permission-mode",
            "bypassPermissions",
            "--output-format",
            "json",
            "go",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // cadre leads its own group, so what it leaves behind can be found.
        .process_group(0)
        .spawn()
        .unwrap();
    let cadre = child.id() as i32;
    let fg = wait_for_pid(&p.path().join("fg.pgid"), Duration::from_secs(30));
    let bg = wait_for_pid(&p.path().join("bg.pgid"), Duration::from_secs(30));
    let mcp = wait_for_pid(&mcp_pidfile, Duration::from_secs(30));
    assert!(group_alive(fg) && group_alive(bg), "both commands run");
    assert_eq!(
        nix::unistd::getpgid(Some(Pid::from_raw(mcp))).unwrap(),
        Pid::from_raw(cadre),
        "the MCP server runs in cadre's group, so the group check covers it"
    );

    kill(Pid::from_raw(cadre), Signal::SIGTERM).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = killpg(Pid::from_raw(cadre), Signal::SIGKILL);
            panic!("cadre did not exit within 20 s of SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(status.code(), Some(1), "{stdout}");
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["is_error"], true);

    // Give the kernel a moment to reap what was SIGKILLed.
    let settle = Instant::now() + Duration::from_secs(5);
    while (group_alive(fg) || group_alive(bg) || group_alive(cadre)) && Instant::now() < settle {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!group_alive(fg), "the foreground Bash group is gone");
    assert!(
        !group_alive(bg),
        "the background child's Bash group is gone"
    );
    assert!(
        !group_alive(cadre),
        "nothing is left in cadre's own group (the MCP server included)"
    );

    let meta = p.meta_files();
    assert_eq!(meta.len(), 1);
    assert_eq!(meta[0]["status"], "killed", "{}", meta[0]);
    let lines = p.transcript_lines();
    let end = lines
        .iter()
        .rfind(|l| l["agent_id"] == "main")
        .expect("a main transcript line");
    assert_eq!(end["type"], "end", "{end}");
    assert_eq!(end["status"], "killed");
    assert_eq!(end["signal"], "SIGTERM");
    assert!(
        lines
            .iter()
            .any(|l| l["type"] == "result" && l["status"] == "killed"),
        "the child's transcript records its end"
    );
}
