//! Skills, in Claude Code's format: a folder holding `SKILL.md`, whose
//! YAML frontmatter gives `name`, `description`, `allowed-tools`,
//! `model`, `when_to_use` and `disable-model-invocation` (the other keys
//! of Claude Code and the Agent Skills format are accepted), and whose body is the instructions the model loads on demand.
//!
//! Folders are read from plugins' `skills/` folders (named
//! `PLUGIN:NAME`, as Claude Code names them), `~/.claude/skills/*/` (user) and from
//! `.claude/skills/*/` in each folder from the git root down to the working
//! directory (project), as agents are; a later folder wins on a name clash,
//! so the project's skill replaces the user's of the same name. A bad file
//! is a diagnostic with path:line:col and is skipped. In a folder the user
//! has not trusted, a project `SKILL.md` that resolves outside the project
//! is not read, and the repository's skills grant no tools
//! ([`Skills::restrict`]). This module reads files; it runs nothing.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::frontmatter::split_frontmatter;
use super::tokens::{canonical_tool_spec, tokenize_tools};
use crate::config::trust::{Outside, ProjectFiles};
use crate::diagnostic::{Diagnostic, Pos};
use crate::raw::{Kind, Node, parse_yaml};

/// The largest `SKILL.md` read, in bytes.
pub const MAX_SKILL_BYTES: u64 = 1024 * 1024;

/// Where a skill comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SkillSource {
    /// A plugin's `skills/` folder; its skills are named `PLUGIN:NAME`.
    Plugin,
    User,
    Project,
}

impl SkillSource {
    /// Claude Code's name for where a skill or command comes from
    /// (hook inputs, telemetry's `skill.source`).
    pub fn settings_name(self) -> &'static str {
        match self {
            SkillSource::Project => "projectSettings",
            SkillSource::User => "userSettings",
            SkillSource::Plugin => "plugin",
        }
    }
}

impl std::fmt::Display for SkillSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SkillSource::Plugin => "plugin",
            SkillSource::User => "user",
            SkillSource::Project => "project",
        })
    }
}

/// What kind of file an entry comes from: a skill folder's `SKILL.md`,
/// or a slash command's `.md` file under a `commands` folder. Claude Code
/// treats both alike (the user types `/name`, the model loads either with
/// the Skill tool), and so does cadre: one list, one loader.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SkillKind {
    Skill,
    Command,
}

impl std::fmt::Display for SkillKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SkillKind::Skill => "skill",
            SkillKind::Command => "command",
        })
    }
}

/// One loaded skill or command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Skill {
    pub name: String,
    pub description: String,
    pub source: SkillSource,
    pub kind: SkillKind,
    /// `argument-hint`: what to type after `/name`, for listings.
    pub argument_hint: Option<String>,
    /// Whether its `` !`command` `` lines may run: `false` for what the
    /// repository supplies in a folder the user has not trusted
    /// ([`Skills::restrict`]).
    pub shell_allowed: bool,
    /// The folder holding `SKILL.md` (the skill's base folder).
    pub dir: PathBuf,
    pub path: PathBuf,
    /// `allowed-tools`, as written (after tokenising); `None` when absent.
    pub allowed_tools: Option<Vec<String>>,
    pub model: Option<String>,
    /// `when_to_use`: more on when the model should load the skill, shown
    /// after the description in the listing the model sees.
    pub when_to_use: Option<String>,
    /// `false` with `disable-model-invocation: true`: the model is not told
    /// of the skill and the Skill tool does not load it.
    pub model_invocable: bool,
    /// `false` with `user-invocable: false`: the user cannot type
    /// `/name` (Claude Code answers that only Claude may use it, without
    /// asking the model) and `/help` does not list it; the model still can.
    pub user_invocable: bool,
    /// Claude Code keys of the frontmatter that cadre accepts and does not
    /// act on ([`NOT_ACTED_ON`]), with where each was written: `config
    /// show` lists them, so none is dropped without a word.
    #[serde(skip)]
    pub unimplemented: Vec<(String, Pos)>,
    /// The instructions: the file after its frontmatter (a skill's
    /// trimmed; a command's as written).
    pub body: String,
}

impl Skill {
    /// The entry's word for messages: "skill" or "command".
    pub fn what(&self) -> &'static str {
        match self.kind {
            SkillKind::Skill => "skill",
            SkillKind::Command => "command",
        }
    }

    /// Whether its text holds a `` !`command` `` line.
    pub fn has_shell_lines(&self) -> bool {
        self.body.contains("!`")
    }
}

/// The skills by name, and what was wrong on the way.
#[derive(Debug, Clone, Default)]
pub struct Skills {
    pub skills: BTreeMap<String, Skill>,
    pub diagnostics: Vec<Diagnostic>,
    /// Project skills not read because their `SKILL.md` links outside the
    /// project and the folder is not trusted.
    pub outside: Vec<Outside>,
}

impl Skills {
    pub fn get(&self, name: &str) -> Option<&Skill> {
        self.skills.get(name)
    }

    /// In a folder the user has not trusted, skills and commands the
    /// repository supplies grant nothing and run nothing: their
    /// `allowed-tools` are dropped (a prompt injection would otherwise only
    /// have to name the skill) and their `` !`command` `` lines do not run.
    /// Those are the project's and a plugin's whose file lies in the
    /// project. Returns what was dropped: (what, file).
    pub fn restrict(&mut self, files: &ProjectFiles) -> Vec<(String, PathBuf)> {
        if files.trusted() {
            return Vec::new();
        }
        let mut removed = Vec::new();
        for s in self.skills.values_mut() {
            let from_repo = match s.source {
                SkillSource::Project => true,
                SkillSource::Plugin => files.holds(&s.path),
                SkillSource::User => false,
            };
            if !from_repo {
                continue;
            }
            if s.allowed_tools.take().is_some_and(|t| !t.is_empty()) {
                removed.push((
                    format!("{} `{}`: allowed-tools", s.what(), s.name),
                    s.path.clone(),
                ));
            }
            if s.has_shell_lines() {
                s.shell_allowed = false;
                removed.push((
                    format!("{} `{}`: shell lines (!`…`)", s.what(), s.name),
                    s.path.clone(),
                ));
            }
        }
        removed
    }

    /// Adds the commands: a skill of the same name wins, as in Claude Code.
    pub fn add_commands(&mut self, commands: Skills) {
        self.diagnostics.extend(commands.diagnostics);
        self.outside.extend(commands.outside);
        for (name, c) in commands.skills {
            if let Some(s) = self.skills.get(&name) {
                self.diagnostics.push(Diagnostic::warning(
                    Some(&c.path),
                    None,
                    format!(
                        "command `{name}`: a skill of the same name ({}) wins; the command is not used",
                        s.path.display()
                    ),
                ));
                continue;
            }
            self.skills.insert(name, c);
        }
    }
}

/// A folder (or, for a plugin, also a file) to read skills or commands
/// from, its source, and the name of the plugin it belongs to.
pub type PartDir = (SkillSource, PathBuf, Option<String>);

/// The skill folders to read, lowest precedence first: the plugins', the
/// user's, then the project's from the git root down to `cwd`.
pub fn skill_dirs(cwd: &Path, home: Option<&Path>, plugin_dirs: &[PathBuf]) -> Vec<PartDir> {
    folders(cwd, home, plugin_dirs, "skills")
}

/// The command folders (`commands`), in the order of [`skill_dirs`].
pub fn command_dirs(cwd: &Path, home: Option<&Path>, plugin_dirs: &[PathBuf]) -> Vec<PartDir> {
    folders(cwd, home, plugin_dirs, "commands")
}

/// The `sub` folders of the plugins (those their manifests name), the
/// user and the project chain, lowest precedence first.
fn folders(cwd: &Path, home: Option<&Path>, plugin_dirs: &[PathBuf], sub: &str) -> Vec<PartDir> {
    let mut dirs = Vec::new();
    // A plugin folder (`agents.plugin_dirs`) is the plugin's root or its
    // `agents` folder; its skills and commands are where its manifest
    // says (by default the root's folders).
    for p in plugin_dirs {
        let root = match (p.file_name(), p.parent()) {
            (Some(n), Some(parent)) if n == "agents" => parent.to_path_buf(),
            _ => p.clone(),
        };
        let name = super::load::plugin_name(&root);
        let parts = crate::config::plugins::components(&root).0;
        let list = if sub == "skills" {
            parts.skills
        } else {
            parts.commands
        };
        dirs.extend(
            list.into_iter()
                .map(|d| (SkillSource::Plugin, d, Some(name.clone()))),
        );
    }
    let user = home.map(|h| crate::paths::user_claude_dir(h).join(sub));
    if let Some(u) = &user {
        dirs.push((SkillSource::User, u.clone(), None));
    }
    for d in super::sources::project_chain(cwd) {
        let p = d.join(".claude").join(sub);
        if user.as_ref() != Some(&p) {
            dirs.push((SkillSource::Project, p, None));
        }
    }
    dirs
}

/// The commands plugins name in the mapping form of their manifest's
/// `commands` (`/PLUGIN:NAME`), read from the plugin's file or written
/// inline, the mapping's metadata winning over the file's frontmatter.
pub fn load_named_commands(plugin_dirs: &[PathBuf]) -> Skills {
    let mut out = Skills::default();
    for root in plugin_dirs {
        let plugin = super::load::plugin_name(root);
        let manifest = crate::config::plugins::manifest_path(root);
        for c in crate::config::plugins::components(root).0.named_commands {
            let (path, text) = match (&c.file, &c.content) {
                (Some(f), _) => match read_text(f) {
                    Ok(t) => (f.clone(), t),
                    Err(e) => {
                        out.diagnostics.push(Diagnostic::error(Some(f), None, e));
                        continue;
                    }
                },
                (None, Some(t)) => (manifest.clone(), t.clone()),
                (None, None) => continue,
            };
            let name = format!("{plugin}:{}", c.name);
            let (command, diags) =
                parse_entry(&path, &text, SkillSource::Plugin, SkillKind::Command, name);
            out.diagnostics.extend(diags);
            let Some(mut command) = command else { continue };
            if let Some(d) = c.description {
                command.description = d;
            }
            if c.argument_hint.is_some() {
                command.argument_hint = c.argument_hint;
            }
            if c.model.is_some() {
                command.model = c.model;
            }
            if c.allowed_tools.is_some() {
                command.allowed_tools = c.allowed_tools;
            }
            out.skills.insert(command.name.clone(), command);
        }
    }
    out
}

/// How deep command folders are walked (namespaces in namespaces).
const MAX_COMMAND_DEPTH: usize = 8;
/// The most command files read from one folder tree.
const MAX_COMMAND_FILES: usize = 2000;

/// Loads every `**/*.md` under the command folders `dirs`, in order (a
/// later one wins). A file's name is its path below the folder without
/// `.md`, folders joined by `:` (`frontend/component.md` is
/// `frontend:component`), as Claude Code names them; a plugin's commands
/// are `PLUGIN:NAME`.
pub fn load_commands(dirs: &[PartDir], files: &ProjectFiles) -> Skills {
    let mut out = Skills::default();
    for (source, dir, plugin) in dirs {
        let mut found = Vec::new();
        // A plugin's manifest may name one command file.
        let single = dir.is_file();
        if single {
            found.push(dir.clone());
        } else {
            walk_md(dir, 0, &mut found);
        }
        found.sort();
        if found.len() > MAX_COMMAND_FILES {
            out.diagnostics.push(Diagnostic::warning(
                Some(dir),
                None,
                format!(
                    "more than {MAX_COMMAND_FILES} command files; only the first {MAX_COMMAND_FILES} are read"
                ),
            ));
            found.truncate(MAX_COMMAND_FILES);
        }
        for path in found {
            if *source == SkillSource::Project
                && let Err(outside) = files.admit(&path)
            {
                out.outside.push(outside);
                continue;
            }
            let base = if single {
                dir.parent().unwrap_or(dir)
            } else {
                dir.as_path()
            };
            let Ok(rel) = path
                .with_extension("")
                .strip_prefix(base)
                .map(Path::to_path_buf)
            else {
                continue;
            };
            let mut name: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().to_string())
                .collect();
            if let Some(p) = plugin {
                name.insert(0, p.clone());
            }
            let name = name.join(":");
            let text = match read_text(&path) {
                Ok(t) => t,
                Err(e) => {
                    out.diagnostics
                        .push(Diagnostic::error(Some(&path), None, e));
                    continue;
                }
            };
            let (command, diags) = parse_entry(&path, &text, *source, SkillKind::Command, name);
            out.diagnostics.extend(diags);
            if let Some(c) = command {
                out.skills.insert(c.name.clone(), c);
            }
        }
    }
    out
}

/// The `*.md` files below `dir` (links to folders are not followed).
fn walk_md(dir: &Path, depth: usize, found: &mut Vec<PathBuf>) {
    if depth > MAX_COMMAND_DEPTH || found.len() > MAX_COMMAND_FILES {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let path = e.path();
        let Ok(t) = e.file_type() else { continue };
        if t.is_dir() {
            walk_md(&path, depth + 1, found);
        } else if path.extension().is_some_and(|x| x == "md") && path.is_file() {
            found.push(path);
        }
    }
}

/// Loads every `*/SKILL.md` under `dirs`, in order (a later one wins).
/// A project skill is read only where `files` admits it.
pub fn load_skills(dirs: &[PartDir], files: &ProjectFiles) -> Skills {
    let mut out = Skills::default();
    for (source, dir, plugin) in dirs {
        // A plugin's manifest may name a skill's own folder.
        let mut folders: Vec<PathBuf> = if plugin.is_some() && dir.join("SKILL.md").is_file() {
            vec![dir.clone()]
        } else {
            let Ok(entries) = std::fs::read_dir(dir) else {
                continue;
            };
            entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.join("SKILL.md").is_file())
                .collect()
        };
        folders.sort();
        for folder in folders {
            let path = folder.join("SKILL.md");
            if *source == SkillSource::Project
                && let Err(outside) = files.admit(&path)
            {
                out.outside.push(outside);
                continue;
            }
            let text = match read_text(&path) {
                Ok(t) => t,
                Err(e) => {
                    out.diagnostics
                        .push(Diagnostic::error(Some(&path), None, e));
                    continue;
                }
            };
            let (skill, diags) = parse_skill(&path, &text, *source);
            out.diagnostics.extend(diags);
            if let Some(mut s) = skill {
                if let Some(p) = plugin {
                    s.name = format!("{p}:{}", s.name);
                }
                out.skills.insert(s.name.clone(), s);
            }
        }
    }
    out
}

fn read_text(path: &Path) -> Result<String, String> {
    let (bytes, more) =
        crate::raw::read_prefix(path, MAX_SKILL_BYTES).map_err(|e| format!("cannot read: {e}"))?;
    if more {
        return Err(format!(
            "more than the {MAX_SKILL_BYTES} bytes a SKILL.md may have; skipped"
        ));
    }
    String::from_utf8(bytes).map_err(|_| "not a UTF-8 text file; skipped".to_string())
}

/// The frontmatter keys a `SKILL.md` may have: the Agent Skills format's
/// (`name`, `description`, `license`, `compatibility`, `metadata`,
/// `allowed-tools`) and Claude Code's. Those cadre does not act on are
/// accepted quietly; docs/skills.md says which.
const KNOWN_KEYS: &[&str] = &[
    "name",
    "description",
    "allowed-tools",
    "model",
    "license",
    "compatibility",
    "metadata",
    "version",
    "when_to_use",
    "argument-hint",
    "arguments",
    "disable-model-invocation",
    "user-invocable",
    "disallowed-tools",
    "effort",
    "paths",
    "context",
    "agent",
    "hooks",
    "shell",
];

/// Claude Code's frontmatter keys that change how a skill runs and that
/// cadre does not implement yet (docs/skills.md): accepted, and listed by
/// `cadre config show` at their position.
const NOT_ACTED_ON: &[&str] = &[
    "disallowed-tools",
    "effort",
    "paths",
    "context",
    "agent",
    "hooks",
    "shell",
];

/// Parses one `SKILL.md`. The name defaults to the folder's name.
pub fn parse_skill(
    path: &Path,
    text: &str,
    source: SkillSource,
) -> (Option<Skill>, Vec<Diagnostic>) {
    let folder = path
        .parent()
        .and_then(Path::file_name)
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    parse_entry(path, text, source, SkillKind::Skill, folder)
}

/// Parses a `SKILL.md` or a command file. A command needs no frontmatter,
/// is named by its path (`name`, whose `name` key is not used) and has
/// the first line of its text as the description when it gives none.
fn parse_entry(
    path: &Path,
    text: &str,
    source: SkillSource,
    kind: SkillKind,
    default_name: String,
) -> (Option<Skill>, Vec<Diagnostic>) {
    let mut diags = Vec::new();
    let text = text.replace("\r\n", "\n");
    let plain =
        kind == SkillKind::Command && !text.trim_start_matches('\u{feff}').starts_with("---");
    let fm = match split_frontmatter(&text) {
        _ if plain => crate::catalog::Frontmatter {
            yaml: "",
            yaml_line: 1,
            body: text.trim_start_matches('\u{feff}'),
        },
        Ok(fm) => fm,
        Err(e) => {
            diags.push(Diagnostic::error(
                Some(path),
                Some(Pos::START),
                format!("{e}; skipped"),
            ));
            return (None, diags);
        }
    };
    let shift = fm.yaml_line - 1;
    let at = |p: Pos| p.shifted(shift);
    // Claude Code reads `argument-hint: [message]` and the like (not
    // valid YAML: a flow list left open) as the text it looks like: when
    // the block does not parse, it is read again with such values quoted.
    let doc = match parse_yaml(fm.yaml)
        .or_else(|e| parse_yaml(&quote_plain_values(fm.yaml)).map_err(|_| e))
    {
        Ok(d) => d,
        Err(e) => {
            diags.push(Diagnostic::error(
                Some(path),
                Some(at(e.pos)),
                format!("invalid YAML frontmatter: {}; skipped", e.message),
            ));
            return (None, diags);
        }
    };
    let mut unimplemented = Vec::new();
    for (key, _) in doc.entries() {
        if NOT_ACTED_ON.contains(&key.name.as_str()) {
            unimplemented.push((key.name.clone(), at(key.pos)));
        }
        if !KNOWN_KEYS.contains(&key.name.as_str()) {
            diags.push(Diagnostic::warning(
                Some(path),
                Some(at(key.pos)),
                format!("unknown key `{}`; ignored", key.name),
            ));
        }
    }
    let string = |key: &str, diags: &mut Vec<Diagnostic>| -> Option<String> {
        let v = doc.get(key)?;
        match v.scalar_text() {
            Some(s) if !s.trim().is_empty() => Some(s.trim().to_string()),
            _ => {
                diags.push(Diagnostic::warning(
                    Some(path),
                    Some(at(v.pos)),
                    format!(
                        "{key}: expected a non-empty string, found {}; ignored",
                        v.type_name()
                    ),
                ));
                None
            }
        }
    };
    let name = match kind {
        SkillKind::Skill => string("name", &mut diags).unwrap_or(default_name),
        SkillKind::Command => default_name,
    };
    let extra = if kind == SkillKind::Command { '.' } else { '-' };
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == ':' || c == extra)
    {
        let pos = doc.get("name").map_or(Pos::START, |n| at(n.pos));
        diags.push(Diagnostic::error(
            Some(path),
            Some(pos),
            format!(
                "name: `{name}` is not a {kind} name (letters, digits, `-`, `_`, `:`{}); skipped",
                if kind == SkillKind::Command {
                    ", `.`"
                } else {
                    ""
                }
            ),
        ));
        return (None, diags);
    }
    let description = string("description", &mut diags).or_else(|| {
        (kind == SkillKind::Command).then(|| {
            let first = fm.body.lines().map(str::trim).find(|l| !l.is_empty());
            first.unwrap_or(name.as_str()).chars().take(200).collect()
        })
    });
    let Some(description) = description else {
        let pos = doc.get("description").map_or(Pos::START, |n| at(n.pos));
        diags.push(Diagnostic::error(
            Some(path),
            Some(pos),
            "description: required (it tells the model when to use the skill); skipped",
        ));
        return (None, diags);
    };
    let allowed_tools = doc
        .get("allowed-tools")
        .and_then(|v| tools(v, path, &at, &mut diags));
    let model = string("model", &mut diags);
    let when_to_use = string("when_to_use", &mut diags);
    let argument_hint = string("argument-hint", &mut diags);
    // A `true`/`false` key; absent (or null), `default`.
    let flag =
        |key: &str, default: bool, diags: &mut Vec<Diagnostic>| match doc.get(key).map(|v| &v.kind)
        {
            None | Some(Kind::Null) => default,
            Some(Kind::Bool(b)) => *b,
            Some(_) => {
                let pos = doc.get(key).map_or(Pos::START, |n| at(n.pos));
                diags.push(Diagnostic::warning(
                    Some(path),
                    Some(pos),
                    format!("{key}: expected true or false; ignored"),
                ));
                default
            }
        };
    let model_invocable = !flag("disable-model-invocation", false, &mut diags);
    let user_invocable = flag("user-invocable", true, &mut diags);
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let body = match kind {
        SkillKind::Skill => fm.body.trim().to_string(),
        SkillKind::Command => fm.body.to_string(),
    };
    let skill = Skill {
        name,
        description,
        source,
        kind,
        argument_hint,
        shell_allowed: true,
        dir,
        path: path.to_path_buf(),
        allowed_tools,
        model,
        when_to_use,
        model_invocable,
        user_invocable,
        unimplemented,
        body,
    };
    (Some(skill), diags)
}

/// `yaml` with the value of each top-level `key: value` line that is not
/// quoted, a block or a number written as a single-quoted YAML string.
fn quote_plain_values(yaml: &str) -> String {
    let mut out = String::with_capacity(yaml.len() + 16);
    for line in yaml.lines() {
        let quoted = line
            .split_once(": ")
            .filter(|(k, _)| !k.starts_with([' ', '\t', '#', '-']) && !k.is_empty())
            .and_then(|(k, v)| {
                let v = v.trim();
                let plain = !v.is_empty()
                    && !v.starts_with(['"', '\'', '|', '>'])
                    && v.parse::<f64>().is_err()
                    && !matches!(v, "true" | "false" | "null" | "~");
                plain.then(|| format!("{k}: '{}'", v.replace('\'', "''")))
            });
        out.push_str(quoted.as_deref().unwrap_or(line));
        out.push('\n');
    }
    out
}

fn tools(
    v: &Node,
    path: &Path,
    at: &dyn Fn(Pos) -> Pos,
    diags: &mut Vec<Diagnostic>,
) -> Option<Vec<String>> {
    let raw: Vec<String> = match &v.kind {
        Kind::Str(s) => tokenize_tools(s),
        Kind::Seq(items) => items
            .iter()
            .filter_map(|i| i.scalar_text())
            .flat_map(|s| tokenize_tools(&s))
            .collect(),
        Kind::Null => Vec::new(),
        _ => {
            diags.push(Diagnostic::warning(
                Some(path),
                Some(at(v.pos)),
                format!(
                    "allowed-tools: expected a string or a list of strings, found {}; ignored",
                    v.type_name()
                ),
            ));
            return None;
        }
    };
    Some(raw.iter().map(|t| canonical_tool_spec(t)).collect())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_skill_file_parses_with_defaults_and_positions() {
        let p = Path::new("/x/.claude/skills/pdf/SKILL.md");
        let (s, d) = parse_skill(
            p,
            "---\ndescription: Fill PDF forms\nallowed-tools: Read, Bash(python:*)\nmodel: haiku\n---\n# PDF\nSteps.\n",
            SkillSource::Project,
        );
        assert!(d.is_empty(), "{d:?}");
        let s = s.unwrap();
        assert_eq!(s.name, "pdf", "the folder's name");
        assert_eq!(s.description, "Fill PDF forms");
        assert_eq!(
            s.allowed_tools,
            Some(vec!["Read".to_string(), "Bash(python:*)".to_string()])
        );
        assert_eq!(s.model.as_deref(), Some("haiku"));
        assert_eq!(s.body, "# PDF\nSteps.");
        assert_eq!(s.dir, Path::new("/x/.claude/skills/pdf"));

        let (s, d) = parse_skill(
            p,
            "---\nname: pdf\ncolour: red\n---\nx\n",
            SkillSource::User,
        );
        assert!(s.is_none());
        let shown: Vec<String> = d.iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            [
                "/x/.claude/skills/pdf/SKILL.md:3:1: warning: unknown key `colour`; ignored"
                    .to_string(),
                "/x/.claude/skills/pdf/SKILL.md:1:1: error: description: required (it tells the model when to use the skill); skipped".to_string()
            ]
        );
        let (_, d) = parse_skill(p, "---\nname: [x\n---\n", SkillSource::User);
        assert!(
            d[0].to_string()
                .starts_with("/x/.claude/skills/pdf/SKILL.md:2:"),
            "{}",
            d[0]
        );
    }
}
