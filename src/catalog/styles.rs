//! Output styles: how the main session answers, chosen by the `outputStyle`
//! setting (cadre's `output_style`), as in Claude Code.
//!
//! Found, a later source replacing an earlier one of the same name:
//! cadre's built-in styles (`Explanatory`, `Learning`, `Proactive`,
//! `Concise`; their prompts are cadre's own, in the `output_style_builtin`
//! template), plugins' `output-styles` folders (named `PLUGIN:NAME`), the
//! user's `~/.claude/output-styles`, then `.claude/output-styles` of each
//! project folder from the repository root down to the working directory.
//! A style file is Markdown with optional frontmatter — `name` (default:
//! the file name without `.md`), `description`, `keep-coding-instructions`
//! (default false) — and its body is the style's prompt. `default` (any
//! case) is no style. A project file that resolves outside an untrusted
//! project is not read (`config::trust::ProjectFiles`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::config::trust::{Outside, ProjectFiles};
use crate::diagnostic::{Diagnostic, Pos};
use crate::raw::Kind;

/// The largest style file read.
const MAX_STYLE_BYTES: u64 = 64 * 1024;
/// The most files read from one styles folder.
const MAX_STYLE_FILES: usize = 200;

/// Where a style comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum StyleSource {
    Builtin,
    Plugin,
    User,
    Project,
}

/// One output style.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OutputStyle {
    pub name: String,
    pub description: String,
    /// Whether cadre's coding instructions stay in the system prompt.
    pub keep_coding_instructions: bool,
    pub source: StyleSource,
    /// The file it was read from (none for a built-in).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<PathBuf>,
    /// The style's prompt; empty for a built-in, whose prompt is the
    /// `output_style_builtin` template.
    #[serde(skip)]
    pub prompt: String,
}

/// Every output style known, by name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct OutputStyles {
    pub styles: BTreeMap<String, OutputStyle>,
    /// Project files not read because they resolve outside an untrusted
    /// project.
    #[serde(skip)]
    pub outside: Vec<Outside>,
    /// Existing styles folders (watched).
    #[serde(skip)]
    pub dirs: Vec<PathBuf>,
}

/// The built-in styles: (name, description).
pub const BUILTIN_STYLES: &[(&str, &str)] = &[
    (
        "Explanatory",
        "Explains the choices behind the work and the patterns of the codebase",
    ),
    (
        "Learning",
        "Leaves small, well-chosen pieces of code for you to write, to learn by doing",
    ),
    (
        "Proactive",
        "Acts at once on reasonable assumptions and keeps questions to a minimum",
    ),
    ("Concise", "Leads with the result and keeps answers short"),
];

impl OutputStyles {
    /// The style `name` selects: `None` for `default` (any case); the
    /// style of that exact name, else of that name in another case.
    pub fn find(&self, name: &str) -> Option<&OutputStyle> {
        if name.eq_ignore_ascii_case("default") {
            return None;
        }
        self.styles.get(name).or_else(|| {
            self.styles
                .values()
                .find(|s| s.name.eq_ignore_ascii_case(name))
        })
    }

    /// Every style's name, `default` first.
    pub fn names(&self) -> Vec<String> {
        std::iter::once("default".to_string())
            .chain(self.styles.keys().cloned())
            .collect()
    }
}

/// The folders styles are read from, lowest precedence first.
/// With `--setting-sources` (`sources`), the user and project folders are
/// read only when their scope is listed.
pub fn style_dirs(
    cwd: &Path,
    home: Option<&Path>,
    plugin_dirs: &[PathBuf],
    sources: Option<&[crate::config::Scope]>,
) -> Vec<(StyleSource, PathBuf, Option<String>)> {
    use crate::config::Scope;
    let wanted = |scope: Scope| sources.is_none_or(|s| s.contains(&scope));
    let mut dirs = Vec::new();
    for p in plugin_dirs {
        let root = match (p.file_name(), p.parent()) {
            (Some(n), Some(parent)) if n == "agents" => parent.to_path_buf(),
            _ => p.clone(),
        };
        // Named as its commands and agents are: the manifest's `name`
        // (an installed copy's folder is its version). Its styles are where
        // its manifest says (by default `output-styles/`).
        let plugin = super::load::plugin_name(&root);
        for d in crate::config::plugins::components(&root).0.output_styles {
            dirs.push((StyleSource::Plugin, d, Some(plugin.clone())));
        }
    }
    let user = home.map(|h| crate::paths::user_claude_dir(h).join("output-styles"));
    if let Some(u) = user.as_ref().filter(|_| wanted(Scope::User)) {
        dirs.push((StyleSource::User, u.clone(), None));
    }
    let project = if wanted(Scope::Project) {
        super::sources::project_chain(cwd)
    } else {
        Vec::new()
    };
    for d in project {
        let p = d.join(".claude/output-styles");
        if user.as_ref() != Some(&p) {
            dirs.push((StyleSource::Project, p, None));
        }
    }
    dirs
}

/// Loads the built-in styles and every style file of `dirs`.
pub fn load_styles(
    dirs: &[(StyleSource, PathBuf, Option<String>)],
    files: &ProjectFiles,
) -> (OutputStyles, Vec<Diagnostic>) {
    let mut out = OutputStyles::default();
    let mut diags = Vec::new();
    for (name, description) in BUILTIN_STYLES {
        out.styles.insert(
            (*name).to_string(),
            OutputStyle {
                name: (*name).to_string(),
                description: (*description).to_string(),
                keep_coding_instructions: true,
                source: StyleSource::Builtin,
                path: None,
                prompt: String::new(),
            },
        );
    }
    for (source, dir, plugin) in dirs {
        // A plugin's manifest may name one style file.
        let mut paths: Vec<PathBuf> = if plugin.is_some() && dir.is_file() {
            vec![dir.clone()]
        } else {
            let Ok(entries) = std::fs::read_dir(dir) else {
                continue;
            };
            out.dirs.push(dir.clone());
            entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|e| e == "md") && p.is_file())
                .collect()
        };
        paths.sort();
        paths.truncate(MAX_STYLE_FILES);
        for path in paths {
            if *source == StyleSource::Project
                && let Err(o) = files.admit(&path)
            {
                out.outside.push(o);
                continue;
            }
            if let Some(mut style) = read_style(&path, *source, &mut diags) {
                if let Some(p) = plugin {
                    style.name = format!("{p}:{}", style.name);
                }
                out.styles.insert(style.name.clone(), style);
            }
        }
    }
    (out, diags)
}

/// Reads one style file; `None` (with a diagnostic) when it is broken.
pub fn read_style(
    path: &Path,
    source: StyleSource,
    diags: &mut Vec<Diagnostic>,
) -> Option<OutputStyle> {
    let text = match crate::raw::read_text(path, MAX_STYLE_BYTES) {
        Ok(t) => t.replace("\r\n", "\n"),
        Err(e) => {
            diags.push(Diagnostic::warning(
                Some(path),
                None,
                format!("cannot read output style: {e}"),
            ));
            return None;
        }
    };
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().to_string())
        .unwrap_or_default();
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    let mut style = OutputStyle {
        name: stem.clone(),
        description: format!("Custom {stem} output style"),
        keep_coding_instructions: false,
        source,
        path: Some(path.to_path_buf()),
        prompt: text.trim().to_string(),
    };
    if !text.starts_with("---") {
        return Some(style);
    }
    let (fm, doc) = super::frontmatter::read_frontmatter(text, path, "output style", diags)?;
    let at = |p: Pos| p.shifted(fm.yaml_line - 1);
    style.prompt = fm.body.trim().to_string();
    for (key, value) in doc.entries() {
        match key.name.as_str() {
            "name" | "description" => match value.scalar_text() {
                Some(s) if !s.trim().is_empty() => {
                    if key.name == "name" {
                        style.name = s.trim().to_string();
                    } else {
                        style.description = s.trim().to_string();
                    }
                }
                _ => diags.push(Diagnostic::warning(
                    Some(path),
                    Some(at(value.pos)),
                    format!(
                        "{}: expected a non-empty string, found {}; ignored",
                        key.name,
                        value.type_name()
                    ),
                )),
            },
            "keep-coding-instructions" => match &value.kind {
                Kind::Bool(b) => style.keep_coding_instructions = *b,
                Kind::Str(s) if s == "true" || s == "false" => {
                    style.keep_coding_instructions = s == "true";
                }
                _ => diags.push(Diagnostic::warning(
                    Some(path),
                    Some(at(value.pos)),
                    "keep-coding-instructions: expected true or false; ignored",
                )),
            },
            // Claude Code's plugin-only key; accepted quietly.
            "force-for-plugin" => {}
            other => diags.push(Diagnostic::warning(
                Some(path),
                Some(at(key.pos)),
                format!("unknown output-style key `{other}`; ignored"),
            )),
        }
    }
    Some(style)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_style_file_with_and_without_frontmatter() {
        let d = tempfile::tempdir().unwrap();
        let a = d.path().join("pirate.md");
        std::fs::write(
            &a,
            "---\nname: Pirate\ndescription: Arr\nkeep-coding-instructions: true\n---\n\nTalk like a pirate.\n",
        )
        .unwrap();
        let b = d.path().join("plain.md");
        std::fs::write(&b, "Be plain.\n").unwrap();
        let c = d.path().join("bad.md");
        std::fs::write(
            &c,
            "---\nname: X\nkeep-coding-instructions: maybe\n---\nT\n",
        )
        .unwrap();
        let (s, diags) = load_styles(
            &[(StyleSource::Project, d.path().to_path_buf(), None)],
            &ProjectFiles::any(),
        );
        let p = s.find("pirate").unwrap();
        assert_eq!(p.name, "Pirate");
        assert!(p.keep_coding_instructions);
        assert_eq!(p.prompt, "Talk like a pirate.");
        let plain = s.find("plain").unwrap();
        assert!(!plain.keep_coding_instructions);
        assert_eq!(plain.description, "Custom plain output style");
        assert!(s.find("default").is_none());
        assert!(s.find("explanatory").is_some());
        assert_eq!(diags.len(), 1, "{diags:?}");
        assert_eq!((diags[0].line, diags[0].column), (Some(3), Some(27)));
    }
}
