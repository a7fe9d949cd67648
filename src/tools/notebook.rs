//! Jupyter notebooks (`.ipynb`, nbformat 4): Read shows them cell by cell
//! (template `read_notebook`), and the NotebookEdit tool replaces, inserts
//! or deletes one cell by id, as Claude Code's NotebookEdit does.
//!
//! A cell is found by its `id` (nbformat 4.5); notebooks written before ids
//! existed address cells as `cell-N` (N counting from 0), the form Read
//! shows for them. The notebook is rewritten as Jupyter writes it (one-space
//! indent, keys in their original order, a final newline), so an edit
//! changes only the cell it touches.

use std::path::Path;

use futures_util::FutureExt as _;
use futures_util::future::BoxFuture;
use serde::Serialize;
use serde_json::{Map, Value, json};

use super::files::{self, Refusal};
use super::outcome::{
    CellAction, CellOutput, NotebookEditMode, NotebookEdited, NotebookError, NotebookProblem,
    ToolFailed,
};
use super::{Input, Tool, ToolContext, ToolOutput, truncate_middle};

/// The largest notebook read or edited, in bytes.
pub const MAX_NOTEBOOK_BYTES: u64 = 16 * 1024 * 1024;
/// Characters of one cell's outputs shown by Read.
const MAX_OUTPUT_CHARS: usize = 4000;

/// Whether Read should show `path` as a notebook.
pub fn is_notebook(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("ipynb"))
}

/// One cell as Read shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CellView {
    pub id: String,
    pub cell_type: String,
    pub source: String,
    pub outputs: Vec<CellOutput>,
}

/// The context of the `read_notebook` template.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NotebookView {
    pub path: String,
    pub language: String,
    pub cell_count: usize,
    pub cells: Vec<CellView>,
}

impl crate::templates::Context for NotebookView {
    const TEMPLATE: &'static str = "read_notebook";
    fn sample() -> Self {
        NotebookView {
            path: "/repo/a.ipynb".into(),
            language: "python".into(),
            cell_count: 1,
            cells: vec![CellView {
                id: "calc".into(),
                cell_type: "code".into(),
                source: "print(2 + 2)".into(),
                outputs: vec![
                    CellOutput {
                        text: super::outcome::Clip::whole("4".into()),
                        kinds: String::new(),
                    },
                    CellOutput {
                        text: super::outcome::Clip::default(),
                        kinds: "image/png".into(),
                    },
                ],
            }],
        }
    }
}

fn error(path: &Path, reason: NotebookProblem) -> ToolOutput {
    ToolOutput::error(NotebookError {
        path: path.display().to_string(),
        reason,
    })
}

/// The problem a refused file operation on a notebook is.
fn refusal(r: Refusal) -> NotebookProblem {
    match r {
        Refusal::NotFound => NotebookProblem::NotFound,
        Refusal::Directory => NotebookProblem::Directory,
        other => NotebookProblem::Io {
            error: match other {
                Refusal::Io(e) => e.to_string(),
                _ => String::new(),
            },
        },
    }
}

fn load(path: &Path, tool: &str) -> Result<Value, ToolOutput> {
    let bytes = match files::read_capped(path, MAX_NOTEBOOK_BYTES) {
        Ok(b) => b,
        Err(Refusal::NotRegular(kind)) => return Err(files::not_regular(tool, path, kind)),
        Err(Refusal::TooLarge(size, max)) => return Err(files::too_large(tool, path, size, max)),
        Err(e) => return Err(error(path, refusal(e))),
    };
    let nb: Value = serde_json::from_slice(&bytes).map_err(|e| {
        error(
            path,
            NotebookProblem::InvalidJson {
                error: e.to_string(),
            },
        )
    })?;
    if !nb.get("cells").is_some_and(Value::is_array) {
        return Err(error(path, NotebookProblem::NoCells));
    }
    Ok(nb)
}

/// A cell's `source` (a string or a list of lines) as one string.
fn source_text(cell: &Value) -> String {
    match cell.get("source") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(lines)) => lines.iter().filter_map(Value::as_str).collect(),
        _ => String::new(),
    }
}

/// The id Read shows and NotebookEdit accepts for the cell at `index`.
fn cell_id(cell: &Value, index: usize) -> String {
    cell.get("id")
        .and_then(Value::as_str)
        .map_or_else(|| format!("cell-{index}"), str::to_string)
}

fn output_texts(cell: &Value) -> Vec<CellOutput> {
    let Some(outputs) = cell.get("outputs").and_then(Value::as_array) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for o in outputs {
        let mut kinds = String::new();
        let text = match o.get("output_type").and_then(Value::as_str) {
            Some("stream") => source_text(&json!({"source": o.get("text")})),
            Some("error") => format!(
                "{}: {}",
                o.get("ename").and_then(Value::as_str).unwrap_or("Error"),
                o.get("evalue").and_then(Value::as_str).unwrap_or("")
            ),
            Some(_) => {
                let data = o.get("data");
                match data.and_then(|d| d.get("text/plain")) {
                    Some(t) => source_text(&json!({"source": t})),
                    None => {
                        if let Some(m) = data.and_then(Value::as_object) {
                            let names: Vec<&str> = m.keys().map(String::as_str).collect();
                            kinds = names.join(", ");
                        }
                        String::new()
                    }
                }
            }
            None => String::new(),
        };
        let text = text.trim_end();
        if !text.is_empty() || !kinds.is_empty() {
            out.push(CellOutput {
                text: truncate_middle(text, MAX_OUTPUT_CHARS),
                kinds,
            });
        }
    }
    out
}

/// The notebook at `path` for the `read_notebook` template.
pub fn view(path: &Path) -> Result<NotebookView, ToolOutput> {
    let nb = load(path, "Read")?;
    let language = nb
        .pointer("/metadata/language_info/name")
        .or_else(|| nb.pointer("/metadata/kernelspec/language"))
        .and_then(Value::as_str)
        .unwrap_or("python")
        .to_string();
    let cells: Vec<CellView> = nb
        .get("cells")
        .and_then(Value::as_array)
        .map(|cells| {
            cells
                .iter()
                .enumerate()
                .map(|(i, c)| CellView {
                    id: cell_id(c, i),
                    cell_type: c
                        .get("cell_type")
                        .and_then(Value::as_str)
                        .unwrap_or("code")
                        .to_string(),
                    source: source_text(c),
                    outputs: output_texts(c),
                })
                .collect()
        })
        .unwrap_or_default();
    Ok(NotebookView {
        path: path.display().to_string(),
        language,
        cell_count: cells.len(),
        cells,
    })
}

/// NotebookEdit's `edit_mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EditMode {
    Replace,
    Insert,
    Delete,
}

/// One NotebookEdit call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CellEdit {
    pub cell_id: Option<String>,
    pub new_source: String,
    pub cell_type: Option<String>,
    pub mode: EditMode,
}

/// Source text as nbformat stores it: a list of lines, each but the last
/// keeping its newline.
fn source_lines(text: &str) -> Value {
    Value::Array(
        text.split_inclusive('\n')
            .map(|l| Value::String(l.to_string()))
            .collect(),
    )
}

fn new_cell(cell_type: &str, source: &str, with_id: bool) -> Value {
    let mut m = Map::new();
    m.insert("cell_type".into(), json!(cell_type));
    if with_id {
        m.insert("id".into(), json!(format!("{:08x}", rand::random::<u32>())));
    }
    m.insert("metadata".into(), json!({}));
    if cell_type == "code" {
        m.insert("execution_count".into(), Value::Null);
        m.insert("outputs".into(), json!([]));
    }
    m.insert("source".into(), source_lines(source));
    Value::Object(m)
}

/// Applies `edit` to the notebook; `Ok` holds the id of the cell it
/// touched, `Err` what is wrong with the call.
pub fn apply(nb: &mut Value, edit: &CellEdit) -> Result<String, NotebookProblem> {
    let cells = nb
        .get_mut("cells")
        .and_then(Value::as_array_mut)
        .ok_or(NotebookProblem::NoCells)?;
    let uses_ids = cells.iter().any(|c| c.get("id").is_some());
    let find = |cells: &[Value], id: &str| -> Result<usize, NotebookProblem> {
        cells
            .iter()
            .enumerate()
            .position(|(i, c)| cell_id(c, i) == id)
            .ok_or_else(|| {
                let ids: Vec<String> = cells
                    .iter()
                    .enumerate()
                    .map(|(i, c)| cell_id(c, i))
                    .collect();
                NotebookProblem::NoSuchCell {
                    id: id.to_string(),
                    ids: ids.join(", "),
                }
            })
    };
    if let Some(t) = &edit.cell_type
        && t != "code"
        && t != "markdown"
    {
        return Err(NotebookProblem::BadCellType { found: t.clone() });
    }
    match edit.mode {
        EditMode::Insert => {
            let at = match &edit.cell_id {
                Some(id) => find(cells, id)? + 1,
                None => 0,
            };
            let Some(t) = &edit.cell_type else {
                return Err(NotebookProblem::InsertNeedsType);
            };
            let cell = new_cell(t, &edit.new_source, uses_ids || cells.is_empty());
            let id = cell_id(&cell, at);
            cells.insert(at, cell);
            Ok(id)
        }
        EditMode::Delete => {
            let id = edit
                .cell_id
                .as_deref()
                .ok_or(NotebookProblem::DeleteNeedsId)?;
            let at = find(cells, id)?;
            cells.remove(at);
            Ok(id.to_string())
        }
        EditMode::Replace => {
            let id = edit
                .cell_id
                .as_deref()
                .ok_or(NotebookProblem::ReplaceNeedsId)?;
            let at = find(cells, id)?;
            let cell = cells
                .get_mut(at)
                .and_then(Value::as_object_mut)
                .ok_or_else(|| NotebookProblem::CellNotObject { id: id.to_string() })?;
            cell.insert("source".into(), source_lines(&edit.new_source));
            if let Some(t) = &edit.cell_type {
                cell.insert("cell_type".into(), json!(t));
            }
            // A changed code cell's old outputs no longer belong to it.
            if cell.get("cell_type").and_then(Value::as_str) == Some("code") {
                cell.insert("execution_count".into(), Value::Null);
                cell.insert("outputs".into(), json!([]));
            } else {
                cell.remove("execution_count");
                cell.remove("outputs");
            }
            Ok(id.to_string())
        }
    }
}

/// The notebook as Jupyter writes it: one-space indent, final newline.
pub fn to_bytes(nb: &Value) -> Result<Vec<u8>, NotebookProblem> {
    let mut out = Vec::new();
    let fmt = serde_json::ser::PrettyFormatter::with_indent(b" ");
    let mut ser = serde_json::Serializer::with_formatter(&mut out, fmt);
    nb.serialize(&mut ser)
        .map_err(|e| NotebookProblem::Serialize {
            error: e.to_string(),
        })?;
    out.push(b'\n');
    Ok(out)
}

#[derive(Debug, Clone, Copy, Default)]
pub struct NotebookEditTool;

impl Tool for NotebookEditTool {
    fn name(&self) -> &str {
        "NotebookEdit"
    }

    fn read_only(&self) -> bool {
        false
    }

    fn call<'a>(&'a self, input: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        async move {
            let i = Input(&input);
            let parsed = (|| -> Result<(String, CellEdit), ToolOutput> {
                let mode = match i.opt_str("edit_mode")? {
                    None | Some("replace") => EditMode::Replace,
                    Some("insert") => EditMode::Insert,
                    Some("delete") => EditMode::Delete,
                    Some(other) => {
                        return Err(ToolOutput::error(NotebookEditMode {
                            found: other.to_string(),
                        }));
                    }
                };
                Ok((
                    i.str("notebook_path")?.to_string(),
                    CellEdit {
                        cell_id: i.opt_str("cell_id")?.map(str::to_string),
                        new_source: i.opt_str("new_source")?.unwrap_or("").to_string(),
                        cell_type: i.opt_str("cell_type")?.map(str::to_string),
                        mode,
                    },
                ))
            })();
            let (file, edit) = match parsed {
                Ok(p) => p,
                Err(e) => return e,
            };
            let path = ctx.resolve(&file);
            if !is_notebook(&path) {
                return error(&path, NotebookProblem::NotNotebookFile);
            }
            let done = tokio::task::spawn_blocking(move || -> Result<ToolOutput, ToolOutput> {
                let mut nb = load(&path, "NotebookEdit")?;
                let id = apply(&mut nb, &edit).map_err(|e| error(&path, e))?;
                let bytes = to_bytes(&nb).map_err(|e| error(&path, e))?;
                files::write_whole(&path, &bytes).map_err(|e| match e {
                    Refusal::NotRegular(kind) => files::not_regular("NotebookEdit", &path, kind),
                    other => error(&path, refusal(other)),
                })?;
                let action = match edit.mode {
                    EditMode::Replace => CellAction::Replaced,
                    EditMode::Insert => CellAction::Inserted,
                    EditMode::Delete => CellAction::Deleted,
                };
                Ok(ToolOutput::ok(NotebookEdited {
                    path: path.display().to_string(),
                    cell_id: id,
                    action,
                }))
            })
            .await;
            match done {
                Ok(Ok(out)) | Ok(Err(out)) => out,
                Err(e) => ToolOutput::error(ToolFailed {
                    tool: "NotebookEdit".into(),
                    error: e.to_string(),
                }),
            }
        }
        .boxed()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn nb() -> Value {
        json!({
            "cells": [
                {"cell_type": "markdown", "id": "intro", "metadata": {}, "source": ["# Title\n", "text"]},
                {"cell_type": "code", "execution_count": 3, "id": "calc", "metadata": {},
                 "outputs": [{"output_type": "stream", "name": "stdout", "text": ["4\n"]}],
                 "source": ["print(2 + 2)"]}
            ],
            "metadata": {"language_info": {"name": "python"}},
            "nbformat": 4,
            "nbformat_minor": 5
        })
    }

    fn edit(mode: EditMode, id: Option<&str>, src: &str, t: Option<&str>) -> CellEdit {
        CellEdit {
            cell_id: id.map(str::to_string),
            new_source: src.to_string(),
            cell_type: t.map(str::to_string),
            mode,
        }
    }

    #[test]
    fn replace_insert_delete_by_id() {
        let mut n = nb();
        assert_eq!(
            apply(
                &mut n,
                &edit(EditMode::Replace, Some("calc"), "x = 1\nx", None)
            ),
            Ok("calc".into())
        );
        let calc = &n["cells"][1];
        assert_eq!(calc["source"], json!(["x = 1\n", "x"]));
        assert_eq!(calc["outputs"], json!([]));
        assert_eq!(calc["execution_count"], Value::Null);

        let id = apply(
            &mut n,
            &edit(EditMode::Insert, Some("intro"), "## New", Some("markdown")),
        )
        .unwrap();
        assert_eq!(n["cells"].as_array().unwrap().len(), 3);
        assert_eq!(n["cells"][1]["id"], json!(id));
        assert_eq!(n["cells"][1]["source"], json!(["## New"]));
        assert!(n["cells"][1].get("outputs").is_none());

        assert_eq!(
            apply(&mut n, &edit(EditMode::Delete, Some("intro"), "", None)),
            Ok("intro".into())
        );
        assert_eq!(n["cells"].as_array().unwrap().len(), 2);
        assert_eq!(n["cells"][1]["id"], "calc");

        let e = apply(&mut n, &edit(EditMode::Replace, Some("nope"), "", None)).unwrap_err();
        let e = error(Path::new("n.ipynb"), e).text();
        assert!(
            e.contains("no cell with id `nope`") && e.contains("calc"),
            "{e}"
        );
        assert!(apply(&mut n, &edit(EditMode::Insert, None, "x", None)).is_err());
        assert!(apply(&mut n, &edit(EditMode::Insert, None, "x", Some("raw"))).is_err());
    }

    #[test]
    fn cells_without_ids_are_addressed_by_position() {
        let mut n = json!({"cells": [{"cell_type": "code", "source": "a", "metadata": {}, "outputs": [], "execution_count": null},
                                     {"cell_type": "code", "source": "b", "metadata": {}, "outputs": [], "execution_count": null}],
                           "metadata": {}, "nbformat": 4, "nbformat_minor": 4});
        apply(&mut n, &edit(EditMode::Replace, Some("cell-1"), "c", None)).unwrap();
        assert_eq!(n["cells"][1]["source"], json!(["c"]));
        // No ids in the file: an inserted cell gets none either.
        apply(
            &mut n,
            &edit(EditMode::Insert, Some("cell-0"), "z", Some("code")),
        )
        .unwrap();
        assert!(n["cells"][1].get("id").is_none());
    }

    #[test]
    fn written_as_jupyter_writes() {
        let bytes = to_bytes(&json!({"cells": [], "metadata": {}})).unwrap();
        assert_eq!(
            String::from_utf8(bytes).unwrap(),
            "{\n \"cells\": [],\n \"metadata\": {}\n}\n"
        );
    }
}
