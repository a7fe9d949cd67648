//! WebSearch: a web search whose results (titles, addresses and an answer
//! text) come back to the model.
//!
//! Two backends. On the Anthropic provider the runtime hands the tool a
//! [`Searcher`] that asks the model with Anthropic's server-side web search
//! tool (the provider keeps the `server_tool_use` and
//! `web_search_tool_result` blocks as they came). Elsewhere the tool asks a
//! SearXNG instance's JSON API itself (`web_search.searxng_url`).
//! `allowed_domains` / `blocked_domains` go to Anthropic as the server
//! tool's own filters and are applied to SearXNG's results here. This
//! module does not know the provider.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures_util::future::BoxFuture;
use reqwest::Url;
use serde_json::{Value, json};

use super::outcome::{SearchError, SearchHit, SearchProblem, SearchResult};
use super::{Tool, ToolContext, ToolOutput};
use crate::config::{SearchBackend, WebSearchSettings};
use crate::provider::error_chain;

/// The largest SearXNG answer read, in bytes.
const MAX_ANSWER_BYTES: u64 = 4 * 1024 * 1024;

/// One search as the caller asked for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchQuery {
    pub query: String,
    pub allowed_domains: Vec<String>,
    pub blocked_domains: Vec<String>,
}

/// What a backend found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SearchAnswer {
    pub hits: Vec<SearchHit>,
    /// The searching model's answer (Anthropic); empty for SearXNG.
    pub text: String,
    /// Errors the search service reported for single searches, as the
    /// service named them (`max_uses_exceeded`, `bing: timeout`).
    pub errors: Vec<String>,
}

/// Runs a search through the provider's server-side tool; `Err` says why
/// it failed.
pub type Searcher = Arc<
    dyn Fn(SearchQuery) -> BoxFuture<'static, Result<SearchAnswer, SearchProblem>> + Send + Sync,
>;

#[derive(Default)]
pub struct WebSearchTool {
    client: OnceLock<Result<reqwest::Client, String>>,
}

impl WebSearchTool {
    fn client(&self) -> Result<&reqwest::Client, String> {
        self.client
            .get_or_init(|| {
                crate::provider::install_tls_provider();
                reqwest::Client::builder()
                    .user_agent(concat!("cadre/", env!("CARGO_PKG_VERSION")))
                    .build()
                    .map_err(|e| error_chain(&e))
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    async fn run(&self, input: &Value, ctx: &ToolContext) -> ToolOutput {
        let query = match parse(input) {
            Ok(q) => q,
            Err(Invalid::Input(e)) => return ToolOutput::error(e),
            Err(Invalid::Problem(p)) => return search_error("", p),
        };
        let settings = &ctx.web_search;
        let timeout = Duration::from_millis(settings.timeout_ms.max(1));
        let search = async {
            match (&ctx.searcher, settings.backend) {
                (Some(searcher), _) => searcher(query.clone()).await,
                (None, SearchBackend::Anthropic) => Err(SearchProblem::AnthropicOnly),
                (None, _) if settings.searxng_url.trim().is_empty() => {
                    Err(SearchProblem::NoBackend)
                }
                (None, _) => self.searxng(&query, settings).await,
            }
        };
        let answer = tokio::select! {
            r = tokio::time::timeout(timeout, search) => match r {
                Ok(r) => r,
                Err(_) => Err(SearchProblem::Timeout { ms: settings.timeout_ms }),
            },
            () = ctx.cancel.cancelled() => Err(SearchProblem::Cancelled),
        };
        match answer {
            Ok(a) => {
                let links: Vec<Value> = a
                    .hits
                    .iter()
                    .map(|h| json!({"title": h.title, "url": h.url}))
                    .collect();
                ToolOutput::ok(SearchResult {
                    query: query.query,
                    links_json: Value::Array(links).to_string(),
                    hits: a.hits,
                    text: a.text.trim().to_string(),
                    errors: a.errors,
                })
            }
            Err(e) => search_error(&query.query, e),
        }
    }

    /// Asks SearXNG (`GET /search?q=…&format=json`) and keeps the results
    /// the domain lists allow.
    async fn searxng(
        &self,
        q: &SearchQuery,
        settings: &WebSearchSettings,
    ) -> Result<SearchAnswer, SearchProblem> {
        let base = settings.searxng_url.trim().trim_end_matches('/');
        let mut url =
            Url::parse(&format!("{base}/search")).map_err(|e| SearchProblem::SearxngUrl {
                error: e.to_string(),
            })?;
        url.query_pairs_mut()
            .append_pair("q", &q.query)
            .append_pair("format", "json");
        let client = self
            .client()
            .map_err(|error| SearchProblem::Network { error })?;
        let mut resp = client
            .get(url)
            .header(reqwest::header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(|e| SearchProblem::Network {
                error: error_chain(&e),
            })?;
        let status = resp.status();
        if !status.is_success() {
            return Err(SearchProblem::Status {
                status: status.to_string(),
            });
        }
        let mut body = Vec::new();
        while let Some(chunk) = resp.chunk().await.map_err(|e| SearchProblem::Network {
            error: error_chain(&e),
        })? {
            if body.len() as u64 + chunk.len() as u64 > MAX_ANSWER_BYTES {
                return Err(SearchProblem::TooLarge {
                    max: MAX_ANSWER_BYTES,
                });
            }
            body.extend_from_slice(&chunk);
        }
        let v: Value = serde_json::from_slice(&body).map_err(|e| SearchProblem::NotJson {
            error: e.to_string(),
        })?;
        Ok(searxng_answer(&v, q, settings.max_results))
    }
}

impl Tool for WebSearchTool {
    fn name(&self) -> &str {
        "WebSearch"
    }

    fn read_only(&self) -> bool {
        true
    }

    fn call<'a>(&'a self, input: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move { self.run(&input, ctx).await })
    }
}

fn search_error(query: &str, reason: SearchProblem) -> ToolOutput {
    ToolOutput::error(SearchError {
        query: query.to_string(),
        reason,
    })
}

/// Why a call's input cannot be searched.
#[derive(Debug)]
enum Invalid {
    Input(super::outcome::BadInput),
    Problem(SearchProblem),
}

/// The call's input, checked: a query of two characters or more, and at
/// most one of the two domain lists.
fn parse(input: &Value) -> Result<SearchQuery, Invalid> {
    let i = super::Input(input);
    let query = i.str("query").map_err(Invalid::Input)?.trim().to_string();
    if query.chars().count() < 2 {
        return Err(Invalid::Problem(SearchProblem::ShortQuery));
    }
    let list = |key: &str| -> Result<Vec<String>, Invalid> {
        let bad = || {
            Invalid::Problem(SearchProblem::DomainList {
                field: key.to_string(),
            })
        };
        match input.get(key) {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::Array(items)) => items
                .iter()
                .map(|d| {
                    d.as_str()
                        .map(|s| s.trim().trim_end_matches('.').to_ascii_lowercase())
                        .filter(|s| !s.is_empty())
                        .ok_or_else(bad)
                })
                .collect(),
            Some(_) => Err(bad()),
        }
    };
    let allowed_domains = list("allowed_domains")?;
    let blocked_domains = list("blocked_domains")?;
    if !allowed_domains.is_empty() && !blocked_domains.is_empty() {
        return Err(Invalid::Problem(SearchProblem::BothLists));
    }
    Ok(SearchQuery {
        query,
        allowed_domains,
        blocked_domains,
    })
}

/// Whether `host` is `domain` or below it.
fn under(host: &str, domain: &str) -> bool {
    let domain = domain.trim_start_matches("*.");
    host == domain || host.ends_with(&format!(".{domain}"))
}

/// Whether the domain lists let a result at `url` through.
fn passes(url: &str, q: &SearchQuery) -> bool {
    let Some(host) = Url::parse(url).ok().and_then(|u| {
        u.host_str()
            .map(|h| h.trim_end_matches('.').to_ascii_lowercase())
    }) else {
        return false;
    };
    (q.allowed_domains.is_empty() || q.allowed_domains.iter().any(|d| under(&host, d)))
        && !q.blocked_domains.iter().any(|d| under(&host, d))
}

/// The results of a SearXNG JSON answer that pass the domain lists, at
/// most `max` of them, with its direct answers as the text.
fn searxng_answer(v: &Value, q: &SearchQuery, max: usize) -> SearchAnswer {
    let str_of = |r: &Value, k: &str| {
        r.get(k)
            .and_then(Value::as_str)
            .map(str::trim)
            .unwrap_or("")
            .to_string()
    };
    let hits = v
        .get("results")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|r| passes(&str_of(r, "url"), q))
        .map(|r| {
            let url = str_of(r, "url");
            let title = str_of(r, "title");
            let snippet = str_of(r, "content");
            SearchHit {
                title: if title.is_empty() { url.clone() } else { title },
                url,
                snippet: (!snippet.is_empty()).then_some(snippet),
            }
        })
        .take(max)
        .collect();
    let text = v
        .get("answers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|a| match a {
            Value::String(s) => Some(s.trim().to_string()),
            other => other
                .get("answer")
                .and_then(Value::as_str)
                .map(|s| s.trim().to_string()),
        })
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join("\n");
    let errors = v
        .get("unresponsive_engines")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|e| {
            let parts: Vec<&str> = e.as_array()?.iter().filter_map(Value::as_str).collect();
            (!parts.is_empty()).then(|| parts.join(": "))
        })
        .collect();
    SearchAnswer { hits, text, errors }
}

/// The hits, answer text and search errors of an Anthropic response that
/// used the server-side web search tool: results from each
/// `web_search_tool_result` block, text from the text blocks.
pub fn anthropic_answer(content: &[crate::message::ContentBlock]) -> SearchAnswer {
    use crate::message::ContentBlock;
    let mut answer = SearchAnswer::default();
    let mut texts = Vec::new();
    for block in content {
        match block {
            ContentBlock::WebSearchToolResult { content, .. } => match content {
                Value::Array(results) => {
                    for r in results {
                        let field = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or("");
                        let url = field("url");
                        if url.is_empty() || answer.hits.iter().any(|h| h.url == url) {
                            continue;
                        }
                        answer.hits.push(SearchHit {
                            title: field("title").to_string(),
                            url: url.to_string(),
                            snippet: None,
                        });
                    }
                }
                other => {
                    let code = other
                        .get("error_code")
                        .and_then(Value::as_str)
                        .unwrap_or("unknown");
                    answer.errors.push(code.to_string());
                }
            },
            ContentBlock::Text { text } => texts.push(text.as_str()),
            _ => {}
        }
    }
    answer.text = texts.concat();
    answer
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::message::ContentBlock;

    #[test]
    fn input_is_checked() {
        assert!(parse(&json!({"query": "x"})).is_err());
        assert!(parse(&json!({"query": 5})).is_err());
        assert!(
            parse(&json!({"query": "rust", "allowed_domains": ["a.com"], "blocked_domains": ["b.com"]}))
                .is_err()
        );
        let q = parse(&json!({"query": " rust ", "allowed_domains": ["Docs.RS."]})).unwrap();
        assert_eq!(q.query, "rust");
        assert_eq!(q.allowed_domains, ["docs.rs"]);
        assert!(parse(&json!({"query": "rust", "blocked_domains": "a.com"})).is_err());
    }

    #[test]
    fn searxng_results_pass_the_domain_lists() {
        let v = json!({"results": [
            {"url": "https://docs.rs/serde", "title": "serde", "content": "Serialization"},
            {"url": "https://www.docs.rs/x", "title": "", "content": ""},
            {"url": "https://evil.com/docs.rs", "title": "no"},
            {"url": "not a url", "title": "bad"}
        ], "answers": ["42"], "unresponsive_engines": [["google", "timeout"]]});
        let q = parse(&json!({"query": "serde", "allowed_domains": ["docs.rs"]})).unwrap();
        let a = searxng_answer(&v, &q, 10);
        let urls: Vec<&str> = a.hits.iter().map(|h| h.url.as_str()).collect();
        assert_eq!(urls, ["https://docs.rs/serde", "https://www.docs.rs/x"]);
        assert_eq!(a.hits[1].title, "https://www.docs.rs/x");
        assert_eq!(a.hits[0].snippet.as_deref(), Some("Serialization"));
        assert_eq!(a.text, "42");
        assert_eq!(a.errors, ["google: timeout"]);
        let blocked = parse(&json!({"query": "serde", "blocked_domains": ["docs.rs"]})).unwrap();
        let a = searxng_answer(&v, &blocked, 1);
        assert_eq!(a.hits.len(), 1);
        assert_eq!(a.hits[0].url, "https://evil.com/docs.rs");
    }

    #[test]
    fn anthropic_blocks_give_links_text_and_errors() {
        let blocks: Vec<ContentBlock> = serde_json::from_value(json!([
            {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "q"}},
            {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": [
                {"type": "web_search_result", "title": "A", "url": "https://a.com", "encrypted_content": "e", "page_age": null},
                {"type": "web_search_result", "title": "A again", "url": "https://a.com", "encrypted_content": "e"}]},
            {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_2",
             "content": {"type": "web_search_tool_result_error", "error_code": "max_uses_exceeded"}},
            {"type": "text", "text": "The answer "},
            {"type": "text", "text": "is A."}
        ]))
        .unwrap();
        let a = anthropic_answer(&blocks);
        assert_eq!(a.hits.len(), 1);
        assert_eq!(a.hits[0].title, "A");
        assert_eq!(a.text, "The answer is A.");
        assert_eq!(a.errors, ["max_uses_exceeded"]);
    }
}
