//! The operating-system sandbox of Bash (docs/sandbox.md) through the real
//! binary: a team's `.claude/settings.json` turns it on, the fake model
//! asks for commands that try to escape, and the tests look at the file
//! system, the processes and the network afterwards. Each escape works
//! without the sandbox. A machine whose kernel lacks Landlock or user
//! namespaces skips with a message (this one has both).

use std::io::Read as _;
use std::net::TcpListener;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::{Value, json};

use super::harness::{
    Project, assistant_turns, has_main_prompt as is_main, last_tool_results, result_text,
};
use super::kit::{FakeServer, TEST_KEY, anthropic};

/// Whether this kernel can sandbox; prints why not when it cannot.
fn supported() -> bool {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_cadre"))
        .args(["__sandbox-exec", "--probe"])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    let ok = v["landlock"].is_i64() && v["namespaces"] == true;
    if !ok {
        eprintln!("SKIPPED: this kernel cannot sandbox (Landlock and user namespaces needed): {v}");
    }
    ok
}

/// The main agent runs `commands` with Bash in one message, then says
/// "done".
fn script(commands: &[String]) -> FakeServer {
    let commands = commands.to_vec();
    FakeServer::route(move |r| {
        if is_main(r) && assistant_turns(r) == 0 {
            let mut m = anthropic::message();
            for (i, c) in commands.iter().enumerate() {
                m = m.tool_use(&format!("toolu_{i}"), "Bash", json!({"command": c}));
            }
            return m.reply();
        }
        anthropic::text_reply("done")
    })
}

/// The Bash results, as texts with `ERR:` before errors.
fn results(server: &FakeServer) -> Vec<String> {
    let r = server
        .requests()
        .into_iter()
        .find(|r| is_main(r) && assistant_turns(r) == 1)
        .expect("main's second request");
    last_tool_results(&r.json)
        .iter()
        .map(|b| {
            let t = result_text(b);
            if b["is_error"] == true {
                format!("ERR:{t}")
            } else {
                t
            }
        })
        .collect()
}

/// A project whose team turned the sandbox on, with `extra` settings
/// keys (JSON members) beside it.
fn sandboxed_project(extra: &str) -> Project {
    let p = Project::new();
    let sep = if extra.is_empty() { "" } else { "," };
    p.write(
        ".claude/settings.json",
        &format!(r#"{{"sandbox": {{"enabled": true}}{sep}{extra}}}"#),
    );
    p
}

/// Runs `commands` in `bypassPermissions`: no rule stands between the
/// command and the kernel, so only the sandbox can stop an escape.
fn runs(p: &Project, commands: &[String]) -> Vec<String> {
    runs_in(p, commands, "bypassPermissions")
}

fn runs_in(p: &Project, commands: &[String], mode: &str) -> Vec<String> {
    let server = script(commands);
    let out = p.run(Some(&server), &["run", "--permission-mode", mode, "go"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    results(&server)
}

#[test]
fn writes_outside_the_working_directory_fail_by_every_route() {
    if !supported() {
        return;
    }
    let p = sandboxed_project("");
    let outside = tempfile::tempdir().unwrap();
    let o = outside.path().display().to_string();
    p.write("inside.txt", "in\n");
    let commands: Vec<String> = vec![
        format!("python3 -c \"open('{o}/python.txt', 'w').write('x')\""),
        format!("echo x | tee {o}/tee.txt"),
        format!("cp inside.txt {o}/cp.txt"),
        format!("ln -s {o} link && echo x > link/symlink.txt"),
        "echo x > \"$HOME/home.txt\"".to_string(),
        // A grandchild and a background job, inside the same boundary.
        format!("bash -c 'sh -c \"echo x > {o}/grandchild.txt\"'"),
        format!("(sleep 0.2; echo x > {o}/background.txt) & wait"),
        // The working directory is writable.
        "echo written > made-inside.txt && cat made-inside.txt".to_string(),
        // So is the session's temporary folder.
        "echo t > \"$TMPDIR/t.txt\" && cat \"$TMPDIR/t.txt\"".to_string(),
    ];
    let r = runs(&p, &commands);
    let names = [
        "python.txt",
        "tee.txt",
        "cp.txt",
        "symlink.txt",
        "grandchild.txt",
        "background.txt",
    ];
    for n in names {
        assert!(!outside.path().join(n).exists(), "{n} was written: {r:?}");
    }
    assert!(!p.home.path().join("home.txt").exists(), "{r:?}");
    for (i, res) in r.iter().take(7).enumerate() {
        assert!(
            res.contains("Permission denied") || res.contains("PermissionError"),
            "command {i} ({}): {res}",
            commands[i]
        );
    }
    assert_eq!(r[7].trim(), "written", "{r:?}");
    assert_eq!(p.read("made-inside.txt"), "written\n");
    assert_eq!(r[8].trim(), "t", "{r:?}");
}

#[test]
fn commands_cannot_see_cadre_or_its_key_and_cannot_change_settings_or_git_hooks() {
    if !supported() {
        return;
    }
    let p = sandboxed_project("");
    std::fs::create_dir_all(p.path().join(".git/hooks")).unwrap();
    let commands: Vec<String> = vec![
        "cat /proc/$PPID/environ /proc/*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c ANTHROPIC_API_KEY; true".into(),
        "env | grep -c ANTHROPIC_API_KEY; true".into(),
        "ls /proc | grep -c '^[0-9]'".into(),
        "echo '{\"permissions\": {\"allow\": [\"Bash\"]}}' > .claude/settings.local.json".into(),
        "echo 'rm -rf /' > .git/hooks/pre-commit".into(),
    ];
    let r = runs(&p, &commands);
    assert_eq!(r[0].trim(), "0", "{r:?}");
    assert_eq!(r[1].trim(), "0", "{r:?}");
    // The shell, `ls` and `grep`: only the sandbox's own processes.
    let seen: usize = r[2].trim().parse().unwrap_or(usize::MAX);
    assert!(seen <= 4, "{r:?}");
    assert!(r[3].starts_with("ERR:"), "{r:?}");
    assert!(!p.path().join(".claude/settings.local.json").exists());
    assert!(r[4].starts_with("ERR:"), "{r:?}");
    assert!(!p.path().join(".git/hooks/pre-commit").exists());
    let all = r.join("\n");
    assert!(!all.contains(TEST_KEY), "{all}");
}

#[test]
fn read_denied_files_cannot_be_read_by_any_program() {
    if !supported() {
        return;
    }
    let p = sandboxed_project(
        r#""permissions": {"deny": ["Read(./creds.txt)", "Read(./private/**)"]}"#,
    );
    p.write("creds.txt", "SECRET-ONE\n");
    p.write("private/key.pem", "SECRET-TWO\n");
    p.write("public.txt", "visible\n");
    let commands: Vec<String> = vec![
        "cat creds.txt".into(),
        "python3 -c \"print(open('creds.txt').read())\"".into(),
        "dd if=private/key.pem 2>/dev/null".into(),
        "cat private/key.pem; ls private".into(),
        "cat public.txt".into(),
    ];
    let r = runs(&p, &commands);
    let all = r.join("\n");
    assert!(
        !all.contains("SECRET-ONE") && !all.contains("SECRET-TWO"),
        "{r:?}"
    );
    assert_eq!(r[4].trim(), "visible", "{r:?}");
    // The files are untouched outside.
    assert_eq!(p.read("creds.txt"), "SECRET-ONE\n");
}

#[test]
fn no_direct_connection_leaves_the_sandbox() {
    if !supported() {
        return;
    }
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    let arrived = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let watcher = {
        let (arrived, stop) = (Arc::clone(&arrived), Arc::clone(&stop));
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                if let Ok((mut s, _)) = listener.accept() {
                    arrived.store(true, Ordering::SeqCst);
                    let mut buf = [0u8; 16];
                    let _ = s.read(&mut buf);
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        })
    };
    let p = sandboxed_project("");
    let commands: Vec<String> = vec![
        format!(
            "python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=3)\""
        ),
        format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected"),
    ];
    let r = runs(&p, &commands);
    std::thread::sleep(std::time::Duration::from_millis(300));
    stop.store(true, Ordering::SeqCst);
    watcher.join().unwrap();
    assert!(
        !arrived.load(Ordering::SeqCst),
        "a connection arrived: {r:?}"
    );
    assert!(
        r[0].starts_with("ERR:") && r[0].contains("Connection refused"),
        "{r:?}"
    );
    assert!(
        r[1].starts_with("ERR:") && !r[1].contains("connected"),
        "{r:?}"
    );
}

#[test]
fn sandboxed_commands_run_without_asking_but_deny_and_ask_rules_still_win() {
    if !supported() {
        return;
    }
    let p = sandboxed_project(
        r#""permissions": {"deny": ["Bash(rm:*)"], "ask": ["Bash(git push:*)"]}"#,
    );
    p.write("keep.txt", "keep\n");
    let commands: Vec<String> = vec![
        "echo auto-allowed > made.txt && cat made.txt".into(),
        "rm keep.txt".into(),
        "git push".into(),
    ];
    let r = runs_in(&p, &commands, "default");
    assert_eq!(r[0].trim(), "auto-allowed", "{r:?}");
    assert!(
        r[1].starts_with("ERR:") && r[1].contains("deny rule 'Bash(rm:*)'"),
        "{r:?}"
    );
    assert!(p.path().join("keep.txt").exists());
    assert!(
        r[2].starts_with("ERR:") && r[2].contains("ask rule 'Bash(git push:*)'"),
        "{r:?}"
    );
}

#[test]
fn excluded_commands_and_a_sandbox_turned_off_go_through_the_permission_rules() {
    let p = Project::new();
    p.write(
        ".claude/settings.json",
        r#"{"sandbox": {"enabled": true, "autoAllowBashIfSandboxed": true}}"#,
    );
    p.write(
        ".claude/settings.local.json",
        r#"{"sandbox": {"excludedCommands": ["docker"]}}"#,
    );
    // The local file comes with the repository: it cannot exclude
    // commands (that widens the sandbox). The user's settings can.
    std::fs::create_dir_all(p.home.path().join(".claude")).unwrap();
    std::fs::write(
        p.home.path().join(".claude/settings.json"),
        r#"{"sandbox": {"excludedCommands": ["make"]}}"#,
    )
    .unwrap();
    let check = |cmd: &str| {
        let out = p.run(None, &["permissions", "check", "Bash", cmd, "--json"]);
        assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
        serde_json::from_str::<Value>(&out.stdout).unwrap()
    };
    let v = check("make build");
    assert_eq!(v["decision"], "ask", "{v}");
    assert!(
        v["sandbox"]
            .as_str()
            .unwrap()
            .starts_with("excluded (sandbox.excludedCommands 'make')"),
        "{v}"
    );
    let v = check("docker ps");
    if supported() {
        assert_eq!(v["decision"], "allow", "{v}");
        assert!(
            v["sandbox"]
                .as_str()
                .unwrap()
                .starts_with("sandboxed (Landlock"),
            "{v}"
        );
        assert!(
            v["by"]
                .as_str()
                .unwrap()
                .contains("autoAllowBashIfSandboxed"),
            "{v}"
        );
    }
    let out = p.run(None, &["config", "show"]);
    assert!(
        out.stdout
            .contains("sandbox.excluded_commands (a repository may only narrow the sandbox)"),
        "{}",
        out.stdout
    );
}

#[test]
fn config_validate_names_an_unknown_sandbox_key_at_its_position() {
    let p = Project::new();
    p.write(
        ".claude/settings.json",
        "{\n  \"sandbox\": {\n    \"enabled\": true,\n    \"network\": {\"allowedDomain\": [\"x.test\"]},\n    \"autoAllowBashIfSandboxed\": \"yes\"\n  }\n}\n",
    );
    let out = p.run(None, &["config", "validate"]);
    let settings = p.path().join(".claude/settings.json").display().to_string();
    assert!(
        out.stdout.contains(&format!(
            "{settings}:4:17: warning: sandbox.network.allowedDomain: not a sandbox setting"
        )),
        "{}\n{}",
        out.stdout,
        out.stderr
    );
    assert!(
        out.stdout.contains(&format!(
            "{settings}:5:33: warning: sandbox.autoAllowBashIfSandboxed: expected true or false"
        )),
        "{}",
        out.stdout
    );
}

#[test]
fn without_the_sandbox_the_same_escape_works() {
    // The control for the tests above: the write they stop is possible.
    let p = Project::new();
    let outside = tempfile::tempdir().unwrap();
    let o = outside.path().display().to_string();
    let server = script(&[format!("echo x | tee {o}/tee.txt")]);
    p.run(
        Some(&server),
        &["run", "--permission-mode", "bypassPermissions", "go"],
    );
    assert!(Path::new(&format!("{o}/tee.txt")).exists());
}

/// A plain HTTP server on a loopback port that answers every request
/// with `body` and counts the requests.
fn http_server(body: &'static str) -> (u16, Arc<std::sync::atomic::AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let count = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = Arc::clone(&count);
    std::thread::spawn(move || {
        for conn in listener.incoming().take(20) {
            let Ok(mut conn) = conn else { continue };
            seen.fetch_add(1, Ordering::SeqCst);
            let mut buf = [0u8; 4096];
            let _ = conn.read(&mut buf);
            let reply = format!(
                "HTTP/1.0 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
            let _ = std::io::Write::write_all(&mut conn, reply.as_bytes());
        }
    });
    (port, count)
}

#[test]
fn an_allowed_domain_is_reached_through_the_proxy_and_another_is_refused() {
    if !supported() {
        return;
    }
    let (port, count) = http_server("hello-from-outside");
    let p = sandboxed_project("");
    p.write(".claude/settings.json", r#"{"sandbox": {"enabled": true}}"#);
    // The domains come from the user's settings: a repository may not
    // widen the sandbox's network.
    std::fs::create_dir_all(p.home.path().join(".claude")).unwrap();
    std::fs::write(
        p.home.path().join(".claude/settings.json"),
        r#"{"sandbox": {"network": {"allowedDomains": ["localhost"]}}}"#,
    )
    .unwrap();
    let commands: Vec<String> = vec![
        format!("curl -sS --max-time 10 http://localhost:{port}/"),
        format!("curl -sS --max-time 10 http://127.0.0.1:{port}/"),
        "curl -sS --max-time 10 https://blocked.invalid/".into(),
    ];
    let r = runs(&p, &commands);
    assert_eq!(r[0].trim(), "hello-from-outside", "{r:?}");
    assert!(
        r[1].contains("the network host 127.0.0.1 is not allowed")
            && r[1].contains("The sandbox refused network access to 127.0.0.1"),
        "{r:?}"
    );
    assert!(
        r[2].starts_with("ERR:")
            && r[2].contains("The sandbox refused network access to blocked.invalid"),
        "{r:?}"
    );
    assert_eq!(count.load(Ordering::SeqCst), 1, "{r:?}");
}

#[test]
fn command_hooks_run_in_the_sandbox_too() {
    if !supported() {
        return;
    }
    let p = Project::new();
    let outside = tempfile::tempdir().unwrap();
    let o = outside.path().display().to_string();
    p.write(
        ".claude/settings.json",
        &json!({
            "sandbox": {"enabled": true},
            "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{
                "type": "command",
                "command": format!("cat > hook-input.json; echo x > {o}/hook.txt; echo x > \"$HOME/hook.txt\"; exit 0")
            }]}]}
        })
        .to_string(),
    );
    let r = runs(&p, &["echo ran".to_string()]);
    assert_eq!(r[0].trim(), "ran", "{r:?}");
    // The hook ran (it wrote its input inside) but could not write outside.
    assert!(p.read("hook-input.json").contains("echo ran"));
    assert!(!outside.path().join("hook.txt").exists());
    assert!(!p.home.path().join("hook.txt").exists());
}

#[test]
fn an_unprivileged_user_is_confined_the_same_way() {
    // As root (CI), the same escapes are tried by cadre running as
    // `nobody` through setpriv; as any other user the tests above already
    // ran unprivileged.
    if !supported() || !nix::unistd::geteuid().is_root() {
        return;
    }
    if !Path::new("/usr/bin/setpriv").exists() {
        eprintln!("SKIPPED: setpriv (util-linux) is not installed");
        return;
    }
    let p = sandboxed_project(r#""permissions": {"deny": ["Read(./creds.txt)"]}"#);
    p.write("creds.txt", "SECRET-THREE\n");
    let outside = tempfile::tempdir().unwrap();
    let o = outside.path().display().to_string();
    for dir in [p.path(), p.home.path(), outside.path()] {
        let status = std::process::Command::new("chown")
            .args(["-R", "65534:65534"])
            .arg(dir)
            .status()
            .unwrap();
        assert!(status.success());
    }
    let commands: Vec<String> = vec![
        "id -u".into(),
        format!("echo x | tee {o}/nobody.txt"),
        "cat creds.txt".into(),
        "cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c ANTHROPIC_API_KEY; true".into(),
        "echo fine > inside.txt && cat inside.txt".into(),
    ];
    let server = script(&commands);
    let base = p.command(Some(&server));
    let mut cmd = std::process::Command::new("/usr/bin/setpriv");
    cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(env!("CARGO_BIN_EXE_cadre"))
        .args(["run", "--permission-mode", "bypassPermissions", "go"])
        .current_dir(p.path())
        .env_clear()
        .stdin(std::process::Stdio::null());
    for (k, v) in base.get_envs() {
        if let Some(v) = v {
            cmd.env(k, v);
        }
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let r = results(&server);
    assert_eq!(r[0].trim(), "65534", "{r:?}");
    assert!(!outside.path().join("nobody.txt").exists(), "{r:?}");
    assert!(!r.join("\n").contains("SECRET-THREE"), "{r:?}");
    assert_eq!(r[3].trim(), "0", "{r:?}");
    assert_eq!(r[4].trim(), "fine", "{r:?}");
}

#[test]
fn edit_deny_rules_bind_the_sandbox_and_allow_write_opens_a_folder() {
    if !supported() {
        return;
    }
    let p = sandboxed_project(r#""permissions": {"deny": ["Edit(./locked.txt)"]}"#);
    p.write("locked.txt", "original\n");
    let extra = tempfile::tempdir().unwrap();
    let e = extra.path().display().to_string();
    std::fs::create_dir_all(p.home.path().join(".claude")).unwrap();
    std::fs::write(
        p.home.path().join(".claude/settings.json"),
        json!({"sandbox": {"filesystem": {"allowWrite": [e]}}}).to_string(),
    )
    .unwrap();
    let commands: Vec<String> = vec![
        // The parser cannot see this write; the kernel refuses it.
        "python3 -c \"open('locked.txt', 'a').write('changed')\"".into(),
        format!("echo allowed > {e}/made.txt && cat {e}/made.txt"),
    ];
    let r = runs(&p, &commands);
    assert!(
        r[0].starts_with("ERR:") && r[0].contains("Read-only file system"),
        "{r:?}"
    );
    assert_eq!(p.read("locked.txt"), "original\n");
    assert_eq!(r[1].trim(), "allowed", "{r:?}");
    assert!(extra.path().join("made.txt").exists());
}

/// A call may ask to run outside the sandbox (`dangerouslyDisableSandbox`,
/// offered only while the sandbox is on): it then goes through the
/// permission rules like any unsandboxed command — never allowed for being
/// sandboxed — and `allowUnsandboxedCommands: false` keeps it inside.
#[test]
fn a_call_asking_to_leave_the_sandbox_goes_through_the_rules() {
    if !supported() {
        return;
    }
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("escaped.txt");
    let command = format!("touch {}", target.display());
    let script = |command: String| {
        FakeServer::route(move |r| {
            if is_main(r) && assistant_turns(r) == 0 {
                return anthropic::tool_use_reply(
                    "toolu_0",
                    "Bash",
                    json!({"command": command, "dangerouslyDisableSandbox": true}),
                );
            }
            anthropic::text_reply("done")
        })
    };
    let offered = |server: &FakeServer| {
        let r = &server.requests()[0];
        let bash = r.json["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == "Bash")
            .cloned()
            .unwrap();
        bash["input_schema"]["properties"]
            .get("dangerouslyDisableSandbox")
            .is_some()
    };

    // The default mode asks, and `run` has nobody to ask: refused, and
    // the file is not made (inside the sandbox it would have run without
    // asking and failed).
    let p = sandboxed_project("");
    let server = script(command.clone());
    let out = p.run(Some(&server), &["run", "go"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(offered(&server));
    let r = results(&server);
    assert!(
        r[0].starts_with("ERR:") && r[0].contains("ermission") && !r[0].contains("cannot touch"),
        "{r:?}"
    );
    assert!(!target.exists());

    // A rule that allows the command lets it run outside.
    let p = sandboxed_project(r#""permissions": {"allow": ["Bash(touch:*)"]}"#);
    let server = script(command.clone());
    let out = p.run(Some(&server), &["run", "go"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(
        !results(&server)[0].starts_with("ERR:"),
        "{:?}",
        results(&server)
    );
    assert!(target.exists());
    std::fs::remove_file(&target).unwrap();

    // The user's settings forbid leaving: the property is not offered,
    // and a call that sends it anyway stays inside (the write fails).
    let p = sandboxed_project(r#""permissions": {"allow": ["Bash(touch:*)"]}"#);
    std::fs::create_dir_all(p.home.path().join(".claude")).unwrap();
    std::fs::write(
        p.home.path().join(".claude/settings.json"),
        r#"{"sandbox": {"allowUnsandboxedCommands": false}}"#,
    )
    .unwrap();
    let server = script(command);
    let out = p.run(Some(&server), &["run", "go"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(!offered(&server));
    assert!(
        results(&server)[0].starts_with("ERR:"),
        "{:?}",
        results(&server)
    );
    assert!(!target.exists());

    // Without the sandbox the property is not offered at all.
    let p = Project::new();
    let server = script("true".into());
    p.run(Some(&server), &["run", "go"]);
    assert!(!offered(&server));
}

/// In chat, a host the sandbox's network does not allow is put to the
/// user: a yes lets the command through and allows the host for the rest
/// of the session; a no refuses it.
#[test]
fn chat_asks_about_a_host_the_sandbox_does_not_allow() {
    use super::ask_user::{Tmux, chat_line};
    if !supported() {
        return;
    }
    let (port, count) = http_server("hello-from-outside");
    let p = sandboxed_project("");
    let first = format!("curl -sS --max-time 20 http://127.0.0.1:{port}/");
    let second = format!("curl -sS --max-time 20 http://localhost:{port}/");
    let server = {
        let (first, second) = (first.clone(), second.clone());
        FakeServer::route(move |r| {
            if !is_main(r) {
                return anthropic::text_reply("?");
            }
            match assistant_turns(r) {
                0 => anthropic::tool_use_reply("toolu_0", "Bash", json!({"command": first})),
                2 => anthropic::message()
                    .tool_use("toolu_1", "Bash", json!({"command": first}))
                    .tool_use("toolu_2", "Bash", json!({"command": second}))
                    .reply(),
                1 => anthropic::text_reply("fetched one"),
                _ => anthropic::text_reply("fetched two"),
            }
        })
    };
    let t = Tmux::start(p.path(), &chat_line(&p, &server, true));
    t.wait_for("cadre chat");
    t.keys(&["get it", "Enter"]);
    t.wait_for("main's sandboxed command wants to reach this host:");
    t.wait_for("[a]lways: allow WebFetch(domain:127.0.0.1)");
    t.keys(&["y", "Enter"]);
    t.wait_for("fetched one");
    t.keys(&["again", "Enter"]);
    t.wait_for("    localhost");
    t.keys(&["n", "Enter"]);
    t.wait_for("fetched two");
    let screen = t.screen();
    assert_eq!(screen.matches("wants to reach").count(), 2, "{screen}");
    let requests = server.requests();
    let last = last_tool_results(&requests.last().unwrap().json);
    assert_eq!(
        result_text(&last[0]).trim(),
        "hello-from-outside",
        "{last:?}"
    );
    assert!(
        result_text(&last[1]).contains("The sandbox refused network access to localhost"),
        "{last:?}"
    );
    assert_eq!(count.load(Ordering::SeqCst), 2);
}

/// No program inside can open a Unix socket (the SSH agent, the Docker
/// socket) unless the user's settings say `allowAllUnixSockets`; socket
/// pairs, which join only processes inside, keep working.
#[test]
fn unix_sockets_are_closed_inside_unless_allowed() {
    if !supported() {
        return;
    }
    let outside = tempfile::tempdir().unwrap();
    let path = outside.path().join("agent.sock");
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    let arrived = Arc::new(AtomicBool::new(false));
    {
        let arrived = Arc::clone(&arrived);
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if conn.is_ok() {
                    arrived.store(true, Ordering::SeqCst);
                }
            }
        });
    }
    let connect = format!(
        "python3 -c 'import socket; s = socket.socket(socket.AF_UNIX); s.connect(\"{}\"); print(\"connected\")'",
        path.display()
    );
    let pair = "python3 -c 'import socket; a, b = socket.socketpair(); a.send(b\"x\"); print(\"pair\", b.recv(1))'".to_string();

    let p = sandboxed_project("");
    let r = runs(&p, &[connect.clone(), pair.clone()]);
    assert!(
        r[0].starts_with("ERR:") && r[0].contains("PermissionError"),
        "{r:?}"
    );
    assert!(r[1].contains("pair b'x'"), "{r:?}");
    assert!(!arrived.load(Ordering::SeqCst));

    // A repository cannot open them; the user's settings can.
    let p = Project::new();
    p.write(
        ".claude/settings.json",
        r#"{"sandbox": {"enabled": true, "network": {"allowAllUnixSockets": true}}}"#,
    );
    let r = runs(&p, std::slice::from_ref(&connect));
    assert!(r[0].starts_with("ERR:"), "{r:?}");
    std::fs::create_dir_all(p.home.path().join(".claude")).unwrap();
    std::fs::write(
        p.home.path().join(".claude/settings.json"),
        r#"{"sandbox": {"network": {"allowAllUnixSockets": true}}}"#,
    )
    .unwrap();
    let r = runs(&p, &[connect]);
    assert_eq!(r[0].trim(), "connected", "{r:?}");
    assert!(arrived.load(Ordering::SeqCst));
}
