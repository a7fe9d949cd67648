//! Wire-shape comparison of two programs' output, for the differential
//! conformance harness (`suite::conformance`): Claude Code is the oracle,
//! cadre the candidate.
//!
//! Values that differ run to run (ids, uuids, times, costs, paths,
//! versions) are never compared: events are compared by their *shape* —
//! every key path with the JSON types seen there — and only a few chosen
//! fields are compared by value (a result's subtype, turn count, text…,
//! the output style `init` names).
//! Each difference names an [`Area`] and a path, so a reviewed list can
//! accept it by that pair.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde_json::Value;

/// What part of the wire a difference is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Area {
    /// stdout events: their order and each kind's shape.
    Events,
    /// Chosen values of the final `result` (and the exit code).
    Result,
    /// The main conversation's requests to the model.
    Requests,
    /// What a command hook reads on stdin.
    Hooks,
    /// Responses to control requests.
    Control,
}

impl Area {
    pub const ALL: [Area; 5] = [
        Area::Events,
        Area::Result,
        Area::Requests,
        Area::Hooks,
        Area::Control,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Area::Events => "events",
            Area::Result => "result",
            Area::Requests => "requests",
            Area::Hooks => "hooks",
            Area::Control => "control",
        }
    }
}

impl fmt::Display for Area {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One way cadre's output differs from Claude Code's.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Difference {
    pub area: Area,
    /// Where: `KIND.key.path` for event shapes, a field for values.
    pub path: String,
    /// What Claude Code did ("absent" when it has no such path).
    pub claude: String,
    /// What cadre did.
    pub cadre: String,
}

const ABSENT: &str = "absent";

fn diff(area: Area, path: impl Into<String>, claude: String, cadre: String) -> Difference {
    Difference {
        area,
        path: path.into(),
        claude,
        cadre,
    }
}

/// The JSON type name of a value.
fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Key path → JSON types seen there. Objects add `.key`, arrays `[]`
/// (the union of their elements); `depth` bounds how far down it goes.
pub type Shape = BTreeMap<String, BTreeSet<&'static str>>;

/// Adds `v`'s key paths under `prefix` to `shape`.
pub fn add_shape(shape: &mut Shape, prefix: &str, v: &Value, depth: usize) {
    shape
        .entry(prefix.to_string())
        .or_default()
        .insert(type_name(v));
    if depth == 0 {
        return;
    }
    match v {
        Value::Object(map) => {
            for (k, child) in map {
                add_shape(shape, &format!("{prefix}.{k}"), child, depth - 1);
            }
        }
        Value::Array(items) => {
            for child in items {
                add_shape(shape, &format!("{prefix}[]"), child, depth - 1);
            }
        }
        _ => {}
    }
}

/// The shape of several values together (e.g. every event of one kind).
pub fn shape_of<'a>(values: impl IntoIterator<Item = &'a Value>, depth: usize) -> Shape {
    let mut shape = Shape::new();
    for v in values {
        add_shape(&mut shape, "", v, depth);
    }
    shape
}

fn types_text(types: &BTreeSet<&'static str>) -> String {
    types.iter().copied().collect::<Vec<_>>().join(" or ")
}

/// Differences between two shapes, each path named `label` + path. A path
/// one side lacks is reported once, at its top: its children are not.
pub fn compare_shapes(area: Area, label: &str, claude: &Shape, cadre: &Shape) -> Vec<Difference> {
    let mut out = Vec::new();
    let mut missing: Vec<&str> = Vec::new();
    let paths: BTreeSet<&String> = claude.keys().chain(cadre.keys()).collect();
    for path in paths {
        // Under a path already reported as one side's only.
        if missing.iter().any(|m| {
            path.starts_with(m) && matches!(path.as_bytes().get(m.len()), Some(b'.' | b'['))
        }) {
            continue;
        }
        let name = format!("{label}{path}");
        match (claude.get(path), cadre.get(path)) {
            (Some(a), Some(b)) if a != b => {
                out.push(diff(area, name, types_text(a), types_text(b)));
            }
            (Some(a), None) => {
                missing.push(path);
                out.push(diff(area, name, types_text(a), ABSENT.into()));
            }
            (None, Some(b)) => {
                missing.push(path);
                out.push(diff(area, name, ABSENT.into(), types_text(b)));
            }
            _ => {}
        }
    }
    out
}

/// A stdout event's kind: `type`, with `/subtype` when it has one.
pub fn event_kind(v: &Value) -> String {
    let ty = v["type"].as_str().unwrap_or("?");
    match v["subtype"].as_str() {
        Some(s) => format!("{ty}/{s}"),
        None => ty.to_string(),
    }
}

/// The block types of a message's content: `[text,tool_use]`, or `[string]`
/// for plain string content; a failed tool result reads
/// `tool_result(error)`. Blocks of one type in a row count once: how
/// many text blocks carry the prompt and its reminders is prompt text,
/// not structure.
fn block_types(message: &Value) -> String {
    match &message["content"] {
        Value::String(_) => "[string]".into(),
        Value::Array(blocks) => {
            let mut types: Vec<&str> = blocks
                .iter()
                .map(|b| match b["type"].as_str() {
                    Some("tool_result") if b["is_error"] == true => "tool_result(error)",
                    Some(t) => t,
                    None => "?",
                })
                .collect();
            types.dedup();
            format!("[{}]", types.join(","))
        }
        other => format!("[{}]", type_name(other)),
    }
}

/// An event as it shows in a sequence: its kind, plus the block types of
/// assistant and user messages, or the API event a `stream_event` wraps
/// (`stream_event:message_start`).
fn sequence_item(v: &Value) -> String {
    let kind = event_kind(v);
    if v["message"].is_object() {
        format!("{kind}{}", block_types(&v["message"]))
    } else if let Some(inner) = v["event"]["type"].as_str() {
        format!("{kind}:{inner}")
    } else {
        kind
    }
}

/// Events grouped by [`event_kind`].
fn by_kind(events: &[Value]) -> BTreeMap<String, Vec<&Value>> {
    let mut out: BTreeMap<String, Vec<&Value>> = BTreeMap::new();
    for e in events {
        out.entry(event_kind(e)).or_default().push(e);
    }
    out
}

/// Compares two event streams: the sequence of events, then, for each
/// event kind both have, the shape of all its events together.
pub fn compare_events(claude: &[Value], cadre: &[Value]) -> Vec<Difference> {
    let seq = |events: &[Value]| {
        events
            .iter()
            .map(sequence_item)
            .collect::<Vec<_>>()
            .join(" ")
    };
    let mut out = Vec::new();
    let (a, b) = (seq(claude), seq(cadre));
    if a != b {
        out.push(diff(Area::Events, "sequence", a, b));
    }
    let (ka, kb) = (by_kind(claude), by_kind(cadre));
    for (kind, events) in &ka {
        let Some(theirs) = kb.get(kind) else { continue };
        let sa = shape_of(events.iter().copied(), usize::MAX);
        let sb = shape_of(theirs.iter().copied(), usize::MAX);
        out.extend(compare_shapes(Area::Events, kind, &sa, &sb));
    }
    let inits = |events: &[Value]| -> Vec<Value> {
        events
            .iter()
            .filter(|e| e["type"] == "system" && e["subtype"] == "init")
            .cloned()
            .collect()
    };
    out.extend(compare_items(
        Area::Events,
        "init",
        &inits(claude),
        &inits(cadre),
        INIT_FIELDS,
    ));
    out
}

/// The fields of the `init` event compared by value (when both have them).
pub const INIT_FIELDS: &[&str] = &["/output_style"];

/// The fields of a `result` compared by value (when both have them).
pub const RESULT_FIELDS: &[&str] = &[
    "/subtype",
    "/is_error",
    "/num_turns",
    "/result",
    "/stop_reason",
    "/terminal_reason",
    "/api_error_status",
];

/// Compares two lists of items of one kind: how many (`LABEL.count`), and
/// pairwise the values at `fields` (JSON pointers), where both are set and
/// not null (`LABEL[i].a.b` for `/a/b`).
fn compare_items(
    area: Area,
    label: &str,
    claude: &[Value],
    cadre: &[Value],
    fields: &[&str],
) -> Vec<Difference> {
    let dot = if label.is_empty() { "" } else { "." };
    let mut out = Vec::new();
    if claude.len() != cadre.len() {
        out.push(diff(
            area,
            format!("{label}{dot}count"),
            claude.len().to_string(),
            cadre.len().to_string(),
        ));
    }
    for (i, (a, b)) in claude.iter().zip(cadre).enumerate() {
        for field in fields {
            let (Some(va), Some(vb)) = (a.pointer(field), b.pointer(field)) else {
                continue;
            };
            if va.is_null() || vb.is_null() || va == vb {
                continue;
            }
            let name = field.trim_start_matches('/').replace('/', ".");
            out.push(diff(
                area,
                format!("{label}[{i}].{name}"),
                va.to_string(),
                vb.to_string(),
            ));
        }
    }
    out
}

/// Compares the `result` events pairwise (one per prompt) on
/// [`RESULT_FIELDS`], and how many there are.
pub fn compare_results(claude: &[Value], cadre: &[Value]) -> Vec<Difference> {
    let results = |events: &[Value]| -> Vec<Value> {
        events
            .iter()
            .filter(|e| e["type"] == "result")
            .cloned()
            .collect()
    };
    compare_items(
        Area::Result,
        "",
        &results(claude),
        &results(cadre),
        RESULT_FIELDS,
    )
}

/// A request's conversation as roles with block types:
/// `user[text] assistant[tool_use] user[tool_result]`.
pub fn conversation(body: &Value) -> String {
    body["messages"]
        .as_array()
        .map(|ms| {
            ms.iter()
                .map(|m| format!("{}{}", m["role"].as_str().unwrap_or("?"), block_types(m)))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default()
}

/// Compares the main conversation's requests: how many, each one's
/// conversation structure, and the top-level keys of all bodies.
pub fn compare_requests(claude: &[Value], cadre: &[Value]) -> Vec<Difference> {
    let mut out = compare_items(Area::Requests, "", claude, cadre, &[]);
    for (i, (a, b)) in claude.iter().zip(cadre).enumerate() {
        let (ca, cb) = (conversation(a), conversation(b));
        if ca != cb {
            out.push(diff(Area::Requests, format!("[{i}].messages"), ca, cb));
        }
    }
    let (sa, sb) = (shape_of(claude, 1), shape_of(cadre, 1));
    out.extend(compare_shapes(Area::Requests, "body", &sa, &sb));
    out
}

/// Compares two lists of JSON objects of one kind (hook inputs, control
/// responses): how many, the shape of them all, and the values at
/// `fields` (JSON pointers such as `/response/subtype`).
pub fn compare_objects(
    area: Area,
    label: &str,
    claude: &[Value],
    cadre: &[Value],
    fields: &[&str],
) -> Vec<Difference> {
    let (sa, sb) = (shape_of(claude, usize::MAX), shape_of(cadre, usize::MAX));
    let mut out = compare_shapes(area, label, &sa, &sb);
    out.extend(compare_items(area, label, claude, cadre, fields));
    out
}

/// `v` with every string's occurrences of each `(from, to)` replaced, so
/// per-run paths compare equal.
pub fn normalise(v: &Value, replace: &[(String, &str)]) -> Value {
    match v {
        Value::String(s) => {
            let mut s = s.clone();
            for (from, to) in replace {
                if !from.is_empty() {
                    s = s.replace(from.as_str(), to);
                }
            }
            Value::String(s)
        }
        Value::Array(items) => Value::Array(items.iter().map(|i| normalise(i, replace)).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, i)| (k.clone(), normalise(i, replace)))
                .collect(),
        ),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_missing_object_is_one_difference_and_types_are_compared() {
        let claude = [json!({"type": "result", "usage": {"a": 1, "b": {"c": 2}}, "n": 1})];
        let cadre = [json!({"type": "result", "n": "1", "extra": null})];
        let d = compare_events(&claude, &cadre);
        let paths: Vec<(&str, &str, &str)> = d
            .iter()
            .map(|d| (d.path.as_str(), d.claude.as_str(), d.cadre.as_str()))
            .collect();
        assert_eq!(
            paths,
            [
                ("result.extra", "absent", "null"),
                ("result.n", "number", "string"),
                ("result.usage", "object", "absent"),
            ]
        );
    }

    #[test]
    fn sequences_results_and_requests_are_compared() {
        let claude = [
            json!({"type": "system", "subtype": "init"}),
            json!({"type": "assistant", "message": {"content": [{"type": "text"}]}}),
            json!({"type": "result", "subtype": "success", "num_turns": 1}),
        ];
        let cadre = [
            json!({"type": "system", "subtype": "init"}),
            json!({"type": "result", "subtype": "success", "num_turns": 2}),
        ];
        let d = compare_events(&claude, &cadre);
        assert_eq!(d[0].path, "sequence");
        assert_eq!(d[0].claude, "system/init assistant[text] result/success");
        let r = compare_results(&claude, &cadre);
        assert_eq!(
            (r[0].path.as_str(), r[0].cadre.as_str()),
            ("[0].num_turns", "2")
        );
        let q = compare_requests(
            &[json!({"messages": [{"role": "user", "content": "hi"}]})],
            &[json!({"messages": [{"role": "user", "content": [{"type": "text"}]}]})],
        );
        assert_eq!(q[0].claude, "user[string]");
        assert_eq!(q[0].cadre, "user[text]");
    }
}
