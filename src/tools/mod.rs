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

use crate::templates::{Context, Templates};
use outcome::{BadInput, Clip};

mod bash;
pub mod child;
mod edit;
mod files;
mod glob;
mod grep;
pub mod notebook;
pub mod outcome;
mod read;
pub mod sandbox;
pub mod spec;
pub mod typed;
pub mod web_fetch;
pub mod web_search;
mod write;

pub use bash::BashTool;
pub use edit::EditTool;
pub use glob::GlobTool;
pub use grep::GrepTool;
pub use notebook::NotebookEditTool;
pub use outcome::SearchHit;
pub use read::ReadTool;
pub use web_fetch::{PageQuery, SmallModel, WebFetchTool};
pub use web_search::{SearchAnswer, SearchQuery, Searcher, WebSearchTool};
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
    /// Bash's timeouts.
    pub bash: crate::config::BashSettings,
    /// WebFetch's limits.
    pub web_fetch: crate::config::WebFetchSettings,
    /// The small model WebFetch puts pages through; `None`: it returns
    /// the Markdown.
    pub small_model: Option<SmallModel>,
    /// Reports how far a long call has come (a line for the progress
    /// display); `None`: nobody is listening.
    pub progress: Option<ProgressFn>,
    /// Where WebSearch searches.
    pub web_search: crate::config::WebSearchSettings,
    /// The provider's server-side search, when it is the backend; `None`:
    /// WebSearch asks SearXNG itself.
    pub searcher: Option<Searcher>,
    /// Run Bash inside the operating-system sandbox with this policy;
    /// `None`: unsandboxed.
    pub sandbox: Option<Arc<sandbox::Policy>>,
    /// Asked about a host the sandbox's network does not allow; `None`:
    /// such hosts are refused.
    pub ask_host: Option<sandbox::proxy::HostAsker>,
    /// Bash keeps a `cd` for the next call within these folders; `None`:
    /// it keeps none (each command starts in `cwd`).
    pub shell: Option<ShellDirs>,
}

/// Where a Bash call's `cd` may leave the session's shell.
#[derive(Debug, Clone)]
pub struct ShellDirs {
    /// The session's folder: where the shell goes back to when a command
    /// ends outside `allowed`.
    pub root: PathBuf,
    /// The folders (the session's, the added ones) a `cd` may stay in.
    pub allowed: Vec<PathBuf>,
    /// Set by the call: the folder the shell is in after the command, when
    /// it is not where the command started.
    pub moved_to: std::sync::OnceLock<PathBuf>,
}

/// Receives a running call's progress, as a short line.
pub type ProgressFn = Arc<dyn Fn(String) + Send + Sync>;

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
            .field("web_search", &self.web_search)
            .field("searcher", &self.searcher.is_some())
            .field("sandbox", &self.sandbox)
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
            bash: Default::default(),
            web_fetch: Default::default(),
            small_model: None,
            progress: None,
            web_search: Default::default(),
            searcher: None,
            sandbox: None,
            ask_host: None,
            shell: None,
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

/// The result of one tool call: a template context the runtime renders
/// for the model. There is no way to build one from a string: every word a
/// tool gives the model comes from a template ([`outcome`] declares them).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    template: &'static str,
    verbatim: bool,
    /// (Boxed, with `typed`, so a result stays small in a `Result`.)
    ctx: Box<Value>,
    pub is_error: bool,
    /// Images sent after the text, as Anthropic image `source` objects
    /// (MCP tools).
    pub images: Vec<Value>,
    /// The result as data, for programs ([`typed`]); never sent to the
    /// model.
    pub typed: Option<Box<Value>>,
}

impl ToolOutput {
    /// A successful result worded by `ctx`'s template.
    pub fn ok<C: Context>(ctx: C) -> Self {
        Self::new(ctx, false)
    }

    /// An error result worded by `ctx`'s template.
    pub fn error<C: Context>(ctx: C) -> Self {
        Self::new(ctx, true)
    }

    fn new<C: Context>(ctx: C, is_error: bool) -> Self {
        ToolOutput {
            template: C::TEMPLATE,
            verbatim: C::VERBATIM,
            // A context is a struct of strings, numbers and lists: it
            // always serialises; were it not to, the template reports the
            // missing values.
            ctx: Box::new(serde_json::to_value(&ctx).unwrap_or_default()),
            is_error,
            images: Vec::new(),
            typed: None,
        }
    }

    /// With the result as data too ([`typed`]).
    pub fn with_typed<T: serde::Serialize>(mut self, typed: T) -> Self {
        self.typed = serde_json::to_value(typed).ok().map(Box::new);
        self
    }

    /// The template that words this result.
    pub fn template(&self) -> &'static str {
        self.template
    }

    /// The text for the model.
    pub fn render(&self, templates: &Templates) -> String {
        templates.show_value(self.template, self.verbatim, &self.ctx)
    }

    /// The text with the embedded templates (tests).
    #[cfg(test)]
    pub fn text(&self) -> String {
        static EMBEDDED: std::sync::LazyLock<Templates> =
            std::sync::LazyLock::new(|| Templates::load(None).0);
        self.render(&EMBEDDED)
    }
}

impl From<BadInput> for ToolOutput {
    fn from(bad: BadInput) -> Self {
        ToolOutput::error(bad)
    }
}

/// The samples of every tool outcome, as (template, verbatim, values).
#[cfg(test)]
pub(crate) fn template_samples() -> Vec<(&'static str, bool, Value)> {
    let mut all = outcome::samples();
    all.push(crate::templates::sample_of::<notebook::NotebookView>());
    all
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
/// NotebookEdit, Read, WebFetch, WebSearch, Write. (The Agent tool is the runtime's.)
pub fn builtin_tools() -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(BashTool),
        Arc::new(EditTool),
        Arc::new(GlobTool),
        Arc::new(GrepTool),
        Arc::new(NotebookEditTool),
        Arc::new(ReadTool),
        Arc::new(WebFetchTool::default()),
        Arc::new(WebSearchTool::default()),
        Arc::new(WriteTool),
    ]
}

/// Typed access to a tool's JSON input. The input was validated against the
/// tool's schema, but a wrong type still becomes an error result, never a
/// panic: every accessor returns the outcome for the model on failure.
pub(crate) struct Input<'a>(pub(crate) &'a Value);

impl<'a> Input<'a> {
    fn field(&self, key: &str) -> Option<&'a Value> {
        self.0.get(key).filter(|v| !v.is_null())
    }

    /// A required string field.
    pub(crate) fn str(&self, key: &str) -> Result<&'a str, BadInput> {
        match self.field(key) {
            Some(Value::String(s)) => Ok(s),
            Some(other) => Err(wrong(key, "string", other)),
            None => Err(BadInput {
                field: key.to_string(),
                missing: true,
                expected: "string".into(),
                found: kind(&Value::Null),
            }),
        }
    }

    /// An optional string field.
    pub(crate) fn opt_str(&self, key: &str) -> Result<Option<&'a str>, BadInput> {
        match self.field(key) {
            Some(Value::String(s)) => Ok(Some(s)),
            Some(other) => Err(wrong(key, "string", other)),
            None => Ok(None),
        }
    }

    /// An optional non-negative integer field.
    pub(crate) fn opt_u64(&self, key: &str) -> Result<Option<u64>, BadInput> {
        match self.field(key) {
            Some(v) => match v.as_u64() {
                Some(n) => Ok(Some(n)),
                // Whole floats such as `5.0` are accepted; models write them.
                None => match v.as_f64() {
                    Some(f) if f >= 0.0 && f.fract() == 0.0 && f <= u64::MAX as f64 => {
                        Ok(Some(f as u64))
                    }
                    _ => Err(wrong(key, "integer", v)),
                },
            },
            None => Ok(None),
        }
    }

    /// An optional boolean field.
    pub(crate) fn opt_bool(&self, key: &str) -> Result<Option<bool>, BadInput> {
        match self.field(key) {
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(other) => Err(wrong(key, "boolean", other)),
            None => Ok(None),
        }
    }
}

/// The outcome for field `key` holding `v` where `expected` was wanted. A
/// number where an integer was wanted is shown as itself.
fn wrong(key: &str, expected: &str, v: &Value) -> BadInput {
    let found = match v {
        Value::Number(n) if expected == "integer" => n.to_string(),
        other => kind(other),
    };
    BadInput {
        field: key.to_string(),
        missing: false,
        expected: expected.to_string(),
        found,
    }
}

/// A JSON value's kind, as the `error_tool_input` template names it.
fn kind(v: &Value) -> String {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
    .to_string()
}

/// Shortens `text` to at most `max` characters, keeping its head and tail
/// and counting the characters cut between them.
pub(crate) fn truncate_middle(text: &str, max: usize) -> Clip {
    let total = text.chars().count();
    if total <= max {
        return Clip::whole(text.to_string());
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
    Clip {
        head: text[..head_end].to_string(),
        cut: cut as u64,
        about: false,
        tail: text[tail_start..].to_string(),
    }
}

/// Starts building, on a thread of its own, the part of checking tool
/// input that does not depend on any tool: jsonschema's draft 2020-12
/// meta-schema validator, which every input validator is checked against
/// when it is built (~6 M instructions, once per process; jsonschema has
/// no switch to skip that check, and its compiled-in meta-schemas add
/// 0.6 MB to the binary). Called as a request offering tools goes out, so
/// the work overlaps the wait for the answer instead of delaying the first
/// tool call, which then finds it done (or waits for it; it is never done
/// twice). Once per process.
pub fn warm_input_checks() {
    static STARTED: std::sync::Once = std::sync::Once::new();
    STARTED.call_once(|| {
        let spawned = std::thread::Builder::new()
            .name("cadre-schema-warm".into())
            .spawn(|| {
                let _ = jsonschema::draft202012::meta::validator();
            });
        // Without the thread, the first check builds it as before.
        drop(spawned);
    });
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
                "WebSearch",
                "Write"
            ]
        );
        let ro: Vec<&str> = tools
            .iter()
            .filter(|t| t.read_only())
            .map(|t| t.name())
            .collect();
        assert_eq!(ro, ["Glob", "Grep", "Read", "WebFetch", "WebSearch"]);
    }

    #[test]
    fn input_accessors_report_wrong_types() {
        let v = json!({"a": 1, "b": "x", "c": true, "d": 2.0, "e": -1});
        let i = Input(&v);
        assert_eq!(i.str("b").ok(), Some("x"));
        let text = |e: BadInput| ToolOutput::error(e).text();
        assert_eq!(
            text(i.str("a").unwrap_err()),
            "`a` must be a string, found a number"
        );
        assert_eq!(
            text(i.str("zz").unwrap_err()),
            "missing required field `zz`"
        );
        assert_eq!(
            text(i.opt_u64("e").unwrap_err()),
            "`e` must be a non-negative integer, found -1"
        );
        assert_eq!(
            text(i.opt_bool("b").unwrap_err()),
            "`b` must be a boolean, found a string"
        );
        assert_eq!(i.opt_u64("a").ok(), Some(Some(1)));
        assert_eq!(i.opt_u64("d").ok(), Some(Some(2)));
        assert!(i.opt_u64("b").is_err());
        assert_eq!(i.opt_bool("c").ok(), Some(Some(true)));
        assert!(i.opt_bool("a").is_err());
        assert_eq!(i.opt_str("zz").ok(), Some(None));
    }

    #[test]
    fn truncate_middle_keeps_head_and_tail() {
        let s: String = "a".repeat(50) + &"b".repeat(50);
        let t = ToolOutput::ok(outcome::BashOutput {
            output: truncate_middle(&s, 20),
            refused: vec![],
            reset_to: None,
        })
        .text();
        assert_eq!(
            t,
            format!(
                "{}\n\n[... 80 characters truncated ...]\n\n{}",
                "a".repeat(10),
                "b".repeat(10)
            )
        );
        assert_eq!(truncate_middle("short", 20), Clip::whole("short".into()));
    }

    /// Every schema file under `agents/tools/` names a built-in tool, has the
    /// loader's shape, and declares every field the tool reads.
    #[test]
    fn tool_schema_files_match_builtin_tools() {
        let fields: &[(&str, &[&str], &[&str])] = &[
            (
                "Bash",
                &[
                    "command",
                    "timeout",
                    "description",
                    "dangerouslyDisableSandbox",
                ],
                &["command"],
            ),
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
                "WebSearch",
                &["query", "allowed_domains", "blocked_domains"],
                &["query"],
            ),
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
