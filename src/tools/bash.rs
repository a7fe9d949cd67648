//! The Bash tool: runs a command with `bash -c` in the session's working
//! directory, in its own process group, with stdout and stderr captured
//! together in the order they were written. A timeout or the turn's
//! cancellation kills the whole group, so no child outlives the call; so does
//! the command's normal exit (background jobs it left behind are killed).
//! Long output keeps its head and tail. This file knows nothing of
//! permissions: the engine decided before the call ran.
//!
//! As in Claude Code, a `cd` stays for the next call when the context
//! says where it may ([`super::ShellDirs`]): an `EXIT` trap put before the
//! command writes the shell's last folder (`pwd -P`) to a file of cadre's,
//! and a folder outside the allowed ones sends the shell back to the
//! session's folder, which the result says.

use std::io::Read as _;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::FutureExt as _;
use futures_util::future::BoxFuture;
use nix::unistd::Pid;
use serde_json::Value;
use tokio::sync::oneshot;

use super::child::{Captured, GroupGuard};
use super::outcome::{
    BashEnding, BashError, BashFailed, BashOutput, BashStep, Clip, WorkingDirectoryGone,
};
use super::{Input, Tool, ToolContext, ToolOutput};

/// Bytes kept in memory at each end of the output; the middle of longer
/// output is counted, not stored.
const KEEP_BYTES: usize = 256 * 1024;
/// How long to wait for the output pipe to close once the group is gone
/// (a process that left the group with `setsid` may hold it open).
const DRAIN_GRACE: Duration = Duration::from_secs(2);

#[derive(Debug, Clone, Copy, Default)]
pub struct BashTool;

impl Tool for BashTool {
    fn name(&self) -> &str {
        "Bash"
    }

    fn read_only(&self) -> bool {
        false
    }

    fn call<'a>(&'a self, input: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        async move {
            match run(&input, ctx).await {
                Ok(out) | Err(out) => out,
            }
        }
        .boxed()
    }
}

enum Ending {
    Exited(std::process::ExitStatus),
    TimedOut(u64),
    Cancelled,
}

async fn run(input: &Value, ctx: &ToolContext) -> Result<ToolOutput, ToolOutput> {
    let input = Input(input);
    let command = input.str("command").map_err(ToolOutput::error)?;
    let timeout_ms = input
        .opt_u64("timeout")
        .map_err(ToolOutput::error)?
        .filter(|&ms| ms > 0)
        .unwrap_or(ctx.bash.default_timeout_ms)
        .min(ctx.bash.max_timeout_ms.max(1));

    if !ctx.cwd.is_dir() {
        return Err(ToolOutput::error(WorkingDirectoryGone {
            path: ctx.cwd.display().to_string(),
        }));
    }

    // Where the shell ends up, when a `cd` may stay: the trap writes it.
    let cwd_file = match &ctx.shell {
        Some(_) => {
            let dir = match &ctx.sandbox {
                Some(policy) => policy.tmp.clone(),
                None => std::env::temp_dir(),
            };
            let file = tempfile::Builder::new()
                .prefix("cadre-cwd-")
                .tempfile_in(&dir)
                .map_err(|e| failed(BashStep::Start, &e))?;
            Some(file)
        }
        None => None,
    };
    let traced;
    let command = match &cwd_file {
        Some(file) => {
            // On the command's own line, so its errors keep their line numbers.
            let body = format!(
                "pwd -P >| {} 2>/dev/null",
                quoted(&file.path().to_string_lossy())
            );
            traced = format!("trap {} EXIT; {command}", quoted(&body));
            traced.as_str()
        }
        None => command,
    };

    // One pipe for both streams keeps their interleaving.
    let (mut reader, writer) = std::io::pipe().map_err(|e| failed(BashStep::Pipe, &e))?;
    let writer_err = writer.try_clone().map_err(|e| failed(BashStep::Pipe, &e))?;

    // Sandboxed, cadre runs itself as the sandbox's program, which runs
    // `bash -c` inside (src/tools/sandbox/enter.rs).
    // With the network isolated, the call gets its own filtering proxy
    // (src/tools/sandbox/proxy.rs), stopped when the call ends.
    let mut proxy = None;
    let mut cmd = match &ctx.sandbox {
        Some(policy) => {
            let mut policy = (**policy).clone();
            if policy.isolate_network {
                let p = super::sandbox::proxy::Proxy::start(
                    policy.allowed_domains.clone(),
                    ctx.ask_host.clone(),
                )
                .map_err(|e| failed(BashStep::Start, &e))?;
                policy.proxy = Some(p.socket.clone());
                proxy = Some(p);
            }
            let (program, args) = super::sandbox::wrap(&policy, &["bash", "-c", command])
                .map_err(|e| failed(BashStep::Start, &e))?;
            let mut cmd = tokio::process::Command::new(program);
            cmd.args(args);
            cmd
        }
        None => {
            let mut cmd = tokio::process::Command::new("bash");
            cmd.arg("-c").arg(command);
            cmd
        }
    };
    ctx.env.apply(&mut cmd);
    cmd.current_dir(&ctx.cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::from(writer))
        .stderr(Stdio::from(writer_err))
        .process_group(0)
        .kill_on_drop(true);
    let mut child = cmd.spawn().map_err(|e| failed(BashStep::Start, &e))?;
    // Our copies of the write end went into `cmd`; drop it so only the
    // command's processes hold the pipe open.
    drop(cmd);
    let pgid = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .map(Pid::from_raw);
    // Kills the group if this future is dropped before the end (the engine
    // may drop a call instead of cancelling it).
    let mut guard = GroupGuard::new(pgid);

    let captured = Arc::new(Mutex::new(Captured::new(KEEP_BYTES)));
    let (done_tx, done_rx) = oneshot::channel::<()>();
    {
        let captured = Arc::clone(&captured);
        // A plain thread: a blocking read must not tie up the runtime's pool.
        std::thread::spawn(move || {
            let mut buf = [0u8; 8192];
            loop {
                match reader.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        if let Ok(mut c) = captured.lock() {
                            c.push(&buf[..n]);
                        }
                    }
                }
            }
            let _ = done_tx.send(());
        });
    }

    let ending = tokio::select! {
        status = child.wait() => match status {
            Ok(status) => Ending::Exited(status),
            Err(e) => {
                guard.kill();
                return Err(failed(BashStep::Wait, &e));
            }
        },
        () = tokio::time::sleep(Duration::from_millis(timeout_ms)) => Ending::TimedOut(timeout_ms),
        () = ctx.cancel.cancelled() => Ending::Cancelled,
    };
    // Whatever happened, nothing of the group may outlive the call.
    guard.kill();
    if !matches!(ending, Ending::Exited(_)) {
        let _ = child.wait().await;
    }
    let _ = tokio::time::timeout(DRAIN_GRACE, done_rx).await;

    let mut output = match captured.lock() {
        Ok(c) => c.text(ctx.bash.max_output_chars.max(1)),
        Err(_) => Clip::default(),
    };
    output.trim_end_newlines();
    let refused = proxy.as_ref().map(|p| p.refused()).unwrap_or_default();
    drop(proxy);
    let (moved_to, reset_to) = match (&ctx.shell, &cwd_file) {
        (Some(shell), Some(file)) => landed(file.path(), &ctx.cwd, shell),
        _ => (None, None),
    };
    if let (Some(shell), Some(to)) = (&ctx.shell, moved_to) {
        let _ = shell.moved_to.set(to);
    }
    let ending = match ending {
        Ending::Exited(status) if status.success() => {
            // cadre captures the command's two streams as one.
            let typed = super::typed::BashResult {
                stdout: super::typed::clip_text(&output),
                stderr: String::new(),
                interrupted: false,
                is_image: false,
                no_output_expected: false,
            };
            return Ok(ToolOutput::ok(BashOutput {
                output,
                refused,
                reset_to,
            })
            .with_typed(typed));
        }
        Ending::Exited(status) => match status.code() {
            Some(code) => BashEnding::Exit { code },
            None => {
                use std::os::unix::process::ExitStatusExt as _;
                BashEnding::Signal {
                    signal: status.signal().unwrap_or(0),
                }
            }
        },
        Ending::TimedOut(ms) => BashEnding::Timeout { ms },
        Ending::Cancelled => BashEnding::Cancelled,
    };
    Ok(ToolOutput::error(BashFailed {
        output,
        ending,
        refused,
        reset_to,
    }))
}

/// `s` as one word for bash.
fn quoted(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Where the shell is after the command, read from the trap's `file`:
/// (the folder it moved to, when it is not `started`; the folder it was
/// sent back to, when it ended outside the allowed ones). A command that
/// did not end normally (killed, `exec`) wrote nothing and moves nothing.
fn landed(
    file: &std::path::Path,
    started: &std::path::Path,
    shell: &super::ShellDirs,
) -> (Option<std::path::PathBuf>, Option<String>) {
    use std::io::Read as _;
    let mut text = String::new();
    // A path, not a stream: 64 KiB is more than any folder's name.
    let read = std::fs::File::open(file).and_then(|f| f.take(64 * 1024).read_to_string(&mut text));
    let path = text.strip_suffix('\n').unwrap_or(&text);
    if read.is_err() || path.is_empty() {
        return (None, None);
    }
    let real = |p: &std::path::Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let now = std::path::PathBuf::from(path);
    let started = real(started);
    if now == started {
        return (None, None);
    }
    if shell.allowed.iter().any(|a| now.starts_with(real(a))) {
        return (Some(now), None);
    }
    let root = real(&shell.root);
    let back = (root != started).then(|| root.clone());
    (back, Some(root.display().to_string()))
}

fn failed(step: BashStep, e: &std::io::Error) -> ToolOutput {
    ToolOutput::error(BashError {
        step,
        error: e.to_string(),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    async fn bash(input: Value) -> ToolOutput {
        let dir = tempfile::tempdir().unwrap();
        BashTool.call(input, &ToolContext::new(dir.path())).await
    }

    /// True once `pid` is gone or a zombie (dead, waiting to be reaped).
    fn dead(pid: i32) -> bool {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Err(_) => true,
            Ok(stat) => stat
                .rsplit(')')
                .next()
                .is_some_and(|rest| rest.trim_start().starts_with('Z')),
        }
    }

    async fn wait_dead(pid: i32) -> bool {
        for _ in 0..100 {
            if dead(pid) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        false
    }

    #[tokio::test]
    async fn captures_stdout_and_stderr_in_order() {
        let out = bash(json!({"command": "echo one; echo two >&2; echo three"})).await;
        assert!(!out.is_error);
        assert_eq!(out.text(), "one\ntwo\nthree");
    }

    #[tokio::test]
    async fn runs_in_cwd() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("marker.txt"), "").unwrap();
        let out = BashTool
            .call(json!({"command": "ls"}), &ToolContext::new(dir.path()))
            .await;
        assert_eq!(out.text(), "marker.txt");
    }

    #[tokio::test]
    async fn non_zero_exit_is_an_error_with_the_code() {
        let out = bash(json!({"command": "echo oops; exit 3"})).await;
        assert!(out.is_error);
        assert_eq!(out.text(), "oops\nExit code 3");
    }

    #[tokio::test]
    async fn silent_success_says_so() {
        let out = bash(json!({"command": "true"})).await;
        assert!(!out.is_error);
        assert_eq!(out.text(), "(no output)");
    }

    #[tokio::test]
    async fn long_output_keeps_head_and_tail() {
        let out = bash(
            json!({"command": "echo START; head -c 100000 /dev/zero | tr '\\0' x; echo; echo END"}),
        )
        .await;
        assert!(!out.is_error);
        assert!(out.text().starts_with("START\n"));
        assert!(out.text().ends_with("\nEND"));
        assert!(out.text().contains("characters truncated"));
        assert!(
            out.text().chars().count()
                < crate::config::BashSettings::default().max_output_chars + 200
        );
    }

    #[test]
    fn huge_output_drops_the_middle_and_counts_it() {
        let mut c = Captured::new(KEEP_BYTES);
        c.push(b"HEAD");
        for _ in 0..200 {
            c.push(&[b'y'; 8192]);
        }
        c.push(b"TAIL");
        assert!(c.dropped() > 0);
        let t = ToolOutput::ok(BashOutput {
            output: c.text(crate::config::BashSettings::default().max_output_chars),
            refused: vec![],
            reset_to: None,
        })
        .text();
        assert!(t.starts_with("HEAD") && t.ends_with("TAIL"));
        assert!(t.contains("\n\n[... about "), "{t}");
        assert!(t.contains("characters truncated"));
        assert!(t.chars().count() < crate::config::BashSettings::default().max_output_chars + 200);
    }

    #[tokio::test]
    async fn timeout_kills_the_whole_process_group() {
        let dir = tempfile::tempdir().unwrap();
        let cmd = "sleep 1000 & echo $! > pids; (sleep 1000 & echo $! >> pids; wait) & echo started; wait";
        let out = BashTool
            .call(
                json!({"command": cmd, "timeout": 3000}),
                &ToolContext::new(dir.path()),
            )
            .await;
        assert!(out.is_error);
        assert!(out.text().starts_with("started\n"), "{}", out.text());
        assert!(
            out.text().contains("timed out after 3000 ms"),
            "{}",
            out.text()
        );
        let pids = std::fs::read_to_string(dir.path().join("pids")).unwrap();
        let pids: Vec<i32> = pids.lines().map(|l| l.trim().parse().unwrap()).collect();
        assert_eq!(pids.len(), 2);
        for pid in pids {
            assert!(wait_dead(pid).await, "sleep {pid} survived");
        }
    }

    #[tokio::test]
    async fn background_jobs_do_not_outlive_a_finished_command() {
        let dir = tempfile::tempdir().unwrap();
        let out = BashTool
            .call(
                json!({"command": "sleep 1000 & echo $! > pid; echo done"}),
                &ToolContext::new(dir.path()),
            )
            .await;
        assert!(!out.is_error);
        assert_eq!(out.text(), "done");
        let pid: i32 = std::fs::read_to_string(dir.path().join("pid"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(wait_dead(pid).await);
    }

    #[tokio::test]
    async fn cancellation_kills_and_returns_output_so_far() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = ToolContext::new(dir.path());
        let cancel = ctx.cancel.clone();
        let path = dir.path().join("pid");
        let watcher = tokio::spawn(async move {
            // Cancel once the command has demonstrably started.
            while !std::fs::read_to_string(&path).is_ok_and(|s| s.ends_with('\n')) {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            cancel.cancel();
        });
        let out = BashTool
            .call(
                json!({"command": "echo begun; sleep 1000 & echo $! > pid; wait"}),
                &ctx,
            )
            .await;
        watcher.await.unwrap();
        assert!(out.is_error);
        assert!(out.text().starts_with("begun\n"), "{}", out.text());
        assert!(out.text().contains("cancelled"));
        let pid: i32 = std::fs::read_to_string(dir.path().join("pid"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(wait_dead(pid).await);
    }

    #[tokio::test]
    async fn dropping_the_call_kills_the_group() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = ToolContext::new(dir.path());
        let path = dir.path().join("pid");
        {
            let call = BashTool.call(json!({"command": "sleep 1000 & echo $! > pid; wait"}), &ctx);
            let started = async {
                while !std::fs::read_to_string(&path).is_ok_and(|s| s.ends_with('\n')) {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            };
            tokio::select! {
                _ = call => panic!("the command should still be running"),
                () = started => {}
            }
        }
        let pid: i32 = std::fs::read_to_string(&path)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(wait_dead(pid).await);
    }

    #[tokio::test]
    async fn wrong_input_types_are_errors() {
        let out = bash(json!({"command": 5})).await;
        assert!(out.is_error && out.text().contains("`command` must be a string"));
        let out = bash(json!({"command": "true", "timeout": "soon"})).await;
        assert!(out.is_error && out.text().contains("`timeout`"));
        let out = bash(json!({})).await;
        assert!(out.is_error && out.text().contains("missing required field `command`"));
    }
}
