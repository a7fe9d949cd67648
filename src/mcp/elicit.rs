//! Elicitation: a server asking the user for input during one of its
//! calls. The CLI supplies the [`Elicitor`] that puts the question to
//! someone (a terminal prompt in `chat`, the SDK client's `elicitation`
//! control request); without one the request is declined and reported.
//! [`ElicitHooks`], when set, are asked before anyone (they may answer for
//! the user) and see the answer before it goes back (they may change it).

use std::sync::Arc;

use futures_util::future::BoxFuture;
use serde_json::{Map, Value};

/// One request for input, in cadre's terms.
#[derive(Debug, Clone)]
pub struct Elicitation {
    /// The server that asked.
    pub server: String,
    /// What the server says it needs.
    pub message: String,
    /// `form` or `url`.
    pub mode: &'static str,
    /// The JSON Schema of the answer (a flat object), for a form.
    pub requested_schema: Option<Value>,
    /// The page to open, for `url`.
    pub url: Option<String>,
    /// The server's id of a `url` request.
    pub elicitation_id: Option<String>,
}

/// What the user did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElicitAction {
    Accept,
    Decline,
    Cancel,
}

/// The answer: the action, and for `Accept` of a form the values.
#[derive(Debug, Clone, PartialEq)]
pub struct ElicitAnswer {
    pub action: ElicitAction,
    pub content: Option<Map<String, Value>>,
}

impl ElicitAnswer {
    pub fn declined() -> Self {
        ElicitAnswer {
            action: ElicitAction::Decline,
            content: None,
        }
    }
}

/// Puts elicitation requests to the user.
pub type Elicitor = Arc<dyn Fn(Elicitation) -> BoxFuture<'static, ElicitAnswer> + Send + Sync>;

/// The hooks around one elicitation (the runtime's `Elicitation` and
/// `ElicitationResult` events): `before` may answer instead of the user
/// (`Some`); `after` sees what the user (or `before`'s absence of an
/// answer: a decline) said and returns what goes back to the server.
#[derive(Clone)]
pub struct ElicitHooks {
    pub before: Arc<dyn Fn(Elicitation) -> BoxFuture<'static, Option<ElicitAnswer>> + Send + Sync>,
    pub after:
        Arc<dyn Fn(Elicitation, ElicitAnswer) -> BoxFuture<'static, ElicitAnswer> + Send + Sync>,
}
