//! Conversation invariants checked on every recorded request.
//!
//! Anthropic (`/v1/messages`): the first message is from the user, roles
//! alternate, every tool_use in an assistant message is answered by exactly
//! one tool_result in the next user message, and every tool_result answers
//! a tool_use of the message just before it. OpenAI (`/chat/completions`):
//! every assistant `tool_calls` id is answered by exactly one `tool`
//! message before the next assistant or user message.

use std::collections::BTreeMap;

use serde_json::Value;

use super::server::RecordedRequest;

/// The violations in one request (empty when it is fine or not a model
/// request).
pub fn check(req: &RecordedRequest) -> Vec<String> {
    if req.path.ends_with("/messages") {
        check_anthropic(&req.json)
    } else if req.path.ends_with("/chat/completions") {
        check_openai(&req.json)
    } else {
        Vec::new()
    }
}

fn role(m: &Value) -> &str {
    m.get("role").and_then(Value::as_str).unwrap_or("")
}

fn blocks(m: &Value) -> &[Value] {
    m.get("content").and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[])
}

fn of_type<'a>(m: &'a Value, kind: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
    blocks(m).iter().filter(move |b| b.get("type").and_then(Value::as_str) == Some(kind))
}

/// Checks an Anthropic Messages request body.
pub fn check_anthropic(body: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let Some(messages) = body.get("messages").and_then(Value::as_array) else {
        return vec!["no `messages` array".to_string()];
    };
    if messages.is_empty() {
        out.push("`messages` is empty".to_string());
    }
    if let Some(first) = messages.first()
        && role(first) != "user"
    {
        out.push(format!("the first message has role `{}`, not `user`", role(first)));
    }
    for (i, pair) in messages.windows(2).enumerate() {
        if role(&pair[0]) == role(&pair[1]) {
            out.push(format!("messages {i} and {} both have role `{}`", i + 1, role(&pair[0])));
        }
    }
    for (i, m) in messages.iter().enumerate() {
        if role(m) == "user" {
            let asked: Vec<&str> = if i == 0 {
                Vec::new()
            } else {
                of_type(&messages[i - 1], "tool_use").filter_map(|b| b.get("id").and_then(Value::as_str)).collect()
            };
            for r in of_type(m, "tool_result") {
                let id = r.get("tool_use_id").and_then(Value::as_str).unwrap_or("");
                if !asked.contains(&id) {
                    out.push(format!("message {i}: tool_result `{id}` answers no tool_use of the previous message"));
                }
            }
        }
        if role(m) != "assistant" {
            continue;
        }
        let ids: Vec<&str> = of_type(m, "tool_use").filter_map(|b| b.get("id").and_then(Value::as_str)).collect();
        if ids.is_empty() {
            continue;
        }
        let Some(next) = messages.get(i + 1) else {
            out.push(format!("message {i}: tool_use blocks {ids:?} are the last message"));
            continue;
        };
        let mut answers: BTreeMap<&str, usize> = BTreeMap::new();
        for r in of_type(next, "tool_result") {
            *answers.entry(r.get("tool_use_id").and_then(Value::as_str).unwrap_or("")).or_default() += 1;
        }
        for id in ids {
            match answers.get(id).copied().unwrap_or(0) {
                1 => {}
                n => out.push(format!("message {i}: tool_use `{id}` has {n} tool_results in the next message")),
            }
        }
    }
    out
}

/// Checks an OpenAI chat-completions request body.
pub fn check_openai(body: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let Some(messages) = body.get("messages").and_then(Value::as_array) else {
        return vec!["no `messages` array".to_string()];
    };
    for (i, m) in messages.iter().enumerate() {
        let Some(calls) = m.get("tool_calls").and_then(Value::as_array) else { continue };
        let mut answers: BTreeMap<&str, usize> = BTreeMap::new();
        for next in messages[i + 1..].iter().take_while(|n| role(n) == "tool") {
            *answers.entry(next.get("tool_call_id").and_then(Value::as_str).unwrap_or("")).or_default() += 1;
        }
        for id in calls.iter().filter_map(|c| c.get("id").and_then(Value::as_str)) {
            match answers.get(id).copied().unwrap_or(0) {
                1 => {}
                n => out.push(format!("message {i}: tool call `{id}` has {n} tool messages after it")),
            }
        }
    }
    out
}
