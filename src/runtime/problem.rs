//! Why a session stopped short, as the model is told of it: a
//! [`RunProblem`] is data, worded by the `run_problem` template (and a
//! provider failure by `provider_problem`) in a failed sub-agent's result,
//! a task notification and a teammate's end notice. [`RunError`]'s
//! `Display` stays cadre's account for people (the CLI, logs, meta files).

use serde::{Deserialize, Serialize};

use crate::provider::ProviderProblem;

use super::session::{RunError, StopKind};

/// Serialisable both ways: a task on the worker fleet sends it to its
/// parent in its notice.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RunProblem {
    /// A model request failed for good.
    Provider { provider: ProviderProblem },
    /// A template could not be rendered: its name (an agent body's is its
    /// file) and what is wrong with it, as `agents validate` reports it —
    /// a diagnostic of the user's file, which the model passes on.
    Template { name: String, detail: String },
    /// A limit ended it; `text` is its `limit_*` template, rendered.
    Limit { text: String },
    /// It was cancelled (TaskStop, the caller's end, an interrupt).
    Cancelled,
    /// It used all its turns.
    MaxTurns,
    /// Its answers kept being cut at the output limit.
    MaxTokens,
    /// The repeated-call guard ended it: it kept repeating a call after
    /// being told to answer.
    RepeatedCalls,
    /// Its task backend (the worker fleet) could not queue, start or
    /// finish it; `text` is its `error_task_backend` template, rendered.
    Backend { text: String },
}

/// Why a task backend (the worker fleet) could not queue or re-queue a
/// task, as the model is told of it: data, worded by the
/// `error_task_backend` template (stage `queue`). The backend's own
/// error, with its server's words, is [`QueueFailed::detail`], for people.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum QueueProblem {
    /// Its server could not be reached (its URL is not told: it may
    /// carry a user name and password).
    Unreachable,
    /// Its server failed a request (a stream, a bucket, a publish).
    Broker,
    /// The session keeps no transcripts, which a worker starts from.
    NoTranscripts,
    /// Its settings (`[distributed]`) are not valid.
    Settings,
}

/// A task its backend could not queue: what the model is told, and the
/// backend's own account for the log, the meta file and `tasks list`.
#[derive(Debug, Clone)]
pub struct QueueFailed {
    pub problem: QueueProblem,
    pub detail: String,
}

impl From<&RunError> for RunProblem {
    fn from(e: &RunError) -> RunProblem {
        match e {
            RunError::Provider(p) => RunProblem::Provider {
                provider: ProviderProblem::from(p),
            },
            RunError::Template(t) => RunProblem::Template {
                name: t.name.clone(),
                detail: t.message.clone(),
            },
            RunError::Cancelled => RunProblem::Cancelled,
            RunError::Limit(text) => RunProblem::Limit { text: text.clone() },
        }
    }
}

impl RunProblem {
    /// How a task ended by `e` is told: the limit that stopped it (its
    /// text, rendered), or else the error.
    pub fn ended(e: &RunError, limit: Option<String>) -> RunProblem {
        match limit {
            Some(text) => RunProblem::Limit { text },
            None => RunProblem::from(e),
        }
    }

    /// A session that ended on its own for another reason than finishing
    /// its answer; `None` for `end_turn`.
    pub fn stopped(stop: StopKind) -> Option<RunProblem> {
        match stop {
            StopKind::EndTurn => None,
            StopKind::MaxTurns => Some(RunProblem::MaxTurns),
            StopKind::MaxTokens => Some(RunProblem::MaxTokens),
            StopKind::RepeatedCalls => Some(RunProblem::RepeatedCalls),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::provider::{ProviderError, ProviderErrorKind, ServerSaid};
    use crate::runtime::texts::SubagentFailed;
    use crate::templates::Templates;

    /// Every kind of problem is worded by the embedded templates, and
    /// none of cadre's own error text gets through.
    #[test]
    fn every_problem_is_worded_by_its_template_and_not_by_display() {
        let (t, _) = Templates::load(None);
        let kinds = [
            ProviderErrorKind::Status(500),
            ProviderErrorKind::Status(429),
            ProviderErrorKind::Status(529),
            ProviderErrorKind::Network,
            ProviderErrorKind::Timeout,
            ProviderErrorKind::Stream,
            ProviderErrorKind::BadResponse,
            ProviderErrorKind::Config,
        ];
        let mut errors: Vec<RunError> = kinds
            .into_iter()
            .map(|k| RunError::Provider(ProviderError::new(k, "CADRE'S OWN WORDS")))
            .collect();
        errors.push(RunError::Provider(ProviderError {
            server: Some(ServerSaid {
                error_type: Some("api_error".into()),
                message: "the server's words".into(),
            }),
            ..ProviderError::new(ProviderErrorKind::Stream, "CADRE'S OWN WORDS")
        }));
        errors.push(RunError::Cancelled);
        errors.push(RunError::Limit("Stopped by the stall limit.".into()));
        errors.push(RunError::Template(crate::templates::RenderError {
            name: "main_system".into(),
            message: "partial `p` includes itself (p → p)".into(),
        }));
        let mut problems: Vec<RunProblem> = errors.iter().map(RunProblem::from).collect();
        problems.extend(
            [
                StopKind::MaxTurns,
                StopKind::MaxTokens,
                StopKind::RepeatedCalls,
            ]
            .map(|s| RunProblem::stopped(s).unwrap()),
        );
        assert_eq!(RunProblem::stopped(StopKind::EndTurn), None);
        let mut texts = std::collections::BTreeSet::new();
        for problem in problems {
            let text = t
                .render(&SubagentFailed {
                    description: "Find callers".into(),
                    problem: problem.clone(),
                    worktree_path: None,
                    worktree_branch: None,
                })
                .unwrap();
            let said = text.trim_start_matches("Agent \"Find callers\" failed: ");
            assert!(!said.is_empty() && said != text, "{problem:?}: {text:?}");
            assert!(!text.contains("OWN WORDS"), "{problem:?}: {text}");
            if let RunProblem::Template { name, detail } = &problem {
                // The file's diagnostic is data the user needs, passed on.
                assert!(text.contains(name) && text.contains(detail), "{text}");
            }
            texts.insert(said.to_string());
        }
        // Each kind has its own words (429 and 529 included).
        assert_eq!(texts.len(), 15, "{texts:#?}");
    }
}
