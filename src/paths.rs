//! The one path normaliser. Settings (folders named in config files), trust
//! (is this file inside the project?) and permissions (does this rule cover
//! that path?) all judge paths through these two functions, so a path can
//! never be read one way where it is checked and another way where it is
//! used.
//!
//! - [`lexical`]: `.` removed and `..` applied without touching the file
//!   system. At the root `..` stays at the root (as the kernel does); in a
//!   relative path a `..` with nothing left to remove is kept.
//! - [`resolve`]: what the file system makes of a path: symbolic links
//!   followed and `..` applied after them, as the kernel does; for a path
//!   that does not exist yet, its nearest existing ancestor resolved and the
//!   rest appended, lexically cleaned.

use std::path::{Component, Path, PathBuf};

/// `path` with `.` removed and `..` applied, without touching the file
/// system: `src/../secrets/key` is `secrets/key`, `/../etc` is `/etc`,
/// `../x` stays `../x`.
pub fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => match out.components().next_back() {
                Some(Component::Normal(_)) => {
                    out.pop();
                }
                // `/..` is `/` (and a Windows prefix keeps its root).
                Some(Component::RootDir | Component::Prefix(_)) => {}
                // Nothing, or only `..` so far: a relative path climbs.
                Some(Component::ParentDir | Component::CurDir) | None => out.push(".."),
            },
            other => out.push(other),
        }
    }
    out
}

/// `path` as the file system resolves it: the longest prefix that exists is
/// canonicalised (symlinks followed, `..` applied after them), and the
/// components that do not exist yet are appended, cleaned by [`lexical`].
/// A relative path is resolved against the working directory.
pub fn resolve(path: &Path) -> PathBuf {
    if let Ok(p) = path.canonicalize() {
        return p;
    }
    let comps: Vec<Component> = path.components().collect();
    for split in (1..comps.len()).rev() {
        let head: PathBuf = comps[..split].iter().collect();
        if let Ok(base) = head.canonicalize() {
            let tail: PathBuf = comps[split..].iter().collect();
            return lexical(&base.join(tail));
        }
    }
    lexical(path)
}

/// The user's Claude Code folder for the home folder `home`:
/// `CLAUDE_CONFIG_DIR` when it is set (as Claude Code and the Agent SDKs
/// read it: the SDKs point it at a temporary copy on a session-store
/// resume), else `home/.claude`. Settings, memory, rules, agents, skills,
/// commands, output styles, agent memory and plugins of the user are
/// found below it.
pub fn user_claude_dir(home: &Path) -> PathBuf {
    std::env::var_os("CLAUDE_CONFIG_DIR")
        .filter(|d| !d.is_empty())
        .map_or_else(|| home.join(".claude"), PathBuf::from)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn dot_dot_as_written() {
        for (path, want) in [
            ("src/../secrets/key", "secrets/key"),
            ("/a/./b/../c", "/a/c"),
            ("/../etc/passwd", "/etc/passwd"),
            ("/..", "/"),
            ("../x", "../x"),
            ("a/../../x", "../x"),
            ("../../x/..", "../.."),
            ("config/../agents", "agents"),
            ("a/..", ""),
            ("", ""),
        ] {
            assert_eq!(lexical(Path::new(path)), Path::new(want), "{path}");
        }
    }

    #[test]
    fn links_are_followed_before_dot_dot() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("outside/inner")).unwrap();
        std::fs::create_dir_all(root.join("project")).unwrap();
        std::os::unix::fs::symlink(root.join("outside/inner"), root.join("project/link")).unwrap();
        // The kernel follows the link, then climbs out of its target.
        let p = root.join("project/link/../secret");
        assert_eq!(resolve(&p), root.join("outside/secret"));
        // As written, the same path looks like it stays in the project.
        assert_eq!(lexical(&p), root.join("project/secret"));
        // A path that does not exist yet: its existing part resolved.
        assert_eq!(
            resolve(&root.join("project/link/new/../file")),
            root.join("outside/inner/file")
        );
    }

    fn segment() -> impl Strategy<Value = &'static str> {
        prop::sample::select(vec!["a", "b", "c", ".", "..", "link"])
    }

    proptest! {
        /// Cleaning twice changes nothing; what is left has no `.`, and `..`
        /// only at the start of a relative path, never in an absolute one.
        #[test]
        fn lexical_is_clean_and_idempotent(
            absolute in any::<bool>(),
            parts in prop::collection::vec(segment(), 0..12),
        ) {
            let mut p = PathBuf::from(if absolute { "/" } else { "" });
            for s in &parts {
                p.push(s);
            }
            let once = lexical(&p);
            prop_assert_eq!(lexical(&once), once.clone());
            let comps: Vec<Component> = once.components().collect();
            prop_assert!(!comps.contains(&Component::CurDir));
            let climbs = comps.iter().take_while(|c| **c == Component::ParentDir).count();
            prop_assert!(comps[climbs..].iter().all(|c| *c != Component::ParentDir));
            if absolute {
                prop_assert_eq!(climbs, 0);
                prop_assert!(once.starts_with("/"));
            }
        }

        /// Over a real tree with a symbolic link in it, `resolve` of an
        /// existing path is what the kernel makes of it, and `lexical`
        /// agrees with the kernel on every path that passes no link.
        #[test]
        fn resolve_agrees_with_the_kernel(parts in prop::collection::vec(segment(), 0..8)) {
            let dir = tempfile::tempdir().unwrap();
            let root = dir.path().canonicalize().unwrap();
            for d in ["a/b/c", "a/c", "b/a", "c", "elsewhere/x"] {
                std::fs::create_dir_all(root.join(d)).unwrap();
            }
            std::os::unix::fs::symlink(root.join("elsewhere/x"), root.join("a/link")).unwrap();
            let mut p = root.join("a");
            for s in &parts {
                p.push(s);
            }
            if let Ok(kernel) = p.canonicalize() {
                prop_assert_eq!(resolve(&p), kernel.clone());
                if !parts.contains(&"link") {
                    prop_assert_eq!(lexical(&p), kernel);
                }
            }
        }
    }
}
