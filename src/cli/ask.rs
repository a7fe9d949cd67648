//! AskUserQuestion in `cadre chat`: each question as a choice prompt on
//! the terminal (arrow keys and Enter; Space toggles in a several-choice
//! question), with a last choice to type an answer of one's own.
//!
//! The prompts come from `dialoguer`: it draws with `console`, which the
//! progress bars (`indicatif`) already bring in, so choosing it adds two
//! small crates; `inquire` would add `crossterm` and its dependencies for
//! the same two prompts.

use std::collections::BTreeMap;
use std::sync::Arc;

use dialoguer::console::Term;
use dialoguer::{Input, MultiSelect, Select};

use super::output::Progress;
use crate::runtime::ask_user::{Answers, Question, QuestionRequest, Questioner, Unanswered};

/// The label of the choice that lets the user type an answer.
const OWN_ANSWER: &str = "Type my own answer";

/// Asks on the terminal (stderr), one question after the other, with the
/// progress bars hidden meanwhile.
pub fn terminal_questioner(progress: Arc<Progress>) -> Questioner {
    Arc::new(move |req: QuestionRequest| {
        let progress = Arc::clone(&progress);
        Box::pin(async move {
            progress.hide();
            let answers = tokio::task::spawn_blocking(move || {
                let _terminal = super::turn_keys::hold_terminal();
                ask_all(&req.questions)
            })
            .await
            .unwrap_or_else(|e| {
                Err(Unanswered::Failed {
                    error: e.to_string(),
                })
            });
            progress.show();
            answers
        })
    })
}

fn ask_all(questions: &[Question]) -> Answers {
    let term = Term::stderr();
    let mut answers = BTreeMap::new();
    for q in questions {
        let answer = ask_one(&term, q)?;
        answers.insert(q.question.clone(), answer);
    }
    Ok(answers)
}

fn ask_one(term: &Term, q: &Question) -> Result<String, Unanswered> {
    let dismissed = || Unanswered::Dismissed;
    let failed = |e: dialoguer::Error| Unanswered::Failed {
        error: e.to_string(),
    };
    let mut items: Vec<String> = q
        .options
        .iter()
        .map(|o| {
            if o.description.trim().is_empty() {
                o.label.clone()
            } else {
                format!("{} — {}", o.label, o.description.trim())
            }
        })
        .collect();
    items.push(OWN_ANSWER.to_string());
    let own = items.len() - 1;
    let prompt = if q.header.trim().is_empty() {
        q.question.clone()
    } else {
        format!("[{}] {}", q.header.trim(), q.question)
    };
    let chosen: Vec<usize> = if q.multi_select {
        MultiSelect::new()
            .with_prompt(format!("{prompt} (Space to choose, Enter when done)"))
            .items(&items)
            .interact_on_opt(term)
            .map_err(failed)?
            .ok_or_else(dismissed)?
    } else {
        vec![
            Select::new()
                .with_prompt(prompt)
                .items(&items)
                .default(0)
                .interact_on_opt(term)
                .map_err(failed)?
                .ok_or_else(dismissed)?,
        ]
    };
    let mut parts: Vec<String> = chosen
        .iter()
        .filter(|i| **i != own)
        .filter_map(|i| q.options.get(*i).map(|o| o.label.clone()))
        .collect();
    if chosen.contains(&own) {
        let typed: String = Input::new()
            .with_prompt("Your answer")
            .interact_text_on(term)
            .map_err(failed)?;
        parts.push(typed.trim().to_string());
    }
    Ok(parts.join(", "))
}
