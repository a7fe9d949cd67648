//! The operating-system sandbox of Bash commands and command hooks
//! (docs/sandbox.md).
//!
//! cadre runs a sandboxed command through itself: `cadre __sandbox-exec
//! POLICY -- bash -c CMD`. That small program ([`enter`]) enters new user,
//! mount, PID and network namespaces, hides the paths no command may read,
//! makes the ones no command may change read-only, starts itself again as
//! the first process of the new PID namespace, mounts a fresh `/proc`
//! there, drops its privileges (a nested user namespace), confines writes
//! with Landlock and finally execs the command. The policy is plain data
//! built here from the settings and the permission rules.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use crate::config::SandboxSettings;
use crate::permissions::Rules;

pub mod enter;
pub mod proxy;

/// The hidden subcommand that runs a command inside the sandbox.
pub const EXEC_SUBCOMMAND: &str = "__sandbox-exec";

/// What one sandboxed command may do, passed to [`enter`] as JSON.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Policy {
    /// Enter new user, mount, PID (and network) namespaces; without them,
    /// only Landlock confines the command.
    pub namespaces: bool,
    /// A network namespace with only a loopback: no direct connection
    /// leaves the sandbox.
    pub isolate_network: bool,
    /// Folders (and files) the command may write under.
    pub write: Vec<PathBuf>,
    /// Paths made read-only inside the writable ones.
    pub read_only: Vec<PathBuf>,
    /// Paths no command can read: an empty, read-only stand-in is mounted
    /// over each.
    pub hidden: Vec<PathBuf>,
    /// The session's temporary folder (`TMPDIR` inside).
    pub tmp: PathBuf,
    /// The Unix socket of the call's filtering proxy ([`proxy`]); inside,
    /// a forwarder listens on the loopback and `HTTP_PROXY`/`HTTPS_PROXY`
    /// name it.
    pub proxy: Option<PathBuf>,
    /// Hosts the proxy lets commands reach: `sandbox.network.allowedDomains`
    /// and the `WebFetch(domain:…)` allow rules. Used by cadre's side only.
    #[serde(skip)]
    pub allowed_domains: Vec<String>,
    /// No new Unix socket can be made inside (`socket(AF_UNIX, …)` fails
    /// with EPERM, through seccomp), so no program reaches the SSH agent,
    /// the Docker socket or D-Bus; unless `allowAllUnixSockets`. Socket
    /// pairs, which only join processes inside, still work.
    pub block_unix_sockets: bool,
}

/// What this machine can do, found once by starting the sandbox's own
/// program with `--probe`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Support {
    /// The Landlock ABI the kernel offers; `None`: no Landlock.
    pub landlock: Option<i32>,
    /// Unprivileged user, mount, PID and network namespaces.
    pub namespaces: bool,
    /// Why something is missing, in the kernel's words.
    pub problems: Vec<String>,
}

impl Support {
    /// The mechanism in words, for `cadre doctor` and warnings.
    pub fn mechanism(&self) -> String {
        match (self.landlock, self.namespaces) {
            (Some(abi), true) => {
                format!("Landlock (ABI {abi}) + user, mount, PID and network namespaces")
            }
            (Some(abi), false) => format!(
                "Landlock (ABI {abi}) only: no namespaces, so commands see cadre's processes and the network"
            ),
            (None, _) => "none: this kernel has no Landlock".to_string(),
        }
    }

    /// Whether commands can be sandboxed at all (Landlock is the floor:
    /// without it writes are not confined).
    pub fn usable(&self) -> bool {
        self.landlock.is_some()
    }
}

/// The machine's support, probed on first use (a few milliseconds).
pub fn support() -> &'static Support {
    static SUPPORT: OnceLock<Support> = OnceLock::new();
    SUPPORT.get_or_init(probe)
}

fn probe() -> Support {
    let failed = |why: String| Support {
        problems: vec![why],
        ..Support::default()
    };
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => return failed(format!("cannot find cadre's own program: {e}")),
    };
    match std::process::Command::new(exe)
        .args([EXEC_SUBCOMMAND, "--probe"])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
    {
        Ok(out) => serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| failed(format!("the probe's answer is not readable: {e}"))),
        Err(e) => failed(format!("cannot start the probe: {e}")),
    }
}

/// The policy of the commands of a session in `cwd`.
pub fn policy(
    settings: &SandboxSettings,
    rules: &Rules,
    cwd: &Path,
    add_dirs: &[PathBuf],
    support: &Support,
) -> Policy {
    let paths = rules.sandbox_paths(cwd);
    let mut write: Vec<PathBuf> = vec![cwd.to_path_buf()];
    write.extend(add_dirs.iter().cloned());
    write.extend(
        settings
            .filesystem
            .allow_write
            .iter()
            .map(|p| setting_path(p, cwd)),
    );
    let tmp = session_tmp();
    write.push(tmp.clone());
    // What a command could change to make the next session run something
    // or trust something: the repository's hooks and configuration and the
    // settings files.
    let mut read_only: Vec<PathBuf> = [
        ".git/hooks",
        ".git/config",
        ".claude",
        ".mcp.json",
        "cadre.toml",
        "cadre.yaml",
        "config/cadre.toml",
        "config/cadre.yaml",
    ]
    .iter()
    .map(|p| cwd.join(p))
    .collect();
    read_only.extend(paths.deny_write);
    read_only.extend(
        settings
            .filesystem
            .deny_write
            .iter()
            .map(|p| setting_path(p, cwd)),
    );
    let mut hidden = paths.deny_read;
    hidden.extend(
        settings
            .filesystem
            .deny_read
            .iter()
            .map(|p| setting_path(p, cwd)),
    );
    let mut allowed_domains = settings.network.allowed_domains.clone();
    allowed_domains.extend(rules.allowed_domains());
    Policy {
        namespaces: support.namespaces,
        isolate_network: support.namespaces,
        write,
        read_only,
        hidden,
        tmp,
        proxy: None,
        allowed_domains,
        block_unix_sockets: !settings.network.allow_all_unix_sockets,
    }
}

/// A path as the sandbox settings write it: `~/` the home folder, `//`
/// or `/` absolute, anything else relative to the working directory.
fn setting_path(p: &str, cwd: &Path) -> PathBuf {
    if let Some(rest) = p.strip_prefix("~/")
        && let Some(home) = dirs::home_dir()
    {
        return home.join(rest);
    }
    if let Some(rest) = p.strip_prefix("//") {
        return PathBuf::from(format!("/{rest}"));
    }
    crate::paths::lexical(&cwd.join(p))
}

/// This cadre process's temporary folder for sandboxed commands, created
/// on first use (private to the user).
pub fn session_tmp() -> PathBuf {
    static TMP: OnceLock<PathBuf> = OnceLock::new();
    TMP.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("cadre-sandbox-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        {
            use std::os::unix::fs::PermissionsExt as _;
            let _ = std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700));
        }
        dir
    })
    .clone()
}

/// Whether `command` is one of `excluded` (Claude Code's
/// `excludedCommands`): some simple command of it starts with the words
/// of an entry (`docker`, `docker compose`; a trailing `:*` or ` *` is
/// allowed). Returns the entry.
pub fn excluded<'a>(command: &str, excluded: &'a [String]) -> Option<&'a str> {
    if excluded.is_empty() {
        return None;
    }
    let (commands, _) = crate::permissions::bash_commands(command);
    excluded.iter().map(String::as_str).find(|entry| {
        let e = entry
            .trim()
            .strip_suffix(":*")
            .or_else(|| entry.trim().strip_suffix(" *"))
            .unwrap_or(entry.trim());
        let want: Vec<&str> = e.split_whitespace().collect();
        !want.is_empty()
            && commands.iter().any(|c| {
                let words: Vec<&str> = c.split_whitespace().collect();
                words.len() >= want.len() && words[..want.len()] == want[..]
            })
    })
}

/// How a Bash command would run, given the settings and this machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Use {
    /// `sandbox.enabled` is off.
    Off,
    /// One of `excludedCommands` (the entry): unsandboxed, through the
    /// normal permission flow.
    Excluded(String),
    /// The call asked to run outside (`dangerouslyDisableSandbox`) and
    /// `allowUnsandboxedCommands` lets it: unsandboxed, through the normal
    /// permission flow (never allowed for being sandboxed).
    Unsandboxed,
    /// The sandbox is on but this machine cannot sandbox; `refused`:
    /// `failIfUnavailable` is set, so the command does not run.
    Unavailable { refused: bool },
    /// Inside the sandbox.
    Sandboxed,
}

/// How `command` would run ([`Use`]); `outside`: the call asked to run
/// unsandboxed (honoured only when `allowUnsandboxedCommands` is on).
/// Probes the machine once when the sandbox is on.
pub fn classify(settings: &SandboxSettings, command: &str, outside: bool) -> Use {
    if !settings.enabled {
        return Use::Off;
    }
    if let Some(entry) = excluded(command, &settings.excluded_commands) {
        return Use::Excluded(entry.to_string());
    }
    if outside && settings.allow_unsandboxed_commands {
        return Use::Unsandboxed;
    }
    if !support().usable() {
        return Use::Unavailable {
            refused: settings.fail_if_unavailable,
        };
    }
    Use::Sandboxed
}

/// The program and arguments that run `argv` inside the sandbox.
pub fn wrap(policy: &Policy, argv: &[&str]) -> std::io::Result<(PathBuf, Vec<String>)> {
    let exe = std::env::current_exe()?;
    let json = serde_json::to_string(policy).map_err(std::io::Error::other)?;
    let mut args = vec![EXEC_SUBCOMMAND.to_string(), json, "--".to_string()];
    args.extend(argv.iter().map(|a| a.to_string()));
    Ok((exe, args))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn excluded_commands_match_by_leading_words() {
        let list = vec!["docker".to_string(), "npm run:*".to_string()];
        assert_eq!(excluded("docker ps", &list), Some("docker"));
        assert_eq!(excluded("ls && npm run build", &list), Some("npm run:*"));
        assert_eq!(excluded("npm install", &list), None);
        assert_eq!(excluded("dockerd", &list), None);
    }
}
