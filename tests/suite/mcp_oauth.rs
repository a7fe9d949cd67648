//! OAuth for HTTP MCP servers, end to end: an in-process authorization
//! server (metadata, dynamic registration, authorize with PKCE, token with
//! refresh) next to an MCP server that only answers a bearer token it
//! issued. The test plays the user: it reads the URL `cadre mcp login`
//! prints, GETs it, and follows the redirect to cadre's loopback listener.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use base64::Engine;
use serde_json::{Value, json};
use sha2::Digest;

use super::harness::{Project, assistant_turns, last_tool_results, result_text};
use super::kit::{FakeServer, anthropic};

/// What the fake authorization server saw and issued.
#[derive(Default)]
struct AuthState {
    base: String,
    /// Lifetime of the first access token (a short one forces a refresh).
    first_expires_in: u64,
    /// code → (PKCE challenge, redirect URI)
    codes: HashMap<String, (String, String)>,
    /// Access tokens the MCP endpoint accepts.
    valid: Vec<String>,
    /// Every bearer token the MCP endpoint received.
    bearers: Vec<String>,
    /// Every grant type the token endpoint served.
    grants: Vec<String>,
    /// Every request path, in order.
    paths: Vec<String>,
    issued: u32,
}

type Shared = Arc<Mutex<AuthState>>;

fn query_pairs(s: &str) -> HashMap<String, String> {
    reqwest::Url::parse(&format!("http://x/?{s}"))
        .unwrap()
        .query_pairs()
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

/// Starts the fake authorization server and MCP server (same origin, MCP at
/// `/mcp`) on their own thread; returns the MCP URL and the shared state.
fn oauth_server(first_expires_in: u64) -> (String, Shared) {
    use axum::extract::{Request, State};
    use axum::http::{StatusCode, header};
    use axum::response::{IntoResponse, Response};
    use axum::routing::{get, post};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let state: Shared = Arc::new(Mutex::new(AuthState {
        base: base.clone(),
        first_expires_in,
        ..AuthState::default()
    }));
    let shared = Arc::clone(&state);

    async fn resource(State(s): State<Shared>) -> Response {
        let base = s.lock().unwrap().base.clone();
        axum::Json(json!({"resource": format!("{base}/mcp"), "authorization_servers": [base]}))
            .into_response()
    }
    async fn as_metadata(State(s): State<Shared>) -> Response {
        let b = s.lock().unwrap().base.clone();
        axum::Json(json!({
            "issuer": b,
            "authorization_endpoint": format!("{b}/authorize"),
            "token_endpoint": format!("{b}/token"),
            "registration_endpoint": format!("{b}/register"),
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["none"],
        }))
        .into_response()
    }
    async fn register(body: String) -> Response {
        let req: Value = serde_json::from_str(&body).unwrap_or_default();
        (
            StatusCode::CREATED,
            axum::Json(json!({
                "client_id": "client-1",
                "redirect_uris": req["redirect_uris"],
                "token_endpoint_auth_method": "none",
            })),
        )
            .into_response()
    }
    async fn authorize(State(s): State<Shared>, req: Request) -> Response {
        let q = query_pairs(req.uri().query().unwrap_or(""));
        assert_eq!(
            q.get("code_challenge_method").map(String::as_str),
            Some("S256")
        );
        assert_eq!(q.get("client_id").map(String::as_str), Some("client-1"));
        let redirect = q["redirect_uri"].clone();
        assert!(redirect.starts_with("http://127.0.0.1:"), "{redirect}");
        let code = "code-1".to_string();
        s.lock().unwrap().codes.insert(
            code.clone(),
            (q["code_challenge"].clone(), redirect.clone()),
        );
        let mut to = reqwest::Url::parse(&redirect).unwrap();
        to.query_pairs_mut()
            .append_pair("code", &code)
            .append_pair("state", &q["state"]);
        (StatusCode::FOUND, [(header::LOCATION, to.to_string())]).into_response()
    }
    async fn token(State(s): State<Shared>, body: String) -> Response {
        let f = query_pairs(&body);
        let mut s = s.lock().unwrap();
        let grant = f.get("grant_type").cloned().unwrap_or_default();
        s.grants.push(grant.clone());
        let ok = match grant.as_str() {
            "authorization_code" => f.get("code").and_then(|c| s.codes.remove(c)).is_some_and(
                |(challenge, redirect)| {
                    let verifier = f.get("code_verifier").cloned().unwrap_or_default();
                    let digest = sha2::Sha256::digest(verifier.as_bytes());
                    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest) == challenge
                        && f.get("redirect_uri") == Some(&redirect)
                },
            ),
            "refresh_token" => f
                .get("refresh_token")
                .is_some_and(|t| t.starts_with("refresh-")),
            _ => false,
        };
        if !ok {
            return (
                StatusCode::BAD_REQUEST,
                axum::Json(json!({"error": "invalid_grant"})),
            )
                .into_response();
        }
        s.issued += 1;
        let n = s.issued;
        let access = format!("access-{n}");
        s.valid.push(access.clone());
        let expires_in = if n == 1 { s.first_expires_in } else { 3600 };
        axum::Json(json!({
            "access_token": access,
            "token_type": "Bearer",
            "expires_in": expires_in,
            "refresh_token": format!("refresh-{n}"),
        }))
        .into_response()
    }
    async fn guard(
        State(s): State<Shared>,
        req: Request,
        next: axum::middleware::Next,
    ) -> Response {
        let bearer = req
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::to_string);
        let (ok, base) = {
            let mut s = s.lock().unwrap();
            if let Some(b) = &bearer {
                s.bearers.push(b.clone());
            }
            (bearer.is_some_and(|b| s.valid.contains(&b)), s.base.clone())
        };
        if ok {
            return next.run(req).await;
        }
        let challenge =
            format!("Bearer resource_metadata=\"{base}/.well-known/oauth-protected-resource/mcp\"");
        (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, challenge)],
            "",
        )
            .into_response()
    }
    async fn log(State(s): State<Shared>, req: Request, next: axum::middleware::Next) -> Response {
        s.lock().unwrap().paths.push(req.uri().path().to_string());
        next.run(req).await
    }

    super::mcp::serve_echo_over_http(listener, move |echo| {
        let mcp = echo.layer(axum::middleware::from_fn_with_state(
            Arc::clone(&shared),
            guard,
        ));
        axum::Router::new()
            .route("/.well-known/oauth-protected-resource", get(resource))
            .route("/.well-known/oauth-protected-resource/mcp", get(resource))
            .route("/.well-known/oauth-authorization-server", get(as_metadata))
            .route("/register", post(register))
            .route("/authorize", get(authorize))
            .route("/token", post(token))
            .with_state(Arc::clone(&shared))
            .merge(mcp)
            .layer(axum::middleware::from_fn_with_state(
                Arc::clone(&shared),
                log,
            ))
    });
    (format!("{base}/mcp"), state)
}

/// A plain HTTP/1.1 GET (no redirects followed): status and `Location`.
fn http_get(url: &str) -> (u16, String) {
    let rest = url.strip_prefix("http://").unwrap();
    let (host, path) = rest.split_once('/').unwrap();
    let mut s = std::net::TcpStream::connect(host).unwrap();
    write!(
        s,
        "GET /{path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let location = text
        .lines()
        .find_map(|l| {
            l.split_once(':')
                .filter(|(k, _)| k.eq_ignore_ascii_case("location"))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_default();
    (status, location)
}

fn oauth_project(url: &str) -> Project {
    let mut p = Project::new();
    p.config(&format!(
        "[mcp_servers.web]\nurl = {}\n[mcp]\nstartup_timeout_ms = 10000\n[permissions]\nallow = [\"mcp__web\"]\n",
        serde_json::to_string(url).unwrap()
    ));
    p
}

/// `cadre mcp login web`, started; returns the child and the authorization
/// URL it printed on stderr (the rest of stderr is collected by a thread).
fn start_login(p: &Project) -> (std::process::Child, String, std::thread::JoinHandle<String>) {
    let mut child = p
        .command(None)
        .args(["mcp", "login", "web", "--no-browser", "--timeout", "60"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut seen = String::new();
    let url = loop {
        let Some(Ok(line)) = lines.next() else {
            panic!("login printed no URL: {seen}");
        };
        seen.push_str(&line);
        seen.push('\n');
        if line.starts_with("http://") {
            break line;
        }
    };
    let rest = std::thread::spawn(move || {
        lines
            .map_while(Result::ok)
            .fold(seen, |acc, l| acc + &l + "\n")
    });
    (child, url, rest)
}

fn token_files(p: &Project) -> Vec<PathBuf> {
    let dir = p.home.path().join(".config/cadre/mcp-tokens");
    match std::fs::read_dir(dir) {
        Ok(d) => d.map(|e| e.unwrap().path()).collect(),
        Err(_) => Vec::new(),
    }
}

/// Logs in as the user would; returns the token file.
fn login(p: &Project) -> PathBuf {
    let (child, url, stderr) = start_login(p);
    let (status, location) = http_get(&url);
    assert_eq!(status, 302, "{url}");
    assert!(location.starts_with("http://127.0.0.1:"), "{location}");
    let (status, _) = http_get(&location);
    assert_eq!(status, 200);
    let out = child.wait_with_output().unwrap();
    let stderr = stderr.join().unwrap();
    assert!(out.status.success(), "{stderr}");
    let files = token_files(p);
    assert_eq!(files.len(), 1, "{files:?}");
    files[0].clone()
}

fn mode(path: &std::path::Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// Runs a task whose first step calls the server's echo tool; returns the
/// tool's result text.
fn run_echo(p: &Project) -> String {
    let server = FakeServer::route(|r| match assistant_turns(r) {
        0 => anthropic::tool_use_reply("t1", "mcp__web__echo", json!({"text": "signed"})),
        _ => anthropic::text_reply("done"),
    });
    p.run(Some(&server), &["run", "go"]).ok();
    result_text(&last_tool_results(&server.requests()[1].json)[0])
}

#[test]
fn mcp_login_stores_a_private_token_that_run_then_sends() {
    let (url, state) = oauth_server(3600);
    let p = oauth_project(&url);

    // Before login: the server's 401 becomes an error that says what to do.
    let get = p.run(None, &["mcp", "get", "web", "--json"]);
    let error = get.json()["error"].as_str().unwrap_or("").to_string();
    assert!(error.contains("`cadre mcp login web`"), "{error}");

    let file = login(&p);
    assert_eq!(mode(&file), 0o600);
    assert_eq!(mode(file.parent().unwrap()), 0o700);
    let stored = std::fs::read_to_string(&file).unwrap();
    assert!(stored.contains("access-1"), "{stored}");
    // Nothing of the token lands in the project.
    assert!(
        p.written_files()
            .iter()
            .all(|(_, c)| !c.contains("access-1"))
    );

    assert_eq!(run_echo(&p), "echo: signed");
    {
        let s = state.lock().unwrap();
        assert!(s.bearers.iter().any(|b| b == "access-1"), "{:?}", s.bearers);
        assert_eq!(s.grants, ["authorization_code"], "no refresh needed");
    }

    let out = p.run(None, &["mcp", "logout", "web"]);
    out.ok();
    assert!(token_files(&p).is_empty());
    let get = p.run(None, &["mcp", "get", "web", "--json"]);
    assert_eq!(get.json()["status"], "failed");
}

#[test]
fn an_expired_token_is_refreshed_and_the_new_one_saved() {
    // The first token lives 5 s: less than rmcp's refresh margin, so the
    // next connection refreshes before it sends anything.
    let (url, state) = oauth_server(5);
    let p = oauth_project(&url);
    let file = login(&p);
    assert_eq!(run_echo(&p), "echo: signed");
    let s = state.lock().unwrap();
    assert_eq!(s.grants, ["authorization_code", "refresh_token"]);
    assert!(s.bearers.iter().any(|b| b == "access-2"), "{:?}", s.bearers);
    assert!(
        !s.bearers.iter().any(|b| b == "access-1"),
        "{:?}",
        s.bearers
    );
    let stored = std::fs::read_to_string(&file).unwrap();
    assert!(
        stored.contains("access-2") && stored.contains("refresh-2"),
        "{stored}"
    );
    assert_eq!(mode(&file), 0o600);
}

#[test]
fn a_redirect_with_the_wrong_state_is_refused() {
    let (url, state) = oauth_server(3600);
    let p = oauth_project(&url);
    let (child, auth_url, stderr) = start_login(&p);
    let (status, location) = http_get(&auth_url);
    assert_eq!(status, 302);
    let mut forged = reqwest::Url::parse(&location).unwrap();
    let code = forged
        .query_pairs()
        .find(|(k, _)| k == "code")
        .unwrap()
        .1
        .into_owned();
    forged
        .query_pairs_mut()
        .clear()
        .append_pair("code", &code)
        .append_pair("state", "forged");
    http_get(forged.as_str());
    let out = child.wait_with_output().unwrap();
    let stderr = stderr.join().unwrap();
    assert!(!out.status.success());
    assert!(stderr.contains("`state` does not match"), "{stderr}");
    assert!(token_files(&p).is_empty());
    assert!(
        state.lock().unwrap().grants.is_empty(),
        "the code was not exchanged"
    );
}

#[test]
fn mcp_login_in_an_untrusted_folder_contacts_nothing() {
    let (url, state) = oauth_server(3600);
    let p = Project::untrusted();
    p.write(
        ".mcp.json",
        &json!({"mcpServers": {"web": {"type": "http", "url": url}}}).to_string(),
    );
    let out = p
        .command(None)
        .args(["mcp", "login", "web", "--no-browser", "--timeout", "5"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(state.lock().unwrap().paths.is_empty());
    assert!(token_files(&p).is_empty());
}
