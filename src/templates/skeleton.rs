//! Compiling a template without making the parser walk its plain text.
//!
//! Handlebars parses a template with pest, which matches plain text one
//! character at a time through several rule calls, and then asks pest for
//! the line and column of every token, each counted from the start of the
//! text: most of a compile is spent in the long stretches of prose between
//! `{{…}}`, and the position lookups grow with the square of the length.
//!
//! [`compile`] gives the parser a skeleton instead: each stretch of plain
//! text keeps its leading and trailing whitespace (all that standalone-line
//! and `~` trimming ever looks at or removes) and has its middle, which
//! starts and ends with a non-space character, replaced by a short marker.
//! The compiled skeleton then gets the middles back in its raw strings and
//! its recorded positions translated to the original text, which gives the
//! same [`Template`] as compiling the original (a unit test compares every
//! built-in template, tool description and agent prompt, and generated
//! texts). Texts the scanner is not sure about (escapes, raw blocks,
//! triple braces, brackets or braces inside an expression, carriage
//! returns, an unclosed `{{`) and skeletons that do not compile go to the
//! parser whole, so errors are the parser's own.

use handlebars::TemplateError;
use handlebars::template::{Template, TemplateElement};

/// Marks a replaced middle in the skeleton (`MARK index MARK`); a text
/// that contains it is compiled whole.
const MARK: char = '\u{E000}';

/// Middles shorter than this stay in the skeleton: not worth a marker.
const MIN_MIDDLE: usize = 24;

/// [`Template::compile`], or with a name [`Template::compile_with_name`].
pub fn compile(text: &str, name: Option<String>) -> Result<Template, TemplateError> {
    let whole = |name: Option<String>| match name {
        Some(n) => Template::compile_with_name(text, n),
        None => Template::compile(text),
    };
    let Some(skeleton) = Skeleton::of(text) else {
        return whole(name);
    };
    let compiled = match &name {
        Some(n) => Template::compile_with_name(&skeleton.text, n.clone()),
        None => Template::compile(&skeleton.text),
    };
    match compiled {
        Ok(mut t) => {
            if skeleton.restore(text, &mut t) {
                Ok(t)
            } else {
                whole(name)
            }
        }
        Err(_) => whole(name),
    }
}

/// A text with its plain-text middles replaced by markers.
struct Skeleton {
    text: String,
    /// Per marker: its byte range in the skeleton and the middle's byte
    /// range in the original, in order.
    middles: Vec<Middle>,
    /// Byte offsets where the skeleton's lines start.
    lines: Vec<usize>,
}

struct Middle {
    skeleton: (usize, usize),
    original: (usize, usize),
}

impl Skeleton {
    fn of(text: &str) -> Option<Skeleton> {
        if text.len() < 2 * MIN_MIDDLE
            || text.contains(['\r', MARK])
            || text.contains("{{{")
            || text.contains("\\{{")
        {
            return None;
        }
        let mut out = String::with_capacity(text.len() / 2);
        let mut middles = Vec::new();
        let mut at = 0;
        loop {
            let next = text[at..].find("{{").map_or(text.len(), |i| at + i);
            plain(text, at, next, &mut out, &mut middles);
            if next == text.len() {
                break;
            }
            let end = expression_end(text, next)?;
            out.push_str(&text[next..end]);
            at = end;
        }
        if middles.is_empty() {
            return None;
        }
        let lines = line_starts(&out);
        Some(Skeleton {
            text: out,
            middles,
            lines,
        })
    }

    /// Puts the middles back into `t`'s raw strings and its positions back
    /// into the original's lines and columns; `false` when something does
    /// not add up (then the caller compiles the original).
    fn restore(&self, original: &str, t: &mut Template) -> bool {
        let lines = line_starts(original);
        self.restore_in(original, &lines, t)
    }

    fn restore_in(&self, original: &str, lines: &[usize], t: &mut Template) -> bool {
        for m in &mut t.mapping {
            let Some(at) = self.offset_of(m.0, m.1) else {
                return false;
            };
            let at = self.to_original(at);
            let (line, column) = line_col(original, lines, at);
            m.0 = line;
            m.1 = column;
        }
        for e in &mut t.elements {
            let ok = match e {
                TemplateElement::RawString(s) => self.fill(original, s),
                TemplateElement::HtmlExpression(h)
                | TemplateElement::Expression(h)
                | TemplateElement::HelperBlock(h) => [&mut h.template, &mut h.inverse]
                    .into_iter()
                    .flatten()
                    .all(|t| self.restore_in(original, lines, t)),
                TemplateElement::DecoratorExpression(d)
                | TemplateElement::DecoratorBlock(d)
                | TemplateElement::PartialExpression(d)
                | TemplateElement::PartialBlock(d) => d
                    .template
                    .as_mut()
                    .is_none_or(|t| self.restore_in(original, lines, t)),
                TemplateElement::Comment(c) => !c.contains(MARK),
                _ => false,
            };
            if !ok {
                return false;
            }
        }
        true
    }

    /// Replaces each marker in `s` by its middle.
    fn fill(&self, original: &str, s: &mut String) -> bool {
        if !s.contains(MARK) {
            return true;
        }
        let mut out = String::with_capacity(s.len() * 4);
        let mut rest = s.as_str();
        while let Some(i) = rest.find(MARK) {
            out.push_str(&rest[..i]);
            let after = &rest[i + MARK.len_utf8()..];
            let Some(j) = after.find(MARK) else {
                return false;
            };
            let Some(m) = after[..j]
                .parse::<usize>()
                .ok()
                .and_then(|n| self.middles.get(n))
            else {
                return false;
            };
            out.push_str(&original[m.original.0..m.original.1]);
            rest = &after[j + MARK.len_utf8()..];
        }
        out.push_str(rest);
        *s = out;
        true
    }

    /// The byte offset of a (1-based) line and column in the skeleton,
    /// columns counted in characters as the parser counts them.
    fn offset_of(&self, line: usize, column: usize) -> Option<usize> {
        let start = *self.lines.get(line.checked_sub(1)?)?;
        let skip = column.checked_sub(1)?;
        let rest = &self.text[start..];
        match rest.char_indices().nth(skip) {
            Some((i, _)) => Some(start + i),
            None if rest.chars().count() == skip => Some(self.text.len()),
            None => None,
        }
    }

    /// A skeleton offset in the original text (a marker's start is its
    /// middle's start).
    fn to_original(&self, at: usize) -> usize {
        let i = self.middles.partition_point(|m| m.skeleton.0 <= at);
        let Some(m) = i.checked_sub(1).and_then(|i| self.middles.get(i)) else {
            return at;
        };
        if at < m.skeleton.1 {
            m.original.0
        } else {
            at - m.skeleton.1 + m.original.1
        }
    }
}

/// Copies the plain text `text[from..to]` into `out`, its middle replaced by
/// a marker when long enough.
fn plain(text: &str, from: usize, to: usize, out: &mut String, middles: &mut Vec<Middle>) {
    let run = &text[from..to];
    let start = from + (run.len() - run.trim_start().len());
    let end = to - (run.len() - run.trim_end().len());
    if end < start + MIN_MIDDLE {
        out.push_str(run);
        return;
    }
    out.push_str(&text[from..start]);
    let at = out.len();
    out.push(MARK);
    out.push_str(&middles.len().to_string());
    out.push(MARK);
    middles.push(Middle {
        skeleton: (at, out.len()),
        original: (start, end),
    });
    out.push_str(&text[end..to]);
}

/// Where the expression starting at `start` (at `{{`) ends, just past its
/// `}}`; `None` when the scanner is not sure.
fn expression_end(text: &str, start: usize) -> Option<usize> {
    let rest = &text[start..];
    if rest.starts_with("{{!--") {
        return rest.find("--}}").map(|i| start + i + 4);
    }
    if rest.starts_with("{{!") {
        return rest.find("}}").map(|i| start + i + 2);
    }
    let bytes = rest.as_bytes();
    let mut i = 2;
    while i < bytes.len() {
        match bytes[i] {
            b'}' if bytes.get(i + 1) == Some(&b'}') => {
                return (bytes.get(i + 2) != Some(&b'}')).then_some(start + i + 2);
            }
            quote @ (b'"' | b'\'') => {
                i += 1;
                loop {
                    match bytes.get(i) {
                        None => return None,
                        Some(b'\\') => i += 2,
                        Some(&b) if b == quote => break,
                        Some(_) => i += 1,
                    }
                }
            }
            b'{' | b'}' | b'[' | b']' => return None,
            _ => {}
        }
        i += 1;
    }
    None
}

fn line_starts(text: &str) -> Vec<usize> {
    std::iter::once(0)
        .chain(text.match_indices('\n').map(|(i, _)| i + 1))
        .collect()
}

/// The 1-based line and column (in characters) of byte offset `at`.
fn line_col(text: &str, lines: &[usize], at: usize) -> (usize, usize) {
    let line = lines.partition_point(|&s| s <= at).max(1);
    let start = lines[line - 1];
    (line, text[start..at].chars().count() + 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn same(text: &str) {
        let fast = compile(text, Some("t".into()));
        let whole = Template::compile_with_name(text, "t".into());
        match (fast, whole) {
            (Ok(a), Ok(b)) => assert_eq!(a, b, "{text:?}"),
            (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "{text:?}"),
            (a, b) => panic!("{text:?}: {a:?} vs {b:?}"),
        }
    }

    #[test]
    fn a_skeleton_compiles_to_the_same_template() {
        let long = "A sentence long enough to be replaced by a marker.";
        for text in [
            format!(
                "{long}\n{{{{#if a}}}}\n  {long}\n{{{{else}}}}\n{long} {{{{b}}}} {long}\n{{{{/if}}}}\n"
            ),
            format!(
                "  {long}  {{{{~a~}}}}  {long}\n\n{{{{#each xs}}}}\n    {long}\n  {{{{/each}}}}"
            ),
            format!(
                "{long}\n  {{{{> p}}}}\n{long}\n{{{{!-- {long} }}}} --}}}}\n{{{{! {long} }}}}{long}"
            ),
            format!("{long}{{{{#if (eq a \"x}}}}\")}}}}{long}{{{{/if}}}}\u{e9}{long}\n"),
            format!("{long}\n{{{{#*inline \"p\"}}}}\n{long}\n{{{{/inline}}}}\n{{{{> p}}}}\n{long}"),
            // Errors are the parser's own.
            format!("{long}\n{{{{#if a}}}}\n{long}\n"),
            format!("{long} {{{{a"),
            format!("{long}\n{long} {{{{/if}}}}\n"),
        ] {
            same(&text);
        }
    }

    #[test]
    fn every_embedded_text_compiles_the_same_from_its_skeleton() {
        let (t, _) = crate::templates::Templates::load(None);
        let mut texts: Vec<String> = t.origins().values().map(|o| o.text.clone()).collect();
        let (specs, _) = crate::tools::spec::ToolSpecs::load(None);
        texts.extend(specs.iter().map(|s| s.description.clone()));
        let agents = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("agents");
        for e in std::fs::read_dir(agents).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "md") {
                texts.push(std::fs::read_to_string(p).unwrap());
            }
        }
        let mut skeletons = 0;
        for text in &texts {
            skeletons += usize::from(Skeleton::of(text).is_some());
            same(text);
        }
        assert!(skeletons >= 5, "{skeletons} of {}", texts.len());
    }

    /// An on-disk override long enough for the skeleton renders its own
    /// text, and one that does not compile is reported where the parser
    /// says, with the built-in kept.
    #[test]
    fn an_override_from_its_skeleton_renders_and_reports_its_own_lines() {
        let dir = tempfile::tempdir().unwrap();
        let long = "A sentence long enough to be replaced by a marker.";
        let good =
            format!("{long}\n{{{{#if directive}}}}\n{long} {{{{directive}}}}\n{{{{/if}}}}\n");
        let bad = format!("{long}\n{long}\n{{{{#if directive}}}}\n{long}\n");
        assert!(Skeleton::of(&good).is_some() && Skeleton::of(&bad).is_some());
        std::fs::write(dir.path().join("fork_child.hbs"), &good).unwrap();
        std::fs::write(dir.path().join("subagent_notes.hbs"), &bad).unwrap();
        let (t, diags) = crate::templates::Templates::load(Some(dir.path()));
        let shown = t.show_value("fork_child", false, &serde_json::json!({"directive": "go"}));
        assert_eq!(shown, format!("{long}\n{long} go"));
        let expected = Template::compile(&bad).unwrap_err().pos().map(|(l, _)| l);
        assert!(expected.is_some());
        let d = diags
            .iter()
            .find(|d| {
                d.path
                    .as_ref()
                    .is_some_and(|p| p.ends_with("subagent_notes.hbs"))
            })
            .expect("a diagnostic for the broken override");
        assert_eq!(d.line, expected, "{d:?}");
        assert_eq!(
            t.origins()["subagent_notes"].path,
            None,
            "the built-in one stays"
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]
        #[test]
        fn generated_texts_compile_the_same(parts in proptest::collection::vec(prop_oneof![
            8 => Just("Some plain words that are long enough here.".to_string()),
            8 => Just("  \n".to_string()),
            8 => Just("\n".to_string()),
            8 => Just(" x ".to_string()),
            8 => Just("\t".to_string()),
            8 => Just("{{a}}".to_string()),
            8 => Just("{{~a}}".to_string()),
            8 => Just("{{a~}}".to_string()),
            8 => Just("{{#if a}}".to_string()),
            8 => Just("{{~#if a~}}".to_string()),
            8 => Just("{{else}}".to_string()),
            8 => Just("{{/if}}".to_string()),
            8 => Just("{{#each xs}}".to_string()),
            8 => Just("{{/each}}".to_string()),
            8 => Just("{{> p}}".to_string()),
            8 => Just("{{! c }}".to_string()),
            8 => Just("{{!-- c }} --}}".to_string()),
            1 => Just("{{".to_string()),
            1 => Just("}}".to_string()),
            1 => Just("{".to_string()),
            1 => Just("\\".to_string()),
            8 => Just("\u{e9}".to_string()),
        ], 0..24)) {
            same(&parts.concat());
        }
    }
}
