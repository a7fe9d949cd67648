//! Reasoning effort: which level a session asks its model for, trimmed to
//! what that model accepts (`effort_levels` in the settings, by model id or
//! id prefix). A level the model lacks is lowered to the nearest accepted
//! level below it; a model with no entry, or no accepted level at or below
//! the request, gets none. Pure, so `agents show --effective` and the
//! request agree.

use std::collections::BTreeMap;

use serde::Serialize;

/// Every level cadre knows, lowest first (OpenAI's `minimal` through
/// Anthropic's `max`).
pub const LEVELS: &[&str] = crate::config::EFFORT_LEVELS;

/// The effort a session asked for and what its model will be sent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Effort {
    /// As asked (the Agent call's `effort`, else the definition's).
    pub requested: String,
    /// What the request carries; `None`: nothing is sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sent: Option<String>,
    /// Why `sent` differs from `requested`, when it does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// The levels `model` accepts: the entry of its id, else of the longest
/// key it starts with.
pub fn accepted<'a>(model: &str, table: &'a BTreeMap<String, Vec<String>>) -> Option<&'a [String]> {
    table
        .get(model)
        .or_else(|| {
            table
                .iter()
                .filter(|(k, _)| model.starts_with(k.as_str()))
                .max_by_key(|(k, _)| k.len())
                .map(|(_, v)| v)
        })
        .map(Vec::as_slice)
}

/// `requested` for `model`, trimmed as the module says.
pub fn trim_effort(requested: &str, model: &str, table: &BTreeMap<String, Vec<String>>) -> Effort {
    let requested = requested.trim().to_ascii_lowercase();
    let effort = |sent: Option<String>, note: Option<String>| Effort {
        requested: requested.clone(),
        sent,
        note,
    };
    let Some(rank) = LEVELS.iter().position(|l| *l == requested) else {
        return effort(
            None,
            Some(format!(
                "not sent: `{requested}` is not a level ({})",
                LEVELS.join(", ")
            )),
        );
    };
    let Some(levels) = accepted(model, table) else {
        return effort(
            None,
            Some(format!(
                "not sent: no effort levels are configured for {model} (effort_levels)"
            )),
        );
    };
    let best = LEVELS[..=rank]
        .iter()
        .rev()
        .find(|l| levels.iter().any(|a| a == *l));
    match best {
        Some(l) if *l == requested => effort(Some(requested.clone()), None),
        Some(l) => effort(
            Some((*l).to_string()),
            Some(format!(
                "{model} does not accept `{requested}`; `{l}` is sent"
            )),
        ),
        None => effort(
            None,
            Some(format!(
                "not sent: {model} accepts only {}",
                levels.join(", ")
            )),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> BTreeMap<String, Vec<String>> {
        let l = |v: &[&str]| v.iter().map(|s| s.to_string()).collect();
        BTreeMap::from([
            ("claude-opus-4-5".to_string(), l(&["low", "medium", "high"])),
            (
                "claude-opus-4-6".to_string(),
                l(&["low", "medium", "high", "max"]),
            ),
            (
                "gpt-5".to_string(),
                l(&["minimal", "low", "medium", "high"]),
            ),
        ])
    }

    #[test]
    fn levels_are_kept_lowered_or_dropped() {
        let t = table();
        assert_eq!(
            trim_effort("max", "claude-opus-4-6", &t).sent.as_deref(),
            Some("max")
        );
        let lowered = trim_effort("max", "claude-opus-4-5-20251101", &t);
        assert_eq!(lowered.sent.as_deref(), Some("high"));
        assert!(lowered.note.is_some_and(|n| n.contains("`high` is sent")));
        assert_eq!(
            trim_effort("High", "gpt-5-mini", &t).sent.as_deref(),
            Some("high")
        );
        assert_eq!(trim_effort("minimal", "claude-opus-4-5", &t).sent, None);
        let unknown = trim_effort("low", "claude-sonnet-4-5", &t);
        assert_eq!(unknown.sent, None);
        assert!(unknown.note.is_some_and(|n| n.contains("no effort levels")));
        assert_eq!(trim_effort("ultra", "gpt-5", &t).sent, None);
    }
}
