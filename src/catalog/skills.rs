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

impl std::fmt::Display for SkillSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SkillSource::Plugin => "plugin",
            SkillSource::User => "user",
            SkillSource::Project => "project",
        })
    }
}

/// One loaded skill.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Skill {
    pub name: String,
    pub description: String,
    pub source: SkillSource,
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
    /// The instructions: the file after its frontmatter.
    pub body: String,
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

    /// In a folder the user has not trusted, skills the repository
    /// supplies grant nothing: their `allowed-tools` are dropped (a prompt
    /// injection would otherwise only have to name the skill). Those are
    /// the project's skills and a plugin's whose file lies in the project.
    /// Returns what was dropped: (skill, file).
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
            if from_repo && s.allowed_tools.take().is_some_and(|t| !t.is_empty()) {
                removed.push((s.name.clone(), s.path.clone()));
            }
        }
        removed
    }
}

/// The skill folders to read, lowest precedence first: the user's, then the
/// project's from the git root down to `cwd`.
pub fn skill_dirs(
    cwd: &Path,
    home: Option<&Path>,
    plugin_dirs: &[PathBuf],
) -> Vec<(SkillSource, PathBuf)> {
    let mut dirs = Vec::new();
    // A plugin folder (`agents.plugin_dirs`) is the plugin's root or its
    // `agents` folder; its skills are in the root's `skills` folder.
    for p in plugin_dirs {
        let root = match (p.file_name(), p.parent()) {
            (Some(n), Some(parent)) if n == "agents" => parent.to_path_buf(),
            _ => p.clone(),
        };
        dirs.push((SkillSource::Plugin, root.join("skills")));
    }
    let user = home.map(|h| h.join(".claude").join("skills"));
    if let Some(u) = &user {
        dirs.push((SkillSource::User, u.clone()));
    }
    for d in super::sources::project_chain(cwd) {
        let p = d.join(".claude").join("skills");
        if user.as_ref() != Some(&p) {
            dirs.push((SkillSource::Project, p));
        }
    }
    dirs
}

/// Loads every `*/SKILL.md` under `dirs`, in order (a later one wins).
/// A project skill is read only where `files` admits it.
pub fn load_skills(dirs: &[(SkillSource, PathBuf)], files: &ProjectFiles) -> Skills {
    let mut out = Skills::default();
    for (source, dir) in dirs {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        let mut folders: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.join("SKILL.md").is_file())
            .collect();
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
                if *source == SkillSource::Plugin
                    && let Some(root) = dir.parent()
                {
                    s.name = format!("{}:{}", super::load::plugin_name(root), s.name);
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

/// Parses one `SKILL.md`. The name defaults to the folder's name.
pub fn parse_skill(
    path: &Path,
    text: &str,
    source: SkillSource,
) -> (Option<Skill>, Vec<Diagnostic>) {
    let mut diags = Vec::new();
    let text = text.replace("\r\n", "\n");
    let fm = match split_frontmatter(&text) {
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
    let doc = match parse_yaml(fm.yaml) {
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
    for (key, _) in doc.entries() {
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
    let folder = path
        .parent()
        .and_then(Path::file_name)
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    let name = string("name", &mut diags).unwrap_or(folder);
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == ':')
    {
        let pos = doc.get("name").map_or(Pos::START, |n| at(n.pos));
        diags.push(Diagnostic::error(
            Some(path),
            Some(pos),
            format!("name: `{name}` is not a skill name (letters, digits, `-`, `_`, `:`); skipped"),
        ));
        return (None, diags);
    }
    let Some(description) = string("description", &mut diags) else {
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
    let model_invocable = match doc.get("disable-model-invocation").map(|v| &v.kind) {
        None | Some(Kind::Bool(false) | Kind::Null) => true,
        Some(Kind::Bool(true)) => false,
        Some(_) => {
            let pos = doc
                .get("disable-model-invocation")
                .map_or(Pos::START, |n| at(n.pos));
            diags.push(Diagnostic::warning(
                Some(path),
                Some(pos),
                "disable-model-invocation: expected true or false; ignored",
            ));
            true
        }
    };
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let skill = Skill {
        name,
        description,
        source,
        dir,
        path: path.to_path_buf(),
        allowed_tools,
        model,
        when_to_use,
        model_invocable,
        body: fm.body.trim().to_string(),
    };
    (Some(skill), diags)
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
