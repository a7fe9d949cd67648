//! MCP prompts as slash commands in `chat`: `/mcp__SERVER__PROMPT ARGS`
//! (named like tools) fetches the prompt with the words of ARGS as its
//! arguments, in the order the server lists them (the last one takes the
//! rest of the line), and the prompt's messages become the user's message.

use serde_json::{Map, Value};

use super::McpManager;
use super::client::content_block;
use super::tool::tool_name;
use crate::message::ContentBlock;

/// One prompt a ready server offers, as a slash command.
#[derive(Debug, Clone)]
pub struct PromptCommand {
    /// `mcp__SERVER__PROMPT`.
    pub command: String,
    pub server: String,
    pub prompt: String,
    pub description: String,
    /// Argument names, in order, and whether each is required.
    pub arguments: Vec<(String, bool)>,
}

impl PromptCommand {
    /// `/mcp__s__p <city> [state]`.
    pub fn usage(&self) -> String {
        let mut out = format!("/{}", self.command);
        for (name, required) in &self.arguments {
            if *required {
                out.push_str(&format!(" <{name}>"));
            } else {
                out.push_str(&format!(" [{name}]"));
            }
        }
        out
    }
}

/// The prompts of every ready shared server that offers prompts.
pub async fn prompt_commands(manager: &McpManager) -> Vec<PromptCommand> {
    let mut out = Vec::new();
    for (server, conn) in manager.ready_servers() {
        if !conn.has_prompts() {
            continue;
        }
        let Ok(list) = conn.list_prompts().await else {
            continue;
        };
        for p in list {
            let Some(name) = p.get("name").and_then(Value::as_str) else {
                continue;
            };
            let arguments = p
                .get("arguments")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|x| {
                            let n = x.get("name")?.as_str()?.to_string();
                            let req = x.get("required").and_then(Value::as_bool) == Some(true);
                            Some((n, req))
                        })
                        .collect()
                })
                .unwrap_or_default();
            out.push(PromptCommand {
                command: tool_name(&server, name),
                server: server.clone(),
                prompt: name.to_string(),
                description: p
                    .get("description")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                arguments,
            });
        }
    }
    out
}

/// ARGS split over the prompt's arguments: one word each, the last taking
/// the rest of the line. A missing required argument is an error.
fn bind(cmd: &PromptCommand, args: &str) -> Result<Map<String, Value>, String> {
    let mut rest = args.trim();
    let mut out = Map::new();
    let n = cmd.arguments.len();
    for (i, (name, required)) in cmd.arguments.iter().enumerate() {
        let word = if i + 1 == n {
            std::mem::take(&mut rest)
        } else {
            let (w, r) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
            rest = r.trim_start();
            w
        };
        if word.is_empty() {
            if *required {
                return Err(format!("missing <{name}>; usage: {}", cmd.usage()));
            }
            continue;
        }
        out.insert(name.clone(), Value::String(word.to_string()));
    }
    if !rest.is_empty() {
        return Err(format!(
            "{} takes no more arguments; usage: {}",
            cmd.command,
            cmd.usage()
        ));
    }
    Ok(out)
}

/// Runs `/COMMAND ARGS`: `Ok(None)` when COMMAND is no server's prompt,
/// else the content of the user message it makes (every message's
/// content, in order) or why it failed.
pub async fn run_prompt_command(
    manager: &McpManager,
    templates: &crate::templates::Templates,
    command: &str,
    args: &str,
) -> Option<Result<Vec<ContentBlock>, String>> {
    let cmd = prompt_commands(manager)
        .await
        .into_iter()
        .find(|c| c.command == command)?;
    let arguments = match bind(&cmd, args) {
        Ok(a) => a,
        Err(e) => return Some(Err(e)),
    };
    let conn = manager.connection(&cmd.server)?;
    let messages = match conn.get_prompt(&cmd.prompt, arguments).await {
        Ok(m) => m,
        Err(e) => {
            return Some(Err(format!(
                "MCP server `{}` failed to give prompt `{}`: {e}",
                cmd.server, cmd.prompt
            )));
        }
    };
    let blocks: Vec<ContentBlock> = messages
        .iter()
        .filter_map(|m| m.get("content"))
        .flat_map(|c| match c {
            Value::Array(items) => items
                .iter()
                .map(|c| content_block(c, templates))
                .collect::<Vec<_>>(),
            one => vec![content_block(one, templates)],
        })
        .collect();
    if blocks.is_empty() {
        return Some(Err(format!("prompt `{}` has no content", cmd.prompt)));
    }
    Some(Ok(blocks))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn cmd(args: &[(&str, bool)]) -> PromptCommand {
        PromptCommand {
            command: "mcp__s__p".into(),
            server: "s".into(),
            prompt: "p".into(),
            description: String::new(),
            arguments: args.iter().map(|(n, r)| (n.to_string(), *r)).collect(),
        }
    }

    #[test]
    fn words_bind_in_order_and_the_last_takes_the_rest() {
        let c = cmd(&[("city", true), ("state", false)]);
        assert_eq!(
            Value::Object(bind(&c, "Paris  Ile de France").unwrap()),
            serde_json::json!({"city": "Paris", "state": "Ile de France"})
        );
        assert_eq!(
            Value::Object(bind(&c, "Paris").unwrap()),
            serde_json::json!({"city": "Paris"})
        );
        assert!(bind(&c, "").unwrap_err().contains("missing <city>"));
        assert_eq!(c.usage(), "/mcp__s__p <city> [state]");
        assert!(
            bind(&cmd(&[]), "extra")
                .unwrap_err()
                .contains("takes no more")
        );
    }
}
