//! Tools: the `Tool` trait, the built-in tools, permission checks, and tool
//! schemas as data with their trimming rules.
//!
//! Built-in tools take Claude Code's names and input fields (Bash, Read,
//! Write, Edit, Glob, Grep) so agent files written for it work unchanged.
//! Relative paths resolve against the session's working directory, given in
//! [`ToolContext`]. This module does not know which agent is running.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures_util::future::BoxFuture;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

mod bash;
mod edit;
mod files;
mod glob;
mod grep;
pub mod notebook;
pub use crate::permissions;
mod read;
pub mod spec;
pub mod web_fetch;
mod write;

pub use bash::BashTool;
pub use edit::EditTool;
pub use glob::GlobTool;
pub use grep::GrepTool;
pub use notebook::NotebookEditTool;
pub use read::ReadTool;
pub use web_fetch::{PageQuery, SmallModel, WebFetchTool};
pub use write::WriteTool;

/// What a tool call may use from its session.
#[derive(Clone)]
pub struct ToolContext {
    /// The session's working directory; relative paths resolve against it.
    pub cwd: PathBuf,
    /// Cancelled when the call's turn is cancelled; long-running tools stop
    /// (Bash kills its process group).
    pub cancel: CancellationToken,
    /// The environment of processes a tool starts (Bash).
    pub env: std::sync::Arc<crate::config::ChildEnv>,
    /// Paths a Glob or Grep walk must leave out, because a permission rule
    /// denies reading them (or asks first). `None`: nothing is hidden.
    pub hidden: Option<PathFilter>,
    /// WebFetch's limits.
    pub web_fetch: crate::config::WebFetchSettings,
    /// The small model WebFetch puts pages through; `None`: it returns
    /// the Markdown.
    pub small_model: Option<SmallModel>,
}

/// Answers whether a walk must skip a path.
pub type PathFilter = Arc<dyn Fn(&Path) -> bool + Send + Sync>;

impl std::fmt::Debug for ToolContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolContext")
            .field("cwd", &self.cwd)
            .field("cancel", &self.cancel)
            .field("env", &self.env)
            .field("hidden", &self.hidden.is_some())
            .field("web_fetch", &self.web_fetch)
            .field("small_model", &self.small_model.is_some())
            .finish()
    }
}

impl ToolContext {
    pub fn new(cwd: impl Into<PathBuf>) -> Self {
        ToolContext {
            cwd: cwd.into(),
            cancel: CancellationToken::new(),
            env: Default::default(),
            hidden: None,
            web_fetch: Default::default(),
            small_model: None,
        }
    }

    /// `path` made absolute against the working directory.
    pub fn resolve(&self, path: &str) -> PathBuf {
        let p = Path::new(path);
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.cwd.join(p)
        }
    }
}

/// The result of one tool call, as text for the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutput {
    pub text: String,
    pub is_error: bool,
    /// An error to be worded by this template with this context (the
    /// runtime renders it; `text` holds the template's name meanwhile).
    pub template: Option<Box<(String, Value)>>,
    /// Images sent after the text, as Anthropic image `source` objects
    /// (MCP tools).
    pub images: Vec<Value>,
}

impl ToolOutput {
    pub fn ok(text: impl Into<String>) -> Self {
        ToolOutput {
            text: text.into(),
            is_error: false,
            template: None,
            images: Vec::new(),
        }
    }

    pub fn error(text: impl Into<String>) -> Self {
        ToolOutput {
            text: text.into(),
            is_error: true,
            template: None,
            images: Vec::new(),
        }
    }

    /// A successful result worded by the template `name`.
    pub fn ok_template(name: &str, ctx: Value) -> Self {
        ToolOutput {
            is_error: false,
            ..ToolOutput::from_template(name, ctx)
        }
    }

    /// An error result worded by the template `name`.
    pub fn from_template(name: &str, ctx: Value) -> Self {
        ToolOutput {
            text: format!("[{name}] {ctx}"),
            is_error: true,
            template: Some(Box::new((name.to_string(), ctx))),
            images: Vec::new(),
        }
    }
}

/// A tool the engine can run. Input has already been validated against the
/// tool's schema when `call` runs.
pub trait Tool: Send + Sync {
    fn name(&self) -> &str;
    /// Read-only tools of one turn run concurrently; others run in order.
    fn read_only(&self) -> bool;
    fn call<'a>(&'a self, input: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput>;
}

/// The built-in tools that run in-process: Bash, Edit, Glob, Grep,
/// NotebookEdit, Read, WebFetch, Write. (The Agent tool is the runtime's.)
pub fn builtin_tools() -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(BashTool),
        Arc::new(EditTool),
        Arc::new(GlobTool),
        Arc::new(GrepTool),
        Arc::new(NotebookEditTool),
        Arc::new(ReadTool),
        Arc::new(WebFetchTool::default()),
        Arc::new(WriteTool),
    ]
}

/// Typed access to a tool's JSON input. The input was validated against the
/// tool's schema, but a wrong type still becomes an error result, never a
/// panic: every accessor returns the message for the model on failure.
pub(crate) struct Input<'a>(pub(crate) &'a Value);

impl<'a> Input<'a> {
    fn field(&self, key: &str) -> Option<&'a Value> {
        self.0.get(key).filter(|v| !v.is_null())
    }

    /// A required string field.
    pub(crate) fn str(&self, key: &str) -> Result<&'a str, String> {
        match self.field(key) {
            Some(Value::String(s)) => Ok(s),
            Some(other) => Err(format!(
                "`{key}` must be a string, found {}",
                type_name(other)
            )),
            None => Err(format!("missing required field `{key}`")),
        }
    }

    /// An optional string field.
    pub(crate) fn opt_str(&self, key: &str) -> Result<Option<&'a str>, String> {
        match self.field(key) {
            Some(Value::String(s)) => Ok(Some(s)),
            Some(other) => Err(format!(
                "`{key}` must be a string, found {}",
                type_name(other)
            )),
            None => Ok(None),
        }
    }

    /// An optional non-negative integer field.
    pub(crate) fn opt_u64(&self, key: &str) -> Result<Option<u64>, String> {
        match self.field(key) {
            Some(v) => match v.as_u64() {
                Some(n) => Ok(Some(n)),
                // Whole floats such as `5.0` are accepted; models write them.
                None => match v.as_f64() {
                    Some(f) if f >= 0.0 && f.fract() == 0.0 && f <= u64::MAX as f64 => {
                        Ok(Some(f as u64))
                    }
                    _ => Err(format!(
                        "`{key}` must be a non-negative integer, found {}",
                        describe(v)
                    )),
                },
            },
            None => Ok(None),
        }
    }

    /// An optional boolean field.
    pub(crate) fn opt_bool(&self, key: &str) -> Result<Option<bool>, String> {
        match self.field(key) {
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(other) => Err(format!(
                "`{key}` must be a boolean, found {}",
                type_name(other)
            )),
            None => Ok(None),
        }
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn describe(v: &Value) -> String {
    match v {
        Value::Number(n) => n.to_string(),
        other => type_name(other).to_string(),
    }
}

/// Shortens `text` to at most `max` characters, keeping its head and tail
/// around a marker that says how many characters were cut.
pub(crate) fn truncate_middle(text: &str, max: usize) -> String {
    let total = text.chars().count();
    if total <= max {
        return text.to_string();
    }
    let keep_head = max / 2;
    let keep_tail = max - keep_head;
    let cut = total - keep_head - keep_tail;
    let head_end = text
        .char_indices()
        .nth(keep_head)
        .map_or(text.len(), |(i, _)| i);
    let tail_start = text
        .char_indices()
        .nth(total - keep_tail)
        .map_or(text.len(), |(i, _)| i);
    format!(
        "{}\n\n[... {cut} characters truncated ...]\n\n{}",
        &text[..head_end],
        &text[tail_start..]
    )
}

/// Checks `input` against a compiled JSON Schema; `Err` lists every
/// problem, each prefixed with the path of the offending field.
pub fn schema_issues(validator: &jsonschema::Validator, input: &Value) -> Result<(), Vec<String>> {
    let issues: Vec<String> = validator
        .iter_errors(input)
        .map(|e| {
            let at = e.instance_path().to_string();
            if at.is_empty() {
                e.to_string()
            } else {
                format!("{at}: {e}")
            }
        })
        .collect();
    if issues.is_empty() {
        Ok(())
    } else {
        Err(issues)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn builtin_tools_sorted_with_read_only_flags() {
        let tools = builtin_tools();
        let names: Vec<&str> = tools.iter().map(|t| t.name()).collect();
        assert_eq!(
            names,
            [
                "Bash",
                "Edit",
                "Glob",
                "Grep",
                "NotebookEdit",
                "Read",
                "WebFetch",
                "Write"
            ]
        );
        let ro: Vec<&str> = tools
            .iter()
            .filter(|t| t.read_only())
            .map(|t| t.name())
            .collect();
        assert_eq!(ro, ["Glob", "Grep", "Read", "WebFetch"]);
    }

    #[test]
    fn input_accessors_report_wrong_types() {
        let v = json!({"a": 1, "b": "x", "c": true, "d": 2.0, "e": -1});
        let i = Input(&v);
        assert_eq!(i.str("b"), Ok("x"));
        assert!(
            i.str("a")
                .is_err_and(|e| e.contains("`a` must be a string"))
        );
        assert!(i.str("zz").is_err_and(|e| e.contains("missing")));
        assert_eq!(i.opt_u64("a"), Ok(Some(1)));
        assert_eq!(i.opt_u64("d"), Ok(Some(2)));
        assert!(i.opt_u64("e").is_err());
        assert!(i.opt_u64("b").is_err());
        assert_eq!(i.opt_bool("c"), Ok(Some(true)));
        assert!(i.opt_bool("a").is_err());
        assert_eq!(i.opt_str("zz"), Ok(None));
    }

    #[test]
    fn truncate_middle_keeps_head_and_tail() {
        let s: String = "a".repeat(50) + &"b".repeat(50);
        let t = truncate_middle(&s, 20);
        assert!(t.starts_with(&"a".repeat(10)));
        assert!(t.ends_with(&"b".repeat(10)));
        assert!(t.contains("[... 80 characters truncated ...]"));
        assert_eq!(truncate_middle("short", 20), "short");
    }

    /// Every schema file under `agents/tools/` names a built-in tool, has the
    /// loader's shape, and declares every field the tool reads.
    #[test]
    fn tool_schema_files_match_builtin_tools() {
        let fields: &[(&str, &[&str], &[&str])] = &[
            ("Bash", &["command", "timeout", "description"], &["command"]),
            (
                "Edit",
                &["file_path", "old_string", "new_string", "replace_all"],
                &["file_path", "old_string", "new_string"],
            ),
            ("Glob", &["pattern", "path"], &["pattern"]),
            (
                "Grep",
                &[
                    "pattern",
                    "path",
                    "glob",
                    "output_mode",
                    "-i",
                    "-n",
                    "-A",
                    "-B",
                    "-C",
                    "head_limit",
                ],
                &["pattern"],
            ),
            ("Read", &["file_path", "offset", "limit"], &["file_path"]),
            ("WebFetch", &["url", "prompt"], &["url", "prompt"]),
            (
                "NotebookEdit",
                &[
                    "notebook_path",
                    "cell_id",
                    "new_source",
                    "cell_type",
                    "edit_mode",
                ],
                &["notebook_path", "new_source"],
            ),
            (
                "Write",
                &["file_path", "content"],
                &["file_path", "content"],
            ),
        ];
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("agents/tools");
        let tools = builtin_tools();
        let mut seen = Vec::new();
        for (name, props, required) in fields {
            let path = dir.join(format!("{name}.yaml"));
            let text = std::fs::read_to_string(&path).unwrap();
            let doc: Value = serde_saphyr::from_str(&text).unwrap();
            assert_eq!(doc["name"], *name, "{}", path.display());
            let tool = tools.iter().find(|t| t.name() == *name).unwrap();
            assert_eq!(doc["read_only"], tool.read_only(), "{name}");
            let desc = doc["description"].as_str().unwrap();
            assert!(
                desc.len() > 200 && !desc.contains("{{"),
                "{name} description"
            );
            // The description is a template; as plain text it renders unchanged.
            let rendered = handlebars::Handlebars::new()
                .render_template(desc, &serde_json::json!({}))
                .unwrap();
            assert_eq!(rendered, desc, "{name} description renders as written");
            let schema = &doc["input_schema"];
            assert_eq!(schema["type"], "object");
            assert_eq!(schema["additionalProperties"], false);
            let declared = schema["properties"].as_object().unwrap();
            for p in *props {
                let prop = &declared[*p];
                assert!(prop["type"].is_string(), "{name}.{p} has a type");
                assert!(
                    prop["description"].is_string(),
                    "{name}.{p} has a description"
                );
            }
            assert_eq!(declared.len(), props.len(), "{name}: no undeclared extras");
            let req: Vec<&str> = schema["required"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(Value::as_str)
                .collect();
            assert_eq!(req, *required, "{name} required");
            seen.push(*name);
        }
        let mut files: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|f| f.ends_with(".yaml"))
            .collect();
        files.sort();
        // Files for tools that are not built in (e.g. Agent) may be added by others;
        // each built-in tool must have exactly its own file.
        for name in seen {
            assert!(files.contains(&format!("{name}.yaml")));
        }
    }
}
