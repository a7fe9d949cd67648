//! OpenTelemetry export, Claude Code's way (docs/observability.md): the
//! same switches, metric and event names, and traces of the agent tree.
//!
//! Fed by the engine's event sink only: [`start`] wraps a session's sink
//! when `CLAUDE_CODE_ENABLE_TELEMETRY` is on, and does nothing else when it
//! is off (no thread, no provider, the sink untouched). [`shutdown`] ends
//! the open spans and flushes every signal, bounded in time, before the
//! process exits.

#[cfg(feature = "otlp-grpc")]
mod grpc;
mod http;
mod record;
mod switches;
mod tls;

use std::collections::BTreeMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

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

use record::{At, Instruments, Recorder, Shared};
use switches::{Otlp, Switches, TlsFiles, Vars, Wire};

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
    /// The runtime whose blocking threads wait for exports.
    runtime: Option<tokio::runtime::Handle>,
}

/// The most events kept while telemetry is being set up (a session's
/// first few; set-up takes about a millisecond).
const MAX_EARLY: usize = 4096;

/// The process's telemetry: being set up on its own thread (with the
/// events that happened meanwhile, and when), set up, or not to be had.
enum Slot {
    Building(Vec<(At, Item)>),
    Built(Running),
    Failed,
}

static RUNNING: Mutex<Option<Slot>> = Mutex::new(None);
/// Signalled when the set-up thread has left [`Slot::Building`].
static SET_UP: Condvar = Condvar::new();

/// What the set-up thread needs of [`Start`].
struct Owned {
    session_id: String,
    start_type: Option<&'static str>,
    terminal: Option<String>,
    prices: BTreeMap<String, ModelPrice>,
}

/// The session's sink, with telemetry recording every event after it when
/// telemetry is on; `events` itself when it is off.
///
/// The providers, exporters and their threads are set up on a thread of
/// their own, while the session goes on starting. Nothing waits for them:
/// an event that comes first is kept, with the time it happened, and
/// recorded by the set-up thread once it is done.
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
        let spawned = std::thread::Builder::new()
            .name("telemetry-setup".into())
            .spawn(move || set_up(&s, &owned, runtime));
        *slot = Some(match spawned {
            Ok(_) => Slot::Building(Vec::new()),
            Err(_) => Slot::Failed,
        });
        // What happens beside the sessions (MCP servers connecting,
        // plugins loading), and what happened before now.
        let before = crate::config::observed::watch(|o| {
            deliver(Item::Observed(o), At::now());
        });
        if let Some(Slot::Building(early)) = slot.as_mut() {
            early.extend(
                before
                    .into_iter()
                    .map(|o| (At::now(), Item::Observed(o)))
                    .take(MAX_EARLY),
            );
        }
    }
    drop(slot);
    // One process, one set of providers: a second session (of `chat`)
    // records into the same.
    if !first && let (Some(r), Some(start_type)) = (recorder(), how.start_type) {
        r.session_started(start_type);
    }
    let built: std::sync::OnceLock<Arc<Recorder>> = std::sync::OnceLock::new();
    Arc::new(move |e: &EngineEvent| {
        events(e);
        if !Recorder::wanted(e) {
            return;
        }
        let at = At::now();
        match built.get() {
            Some(r) => {
                r.record(e, at);
                // A prompt's data goes out as soon as it is answered,
                // while the process ends its session and prints: the
                // flush at exit then has only what came after to send,
                // and often nothing.
                if matches!(e, EngineEvent::TurnEnd { .. }) {
                    flush_soon();
                }
            }
            None => {
                if let Some(r) = deliver(Item::Engine(e.clone()), at) {
                    let _ = built.set(r);
                }
            }
        }
    })
}

/// Something for the recorder, besides the engine's events.
enum Item {
    Engine(EngineEvent),
    Observed(crate::config::observed::Observed),
    /// A key a person pressed (chat).
    UserActivity,
}

/// Records `item` (which happened `at`), or keeps it while telemetry is
/// being set up; nothing when telemetry is off or failed. The recorder,
/// when it is set up.
fn deliver(item: Item, at: At) -> Option<Arc<Recorder>> {
    let recorder = {
        let mut slot = RUNNING.lock().ok()?;
        match slot.as_mut()? {
            Slot::Building(early) => {
                if early.len() < MAX_EARLY {
                    early.push((at, item));
                }
                return None;
            }
            Slot::Built(r) => Arc::clone(&r.recorder),
            Slot::Failed => return None,
        }
    };
    if take(&recorder, &item, at) {
        flush_soon();
    }
    Some(recorder)
}

/// Records one item; whether it ended a prompt (whose data is then
/// exported at once).
fn take(recorder: &Recorder, item: &Item, at: At) -> bool {
    match item {
        Item::Engine(e) => {
            recorder.record(e, at);
            matches!(e, EngineEvent::TurnEnd { .. })
        }
        Item::Observed(o) => {
            recorder.observed(o, at);
            false
        }
        Item::UserActivity => {
            recorder.user_activity(at);
            false
        }
    }
}

/// A person pressed a key in the chat: Claude Code's `active_time` of
/// type `user` counts the time between keys (at most 5 s apart) while no
/// prompt is being worked on. Never waits; nothing when telemetry is off.
pub fn user_activity() {
    deliver(Item::UserActivity, At::now());
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

/// The set-up thread: builds the providers, records the events that came
/// meanwhile (in order, under the lock, so none overtakes them), and
/// makes telemetry [`Slot::Built`].
fn set_up(s: &Switches, how: &Owned, runtime: Option<tokio::runtime::Handle>) {
    /// Leaves `Building` whatever happens (a panic while building
    /// included), so nothing waits for a set-up that will not come.
    struct Done;
    impl Drop for Done {
        fn drop(&mut self) {
            if let Ok(mut slot) = RUNNING.lock()
                && matches!(*slot, Some(Slot::Building(_)))
            {
                *slot = Some(Slot::Failed);
            }
            SET_UP.notify_all();
        }
    }
    let _done = Done;
    let began = Instant::now();
    let built = {
        let _inside = runtime.as_ref().map(tokio::runtime::Handle::enter);
        build(s, how, runtime.clone())
    };
    let Some(running) = built else { return };
    if let Some(start_type) = how.start_type {
        running.recorder.session_started(start_type);
    }
    let Ok(mut slot) = RUNNING.lock() else { return };
    let early = match slot.take() {
        Some(Slot::Building(early)) => early,
        other => {
            *slot = other;
            return;
        }
    };
    let mut answered = false;
    for (at, item) in &early {
        answered |= take(&running.recorder, item, *at);
    }
    *slot = Some(Slot::Built(running));
    drop(slot);
    tracing::debug!(
        "telemetry: set up in {:.3} ms ({} events kept meanwhile)",
        ms_since(began),
        early.len()
    );
    if answered {
        flush_soon();
    }
}

/// The set-up telemetry, waiting for its set-up thread if it still runs.
fn ready(slot: MutexGuard<'_, Option<Slot>>) -> Option<MutexGuard<'_, Option<Slot>>> {
    let slot = SET_UP
        .wait_while(slot, |s| matches!(s, Some(Slot::Building(_))))
        .ok()?;
    matches!(*slot, Some(Slot::Built(_))).then_some(slot)
}

/// The recorder, once set up; `None` when telemetry is off or failed.
fn recorder() -> Option<Arc<Recorder>> {
    let slot = ready(RUNNING.lock().ok()?)?;
    match slot.as_ref() {
        Some(Slot::Built(r)) => Some(Arc::clone(&r.recorder)),
        _ => None,
    }
}

/// Starts an export of everything recorded so far, not waiting for it.
fn flush_soon() {
    let (jobs, runtime) = match RUNNING.lock() {
        Ok(slot) => match slot.as_ref() {
            Some(Slot::Built(r)) => (
                per_signal(
                    r.metrics.clone(),
                    r.logs.clone(),
                    r.traces.clone(),
                    Signal::Flush,
                ),
                r.runtime.clone(),
            ),
            _ => return,
        },
        Err(_) => return,
    };
    for job in jobs {
        run_job(runtime.as_ref(), job);
    }
}

/// Runs `job` (which waits for a collector) on one of the runtime's
/// blocking threads, reused from one job to the next, or on a thread of
/// its own without a runtime. Whether it was started.
fn run_job(runtime: Option<&tokio::runtime::Handle>, job: Box<dyn FnOnce() + Send>) -> bool {
    match runtime {
        Some(rt) => {
            drop(rt.spawn_blocking(job));
            true
        }
        None => std::thread::Builder::new()
            .name("telemetry-export".into())
            .spawn(job)
            .is_ok(),
    }
}

#[derive(Clone, Copy)]
enum Signal {
    Flush,
    Shutdown,
}

/// One job per signal switched on: a flush of its provider, or its
/// shutdown (which exports what is left, bounded by [`SHUTDOWN_WAIT`]).
/// Each waits for its collector's answer, so each runs on its own thread.
fn per_signal(
    metrics: Option<SdkMeterProvider>,
    logs: Option<SdkLoggerProvider>,
    traces: Option<SdkTracerProvider>,
    op: Signal,
) -> Vec<Box<dyn FnOnce() + Send>> {
    let said = |what: &str, r: opentelemetry_sdk::error::OTelSdkResult| {
        if let Err(e) = r {
            tracing::debug!("telemetry: {what}: {e}");
        }
    };
    let mut jobs: Vec<Box<dyn FnOnce() + Send>> = Vec::new();
    if let Some(t) = traces {
        jobs.push(Box::new(move || {
            said(
                "traces",
                match op {
                    Signal::Flush => t.force_flush(),
                    Signal::Shutdown => t.shutdown_with_timeout(SHUTDOWN_WAIT),
                },
            );
        }));
    }
    if let Some(l) = logs {
        jobs.push(Box::new(move || {
            said(
                "logs",
                match op {
                    Signal::Flush => l.force_flush(),
                    Signal::Shutdown => l.shutdown_with_timeout(SHUTDOWN_WAIT),
                },
            );
        }));
    }
    if let Some(m) = metrics {
        jobs.push(Box::new(move || {
            said(
                "metrics",
                match op {
                    Signal::Flush => m.force_flush(),
                    Signal::Shutdown => m.shutdown_with_timeout(SHUTDOWN_WAIT),
                },
            );
        }));
    }
    jobs
}

/// The headers that carry a sub-agent's trace context to the worker that
/// runs it (W3C `traceparent`); none when telemetry is off or the
/// sub-agent has no span.
pub fn trace_headers(agent_id: &str) -> Vec<(String, String)> {
    recorder()
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
    if let Some(r) = recorder() {
        r.adopt(agent_id, agent_type, &headers.iter().cloned().collect());
    }
}

/// Ends the open spans and flushes and stops every provider, waiting at
/// most a few seconds; nothing when telemetry never started. Call before
/// the process exits, outside the async runtime's worker threads (the
/// exports run on that runtime).
pub fn shutdown() {
    let Some(r) = RUNNING.lock().ok().and_then(|slot| {
        let mut slot = ready(slot)?;
        match slot.take() {
            Some(Slot::Built(r)) => Some(r),
            _ => None,
        }
    }) else {
        return;
    };
    let began = Instant::now();
    r.recorder.finish();
    // The three stop at once, each on a thread of its own: the exit waits
    // for the slowest, not the sum. A signal with nothing left since the
    // flush at the prompt's end sends nothing (the SDK exports no empty
    // batch).
    let (done, wait) = std::sync::mpsc::channel::<()>();
    let stops = per_signal(r.metrics, r.logs, r.traces, Signal::Shutdown);
    let mut started = 0;
    for stop in stops {
        let done = done.clone();
        let job: Box<dyn FnOnce() + Send> = Box::new(move || {
            stop();
            let _ = done.send(());
        });
        started += usize::from(run_job(r.runtime.as_ref(), job));
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

fn build(s: &Switches, how: &Owned, runtime: Option<tokio::runtime::Handle>) -> Option<Running> {
    let mut resource = Resource::builder_empty()
        .with_service_name(s.service_name.clone())
        .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")));
    for (k, v) in &s.resource {
        resource = resource.with_attribute(KeyValue::new(k.clone(), v.clone()));
    }
    let resource = resource.build();
    let mut links = Links::new(s.timeout);
    let metrics = s.metrics.any().then(|| {
        let mut b = SdkMeterProvider::builder().with_resource(resource.clone());
        let temporality = if s.cumulative {
            Temporality::Cumulative
        } else {
            Temporality::Delta
        };
        if let Some(o) = &s.metrics.otlp {
            let builder =
                opentelemetry_otlp::MetricExporter::builder().with_temporality(temporality);
            match otlp_exporter!(builder, o, &mut links) {
                Ok(e) => {
                    b = b.with_reader(
                        PeriodicReader::builder(e)
                            .with_interval(s.metric_interval)
                            .build(),
                    );
                }
                Err(e) => eprintln!("cadre: telemetry: metrics: {e}; metrics are not sent"),
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
        if let Some(o) = &s.logs.otlp {
            let builder = opentelemetry_otlp::LogExporter::builder();
            match otlp_exporter!(builder, o, &mut links) {
                Ok(e) => {
                    b = b.with_log_processor(
                        BatchLogProcessor::builder(e)
                            .with_batch_config(batch())
                            .build(),
                    );
                }
                Err(e) => eprintln!("cadre: telemetry: events: {e}; events are not sent"),
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
        if let Some(o) = &s.traces.otlp {
            let builder = opentelemetry_otlp::SpanExporter::builder();
            match otlp_exporter!(builder, o, &mut links) {
                Ok(e) => b = b.with_span_processor(span_batches(e)),
                Err(e) => eprintln!("cadre: telemetry: traces: {e}; spans are not sent"),
            }
        }
        if s.traces.console {
            b = b.with_span_processor(span_batches(opentelemetry_stdout::SpanExporter::default()));
        }
        b.build()
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
    Some(Running {
        recorder,
        metrics,
        logs,
        traces,
        runtime,
    })
}

/// The spans a batch processor holds before they are exported, unless
/// `OTEL_BSP_MAX_QUEUE_SIZE` says otherwise, and how many go in one
/// export. The SDK's queue is a channel whose every slot is written when it
/// is made: its default of 2,048 spans is 0.7 MB touched (about 170 page
/// faults) on every run. 1,024 still holds a burst of a thousand
/// background sub-agents' spans while the last batch is being sent, the
/// batches of 256 leaving room behind them.
const SPAN_QUEUE: usize = 1024;
const SPAN_BATCH: usize = 256;

fn span_batches<E: opentelemetry_sdk::trace::SpanExporter + 'static>(
    exporter: E,
) -> opentelemetry_sdk::trace::BatchSpanProcessor {
    let mut config = opentelemetry_sdk::trace::BatchConfigBuilder::default();
    if std::env::var_os("OTEL_BSP_MAX_QUEUE_SIZE").is_none() {
        config = config.with_max_queue_size(SPAN_QUEUE);
    }
    if std::env::var_os("OTEL_BSP_MAX_EXPORT_BATCH_SIZE").is_none() {
        config = config.with_max_export_batch_size(SPAN_BATCH);
    }
    opentelemetry_sdk::trace::BatchSpanProcessor::builder(exporter)
        .with_batch_config(config.build())
        .build()
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
        let c = http::Client::new(self.timeout, tls)?
            .ok_or_else(|| "no async runtime to send on".to_string())?;
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
