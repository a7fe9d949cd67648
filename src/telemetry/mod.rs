//! OpenTelemetry export, Claude Code's way (docs/observability.md): the
//! same switches, metric and event names, and traces of the agent tree.
//!
//! Fed by the engine's event sink only: [`start`] wraps a session's sink
//! when `CLAUDE_CODE_ENABLE_TELEMETRY` is on, and does nothing else when it
//! is off (no provider, the sink untouched). When it is on, the SDK's
//! providers record and [`pump`] sends, with no thread of its own.
//! [`shutdown`] ends the open spans and sends what is left of every
//! signal, bounded in time, before the process exits.

#[cfg(feature = "otlp-grpc")]
mod grpc;
mod http;
mod pump;
mod record;
mod switches;
mod tls;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use opentelemetry::KeyValue;
use opentelemetry::logs::LoggerProvider as _;
use opentelemetry::metrics::MeterProvider as _;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::logs::SdkLoggerProvider;
use opentelemetry_sdk::metrics::{ManualReader, SdkMeterProvider, Temporality};
use opentelemetry_sdk::trace::SdkTracerProvider;

use crate::config::ModelPrice;
use crate::runtime::{EngineEvent, EventSink};

use pump::{LogOut, LogSink, MetricOut, Outs, Pump, Reader, Sizes, SpanOut, SpanSink};
use record::{At, Instruments, Recorder, Shared};
use switches::{Otlp, Switches, TlsFiles, Vars, Wire};

/// The instrumentation scope of every signal, Claude Code's.
const SCOPE: &str = "com.anthropic.claude_code";

/// How long [`shutdown`] waits for the last export (and the one before
/// it, still being sent).
const SHUTDOWN_WAIT: Duration = Duration::from_secs(10);

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
    pump: Arc<Pump>,
    /// The task that sends each signal on its interval.
    every: tokio::task::JoinHandle<()>,
    /// A runtime of telemetry's own, when the process had none to send
    /// on: its tasks run when [`shutdown`] waits on it.
    own: Option<tokio::runtime::Runtime>,
    // Kept so that what the recorder records reaches the pump until the
    // exit's export.
    _providers: (
        Option<SdkMeterProvider>,
        Option<SdkLoggerProvider>,
        Option<SdkTracerProvider>,
    ),
}

/// The process's telemetry: set up, or not to be had (its set-up failed).
enum Slot {
    Built(Running),
    Failed,
}

static RUNNING: Mutex<Option<Slot>> = Mutex::new(None);

/// What the set-up needs of [`Start`].
struct Owned {
    session_id: String,
    start_type: Option<&'static str>,
    terminal: Option<String>,
    prices: BTreeMap<String, ModelPrice>,
}

/// The session's sink, with telemetry recording every event after it when
/// telemetry is on; `events` itself when it is off.
///
/// The first session of the process sets telemetry up here, on the
/// caller's thread: the providers, the exporters and their HTTP client
/// (about 0.3 ms, docs/observability.md). Moving this off a thread of its
/// own lowered telemetry's measured cost, and no event waits for a set-up
/// still under way.
pub fn start(events: EventSink, how: &Start) -> EventSink {
    let vars = Vars {
        settings: how.settings_env,
        process: how.process_env,
    };
    if !switches::enabled(&vars) {
        return events;
    }
    let Ok(mut slot) = RUNNING.lock() else {
        return events;
    };
    let first = slot.is_none();
    if first {
        let s = switches::read(&vars);
        for why in &s.refused {
            eprintln!("cadre: telemetry: {why}");
        }
        let owned = Owned {
            session_id: how.session_id.to_string(),
            start_type: how.start_type,
            terminal: vars.get("TERM_PROGRAM").map(str::to_string),
            prices: how.prices.clone(),
        };
        // The exporters send on this process's runtime.
        let runtime = tokio::runtime::Handle::try_current().ok();
        *slot = Some(match set_up(&s, &owned, runtime) {
            Some(r) => Slot::Built(r),
            None => Slot::Failed,
        });
    }
    drop(slot);
    let Some((recorder, pump)) = parts() else {
        return events;
    };
    if first {
        // What happens beside the sessions (MCP servers connecting,
        // plugins loading), and what happened before now.
        let before = crate::config::observed::watch(|o| {
            if let Some(r) = recorder_now() {
                r.observed(&o, At::now());
            }
        });
        for o in &before {
            recorder.observed(o, At::now());
        }
    } else if let Some(start_type) = how.start_type {
        // One process, one set of providers: a second session (of `chat`)
        // records into the same.
        recorder.session_started(start_type);
    }
    Arc::new(move |e: &EngineEvent| {
        events(e);
        if !Recorder::wanted(e) {
            return;
        }
        recorder.record(e, At::now());
        // A prompt's data goes out as soon as it is answered, while the
        // process ends its session and prints: the export at exit then
        // has only what came after to send, and often nothing.
        if matches!(e, EngineEvent::TurnEnd { .. }) {
            pump.answered();
        }
    })
}

/// A person pressed a key in the chat: Claude Code's `active_time` of
/// type `user` counts the time between keys (at most 5 s apart) while no
/// prompt is being worked on. Never waits; nothing when telemetry is off.
pub fn user_activity() {
    if let Some(r) = recorder_now() {
        r.user_activity(At::now());
    }
}

/// `cadre plugins install` installed the plugin `id` (`NAME@MARKETPLACE`)
/// into `folder`: a `plugin_installed` event, when telemetry is on (the
/// settings' `env` first, then the process's, as for a session).
pub fn plugin_installed(
    settings_env: &BTreeMap<String, String>,
    prices: &BTreeMap<String, ModelPrice>,
    id: &str,
    folder: &std::path::Path,
) {
    let Some((name, marketplace)) = id.rsplit_once('@') else {
        return;
    };
    let version = crate::config::plugins::manifest(folder)
        .ok()
        .and_then(|m| m.get("version")?.as_str().map(str::to_string));
    crate::config::observed::note(crate::config::observed::Observed::PluginInstalled {
        name: name.to_string(),
        marketplace: marketplace.to_string(),
        version,
    });
    let process: Vec<(String, String)> = std::env::vars().collect();
    let session_id = format!("{:032x}", rand::random::<u128>());
    // Started for the event alone; `shutdown` at exit sends it.
    start(
        Arc::new(|_: &EngineEvent| {}),
        &Start {
            settings_env,
            process_env: &process,
            session_id: &session_id,
            start_type: None,
            prices,
        },
    );
}

/// Builds the providers, exporters and the pump, on `runtime` or, when
/// the process has none, on a runtime of telemetry's own.
fn set_up(s: &Switches, how: &Owned, runtime: Option<tokio::runtime::Handle>) -> Option<Running> {
    let began = Instant::now();
    let (handle, own) = match runtime {
        Some(h) => (h, None),
        None => match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(rt) => (rt.handle().clone(), Some(rt)),
            Err(e) => {
                eprintln!("cadre: telemetry: no async runtime to send on: {e}");
                return None;
            }
        },
    };
    let running = {
        let _inside = handle.enter();
        build(s, how, handle.clone(), own)?
    };
    if let Some(start_type) = how.start_type {
        running.recorder.session_started(start_type);
    }
    tracing::debug!("telemetry: set up in {:.3} ms", ms_since(began));
    Some(running)
}

/// The recorder and the pump, once set up; `None` when telemetry is off
/// or failed.
fn parts() -> Option<(Arc<Recorder>, Arc<Pump>)> {
    match RUNNING.lock().ok()?.as_ref()? {
        Slot::Built(r) => Some((Arc::clone(&r.recorder), Arc::clone(&r.pump))),
        Slot::Failed => None,
    }
}

/// The recorder, once set up.
fn recorder_now() -> Option<Arc<Recorder>> {
    parts().map(|(r, _)| r)
}

/// The headers that carry a sub-agent's trace context to the worker that
/// runs it (W3C `traceparent`); none when telemetry is off or the
/// sub-agent has no span.
pub fn trace_headers(agent_id: &str) -> Vec<(String, String)> {
    recorder_now()
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
    if let Some(r) = recorder_now() {
        r.adopt(agent_id, agent_type, &headers.iter().cloned().collect());
    }
}

/// Ends the open spans and flushes and stops every provider, waiting at
/// most a few seconds; nothing when telemetry never started. Call before
/// the process exits, outside the async runtime's worker threads (the
/// exports run on that runtime).
pub fn shutdown() {
    let Some(Slot::Built(r)) = RUNNING.lock().ok().and_then(|mut slot| slot.take()) else {
        return;
    };
    let began = Instant::now();
    r.recorder.finish();
    r.every.abort();
    // The three signals go at once: the exit waits for the slowest, not
    // the sum. A signal with nothing since the prompt's export sends
    // nothing.
    let in_time = match &r.own {
        Some(rt) => rt.block_on(async {
            tokio::time::timeout(SHUTDOWN_WAIT, Arc::clone(&r.pump).last())
                .await
                .is_ok()
        }),
        None => r.pump.finish(SHUTDOWN_WAIT),
    };
    for said in [r.pump.dropped(), r.pump.failures()].into_iter().flatten() {
        eprintln!("cadre: telemetry: {said}");
    }
    if !in_time {
        eprintln!("cadre: telemetry: the last export did not finish in time");
        return;
    }
    tracing::debug!("telemetry: flushed in {:.3} ms", ms_since(began));
}

fn ms_since(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1000.0
}

/// One signal's OTLP exporter from its `builder` (`MetricExporter::builder()`,
/// …) for `o`: over HTTP with the client for its TLS files, or over gRPC
/// on the channel to its collector.
macro_rules! otlp_exporter {
    ($builder:expr, $o:expr, $links:expr) => {{
        let o: &Otlp = $o;
        let links: &mut Links = $links;
        match o.wire {
            Wire::Protobuf | Wire::Json => links.http(&o.tls).and_then(|client| {
                $builder
                    .with_http()
                    .with_endpoint(o.endpoint.clone())
                    .with_protocol(if o.wire == Wire::Json {
                        Protocol::HttpJson
                    } else {
                        Protocol::HttpBinary
                    })
                    .with_timeout(links.timeout)
                    .with_headers(o.headers.clone())
                    .with_http_client(client)
                    .build()
                    .map_err(|e| e.to_string())
            }),
            #[cfg(feature = "otlp-grpc")]
            Wire::Grpc => links.grpc(&o.endpoint, &o.tls).and_then(|channel| {
                use opentelemetry_otlp::WithTonicConfig as _;
                $builder
                    .with_tonic()
                    .with_channel(channel)
                    .with_timeout(links.timeout)
                    .with_metadata(grpc::metadata(&o.headers))
                    .build()
                    .map_err(|e| e.to_string())
            }),
            #[cfg(not(feature = "otlp-grpc"))]
            Wire::Grpc => Err("this cadre was built without gRPC".to_string()),
        }
    }};
}

fn build(
    s: &Switches,
    how: &Owned,
    runtime: tokio::runtime::Handle,
    own: Option<tokio::runtime::Runtime>,
) -> Option<Running> {
    let mut resource = Resource::builder_empty()
        .with_service_name(s.service_name.clone())
        .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")));
    for (k, v) in &s.resource {
        resource = resource.with_attribute(KeyValue::new(k.clone(), v.clone()));
    }
    let resource = resource.build();
    let mut links = Links::new(s.timeout);
    let mut outs = Outs::default();
    let temporality = if s.cumulative {
        Temporality::Cumulative
    } else {
        Temporality::Delta
    };
    if let Some(o) = &s.metrics.otlp {
        let builder = opentelemetry_otlp::MetricExporter::builder().with_temporality(temporality);
        match otlp_exporter!(builder, o, &mut links) {
            Ok(e) => outs.metrics.push(MetricOut::Otlp(Box::new(e))),
            Err(e) => eprintln!("cadre: telemetry: metrics: {e}; metrics are not sent"),
        }
    }
    if s.metrics.console {
        let e = opentelemetry_stdout::MetricExporter::builder()
            .with_temporality(temporality)
            .build();
        outs.metrics.push(MetricOut::Console(e));
    }
    if let Some(o) = &s.logs.otlp {
        let builder = opentelemetry_otlp::LogExporter::builder();
        match otlp_exporter!(builder, o, &mut links) {
            Ok(mut e) => {
                opentelemetry_sdk::logs::LogExporter::set_resource(&mut e, &resource);
                outs.logs.push(LogOut::Otlp(Box::new(e)));
            }
            Err(e) => eprintln!("cadre: telemetry: events: {e}; events are not sent"),
        }
    }
    if s.logs.console {
        let mut e = opentelemetry_stdout::LogExporter::default();
        opentelemetry_sdk::logs::LogExporter::set_resource(&mut e, &resource);
        outs.logs.push(LogOut::Console(e));
    }
    if let Some(o) = &s.traces.otlp {
        let builder = opentelemetry_otlp::SpanExporter::builder();
        match otlp_exporter!(builder, o, &mut links) {
            Ok(mut e) => {
                opentelemetry_sdk::trace::SpanExporter::set_resource(&mut e, &resource);
                outs.spans.push(SpanOut::Otlp(Box::new(e)));
            }
            Err(e) => eprintln!("cadre: telemetry: traces: {e}; spans are not sent"),
        }
    }
    if s.traces.console {
        let mut e = opentelemetry_stdout::SpanExporter::default();
        opentelemetry_sdk::trace::SpanExporter::set_resource(&mut e, &resource);
        outs.spans.push(SpanOut::Console(e));
    }
    let reader = s.metrics.any().then(|| {
        Arc::new(
            ManualReader::builder()
                .with_temporality(temporality)
                .build(),
        )
    });
    let sizes = Sizes {
        span_batch: s.span_batch,
        span_max: s.span_queue,
        log_batch: s.log_batch,
        log_max: s.log_queue,
        span_interval: s.spans_interval,
        log_interval: s.logs_interval,
        metric_interval: s.metric_interval,
    };
    let pump = Pump::new(&sizes, reader.clone(), outs, runtime);
    let metrics = reader.map(|r| {
        SdkMeterProvider::builder()
            .with_resource(resource.clone())
            .with_reader(Reader(r))
            .build()
    });
    let logs = s.logs.any().then(|| {
        SdkLoggerProvider::builder()
            .with_resource(resource.clone())
            .with_log_processor(LogSink(Arc::downgrade(&pump)))
            .build()
    });
    let traces = s.traces.any().then(|| {
        SdkTracerProvider::builder()
            .with_resource(resource.clone())
            .with_span_processor(SpanSink(Arc::downgrade(&pump)))
            .build()
    });
    let shared = Shared {
        session_id: how.session_id.clone(),
        version: env!("CARGO_PKG_VERSION"),
        include_session_id: s.include_session_id,
        include_version: s.include_version,
        log_user_prompts: s.log_user_prompts,
        log_tool_details: s.log_tool_details,
        terminal: how.terminal.clone(),
        prices: how.prices.clone(),
    };
    let recorder = Arc::new(Recorder::new(
        shared,
        metrics.as_ref().map(|m| Instruments::new(&m.meter(SCOPE))),
        logs.as_ref().map(|l| l.logger(SCOPE)),
        traces.as_ref().map(|t| t.tracer(SCOPE)),
    ));
    let every = pump.every(&sizes);
    Some(Running {
        recorder,
        pump,
        every,
        own,
        _providers: (metrics, logs, traces),
    })
}

/// The connections the exporters share: one HTTP client per set of TLS
/// files, one gRPC channel per collector. Signals sent to one place go on
/// one connection (one HTTP/2 connection over TLS or gRPC): one
/// handshake at the first export, not three.
struct Links {
    timeout: Duration,
    http: Vec<(TlsFiles, http::Client)>,
    #[cfg(feature = "otlp-grpc")]
    grpc: Vec<((String, TlsFiles), tonic::transport::Channel)>,
}

impl Links {
    fn new(timeout: Duration) -> Links {
        Links {
            timeout,
            http: Vec::new(),
            #[cfg(feature = "otlp-grpc")]
            grpc: Vec::new(),
        }
    }

    fn http(&mut self, tls: &TlsFiles) -> Result<http::Client, String> {
        if let Some((_, c)) = self.http.iter().find(|(t, _)| t == tls) {
            return Ok(c.clone());
        }
        let c = http::Client::new(self.timeout, tls)?;
        self.http.push((tls.clone(), c.clone()));
        Ok(c)
    }

    #[cfg(feature = "otlp-grpc")]
    fn grpc(
        &mut self,
        endpoint: &str,
        tls: &TlsFiles,
    ) -> Result<tonic::transport::Channel, String> {
        let key = (endpoint.to_string(), tls.clone());
        if let Some((_, c)) = self.grpc.iter().find(|(k, _)| *k == key) {
            return Ok(c.clone());
        }
        let config = if endpoint.starts_with("https://") {
            Some(tls::config(tls)?)
        } else {
            None
        };
        let c = grpc::channel(endpoint, self.timeout, config)?;
        self.grpc.push((key, c.clone()));
        Ok(c)
    }
}
