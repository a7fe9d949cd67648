//! Built-in agents: the `*.md` files at the top of the repository's
//! `agents/` folder, embedded in the binary. A folder on disk
//! (`agents.builtin_dir`) may replace any of them by agent name. The
//! synthetic `fork` gets its fixed settings here. Subfolders of `agents/`
//! (templates, tool schemas) belong to other modules and are not read.

use std::path::{Path, PathBuf};

use include_dir::{Dir, include_dir};

use super::FORK_AGENT;
use super::def::{AgentDef, Source};
use super::parse::{ParseOptions, parse_agent_file_with};
use crate::config::PermissionMode;
use crate::diagnostic::Diagnostic;

static AGENTS: Dir<'static> = include_dir!("$CARGO_MANIFEST_DIR/agents");

/// The maximum number of turns of a fork child.
const FORK_MAX_TURNS: u32 = 200;

/// The built-in agents, embedded ones first, each replaced by a same-named
/// `*.md` in `dir` if given. Returns the definitions (sorted by name), the
/// diagnostics and how many files were read from `dir`.
pub fn builtin_agents(
    dir: Option<&Path>,
    opts: ParseOptions<'_>,
) -> (Vec<AgentDef>, Vec<Diagnostic>, usize) {
    let mut diags = Vec::new();
    let mut defs: Vec<AgentDef> = Vec::new();
    for file in AGENTS.files() {
        let rel = file.path();
        if rel.extension().and_then(|e| e.to_str()) != Some("md") {
            continue;
        }
        let shown = Path::new("<builtin>/agents").join(rel);
        let Some(text) = file.contents_utf8() else {
            diags.push(Diagnostic::error(
                Some(&shown),
                None,
                "embedded agent file is not UTF-8",
            ));
            continue;
        };
        let (def, d) = parse_agent_file_with(&shown, text, Source::Builtin, opts);
        diags.extend(d);
        if let Some(mut def) = def {
            def.path = None;
            upsert(&mut defs, def);
        }
    }
    let mut files = 0;
    if let Some(dir) = dir {
        for path in md_files(dir, &mut diags) {
            files += 1;
            match std::fs::read(&path).map(String::from_utf8) {
                Ok(Ok(text)) => {
                    let (def, d) = parse_agent_file_with(&path, &text, Source::Builtin, opts);
                    diags.extend(d);
                    if let Some(def) = def {
                        upsert(&mut defs, def);
                    }
                }
                Ok(Err(_)) => diags.push(Diagnostic::error(
                    Some(&path),
                    None,
                    "not valid UTF-8; skipped",
                )),
                Err(e) => diags.push(Diagnostic::error(
                    Some(&path),
                    None,
                    format!("cannot read: {e}"),
                )),
            }
        }
    }
    for def in &mut defs {
        if def.name == FORK_AGENT {
            make_fork(def);
        }
    }
    defs.sort_by(|a, b| a.name.cmp(&b.name));
    (defs, diags, files)
}

/// The fork's fixed settings: whatever its file says, a fork child uses the
/// parent's exact tools and sends permission prompts to the parent.
fn make_fork(def: &mut AgentDef) {
    def.synthetic = true;
    def.max_turns = Some(FORK_MAX_TURNS);
    def.permission_mode = Some(PermissionMode::Bubble);
    def.tools = None;
    def.disallowed_tools.clear();
}

fn upsert(defs: &mut Vec<AgentDef>, def: AgentDef) {
    match defs.iter_mut().find(|d| d.name == def.name) {
        Some(slot) => *slot = def,
        None => defs.push(def),
    }
}

/// The `*.md` files directly in `dir`, sorted. A missing folder is no error.
fn md_files(dir: &Path, diags: &mut Vec<Diagnostic>) -> Vec<PathBuf> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
        Err(e) => {
            diags.push(Diagnostic::error(
                Some(dir),
                None,
                format!("cannot read folder: {e}"),
            ));
            return Vec::new();
        }
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().and_then(|e| e.to_str()) == Some("md") && p.is_file())
        .collect();
    files.sort();
    files
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::catalog::Prompt;

    #[test]
    fn embedded_agents_load_cleanly() {
        let (defs, diags, files) = builtin_agents(None, ParseOptions::default());
        assert!(diags.is_empty(), "{diags:?}");
        assert_eq!(files, 0);
        let names: Vec<&str> = defs.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["Explore", "Plan", "fork", "general-purpose"]);
        let get = |n: &str| defs.iter().find(|d| d.name == n).unwrap();

        let gp = get("general-purpose");
        assert_eq!(gp.tools, None);
        assert_eq!(gp.model.as_deref(), Some("inherit"));
        assert!(!gp.synthetic);

        for n in ["Explore", "Plan"] {
            assert_eq!(get(n).disallowed_tools, ["Agent", "Edit", "Write"]);
            assert_eq!(get(n).tools, None);
        }
        assert_eq!(get("Explore").model.as_deref(), Some("haiku"));
        assert_eq!(get("Plan").model.as_deref(), Some("inherit"));
        assert!(
            matches!(&get("Plan").prompt, Prompt::Inline(p) if p.contains("### Critical Files for Implementation"))
        );

        let fork = get("fork");
        assert!(fork.synthetic);
        assert_eq!(fork.max_turns, Some(200));
        assert_eq!(fork.permission_mode, Some(PermissionMode::Bubble));
        assert_eq!(fork.tools, None);
        assert!(
            defs.iter()
                .all(|d| d.path.is_none() && d.source == Source::Builtin)
        );
    }

    #[test]
    fn a_folder_replaces_by_name_and_keeps_fork_synthetic() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(
            tmp.path().join("my-explore.md"),
            "---\nname: Explore\ndescription: Mine\nmodel: opus\n---\nMy prompt\n",
        )
        .unwrap();
        std::fs::write(
            tmp.path().join("fork.md"),
            "---\nname: fork\ndescription: F\ntools: Read\n---\n",
        )
        .unwrap();
        std::fs::create_dir(tmp.path().join("templates")).unwrap();
        std::fs::write(tmp.path().join("templates").join("x.md"), "not read").unwrap();
        let (defs, diags, files) = builtin_agents(Some(tmp.path()), ParseOptions::default());
        assert!(diags.is_empty(), "{diags:?}");
        assert_eq!(files, 2);
        let explore = defs.iter().find(|d| d.name == "Explore").unwrap();
        assert_eq!(explore.description, "Mine");
        assert_eq!(explore.source, Source::Builtin);
        assert_eq!(
            explore.path.as_deref(),
            Some(tmp.path().join("my-explore.md").as_path())
        );
        let fork = defs.iter().find(|d| d.name == "fork").unwrap();
        assert!(fork.synthetic);
        assert_eq!(fork.tools, None);
    }
}
