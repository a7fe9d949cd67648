//! `cadre mcp list|get NAME`, and the connecting that `tools schema --mcp`
//! shares with them: the configured MCP servers are started, awaited (at
//! most `mcp.startup_timeout_ms`), inspected and closed again. Only in a
//! trusted folder: elsewhere nothing is started and the commands say so.

use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Subcommand};
use serde_json::{Value, json};

use super::output::print_json;
use super::{CliError, GlobalArgs, Overrides, load_snapshot};
use crate::config::McpServerConfig;
use crate::mcp::{McpManager, ServerState};
use crate::snapshot::Snapshot;

#[derive(Debug, Subcommand)]
pub enum McpCommand {
    /// Connect to every configured server and show its status and tool count.
    List(ListArgs),
    /// Connect to one server and show its status, tools and stderr tail.
    Get(GetArgs),
    /// Start one server, list its tools, resources and prompts, stop it,
    /// and show how long each step took (exit status 1 when it fails).
    Test(GetArgs),
    /// Sign in to an HTTP or SSE server that wants OAuth: prints the authorization
    /// URL (and opens a browser when there is a display), waits for the
    /// redirect on 127.0.0.1, and keeps the tokens in
    /// `~/.config/cadre/mcp-tokens/` (mode 0600). Later connections send
    /// the token and refresh it when it expires.
    Login(LoginArgs),
    /// Forget the OAuth tokens `cadre mcp login` stored for a server.
    Logout(LogoutArgs),
}

#[derive(Debug, Args)]
pub struct LoginArgs {
    /// The server's name.
    name: String,
    /// Do not try to open a browser; only print the URL.
    #[arg(long)]
    no_browser: bool,
    /// How long to wait for the browser to come back, in seconds.
    #[arg(long, default_value_t = 300, value_name = "SECONDS")]
    timeout: u64,
}

#[derive(Debug, Args)]
pub struct LogoutArgs {
    /// The server's name.
    name: String,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
pub struct GetArgs {
    /// The server's name.
    name: String,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// The shared servers of `snap`, connected and settled, or `None` (after a
/// note on stderr) in a folder that is not trusted. Close with
/// `McpManager::shutdown`.
pub async fn connect_all(snap: &Snapshot, cwd: &std::path::Path) -> Option<Arc<McpManager>> {
    if !snap.config.trusted {
        eprintln!(
            "cadre: {} is not a trusted folder, so no MCP server is started here \
             (trust it with `cadre trust`, or pass --trust)",
            snap.config.trust_root.display()
        );
        return None;
    }
    let manager = McpManager::new();
    manager.sync(&snap.mcp_servers, cwd);
    let limit = Duration::from_millis(snap.settings().mcp.startup_timeout_ms);
    manager.wait_settled(limit, |_| {}).await;
    Some(manager)
}

/// The configuration of server `name`, or a usage error naming the
/// configured ones.
fn configured<'a>(snap: &'a Snapshot, name: &str) -> Result<&'a McpServerConfig, CliError> {
    snap.mcp_servers.get(name).ok_or_else(|| {
        let names: Vec<&str> = snap.mcp_servers.keys().map(String::as_str).collect();
        CliError::Usage(format!(
            "no MCP server `{name}` is configured here (configured: {})",
            if names.is_empty() {
                "none".to_string()
            } else {
                names.join(", ")
            }
        ))
    })
}

/// The URL of HTTP server `name`, for `login`/`logout`: only in a trusted
/// folder (a project's `.mcp.json` must not make cadre contact anything
/// before the folder is trusted), and only for an HTTP or SSE server.
fn oauth_url(snap: &Snapshot, name: &str) -> Result<String, CliError> {
    let config = configured(snap, name)?;
    if !snap.config.trusted {
        return Err(CliError::Usage(format!(
            "{} is not a trusted folder, so its MCP servers are not used here \
             (trust it with `cadre trust`, or pass --trust)",
            snap.config.trust_root.display()
        )));
    }
    match (&config.url, config.kind.as_deref()) {
        (Some(url), None | Some("http" | "streamable-http" | "sse")) => Ok(url.clone()),
        _ => Err(CliError::Usage(format!(
            "`{name}` is not an HTTP server: OAuth sign-in is for servers with a `url`"
        ))),
    }
}

/// Milliseconds since `t`.
fn ms(t: std::time::Instant) -> u64 {
    u64::try_from(t.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// `cadre mcp test NAME`: this server only, step by step, with timings.
async fn test(snap: &Snapshot, cwd: &std::path::Path, args: &GetArgs) -> Result<(), CliError> {
    let config = configured(snap, &args.name)?;
    if !snap.config.trusted {
        return Err(CliError::Usage(format!(
            "{} is not a trusted folder, so no MCP server is started here \
             (trust it with `cadre trust`, or pass --trust)",
            snap.config.trust_root.display()
        )));
    }
    let manager = McpManager::new();
    let only: std::collections::BTreeMap<String, McpServerConfig> =
        [(args.name.clone(), config.clone())].into();
    let started = std::time::Instant::now();
    manager.sync(&only, cwd);
    let limit = Duration::from_millis(snap.settings().mcp.startup_timeout_ms);
    manager.wait_settled(limit, |_| {}).await;
    let connect_ms = ms(started);
    let mut v = describe(&args.name, config, Some(&manager), false);
    v["connect_ms"] = json!(connect_ms);
    let conn = manager.connection(&args.name);
    if let Some(conn) = &conn {
        v["tools"] = json!(conn.tools.len());
        let t = std::time::Instant::now();
        v["resources"] = if conn.resources {
            match conn.list_resources().await {
                Ok(list) => json!({"count": list.len(), "ms": ms(t)}),
                Err(e) => json!({"error": e, "ms": ms(t)}),
            }
        } else {
            Value::Null
        };
        let t = std::time::Instant::now();
        v["prompts"] = if conn.has_prompts() {
            match conn.list_prompts().await {
                Ok(list) => json!({"count": list.len(), "ms": ms(t)}),
                Err(e) => json!({"error": e, "ms": ms(t)}),
            }
        } else {
            Value::Null
        };
    }
    let t = std::time::Instant::now();
    manager.shutdown().await;
    v["stop_ms"] = json!(ms(t));
    let ok = conn.is_some();
    if args.json {
        print_json(&v)?;
    } else {
        outln!("{}: {}", args.name, v["status"].as_str().unwrap_or(""));
        if let Some(e) = v.get("error").and_then(Value::as_str) {
            outln!("  error: {e}");
        }
        if ok {
            outln!(
                "  connected in {connect_ms} ms (start, handshake, {} tools listed)",
                v["tools"]
            );
            for key in ["resources", "prompts"] {
                match &v[key] {
                    Value::Null => outln!("  {key}: not offered"),
                    r if r.get("error").is_some() => outln!(
                        "  {key}: listing failed after {} ms: {}",
                        r["ms"],
                        r["error"].as_str().unwrap_or("")
                    ),
                    r => outln!("  {key}: {} listed in {} ms", r["count"], r["ms"]),
                }
            }
        } else {
            outln!("  gave up after {connect_ms} ms");
        }
        outln!("  stopped in {} ms", v["stop_ms"]);
        if let Some(Value::Array(lines)) = v.get("stderr")
            && !lines.is_empty()
        {
            outln!("  stderr (last lines):");
            for l in lines {
                outln!("    {}", l.as_str().unwrap_or(""));
            }
        }
    }
    if ok {
        Ok(())
    } else {
        Err(CliError::Failed(format!(
            "MCP server `{}` did not become ready",
            args.name
        )))
    }
}

/// Where a server is reached, without secrets (header and env values).
fn transport(c: &McpServerConfig) -> Value {
    match (&c.command, &c.url) {
        (Some(cmd), _) => json!({
            "type": "stdio",
            "command": cmd,
            "args": c.args,
            "env": c.env.keys().collect::<Vec<_>>(),
        }),
        (None, Some(url)) => json!({
            "type": c.kind.as_deref().unwrap_or("http"),
            "url": url,
            "headers": c.headers.keys().collect::<Vec<_>>(),
        }),
        (None, None) => Value::Null,
    }
}

fn state_word(s: Option<ServerState>, trusted: bool) -> &'static str {
    match s {
        _ if !trusted => "not started",
        Some(ServerState::Ready) => "ready",
        Some(ServerState::Failed) => "failed",
        Some(ServerState::Connecting) => "still connecting",
        None => "not started",
    }
}

/// One server as JSON: name, status, transport, tools, error, stderr.
fn describe(
    name: &str,
    config: &McpServerConfig,
    manager: Option<&McpManager>,
    with_tools: bool,
) -> Value {
    let state = manager.and_then(|m| m.states().get(name).copied());
    let mut v = json!({
        "name": name,
        "status": state_word(state, manager.is_some()),
        "transport": transport(config),
    });
    if let Some(m) = manager {
        let tools: Vec<Value> = m
            .tools(&[])
            .iter()
            .filter(|t| t.server() == name)
            .map(|t| {
                let d = t.definition();
                if with_tools {
                    json!({"name": d.name, "description": d.description, "input_schema": d.input_schema})
                } else {
                    json!(d.name)
                }
            })
            .collect();
        v["tools"] = Value::Array(tools);
        if let Some(why) = m.failure(name) {
            v["error"] = json!(why);
        }
        v["stderr"] = json!(m.stderr_tail(name));
    }
    v
}

pub async fn dispatch(g: &GlobalArgs, cmd: McpCommand) -> Result<(), CliError> {
    let (input, swap) = load_snapshot(g, &Overrides::default())?;
    let snap = swap.load_full();
    let cwd = input.load.cwd.clone();
    match cmd {
        McpCommand::List(args) => {
            let manager = connect_all(&snap, &cwd).await;
            let servers: Vec<Value> = snap
                .mcp_servers
                .iter()
                .map(|(n, c)| describe(n, c, manager.as_deref(), false))
                .collect();
            if let Some(m) = &manager {
                m.shutdown().await;
            }
            if args.json {
                return print_json(&servers);
            }
            if servers.is_empty() {
                outln!("no MCP servers configured");
            }
            for s in &servers {
                let status = s["status"].as_str().unwrap_or("");
                let detail = match (s.get("error"), s.get("tools")) {
                    (Some(e), _) => format!(": {}", e.as_str().unwrap_or("")),
                    (None, Some(Value::Array(t))) if status == "ready" => {
                        format!(", {} tools", t.len())
                    }
                    _ => String::new(),
                };
                let t = &s["transport"];
                let target = t["url"]
                    .as_str()
                    .map(str::to_string)
                    .or_else(|| t["command"].as_str().map(str::to_string))
                    .unwrap_or_default();
                outln!(
                    "{}  {status}{detail}  ({} {target})",
                    s["name"].as_str().unwrap_or(""),
                    t["type"].as_str().unwrap_or("")
                );
            }
            Ok(())
        }
        McpCommand::Test(args) => test(&snap, &cwd, &args).await,
        McpCommand::Login(args) => {
            let url = oauth_url(&snap, &args.name)?;
            let ui = crate::mcp::oauth::LoginUi {
                open_browser: !args.no_browser,
                timeout: Duration::from_secs(args.timeout),
            };
            let path = crate::mcp::oauth::login(&args.name, &url, &ui)
                .await
                .map_err(|e| CliError::Usage(format!("mcp login {}: {e}", args.name)))?;
            outln!(
                "signed in to `{}`; token kept in {}",
                args.name,
                path.display()
            );
            Ok(())
        }
        McpCommand::Logout(args) => {
            let url = oauth_url(&snap, &args.name)?;
            match crate::mcp::oauth::logout(&args.name, &url)
                .map_err(|e| CliError::Usage(format!("mcp logout {}: {e}", args.name)))?
            {
                Some(path) => outln!("signed out of `{}` ({} deleted)", args.name, path.display()),
                None => outln!("no stored token for `{}`", args.name),
            }
            Ok(())
        }
        McpCommand::Get(args) => {
            let config = configured(&snap, &args.name)?;
            let manager = connect_all(&snap, &cwd).await;
            let mut v = describe(&args.name, config, manager.as_deref(), true);
            if let Some(conn) = manager.as_ref().and_then(|m| m.connection(&args.name)) {
                if conn.resources {
                    v["resources"] = match conn.list_resources().await {
                        Ok(list) => Value::Array(list),
                        Err(e) => json!({"error": e}),
                    };
                }
                if conn.has_prompts() {
                    v["prompts"] = match conn.list_prompts().await {
                        Ok(list) => Value::Array(list),
                        Err(e) => json!({"error": e}),
                    };
                }
            }
            if let Some(m) = &manager {
                m.shutdown().await;
            }
            if args.json {
                return print_json(&v);
            }
            outln!("{}: {}", args.name, v["status"].as_str().unwrap_or(""));
            let t = &v["transport"];
            outln!(
                "  transport: {}",
                serde_json::to_string(t).unwrap_or_default()
            );
            if let Some(e) = v.get("error").and_then(Value::as_str) {
                outln!("  error: {e}");
            }
            if let Some(Value::Array(tools)) = v.get("tools") {
                outln!("  tools ({}):", tools.len());
                for tool in tools {
                    let desc = tool["description"].as_str().unwrap_or("");
                    let first = desc.lines().next().unwrap_or("");
                    outln!("    {}  {first}", tool["name"].as_str().unwrap_or(""));
                }
            }
            for (key, what) in [("resources", "uri"), ("prompts", "name")] {
                match v.get(key) {
                    Some(Value::Array(items)) => {
                        outln!("  {key} ({}):", items.len());
                        for item in items {
                            let desc = item["description"].as_str().unwrap_or("");
                            let first = desc.lines().next().unwrap_or("");
                            outln!("    {}  {first}", item[what].as_str().unwrap_or(""));
                        }
                    }
                    Some(other) => outln!("  {key}: {}", other["error"].as_str().unwrap_or("")),
                    None => {}
                }
            }
            if let Some(Value::Array(lines)) = v.get("stderr")
                && !lines.is_empty()
            {
                outln!("  stderr (last lines):");
                for l in lines {
                    outln!("    {}", l.as_str().unwrap_or(""));
                }
            }
            Ok(())
        }
    }
}
