//! The permission engine's words, as typed template contexts: why a call
//! was decided as it was (`permission_reason`) and why part of a Bash
//! command cannot be known before it runs (`shell_doubt`). The model reads
//! them in denials; the user in approval prompts and `cadre permissions
//! check`.

use super::shell::ShellDoubt;
use super::{Doubt, Reason, RuleList};
use crate::contexts;

contexts! {
    /// What decided a permission question, in words: a partial of
    /// `error_permission_denied`, also shown in the approval prompt and by
    /// `cadre permissions check`.
    "permission_reason" => pub struct PermissionReason {
        pub reason: Reason = Reason::DontAsk {
            asked: Box::new(Reason::UnsureRule {
                list: RuleList::Ask,
                rule: "Bash(git push:*)".into(),
                doubts: vec![
                    Doubt::UnknownWords { command: "git push $REMOTE".into() },
                    Doubt::RedirectUnknown { target: "$LOG".into() },
                ],
            }),
        },
    }

    /// Why part of a Bash command cannot be known before it runs: a partial
    /// of `permission_reason`, also shown by `cadre permissions check`.
    "shell_doubt" => pub struct ShellDoubtText {
        pub doubt: ShellDoubt = ShellDoubt::StrangeOption {
            command: "nohup".into(),
            option: "-%".into(),
        },
    }
}
