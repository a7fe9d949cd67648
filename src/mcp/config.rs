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
use crate::diagnostic::{Diagnostic, Pos};

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

/// Reads every `.mcp.json` that applies to `cwd` (see the module doc),
/// expanding `${VAR}` and `${VAR:-default}` from `env` as Claude Code does.
/// A file that cannot be read or parsed, or a server entry of the wrong
/// shape or with a variable that is unset and has no default, is a warning
/// and is skipped.
pub fn read_mcp_json(
    cwd: &Path,
    env: &[(String, String)],
) -> (BTreeMap<String, McpServerConfig>, Vec<Diagnostic>) {
    let (servers, _, diags) = read_mcp_json_placed(cwd, env);
    (servers, diags)
}

/// [`read_mcp_json`], with where each server kept was written
/// (`FILE:LINE:COL`, for `config show`).
pub fn read_mcp_json_placed(
    cwd: &Path,
    env: &[(String, String)],
) -> (
    BTreeMap<String, McpServerConfig>,
    BTreeMap<String, String>,
    Vec<Diagnostic>,
) {
    let lookup = |k: &str| {
        env.iter()
            .rev()
            .find(|(name, _)| name == k)
            .map(|(_, v)| v.clone())
    };
    let mut servers = BTreeMap::new();
    let mut placed = BTreeMap::new();
    let mut diags = Vec::new();
    for path in mcp_json_paths(cwd) {
        let text = match crate::raw::read_text(&path, crate::config::MAX_SETTINGS_BYTES) {
            Ok(t) => t,
            Err(e) => {
                diags.push(Diagnostic::warning(Some(&path), None, e));
                continue;
            }
        };
        let doc: Value = match serde_json::from_str(&text) {
            Ok(v) => v,
            Err(e) => {
                diags.push(Diagnostic::warning(
                    Some(&path),
                    Some(Pos::new(e.line().max(1), e.column().max(1))),
                    format!("not valid JSON ({e}); its MCP servers are ignored"),
                ));
                continue;
            }
        };
        // Positions come from the YAML reader (JSON is YAML); JSON's own
        // parser has decided what is valid.
        let tree = crate::raw::parse_yaml(&text).ok();
        let key_pos = |name: &str| {
            tree.as_ref()
                .and_then(|t| t.get("mcpServers"))
                .and_then(|m| m.entry(name))
                .map(|(k, _)| k.pos)
        };
        let Some(entries) = doc.get("mcpServers").and_then(Value::as_object) else {
            diags.push(Diagnostic::warning(
                Some(&path),
                tree.as_ref().map(|t| t.pos),
                "expected an object with an `mcpServers` object; ignored",
            ));
            continue;
        };
        for (name, entry) in entries {
            match parse_server(entry).and_then(|c| expand_server(c, &lookup)) {
                Ok(c) => {
                    let at = key_pos(name).map_or_else(
                        || path.display().to_string(),
                        |p| format!("{}:{}:{}", path.display(), p.line, p.column),
                    );
                    placed.insert(name.clone(), at);
                    servers.insert(name.clone(), c);
                }
                Err(why) => diags.push(Diagnostic::warning(
                    Some(&path),
                    key_pos(name),
                    format!("mcpServers.{name}: {why}; this server is ignored"),
                )),
            }
        }
    }
    (servers, placed, diags)
}

/// One server entry (from `.mcp.json` or an agent's inline `mcpServers`).
fn parse_server(v: &Value) -> Result<McpServerConfig, String> {
    McpServerConfig::from_json(v)
}

/// Expands `${VAR}` and `${VAR:-default}` in the command, args, env
/// values, url and header values of one server.
fn expand_server(
    mut c: McpServerConfig,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<McpServerConfig, String> {
    let ex = |s: &mut String, field: &str| -> Result<(), String> {
        *s = expand_vars(s, lookup).map_err(|e| format!("{field}: {e}"))?;
        Ok(())
    };
    if let Some(cmd) = c.command.as_mut() {
        ex(cmd, "command")?;
    }
    for (i, a) in c.args.iter_mut().enumerate() {
        ex(a, &format!("args[{i}]"))?;
    }
    for (k, v) in c.env.iter_mut() {
        ex(v, &format!("env.{k}"))?;
    }
    if let Some(url) = c.url.as_mut() {
        ex(url, "url")?;
    }
    for (k, v) in c.headers.iter_mut() {
        ex(v, &format!("headers.{k}"))?;
    }
    Ok(c)
}

/// `${VAR}` becomes the variable's value (an error when it is unset),
/// `${VAR:-default}` the value or, when unset or empty, `default`. Other
/// text, a lone `$` included, is kept as it is.
fn expand_vars(s: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(at) = rest.find("${") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 2..];
        let Some(end) = after.find('}') else {
            return Err(format!(
                "`${{` at byte {} has no closing `}}`",
                s.len() - rest.len() + at
            ));
        };
        let inner = &after[..end];
        let (name, default) = match inner.split_once(":-") {
            Some((n, d)) => (n, Some(d)),
            None => (inner, None),
        };
        let valid = !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid {
            return Err(format!("`${{{inner}}}` is not a variable reference"));
        }
        let value = lookup(name).filter(|v| default.is_none() || !v.is_empty());
        match (value, default) {
            (Some(v), _) => out.push_str(&v),
            (None, Some(d)) => out.push_str(d),
            (None, None) => {
                return Err(format!(
                    "the environment variable `{name}` is not set and `${{{name}}}` has no default"
                ));
            }
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The MCP servers of the session's plugins, named `plugin:PLUGIN:SERVER`
/// as Claude Code names them (their tools `mcp__plugin_PLUGIN_SERVER__x`).
/// `${CLAUDE_PLUGIN_ROOT}`, `${CLAUDE_PLUGIN_DATA}` (and `${VAR}` of the
/// environment) expand as in `.mcp.json`, and the server gets both
/// variables too; the data folder is created then, as Claude Code does.
pub fn plugin_servers(
    plugins: &[crate::config::plugins::Plugin],
    env: &[(String, String)],
) -> (BTreeMap<String, McpServerConfig>, Vec<Diagnostic>) {
    use crate::config::plugins::{PLUGIN_DATA_VAR, PLUGIN_ROOT_VAR, ensure_data_dir, mcp_servers};
    let mut servers = BTreeMap::new();
    let mut diags = Vec::new();
    for p in plugins {
        let root = p.path.display().to_string();
        let data = p.data.as_ref().map(|d| d.display().to_string());
        let lookup = |k: &str| {
            if k == PLUGIN_ROOT_VAR {
                return Some(root.clone());
            }
            if k == PLUGIN_DATA_VAR && data.is_some() {
                return data.clone();
            }
            env.iter()
                .rev()
                .find(|(name, _)| name == k)
                .map(|(_, v)| v.clone())
        };
        let (found, problems) = mcp_servers(&p.path);
        diags.extend(problems);
        for (name, entry, path) in found {
            match parse_server(&entry).and_then(|c| expand_server(c, &lookup)) {
                Ok(mut c) => {
                    c.env.insert(PLUGIN_ROOT_VAR.to_string(), root.clone());
                    if let (Some(d), Some(dir)) = (&data, &p.data) {
                        ensure_data_dir(dir);
                        c.env.insert(PLUGIN_DATA_VAR.to_string(), d.clone());
                    }
                    c.plugin = Some(p.source.clone());
                    servers.insert(format!("plugin:{}:{name}", p.name), c);
                }
                Err(why) => diags.push(Diagnostic::warning(
                    Some(&path),
                    None,
                    format!(
                        "plugin `{}`: mcpServers.{name}: {why}; this server is ignored",
                        p.name
                    ),
                )),
            }
        }
    }
    (servers, diags)
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

#[cfg(test)]
mod tests {
    use super::*;

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
        let (json_servers, diags) = read_mcp_json(&sub, &[]);
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
    fn variables_expand_in_every_string_field() {
        let env = |k: &str| match k {
            "HOME_DIR" => Some("/home/u".to_string()),
            "TOKEN" => Some("s3cret".to_string()),
            "EMPTY" => Some(String::new()),
            _ => None,
        };
        assert_eq!(expand_vars("${HOME_DIR}/x", &env).unwrap(), "/home/u/x");
        assert_eq!(expand_vars("${NOPE:-dflt}", &env).unwrap(), "dflt");
        assert_eq!(expand_vars("${EMPTY:-dflt}", &env).unwrap(), "dflt");
        assert_eq!(expand_vars("${EMPTY}", &env).unwrap(), "");
        assert_eq!(
            expand_vars("a $B ${TOKEN}${TOKEN:-x}", &env).unwrap(),
            "a $B s3crets3cret"
        );
        assert_eq!(expand_vars("${NOPE:-}", &env).unwrap(), "");
        assert!(
            expand_vars("${NOPE}", &env)
                .unwrap_err()
                .contains("`NOPE` is not set")
        );
        assert!(
            expand_vars("${TOKEN", &env)
                .unwrap_err()
                .contains("no closing")
        );
        assert!(
            expand_vars("${a b}", &env)
                .unwrap_err()
                .contains("not a variable")
        );

        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(".mcp.json"),
            r#"{"mcpServers": {
                "s": {"type": "stdio", "command": "${BIN:-node}", "args": ["${HOME_DIR}/srv.js", "--port=${PORT:-8080}"],
                      "env": {"T": "${TOKEN}"}},
                "h": {"type": "http", "url": "https://${HOST:-example.com}/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}},
                "missing": {"command": "x", "args": ["${UNSET_VAR}"]}
            }}"#,
        )
        .unwrap();
        let env = [
            ("HOME_DIR".to_string(), "/home/u".to_string()),
            ("TOKEN".to_string(), "s3cret".to_string()),
        ];
        let (servers, diags) = read_mcp_json(dir.path(), &env);
        let s = &servers["s"];
        assert_eq!(s.command.as_deref(), Some("node"));
        assert_eq!(s.args, ["/home/u/srv.js", "--port=8080"]);
        assert_eq!(s.env["T"], "s3cret");
        let h = &servers["h"];
        assert_eq!(h.url.as_deref(), Some("https://example.com/mcp"));
        assert_eq!(h.headers["Authorization"], "Bearer s3cret");
        assert!(!servers.contains_key("missing"));
        assert_eq!(diags.len(), 1, "{diags:?}");
        let msg = diags[0].to_string();
        assert!(
            msg.contains("mcpServers.missing")
                && msg.contains("args[0]")
                && msg.contains("UNSET_VAR"),
            "{msg}"
        );
    }
}
