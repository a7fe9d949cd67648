//! The web view's HTTP server: HTTP/1 on 127.0.0.1 only, every request
//! checked before anything else (its Host header names the loopback
//! address and port the page was served from, so a page of another site
//! that rebinds its name to 127.0.0.1 is refused; its `token` is the one
//! printed at start), GET only, and the answers marked not to be cached,
//! framed, or sent on as a referrer.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, StreamBody, combinators::BoxBody};
use hyper::body::{Frame, Incoming};
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use serde_json::{Value, json};
use tokio::net::TcpListener;

use super::state::Source;
use crate::config::DistributedSettings;
use crate::fleet::Broker;

type Body = BoxBody<Bytes, Infallible>;

const INDEX: &str = include_str!("assets/index.html");
const APP_JS: &str = include_str!("assets/app.js");
const APP_CSS: &str = include_str!("assets/app.css");

/// How often a live stream looks at the files again.
const TICK: Duration = Duration::from_millis(300);
/// How often it lists the sessions again (each one's files are looked at).
const LIST_TICK: Duration = Duration::from_secs(1);
/// How often it asks the broker for the fleet's tasks.
const FLEET_TICK: Duration = Duration::from_secs(1);
/// A comment line this often keeps a quiet stream open through proxies.
const KEEP_ALIVE: Duration = Duration::from_secs(15);
/// The longest query string read.
const MAX_QUERY: usize = 2048;

pub struct App {
    pub token: String,
    pub port: u16,
    pub source: Arc<Source>,
    /// `[distributed] backend = "nats"`: the fleet's settings.
    pub fleet: Option<DistributedSettings>,
    pub broker: tokio::sync::Mutex<Option<Arc<Broker>>>,
}

/// Serves `listener` until the process ends.
pub async fn serve(listener: TcpListener, app: Arc<App>) -> std::io::Result<()> {
    loop {
        let (stream, _) = listener.accept().await?;
        let app = app.clone();
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |req| {
                let app = app.clone();
                async move { Ok::<_, Infallible>(app.handle(req).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(stream), svc)
                .await;
        });
    }
}

fn full(status: StatusCode, kind: &'static str, body: impl Into<Bytes>) -> Response<Body> {
    let mut r = Response::new(Full::new(body.into()).boxed());
    *r.status_mut() = status;
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(kind));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
             img-src 'self' data:; frame-ancestors 'none'",
        ),
    );
    r
}

fn text(status: StatusCode, body: &str) -> Response<Body> {
    full(status, "text/plain; charset=utf-8", format!("{body}\n"))
}

fn json_response(v: Option<Value>) -> Response<Body> {
    match v {
        Some(v) => full(
            StatusCode::OK,
            "application/json",
            serde_json::to_vec(&v).unwrap_or_default(),
        ),
        None => text(StatusCode::NOT_FOUND, "not found"),
    }
}

/// The value of `key` in a query string (the values the page sends are
/// ids and a hex token: no escapes to decode).
fn param<'a>(query: &'a str, key: &str) -> Option<&'a str> {
    query
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v)
}

/// Compares in time independent of where the two differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

impl App {
    /// The Host header names this server: `127.0.0.1:PORT` or
    /// `localhost:PORT`, nothing else.
    fn host_ok(&self, req: &Request<Incoming>) -> bool {
        let Some(host) = req
            .headers()
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
        else {
            return false;
        };
        let port = self.port.to_string();
        matches!(host.rsplit_once(':'), Some((name, p))
            if p == port && (name == "127.0.0.1" || name.eq_ignore_ascii_case("localhost")))
    }

    async fn handle(self: Arc<Self>, req: Request<Incoming>) -> Response<Body> {
        if !self.host_ok(&req) {
            return text(
                StatusCode::FORBIDDEN,
                "forbidden: the Host header does not name this server",
            );
        }
        let query = req.uri().query().unwrap_or("");
        let token_ok = query.len() <= MAX_QUERY
            && param(query, "token").is_some_and(|t| same(t.as_bytes(), self.token.as_bytes()));
        if !token_ok {
            return text(
                StatusCode::FORBIDDEN,
                "forbidden: open the address cadre ui printed, with its token",
            );
        }
        if req.method() != Method::GET {
            return text(StatusCode::METHOD_NOT_ALLOWED, "only GET");
        }
        let id = param(query, "id").unwrap_or("").to_string();
        let source = self.source.clone();
        match req.uri().path() {
            "/" => full(
                StatusCode::OK,
                "text/html; charset=utf-8",
                INDEX.replace("{{token}}", &self.token),
            ),
            "/app.js" => full(StatusCode::OK, "text/javascript; charset=utf-8", APP_JS),
            "/app.css" => full(StatusCode::OK, "text/css; charset=utf-8", APP_CSS),
            "/api/sessions" => json_response(blocking(move || Some(source.sessions())).await),
            "/api/tree" => json_response(blocking(move || source.tree(&id)).await),
            "/api/transcript" => {
                let agent = param(query, "agent").unwrap_or("main").to_string();
                json_response(blocking(move || source.transcript(&id, &agent)).await)
            }
            "/api/fleet" => json_response(Some(self.fleet().await)),
            "/api/events" => self.events(id),
            _ => text(StatusCode::NOT_FOUND, "not found"),
        }
    }

    /// The fleet's tasks (`configured: false` without the nats backend).
    async fn fleet(&self) -> Value {
        let Some(settings) = &self.fleet else {
            return json!({"configured": false});
        };
        let broker = {
            let mut held = self.broker.lock().await;
            match &*held {
                Some(b) => b.clone(),
                None => match Broker::connect(settings).await {
                    Ok(b) => held.insert(Arc::new(b)).clone(),
                    Err(e) => return json!({"configured": true, "error": e.to_string()}),
                },
            }
        };
        match crate::fleet::parent::task_records(&broker).await {
            Ok(records) => json!({
                "configured": true,
                "url": settings.url,
                "tasks": super::super::worker::rows(records),
            }),
            Err(e) => {
                // Connect again next time.
                *self.broker.lock().await = None;
                json!({"configured": true, "error": e.to_string()})
            }
        }
    }

    /// Server-sent events: `sessions` (the list), `tree` (session `id`'s
    /// agents, when an id is given) and `fleet`, each sent at once and
    /// again whenever it changes.
    fn events(self: Arc<Self>, id: String) -> Response<Body> {
        let (tx, mut rx) = tokio::sync::mpsc::channel::<Bytes>(16);
        tokio::spawn(async move {
            let mut sent: [Option<String>; 3] = [None, None, None];
            let (mut last_list, mut last_fleet) = (None, None);
            let mut last_write = tokio::time::Instant::now();
            // Until the page goes away.
            while !tx.is_closed() {
                let source = self.source.clone();
                let tree_id = id.clone();
                let list = due(&mut last_list, LIST_TICK);
                let (sessions, tree) = blocking(move || {
                    let tree = (!tree_id.is_empty()).then(|| source.tree(&tree_id));
                    Some((list.then(|| source.sessions()), tree.flatten()))
                })
                .await
                .unwrap_or((None, None));
                let fleet = if due(&mut last_fleet, FLEET_TICK) {
                    Some(self.fleet().await)
                } else {
                    None
                };
                let events = [("sessions", sessions), ("tree", tree), ("fleet", fleet)];
                for (slot, (name, value)) in events.into_iter().enumerate() {
                    let Some(value) = value else { continue };
                    let data = value.to_string();
                    if sent[slot].as_ref() == Some(&data) {
                        continue;
                    }
                    let frame = format!("event: {name}\ndata: {data}\n\n");
                    if tx.send(Bytes::from(frame)).await.is_err() {
                        return;
                    }
                    sent[slot] = Some(data);
                    last_write = tokio::time::Instant::now();
                }
                if last_write.elapsed() >= KEEP_ALIVE {
                    if tx
                        .send(Bytes::from_static(b": keep-alive\n\n"))
                        .await
                        .is_err()
                    {
                        return;
                    }
                    last_write = tokio::time::Instant::now();
                }
                tokio::time::sleep(TICK).await;
            }
        });
        let stream = futures_util::stream::poll_fn(move |cx| {
            rx.poll_recv(cx)
                .map(|b| b.map(|b| Ok::<_, Infallible>(Frame::data(b))))
        });
        let mut r = full(StatusCode::OK, "text/event-stream", Bytes::new());
        *r.body_mut() = BodyExt::boxed(StreamBody::new(stream));
        r
    }
}

/// Whether `every` has passed since `last` (then `last` is now).
fn due(last: &mut Option<tokio::time::Instant>, every: Duration) -> bool {
    let now = tokio::time::Instant::now();
    let due = last.is_none_or(|t| now.duration_since(t) >= every);
    if due {
        *last = Some(now);
    }
    due
}

/// Runs a file-reading job off the async threads.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Option<T> + Send + 'static) -> Option<T> {
    tokio::task::spawn_blocking(f).await.ok().flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_and_token_comparison() {
        assert_eq!(param("token=ab&id=x", "id"), Some("x"));
        assert_eq!(param("token=ab&id=x", "token"), Some("ab"));
        assert_eq!(param("tokens=ab", "token"), None);
        assert!(same(b"abc", b"abc"));
        assert!(!same(b"abc", b"abd"));
        assert!(!same(b"abc", b"ab"));
    }
}
