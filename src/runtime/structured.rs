//! Structured output (`--json-schema`, the SDKs' `output_format`), as
//! Claude Code does it: the main session is offered a `StructuredOutput`
//! tool whose input schema is the caller's schema; a call whose input fits
//! it ends the run with that input as the result's `structured_output`.
//! An input that does not fit is an error result the model reads (through
//! the tool-call pipeline's schema check); after [`MAX_ATTEMPTS`] such
//! calls the run ends with an error. A model that answers in text is told
//! once to call the tool.

use std::sync::Arc;

use serde_json::Value;

use crate::message::{ContentBlock, Message, ToolDefinition};

/// The tool's name, as Claude Code names it.
pub const STRUCTURED_OUTPUT: &str = "StructuredOutput";

/// Invalid StructuredOutput calls in one prompt before the run gives up
/// (Claude Code's number).
pub const MAX_ATTEMPTS: u32 = 5;

/// The schema a session's answer must fit, compiled once.
#[derive(Clone)]
pub struct StructuredSpec {
    pub schema: Value,
    pub(super) validator: Arc<jsonschema::Validator>,
}

impl std::fmt::Debug for StructuredSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StructuredSpec")
            .field("schema", &self.schema)
            .finish_non_exhaustive()
    }
}

impl StructuredSpec {
    /// `Err` says why `schema` is not a JSON Schema cadre can check
    /// answers against.
    pub fn new(schema: Value) -> Result<StructuredSpec, String> {
        if !schema.is_object() {
            return Err("the schema must be a JSON object".into());
        }
        let validator = jsonschema::validator_for(&schema).map_err(|e| e.to_string())?;
        Ok(StructuredSpec {
            schema,
            validator: Arc::new(validator),
        })
    }

    /// The tool offered to the model.
    pub(super) fn definition(&self, description: String) -> ToolDefinition {
        ToolDefinition {
            name: STRUCTURED_OUTPUT.into(),
            description,
            input_schema: self.schema.clone(),
        }
    }
}

/// Where one prompt's run stands.
#[derive(Debug, Default, Clone)]
pub(super) struct StructuredState {
    /// The model was told to call the tool after a text answer.
    pub enforced: bool,
    /// Calls whose input did not fit (or that were refused).
    pub failures: u32,
    /// The error result of the last of them.
    pub last_error: Option<String>,
}

/// What one turn's StructuredOutput calls came to.
pub(super) enum TurnVerdict {
    /// No StructuredOutput call this turn, or only failed ones below the
    /// limit: go on.
    Continue,
    /// A call's input fit: the run ends with it.
    Done(Value),
    /// The last allowed attempt failed too; the text says so.
    GaveUp(String),
}

impl StructuredState {
    /// Reads this turn's StructuredOutput calls (in `assistant`) and their
    /// results.
    pub(super) fn after_tools(
        &mut self,
        assistant: &Message,
        results: &[ContentBlock],
    ) -> TurnVerdict {
        for (id, name, input) in assistant.tool_uses() {
            if name != STRUCTURED_OUTPUT {
                continue;
            }
            let result = results.iter().find_map(|b| match b {
                ContentBlock::ToolResult {
                    tool_use_id,
                    content,
                    is_error,
                } if tool_use_id == id => Some((*is_error, content)),
                _ => None,
            });
            match result {
                Some((false, _)) => return TurnVerdict::Done(input.clone()),
                Some((true, content)) => {
                    self.failures += 1;
                    self.last_error = Some(
                        content
                            .iter()
                            .filter_map(|c| match c {
                                crate::message::ToolResultContent::Text { text } => {
                                    Some(text.trim().to_string())
                                }
                                crate::message::ToolResultContent::Image { .. } => None,
                            })
                            .collect::<Vec<_>>()
                            .join("\n"),
                    );
                }
                None => {}
            }
        }
        if self.failures >= MAX_ATTEMPTS {
            return TurnVerdict::GaveUp(gave_up(
                self.failures,
                self.last_error.as_deref().unwrap_or(""),
            ));
        }
        TurnVerdict::Continue
    }
}

/// The result's error when the attempts ran out (for the caller, in
/// Claude Code's words).
fn gave_up(failures: u32, last_error: &str) -> String {
    format!(
        "Failed to provide valid structured output after {failures} attempts — last {STRUCTURED_OUTPUT} error: {last_error}"
    )
}
