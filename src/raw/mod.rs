//! Raw documents: a YAML or TOML file parsed into a tree that remembers where
//! every key and value is.
//!
//! This is the "raw" half of raw-then-resolved: settings and agent files are
//! first read into a [`Node`] tree, so that the resolve step can say
//! `file:line:col: what was expected` about any value. This module knows
//! nothing about what the keys mean.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

pub mod lines;
mod simple;

use crate::diagnostic::Pos;

/// Reads at most `max` bytes of a regular file; the flag says there was
/// more. Whatever size a file claims (a symbolic link in a repository may
/// point at `/proc`, a device or a FIFO), no more than `max + 1` bytes are
/// held, and anything but a regular file is refused without blocking.
pub fn read_prefix(path: &std::path::Path, max: u64) -> std::io::Result<(Vec<u8>, bool)> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    let mut bytes = Vec::new();
    file.take(max.saturating_add(1)).read_to_end(&mut bytes)?;
    let more = bytes.len() as u64 > max;
    bytes.truncate(usize::try_from(max).unwrap_or(usize::MAX).min(bytes.len()));
    Ok((bytes, more))
}

/// A whole text file of at most `max` bytes (see [`read_prefix`]); the
/// error says what is wrong, for a diagnostic.
pub fn read_text(path: &std::path::Path, max: u64) -> Result<String, String> {
    let (bytes, more) = read_prefix(path, max).map_err(|e| format!("cannot read: {e}"))?;
    if more {
        return Err(format!("larger than the {max}-byte limit; not read"));
    }
    String::from_utf8(bytes).map_err(|e| {
        format!(
            "not valid UTF-8 (at byte {}); not read",
            e.utf8_error().valid_up_to()
        )
    })
}

/// A value and the position where it starts.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub pos: Pos,
    pub kind: Kind,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Seq(Vec<Node>),
    Map(Vec<(Key, Node)>),
}

/// A mapping key and where it is written.
#[derive(Debug, Clone, PartialEq)]
pub struct Key {
    pub name: String,
    pub pos: Pos,
}

/// A syntax error with its position.
#[derive(Debug, Clone, PartialEq)]
pub struct SyntaxError {
    pub pos: Pos,
    pub message: String,
}

impl fmt::Display for SyntaxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.pos.line, self.pos.column, self.message)
    }
}

impl Node {
    pub fn new(pos: Pos, kind: Kind) -> Self {
        Node { pos, kind }
    }

    /// The entry `key` of a mapping, with the key's own position.
    pub fn entry(&self, key: &str) -> Option<(&Key, &Node)> {
        match &self.kind {
            Kind::Map(entries) => entries
                .iter()
                .rev()
                .find(|(k, _)| k.name == key)
                .map(|(k, v)| (k, v)),
            _ => None,
        }
    }

    pub fn get(&self, key: &str) -> Option<&Node> {
        self.entry(key).map(|(_, v)| v)
    }

    pub fn entries(&self) -> &[(Key, Node)] {
        match &self.kind {
            Kind::Map(entries) => entries,
            _ => &[],
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match &self.kind {
            Kind::Str(s) => Some(s),
            _ => None,
        }
    }

    pub fn is_null(&self) -> bool {
        matches!(self.kind, Kind::Null)
    }

    /// What kind of value this is, in words for a diagnostic.
    pub fn type_name(&self) -> &'static str {
        match self.kind {
            Kind::Null => "nothing",
            Kind::Bool(_) => "a boolean",
            Kind::Int(_) => "an integer",
            Kind::Float(_) => "a number",
            Kind::Str(_) => "a string",
            Kind::Seq(_) => "a list",
            Kind::Map(_) => "a mapping",
        }
    }

    /// A scalar written as text (`true`, `3`, `x`), for fields that take a
    /// string but where YAML may have typed the value.
    pub fn scalar_text(&self) -> Option<String> {
        match &self.kind {
            Kind::Str(s) => Some(s.clone()),
            Kind::Bool(b) => Some(b.to_string()),
            Kind::Int(i) => Some(i.to_string()),
            Kind::Float(f) => Some(f.to_string()),
            _ => None,
        }
    }

    pub fn to_json(&self) -> Value {
        match &self.kind {
            Kind::Null => Value::Null,
            Kind::Bool(b) => Value::Bool(*b),
            Kind::Int(i) => Value::from(*i),
            Kind::Float(f) => serde_json::Number::from_f64(*f).map_or(Value::Null, Value::Number),
            Kind::Str(s) => Value::String(s.clone()),
            Kind::Seq(items) => Value::Array(items.iter().map(Node::to_json).collect()),
            Kind::Map(entries) => Value::Object(
                entries
                    .iter()
                    .map(|(k, v)| (k.name.clone(), v.to_json()))
                    .collect(),
            ),
        }
    }

    /// The node at a dotted path of mapping keys, if present.
    pub fn at_path<'a>(&'a self, path: &[&str]) -> Option<&'a Node> {
        path.iter().try_fold(self, |node, key| node.get(key))
    }
}

// ---------------------------------------------------------------- YAML ---

/// Parses one YAML document. An empty document is an empty mapping.
/// Most agent files' YAML is a flat list of simple `key: value` lines,
/// read by a fast path (`simple`) that builds the same tree; the rest
/// goes through the full parser.
pub fn parse_yaml(text: &str) -> Result<Node, SyntaxError> {
    if text.trim().is_empty() {
        return Ok(Node::new(Pos::START, Kind::Map(Vec::new())));
    }
    if let Some(node) = simple::parse(text) {
        return Ok(node);
    }
    parse_yaml_full(text)
}

/// [`parse_yaml`] by the full parser only.
pub(crate) fn parse_yaml_full(text: &str) -> Result<Node, SyntaxError> {
    if text.trim().is_empty() {
        return Ok(Node::new(Pos::START, Kind::Map(Vec::new())));
    }
    match serde_saphyr::from_str::<serde_saphyr::Spanned<YamlKind>>(text) {
        Ok(s) => Ok(Node::new(yaml_pos(&s.referenced), s.value.0)),
        Err(e) => {
            let pos = e.location().map_or(Pos::START, |l| yaml_pos(&l));
            Err(SyntaxError {
                pos,
                message: first_line(&e.to_string()),
            })
        }
    }
}

fn yaml_pos(l: &serde_saphyr::Location) -> Pos {
    Pos::new((l.line() as usize).max(1), (l.column() as usize).max(1))
}

/// Error texts from the parsers can carry a rendered snippet after the
/// first line; diagnostics want one line.
fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or("").trim().to_string()
}

struct YamlKind(Kind);

impl<'de> Deserialize<'de> for YamlKind {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(YamlVisitor).map(YamlKind)
    }
}

struct YamlVisitor;

fn spanned_node(s: serde_saphyr::Spanned<YamlKind>) -> Node {
    Node::new(yaml_pos(&s.referenced), s.value.0)
}

impl<'de> Visitor<'de> for YamlVisitor {
    type Value = Kind;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any YAML value")
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Kind, E> {
        Ok(Kind::Bool(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Kind, E> {
        Ok(Kind::Int(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Kind, E> {
        Ok(i64::try_from(v).map_or(Kind::Float(v as f64), Kind::Int))
    }
    fn visit_i128<E: de::Error>(self, v: i128) -> Result<Kind, E> {
        Ok(i64::try_from(v).map_or(Kind::Float(v as f64), Kind::Int))
    }
    fn visit_u128<E: de::Error>(self, v: u128) -> Result<Kind, E> {
        Ok(i64::try_from(v).map_or(Kind::Float(v as f64), Kind::Int))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Kind, E> {
        Ok(Kind::Float(v))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Kind, E> {
        Ok(Kind::Str(v.to_string()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Kind, E> {
        Ok(Kind::Str(v))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Kind, E> {
        Ok(Kind::Null)
    }
    fn visit_none<E: de::Error>(self) -> Result<Kind, E> {
        Ok(Kind::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Kind, D::Error> {
        d.deserialize_any(YamlVisitor)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Kind, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<serde_saphyr::Spanned<YamlKind>>()? {
            items.push(spanned_node(item));
        }
        Ok(Kind::Seq(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Kind, A::Error> {
        let mut entries = Vec::new();
        while let Some(key) = map.next_key::<serde_saphyr::Spanned<YamlKind>>()? {
            let pos = yaml_pos(&key.referenced);
            let name = match key.value.0 {
                Kind::Str(s) => s,
                Kind::Null => String::new(),
                Kind::Bool(b) => b.to_string(),
                Kind::Int(i) => i.to_string(),
                Kind::Float(f) => f.to_string(),
                Kind::Seq(_) | Kind::Map(_) => {
                    return Err(de::Error::custom("a mapping key must be a plain value"));
                }
            };
            let value = spanned_node(map.next_value::<serde_saphyr::Spanned<YamlKind>>()?);
            entries.push((Key { name, pos }, value));
        }
        Ok(Kind::Map(entries))
    }
}

// ---------------------------------------------------------------- TOML ---

/// Parses a TOML document into a tree with positions.
pub fn parse_toml(text: &str) -> Result<Node, SyntaxError> {
    use toml::de::{DeTable, DeValue};

    /// Line starts, found once per document: positions of spans in
    /// O(log lines) instead of a scan from the start each.
    struct Lines<'a> {
        text: &'a str,
        starts: Vec<usize>,
    }

    impl Lines<'_> {
        fn pos(&self, span: std::ops::Range<usize>) -> Pos {
            let offset = span.start.min(self.text.len());
            if !self.text.is_char_boundary(offset) {
                return Pos::of_offset(self.text, offset);
            }
            let line = self.starts.partition_point(|s| *s <= offset);
            let start = self.starts[line - 1];
            Pos::new(line, self.text[start..offset].chars().count() + 1)
        }
    }

    fn value(l: &Lines<'_>, v: &DeValue<'_>, at: Pos) -> Node {
        let kind = match v {
            DeValue::String(s) => Kind::Str(s.to_string()),
            DeValue::Integer(i) => {
                let digits: String = i.as_str().chars().filter(|c| *c != '_').collect();
                let digits = digits
                    .trim_start_matches("0x")
                    .trim_start_matches("0o")
                    .trim_start_matches("0b");
                i64::from_str_radix(digits, i.radix())
                    .map_or_else(|_| Kind::Str(i.as_str().to_string()), Kind::Int)
            }
            DeValue::Float(f) => {
                let t: String = f.as_str().chars().filter(|c| *c != '_').collect();
                match t.as_str() {
                    "inf" | "+inf" => Kind::Float(f64::INFINITY),
                    "-inf" => Kind::Float(f64::NEG_INFINITY),
                    "nan" | "+nan" | "-nan" => Kind::Float(f64::NAN),
                    _ => t.parse().map_or_else(|_| Kind::Str(t.clone()), Kind::Float),
                }
            }
            DeValue::Boolean(b) => Kind::Bool(*b),
            DeValue::Datetime(d) => Kind::Str(d.to_string()),
            DeValue::Array(items) => Kind::Seq(
                items
                    .iter()
                    .map(|s| value(l, s.get_ref(), l.pos(s.span())))
                    .collect(),
            ),
            DeValue::Table(t) => table(l, t),
        };
        Node::new(at, kind)
    }

    fn table(l: &Lines<'_>, t: &DeTable<'_>) -> Kind {
        Kind::Map(
            t.iter()
                .map(|(k, v)| {
                    let key = Key {
                        name: k.get_ref().to_string(),
                        pos: l.pos(k.span()),
                    };
                    (key, value(l, v.get_ref(), l.pos(v.span())))
                })
                .collect(),
        )
    }

    match DeTable::parse(text) {
        Ok(t) => {
            let starts = std::iter::once(0)
                .chain(memchr::memchr_iter(b'\n', text.as_bytes()).map(|i| i + 1))
                .collect();
            let lines = Lines { text, starts };
            Ok(Node::new(Pos::START, table(&lines, t.get_ref())))
        }
        Err(e) => {
            let at = e
                .span()
                .map_or(Pos::START, |s| Pos::of_offset(text, s.start));
            Err(SyntaxError {
                pos: at,
                message: toml_message(&e),
            })
        }
    }
}

fn toml_message(e: &toml::de::Error) -> String {
    let m = e.message().trim();
    if m.is_empty() {
        first_line(&e.to_string())
    } else {
        first_line(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_positions_point_at_keys_and_values() {
        let n = parse_yaml("name: a\ntools:\n  - Read\n  - Bash\nmaxTurns: 3\n").unwrap();
        let (k, v) = n.entry("tools").unwrap();
        assert_eq!(k.pos, Pos::new(2, 1));
        match &v.kind {
            Kind::Seq(items) => {
                assert_eq!(items[1].pos, Pos::new(4, 5));
                assert_eq!(items[1].as_str(), Some("Bash"));
            }
            other => panic!("expected a list, got {other:?}"),
        }
        assert_eq!(n.get("maxTurns").unwrap().kind, Kind::Int(3));
        assert_eq!(n.get("name").unwrap().pos, Pos::new(1, 7));
    }

    #[test]
    fn yaml_bare_key_is_null_and_errors_have_positions() {
        let n = parse_yaml("tools:\nname: x\n").unwrap();
        assert!(n.get("tools").unwrap().is_null());
        let e = parse_yaml("a: b\n  c: [d\n").unwrap_err();
        assert!(e.pos.line >= 2, "{e:?}");
    }

    #[test]
    fn toml_positions_and_types() {
        let text = "strict = true\n\n[provider]\nmodel = \"m\"\nmax_tokens = 1_000\n";
        let n = parse_toml(text).unwrap();
        let (k, v) = n.get("provider").unwrap().entry("max_tokens").unwrap();
        assert_eq!(k.pos, Pos::new(5, 1));
        assert_eq!(v.kind, Kind::Int(1000));
        assert_eq!(
            n.at_path(&["provider", "model"]).unwrap().as_str(),
            Some("m")
        );
        let e = parse_toml("a = \n").unwrap_err();
        assert_eq!(e.pos.line, 1);
    }

    #[test]
    fn toml_positions_point_at_keys_and_values() {
        let text = "a = 1\nb = \"é\" # c\n\n[t]\nx = [1,\n  2]\ny = \"\"\"\nmulti\n\"\"\"\nq = {s = \"é\", r = 2}";
        // The text at a position (line, column in characters).
        let at = |p: Pos| -> &str {
            let line = text.split('\n').nth(p.line - 1).unwrap();
            let skip: usize = line.chars().take(p.column - 1).map(char::len_utf8).sum();
            &line[skip..]
        };
        let n = parse_toml(text).unwrap();
        let t = n.get("t").unwrap();
        for (k, v) in n.entries().iter().chain(t.entries()) {
            assert!(at(k.pos).starts_with(&k.name), "{k:?}");
            if let Kind::Seq(items) = &v.kind {
                assert!(at(v.pos).starts_with('['));
                assert!(at(items[1].pos).starts_with("2]"));
            }
        }
        assert!(at(n.get("b").unwrap().pos).starts_with("\"é\""));
        let (k, v) = t.get("q").unwrap().entry("r").unwrap();
        assert!(at(k.pos).starts_with("r = 2"));
        assert!(at(v.pos).starts_with("2}"));
        assert!(at(t.get("y").unwrap().pos).starts_with("\"\"\""));
    }
}
