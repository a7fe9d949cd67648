//! The Grep tool: a regular-expression search over files, run in-process with
//! ripgrep's libraries (`grep-regex`, `grep-searcher`) over the same walk as
//! Glob (`.gitignore` honoured, `.git` skipped, binary files skipped). Three
//! output modes like `rg -l`, `rg` and `rg -c`, with ripgrep's context flags.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use futures_util::FutureExt as _;
use futures_util::future::BoxFuture;
use grep_regex::RegexMatcherBuilder;
use grep_searcher::{
    BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkContextKind, SinkMatch,
};
use ignore::overrides::OverrideBuilder;
use serde_json::Value;

use super::files;
use super::glob::walker;
use super::outcome::{
    BadInput, BadPattern, GrepNone, GrepOutputMode, GrepResults, PathNotFound, ToolFailed,
};
use super::{Input, PathFilter, Tool, ToolContext, ToolOutput, truncate_middle};

/// Output longer than this many characters keeps its head and tail.
pub const MAX_OUTPUT_CHARS: usize = 30_000;
/// The most memory the searcher's line buffer may take for one file: a
/// file with a longer line is skipped rather than read whole.
const MAX_LINE_BUFFER: usize = 16 * 1024 * 1024;

#[derive(Debug, Clone, Copy, Default)]
pub struct GrepTool;

impl Tool for GrepTool {
    fn name(&self) -> &str {
        "Grep"
    }

    fn read_only(&self) -> bool {
        true
    }

    fn call<'a>(&'a self, input: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        async move {
            let args = match Args::parse(&input, ctx) {
                Ok(a) => a,
                Err(e) => return e,
            };
            match tokio::task::spawn_blocking(move || grep(&args)).await {
                Ok(Ok(out)) | Ok(Err(out)) => out,
                Err(e) => ToolOutput::error(ToolFailed {
                    tool: "Grep".into(),
                    error: e.to_string(),
                }),
            }
        }
        .boxed()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    FilesWithMatches,
    Content,
    Count,
}

struct Args {
    pattern: String,
    root: PathBuf,
    hidden: Option<PathFilter>,
    glob: Option<String>,
    mode: Mode,
    case_insensitive: bool,
    line_numbers: bool,
    after: usize,
    before: usize,
    head_limit: Option<usize>,
}

impl Args {
    fn parse(input: &Value, ctx: &ToolContext) -> Result<Args, ToolOutput> {
        let i = Input(input);
        let mode = match i.opt_str("output_mode")? {
            None | Some("files_with_matches") => Mode::FilesWithMatches,
            Some("content") => Mode::Content,
            Some("count") => Mode::Count,
            Some(other) => {
                return Err(ToolOutput::error(GrepOutputMode {
                    found: format!("{other:?}"),
                }));
            }
        };
        let usize_of = |key: &str| -> Result<Option<usize>, BadInput> {
            Ok(i.opt_u64(key)?
                .map(|n| usize::try_from(n).unwrap_or(usize::MAX)))
        };
        let around = usize_of("-C")?;
        Ok(Args {
            pattern: i.str("pattern")?.to_string(),
            root: i
                .opt_str("path")?
                .map_or_else(|| ctx.cwd.clone(), |p| ctx.resolve(p)),
            hidden: ctx.hidden.clone(),
            glob: i.opt_str("glob")?.map(str::to_string),
            mode,
            case_insensitive: i.opt_bool("-i")?.unwrap_or(false),
            line_numbers: i.opt_bool("-n")?.unwrap_or(true),
            after: usize_of("-A")?.or(around).unwrap_or(0),
            before: usize_of("-B")?.or(around).unwrap_or(0),
            head_limit: usize_of("head_limit")?.filter(|&n| n > 0),
        })
    }
}

fn grep(args: &Args) -> Result<ToolOutput, ToolOutput> {
    if !args.root.exists() {
        return Err(ToolOutput::error(PathNotFound {
            path: args.root.display().to_string(),
        }));
    }
    // A FIFO, socket or device named as the path is refused like Read
    // refuses it; inside a folder such files are skipped by the walk.
    if let Ok(meta) = std::fs::metadata(&args.root)
        && !meta.is_dir()
        && let Some(kind) = files::kind_of(&meta)
    {
        return Err(files::not_regular("Grep", &args.root, kind));
    }
    let matcher = RegexMatcherBuilder::new()
        .case_insensitive(args.case_insensitive)
        .line_terminator(Some(b'\n'))
        .build(&args.pattern)
        .map_err(|e| bad_pattern("regex", &args.pattern, &e))?;
    let content = args.mode == Mode::Content;
    let mut searcher = SearcherBuilder::new()
        .line_number(true)
        .binary_detection(BinaryDetection::quit(0))
        // A file without line breaks must not be read into memory whole.
        .heap_limit(Some(MAX_LINE_BUFFER))
        .before_context(if content { args.before } else { 0 })
        .after_context(if content { args.after } else { 0 })
        .build();

    let mut walk = walker(&args.root, args.hidden.clone());
    if let Some(glob) = &args.glob {
        let mut ob = OverrideBuilder::new(&args.root);
        // Like `rg --glob`: a pattern without a slash matches file names anywhere.
        ob.add(glob)
            .map_err(|e| bad_pattern("grep_glob", glob, &e))?;
        let overrides = ob.build().map_err(|e| bad_pattern("grep_glob", glob, &e))?;
        walk.overrides(overrides);
    }
    let mut files: Vec<PathBuf> = walk
        .build()
        .flatten()
        .filter(|e| e.file_type().is_some_and(|t| t.is_file()))
        .map(ignore::DirEntry::into_path)
        .collect();
    files.sort();

    let mut entries: Vec<String> = Vec::new();
    let mut matched_files = 0usize;
    for path in &files {
        let mut sink = Collect::new(args.mode, args.line_numbers, path);
        if searcher.search_path(&matcher, path, &mut sink).is_err() || sink.matches == 0 {
            continue;
        }
        matched_files += 1;
        match args.mode {
            Mode::FilesWithMatches => entries.push(path.display().to_string()),
            Mode::Count => entries.push(format!("{}:{}", path.display(), sink.matches)),
            Mode::Content => entries.extend(sink.lines),
        }
    }
    let mode = match args.mode {
        Mode::FilesWithMatches => "files_with_matches",
        Mode::Count => "count",
        Mode::Content => "content",
    };
    let typed = |entries: &[String], text: &str| {
        let names = args.mode == Mode::FilesWithMatches;
        super::typed::GrepResult {
            mode: mode.to_string(),
            filenames: if names { entries.to_vec() } else { Vec::new() },
            num_files: if names { entries.len() } else { matched_files },
            content: (!names).then(|| text.to_string()),
            num_lines: (!names).then_some(entries.len()),
            total_files: matched_files,
        }
    };
    if entries.is_empty() {
        return Ok(ToolOutput::ok(GrepNone {}).with_typed(typed(&[], "")));
    }
    let total = entries.len();
    if let Some(limit) = args.head_limit {
        entries.truncate(limit);
    }
    let shown = entries.len();
    let header = args.mode == Mode::FilesWithMatches && shown == total;
    let text = truncate_middle(&entries.join("\n"), MAX_OUTPUT_CHARS);
    let typed = typed(&entries, &super::typed::clip_text(&text));
    Ok(ToolOutput::ok(GrepResults {
        files: if header { matched_files } else { 0 },
        entries: text,
        limited: shown < total,
        shown,
        total,
    })
    .with_typed(typed))
}

fn bad_pattern(kind: &str, pattern: &str, e: &dyn std::fmt::Display) -> ToolOutput {
    ToolOutput::error(BadPattern {
        tool: "Grep".into(),
        kind: kind.into(),
        pattern: format!("{pattern:?}"),
        error: e.to_string(),
    })
}

/// Collects one file's results in the shape of its output mode.
struct Collect<'p> {
    mode: Mode,
    line_numbers: bool,
    path: &'p Path,
    matches: u64,
    lines: Vec<String>,
    /// Whether a match or context line came before, to place `--` breaks.
    started: bool,
}

impl<'p> Collect<'p> {
    fn new(mode: Mode, line_numbers: bool, path: &'p Path) -> Self {
        Collect {
            mode,
            line_numbers,
            path,
            matches: 0,
            lines: Vec::new(),
            started: false,
        }
    }

    fn push(&mut self, sep: char, line_number: Option<u64>, bytes: &[u8]) {
        let text = String::from_utf8_lossy(bytes);
        let text = text.strip_suffix('\n').unwrap_or(&text);
        let text = text.strip_suffix('\r').unwrap_or(text);
        let mut line = format!("{}{sep}", self.path.display());
        if let (true, Some(n)) = (self.line_numbers, line_number) {
            let _ = write!(line, "{n}{sep}");
        }
        line.push_str(text);
        self.lines.push(line);
        self.started = true;
    }
}

impl Sink for Collect<'_> {
    type Error = std::io::Error;

    fn matched(&mut self, _: &Searcher, m: &SinkMatch<'_>) -> Result<bool, Self::Error> {
        self.matches += 1;
        match self.mode {
            // One match decides the file; stop reading it.
            Mode::FilesWithMatches => Ok(false),
            Mode::Count => Ok(true),
            Mode::Content => {
                let first = m.line_number();
                for (k, line) in m.lines().enumerate() {
                    self.push(':', first.map(|n| n + k as u64), line);
                }
                Ok(true)
            }
        }
    }

    fn context(&mut self, _: &Searcher, c: &SinkContext<'_>) -> Result<bool, Self::Error> {
        if matches!(c.kind(), SinkContextKind::Before | SinkContextKind::After) {
            self.push('-', c.line_number(), c.bytes());
        }
        Ok(true)
    }

    fn context_break(&mut self, _: &Searcher) -> Result<bool, Self::Error> {
        if self.started {
            self.lines.push("--".to_string());
        }
        Ok(true)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fixture() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::create_dir_all(d.join("src")).unwrap();
        std::fs::write(
            d.join("src/a.rs"),
            "fn main() {\n    todo!();\n}\n// TODO later\n",
        )
        .unwrap();
        std::fs::write(
            d.join("src/b.py"),
            "x = 1\n# todo\ny = 2\nz = 3\nw = 4\n# todo again\n",
        )
        .unwrap();
        std::fs::write(d.join("notes.txt"), "nothing here\n").unwrap();
        std::fs::write(d.join(".gitignore"), "ignored/\n").unwrap();
        std::fs::create_dir_all(d.join("ignored")).unwrap();
        std::fs::write(d.join("ignored/x.rs"), "todo\n").unwrap();
        std::fs::write(d.join("bin.dat"), b"todo\0\x01\x02").unwrap();
        dir
    }

    async fn run(dir: &Path, input: Value) -> ToolOutput {
        GrepTool.call(input, &ToolContext::new(dir)).await
    }

    fn p(dir: &Path, rel: &str) -> String {
        dir.join(rel).display().to_string()
    }

    #[tokio::test]
    async fn files_with_matches_is_the_default() {
        let dir = fixture();
        let d = dir.path();
        let out = run(d, json!({"pattern": "todo"})).await;
        assert!(!out.is_error);
        assert_eq!(
            out.text(),
            format!("Found 2 files\n{}\n{}", p(d, "src/a.rs"), p(d, "src/b.py"))
        );
        let out = run(d, json!({"pattern": "TODO", "-i": false})).await;
        assert_eq!(out.text(), format!("Found 1 file\n{}", p(d, "src/a.rs")));
        let out = run(d, json!({"pattern": "nomatch_xyz"})).await;
        assert_eq!(out.text(), "No matches found");
    }

    #[tokio::test]
    async fn count_mode_counts_matching_lines() {
        let dir = fixture();
        let d = dir.path();
        let out = run(
            d,
            json!({"pattern": "todo", "output_mode": "count", "-i": true}),
        )
        .await;
        assert_eq!(
            out.text(),
            format!("{}:2\n{}:2", p(d, "src/a.rs"), p(d, "src/b.py"))
        );
    }

    #[tokio::test]
    async fn content_mode_with_line_numbers_and_glob() {
        let dir = fixture();
        let d = dir.path();
        let out = run(
            d,
            json!({"pattern": "todo", "output_mode": "content", "glob": "*.py"}),
        )
        .await;
        let f = p(d, "src/b.py");
        assert_eq!(out.text(), format!("{f}:2:# todo\n{f}:6:# todo again"));
        let out = run(
            d,
            json!({"pattern": "todo", "output_mode": "content", "glob": "*.py", "-n": false}),
        )
        .await;
        assert_eq!(out.text(), format!("{f}:# todo\n{f}:# todo again"));
    }

    #[tokio::test]
    async fn context_flags() {
        let dir = fixture();
        let d = dir.path();
        let f = p(d, "src/b.py");
        let base = json!({"pattern": "todo", "output_mode": "content", "path": "src/b.py"});
        let with = |k: &str, n: u64| {
            let mut v = base.clone();
            v[k] = json!(n);
            v
        };
        let out = run(d, with("-A", 1)).await;
        assert_eq!(
            out.text(),
            format!("{f}:2:# todo\n{f}-3-y = 2\n--\n{f}:6:# todo again")
        );
        let out = run(d, with("-B", 1)).await;
        assert_eq!(
            out.text(),
            format!("{f}-1-x = 1\n{f}:2:# todo\n--\n{f}-5-w = 4\n{f}:6:# todo again")
        );
        let out = run(d, with("-C", 2)).await;
        assert_eq!(
            out.text(),
            format!(
                "{f}-1-x = 1\n{f}:2:# todo\n{f}-3-y = 2\n{f}-4-z = 3\n{f}-5-w = 4\n{f}:6:# todo again"
            )
        );
    }

    #[tokio::test]
    async fn head_limit_cuts_results_with_a_note() {
        let dir = fixture();
        let d = dir.path();
        let out = run(
            d,
            json!({"pattern": "o", "output_mode": "content", "head_limit": 2}),
        )
        .await;
        let text = out.text();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[2].starts_with("(Showing the first 2 of "));
    }

    #[tokio::test]
    async fn bad_regex_and_bad_mode_are_errors() {
        let dir = fixture();
        let out = run(dir.path(), json!({"pattern": "fn ("})).await;
        assert!(
            out.is_error && out.text().contains("invalid regular expression"),
            "{}",
            out.text()
        );
        let out = run(dir.path(), json!({"pattern": "x", "output_mode": "lines"})).await;
        assert!(out.is_error && out.text().contains("`output_mode`"));
        let out = run(dir.path(), json!({"pattern": "x", "-A": "two"})).await;
        assert!(out.is_error && out.text().contains("`-A`"));
        let out = run(dir.path(), json!({"pattern": "x", "path": "missing"})).await;
        assert!(out.is_error && out.text().contains("does not exist"));
    }
}
