//! What a session may start and load — agent types for the Agent tool,
//! skills for the Skill tool — announced in the conversation, not written
//! into the tool descriptions.
//!
//! The tools come first in the cached prefix: a description that listed
//! the agents would change the first bytes of every later request whenever
//! an agent file changed, and the whole context would be written to the
//! cache again. Instead a session remembers the listing it last announced;
//! at the start of a turn it compares it with the listing of the turn's
//! snapshot and, when they differ, appends one text block (the
//! `agent_listing` / `skill_listing` templates: the first listing in full,
//! later only what was added, changed or removed) to the user message that
//! turn sends. Earlier bytes never change, and the request that follows a
//! reload already knows of the change.
//!
//! Forks do not announce: they inherit the parent's history (with its
//! announcements) and its tool bytes, and siblings must stay byte-identical.

use serde::{Deserialize, Serialize};

use crate::catalog::AgentDef;
use crate::config::SessionKind;
use crate::snapshot::Snapshot;
use crate::tools::spec::{AgentLine, SkillLine};

use super::texts::{AgentListing, SkillListing};

/// The agent types and skills one session is told of, each sorted as the
/// model sees them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Listing {
    pub agents: Vec<AgentLine>,
    pub skills: Vec<SkillLine>,
}

impl Listing {
    /// The listing of a session that offers `tools`: the agents it may start
    /// (visible, and `listed`) when it has the Agent tool, the skills when it
    /// has the Skill tool.
    pub fn for_session(
        snap: &Snapshot,
        kind: SessionKind,
        tools: &[String],
        listed: &dyn Fn(&AgentDef) -> bool,
        offer: Option<&crate::agent_tool::ToolOffer>,
    ) -> Listing {
        let has = |name: &str| tools.iter().any(|t| t == name);
        let agents = if has(crate::agent_tool::AGENT_TOOL) {
            snap.visible_agents(kind)
                .into_iter()
                .filter(|d| listed(d))
                .map(|d| AgentLine {
                    name: d.name.clone(),
                    description: d.description.clone(),
                    tools: crate::agent_tool::tools_summary(d, offer).words(&snap.templates),
                })
                .collect()
        } else {
            Vec::new()
        };
        let skills = if has(super::todos::SKILL) {
            snap.skills
                .skills
                .values()
                .filter(|s| s.model_invocable)
                .map(|s| SkillLine {
                    name: s.name.clone(),
                    description: s.description.clone(),
                    when_to_use: s.when_to_use.clone().unwrap_or_default(),
                })
                .collect()
        } else {
            Vec::new()
        };
        Listing { agents, skills }
    }

    /// The text blocks that tell a model who knows `before` about `self`:
    /// at most one per list, none when nothing changed.
    pub fn announce(&self, before: &Listing, snap: &Snapshot) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(d) = delta(&before.agents, &self.agents, |a| &a.name) {
            let (first, added, removed) = d.owned();
            out.push(snap.templates.show(&AgentListing {
                first,
                added,
                removed,
            }));
        }
        if let Some(d) = delta(&before.skills, &self.skills, |s| &s.name) {
            let (first, added, removed) = d.owned();
            out.push(snap.templates.show(&SkillListing {
                first,
                added,
                removed,
            }));
        }
        out
    }
}

/// What changed between two lists.
#[derive(Debug)]
struct Delta<'a, T> {
    /// Nothing was announced before: `added` is the whole list.
    first: bool,
    /// New entries and entries whose text changed, in list order.
    added: Vec<&'a T>,
    /// Names no longer available, in the order they were listed.
    removed: Vec<&'a str>,
}

impl<T: Clone> Delta<'_, T> {
    /// `(first, added, removed)`, owned, for a template context.
    fn owned(&self) -> (bool, Vec<T>, Vec<String>) {
        (
            self.first,
            self.added.iter().map(|e| (*e).clone()).collect(),
            self.removed.iter().map(|r| (*r).to_string()).collect(),
        )
    }
}

fn delta<'a, T: PartialEq>(
    before: &'a [T],
    now: &'a [T],
    name: impl Fn(&T) -> &String,
) -> Option<Delta<'a, T>> {
    let added: Vec<&T> = now.iter().filter(|e| !before.contains(e)).collect();
    let removed: Vec<&str> = before
        .iter()
        .filter(|b| !now.iter().any(|n| name(n) == name(b)))
        .map(|b| name(b).as_str())
        .collect();
    if added.is_empty() && removed.is_empty() {
        return None;
    }
    Some(Delta {
        first: before.is_empty(),
        added,
        removed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(name: &str, description: &str) -> AgentLine {
        AgentLine {
            name: name.into(),
            description: description.into(),
            tools: "All tools".into(),
        }
    }

    #[test]
    fn a_delta_names_what_was_added_changed_and_removed() {
        let before = [line("a", "A"), line("b", "B"), line("c", "C")];
        let now = [line("a", "A"), line("b", "B2"), line("d", "D")];
        let d = delta(&before, &now, |l| &l.name).unwrap();
        assert!(!d.first);
        let added: Vec<&str> = d.added.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(added, ["b", "d"]);
        assert_eq!(d.removed, ["c"]);
        assert!(delta(&now, &now, |l| &l.name).is_none());
        let first = delta(&[], &now, |l| &l.name).unwrap();
        assert!(first.first && first.added.len() == 3 && first.removed.is_empty());
    }
}
