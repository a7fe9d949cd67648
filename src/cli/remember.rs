//! Permission answers that are remembered: the updates an SDK client's
//! `can_use_tool` answer carries, and chat's "always" answer, kept for the
//! session and, by their destination, in a settings file.

use std::path::PathBuf;

use crate::runtime::grants::{Behavior, Destination, PermissionUpdate};

/// What chat offers to remember with an "always" answer: Claude Code's
/// suggestion for the call, in words and as updates.
pub(super) struct Offer {
    pub words: String,
    pub updates: Vec<(Destination, PermissionUpdate)>,
}

/// The "always" answer that remembers `updates` (Claude Code's
/// suggestions for the call); `None` when there are none (e.g. a shell
/// line that does not start with a plain command name).
pub(super) fn offer(updates: Vec<(Destination, PermissionUpdate)>) -> Option<Offer> {
    let words: Vec<String> = updates.iter().map(|(d, u)| describe(*d, u)).collect();
    (!updates.is_empty()).then(|| Offer {
        words: words.join("; "),
        updates,
    })
}

fn describe(dest: Destination, update: &PermissionUpdate) -> String {
    let kept = match settings_file(dest) {
        Some(path) => format!("kept in {}", shown(&path)),
        None => "for this session".to_string(),
    };
    match update {
        PermissionUpdate::AddRules {
            behavior: Behavior::Allow,
            rules,
        } => format!("allow {} ({kept})", rules.join(", ")),
        PermissionUpdate::SetMode(mode) => format!("switch to {} mode ({kept})", mode.as_str()),
        other => format!("{other:?} ({kept})"),
    }
}

/// A settings file's path as the user knows it: relative to the working
/// directory when inside it.
fn shown(path: &std::path::Path) -> String {
    std::env::current_dir()
        .ok()
        .and_then(|cwd| path.strip_prefix(cwd).ok().map(|p| p.display().to_string()))
        .unwrap_or_else(|| path.display().to_string())
}

/// Writes each update to the settings file its destination names (a
/// failure is said on stderr: the update then holds for this session
/// only) and returns them all, to apply to the session.
pub(super) fn keep(updates: Vec<(Destination, PermissionUpdate)>) -> Vec<PermissionUpdate> {
    let mut kept = Vec::new();
    for (dest, u) in updates {
        if let Some(path) = settings_file(dest)
            && let Err(e) = crate::config::edit::edit_json_settings(&path, |o| {
                crate::runtime::grants::edit_settings(o, &u)
            })
        {
            eprintln!(
                "cadre: permission update not written to {}: {e} (it applies to this session only)",
                path.display()
            );
        }
        kept.push(u);
    }
    kept
}

/// The settings file a permission update with this destination is kept
/// in, besides the session (`None`: the session only).
fn settings_file(dest: Destination) -> Option<PathBuf> {
    let cwd = std::env::current_dir().ok()?;
    match dest {
        Destination::Session => None,
        Destination::LocalSettings => Some(cwd.join(".claude/settings.local.json")),
        Destination::ProjectSettings => Some(cwd.join(".claude/settings.json")),
        Destination::UserSettings => {
            let home = std::env::var_os("HOME").filter(|h| !h.is_empty());
            match home {
                Some(h) => Some(PathBuf::from(h).join(".claude/settings.json")),
                None => {
                    eprintln!(
                        "cadre: permission update for userSettings: HOME is not set; it applies to this session only"
                    );
                    None
                }
            }
        }
    }
}
