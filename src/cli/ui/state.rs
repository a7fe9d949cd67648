//! What the web view shows, read from the files the sessions write as they
//! run: each session's transcript, its sub-agents' meta files and
//! transcripts (through `runtime::resume` and `runtime::session_dirs`, the
//! readers `cadre sessions` uses). Any cadre process writing to this
//! project's session folder is seen this way, with no connection to it: a
//! `cadre run`, a chat, an SDK's `cadre -p`, a fleet worker on another host
//! sharing the folder. Each file is read again only when its length or
//! time of change moved.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use serde::Serialize;
use serde_json::{Value, json};

use super::super::sessions::{Prices, summary};
use crate::message::{ContentBlock, Role, Usage, cost_of, price_of};
use crate::runtime::resume::{self, Restored};
use crate::runtime::session_dirs::{Found, SessionDirs};

/// A session with no `end` line whose files changed this recently, or
/// with a sub-agent running, is shown as running; one quiet for longer is
/// `idle` (a chat waiting for its user, or a process that was killed).
const QUIET: Duration = Duration::from_secs(30);

/// The longest text of one block a transcript view sends.
const MAX_BLOCK_CHARS: usize = 4000;
/// The most messages a transcript view sends (the last ones).
const MAX_MESSAGES: usize = 400;

/// A file's length and time of change: when both are the same, its
/// contents are taken to be.
type Stamp = (u64, Option<SystemTime>);

/// A session's row, with the stamps of the files it was made from.
type Row = (Vec<Option<Stamp>>, Value);

fn stamp(path: &Path) -> Option<Stamp> {
    let m = std::fs::metadata(path).ok()?;
    Some((m.len(), m.modified().ok()))
}

pub struct Source {
    dirs: SessionDirs,
    prices: Prices,
    /// Transcripts read, by path, with the stamp they were read at.
    files: Mutex<HashMap<PathBuf, (Stamp, Arc<Restored>)>>,
    /// Session rows, by folder, with the stamps of the files they came from.
    rows: Mutex<HashMap<PathBuf, Row>>,
}

/// One agent of a session's tree.
#[derive(Debug, Serialize)]
struct Agent {
    /// `main`, or the sub-agent's id.
    id: String,
    parent: Option<String>,
    /// The agent type (or the main session's agent), and a sub-agent's
    /// own name when it was given one.
    kind: String,
    name: Option<String>,
    description: String,
    /// running, completed, failed, killed (sub-agents); running, idle,
    /// ended (the main agent).
    status: String,
    background: bool,
    fork: bool,
    model: Option<String>,
    /// The tools it is calling now (running agents only).
    current_tools: Vec<String>,
    turns: u32,
    tokens: u64,
    usage: Usage,
    /// Cache reads ÷ all input tokens; `null` before any request.
    cache_read_share: Option<f64>,
    /// From `[prices]`; `null` when its model has none.
    cost_usd: Option<f64>,
    started: Option<String>,
    ended: Option<String>,
    last_activity: Option<String>,
}

impl Source {
    pub fn new(dirs: SessionDirs, prices: Prices) -> Source {
        Source {
            dirs,
            prices,
            files: Mutex::new(HashMap::new()),
            rows: Mutex::new(HashMap::new()),
        }
    }

    pub fn folder(&self) -> &Path {
        &self.dirs.dir
    }

    /// A transcript, read again only when it changed.
    fn load(&self, path: &Path) -> Option<Arc<Restored>> {
        let st = stamp(path)?;
        if let Ok(files) = self.files.lock()
            && let Some((s, r)) = files.get(path)
            && *s == st
        {
            return Some(r.clone());
        }
        let r = Arc::new(resume::load(path).ok()?);
        if let Ok(mut files) = self.files.lock() {
            files.insert(path.to_path_buf(), (st, r.clone()));
        }
        Some(r)
    }

    /// Every session of the project, newest activity last, each with its
    /// status.
    pub fn sessions(&self) -> Value {
        let mut rows = Vec::new();
        for found in self.dirs.all() {
            if let Some(row) = self.row(&found) {
                rows.push(row);
            }
        }
        let key = |v: &Value| {
            (
                v["last_activity"].as_str().unwrap_or("").to_string(),
                v["id"].as_str().unwrap_or("").to_string(),
            )
        };
        rows.sort_by_key(key);
        Value::Array(rows)
    }

    fn row(&self, found: &Found) -> Option<Value> {
        let main = resume::main_file(&found.folder);
        let metas = crate::runtime::restore::sub_agent_metas(&found.folder);
        let mut stamps = vec![stamp(&main)];
        for (meta, v) in &metas {
            stamps.push(stamp(meta));
            if let Some(id) = v.get("agent_id").and_then(Value::as_str) {
                stamps.push(stamp(&resume::sub_agent_transcript(&found.folder, id)));
            }
        }
        let cached = self.rows.lock().ok().and_then(|rows| {
            rows.get(&found.folder)
                .filter(|(s, _)| *s == stamps)
                .map(|(_, v)| v.clone())
        });
        let mut row = match cached {
            Some(v) => v,
            None => {
                let r = self.load(&main)?;
                let v = serde_json::to_value(summary(found, &r, &self.prices)).ok()?;
                if let Ok(mut rows) = self.rows.lock() {
                    rows.insert(found.folder.clone(), (stamps, v.clone()));
                }
                v
            }
        };
        // The status moves with time alone (a session falls quiet).
        let r = self.load(&main)?;
        row["status"] = json!(self.main_status(&found.folder, &r, &metas));
        Some(row)
    }

    /// `ended` when the last run wrote its `end` line; `running` while a
    /// sub-agent runs or its files changed within [`QUIET`]; else `idle`.
    fn main_status(&self, folder: &Path, r: &Restored, metas: &[(PathBuf, Value)]) -> &'static str {
        if r.ended.is_some() {
            return "ended";
        }
        let child_running = metas
            .iter()
            .any(|(_, v)| v.get("status").and_then(Value::as_str) == Some("running"));
        let recent = |p: &Path| {
            std::fs::metadata(p)
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age < QUIET)
        };
        if child_running || recent(&resume::main_file(folder)) {
            "running"
        } else {
            "idle"
        }
    }

    fn found(&self, id: &str) -> Option<Found> {
        self.dirs.find(id).ok()
    }

    /// A session's agents, the main one first, then its sub-agents in
    /// the order they started; `None` for an unknown session.
    pub fn tree(&self, id: &str) -> Option<Value> {
        let found = self.found(id)?;
        let folder = &found.folder;
        let main = self.load(&resume::main_file(folder))?;
        let metas = crate::runtime::restore::sub_agent_metas(folder);
        let status = self.main_status(folder, &main, &metas);
        let header = main.header.as_ref();
        let model = header.map(|h| h.model.clone());
        let mut agents = vec![Agent {
            id: "main".into(),
            parent: None,
            kind: header
                .and_then(|h| h.agent.clone())
                .unwrap_or_else(|| "main".into()),
            name: None,
            description: String::new(),
            status: status.into(),
            background: false,
            fork: false,
            current_tools: if status == "running" {
                current_tools(&main)
            } else {
                Vec::new()
            },
            turns: main.turns,
            tokens: main.usage.total(),
            usage: main.usage,
            cache_read_share: cache_read_share(&main.usage),
            cost_usd: self.cost(model.as_deref(), &main),
            started: main.started.clone(),
            ended: main.ended.clone(),
            last_activity: main.last_activity.clone(),
            model,
        }];
        let mut children = Vec::new();
        for (_, meta) in &metas {
            let text = |k: &str| meta.get(k).and_then(Value::as_str).map(str::to_string);
            let Some(agent_id) = text("agent_id") else {
                continue;
            };
            let r = self
                .load(&resume::sub_agent_transcript(folder, &agent_id))
                .unwrap_or_default();
            let status = text("status").unwrap_or_else(|| "running".into());
            let model = text("model");
            children.push(Agent {
                parent: Some(text("parent_agent_id").unwrap_or_else(|| "main".into())),
                kind: text("agent_type").unwrap_or_default(),
                name: text("name"),
                description: text("description").unwrap_or_default(),
                background: meta.get("background").and_then(Value::as_bool) == Some(true),
                fork: meta.get("fork").and_then(Value::as_bool) == Some(true),
                current_tools: if status == "running" {
                    current_tools(&r)
                } else {
                    Vec::new()
                },
                turns: r.turns,
                tokens: r.usage.total(),
                usage: r.usage,
                cache_read_share: cache_read_share(&r.usage),
                cost_usd: self.cost(model.as_deref(), &r),
                started: text("started").or_else(|| r.started.clone()),
                ended: text("ended"),
                last_activity: r.last_activity.clone(),
                id: agent_id,
                status,
                model,
            });
        }
        children.sort_by(|a, b| (&a.started, &a.id).cmp(&(&b.started, &b.id)));
        agents.extend(children);
        Some(json!({
            "id": id,
            "status": status,
            "folder": folder,
            "agents": agents,
        }))
    }

    /// What an agent's requests cost: its own at its model's price plus
    /// its tools' own requests at theirs.
    fn cost(&self, model: Option<&str>, r: &Restored) -> Option<f64> {
        let own = cost_of(Some(price_of(&self.prices, model?)?), &r.usage);
        r.side_usage.iter().try_fold(own, |sum, (m, u)| {
            Some(sum + cost_of(Some(price_of(&self.prices, m)?), u))
        })
    }

    /// One agent's conversation, the last [`MAX_MESSAGES`] messages with
    /// each block's text cut to [`MAX_BLOCK_CHARS`]; `None` for an unknown
    /// session or agent.
    pub fn transcript(&self, id: &str, agent: &str) -> Option<Value> {
        let found = self.found(id)?;
        let path = if agent == "main" {
            resume::main_file(&found.folder)
        } else {
            if !agent
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            {
                return None;
            }
            resume::sub_agent_transcript(&found.folder, agent)
        };
        let r = self.load(&path)?;
        let skip = r.history.len().saturating_sub(MAX_MESSAGES);
        let messages: Vec<Value> = r
            .history
            .iter()
            .skip(skip)
            .map(|m| {
                let role = match m.role {
                    Role::User => "user",
                    Role::Assistant => "assistant",
                };
                let blocks: Vec<Value> = m.content.iter().map(block).collect();
                json!({"role": role, "blocks": blocks})
            })
            .collect();
        Some(json!({
            "session": id,
            "agent": agent,
            "omitted": skip,
            "messages": messages,
        }))
    }
}

/// The tools of the last assistant message, when nothing answered it yet.
fn current_tools(r: &Restored) -> Vec<String> {
    r.history
        .last()
        .filter(|m| m.role == Role::Assistant)
        .map(|m| m.tool_uses().map(|(_, name, _)| name.to_string()).collect())
        .unwrap_or_default()
}

fn cache_read_share(u: &Usage) -> Option<f64> {
    let input = u.input_tokens + u.cache_creation_input_tokens + u.cache_read_input_tokens;
    (input > 0).then(|| u.cache_read_input_tokens as f64 / input as f64)
}

fn clip(s: &str) -> String {
    match s.char_indices().nth(MAX_BLOCK_CHARS) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

/// A content block as the page draws it: its kind, a title and a text.
fn block(b: &ContentBlock) -> Value {
    match b {
        ContentBlock::Text { text } => json!({"kind": "text", "text": clip(text)}),
        ContentBlock::Thinking { thinking, .. } => {
            json!({"kind": "thinking", "text": clip(thinking)})
        }
        ContentBlock::RedactedThinking { .. } => json!({"kind": "thinking", "text": "(redacted)"}),
        ContentBlock::ToolUse { name, input, .. }
        | ContentBlock::ServerToolUse { name, input, .. } => {
            json!({"kind": "tool_use", "title": name, "text": clip(&input.to_string())})
        }
        ContentBlock::ToolResult {
            content, is_error, ..
        } => {
            let text: Vec<&str> = content
                .iter()
                .map(|c| match c {
                    crate::message::ToolResultContent::Text { text } => text.as_str(),
                    crate::message::ToolResultContent::Image { .. } => "(image)",
                })
                .collect();
            json!({"kind": "tool_result", "error": is_error, "text": clip(&text.join("\n"))})
        }
        ContentBlock::Image { .. } => json!({"kind": "image", "text": "(image)"}),
        ContentBlock::WebSearchToolResult { .. } => {
            json!({"kind": "tool_result", "text": "(web search results)"})
        }
    }
}
