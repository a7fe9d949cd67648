//! Writing one of Claude Code's settings files (`.claude/settings.json`,
//! `.claude/settings.local.json`, `~/.claude/settings.json`) in place, for
//! permission updates a client asked to keep. The file is read whole
//! (bounded), changed as a JSON object, and replaced atomically (a
//! temporary file beside it, then a rename), so a reader — the reload
//! watcher included — never sees half a file. A file that is not a JSON
//! object is left alone and the caller is told why.

use std::path::Path;

use serde_json::{Map, Value};

/// Settings files larger than this are not edited.
const MAX_BYTES: u64 = 1 << 20;

/// Reads the settings object at `path` (an empty one if the file does not
/// exist), lets `change` edit it, and writes it back.
pub fn edit_json_settings(
    path: &Path,
    change: impl FnOnce(&mut Map<String, Value>),
) -> Result<(), String> {
    let shown = path.display();
    let mut object = match std::fs::metadata(path) {
        Ok(m) if m.len() > MAX_BYTES => {
            return Err(format!(
                "{shown}: larger than {MAX_BYTES} bytes; not edited"
            ));
        }
        Ok(_) => {
            let text = std::fs::read_to_string(path).map_err(|e| format!("{shown}: {e}"))?;
            if text.trim().is_empty() {
                Map::new()
            } else {
                match serde_json::from_str::<Value>(&text) {
                    Ok(Value::Object(o)) => o,
                    Ok(_) => return Err(format!("{shown}: not a JSON object; not edited")),
                    Err(e) => {
                        return Err(format!(
                            "{shown}:{}:{}: {e}; not edited",
                            e.line(),
                            e.column()
                        ));
                    }
                }
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Map::new(),
        Err(e) => return Err(format!("{shown}: {e}")),
    };
    change(&mut object);
    let dir = path
        .parent()
        .ok_or_else(|| format!("{shown}: no parent folder"))?;
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut text = serde_json::to_string_pretty(&Value::Object(object))
        .map_err(|e| format!("{shown}: {e}"))?;
    text.push('\n');
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.cadre-{}.tmp", std::process::id()));
    std::fs::write(&tmp, text).map_err(|e| format!("{}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        format!("{shown}: {e}")
    })
}

#[cfg(test)]
mod tests {
    use super::edit_json_settings;
    use serde_json::json;

    #[test]
    fn keeps_other_keys_and_refuses_a_broken_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".claude/settings.local.json");
        edit_json_settings(&path, |o| {
            o.insert("model".into(), json!("opus"));
        })
        .unwrap();
        edit_json_settings(&path, |o| {
            o.insert("permissions".into(), json!({"allow": ["Read"]}));
        })
        .unwrap();
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(
            v,
            json!({"model": "opus", "permissions": {"allow": ["Read"]}})
        );
        std::fs::write(&path, "{\"model\": ").unwrap();
        let e = edit_json_settings(&path, |_| {}).unwrap_err();
        assert!(e.contains("settings.local.json:1:"), "{e}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{\"model\": ");
    }
}
