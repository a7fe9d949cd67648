//! Which MCP servers exist: a project's `.mcp.json` files (Claude Code's
//! format) merged under the settings' `[mcp_servers]`, and the inline
//! servers of an agent definition's `mcpServers`.
//!
//! Layer order, lowest first: `.mcp.json` at the git root, then each folder
//! down to the working directory (a nearer file wins a name), then
//! `[mcp_servers]` in settings (which wins over every `.mcp.json`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::config::McpServerConfig;
use crate::diagnostic::Diagnostic;

/// The `.mcp.json` files that apply to `cwd`, farthest first: every folder
/// from the git root (or `cwd` alone outside a repository) down to `cwd`.
fn mcp_json_paths(cwd: &Path) -> Vec<PathBuf> {
    let root = cwd.ancestors().find(|d| d.join(".git").exists());
    let mut dirs: Vec<&Path> = match root {
        Some(root) => cwd
            .ancestors()
            .take_while(|d| d.starts_with(root))
            .collect(),
        None => vec![cwd],
    };
    dirs.reverse();
    dirs.into_iter()
        .map(|d| d.join(".mcp.json"))
        .filter(|p| p.is_file())
        .collect()
}

/// Reads every `.mcp.json` that applies to `cwd` (see the module doc).
/// A file that cannot be read or parsed, or a server entry of the wrong
/// shape, is a warning and is skipped.
pub fn read_mcp_json(cwd: &Path) -> (BTreeMap<String, McpServerConfig>, Vec<Diagnostic>) {
    let mut servers = BTreeMap::new();
    let mut diags = Vec::new();
    for path in mcp_json_paths(cwd) {
        let text = match fs_err::read_to_string(&path) {
            Ok(t) => t,
            Err(e) => {
                diags.push(Diagnostic::warning(Some(&path), None, e.to_string()));
                continue;
            }
        };
        let doc: Value = match serde_json::from_str(&text) {
            Ok(v) => v,
            Err(e) => {
                diags.push(Diagnostic::warning(
                    Some(&path),
                    None,
                    format!("not valid JSON ({e}); its MCP servers are ignored"),
                ));
                continue;
            }
        };
        let Some(entries) = doc.get("mcpServers").and_then(Value::as_object) else {
            diags.push(Diagnostic::warning(
                Some(&path),
                None,
                "expected an object with an `mcpServers` object; ignored",
            ));
            continue;
        };
        for (name, entry) in entries {
            match parse_server(entry) {
                Ok(c) => {
                    servers.insert(name.clone(), c);
                }
                Err(why) => diags.push(Diagnostic::warning(
                    Some(&path),
                    None,
                    format!("mcpServers.{name}: {why}; this server is ignored"),
                )),
            }
        }
    }
    (servers, diags)
}

/// One server entry (from `.mcp.json` or an agent's inline `mcpServers`).
fn parse_server(v: &Value) -> Result<McpServerConfig, String> {
    let c: McpServerConfig = serde_json::from_value(v.clone()).map_err(|e| e.to_string())?;
    match (&c.command, &c.url) {
        (Some(_), None) | (None, Some(_)) => Ok(c),
        (Some(_), Some(_)) => Err("has both `command` and `url`".into()),
        (None, None) => Err("needs a `command` (stdio) or a `url` (streamable HTTP)".into()),
    }
}

/// The shared servers: `.mcp.json` entries overridden by settings.
pub fn effective_servers(
    from_json: &BTreeMap<String, McpServerConfig>,
    from_settings: &BTreeMap<String, McpServerConfig>,
) -> BTreeMap<String, McpServerConfig> {
    let mut all = from_json.clone();
    all.extend(from_settings.iter().map(|(k, v)| (k.clone(), v.clone())));
    all
}

/// An agent definition's `mcpServers`, split into names of shared servers
/// and inline `{name: config}` definitions. An inline entry of the wrong
/// shape is returned as a message in the third list.
pub fn scoped_servers(
    entries: &[Value],
) -> (Vec<String>, Vec<(String, McpServerConfig)>, Vec<String>) {
    let mut names = Vec::new();
    let mut inline = Vec::new();
    let mut problems = Vec::new();
    for e in entries {
        match e {
            Value::String(s) => names.push(s.clone()),
            Value::Object(m) => {
                for (name, cfg) in m {
                    match parse_server(cfg) {
                        Ok(c) => inline.push((name.clone(), c)),
                        Err(why) => problems.push(format!("mcpServers.{name}: {why}")),
                    }
                }
            }
            other => problems.push(format!("mcpServers: unexpected entry {other}")),
        }
    }
    (names, inline, problems)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn nearer_mcp_json_wins_and_settings_win_over_all() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join(".git")).unwrap();
        let sub = root.path().join("a/b");
        std::fs::create_dir_all(&sub).unwrap();
        std::fs::write(
            root.path().join(".mcp.json"),
            r#"{"mcpServers": {"x": {"command": "root"}, "y": {"type": "http", "url": "http://h/mcp", "headers": {"A": "1"}}}}"#,
        )
        .unwrap();
        std::fs::write(
            sub.join(".mcp.json"),
            r#"{"mcpServers": {"x": {"command": "near", "args": ["-v"]}, "bad": {}}}"#,
        )
        .unwrap();
        let (json_servers, diags) = read_mcp_json(&sub);
        assert_eq!(json_servers["x"].command.as_deref(), Some("near"));
        assert_eq!(json_servers["y"].url.as_deref(), Some("http://h/mcp"));
        assert_eq!(json_servers["y"].headers["A"], "1");
        assert_eq!(diags.len(), 1, "{diags:?}");
        let mut settings = BTreeMap::new();
        settings.insert(
            "y".to_string(),
            McpServerConfig {
                command: Some("from-settings".into()),
                ..Default::default()
            },
        );
        let all = effective_servers(&json_servers, &settings);
        assert_eq!(all["y"].command.as_deref(), Some("from-settings"));
        assert_eq!(all.len(), 2);
    }

    #[test]
    fn scoped_entries_split_into_names_and_inline_definitions() {
        let (names, inline, problems) = scoped_servers(&[
            json!("github"),
            json!({"local": {"command": "srv", "args": ["a"]}}),
            json!({"broken": {"args": []}}),
        ]);
        assert_eq!(names, ["github"]);
        assert_eq!(inline.len(), 1);
        assert_eq!(inline[0].0, "local");
        assert_eq!(problems.len(), 1);
    }
}
