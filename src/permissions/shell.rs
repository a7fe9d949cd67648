//! The shell parse behind Bash rules: a command line becomes the list of
//! simple commands the shell would run, with quotes, escapes and comments
//! resolved and leading assignments dropped.
//!
//! The parse is brush-parser's (the parser of the brush shell, which aims at
//! bash compatibility), so `;`, `&&`, `||`, `|`, newlines, subshells, brace
//! groups, loops, functions, here-documents, `$(…)`, backticks and `<(…)` are
//! read as bash reads them. On top of the parse this module looks through the
//! usual ways to run one command from another: wrappers (`env`, `command`,
//! `builtin`, `exec`, `nohup`, `nice`, `timeout`, `time`, `stdbuf`, `setsid`,
//! `ionice`, `sudo`, `doas`, `xargs`), command strings (`sh -c`, `bash -c`,
//! `eval`, `trap`, `su -c`, `watch`, `env -S`) and `find -exec`/`-ok`
//! (`find -delete` counts as an `rm` of find's start paths).
//!
//! Whatever cannot be known before the shell runs — a command name that is an
//! expansion (`$X`, `"$(…)"`), a glob in command position, a shell reading
//! commands from its standard input, text that does not parse — is recorded
//! in [`Parsed::uncertain`], and a command with such a part is never allowed
//! by a prefix rule.

use brush_parser::ast;
use brush_parser::word::{self, WordPiece, WordPieceWithSource};
use brush_parser::{Parser, ParserOptions};

/// How deep command strings (`sh -c`, `eval`, `$(…)`) may nest before the
/// parse gives up and calls the rest uncertain.
const MAX_DEPTH: usize = 12;

/// One word of a simple command after quote removal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Word {
    /// Text known before the command runs.
    Known(String),
    /// Text that depends on an expansion; the raw source is kept for display.
    Unknown(String),
}

impl Word {
    pub fn known(&self) -> Option<&str> {
        match self {
            Word::Known(s) => Some(s),
            Word::Unknown(_) => None,
        }
    }
}

/// One simple command: a command name and its arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimpleCommand {
    pub words: Vec<Word>,
    /// The command's own leading assignments (`FOO=1 cmd`), name and
    /// value, in order; empty for a command run through a wrapper.
    pub env: Vec<(String, Word)>,
}

impl SimpleCommand {
    /// The command as a shell would print it: known words quoted where
    /// needed, unknown ones as written.
    pub fn display(&self) -> String {
        self.words
            .iter()
            .map(|w| match w {
                Word::Known(s) => quote(s),
                Word::Unknown(raw) => raw.clone(),
            })
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// Quotes a word for display when it holds anything a shell would split or
/// interpret.
pub fn quote(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars().all(|c| {
            c.is_ascii_alphanumeric()
                || matches!(
                    c,
                    '-' | '_' | '.' | '/' | ':' | '=' | '+' | ',' | '@' | '%' | '{' | '}'
                )
        });
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// Why part of a command line cannot be known before it runs, as data: the
/// `permission_reason` template words it (as part of a permission reason,
/// and for `cadre permissions check`). `kind` names the variant.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ShellDoubt {
    /// The parser's thread failed.
    ParserFailed,
    /// The parser's thread could not be started.
    ParserNotStarted,
    TooLong {
        max: usize,
    },
    TooNested {
        max: usize,
    },
    /// Command strings (`$(…)`, `sh -c`) nested past `max`.
    NestedStrings {
        max: usize,
    },
    /// `error` is the parser's own.
    Unparsable {
        src: String,
        error: String,
    },
    SubstitutionInArithmetic {
        text: String,
    },
    ArithmeticOnVariables {
        text: String,
    },
    HereDocument {
        error: String,
    },
    BadWord {
        word: String,
        error: String,
    },
    SubstitutionInExpansion {
        src: String,
    },
    UnknownName {
        word: String,
    },
    GlobName {
        name: String,
    },
    /// Wrappers (`nohup sudo env …`) nested past `max`.
    NestedWrappers {
        max: usize,
    },
    /// A wrapper whose option is only known when the shell runs.
    UnknownOption {
        command: String,
    },
    /// A wrapper with an option cadre does not know.
    StrangeOption {
        command: String,
        option: String,
    },
    /// `eval`, `trap`, `watch` with text only known at run time.
    UnknownText {
        command: String,
    },
    LetVariables,
    /// `declare -i` and the like.
    ArithmeticInput {
        command: String,
    },
    UnknownAlias,
    HashPath,
    UnknownEnvCommand,
    /// A shell with an argument only known at run time.
    UnknownArgument {
        command: String,
    },
    UnknownCommandString {
        command: String,
    },
    /// A shell reading commands from its standard input.
    ReadsInput {
        command: String,
    },
    FishSyntax,
    /// A shell other than bash given `$'…'`.
    AnsiQuoting {
        shell: String,
    },
}

/// The result of parsing one command line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Parsed {
    /// Every simple command found, outermost first. A wrapper and the
    /// command it runs are both listed (`nohup rm x` gives `nohup rm x` and
    /// `rm x`).
    pub commands: Vec<SimpleCommand>,
    /// Why some of what runs cannot be known before it runs; empty when the
    /// parse is certain.
    pub uncertain: Vec<ShellDoubt>,
    /// Files that output redirections write (`> f`, `>> f`, `&> f`, `<> f`),
    /// as written; `/dev/null` and the like are left out.
    pub writes: Vec<Word>,
    /// Names of variables the command sets for what it runs: leading
    /// assignments (`PATH=. ls`) and assignment-only commands (`X=1; …`).
    pub assignments: Vec<String>,
    /// Whether the command changes directory (`cd`, `pushd`, `popd`), which
    /// moves what relative paths after it mean.
    pub changes_dir: bool,
}

/// The most brackets, backticks and compound-command keywords a command
/// string may hold; beyond it the text is not parsed (a parser recursing
/// that deep could exhaust its stack) and counts as uncertain.
const MAX_NESTING_TOKENS: usize = 200;

/// The longest command string parsed, in bytes.
const MAX_SOURCE_BYTES: usize = 256 * 1024;

/// The parser runs on its own thread with this much stack, so that deep but
/// allowed nesting cannot overflow a runtime worker's stack.
const PARSER_STACK: usize = 64 * 1024 * 1024;

/// Parses a command line as bash would.
pub fn parse(command: &str) -> Parsed {
    let src = command.to_string();
    let run = move || {
        let mut w = Walker::default();
        w.source(&src, 0);
        w.out.uncertain.dedup();
        w.out
    };
    let failed = |why: ShellDoubt| Parsed {
        uncertain: vec![why],
        ..Parsed::default()
    };
    match std::thread::Builder::new()
        .name("shell-parse".into())
        .stack_size(PARSER_STACK)
        .spawn(run)
    {
        Ok(handle) => handle
            .join()
            .unwrap_or_else(|_| failed(ShellDoubt::ParserFailed)),
        Err(_) => failed(ShellDoubt::ParserNotStarted),
    }
}

/// Why a command string is too large or too deeply built to parse, if it is.
fn too_complex(src: &str) -> Option<ShellDoubt> {
    if src.len() > MAX_SOURCE_BYTES {
        return Some(ShellDoubt::TooLong {
            max: MAX_SOURCE_BYTES,
        });
    }
    let brackets = src
        .chars()
        .filter(|c| matches!(c, '(' | '{' | '[' | '`'))
        .count();
    let keywords = src
        .split(|c: char| !c.is_ascii_alphanumeric() && c != '_')
        .filter(|w| {
            matches!(
                *w,
                "if" | "while" | "until" | "for" | "case" | "select" | "function"
            )
        })
        .count();
    (brackets + keywords > MAX_NESTING_TOKENS).then_some(ShellDoubt::TooNested {
        max: MAX_NESTING_TOKENS,
    })
}

fn options() -> ParserOptions {
    ParserOptions {
        // Extended globs change how `!(…)`, `@(…)` tokenise; bash enables
        // them in most interactive setups, and reading them as globs is the
        // cautious choice (they never become commands).
        enable_extended_globbing: true,
        ..ParserOptions::default()
    }
}

#[derive(Default)]
struct Walker {
    out: Parsed,
}

/// A word as resolved: its text and whether all of it is known.
struct Resolved {
    text: String,
    known: bool,
}

impl Walker {
    fn uncertain(&mut self, why: ShellDoubt) {
        if !self.out.uncertain.contains(&why) {
            self.out.uncertain.push(why);
        }
    }

    /// Parses `src` as a shell program and walks it.
    fn source(&mut self, src: &str, depth: usize) {
        if depth > MAX_DEPTH {
            self.uncertain(ShellDoubt::NestedStrings { max: MAX_DEPTH });
            return;
        }
        if let Some(why) = too_complex(src) {
            self.uncertain(why);
            return;
        }

        let mut parser = Parser::new(src.as_bytes(), &options());
        match parser.parse_program() {
            Ok(program) => {
                for list in &program.complete_commands {
                    self.list(list, depth);
                }
            }
            Err(e) => self.uncertain(ShellDoubt::Unparsable {
                src: src.trim().to_string(),
                error: e.to_string(),
            }),
        }
    }

    fn list(&mut self, list: &ast::CompoundList, depth: usize) {
        for item in &list.0 {
            self.pipeline(&item.0.first, depth);
            for next in &item.0.additional {
                match next {
                    ast::AndOr::And(p) | ast::AndOr::Or(p) => self.pipeline(p, depth),
                }
            }
        }
    }

    fn pipeline(&mut self, p: &ast::Pipeline, depth: usize) {
        for c in &p.seq {
            self.command(c, depth);
        }
    }

    fn command(&mut self, c: &ast::Command, depth: usize) {
        match c {
            ast::Command::Simple(s) => self.simple(s, depth),
            ast::Command::Compound(cc, redirects) => {
                self.compound(cc, depth);
                self.redirects(redirects.as_ref(), depth);
            }
            // The body runs when the function is called, which may be later
            // in this very command: count it as run.
            ast::Command::Function(f) => {
                self.compound(&f.body.0, depth);
                self.redirects(f.body.1.as_ref(), depth);
            }
            ast::Command::ExtendedTest(t, redirects) => {
                self.test_expr(&t.expr, depth);
                self.redirects(redirects.as_ref(), depth);
            }
        }
    }

    fn test_expr(&mut self, e: &ast::ExtendedTestExpr, depth: usize) {
        match e {
            ast::ExtendedTestExpr::And(a, b) | ast::ExtendedTestExpr::Or(a, b) => {
                self.test_expr(a, depth);
                self.test_expr(b, depth);
            }
            ast::ExtendedTestExpr::Not(a) | ast::ExtendedTestExpr::Parenthesized(a) => {
                self.test_expr(a, depth);
            }
            ast::ExtendedTestExpr::UnaryTest(_, w) => {
                self.word(&w.value, depth);
            }
            ast::ExtendedTestExpr::BinaryTest(op, a, b) => {
                let a = self.word(&a.value, depth);
                let b = self.word(&b.value, depth);
                // `[[ x -eq 1 ]]` evaluates both sides as arithmetic.
                let arithmetic = matches!(
                    op.to_string().as_str(),
                    "-eq" | "-ne" | "-lt" | "-le" | "-gt" | "-ge"
                );
                for w in [a, b] {
                    let text = match &w {
                        Word::Known(t) | Word::Unknown(t) => t.clone(),
                    };
                    if arithmetic && (w.known().is_none() || names_variable(&text)) {
                        self.arithmetic_on_variables(&text);
                    }
                }
            }
        }
    }

    fn compound(&mut self, cc: &ast::CompoundCommand, depth: usize) {
        match cc {
            ast::CompoundCommand::Arithmetic(a) => self.arithmetic(&a.expr.value, depth),
            ast::CompoundCommand::ArithmeticForClause(f) => {
                for e in [&f.initializer, &f.condition, &f.updater]
                    .into_iter()
                    .flatten()
                {
                    self.arithmetic(&e.value, depth);
                }
                self.list(&f.body.list, depth);
            }
            ast::CompoundCommand::BraceGroup(b) => self.list(&b.list, depth),
            ast::CompoundCommand::Subshell(s) => self.list(&s.list, depth),
            ast::CompoundCommand::ForClause(f) => {
                for w in f.values.iter().flatten() {
                    self.word(&w.value, depth);
                }
                self.list(&f.body.list, depth);
            }
            ast::CompoundCommand::CaseClause(c) => {
                self.word(&c.value.value, depth);
                for item in &c.cases {
                    for p in &item.patterns {
                        self.word(&p.value, depth);
                    }
                    if let Some(l) = &item.cmd {
                        self.list(l, depth);
                    }
                }
            }
            ast::CompoundCommand::IfClause(i) => {
                self.list(&i.condition, depth);
                self.list(&i.then, depth);
                for e in i.elses.iter().flatten() {
                    if let Some(c) = &e.condition {
                        self.list(c, depth);
                    }
                    self.list(&e.body, depth);
                }
            }
            ast::CompoundCommand::WhileClause(w) | ast::CompoundCommand::UntilClause(w) => {
                self.list(&w.0, depth);
                self.list(&w.1.list, depth);
            }
            ast::CompoundCommand::Coprocess(c) => self.command(&c.body, depth),
        }
    }

    /// Arithmetic text is expanded before it is evaluated, so it may hide a
    /// command substitution.
    fn arithmetic(&mut self, text: &str, depth: usize) {
        if text.contains("$(") || text.contains('`') {
            self.word(text, depth);
            self.uncertain(ShellDoubt::SubstitutionInArithmetic {
                text: text.trim().to_string(),
            });
        } else if names_variable(text) {
            self.arithmetic_on_variables(text);
        }
    }

    /// Bash evaluates a variable's value in arithmetic as an expression of
    /// its own, and an array subscript in it runs command substitutions
    /// (`x='a[$(cmd)]'; (( x ))` runs `cmd`), so what runs depends on
    /// values only known at run time.
    fn arithmetic_on_variables(&mut self, text: &str) {
        self.uncertain(ShellDoubt::ArithmeticOnVariables {
            text: text.trim().to_string(),
        });
    }

    fn redirects(&mut self, r: Option<&ast::RedirectList>, depth: usize) {
        for r in r.iter().flat_map(|r| r.0.iter()) {
            self.redirect(r, depth);
        }
    }

    fn redirect(&mut self, r: &ast::IoRedirect, depth: usize) {
        match r {
            ast::IoRedirect::File(_, kind, target) => match target {
                ast::IoFileRedirectTarget::Filename(w) => {
                    let target = self.word(&w.value, depth);
                    if !matches!(kind, ast::IoFileRedirectKind::Read) {
                        self.write_target(target);
                    }
                }
                // `>&2` duplicates a descriptor; `>& file` writes a file.
                ast::IoFileRedirectTarget::Duplicate(w) => {
                    let target = self.word(&w.value, depth);
                    let fd = target
                        .known()
                        .is_some_and(|t| t == "-" || t.chars().all(|c| c.is_ascii_digit()));
                    if !fd && !matches!(kind, ast::IoFileRedirectKind::DuplicateInput) {
                        self.write_target(target);
                    }
                }
                ast::IoFileRedirectTarget::Fd(_) => {}
                ast::IoFileRedirectTarget::ProcessSubstitution(_, sub) => {
                    self.list(&sub.list, depth);
                }
            },
            ast::IoRedirect::HereDocument(_, doc) => {
                if doc.requires_expansion {
                    match word::parse_heredoc(&doc.doc.value, &options()) {
                        Ok(pieces) => {
                            self.pieces(&doc.doc.value, &pieces, depth);
                        }
                        Err(e) => self.uncertain(ShellDoubt::HereDocument {
                            error: e.to_string(),
                        }),
                    }
                }
            }
            ast::IoRedirect::HereString(_, w) => {
                self.word(&w.value, depth);
            }
            ast::IoRedirect::OutputAndError(w, _) => {
                let target = self.word(&w.value, depth);
                self.write_target(target);
            }
        }
    }

    fn write_target(&mut self, target: Word) {
        const DEVICES: &[&str] = &["/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"];
        if !target.known().is_some_and(|t| DEVICES.contains(&t)) {
            self.out.writes.push(target);
        }
    }

    fn simple(&mut self, s: &ast::SimpleCommand, depth: usize) {
        let mut words = Vec::new();
        let mut env = Vec::new();
        for item in s.prefix.iter().flat_map(|p| p.0.iter()) {
            match item {
                ast::CommandPrefixOrSuffixItem::AssignmentWord(a, _) => {
                    let name = match &a.name {
                        ast::AssignmentName::VariableName(n) => n.clone(),
                        ast::AssignmentName::ArrayElementName(n, index) => {
                            if names_variable(index) || index.contains(['$', '`']) {
                                self.arithmetic_on_variables(index);
                            }
                            n.clone()
                        }
                    };
                    self.out.assignments.push(name.clone());
                    let value = self.assignment(a, depth);
                    env.push((name, value));
                }
                other => self.item(other, &mut words, depth),
            }
        }
        if let Some(w) = &s.word_or_name {
            words.push(self.word(&w.value, depth));
        }
        for item in s.suffix.iter().flat_map(|p| p.0.iter()) {
            self.item(item, &mut words, depth);
        }
        if !words.is_empty() {
            self.run(words, env, depth);
        }
    }

    /// Walks an assignment's value; returns it (an array as unknown).
    fn assignment(&mut self, a: &ast::Assignment, depth: usize) -> Word {
        match &a.value {
            ast::AssignmentValue::Scalar(w) => self.word(&w.value, depth),
            ast::AssignmentValue::Array(items) => {
                for (k, v) in items {
                    if let Some(k) = k {
                        self.word(&k.value, depth);
                    }
                    self.word(&v.value, depth);
                }
                Word::Unknown(a.to_string())
            }
        }
    }

    fn item(&mut self, item: &ast::CommandPrefixOrSuffixItem, words: &mut Vec<Word>, depth: usize) {
        match item {
            ast::CommandPrefixOrSuffixItem::IoRedirect(r) => self.redirect(r, depth),
            ast::CommandPrefixOrSuffixItem::Word(w) => words.push(self.word(&w.value, depth)),
            // After the command name an assignment is an argument
            // (`export A=1`, `declare x=$(…)`).
            ast::CommandPrefixOrSuffixItem::AssignmentWord(_, w) => {
                words.push(self.word(&w.value, depth));
            }
            ast::CommandPrefixOrSuffixItem::ProcessSubstitution(_, sub) => {
                self.list(&sub.list, depth);
                words.push(Word::Unknown("<(…)".to_string()));
            }
        }
    }

    /// Resolves one word, walking any command it substitutes.
    fn word(&mut self, raw: &str, depth: usize) -> Word {
        let r = self.resolve(raw, depth);
        if r.known {
            Word::Known(r.text)
        } else {
            Word::Unknown(raw.to_string())
        }
    }

    fn resolve(&mut self, raw: &str, depth: usize) -> Resolved {
        match word::parse(raw, &options()) {
            Ok(pieces) => self.pieces(raw, &pieces, depth),
            Err(e) => {
                self.uncertain(ShellDoubt::BadWord {
                    word: raw.to_string(),
                    error: e.to_string(),
                });
                Resolved {
                    text: raw.to_string(),
                    known: false,
                }
            }
        }
    }

    fn pieces(&mut self, raw: &str, pieces: &[WordPieceWithSource], depth: usize) -> Resolved {
        let mut out = Resolved {
            text: String::new(),
            known: true,
        };
        for p in pieces {
            let src = raw.get(p.start_index..p.end_index).unwrap_or("");
            match &p.piece {
                WordPiece::Text(t) => out.text.push_str(t),
                WordPiece::SingleQuotedText(t) => out.text.push_str(t),
                WordPiece::AnsiCQuotedText(t) => out.text.push_str(&ansi_c(t)),
                WordPiece::DoubleQuotedSequence(inner)
                | WordPiece::GettextDoubleQuotedSequence(inner) => {
                    // Inner pieces carry indexes into the same raw word.
                    let r = self.pieces(raw, inner, depth);
                    out.known &= r.known;
                    out.text.push_str(&r.text);
                }
                WordPiece::TildeExpansion(_) => out.text.push_str(src),
                WordPiece::EscapeSequence(e) => {
                    let c = e.strip_prefix('\\').unwrap_or(e);
                    if c != "\n" {
                        out.text.push_str(c);
                    }
                }
                WordPiece::ParameterExpansion(_) => {
                    out.known = false;
                    if src.contains("$(") || src.contains('`') || src.contains("<(") {
                        self.uncertain(ShellDoubt::SubstitutionInExpansion {
                            src: src.to_string(),
                        });
                    } else if !simple_expansion(src) {
                        // Subscripts and substring offsets are arithmetic.
                        self.arithmetic_on_variables(src);
                    }
                }
                WordPiece::CommandSubstitution(inner) => {
                    out.known = false;
                    self.source(inner, depth + 1);
                }
                WordPiece::BackquotedCommandSubstitution(inner) => {
                    out.known = false;
                    self.source(inner, depth + 1);
                }
                WordPiece::ArithmeticExpression(e) => {
                    out.known = false;
                    self.arithmetic(&e.value, depth);
                }
            }
        }
        out
    }

    /// Records a simple command and whatever it runs in turn.
    fn run(&mut self, words: Vec<Word>, env: Vec<(String, Word)>, depth: usize) {
        match words.first() {
            Some(Word::Unknown(raw)) => {
                self.uncertain(ShellDoubt::UnknownName { word: raw.clone() });
            }
            Some(Word::Known(name)) if is_glob_name(name) => {
                self.uncertain(ShellDoubt::GlobName { name: name.clone() });
            }
            _ => {}
        }
        if words
            .first()
            .and_then(Word::known)
            .is_some_and(|n| matches!(base(n), "cd" | "pushd" | "popd"))
        {
            self.out.changes_dir = true;
        }
        let inner = look_through(&words);
        self.out.commands.push(SimpleCommand { words, env });
        for i in inner {
            match i {
                Inner::Command(words) => {
                    if depth + 1 > MAX_DEPTH {
                        self.uncertain(ShellDoubt::NestedWrappers { max: MAX_DEPTH });
                    } else if !words.is_empty() {
                        self.run(words, Vec::new(), depth + 1);
                    }
                }
                Inner::Source(src) => self.source(&src, depth + 1),
                Inner::Unsure(why) => self.uncertain(why),
            }
        }
    }
}

/// Whether arithmetic text names a variable (anything but numbers and
/// operators; `0x1F` and `2#101` count as numbers).
fn names_variable(text: &str) -> bool {
    text.split(|c: char| !c.is_ascii_alphanumeric() && c != '_' && c != '#')
        .any(|t| t.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_'))
}

/// `$NAME`, `${NAME}`, `$1`, `$@`, `${#NAME}` and `${NAME:-word}`-style
/// defaults without nested expansions: expansions that evaluate no
/// arithmetic.
fn simple_expansion(src: &str) -> bool {
    let Some(body) = src.strip_prefix('$') else {
        return false;
    };
    let name = |s: &str| {
        !s.is_empty()
            && (s.chars().all(|c| c.is_ascii_digit())
                || (s.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
                    && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')))
    };
    let special = |s: &str| matches!(s, "@" | "*" | "#" | "?" | "$" | "!" | "-" | "0");
    let Some(inner) = body.strip_prefix('{').and_then(|b| b.strip_suffix('}')) else {
        return name(body) || special(body);
    };
    let inner = inner
        .strip_prefix('#')
        .filter(|i| !i.is_empty())
        .unwrap_or(inner);
    if name(inner) || special(inner) {
        return true;
    }
    let end = inner
        .find(|c: char| !c.is_ascii_alphanumeric() && c != '_')
        .unwrap_or(inner.len());
    let (n, rest) = inner.split_at(end);
    let default = [":-", ":=", ":+", ":?", "-", "=", "+", "?"]
        .iter()
        .any(|op| {
            rest.starts_with(op)
                && !rest[op.len()..].starts_with(|c: char| c.is_ascii_digit() || c == ' ')
        });
    name(n) && default && !rest.contains(['[', '$', '`'])
}

/// Whether a command name contains glob or brace characters, which the
/// shell would expand into some other name.
fn is_glob_name(name: &str) -> bool {
    name.contains(['*', '?', '[', '{'])
}

/// Decodes the body of an ANSI-C string (`$'…'`) as bash does.
fn ansi_c(body: &str) -> String {
    let mut out = String::new();
    let mut chars = body.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let Some(e) = chars.next() else {
            out.push('\\');
            break;
        };
        let simple = match e {
            'a' => Some('\u{7}'),
            'b' => Some('\u{8}'),
            'e' | 'E' => Some('\u{1b}'),
            'f' => Some('\u{c}'),
            'n' => Some('\n'),
            'r' => Some('\r'),
            't' => Some('\t'),
            'v' => Some('\u{b}'),
            '\\' | '\'' | '"' | '?' => Some(e),
            _ => None,
        };
        if let Some(s) = simple {
            out.push(s);
            continue;
        }
        let (radix, max) = match e {
            '0'..='7' => (8, 3),
            'x' => (16, 2),
            'u' => (16, 4),
            'U' => (16, 8),
            'c' => {
                // Control character: \cX.
                if let Some(x) = chars.next() {
                    out.push(char::from((x as u8) & 0x1f));
                }
                continue;
            }
            other => {
                out.push('\\');
                out.push(other);
                continue;
            }
        };
        let mut digits = String::new();
        if radix == 8 {
            digits.push(e);
        }
        while digits.len() < max {
            match chars.peek() {
                Some(d) if d.is_digit(radix) => {
                    digits.push(*d);
                    chars.next();
                }
                _ => break,
            }
        }
        match u32::from_str_radix(&digits, radix)
            .ok()
            .and_then(char::from_u32)
        {
            Some(ch) if !digits.is_empty() => out.push(ch),
            _ => {
                out.push('\\');
                out.push(e);
                out.push_str(if radix == 8 { &digits[1..] } else { &digits });
            }
        }
    }
    out
}

/// What one simple command runs in turn.
enum Inner {
    /// Another simple command, already split into words.
    Command(Vec<Word>),
    /// A string the shell parses and runs.
    Source(String),
    /// Something runs that cannot be known; the reason.
    Unsure(ShellDoubt),
}

/// An option of a wrapper command: whether it takes a separate argument.
struct Opts {
    /// Short options that take an argument (`-u NAME`, or `-uNAME`).
    short_arg: &'static str,
    /// Long options that take an argument when written without `=`.
    long_arg: &'static [&'static str],
    /// Whether an unknown option is an error (cannot tell where the command
    /// starts) rather than a flag without argument.
    strict: bool,
}

/// Skips the options of a wrapper; returns the index of the first operand,
/// or the reason the operand cannot be found.
fn skip_options(words: &[Word], start: usize, opts: &Opts) -> Result<usize, ShellDoubt> {
    let mut i = start;
    while let Some(w) = words.get(i) {
        let Some(w) = w.known() else {
            return Err(ShellDoubt::UnknownOption {
                command: name(words),
            });
        };
        if w == "--" {
            return Ok(i + 1);
        }
        if let Some(long) = w.strip_prefix("--") {
            if !long.contains('=') && opts.long_arg.contains(&long) {
                i += 1;
            }
            i += 1;
            continue;
        }
        let Some(short) = w.strip_prefix('-').filter(|s| !s.is_empty()) else {
            return Ok(i);
        };
        // A cluster such as `-pv` or `-n10`: the first letter that takes an
        // argument ends it, taking the rest or the next word.
        let mut takes_next = false;
        for (k, c) in short.char_indices() {
            if opts.short_arg.contains(c) {
                takes_next = k + c.len_utf8() == short.len();
                break;
            }
            if opts.strict && !c.is_ascii_alphanumeric() {
                return Err(ShellDoubt::StrangeOption {
                    command: name(words),
                    option: w.to_string(),
                });
            }
        }
        i += 1 + usize::from(takes_next);
    }
    Ok(i)
}

fn name(words: &[Word]) -> String {
    words
        .first()
        .map(|w| match w {
            Word::Known(s) => s.clone(),
            Word::Unknown(s) => s.clone(),
        })
        .unwrap_or_default()
}

/// The name a command is run by, without its folder (`/usr/bin/env` → `env`).
fn base(name: &str) -> &str {
    name.rsplit('/').next().unwrap_or(name)
}

/// Joins known words with spaces (as `eval` does); `None` if one is unknown.
fn join_known(words: &[Word]) -> Option<String> {
    words
        .iter()
        .map(|w| w.known().map(str::to_string))
        .collect::<Option<Vec<_>>>()
        .map(|v| v.join(" "))
}

fn rest(words: &[Word], from: usize) -> Vec<Word> {
    words.get(from..).map(<[Word]>::to_vec).unwrap_or_default()
}

/// Finds what a simple command runs in turn: the command behind a wrapper,
/// a command string, or `find`'s actions.
fn look_through(words: &[Word]) -> Vec<Inner> {
    let Some(cmd) = words.first().and_then(Word::known) else {
        return Vec::new();
    };
    let after = |opts: &Opts| match skip_options(words, 1, opts) {
        Ok(i) => vec![Inner::Command(rest(words, i))],
        Err(why) => vec![Inner::Unsure(why)],
    };
    let flags = Opts {
        short_arg: "",
        long_arg: &[],
        strict: false,
    };
    match base(cmd) {
        // `command -v NAME` and `-V` only describe NAME.
        "command"
            if words[1..]
                .iter()
                .map_while(|w| w.known().filter(|w| w.starts_with('-') && *w != "--"))
                .any(|w| w.contains(['v', 'V'])) =>
        {
            Vec::new()
        }
        "command" | "builtin" | "nohup" | "setsid" => after(&flags),
        "exec" => after(&Opts {
            short_arg: "a",
            long_arg: &[],
            strict: false,
        }),
        "nice" => after(&Opts {
            short_arg: "n",
            long_arg: &["adjustment"],
            strict: false,
        }),
        "time" => after(&Opts {
            short_arg: "fo",
            long_arg: &["format", "output"],
            strict: false,
        }),
        "stdbuf" => after(&Opts {
            short_arg: "ioe",
            long_arg: &["input", "output", "error"],
            strict: false,
        }),
        "ionice" => after(&Opts {
            short_arg: "cnp",
            long_arg: &["class", "classdata", "pid"],
            strict: false,
        }),
        "sudo" | "doas" => after(&Opts {
            short_arg: "CDghpRrtTUu",
            long_arg: &[
                "close-from",
                "chdir",
                "group",
                "host",
                "prompt",
                "chroot",
                "role",
                "type",
                "command-timeout",
                "other-user",
                "user",
            ],
            strict: false,
        }),
        "timeout" => match skip_options(
            words,
            1,
            &Opts {
                short_arg: "ks",
                long_arg: &["kill-after", "signal"],
                strict: false,
            },
        ) {
            // The first operand is the duration.
            Ok(i) => vec![Inner::Command(rest(words, i + 1))],
            Err(why) => vec![Inner::Unsure(why)],
        },
        "env" => env(words),
        "xargs" => match skip_options(
            words,
            1,
            &Opts {
                short_arg: "adEILnPs",
                long_arg: &[
                    "arg-file",
                    "delimiter",
                    "max-lines",
                    "max-args",
                    "max-procs",
                    "max-chars",
                    "process-slot-var",
                ],
                strict: false,
            },
        ) {
            Ok(i) if i >= words.len() => vec![Inner::Command(vec![Word::Known("echo".into())])],
            Ok(i) => {
                let mut inner = rest(words, i);
                inner.push(Word::Unknown("<input from xargs>".to_string()));
                vec![Inner::Command(inner)]
            }
            Err(why) => vec![Inner::Unsure(why)],
        },
        "sh" | "bash" | "zsh" | "dash" | "ksh" | "ash" | "mksh" | "fish" | "busybox" => {
            shell_string(words)
        }
        "eval" => match join_known(&words[1..]) {
            Some(s) => vec![Inner::Source(s)],
            None => vec![Inner::Unsure(ShellDoubt::UnknownText {
                command: "eval".into(),
            })],
        },
        "trap" => match words.get(1) {
            Some(Word::Known(s)) if s == "-l" || s == "-p" || s == "--" || s == "-" => Vec::new(),
            Some(Word::Known(s)) => vec![Inner::Source(s.clone())],
            Some(Word::Unknown(_)) => vec![Inner::Unsure(ShellDoubt::UnknownText {
                command: "trap".into(),
            })],
            None => Vec::new(),
        },
        "su" => su(words),
        "watch" => match skip_options(
            words,
            1,
            &Opts {
                short_arg: "nq",
                long_arg: &["interval", "equexit"],
                strict: false,
            },
        ) {
            Ok(i) => match join_known(&rest(words, i)) {
                Some(s) => foreign(words, &s),
                None => vec![Inner::Unsure(ShellDoubt::UnknownText {
                    command: "watch".into(),
                })],
            },
            Err(why) => vec![Inner::Unsure(why)],
        },
        "find" => find(words),
        "let"
            if words[1..]
                .iter()
                .any(|w| w.known().is_none_or(names_variable)) =>
        {
            vec![Inner::Unsure(ShellDoubt::LetVariables)]
        }
        // Assigning to an integer variable evaluates the value as arithmetic.
        "declare" | "typeset" | "local" | "export" | "readonly"
            if words[1..].iter().any(|w| {
                w.known().is_none_or(|w| {
                    w.starts_with(['-', '+']) && !w.starts_with("--") && w.contains('i')
                })
            }) =>
        {
            vec![Inner::Unsure(ShellDoubt::ArithmeticInput {
                command: cmd.to_string(),
            })]
        }
        // An alias's text runs wherever its name is used later (with
        // `shopt -s expand_aliases`): read it as a command string.
        "alias" => words[1..]
            .iter()
            .filter_map(|w| match w {
                Word::Known(w) => w.split_once('=').map(|(_, v)| Inner::Source(v.to_string())),
                Word::Unknown(_) => Some(Inner::Unsure(ShellDoubt::UnknownAlias)),
            })
            .collect(),
        // `hash -p PATH NAME` makes NAME run PATH.
        "hash"
            if words[1..]
                .iter()
                .any(|w| w.known().is_none_or(|w| w.starts_with("-p"))) =>
        {
            vec![Inner::Unsure(ShellDoubt::HashPath)]
        }
        _ => Vec::new(),
    }
}

/// `env [-i] [-u NAME] [-C DIR] [-S STRING] [NAME=VALUE]… [COMMAND…]`.
fn env(words: &[Word]) -> Vec<Inner> {
    let mut i = 1;
    while let Some(w) = words.get(i) {
        let Some(w) = w.known() else {
            return vec![Inner::Unsure(ShellDoubt::UnknownEnvCommand)];
        };
        let split = w
            .strip_prefix("--split-string=")
            .map(|s| (s.to_string(), i + 1))
            .or_else(|| {
                (w == "-S" || w == "--split-string")
                    .then(|| words.get(i + 1).and_then(Word::known))
                    .flatten()
                    .map(|s| (s.to_string(), i + 2))
            })
            .or_else(|| {
                w.strip_prefix("-S")
                    .filter(|s| !s.is_empty())
                    .map(|s| (s.to_string(), i + 1))
            });
        if let Some((s, next)) = split {
            // `-S` splits its string into words: read it as shell text,
            // followed by the remaining words.
            let tail = join_known(&rest(words, next)).unwrap_or_default();
            return vec![Inner::Source(format!("{s} {tail}"))];
        }
        match w {
            "--" => {
                i += 1;
                break;
            }
            "-u" | "-C" | "--unset" | "--chdir" => i += 2,
            _ if w.starts_with('-') => i += 1,
            _ if w.contains('=') && !w.starts_with('=') => i += 1,
            _ => break,
        }
    }
    // Assignments may also follow `--`.
    while words
        .get(i)
        .and_then(Word::known)
        .is_some_and(|w| w.contains('=') && !w.starts_with('='))
    {
        i += 1;
    }
    vec![Inner::Command(rest(words, i))]
}

/// `sh -c STRING`, `bash -lc STRING`, …; a shell reading its standard input
/// runs commands no one can see.
fn shell_string(words: &[Word]) -> Vec<Inner> {
    let mut i = 1;
    // `busybox sh -c …`
    if words.first().and_then(Word::known).map(base) == Some("busybox") {
        match words.get(1).and_then(Word::known) {
            Some("sh" | "ash" | "bash") => i = 2,
            _ => return Vec::new(),
        }
    }
    let mut has_c = false;
    while let Some(w) = words.get(i) {
        let Some(w) = w.known() else {
            return vec![Inner::Unsure(ShellDoubt::UnknownArgument {
                command: name(words),
            })];
        };
        if w == "--" || w == "-" {
            i += 1;
            break;
        }
        if (w.starts_with('-') || w.starts_with('+')) && w.len() > 1 {
            if w.starts_with("--") {
                // `--rcfile FILE`, `--init-file FILE` take an argument.
                if matches!(w, "--rcfile" | "--init-file") {
                    i += 1;
                }
            } else {
                has_c |= w[1..].contains('c');
                if w[1..].contains('o') || w[1..].contains('O') {
                    i += 1;
                }
            }
            i += 1;
            continue;
        }
        break;
    }
    if has_c {
        return match words.get(i) {
            Some(Word::Known(s)) => foreign(words, s),
            Some(Word::Unknown(_)) => vec![Inner::Unsure(ShellDoubt::UnknownCommandString {
                command: name(words),
            })],
            None => Vec::new(),
        };
    }
    if i >= words.len() {
        return vec![Inner::Unsure(ShellDoubt::ReadsInput {
            command: name(words),
        })];
    }
    // `sh script.sh`: a script file; its content is not checked.
    Vec::new()
}

/// A command string run by a shell other than bash. It is parsed as bash;
/// where the shells are known to read it differently the parse is marked
/// uncertain: `$'…'` (not ANSI-C quoting in every `sh`), and fish, whose
/// syntax is its own.
fn foreign(words: &[Word], src: &str) -> Vec<Inner> {
    let shell = words.first().and_then(Word::known).map(base).unwrap_or("");
    if shell == "fish" {
        return vec![Inner::Unsure(ShellDoubt::FishSyntax)];
    }
    let mut out = vec![Inner::Source(src.to_string())];
    if shell != "bash" && src.contains("$'") {
        out.push(Inner::Unsure(ShellDoubt::AnsiQuoting {
            shell: shell.to_string(),
        }));
    }
    out
}

/// `su [USER] -c COMMAND`.
fn su(words: &[Word]) -> Vec<Inner> {
    let mut i = 1;
    while let Some(w) = words.get(i) {
        match w.known() {
            Some("-c" | "--command") => {
                return match words.get(i + 1) {
                    Some(Word::Known(s)) => foreign(words, s),
                    Some(Word::Unknown(_)) => {
                        vec![Inner::Unsure(ShellDoubt::UnknownCommandString {
                            command: "su -c".into(),
                        })]
                    }
                    None => Vec::new(),
                };
            }
            Some(s) if s.starts_with("--command=") => {
                return foreign(words, &s["--command=".len()..]);
            }
            _ => i += 1,
        }
    }
    Vec::new()
}

/// `find`'s actions: `-exec`, `-execdir`, `-ok`, `-okdir` run a command
/// (up to `;` or `+`); `-delete` removes what it finds, read as `rm` of the
/// start paths.
fn find(words: &[Word]) -> Vec<Inner> {
    let mut out = Vec::new();
    let starts: Vec<Word> = words[1..]
        .iter()
        .take_while(|w| {
            w.known()
                .is_none_or(|s| !s.starts_with('-') && s != "(" && s != "!")
        })
        .cloned()
        .collect();
    let mut i = 1;
    while let Some(w) = words.get(i) {
        match w.known() {
            Some("-exec" | "-execdir" | "-ok" | "-okdir") => {
                let mut cmd = Vec::new();
                i += 1;
                while let Some(w) = words.get(i) {
                    i += 1;
                    if matches!(w.known(), Some(";" | "+")) {
                        break;
                    }
                    cmd.push(w.clone());
                }
                out.push(Inner::Command(cmd));
            }
            Some("-delete") => {
                let mut cmd = vec![Word::Known("rm".to_string())];
                if starts.is_empty() {
                    cmd.push(Word::Known(".".to_string()));
                }
                cmd.extend(starts.iter().cloned());
                out.push(Inner::Command(cmd));
                i += 1;
            }
            _ => i += 1,
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "shell_tests.rs"]
mod tests;
