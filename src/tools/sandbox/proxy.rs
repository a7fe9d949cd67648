//! The sandbox's network: a filtering HTTP proxy cadre runs outside the
//! sandbox on a Unix socket, and the forwarder inside that carries the
//! commands' loopback connections to it.
//!
//! A sandboxed command has no network interface but its own loopback, so
//! it can connect nowhere by itself. `HTTP_PROXY` and `HTTPS_PROXY` name
//! the forwarder (`127.0.0.1:PORT` inside); the forwarder passes each
//! connection to the proxy's socket, which cadre listens on for the
//! length of one call. The proxy reads one request head: `CONNECT
//! host:port` (HTTPS, or any tunnel) or an absolute-form plain HTTP
//! request; a host that `sandbox.network.allowedDomains` (or a
//! `WebFetch(domain:…)` allow rule) names is connected to, any other gets
//! `403 Forbidden` with the reason (unless the user, asked, allows it),
//! and is recorded so the call's result can say so.

use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpStream, UnixListener, UnixStream};

/// The largest request head the proxy reads.
const MAX_HEAD: usize = 16 * 1024;

/// The tool name a question about a sandboxed command's network host
/// carries (chat, an SDK client's `can_use_tool`, with input `{host}`).
pub const SANDBOX_NETWORK_ACCESS: &str = "SandboxNetworkAccess";

/// Asks whether a command may reach a host the settings do not allow
/// (the user, in chat or through an SDK client); `true`: allowed.
pub type HostAsker =
    Arc<dyn Fn(String) -> futures_util::future::BoxFuture<'static, bool> + Send + Sync>;

/// Which hosts one call may reach: the settings' list, and the answers of
/// whoever is asked about the others (each host asked once per call).
struct Hosts {
    allowed: Vec<String>,
    ask: Option<HostAsker>,
    answers: tokio::sync::Mutex<std::collections::HashMap<String, bool>>,
}

impl Hosts {
    async fn allows(&self, host: &str) -> bool {
        if host_allowed(host, &self.allowed) {
            return true;
        }
        let Some(ask) = &self.ask else {
            return false;
        };
        // Held while asking: a second connection to the same host waits
        // for the first answer instead of asking again.
        let mut answers = self.answers.lock().await;
        if let Some(known) = answers.get(host) {
            return *known;
        }
        let yes = ask(host.to_string()).await;
        answers.insert(host.to_string(), yes);
        yes
    }
}

/// A proxy listening for one call; stops when dropped.
pub struct Proxy {
    pub socket: PathBuf,
    dir: PathBuf,
    refused: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    /// Starts a proxy on a fresh socket in a private folder beside the
    /// session's temporary one (not writable from inside).
    /// Hosts outside `allowed` are refused, or put to `ask` when there
    /// is someone to ask.
    pub fn start(allowed: Vec<String>, ask: Option<HostAsker>) -> std::io::Result<Proxy> {
        use std::sync::atomic::{AtomicU64, Ordering};
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "cadre-proxy-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir)?;
        {
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))?;
        }
        let socket = dir.join("proxy.sock");
        let _ = std::fs::remove_file(&socket);
        let listener = UnixListener::bind(&socket)?;
        let refused = Arc::new(Mutex::new(Vec::new()));
        let hosts = Arc::new(Hosts {
            allowed,
            ask,
            answers: tokio::sync::Mutex::new(std::collections::HashMap::new()),
        });
        let task = {
            let refused = Arc::clone(&refused);
            tokio::spawn(async move {
                while let Ok((conn, _)) = listener.accept().await {
                    let (hosts, refused) = (Arc::clone(&hosts), Arc::clone(&refused));
                    tokio::spawn(async move {
                        let _ = serve(conn, &hosts, &refused).await;
                    });
                }
            })
        };
        Ok(Proxy {
            socket,
            dir,
            refused,
            task,
        })
    }

    /// The hosts refused so far, each once, in order.
    pub fn refused(&self) -> Vec<String> {
        self.refused.lock().map(|r| r.clone()).unwrap_or_default()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Whether `host` is one of `allowed` (`*.example.com`: any host below),
/// as `WebFetch(domain:…)` rules match hosts.
pub fn host_allowed(host: &str, allowed: &[String]) -> bool {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    allowed
        .iter()
        .any(|rule| crate::permissions::domain_matches(&rule.to_ascii_lowercase(), &host))
}

/// One connection: read the head, decide, then relay.
async fn serve(
    mut conn: UnixStream,
    hosts: &Hosts,
    refused: &Mutex<Vec<String>>,
) -> std::io::Result<()> {
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    let end = loop {
        let n = conn.read(&mut buf).await?;
        if n == 0 {
            return Ok(());
        }
        head.extend_from_slice(&buf[..n]);
        if let Some(i) = head.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        if head.len() > MAX_HEAD {
            return reply(
                &mut conn,
                "431 Request Header Fields Too Large",
                "request head too large",
            )
            .await;
        }
    };
    let text = String::from_utf8_lossy(&head[..end]).to_string();
    let first = text.lines().next().unwrap_or("");
    let mut parts = first.split_whitespace();
    let (method, target, version) = (
        parts.next().unwrap_or(""),
        parts.next().unwrap_or(""),
        parts.next().unwrap_or("HTTP/1.1"),
    );
    let (host, port, path) = if method.eq_ignore_ascii_case("CONNECT") {
        let (h, p) = split_host_port(target, 443);
        (h, p, None)
    } else if let Some(rest) = target.strip_prefix("http://") {
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        let (h, p) = split_host_port(authority, 80);
        (h, p, Some(path.to_string()))
    } else {
        return reply(
            &mut conn,
            "400 Bad Request",
            "cadre's sandbox proxy takes CONNECT and absolute http:// requests",
        )
        .await;
    };
    if !hosts.allows(&host).await {
        if let Ok(mut r) = refused.lock()
            && !r.contains(&host)
        {
            r.push(host.clone());
        }
        return reply(
            &mut conn,
            "403 Forbidden",
            &format!(
                "cadre sandbox: the network host {host} is not allowed (sandbox.network.allowedDomains)"
            ),
        )
        .await;
    }
    let mut upstream = match TcpStream::connect((host.as_str(), port)).await {
        Ok(s) => s,
        Err(e) => {
            return reply(
                &mut conn,
                "502 Bad Gateway",
                &format!("cadre sandbox: cannot connect to {host}:{port}: {e}"),
            )
            .await;
        }
    };
    match path {
        None => {
            conn.write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
                .await?;
        }
        Some(path) => {
            // The request in origin form, the rest of the head as sent.
            let rest = text.split_once("\r\n").map_or("", |(_, r)| r);
            upstream
                .write_all(format!("{method} {path} {version}\r\n{rest}").as_bytes())
                .await?;
        }
    }
    upstream.write_all(&head[end..]).await?;
    tokio::io::copy_bidirectional(&mut conn, &mut upstream).await?;
    Ok(())
}

fn split_host_port(authority: &str, default: u16) -> (String, u16) {
    if let Some(rest) = authority.strip_prefix('[')
        && let Some((h, p)) = rest.split_once(']')
    {
        let port = p.strip_prefix(':').and_then(|p| p.parse().ok());
        return (h.to_string(), port.unwrap_or(default));
    }
    match authority.rsplit_once(':') {
        Some((h, p)) => match p.parse() {
            Ok(port) => (h.to_string(), port),
            Err(_) => (authority.to_string(), default),
        },
        None => (authority.to_string(), default),
    }
}

async fn reply(conn: &mut UnixStream, status: &str, body: &str) -> std::io::Result<()> {
    let body = format!("{body}\n");
    conn.write_all(
        format!(
            "HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .as_bytes(),
    )
    .await?;
    conn.shutdown().await
}

/// Inside the sandbox: listens on a loopback port, writes the port to
/// stdout (one line), and relays each connection to the proxy's socket.
/// Runs until the sandbox's first process ends.
pub fn forward(socket: &Path) -> std::io::Result<()> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let port = listener.local_addr()?.port();
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "{port}")?;
        out.flush()?;
    }
    for conn in listener.incoming() {
        let Ok(conn) = conn else { continue };
        let socket = socket.to_path_buf();
        std::thread::spawn(move || {
            let Ok(up) = std::os::unix::net::UnixStream::connect(&socket) else {
                return;
            };
            let (Ok(mut conn_r), Ok(mut up_w)) = (conn.try_clone(), up.try_clone()) else {
                return;
            };
            let back = std::thread::spawn(move || {
                let mut up_r = up;
                let mut conn_w = conn;
                let _ = std::io::copy(&mut up_r, &mut conn_w);
                let _ = conn_w.shutdown(std::net::Shutdown::Write);
            });
            let _ = std::io::copy(&mut conn_r, &mut up_w);
            let _ = up_w.shutdown(std::net::Shutdown::Write);
            let _ = back.join();
        });
    }
    Ok(())
}

/// Starts the forwarder (`cadre __sandbox-exec --forward SOCKET`) and
/// returns its loopback port.
pub fn start_forwarder(socket: &Path) -> std::io::Result<u16> {
    let exe = std::env::current_exe()?;
    let mut child = std::process::Command::new(exe)
        .arg(super::EXEC_SUBCOMMAND)
        .arg("--forward")
        .arg(socket)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()?;
    let mut line = Vec::new();
    if let Some(out) = child.stdout.take() {
        let mut byte = [0u8; 1];
        let mut out = out;
        while line.len() < 8 && out.read(&mut byte)? == 1 && byte[0] != b'\n' {
            line.push(byte[0]);
        }
    }
    String::from_utf8_lossy(&line)
        .trim()
        .parse()
        .map_err(|_| std::io::Error::other("the forwarder did not say its port"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_match_exactly_or_below_a_wildcard() {
        let allowed = vec!["example.com".to_string(), "*.test.org".to_string()];
        assert!(host_allowed("example.com", &allowed));
        assert!(host_allowed("EXAMPLE.com.", &allowed));
        assert!(!host_allowed("sub.example.com", &allowed));
        assert!(host_allowed("a.test.org", &allowed));
        assert!(!host_allowed("test.org", &allowed));
        assert!(!host_allowed("eviltest.org", &allowed));
    }

    #[test]
    fn authorities_split_into_host_and_port() {
        assert_eq!(split_host_port("a.b:8080", 80), ("a.b".into(), 8080));
        assert_eq!(split_host_port("a.b", 443), ("a.b".into(), 443));
        assert_eq!(split_host_port("[::1]:9", 80), ("::1".into(), 9));
    }
}
