//! Prompt templates: every text the model reads that is not a user's own.
//!
//! Templates are Handlebars files (`*.hbs`) with HTML escaping off and
//! strict mode on (a missing variable is an error, not an empty string).
//! The built-in set is embedded from `agents/templates/`; a file with the
//! same name in the on-disk templates folder replaces it. A template that
//! does not compile is a diagnostic naming its file and line, and the
//! embedded one stays in use. The embedded templates are compiled at their
//! first use, not at load: a process renders a handful of the hundred-odd,
//! and parsing them all was most of a start's work (a unit test compiles
//! and checks every one). This module does not know where templates are
//! used.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};

use handlebars::template::{Parameter, Template, TemplateElement};
use handlebars::{Handlebars, RenderContext, Renderable, StringOutput};
use include_dir::{Dir, include_dir};
use serde::Serialize;

use crate::diagnostic::{Diagnostic, Pos};

mod skeleton;

static EMBEDDED: Dir<'_> = include_dir!("$CARGO_MANIFEST_DIR/agents/templates");

/// Where a template's text came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateOrigin {
    /// `None` for the embedded copy.
    pub path: Option<PathBuf>,
    /// The template's text, to tell what changed on reload.
    pub text: String,
}

/// A set of templates, each compiled at its first use (an on-disk one at
/// load, to report its mistakes then).
#[derive(Clone)]
pub struct Templates {
    /// The templates compiled so far. Shared by clones of one set: they
    /// have the same texts, so it does not matter which compiled one.
    registry: Arc<RwLock<Handlebars<'static>>>,
    origins: BTreeMap<String, TemplateOrigin>,
    /// Texts given to [`Templates::render_text`] (tool descriptions, agent
    /// bodies), compiled at their first use and kept with this set: a text
    /// is parsed and checked once per snapshot, not once per session.
    texts: Arc<Mutex<HashMap<String, Arc<CompiledText>>>>,
}

/// A text compiled for [`Templates::render_text`], under its label.
struct CompiledText {
    text: String,
    /// The template, or why it cannot render: `Err(Some(message))` when its
    /// partials recurse, `Err(None)` when it does not parse.
    outcome: Result<Template, Option<String>>,
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
            registry: Arc::new(RwLock::new(new_registry())),
            origins: BTreeMap::new(),
            texts: Arc::default(),
        };
        let mut diags = Vec::new();
        for file in EMBEDDED.files() {
            let Some(name) = template_name(file.path()) else {
                continue;
            };
            let Some(text) = file.contents_utf8() else {
                continue;
            };
            // Known good (tested): compiled when first rendered.
            let text = text.strip_prefix('\u{feff}').unwrap_or(text);
            t.origins.insert(
                name,
                TemplateOrigin {
                    path: None,
                    text: text.to_string(),
                },
            );
        }
        if let Some(dir) = dir {
            t.load_dir(dir, &mut diags);
        }
        (t, diags)
    }

    fn load_dir(&mut self, dir: &Path, diags: &mut Vec<Diagnostic>) {
        /// A template file larger than this is reported, not read.
        const MAX_TEMPLATE_BYTES: u64 = 1 << 20;
        let Ok(entries) = fs_err::read_dir(dir) else {
            return;
        };
        let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
        paths.sort();
        for path in paths {
            let Some(name) = template_name(&path) else {
                continue;
            };
            // Bounded whatever the file is (a link may name a device).
            match crate::raw::read_text(&path, MAX_TEMPLATE_BYTES) {
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
        let shown = || {
            path.map_or_else(
                || PathBuf::from(format!("<embedded>/{name}.hbs")),
                Path::to_path_buf,
            )
        };
        // Parsed once: the same template is checked, then registered (as
        // `register_template_string` would compile it: named, indenting
        // partials as the registry does).
        match skeleton::compile(text, Some(name.to_string())) {
            Ok(compiled) => {
                if let Err(message) = self.check_compiled(&compiled, Some(name)) {
                    diags.push(Diagnostic::error(Some(&shown()), None, message));
                    return;
                }
                self.write().register_template(name, compiled);
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
                let shown = shown();
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

    /// Renders the template of a typed context, as written.
    pub fn render<C: Context>(&self, ctx: &C) -> Result<String, RenderError> {
        self.render_value(C::TEMPLATE, ctx)
    }

    /// Renders the template `name`, chosen by data (an agent file names
    /// its prompt template), with a typed context of the same shape as
    /// `C`'s own template.
    pub fn render_as<C: Context>(&self, name: &str, ctx: &C) -> Result<String, RenderError> {
        self.render_value(name, ctx)
    }

    fn render_value<T: Serialize>(&self, name: &str, ctx: &T) -> Result<String, RenderError> {
        self.ensure(name).map_err(|message| RenderError {
            name: name.to_string(),
            message,
        })?;
        self.read().render(name, ctx).map_err(|e| RenderError {
            name: name.to_string(),
            message: render_message(&e),
        })
    }

    fn read(&self) -> RwLockReadGuard<'_, Handlebars<'static>> {
        // A panic while compiling leaves a usable registry (a template is
        // inserted whole or not at all).
        self.registry.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, Handlebars<'static>> {
        self.registry.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Compiles `name` and every template it names as a partial, at any
    /// depth, that is not compiled yet. A name that is no template is left
    /// to the renderer (an inline partial, or an error it reports).
    fn ensure(&self, name: &str) -> Result<(), String> {
        if !self.origins.contains_key(name) || self.read().has_template(name) {
            return Ok(());
        }
        let mut registry = self.write();
        self.ensure_in(&mut registry, name)
    }

    fn ensure_in(&self, registry: &mut Handlebars<'static>, name: &str) -> Result<(), String> {
        let Some(origin) = self.origins.get(name) else {
            return Ok(());
        };
        if registry.has_template(name) {
            return Ok(());
        }
        let compiled = skeleton::compile(&origin.text, Some(name.to_string()))
            .map_err(|e| format!("template does not compile: {}", e.reason()))?;
        let mut partials = Vec::new();
        partial_names(&compiled, &mut partials);
        // Registered before its partials, so that a cycle ends here.
        registry.register_template(name, compiled);
        partials
            .iter()
            .try_for_each(|p| self.ensure_in(registry, p))
    }

    /// Renders the template of a typed context for the model: trimmed at
    /// the end, or for a verbatim context (raw output a tool passes on)
    /// kept exactly as rendered. A template that fails to render gives its
    /// error text instead: the model gets a message it can read rather
    /// than the turn failing.
    pub fn show<C: Context>(&self, ctx: &C) -> String {
        self.show_value(C::TEMPLATE, C::VERBATIM, ctx)
    }

    /// [`Templates::show`] for a context that crossed a boundary as data
    /// (a tool's outcome: `ToolOutput` keeps its context's template name,
    /// verbatim flag and values). Only `ToolOutput` calls this.
    pub fn show_value<T: Serialize>(&self, name: &str, verbatim: bool, ctx: &T) -> String {
        match self.render_value(name, ctx) {
            Ok(text) if verbatim => text,
            Ok(text) => text.trim_end().to_string(),
            Err(e) => e.to_string(),
        }
    }

    /// Renders a template given as text (an agent's prompt body, a tool's
    /// description); `label` names it in errors. A text whose partials
    /// include themselves, or expand past [`MAX_PARTIAL_EXPANSIONS`], is an
    /// error before anything renders (see [`Templates::check_partials`]).
    pub fn render_text<T: Serialize>(
        &self,
        label: &str,
        text: &str,
        ctx: &T,
    ) -> Result<String, RenderError> {
        // Most tool descriptions are plain text: nothing to parse.
        if !text.contains("{{") {
            return Ok(text.to_string());
        }
        let compiled = self.compiled(label, text);
        let failed = |e: handlebars::RenderError| RenderError {
            name: label.to_string(),
            message: render_message(&e),
        };
        match &compiled.outcome {
            Ok(template) => {
                let registry = self.read();
                let ctx = handlebars::Context::wraps(ctx).map_err(failed)?;
                let mut rc = RenderContext::new(template.name.as_ref());
                let mut out = StringOutput::new();
                template
                    .render(&registry, &ctx, &mut rc, &mut out)
                    .map_err(failed)?;
                out.into_string().map_err(|e| RenderError {
                    name: label.to_string(),
                    message: e.to_string(),
                })
            }
            Err(Some(message)) => Err(RenderError {
                name: label.to_string(),
                message: message.clone(),
            }),
            // Rendered the slow way for the parser's own message.
            Err(None) => self.read().render_template(text, ctx).map_err(failed),
        }
    }

    /// `text` compiled under `label`: from the cache when the same text was
    /// compiled before, else now (and kept).
    fn compiled(&self, label: &str, text: &str) -> Arc<CompiledText> {
        if let Ok(map) = self.texts.lock()
            && let Some(c) = map.get(label)
            && c.text == text
        {
            return Arc::clone(c);
        }
        let outcome = match skeleton::compile(text, None) {
            Err(_) => Err(None),
            Ok(t) => match self.check_compiled(&t, None) {
                Ok(()) => Ok(t),
                Err(message) => Err(Some(message)),
            },
        };
        let c = Arc::new(CompiledText {
            text: text.to_string(),
            outcome,
        });
        if let Ok(mut map) = self.texts.lock() {
            map.insert(label.to_string(), Arc::clone(&c));
        }
        c
    }

    /// [`Templates::check_partials`] for a text rendered under `label`,
    /// answered from the compiled text.
    pub fn check_partials_of(&self, label: &str, text: &str) -> Result<(), String> {
        if !text.contains("{{") {
            return Ok(());
        }
        match &self.compiled(label, text).outcome {
            Err(Some(message)) => Err(message.clone()),
            _ => Ok(()),
        }
    }

    /// Whether rendering `text` is bounded. Handlebars has no limit on
    /// partial nesting: an inline partial that includes itself recurses
    /// until the stack overflows, which aborts the process. So the partial
    /// calls of `text` (its inline partials, and the registered templates
    /// it names) are followed before rendering: a cycle, nesting deeper
    /// than [`MAX_PARTIAL_DEPTH`], or more than [`MAX_PARTIAL_EXPANSIONS`]
    /// expansions in all is refused with the chain that causes it.
    /// Unparseable text is left to the renderer to report.
    pub fn check_partials(&self, text: &str) -> Result<(), String> {
        let Ok(root) = skeleton::compile(text, None) else {
            return Ok(());
        };
        self.check_compiled(&root, None)
    }

    fn check_compiled(&self, root: &Template, root_name: Option<&str>) -> Result<(), String> {
        // The templates it names are compiled first (all but a root being
        // registered, whose new text is the one the walk follows).
        let mut partials = Vec::new();
        partial_names(root, &mut partials);
        for p in partials.iter().filter(|p| Some(p.as_str()) != root_name) {
            self.ensure(p)?;
        }
        let registry = self.read();
        let mut inline: BTreeMap<String, &Template> = BTreeMap::new();
        collect_inline(root, &mut inline);
        let mut walk = PartialWalk {
            registry: &registry,
            root_name,
            root,
            inline,
            stack: Vec::new(),
            expansions: 0,
        };
        walk.visit(root).map(|_| ())
    }

    pub fn has(&self, name: &str) -> bool {
        self.origins.contains_key(name)
    }

    pub fn origins(&self) -> &BTreeMap<String, TemplateOrigin> {
        &self.origins
    }
}

/// The typed context of one template: the values it may use, and its name.
/// Every text the engine gives the model is one of these, rendered through
/// [`Templates::show`]; declare them with [`contexts!`](crate::contexts),
/// which makes every field carry a sample value.
pub trait Context: Serialize {
    /// The template's name (its file name without `.hbs`).
    const TEMPLATE: &'static str;
    /// Raw output passed on whole (not trimmed at the end).
    const VERBATIM: bool = false;
    /// A context with sample values, for the test that renders every
    /// embedded template.
    fn sample() -> Self
    where
        Self: Sized;
}

/// Declares template contexts, one struct per template, each field with a
/// sample value, and a `samples()` function listing them all:
///
/// ```ignore
/// contexts! {
///     /// A file that is not there.
///     "error_file_not_found" => pub struct FileNotFound {
///         pub path: String = "/repo/a.txt".into(),
///     }
/// }
/// ```
///
/// `"name" verbatim =>` marks raw output, rendered without trimming.
#[macro_export]
macro_rules! contexts {
    ($(
        $(#[$m:meta])*
        $tmpl:literal $($verbatim:ident)? => pub struct $name:ident {
            $( $(#[$fm:meta])* pub $f:ident : $t:ty = $sample:expr ),* $(,)?
        }
    )*) => {
        $(
            $(#[$m])*
            #[derive(Debug, Clone, serde::Serialize)]
            pub struct $name {
                $( $(#[$fm])* pub $f: $t, )*
            }

            impl $crate::templates::Context for $name {
                const TEMPLATE: &'static str = $tmpl;
                const VERBATIM: bool = $crate::contexts!(@verbatim $($verbatim)?);
                fn sample() -> Self {
                    $name { $( $f: $sample, )* }
                }
            }
        )*

        /// Every context declared here, as (template, verbatim, sample).
        #[cfg(test)]
        pub(crate) fn samples() -> Vec<(&'static str, bool, serde_json::Value)> {
            vec![$(
                (
                    $tmpl,
                    <$name as $crate::templates::Context>::VERBATIM,
                    serde_json::to_value(<$name as $crate::templates::Context>::sample())
                        .unwrap_or_default(),
                ),
            )*]
        }
    };
    (@verbatim verbatim) => { true };
    (@verbatim) => { false };
}

/// A context's sample as (template, verbatim, values), for the test that
/// renders every embedded template.
#[cfg(test)]
pub(crate) fn sample_of<C: Context>() -> (&'static str, bool, serde_json::Value) {
    (
        C::TEMPLATE,
        C::VERBATIM,
        serde_json::to_value(C::sample()).unwrap_or_default(),
    )
}

/// Partials nested deeper than this are refused.
pub const MAX_PARTIAL_DEPTH: usize = 32;
/// A template whose partials would expand more often than this in all is
/// refused (nested partials can multiply: ten levels that each include the
/// next twice expand a thousand times).
pub const MAX_PARTIAL_EXPANSIONS: u64 = 10_000;

/// Every `{{#*inline "name"}}` definition in `t`, at any depth.
fn collect_inline<'t>(t: &'t Template, out: &mut BTreeMap<String, &'t Template>) {
    for e in &t.elements {
        match e {
            TemplateElement::DecoratorBlock(d) | TemplateElement::DecoratorExpression(d) => {
                if param_name(&d.name).as_deref() == Some("inline")
                    && let Some(name) = d.params.first().and_then(param_name)
                    && let Some(body) = &d.template
                {
                    out.insert(name, body);
                }
                if let Some(body) = &d.template {
                    collect_inline(body, out);
                }
            }
            TemplateElement::HelperBlock(h) => {
                for body in [&h.template, &h.inverse].into_iter().flatten() {
                    collect_inline(body, out);
                }
            }
            TemplateElement::PartialBlock(d) => {
                if let Some(body) = &d.template {
                    collect_inline(body, out);
                }
            }
            _ => {}
        }
    }
}

/// A partial's or decorator's name, when it is written out (not computed).
fn param_name(p: &Parameter) -> Option<String> {
    match p {
        Parameter::Name(n) => Some(n.clone()),
        Parameter::Literal(serde_json::Value::String(s)) => Some(s.clone()),
        Parameter::Path(
            handlebars::Path::Relative((_, raw)) | handlebars::Path::Local((_, _, raw)),
        ) => Some(raw.clone()),
        _ => None,
    }
}

/// Every partial name `t` calls (`{{> name}}`, `{{#> name}}`), at any
/// depth, each once.
fn partial_names(t: &Template, out: &mut Vec<String>) {
    for e in &t.elements {
        match e {
            TemplateElement::PartialExpression(d) | TemplateElement::PartialBlock(d) => {
                if let Some(name) = param_name(&d.name)
                    && !out.contains(&name)
                {
                    out.push(name);
                }
                if let Some(body) = &d.template {
                    partial_names(body, out);
                }
            }
            TemplateElement::HelperBlock(h) => {
                for body in [&h.template, &h.inverse].into_iter().flatten() {
                    partial_names(body, out);
                }
            }
            TemplateElement::DecoratorBlock(d) | TemplateElement::DecoratorExpression(d) => {
                if let Some(body) = &d.template {
                    partial_names(body, out);
                }
            }
            _ => {}
        }
    }
}

/// Follows partial calls from a template, counting expansions.
struct PartialWalk<'a> {
    /// The registered templates (every one the root names is compiled).
    registry: &'a Handlebars<'static>,
    /// The name the root is (being) registered under, so a registered
    /// template that calls it back reaches the new text.
    root_name: Option<&'a str>,
    root: &'a Template,
    inline: BTreeMap<String, &'a Template>,
    /// The partials being expanded, outermost first.
    stack: Vec<String>,
    expansions: u64,
}

impl<'a> PartialWalk<'a> {
    fn resolve(&self, name: &str) -> Option<&'a Template> {
        if let Some(t) = self.inline.get(name) {
            return Some(t);
        }
        if self.root_name == Some(name) {
            return Some(self.root);
        }
        self.registry.get_template(name)
    }

    fn visit(&mut self, t: &'a Template) -> Result<(), String> {
        for e in &t.elements {
            match e {
                TemplateElement::PartialExpression(d) | TemplateElement::PartialBlock(d) => {
                    if let Some(body) = &d.template {
                        self.visit(body)?;
                    }
                    let Some(name) = param_name(&d.name) else {
                        continue;
                    };
                    let Some(target) = self.resolve(&name) else {
                        continue;
                    };
                    if self.stack.contains(&name) {
                        let mut chain = self.stack.clone();
                        chain.push(name.clone());
                        return Err(format!(
                            "partial `{name}` includes itself ({}); templates cannot recurse",
                            chain.join(" → ")
                        ));
                    }
                    if self.stack.len() >= MAX_PARTIAL_DEPTH {
                        return Err(format!(
                            "partials nest deeper than {MAX_PARTIAL_DEPTH} levels ({} → …)",
                            self.stack[..3.min(self.stack.len())].join(" → ")
                        ));
                    }
                    self.expansions += 1;
                    if self.expansions > MAX_PARTIAL_EXPANSIONS {
                        return Err(format!(
                            "partials expand more than {MAX_PARTIAL_EXPANSIONS} times"
                        ));
                    }
                    self.stack.push(name);
                    let result = self.visit(target);
                    self.stack.pop();
                    result?;
                }
                TemplateElement::HelperBlock(h) => {
                    for body in [&h.template, &h.inverse].into_iter().flatten() {
                        self.visit(body)?;
                    }
                }
                // An inline definition is visited where it is called.
                TemplateElement::DecoratorBlock(d) | TemplateElement::DecoratorExpression(d)
                    if param_name(&d.name).as_deref() != Some("inline") =>
                {
                    if let Some(body) = &d.template {
                        self.visit(body)?;
                    }
                }
                _ => {}
            }
        }
        Ok(())
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

    /// An override folder's file is read with a bound: one linked to a
    /// device that never ends is reported, and the embedded copy stays.
    #[test]
    fn a_template_linked_to_an_endless_file_is_reported_not_read() {
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink("/dev/zero", dir.path().join("fork_child.hbs")).unwrap();
        let (t, diags) = Templates::load(Some(dir.path()));
        assert!(
            diags
                .iter()
                .any(|d| d.message.contains("not a regular file")),
            "{diags:?}"
        );
        assert!(t.has("fork_child"));
    }

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

    /// Every embedded template has exactly one typed context, and renders
    /// with that context's sample in strict mode (so a template naming a
    /// value its context lacks fails here). Adding a template without a
    /// context, or a context without its template, fails this test.
    #[test]
    fn every_embedded_template_renders_with_its_typed_context() {
        let (t, diags) = Templates::load(None);
        assert!(diags.is_empty(), "{diags:?}");
        let mut samples = crate::tools::template_samples();
        samples.extend(crate::runtime::template_samples());
        samples.extend(crate::mcp::template_samples());
        samples.extend(crate::permissions::texts::samples());
        samples.extend(crate::agent_tool::texts::samples());
        let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
        for (name, verbatim, ctx) in &samples {
            *seen.entry(name).or_default() += 1;
            assert!(t.has(name), "context for `{name}`, which is not a template");
            let text = t
                .render_value(name, ctx)
                .unwrap_or_else(|e| panic!("{e}\nsample: {ctx:#}"));
            assert!(!text.trim().is_empty(), "`{name}` renders to nothing");
            let file = EMBEDDED
                .get_file(format!("{name}.hbs"))
                .and_then(|f| f.contents_utf8())
                .unwrap_or_default();
            // Verbatim output is kept as rendered: the file's own final
            // line break would reach the model.
            assert!(
                !(*verbatim && file.ends_with('\n')),
                "verbatim template `{name}.hbs` must not end with a line break"
            );
        }
        let duplicates: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).collect();
        assert!(
            duplicates.is_empty(),
            "one context per template: {duplicates:?}"
        );
        let missing: Vec<String> = EMBEDDED
            .files()
            .filter_map(|f| template_name(f.path()))
            .filter(|n| !seen.contains_key(n.as_str()))
            .collect();
        assert!(
            missing.is_empty(),
            "templates without a typed context (declare one with `contexts!` \
             and list it in the module's samples): {missing:?}"
        );
    }

    /// What a start no longer does for the embedded templates holds:
    /// each compiles, and its partials are bounded.
    #[test]
    fn every_embedded_template_compiles_and_its_partials_are_bounded() {
        let (t, _) = Templates::load(None);
        for file in EMBEDDED.files() {
            let Some(name) = template_name(file.path()) else {
                continue;
            };
            let text = file.contents_utf8().unwrap();
            let compiled = Template::compile_with_name(text, name.clone())
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            t.check_compiled(&compiled, Some(&name))
                .unwrap_or_else(|e| panic!("{name}: {e}"));
        }
    }

    #[test]
    fn a_template_is_compiled_with_its_partials_at_its_first_use() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("outer.hbs"), "[{{> inner}}]").unwrap();
        let (t, diags) = Templates::load(Some(dir.path()));
        assert!(diags.is_empty(), "{diags:?}");
        // `outer`, from disk, was compiled at load (with the partial it names).
        assert!(t.read().has_template("outer"));
        assert!(!t.read().has_template("fork_child"));
        std::fs::write(dir.path().join("inner.hbs"), "in {{v}}").unwrap();
        let (t, _) = Templates::load(Some(dir.path()));
        assert_eq!(
            t.render_text("x", "{{> outer}}", &json!({"v": 1})).unwrap(),
            "[in 1]"
        );
        let clone = t.clone();
        assert!(
            clone.read().has_template("inner"),
            "clones share what is compiled"
        );
    }

    #[test]
    fn strict_mode_rejects_missing_variables() {
        let (t, _) = Templates::load(None);
        assert!(t.render_text("x", "{{missing}}", &json!({})).is_err());
    }

    #[test]
    fn self_including_partials_are_refused_before_rendering() {
        let (t, _) = Templates::load(None);
        let direct = r#"{{#*inline "p"}}again {{> p}}{{/inline}}{{> p}}"#;
        let err = t.render_text("agent x", direct, &json!({})).unwrap_err();
        assert!(
            err.message.contains("partial `p` includes itself (p → p)"),
            "{err}"
        );
        let mutual = r#"{{#*inline "a"}}{{#if x}}{{> b}}{{/if}}{{/inline}}{{#*inline "b"}}{{> a}}{{/inline}}{{> a}}"#;
        let err = t.render_text("agent x", mutual, &json!({})).unwrap_err();
        assert!(err.message.contains("a → b → a"), "{err}");
        // Ten levels that each include the next twice: 2^10 expansions... and more.
        let mut blowup = String::from(r#"{{#*inline "l0"}}x{{/inline}}"#);
        for i in 1..16 {
            blowup.push_str(&format!(
                r#"{{{{#*inline "l{i}"}}}}{{{{> l{p}}}}}{{{{> l{p}}}}}{{{{/inline}}}}"#,
                p = i - 1
            ));
        }
        blowup.push_str("{{> l15}}");
        let err = t.render_text("agent x", &blowup, &json!({})).unwrap_err();
        assert!(err.message.contains("expand more than"), "{err}");
        // Partials that do not recurse still render.
        let fine = r#"{{#*inline "p"}}[{{v}}]{{/inline}}{{> p}}{{> p}}"#;
        assert_eq!(
            t.render_text("x", fine, &json!({"v": 1})).unwrap(),
            "[1][1]"
        );
    }

    #[test]
    fn a_registered_template_that_includes_itself_is_a_diagnostic() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("loop.hbs"), "x {{> loop}}").unwrap();
        std::fs::write(
            dir.path().join("inl.hbs"),
            r#"{{#*inline "q"}}{{> q}}{{/inline}}{{> q}}"#,
        )
        .unwrap();
        let (t, diags) = Templates::load(Some(dir.path()));
        assert!(!t.has("inl"));
        assert!(
            diags
                .iter()
                .any(|d| d.message.contains("partial `q` includes itself")),
            "{diags:?}"
        );
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
            t.render(&crate::runtime::texts::ForkChild {
                directive: "d".into()
            })
            .unwrap(),
            "OVERRIDE d"
        );
        assert_eq!(diags.len(), 1);
        assert!(diags[0].path.as_ref().unwrap().ends_with("broken.hbs"));
        assert!(diags[0].line.is_some(), "{:?}", diags[0]);
        assert!(!t.has("broken"));
    }
}
