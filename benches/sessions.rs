//! Long-lived session benchmarks, through the real binary and a real HTTP
//! model server on loopback (a few lines of HTTP/1.1 below, answering with
//! SSE streams).
//!
//! 1. **Resume.** A 10 MiB transcript (header, then turns of a Read call
//!    and its 4 KiB result) is written with cadre's own transcript writer;
//!    `cadre run --resume ID` then sends one request. Reported: the wall
//!    time and peak RSS of that process, against a fresh `cadre run` of
//!    the same project; and, in process, the time and peak heap of
//!    `runtime::resume::load` alone.
//! 2. **Compaction.** A scripted 200-turn session (each turn a Read call of
//!    a 4 KiB file; the server counts a token per 4 request bytes, the
//!    window is 40,000 tokens, compaction at 0.8) is run with and without
//!    `compact.auto`. Reported: the bytes of every request sent in each
//!    run, and for each compaction the share of its request that is the
//!    previous request's prefix (what the provider can serve from cache),
//!    and the same share for the first request after it.
//!
//! Prints `FIGURE name=value` lines. Run with `cargo bench --bench sessions`
//! (a release build; about a minute on 2 cores).

#![allow(clippy::unwrap_used, clippy::expect_used)]
// The counting allocator forwards to the system allocator; wait4 is libc.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cadre::message::{ContentBlock, Message, Role, Sampling, Usage};
use cadre::runtime::resume::{self, SessionHeader, TRANSCRIPT_VERSION};
use cadre::runtime::transcript::Transcript;
use serde_json::{Value, json};

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(by: usize) {
    let now = LIVE.fetch_add(by, Ordering::Relaxed) + by;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

// SAFETY: every call forwards to `System` with the caller's layout; the
// counters are plain atomics.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        grew(layout.size());
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        grew(new_size);
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

const MODEL: &str = "claude-sonnet-4-5";
const SESSION: &str = "0b7d5c9e-1111-4222-8333-444455556666";
const TURNS: usize = 200;

fn figure(name: &str, value: impl std::fmt::Display) {
    println!("FIGURE {name}={value}");
}

// ---- a model server -------------------------------------------------------

/// What the server answers, given a request body.
type Script = dyn Fn(&[u8]) -> Value + Send + Sync;

/// A model server on loopback: every request body is recorded, every
/// answer is the SSE stream of the message `script` returns
/// (`{"text": …}` or `{"tool": [id, name, input]}`, with `input_tokens`).
struct Server {
    url: String,
    bodies: Arc<Mutex<Vec<Vec<u8>>>>,
}

fn start_server(script: Arc<Script>) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let bodies = Arc::new(Mutex::new(Vec::new()));
    let record = Arc::clone(&bodies);
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let (script, record) = (Arc::clone(&script), Arc::clone(&record));
            std::thread::spawn(move || serve(stream, &*script, &record));
        }
    });
    Server { url, bodies }
}

fn serve(stream: TcpStream, script: &Script, record: &Mutex<Vec<Vec<u8>>>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':')
            && k.eq_ignore_ascii_case("content-length")
        {
            length = v.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).unwrap();
    let answer = script(&body);
    record.lock().unwrap().push(body);
    let mut out = stream;
    let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";
    out.write_all(head.as_bytes()).unwrap();
    out.write_all(&sse(&answer)).unwrap();
}

fn sse(answer: &Value) -> Vec<u8> {
    let input_tokens = answer["input_tokens"].as_u64().unwrap_or(10);
    let mut events = vec![
        json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant",
            "model": MODEL, "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": input_tokens, "output_tokens": 1}}}),
    ];
    let stop = if let Some(text) = answer["text"].as_str() {
        events.push(json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}));
        events.push(json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}));
        "end_turn"
    } else {
        let t = &answer["tool"];
        events.push(json!({"type": "content_block_start", "index": 0,
            "content_block": {"type": "tool_use", "id": t[0], "name": t[1], "input": {}}}));
        events.push(json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": t[2].to_string()}}));
        "tool_use"
    };
    events.push(json!({"type": "content_block_stop", "index": 0}));
    events.push(
        json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
        "usage": {"output_tokens": 20}}),
    );
    events.push(json!({"type": "message_stop"}));
    let mut out = Vec::new();
    for e in events {
        out.extend_from_slice(
            format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap()).as_bytes(),
        );
    }
    out
}

// ---- running the binary ---------------------------------------------------

struct Project {
    dir: tempfile::TempDir,
    home: tempfile::TempDir,
    config: PathBuf,
}

fn project(config: &str) -> Project {
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let config_path = home.path().join("bench.toml");
    std::fs::write(
        &config_path,
        format!("[provider]\nmodel = \"{MODEL}\"\nmax_tokens = 1024\n[agents]\ndefault_max_turns = 1000\n{config}"),
    )
    .unwrap();
    Project {
        dir,
        home,
        config: config_path,
    }
}

/// Runs the binary; returns its wall time and peak RSS in KiB.
// `wait4` reaps the child (it also gives its rusage), not `Child::wait`.
#[allow(clippy::zombie_processes)]
fn run(p: &Project, server: &Server, args: &[&str]) -> (Duration, i64) {
    let started = Instant::now();
    // `CADRE_BIN` measures another build of the binary (a release one, when
    // this bench itself was built in debug).
    let bin = std::env::var_os("CADRE_BIN")
        .map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_cadre")), PathBuf::from);
    let child = std::process::Command::new(bin)
        .current_dir(p.dir.path())
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", p.home.path())
        .env("ANTHROPIC_BASE_URL", &server.url)
        .env("ANTHROPIC_API_KEY", "bench-key")
        .arg("--config")
        .arg(&p.config)
        .arg("-q")
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid = i32::try_from(child.id()).unwrap();
    let mut status = 0;
    // SAFETY: plain zeroed C structs filled in by wait4 for our own child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let waited = unsafe { libc::wait4(pid, &raw mut status, 0, &raw mut usage) };
    let elapsed = started.elapsed();
    assert_eq!(waited, pid);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "cadre {args:?} failed ({status})"
    );
    (elapsed, usage.ru_maxrss)
}

// ---- 1. resume ------------------------------------------------------------

/// Writes a transcript of about `bytes` for the project `dir` into the
/// session folder under `home` (`~/.claude/projects/<key>/<id>.jsonl`):
/// turns of a Read call and its 4 KiB result, each with its usage line.
fn write_transcript(dir: &Path, home: &Path, bytes: u64) -> PathBuf {
    let key = cadre::config::project_key(&dir.canonicalize().unwrap());
    let folder = home.join(".claude/projects").join(key);
    std::fs::create_dir_all(&folder).unwrap();
    let path = folder.join(format!("{SESSION}.jsonl"));
    let t = Transcript::open(path.clone(), "main", None);
    let header = SessionHeader {
        version: TRANSCRIPT_VERSION,
        session_id: SESSION.into(),
        model: MODEL.into(),
        agent: None,
        mode: None,
        tool_names: vec!["Read".into(), "Glob".into(), "Grep".into()],
        sampling: Sampling::default(),
        max_tokens: 1024,
        generation: 1,
        cwd: Some(dir.to_path_buf()),
        forked_from: None,
    };
    t.record("session", serde_json::to_value(header).unwrap());
    t.message(&Message::user_text("survey the code base"));
    let body = "fn main() { println!(\"hello\"); } // a line of a source file\n".repeat(70);
    let mut n = 0;
    while std::fs::metadata(&path).unwrap().len() < bytes {
        let id = format!("toolu_{n:06}");
        t.message(&Message {
            role: Role::Assistant,
            content: vec![
                ContentBlock::text(format!("Reading file {n} next.")),
                ContentBlock::ToolUse {
                    id: id.clone(),
                    name: "Read".into(),
                    input: json!({"file_path": format!("src/file_{n}.rs")}),
                },
            ],
        });
        let usage = Usage {
            input_tokens: 10,
            output_tokens: 20,
            cache_creation_input_tokens: 0,
            cache_read_input_tokens: 1000,
            ..Usage::default()
        };
        t.record("usage", json!({"usage": usage}));
        t.message(&Message::user(vec![ContentBlock::tool_result(
            &id,
            body.clone(),
            false,
        )]));
        n += 1;
    }
    t.message(&Message {
        role: Role::Assistant,
        content: vec![ContentBlock::text("Done surveying.")],
    });
    path
}

fn bench_resume() {
    let p = project("");
    let path = write_transcript(p.dir.path(), p.home.path(), 10 * 1024 * 1024);
    let size = std::fs::metadata(&path).unwrap().len();
    figure("resume_transcript_bytes", size);

    // In process: the reader alone.
    let mut best = Duration::MAX;
    let mut peak = 0;
    let mut messages = 0;
    for _ in 0..3 {
        let base = LIVE.load(Ordering::Relaxed);
        PEAK.store(base, Ordering::Relaxed);
        let started = Instant::now();
        let r = resume::load(&path).unwrap();
        best = best.min(started.elapsed());
        peak = PEAK.load(Ordering::Relaxed) - base;
        messages = r.history.len();
    }
    figure(
        "resume_load_ms",
        format!("{:.1}", best.as_secs_f64() * 1000.0),
    );
    figure(
        "resume_load_peak_heap_mib",
        format!("{:.1}", peak as f64 / 1048576.0),
    );
    figure("resume_messages", messages);

    // Through the binary: one request after the resume, against a fresh run.
    let server = start_server(Arc::new(|_: &[u8]| json!({"text": "ok"})));
    let mut fresh = (Duration::MAX, 0);
    let mut resumed = (Duration::MAX, 0);
    for _ in 0..3 {
        let (t, rss) = run(&p, &server, &["run", "--resume", SESSION, "go on"]);
        resumed = (resumed.0.min(t), resumed.1.max(rss));
        // Each resume appends its lines: keep the file at its size.
        let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        f.set_len(size).unwrap();
        let (t, rss) = run(&p, &server, &["run", "go on"]);
        fresh = (fresh.0.min(t), fresh.1.max(rss));
    }
    let body = server
        .bodies
        .lock()
        .unwrap()
        .iter()
        .map(Vec::len)
        .max()
        .unwrap_or(0);
    figure("resume_request_bytes", body);
    figure("resume_run_ms", resumed.0.as_millis());
    figure(
        "resume_run_peak_rss_mib",
        format!("{:.1}", resumed.1 as f64 / 1024.0),
    );
    figure("fresh_run_ms", fresh.0.as_millis());
    figure(
        "fresh_run_peak_rss_mib",
        format!("{:.1}", fresh.1 as f64 / 1024.0),
    );
}

// ---- 2. compaction --------------------------------------------------------

fn is_compaction(body: &[u8]) -> bool {
    String::from_utf8_lossy(body).contains("Write the summary now")
}

fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// Runs the scripted session; returns every request body in order.
fn scripted_session(auto: bool) -> Vec<Vec<u8>> {
    let p = project(&format!(
        "[compact]\nauto = {auto}\nthreshold = 0.8\n[compact.windows]\n\"claude-\" = 40000\n"
    ));
    let file = p.dir.path().join("notes.txt");
    std::fs::write(
        &file,
        "A line of notes that the agent reads again and again.\n".repeat(75),
    )
    .unwrap();
    let turns = Arc::new(AtomicUsize::new(0));
    let file = file.display().to_string();
    let server = start_server(Arc::new(move |body: &[u8]| {
        // A token per 4 bytes of request: the estimate compaction works from.
        let input_tokens = body.len() / 4;
        if is_compaction(body) {
            return json!({"text": "SUMMARY: the notes were read many times; nothing changed.", "input_tokens": input_tokens});
        }
        let n = turns.fetch_add(1, Ordering::SeqCst);
        if n + 1 >= TURNS {
            return json!({"text": "all read", "input_tokens": input_tokens});
        }
        json!({"tool": [format!("toolu_{n:04}"), "Read", {"file_path": file}], "input_tokens": input_tokens})
    }));
    run(&p, &server, &["run", "read the notes, again and again"]);
    server.bodies.lock().unwrap().clone()
}

fn bench_compaction() {
    let with = scripted_session(true);
    let without = scripted_session(false);
    let total = |v: &[Vec<u8>]| v.iter().map(Vec::len).sum::<usize>();
    let (w, wo) = (total(&with), total(&without));
    figure("compaction_requests_with", with.len());
    figure("compaction_requests_without", without.len());
    figure("compaction_request_bytes_with", w);
    figure("compaction_request_bytes_without", wo);
    figure(
        "compaction_bytes_saved_pct",
        format!("{:.1}", 100.0 * (wo as f64 - w as f64) / wo as f64),
    );
    figure(
        "compaction_largest_request_with",
        with.iter().map(Vec::len).max().unwrap_or(0),
    );
    figure(
        "compaction_largest_request_without",
        without.iter().map(Vec::len).max().unwrap_or(0),
    );
    let mut k = 0;
    for i in 1..with.len() {
        if !is_compaction(&with[i]) {
            continue;
        }
        k += 1;
        let share = |a: &[u8], b: &[u8]| 100.0 * common_prefix(a, b) as f64 / b.len() as f64;
        // The summary request against the request before it; the first
        // request after it against the summary request.
        figure(
            &format!("compaction_{k}_request_prefix_share_pct"),
            format!("{:.1}", share(&with[i - 1], &with[i])),
        );
        if let Some(next) = with.get(i + 1) {
            figure(
                &format!("compaction_{k}_next_request_prefix_share_pct"),
                format!("{:.1}", share(&with[i], next)),
            );
            figure(
                &format!("compaction_{k}_bytes_before_after"),
                format!("{}/{}", with[i - 1].len(), next.len()),
            );
        }
    }
    figure("compactions", k);
}

fn main() {
    // `cargo bench --bench sessions -- resume` (or `compaction`) runs one part.
    let only: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let wanted = |name: &str| only.is_empty() || only.iter().any(|o| o == name);
    if wanted("resume") {
        bench_resume();
    }
    if wanted("compaction") {
        bench_compaction();
    }
}
