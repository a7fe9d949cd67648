//! The Read tool: a text file's lines, numbered like `cat -n`, from an
//! optional 1-based `offset` for up to `limit` lines. It streams the file, so
//! a window into a large file costs only that window; reading a large file
//! whole is refused with a hint to page. Binary files and directories are
//! clear errors.

use std::io::{BufRead as _, BufReader};
use std::path::Path;

use futures_util::FutureExt as _;
use futures_util::future::BoxFuture;
use serde_json::Value;

use super::files::{self, Refusal};
use super::outcome::{
    BinaryFile, FileAction, FileIo, FileNotFound, IsDirectory, ReadEmpty, ReadLine, ReadLines,
    ReadMore, ReadPastEnd, ReadWholeTooLarge, ToolFailed,
};
use super::{Input, Tool, ToolContext, ToolOutput, outcome::BadInput};

/// Lines returned when the call gives no `limit`.
pub const DEFAULT_LIMIT: u64 = 2000;
/// Lines longer than this many characters are cut.
pub const MAX_LINE_CHARS: usize = 2000;
/// A file larger than this must be read with `offset`/`limit`.
pub const MAX_WHOLE_FILE_BYTES: u64 = 256 * 1024;
/// Bytes of one line that are kept; the rest of a longer line is skipped
/// (it would be cut at `MAX_LINE_CHARS` anyway), so a file with no line
/// breaks costs bounded memory.
const MAX_LINE_BYTES: usize = MAX_LINE_CHARS * 4 + 4;
/// Bytes inspected for a NUL to tell binary from text.
const SNIFF_BYTES: usize = 8192;

#[derive(Debug, Clone, Copy, Default)]
pub struct ReadTool;

impl Tool for ReadTool {
    fn name(&self) -> &str {
        "Read"
    }

    fn read_only(&self) -> bool {
        true
    }

    fn call<'a>(&'a self, input: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        async move {
            let args = match Args::parse(&input) {
                Ok(a) => a,
                Err(e) => return ToolOutput::error(e),
            };
            let path = ctx.resolve(&args.file_path);
            match tokio::task::spawn_blocking(move || read(&path, &args)).await {
                Ok(Ok(out)) | Ok(Err(out)) => out,
                Err(e) => ToolOutput::error(ToolFailed {
                    tool: "Read".into(),
                    error: e.to_string(),
                }),
            }
        }
        .boxed()
    }
}

struct Args {
    file_path: String,
    offset: Option<u64>,
    limit: Option<u64>,
}

impl Args {
    fn parse(input: &Value) -> Result<Args, BadInput> {
        let i = Input(input);
        Ok(Args {
            file_path: i.str("file_path")?.to_string(),
            offset: i.opt_u64("offset")?,
            limit: i.opt_u64("limit")?,
        })
    }
}

fn read(path: &Path, args: &Args) -> Result<ToolOutput, ToolOutput> {
    if super::notebook::is_notebook(path) && path.is_file() {
        let view = super::notebook::view(path)?;
        return Ok(ToolOutput::ok(view));
    }
    let shown = path.display().to_string();
    let (file, meta) = match files::open_read(path) {
        Ok(opened) => opened,
        Err(Refusal::NotFound) => {
            return Err(ToolOutput::error(FileNotFound { path: shown }));
        }
        Err(Refusal::Directory) => {
            return Err(ToolOutput::error(IsDirectory {
                tool: "Read".into(),
                path: shown,
            }));
        }
        Err(Refusal::NotRegular(kind)) => return Err(files::not_regular("Read", path, kind)),
        Err(Refusal::TooLarge(size, max)) => {
            return Err(files::too_large("Read", path, size, max));
        }
        Err(Refusal::Io(e)) => return Err(io_error(&shown, &e)),
    };
    if meta.len() > MAX_WHOLE_FILE_BYTES && args.offset.is_none() && args.limit.is_none() {
        return Err(ToolOutput::error(ReadWholeTooLarge {
            path: shown,
            size_kib: meta.len() / 1024,
            max_kib: MAX_WHOLE_FILE_BYTES / 1024,
        }));
    }
    let io_err = |e: std::io::Error| io_error(&shown, &e);
    let mut reader = BufReader::new(file);

    let sniff = reader.fill_buf().map_err(io_err)?;
    if sniff.is_empty() {
        return Ok(ToolOutput::ok(ReadEmpty { path: shown }));
    }
    if sniff[..sniff.len().min(SNIFF_BYTES)].contains(&0) {
        return Err(ToolOutput::error(BinaryFile { path: shown }));
    }

    let first = args.offset.unwrap_or(1).max(1);
    let limit = args.limit.filter(|&n| n > 0).unwrap_or(DEFAULT_LIMIT);
    let mut lines = Vec::new();
    let mut line_no: u64 = 0;
    let mut shown_lines: u64 = 0;
    let mut more = false;
    let mut buf = Vec::new();
    // The lines shown, as in the file, for the typed result.
    let mut content = String::new();
    loop {
        buf.clear();
        // Lines past the window are only counted; stop at the first one.
        let n = read_line_capped(&mut reader, &mut buf, MAX_LINE_BYTES).map_err(io_err)?;
        if n == 0 {
            break;
        }
        line_no += 1;
        if line_no < first {
            continue;
        }
        if shown_lines == limit {
            more = true;
            break;
        }
        shown_lines += 1;
        let text = String::from_utf8_lossy(&buf);
        content.push_str(&text);
        let text = text.strip_suffix('\n').unwrap_or(&text);
        let text = text.strip_suffix('\r').unwrap_or(text);
        let cut = text.chars().count() > MAX_LINE_CHARS;
        lines.push(ReadLine {
            number: format!("{line_no:>6}"),
            text: if cut {
                text.chars().take(MAX_LINE_CHARS).collect()
            } else {
                text.to_string()
            },
            cut,
        });
    }
    if shown_lines == 0 {
        return Ok(ToolOutput::ok(ReadPastEnd {
            path: shown,
            lines: line_no,
            offset: first,
        }));
    }
    let more = more.then(|| ReadMore {
        last: first + shown_lines - 1,
        next: first + shown_lines,
    });
    let typed = super::typed::ReadText {
        kind: "text",
        file: super::typed::ReadFile {
            file_path: shown,
            content,
            num_lines: shown_lines,
            start_line: first,
            total_lines: if more.is_some() {
                line_no
            } else {
                line_no.max(first + shown_lines - 1)
            },
        },
    };
    Ok(ToolOutput::ok(ReadLines { lines, more }).with_typed(typed))
}

fn io_error(path: &str, e: &std::io::Error) -> ToolOutput {
    ToolOutput::error(FileIo {
        action: FileAction::Read,
        path: path.to_string(),
        error: e.to_string(),
    })
}

/// Reads one line (through its `\n`) into `buf`, keeping at most `cap`
/// bytes of it and skipping the rest. Returns the bytes consumed, 0 at the
/// end of the file.
fn read_line_capped(
    reader: &mut impl std::io::BufRead,
    buf: &mut Vec<u8>,
    cap: usize,
) -> std::io::Result<usize> {
    let mut consumed = 0;
    loop {
        let chunk = reader.fill_buf()?;
        if chunk.is_empty() {
            return Ok(consumed);
        }
        let (take, done) = match memchr::memchr(b'\n', chunk) {
            Some(i) => (i + 1, true),
            None => (chunk.len(), false),
        };
        let room = cap.saturating_sub(buf.len());
        buf.extend_from_slice(&chunk[..take.min(room)]);
        reader.consume(take);
        consumed += take;
        if done {
            return Ok(consumed);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    async fn read_in(dir: &Path, input: Value) -> ToolOutput {
        ReadTool.call(input, &ToolContext::new(dir)).await
    }

    #[tokio::test]
    async fn numbers_lines_like_cat_n() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "alpha\nbeta\r\ngamma").unwrap();
        let out = read_in(dir.path(), json!({"file_path": "a.txt"})).await;
        assert!(!out.is_error);
        assert_eq!(out.text(), "     1\talpha\n     2\tbeta\n     3\tgamma\n");
    }

    #[tokio::test]
    async fn offset_and_limit_select_a_window() {
        let dir = tempfile::tempdir().unwrap();
        let text: String = (1..=10).map(|i| format!("line{i}\n")).collect();
        std::fs::write(dir.path().join("a.txt"), text).unwrap();
        let out = read_in(
            dir.path(),
            json!({"file_path": "a.txt", "offset": 4, "limit": 2}),
        )
        .await;
        assert!(!out.is_error);
        assert_eq!(
            out.text(),
            "     4\tline4\n     5\tline5\n(More lines follow line 5; read them with offset 6.)\n"
        );
        let out = read_in(dir.path(), json!({"file_path": "a.txt", "offset": 9})).await;
        assert_eq!(out.text(), "     9\tline9\n    10\tline10\n");
        let out = read_in(dir.path(), json!({"file_path": "a.txt", "offset": 50})).await;
        assert!(!out.is_error && out.text().contains("offset 50 is past the end"));
    }

    #[tokio::test]
    async fn default_limit_is_2000_lines() {
        let dir = tempfile::tempdir().unwrap();
        let text: String = (1..=2500).map(|i| format!("{i}\n")).collect();
        std::fs::write(dir.path().join("a.txt"), text).unwrap();
        let out = read_in(dir.path(), json!({"file_path": "a.txt"})).await;
        let numbered = out.text().lines().filter(|l| l.contains('\t')).count();
        assert_eq!(numbered, 2000);
        assert!(out.text().contains("  2000\t2000\n"));
        assert!(out.text().ends_with("read them with offset 2001.)\n"));
    }

    #[tokio::test]
    async fn long_lines_are_truncated() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "é".repeat(3000)).unwrap();
        let out = read_in(dir.path(), json!({"file_path": "a.txt"})).await;
        assert_eq!(
            out.text(),
            format!("     1\t{} [line truncated]\n", "é".repeat(2000))
        );
    }

    #[tokio::test]
    async fn large_files_need_offset_or_limit() {
        let dir = tempfile::tempdir().unwrap();
        let text = "x".repeat(99) + "\n";
        std::fs::write(dir.path().join("big.txt"), text.repeat(3000)).unwrap();
        let out = read_in(dir.path(), json!({"file_path": "big.txt"})).await;
        assert!(out.is_error);
        assert!(
            out.text().contains("`offset` and `limit`"),
            "{}",
            out.text()
        );
        let out = read_in(
            dir.path(),
            json!({"file_path": "big.txt", "offset": 2999, "limit": 5}),
        )
        .await;
        assert!(!out.is_error);
        assert_eq!(out.text().lines().count(), 2);
    }

    #[tokio::test]
    async fn empty_binary_directory_and_missing_are_reported() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("empty"), "").unwrap();
        std::fs::write(dir.path().join("bin"), b"ab\0cd").unwrap();
        let out = read_in(dir.path(), json!({"file_path": "empty"})).await;
        assert!(!out.is_error && out.text().contains("exists but is empty"));
        let out = read_in(dir.path(), json!({"file_path": "bin"})).await;
        assert!(out.is_error && out.text().contains("binary file"));
        let out = read_in(dir.path(), json!({"file_path": "."})).await;
        assert!(out.is_error && out.text().contains("is a directory"));
        let missing = dir.path().join("nope.txt");
        let out = read_in(dir.path(), json!({"file_path": missing.to_str().unwrap()})).await;
        assert!(out.is_error);
        assert_eq!(
            out.text(),
            format!("File does not exist: {}", missing.display())
        );
    }

    #[tokio::test]
    async fn wrong_types_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let out = read_in(dir.path(), json!({"file_path": "a", "offset": "x"})).await;
        assert!(out.is_error && out.text().contains("`offset`"));
        let out = read_in(dir.path(), json!({"file_path": ["a"]})).await;
        assert!(out.is_error && out.text().contains("`file_path` must be a string"));
    }
}
