//! `cadre __sandbox-exec`: the program that puts a command inside the
//! sandbox, in two stages (docs/sandbox.md, "What enforces what").
//!
//! Stage one (`__sandbox-exec POLICY -- PROGRAM ARGS`) runs in cadre's
//! namespaces: it enters new user, mount, PID and network namespaces
//! (mapping its own user to root there, which gives it the right to mount
//! inside them and nowhere else), mounts stand-ins over the hidden paths,
//! makes the read-only ones read-only, and starts stage two, which is the
//! first process of the new PID namespace. It waits and exits as stage
//! two did.
//!
//! Stage two (`__sandbox-exec --inner POLICY -- …`) mounts a fresh `/proc`
//! (only the sandbox's processes are in it), brings the loopback up,
//! enters a nested user namespace that maps
//! the real user back (so the command holds no capability over the
//! mounts), restricts itself with Landlock (reads anywhere, writes only
//! under the policy's folders, no mounts, no signals to processes outside)
//! and execs the command. Without namespaces, stage two runs alone:
//! Landlock only.
//!
//! Everything here runs before any async runtime starts and exits the
//! process; a failure prints `cadre sandbox: …` and exits 125.

use std::ffi::OsString;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use landlock::{
    ABI, Access as _, AccessFs, CompatLevel, Compatible as _, LandlockStatus, Ruleset,
    RulesetAttr as _, RulesetCreatedAttr as _, RulesetStatus, Scope, path_beneath_rules,
};
use nix::mount::{MsFlags, mount};
use nix::sched::{CloneFlags, unshare};

use super::{EXEC_SUBCOMMAND, Policy, Support};

/// Parts of /proc that act on the whole machine: read-only inside.
const PROC_READ_ONLY: &[&str] = &[
    "/proc/sys",
    "/proc/sysrq-trigger",
    "/proc/bus",
    "/proc/fs",
    "/proc/irq",
];

/// The exit code of a sandbox that could not be set up.
const SETUP_FAILED: u8 = 125;

/// Runs the sandbox's program when cadre was started as it; `None`
/// otherwise.
pub fn main_if_asked() -> Option<ExitCode> {
    let mut args = std::env::args_os().skip(1);
    if args.next()? != EXEC_SUBCOMMAND {
        return None;
    }
    let rest: Vec<OsString> = args.collect();
    Some(match run(&rest) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("cadre sandbox: {e}");
            ExitCode::from(SETUP_FAILED)
        }
    })
}

fn run(args: &[OsString]) -> Result<ExitCode, String> {
    if args.first().is_some_and(|a| a == "--probe") {
        let support = probe();
        println!("{}", serde_json::to_string(&support).unwrap_or_default());
        return Ok(ExitCode::SUCCESS);
    }
    if let [flag, socket] = args
        && flag == "--forward"
    {
        // The forwarder writes nothing but its sockets.
        landlock(&Policy::default())?;
        super::proxy::forward(Path::new(socket)).map_err(|e| format!("forwarder: {e}"))?;
        return Ok(ExitCode::SUCCESS);
    }
    let (inner, args) = match args.split_first() {
        Some((first, rest)) if first == "--inner" => (true, rest),
        _ => (false, args),
    };
    let [policy, dashes, program @ ..] = args else {
        return Err(format!(
            "usage: cadre {EXEC_SUBCOMMAND} POLICY -- PROGRAM [ARGS]"
        ));
    };
    if dashes != "--" || program.is_empty() {
        return Err(format!(
            "usage: cadre {EXEC_SUBCOMMAND} POLICY -- PROGRAM [ARGS]"
        ));
    }
    let policy_text = policy.to_str().ok_or("the policy is not UTF-8")?;
    let policy: Policy = serde_json::from_str(policy_text)
        .map_err(|e| format!("the policy is not readable: {e}"))?;
    if policy.namespaces && !inner {
        return outer(&policy, policy_text, program);
    }
    Err(inner_stage(&policy, program))
}

/// What the probe finds: Landlock's ABI and whether the namespaces can be
/// entered (this probing process enters them and then exits).
fn probe() -> Support {
    let mut support = Support::default();
    match Ruleset::default()
        .handle_access(AccessFs::from_all(ABI::V1))
        .and_then(|r| r.create())
        .and_then(|r| r.restrict_self())
    {
        Ok(status) if status.ruleset != RulesetStatus::NotEnforced => {
            if let LandlockStatus::Available { effective_abi, .. } = status.landlock {
                support.landlock = Some(effective_abi as i32);
            }
        }
        Ok(_) => support
            .problems
            .push("Landlock is not enabled in this kernel".into()),
        Err(e) => support.problems.push(format!("Landlock: {e}")),
    }
    match unshare(
        CloneFlags::CLONE_NEWUSER
            | CloneFlags::CLONE_NEWNS
            | CloneFlags::CLONE_NEWPID
            | CloneFlags::CLONE_NEWNET,
    ) {
        Ok(()) => support.namespaces = true,
        Err(e) => support
            .problems
            .push(format!("cannot create user namespaces: {e}")),
    }
    support
}

/// Stage one: namespaces, mounts, then stage two as the PID namespace's
/// first process.
fn outer(policy: &Policy, policy_text: &str, program: &[OsString]) -> Result<ExitCode, String> {
    let uid = nix::unistd::getuid().as_raw();
    let gid = nix::unistd::getgid().as_raw();
    let mut flags = CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNS | CloneFlags::CLONE_NEWPID;
    if policy.isolate_network {
        flags |= CloneFlags::CLONE_NEWNET;
    }
    unshare(flags).map_err(|e| format!("cannot enter new namespaces: {e}"))?;
    map_ids(0, uid, 0, gid)?;
    // Nothing mounted here reaches cadre's namespace.
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .map_err(|e| format!("cannot make the mounts private: {e}"))?;
    for p in &policy.hidden {
        hide(p)?;
    }
    for p in &policy.read_only {
        if p.exists() {
            read_only(p, p)?;
        }
    }
    let exe = std::env::current_exe().map_err(|e| format!("cannot find cadre's program: {e}"))?;
    let mut cmd = std::process::Command::new(exe);
    cmd.arg(EXEC_SUBCOMMAND)
        .arg("--inner")
        .arg(policy_text)
        .arg("--")
        .args(program);
    let status = cmd
        .status()
        .map_err(|e| format!("cannot start the sandbox's first process: {e}"))?;
    use std::os::unix::process::ExitStatusExt as _;
    Ok(match (status.code(), status.signal()) {
        (Some(code), _) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        (None, Some(sig)) => ExitCode::from(u8::try_from(128 + sig).unwrap_or(1)),
        _ => ExitCode::from(1),
    })
}

/// Stage two: returns only on failure (the error), else execs.
fn inner_stage(policy: &Policy, program: &[OsString]) -> String {
    let port = match prepare_inner(policy) {
        Ok(port) => port,
        Err(e) => return e,
    };
    let Some((prog, args)) = program.split_first() else {
        return "no program to run".into();
    };
    let mut cmd = std::process::Command::new(prog);
    cmd.args(args).env("TMPDIR", &policy.tmp);
    if let Some(port) = port {
        let url = format!("http://127.0.0.1:{port}");
        for k in ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"] {
            cmd.env(k, &url);
        }
        cmd.env("NO_PROXY", "").env("no_proxy", "");
    }
    let e = cmd.exec();
    format!("cannot run {}: {e}", prog.to_string_lossy())
}

/// Everything before the exec; the forwarder's port when there is a proxy.
fn prepare_inner(policy: &Policy) -> Result<Option<u16>, String> {
    let mut port = None;
    if policy.namespaces {
        mount(
            Some("proc"),
            "/proc",
            Some("proc"),
            MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
            None::<&str>,
        )
        .map_err(|e| format!("cannot mount a fresh /proc: {e}"))?;
        // What of /proc acts on the whole machine stays read-only, as
        // container runtimes keep it (the command's own files there, such
        // as its pipes in /proc/self/fd, stay writable).
        for p in PROC_READ_ONLY {
            let p = Path::new(p);
            if p.exists() {
                read_only(p, p)?;
            }
        }
        if policy.isolate_network {
            loopback_up().map_err(|e| format!("cannot bring the loopback up: {e}"))?;
            if let Some(socket) = &policy.proxy {
                port = Some(
                    super::proxy::start_forwarder(socket)
                        .map_err(|e| format!("cannot start the proxy forwarder: {e}"))?,
                );
            }
        }
        // Give up root in these namespaces: a nested user namespace maps
        // the real user back, and the mounts above are locked for it.
        let uid = nix::unistd::getuid().as_raw();
        let gid = nix::unistd::getgid().as_raw();
        let (outer_uid, outer_gid) = outer_ids();
        unshare(CloneFlags::CLONE_NEWUSER)
            .map_err(|e| format!("cannot enter the nested user namespace: {e}"))?;
        map_ids(outer_uid, uid, outer_gid, gid)?;
    }
    landlock(policy)?;
    if policy.block_unix_sockets {
        block_unix_sockets()?;
    }
    Ok(port)
}

/// Makes `socket(AF_UNIX, …)` fail with EPERM for this process and what it
/// starts (seccomp; Landlock has already set no-new-privileges). The
/// proxy's forwarder was started before, as its own process.
fn block_unix_sockets() -> Result<(), String> {
    use seccompiler::{
        BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
        SeccompRule,
    };
    let at = |e: seccompiler::BackendError| format!("seccomp: {e}");
    let arch = std::env::consts::ARCH
        .try_into()
        .map_err(|e: seccompiler::BackendError| format!("seccomp: {e}"))?;
    let unix = SeccompCondition::new(
        0,
        SeccompCmpArgLen::Dword,
        SeccompCmpOp::Eq,
        libc::AF_UNIX as u64,
    )
    .map_err(at)?;
    let rules = std::collections::BTreeMap::from([(
        libc::SYS_socket,
        vec![SeccompRule::new(vec![unix]).map_err(at)?],
    )]);
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(at)?;
    let program: BpfProgram = filter.try_into().map_err(at)?;
    seccompiler::apply_filter(&program).map_err(|e| format!("seccomp: {e}"))
}

/// The user and group cadre runs as, read back from the first user
/// namespace's maps (`0 UID 1`).
fn outer_ids() -> (u32, u32) {
    let read = |file: &str| -> u32 {
        std::fs::read_to_string(file)
            .ok()
            .and_then(|t| {
                t.split_whitespace()
                    .nth(1)
                    .and_then(|n| n.parse::<u32>().ok())
            })
            .unwrap_or(0)
    };
    (read("/proc/self/uid_map"), read("/proc/self/gid_map"))
}

/// Maps `inside_uid` to `outside_uid` (and the group alike) in the user
/// namespace just entered.
fn map_ids(
    inside_uid: u32,
    outside_uid: u32,
    inside_gid: u32,
    outside_gid: u32,
) -> Result<(), String> {
    let write = |file: &str, text: String| {
        std::fs::write(file, text).map_err(|e| format!("cannot write {file}: {e}"))
    };
    write(
        "/proc/self/uid_map",
        format!("{inside_uid} {outside_uid} 1"),
    )?;
    write("/proc/self/setgroups", "deny".into())?;
    write(
        "/proc/self/gid_map",
        format!("{inside_gid} {outside_gid} 1"),
    )
}

/// Mounts an empty, read-only stand-in over `p`: a read-only empty
/// `tmpfs` over a folder, a read-only `/dev/null` over a file.
fn hide(p: &Path) -> Result<(), String> {
    let Ok(meta) = std::fs::metadata(p) else {
        return Ok(()); // nothing there to read
    };
    if meta.is_dir() {
        mount(
            Some("tmpfs"),
            p,
            Some("tmpfs"),
            MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
            Some("size=4k,nr_inodes=2,mode=000"),
        )
        .map_err(|e| format!("cannot hide {}: {e}", p.display()))
    } else {
        read_only(Path::new("/dev/null"), p)
    }
}

/// Bind-mounts `src` at `dst`, read-only, keeping the flags the kernel
/// locks on a mount from another user namespace.
fn read_only(src: &Path, dst: &Path) -> Result<(), String> {
    let at = |e: nix::Error| format!("cannot make {} read-only: {e}", dst.display());
    mount(
        Some(src),
        dst,
        None::<&str>,
        MsFlags::MS_BIND | MsFlags::MS_REC,
        None::<&str>,
    )
    .map_err(at)?;
    let kept = nix::sys::statvfs::statvfs(dst).map_err(at)?.flags();
    use nix::sys::statvfs::FsFlags;
    let mut flags = MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY;
    for (fs, ms) in [
        (FsFlags::ST_NOSUID, MsFlags::MS_NOSUID),
        (FsFlags::ST_NODEV, MsFlags::MS_NODEV),
        (FsFlags::ST_NOEXEC, MsFlags::MS_NOEXEC),
        (FsFlags::ST_NOATIME, MsFlags::MS_NOATIME),
        (FsFlags::ST_NODIRATIME, MsFlags::MS_NODIRATIME),
        (FsFlags::ST_RELATIME, MsFlags::MS_RELATIME),
    ] {
        if kept.contains(fs) {
            flags |= ms;
        }
    }
    mount(None::<&str>, dst, None::<&str>, flags, None::<&str>).map_err(at)
}

/// Landlock: read and run anything, write only under the policy's
/// folders (and the terminal and null devices), no signals to processes
/// outside the sandbox, no abstract Unix sockets outside it. Mounting is
/// denied to any Landlock-restricted process.
fn landlock(policy: &Policy) -> Result<(), String> {
    let abi = ABI::V5;
    let at = |e: landlock::RulesetError| format!("Landlock: {e}");
    let mut write: Vec<PathBuf> = policy.write.clone();
    write.retain(|p| p.exists());
    let status = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(abi))
        .map_err(at)?
        .scope(Scope::Signal | Scope::AbstractUnixSocket)
        .map_err(at)?
        .create()
        .map_err(at)?
        .add_rules(path_beneath_rules(["/"], AccessFs::from_read(abi)))
        .map_err(at)?
        .add_rules(path_beneath_rules(&write, AccessFs::from_all(abi)))
        .map_err(at)?
        .add_rules(path_beneath_rules(
            [
                "/dev/null",
                "/dev/zero",
                "/dev/full",
                "/dev/tty",
                "/dev/pts",
            ],
            AccessFs::from_file(abi),
        ))
        .map_err(at)?
        // `/dev/stdout` and `/proc/self/fd/N` reopen the command's own
        // pipes through the sandbox's fresh /proc; what else /proc holds
        // is guarded by its owners (the namespaces' user has no rights
        // outside them).
        .add_rules(path_beneath_rules(["/proc"], AccessFs::WriteFile))
        .map_err(at)?
        .restrict_self()
        .map_err(at)?;
    if status.ruleset == RulesetStatus::NotEnforced {
        return Err("Landlock is not enforced by this kernel".into());
    }
    Ok(())
}

/// Brings the loopback interface of a new network namespace up, with one
/// `RTM_NEWLINK` request over route netlink (no `ip` program needed).
fn loopback_up() -> Result<(), String> {
    use nix::sys::socket::{
        AddressFamily, MsgFlags, NetlinkAddr, SockFlag, SockProtocol, SockType, recv, sendto,
        socket,
    };
    use std::os::fd::AsRawFd as _;
    const RTM_NEWLINK: u16 = 16;
    const NLM_F_REQUEST: u16 = 1;
    const NLM_F_ACK: u16 = 4;
    const IFF_UP: u32 = 1;
    const LOOPBACK_INDEX: i32 = 1;
    let fd = socket(
        AddressFamily::Netlink,
        SockType::Raw,
        SockFlag::SOCK_CLOEXEC,
        SockProtocol::NetlinkRoute,
    )
    .map_err(|e| e.to_string())?;
    let mut msg = Vec::with_capacity(32);
    msg.extend(32u32.to_ne_bytes()); // nlmsg_len
    msg.extend(RTM_NEWLINK.to_ne_bytes());
    msg.extend((NLM_F_REQUEST | NLM_F_ACK).to_ne_bytes());
    msg.extend(1u32.to_ne_bytes()); // seq
    msg.extend(0u32.to_ne_bytes()); // pid
    msg.extend([0u8, 0u8]); // ifi_family AF_UNSPEC, pad
    msg.extend(0u16.to_ne_bytes()); // ifi_type
    msg.extend(LOOPBACK_INDEX.to_ne_bytes());
    msg.extend(IFF_UP.to_ne_bytes()); // ifi_flags
    msg.extend(IFF_UP.to_ne_bytes()); // ifi_change
    sendto(
        fd.as_raw_fd(),
        &msg,
        &NetlinkAddr::new(0, 0),
        MsgFlags::empty(),
    )
    .map_err(|e| e.to_string())?;
    let mut buf = [0u8; 512];
    let n = recv(fd.as_raw_fd(), &mut buf, MsgFlags::empty()).map_err(|e| e.to_string())?;
    // The acknowledgement is an NLMSG_ERROR message whose error is 0.
    let error = buf
        .get(16..20)
        .filter(|_| n >= 20)
        .and_then(|b| <[u8; 4]>::try_from(b).ok())
        .map(i32::from_ne_bytes);
    match error {
        Some(0) => Ok(()),
        Some(e) => Err(nix::Error::from_raw(-e).to_string()),
        None => Err("no acknowledgement".into()),
    }
}
