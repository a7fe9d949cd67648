//! Where the SDK's providers put what they record, and the one task that
//! sends it: no thread of telemetry's own.
//!
//! The SDK's own batch span and log processors and its periodic metric
//! reader each start a thread, and a flush waits on them; on a 15 ms
//! `cadre run` those threads (and the blocking threads the flushes ran
//! on) cost more than everything recorded. Here the spans and events a
//! provider ends go into a bounded queue, the metrics stay in the SDK until
//! a [`ManualReader`] collects them, and an export is a task on the
//! process's tokio runtime: at a prompt's end, when a queue holds a
//! batch, on each signal's interval, and once more at exit. Exports never
//! overlap (an exporter is called by one export at a time, as the SDK
//! promises its exporters), and a request to export while one is already
//! waiting to start adds nothing.

use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use opentelemetry::{Context, InstrumentationScope};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::logs::{LogBatch, LogExporter as _, LogProcessor, SdkLogRecord};
use opentelemetry_sdk::metrics::data::ResourceMetrics;
use opentelemetry_sdk::metrics::exporter::PushMetricExporter as _;
use opentelemetry_sdk::metrics::reader::MetricReader;
use opentelemetry_sdk::metrics::{InstrumentKind, ManualReader, Pipeline, Temporality};
use opentelemetry_sdk::trace::{Span, SpanData, SpanExporter as _, SpanProcessor};

/// The signals an export sends, as bits.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) struct Signals(u8);

impl Signals {
    pub const SPANS: Signals = Signals(1);
    pub const LOGS: Signals = Signals(2);
    pub const METRICS: Signals = Signals(4);
    pub const ALL: Signals = Signals(7);

    fn has(self, s: Signals) -> bool {
        self.0 & s.0 != 0
    }
}

/// A span exporter: OTLP or the console.
pub(super) enum SpanOut {
    Otlp(Box<opentelemetry_otlp::SpanExporter>),
    Console(opentelemetry_stdout::SpanExporter),
}

/// An event (log record) exporter.
pub(super) enum LogOut {
    Otlp(Box<opentelemetry_otlp::LogExporter>),
    Console(opentelemetry_stdout::LogExporter),
}

/// A metric exporter.
pub(super) enum MetricOut {
    Otlp(Box<opentelemetry_otlp::MetricExporter>),
    Console(opentelemetry_stdout::MetricExporter),
}

impl SpanOut {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        match self {
            SpanOut::Otlp(e) => e.export(batch).await,
            SpanOut::Console(e) => e.export(batch).await,
        }
    }
}

impl LogOut {
    async fn export(&self, batch: LogBatch<'_>) -> OTelSdkResult {
        match self {
            LogOut::Otlp(e) => e.export(batch).await,
            LogOut::Console(e) => e.export(batch).await,
        }
    }
}

impl MetricOut {
    async fn export(&self, metrics: &ResourceMetrics) -> OTelSdkResult {
        match self {
            MetricOut::Otlp(e) => e.export(metrics).await,
            MetricOut::Console(e) => e.export(metrics).await,
        }
    }
}

/// Every signal's exporters.
#[derive(Default)]
pub(super) struct Outs {
    pub spans: Vec<SpanOut>,
    pub logs: Vec<LogOut>,
    pub metrics: Vec<MetricOut>,
}

/// A bounded queue of what a provider ended, with the size of a batch
/// (which starts an export) and the most it holds (past that, new items
/// are dropped, as the SDK's own processors drop them).
struct Queue<T> {
    items: Mutex<Vec<T>>,
    batch: usize,
    max: usize,
    /// How many were dropped because the queue was full.
    dropped: AtomicUsize,
}

impl<T> Queue<T> {
    fn new(batch: usize, max: usize) -> Queue<T> {
        Queue {
            items: Mutex::new(Vec::new()),
            batch: batch.clamp(1, max.max(1)),
            max: max.max(1),
            dropped: AtomicUsize::new(0),
        }
    }

    /// Adds `item`; whether the queue now holds a whole batch.
    fn push(&self, item: T) -> bool {
        let Ok(mut items) = self.items.lock() else {
            return false;
        };
        if items.len() >= self.max {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        items.push(item);
        items.len() == self.batch
    }

    fn take(&self) -> Vec<T> {
        self.items
            .lock()
            .map(|mut items| std::mem::take(&mut *items))
            .unwrap_or_default()
    }
}

/// How big the queues are and how often each signal is sent.
pub(super) struct Sizes {
    pub span_batch: usize,
    pub span_max: usize,
    pub log_batch: usize,
    pub log_max: usize,
    pub span_interval: Duration,
    pub log_interval: Duration,
    pub metric_interval: Duration,
}

/// The queues, the metric reader, the exporters and the runtime that runs
/// the exports.
pub(super) struct Pump {
    spans: Queue<SpanData>,
    logs: Queue<(SdkLogRecord, InstrumentationScope)>,
    reader: Option<Arc<ManualReader>>,
    outs: tokio::sync::Mutex<Outs>,
    /// The signals asked for by an export that has not started yet (it
    /// takes them all when it does).
    asked: AtomicU8,
    /// Whether a signal is printed on standard output.
    console: bool,
    /// Exports that failed, and the last one's words.
    failed: AtomicUsize,
    last_failure: Mutex<Option<String>>,
    runtime: tokio::runtime::Handle,
}

impl Pump {
    pub fn new(
        sizes: &Sizes,
        reader: Option<Arc<ManualReader>>,
        outs: Outs,
        runtime: tokio::runtime::Handle,
    ) -> Arc<Pump> {
        let console = outs.spans.iter().any(|o| matches!(o, SpanOut::Console(_)))
            || outs.logs.iter().any(|o| matches!(o, LogOut::Console(_)))
            || outs
                .metrics
                .iter()
                .any(|o| matches!(o, MetricOut::Console(_)));
        Arc::new(Pump {
            console,
            failed: AtomicUsize::new(0),
            last_failure: Mutex::new(None),
            spans: Queue::new(sizes.span_batch, sizes.span_max),
            logs: Queue::new(sizes.log_batch, sizes.log_max),
            reader,
            outs: tokio::sync::Mutex::new(outs),
            asked: AtomicU8::new(0),
            runtime,
        })
    }

    /// Starts an export of `signals` on the runtime, not waiting for it;
    /// nothing when one that has not started yet will send them anyway.
    pub fn kick(self: &Arc<Self>, signals: Signals) {
        let before = self.asked.fetch_or(signals.0, Ordering::AcqRel);
        if before != 0 {
            // An export is already on its way to start; it takes these too.
            return;
        }
        let pump = Arc::clone(self);
        drop(self.runtime.spawn(async move { pump.export().await }));
    }

    /// A prompt was answered: its data goes out now, while the process
    /// ends its session and prints, so the export at exit has little or
    /// nothing left to send. Not with a console exporter: what it prints
    /// would land in the middle of the answer; it prints on its interval
    /// and at exit.
    pub fn answered(self: &Arc<Self>) {
        if !self.console {
            self.kick(Signals::ALL);
        }
    }

    /// The spans and events dropped because their queue was full, in
    /// words naming the variable that makes it larger; `None` when none
    /// were.
    pub fn dropped(&self) -> Option<String> {
        let spans = self.spans.dropped.load(Ordering::Relaxed);
        let logs = self.logs.dropped.load(Ordering::Relaxed);
        let mut said = Vec::new();
        if spans > 0 {
            said.push(format!(
                "{spans} spans (more than OTEL_BSP_MAX_QUEUE_SIZE={} waiting)",
                self.spans.max
            ));
        }
        if logs > 0 {
            said.push(format!(
                "{logs} events (more than OTEL_BLRP_MAX_QUEUE_SIZE={} waiting)",
                self.logs.max
            ));
        }
        (!said.is_empty()).then(|| format!("dropped {}", said.join(" and ")))
    }

    /// Counts a failed export, keeping the last one's words.
    fn said(&self, what: &str, r: OTelSdkResult) {
        if let Err(e) = r {
            tracing::debug!("telemetry: {what}: {e}");
            self.failed.fetch_add(1, Ordering::Relaxed);
            if let Ok(mut last) = self.last_failure.lock() {
                *last = Some(format!("{what}: {e}"));
            }
        }
    }

    /// How many exports failed, with the last failure in words; `None`
    /// when none did.
    pub fn failures(&self) -> Option<String> {
        let n = self.failed.load(Ordering::Relaxed);
        if n == 0 {
            return None;
        }
        let last = self
            .last_failure
            .lock()
            .ok()
            .and_then(|l| l.clone())
            .unwrap_or_default();
        Some(format!(
            "{n} export{} to the collector failed (the last: {last})",
            if n == 1 { "" } else { "s" }
        ))
    }

    /// Sends what was asked for, once the export before it is done.
    async fn export(&self) {
        let outs = self.outs.lock().await;
        let signals = Signals(self.asked.swap(0, Ordering::AcqRel));
        self.send(&outs, signals).await;
    }

    /// Sends everything left (the exit's export), after the export
    /// before it.
    pub async fn last(self: Arc<Self>) {
        let outs = self.outs.lock().await;
        self.asked.store(0, Ordering::Release);
        self.send(&outs, Signals::ALL).await;
    }

    /// [`Pump::last`], run on the pump's runtime from a thread outside
    /// it, waiting at most `wait`. Whether it finished in time.
    pub fn finish(self: &Arc<Self>, wait: Duration) -> bool {
        let (done, finished) = std::sync::mpsc::channel::<()>();
        let last = Arc::clone(self).last();
        drop(self.runtime.spawn(async move {
            last.await;
            let _ = done.send(());
        }));
        finished.recv_timeout(wait).is_ok()
    }

    /// Sends each of `signals` that has something to send. One after the
    /// other, on one connection to the collector: three at once would open
    /// three (HTTP/1.1), for no CPU saved on a short run (measured: the
    /// same within noise, and more page faults).
    async fn send(&self, outs: &Outs, signals: Signals) {
        if signals.has(Signals::SPANS) {
            self.send_spans(&outs.spans).await;
        }
        if signals.has(Signals::LOGS) {
            self.send_logs(&outs.logs).await;
        }
        if signals.has(Signals::METRICS) {
            self.send_metrics(&outs.metrics).await;
        }
    }

    async fn send_spans(&self, outs: &[SpanOut]) {
        let Some((last, rest)) = outs.split_last() else {
            return;
        };
        let batch = self.spans.take();
        if batch.is_empty() {
            return;
        }
        for out in rest {
            self.said("traces", out.export(batch.clone()).await);
        }
        self.said("traces", last.export(batch).await);
    }

    async fn send_logs(&self, outs: &[LogOut]) {
        if outs.is_empty() {
            return;
        }
        let records = self.logs.take();
        if records.is_empty() {
            return;
        }
        let refs: Vec<(&SdkLogRecord, &InstrumentationScope)> =
            records.iter().map(|(r, s)| (r, s)).collect();
        for out in outs {
            self.said("logs", out.export(LogBatch::new(&refs)).await);
        }
    }

    async fn send_metrics(&self, outs: &[MetricOut]) {
        let Some(reader) = self.reader.as_ref().filter(|_| !outs.is_empty()) else {
            return;
        };
        let mut rm = ResourceMetrics::default();
        if let Err(e) = reader.collect(&mut rm) {
            self.said("metrics", Err(e));
            return;
        }
        // Nothing recorded since the last export sends nothing.
        if rm.scope_metrics().next().is_none() {
            return;
        }
        for out in outs {
            self.said("metrics", out.export(&rm).await);
        }
    }

    /// Runs forever on the runtime: each signal sent on its interval.
    pub fn every(self: &Arc<Self>, sizes: &Sizes) -> tokio::task::JoinHandle<()> {
        let pump: Weak<Pump> = Arc::downgrade(self);
        let plan = [
            (Signals::SPANS, sizes.span_interval),
            (Signals::LOGS, sizes.log_interval),
            (Signals::METRICS, sizes.metric_interval),
        ];
        self.runtime.spawn(async move {
            let start = tokio::time::Instant::now();
            let mut next = plan.map(|(s, every)| (s, every.max(Duration::from_millis(1)), start));
            for n in &mut next {
                n.2 += n.1;
            }
            loop {
                let Some(when) = next.iter().map(|n| n.2).min() else {
                    return;
                };
                tokio::time::sleep_until(when).await;
                let now = tokio::time::Instant::now();
                let mut due = 0u8;
                for n in &mut next {
                    if n.2 <= now {
                        due |= n.0.0;
                        n.2 = now + n.1;
                    }
                }
                match pump.upgrade() {
                    Some(p) => p.kick(Signals(due)),
                    None => return,
                }
            }
        })
    }
}

/// The span processor: ended spans go to the pump's queue.
#[derive(Debug)]
pub(super) struct SpanSink(pub Weak<Pump>);

impl std::fmt::Debug for Pump {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Pump")
    }
}

impl SpanProcessor for SpanSink {
    fn on_start(&self, _span: &mut Span, _cx: &Context) {}

    fn on_end(&self, span: SpanData) {
        if let Some(p) = self.0.upgrade()
            && p.spans.push(span)
        {
            p.kick(Signals::SPANS);
        }
    }

    fn force_flush(&self) -> OTelSdkResult {
        Ok(())
    }

    fn shutdown_with_timeout(&self, _timeout: Duration) -> OTelSdkResult {
        Ok(())
    }
}

/// The log processor: emitted events go to the pump's queue.
#[derive(Debug)]
pub(super) struct LogSink(pub Weak<Pump>);

impl LogProcessor for LogSink {
    fn emit(&self, record: &mut SdkLogRecord, scope: &InstrumentationScope) {
        if let Some(p) = self.0.upgrade()
            && p.logs.push((record.clone(), scope.clone()))
        {
            p.kick(Signals::LOGS);
        }
    }

    fn force_flush(&self) -> OTelSdkResult {
        Ok(())
    }
}

/// The metric reader the meter provider is given; the pump keeps the same
/// [`ManualReader`] to collect from.
#[derive(Debug)]
pub(super) struct Reader(pub Arc<ManualReader>);

impl MetricReader for Reader {
    fn register_pipeline(&self, pipeline: Weak<Pipeline>) {
        self.0.register_pipeline(pipeline);
    }

    fn collect(&self, rm: &mut ResourceMetrics) -> OTelSdkResult {
        self.0.collect(rm)
    }

    fn force_flush(&self) -> OTelSdkResult {
        Ok(())
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.0.shutdown_with_timeout(timeout)
    }

    fn temporality(&self, kind: InstrumentKind) -> Temporality {
        self.0.temporality(kind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_queue_says_when_it_holds_a_batch_and_drops_past_its_size() {
        let q: Queue<u32> = Queue::new(2, 3);
        assert!(!q.push(1));
        assert!(q.push(2), "the second item makes a batch");
        assert!(!q.push(3), "a batch is announced once");
        assert!(!q.push(4), "full: dropped");
        assert_eq!(q.dropped.load(Ordering::Relaxed), 1);
        assert_eq!(q.take(), vec![1, 2, 3]);
        assert!(q.take().is_empty());
        assert!(!q.push(5));
        assert!(q.push(6), "after a take, a new batch");
    }

    #[test]
    fn a_batch_is_never_larger_than_the_queue() {
        let q: Queue<u32> = Queue::new(512, 4);
        assert!(!q.push(1) && !q.push(2) && !q.push(3));
        assert!(q.push(4), "a batch is at most the whole queue");
    }
}
