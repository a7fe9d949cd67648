//! Path resolution for path rules: a call's path is judged both as written
//! (made absolute, `.` and `..` removed) and as the file system resolves it
//! (symlinks followed), so neither a link nor `..` can route around a rule.

use std::path::{Path, PathBuf};

use crate::paths::{lexical as normalize, resolve};

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
