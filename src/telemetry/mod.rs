//! OpenTelemetry export, Claude Code's way (docs/observability.md): the
//! same switches, metric and event names, and traces of the agent tree.
//!
//! Fed by the engine's event sink only: [`start`] wraps a session's sink
//! when `CLAUDE_CODE_ENABLE_TELEMETRY` is on, and does nothing else when it
//! is off (no thread, no provider, the sink untouched). [`shutdown`] ends
//! the open spans and flushes every signal, bounded in time, before the
//! process exits.

mod http;
mod record;
mod switches;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry::KeyValue;
use opentelemetry::logs::LoggerProvider as _;
use opentelemetry::metrics::MeterProvider as _;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::logs::{BatchConfigBuilder, BatchLogProcessor, SdkLoggerProvider};
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider, Temporality};
use opentelemetry_sdk::trace::SdkTracerProvider;

use crate::config::ModelPrice;
use crate::runtime::{EngineEvent, EventSink};

use record::{Instruments, Recorder, Shared};
use switches::{Otlp, Switches, Vars};

/// The instrumentation scope of every signal, Claude Code's.
const SCOPE: &str = "com.anthropic.claude_code";

/// How long [`shutdown`] waits for the last export.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(5);

/// What a session tells telemetry when it starts.
pub struct Start<'a> {
    /// The settings' merged `env` table (a project's counts only in a
    /// trusted folder).
    pub settings_env: &'a BTreeMap<String, String>,
    pub process_env: &'a [(String, String)],
    pub session_id: &'a str,
    /// `fresh`, `resume` or `continue`; `None` for a worker, whose
    /// tasks are other sessions' sub-agents.
    pub start_type: Option<&'static str>,
    pub prices: &'a BTreeMap<String, ModelPrice>,
}

struct Running {
    recorder: Arc<Recorder>,
    metrics: Option<SdkMeterProvider>,
    logs: Option<SdkLoggerProvider>,
    traces: Option<SdkTracerProvider>,
}

static RUNNING: Mutex<Option<Running>> = Mutex::new(None);

/// The session's sink, with telemetry recording every event after it when
/// telemetry is on; `events` itself when it is off.
pub fn start(events: EventSink, how: &Start) -> EventSink {
    let vars = Vars {
        settings: how.settings_env,
        process: how.process_env,
    };
    if !switches::enabled(&vars) {
        return events;
    }
    let Ok(mut running) = RUNNING.lock() else {
        return events;
    };
    let recorder = match &*running {
        // One process, one set of providers (a second session of `chat`).
        Some(r) => Arc::clone(&r.recorder),
        None => {
            let s = switches::read(&vars);
            for why in &s.refused {
                eprintln!("cadre: telemetry: {why}");
            }
            let Some(r) = build(&s, how) else {
                return events;
            };
            let recorder = Arc::clone(&r.recorder);
            *running = Some(r);
            recorder
        }
    };
    drop(running);
    if let Some(start_type) = how.start_type {
        recorder.session_started(start_type);
    }
    Arc::new(move |e: &EngineEvent| {
        events(e);
        recorder.record(e);
    })
}

/// The headers that carry a sub-agent's trace context to the worker that
/// runs it (W3C `traceparent`); none when telemetry is off or the
/// sub-agent has no span.
pub fn trace_headers(agent_id: &str) -> Vec<(String, String)> {
    let recorder = match RUNNING.lock() {
        Ok(r) => r.as_ref().map(|r| Arc::clone(&r.recorder)),
        Err(_) => None,
    };
    recorder
        .and_then(|r| r.trace_context(agent_id))
        .map(|c| c.into_iter().collect())
        .unwrap_or_default()
}

/// A worker runs a sub-agent whose parent is on another host: when
/// telemetry is on here and `headers` carry the parent's trace context,
/// the sub-agent's span continues that trace.
pub fn continue_trace(agent_id: &str, agent_type: &str, headers: &[(String, String)]) {
    if headers.is_empty() {
        return;
    }
    let recorder = match RUNNING.lock() {
        Ok(r) => r.as_ref().map(|r| Arc::clone(&r.recorder)),
        Err(_) => None,
    };
    if let Some(r) = recorder {
        r.adopt(agent_id, agent_type, &headers.iter().cloned().collect());
    }
}

/// Ends the open spans and flushes and stops every provider, waiting at
/// most a few seconds; nothing when telemetry never started. Call before
/// the process exits, outside the async runtime's worker threads (the
/// exports run on that runtime).
pub fn shutdown() {
    let Some(r) = RUNNING.lock().ok().and_then(|mut r| r.take()) else {
        return;
    };
    r.recorder.finish();
    // The three flush at once, each on its own thread (each waits for its
    // collector's answer): the exit waits for the slowest, not the sum.
    let (done, wait) = std::sync::mpsc::channel::<()>();
    let mut stops: Vec<Box<dyn FnOnce() + Send>> = Vec::new();
    if let Some(t) = r.traces {
        stops.push(Box::new(move || {
            if let Err(e) = t.shutdown_with_timeout(SHUTDOWN_WAIT) {
                tracing::debug!("telemetry: traces: {e}");
            }
        }));
    }
    if let Some(l) = r.logs {
        stops.push(Box::new(move || {
            if let Err(e) = l.shutdown_with_timeout(SHUTDOWN_WAIT) {
                tracing::debug!("telemetry: logs: {e}");
            }
        }));
    }
    if let Some(m) = r.metrics {
        stops.push(Box::new(move || {
            if let Err(e) = m.shutdown_with_timeout(SHUTDOWN_WAIT) {
                tracing::debug!("telemetry: metrics: {e}");
            }
        }));
    }
    let mut started = 0;
    for stop in stops {
        let done = done.clone();
        let spawned = std::thread::Builder::new()
            .name("telemetry-shutdown".into())
            .spawn(move || {
                stop();
                let _ = done.send(());
            });
        started += usize::from(spawned.is_ok());
    }
    drop(done);
    let deadline = std::time::Instant::now() + SHUTDOWN_WAIT * 2;
    for _ in 0..started {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if wait.recv_timeout(left).is_err() {
            eprintln!("cadre: telemetry: the last export did not finish in time");
            return;
        }
    }
}

fn build(s: &Switches, how: &Start) -> Option<Running> {
    let mut resource = Resource::builder_empty()
        .with_service_name(s.service_name.clone())
        .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")));
    for (k, v) in &s.resource {
        resource = resource.with_attribute(KeyValue::new(k.clone(), v.clone()));
    }
    let resource = resource.build();
    let client = if [&s.metrics, &s.logs, &s.traces]
        .iter()
        .any(|e| e.otlp.is_some())
    {
        match http::Client::new(s.timeout) {
            Some(c) => Some(c),
            None => {
                eprintln!("cadre: telemetry: cannot build the HTTP client; nothing is sent");
                return None;
            }
        }
    } else {
        None
    };
    let metrics = s.metrics.any().then(|| {
        let mut b = SdkMeterProvider::builder().with_resource(resource.clone());
        let temporality = if s.cumulative {
            Temporality::Cumulative
        } else {
            Temporality::Delta
        };
        if let (Some(o), Some(c)) = (&s.metrics.otlp, &client) {
            match opentelemetry_otlp::MetricExporter::builder()
                .with_http()
                .with_endpoint(o.endpoint.clone())
                .with_protocol(protocol(o))
                .with_timeout(s.timeout)
                .with_headers(o.headers.clone())
                .with_http_client(c.clone())
                .with_temporality(temporality)
                .build()
            {
                Ok(e) => {
                    b = b.with_reader(
                        PeriodicReader::builder(e)
                            .with_interval(s.metric_interval)
                            .build(),
                    );
                }
                Err(e) => eprintln!("cadre: telemetry: metrics: {e}"),
            }
        }
        if s.metrics.console {
            let e = opentelemetry_stdout::MetricExporter::builder()
                .with_temporality(temporality)
                .build();
            b = b.with_reader(
                PeriodicReader::builder(e)
                    .with_interval(s.metric_interval)
                    .build(),
            );
        }
        b.build()
    });
    let logs = s.logs.any().then(|| {
        let mut b = SdkLoggerProvider::builder().with_resource(resource.clone());
        let batch = || {
            BatchConfigBuilder::default()
                .with_scheduled_delay(s.logs_interval)
                .build()
        };
        if let (Some(o), Some(c)) = (&s.logs.otlp, &client) {
            match opentelemetry_otlp::LogExporter::builder()
                .with_http()
                .with_endpoint(o.endpoint.clone())
                .with_protocol(protocol(o))
                .with_timeout(s.timeout)
                .with_headers(o.headers.clone())
                .with_http_client(c.clone())
                .build()
            {
                Ok(e) => {
                    b = b.with_log_processor(
                        BatchLogProcessor::builder(e)
                            .with_batch_config(batch())
                            .build(),
                    );
                }
                Err(e) => eprintln!("cadre: telemetry: logs: {e}"),
            }
        }
        if s.logs.console {
            b = b.with_log_processor(
                BatchLogProcessor::builder(opentelemetry_stdout::LogExporter::default())
                    .with_batch_config(batch())
                    .build(),
            );
        }
        b.build()
    });
    let traces = s.traces.any().then(|| {
        let mut b = SdkTracerProvider::builder().with_resource(resource.clone());
        if let (Some(o), Some(c)) = (&s.traces.otlp, &client) {
            match opentelemetry_otlp::SpanExporter::builder()
                .with_http()
                .with_endpoint(o.endpoint.clone())
                .with_protocol(protocol(o))
                .with_timeout(s.timeout)
                .with_headers(o.headers.clone())
                .with_http_client(c.clone())
                .build()
            {
                Ok(e) => b = b.with_batch_exporter(e),
                Err(e) => eprintln!("cadre: telemetry: traces: {e}"),
            }
        }
        if s.traces.console {
            b = b.with_batch_exporter(opentelemetry_stdout::SpanExporter::default());
        }
        b.build()
    });
    let shared = Shared {
        session_id: how.session_id.to_string(),
        version: env!("CARGO_PKG_VERSION"),
        include_session_id: s.include_session_id,
        include_version: s.include_version,
        log_user_prompts: s.log_user_prompts,
        log_tool_details: s.log_tool_details,
        terminal: Vars {
            settings: how.settings_env,
            process: how.process_env,
        }
        .get("TERM_PROGRAM")
        .map(str::to_string),
        prices: how.prices.clone(),
    };
    let recorder = Arc::new(Recorder::new(
        shared,
        metrics.as_ref().map(|m| Instruments::new(&m.meter(SCOPE))),
        logs.as_ref().map(|l| l.logger(SCOPE)),
        traces.as_ref().map(|t| t.tracer(SCOPE)),
    ));
    Some(Running {
        recorder,
        metrics,
        logs,
        traces,
    })
}

fn protocol(o: &Otlp) -> Protocol {
    if o.json {
        Protocol::HttpJson
    } else {
        Protocol::HttpBinary
    }
}
