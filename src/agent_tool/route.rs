//! The decision table (SPEC §6) as a pure function.

use serde::Deserialize;

use crate::catalog::{FORK_AGENT, GENERAL_PURPOSE};

/// An Agent call's input, after validation against the untrimmed schema.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct AgentInput {
    pub description: String,
    pub prompt: String,
    #[serde(default)]
    pub subagent_type: Option<String>,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub run_in_background: Option<bool>,
    #[serde(default)]
    pub isolation: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub fork: Option<bool>,
    /// With AGENT_TEAMS: the team a named spawn joins as a teammate.
    #[serde(default)]
    pub team_name: Option<String>,
    /// Reasoning effort for the child; wins over the definition's.
    #[serde(default)]
    pub effort: Option<String>,
    /// With AGENT_TEAMS: `plan` starts a teammate in plan mode (read-only
    /// until the lead approves its plan).
    #[serde(default)]
    pub mode: Option<String>,
}

/// Where a call goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// A fork of the caller's conversation.
    Fork,
    /// A named agent type (`general-purpose` when none was given). Whether it
    /// exists is checked against the catalog afterwards.
    Named(String),
}

/// A call the table refuses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RouteError {
    /// The fork route was chosen inside a fork child.
    ForkInFork,
}

/// Routes a call.
///
/// | fork  | subagent_type | fork effective | route                         |
/// |-------|---------------|----------------|-------------------------------|
/// | true  | set           | yes            | fork (type ignored)           |
/// | true  | omitted       | yes            | fork                          |
/// | true  | any           | no             | named if set, else general    |
/// | no    | set           | any            | named                         |
/// | no    | omitted       | any            | general-purpose               |
///
/// `subagent_type: "fork"` means `fork: true` while fork is effective; while
/// it is not, it names an agent type like any other (and is not found).
pub fn route(
    input: &AgentInput,
    fork_effective: bool,
    caller_is_fork_child: bool,
) -> Result<Route, RouteError> {
    let asks_fork = input.fork == Some(true) || input.subagent_type.as_deref() == Some(FORK_AGENT);
    if fork_effective && asks_fork {
        if caller_is_fork_child {
            return Err(RouteError::ForkInFork);
        }
        return Ok(Route::Fork);
    }
    let name = input
        .subagent_type
        .as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .unwrap_or(GENERAL_PURPOSE);
    Ok(Route::Named(name.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(fork: Option<bool>, ty: Option<&str>) -> AgentInput {
        AgentInput {
            description: "d".into(),
            prompt: "p".into(),
            fork,
            subagent_type: ty.map(str::to_string),
            ..Default::default()
        }
    }

    fn named(n: &str) -> Result<Route, RouteError> {
        Ok(Route::Named(n.to_string()))
    }

    #[test]
    fn every_row_of_the_decision_table() {
        // fork=true, type set, effective → fork, type ignored
        assert_eq!(
            route(&input(Some(true), Some("Explore")), true, false),
            Ok(Route::Fork)
        );
        // fork=true, type omitted, effective → fork
        assert_eq!(
            route(&input(Some(true), None), true, false),
            Ok(Route::Fork)
        );
        // fork=true, not effective → silently ignored
        assert_eq!(
            route(&input(Some(true), Some("Explore")), false, false),
            named("Explore")
        );
        assert_eq!(
            route(&input(Some(true), None), false, false),
            named(GENERAL_PURPOSE)
        );
        // fork false/omitted, type set → named, whatever the flag
        for eff in [true, false] {
            assert_eq!(
                route(&input(Some(false), Some("Plan")), eff, false),
                named("Plan")
            );
            assert_eq!(route(&input(None, Some("Plan")), eff, false), named("Plan"));
            assert_eq!(
                route(&input(None, None), eff, false),
                named(GENERAL_PURPOSE)
            );
            assert_eq!(
                route(&input(Some(false), None), eff, false),
                named(GENERAL_PURPOSE)
            );
        }
    }

    #[test]
    fn fork_type_is_a_synonym_only_while_effective() {
        assert_eq!(
            route(&input(None, Some("fork")), true, false),
            Ok(Route::Fork)
        );
        assert_eq!(
            route(&input(None, Some("fork")), false, false),
            named("fork")
        );
    }

    #[test]
    fn fork_inside_a_fork_is_refused_but_named_agents_are_not() {
        assert_eq!(
            route(&input(Some(true), None), true, true),
            Err(RouteError::ForkInFork)
        );
        assert_eq!(
            route(&input(None, Some("fork")), true, true),
            Err(RouteError::ForkInFork)
        );
        assert_eq!(
            route(&input(None, Some("Explore")), true, true),
            named("Explore")
        );
        // With fork not effective the flag is ignored, so there is nothing to refuse.
        assert_eq!(
            route(&input(Some(true), None), false, true),
            named(GENERAL_PURPOSE)
        );
    }
}
