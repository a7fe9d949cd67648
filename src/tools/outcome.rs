//! What the built-in tools report, as typed template contexts: one struct
//! per template under `agents/templates/`. A tool returns one of these in
//! its [`ToolOutput`](super::ToolOutput); the runtime renders it, so every
//! word the model reads from a tool comes from a template a team can
//! override. Data a tool passes on (file lines, command output, paths) are
//! fields; this file holds no text the model reads.

use serde::Serialize;

use crate::contexts;

/// Output kept at its head and tail with a count of what was cut between
/// them (the `clipped` partial renders it).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Clip {
    pub head: String,
    /// Characters cut between head and tail; 0: nothing was cut, `tail` is
    /// empty.
    pub cut: u64,
    /// The count is an estimate (the middle was never stored).
    pub about: bool,
    pub tail: String,
}

impl Clip {
    /// `text` whole.
    pub fn whole(text: String) -> Clip {
        Clip {
            head: text,
            ..Clip::default()
        }
    }

    /// Whether there is no text at all.
    pub fn is_empty(&self) -> bool {
        self.head.is_empty() && self.tail.is_empty()
    }

    /// Trailing line breaks removed from the end of the text.
    pub fn trim_end_newlines(&mut self) {
        let last = if self.cut == 0 {
            &mut self.head
        } else {
            &mut self.tail
        };
        let keep = last.trim_end_matches('\n').len();
        last.truncate(keep);
    }
}

/// One line a Read shows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReadLine {
    /// The line number, right-aligned in six columns like `cat -n`.
    pub number: String,
    pub text: String,
    /// The line was longer than Read shows and was cut.
    pub cut: bool,
}

/// Where a Read that stopped at its limit goes on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReadMore {
    pub last: u64,
    pub next: u64,
}

/// What a file operation was doing when the system refused it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FileAction {
    Read,
    Write,
    CreateFolder,
}

/// How a Bash command that did not succeed ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "how", rename_all = "snake_case")]
pub enum BashEnding {
    Exit { code: i32 },
    Signal { signal: i32 },
    Timeout { ms: u64 },
    Cancelled,
}

/// The step of starting Bash that failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BashStep {
    Pipe,
    Start,
    Wait,
}

fn sample_path() -> String {
    "/repo/src/main.rs".into()
}

/// What is wrong with a notebook or a NotebookEdit call (the `reason` of
/// `error_notebook`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "problem", rename_all = "snake_case")]
pub enum NotebookProblem {
    NotFound,
    Directory,
    Io { error: String },
    InvalidJson { error: String },
    NoCells,
    NoSuchCell { id: String, ids: String },
    BadCellType { found: String },
    InsertNeedsType,
    DeleteNeedsId,
    ReplaceNeedsId,
    CellNotObject { id: String },
    NotNotebookFile,
    Serialize { error: String },
}

/// One output of a notebook cell as Read shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CellOutput {
    pub text: Clip,
    /// The MIME types of an output with no text form, comma-separated;
    /// empty when it has text.
    pub kinds: String,
}

/// What a NotebookEdit did to a cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CellAction {
    Replaced,
    Inserted,
    Deleted,
}

/// Why WebFetch could not read a page (the `reason` of `error_web_fetch`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "problem", rename_all = "snake_case")]
pub enum FetchProblem {
    InvalidUrl {
        error: String,
    },
    HttpsSwitch,
    Scheme {
        scheme: String,
    },
    Credentials,
    NoHost,
    Client {
        error: String,
    },
    Network {
        error: String,
    },
    Timeout {
        ms: u64,
    },
    Cancelled,
    /// The small model's request failed (worded by `provider_problem`).
    Reader {
        provider: crate::provider::ProviderProblem,
    },
    /// A template of the small model's request could not be rendered.
    Template {
        name: String,
    },
    NoLocation {
        status: String,
    },
    /// `location` is quoted.
    BadLocation {
        status: String,
        location: String,
        error: String,
    },
    Status {
        status: String,
    },
    TooLarge {
        max: u64,
    },
    Redirects {
        max: usize,
    },
    Html {
        error: String,
    },
    NotText {
        mime: String,
    },
}

/// One result: a page's title and address, and a snippet when the
/// backend gives one.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SearchHit {
    pub title: String,
    pub url: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snippet: Option<String>,
}

/// Why WebSearch could not search (the `reason` of `error_web_search`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "problem", rename_all = "snake_case")]
pub enum SearchProblem {
    ShortQuery,
    /// `field` is not a list of domain names.
    DomainList {
        field: String,
    },
    BothLists,
    /// `web_search.backend = "anthropic"` on another provider.
    AnthropicOnly,
    /// Neither the Anthropic provider nor `web_search.searxng_url`.
    NoBackend,
    Timeout {
        ms: u64,
    },
    Cancelled,
    /// The provider's search request failed (worded by
    /// `provider_problem`).
    Provider {
        provider: crate::provider::ProviderProblem,
    },
    /// A template of the search request could not be rendered.
    Template {
        name: String,
    },
    SearxngUrl {
        error: String,
    },
    Network {
        error: String,
    },
    Status {
        status: String,
    },
    TooLarge {
        max: u64,
    },
    NotJson {
        error: String,
    },
}

/// One piece of what an MCP server returned, as the model reads it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum McpPart {
    Text {
        text: String,
    },
    /// An image that is not passed on (type or size); `uri` for an
    /// embedded resource.
    Image {
        uri: Option<String>,
        mime: String,
        bytes: usize,
    },
    Audio {
        mime: String,
    },
    /// Binary resource content, not passed on.
    Binary {
        uri: String,
        mime: String,
        bytes: usize,
    },
    Link {
        name: String,
        uri: String,
        mime: String,
        description: String,
    },
}

contexts! {
    /// A tool's input field has the wrong type or is missing. `expected`
    /// and `found` are JSON kinds (`string`, `integer`, `boolean`,
    /// `number`, `array`, `object`, `null`) or a number's text.
    "error_tool_input" => pub struct BadInput {
        pub field: String = "offset".into(),
        pub missing: bool = false,
        pub expected: String = "integer".into(),
        pub found: String = "string".into(),
    }

    /// The tool's work could not finish (its thread failed).
    "error_tool_failed" => pub struct ToolFailed {
        pub tool: String = "Read".into(),
        pub error: String = "task panicked".into(),
    }

    /// A file the call names does not exist.
    "error_file_not_found" => pub struct FileNotFound {
        pub path: String = sample_path(),
    }

    /// A file the call names is a directory.
    "error_is_directory" => pub struct IsDirectory {
        pub tool: String = "Read".into(),
        pub path: String = sample_path(),
    }

    /// The system refused a file operation.
    "error_file_io" => pub struct FileIo {
        pub action: FileAction = FileAction::CreateFolder,
        pub path: String = sample_path(),
        pub error: String = "Permission denied (os error 13)".into(),
    }

    /// A path that is a FIFO, socket or device.
    "error_not_regular_file" => pub struct NotRegularFile {
        pub tool: String = "Read".into(),
        pub path: String = sample_path(),
        /// What it is instead: `directory`, `fifo`, `socket`,
        /// `char_device`, `block_device` or `other`.
        pub kind: String = "fifo".into(),
    }

    /// A file larger than the tool handles.
    "error_file_too_large" => pub struct FileTooLarge {
        pub tool: String = "Edit".into(),
        pub path: String = sample_path(),
        pub size: u64 = 20 << 20,
        pub max: u64 = 10 << 20,
        pub size_kib: u64 = 20 << 10,
        pub max_kib: u64 = 10 << 10,
    }

    /// A file that is not UTF-8 text.
    "error_not_utf8" => pub struct NotUtf8 {
        pub tool: String = "Edit".into(),
        pub path: String = sample_path(),
    }

    /// A file too large to read without `offset`/`limit`.
    "error_read_whole_too_large" => pub struct ReadWholeTooLarge {
        pub path: String = sample_path(),
        pub size_kib: u64 = 300,
        pub max_kib: u64 = 256,
    }

    /// A file with NUL bytes near its start.
    "error_binary_file" => pub struct BinaryFile {
        pub path: String = sample_path(),
    }

    /// Read's lines (verbatim: the lines end with their line breaks).
    "read_lines" verbatim => pub struct ReadLines {
        pub lines: Vec<ReadLine> = vec![
            ReadLine { number: "     1".into(), text: "fn main() {".into(), cut: false },
            ReadLine { number: "     2".into(), text: "    x".into(), cut: true },
        ],
        pub more: Option<ReadMore> = Some(ReadMore { last: 2, next: 3 }),
    }

    /// Read of an empty file.
    "read_empty" => pub struct ReadEmpty {
        pub path: String = sample_path(),
    }

    /// Read with an offset past the last line.
    "read_past_end" => pub struct ReadPastEnd {
        pub path: String = sample_path(),
        pub lines: u64 = 10,
        pub offset: u64 = 50,
    }

    /// Edit with an empty `old_string`.
    "error_edit_empty" => pub struct EditEmpty {}

    /// Edit whose `old_string` and `new_string` are equal.
    "error_edit_identical" => pub struct EditIdentical {}

    /// Edit whose `old_string` is not in the file.
    "error_edit_not_found" => pub struct EditNotFound {
        pub path: String = sample_path(),
    }

    /// Edit whose `old_string` occurs more than once.
    "error_edit_ambiguous" => pub struct EditAmbiguous {
        pub path: String = sample_path(),
        pub count: usize = 3,
    }

    /// Edit done.
    "edit_done" => pub struct EditDone {
        pub path: String = sample_path(),
        pub count: usize = 2,
    }

    /// Write done.
    "write_done" => pub struct WriteDone {
        pub path: String = sample_path(),
        pub existed: bool = true,
        pub bytes: usize = 120,
        pub lines: usize = 4,
    }

    /// A search root that is not a directory (Glob).
    "error_not_a_directory" => pub struct NotADirectory {
        pub path: String = sample_path(),
    }

    /// A search root that does not exist (Grep).
    "error_path_not_found" => pub struct PathNotFound {
        pub path: String = sample_path(),
    }

    /// A pattern that does not compile. `pattern` is quoted.
    "error_bad_pattern" => pub struct BadPattern {
        pub tool: String = "Grep".into(),
        /// `glob` (Glob's pattern), `grep_glob` (Grep's `glob`) or `regex`.
        pub kind: String = "regex".into(),
        pub pattern: String = "\"a(\"".into(),
        pub error: String = "unclosed group".into(),
    }

    /// Grep's `output_mode` is not one it knows. `found` is quoted.
    "error_grep_output_mode" => pub struct GrepOutputMode {
        pub found: String = "\"lines\"".into(),
    }

    /// Glob found nothing.
    "glob_none" => pub struct GlobNone {}

    /// Glob's matches, newest first, one per line (verbatim).
    "glob_files" verbatim => pub struct GlobFiles {
        pub files: String = "/repo/a.rs\n/repo/b.rs".into(),
        /// More matched than are shown.
        pub more: bool = true,
        pub shown: usize = 2,
        pub total: usize = 5,
    }

    /// Grep found nothing.
    "grep_none" => pub struct GrepNone {}

    /// Grep's results (verbatim).
    "grep_results" verbatim => pub struct GrepResults {
        /// Files that matched, for the header in files_with_matches mode
        /// when every result is shown; 0: no header.
        pub files: usize = 2,
        pub entries: Clip = Clip::whole("/repo/a.rs\n/repo/b.rs".into()),
        /// `head_limit` left results out.
        pub limited: bool = false,
        pub shown: usize = 2,
        pub total: usize = 2,
    }

    /// Output cut in its middle; a partial other templates include.
    "clipped" verbatim => pub struct Clipped {
        pub head: String = "first lines".into(),
        pub cut: u64 = 1200,
        pub about: bool = true,
        pub tail: String = "last lines".into(),
    }

    /// A Bash command that succeeded (verbatim).
    "bash_output" verbatim => pub struct BashOutput {
        pub output: Clip = Clip::whole("done".into()),
        /// Hosts the sandbox's proxy refused during the call.
        pub refused: Vec<String> = vec![],
        /// The command's `cd` left the allowed folders: the shell went
        /// back to this one.
        pub reset_to: Option<String> = None,
    }

    /// A Bash command that failed, timed out or was cancelled (verbatim).
    "bash_failed" verbatim => pub struct BashFailed {
        pub output: Clip = Clip::whole("oops".into()),
        pub ending: BashEnding = BashEnding::Exit { code: 3 },
        /// Hosts the sandbox's proxy refused during the call.
        pub refused: Vec<String> = vec!["blocked.example".into()],
        /// As in `BashOutput`.
        pub reset_to: Option<String> = Some("/repo".into()),
    }

    /// Bash could not run the command.
    "error_bash" => pub struct BashError {
        pub step: BashStep = BashStep::Start,
        pub error: String = "No such file or directory (os error 2)".into(),
    }

    /// The session's working directory is gone.
    "error_working_directory" => pub struct WorkingDirectoryGone {
        pub path: String = "/repo".into(),
    }

    /// A notebook that cannot be read or edited.
    "error_notebook" => pub struct NotebookError {
        pub path: String = "/repo/a.ipynb".into(),
        pub reason: NotebookProblem = NotebookProblem::NoSuchCell {
            id: "nope".into(),
            ids: "intro, calc".into(),
        },
    }

    /// NotebookEdit's `edit_mode` is not one it knows.
    "error_notebook_edit_mode" => pub struct NotebookEditMode {
        pub found: String = "append".into(),
    }

    /// NotebookEdit done.
    "notebook_edited" => pub struct NotebookEdited {
        pub path: String = "/repo/a.ipynb".into(),
        pub cell_id: String = "calc".into(),
        pub action: CellAction = CellAction::Replaced,
    }

    /// A page WebFetch could not read.
    "error_web_fetch" => pub struct FetchError {
        pub url: String = "https://example.com/".into(),
        pub reason: FetchProblem = FetchProblem::Status { status: "404 Not Found".into() },
    }

    /// WebSearch could not search.
    "error_web_search" => pub struct SearchError {
        /// Empty when the query itself was the problem.
        pub query: String = "rust 2024 edition".into(),
        pub reason: SearchProblem = SearchProblem::NoBackend,
    }

    /// WebSearch's results.
    "web_search_result" => pub struct SearchResult {
        pub query: String = "rust 2024 edition".into(),
        /// `[{"title", "url"}]` as JSON.
        pub links_json: String = r#"[{"title":"Rust 2024","url":"https://doc.rust-lang.org/edition-guide/rust-2024/"}]"#.into(),
        pub hits: Vec<SearchHit> = vec![SearchHit {
            title: "Rust 2024".into(),
            url: "https://doc.rust-lang.org/edition-guide/rust-2024/".into(),
            snippet: Some("The 2024 edition".into()),
        }],
        /// The backend's own answer; empty: none.
        pub text: String = "Rust 2024 shipped with Rust 1.85.".into(),
        /// Searches that failed, as the service named them.
        pub errors: Vec<String> = vec!["bing: timeout".into()],
    }

    /// A redirect to another host, not followed.
    "web_fetch_redirect" => pub struct FetchRedirect {
        pub url: String = "https://example.com/".into(),
        pub status: u16 = 301,
        pub location: String = "https://www.example.org/".into(),
    }

    /// The page as Markdown (no small model read it).
    "web_fetch_markdown" => pub struct FetchMarkdown {
        pub url: String = "https://example.com/".into(),
        pub markdown: Clip = Clip::whole("# Example".into()),
        pub cut: bool = true,
        pub max_chars: usize = 100_000,
    }

    /// The small model's answer about the page (verbatim).
    "web_fetch_answer" verbatim => pub struct FetchAnswer {
        pub answer: String = "The page says hello.".into(),
    }

    /// What an MCP server's tool returned (verbatim: the server's text).
    "mcp_result" verbatim => pub struct McpResult {
        pub parts: Vec<McpPart> = vec![
            McpPart::Text { text: "42 rows".into() },
            McpPart::Image { uri: None, mime: "image/tiff".into(), bytes: 900 },
            McpPart::Image { uri: Some("file:///a.bmp".into()), mime: "image/bmp".into(), bytes: 9 },
            McpPart::Audio { mime: "audio/wav".into() },
            McpPart::Binary { uri: "file:///a.bin".into(), mime: String::new(), bytes: 12 },
            McpPart::Link {
                name: "big.csv".into(),
                uri: "file:///big.csv".into(),
                mime: "text/csv".into(),
                description: "All rows".into(),
            },
        ],
    }

    /// A tool call cancelled while it waited for an MCP server.
    "error_call_cancelled" => pub struct CallCancelled {}

    /// An MCP resource that cannot be listed or read, or a server that
    /// offers none.
    "error_mcp_resource" => pub struct McpResourceError {
        /// No connected server of that name offers resources.
        pub unknown: bool = false,
        pub server: String = "docs".into(),
        /// The servers that do, comma-separated (when `unknown`).
        pub servers: String = String::new(),
        pub uri: Option<String> = Some("file:///guide.md".into()),
        pub error: Option<String> = Some("not found".into()),
    }

    /// The resources of the ready MCP servers.
    "mcp_resource_list" => pub struct McpResourceList {
        /// Each as the server lists it, plus `server`.
        pub resources: Vec<serde_json::Value> = vec![serde_json::json!({
            "server": "docs", "uri": "file:///guide.md", "name": "guide",
            "mimeType": "text/markdown", "description": "The guide"
        })],
        pub server: Option<String> = None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::templates::Context;
    use crate::tools::ToolOutput;

    /// MCP content is joined one piece a line, each worded as before
    /// templates (byte for byte).
    #[test]
    fn mcp_parts_render_one_a_line() {
        let text = ToolOutput::ok(McpResult::sample()).text();
        assert_eq!(
            text,
            "42 rows\n\
             [image: image/tiff, 900 bytes of base64, not shown: only PNG, JPEG, GIF and WebP up to 5 MB are]\n\
             [image resource file:///a.bmp: image/bmp, 9 bytes of base64, not shown: only PNG, JPEG, GIF and WebP up to 5 MB are]\n\
             [audio: audio/wav, not shown: audio is not passed to the model]\n\
             [resource file:///a.bin: no MIME type, 12 bytes of base64 binary content, not shown]\n\
             [resource link: big.csv <file:///big.csv> (text/csv): All rows]"
        );
        let empty = McpResult { parts: Vec::new() };
        assert_eq!(ToolOutput::ok(empty).text(), "");
    }
}
