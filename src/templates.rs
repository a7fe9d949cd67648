//! Prompt templates: every text the model reads that is not a user's own.
//!
//! Templates are Handlebars files (`*.hbs`) with HTML escaping off and
//! strict mode on (a missing variable is an error, not an empty string).
//! The built-in set is embedded from `agents/templates/`; a file with the
//! same name in the on-disk templates folder replaces it. A template that
//! does not compile is a diagnostic naming its file and line, and the
//! embedded one stays in use. This module does not know where templates are
//! used.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use handlebars::Handlebars;
use include_dir::{Dir, include_dir};
use serde::Serialize;

use crate::diagnostic::{Diagnostic, Pos};

static EMBEDDED: Dir<'_> = include_dir!("$CARGO_MANIFEST_DIR/agents/templates");

/// Where a template's text came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateOrigin {
    /// `None` for the embedded copy.
    pub path: Option<PathBuf>,
    /// The template's text, to tell what changed on reload.
    pub text: String,
}

/// A compiled set of templates.
#[derive(Clone)]
pub struct Templates {
    registry: Handlebars<'static>,
    origins: BTreeMap<String, TemplateOrigin>,
}

impl std::fmt::Debug for Templates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Templates")
            .field("names", &self.origins.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// A template failed to render.
#[derive(Debug, Clone, thiserror::Error)]
#[error("template `{name}`: {message}")]
pub struct RenderError {
    pub name: String,
    pub message: String,
}

fn new_registry() -> Handlebars<'static> {
    let mut hb = Handlebars::new();
    hb.register_escape_fn(handlebars::no_escape);
    hb.set_strict_mode(true);
    hb
}

impl Templates {
    /// Compiles the embedded templates, then the `*.hbs` files in `dir`
    /// (if given) over them.
    pub fn load(dir: Option<&Path>) -> (Templates, Vec<Diagnostic>) {
        let mut t = Templates {
            registry: new_registry(),
            origins: BTreeMap::new(),
        };
        let mut diags = Vec::new();
        for file in EMBEDDED.files() {
            let Some(name) = template_name(file.path()) else {
                continue;
            };
            let Some(text) = file.contents_utf8() else {
                continue;
            };
            t.add(&name, text, None, &mut diags);
        }
        if let Some(dir) = dir {
            t.load_dir(dir, &mut diags);
        }
        (t, diags)
    }

    fn load_dir(&mut self, dir: &Path, diags: &mut Vec<Diagnostic>) {
        let Ok(entries) = fs_err::read_dir(dir) else {
            return;
        };
        let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
        paths.sort();
        for path in paths {
            let Some(name) = template_name(&path) else {
                continue;
            };
            match fs_err::read_to_string(&path) {
                Ok(text) => self.add(&name, &text, Some(&path), diags),
                Err(e) => diags.push(Diagnostic::error(
                    Some(&path),
                    None,
                    format!("cannot read template: {e}"),
                )),
            }
        }
    }

    fn add(&mut self, name: &str, text: &str, path: Option<&Path>, diags: &mut Vec<Diagnostic>) {
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        match self.registry.register_template_string(name, text) {
            Ok(()) => {
                self.origins.insert(
                    name.to_string(),
                    TemplateOrigin {
                        path: path.map(Path::to_path_buf),
                        text: text.to_string(),
                    },
                );
            }
            Err(e) => {
                let pos = e.pos().map(|(l, c)| Pos::new(l, c.max(1)));
                let shown = path.map_or_else(
                    || PathBuf::from(format!("<embedded>/{name}.hbs")),
                    Path::to_path_buf,
                );
                let kept = if self.origins.contains_key(name) {
                    "; the built-in one stays in use"
                } else {
                    ""
                };
                diags.push(Diagnostic::error(
                    Some(&shown),
                    pos,
                    format!("template does not compile: {}{kept}", e.reason()),
                ));
            }
        }
    }

    /// Renders the named template with `ctx`.
    pub fn render<T: Serialize>(&self, name: &str, ctx: &T) -> Result<String, RenderError> {
        self.registry.render(name, ctx).map_err(|e| RenderError {
            name: name.to_string(),
            message: render_message(&e),
        })
    }

    /// Renders the named template for the model, trimmed at the end. A
    /// template that fails to render gives its error text instead: the model
    /// gets a message it can read rather than the turn failing.
    pub fn text<T: Serialize>(&self, name: &str, ctx: &T) -> String {
        self.render(name, ctx)
            .map_or_else(|e| e.to_string(), |t| t.trim_end().to_string())
    }

    /// Renders a template given as text (an agent's prompt body, a tool's
    /// description); `label` names it in errors.
    pub fn render_text<T: Serialize>(
        &self,
        label: &str,
        text: &str,
        ctx: &T,
    ) -> Result<String, RenderError> {
        self.registry
            .render_template(text, ctx)
            .map_err(|e| RenderError {
                name: label.to_string(),
                message: render_message(&e),
            })
    }

    pub fn has(&self, name: &str) -> bool {
        self.origins.contains_key(name)
    }

    pub fn origins(&self) -> &BTreeMap<String, TemplateOrigin> {
        &self.origins
    }
}

fn render_message(e: &handlebars::RenderError) -> String {
    let mut m = e.reason().to_string();
    if let Some(line) = e.line_no {
        m.push_str(&format!(" (line {line})"));
    }
    m
}

fn template_name(path: &Path) -> Option<String> {
    if path.extension()? != "hbs" {
        return None;
    }
    Some(path.file_stem()?.to_str()?.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn embedded_templates_compile_and_render_without_escaping() {
        let (t, diags) = Templates::load(None);
        assert!(diags.is_empty(), "{diags:?}");
        assert!(t.has("fork_child"));
        let out = t
            .render_text("x", "a {{v}} b", &json!({"v": "<&>"}))
            .unwrap();
        assert_eq!(out, "a <&> b");
    }

    #[test]
    fn strict_mode_rejects_missing_variables() {
        let (t, _) = Templates::load(None);
        assert!(t.render_text("x", "{{missing}}", &json!({})).is_err());
    }

    #[test]
    fn disk_overrides_and_broken_files_are_reported_with_line() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("fork_child.hbs"), "OVERRIDE {{directive}}").unwrap();
        std::fs::write(
            dir.path().join("broken.hbs"),
            "line one\n{{#if x}}never closed\n",
        )
        .unwrap();
        let (t, diags) = Templates::load(Some(dir.path()));
        assert_eq!(
            t.render("fork_child", &json!({"directive": "d"})).unwrap(),
            "OVERRIDE d"
        );
        assert_eq!(diags.len(), 1);
        assert!(diags[0].path.as_ref().unwrap().ends_with("broken.hbs"));
        assert!(diags[0].line.is_some(), "{:?}", diags[0]);
        assert!(!t.has("broken"));
    }
}
