//! Tool schemas as data, and their trimming.
//!
//! Each tool's model-facing definition lives in `agents/tools/NAME.yaml`:
//! `name`, `read_only`, `interactive_only`, `description` (a Handlebars
//! template) and `input_schema` (JSON Schema). The built-in files are
//! embedded; a file in the on-disk tools folder replaces the one with the
//! same tool name. Trimming is data too: a schema property carrying
//! `x-when: CONDITION` is kept only while the condition holds, and every
//! `x-*` key is removed before the schema is sent.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[cfg(test)]
use include_dir::{Dir, include_dir};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::config::Condition;
use crate::diagnostic::Diagnostic;
use crate::message::ToolDefinition;
use crate::raw::{self, Node};
use crate::templates::{RenderError, Templates};

/// The embedded specs: `agents/tools/*.yaml`, converted to a JSON array
/// by the build script (`build/tool_specs.rs`).
static EMBEDDED_JSON: &str = include_str!(concat!(env!("OUT_DIR"), "/tool_specs.json"));

/// Where diagnostics place the embedded specs.
const EMBEDDED_SHOWN: &str = "<embedded>/agents/tools";

/// The YAML the JSON was made from, for the tests that check both agree.
#[cfg(test)]
static EMBEDDED: Dir<'_> = include_dir!("$CARGO_MANIFEST_DIR/agents/tools");

/// One embedded spec as the build script wrote it: the YAML document's
/// fields, unchecked (the tests check them).
#[derive(Deserialize)]
struct EmbeddedSpec {
    name: String,
    description: String,
    #[serde(default)]
    read_only: bool,
    #[serde(default)]
    interactive_only: bool,
    #[serde(default)]
    when: Option<String>,
    input_schema: Value,
}

impl EmbeddedSpec {
    fn into_spec(self) -> Result<ToolSpec, String> {
        let when = match self.when {
            Some(text) => Some(
                Condition::parse(&text).map_err(|e| format!("tool {}: `when`: {e}", self.name))?,
            ),
            None => None,
        };
        let input_schema = InputSchema::new(self.input_schema);
        Ok(ToolSpec {
            name: self.name,
            read_only: self.read_only,
            interactive_only: self.interactive_only,
            description: self.description,
            input_schema,
            when,
            path: None,
        })
    }
}

/// One tool's definition as written.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    pub name: String,
    pub read_only: bool,
    /// Offered only to interactive sessions, and never to sub-agents.
    pub interactive_only: bool,
    /// A Handlebars template.
    pub description: String,
    /// The untrimmed schema with its `x-when` conditions parsed.
    pub input_schema: InputSchema,
    /// The tool exists only while this condition holds (`when: AGENT_TEAMS`).
    pub when: Option<Condition>,
    /// `None` for the embedded copy.
    pub path: Option<PathBuf>,
}

/// Every tool spec, by name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolSpecs {
    specs: BTreeMap<String, Arc<ToolSpec>>,
}

impl ToolSpecs {
    /// The embedded specs, then `*.yaml`/`*.yml` files in `dir` over them.
    pub fn load(dir: Option<&Path>) -> (ToolSpecs, Vec<Diagnostic>) {
        let mut specs = ToolSpecs::default();
        let mut diags = Vec::new();
        // The embedded specs were converted to JSON at build time, and are
        // checked by unit tests (`embedded_specs_pass_the_checks_a_file_gets`,
        // `precomputed_specs_equal_the_parsed_ones`), not at each start:
        // reading their YAML and compiling every schema and description
        // cost more than the rest of a start.
        match serde_json::from_str::<Vec<EmbeddedSpec>>(EMBEDDED_JSON) {
            Ok(list) => {
                for embedded in list {
                    match embedded.into_spec() {
                        Ok(spec) => {
                            specs.specs.insert(spec.name.clone(), Arc::new(spec));
                        }
                        Err(message) => diags.push(Diagnostic::error(
                            Some(Path::new(EMBEDDED_SHOWN)),
                            None,
                            message,
                        )),
                    }
                }
            }
            Err(e) => diags.push(Diagnostic::error(
                Some(Path::new(EMBEDDED_SHOWN)),
                None,
                format!("the built-in tool specs do not load: {e}"),
            )),
        }
        if let Some(dir) = dir {
            let mut paths: Vec<PathBuf> = fs_err::read_dir(dir)
                .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
                .unwrap_or_default();
            paths.sort();
            for path in paths.into_iter().filter(|p| is_yaml(p)) {
                // Bounded whatever the file is (a link may name a device).
                match crate::raw::read_text(&path, 1 << 20) {
                    Ok(text) => {
                        if let Some(spec) = parse_spec(&path, &text, &mut diags) {
                            specs.specs.insert(spec.name.clone(), Arc::new(spec));
                        }
                    }
                    Err(e) => diags.push(Diagnostic::error(
                        Some(&path),
                        None,
                        format!("cannot read: {e}"),
                    )),
                }
            }
        }
        (specs, diags)
    }

    pub fn get(&self, name: &str) -> Option<&Arc<ToolSpec>> {
        self.specs.get(name)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Arc<ToolSpec>> {
        self.specs.values()
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.specs.keys().map(String::as_str)
    }
}

fn is_yaml(p: &Path) -> bool {
    matches!(p.extension().and_then(|e| e.to_str()), Some("yaml" | "yml"))
}

/// One spec file: its shape, then the checks that let a mistake be
/// reported at load, with its position: the description must compile as a
/// template, and the schema check against the JSON Schema meta-schema and
/// compile into a validator.
fn parse_spec(path: &Path, text: &str, diags: &mut Vec<Diagnostic>) -> Option<ToolSpec> {
    let node = match raw::parse_yaml(text.strip_prefix('\u{feff}').unwrap_or(text)) {
        Ok(n) => n,
        Err(e) => {
            diags.push(Diagnostic::error(Some(path), Some(e.pos), e.message));
            return None;
        }
    };
    let field_str = |key: &str, diags: &mut Vec<Diagnostic>| -> Option<String> {
        match node.get(key) {
            Some(Node {
                kind: raw::Kind::Str(s),
                ..
            }) => Some(s.clone()),
            Some(other) => {
                diags.push(Diagnostic::error(
                    Some(path),
                    Some(other.pos),
                    format!("`{key}`: expected a string, found {}", other.type_name()),
                ));
                None
            }
            None => {
                diags.push(Diagnostic::error(
                    Some(path),
                    Some(node.pos),
                    format!("missing required field `{key}`"),
                ));
                None
            }
        }
    };
    let name = field_str("name", diags)?;
    let description = field_str("description", diags)?;
    if let Err(e) = handlebars::Template::compile(&description) {
        let pos = node.get("description").map(|n| n.pos);
        diags.push(Diagnostic::error(
            Some(path),
            pos,
            format!("`description` is not a valid template: {}", e.reason()),
        ));
        return None;
    }
    let flag = |key: &str, diags: &mut Vec<Diagnostic>| match node.get(key) {
        None => false,
        Some(Node {
            kind: raw::Kind::Bool(b),
            ..
        }) => *b,
        Some(other) => {
            diags.push(Diagnostic::warning(
                Some(path),
                Some(other.pos),
                format!("`{key}`: expected true or false; using false"),
            ));
            false
        }
    };
    let when = match node.get("when") {
        None => None,
        Some(n) => {
            let parsed = match &n.kind {
                raw::Kind::Str(s) => Condition::parse(s),
                _ => Err(format!("expected a condition, found {}", n.type_name())),
            };
            match parsed {
                Ok(c) => Some(c),
                Err(e) => {
                    diags.push(Diagnostic::error(
                        Some(path),
                        Some(n.pos),
                        format!("`when`: {e}"),
                    ));
                    return None;
                }
            }
        }
    };
    let read_only = flag("read_only", diags);
    let interactive_only = flag("interactive_only", diags);
    let schema = match node.get("input_schema") {
        Some(n) if matches!(n.kind, raw::Kind::Map(_)) => n,
        Some(n) => {
            diags.push(Diagnostic::error(
                Some(path),
                Some(n.pos),
                "`input_schema`: expected a JSON Schema object",
            ));
            return None;
        }
        None => {
            diags.push(Diagnostic::error(
                Some(path),
                Some(node.pos),
                "missing required field `input_schema`",
            ));
            return None;
        }
    };
    check_conditions(path, schema, diags);
    let input_schema = schema.to_json();
    if !check_schema(path, schema, &input_schema, diags) {
        return None;
    }
    // A bad `x-when` was reported with its position by `check_conditions`;
    // its property never shows.
    let input_schema = InputSchema::new(input_schema);
    for (key, _) in node.entries() {
        if ![
            "name",
            "description",
            "read_only",
            "interactive_only",
            "input_schema",
            "when",
        ]
        .contains(&key.name.as_str())
        {
            diags.push(Diagnostic::warning(
                Some(path),
                Some(key.pos),
                format!("unknown field `{}`", key.name),
            ));
        }
    }
    Some(ToolSpec {
        name,
        read_only,
        interactive_only,
        description,
        input_schema,
        when,
        path: Some(path.to_path_buf()),
    })
}

/// Checks `input_schema` against the JSON Schema draft 2020-12
/// meta-schema, and that it compiles into a validator (the one tool input
/// is checked with). Each problem is an error at the position of the value
/// at fault; `false` when there was any.
fn check_schema(path: &Path, node: &Node, schema: &Value, diags: &mut Vec<Diagnostic>) -> bool {
    let meta = jsonschema::draft202012::meta::validator();
    let mut ok = true;
    for error in meta.iter_errors(schema).take(20) {
        ok = false;
        let pointer = error.instance_path().to_string();
        let at = node_at(node, &pointer).unwrap_or(node);
        let place = if pointer.is_empty() {
            String::new()
        } else {
            format!(" at `{pointer}`")
        };
        diags.push(Diagnostic::error(
            Some(path),
            Some(at.pos),
            format!("`input_schema` is not a valid JSON Schema{place}: {error}; tool skipped"),
        ));
    }
    if ok && let Err(error) = jsonschema::draft202012::new(schema) {
        ok = false;
        let pointer = error.instance_path().to_string();
        let at = node_at(node, &pointer).unwrap_or(node);
        diags.push(Diagnostic::error(
            Some(path),
            Some(at.pos),
            format!("`input_schema` does not compile: {error}; tool skipped"),
        ));
    }
    ok
}

/// The node a JSON pointer (`/properties/a/type`) names inside `node`.
fn node_at<'n>(node: &'n Node, pointer: &str) -> Option<&'n Node> {
    let mut at = node;
    for raw_seg in pointer.split('/').skip(1) {
        let seg = raw_seg.replace("~1", "/").replace("~0", "~");
        at = match &at.kind {
            raw::Kind::Map(_) => at.get(&seg)?,
            raw::Kind::Seq(items) => items.get(seg.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(at)
}

/// Every `x-when` must parse as a condition; a bad one is an error here
/// rather than a property that silently never shows.
fn check_conditions(path: &Path, node: &Node, diags: &mut Vec<Diagnostic>) {
    for (key, value) in node.entries() {
        if key.name == "x-when" {
            let parsed = match &value.kind {
                raw::Kind::Str(s) => Condition::parse(s).map(|_| ()),
                raw::Kind::Seq(items) => {
                    let texts: Vec<String> = items.iter().filter_map(Node::scalar_text).collect();
                    Condition::from_list(&texts).map(|_| ())
                }
                _ => Err(format!("expected a condition, found {}", value.type_name())),
            };
            if let Err(e) = parsed {
                diags.push(Diagnostic::error(
                    Some(path),
                    Some(value.pos),
                    format!("`x-when`: {e}"),
                ));
            }
        }
        check_conditions(path, value, diags);
    }
    if let raw::Kind::Seq(items) = &node.kind {
        for item in items {
            check_conditions(path, item, diags);
        }
    }
}

/// What schema trimming and `x-enum` need to know.
pub struct TrimContext<'a> {
    /// Whether a condition holds for the current snapshot and session.
    pub holds: &'a dyn Fn(&Condition) -> bool,
    /// Names for `x-enum: model_aliases`.
    pub model_aliases: &'a [String],
}

/// A tool's input schema as written, with every `x-when` condition parsed
/// once, when the spec is loaded (keyed by the JSON pointer of the property
/// that carries it), so trimming parses nothing. A condition that does not
/// parse (reported when the file loads) hides its property.
#[derive(Debug, Clone, PartialEq)]
pub struct InputSchema {
    /// Untrimmed, still carrying `x-when` and `x-enum`.
    pub value: Value,
    conditions: BTreeMap<String, Option<Condition>>,
}

impl InputSchema {
    /// Parses every `x-when` of `value`.
    pub fn new(value: Value) -> InputSchema {
        fn walk(v: &Value, at: &mut String, out: &mut BTreeMap<String, Option<Condition>>) {
            match v {
                Value::Object(map) => {
                    if let Some(when) = map.get("x-when") {
                        let cond = match when {
                            Value::String(s) => Condition::parse(s),
                            Value::Array(items) => {
                                let texts: Vec<String> = items
                                    .iter()
                                    .filter_map(|v| v.as_str().map(str::to_string))
                                    .collect();
                                Condition::from_list(&texts)
                            }
                            _ => Err(String::new()),
                        };
                        out.insert(at.clone(), cond.ok());
                    }
                    for (key, child) in map {
                        let len = at.len();
                        at.push('/');
                        at.push_str(&key.replace('~', "~0").replace('/', "~1"));
                        walk(child, at, out);
                        at.truncate(len);
                    }
                }
                Value::Array(items) => {
                    for (i, child) in items.iter().enumerate() {
                        let len = at.len();
                        at.push('/');
                        at.push_str(&i.to_string());
                        walk(child, at, out);
                        at.truncate(len);
                    }
                }
                _ => {}
            }
        }
        let mut conditions = BTreeMap::new();
        walk(&value, &mut String::new(), &mut conditions);
        InputSchema { value, conditions }
    }

    /// The schema as the model sees it: properties whose `x-when` does not
    /// hold are removed (from `properties` and `required`), `x-enum` is
    /// expanded, and no `x-*` key remains.
    pub fn trimmed(&self, ctx: &TrimContext<'_>) -> Value {
        self.trim(&self.value, &mut String::new(), ctx)
    }

    /// The schema used to validate input: nothing trimmed, `x-*` keys
    /// removed (so a trimmed property the model sends anyway is accepted,
    /// then ignored).
    pub fn untrimmed(&self, model_aliases: &[String]) -> Value {
        let all = |_: &Condition| true;
        self.trimmed(&TrimContext {
            holds: &all,
            model_aliases,
        })
    }

    fn trim(&self, schema: &Value, at: &mut String, ctx: &TrimContext<'_>) -> Value {
        let child = |v: &Value, key: &str, at: &mut String| {
            let len = at.len();
            at.push('/');
            at.push_str(&key.replace('~', "~0").replace('/', "~1"));
            let out = self.trim(v, at, ctx);
            at.truncate(len);
            out
        };
        match schema {
            Value::Object(map) => {
                let mut out = Map::new();
                let mut dropped: Vec<String> = Vec::new();
                for (key, value) in map {
                    if key == "properties"
                        && let Value::Object(props) = value
                    {
                        let mut kept = Map::new();
                        let len = at.len();
                        at.push_str("/properties");
                        for (name, prop) in props {
                            if self.visible(prop, at, name, ctx) {
                                kept.insert(name.clone(), child(prop, name, at));
                            } else {
                                dropped.push(name.clone());
                            }
                        }
                        at.truncate(len);
                        out.insert(key.clone(), Value::Object(kept));
                        continue;
                    }
                    if key == "x-enum" {
                        if value.as_str() == Some("model_aliases") {
                            out.insert("enum".into(), Value::from(ctx.model_aliases.to_vec()));
                        }
                        continue;
                    }
                    if key.starts_with("x-") {
                        continue;
                    }
                    out.insert(key.clone(), child(value, key, at));
                }
                if !dropped.is_empty()
                    && let Some(Value::Array(req)) = out.get_mut("required")
                {
                    req.retain(|r| r.as_str().is_none_or(|s| !dropped.iter().any(|d| d == s)));
                }
                Value::Object(out)
            }
            Value::Array(items) => Value::Array(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, v)| child(v, &i.to_string(), at))
                    .collect(),
            ),
            other => other.clone(),
        }
    }

    /// Whether property `name` of the `properties` object at `at` is kept.
    fn visible(&self, prop: &Value, at: &str, name: &str, ctx: &TrimContext<'_>) -> bool {
        if prop.get("x-when").is_none() {
            return true;
        }
        let key = format!("{at}/{}", name.replace('~', "~0").replace('/', "~1"));
        self.conditions
            .get(&key)
            .is_some_and(|c| c.as_ref().is_some_and(|c| (ctx.holds)(c)))
    }
}

/// The context a tool description template is rendered with.
#[derive(Debug, Clone, Serialize)]
pub struct DescriptionContext {
    pub fork: bool,
    pub background: bool,
    pub coordinator: bool,
    /// The agent type a call without `subagent_type` starts.
    pub default_type: String,
}

/// The context of one tool's description: the shared [`DescriptionContext`]
/// plus `properties`, the input properties this tool's trimmed schema still
/// offers (`{{#if properties.isolation}}`), so a description never explains a
/// field the model is not given.
#[derive(Debug, Serialize)]
struct ToolDescriptionContext<'a> {
    #[serde(flatten)]
    shared: &'a DescriptionContext,
    properties: BTreeMap<String, bool>,
}

/// The top-level property names of a (trimmed) input schema.
fn offered_properties(schema: &Value) -> BTreeMap<String, bool> {
    schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|props| props.keys().map(|k| (k.clone(), true)).collect())
        .unwrap_or_default()
}

/// Removes from a call's `input` the top-level fields that `definition` (as
/// sent to the model this turn) does not offer. A model may still send a
/// field that was trimmed away; it is ignored, not acted on (SPEC §6).
pub fn drop_unoffered_fields(input: Value, definition: &ToolDefinition) -> Value {
    let Value::Object(mut fields) = input else {
        return input;
    };
    let offered = definition
        .input_schema
        .get("properties")
        .and_then(Value::as_object);
    if let Some(offered) = offered {
        fields.retain(|k, _| offered.contains_key(k));
    }
    Value::Object(fields)
}

/// One skill as the skill-listing announcement names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct SkillLine {
    pub name: String,
    pub description: String,
    /// The skill's `when_to_use`; empty when it has none.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub when_to_use: String,
}

/// One agent type as the agent-listing announcement names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct AgentLine {
    pub name: String,
    pub description: String,
    pub tools: String,
}

/// Renders the definitions of `names` (in that order) for one session.
pub fn render_definitions(
    specs: &ToolSpecs,
    templates: &Templates,
    names: &[String],
    desc: &DescriptionContext,
    trim: &TrimContext<'_>,
) -> Result<Vec<ToolDefinition>, RenderError> {
    let mut out = Vec::with_capacity(names.len());
    for name in names {
        let Some(spec) = specs.get(name) else {
            continue;
        };
        let input_schema = spec.input_schema.trimmed(trim);
        let ctx = ToolDescriptionContext {
            shared: desc,
            properties: offered_properties(&input_schema),
        };
        let description =
            templates.render_text(&format!("tool {name}"), &spec.description, &ctx)?;
        out.push(ToolDefinition {
            name: spec.name.clone(),
            description: tidy(&description),
            input_schema,
        });
    }
    Ok(out)
}

/// Collapses the blank-line runs that template conditionals leave behind
/// and trims the ends.
pub fn tidy(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut blank = 0;
    for line in text.trim().lines() {
        let l = line.trim_end();
        if l.is_empty() {
            blank += 1;
            if blank > 1 {
                continue;
            }
        } else {
            blank = 0;
        }
        out.push_str(l);
        out.push('\n');
    }
    out.truncate(out.trim_end().len());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ctx_with<'a>(holds: &'a dyn Fn(&Condition) -> bool) -> TrimContext<'a> {
        TrimContext {
            holds,
            model_aliases: &[],
        }
    }

    #[test]
    fn x_when_properties_are_trimmed_and_keys_never_leak() {
        let schema = json!({"type":"object","properties":{
            "a":{"type":"string"},
            "fork":{"type":"boolean","x-when":"FORK_SUBAGENT"},
            "bg":{"type":"boolean","x-when":"!DISABLE_BACKGROUND_TASKS"}},
            "required":["a","fork"]});
        let all_off = |c: &Condition| c.holds(|_| false);
        let schema = InputSchema::new(schema);
        let t = schema.trimmed(&ctx_with(&all_off));
        assert_eq!(
            t["properties"]
                .as_object()
                .unwrap()
                .keys()
                .collect::<Vec<_>>(),
            vec!["a", "bg"]
        );
        assert_eq!(t["required"], json!(["a"]));
        assert!(!t.to_string().contains("x-when"));
        let both_on = |c: &Condition| c.holds(|_| true);
        let t = schema.trimmed(&ctx_with(&both_on));
        assert!(t["properties"].get("fork").is_some());
        assert!(
            t["properties"].get("bg").is_none(),
            "a negated condition fails when its flag holds"
        );
        assert!(!t.to_string().contains("x-when"));
    }

    /// Conditions are parsed once, wherever the property sits: a nested
    /// one is trimmed by its own condition, and one that does not parse
    /// hides its property (the file's load reported it).
    #[test]
    fn nested_and_unparsable_conditions_are_judged_from_the_parsed_schema() {
        let schema = InputSchema::new(json!({"type":"object","properties":{
            "list":{"type":"array","items":{"type":"object","properties":{
                "deep":{"type":"string","x-when":["FORK_SUBAGENT", "!COORDINATOR"]},
                "plain":{"type":"string"}}}},
            "bad":{"type":"string","x-when":"!!"},
            "odd~/name":{"type":"string","x-when":"FORK_SUBAGENT"}}}));
        let fork_only = |c: &Condition| c.holds(|n| n == "FORK_SUBAGENT");
        let t = schema.trimmed(&ctx_with(&fork_only));
        let items = &t["properties"]["list"]["items"]["properties"];
        assert!(items.get("deep").is_some() && items.get("plain").is_some());
        assert!(t["properties"].get("odd~/name").is_some());
        assert!(t["properties"].get("bad").is_none());
        let none = |c: &Condition| c.holds(|_| false);
        let t = schema.trimmed(&ctx_with(&none));
        assert!(
            t["properties"]["list"]["items"]["properties"]
                .get("deep")
                .is_none()
        );
        assert!(t["properties"].get("odd~/name").is_none());
        assert!(!t.to_string().contains("x-when"));
    }

    #[test]
    fn untrimmed_schema_keeps_every_property() {
        let schema = json!({"properties":{"fork":{"type":"boolean","x-when":"FORK_SUBAGENT"}, "m": {"x-enum": "model_aliases"}}});
        let t = InputSchema::new(schema).untrimmed(&["haiku".into()]);
        assert_eq!(
            t,
            json!({"properties":{"fork":{"type":"boolean"}, "m": {"enum": ["haiku"]}}})
        );
    }

    /// What a start skips for the embedded specs holds: each YAML file
    /// passes the checks an on-disk file gets, and the JSON the build
    /// script made of it (what a start loads) is the same spec, keys in the
    /// same order (they are request bytes, part of the cached prefix).
    #[test]
    fn embedded_specs_pass_the_checks_a_file_gets() {
        let mut parsed = BTreeMap::new();
        for file in EMBEDDED.files().filter(|f| is_yaml(f.path())) {
            let mut diags = Vec::new();
            let text = file.contents_utf8().unwrap();
            let spec = parse_spec(file.path(), text, &mut diags);
            assert!(diags.is_empty(), "{}: {diags:?}", file.path().display());
            let spec = spec.unwrap();
            parsed.insert(spec.name.clone(), ToolSpec { path: None, ..spec });
        }
        let (specs, diags) = ToolSpecs::load(None);
        assert!(diags.is_empty(), "{diags:?}");
        assert!(parsed.len() > 20, "{}", parsed.len());
        assert_eq!(specs.names().count(), parsed.len());
        for (name, spec) in &parsed {
            let loaded = specs.get(name).unwrap();
            assert_eq!(**loaded, *spec, "{name}");
            assert_eq!(
                serde_json::to_string(&loaded.input_schema.value).unwrap(),
                serde_json::to_string(&spec.input_schema.value).unwrap(),
                "{name}"
            );
        }
    }

    #[test]
    fn embedded_specs_load_cleanly() {
        let (specs, diags) = ToolSpecs::load(None);
        assert!(diags.is_empty(), "{diags:?}");
        let agent = specs.get("Agent").unwrap();
        assert!(agent.read_only);
        assert_eq!(
            agent.input_schema.value["additionalProperties"],
            json!(false)
        );
    }

    #[test]
    fn broken_override_is_reported_and_embedded_kept() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("Agent.yaml"),
            "name: Agent\ndescription: x\ninput_schema:\n  properties:\n    f: {x-when: '!!'}\n",
        )
        .unwrap();
        let (specs, diags) = ToolSpecs::load(Some(dir.path()));
        assert!(diags.iter().any(|d| d.line == Some(5)), "{diags:?}");
        // The override parsed (bad x-when is reported) and replaced the embedded spec.
        assert_eq!(specs.get("Agent").unwrap().description, "x");
    }

    #[test]
    fn a_schema_that_is_not_a_json_schema_is_reported_at_its_line_and_skipped() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("Glob.yaml"),
            "name: Glob\ndescription: x\ninput_schema:\n  type: object\n  properties:\n    pattern:\n      type: 5\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("Mine.yaml"),
            "name: Mine\ndescription: mine\ninput_schema:\n  type: object\n  required: yes\n",
        )
        .unwrap();
        let (specs, diags) = ToolSpecs::load(Some(dir.path()));
        let glob = diags
            .iter()
            .find(|d| d.path.as_ref().is_some_and(|p| p.ends_with("Glob.yaml")))
            .expect("a diagnostic for Glob.yaml");
        assert_eq!((glob.line, glob.column), (Some(7), Some(13)), "{glob:?}");
        assert!(
            glob.message.contains("/properties/pattern/type"),
            "{glob:?}"
        );
        // The embedded Glob stays; the new tool is skipped.
        assert_eq!(specs.get("Glob").unwrap().path, None);
        assert!(specs.get("Mine").is_none());
        assert!(
            diags.iter().any(
                |d| d.path.as_ref().is_some_and(|p| p.ends_with("Mine.yaml")) && d.line == Some(5)
            ),
            "{diags:?}"
        );
    }

    #[test]
    fn tidy_collapses_blank_runs() {
        assert_eq!(tidy("\na\n\n\n\nb  \n\n"), "a\n\nb");
    }
}
