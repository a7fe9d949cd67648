//! Feature flags: declarations, values and gates, in one registry.
//!
//! A flag is declared in settings (`[flags.NAME]`: description, default,
//! gates); the built-in declarations ship in the embedded defaults file. Its
//! value comes from the highest layer that sets it (`[features]` in the
//! file, `CADRE_FEATURES__NAME`, `--feature NAME=on`). It is *effective*
//! when the value is on and no gate blocks it for the session at hand.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use super::condition::Condition;
use super::mode::SessionKind;

/// A condition over the session that can block a flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Gate {
    /// Blocks the flag while coordinator mode is on.
    Coordinator,
    /// Blocks the flag in non-interactive sessions (`cadre run`).
    NonInteractive,
}

impl Gate {
    pub fn blocks(self, kind: SessionKind) -> bool {
        match self {
            Gate::Coordinator => kind.coordinator,
            Gate::NonInteractive => !kind.interactive,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Gate::Coordinator => "coordinator",
            Gate::NonInteractive => "non_interactive",
        }
    }
}

impl fmt::Display for Gate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A flag's declaration, as written under `[flags.NAME]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FlagDecl {
    pub description: String,
    pub default: bool,
    pub gates: Vec<Gate>,
}

/// A flag value as a user writes it: a boolean, or on/off, yes/no, 1/0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct FlagValue(pub bool);

impl FlagValue {
    pub fn parse(text: &str) -> Option<bool> {
        match text.trim().to_ascii_lowercase().as_str() {
            "on" | "true" | "yes" | "1" => Some(true),
            "off" | "false" | "no" | "0" => Some(false),
            _ => None,
        }
    }
}

impl<'de> Deserialize<'de> for FlagValue {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Bool(bool),
            Int(i64),
            Text(String),
        }
        match Raw::deserialize(d)? {
            Raw::Bool(b) => Ok(FlagValue(b)),
            Raw::Int(0) => Ok(FlagValue(false)),
            Raw::Int(1) => Ok(FlagValue(true)),
            Raw::Int(n) => Err(serde::de::Error::custom(format!(
                "expected on or off, found {n}"
            ))),
            Raw::Text(s) => FlagValue::parse(&s).map(FlagValue).ok_or_else(|| {
                serde::de::Error::custom(format!("expected on or off, found {s:?}"))
            }),
        }
    }
}

/// Which settings layer set a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Layer {
    Default,
    File,
    Env,
    Cli,
}

impl fmt::Display for Layer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Layer::Default => "default",
            Layer::File => "file",
            Layer::Env => "env",
            Layer::Cli => "cli",
        })
    }
}

/// One flag: its declaration, its value and where the value came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Flag {
    pub name: String,
    pub decl: FlagDecl,
    pub value: bool,
    pub set_by: Layer,
}

impl Flag {
    /// The first gate that blocks this flag in `kind`, if any.
    pub fn blocked_by(&self, kind: SessionKind) -> Option<Gate> {
        self.decl.gates.iter().copied().find(|g| g.blocks(kind))
    }

    pub fn effective(&self, kind: SessionKind) -> bool {
        self.value && self.blocked_by(kind).is_none()
    }
}

/// Every declared flag, by name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Flags {
    flags: BTreeMap<String, Flag>,
}

pub const FORK_SUBAGENT: &str = "FORK_SUBAGENT";
pub const DISABLE_BACKGROUND_TASKS: &str = "DISABLE_BACKGROUND_TASKS";

impl Flags {
    pub fn new(flags: impl IntoIterator<Item = Flag>) -> Self {
        Flags {
            flags: flags.into_iter().map(|f| (f.name.clone(), f)).collect(),
        }
    }

    pub fn get(&self, name: &str) -> Option<&Flag> {
        self.flags.get(name)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Flag> {
        self.flags.values()
    }

    /// Whether `name` is effective; an undeclared flag never is.
    pub fn effective(&self, name: &str, kind: SessionKind) -> bool {
        self.flags.get(name).is_some_and(|f| f.effective(kind))
    }

    /// Evaluates a condition: flag names by their effective value, and the
    /// session words `interactive` and `coordinator`.
    pub fn holds(&self, cond: &Condition, kind: SessionKind) -> bool {
        cond.holds(|name| self.is_on(name, kind))
    }

    /// Whether one name of a condition (a flag or a session word) is on.
    pub fn is_on(&self, name: &str, kind: SessionKind) -> bool {
        match name {
            "interactive" => kind.interactive,
            "coordinator" => kind.coordinator,
            _ => self.effective(name, kind),
        }
    }

    /// Whether a name used in a condition means something.
    pub fn knows(&self, name: &str) -> bool {
        matches!(name, "interactive" | "coordinator") || self.flags.contains_key(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fork(value: bool, gates: Vec<Gate>) -> Flags {
        Flags::new([Flag {
            name: FORK_SUBAGENT.into(),
            decl: FlagDecl {
                description: String::new(),
                default: false,
                gates,
            },
            value,
            set_by: Layer::File,
        }])
    }

    #[test]
    fn gates_block_by_session_kind() {
        let flags = fork(true, vec![Gate::Coordinator, Gate::NonInteractive]);
        assert!(flags.effective(FORK_SUBAGENT, SessionKind::INTERACTIVE));
        assert!(!flags.effective(FORK_SUBAGENT, SessionKind::NON_INTERACTIVE));
        let coord = SessionKind {
            interactive: true,
            coordinator: true,
        };
        assert_eq!(
            flags.get(FORK_SUBAGENT).unwrap().blocked_by(coord),
            Some(Gate::Coordinator)
        );
        assert!(!fork(false, vec![]).effective(FORK_SUBAGENT, SessionKind::INTERACTIVE));
        assert!(fork(true, vec![]).effective(FORK_SUBAGENT, SessionKind::NON_INTERACTIVE));
    }

    #[test]
    fn conditions_see_session_words_and_flags() {
        let flags = fork(true, vec![Gate::NonInteractive]);
        let c = Condition::parse("FORK_SUBAGENT").unwrap();
        assert!(flags.holds(&c, SessionKind::INTERACTIVE));
        assert!(!flags.holds(&c, SessionKind::NON_INTERACTIVE));
        assert!(flags.holds(
            &Condition::parse("!interactive").unwrap(),
            SessionKind::NON_INTERACTIVE
        ));
        assert!(!flags.holds(
            &Condition::parse("UNKNOWN").unwrap(),
            SessionKind::INTERACTIVE
        ));
    }

    #[test]
    fn flag_values_accept_words() {
        let v: FlagValue = serde_json::from_str("\"on\"").unwrap();
        assert!(v.0);
        let v: FlagValue = serde_json::from_str("false").unwrap();
        assert!(!v.0);
        assert!(serde_json::from_str::<FlagValue>("\"maybe\"").is_err());
    }
}
