//! Claude Code's telemetry switches, read from the settings' `env` table
//! over the process environment (as Claude Code applies its settings'
//! `env`): `CLAUDE_CODE_ENABLE_TELEMETRY`, the exporters per signal, the
//! OTLP endpoint, protocol and headers (per signal or for all), the export
//! intervals, `OTEL_LOG_USER_PROMPTS`, `OTEL_RESOURCE_ATTRIBUTES`.

use std::collections::{BTreeMap, HashMap};
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

/// Where and how one signal goes over OTLP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Otlp {
    /// The whole URL, `/v1/<signal>` included.
    pub endpoint: String,
    pub json: bool,
    pub headers: HashMap<String, String>,
}

/// Everything the switches say, for one process.
#[derive(Debug, Clone, Default)]
pub(super) struct Switches {
    pub metrics: Exporters,
    pub logs: Exporters,
    pub traces: Exporters,
    pub metric_interval: Duration,
    pub logs_interval: Duration,
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
    let protocol_var = format!("OTEL_EXPORTER_OTLP_{signal}_PROTOCOL");
    let (protocol_var, protocol) = match vars.get(&protocol_var) {
        Some(p) => (protocol_var, p),
        None => (
            "OTEL_EXPORTER_OTLP_PROTOCOL".to_string(),
            vars.get("OTEL_EXPORTER_OTLP_PROTOCOL")
                .unwrap_or("http/protobuf"),
        ),
    };
    let json = match protocol {
        "http/protobuf" => false,
        "http/json" => true,
        "grpc" => {
            return Err(format!(
                "{protocol_var}=grpc: cadre sends OTLP over HTTP only (http/protobuf or http/json, \
                 usually the collector's port 4318); {path} are not sent"
            ));
        }
        other => {
            return Err(format!(
                "{protocol_var}={other}: not an OTLP protocol (http/protobuf, http/json); {path} are not sent"
            ));
        }
    };
    let endpoint = match vars.get(&format!("OTEL_EXPORTER_OTLP_{signal}_ENDPOINT")) {
        Some(e) => e.to_string(),
        None => format!(
            "{}/v1/{path}",
            vars.get("OTEL_EXPORTER_OTLP_ENDPOINT")
                .unwrap_or("http://localhost:4318")
                .trim_end_matches('/')
        ),
    };
    let headers = vars
        .get(&format!("OTEL_EXPORTER_OTLP_{signal}_HEADERS"))
        .or_else(|| vars.get("OTEL_EXPORTER_OTLP_HEADERS"))
        .map(pairs)
        .unwrap_or_default()
        .into_iter()
        .collect();
    Ok(Otlp {
        endpoint,
        json,
        headers,
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
        assert!(!m.json);
        assert!(s.metrics.console);
        assert_eq!(m.headers["Authorization"], "Bearer x");
        assert!(s.logs.otlp.unwrap().json);
        assert!(!s.traces.any());
    }

    #[test]
    fn grpc_and_unknown_exporters_are_refused_in_words() {
        let s = switches(
            &[],
            &[
                ("OTEL_METRICS_EXPORTER", "otlp"),
                ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
                ("OTEL_LOGS_EXPORTER", "prometheus"),
            ],
        );
        assert!(!s.metrics.any());
        assert_eq!(s.refused.len(), 2, "{:?}", s.refused);
        assert!(s.refused[0].contains("OTEL_EXPORTER_OTLP_PROTOCOL=grpc"));
        assert!(s.refused[1].contains("OTEL_LOGS_EXPORTER=prometheus"));
    }
}
