//! Path resolution for path rules: a call's path is judged both as written
//! (made absolute, `.` and `..` removed) and as the file system resolves it
//! (symlinks followed), so neither a link nor `..` can route around a rule.

use std::path::{Component, Path, PathBuf};

/// A call's target path, as written and as resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// Absolute and free of `.`/`..`, without touching the file system.
    pub written: PathBuf,
    /// What the file system makes of it: symlinks followed; for a path that
    /// does not exist yet, its nearest existing ancestor resolved and the
    /// rest appended.
    pub resolved: PathBuf,
}

impl Resolved {
    /// `joined` is the call's path joined to the working directory.
    pub fn new(joined: &Path) -> Self {
        Resolved {
            written: normalize(joined),
            resolved: resolve(joined),
        }
    }

    /// Whether both readings lie inside one of `dirs` (each resolved too).
    pub fn within(&self, dirs: &[PathBuf]) -> bool {
        let inside = |p: &Path| {
            dirs.iter()
                .any(|d| p.starts_with(normalize(d)) || p.starts_with(resolve(d)))
        };
        inside(&self.written) && inside(&self.resolved)
    }
}

/// Removes `.` and resolves `..` without touching the file system, so
/// `src/../secrets/key` is judged as `secrets/key`.
pub fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// Resolves `path` as the file system would: the longest prefix that exists
/// is canonicalised (symlinks followed, `..` applied after them, as the
/// kernel does), and the components that do not exist yet are appended,
/// cleaned of `.` and `..`.
pub fn resolve(path: &Path) -> PathBuf {
    if let Ok(p) = path.canonicalize() {
        return p;
    }
    let comps: Vec<Component> = path.components().collect();
    for split in (1..comps.len()).rev() {
        let head: PathBuf = comps[..split].iter().collect();
        if let Ok(base) = head.canonicalize() {
            let tail: PathBuf = comps[split..].iter().collect();
            return normalize(&base.join(tail));
        }
    }
    normalize(path)
}
