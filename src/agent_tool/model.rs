//! Which model a child runs on, and which layer decided it (SPEC §7).

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

/// The layer that chose a child's model; recorded in its meta file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ModelSource {
    /// `CADRE_SUBAGENT_MODEL` or `CLAUDE_CODE_SUBAGENT_MODEL`.
    Env,
    /// The Agent call's `model`.
    Call,
    /// The agent definition's `model`.
    Definition,
    /// The parent's model.
    Inherit,
}

impl fmt::Display for ModelSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ModelSource::Env => "env",
            ModelSource::Call => "call",
            ModelSource::Definition => "definition",
            ModelSource::Inherit => "inherit",
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResolvedModel {
    pub model: String,
    pub source: ModelSource,
}

/// The three family aliases that take part in same-family reuse.
const FAMILIES: &[&str] = &["haiku", "sonnet", "opus"];

/// Resolves one written model against the parent's: a bare family alias
/// whose family is the parent's becomes the parent's exact id; any other
/// alias goes through `[models]`; anything else is a model id.
fn resolve_one(written: &str, parent: &str, aliases: &BTreeMap<String, String>) -> String {
    let w = written.trim();
    if FAMILIES.contains(&w) && parent.to_ascii_lowercase().contains(w) {
        return parent.to_string();
    }
    aliases.get(w).cloned().unwrap_or_else(|| w.to_string())
}

/// A named agent's model: the env override, else the call's `model`, else
/// the definition's (`inherit` or absent → the parent's).
pub fn resolve_model(
    env_override: Option<&str>,
    call: Option<&str>,
    definition: Option<&str>,
    parent: &str,
    aliases: &BTreeMap<String, String>,
) -> ResolvedModel {
    fn present(s: Option<&str>) -> Option<&str> {
        s.map(str::trim).filter(|s| !s.is_empty())
    }
    if let Some(m) = present(env_override) {
        return ResolvedModel {
            model: aliases.get(m).cloned().unwrap_or_else(|| m.to_string()),
            source: ModelSource::Env,
        };
    }
    if let Some(m) = present(call) {
        return ResolvedModel {
            model: resolve_one(m, parent, aliases),
            source: ModelSource::Call,
        };
    }
    match present(definition) {
        Some(m) if !m.eq_ignore_ascii_case("inherit") => ResolvedModel {
            model: resolve_one(m, parent, aliases),
            source: ModelSource::Definition,
        },
        _ => ResolvedModel {
            model: parent.to_string(),
            source: ModelSource::Inherit,
        },
    }
}

/// A fork's model: the env override, else exactly the parent's. The call's
/// `model` is ignored for forks.
pub fn resolve_fork_model(
    env_override: Option<&str>,
    parent: &str,
    aliases: &BTreeMap<String, String>,
) -> ResolvedModel {
    resolve_model(env_override, None, None, parent, aliases)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn aliases() -> BTreeMap<String, String> {
        [
            ("haiku", "claude-haiku-4-5"),
            ("sonnet", "claude-sonnet-4-5"),
            ("opus", "claude-opus-4-5"),
            ("fast", "tiny-1"),
        ]
        .into_iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
    }

    const PARENT: &str = "claude-sonnet-4-20250514";

    #[test]
    fn order_is_env_call_definition_inherit() {
        let a = aliases();
        let r = resolve_model(Some("haiku"), Some("opus"), Some("sonnet"), PARENT, &a);
        assert_eq!(
            r,
            ResolvedModel {
                model: "claude-haiku-4-5".into(),
                source: ModelSource::Env
            }
        );
        let r = resolve_model(None, Some("opus"), Some("haiku"), PARENT, &a);
        assert_eq!(
            r,
            ResolvedModel {
                model: "claude-opus-4-5".into(),
                source: ModelSource::Call
            }
        );
        let r = resolve_model(None, None, Some("haiku"), PARENT, &a);
        assert_eq!(
            r,
            ResolvedModel {
                model: "claude-haiku-4-5".into(),
                source: ModelSource::Definition
            }
        );
        let r = resolve_model(None, None, None, PARENT, &a);
        assert_eq!(
            r,
            ResolvedModel {
                model: PARENT.into(),
                source: ModelSource::Inherit
            }
        );
        let r = resolve_model(None, None, Some("INHERIT"), PARENT, &a);
        assert_eq!(r.source, ModelSource::Inherit);
    }

    #[test]
    fn same_family_alias_reuses_the_parents_exact_id() {
        let a = aliases();
        assert_eq!(
            resolve_model(None, Some("sonnet"), None, PARENT, &a).model,
            PARENT
        );
        assert_eq!(
            resolve_model(None, None, Some("sonnet"), PARENT, &a).model,
            PARENT
        );
        // Other aliases and full ids go through the table or stay as written.
        assert_eq!(
            resolve_model(None, Some("fast"), None, PARENT, &a).model,
            "tiny-1"
        );
        assert_eq!(
            resolve_model(None, Some("my-model"), None, PARENT, &a).model,
            "my-model"
        );
    }

    #[test]
    fn forks_ignore_everything_but_the_env_override() {
        let a = aliases();
        assert_eq!(resolve_fork_model(None, PARENT, &a).model, PARENT);
        assert_eq!(
            resolve_fork_model(Some("haiku"), PARENT, &a).model,
            "claude-haiku-4-5"
        );
    }
}
