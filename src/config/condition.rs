//! Flag conditions: the `when` of an agent and the `x-when` of a schema
//! property. A condition is a name, `!NAME`, or a list meaning all of them.
//! Names are flags, or one of the session words `interactive` and
//! `coordinator`. Evaluation is left to the caller, which knows the flags.

use std::fmt;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Term {
    pub negated: bool,
    pub name: String,
}

/// All of its terms must hold. An empty condition always holds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Condition(pub Vec<Term>);

impl Condition {
    /// Parses `NAME`, `!NAME` or `NAME, !OTHER` (comma-separated, all must hold).
    pub fn parse(text: &str) -> Result<Condition, String> {
        let mut terms = Vec::new();
        for part in text.split(',') {
            terms.push(Term::parse(part)?);
        }
        Ok(Condition(terms))
    }

    pub fn from_list(items: &[String]) -> Result<Condition, String> {
        let mut terms = Vec::new();
        for item in items {
            terms.extend(Condition::parse(item)?.0);
        }
        Ok(Condition(terms))
    }

    /// True when every term holds, given the truth of each name.
    pub fn holds(&self, mut is_on: impl FnMut(&str) -> bool) -> bool {
        self.0.iter().all(|t| is_on(&t.name) != t.negated)
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|t| t.name.as_str())
    }
}

impl Term {
    fn parse(text: &str) -> Result<Term, String> {
        let text = text.trim();
        let (negated, name) = match text.strip_prefix('!') {
            Some(rest) => (true, rest.trim()),
            None => (false, text),
        };
        let valid = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !valid {
            return Err(format!("expected a flag name or !NAME, found {text:?}"));
        }
        Ok(Term {
            negated,
            name: name.to_string(),
        })
    }
}

impl fmt::Display for Condition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, t) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            if t.negated {
                f.write_str("!")?;
            }
            f.write_str(&t.name)?;
        }
        Ok(())
    }
}

impl Serialize for Condition {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Condition {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            One(String),
            All(Vec<String>),
        }
        let parsed = match Raw::deserialize(d)? {
            Raw::One(s) => Condition::parse(&s),
            Raw::All(v) => Condition::from_list(&v),
        };
        parsed.map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_names_negations_and_lists() {
        let c = Condition::parse("FORK_SUBAGENT, !coordinator").unwrap();
        assert_eq!(c.to_string(), "FORK_SUBAGENT, !coordinator");
        assert!(c.holds(|n| n == "FORK_SUBAGENT"));
        assert!(!c.holds(|_| true));
        assert!(!c.holds(|_| false));
        assert!(Condition::parse("").is_err());
        assert!(Condition::parse("a b").is_err());
        assert!(Condition::default().holds(|_| false));
    }
}
