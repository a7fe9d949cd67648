//! OpenTelemetry export through the binary, against a real OTLP/HTTP
//! receiver (the test's own server): what `http/protobuf` sends is decoded
//! with the official `opentelemetry-proto` messages, what `http/json`
//! sends with serde_json; metric and event names and attributes, that no
//! key or prompt leaks, and the nesting of the agent tree's spans.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::metrics::v1::{metric, number_data_point};
use prost::Message as _;
use serde_json::{Value, json};

use super::harness::{
    Project, assistant_turns, is_main_session as is_main, last_tool_results, result_text,
};
use super::kit::{FakeServer, Reply, TEST_KEY, anthropic};

pub(super) const REVIEWER: &str = "---\nname: reviewer\ndescription: Reviews code for bugs\ntools: Read, Grep, Glob\nmodel: haiku\n---\nREVIEWER-BODY: you review code.\n";

pub(super) const PROMPT: &str = "PRIVATE-PROMPT-7781 review the code";

/// An OTLP/HTTP receiver: answers every export with 200 and keeps it.
pub(super) fn collector() -> FakeServer {
    FakeServer::route(|_| Reply::status(200, ""))
}

/// The main agent calls the reviewer through the Agent tool; the reviewer
/// answers; the main agent then answers "all done".
pub(super) fn model() -> FakeServer {
    FakeServer::route(|r| {
        if is_main(r) {
            if assistant_turns(r) == 0 {
                return anthropic::message()
                    .text("delegating")
                    .tool_use(
                        "toolu_1",
                        "Agent",
                        json!({"description": "review", "prompt": "review src", "subagent_type": "reviewer"}),
                    )
                    .usage(120, 30)
                    .cache(40, 400)
                    .reply();
            }
            return anthropic::message().text("all done").usage(80, 5).reply();
        }
        anthropic::message()
            .text("reviewer finished")
            .usage(50, 10)
            .reply()
    })
}

fn project(protocol: &str, collector: &FakeServer) -> Project {
    let mut p = Project::new();
    p.write(".claude/agents/reviewer.md", REVIEWER);
    telemetry_env(&mut p, collector.url(), protocol);
    p
}

/// Every signal on, to `endpoint` over `protocol`, with a header and
/// resource attributes.
pub(super) fn telemetry_env(p: &mut Project, endpoint: &str, protocol: &str) {
    p.env("CLAUDE_CODE_ENABLE_TELEMETRY", "1")
        .env("OTEL_METRICS_EXPORTER", "otlp")
        .env("OTEL_LOGS_EXPORTER", "otlp")
        .env("OTEL_TRACES_EXPORTER", "otlp")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
        .env(
            "OTEL_EXPORTER_OTLP_HEADERS",
            "Authorization=Bearer otel-token",
        )
        .env(
            "OTEL_RESOURCE_ATTRIBUTES",
            "team.id=platform,cost_center=eng-123",
        );
}

/// What a receiver got, in one shape for both encodings.
#[derive(Debug, Default)]
pub(super) struct Received {
    resource: Vec<BTreeMap<String, String>>,
    /// Metric name → the attributes of each data point.
    metrics: BTreeMap<String, Vec<BTreeMap<String, String>>>,
    /// Events: name and attributes.
    events: Vec<(String, BTreeMap<String, String>)>,
    spans: Vec<Span>,
    /// Every body as text, for leak checks.
    raw: String,
}

#[derive(Debug, Clone)]
struct Span {
    name: String,
    trace: String,
    id: String,
    parent: String,
    attrs: BTreeMap<String, String>,
}

impl Received {
    pub(super) fn events_named(&self, name: &str) -> Vec<&BTreeMap<String, String>> {
        self.events
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, a)| a)
            .collect()
    }

    fn span(&self, name: &str) -> &Span {
        self.spans
            .iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("no span {name} in {:#?}", self.spans))
    }

    fn children(&self, parent: &Span) -> Vec<&Span> {
        self.spans
            .iter()
            .filter(|s| s.parent == parent.id)
            .collect()
    }
}

fn proto_value(v: &Option<AnyValue>) -> String {
    match v.as_ref().and_then(|v| v.value.as_ref()) {
        Some(any_value::Value::StringValue(s)) => s.clone(),
        Some(any_value::Value::IntValue(i)) => i.to_string(),
        Some(any_value::Value::DoubleValue(d)) => d.to_string(),
        Some(any_value::Value::BoolValue(b)) => b.to_string(),
        other => format!("{other:?}"),
    }
}

fn proto_attrs(kvs: &[KeyValue]) -> BTreeMap<String, String> {
    kvs.iter()
        .map(|kv| (kv.key.clone(), proto_value(&kv.value)))
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub(super) fn decode_protobuf(collector: &FakeServer) -> Received {
    let mut got = Received::default();
    for r in collector.requests() {
        assert_eq!(
            r.header("content-type"),
            Some("application/x-protobuf"),
            "{}",
            r.path
        );
        got.raw.push_str(&String::from_utf8_lossy(&r.body));
        got.add(decode_export(&r.path, &r.body));
    }
    got
}

/// One OTLP export, decoded with the official messages.
#[derive(Debug, Clone)]
pub(super) enum Export {
    Metrics(ExportMetricsServiceRequest),
    Logs(ExportLogsServiceRequest),
    Traces(ExportTraceServiceRequest),
}

/// An OTLP/HTTP protobuf body sent to `path`.
pub(super) fn decode_export(path: &str, body: &[u8]) -> Export {
    match path {
        "/v1/metrics" => Export::Metrics(ExportMetricsServiceRequest::decode(body).unwrap()),
        "/v1/logs" => Export::Logs(ExportLogsServiceRequest::decode(body).unwrap()),
        "/v1/traces" => Export::Traces(ExportTraceServiceRequest::decode(body).unwrap()),
        other => panic!("unexpected path {other}"),
    }
}

impl Received {
    pub(super) fn add(&mut self, export: Export) {
        match export {
            Export::Metrics(m) => {
                for rm in m.resource_metrics {
                    self.resource
                        .push(proto_attrs(&rm.resource.unwrap_or_default().attributes));
                    for sm in rm.scope_metrics {
                        for metric in sm.metrics {
                            let points = self.metrics.entry(metric.name.clone()).or_default();
                            match metric.data {
                                Some(metric::Data::Sum(s)) => {
                                    points.extend(s.data_points.iter().map(|p| {
                                        let mut a = proto_attrs(&p.attributes);
                                        let value = match p.value {
                                            Some(number_data_point::Value::AsInt(i)) => {
                                                i.to_string()
                                            }
                                            Some(number_data_point::Value::AsDouble(d)) => {
                                                d.to_string()
                                            }
                                            None => String::new(),
                                        };
                                        a.insert("=value".into(), value);
                                        a
                                    }));
                                }
                                other => panic!("{}: not a sum: {other:?}", metric.name),
                            }
                        }
                    }
                }
            }
            Export::Logs(l) => {
                for rl in l.resource_logs {
                    for sl in rl.scope_logs {
                        for rec in sl.log_records {
                            self.events
                                .push((rec.event_name.clone(), proto_attrs(&rec.attributes)));
                        }
                    }
                }
            }
            Export::Traces(t) => {
                for rs in t.resource_spans {
                    for ss in rs.scope_spans {
                        for s in ss.spans {
                            self.spans.push(Span {
                                name: s.name.clone(),
                                trace: hex(&s.trace_id),
                                id: hex(&s.span_id),
                                parent: hex(&s.parent_span_id),
                                attrs: proto_attrs(&s.attributes),
                            });
                        }
                    }
                }
            }
        }
    }
}

fn json_value(v: &Value) -> String {
    for k in ["stringValue", "intValue", "doubleValue", "boolValue"] {
        if let Some(x) = v.get(k) {
            return match x {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
        }
    }
    v.to_string()
}

fn json_attrs(v: &Value) -> BTreeMap<String, String> {
    v.as_array()
        .into_iter()
        .flatten()
        .map(|kv| {
            (
                kv["key"].as_str().unwrap_or_default().to_string(),
                json_value(&kv["value"]),
            )
        })
        .collect()
}

fn items<'a>(v: &'a Value, key: &str) -> impl Iterator<Item = &'a Value> {
    v.get(key).and_then(Value::as_array).into_iter().flatten()
}

fn decode_json(collector: &FakeServer) -> Received {
    let mut got = Received::default();
    for r in collector.requests() {
        assert_eq!(r.header("content-type"), Some("application/json"));
        got.raw.push_str(&r.body_str());
        let body: Value = serde_json::from_slice(&r.body).unwrap();
        match r.path.as_str() {
            "/v1/metrics" => {
                for rm in items(&body, "resourceMetrics") {
                    got.resource.push(json_attrs(&rm["resource"]["attributes"]));
                    for sm in items(rm, "scopeMetrics") {
                        for m in items(sm, "metrics") {
                            let name = m["name"].as_str().unwrap().to_string();
                            let points = got.metrics.entry(name).or_default();
                            for p in items(&m["sum"], "dataPoints") {
                                points.push(json_attrs(&p["attributes"]));
                            }
                        }
                    }
                }
            }
            "/v1/logs" => {
                for rl in items(&body, "resourceLogs") {
                    for sl in items(rl, "scopeLogs") {
                        for rec in items(sl, "logRecords") {
                            got.events.push((
                                rec["eventName"].as_str().unwrap_or_default().to_string(),
                                json_attrs(&rec["attributes"]),
                            ));
                        }
                    }
                }
            }
            "/v1/traces" => {
                for rs in items(&body, "resourceSpans") {
                    for ss in items(rs, "scopeSpans") {
                        for s in items(ss, "spans") {
                            // Ids are hex in OTLP/JSON (not base64 as
                            // protobuf's JSON mapping would have them).
                            let text = |k: &str| s[k].as_str().unwrap_or_default().to_lowercase();
                            got.spans.push(Span {
                                name: s["name"].as_str().unwrap_or_default().to_string(),
                                trace: text("traceId"),
                                id: text("spanId"),
                                parent: text("parentSpanId"),
                                attrs: json_attrs(&s["attributes"]),
                            });
                        }
                    }
                }
            }
            other => panic!("unexpected path {other}"),
        }
    }
    got
}

/// The metric and event names and attributes of Claude Code, and no
/// prompt or key in anything sent.
pub(super) fn check_claude_code_signals(got: &Received, session_id: &str) {
    for name in [
        "claude_code.session.count",
        "claude_code.token.usage",
        "claude_code.cost.usage",
        "claude_code.active_time.total",
    ] {
        assert!(
            got.metrics.contains_key(name),
            "{name} in {:#?}",
            got.metrics
        );
    }
    let session = &got.metrics["claude_code.session.count"][0];
    assert_eq!(session["start_type"], "fresh");
    assert_eq!(session["session.id"], session_id);
    let tokens = &got.metrics["claude_code.token.usage"];
    let kinds: std::collections::BTreeSet<&str> =
        tokens.iter().map(|a| a["type"].as_str()).collect();
    assert_eq!(
        kinds,
        ["cacheCreation", "cacheRead", "input", "output"]
            .into_iter()
            .collect()
    );
    assert!(tokens.iter().all(|a| a.contains_key("model")));
    assert!(
        tokens
            .iter()
            .any(|a| a["query_source"] == "subagent" && a["agent.name"] == "reviewer"),
        "{tokens:#?}"
    );
    let resource = &got.resource[0];
    assert_eq!(resource["service.name"], "cadre");
    assert_eq!(resource["team.id"], "platform");
    assert_eq!(resource["cost_center"], "eng-123");

    let requests = got.events_named("claude_code.api_request");
    assert_eq!(requests.len(), 3, "{:#?}", got.events);
    assert!(requests.iter().any(|a| a["cache_read_tokens"] == "400"));
    assert!(
        requests
            .iter()
            .all(|a| a["session.id"] == session_id && a.contains_key("prompt.id"))
    );
    let prompts = got.events_named("claude_code.user_prompt");
    assert_eq!(prompts.len(), 1);
    assert_eq!(prompts[0]["prompt_length"], PROMPT.len().to_string());
    let decision = got.events_named("claude_code.tool_decision");
    assert_eq!(decision[0]["tool_name"], "Agent");
    assert_eq!(decision[0]["decision"], "accept");
    assert_eq!(decision[0]["source"], "config");
    let result = got.events_named("claude_code.tool_result");
    assert_eq!(result[0]["tool_name"], "Agent");
    assert_eq!(result[0]["success"], "true");
    assert_eq!(result[0]["decision_source"], "config");
    // One prompt: every event carries its id.
    let ids: std::collections::BTreeSet<&String> =
        got.events.iter().map(|(_, a)| &a["prompt.id"]).collect();
    assert_eq!(ids.len(), 1, "{ids:?}");

    assert!(!got.raw.contains(TEST_KEY), "the API key was exported");
    assert!(
        !got.raw.contains("otel-token"),
        "a header value was exported"
    );
}

/// One trace for the prompt: the interaction, under it the main agent's
/// model requests and its Agent call, under that the reviewer's span, and
/// under that the reviewer's own model request.
pub(super) fn check_agent_tree(got: &Received) {
    let root = got.span("claude_code.interaction");
    assert_eq!(root.parent, "", "the interaction is a trace's root");
    assert!(
        got.spans.iter().all(|s| s.trace == root.trace),
        "one trace per prompt: {:#?}",
        got.spans
    );
    let under_root = got.children(root);
    let names: Vec<&str> = under_root.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names.iter().filter(|n| n.starts_with("chat ")).count(),
        2,
        "{names:?}"
    );
    let agent_call = got.span("execute_tool Agent");
    assert_eq!(agent_call.parent, root.id);
    assert_eq!(agent_call.attrs["gen_ai.tool.call.id"], "toolu_1");
    let reviewer = got.span("invoke_agent reviewer");
    assert_eq!(reviewer.parent, agent_call.id);
    assert_eq!(reviewer.attrs["gen_ai.agent.name"], "reviewer");
    assert_eq!(reviewer.attrs["gen_ai.request.model"], "claude-haiku-4-5");
    let inner = got.children(reviewer);
    assert_eq!(inner.len(), 1, "{inner:#?}");
    let chat = inner[0];
    assert_eq!(chat.name, "chat claude-haiku-4-5");
    assert_eq!(chat.attrs["gen_ai.operation.name"], "chat");
    assert_eq!(chat.attrs["gen_ai.usage.input_tokens"], "50");
    assert_eq!(chat.attrs["gen_ai.usage.output_tokens"], "10");
    let main_first = under_root
        .iter()
        .find(|s| {
            s.attrs
                .get("gen_ai.usage.cache_read.input_tokens")
                .map(String::as_str)
                == Some("400")
        })
        .expect("the main agent's first request");
    assert_eq!(
        main_first.attrs["gen_ai.usage.cache_creation.input_tokens"],
        "40"
    );
    let share: f64 = main_first.attrs["cadre.cache_read_share"].parse().unwrap();
    assert!((share - 400.0 / 560.0).abs() < 1e-9, "{share}");
    assert!(main_first.attrs.contains_key("cadre.cost_usd"));
}

/// The one session's id: its transcript's name in the session folder.
pub(super) fn session_id(p: &Project) -> String {
    let ids = p.session_ids();
    assert_eq!(ids.len(), 1, "{ids:?}");
    ids[0].clone()
}

#[test]
fn protobuf_export_has_claude_codes_signals_and_the_agent_tree() {
    let receiver = collector();
    let server = model();
    let p = project("http/protobuf", &receiver);
    p.run(Some(&server), &["run", PROMPT]).ok();
    let got = decode_protobuf(&receiver);
    let auth: Vec<_> = receiver
        .requests()
        .iter()
        .map(|r| r.header("authorization").map(str::to_string))
        .collect();
    assert!(
        auth.iter()
            .all(|a| a.as_deref() == Some("Bearer otel-token")),
        "{auth:?}"
    );
    check_claude_code_signals(&got, &session_id(&p));
    assert!(
        !got.raw.contains("PRIVATE-PROMPT-7781"),
        "the prompt was exported"
    );
    assert!(
        !got.events_named("claude_code.user_prompt")[0].contains_key("prompt"),
        "no prompt text without OTEL_LOG_USER_PROMPTS"
    );
    check_agent_tree(&got);
}

/// `http/json`, switched on from the settings' `env` table (as Claude
/// Code's settings do), with `OTEL_LOG_USER_PROMPTS=1`: the prompt is
/// exported then.
#[test]
fn json_export_from_settings_env_with_prompts() {
    let receiver = collector();
    let server = model();
    let mut p = Project::new();
    p.write(".claude/agents/reviewer.md", REVIEWER);
    p.write(
        ".claude/settings.json",
        &json!({"env": {
            "CLAUDE_CODE_ENABLE_TELEMETRY": "1",
            "OTEL_METRICS_EXPORTER": "otlp",
            "OTEL_LOGS_EXPORTER": "otlp",
            "OTEL_TRACES_EXPORTER": "otlp",
            "CLAUDE_CODE_ENHANCED_TELEMETRY_BETA": "1",
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url(),
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json",
            "OTEL_EXPORTER_OTLP_HEADERS": "Authorization=Bearer otel-token",
            "OTEL_RESOURCE_ATTRIBUTES": "team.id=platform,cost_center=eng-123",
            "OTEL_LOG_USER_PROMPTS": "1",
        }})
        .to_string(),
    );
    p.env("CADRE_UNUSED", "x");
    p.run(Some(&server), &["run", PROMPT]).ok();
    let got = decode_json(&receiver);
    check_claude_code_signals(&got, &session_id(&p));
    assert_eq!(
        got.events_named("claude_code.user_prompt")[0]["prompt"],
        PROMPT
    );
    check_agent_tree(&got);
}

#[test]
fn telemetry_off_sends_nothing() {
    let receiver = collector();
    let server = model();
    let mut p = project("http/protobuf", &receiver);
    p.env("CLAUDE_CODE_ENABLE_TELEMETRY", "0");
    p.run(Some(&server), &["run", PROMPT]).ok();
    assert_eq!(receiver.request_count(), 0);
}

/// A background child on a `cadre worker` (the fleet over NATS) continues
/// the parent's trace: the plan's message carries the child's trace
/// context, and the worker's span for the child, with the child's own
/// model request under it, nests under the parent's span for that child.
#[test]
fn a_child_on_a_worker_continues_the_parents_trace() {
    use std::process::Stdio;
    use std::time::Duration;

    use super::harness::{BASE_CONFIG, MAIN_MARKER, user_texts, wait_until};
    use super::kit::nats::NatsServer;

    let nats = NatsServer::start();
    let receiver = collector();
    let server = FakeServer::route(|r| {
        if !r.system_text().contains(MAIN_MARKER) {
            return anthropic::message().text("child done").usage(7, 3).reply();
        }
        if assistant_turns(r) == 0 {
            return anthropic::message()
                .text("sending it to the fleet")
                .tool_use(
                    "toolu_bg",
                    "Agent",
                    json!({"description": "remote work", "prompt": "Do the remote work.",
                           "subagent_type": "general-purpose", "run_in_background": true}),
                )
                .reply();
        }
        if user_texts(r).contains("<task-notification>") {
            anthropic::text_reply("fleet done")
        } else {
            anthropic::text_reply("waiting")
        }
    });
    let mut p = Project::new();
    p.write(
        "cadre.toml",
        &format!(
            "{}\n[distributed]\nbackend = \"nats\"\nurl = \"{}\"\n",
            BASE_CONFIG.replace("idle_timeout_ms = 3000", "idle_timeout_ms = 120000"),
            nats.url()
        ),
    );
    p.env("CLAUDE_CODE_ENABLE_TELEMETRY", "1")
        .env("OTEL_TRACES_EXPORTER", "otlp")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url());
    let log = p.path().join("worker.log");
    let mut worker = p
        .command(Some(&server))
        .args(["worker"])
        .env("CADRE_LOG", "info")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    wait_until("the worker to pull", Duration::from_secs(30), || {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .contains("pulling pool")
    });
    let run = p.run(Some(&server), &["run", "go"]);
    // The worker flushes its spans when it stops (SIGTERM, once).
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(worker.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = worker.wait().unwrap();
    run.ok();
    assert!(run.stdout.contains("fleet done"), "{}", run.stdout);
    assert!(
        status.success(),
        "{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    let got = decode_protobuf(&receiver);
    let root = got.span("claude_code.interaction");
    let local = got
        .spans
        .iter()
        .find(|s| s.name == "invoke_agent general-purpose" && !s.attrs.contains_key("cadre.remote"))
        .unwrap_or_else(|| panic!("the parent's span for the child: {:#?}", got.spans));
    let remote = got
        .spans
        .iter()
        .find(|s| s.attrs.get("cadre.remote").map(String::as_str) == Some("true"))
        .unwrap_or_else(|| panic!("the worker's span for the child: {:#?}", got.spans));
    assert_eq!(remote.trace, root.trace, "the worker continued the trace");
    assert_eq!(remote.parent, local.id);
    assert_eq!(
        remote.attrs["gen_ai.agent.id"],
        local.attrs["gen_ai.agent.id"]
    );
    let under = got.children(remote);
    assert!(
        under
            .iter()
            .any(|s| s.name.starts_with("chat ") && s.attrs["gen_ai.usage.input_tokens"] == "7"),
        "the child's request on the worker: {under:#?}"
    );
}

/// `-p` with JSON output: the events and metrics of the run reach the
/// collector before the process exits, and standard output is only the
/// result.
#[test]
fn print_mode_flushes_before_it_exits() {
    let receiver = collector();
    let server = model();
    let mut p = project("http/protobuf", &receiver);
    // Intervals far longer than the run: only the flush at exit sends.
    p.env("OTEL_METRIC_EXPORT_INTERVAL", "600000")
        .env("OTEL_LOGS_EXPORT_INTERVAL", "600000");
    let run = p.run(Some(&server), &["-p", PROMPT, "--output-format", "json"]);
    run.ok();
    assert_eq!(run.json()["result"], "all done");
    let got = decode_protobuf(&receiver);
    assert_eq!(got.events_named("claude_code.api_request").len(), 3);
    assert!(got.metrics.contains_key("claude_code.token.usage"));
    check_agent_tree(&got);
}

/// A model whose one answer is held back until `gate` opens (a minute at
/// most).
fn held_model(gate: tokio::sync::watch::Receiver<bool>) -> FakeServer {
    FakeServer::route(move |_| {
        anthropic::text_reply("all done").held(gate.clone(), Duration::from_secs(60))
    })
}

/// Whether the collector is sent an export to `path` within `within`.
fn exported_to(collector: &FakeServer, path: &str, within: Duration) -> bool {
    let end = Instant::now() + within;
    while Instant::now() < end {
        if collector.requests().iter().any(|r| r.path == path) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

fn paths(collector: &FakeServer) -> Vec<String> {
    collector.requests().into_iter().map(|r| r.path).collect()
}

/// `cadre -p PROMPT` started, its output thrown away.
fn start_run(p: &Project, server: &FakeServer) -> std::process::Child {
    p.command(Some(server))
        .args(["-p", PROMPT])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

/// Waits for `child` to exit (a minute at most) and says it succeeded.
fn exits_well(mut child: std::process::Child) {
    let end = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "{status}");
            return;
        }
        if Instant::now() > end {
            let _ = child.kill();
            panic!("the run did not end");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// While a turn waits on the model, what was recorded goes out on each
/// signal's interval (`OTEL_LOGS_EXPORT_INTERVAL`,
/// `OTEL_METRIC_EXPORT_INTERVAL`), not only when the prompt is answered;
/// nothing is sent twice.
#[test]
fn a_long_turn_is_exported_on_each_signals_interval() {
    let receiver = collector();
    let (open, gate) = tokio::sync::watch::channel(false);
    let server = held_model(gate);
    let mut p = project("http/protobuf", &receiver);
    p.env("OTEL_METRIC_EXPORT_INTERVAL", "200")
        .env("OTEL_LOGS_EXPORT_INTERVAL", "200");
    let mut child = start_run(&p, &server);
    assert!(server.wait_for_requests(1, Duration::from_secs(30)));
    for path in ["/v1/logs", "/v1/metrics"] {
        assert!(
            exported_to(&receiver, path, Duration::from_secs(20)),
            "{path} while the model thinks: {:?}",
            paths(&receiver)
        );
    }
    assert!(
        child.try_wait().unwrap().is_none(),
        "the run still waits for the model"
    );
    let early = decode_protobuf(&receiver);
    assert_eq!(early.events_named("claude_code.user_prompt").len(), 1);
    assert!(early.metrics.contains_key("claude_code.session.count"));
    assert!(early.events_named("claude_code.api_request").is_empty());
    open.send(true).unwrap();
    exits_well(child);
    let got = decode_protobuf(&receiver);
    assert_eq!(got.events_named("claude_code.api_request").len(), 1);
    assert_eq!(
        got.events_named("claude_code.user_prompt").len(),
        1,
        "an event is sent once"
    );
    assert_eq!(
        got.metrics["claude_code.session.count"].len(),
        1,
        "delta temporality: the session is counted in one export"
    );
}

/// `OTEL_BLRP_MAX_EXPORT_BATCH_SIZE` events waiting start an export at
/// once, long before their interval; metrics, with nothing of the kind
/// set, wait for theirs.
#[test]
fn a_full_batch_of_events_goes_out_before_its_interval() {
    let receiver = collector();
    let (open, gate) = tokio::sync::watch::channel(false);
    let server = held_model(gate);
    let mut p = project("http/protobuf", &receiver);
    p.env("OTEL_METRIC_EXPORT_INTERVAL", "600000")
        .env("OTEL_LOGS_EXPORT_INTERVAL", "600000")
        .env("OTEL_BSP_SCHEDULE_DELAY", "600000")
        .env("OTEL_BLRP_MAX_EXPORT_BATCH_SIZE", "1");
    let child = start_run(&p, &server);
    assert!(server.wait_for_requests(1, Duration::from_secs(30)));
    assert!(
        exported_to(&receiver, "/v1/logs", Duration::from_secs(20)),
        "the prompt's event, a batch of one: {:?}",
        paths(&receiver)
    );
    assert!(
        !paths(&receiver).iter().any(|p| p != "/v1/logs"),
        "metrics and spans wait for their interval or the prompt's end: {:?}",
        paths(&receiver)
    );
    open.send(true).unwrap();
    exits_well(child);
    let got = decode_protobuf(&receiver);
    assert_eq!(got.events_named("claude_code.user_prompt").len(), 1);
    assert!(got.metrics.contains_key("claude_code.token.usage"));
    assert!(!got.spans.is_empty());
}

/// A collector that never answers costs a run its export timeout
/// (`OTEL_EXPORTER_OTLP_TIMEOUT`) per export, not a hang: the run
/// answers, exits well, and says that the exports failed and why.
#[test]
fn a_collector_that_never_answers_does_not_hold_the_run() {
    let (_never, gate) = tokio::sync::watch::channel(false);
    let receiver = FakeServer::route(move |_| {
        Reply::status(200, "").held(gate.clone(), Duration::from_secs(300))
    });
    receiver.skip_invariant_checks();
    let server = model();
    let mut p = project("http/protobuf", &receiver);
    p.env("OTEL_EXPORTER_OTLP_TIMEOUT", "300");
    let began = Instant::now();
    let run = p.run(Some(&server), &["-p", PROMPT]);
    run.ok();
    assert!(run.stdout.starts_with("all done"), "{}", run.stdout);
    assert!(
        began.elapsed() < Duration::from_secs(60),
        "the exit waits for the exports' timeouts, not for the collector"
    );
    assert!(
        run.stderr.contains("cadre: telemetry: ")
            && run.stderr.contains("export")
            && run.stderr.contains("to the collector failed (the last: "),
        "{}",
        run.stderr
    );
    assert!(receiver.request_count() >= 1, "the exports were tried");
}

/// `console` prints each signal on standard output, after the answer, as
/// Claude Code does.
#[test]
fn console_exporters_print_every_signal() {
    let server = model();
    let mut p = Project::new();
    p.write(".claude/agents/reviewer.md", REVIEWER);
    p.env("CLAUDE_CODE_ENABLE_TELEMETRY", "1")
        .env("OTEL_METRICS_EXPORTER", "console")
        .env("OTEL_LOGS_EXPORTER", "console")
        .env("OTEL_TRACES_EXPORTER", "console");
    let run = p.run(Some(&server), &["-p", PROMPT]);
    run.ok();
    let out = &run.stdout;
    assert!(out.starts_with("all done"), "{out}");
    for name in [
        "claude_code.session.count",
        "claude_code.token.usage",
        "claude_code.api_request",
        "claude_code.user_prompt",
        "invoke_agent",
    ] {
        assert!(out.contains(name), "{name} in\n{out}");
    }
    assert!(!out.contains(TEST_KEY), "no key printed");
}

/// An accepted Write: the edit decision (tool, source, language) and the
/// lines it added are counted, as Claude Code counts them; a refused one
/// is a `reject` decision and adds no lines.
fn server_for_write() -> FakeServer {
    FakeServer::route(|r| {
        if assistant_turns(r) == 0 {
            return anthropic::message()
                .tool_use(
                    "toolu_w",
                    "Write",
                    json!({"file_path": "src/new.rs", "content": "fn a() {}\nfn b() {}\nfn c() {}\n"}),
                )
                .reply();
        }
        anthropic::text_reply("written")
    })
}

#[test]
fn edits_count_lines_and_decisions() {
    let receiver = collector();
    let server = server_for_write();
    let mut p = project("http/protobuf", &receiver);
    p.env("OTEL_TRACES_EXPORTER", "none");
    p.run(
        Some(&server),
        &["run", "--permission-mode", "acceptEdits", "write it"],
    )
    .ok();
    let got = decode_protobuf(&receiver);
    let decisions = &got.metrics["claude_code.code_edit_tool.decision"];
    assert_eq!(decisions.len(), 1, "{decisions:#?}");
    assert_eq!(decisions[0]["tool_name"], "Write");
    assert_eq!(decisions[0]["decision"], "accept");
    assert_eq!(decisions[0]["source"], "config");
    assert_eq!(decisions[0]["language"], "Rust");
    let lines = &got.metrics["claude_code.lines_of_code.count"];
    assert_eq!(lines.len(), 1, "{lines:#?}");
    assert_eq!(lines[0]["type"], "added");
    assert!(got.spans.is_empty(), "traces were not asked for");

    // In the default mode nobody is there to allow it: rejected.
    let receiver = collector();
    let mut p = project("http/protobuf", &receiver);
    p.env("OTEL_TRACES_EXPORTER", "none");
    p.run(Some(&server_for_write()), &["run", "write it"]).ok();
    let got = decode_protobuf(&receiver);
    assert_eq!(
        got.metrics["claude_code.code_edit_tool.decision"][0]["decision"],
        "reject"
    );
    assert!(!got.metrics.contains_key("claude_code.lines_of_code.count"));
    let result = &got.events_named("claude_code.tool_result")[0];
    assert_eq!(result["success"], "false");
    assert_eq!(result["decision_type"], "reject");
}

/// A request that fails for good is a `claude_code.api_error` event with
/// its HTTP status, and a failed `chat` span in the prompt's trace.
#[test]
fn a_failed_request_is_an_api_error_event() {
    let receiver = collector();
    let server = FakeServer::route(|_| {
        Reply::anthropic_error(400, "invalid_request_error", "bad request from the test")
    });
    let p = project("http/protobuf", &receiver);
    let run = p.run(Some(&server), &["run", PROMPT]);
    assert_ne!(run.code, 0);
    let got = decode_protobuf(&receiver);
    let errors = got.events_named("claude_code.api_error");
    assert_eq!(errors.len(), 1, "{:#?}", got.events);
    assert_eq!(errors[0]["status_code"], "400");
    assert_eq!(errors[0]["model"], "claude-sonnet-4-5");
    assert!(!got.raw.contains(TEST_KEY));
    let root = got.span("claude_code.interaction");
    assert!(
        got.children(root)
            .iter()
            .any(|s| s.name == "chat claude-sonnet-4-5"),
        "{:#?}",
        got.spans
    );
}

/// Each hook run is a `claude_code.hook` span under what it belongs to:
/// PreToolUse and PostToolUse under their tool call's span, SessionStart,
/// UserPromptSubmit and Stop under the prompt's, SessionEnd (after the
/// last prompt) a trace of its own; with its event, type (`command`,
/// `http`, `prompt`), outcome (`allow`, `block`, `error`) and duration.
/// The hooks' commands stay out without OTEL_LOG_TOOL_DETAILS.
#[test]
fn each_hook_run_is_a_span_under_its_tool_call_or_prompt() {
    let receiver = collector();
    let endpoint = FakeServer::route(|_| Reply::status(200, "{}"));
    let server = FakeServer::route(|r| {
        if r.system_text().contains("You evaluate a hook condition") {
            return anthropic::text_reply(r#"{"ok": true}"#);
        }
        if assistant_turns(r) == 0 {
            return anthropic::message()
                .tool_use("toolu_b", "Bash", json!({"command": "ls"}))
                .tool_use("toolu_r", "Read", json!({"file_path": "notes.txt"}))
                .reply();
        }
        anthropic::text_reply("done")
    });
    let mut p = project("http/protobuf", &receiver);
    p.env("OTEL_METRICS_EXPORTER", "none")
        .env("OTEL_LOGS_EXPORTER", "none");
    p.write("notes.txt", "some notes\n");
    let command = |c: &str| json!([{"hooks": [{"type": "command", "command": c}]}]);
    p.write(
        ".claude/settings.json",
        &json!({"hooks": {
            "SessionStart": command("true"),
            "UserPromptSubmit": command("echo HOOK-CONTEXT-5521"),
            "PreToolUse": [
                {"matcher": "Bash", "hooks": [{"type": "command",
                    "command": "echo SECRET-HOOK-9137 no shell here >&2; exit 2"}]},
                {"matcher": "Read", "hooks": [{"type": "http",
                    "url": format!("{}/hooks/pre", endpoint.url())}]},
            ],
            "PostToolUse": [{"matcher": "Read", "hooks": [{"type": "command", "command": "exit 1"}]}],
            "Stop": [{"hooks": [{"type": "prompt", "prompt": "Is it finished? $ARGUMENTS"}]}],
            "SessionEnd": command("true"),
        }})
        .to_string(),
    );
    let run = p.run(Some(&server), &["run", "go"]);
    run.ok();
    assert_eq!(run.stdout.trim(), "done");
    assert_eq!(endpoint.requests().len(), 1, "the http hook ran");
    let got = decode_protobuf(&receiver);
    assert!(
        !got.raw.contains("SECRET-HOOK-9137") && !got.raw.contains("HOOK-CONTEXT-5521"),
        "a hook's command or output was exported"
    );
    let hook = |event: &str| -> &Span {
        let found: Vec<&Span> = got
            .spans
            .iter()
            .filter(|s| s.name == "claude_code.hook" && s.attrs["hook_event"] == event)
            .collect();
        assert_eq!(found.len(), 1, "{event}: {:#?}", got.spans);
        assert!(!found[0].attrs.contains_key("hook_definitions"));
        assert!(found[0].attrs["duration_ms"].parse::<u64>().is_ok());
        found[0]
    };
    let root = got.span("claude_code.interaction");
    let bash = got.span("execute_tool Bash");
    let read = got.span("execute_tool Read");
    let check = |s: &Span, parent: &Span, kind: &str, outcome: &str| {
        assert_eq!(s.parent, parent.id, "{s:#?}");
        assert_eq!(s.trace, root.trace, "{s:#?}");
        assert_eq!(s.attrs["cadre.hook.type"], kind, "{s:#?}");
        assert_eq!(s.attrs["cadre.hook.outcome"], outcome, "{s:#?}");
    };
    check(hook("SessionStart"), root, "command", "allow");
    check(hook("UserPromptSubmit"), root, "command", "allow");
    check(hook("Stop"), root, "prompt", "allow");
    let pre: Vec<&Span> = got
        .spans
        .iter()
        .filter(|s| s.name == "claude_code.hook" && s.attrs["hook_event"] == "PreToolUse")
        .collect();
    assert_eq!(pre.len(), 2, "{pre:#?}");
    let pre_bash = pre
        .iter()
        .find(|s| s.parent == bash.id)
        .expect("under Bash");
    check(pre_bash, bash, "command", "block");
    assert_eq!(pre_bash.attrs["cadre.hook.exit_code"], "2");
    assert_eq!(pre_bash.attrs["gen_ai.tool.call.id"], "toolu_b");
    let pre_read = pre
        .iter()
        .find(|s| s.parent == read.id)
        .expect("under Read");
    check(pre_read, read, "http", "allow");
    assert!(!pre_read.attrs.contains_key("cadre.hook.exit_code"));
    let post = hook("PostToolUse");
    check(post, read, "command", "error");
    assert_eq!(post.attrs["cadre.hook.exit_code"], "1");
    let end = hook("SessionEnd");
    assert_eq!(end.parent, "", "after the last prompt: a root");
    assert_ne!(end.trace, root.trace);
}

/// Claude Code's other counters and events, from one `cadre run`: a
/// person's slash command (`skill_activated`, named only with
/// OTEL_LOG_TOOL_DETAILS), the PreToolUse hooks of a Bash call as one
/// event (`hook_execution_start`, `hook_execution_complete` with their
/// outcomes), the call's `git commit` and `gh pr create`
/// (`claude_code.commit.count`, `claude_code.pull_request.count`), and an
/// automatic compaction past the threshold (`compaction`).
#[test]
fn commits_pull_requests_hooks_skills_and_compaction_are_exported() {
    let receiver = collector();
    let command = "git init -q && git -c user.name=t -c user.email=t@example.com commit \
                   --allow-empty -qm first && ./gh pr create --fill";
    let server = FakeServer::start([
        anthropic::message()
            .tool_use("toolu_c", "Bash", json!({"command": command}))
            .usage(600, 10)
            .reply(),
        anthropic::message()
            .text("SUMMARY: committed")
            .usage(50, 20)
            .reply(),
        anthropic::message().text("all done").usage(120, 5).reply(),
    ]);
    let mut p = project("http/protobuf", &receiver);
    p.config("[compact]\nthreshold = 0.5\n[compact.windows]\n\"claude-\" = 1000\n");
    p.env("OTEL_TRACES_EXPORTER", "none");
    let gh = p.write("gh", "#!/bin/sh\necho https://github.com/o/r/pull/1\n");
    std::fs::set_permissions(&gh, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    p.write(".claude/commands/ship.md", "Ship it: $ARGUMENTS\n");
    p.write(
        ".claude/settings.json",
        &json!({
            "permissions": {"allow": ["Bash"]},
            "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
                {"type": "command", "command": "true"},
                {"type": "command", "command": "exit 1"}]}]}})
        .to_string(),
    );
    let run = p.run(Some(&server), &["run", "/ship the release"]);
    run.ok();
    assert_eq!(run.stdout.trim(), "all done");
    let got = decode_protobuf(&receiver);
    let one = |name: &str| -> BTreeMap<String, String> {
        let points = got
            .metrics
            .get(name)
            .unwrap_or_else(|| panic!("{name} in {:#?}", got.metrics.keys()));
        assert_eq!(points.len(), 1, "{name}: {points:#?}");
        points[0].clone()
    };
    assert_eq!(one("claude_code.commit.count")["=value"], "1");
    assert_eq!(one("claude_code.pull_request.count")["=value"], "1");

    let skill = got.events_named("claude_code.skill_activated");
    assert_eq!(skill.len(), 1, "{:#?}", got.events);
    assert_eq!(skill[0]["skill.name"], "custom_skill");
    assert_eq!(skill[0]["invocation_trigger"], "user");
    assert_eq!(skill[0]["skill.source"], "projectSettings");

    let start = got.events_named("claude_code.hook_execution_start");
    let done = got.events_named("claude_code.hook_execution_complete");
    assert_eq!((start.len(), done.len()), (1, 1), "{:#?}", got.events);
    assert_eq!(start[0]["hook_event"], "PreToolUse");
    assert_eq!(start[0]["num_hooks"], "2");
    assert_eq!(done[0]["num_success"], "1");
    assert_eq!(done[0]["num_non_blocking_error"], "1");
    assert_eq!(done[0]["num_blocking"], "0");
    assert!(done[0]["total_duration_ms"].parse::<u64>().is_ok());

    let compaction = got.events_named("claude_code.compaction");
    assert_eq!(compaction.len(), 1, "{:#?}", got.events);
    assert_eq!(compaction[0]["trigger"], "auto");
    assert_eq!(compaction[0]["success"], "true");
    let pre: u64 = compaction[0]["pre_tokens"].parse().unwrap();
    let post: u64 = compaction[0]["post_tokens"].parse().unwrap();
    assert!(pre > post, "{pre} → {post}");
    // The prompt's events carry its id (the slash command was expanded
    // before its prompt began).
    for e in [start[0], done[0], compaction[0]] {
        assert!(e.contains_key("prompt.id"), "{e:#?}");
    }
}

/// An SDK client's `set_permission_mode` is a `permission_mode_changed`
/// event (from, to, what changed it); setting the mode it already has is
/// none.
#[test]
fn an_sdk_clients_mode_change_is_an_event() {
    use super::headless::Driven;
    let receiver = collector();
    let server = FakeServer::start([anthropic::text_reply("a"), anthropic::text_reply("b")]);
    let mut p = project("http/protobuf", &receiver);
    p.env("OTEL_TRACES_EXPORTER", "none")
        .env("OTEL_METRICS_EXPORTER", "none");
    let mut d = Driven::start(&p, &server, &[]);
    d.user("one");
    d.until("first result", |v| v["type"] == "result");
    for (id, mode) in [("m1", "acceptEdits"), ("m2", "acceptEdits")] {
        d.send(json!({"type": "control_request", "request_id": id,
                      "request": {"subtype": "set_permission_mode", "mode": mode}}));
        d.until(id, |v| v["response"]["request_id"] == id);
    }
    d.user("two");
    d.until("second result", |v| v["type"] == "result");
    assert_eq!(d.finish(), 0);
    let got = decode_protobuf(&receiver);
    let changed = got.events_named("claude_code.permission_mode_changed");
    assert_eq!(changed.len(), 1, "{:#?}", got.events);
    assert_eq!(changed[0]["from_mode"], "default");
    assert_eq!(changed[0]["to_mode"], "acceptEdits");
    assert_eq!(changed[0]["trigger"], "sdk");
}

/// A plugin folder as its author writes one: `hello` 1.2.0 with a hook
/// file and an MCP server (`plugin:hello:srv`), the test's echo server.
fn hello_plugin(root: &std::path::Path) {
    let write = |rel: &str, text: &str| {
        let path = root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write(
        ".claude-plugin/plugin.json",
        r#"{"name": "hello", "version": "1.2.0", "description": "Greets"}"#,
    );
    write(
        "hooks/hooks.json",
        r#"{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "true"}]}]}}"#,
    );
    write(
        ".mcp.json",
        &json!({"mcpServers": {"srv": test_server("echo")}}).to_string(),
    );
}

/// The test suite's stdio MCP server in `mode`, as a `.mcp.json` entry.
fn test_server(mode: &str) -> Value {
    let (cmd, args) = super::mcp::server_command();
    json!({"command": cmd, "args": args, "env": {super::mcp::MODE_ENV: mode}})
}

/// `servers` as the project's `.mcp.json`, all of them approved.
fn project_servers(p: &Project, servers: Value) {
    p.write(".mcp.json", &json!({"mcpServers": servers}).to_string());
    p.write(
        ".claude/settings.json",
        r#"{"enableAllProjectMcpServers": true}"#,
    );
}

/// The events named `name`, by the server (or plugin) they are about.
fn by_key<'a>(
    got: &'a Received,
    name: &str,
    key: &str,
) -> BTreeMap<String, &'a BTreeMap<String, String>> {
    got.events_named(name)
        .into_iter()
        .map(|e| (e.get(key).cloned().unwrap_or_default(), e))
        .collect()
}

/// A stdio server that connected and then exited on its own is a
/// `disconnected` event, with how long it had been connected, as Claude
/// Code reports a closed connection; the run goes on without it.
#[test]
fn an_mcp_server_that_goes_away_is_a_disconnected_event() {
    let receiver = collector();
    let server = FakeServer::route(|r| {
        if assistant_turns(r) == 0 {
            return anthropic::message()
                .tool_use("toolu_1", "mcp__srv__echo", json!({"text": "hi"}))
                .reply();
        }
        // The server exits 100 ms after its answer; the run is still on.
        anthropic::text_reply("all done").delayed(Duration::from_millis(1500))
    });
    let mut p = project("http/protobuf", &receiver);
    project_servers(&p, json!({"srv": test_server("bye")}));
    p.env("OTEL_LOG_TOOL_DETAILS", "1");
    let run = p.run(
        Some(&server),
        &["-p", "hello", "--allowedTools", "mcp__srv__echo"],
    );
    run.ok();
    assert!(run.stdout.starts_with("all done"), "{}", run.stdout);
    let got = decode_protobuf(&receiver);
    let all = got.events_named("claude_code.mcp_server_connection");
    let status: Vec<&str> = all.iter().map(|e| e["status"].as_str()).collect();
    assert_eq!(
        status,
        ["connected", "disconnected"],
        "{all:#?}\n{}\n{}",
        run.stdout,
        run.stderr
    );
    let gone = all[1];
    assert_eq!(gone["server_name"], "srv");
    assert_eq!(gone["transport_type"], "stdio");
    assert_eq!(gone["server_scope"], "project");
    assert!(!gone.contains_key("error_code"), "{gone:#?}");
    assert!(gone["duration_ms"].parse::<u64>().is_ok(), "{gone:#?}");
}

/// A streamable-HTTP server that stays up through a run that calls it is
/// one `connected` event: the HTTP transport ending only at exit is no
/// `disconnected`.
#[test]
fn an_http_server_that_stays_up_is_only_connected() {
    let receiver = collector();
    let server = FakeServer::route(|r| {
        if assistant_turns(r) == 0 {
            return anthropic::tool_use_reply("toolu_1", "mcp__web__echo", json!({"text": "hi"}));
        }
        anthropic::text_reply("all done")
    });
    let mut p = project("http/protobuf", &receiver);
    project_servers(
        &p,
        json!({"web": {"type": "http", "url": super::mcp::http_echo_server()}}),
    );
    p.env("OTEL_LOG_TOOL_DETAILS", "1");
    let run = p.run(
        Some(&server),
        &["-p", "hello", "--allowedTools", "mcp__web__echo"],
    );
    run.ok();
    let results = last_tool_results(&server.requests()[1].json);
    assert_eq!(result_text(&results[0]), "echo: hi", "{}", run.stderr);
    let got = decode_protobuf(&receiver);
    let all = got.events_named("claude_code.mcp_server_connection");
    let status: Vec<&str> = all.iter().map(|e| e["status"].as_str()).collect();
    assert_eq!(status, ["connected"], "{all:#?}");
    assert_eq!(all[0]["transport_type"], "http");
}

/// Claude Code's `mcp_server_connection` (each server connected, or
/// failed) and `plugin_loaded` events, from a `-p` run with an MCP server
/// that works, one that cannot start, and a plugin (`--plugin-dir`) with
/// hooks and a server of its own. Names, versions and errors only with
/// OTEL_LOG_TOOL_DETAILS, as Claude Code hides a team's own.
#[test]
fn mcp_connections_and_loaded_plugins_are_events() {
    for details in [false, true] {
        let receiver = collector();
        let server = FakeServer::start([anthropic::text_reply("hi")]);
        let mut p = project("http/protobuf", &receiver);
        project_servers(
            &p,
            json!({"echo": test_server("echo"),
                   "broken": {"command": "/nonexistent/mcp-server"}}),
        );
        p.env("OTEL_TRACES_EXPORTER", "none");
        if details {
            p.env("OTEL_LOG_TOOL_DETAILS", "1");
        }
        let plugin = p.home.path().join("dev/hello-plugin");
        hello_plugin(&plugin);
        let dir = plugin.display().to_string();
        let run = p.run(Some(&server), &["-p", "hello", "--plugin-dir", &dir]);
        run.ok();
        let got = decode_protobuf(&receiver);
        let all = got.events_named("claude_code.mcp_server_connection");
        assert_eq!(all.len(), 3, "{details}: {:#?}", got.events);
        let (ok, failed): (Vec<&&BTreeMap<String, String>>, Vec<_>) =
            all.iter().partition(|e| e["status"] == "connected");
        assert_eq!((ok.len(), failed.len()), (2, 1), "{all:#?}");
        // Why it failed, as Claude Code's code for a command not found,
        // with or without the details; none for a connected server.
        assert_eq!(failed[0]["error_code"], "ENOENT", "{all:#?}");
        assert!(ok.iter().all(|e| !e.contains_key("error_code")), "{all:#?}");
        for e in &all {
            assert_eq!(e["transport_type"], "stdio");
            assert!(e["duration_ms"].parse::<u64>().is_ok(), "{e:#?}");
            assert_eq!(e.contains_key("server_name"), details, "{e:#?}");
        }
        let from_plugin: Vec<_> = all.iter().filter(|e| e["is_plugin"] == "true").collect();
        assert_eq!(from_plugin.len(), 1, "{all:#?}");
        assert_eq!(from_plugin[0]["status"], "connected");
        // Where each was configured, in Claude Code's words: the
        // project's `.mcp.json`, or `dynamic` for a plugin's.
        assert_eq!(from_plugin[0]["server_scope"], "dynamic");
        // Claude Code's id for a `--plugin-dir` plugin named hello.
        assert_eq!(from_plugin[0]["plugin_id_hash"], "11daaa17733b7153");
        let from_project: Vec<_> = all.iter().filter(|e| e["is_plugin"] == "false").collect();
        assert_eq!(from_project.len(), 2, "{all:#?}");
        assert!(
            from_project
                .iter()
                .all(|e| e["server_scope"] == "project" && !e.contains_key("plugin_id_hash")),
            "{all:#?}"
        );
        let shown = |name: &str| if details { name } else { "third-party" }.to_string();
        assert_eq!(from_plugin[0]["plugin.name"], shown("hello"));

        let loaded = got.events_named("claude_code.plugin_loaded");
        assert_eq!(loaded.len(), 1, "{:#?}", got.events);
        let l = loaded[0];
        assert_eq!(l["plugin.name"], shown("hello"));
        assert_eq!(l["marketplace.name"], shown("inline"));
        // Claude Code's id for a `--plugin-dir` plugin named hello.
        assert_eq!(l["plugin_id_hash"], "11daaa17733b7153");
        assert_eq!(l["has_hooks"], "true");
        assert_eq!(l["has_mcp"], "true");
        assert_eq!(l["enabled_via"], "user-install");
        assert_eq!(l["plugin.scope"], "user-local");
        assert_eq!(
            l.get("plugin.version").map(String::as_str),
            details.then_some("1.2.0")
        );

        if details {
            let named = by_key(&got, "claude_code.mcp_server_connection", "server_name");
            assert_eq!(named["echo"]["status"], "connected");
            assert_eq!(named["plugin:hello:srv"]["status"], "connected");
            assert_eq!(named["broken"]["status"], "failed");
            assert!(!named["broken"]["error"].is_empty(), "{named:#?}");
        } else {
            // Neither a server's nor the plugin's own name leaves.
            for e in all.iter().chain(&loaded) {
                assert!(
                    !e.values()
                        .any(|v| v.contains("echo") || v.contains("broken") || v.contains("hello")),
                    "{e:#?}"
                );
            }
        }
    }
}

/// `cadre plugins install NAME@MARKETPLACE` from a team's marketplace (a
/// local folder the settings declare) is a `plugin_installed` event.
#[test]
fn installing_a_plugin_is_an_event() {
    let receiver = collector();
    let mut p = project("http/protobuf", &receiver);
    p.env("OTEL_LOG_TOOL_DETAILS", "1");
    let market = p.home.path().join("market");
    std::fs::create_dir_all(market.join(".claude-plugin")).unwrap();
    std::fs::write(
        market.join(".claude-plugin/marketplace.json"),
        r#"{"name": "team-tools", "owner": {"name": "Team"},
            "plugins": [{"name": "hello", "source": "./plugins/hello"}]}"#,
    )
    .unwrap();
    hello_plugin(&market.join("plugins/hello"));
    p.write(
        ".claude/settings.json",
        &json!({"extraKnownMarketplaces": {"team-tools": {"source": {
            "source": "directory", "path": market.display().to_string()}}}})
        .to_string(),
    );
    let run = p.run(None, &["plugins", "install", "hello@team-tools"]);
    run.ok();
    let got = decode_protobuf(&receiver);
    let installed = got.events_named("claude_code.plugin_installed");
    assert_eq!(installed.len(), 1, "{:#?}\n{}", got.events, run.stderr);
    let e = installed[0];
    assert_eq!(e["plugin.name"], "hello");
    assert_eq!(e["plugin.version"], "1.2.0");
    assert_eq!(e["marketplace.name"], "team-tools");
    assert_eq!(e["install.trigger"], "cli");
}

/// The `active_time` points of `type`, as numbers.
fn active(got: &Received, kind: &str) -> Vec<f64> {
    got.metrics
        .get("claude_code.active_time.total")
        .into_iter()
        .flatten()
        .filter(|a| a["type"] == kind)
        .map(|a| a["=value"].parse().unwrap())
        .collect()
}

/// A program's prompts are no person's time: over stream-json, two
/// prompts with a pause between the first answer and the second prompt
/// count `cli` time only, as Claude Code does (no `type=user` point).
#[test]
fn headless_prompts_count_no_user_time() {
    use super::headless::Driven;
    let receiver = collector();
    let server = FakeServer::start([anthropic::text_reply("a"), anthropic::text_reply("b")]);
    let mut p = project("http/protobuf", &receiver);
    p.env("OTEL_TRACES_EXPORTER", "none")
        .env("OTEL_LOGS_EXPORTER", "none");
    let mut d = Driven::start(&p, &server, &[]);
    d.user("one");
    d.until("first result", |v| v["type"] == "result");
    d.user("two");
    d.until("second result", |v| v["type"] == "result");
    assert_eq!(d.finish(), 0);
    let got = decode_protobuf(&receiver);
    assert_eq!(active(&got, "cli").len(), 2, "{:#?}", got.metrics);
    assert!(active(&got, "user").is_empty(), "{:#?}", got.metrics);
}

/// In the chat, the keys a person presses before sending a prompt are
/// `active_time` of type `user`; the time cadre works on the prompt is
/// `cli`.
#[test]
fn keys_typed_in_the_chat_are_user_time() {
    use super::ask_user::{Tmux, chat_line};
    let receiver = collector();
    let server = FakeServer::start([anthropic::text_reply("hello back")]);
    let mut p = project("http/protobuf", &receiver);
    p.env("OTEL_TRACES_EXPORTER", "none")
        .env("OTEL_LOGS_EXPORTER", "none");
    let t = Tmux::start(p.path(), &chat_line(&p, &server, true));
    t.wait_for("cadre chat");
    for key in ["h", "e", "l", "l", "o", "Enter"] {
        t.keys(&[key]);
    }
    t.wait_for("hello back");
    t.keys(&["C-d"]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let got = loop {
        let got = decode_protobuf(&receiver);
        if !active(&got, "user").is_empty() && !active(&got, "cli").is_empty() {
            break got;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no user and cli time: {:#?}\n{}",
            got.metrics,
            t.screen()
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    let user: f64 = active(&got, "user").iter().sum();
    assert!(user > 0.0 && user < 60.0, "{user}");
}

/// A cadre built without gRPC (`--no-default-features`) refuses `grpc` in
/// words, naming the variable, and the run goes on.
#[cfg(not(feature = "otlp-grpc"))]
#[test]
fn a_build_without_grpc_refuses_it_in_words() {
    let receiver = collector();
    let mut p = project("grpc", &receiver);
    p.env("OTEL_METRICS_EXPORTER", "none")
        .env("OTEL_TRACES_EXPORTER", "none");
    let server = FakeServer::start([anthropic::text_reply("fine")]);
    let run = p.run(Some(&server), &["run", "hi"]);
    run.ok();
    assert_eq!(run.stdout.trim(), "fine");
    assert!(
        run.stderr
            .contains("OTEL_EXPORTER_OTLP_PROTOCOL=grpc: this cadre was built without gRPC"),
        "{}",
        run.stderr
    );
    assert!(receiver.requests().is_empty());
}

/// Shift-Tab at chat's prompt moves to the next permission mode (Claude
/// Code's cycle), keeps what was typed on the line, and is reported as
/// Claude Code reports it (`trigger`: `shift_tab`).
#[test]
fn a_mode_changed_with_shift_tab_in_chat_is_an_event() {
    use super::ask_user::{Tmux, chat_line};
    let receiver = collector();
    let server = FakeServer::start([anthropic::text_reply("edits are on")]);
    let mut p = project("http/protobuf", &receiver);
    p.env("OTEL_TRACES_EXPORTER", "none")
        .env("OTEL_METRICS_EXPORTER", "none");
    let t = Tmux::start(p.path(), &chat_line(&p, &server, true));
    t.wait_for("cadre chat");
    t.wait_for("· default · context");
    t.keys(&["half typed", "BTab"]);
    t.wait_for("· acceptEdits · context");
    t.wait_for("› half typed");
    t.keys(&[" then sent", "Enter"]);
    t.wait_for("edits are on");
    t.keys(&["C-d"]);
    let sent = server.request(0).json["messages"].to_string();
    assert!(sent.contains("half typed then sent"), "{sent}");
    // The events go out as the chat ends.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let changed = loop {
        let got = decode_protobuf(&receiver);
        if !got
            .events_named("claude_code.permission_mode_changed")
            .is_empty()
        {
            break got
                .events_named("claude_code.permission_mode_changed")
                .into_iter()
                .cloned()
                .collect::<Vec<_>>();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no mode change exported: {:#?}",
            got.events
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert_eq!(changed.len(), 1, "{changed:#?}");
    assert_eq!(changed[0]["from_mode"], "default");
    assert_eq!(changed[0]["to_mode"], "acceptEdits");
    assert_eq!(changed[0]["trigger"], "shift_tab");
}
