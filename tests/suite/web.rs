//! WebFetch through the real binary: a page from a local HTTP server turned
//! into Markdown and read by the small model (whose request goes to the
//! fake model server), the cache, redirects to another host, size caps,
//! and domain permission rules.

use serde_json::json;

use super::harness::{Project, last_tool_results, result_text, tool_names};
use super::kit::{FakeServer, Reply, anthropic};

const PAGE: &str = "<!doctype html><html><head><title>Docs</title><style>body{color:red}</style></head>\
<body><h1>Install</h1><p>Run <code>tool --frobnicate</code> to enable <b>fast mode</b>.</p>\
<ul><li>one</li><li>two</li></ul><script>secret()</script></body></html>";

fn web(replies: Vec<Reply>) -> FakeServer {
    let s = FakeServer::start(replies);
    s.skip_invariant_checks();
    s
}

fn allow_local(p: &mut Project) {
    p.config("[permissions]\nallow = [\"WebFetch(domain:127.0.0.1)\"]\n");
}

#[test]
fn a_page_becomes_markdown_read_by_the_small_model_and_is_cached() {
    let site = web(vec![Reply::html(PAGE)]);
    let url = format!("{}/docs", site.url());
    let mut p = Project::new();
    allow_local(&mut p);
    let server = FakeServer::start([
        anthropic::tool_use_reply(
            "toolu_1",
            "WebFetch",
            json!({"url": url, "prompt": "Which flag enables fast mode?"}),
        ),
        anthropic::text_reply("The flag is --frobnicate."),
        anthropic::tool_use_reply(
            "toolu_2",
            "WebFetch",
            json!({"url": url, "prompt": "List the items."}),
        ),
        anthropic::text_reply("one, two"),
        anthropic::text_reply("done"),
    ]);
    let run = p.run(Some(&server), &["run", "read the docs"]);
    run.ok();
    assert_eq!(run.stdout.trim(), "done");
    assert!(tool_names(&server.request(0).json).contains(&"WebFetch".to_string()));

    // The small model's request: the haiku alias, no tools, the page as
    // Markdown without script or style, and the prompt.
    let small = &server.request(1).json;
    assert_eq!(small["model"], "claude-haiku-4-5");
    assert!(
        small
            .get("tools")
            .is_none_or(|t| t.as_array().is_some_and(Vec::is_empty)),
        "{small}"
    );
    assert!(small.get("system").is_none(), "{small}");
    let text = small["messages"][0]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains(&format!("web page {url}")), "{text}");
    assert!(text.contains("# Install"), "{text}");
    assert!(text.contains("`tool --frobnicate`"), "{text}");
    assert!(text.contains("**fast mode**"), "{text}");
    assert!(text.contains("Which flag enables fast mode?"), "{text}");
    assert!(
        !text.contains("secret()") && !text.contains("color:red"),
        "{text}"
    );

    // Its answer is the tool result.
    let r = &last_tool_results(&server.request(2).json)[0];
    assert!(r.get("is_error").is_none(), "{r}");
    assert_eq!(result_text(r), "The flag is --frobnicate.");

    // The second fetch of the same address came from the cache.
    let small2 = &server.request(3).json;
    assert!(
        small2["messages"][0]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("List the items.")
    );
    assert_eq!(
        result_text(&last_tool_results(&server.request(4).json)[0]),
        "one, two"
    );
    // The reader's tokens are counted, at the model asked for.
    let side: Vec<serde_json::Value> = p
        .transcript_lines()
        .into_iter()
        .filter(|l| l["type"] == "side_usage")
        .collect();
    assert_eq!(side.len(), 2, "{side:?}");
    assert_eq!(side[0]["tool"], "WebFetch");
    assert_eq!(side[0]["model"], "claude-haiku-4-5");
    let got = site.requests();
    assert_eq!(got.len(), 1, "one fetch, then the cache");
    assert_eq!(
        (got[0].method.as_str(), got[0].path.as_str()),
        ("GET", "/docs")
    );
}

#[test]
fn a_redirect_to_another_host_is_reported_not_followed() {
    let other = web(vec![Reply::html("<p>elsewhere</p>")]);
    // Same machine, another host name (and port): not followed.
    let target = other.url().replace("127.0.0.1", "localhost") + "/moved";
    let site = web(vec![
        Reply::status(302, "").with_header("location", &target),
    ]);
    let mut p = Project::new();
    allow_local(&mut p);
    let server = FakeServer::start([
        anthropic::tool_use_reply(
            "toolu_1",
            "WebFetch",
            json!({"url": format!("{}/old", site.url()), "prompt": "?"}),
        ),
        anthropic::text_reply("ok"),
    ]);
    p.run(Some(&server), &["run", "fetch"]).ok();
    assert_eq!(
        server.requests().len(),
        2,
        "no small-model request for a redirect"
    );
    let r = &last_tool_results(&server.request(1).json)[0];
    assert!(r.get("is_error").is_none(), "{r}");
    let text = result_text(r);
    assert!(
        text.contains(&format!("redirects (302) to another host: {target}")),
        "{text}"
    );
    assert!(text.contains("not followed"), "{text}");
    assert_eq!(site.requests().len(), 1);
    assert!(
        other.requests().is_empty(),
        "the other host was not contacted"
    );
}

#[test]
fn an_unapproved_domain_is_denied_with_the_rule_to_add_and_deny_wins() {
    let site = web(vec![Reply::html(PAGE)]);
    let url = format!("{}/docs", site.url());
    let p = Project::new();
    let server = FakeServer::start([
        anthropic::tool_use_reply("toolu_1", "WebFetch", json!({"url": url, "prompt": "?"})),
        anthropic::text_reply("ok"),
    ]);
    p.run(Some(&server), &["run", "fetch"]).ok();
    let r = &last_tool_results(&server.request(1).json)[0];
    assert_eq!(r["is_error"], true);
    let text = result_text(r);
    assert!(
        text.contains("add 'WebFetch(domain:127.0.0.1)' to permissions.allow")
            && text.contains("non-interactive"),
        "{text}"
    );

    let mut p = Project::new();
    p.config("[permissions]\nallow = [\"WebFetch\"]\ndeny = [\"WebFetch(domain:127.0.0.1)\"]\n");
    let server = FakeServer::start([
        anthropic::tool_use_reply("toolu_1", "WebFetch", json!({"url": url, "prompt": "?"})),
        anthropic::text_reply("ok"),
    ]);
    p.run(Some(&server), &["run", "fetch"]).ok();
    let text = result_text(&last_tool_results(&server.request(1).json)[0]);
    assert!(
        text.contains("deny rule 'WebFetch(domain:127.0.0.1)'"),
        "{text}"
    );
    assert!(site.requests().is_empty(), "nothing was fetched");
}

#[test]
fn without_summarizing_the_markdown_is_returned_and_size_is_capped() {
    let site = web(vec![Reply::html(PAGE), Reply::html(&"x".repeat(5000))]);
    let mut p = Project::new();
    allow_local(&mut p);
    p.config("[web_fetch]\nsummarize = false\nmax_bytes = 4000\n");
    let server = FakeServer::start([
        anthropic::tool_use_reply(
            "toolu_1",
            "WebFetch",
            json!({"url": format!("{}/a", site.url()), "prompt": "?"}),
        ),
        anthropic::tool_use_reply(
            "toolu_2",
            "WebFetch",
            json!({"url": format!("{}/b", site.url()), "prompt": "?"}),
        ),
        anthropic::text_reply("ok"),
    ]);
    p.run(Some(&server), &["run", "fetch"]).ok();
    assert_eq!(server.requests().len(), 3, "no small-model requests");
    let md = result_text(&last_tool_results(&server.request(1).json)[0]);
    assert!(
        md.contains("as Markdown") && md.contains("# Install") && md.contains("- one"),
        "{md}"
    );
    let big = &last_tool_results(&server.request(2).json)[0];
    assert_eq!(big["is_error"], true);
    assert!(
        result_text(big).contains("larger than 4000 bytes"),
        "{}",
        result_text(big)
    );
}
