//! Fork benchmarks: the memory ten forks of a 1 MiB history add (they share
//! the parent's messages by `Arc`, so only the two new messages of each
//! fork are allocated), and the bytes two sibling fork requests share for a
//! 50 KB parent history (`fork_messages` + `Provider::request_body`).
//!
//! A counting global allocator measures the memory exactly; before divan
//! runs, `main` prints the figures as `FIGURE name=value` lines for
//! `bench/run-all`. divan then times building the forks and their bodies.

#![allow(clippy::unwrap_used, clippy::expect_used)]
// The counting allocator forwards to the system allocator.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use cadre::agent_tool::fork_messages;
use cadre::config::ProviderSettings;
use cadre::message::{
    ContentBlock, History, Message, ModelRequest, ToolDefinition, ToolResultContent,
};
use cadre::provider::Provider;
use serde_json::json;

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static TOTAL: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call forwards to `System` with the caller's layout; the
// counters are plain atomics.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        TOTAL.fetch_add(layout.size(), Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size, Ordering::Relaxed);
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        TOTAL.fetch_add(new_size, Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

const PLACEHOLDER: &str = include_str!("../agents/templates/fork_placeholder.hbs");
const DIRECTIVE: &str = include_str!("../agents/templates/fork_child.hbs");

/// A history of about `bytes` of text: user/assistant turns of 4 KiB, the
/// assistant turns with a tool call and the user turns with its result.
fn history(bytes: usize) -> History {
    let chunk = "The quick brown fox reads src/lib.rs and reports. ".repeat(80);
    let mut h: History = vec![Arc::new(Message::user_text("Refactor the auth module."))];
    let mut size = 0;
    let mut i = 0;
    while size < bytes {
        let id = format!("toolu_{i:05}");
        h.push(Arc::new(Message::assistant(vec![
            ContentBlock::text(chunk.clone()),
            ContentBlock::ToolUse {
                id: id.clone(),
                name: "Read".into(),
                input: json!({"file_path": format!("/src/file{i}.rs")}),
            },
        ])));
        h.push(Arc::new(Message::user(vec![ContentBlock::tool_result(
            &id,
            chunk.clone(),
            false,
        )])));
        size += 2 * chunk.len();
        i += 1;
    }
    h
}

/// The parent's current assistant message: `n` fork calls.
fn fork_calls(n: usize) -> Arc<Message> {
    let mut blocks = vec![ContentBlock::text("Splitting the work.")];
    for i in 0..n {
        blocks.push(ContentBlock::ToolUse {
            id: format!("toolu_fork_{i}"),
            name: "Agent".into(),
            input: json!({"description": format!("part {i}"), "prompt": format!("Do part {i}."), "fork": true}),
        });
    }
    Arc::new(Message::assistant(blocks))
}

fn directive(i: usize) -> String {
    let d = DIRECTIVE.replace("{{directive}}", &format!("Do part {i}."));
    assert!(d.starts_with("<fork-boilerplate>"));
    d
}

fn make_forks(prior: &History, assistant: &Arc<Message>, n: usize) -> Vec<History> {
    (0..n)
        .map(|i| fork_messages(prior, assistant, PLACEHOLDER, directive(i), None))
        .collect()
}

fn request(messages: History) -> ModelRequest {
    let tools: Vec<ToolDefinition> = ["Read", "Grep", "Glob", "Bash", "Edit", "Write", "Agent"]
        .iter()
        .map(|n| ToolDefinition {
            name: (*n).into(),
            description: format!("The {n} tool. ").repeat(40),
            input_schema: json!({"type": "object", "properties": {"x": {"type": "string"}}}),
        })
        .collect();
    ModelRequest {
        model: "claude-sonnet-4-5".into(),
        system: "You are cadre, a coding agent. ".repeat(100).into(),
        tools: tools.into(),
        messages,
        max_tokens: 4096,
        sampling: Default::default(),
        server_tools: Vec::new(),
    }
}

fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// Prints the figures for `bench/run-all`.
fn figures() {
    // Memory added by 10 forks of a 1 MiB history.
    let prior = history(1024 * 1024);
    let assistant = fork_calls(10);
    let parent_bytes: usize = prior
        .iter()
        .flat_map(|m| m.content.iter())
        .map(|b| match b {
            ContentBlock::Text { text } => text.len(),
            ContentBlock::ToolResult { content, .. } => content
                .iter()
                .map(|c| match c {
                    ToolResultContent::Text { text } => text.len(),
                    ToolResultContent::Image { .. } => 0,
                })
                .sum(),
            _ => 0,
        })
        .sum();
    let live_before = LIVE.load(Ordering::SeqCst);
    let total_before = TOTAL.load(Ordering::SeqCst);
    let forks = make_forks(&prior, &assistant, 10);
    let live_added = LIVE.load(Ordering::SeqCst) - live_before;
    let total_added = TOTAL.load(Ordering::SeqCst) - total_before;
    assert_eq!(forks.len(), 10);
    assert!(forks.iter().all(|f| f.len() == prior.len() + 2));
    println!("FIGURE fork_parent_history_bytes={parent_bytes}");
    println!("FIGURE fork_parent_messages={}", prior.len());
    println!("FIGURE fork10_live_bytes_added={live_added}");
    println!("FIGURE fork10_allocated_bytes={total_added}");
    drop(forks);

    // Bytes shared by two sibling fork requests of a 50 KB history.
    let prior = history(50 * 1000);
    let assistant = fork_calls(2);
    let provider = Provider::new(&ProviderSettings::default(), &[]).unwrap();
    let mut bodies = make_forks(&prior, &assistant, 2)
        .into_iter()
        .map(|m| provider.request_body(&request(m)));
    let (a, b) = (bodies.next().unwrap(), bodies.next().unwrap());
    let common = common_prefix(&a, &b);
    let directive_at = String::from_utf8_lossy(&a)
        .rfind("Your directive: ")
        .unwrap();
    println!("FIGURE fork_body_a_bytes={}", a.len());
    println!("FIGURE fork_body_b_bytes={}", b.len());
    println!("FIGURE fork_common_prefix_bytes={common}");
    println!(
        "FIGURE fork_shared_share_a={:.4}",
        common as f64 / a.len() as f64
    );
    println!(
        "FIGURE fork_shared_share_b={:.4}",
        common as f64 / b.len() as f64
    );
    println!(
        "FIGURE fork_bytes_after_directive_start={}",
        a.len() - directive_at
    );
    println!("FIGURE fork_differing_tail_bytes={}", a.len() - common);
    assert!(
        common > directive_at,
        "siblings must share everything up to their directive text"
    );
}

fn main() {
    figures();
    divan::main();
}

/// Building 10 forks of a 1 MiB history (pointer copies plus two messages).
#[divan::bench(sample_count = 20)]
fn ten_forks_of_1mib(bencher: divan::Bencher) {
    let prior = history(1024 * 1024);
    let assistant = fork_calls(10);
    bencher.bench(|| make_forks(divan::black_box(&prior), &assistant, 10));
}

/// Serialising one fork request of a 50 KB history.
#[divan::bench(sample_count = 20)]
fn fork_request_body_50kb(bencher: divan::Bencher) {
    let prior = history(50 * 1000);
    let assistant = fork_calls(2);
    let provider = Provider::new(&ProviderSettings::default(), &[]).unwrap();
    let req = request(fork_messages(
        &prior,
        &assistant,
        PLACEHOLDER,
        directive(0),
        None,
    ));
    bencher.bench(|| provider.request_body(divan::black_box(&req)));
}
