//! Editors' way in: the Agent Client Protocol adapters for Claude Code
//! (`@agentclientprotocol/claude-agent-acp`, and the two names it had
//! before, `@zed-industries/claude-agent-acp` and
//! `@zed-industries/claude-code-acp`), each from npm, pinned, in `.ci/acp`
//! (`scripts/test-deps-acp`), start the CLI that `CLAUDE_CODE_EXECUTABLE`
//! names. A headless ACP client written with the ACP SDK
//! (tests/acp/client.mjs) drives each one as an editor would: initialize,
//! session/new, then a prompt whose scripted model reads a file and writes
//! one, the write asking for permission, which the client grants. The same
//! client runs against Claude Code itself (the conformance oracle) for
//! calibration, and against cadre.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use super::conformance::{oracle_in, side_reply};
use super::harness::{Project, last_tool_results, result_text};
use super::kit::{FakeServer, anthropic};

const NOTES: &str = "the notes say hello\n";
const MADE: &str = "made by the model\n";
const ANSWER: &str = "The notes say hello; made.txt is written.";

/// The three adapters: the folder under `.ci/acp` and the entry script.
#[derive(Clone, Copy, Debug)]
enum Adapter {
    /// `@agentclientprotocol/claude-agent-acp`, today's name.
    Current,
    /// `@zed-industries/claude-agent-acp`, the name before.
    ZedAgent,
    /// `@zed-industries/claude-code-acp`, the first name.
    ZedCode,
}

impl Adapter {
    fn entry(self) -> PathBuf {
        let (prefix, package) = match self {
            Adapter::Current => ("current", "@agentclientprotocol/claude-agent-acp"),
            Adapter::ZedAgent => ("zed-agent", "@zed-industries/claude-agent-acp"),
            Adapter::ZedCode => ("zed-code", "@zed-industries/claude-code-acp"),
        };
        installed(&format!("{prefix}/node_modules/{package}/dist/index.js"))
    }
}

/// A file under `.ci/acp`, or a message saying how to install it.
fn installed(rel: &str) -> PathBuf {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join(".ci/acp")
        .join(rel);
    assert!(
        path.is_file(),
        "{} is missing: the ACP tests need the adapters and the ACP SDK from npm; \
         install them with scripts/test-deps-acp (scripts/test does)",
        path.display()
    );
    path
}

/// Which CLI the adapter starts.
#[derive(Clone, Copy, Debug)]
enum Cli {
    Cadre,
    ClaudeCode,
}

/// The model: read notes.txt, then write made.txt, then answer; anything
/// else (titles, token counts) gets a harmless reply.
fn server(dir: &Path) -> FakeServer {
    let dir = dir.display().to_string();
    let server = FakeServer::route(move |r| {
        if let Some(side) = side_reply(r) {
            return side;
        }
        let results = r
            .messages()
            .iter()
            .filter_map(|m| m["content"].as_array())
            .flatten()
            .filter(|b| b["type"] == "tool_result")
            .count();
        match results {
            0 => anthropic::tool_use_reply(
                "toolu_read",
                "Read",
                json!({"file_path": format!("{dir}/notes.txt")}),
            ),
            1 => anthropic::tool_use_reply(
                "toolu_write",
                "Write",
                json!({"file_path": format!("{dir}/made.txt"), "content": MADE}),
            ),
            _ => anthropic::text_reply(ANSWER),
        }
    });
    // Claude Code's requests are not cadre's to check.
    server.skip_invariant_checks();
    server
}

/// Runs the client against `adapter` starting `cli` in `p`; returns what
/// the client saw.
fn drive(p: &Project, server: &FakeServer, adapter: Adapter, cli: Cli) -> Value {
    let executable = match cli {
        Cli::Cadre => PathBuf::from(env!("CARGO_BIN_EXE_cadre")),
        Cli::ClaudeCode => {
            oracle_in(Path::new(env!("CARGO_MANIFEST_DIR"))).unwrap_or_else(|why| panic!("{why}"))
        }
    };
    let sdk = installed("client/node_modules/@agentclientprotocol/sdk/dist/v1/stable/acp.js");
    let client = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/acp/client.mjs");
    // The environment cadre runs with in every test (scratch HOME, the
    // fake server), handed to the adapter and from it to the CLI.
    let base = p.command(Some(server));
    let mut cmd = Command::new("node");
    cmd.env_clear();
    for (k, v) in base.get_envs() {
        if let Some(v) = v {
            cmd.env(k, v);
        }
    }
    cmd.current_dir(p.path())
        .arg(&client)
        .arg(&sdk)
        .arg(adapter.entry())
        .arg(p.path())
        .arg("Read notes.txt, then write made.txt.")
        .env("CLAUDE_CODE_EXECUTABLE", &executable)
        .env("DISABLE_TELEMETRY", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1");
    if let Adapter::Current = adapter {
        // It reports the account without being asked; wait for that.
        cmd.env("ACP_WAIT_FOR", "_auth/status_update");
    }
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run node (the ACP client needs Node.js 18+): {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout.lines().last().unwrap_or_default();
    let v: Value = serde_json::from_str(last).unwrap_or_else(|e| {
        panic!(
            "{adapter:?}/{cli:?}: the client's last line is not JSON ({e}):\n{stdout}\nstderr:\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert_eq!(
        v["ok"],
        true,
        "{adapter:?}/{cli:?}: {}\nadapter's stderr:\n{}",
        v["error"],
        v["seen"]["stderr"].as_str().unwrap_or_default()
    );
    v["seen"].clone()
}

/// The updates of one tool call, in order.
fn updates_of<'a>(seen: &'a Value, id: &str) -> Vec<&'a Value> {
    seen["updates"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|u| u["toolCallId"] == id)
        .collect()
}

/// What an editor needs of one prompt: each tool call announced with its
/// kind and finished, the read's text, one permission request (for the
/// write, with allow and reject options), the file written once allowed,
/// and the answer streamed as message chunks.
fn check_prompt(p: &Project, server: &FakeServer, seen: &Value, who: &str) {
    assert_eq!(seen["stopReason"], "end_turn", "{who}");
    for (id, kind) in [("toolu_read", "read"), ("toolu_write", "edit")] {
        let ups = updates_of(seen, id);
        let first = ups
            .first()
            .unwrap_or_else(|| panic!("{who}: no update for {id}"));
        assert_eq!(first["sessionUpdate"], "tool_call", "{who}: {first}");
        assert!(
            ups.iter().any(|u| u["kind"] == kind),
            "{who}: {id} is never of kind {kind}: {ups:?}"
        );
        assert!(
            ups.iter()
                .any(|u| u["sessionUpdate"] == "tool_call_update" && u["status"] == "completed"),
            "{who}: {id} never completed: {ups:?}"
        );
    }
    let read_text = updates_of(seen, "toolu_read")
        .iter()
        .map(|u| u["content"].to_string())
        .collect::<String>();
    assert!(
        read_text.contains("the notes say hello"),
        "{who}: {read_text}"
    );

    let asked = seen["permissions"].as_array().cloned().unwrap_or_default();
    assert_eq!(asked.len(), 1, "{who}: one permission request: {asked:?}");
    assert_eq!(asked[0]["toolCall"]["toolCallId"], "toolu_write", "{who}");
    let kinds: Vec<&str> = asked[0]["options"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|o| o["kind"].as_str())
        .collect();
    assert!(
        kinds.contains(&"allow_once") && kinds.contains(&"reject_once"),
        "{who}: {kinds:?}"
    );
    assert_eq!(p.read("made.txt"), MADE, "{who}");

    let said: String = seen["updates"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|u| u["content"]["text"].as_str())
        .collect();
    assert_eq!(said, ANSWER, "{who}");

    // The model read the file's text and the write's success.
    let last = server
        .requests()
        .into_iter()
        .rev()
        .find(|r| side_reply(r).is_none())
        .unwrap_or_else(|| panic!("{who}: no main request"));
    let results = last_tool_results(&last.json);
    let texts: Vec<String> = results.iter().map(result_text).collect();
    assert!(
        texts.iter().any(|t| t.contains("made.txt"))
            && results.iter().all(|r| r["is_error"] != true),
        "{who}: {results:?}"
    );
}

/// A project whose settings ask before edits (`permissions.defaultMode`),
/// as a team writes them: every adapter then starts the CLI in `default`.
fn project() -> Project {
    let p = Project::new();
    p.write("notes.txt", NOTES);
    p.write(
        ".claude/settings.json",
        "{\"permissions\": {\"defaultMode\": \"default\"}}\n",
    );
    p
}

fn prompt_round_trip(adapter: Adapter, cli: Cli) {
    let p = project();
    let server = server(p.path());
    let seen = drive(&p, &server, adapter, cli);
    let who = format!("{adapter:?}/{cli:?}");
    check_prompt(&p, &server, &seen, &who);
    // The current adapter asks the CLI which account pays
    // (`auth status --json`) and tells the editor.
    if let Adapter::Current = adapter {
        let auth: Vec<&Value> = seen["extensions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|n| n["method"] == "_auth/status_update")
            .collect();
        assert_eq!(
            auth.last().map(|n| n["params"]["authStatus"].clone()),
            Some(json!({"kind": "api_key", "label": "Anthropic API key",
                        "detail": "ANTHROPIC_API_KEY"})),
            "{who}: {auth:?}"
        );
    }
}

#[test]
fn acp_current_adapter_drives_cadre() {
    prompt_round_trip(Adapter::Current, Cli::Cadre);
}

#[test]
fn acp_zed_agent_adapter_drives_cadre() {
    prompt_round_trip(Adapter::ZedAgent, Cli::Cadre);
}

#[test]
fn acp_zed_code_adapter_drives_cadre() {
    prompt_round_trip(Adapter::ZedCode, Cli::Cadre);
}

/// Calibration: the client's checks hold for Claude Code itself.
#[test]
fn acp_current_adapter_drives_claude_code() {
    prompt_round_trip(Adapter::Current, Cli::ClaudeCode);
}

#[test]
fn acp_zed_agent_adapter_drives_claude_code() {
    prompt_round_trip(Adapter::ZedAgent, Cli::ClaudeCode);
}

#[test]
fn acp_zed_code_adapter_drives_claude_code() {
    prompt_round_trip(Adapter::ZedCode, Cli::ClaudeCode);
}

/// With no mode in the settings the current adapter starts the CLI with
/// `--permission-mode auto` (Claude Code's classifier mode). cadre runs it
/// as `default` and says its models do not offer auto mode, so the adapter
/// shows the session in `default` and the write is asked about.
#[test]
fn acp_current_adapter_in_auto_mode_asks_before_cadre_writes() {
    let p = Project::new();
    p.write("notes.txt", NOTES);
    let server = server(p.path());
    let seen = drive(&p, &server, Adapter::Current, Cli::Cadre);
    check_prompt(&p, &server, &seen, "auto/Current/Cadre");
    assert_eq!(seen["session"]["modes"]["currentModeId"], "default");
}

/// Runs cadre headless with stream-json in and out, `stdin` as its input.
fn stream_session(
    p: &Project,
    server: &FakeServer,
    extra: &[&str],
    stdin: &str,
) -> super::harness::Run {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = p
        .command(Some(server))
        .args([
            "--output-format",
            "stream-json",
            "--verbose",
            "--input-format",
            "stream-json",
        ])
        .args(extra)
        .env("CLAUDE_CODE_EMIT_SESSION_STATE_EVENTS", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin.as_bytes()).unwrap();
    drop(input);
    super::harness::Run::from(child.wait_with_output().unwrap())
}

/// What the adapters wait on: each user message of stdin echoed after its
/// prompt's `init` under the client's uuid, marked `isReplay`, and the
/// session's state going `running` before the prompt and `idle` after its
/// `result` — for each of two prompts.
#[test]
fn replayed_prompts_and_session_states_frame_each_prompt() {
    let p = Project::new();
    let server =
        FakeServer::route(|r| anthropic::text_reply(&format!("echo {}", r.messages().len())));
    let user = |uuid: &str, text: &str| {
        json!({"type": "user", "uuid": uuid, "session_id": "", "parent_tool_use_id": null,
               "origin": {"kind": "human"},
               "message": {"role": "user", "content": [{"type": "text", "text": text}]}})
        .to_string()
    };
    let stdin = format!("{}\n{}\n", user("u-one", "first"), user("u-two", "second"));
    let run = stream_session(&p, &server, &["--replay-user-messages", ""], &stdin);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let kinds: Vec<String> = run
        .json_lines()
        .iter()
        .map(|v| match (v["type"].as_str(), v["subtype"].as_str()) {
            (Some("system"), Some("session_state_changed")) => {
                format!("state:{}", v["state"].as_str().unwrap_or_default())
            }
            (Some("user"), _) if v["isReplay"] == true => {
                format!("replay:{}", v["uuid"].as_str().unwrap_or_default())
            }
            (Some(t), Some(s)) => format!("{t}/{s}"),
            (Some(t), None) => t.to_string(),
            _ => String::new(),
        })
        .collect();
    let prompt = |uuid: &str| {
        [
            "state:running".to_string(),
            "system/init".into(),
            format!("replay:{uuid}"),
            "assistant".into(),
            "result/success".into(),
            "state:idle".into(),
        ]
    };
    let want: Vec<String> = prompt("u-one").into_iter().chain(prompt("u-two")).collect();
    assert_eq!(kinds, want, "{}", run.stdout);
    let replay = run
        .json_lines()
        .into_iter()
        .find(|v| v["isReplay"] == true)
        .unwrap();
    assert_eq!(replay["message"]["content"][0]["text"], "first");
    assert_eq!(replay["origin"]["kind"], "human");
    assert!(replay["timestamp"].is_string(), "{replay}");
    assert_eq!(server.request_count(), 2, "the empty value is not a prompt");
}

/// `--replay-user-messages` takes an empty value or none, and needs
/// stream-json in and out, as Claude Code.
#[test]
fn replay_user_messages_refuses_a_value_and_text_input() {
    let p = Project::new();
    let server = FakeServer::route(|_| anthropic::text_reply("never"));
    let run = stream_session(&p, &server, &["--replay-user-messages", "yes"], "");
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("takes no value"), "{}", run.stderr);
    let run = p.run(Some(&server), &["-p", "hi", "--replay-user-messages"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("stream-json"), "{}", run.stderr);
    assert_eq!(server.request_count(), 0);
}

/// `--permission-mode auto` runs as `default`: a write nobody can approve
/// is refused (Claude Code's classifier would let it through), and `init`
/// says `default`; `initialize` offers no model with auto mode.
#[test]
fn permission_mode_auto_runs_as_default() {
    let p = Project::new();
    let dir = p.path().display().to_string();
    let server = FakeServer::route(move |r| match r.messages().len() {
        1 => anthropic::tool_use_reply(
            "toolu_w",
            "Write",
            json!({"file_path": format!("{dir}/made.txt"), "content": MADE}),
        ),
        _ => anthropic::text_reply("done"),
    });
    let init = json!({"type": "control_request", "request_id": "i1",
                      "request": {"subtype": "initialize"}});
    let user = json!({"type": "user", "message": {"role": "user", "content": "write it"}});
    let run = stream_session(
        &p,
        &server,
        &["--permission-mode", "auto"],
        &format!("{init}\n{user}\n"),
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let lines = run.json_lines();
    let init_msg = lines.iter().find(|v| v["subtype"] == "init").unwrap();
    assert_eq!(init_msg["permissionMode"], "default");
    let answer = lines
        .iter()
        .find(|v| v["type"] == "control_response")
        .unwrap();
    let models = answer["response"]["response"]["models"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        models.first().map(|m| m["value"].clone()),
        Some(json!("default"))
    );
    assert!(
        models.iter().all(|m| m["supportsAutoMode"] == false),
        "{models:?}"
    );
    assert!(!p.path().join("made.txt").exists(), "auto approved a write");
    let r = &last_tool_results(&server.request(1).json)[0];
    assert_eq!(r["is_error"], true, "{r}");
}

/// `auth status --json` answers as Claude Code's does: with the provider's
/// key set, who pays; without, `loggedIn: false` and exit 1.
#[test]
fn auth_status_reports_the_providers_key() {
    let p = Project::new();
    let server = FakeServer::route(|_| anthropic::text_reply("never"));
    let run = p.run(Some(&server), &["auth", "status", "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let v: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(
        v,
        json!({"loggedIn": true, "authMethod": "api_key", "apiProvider": "firstParty",
               "apiKeySource": "ANTHROPIC_API_KEY"})
    );
    let run = p.run(None, &["auth", "status", "--json"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let v: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(
        (&v["loggedIn"], &v["authMethod"]),
        (&json!(false), &json!("none"))
    );
    assert_eq!(server.request_count(), 0);
}
