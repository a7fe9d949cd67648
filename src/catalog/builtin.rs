//! Built-in agents: the `*.md` files at the top of the repository's
//! `agents/` folder, embedded in the binary. A folder on disk
//! (`agents.builtin_dir`) may replace any of them by agent name. The
//! synthetic `fork` gets its fixed settings here. Subfolders of `agents/`
//! (templates, tool schemas) belong to other modules and are not read.

use std::path::{Path, PathBuf};

use super::FORK_AGENT;
use super::def::{AgentDef, Source};
use super::load::read_and_parse;
use super::parse::{ParseOptions, parse_agent_file_with};
use crate::config::PermissionMode;
use crate::diagnostic::Diagnostic;

/// The embedded files, by file name. Only the top-level `*.md` files are
/// embedded (`include_dir!` would also pull in `agents/templates` and
/// `agents/tools`, which other modules embed); a test checks that this list
/// matches the folder, so a new built-in cannot be forgotten here.
const EMBEDDED: &[(&str, &str)] = &[
    ("Explore.md", include_str!("../../agents/Explore.md")),
    ("Plan.md", include_str!("../../agents/Plan.md")),
    (
        "coordinator.md",
        include_str!("../../agents/coordinator.md"),
    ),
    ("fork.md", include_str!("../../agents/fork.md")),
    (
        "general-purpose.md",
        include_str!("../../agents/general-purpose.md"),
    ),
    ("worker.md", include_str!("../../agents/worker.md")),
];

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
    for (file, text) in EMBEDDED {
        let shown = Path::new("<builtin>/agents").join(file);
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
            let (def, d) = read_and_parse(&path, Source::Builtin, opts);
            diags.extend(d);
            if let Some(def) = def {
                upsert(&mut defs, def);
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
        assert_eq!(
            names,
            [
                "Explore",
                "Plan",
                "coordinator",
                "fork",
                "general-purpose",
                "worker"
            ]
        );
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
    fn embedded_list_matches_the_agents_folder() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("agents");
        let mut on_disk: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "md"))
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        on_disk.sort();
        let mut embedded: Vec<&str> = EMBEDDED.iter().map(|(n, _)| *n).collect();
        embedded.sort();
        assert_eq!(on_disk, embedded);
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
