//! Project memory: the instruction files a team and a user write for the
//! model (`CLAUDE.md` and its relatives), found and read as Claude Code
//! does, with `@path` imports followed.
//!
//! Order, lowest first (later files are read later by the model):
//! 1. managed: `/etc/claude-code/CLAUDE.md`,
//! 2. user: `~/.claude/CLAUDE.md`,
//! 3. project: in each folder from the repository root down to the working
//!    directory, `CLAUDE.md` and `.claude/CLAUDE.md`, or `AGENTS.md` where
//!    the folder has neither,
//! 4. local: `CLAUDE.local.md` in the same folders.
//!
//! An import is `@path` at the start of a line or after white space,
//! outside code spans and fenced code blocks; `path` is relative to the
//! importing file, absolute, or `~/…`. Imports nest at most five levels and
//! a file is read once. In a folder the user has not trusted, project and
//! local files (and what they import) are read only when they resolve
//! inside the project (`config::trust::ProjectFiles`): a `CLAUDE.md` that
//! links to a file elsewhere is skipped and reported. The text is
//! delivered by the runtime, through a template, outside the system prompt.
//! This module reads files and nothing else.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::diagnostic::Diagnostic;

/// How deep imports may nest (Claude Code's limit).
pub const MAX_IMPORT_DEPTH: usize = 5;

/// Files larger than this are cut, with a warning.
const MAX_MEMORY_BYTES: usize = 256 * 1024;

/// Where a memory file sits in the order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum MemoryScope {
    Managed,
    User,
    Project,
    Local,
}

/// One file of memory, as the model will see it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MemoryFile {
    pub path: PathBuf,
    pub scope: MemoryScope,
    /// The file that imported this one, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub imported_from: Option<PathBuf>,
    /// A rule file (`.claude/rules/*.md`) without `paths`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub rule: bool,
    pub content: String,
}

/// Every memory file, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Memory {
    pub files: Vec<MemoryFile>,
    /// Every file whose presence or content matters (for the watcher),
    /// existing or not.
    #[serde(skip)]
    pub watched: Vec<PathBuf>,
    /// Imports not followed because the folder is not trusted: (importer,
    /// target).
    #[serde(skip)]
    pub skipped_imports: Vec<(PathBuf, PathBuf)>,
    /// Project and local files not read because they link outside the
    /// project and the folder is not trusted.
    #[serde(skip)]
    pub outside: Vec<crate::config::trust::Outside>,
    /// Existing rules folders (watched whole, so a new rule is seen).
    #[serde(skip)]
    pub rule_dirs: Vec<PathBuf>,
    /// Rules with `paths`: delivered when a tool touches a matching file.
    pub path_rules: Vec<super::rules::PathRule>,
    /// What finding nested memory (`CLAUDE.md` below the working
    /// directory) needs, kept from the load.
    #[serde(skip)]
    pub nested: Option<NestedRoot>,
}

/// Where nested memory may be found: folders below `cwd`, inside the
/// project, read under the same trust judgement as the rest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NestedRoot {
    pub cwd: PathBuf,
    pub home: Option<PathBuf>,
    pub files: crate::config::trust::ProjectFiles,
    /// Whether project (`CLAUDE.md`) and local (`CLAUDE.local.md`) files
    /// are read (`--setting-sources`).
    pub project: bool,
    pub local: bool,
    /// `claudeMdExcludes`, as [`MemoryInput::excludes`].
    pub excludes: Vec<String>,
}

/// How many folders below the working directory [`Memory::nested_files`]
/// looks at, at most, and how deep.
const NESTED_SCAN_DIRS: usize = 2000;
const NESTED_SCAN_DEPTH: usize = 8;

impl Memory {
    /// The nested memory files that exist now below the working directory
    /// (for `cadre config show`): a bounded search that skips hidden
    /// folders, `node_modules` and `target`.
    pub fn nested_files(&self) -> Vec<PathBuf> {
        let Some(n) = &self.nested else {
            return Vec::new();
        };
        let mut out = Vec::new();
        let mut queue = std::collections::VecDeque::from([(n.cwd.clone(), 0usize)]);
        let mut seen = 0usize;
        while let Some((dir, depth)) = queue.pop_front() {
            seen += 1;
            if seen > NESTED_SCAN_DIRS {
                break;
            }
            if depth > 0 {
                for name in ["CLAUDE.md", ".claude/CLAUDE.md", "CLAUDE.local.md"] {
                    let f = dir.join(name);
                    if f.is_file() {
                        out.push(f);
                    }
                }
            }
            if depth >= NESTED_SCAN_DEPTH {
                continue;
            }
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            let mut subs: Vec<PathBuf> = entries
                .filter_map(Result::ok)
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name().is_some_and(|n| {
                        let n = n.to_string_lossy();
                        !n.starts_with('.') && n != "node_modules" && n != "target"
                    })
                })
                .collect();
            subs.sort();
            queue.extend(subs.into_iter().map(|s| (s, depth + 1)));
        }
        out
    }

    /// The memory files of the folders between the working directory
    /// (excluded) and `file`'s folder (included), top down: in each,
    /// `CLAUDE.md` and `.claude/CLAUDE.md` (or `AGENTS.md`), then
    /// `CLAUDE.local.md`, with their imports. Files outside the working
    /// directory have none. The second list names files left unread
    /// because they resolve outside an untrusted project.
    pub fn nested_for(&self, file: &Path) -> (Vec<MemoryFile>, Vec<crate::config::trust::Outside>) {
        let Some(n) = &self.nested else {
            return (Vec::new(), Vec::new());
        };
        let file = crate::paths::lexical(file);
        let mut dirs: Vec<&Path> = file
            .ancestors()
            .skip(1)
            .take_while(|d| *d != n.cwd && d.starts_with(&n.cwd))
            .collect();
        if dirs.is_empty() || !file.starts_with(&n.cwd) {
            return (Vec::new(), Vec::new());
        }
        dirs.reverse();
        let input = MemoryInput {
            cwd: &n.cwd,
            home: n.home.as_deref(),
            managed_root: Path::new("/"),
            files: &n.files,
            sources: None,
            excludes: &n.excludes,
        };
        let mut loader = Loader {
            input: &input,
            memory: Memory::default(),
            diags: Vec::new(),
            seen: Vec::new(),
            excluded: exclusions(&n.excludes),
        };
        for dir in dirs {
            if n.home.as_deref() == Some(dir) {
                continue;
            }
            if n.project {
                loader.project_dir(dir);
            }
            if n.local {
                loader.top(&dir.join("CLAUDE.local.md"), MemoryScope::Local);
            }
        }
        (loader.memory.files, loader.memory.outside)
    }
}

impl Memory {
    pub fn is_empty(&self) -> bool {
        self.files.iter().all(|f| f.content.trim().is_empty())
    }
}

/// What memory loading depends on.
#[derive(Debug, Clone)]
pub struct MemoryInput<'a> {
    pub cwd: &'a Path,
    pub home: Option<&'a Path>,
    /// Where managed files live (`/`, or a test's root).
    pub managed_root: &'a Path,
    /// Which project files may be read (all of them in a trusted folder).
    pub files: &'a crate::config::trust::ProjectFiles,
    /// `--setting-sources`: the user, project and local memory files are
    /// read only when their scope is listed (`None`: all are).
    pub sources: Option<&'a [crate::config::Scope]>,
    /// `claudeMdExcludes`: globs (or absolute paths) of user, project and
    /// local memory files not to read, matched against the absolute path.
    pub excludes: &'a [String],
}

/// The globs of `claudeMdExcludes`; one that is not a glob is skipped.
fn exclusions(globs: &[String]) -> Option<globset::GlobSet> {
    if globs.is_empty() {
        return None;
    }
    let mut set = globset::GlobSetBuilder::new();
    for g in globs {
        if let Ok(glob) = globset::GlobBuilder::new(g.trim())
            .literal_separator(true)
            .build()
        {
            set.add(glob);
        }
    }
    set.build().ok()
}

/// Finds and reads every memory file (see the module doc).
pub fn load_memory(input: &MemoryInput<'_>) -> (Memory, Vec<Diagnostic>) {
    let mut loader = Loader {
        input,
        memory: Memory::default(),
        diags: Vec::new(),
        seen: Vec::new(),
        excluded: exclusions(input.excludes),
    };
    loader.top(
        &input.managed_root.join("etc/claude-code/CLAUDE.md"),
        MemoryScope::Managed,
    );
    use crate::config::Scope;
    let wanted = |scope: Scope| input.sources.is_none_or(|s| s.contains(&scope));
    let chain = folder_chain(input.cwd);
    // Globs of user rules are relative to the project (the top of the
    // chain); those of project rules to the folder holding `.claude`.
    let project_root = chain
        .first()
        .cloned()
        .unwrap_or_else(|| input.cwd.to_path_buf());
    if let Some(h) = input.home.filter(|_| wanted(Scope::User)) {
        let user = crate::paths::user_claude_dir(h);
        loader.top(&user.join("CLAUDE.md"), MemoryScope::User);
        loader.rules(&user.join("rules"), &project_root, MemoryScope::User);
    }
    for dir in chain.iter().filter(|_| wanted(Scope::Project)) {
        if input.home == Some(dir.as_path()) {
            continue;
        }
        loader.project_dir(dir);
        loader.rules(&dir.join(".claude/rules"), dir, MemoryScope::Project);
    }
    for dir in chain.iter().filter(|_| wanted(Scope::Local)) {
        loader.top(&dir.join("CLAUDE.local.md"), MemoryScope::Local);
    }
    loader.memory.nested = Some(NestedRoot {
        cwd: crate::paths::lexical(input.cwd),
        home: input.home.map(Path::to_path_buf),
        files: input.files.clone(),
        project: wanted(Scope::Project),
        local: wanted(Scope::Local),
        excludes: input.excludes.to_vec(),
    });
    (loader.memory, loader.diags)
}

/// The folders from the git root (or `cwd` alone outside a repository)
/// down to `cwd`, root first.
fn folder_chain(cwd: &Path) -> Vec<PathBuf> {
    let root = cwd.ancestors().find(|d| d.join(".git").exists());
    let mut dirs: Vec<PathBuf> = match root {
        Some(root) => cwd
            .ancestors()
            .take_while(|d| d.starts_with(root))
            .map(Path::to_path_buf)
            .collect(),
        None => vec![cwd.to_path_buf()],
    };
    dirs.reverse();
    dirs
}

struct Loader<'a, 'b> {
    input: &'a MemoryInput<'b>,
    memory: Memory,
    diags: Vec<Diagnostic>,
    /// Canonical paths already read (each file once; breaks cycles).
    seen: Vec<PathBuf>,
    /// `claudeMdExcludes`, compiled.
    excluded: Option<globset::GlobSet>,
}

impl Loader<'_, '_> {
    /// A project folder's `CLAUDE.md` and `.claude/CLAUDE.md`, or its
    /// `AGENTS.md` when it has neither.
    fn project_dir(&mut self, dir: &Path) {
        let claude = dir.join("CLAUDE.md");
        let dot_claude = dir.join(".claude/CLAUDE.md");
        let agents = dir.join("AGENTS.md");
        self.memory
            .watched
            .extend([claude.clone(), dot_claude.clone(), agents.clone()]);
        if claude.is_file() || dot_claude.is_file() {
            self.top(&claude, MemoryScope::Project);
            self.top(&dot_claude, MemoryScope::Project);
        } else {
            self.top(&agents, MemoryScope::Project);
        }
    }

    /// The rule files of a rules folder: those without `paths` join the
    /// memory here, the others wait for a matching file.
    fn rules(&mut self, dir: &Path, base: &Path, scope: MemoryScope) {
        use super::rules::{RuleFile, read_rule, rule_files};
        if dir.is_dir() {
            self.memory.rule_dirs.push(dir.to_path_buf());
        }
        for path in rule_files(dir) {
            self.memory.watched.push(path.clone());
            if scope_from_repo(scope)
                && let Err(outside) = self.input.files.admit(&path)
            {
                self.memory.outside.push(outside);
                continue;
            }
            let canonical = std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone());
            if self.seen.contains(&canonical) {
                continue;
            }
            self.seen.push(canonical);
            match read_rule(&path, base, scope == MemoryScope::User, &mut self.diags) {
                Some(RuleFile::Always { path, content }) => self.memory.files.push(MemoryFile {
                    path,
                    scope,
                    imported_from: None,
                    rule: true,
                    content,
                }),
                Some(RuleFile::Conditional(rule)) => self.memory.path_rules.push(rule),
                None => {}
            }
        }
    }

    fn top(&mut self, path: &Path, scope: MemoryScope) {
        self.memory.watched.push(path.to_path_buf());
        // Managed memory cannot be excluded (as in Claude Code).
        if scope != MemoryScope::Managed
            && self
                .excluded
                .as_ref()
                .is_some_and(|x| x.is_match(crate::paths::lexical(path)))
        {
            return;
        }
        if scope_from_repo(scope)
            && path.is_file()
            && let Err(outside) = self.input.files.admit(path)
        {
            self.memory.outside.push(outside);
            return;
        }
        self.file(path, scope, None, 0);
    }

    fn file(&mut self, path: &Path, scope: MemoryScope, from: Option<&Path>, depth: usize) {
        if !path.is_file() {
            return;
        }
        let canonical = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        if self.seen.contains(&canonical) {
            return;
        }
        self.seen.push(canonical);
        // One byte past the limit is enough to know it was cut.
        let read = crate::raw::read_prefix(path, MAX_MEMORY_BYTES as u64 + 1);
        let mut text = match read {
            Ok((bytes, _)) => String::from_utf8_lossy(&bytes).into_owned(),
            Err(e) => {
                self.diags.push(Diagnostic::warning(
                    Some(path),
                    None,
                    format!("cannot read: {e}"),
                ));
                return;
            }
        };
        if text.len() > MAX_MEMORY_BYTES {
            let mut cut = MAX_MEMORY_BYTES;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            text.truncate(cut);
            self.diags.push(Diagnostic::warning(
                Some(path),
                None,
                format!("memory file larger than {MAX_MEMORY_BYTES} bytes; the rest is left out"),
            ));
        }
        let text = text.strip_prefix('\u{feff}').unwrap_or(&text).to_string();
        let imports = imports(&text);
        self.memory.files.push(MemoryFile {
            path: path.to_path_buf(),
            scope,
            imported_from: from.map(Path::to_path_buf),
            rule: false,
            content: text,
        });
        if depth >= MAX_IMPORT_DEPTH {
            return;
        }
        let base = path.parent().unwrap_or(Path::new("."));
        for target in imports {
            let Some(resolved) = self.resolve(base, &target) else {
                continue;
            };
            self.memory.watched.push(resolved.clone());
            if scope_from_repo(scope) && self.input.files.admit(&resolved).is_err() {
                self.memory
                    .skipped_imports
                    .push((path.to_path_buf(), resolved));
                continue;
            }
            self.file(&resolved, scope, Some(path), depth + 1);
        }
    }

    fn resolve(&self, base: &Path, target: &str) -> Option<PathBuf> {
        let p = if let Some(rest) = target.strip_prefix("~/") {
            self.input.home?.join(rest)
        } else {
            let p = Path::new(target);
            if p.is_absolute() {
                p.to_path_buf()
            } else {
                base.join(p)
            }
        };
        Some(crate::paths::lexical(&p))
    }
}

/// Files of these scopes come with the repository.
fn scope_from_repo(scope: MemoryScope) -> bool {
    matches!(scope, MemoryScope::Project | MemoryScope::Local)
}

/// The `@path` imports of a memory file, in order: a token starting with
/// `@` at the start of a line or after white space, outside fenced code
/// blocks and inline code spans. A trailing `.`, `,`, `;`, `:` or `)` is
/// punctuation, not part of the path. `@` alone or followed by a space is
/// not an import (nor is an e-mail address, which has text before `@`).
pub fn imports(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut fence: Option<String> = None;
    for line in text.lines() {
        let trimmed = line.trim_start();
        if let Some(open) = &fence {
            if trimmed.starts_with(open.as_str()) {
                fence = None;
            }
            continue;
        }
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            fence = Some(trimmed[..3].to_string());
            continue;
        }
        let mut in_code = false;
        let mut prev_space = true;
        let chars: Vec<char> = line.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            if c == '`' {
                in_code = !in_code;
            } else if c == '@' && !in_code && prev_space {
                let mut j = i + 1;
                let mut path = String::new();
                while j < chars.len() && !chars[j].is_whitespace() && chars[j] != '`' {
                    path.push(chars[j]);
                    j += 1;
                }
                let path = path.trim_end_matches(['.', ',', ';', ':', ')', '!', '?']);
                if !path.is_empty() && !path.starts_with('@') {
                    out.push(path.to_string());
                }
                i = j;
                prev_space = false;
                continue;
            }
            prev_space = c.is_whitespace();
            i += 1;
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn imports_outside_code_only() {
        let text = "See @docs/a.md and @~/x.md.\nmail me@example.com\n`@not/this` here\n```\n@nor/this\n```\n- @b.md\n";
        assert_eq!(imports(text), ["docs/a.md", "~/x.md", "b.md"]);
    }

    #[test]
    fn order_nesting_depth_and_cycles() {
        let root = tempfile::tempdir().unwrap();
        let home = tempfile::tempdir().unwrap();
        let r = root.path();
        std::fs::create_dir_all(r.join(".git")).unwrap();
        std::fs::create_dir_all(r.join("sub/.claude")).unwrap();
        std::fs::write(r.join("CLAUDE.md"), "root @one.md").unwrap();
        for i in 1..=7 {
            let next = i + 1;
            std::fs::write(
                r.join(format!(
                    "{}.md",
                    ["", "one", "two", "three", "four", "five", "six", "seven"][i]
                )),
                format!(
                    "level {i} @{}.md @CLAUDE.md",
                    [
                        "", "one", "two", "three", "four", "five", "six", "seven", "eight"
                    ][next]
                ),
            )
            .unwrap();
        }
        std::fs::write(r.join("sub/AGENTS.md"), "agents here").unwrap();
        std::fs::write(r.join("sub/CLAUDE.local.md"), "local").unwrap();
        std::fs::create_dir_all(home.path().join(".claude")).unwrap();
        std::fs::write(home.path().join(".claude/CLAUDE.md"), "user").unwrap();
        let cwd = r.join("sub");
        let (m, _) = load_memory(&MemoryInput {
            cwd: &cwd,
            home: Some(home.path()),
            managed_root: Path::new("/nonexistent"),
            files: &crate::config::trust::ProjectFiles::new(r, true),
            sources: None,
            excludes: &[],
        });
        let texts: Vec<&str> = m.files.iter().map(|f| f.content.as_str()).collect();
        assert_eq!(texts[0], "user");
        assert_eq!(texts[1], "root @one.md");
        // Five levels of imports below the root file, then no more.
        assert_eq!(
            texts[6].split(' ').take(2).collect::<Vec<_>>(),
            ["level", "5"]
        );
        assert_eq!(texts[7], "agents here");
        assert_eq!(texts[8], "local");
        assert_eq!(texts.len(), 9);
    }
}
