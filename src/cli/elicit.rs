//! MCP elicitation on a terminal (`cadre chat`): the server's message, then
//! one question per field of its form, answers checked against the field's
//! type, enum and range before they are sent. The dialogue itself is a pure
//! function over a line reader, so it is tested without a terminal.

use serde_json::{Map, Number, Value};

use crate::mcp::{ElicitAction, ElicitAnswer, Elicitation};

/// Puts `ask` to the user through `read` (one line per call, `None` at end
/// of input) and `write` (text for the user, no newline added).
/// Before the form the user chooses to answer, decline or cancel; end of
/// input at any point cancels.
pub fn dialogue(
    ask: &Elicitation,
    read: &mut dyn FnMut() -> Option<String>,
    write: &mut dyn FnMut(&str),
) -> ElicitAnswer {
    let cancel = ElicitAnswer {
        action: ElicitAction::Cancel,
        content: None,
    };
    write(&format!(
        "\nMCP server `{}` asks for input:\n  {}\n",
        ask.server, ask.message
    ));
    if ask.mode == "url" {
        write(&format!(
            "  Open this page to continue: {}\nDone? [y = done / n = decline / c = cancel] ",
            ask.url.as_deref().unwrap_or("")
        ));
        return match read().as_deref().map(str::trim) {
            Some("y" | "Y" | "yes") => ElicitAnswer {
                action: ElicitAction::Accept,
                content: None,
            },
            Some("c" | "C" | "cancel") | None => cancel,
            Some(_) => ElicitAnswer::declined(),
        };
    }
    write("Answer? [y = answer / n = decline / c = cancel] ");
    match read().as_deref().map(str::trim) {
        Some("y" | "Y" | "yes" | "") => {}
        Some("c" | "C" | "cancel") | None => return cancel,
        Some(_) => return ElicitAnswer::declined(),
    }
    let schema = ask.requested_schema.clone().unwrap_or(Value::Null);
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let empty = Map::new();
    let properties = schema
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let mut content = Map::new();
    for (key, field) in properties {
        let is_required = required.contains(&key.as_str());
        write(&describe(key, field, is_required));
        loop {
            write("> ");
            let Some(line) = read() else {
                return cancel;
            };
            let line = line.trim();
            if line.is_empty() {
                if let Some(d) = field.get("default") {
                    content.insert(key.clone(), d.clone());
                    break;
                }
                if !is_required {
                    break;
                }
                write("  an answer is required\n");
                continue;
            }
            match parse(field, line) {
                Ok(v) => {
                    content.insert(key.clone(), v);
                    break;
                }
                Err(why) => write(&format!("  {why}\n")),
            }
        }
    }
    ElicitAnswer {
        action: ElicitAction::Accept,
        content: Some(content),
    }
}

/// The choices of a single-select field (`enum`, or `oneOf` of `const`s)
/// or of a multi-select field's items: (value, label).
fn choices(field: &Value) -> Vec<(Value, String)> {
    let of = |v: &Value| -> Vec<(Value, String)> {
        if let Some(e) = v.get("enum").and_then(Value::as_array) {
            let names = v.get("enumNames").and_then(Value::as_array);
            return e
                .iter()
                .enumerate()
                .map(|(i, x)| {
                    let label = names
                        .and_then(|n| n.get(i))
                        .and_then(Value::as_str)
                        .map_or_else(|| plain(x), str::to_string);
                    (x.clone(), label)
                })
                .collect();
        }
        for k in ["oneOf", "anyOf"] {
            if let Some(a) = v.get(k).and_then(Value::as_array) {
                return a
                    .iter()
                    .filter_map(|o| {
                        let c = o.get("const")?;
                        let label = o
                            .get("title")
                            .and_then(Value::as_str)
                            .map_or_else(|| plain(c), str::to_string);
                        Some((c.clone(), label))
                    })
                    .collect();
            }
        }
        Vec::new()
    };
    match field.get("items") {
        Some(items) if kind(field) == "array" => of(items),
        _ => of(field),
    }
}

fn kind(field: &Value) -> &str {
    field
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("string")
}

fn plain(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The lines that introduce one field.
fn describe(key: &str, field: &Value, required: bool) -> String {
    let title = field.get("title").and_then(Value::as_str).unwrap_or(key);
    let mut out = format!("{title} ({}", kind(field));
    if let Some(f) = field.get("format").and_then(Value::as_str) {
        out.push_str(&format!(", {f}"));
    }
    if required {
        out.push_str(", required");
    }
    if let Some(d) = field.get("default") {
        out.push_str(&format!(", default {}", plain(d)));
    }
    out.push(')');
    if let Some(d) = field.get("description").and_then(Value::as_str) {
        out.push_str(&format!(": {d}"));
    }
    out.push('\n');
    let options = choices(field);
    if !options.is_empty() {
        let list: Vec<String> = options
            .iter()
            .enumerate()
            .map(|(i, (_, label))| format!("{}) {label}", i + 1))
            .collect();
        out.push_str(&format!("  {}\n", list.join("  ")));
        if kind(field) == "array" {
            out.push_str("  (several: numbers or values separated by commas)\n");
        }
    }
    out
}

/// One answer as the field's type, or why not.
fn parse(field: &Value, line: &str) -> Result<Value, String> {
    let options = choices(field);
    let pick = |word: &str| -> Result<Value, String> {
        if let Ok(n) = word.parse::<usize>()
            && n >= 1
            && n <= options.len()
        {
            return Ok(options[n - 1].0.clone());
        }
        options
            .iter()
            .find(|(v, label)| plain(v) == word || label == word)
            .map(|(v, _)| v.clone())
            .ok_or_else(|| format!("`{word}` is not one of the choices"))
    };
    let range = |x: f64| -> Result<(), String> {
        if let Some(min) = field.get("minimum").and_then(Value::as_f64)
            && x < min
        {
            return Err(format!("at least {min}"));
        }
        if let Some(max) = field.get("maximum").and_then(Value::as_f64)
            && x > max
        {
            return Err(format!("at most {max}"));
        }
        Ok(())
    };
    match kind(field) {
        "boolean" => match line.to_ascii_lowercase().as_str() {
            "y" | "yes" | "true" => Ok(Value::Bool(true)),
            "n" | "no" | "false" => Ok(Value::Bool(false)),
            _ => Err("answer yes or no".into()),
        },
        "integer" => {
            let n: i64 = line.parse().map_err(|_| "a whole number, please")?;
            #[allow(clippy::cast_precision_loss)]
            range(n as f64)?;
            Ok(Value::from(n))
        }
        "number" => {
            let x: f64 = line.parse().map_err(|_| "a number, please")?;
            range(x)?;
            Number::from_f64(x)
                .map(Value::Number)
                .ok_or_else(|| "a finite number, please".into())
        }
        "array" => {
            let picked = line
                .split(',')
                .map(str::trim)
                .filter(|w| !w.is_empty())
                .map(pick)
                .collect::<Result<Vec<Value>, String>>()?;
            let n = picked.len() as u64;
            if let Some(min) = field.get("minItems").and_then(Value::as_u64)
                && n < min
            {
                return Err(format!("choose at least {min}"));
            }
            if let Some(max) = field.get("maxItems").and_then(Value::as_u64)
                && n > max
            {
                return Err(format!("choose at most {max}"));
            }
            Ok(Value::Array(picked))
        }
        _ if !options.is_empty() => pick(line),
        _ => Ok(Value::String(line.to_string())),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn form(schema: Value) -> Elicitation {
        Elicitation {
            server: "s".into(),
            message: "Tell me".into(),
            mode: "form",
            requested_schema: Some(schema),
            url: None,
            elicitation_id: None,
        }
    }

    fn run(ask: &Elicitation, lines: &[&str]) -> (ElicitAnswer, String) {
        let mut input = lines.iter().map(|s| s.to_string());
        let mut shown = String::new();
        let answer = dialogue(ask, &mut || input.next(), &mut |s| shown.push_str(s));
        (answer, shown)
    }

    #[test]
    fn a_form_is_filled_field_by_field_with_retries_defaults_and_choices() {
        let ask = form(json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "title": "Name"},
                "age": {"type": "integer", "minimum": 1, "maximum": 100, "default": 42},
                "ok": {"type": "boolean"},
                "hero": {"type": "string", "oneOf": [{"const": "h1", "title": "Superman"}, {"const": "h2", "title": "Batman"}]},
                "fish": {"type": "array", "items": {"anyOf": [{"const": "f1", "title": "Tuna"}, {"const": "f2", "title": "Trout"}]}, "maxItems": 1},
                "note": {"type": "string"}
            },
            "required": ["name", "ok"]
        }));
        let (answer, shown) = run(
            &ask,
            &[
                "y", "", "Ada", "", "maybe", "yes", "3", "Batman", "1,2", "Trout", "",
            ],
        );
        assert_eq!(answer.action, ElicitAction::Accept);
        assert_eq!(
            Value::Object(answer.content.unwrap()),
            json!({"name": "Ada", "age": 42, "ok": true, "hero": "h2", "fish": ["f2"]})
        );
        assert!(
            shown.contains("MCP server `s` asks for input:\n  Tell me"),
            "{shown}"
        );
        assert!(shown.contains("an answer is required"), "{shown}");
        assert!(shown.contains("answer yes or no"), "{shown}");
        assert!(shown.contains("`3` is not one of the choices"), "{shown}");
        assert!(shown.contains("choose at most 1"), "{shown}");
        assert!(shown.contains("1) Superman  2) Batman"), "{shown}");
    }

    #[test]
    fn decline_cancel_and_end_of_input() {
        let ask = form(
            json!({"type": "object", "properties": {"n": {"type": "number"}}, "required": ["n"]}),
        );
        assert_eq!(run(&ask, &["n"]).0, ElicitAnswer::declined());
        assert_eq!(run(&ask, &["c"]).0.action, ElicitAction::Cancel);
        assert_eq!(run(&ask, &["y", "x"]).0.action, ElicitAction::Cancel);
        let (a, shown) = run(&ask, &["y", "x", "2.5"]);
        assert_eq!(a.content.unwrap()["n"], json!(2.5));
        assert!(shown.contains("a number, please"));
    }
}
