//! Where sessions are found: the folder settings decide (`transcripts.dir`,
//! by default the user's folder for this project in Claude Code's place,
//! `~/.claude/projects/<project key>/`) and, for migration, the project's
//! old `.cadre/sessions`. New sessions are written only to the first;
//! `--continue` looks only there (a clone can ship an old-location
//! session); a session of the old place named by its id is moved to the
//! first before it is resumed. Reading the files back is `resume`'s; what
//! a resumed session may do is re-planned by `restore`.

use std::path::{Path, PathBuf};

use super::resume::{self, ResumeError};

/// The session folder and the project's old one (when it is another).
#[derive(Debug, Clone)]
pub struct SessionDirs {
    pub dir: PathBuf,
    pub old: Option<PathBuf>,
}

/// A session found by id or in a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub id: String,
    pub folder: PathBuf,
    /// Found in the project's old `.cadre/sessions`.
    pub old: bool,
}

impl SessionDirs {
    /// `dir` is `transcripts.dir` as loaded (absolute); `cwd` the working
    /// directory whose `.cadre/sessions` sessions were kept in before.
    pub fn new(dir: &Path, cwd: &Path) -> SessionDirs {
        let old = crate::paths::lexical(&cwd.join(crate::config::OLD_SESSIONS_DIR));
        SessionDirs {
            dir: dir.to_path_buf(),
            old: (old != dir).then_some(old),
        }
    }

    /// Every session of both places, sorted by id; a session in both is
    /// listed once, from the session folder.
    pub fn all(&self) -> Vec<Found> {
        let mut out: Vec<Found> = resume::session_folders(&self.dir)
            .into_iter()
            .map(|(id, folder)| Found {
                id,
                folder,
                old: false,
            })
            .collect();
        if let Some(old) = &self.old {
            for (id, folder) in resume::session_folders(old) {
                if !out.iter().any(|f| f.id == id) && real_session(&folder) {
                    out.push(Found {
                        id,
                        folder,
                        old: true,
                    });
                }
            }
        }
        out.sort_by(|a, b| a.id.cmp(&b.id));
        out
    }

    /// Session `id`: in the session folder, else in the old place (only a
    /// real folder holding a real `main.jsonl` there, never a link).
    pub fn find(&self, id: &str) -> Result<Found, ResumeError> {
        let missing = match resume::session_folder(&self.dir, id) {
            Ok(folder) => {
                return Ok(Found {
                    id: id.to_string(),
                    folder,
                    old: false,
                });
            }
            Err(e) => e,
        };
        let Some(old) = &self.old else {
            return Err(missing);
        };
        match resume::session_folder(old, id) {
            Ok(folder) if real_session(&folder) => Ok(Found {
                id: id.to_string(),
                folder,
                old: true,
            }),
            _ => Err(missing),
        }
    }

    /// The session of the session folder with the newest activity (the
    /// old place is never looked at: `--continue` names no session, and a
    /// repository could have shipped one there).
    pub fn latest(&self) -> Result<String, ResumeError> {
        resume::latest_session(&self.dir)
    }

    /// Moves a session found in the old place into the session folder
    /// (renamed; copied and removed when the two are on different file
    /// systems), moves a session an older cadre wrote into Claude Code's
    /// layout ([`resume::migrate_layout`]), and returns its folder. A
    /// session already in place is returned as it is.
    pub fn adopt(&self, found: &Found) -> Result<PathBuf, ResumeError> {
        let folder = self.adopt_place(found)?;
        match resume::migrate_layout(&folder) {
            Ok(true) => tracing::info!(
                "session {}: moved to {} and {}/{}",
                found.id,
                resume::main_file(&folder).display(),
                folder.display(),
                resume::SUBAGENTS_DIR
            ),
            Ok(false) => {}
            Err(source) => {
                return Err(ResumeError::Move {
                    from: folder.clone(),
                    to: resume::main_file(&folder),
                    source,
                });
            }
        }
        Ok(folder)
    }

    fn adopt_place(&self, found: &Found) -> Result<PathBuf, ResumeError> {
        if !found.old {
            return Ok(found.folder.clone());
        }
        let to = self.dir.join(&found.id);
        let err = |source| ResumeError::Move {
            from: found.folder.clone(),
            to: to.clone(),
            source,
        };
        if to.exists() {
            return Err(err(std::io::Error::from(std::io::ErrorKind::AlreadyExists)));
        }
        std::fs::create_dir_all(&self.dir).map_err(err)?;
        if std::fs::rename(&found.folder, &to).is_err() {
            copy_tree(&found.folder, &to).map_err(err)?;
            std::fs::remove_dir_all(&found.folder).map_err(err)?;
        }
        Ok(to)
    }
}

/// A real folder with a real `main.jsonl` (no link on the way in): the
/// old place only ever held sessions of an older cadre.
fn real_session(folder: &Path) -> bool {
    let real = |p: &Path, dir: bool| {
        std::fs::symlink_metadata(p).is_ok_and(|m| {
            let t = m.file_type();
            if dir { t.is_dir() } else { t.is_file() }
        })
    };
    real(folder, true) && real(&folder.join("main.jsonl"), false)
}

/// Copies the files and folders of `from` into a new folder `to`; links
/// are left behind.
fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir(to)?;
    for e in std::fs::read_dir(from)? {
        let e = e?;
        let t = e.file_type()?;
        let target = to.join(e.file_name());
        if t.is_dir() {
            copy_tree(&e.path(), &target)?;
        } else if t.is_file() {
            std::fs::copy(e.path(), &target)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(dir: &Path, id: &str) {
        std::fs::create_dir_all(dir.join(id).join("agents")).unwrap();
        std::fs::write(dir.join(id).join("main.jsonl"), "{}\n").unwrap();
        std::fs::write(dir.join(id).join("agents/agent-a.jsonl"), "{}\n").unwrap();
    }

    #[test]
    fn old_sessions_are_listed_found_and_moved_but_never_continued() {
        let home = tempfile::tempdir().unwrap();
        let project = tempfile::tempdir().unwrap();
        let dirs = SessionDirs::new(&home.path().join("s"), project.path());
        let old = project.path().join(".cadre/sessions");
        let (a, b) = ("20200101T000000-0000000a", "20200101T000000-0000000b");
        session(&old, a);
        session(&dirs.dir, b);
        let all: Vec<(String, bool)> = dirs.all().into_iter().map(|f| (f.id, f.old)).collect();
        assert_eq!(all, vec![(a.to_string(), true), (b.to_string(), false)]);
        assert_eq!(dirs.latest().unwrap(), b);
        let found = dirs.find(a).unwrap();
        assert!(found.old);
        let moved = dirs.adopt(&found).unwrap();
        assert_eq!(moved, dirs.dir.join(a));
        // Moved into Claude Code's layout on the way.
        assert!(moved.join("subagents/agent-a.jsonl").is_file());
        assert!(dirs.dir.join(format!("{a}.jsonl")).is_file());
        assert!(!moved.join("main.jsonl").exists());
        assert!(!old.join(a).exists());
        assert!(!dirs.find(a).unwrap().old);
        assert_eq!(
            resume::main_file(&moved),
            dirs.dir.join(format!("{a}.jsonl"))
        );
    }

    #[test]
    fn sessions_of_claude_codes_layout_are_listed_and_found_by_uuid() {
        let home = tempfile::tempdir().unwrap();
        let project = tempfile::tempdir().unwrap();
        let dirs = SessionDirs::new(&home.path().join("s"), project.path());
        let id = "0b7d5c9e-1111-4222-8333-444455556666";
        std::fs::create_dir_all(dirs.dir.join(id).join("subagents")).unwrap();
        std::fs::write(dirs.dir.join(format!("{id}.jsonl")), "{}\n").unwrap();
        // Not sessions: another file, a folder without a transcript.
        std::fs::write(dirs.dir.join("notes.jsonl"), "{}\n").unwrap();
        std::fs::create_dir_all(dirs.dir.join("0b7d5c9e-1111-4222-8333-000000000000")).unwrap();
        let all: Vec<String> = dirs.all().into_iter().map(|f| f.id).collect();
        assert_eq!(all, vec![id.to_string()]);
        assert_eq!(dirs.find(id).unwrap().folder, dirs.dir.join(id));
        assert_eq!(dirs.latest().unwrap(), id);
    }

    #[test]
    fn a_linked_old_session_is_not_found() {
        let home = tempfile::tempdir().unwrap();
        let project = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let id = "20200101T000000-0000000a";
        session(elsewhere.path(), id);
        let old = project.path().join(".cadre/sessions");
        std::fs::create_dir_all(&old).unwrap();
        std::os::unix::fs::symlink(elsewhere.path().join(id), old.join(id)).unwrap();
        let dirs = SessionDirs::new(&home.path().join("s"), project.path());
        assert!(dirs.find(id).is_err());
        assert!(dirs.all().is_empty());
    }

    #[test]
    fn the_old_place_is_not_read_twice_when_configured() {
        let project = tempfile::tempdir().unwrap();
        let dir = project.path().join(".cadre/sessions");
        assert_eq!(SessionDirs::new(&dir, project.path()).old, None);
    }
}
