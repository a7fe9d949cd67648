//! Claude Code's telemetry switches, read from the settings' `env` table
//! over the process environment (as Claude Code applies its settings'
//! `env`): `CLAUDE_CODE_ENABLE_TELEMETRY`, the exporters per signal, the
//! OTLP endpoint, protocol and headers (per signal or for all), the export
//! intervals, `OTEL_LOG_USER_PROMPTS`, `OTEL_RESOURCE_ATTRIBUTES`.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::time::Duration;

/// One signal's exporters: `otlp`, `console`, or both.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Exporters {
    pub otlp: Option<Otlp>,
    pub console: bool,
}

impl Exporters {
    pub fn any(&self) -> bool {
        self.otlp.is_some() || self.console
    }
}

/// How one signal goes over OTLP: `OTEL_EXPORTER_OTLP_PROTOCOL`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Wire {
    /// `http/protobuf`
    Protobuf,
    /// `http/json`
    Json,
    /// `grpc`
    Grpc,
}

/// The files of a TLS connection to the collector: a certificate
/// authority to check its certificate with instead of the platform's
/// store (`…_CERTIFICATE`), and a client certificate with its key
/// (`…_CLIENT_CERTIFICATE`, `…_CLIENT_KEY`) for a collector that asks for
/// one. Paths as written; read when the exporters are built.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub(super) struct TlsFiles {
    pub ca: Option<PathBuf>,
    pub client: Option<(PathBuf, PathBuf)>,
}

/// Where and how one signal goes over OTLP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Otlp {
    /// The whole URL, `/v1/<signal>` included over HTTP; the collector's
    /// address over gRPC (the service names the rest).
    pub endpoint: String,
    pub wire: Wire,
    pub headers: HashMap<String, String>,
    pub tls: TlsFiles,
}

/// Everything the switches say, for one process.
#[derive(Debug, Clone, Default)]
pub(super) struct Switches {
    pub metrics: Exporters,
    pub logs: Exporters,
    pub traces: Exporters,
    pub metric_interval: Duration,
    pub logs_interval: Duration,
    /// `OTEL_BSP_SCHEDULE_DELAY`: how often ended spans are sent.
    pub spans_interval: Duration,
    /// The spans (`OTEL_BSP_MAX_QUEUE_SIZE`) and events
    /// (`OTEL_BLRP_MAX_QUEUE_SIZE`) held before they are sent, past which
    /// new ones are dropped, and the number that starts an export
    /// (`…_MAX_EXPORT_BATCH_SIZE`).
    pub span_queue: usize,
    pub span_batch: usize,
    pub log_queue: usize,
    pub log_batch: usize,
    pub timeout: Duration,
    /// `OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE=cumulative`.
    pub cumulative: bool,
    pub log_user_prompts: bool,
    pub log_tool_details: bool,
    pub include_session_id: bool,
    pub include_version: bool,
    pub service_name: String,
    pub resource: Vec<(String, String)>,
    /// What was asked for and cannot be done, one sentence each.
    pub refused: Vec<String>,
}

/// The variables, the settings' `env` over the process environment.
pub(super) struct Vars<'a> {
    pub settings: &'a BTreeMap<String, String>,
    pub process: &'a [(String, String)],
}

impl Vars<'_> {
    pub fn get(&self, name: &str) -> Option<&str> {
        self.settings
            .get(name)
            .map(String::as_str)
            .or_else(|| {
                self.process
                    .iter()
                    .rev()
                    .find(|(k, _)| k == name)
                    .map(|(_, v)| v.as_str())
            })
            .map(str::trim)
            .filter(|v| !v.is_empty())
    }

    fn on(&self, name: &str) -> bool {
        self.get(name).is_some_and(truthy)
    }

    fn millis(&self, name: &str, default: u64) -> Duration {
        Duration::from_millis(
            self.get(name)
                .and_then(|v| v.parse().ok())
                .filter(|&ms: &u64| ms > 0)
                .unwrap_or(default),
        )
    }

    /// A positive whole number, or `default`.
    fn count(&self, name: &str, default: usize) -> usize {
        self.get(name)
            .and_then(|v| v.parse().ok())
            .filter(|&n: &usize| n > 0)
            .unwrap_or(default)
    }
}

fn truthy(v: &str) -> bool {
    matches!(v.to_ascii_lowercase().as_str(), "1" | "true" | "yes" | "on")
}

/// Whether telemetry is on at all: the one check made when it is off.
pub(super) fn enabled(vars: &Vars) -> bool {
    vars.on("CLAUDE_CODE_ENABLE_TELEMETRY")
}

pub(super) fn read(vars: &Vars) -> Switches {
    let mut refused = Vec::new();
    let metrics = exporters(vars, "METRICS", "metrics", &mut refused);
    let logs = exporters(vars, "LOGS", "logs", &mut refused);
    let traces = exporters(vars, "TRACES", "traces", &mut refused);
    Switches {
        metrics,
        logs,
        traces,
        metric_interval: vars.millis("OTEL_METRIC_EXPORT_INTERVAL", 60_000),
        logs_interval: vars.millis("OTEL_LOGS_EXPORT_INTERVAL", 5_000),
        spans_interval: vars.millis("OTEL_BSP_SCHEDULE_DELAY", 5_000),
        span_queue: vars.count("OTEL_BSP_MAX_QUEUE_SIZE", 2_048),
        span_batch: vars.count("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 512),
        log_queue: vars.count("OTEL_BLRP_MAX_QUEUE_SIZE", 2_048),
        log_batch: vars.count("OTEL_BLRP_MAX_EXPORT_BATCH_SIZE", 512),
        timeout: vars.millis("OTEL_EXPORTER_OTLP_TIMEOUT", 5_000),
        cumulative: vars
            .get("OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE")
            .is_some_and(|v| v.eq_ignore_ascii_case("cumulative")),
        log_user_prompts: vars.on("OTEL_LOG_USER_PROMPTS"),
        log_tool_details: vars.on("OTEL_LOG_TOOL_DETAILS"),
        include_session_id: vars
            .get("OTEL_METRICS_INCLUDE_SESSION_ID")
            .is_none_or(truthy),
        include_version: vars.on("OTEL_METRICS_INCLUDE_VERSION"),
        service_name: vars.get("OTEL_SERVICE_NAME").unwrap_or("cadre").to_string(),
        resource: vars
            .get("OTEL_RESOURCE_ATTRIBUTES")
            .map(pairs)
            .unwrap_or_default(),
        refused,
    }
}

/// `OTEL_<SIGNAL>_EXPORTER` (a comma-separated list) with the OTLP
/// settings of that signal.
fn exporters(vars: &Vars, signal: &str, path: &str, refused: &mut Vec<String>) -> Exporters {
    let var = format!("OTEL_{signal}_EXPORTER");
    let mut out = Exporters::default();
    let Some(list) = vars.get(&var) else {
        return out;
    };
    for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        match name {
            "none" => {}
            "console" => out.console = true,
            "otlp" => match otlp(vars, signal, path) {
                Ok(o) => out.otlp = Some(o),
                Err(why) => refused.push(why),
            },
            other => refused.push(format!(
                "{var}={other}: not an exporter cadre has (otlp, console, none); {path} are not sent there"
            )),
        }
    }
    out
}

fn otlp(vars: &Vars, signal: &str, path: &str) -> Result<Otlp, String> {
    // A signal's own variable, else the one for all signals: the value
    // and the name it was read from (for what is said about it).
    let either = |what: &str| -> Option<(String, &str)> {
        let own = format!("OTEL_EXPORTER_OTLP_{signal}_{what}");
        if let Some(v) = vars.get(&own) {
            return Some((own, v));
        }
        let all = format!("OTEL_EXPORTER_OTLP_{what}");
        vars.get(&all).map(|v| (all, v))
    };
    let (protocol_var, protocol) = either("PROTOCOL")
        .unwrap_or_else(|| ("OTEL_EXPORTER_OTLP_PROTOCOL".to_string(), "http/protobuf"));
    let wire = match protocol {
        "http/protobuf" => Wire::Protobuf,
        "http/json" => Wire::Json,
        "grpc" if cfg!(feature = "otlp-grpc") => Wire::Grpc,
        "grpc" => {
            return Err(format!(
                "{protocol_var}=grpc: this cadre was built without gRPC (the `otlp-grpc` feature); \
                 use http/protobuf or http/json (usually the collector's port 4318); {path} are not sent"
            ));
        }
        other => {
            return Err(format!(
                "{protocol_var}={other}: not an OTLP protocol (grpc, http/protobuf, http/json); {path} are not sent"
            ));
        }
    };
    let endpoint = match vars.get(&format!("OTEL_EXPORTER_OTLP_{signal}_ENDPOINT")) {
        Some(e) => e.to_string(),
        None if wire == Wire::Grpc => vars
            .get("OTEL_EXPORTER_OTLP_ENDPOINT")
            .unwrap_or("http://localhost:4317")
            .to_string(),
        None => format!(
            "{}/v1/{path}",
            vars.get("OTEL_EXPORTER_OTLP_ENDPOINT")
                .unwrap_or("http://localhost:4318")
                .trim_end_matches('/')
        ),
    };
    let headers = either("HEADERS")
        .map(|(_, v)| pairs(v))
        .unwrap_or_default()
        .into_iter()
        .collect();
    let cert = either("CLIENT_CERTIFICATE");
    let key = either("CLIENT_KEY");
    let client = match (cert, key) {
        (Some((_, c)), Some((_, k))) => Some((PathBuf::from(c), PathBuf::from(k))),
        (None, None) => None,
        (Some((var, _)), None) | (None, Some((var, _))) => {
            let (has, lacks) = if var.ends_with("_KEY") {
                ("a client key", "CLIENT_CERTIFICATE")
            } else {
                ("a client certificate", "CLIENT_KEY")
            };
            return Err(format!(
                "{var} names {has} but no OTEL_EXPORTER_OTLP_{lacks} (or OTEL_EXPORTER_OTLP_{signal}_{lacks}) \
                 goes with it; {path} are not sent"
            ));
        }
    };
    let tls = TlsFiles {
        ca: either("CERTIFICATE").map(|(_, v)| PathBuf::from(v)),
        client,
    };
    Ok(Otlp {
        endpoint,
        wire,
        headers,
        tls,
    })
}

/// `k1=v1,k2=v2`, values percent-decoded (the W3C baggage form the OTel
/// variables use).
fn pairs(text: &str) -> Vec<(String, String)> {
    text.split(',')
        .filter_map(|pair| {
            let (k, v) = pair.split_once('=')?;
            let k = k.trim();
            (!k.is_empty()).then(|| (k.to_string(), percent_decode(v.trim())))
        })
        .collect()
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(hex) = s.get(i + 1..i + 3)
            && let Ok(b) = u8::from_str_radix(hex, 16)
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn switches(settings: &[(&str, &str)], process: &[(&str, &str)]) -> Switches {
        let settings: BTreeMap<String, String> = settings
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let process: Vec<(String, String)> = process
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        read(&Vars {
            settings: &settings,
            process: &process,
        })
    }

    #[test]
    fn settings_env_wins_and_signals_get_their_own_paths() {
        let s = switches(
            &[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318/")],
            &[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://elsewhere:4318"),
                ("OTEL_METRICS_EXPORTER", "otlp,console"),
                ("OTEL_LOGS_EXPORTER", "otlp"),
                ("OTEL_EXPORTER_OTLP_LOGS_PROTOCOL", "http/json"),
                (
                    "OTEL_EXPORTER_OTLP_HEADERS",
                    "Authorization=Bearer%20x,team=a",
                ),
            ],
        );
        let m = s.metrics.otlp.unwrap();
        assert_eq!(m.endpoint, "http://collector:4318/v1/metrics");
        assert_eq!(m.wire, Wire::Protobuf);
        assert!(s.metrics.console);
        assert_eq!(m.headers["Authorization"], "Bearer x");
        assert_eq!(s.logs.otlp.unwrap().wire, Wire::Json);
        assert!(!s.traces.any());
    }

    #[test]
    fn grpc_goes_to_the_collectors_address_and_unknown_names_are_refused_in_words() {
        let s = switches(
            &[],
            &[
                ("OTEL_METRICS_EXPORTER", "otlp"),
                ("OTEL_TRACES_EXPORTER", "otlp"),
                ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
                ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "thrift"),
                ("OTEL_LOGS_EXPORTER", "prometheus"),
            ],
        );
        assert!(!s.traces.any());
        let refused = |what: &str| s.refused.iter().any(|r| r.contains(what));
        assert!(refused("OTEL_LOGS_EXPORTER=prometheus"), "{:?}", s.refused);
        assert!(refused("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=thrift"));
        if cfg!(feature = "otlp-grpc") {
            assert_eq!(s.refused.len(), 2, "{:?}", s.refused);
            let m = s.metrics.otlp.unwrap();
            assert_eq!(m.wire, Wire::Grpc);
            assert_eq!(m.endpoint, "http://localhost:4317");
        } else {
            // Without gRPC, said in words too, and the metrics are not sent.
            assert_eq!(s.refused.len(), 3, "{:?}", s.refused);
            assert!(refused(
                "OTEL_EXPORTER_OTLP_PROTOCOL=grpc: this cadre was built without gRPC"
            ));
            assert!(!s.metrics.any());
        }
    }

    #[test]
    fn certificates_per_signal_or_for_all_and_a_key_needs_its_certificate() {
        let s = switches(
            &[],
            &[
                ("OTEL_METRICS_EXPORTER", "otlp"),
                ("OTEL_LOGS_EXPORTER", "otlp"),
                ("OTEL_TRACES_EXPORTER", "otlp"),
                ("OTEL_EXPORTER_OTLP_CERTIFICATE", "/ca.pem"),
                ("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", "/all.pem"),
                ("OTEL_EXPORTER_OTLP_CLIENT_KEY", "/all.key"),
                ("OTEL_EXPORTER_OTLP_LOGS_CLIENT_CERTIFICATE", "/logs.pem"),
                ("OTEL_EXPORTER_OTLP_LOGS_CLIENT_KEY", "/logs.key"),
                ("OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY", "/traces.key"),
            ],
        );
        let m = s.metrics.otlp.unwrap();
        assert_eq!(m.tls.ca, Some(PathBuf::from("/ca.pem")));
        assert_eq!(
            m.tls.client,
            Some((PathBuf::from("/all.pem"), PathBuf::from("/all.key")))
        );
        let l = s.logs.otlp.unwrap();
        assert_eq!(
            l.tls.client,
            Some((PathBuf::from("/logs.pem"), PathBuf::from("/logs.key")))
        );
        // The traces' own key, with the certificate for all: taken as a
        // pair, the signal's key and the general certificate.
        let t = s.traces.otlp.unwrap();
        assert_eq!(
            t.tls.client,
            Some((PathBuf::from("/all.pem"), PathBuf::from("/traces.key")))
        );
        let lone = switches(
            &[],
            &[
                ("OTEL_TRACES_EXPORTER", "otlp"),
                ("OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY", "/traces.key"),
            ],
        );
        assert!(!lone.traces.any());
        assert!(
            lone.refused[0].contains("OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY")
                && lone.refused[0].contains("CLIENT_CERTIFICATE"),
            "{:?}",
            lone.refused
        );
    }
}
