//! A model's Markdown answer drawn for a person on a terminal: headings,
//! emphasis, inline code, links, lists, block quotes, rules, tables, and
//! fenced code coloured by syntect, wrapped to the terminal's width.
//!
//! It works line by line so that an answer can be drawn while it streams:
//! a line is drawn once it is complete and never drawn again. A table
//! waits for its last row (its columns need every cell). Block structure
//! (fences, headings, list markers, quotes, table rows) is read here; the
//! inline spans of each line are read by pulldown-cmark.
//!
//! Only for a terminal: `run` and `-p` print the text as the model wrote
//! it when stdout is a pipe or a file, and chat does too when stdout is
//! not a terminal. With colour off (`NO_COLOR`, `--no-color`) the layout
//! stays (wrapping, bullets, tables) and no escape sequence is written.

use std::sync::OnceLock;

use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};
use syntect::easy::HighlightLines;
use syntect::highlighting::{Theme, ThemeSet};
use syntect::parsing::SyntaxSet;
use unicode_width::UnicodeWidthStr;

const RESET: &str = "\x1b[0m";

/// How a piece of text is drawn.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Style {
    bold: bool,
    italic: bool,
    strike: bool,
    code: bool,
    link: bool,
    dim: bool,
    heading: bool,
}

impl Style {
    fn escape(self) -> String {
        let mut codes = Vec::new();
        if self.bold || self.heading {
            codes.push("1");
        }
        if self.dim {
            codes.push("2");
        }
        if self.italic {
            codes.push("3");
        }
        if self.link {
            codes.push("4");
        }
        if self.strike {
            codes.push("9");
        }
        if self.code {
            codes.push("36");
        } else if self.heading {
            codes.push("35");
        } else if self.link {
            codes.push("34");
        }
        if codes.is_empty() {
            String::new()
        } else {
            format!("\x1b[{}m", codes.join(";"))
        }
    }
}

/// A run of text in one style.
#[derive(Debug, Clone)]
struct Span {
    text: String,
    style: Style,
}

/// A fenced code block being drawn.
struct Code {
    /// The fence's character and length: a closing fence repeats the
    /// character at least as many times.
    fence: (char, usize),
    highlighter: Option<HighlightLines<'static>>,
}

/// Draws streamed Markdown; see the module comment.
pub struct Markdown {
    width: usize,
    styled: bool,
    /// The incomplete last line.
    pending: String,
    code: Option<Code>,
    /// The rows of a table not yet drawn.
    table: Vec<String>,
}

fn syntaxes() -> &'static SyntaxSet {
    static SET: OnceLock<SyntaxSet> = OnceLock::new();
    SET.get_or_init(SyntaxSet::load_defaults_newlines)
}

fn theme() -> Option<&'static Theme> {
    static THEMES: OnceLock<ThemeSet> = OnceLock::new();
    THEMES
        .get_or_init(ThemeSet::load_defaults)
        .themes
        .get("base16-ocean.dark")
}

impl Markdown {
    /// A renderer for a terminal `width` columns wide (at least 20 are
    /// used), with escape sequences when `styled`.
    pub fn new(width: usize, styled: bool) -> Markdown {
        Markdown {
            width: width.max(20),
            styled,
            pending: String::new(),
            code: None,
            table: Vec::new(),
        }
    }

    /// Takes the next piece of the answer; returns what can be drawn now
    /// (complete lines only).
    pub fn push(&mut self, text: &str) -> String {
        // The model's text never drives the terminal: control characters
        // (an escape sequence could retitle the window, write the
        // clipboard or hide text) are shown as their symbols.
        self.pending.extend(text.chars().filter_map(visible));
        let mut out = String::new();
        while let Some(end) = self.pending.find('\n') {
            let line: String = self.pending.drain(..=end).collect();
            let line = line.trim_end_matches(['\n', '\r']);
            out.push_str(&self.line(line));
        }
        out
    }

    /// The answer ended: draws what is still held (a last line without a
    /// newline, a table) and starts over.
    pub fn finish(&mut self) -> String {
        let mut out = String::new();
        if !self.pending.is_empty() {
            let line = std::mem::take(&mut self.pending);
            out.push_str(&self.line(line.trim_end_matches('\r')));
        }
        out.push_str(&self.flush_table());
        self.code = None;
        out
    }

    /// Draws a whole text at once.
    pub fn render(width: usize, styled: bool, text: &str) -> String {
        let mut md = Markdown::new(width, styled);
        let mut out = md.push(text);
        out.push_str(&md.finish());
        out
    }

    fn line(&mut self, line: &str) -> String {
        if self.code.is_some() {
            return self.code_line(line);
        }
        let mut out = String::new();
        if is_table_row(line) {
            self.table.push(line.to_string());
            return out;
        }
        out.push_str(&self.flush_table());
        let indent = line.len() - line.trim_start_matches(' ').len();
        let trimmed = line.trim();
        if indent < 4
            && let Some(fence) = opening_fence(trimmed)
        {
            let lang = trimmed.trim_start_matches(fence.0).trim();
            let lang = lang.split_whitespace().next().unwrap_or("");
            self.code = Some(Code {
                fence,
                highlighter: self.highlighter(lang),
            });
            return out;
        }
        if trimmed.is_empty() {
            out.push('\n');
        } else if let Some((level, text)) = heading(trimmed) {
            let style = Style {
                heading: true,
                ..Style::default()
            };
            // The first level is underlined as well.
            let style = Style {
                link: level == 1,
                ..style
            };
            out.push_str(&self.wrap(&inline(text, style), "", ""));
        } else if is_rule(trimmed) {
            out.push_str(&self.paint(
                &"─".repeat(self.width.min(80)),
                Style {
                    dim: true,
                    ..Style::default()
                },
            ));
            out.push('\n');
        } else if let Some(rest) = quoted(line) {
            let bar = self.paint(
                "│ ",
                Style {
                    dim: true,
                    ..Style::default()
                },
            );
            let spans = inline(
                rest,
                Style {
                    italic: true,
                    ..Style::default()
                },
            );
            out.push_str(&self.wrap_prefixed(&spans, (&bar, 2), (&bar, 2)));
        } else if let Some((marker, text)) = list_item(line) {
            let pad = " ".repeat(UnicodeWidthStr::width(marker.as_str()));
            let spans = inline(text, Style::default());
            out.push_str(&self.wrap(&spans, &marker, &pad));
        } else {
            out.push_str(&self.wrap(&inline(trimmed, Style::default()), "", ""));
        }
        out
    }

    fn highlighter(&self, lang: &str) -> Option<HighlightLines<'static>> {
        if !self.styled {
            return None;
        }
        let set = syntaxes();
        let syntax = if lang.is_empty() {
            set.find_syntax_plain_text()
        } else {
            set.find_syntax_by_token(lang)
                .unwrap_or_else(|| set.find_syntax_plain_text())
        };
        Some(HighlightLines::new(syntax, theme()?))
    }

    fn code_line(&mut self, line: &str) -> String {
        let Some(code) = self.code.as_mut() else {
            return String::new();
        };
        let trimmed = line.trim();
        let (ch, len) = code.fence;
        if trimmed.len() >= len && trimmed.chars().all(|c| c == ch) {
            self.code = None;
            return String::new();
        }
        let drawn = code
            .highlighter
            .as_mut()
            .and_then(|h| {
                let with_newline = format!("{line}\n");
                let ranges = h.highlight_line(&with_newline, syntaxes()).ok()?;
                let escaped = syntect::util::as_24_bit_terminal_escaped(&ranges, false);
                Some(format!("{}{RESET}", escaped.trim_end_matches('\n')))
            })
            .unwrap_or_else(|| line.to_string());
        format!("  {drawn}\n")
    }

    fn paint(&self, text: &str, style: Style) -> String {
        let on = if self.styled {
            style.escape()
        } else {
            String::new()
        };
        if on.is_empty() {
            text.to_string()
        } else {
            format!("{on}{text}{RESET}")
        }
    }

    /// Wraps `spans` with `first` before the first line and `rest` before
    /// the others (plain prefixes).
    fn wrap(&self, spans: &[Span], first: &str, rest: &str) -> String {
        self.wrap_prefixed(
            spans,
            (first, UnicodeWidthStr::width(first)),
            (rest, UnicodeWidthStr::width(rest)),
        )
    }

    /// Wraps `spans` to the width: words are kept whole unless one alone
    /// is wider than a line. Each prefix comes with its width on screen
    /// (it may hold escape sequences).
    fn wrap_prefixed(&self, spans: &[Span], first: (&str, usize), rest: (&str, usize)) -> String {
        let mut out = String::new();
        let mut line = String::from(first.0);
        let mut col = first.1;
        let mut empty = true;
        let mut space: Option<&str> = None;
        for span in spans {
            for word in words(&span.text) {
                if word.trim().is_empty() {
                    if !empty {
                        space = Some(word);
                    }
                    continue;
                }
                let gap = space.map_or(0, UnicodeWidthStr::width);
                if !empty && col + gap + UnicodeWidthStr::width(word) > self.width {
                    out.push_str(&line);
                    out.push('\n');
                    line = String::from(rest.0);
                    col = rest.1;
                } else if let Some(s) = space {
                    line.push_str(s);
                    col += gap;
                }
                space = None;
                let mut piece = word;
                // A word wider than the line is cut.
                loop {
                    let room = self.width.saturating_sub(col).max(1);
                    if UnicodeWidthStr::width(piece) <= room {
                        break;
                    }
                    let cut = split_at_width(piece, room);
                    line.push_str(&self.paint(&piece[..cut], span.style));
                    out.push_str(&line);
                    out.push('\n');
                    line = String::from(rest.0);
                    col = rest.1;
                    piece = &piece[cut..];
                }
                line.push_str(&self.paint(piece, span.style));
                col += UnicodeWidthStr::width(piece);
                empty = false;
            }
        }
        out.push_str(&line);
        out.push('\n');
        out
    }

    fn flush_table(&mut self) -> String {
        if self.table.is_empty() {
            return String::new();
        }
        let rows: Vec<String> = std::mem::take(&mut self.table);
        let mut cells: Vec<Vec<Vec<Span>>> = Vec::new();
        let mut header_rows = 0;
        for row in &rows {
            let split = split_row(row);
            if split.iter().all(|c| is_delimiter_cell(c)) {
                if header_rows == 0 {
                    header_rows = cells.len();
                }
                continue;
            }
            cells.push(split.iter().map(|c| inline(c, Style::default())).collect());
        }
        let columns = cells.iter().map(Vec::len).max().unwrap_or(0);
        let mut widths = vec![0usize; columns];
        for row in &cells {
            for (i, cell) in row.iter().enumerate() {
                widths[i] = widths[i].max(spans_width(cell));
            }
        }
        let total: usize = widths.iter().sum::<usize>() + 3 * columns.saturating_sub(1);
        if total > self.width || columns == 0 {
            // Too wide to draw as columns: each row as a line of its own.
            return rows
                .iter()
                .map(|r| self.wrap(&inline(r.trim(), Style::default()), "", ""))
                .collect();
        }
        let sep = self.paint(
            " │ ",
            Style {
                dim: true,
                ..Style::default()
            },
        );
        let mut out = String::new();
        for (r, row) in cells.iter().enumerate() {
            let mut line = String::new();
            for (i, width) in widths.iter().enumerate() {
                if i > 0 {
                    line.push_str(&sep);
                }
                let cell = row.get(i).map_or(&[][..], Vec::as_slice);
                for span in cell {
                    let mut style = span.style;
                    style.bold |= r < header_rows;
                    line.push_str(&self.paint(&span.text, style));
                }
                line.push_str(&" ".repeat(width - spans_width(cell)));
            }
            out.push_str(line.trim_end());
            out.push('\n');
            if r + 1 == header_rows {
                let rule: Vec<String> = widths.iter().map(|w| "─".repeat(*w)).collect();
                out.push_str(&self.paint(
                    &rule.join("─┼─"),
                    Style {
                        dim: true,
                        ..Style::default()
                    },
                ));
                out.push('\n');
            }
        }
        out
    }
}

/// A character of the model's text as drawn: line breaks and tabs as they
/// are, a carriage return dropped, any other control character as its
/// Unicode symbol (`␛` for ESC) or, past ASCII, the replacement character.
pub(super) fn visible(c: char) -> Option<char> {
    match c {
        '\n' | '\t' => Some(c),
        '\r' => None,
        '\u{7f}' => Some('\u{2421}'),
        c if (c as u32) < 0x20 => char::from_u32(0x2400 + c as u32),
        c if c.is_control() => Some('\u{fffd}'),
        c => Some(c),
    }
}

/// The byte index at which `s` reaches `width` columns (at least one
/// character).
fn split_at_width(s: &str, width: usize) -> usize {
    let mut used = 0;
    for (i, c) in s.char_indices() {
        let w = unicode_width::UnicodeWidthChar::width(c).unwrap_or(0);
        if used + w > width && i > 0 {
            return i;
        }
        used += w;
    }
    s.len()
}

/// Words and the runs of spaces between them, in order.
fn words(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut in_space = None;
    for (i, c) in text.char_indices() {
        let space = c == ' ' || c == '\t';
        if in_space.is_some_and(|s| s != space) {
            out.push(&text[start..i]);
            start = i;
        }
        in_space = Some(space);
    }
    if start < text.len() {
        out.push(&text[start..]);
    }
    out
}

fn spans_width(spans: &[Span]) -> usize {
    spans
        .iter()
        .map(|s| UnicodeWidthStr::width(s.text.as_str()))
        .sum()
}

/// The inline spans of one line of text, in `base` style plus what its
/// Markdown says (emphasis, code, links: a link's target follows its text
/// when they differ).
fn inline(text: &str, base: Style) -> Vec<Span> {
    let mut spans: Vec<Span> = Vec::new();
    let mut style = base;
    let mut links: Vec<(String, usize)> = Vec::new();
    let push = |spans: &mut Vec<Span>, text: &str, style: Style| {
        if !text.is_empty() {
            spans.push(Span {
                text: text.to_string(),
                style,
            });
        }
    };
    let parser = Parser::new_ext(text, Options::ENABLE_STRIKETHROUGH);
    for event in parser {
        match event {
            Event::Start(Tag::Emphasis) => style.italic = true,
            Event::End(TagEnd::Emphasis) => style.italic = base.italic,
            Event::Start(Tag::Strong) => style.bold = true,
            Event::End(TagEnd::Strong) => style.bold = base.bold,
            Event::Start(Tag::Strikethrough) => style.strike = true,
            Event::End(TagEnd::Strikethrough) => style.strike = base.strike,
            Event::Start(Tag::Link { dest_url, .. }) => {
                links.push((dest_url.to_string(), spans.len()));
                style.link = true;
            }
            Event::End(TagEnd::Link) => {
                style.link = base.link;
                if let Some((url, from)) = links.pop() {
                    let shown: String = spans[from..]
                        .iter()
                        .map(|s: &Span| s.text.as_str())
                        .collect();
                    if shown != url && !url.is_empty() {
                        push(
                            &mut spans,
                            &format!(" ({url})"),
                            Style { dim: true, ..base },
                        );
                    }
                }
            }
            Event::Code(t) => push(
                &mut spans,
                &t,
                Style {
                    code: true,
                    ..style
                },
            ),
            Event::Text(t) | Event::Html(t) | Event::InlineHtml(t) => push(&mut spans, &t, style),
            Event::SoftBreak | Event::HardBreak => push(&mut spans, " ", style),
            Event::TaskListMarker(done) => {
                push(&mut spans, if done { "[x] " } else { "[ ] " }, style);
            }
            _ => {}
        }
    }
    if spans.is_empty() && !text.trim().is_empty() {
        push(&mut spans, text, base);
    }
    spans
}

/// A fence that opens a code block: three or more backticks or tildes.
fn opening_fence(trimmed: &str) -> Option<(char, usize)> {
    let ch = trimmed.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let len = trimmed.chars().take_while(|c| *c == ch).count();
    // A backtick fence's info string holds no backtick.
    let info_ok = ch != '`' || !trimmed[len..].contains('`');
    (len >= 3 && info_ok).then_some((ch, len))
}

fn heading(trimmed: &str) -> Option<(usize, &str)> {
    let level = trimmed.chars().take_while(|c| *c == '#').count();
    if !(1..=6).contains(&level) {
        return None;
    }
    let rest = &trimmed[level..];
    if rest.is_empty() {
        return Some((level, ""));
    }
    rest.starts_with(' ')
        .then(|| (level, rest.trim().trim_end_matches('#').trim_end()))
}

fn is_rule(trimmed: &str) -> bool {
    let squeezed: String = trimmed.chars().filter(|c| *c != ' ').collect();
    squeezed.len() >= 3
        && ['-', '*', '_']
            .iter()
            .any(|m| squeezed.chars().all(|c| c == *m))
}

fn quoted(line: &str) -> Option<&str> {
    let rest = line.trim_start().strip_prefix('>')?;
    Some(rest.strip_prefix(' ').unwrap_or(rest))
}

/// A list item: its marker as drawn (indent, bullet or number, a space)
/// and its text.
fn list_item(line: &str) -> Option<(String, &str)> {
    let indent = line.len() - line.trim_start_matches(' ').len();
    let rest = &line[indent..];
    let depth = indent / 2;
    let pad = " ".repeat(indent);
    if let Some(text) = ["- ", "* ", "+ "].iter().find_map(|m| rest.strip_prefix(m)) {
        let bullet = if depth == 0 { "•" } else { "◦" };
        return Some((format!("{pad}{bullet} "), text.trim_start()));
    }
    let digits = rest.chars().take_while(char::is_ascii_digit).count();
    if (1..=9).contains(&digits) {
        let after = &rest[digits..];
        for sep in [". ", ") "] {
            if let Some(text) = after.strip_prefix(sep) {
                return Some((
                    format!("{pad}{}{} ", &rest[..digits], &sep[..1]),
                    text.trim_start(),
                ));
            }
        }
    }
    None
}

fn is_table_row(line: &str) -> bool {
    let t = line.trim();
    t.len() > 1 && t.starts_with('|') && t[1..].contains('|')
}

fn split_row(row: &str) -> Vec<String> {
    let t = row.trim();
    let t = t.strip_prefix('|').unwrap_or(t);
    let t = t.strip_suffix('|').unwrap_or(t);
    let mut cells = Vec::new();
    let mut cell = String::new();
    let mut escaped = false;
    for c in t.chars() {
        match c {
            '\\' if !escaped => escaped = true,
            '|' if !escaped => cells.push(std::mem::take(&mut cell).trim().to_string()),
            _ => {
                if escaped && c != '|' {
                    cell.push('\\');
                }
                escaped = false;
                cell.push(c);
            }
        }
    }
    cells.push(cell.trim().to_string());
    cells
}

fn is_delimiter_cell(cell: &str) -> bool {
    let t = cell.trim();
    let t = t.strip_prefix(':').unwrap_or(t);
    let t = t.strip_suffix(':').unwrap_or(t);
    !t.is_empty() && t.chars().all(|c| c == '-')
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn plain(text: &str, width: usize) -> String {
        Markdown::render(width, false, text)
    }

    #[test]
    fn block_structure_is_drawn_and_markers_go() {
        let out = plain(
            "# Title\n\nSome **bold** and `code` and [docs](https://x.test/d).\n\n- one\n  - nested\n2. two\n> quoted\n---\n",
            60,
        );
        assert_eq!(
            out,
            "Title\n\nSome bold and code and docs (https://x.test/d).\n\n• one\n  ◦ nested\n2. two\n│ quoted\n────────────────────────────────────────────────────────────\n"
        );
    }

    #[test]
    fn long_lines_wrap_with_a_hanging_indent() {
        let out = plain("- alpha beta gamma delta epsilon zeta eta theta", 24);
        assert_eq!(out, "• alpha beta gamma delta\n  epsilon zeta eta theta\n");
        for line in out.lines() {
            assert!(UnicodeWidthStr::width(line) <= 24, "{line:?}");
        }
        // A word longer than the line is cut, not run past the edge.
        let out = plain(&"x".repeat(50), 20);
        assert!(out.lines().all(|l| l.len() <= 20), "{out}");
        assert_eq!(out.replace('\n', ""), "x".repeat(50));
    }

    #[test]
    fn tables_line_up_and_code_keeps_its_text() {
        let out = plain(
            "| a | long header |\n|---|:---:|\n| 1 | 2 |\n\n```rust\nfn main() {}\n```\nafter\n",
            60,
        );
        assert_eq!(
            out,
            "a │ long header\n──┼────────────\n1 │ 2\n\n  fn main() {}\nafter\n"
        );
    }

    #[test]
    fn streaming_in_pieces_draws_each_line_once_and_the_same_as_whole() {
        let text = "Intro with *emphasis*\n\n```python\nprint('hi')\n```\n| x | y |\n|---|---|\n| 1 | 2 |\ntail";
        let whole = Markdown::render(50, true, text);
        let mut md = Markdown::new(50, true);
        let mut streamed = String::new();
        for piece in text.as_bytes().chunks(3) {
            let piece = std::str::from_utf8(piece).unwrap();
            let drawn = md.push(piece);
            // Nothing before a line is complete.
            assert!(drawn.is_empty() || drawn.ends_with('\n'));
            streamed.push_str(&drawn);
        }
        streamed.push_str(&md.finish());
        assert_eq!(streamed, whole);
        assert!(whole.contains("\x1b[3memphasis"), "{whole:?}");
        // The code line is coloured (24-bit escapes), its text intact.
        let code = whole.lines().find(|l| l.contains("print")).unwrap();
        assert!(code.contains("\x1b[38;2;"), "{code:?}");
    }

    #[test]
    fn the_models_escape_sequences_never_reach_the_terminal() {
        let hostile = "title \u{1b}]0;owned\u{7}\r\nclip \u{1b}]52;c;ZXZpbA==\u{7} \u{9b}31m\n";
        for styled in [false, true] {
            let out = Markdown::render(60, styled, hostile);
            let escapes = out.matches('\u{1b}').count();
            // Only the renderer's own styles (none here when unstyled).
            assert!(!out.contains("\u{1b}]"), "{out:?}");
            assert!(!out.contains('\u{7}') && !out.contains('\u{9b}'), "{out:?}");
            if !styled {
                assert_eq!(escapes, 0, "{out:?}");
            }
            assert!(out.contains("␛]0;owned␇"), "{out:?}");
        }
    }

    #[test]
    fn without_style_no_escape_is_written() {
        let out = plain("**b** _i_ `c` ```x```\n```sh\nls\n```\n", 40);
        assert!(!out.contains('\x1b'), "{out:?}");
    }
}
