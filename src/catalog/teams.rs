//! Team files (docs/teams.md): `.claude/teams/NAME.yaml`, `.yml` or `.toml`,
//! a team written down — the lead's instructions, the members with their
//! agent types and first prompts, the initial tasks — read raw with
//! positions and resolved with path:line:col diagnostics.

use std::path::{Path, PathBuf};

use crate::diagnostic::Diagnostic;
use crate::raw::{self, Node};

/// One member of a team file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TeamMemberDef {
    pub name: String,
    /// The agent type it runs as (general-purpose when absent).
    pub agent: Option<String>,
    /// Its first instructions.
    pub prompt: String,
}

/// One initial task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TeamTaskDef {
    pub subject: String,
    pub description: String,
}

/// A team file, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TeamDef {
    pub path: PathBuf,
    /// Added to the lead's system prompt.
    pub lead_prompt: Option<String>,
    pub members: Vec<TeamMemberDef>,
    pub tasks: Vec<TeamTaskDef>,
}

/// The file for team `name` under `cwd/.claude/teams`, if there is one.
pub fn team_file(cwd: &Path, name: &str) -> Option<PathBuf> {
    let dir = cwd.join(TEAMS_DIR);
    ["yaml", "yml", "toml"]
        .iter()
        .map(|ext| dir.join(format!("{name}.{ext}")))
        .find(|p| p.is_file())
}

/// The folder team files are read from, under the working directory.
pub const TEAMS_DIR: &str = ".claude/teams";

/// The most team files read from [`TEAMS_DIR`] (the rest are left out,
/// with a diagnostic).
const MAX_TEAM_FILES: usize = 256;

/// One team's file as a snapshot holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TeamFile {
    /// The file as last read without error: this build's, or, when this
    /// build's read failed, the previous snapshot's (the last good one).
    pub def: Option<TeamDef>,
    /// Why this build's read failed (empty when it did not).
    pub errors: Vec<Diagnostic>,
}

/// Every team file of the project, by team name, read once per snapshot:
/// nothing reads them after the snapshot is built.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TeamFiles {
    pub teams: std::collections::BTreeMap<String, TeamFile>,
}

impl TeamFiles {
    /// The file of team `name`, if the project has one.
    pub fn get(&self, name: &str) -> Option<&TeamFile> {
        self.teams.get(name)
    }
}

/// Reads every team file under `cwd/.claude/teams` (`NAME.yaml`, else
/// `.yml`, else `.toml`). A file that does not resolve is a diagnostic with
/// its position, and keeps the definition `previous` had for it.
pub fn load_team_files(
    cwd: &Path,
    files: &crate::config::trust::ProjectFiles,
    previous: Option<&TeamFiles>,
) -> (TeamFiles, Vec<Diagnostic>) {
    let dir = cwd.join(TEAMS_DIR);
    let mut names: Vec<String> = match std::fs::read_dir(&dir) {
        Ok(entries) => entries
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                let (stem, ext) = name.rsplit_once('.')?;
                (["yaml", "yml", "toml"].contains(&ext) && crate::teams::valid_name(stem))
                    .then(|| stem.to_string())
            })
            .collect(),
        Err(_) => return (TeamFiles::default(), Vec::new()),
    };
    names.sort();
    names.dedup();
    let mut diags = Vec::new();
    if names.len() > MAX_TEAM_FILES {
        diags.push(Diagnostic::warning(
            Some(&dir),
            None,
            format!(
                "{} team files; only the first {MAX_TEAM_FILES} by name are read",
                names.len()
            ),
        ));
        names.truncate(MAX_TEAM_FILES);
    }
    let mut out = TeamFiles::default();
    for name in names {
        let Some(path) = team_file(cwd, &name) else {
            continue;
        };
        let file = match load_team(&path, files) {
            Ok(def) => TeamFile {
                def: Some(def),
                errors: Vec::new(),
            },
            Err(errors) => {
                diags.extend(errors.iter().cloned());
                TeamFile {
                    def: previous
                        .and_then(|p| p.get(&name))
                        .and_then(|f| f.def.clone()),
                    errors,
                }
            }
        };
        out.teams.insert(name, file);
    }
    (out, diags)
}

/// Reads and resolves a team file, a project file read only where `files`
/// admits it. Any error keeps the whole file out.
pub fn load_team(
    path: &Path,
    files: &crate::config::trust::ProjectFiles,
) -> Result<TeamDef, Vec<Diagnostic>> {
    if let Err(o) = files.admit(path) {
        return Err(vec![Diagnostic::error(
            Some(path),
            None,
            format!(
                "links to {}, outside the project, in a folder you have not trusted; not read (trust the folder with `cadre trust` to read it)",
                o.target.display()
            ),
        )]);
    }
    // Bounded whatever the file is (a link may name a device or a FIFO).
    let text = raw::read_text(path, super::MAX_FILE_BYTES)
        .map_err(|e| vec![Diagnostic::error(Some(path), None, e)])?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    let parsed = if path.extension().is_some_and(|e| e == "toml") {
        raw::parse_toml(text)
    } else {
        raw::parse_yaml(text)
    };
    let node = parsed.map_err(|e| vec![Diagnostic::error(Some(path), Some(e.pos), e.message)])?;
    resolve(path, &node)
}

fn resolve(path: &Path, node: &Node) -> Result<TeamDef, Vec<Diagnostic>> {
    let mut diags = Vec::new();
    let err = |n: &Node, msg: String| Diagnostic::error(Some(path), Some(n.pos), msg);
    let string = |n: &Node, key: &str, diags: &mut Vec<Diagnostic>| -> Option<String> {
        match n.as_str() {
            Some(s) => Some(s.to_string()),
            None => {
                diags.push(err(
                    n,
                    format!("`{key}`: expected a string, found {}", n.type_name()),
                ));
                None
            }
        }
    };
    if !matches!(node.kind, raw::Kind::Map(_)) {
        return Err(vec![err(node, "expected a mapping with `members`".into())]);
    }
    for (key, value) in node.entries() {
        if !["lead_prompt", "members", "tasks"].contains(&key.name.as_str()) {
            diags.push(err(
                value,
                format!(
                    "unknown key `{}`; expected lead_prompt, members or tasks",
                    key.name
                ),
            ));
        }
    }
    let lead_prompt = node
        .get("lead_prompt")
        .and_then(|n| string(n, "lead_prompt", &mut diags));
    let mut members = Vec::new();
    let list = |key: &str, diags: &mut Vec<Diagnostic>| -> Vec<Node> {
        match node.get(key) {
            None => Vec::new(),
            Some(Node {
                kind: raw::Kind::Seq(items),
                ..
            }) => items.clone(),
            Some(n) => {
                diags.push(err(
                    n,
                    format!("`{key}`: expected a list, found {}", n.type_name()),
                ));
                Vec::new()
            }
        }
    };
    for m in list("members", &mut diags) {
        let Some(name_node) = m.get("name") else {
            diags.push(err(&m, "a member needs a `name`".into()));
            continue;
        };
        let Some(name) = string(name_node, "name", &mut diags) else {
            continue;
        };
        if !crate::teams::valid_name(&name) || name == crate::teams::LEAD {
            diags.push(err(
                name_node,
                format!(
                    "`name`: {name:?} is not a valid member name (letters, digits, `-`, `_`, `.`)"
                ),
            ));
            continue;
        }
        if members.iter().any(|x: &TeamMemberDef| x.name == name) {
            diags.push(err(name_node, format!("`name`: {name:?} appears twice")));
            continue;
        }
        let agent = m.get("agent").and_then(|n| string(n, "agent", &mut diags));
        let Some(prompt) = m
            .get("prompt")
            .and_then(|n| string(n, "prompt", &mut diags))
        else {
            if m.get("prompt").is_none() {
                diags.push(err(&m, format!("member {name:?} needs a `prompt`")));
            }
            continue;
        };
        members.push(TeamMemberDef {
            name,
            agent,
            prompt,
        });
    }
    let mut tasks = Vec::new();
    for t in list("tasks", &mut diags) {
        let Some(subject) = t
            .get("subject")
            .and_then(|n| string(n, "subject", &mut diags))
        else {
            if t.get("subject").is_none() {
                diags.push(err(&t, "a task needs a `subject`".into()));
            }
            continue;
        };
        let description = t
            .get("description")
            .and_then(|n| string(n, "description", &mut diags))
            .unwrap_or_default();
        tasks.push(TeamTaskDef {
            subject,
            description,
        });
    }
    if diags.is_empty() {
        Ok(TeamDef {
            path: path.to_path_buf(),
            lead_prompt,
            members,
            tasks,
        })
    } else {
        Err(diags)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(name: &str, text: &str) -> Result<TeamDef, Vec<Diagnostic>> {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        load_team(&p, &crate::config::trust::ProjectFiles::any())
    }

    #[test]
    fn a_team_file_linked_outside_an_untrusted_project_or_to_a_device_is_not_read() {
        let proj = tempfile::tempdir().unwrap();
        let away = tempfile::tempdir().unwrap();
        std::fs::write(
            away.path().join("t.yaml"),
            "lead_prompt: SECRET
",
        )
        .unwrap();
        let link = proj.path().join("t.yaml");
        std::os::unix::fs::symlink(away.path().join("t.yaml"), &link).unwrap();
        let files = crate::config::trust::ProjectFiles::new(proj.path(), false);
        let e = load_team(&link, &files).unwrap_err();
        assert!(e[0].to_string().contains("outside the project"), "{}", e[0]);
        let trusted = crate::config::trust::ProjectFiles::new(proj.path(), true);
        assert_eq!(
            load_team(&link, &trusted).unwrap().lead_prompt.as_deref(),
            Some("SECRET")
        );
        let zero = proj.path().join("z.yaml");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        let e = load_team(&zero, &trusted).unwrap_err();
        assert!(e[0].to_string().contains("not a regular file"), "{}", e[0]);
    }

    #[test]
    fn team_files_are_read_typed_once_and_a_broken_one_keeps_its_last_good_form() {
        let proj = tempfile::tempdir().unwrap();
        let dir = proj.path().join(TEAMS_DIR);
        std::fs::create_dir_all(&dir).unwrap();
        let files = crate::config::trust::ProjectFiles::any();
        std::fs::write(
            dir.join("squad.yaml"),
            "members:\n  - name: alice\n    prompt: go\n",
        )
        .unwrap();
        std::fs::write(dir.join("notes.txt"), "not a team").unwrap();
        let (first, diags) = load_team_files(proj.path(), &files, None);
        assert!(diags.is_empty(), "{diags:?}");
        assert_eq!(first.teams.keys().collect::<Vec<_>>(), ["squad"]);
        let squad = first.get("squad").unwrap();
        assert_eq!(squad.def.as_ref().unwrap().members[0].name, "alice");

        // Broken: reported with its position; the last good form stays.
        std::fs::write(dir.join("squad.yaml"), "members:\n  - name: bob\n").unwrap();
        let (second, diags) = load_team_files(proj.path(), &files, Some(&first));
        assert!(
            diags[0].to_string().contains("squad.yaml:2:"),
            "{}",
            diags[0]
        );
        let squad = second.get("squad").unwrap();
        assert_eq!(squad.errors, diags);
        assert_eq!(squad.def, first.get("squad").unwrap().def);
        // Without an earlier snapshot there is no good form to keep.
        let (fresh, _) = load_team_files(proj.path(), &files, None);
        assert_eq!(fresh.get("squad").unwrap().def, None);
        // No folder: no teams, no diagnostics.
        let empty = tempfile::tempdir().unwrap();
        assert_eq!(
            load_team_files(empty.path(), &files, None),
            (TeamFiles::default(), Vec::new())
        );
    }

    #[test]
    fn yaml_and_toml_give_the_same_team() {
        let y = load(
            "t.yaml",
            "lead_prompt: Lead well.\nmembers:\n  - name: alice\n    agent: Explore\n    prompt: look\ntasks:\n  - subject: one\n",
        )
        .unwrap();
        let t = load(
            "t.toml",
            "lead_prompt = \"Lead well.\"\n[[members]]\nname = \"alice\"\nagent = \"Explore\"\nprompt = \"look\"\n[[tasks]]\nsubject = \"one\"\n",
        )
        .unwrap();
        assert_eq!(y.members, t.members);
        assert_eq!(y.tasks, t.tasks);
        assert_eq!(y.lead_prompt.as_deref(), Some("Lead well."));
    }

    #[test]
    fn bad_entries_are_reported_with_positions() {
        let e = load(
            "t.yaml",
            "members:\n  - name: alice\n  - name: 5\n    prompt: x\ncolour: red\n",
        )
        .unwrap_err();
        let text: Vec<String> = e.iter().map(ToString::to_string).collect();
        assert!(
            text.iter()
                .any(|t| t.contains("t.yaml:5:") && t.contains("unknown key `colour`")),
            "{text:?}"
        );
        assert!(
            text.iter()
                .any(|t| t.contains("t.yaml:2:") && t.contains("needs a `prompt`")),
            "{text:?}"
        );
        assert!(
            text.iter()
                .any(|t| t.contains("t.yaml:3:") && t.contains("expected a string")),
            "{text:?}"
        );
    }
}
