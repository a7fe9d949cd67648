//! AskUserQuestion: the model asks the user one to four multiple-choice
//! questions (Claude Code's schema: `questions: [{question, header,
//! options: [{label, description}], multiSelect}]`).
//!
//! Who answers is the front end's [`Questioner`]: `cadre chat` shows a
//! choice prompt, an SDK client answers through `can_use_tool` (the
//! answers come back in `updatedInput.answers`, as Claude Code's SDK does).
//! Without one (a plain `cadre run`), the call is an error result that
//! tells the model to decide on its own. Every text is a template.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures_util::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::Value;
#[cfg(test)]
use serde_json::json;

use super::session::Session;
use super::texts::{
    AskUserAnswers, AskUserDeclined, AskUserUnavailable, InvalidInput, QuestionAnswer,
};
use crate::snapshot::Snapshot;

/// The tool's name.
pub const ASK_USER_QUESTION: &str = "AskUserQuestion";

/// One choice of a question.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuestionOption {
    pub label: String,
    #[serde(default)]
    pub description: String,
}

/// One question, as the model writes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Question {
    pub question: String,
    #[serde(default)]
    pub header: String,
    pub options: Vec<QuestionOption>,
    #[serde(default, rename = "multiSelect")]
    pub multi_select: bool,
}

#[derive(Deserialize)]
struct AskInput {
    questions: Vec<Question>,
}

/// Questions for the user, from one call.
#[derive(Debug, Clone)]
pub struct QuestionRequest {
    pub agent_id: String,
    pub tool_use_id: String,
    /// The call's input as the model sent it.
    pub input: Value,
    pub questions: Vec<Question>,
}

/// Why questions got no answers.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "why", rename_all = "snake_case")]
pub enum Unanswered {
    /// The user dismissed the prompt.
    Dismissed,
    /// The turn was cancelled while waiting.
    Cancelled,
    /// The prompt (or the client) failed.
    Failed { error: String },
    /// An SDK client refused the call, with its message.
    Declined { message: Option<String> },
    /// An SDK client allowed the call but sent no answers.
    NoAnswers,
}

/// The user's answers by question text (several choices joined with
/// `, `), or why there are none.
pub type Answers = Result<BTreeMap<String, String>, Unanswered>;

/// Puts questions to the user (`cadre chat`, an SDK client).
pub type Questioner = Arc<dyn Fn(QuestionRequest) -> BoxFuture<'static, Answers> + Send + Sync>;

impl Session {
    /// Runs one AskUserQuestion call; `Err` is the error text for the model.
    pub(super) async fn ask_user(
        &self,
        snap: &Snapshot,
        id: &str,
        input: Value,
    ) -> Result<String, String> {
        let t = &snap.templates;
        let AskInput { questions } = serde_json::from_value(input.clone()).map_err(|e| {
            t.show(&InvalidInput {
                tool: ASK_USER_QUESTION.to_string(),
                issues: e.to_string(),
                plural: false,
            })
        })?;
        let Some(questioner) = &self.engine.questioner else {
            return Err(t.show(&AskUserUnavailable {}));
        };
        let request = QuestionRequest {
            agent_id: self.spec.agent_id.clone(),
            tool_use_id: id.to_string(),
            input,
            questions: questions.clone(),
        };
        let answers = tokio::select! {
            a = questioner(request) => a,
            () = self.cancel.cancelled() => Err(Unanswered::Cancelled),
        };
        match answers {
            Ok(answers) => {
                let answers = questions
                    .iter()
                    .map(|q| QuestionAnswer {
                        question: q.question.clone(),
                        answer: answers.get(&q.question).cloned().unwrap_or_default(),
                    })
                    .collect();
                Ok(t.show(&AskUserAnswers { answers }))
            }
            Err(reason) => Err(t.show(&AskUserDeclined { reason })),
        }
    }
}

/// The answers an SDK client put in its `updatedInput` (`answers`: question
/// text → answer); `None` when it gave none.
pub fn answers_from_input(updated: &Value) -> Option<BTreeMap<String, String>> {
    let map = updated.get("answers")?.as_object()?;
    Some(
        map.iter()
            .map(|(q, a)| {
                let text = match a {
                    Value::String(s) => s.clone(),
                    Value::Array(items) => items
                        .iter()
                        .filter_map(Value::as_str)
                        .collect::<Vec<_>>()
                        .join(", "),
                    other => other.to_string(),
                };
                (q.clone(), text)
            })
            .collect(),
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn sdk_answers_are_read_from_updated_input() {
        let v = json!({"questions": [], "answers": {"Which?": "A", "Both?": ["x", "y"]}});
        let a = answers_from_input(&v).unwrap();
        assert_eq!(a["Which?"], "A");
        assert_eq!(a["Both?"], "x, y");
        assert!(answers_from_input(&json!({"questions": []})).is_none());
    }

    #[test]
    fn questions_parse_in_claude_codes_shape() {
        let q: AskInput = serde_json::from_value(json!({"questions": [{
            "question": "Which database?", "header": "DB", "multiSelect": true,
            "options": [{"label": "Postgres", "description": "relational"}, {"label": "SQLite"}]}]}))
        .unwrap();
        assert!(q.questions[0].multi_select);
        assert_eq!(q.questions[0].options[1].description, "");
    }
}
