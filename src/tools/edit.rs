//! The Edit tool: replaces an exact string in a file. The string must occur
//! exactly once unless `replace_all` is set, so an edit never lands in a
//! place the model did not mean.

use futures_util::FutureExt as _;
use futures_util::future::BoxFuture;
use serde_json::Value;

use super::files;
use super::outcome::{
    EditAmbiguous, EditDone, EditEmpty, EditIdentical, EditNotFound, FileAction, NotUtf8,
    ToolFailed,
};
use super::{Input, Tool, ToolContext, ToolOutput};

/// The largest file Edit reads.
pub const MAX_EDIT_BYTES: u64 = 16 * 1024 * 1024;

#[derive(Debug, Clone, Copy, Default)]
pub struct EditTool;

impl Tool for EditTool {
    fn name(&self) -> &str {
        "Edit"
    }

    fn read_only(&self) -> bool {
        false
    }

    fn call<'a>(&'a self, input: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        async move {
            match edit(&input, ctx).await {
                Ok(out) | Err(out) => out,
            }
        }
        .boxed()
    }
}

async fn edit(input: &Value, ctx: &ToolContext) -> Result<ToolOutput, ToolOutput> {
    let i = Input(input);
    let file_path = i.str("file_path").map_err(ToolOutput::error)?;
    let old = i.str("old_string").map_err(ToolOutput::error)?;
    let new = i.str("new_string").map_err(ToolOutput::error)?;
    let replace_all = i
        .opt_bool("replace_all")
        .map_err(ToolOutput::error)?
        .unwrap_or(false);
    if old.is_empty() {
        return Err(ToolOutput::error(EditEmpty {}));
    }
    if old == new {
        return Err(ToolOutput::error(EditIdentical {}));
    }
    let path = ctx.resolve(file_path);
    let shown = path.display().to_string();
    let read = {
        let path = path.clone();
        tokio::task::spawn_blocking(move || files::read_capped(&path, MAX_EDIT_BYTES)).await
    };
    let bytes = match read {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(refusal)) => return Err(files::refused("Edit", FileAction::Read, &path, refusal)),
        Err(e) => return Err(failed(&e)),
    };
    let text = String::from_utf8(bytes).map_err(|_| {
        ToolOutput::error(NotUtf8 {
            tool: "Edit".into(),
            path: shown.clone(),
        })
    })?;
    let count = text.matches(old).count();
    if count == 0 {
        return Err(ToolOutput::error(EditNotFound { path: shown }));
    }
    if count > 1 && !replace_all {
        return Err(ToolOutput::error(EditAmbiguous { path: shown, count }));
    }
    let updated = text.replace(old, new);
    let typed = super::typed::EditResult {
        file_path: shown.clone(),
        old_string: old.to_string(),
        new_string: new.to_string(),
        structured_patch: super::typed::patch(&text, &updated),
        original_file: text,
        user_modified: false,
        replace_all,
    };
    let written = {
        let path = path.clone();
        tokio::task::spawn_blocking(move || files::write_whole(&path, updated.as_bytes())).await
    };
    match written {
        Ok(Ok(())) => {}
        Ok(Err(refusal)) => {
            return Err(files::refused("Edit", FileAction::Write, &path, refusal));
        }
        Err(e) => return Err(failed(&e)),
    }
    Ok(ToolOutput::ok(EditDone { path: shown, count }).with_typed(typed))
}

fn failed(e: &tokio::task::JoinError) -> ToolOutput {
    ToolOutput::error(ToolFailed {
        tool: "Edit".into(),
        error: e.to_string(),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    async fn setup(content: &str) -> (tempfile::TempDir, ToolContext) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("f.txt"), content).unwrap();
        let ctx = ToolContext::new(dir.path());
        (dir, ctx)
    }

    fn content(dir: &tempfile::TempDir) -> String {
        std::fs::read_to_string(dir.path().join("f.txt")).unwrap()
    }

    #[tokio::test]
    async fn replaces_a_unique_match() {
        let (dir, ctx) = setup("let a = 1;\nlet b = 2;\n").await;
        let out = EditTool
            .call(
                json!({"file_path": "f.txt", "old_string": "b = 2", "new_string": "b = 3"}),
                &ctx,
            )
            .await;
        assert!(!out.is_error, "{}", out.text());
        assert!(out.text().ends_with(": 1 replacement"));
        assert_eq!(content(&dir), "let a = 1;\nlet b = 3;\n");
    }

    #[tokio::test]
    async fn several_matches_need_replace_all() {
        let (dir, ctx) = setup("x x x").await;
        let out = EditTool
            .call(
                json!({"file_path": "f.txt", "old_string": "x", "new_string": "y"}),
                &ctx,
            )
            .await;
        assert!(out.is_error);
        assert!(out.text().contains("occurs 3 times"));
        assert_eq!(content(&dir), "x x x");
        let out = EditTool
            .call(json!({"file_path": "f.txt", "old_string": "x", "new_string": "y", "replace_all": true}), &ctx)
            .await;
        assert!(!out.is_error);
        assert!(out.text().ends_with(": 3 replacements"));
        assert_eq!(content(&dir), "y y y");
    }

    #[tokio::test]
    async fn not_found_identical_and_missing_file_are_errors() {
        let (dir, ctx) = setup("hello").await;
        let out = EditTool
            .call(
                json!({"file_path": "f.txt", "old_string": "bye", "new_string": "x"}),
                &ctx,
            )
            .await;
        assert!(out.is_error && out.text().contains("not found"));
        let out = EditTool
            .call(
                json!({"file_path": "f.txt", "old_string": "hello", "new_string": "hello"}),
                &ctx,
            )
            .await;
        assert!(out.is_error && out.text().contains("identical"));
        let out = EditTool
            .call(
                json!({"file_path": "g.txt", "old_string": "a", "new_string": "b"}),
                &ctx,
            )
            .await;
        assert!(out.is_error && out.text().contains("File does not exist"));
        let out = EditTool
            .call(json!({"file_path": "f.txt", "old_string": "hello", "new_string": "x", "replace_all": "yes"}), &ctx)
            .await;
        assert!(out.is_error && out.text().contains("`replace_all` must be a boolean"));
        assert_eq!(content(&dir), "hello");
    }
}
