//! The Write tool: writes a whole file, creating missing parent folders and
//! replacing any existing content, and reports what it wrote.

use futures_util::FutureExt as _;
use futures_util::future::BoxFuture;
use serde_json::Value;

use super::files;
use super::outcome::{FileAction, FileIo, IsDirectory, ToolFailed, WriteDone};
use super::{Input, Tool, ToolContext, ToolOutput};

/// The largest file whose content before a Write is kept for the typed
/// result (`originalFile`).
const ORIGINAL_MAX_BYTES: u64 = 1 << 20;

#[derive(Debug, Clone, Copy, Default)]
pub struct WriteTool;

impl Tool for WriteTool {
    fn name(&self) -> &str {
        "Write"
    }

    fn read_only(&self) -> bool {
        false
    }

    fn call<'a>(&'a self, input: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        async move {
            let i = Input(&input);
            let (file_path, content) = match (i.str("file_path"), i.str("content")) {
                (Ok(p), Ok(c)) => (p, c),
                (Err(e), _) | (_, Err(e)) => return ToolOutput::error(e),
            };
            let path = ctx.resolve(file_path);
            if path.is_dir() {
                return ToolOutput::error(IsDirectory {
                    tool: "Write".into(),
                    path: path.display().to_string(),
                });
            }
            let existed = path.exists();
            // The file before, for the typed result (bounded: a larger one
            // is not kept).
            let original = if existed {
                let path = path.clone();
                tokio::task::spawn_blocking(move || files::read_capped(&path, ORIGINAL_MAX_BYTES))
                    .await
                    .ok()
                    .and_then(Result::ok)
                    .and_then(|b| String::from_utf8(b).ok())
            } else {
                None
            };
            if let Some(parent) = path.parent()
                && let Err(e) = tokio::fs::create_dir_all(parent).await
            {
                return ToolOutput::error(FileIo {
                    action: FileAction::CreateFolder,
                    path: parent.display().to_string(),
                    error: e.to_string(),
                });
            }
            let written = {
                let path = path.clone();
                let content = content.to_string();
                tokio::task::spawn_blocking(move || files::write_whole(&path, content.as_bytes()))
                    .await
            };
            match written {
                Ok(Ok(())) => {}
                Ok(Err(refusal)) => {
                    return files::refused("Write", FileAction::Write, &path, refusal);
                }
                Err(e) => {
                    return ToolOutput::error(ToolFailed {
                        tool: "Write".into(),
                        error: e.to_string(),
                    });
                }
            }
            let typed = super::typed::WriteResult {
                kind: if existed { "update" } else { "create" },
                file_path: path.display().to_string(),
                content: content.to_string(),
                structured_patch: original
                    .as_deref()
                    .map(|o| super::typed::patch(o, content))
                    .unwrap_or_default(),
                original_file: original,
                user_modified: false,
            };
            ToolOutput::ok(WriteDone {
                path: path.display().to_string(),
                existed,
                bytes: content.len(),
                lines: content.lines().count(),
            })
            .with_typed(typed)
        }
        .boxed()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn creates_parent_folders_and_reports_size() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = ToolContext::new(dir.path());
        let out = WriteTool
            .call(
                json!({"file_path": "a/b/c.txt", "content": "one\ntwo\n"}),
                &ctx,
            )
            .await;
        assert!(!out.is_error, "{}", out.text());
        let path = dir.path().join("a/b/c.txt");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "one\ntwo\n");
        assert_eq!(
            out.text(),
            format!("Created {} (8 bytes, 2 lines)", path.display())
        );
    }

    #[tokio::test]
    async fn overwrites_existing_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.txt");
        std::fs::write(&path, "old content that is longer").unwrap();
        let ctx = ToolContext::new(dir.path());
        let out = WriteTool
            .call(
                json!({"file_path": path.to_str().unwrap(), "content": "new"}),
                &ctx,
            )
            .await;
        assert!(out.text().starts_with("Overwrote"));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
    }

    #[tokio::test]
    async fn bad_input_and_directories_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = ToolContext::new(dir.path());
        let out = WriteTool
            .call(json!({"file_path": "x", "content": 3}), &ctx)
            .await;
        assert!(out.is_error && out.text().contains("`content` must be a string"));
        let out = WriteTool
            .call(json!({"file_path": ".", "content": ""}), &ctx)
            .await;
        assert!(out.is_error && out.text().contains("is a directory"));
        assert!(!dir.path().join("x").exists());
    }
}
