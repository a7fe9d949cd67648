//! OAuth for HTTP MCP servers, on rmcp's client (metadata discovery per the
//! MCP authorization spec, dynamic client registration, PKCE S256, refresh).
//!
//! `cadre mcp login NAME` runs the authorization-code flow with a loopback
//! redirect ([`login`]); the tokens go to one file per server in the user's
//! config folder (`$XDG_CONFIG_HOME/cadre/mcp-tokens/`, default
//! `~/.config/cadre/mcp-tokens/`), created with mode 0600 in a 0700 folder,
//! never in the project. A connection to a server with such a file sends its
//! access token and refreshes it when it is about to expire
//! ([`authorized_client`]); `cadre mcp logout NAME` deletes the file.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rmcp::transport::auth::{
    AuthClient, AuthError, AuthorizationManager, AuthorizationRequest, AuthorizationSession,
    CredentialStore, StoredCredentials,
};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A token file is a few kilobytes; anything larger is not ours.
const MAX_TOKEN_FILE: u64 = 256 * 1024;
/// The longest redirect request the loopback listener reads.
const MAX_REDIRECT_REQUEST: usize = 16 * 1024;

/// The folder of the token files, from the process environment, or `None`
/// when neither `XDG_CONFIG_HOME` nor `HOME` is set.
pub fn token_dir() -> Option<PathBuf> {
    let non_empty = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    non_empty("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| non_empty("HOME").map(|h| PathBuf::from(h).join(".config")))
        .map(|d| d.join("cadre").join("mcp-tokens"))
}

/// The token file of server `name` at `url`: the name (letters, digits,
/// `-` and `_` kept) and a hash of the URL, so that a server whose URL
/// changed does not get the old server's token.
pub fn token_path(dir: &Path, name: &str, url: &str) -> PathBuf {
    let safe: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    // FNV-1a: stable across builds and platforms.
    let hash = url.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    dir.join(format!("{safe}-{hash:016x}.json"))
}

/// What a token file holds.
#[derive(Serialize, Deserialize)]
struct TokenFile {
    server: String,
    url: String,
    credentials: StoredCredentials,
}

/// rmcp's credential store, backed by one token file.
struct FileStore {
    path: PathBuf,
    server: String,
    url: String,
}

fn store_error(path: &Path, e: impl std::fmt::Display) -> AuthError {
    AuthError::CredentialStoreError(format!("{}: {e}", path.display()))
}

impl FileStore {
    fn read(&self) -> Result<Option<StoredCredentials>, AuthError> {
        let file = match std::fs::File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(store_error(&self.path, e)),
        };
        let mut text = String::new();
        std::io::Read::read_to_string(
            &mut std::io::Read::take(file, MAX_TOKEN_FILE + 1),
            &mut text,
        )
        .map_err(|e| store_error(&self.path, e))?;
        if text.len() as u64 > MAX_TOKEN_FILE {
            return Err(store_error(&self.path, "too large to be a token file"));
        }
        let file: TokenFile = serde_json::from_str(&text).map_err(|e| {
            store_error(
                &self.path,
                format_args!("line {} column {}: {e}", e.line(), e.column()),
            )
        })?;
        Ok(Some(file.credentials))
    }

    /// Writes the file (0600, in a 0700 folder) through a temporary file
    /// renamed over it, so a crash never leaves half a token.
    fn write(&self, credentials: StoredCredentials) -> std::io::Result<()> {
        use std::io::Write;
        use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
        let dir = self.path.parent().unwrap_or(Path::new("."));
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
        let body = serde_json::to_vec_pretty(&TokenFile {
            server: self.server.clone(),
            url: self.url.clone(),
            credentials,
        })?;
        let tmp = self
            .path
            .with_extension(format!("tmp{}", std::process::id()));
        let _ = std::fs::remove_file(&tmp);
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(&body)?;
        f.sync_all()?;
        std::fs::rename(&tmp, &self.path)
    }
}

#[async_trait::async_trait]
impl CredentialStore for FileStore {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        self.read()
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        self.write(credentials)
            .map_err(|e| store_error(&self.path, e))
    }

    async fn clear(&self) -> Result<(), AuthError> {
        match std::fs::remove_file(&self.path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(store_error(&self.path, e)),
            _ => Ok(()),
        }
    }
}

/// A manager for the server at `url` whose credentials live in `path`,
/// talking through cadre's HTTP client (rustls, no redirects followed).
async fn manager(path: PathBuf, server: &str, url: &str) -> Result<AuthorizationManager, String> {
    // Built first: it installs the process's rustls provider, which the
    // manager's own (replaced) client needs to be built at all.
    let http = crate::provider::tls::client_builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(30))
        .build()
        .map_err(|e| e.to_string())?;
    let mut manager = AuthorizationManager::new(url)
        .await
        .map_err(|e| e.to_string())?;
    manager.with_client(http).map_err(|e| e.to_string())?;
    manager.set_credential_store(FileStore {
        path,
        server: server.to_string(),
        url: url.to_string(),
    });
    Ok(manager)
}

/// An HTTP client that sends server `name`'s stored token (refreshed when it
/// is about to expire), or `None` when the user has not logged in to it.
pub async fn authorized_client(
    name: &str,
    url: &str,
    http: reqwest::Client,
) -> Result<Option<AuthClient<reqwest::Client>>, String> {
    let Some(dir) = token_dir() else {
        return Ok(None);
    };
    let path = token_path(&dir, name, url);
    if !path.exists() {
        return Ok(None);
    }
    let mut manager = manager(path.clone(), name, url).await?;
    let found = manager
        .initialize_from_store()
        .await
        .map_err(|e| format!("the stored OAuth token ({}): {e}", path.display()))?;
    Ok(found.then(|| AuthClient::new(http, manager)))
}

/// How `login` tells the user where to go.
pub struct LoginUi {
    /// Try to open the URL in a browser (when a display and an opener exist).
    pub open_browser: bool,
    /// How long to wait for the browser's redirect.
    pub timeout: Duration,
}

/// Runs the authorization-code flow for server `name` at `url`: discovery,
/// registration, the authorization URL on stderr, the redirect to a
/// listener on 127.0.0.1, the code exchanged for tokens, which are saved.
/// Returns the token file.
pub async fn login(name: &str, url: &str, ui: &LoginUi) -> Result<PathBuf, String> {
    let dir =
        token_dir().ok_or("neither XDG_CONFIG_HOME nor HOME is set: nowhere to keep the token")?;
    let path = token_path(&dir, name, url);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| format!("cannot listen on 127.0.0.1: {e}"))?;
    let port = listener.local_addr().map_err(|e| e.to_string())?.port();
    let redirect_uri = format!("http://127.0.0.1:{port}/callback");

    let mut manager = manager(path.clone(), name, url).await?;
    let metadata = manager
        .resolve_metadata()
        .await
        .map_err(|e| format!("discovering the authorization server: {e}"))?;
    manager.set_metadata(metadata.metadata);
    let request = AuthorizationRequest::new(redirect_uri).with_client_name("cadre");
    let session = AuthorizationSession::new(manager, request)
        .await
        .map_err(|(_, e)| format!("registering with the authorization server: {e}"))?;
    let auth_url = session.get_authorization_url().to_string();
    let expected_state = reqwest::Url::parse(&auth_url)
        .ok()
        .and_then(|u| {
            u.query_pairs()
                .find(|(k, _)| k == "state")
                .map(|(_, v)| v.into_owned())
        })
        .ok_or("the authorization URL carries no `state`")?;

    eprintln!("cadre: to sign in to MCP server `{name}`, open this URL in a browser:");
    eprintln!("{auth_url}");
    if ui.open_browser {
        open_in_browser(&auth_url);
    }
    eprintln!(
        "cadre: waiting up to {} s for the browser to come back to 127.0.0.1:{port}",
        ui.timeout.as_secs()
    );
    let (code, state) = tokio::time::timeout(ui.timeout, wait_for_redirect(&listener))
        .await
        .map_err(|_| {
            format!(
                "no redirect came back within {} s; run `cadre mcp login {name}` again",
                ui.timeout.as_secs()
            )
        })??;
    if state != expected_state {
        return Err(
            "the redirect's `state` does not match the one cadre sent: refused (nothing saved)"
                .into(),
        );
    }
    session
        .handle_callback(&code, &state)
        .await
        .map_err(|e| format!("exchanging the code for a token: {e}"))?;
    Ok(path)
}

/// Deletes server `name`'s token file; `Ok(false)` when there was none.
pub fn logout(name: &str, url: &str) -> Result<Option<PathBuf>, String> {
    let dir = token_dir().ok_or("neither XDG_CONFIG_HOME nor HOME is set")?;
    let path = token_path(&dir, name, url);
    match std::fs::remove_file(&path) {
        Ok(()) => Ok(Some(path)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

/// Opens `url` with the desktop's opener when there is a display (on Linux,
/// `xdg-open`; on macOS, `open`); silently does nothing otherwise.
fn open_in_browser(url: &str) {
    let opener = if cfg!(target_os = "macos") {
        "open"
    } else {
        let display = ["DISPLAY", "WAYLAND_DISPLAY"]
            .iter()
            .any(|k| std::env::var_os(k).is_some_and(|v| !v.is_empty()));
        if !display {
            return;
        }
        "xdg-open"
    };
    let _ = std::process::Command::new(opener)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
}

/// Waits for the browser's `GET /callback?code=…&state=…` and answers it;
/// other requests (a favicon, a probe) get a 404 and the wait goes on. An
/// authorization server's error redirect (`error=…`) ends the wait.
async fn wait_for_redirect(listener: &tokio::net::TcpListener) -> Result<(String, String), String> {
    loop {
        let (mut stream, _) = listener
            .accept()
            .await
            .map_err(|e| format!("accepting the redirect: {e}"))?;
        let mut buf = vec![0u8; MAX_REDIRECT_REQUEST];
        let mut len = 0;
        // Read the request head (bounded, with a short per-connection timeout).
        let head = tokio::time::timeout(Duration::from_secs(10), async {
            while len < buf.len() {
                let n = stream.read(&mut buf[len..]).await.ok()?;
                if n == 0 {
                    break;
                }
                len += n;
                if buf[..len].windows(4).any(|w| w == b"\r\n\r\n") {
                    break;
                }
            }
            Some(String::from_utf8_lossy(&buf[..len]).into_owned())
        })
        .await
        .ok()
        .flatten()
        .unwrap_or_default();
        let target = head
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("GET "))
            .and_then(|l| l.split(' ').next())
            .unwrap_or("");
        let parsed = reqwest::Url::parse(&format!("http://127.0.0.1{target}")).ok();
        let Some(url) = parsed.filter(|u| u.path() == "/callback") else {
            let _ = stream
                .write_all(
                    b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                )
                .await;
            continue;
        };
        let get = |key: &str| {
            url.query_pairs()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.into_owned())
        };
        let (result, page) = match (get("code"), get("state"), get("error")) {
            (_, _, Some(error)) => {
                let detail = get("error_description").unwrap_or_default();
                (
                    Err(format!(
                        "the authorization server refused: {error} {detail}"
                    )),
                    "Authorization was refused. You can close this tab.",
                )
            }
            (Some(code), Some(state), None) => (
                Ok((code, state)),
                "cadre received the authorization. You can close this tab.",
            ),
            _ => (
                Err("the redirect carries no `code` and `state`".to_string()),
                "The redirect was incomplete. You can close this tab.",
            ),
        };
        let response = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{page}",
            page.len()
        );
        let _ = stream.write_all(response.as_bytes()).await;
        let _ = stream.shutdown().await;
        return result;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_paths_differ_by_name_and_url_and_keep_names_safe() {
        let d = Path::new("/x");
        let a = token_path(d, "web", "https://a.example/mcp");
        assert_ne!(a, token_path(d, "web", "https://b.example/mcp"));
        assert_ne!(a, token_path(d, "web2", "https://a.example/mcp"));
        let odd = token_path(d, "../evil/name", "u");
        assert_eq!(odd.parent(), Some(d));
        assert!(
            odd.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("___evil_name-")
        );
    }
}
