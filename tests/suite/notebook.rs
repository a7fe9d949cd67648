//! Notebooks through the real binary: Read shows a real `.ipynb` cell by
//! cell; NotebookEdit replaces, inserts and deletes cells by id, leaving
//! the rest of the JSON as it was.

use serde_json::{Value, json};

use super::harness::{Project, last_tool_results, result_text};
use super::kit::{FakeServer, anthropic};

const NB: &str = r##"{
 "cells": [
  {
   "cell_type": "markdown",
   "id": "intro",
   "metadata": {},
   "source": [
    "# Analysis\n",
    "Numbers."
   ]
  },
  {
   "cell_type": "code",
   "execution_count": 2,
   "id": "sum",
   "metadata": {"tags": ["keep"]},
   "outputs": [
    {
     "name": "stdout",
     "output_type": "stream",
     "text": [
      "6\n"
     ]
    }
   ],
   "source": [
    "print(1 + 2 + 3)"
   ]
  }
 ],
 "metadata": {
  "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
  "language_info": {"name": "python"}
 },
 "nbformat": 4,
 "nbformat_minor": 5
}
"##;

#[test]
fn read_shows_cells_and_notebook_edit_changes_one_cell_at_a_time() {
    let mut p = Project::new();
    p.config("[permissions]\ndefault_mode = \"acceptEdits\"\n");
    let path = p.write("analysis.ipynb", NB);
    let file = path.to_str().unwrap();
    let server = FakeServer::start([
        anthropic::tool_use_reply("t1", "Read", json!({"file_path": file})),
        anthropic::tool_use_reply(
            "t2",
            "NotebookEdit",
            json!({"notebook_path": "analysis.ipynb", "cell_id": "sum", "new_source": "total = 1 + 2 + 3\nprint(total)"}),
        ),
        anthropic::tool_use_reply(
            "t3",
            "NotebookEdit",
            json!({"notebook_path": file, "cell_id": "intro", "new_source": "Method: add.", "cell_type": "markdown", "edit_mode": "insert"}),
        ),
        anthropic::tool_use_reply(
            "t4",
            "NotebookEdit",
            json!({"notebook_path": file, "cell_id": "intro", "new_source": "", "edit_mode": "delete"}),
        ),
        anthropic::tool_use_reply(
            "t5",
            "NotebookEdit",
            json!({"notebook_path": file, "cell_id": "missing", "new_source": "x"}),
        ),
        anthropic::text_reply("done"),
    ]);
    p.run(Some(&server), &["run", "edit the notebook"]).ok();

    let read = result_text(&last_tool_results(&server.request(1).json)[0]);
    assert!(read.contains("(python), 2 cells"), "{read}");
    assert!(
        read.contains("<cell id=\"intro\" type=\"markdown\">\n# Analysis\nNumbers.\n</cell>"),
        "{read}"
    );
    assert!(
        read.contains("<cell id=\"sum\" type=\"code\">\nprint(1 + 2 + 3)\n</cell>"),
        "{read}"
    );
    assert!(
        read.contains("<output cell=\"sum\">\n6\n</output>"),
        "{read}"
    );

    for i in 2..=4 {
        let r = &last_tool_results(&server.request(i).json)[0];
        assert!(r.get("is_error").is_none(), "{r}");
    }
    assert!(result_text(&last_tool_results(&server.request(2).json)[0]).contains("Cell sum of"));
    let missing = &last_tool_results(&server.request(5).json)[0];
    assert_eq!(missing["is_error"], true);
    assert!(
        result_text(missing).contains("no cell with id `missing`"),
        "{}",
        result_text(missing)
    );

    // The file: intro deleted, the inserted markdown cell first, the code
    // cell replaced with its outputs cleared; everything else as it was.
    let text = p.read("analysis.ipynb");
    assert!(
        text.ends_with("}\n") && text.starts_with("{\n \"cells\""),
        "{text}"
    );
    let got: Value = serde_json::from_str(&text).unwrap();
    let mut want: Value = serde_json::from_str(NB).unwrap();
    let inserted = got["cells"][0].clone();
    assert_eq!(inserted["cell_type"], "markdown");
    assert_eq!(inserted["source"], json!(["Method: add."]));
    assert!(inserted["id"].as_str().is_some_and(|s| !s.is_empty()));
    let cells = want["cells"].as_array_mut().unwrap();
    cells.remove(0);
    cells[0]["source"] = json!(["total = 1 + 2 + 3\n", "print(total)"]);
    cells[0]["outputs"] = json!([]);
    cells[0]["execution_count"] = Value::Null;
    cells.insert(0, inserted);
    assert_eq!(got, want);
}
