//! WebFetch: one page over HTTP(S), turned into Markdown, then read by a
//! small model with the caller's prompt (or, when `web_fetch.summarize` is
//! off or no small model is given, returned as Markdown).
//!
//! `http://` is upgraded to `https://` except for loopback hosts. A redirect
//! is followed only when it stays on the same scheme (or upgrades to
//! https), host and port; any other is reported to the model, not followed,
//! so a permission rule about one domain never reaches another through a
//! redirect. Bodies are read up to `web_fetch.max_bytes`, the whole fetch
//! within `web_fetch.timeout_ms`, and a page is reused for
//! `web_fetch.cache_ttl_ms`. This module does not know the provider: the
//! runtime hands it a [`SmallModel`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;
use reqwest::Url;
use serde_json::Value;

use super::outcome::{Clip, FetchAnswer, FetchError, FetchMarkdown, FetchProblem, FetchRedirect};
use super::{Input, Tool, ToolContext, ToolOutput, truncate_middle};
use crate::config::WebFetchSettings;
use crate::permissions::url::{self, UrlProblem, normal_host};
use crate::provider::error_chain;

/// Redirects followed within one host before giving up.
const MAX_REDIRECTS: usize = 10;
/// Pages kept in the cache; the oldest goes first.
const MAX_CACHED: usize = 64;

/// What the small model is asked: the page and the caller's prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageQuery {
    pub url: String,
    pub markdown: Clip,
    pub prompt: String,
}

/// Puts a page through the configured small model; `Err` says why not.
pub type SmallModel =
    Arc<dyn Fn(PageQuery) -> BoxFuture<'static, Result<String, FetchProblem>> + Send + Sync>;

/// A fetched page, as the cache keeps it.
#[derive(Debug, Clone)]
struct Page {
    markdown: Clip,
    cut: bool,
}

/// What one fetch ended with.
#[derive(Debug)]
enum Fetched {
    Page(Page),
    /// A redirect to another host (or scheme or port), not followed.
    Redirect {
        status: u16,
        location: String,
    },
}

#[derive(Default)]
pub struct WebFetchTool {
    client: OnceLock<Result<reqwest::Client, FetchProblem>>,
    cache: Mutex<HashMap<String, (Instant, Page)>>,
}

impl WebFetchTool {
    fn client(&self) -> Result<&reqwest::Client, FetchProblem> {
        self.client
            .get_or_init(|| {
                crate::provider::tls::client_builder()
                    .redirect(reqwest::redirect::Policy::none())
                    .user_agent(concat!("cadre/", env!("CARGO_PKG_VERSION")))
                    .build()
                    .map_err(|e| FetchProblem::Client {
                        error: e.to_string(),
                    })
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    fn cached(&self, url: &str, ttl: Duration) -> Option<Page> {
        let cache = self.cache.lock().ok()?;
        let (at, page) = cache.get(url)?;
        (at.elapsed() < ttl).then(|| page.clone())
    }

    fn remember(&self, url: &str, page: &Page, ttl: Duration) {
        if ttl.is_zero() {
            return;
        }
        let Ok(mut cache) = self.cache.lock() else {
            return;
        };
        cache.retain(|_, (at, _)| at.elapsed() < ttl);
        if cache.len() >= MAX_CACHED
            && let Some(oldest) = cache
                .iter()
                .min_by_key(|(_, (at, _))| *at)
                .map(|(k, _)| k.clone())
        {
            cache.remove(&oldest);
        }
        cache.insert(url.to_string(), (Instant::now(), page.clone()));
    }

    async fn run(&self, input: &Value, ctx: &ToolContext) -> ToolOutput {
        let i = Input(input);
        let (raw, prompt) = match (i.str("url"), i.str("prompt")) {
            (Ok(u), Ok(p)) => (u, p),
            (Err(e), _) | (_, Err(e)) => return ToolOutput::error(e),
        };
        let settings = &ctx.web_fetch;
        let url = match prepare_url(raw) {
            Ok(u) => u,
            Err(e) => return fetch_error(raw, e),
        };
        let ttl = Duration::from_millis(settings.cache_ttl_ms);
        let key = url.to_string();
        let page = match self.cached(&key, ttl) {
            Some(p) => p,
            None => {
                let timeout = Duration::from_millis(settings.timeout_ms.max(1));
                let fetched = tokio::select! {
                    r = tokio::time::timeout(timeout, self.fetch(url.clone(), settings)) => match r {
                        Ok(r) => r,
                        Err(_) => Err(FetchProblem::Timeout { ms: settings.timeout_ms }),
                    },
                    () = ctx.cancel.cancelled() => Err(FetchProblem::Cancelled),
                };
                match fetched {
                    Ok(Fetched::Page(p)) => {
                        self.remember(&key, &p, ttl);
                        p
                    }
                    Ok(Fetched::Redirect { status, location }) => {
                        return ToolOutput::ok(FetchRedirect {
                            url: key,
                            status,
                            location,
                        });
                    }
                    Err(e) => return fetch_error(&key, e),
                }
            }
        };
        match (&ctx.small_model, settings.summarize) {
            (Some(model), true) => {
                let query = PageQuery {
                    url: key.clone(),
                    markdown: page.markdown,
                    prompt: prompt.to_string(),
                };
                let answer = tokio::select! {
                    a = model(query) => a,
                    () = ctx.cancel.cancelled() => Err(FetchProblem::Cancelled),
                };
                match answer {
                    Ok(answer) => ToolOutput::ok(FetchAnswer { answer }),
                    Err(e) => fetch_error(&key, e),
                }
            }
            _ => ToolOutput::ok(FetchMarkdown {
                url: key,
                markdown: page.markdown,
                cut: page.cut,
                max_chars: settings.max_markdown_chars,
            }),
        }
    }

    /// Fetches `url`, following same-origin redirects.
    async fn fetch(
        &self,
        mut url: Url,
        settings: &WebFetchSettings,
    ) -> Result<Fetched, FetchProblem> {
        let client = self.client()?;
        for _ in 0..=MAX_REDIRECTS {
            let mut resp = client
                .get(url.clone())
                .header(
                    reqwest::header::ACCEPT,
                    "text/markdown, text/html;q=0.9, text/plain;q=0.8, */*;q=0.5",
                )
                .send()
                .await
                .map_err(network)?;
            let status = resp.status();
            if status.is_redirection() {
                let location = resp
                    .headers()
                    .get(reqwest::header::LOCATION)
                    .and_then(|v| v.to_str().ok())
                    .ok_or_else(|| FetchProblem::NoLocation {
                        status: status.to_string(),
                    })?;
                let next = url.join(location).map_err(|e| FetchProblem::BadLocation {
                    status: status.to_string(),
                    location: format!("{location:?}"),
                    error: e.to_string(),
                })?;
                if !same_origin(&url, &next) {
                    return Ok(Fetched::Redirect {
                        status: status.as_u16(),
                        location: next.to_string(),
                    });
                }
                url = next;
                continue;
            }
            if !status.is_success() {
                return Err(FetchProblem::Status {
                    status: status.to_string(),
                });
            }
            if let Some(len) = resp.content_length()
                && len > settings.max_bytes
            {
                return Err(FetchProblem::TooLarge {
                    max: settings.max_bytes,
                });
            }
            let content_type = resp
                .headers()
                .get(reqwest::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_ascii_lowercase();
            let mut body: Vec<u8> = Vec::new();
            while let Some(chunk) = resp.chunk().await.map_err(network)? {
                if body.len() as u64 + chunk.len() as u64 > settings.max_bytes {
                    return Err(FetchProblem::TooLarge {
                        max: settings.max_bytes,
                    });
                }
                body.extend_from_slice(&chunk);
            }
            let markdown = to_markdown(&content_type, &body)?;
            let total = markdown.chars().count();
            let cut = total > settings.max_markdown_chars;
            let markdown = if cut {
                truncate_middle(&markdown, settings.max_markdown_chars)
            } else {
                Clip::whole(markdown)
            };
            return Ok(Fetched::Page(Page { markdown, cut }));
        }
        Err(FetchProblem::Redirects { max: MAX_REDIRECTS })
    }
}

impl Tool for WebFetchTool {
    fn name(&self) -> &str {
        "WebFetch"
    }

    fn read_only(&self) -> bool {
        true
    }

    fn call<'a>(&'a self, input: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move { self.run(&input, ctx).await })
    }
}

fn fetch_error(url: &str, reason: FetchProblem) -> ToolOutput {
    ToolOutput::error(FetchError {
        url: url.to_string(),
        reason,
    })
}

fn network(e: reqwest::Error) -> FetchProblem {
    FetchProblem::Network {
        error: error_chain(&e),
    }
}

/// The URL as it will be fetched (see [`crate::permissions::url`]).
pub fn prepare_url(raw: &str) -> Result<Url, FetchProblem> {
    url::prepare_url(raw).map_err(|p| match p {
        UrlProblem::InvalidUrl { error } => FetchProblem::InvalidUrl { error },
        UrlProblem::HttpsSwitch => FetchProblem::HttpsSwitch,
        UrlProblem::Scheme { scheme } => FetchProblem::Scheme { scheme },
        UrlProblem::Credentials => FetchProblem::Credentials,
        UrlProblem::NoHost => FetchProblem::NoHost,
    })
}

/// Whether a redirect from `from` to `to` stays where it was: same host and
/// port, and the same scheme or an upgrade to https.
fn same_origin(from: &Url, to: &Url) -> bool {
    let upgrade = from.scheme() == "http" && to.scheme() == "https";
    let scheme_ok = from.scheme() == to.scheme() || upgrade;
    // An upgrade moves from port 80 to 443; otherwise the port must stay.
    let port_ok = from.port_or_known_default() == to.port_or_known_default()
        || (upgrade && from.port().is_none() && to.port().is_none());
    scheme_ok
        && port_ok
        && normal_host(from) == normal_host(to)
        && to.username().is_empty()
        && to.password().is_none()
}

/// The body as Markdown: HTML converted, text kept as it is; anything else
/// is an error.
fn to_markdown(content_type: &str, body: &[u8]) -> Result<String, FetchProblem> {
    let mime = content_type.split(';').next().unwrap_or("").trim();
    let text = String::from_utf8_lossy(body);
    let is_html = mime == "text/html"
        || mime == "application/xhtml+xml"
        || (mime.is_empty() && text.trim_start().starts_with('<'));
    if is_html {
        // Compact list markers: fewer tokens for the model that reads it.
        let options = htmd::options::Options {
            bullet_list_marker: htmd::options::BulletListMarker::Dash,
            ul_bullet_spacing: 1,
            ol_number_spacing: 1,
            hr_style: htmd::options::HrStyle::Dashes,
            ..Default::default()
        };
        let converter = htmd::HtmlToMarkdown::builder()
            .options(options)
            .skip_tags(vec![
                "script", "style", "noscript", "template", "svg", "iframe", "head",
            ])
            .build();
        return converter
            .convert(&text)
            .map(|md| md.trim().to_string())
            .map_err(|e| FetchProblem::Html {
                error: e.to_string(),
            });
    }
    let textual = mime.is_empty()
        || mime.starts_with("text/")
        || mime.ends_with("+json")
        || mime.ends_with("+xml")
        || matches!(
            mime,
            "application/json" | "application/xml" | "application/javascript"
        );
    if textual {
        Ok(text.into_owned())
    } else {
        Err(FetchProblem::NotText {
            mime: mime.to_string(),
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn redirects_stay_on_one_origin() {
        let u = |s: &str| Url::parse(s).unwrap();
        assert!(same_origin(&u("https://a.com/x"), &u("https://a.com/y")));
        assert!(same_origin(&u("http://a.com/x"), &u("https://a.com/y")));
        assert!(!same_origin(&u("https://a.com/x"), &u("http://a.com/y")));
        assert!(!same_origin(
            &u("https://a.com/x"),
            &u("https://www.a.com/x")
        ));
        assert!(!same_origin(
            &u("https://a.com/x"),
            &u("https://a.com:8443/x")
        ));
        assert!(!same_origin(
            &u("http://127.0.0.1:1/x"),
            &u("http://127.0.0.1:2/x")
        ));
    }

    #[test]
    fn html_becomes_markdown_and_binary_is_refused() {
        let html = b"<html><head><title>T</title><style>p{}</style></head><body><h1>Title</h1><p>Some <b>bold</b> <a href=\"/x\">link</a>.</p><script>alert(1)</script></body></html>";
        let md = to_markdown("text/html; charset=utf-8", html).unwrap();
        assert!(md.contains("# Title"), "{md}");
        assert!(md.contains("**bold**"), "{md}");
        assert!(md.contains("[link](/x)"), "{md}");
        assert!(!md.contains("alert") && !md.contains("p{}"), "{md}");
        assert_eq!(to_markdown("text/plain", b"plain").unwrap(), "plain");
        assert!(to_markdown("image/png", b"\x89PNG").is_err());
    }
}
