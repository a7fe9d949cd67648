//! Tool calls written as text: the `json-text` fallback for models that
//! never emit native tool calls but write the call as a JSON object.
//!
//! When a reply holds no tool_use block, its text blocks are searched for
//! the first JSON object of the shape `{"name": N, "arguments" | "parameters"
//! | "input": {...}}` whose `N` is one of the offered tools. That object
//! (with a ```json fence or `<tool_call>` tags that hold nothing else) is
//! cut out of the text, the prose around it is kept, and a tool_use block is
//! appended to the message. Objects naming no offered tool stay text. This
//! module works on a finished [`ModelResponse`]; it knows nothing of HTTP,
//! the loop or transcripts.

use serde_json::{Map, Value};

use crate::message::{ContentBlock, ModelResponse, StopReason};

/// The keys that may hold a text tool call's arguments, in order of
/// preference.
const ARGUMENT_KEYS: [&str; 3] = ["arguments", "parameters", "input"];

/// Texts longer than this are not searched (each `{` starts a parse).
const MAX_SCAN_BYTES: usize = 256 * 1024;

/// A tool call found in a text: what to cut and what to call.
#[derive(Debug, Clone, PartialEq)]
struct Found {
    /// Byte range to remove from the text (the object, and its wrapper).
    cut: std::ops::Range<usize>,
    name: String,
    input: Value,
}

/// Rewrites `response` when it has no native tool call and one of its text
/// blocks holds a JSON tool call naming one of `offered`: the call becomes
/// a tool_use block with id `id`, the stop reason becomes tool use, and
/// `id` is listed in `converted_tool_calls`. Otherwise leaves it untouched.
pub fn convert(response: &mut ModelResponse, offered: &[&str], id: &str) {
    if response.message.tool_uses().next().is_some() {
        return;
    }
    let found = response
        .message
        .content
        .iter()
        .enumerate()
        .find_map(|(i, block)| {
            let text = block.as_text()?;
            find_call(text, offered).map(|f| (i, f))
        });
    let Some((index, found)) = found else {
        return;
    };
    let content = &mut response.message.content;
    if let Some(ContentBlock::Text { text }) = content.get_mut(index) {
        let rest = format!("{}{}", &text[..found.cut.start], &text[found.cut.end..]);
        *text = tidy(&rest);
        if text.is_empty() {
            content.remove(index);
        }
    }
    content.push(ContentBlock::ToolUse {
        id: id.to_string(),
        name: found.name,
        input: found.input,
    });
    response.stop_reason = Some(StopReason::ToolUse);
    response.converted_tool_calls.push(id.to_string());
}

/// The first JSON tool call in `text` naming an offered tool.
fn find_call(text: &str, offered: &[&str]) -> Option<Found> {
    if text.len() > MAX_SCAN_BYTES {
        return None;
    }
    for (start, _) in text.match_indices('{') {
        let mut values = serde_json::Deserializer::from_str(&text[start..]).into_iter::<Value>();
        let Some(Ok(value)) = values.next() else {
            continue;
        };
        let end = start + values.byte_offset();
        let Some((name, input)) = as_call(value) else {
            continue;
        };
        if !offered.contains(&name.as_str()) {
            continue;
        }
        return Some(Found {
            cut: widen(text, start..end),
            name,
            input,
        });
    }
    None
}

/// `(name, arguments)` when `value` has the shape of a tool call.
fn as_call(value: Value) -> Option<(String, Value)> {
    let Value::Object(mut map) = value else {
        return None;
    };
    let name = match map.remove("name") {
        Some(Value::String(name)) => name,
        _ => return None,
    };
    let input = ARGUMENT_KEYS
        .iter()
        .find_map(|key| arguments(map.remove(*key)?))?;
    Some((name, input))
}

/// Arguments as an object; a string holding a JSON object (the OpenAI
/// wire habit) is decoded.
fn arguments(value: Value) -> Option<Value> {
    match value {
        Value::Object(_) => Some(value),
        Value::String(s) => match serde_json::from_str::<Value>(&s) {
            Ok(v @ Value::Object(_)) => Some(v),
            _ => None,
        },
        Value::Null => Some(Value::Object(Map::new())),
        _ => None,
    }
}

/// Grows `range` to a Markdown code fence or `<tool_call>` tags around it
/// when they hold nothing else.
fn widen(text: &str, range: std::ops::Range<usize>) -> std::ops::Range<usize> {
    let before = &text[..range.start];
    let after = &text[range.end..];
    let trimmed_before = before.trim_end();
    let trimmed_after = after.trim_start();
    for (open, close) in [("<tool_call>", "</tool_call>")] {
        if trimmed_before.ends_with(open) && trimmed_after.starts_with(close) {
            let start = trimmed_before.len() - open.len();
            let end = text.len() - trimmed_after.len() + close.len();
            return widen(text, start..end);
        }
    }
    // A fence: "```" or "```json" (any info string) on the line before,
    // "```" right after.
    if let Some(fence_start) = trimmed_before.rfind("```") {
        let info = &trimmed_before[fence_start + 3..];
        let info_ok = !info.contains('\n') && info.chars().all(|c| c.is_ascii_alphanumeric());
        if info_ok && trimmed_after.starts_with("```") {
            let end = text.len() - trimmed_after.len() + 3;
            return fence_start..end;
        }
    }
    range
}

/// The prose left after a cut: outer whitespace trimmed, and no run of
/// more than one blank line where the call was.
fn tidy(text: &str) -> String {
    let mut out = text.trim().to_string();
    while out.contains("\n\n\n") {
        out = out.replace("\n\n\n", "\n\n");
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::message::{Message, Usage};
    use serde_json::json;

    const OFFERED: &[&str] = &["Read", "Glob", "Agent"];

    fn response(blocks: Vec<ContentBlock>) -> ModelResponse {
        ModelResponse {
            message: Message::assistant(blocks),
            stop_reason: Some(StopReason::EndTurn),
            usage: Usage::default(),
            model: "m".into(),
            invalid_tool_inputs: Vec::new(),
            converted_tool_calls: Vec::new(),
        }
    }

    fn run(text: &str) -> ModelResponse {
        let mut r = response(vec![ContentBlock::text(text)]);
        convert(&mut r, OFFERED, "toolu_text_1");
        r
    }

    fn call(r: &ModelResponse) -> Option<(String, Value)> {
        r.message
            .tool_uses()
            .next()
            .map(|(_, n, i)| (n.to_string(), i.clone()))
    }

    #[test]
    fn a_fenced_call_becomes_a_tool_use_and_the_fence_goes() {
        let r = run(
            "I will look.\n\n```json\n{\"name\": \"Glob\", \"arguments\": {\"pattern\": \"*.rs\"}}\n```\n\nThen report.",
        );
        assert_eq!(call(&r), Some(("Glob".into(), json!({"pattern": "*.rs"}))));
        assert_eq!(
            r.message.content[0],
            ContentBlock::text("I will look.\n\nThen report.")
        );
        assert_eq!(r.stop_reason, Some(StopReason::ToolUse));
        assert_eq!(r.converted_tool_calls, vec!["toolu_text_1".to_string()]);
        assert_eq!(r.message.tool_uses().next().unwrap().0, "toolu_text_1");
    }

    #[test]
    fn a_bare_call_alone_leaves_no_text_block() {
        let r = run("{\"name\": \"Read\", \"arguments\": {\"file_path\": \"README.md\"}}");
        assert_eq!(
            call(&r),
            Some(("Read".into(), json!({"file_path": "README.md"})))
        );
        assert_eq!(r.message.content.len(), 1);
    }

    #[test]
    fn prose_around_a_bare_call_is_kept() {
        let r = run(
            "Let me read it: {\"name\": \"Read\", \"arguments\": {\"file_path\": \"a\"}} and see.",
        );
        assert!(call(&r).is_some());
        assert_eq!(
            r.message.content[0],
            ContentBlock::text("Let me read it:  and see.")
        );
    }

    #[test]
    fn braces_inside_strings_do_not_end_the_object() {
        let r = run(
            r#"{"name": "Agent", "arguments": {"prompt": "find `fn x() { }` and \"}\" please", "subagent_type": "Explore"}}"#,
        );
        let (name, input) = call(&r).unwrap();
        assert_eq!(name, "Agent");
        assert_eq!(input["prompt"], "find `fn x() { }` and \"}\" please");
        assert_eq!(input["subagent_type"], "Explore");
    }

    #[test]
    fn an_unknown_tool_name_stays_text() {
        let text = "```json\n{\"name\": \"Launch\", \"arguments\": {}}\n```";
        let r = run(text);
        assert!(call(&r).is_none());
        assert_eq!(r.message.content[0], ContentBlock::text(text));
        assert!(r.converted_tool_calls.is_empty());
        assert_eq!(r.stop_reason, Some(StopReason::EndTurn));
    }

    #[test]
    fn invalid_json_stays_text() {
        let text = "{\"name\": \"Read\", \"arguments\": {\"file_path\": \"a\"}";
        let r = run(text);
        assert!(call(&r).is_none());
        assert_eq!(r.message.content[0], ContentBlock::text(text));
    }

    #[test]
    fn parameters_and_input_are_synonyms() {
        for key in ["parameters", "input"] {
            let r = run(&format!(
                "{{\"name\": \"Glob\", \"{key}\": {{\"pattern\": \"x\"}}}}"
            ));
            assert_eq!(
                call(&r),
                Some(("Glob".into(), json!({"pattern": "x"}))),
                "{key}"
            );
        }
    }

    #[test]
    fn arguments_as_a_json_string_are_decoded() {
        let r = run(r#"{"name": "Glob", "arguments": "{\"pattern\": \"x\"}"}"#);
        assert_eq!(call(&r), Some(("Glob".into(), json!({"pattern": "x"}))));
    }

    #[test]
    fn the_first_object_naming_an_offered_tool_wins() {
        let r = run(
            "{\"name\": \"Nope\", \"arguments\": {}}\n{\"name\": \"Glob\", \"arguments\": {\"pattern\": \"1\"}}\n{\"name\": \"Read\", \"arguments\": {\"file_path\": \"2\"}}",
        );
        assert_eq!(call(&r), Some(("Glob".into(), json!({"pattern": "1"}))));
        assert_eq!(r.message.tool_uses().count(), 1);
        let rest = r.message.content[0].as_text().unwrap();
        assert!(rest.contains("Nope") && rest.contains("Read") && !rest.contains("Glob"));
    }

    #[test]
    fn an_object_without_arguments_is_not_a_call() {
        let r = run("{\"name\": \"Glob\"}");
        assert!(call(&r).is_none());
    }

    #[test]
    fn tool_call_tags_are_removed_with_the_object() {
        let r = run(
            "Looking.\n<tool_call>\n{\"name\": \"Glob\", \"arguments\": {\"pattern\": \"x\"}}\n</tool_call>",
        );
        assert!(call(&r).is_some());
        assert_eq!(r.message.content[0], ContentBlock::text("Looking."));
    }

    #[test]
    fn a_native_tool_call_disables_the_fallback() {
        let mut r = response(vec![
            ContentBlock::text("{\"name\": \"Glob\", \"arguments\": {}}"),
            ContentBlock::ToolUse {
                id: "call_1".into(),
                name: "Read".into(),
                input: json!({}),
            },
        ]);
        convert(&mut r, OFFERED, "toolu_text_1");
        assert_eq!(r.message.tool_uses().count(), 1);
        assert!(r.converted_tool_calls.is_empty());
    }

    #[test]
    fn later_text_blocks_are_searched_too() {
        let mut r = response(vec![
            ContentBlock::text("thinking aloud"),
            ContentBlock::text("{\"name\": \"Glob\", \"input\": {\"pattern\": \"x\"}}"),
        ]);
        convert(&mut r, OFFERED, "id");
        assert_eq!(r.message.content.len(), 2);
        assert_eq!(r.message.content[0], ContentBlock::text("thinking aloud"));
        assert!(matches!(r.message.content[1], ContentBlock::ToolUse { .. }));
    }
}
