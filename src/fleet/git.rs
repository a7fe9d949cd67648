//! The repository through the broker (the default, shared-nothing fleet):
//! a worktree child starts from the parent's state and ends as a branch in
//! the parent's repository, both carried as git bundles in the JetStream
//! object store (`distributed.git_bucket`).
//!
//! - The parent snapshots its checkout when it spawns the child: `HEAD`,
//!   or, with uncommitted changes (tracked or untracked, as `.gitignore`
//!   allows), a commit on top of `HEAD` holding them, made with a
//!   temporary index (the parent's index, branch and files are not
//!   touched). It publishes a bundle of that commit once per commit.
//!   When the commit is on one of the parent's remotes, the plan names that
//!   remote's branch instead, and no bundle is published.
//! - The worker fetches the commit, when its clone lacks it, from its own
//!   remote of that URL (or name), else from the bundle, and makes the
//!   child's worktree from it.
//! - While the child runs, the worker publishes the worktree's state (its
//!   work in progress) before each tool result reaches the broker; a
//!   worker taking the task over starts the worktree from it.
//! - A child that changed something ends with its changes committed on its
//!   branch; the worker publishes a bundle of the branch (its commits after
//!   the base) and removes its worktree; the parent fetches the branch and
//!   checks it out as the child's kept worktree, named in the notification
//!   as a local one's is. A child that changed nothing leaves no branch.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use tokio::io::AsyncReadExt;

use super::broker::{Broker, FleetError};
use crate::runtime::plan_record::RemoteBranch;
use crate::runtime::worktree::{self, KeptWorktree};

/// The largest bundle read back from the broker.
const MAX_BUNDLE_BYTES: u64 = 2 * 1024 * 1024 * 1024;

fn base_object(sha: &str) -> String {
    format!("base-{sha}")
}

/// The bundle of run `run` of task `agent`'s branch, as attempt `attempt`
/// sent it. Each attempt has its own: a worker that lost the task while
/// the broker was away may still complete its put once the broker is
/// back, and it must not replace the bundle the task's new holder named in
/// its notice (a replaced object's chunks go, under a parent reading
/// them).
pub fn branch_object(agent: &str, run: u32, attempt: u32) -> String {
    format!("branch-{agent}-r{run}-a{attempt}")
}

/// Runs `git ARGS` in `dir` with `env` added; stdout trimmed, or why not.
fn git_env(dir: &Path, args: &[&str], env: &[(&str, &Path)]) -> Result<String, FleetError> {
    let mut cmd = Command::new("git");
    cmd.args(args).current_dir(dir);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().map_err(FleetError::broker)?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    } else {
        Err(FleetError::Broker(format!(
            "git {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

fn git(dir: &Path, args: &[&str]) -> Result<String, FleetError> {
    git_env(dir, args, &[])
}

/// `-c user.name=… -c user.email=…` when the repository has no identity
/// of its own (a commit needs one); nothing when it has.
fn identity(dir: &Path) -> Vec<&'static str> {
    if git(dir, &["config", "user.email"]).is_ok_and(|e| !e.is_empty()) {
        Vec::new()
    } else {
        vec!["-c", "user.name=cadre", "-c", "user.email=cadre@localhost"]
    }
}

/// The tree `git add -A` would make of `root`'s checkout (a worktree's
/// too), read with a temporary index: the checkout's own index, branch
/// and files are not touched. Blocking.
fn checkout_tree(root: &Path, head: &str) -> Result<String, FleetError> {
    let dir = tempfile::tempdir().map_err(FleetError::broker)?;
    let index = dir.path().join("index");
    let env = [("GIT_INDEX_FILE", index.as_path())];
    // A copy of the checkout's index keeps what git knows of each file's
    // state, so only changed files are read again.
    let own = git(
        root,
        &["rev-parse", "--path-format=absolute", "--git-path", "index"],
    )
    .map(PathBuf::from);
    if own
        .and_then(|p| std::fs::copy(p, &index).map_err(FleetError::broker))
        .is_err()
    {
        git_env(root, &["read-tree", head], &env)?;
    }
    git_env(root, &["add", "-A", "--", "."], &env)?;
    git_env(root, &["write-tree"], &env)
}

/// A commit of `tree` on top of `head`, with the repository's identity.
fn commit_tree(root: &Path, tree: &str, head: &str, message: &str) -> Result<String, FleetError> {
    let mut args = identity(root);
    args.extend(["commit-tree", tree, "-p", head, "-m", message]);
    git(root, &args)
}

/// The commit a worktree child of `cwd` starts from: `head`, or a commit
/// on top of it holding the checkout's uncommitted changes. Blocking.
pub fn snapshot(cwd: &Path, head: &str) -> Result<String, FleetError> {
    let root = worktree::git_root(cwd).map_err(FleetError::broker)?;
    let tree = checkout_tree(&root, head)?;
    if git(&root, &["rev-parse", &format!("{head}^{{tree}}")])? == tree {
        return Ok(head.to_string());
    }
    commit_tree(
        &root,
        &tree,
        head,
        "cadre: the parent's uncommitted changes when it started this child",
    )
}

/// Writes a bundle of ref `r` with its history (less `exclude`'s, when
/// given) to a file in a new temporary folder. Blocking.
fn bundle_ref(
    root: &Path,
    r: &str,
    exclude: Option<&str>,
) -> Result<(tempfile::TempDir, PathBuf), FleetError> {
    let dir = tempfile::tempdir().map_err(FleetError::broker)?;
    let file = dir.path().join("out.bundle");
    let path = file.to_string_lossy().into_owned();
    let not = exclude.map(|commit| format!("^{commit}"));
    let mut args = vec!["bundle", "create", "--quiet", &path, r];
    args.extend(not.as_deref());
    git(root, &args)?;
    Ok((dir, file))
}

/// [`bundle_ref`] of commit `tip`, through a temporary ref of this call
/// only (two tasks may bundle the same commit at once). Blocking.
fn bundle(
    root: &Path,
    tip: &str,
    exclude: Option<&str>,
) -> Result<(tempfile::TempDir, PathBuf), FleetError> {
    let r = format!(
        "refs/cadre/bundle-{}-{:016x}",
        std::process::id(),
        rand::random::<u64>()
    );
    git(root, &["update-ref", &r, tip])?;
    let made = bundle_ref(root, &r, exclude);
    let _ = git(root, &["update-ref", "-d", &r]);
    made
}

/// Publishes a bundle of commit `sha` of `cwd`'s repository (with its
/// history), unless the store has one.
pub async fn publish_base(broker: &Broker, cwd: &Path, sha: &str) -> Result<(), FleetError> {
    // Sibling spawns of one commit publish it once.
    static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    let _one = ONE_AT_A_TIME.lock().await;
    let store = broker.git_store().await?;
    let name = base_object(sha);
    if store.info(&name).await.is_ok() {
        return Ok(());
    }
    let (cwd, at) = (cwd.to_path_buf(), sha.to_string());
    let (_dir, file) = tokio::task::spawn_blocking(move || -> Result<_, FleetError> {
        let root = worktree::git_root(&cwd).map_err(FleetError::broker)?;
        bundle(&root, &at, None)
    })
    .await
    .map_err(FleetError::broker)??;
    put(broker, &name, &file, &|| true).await
}

/// How long a bundle's put or get keeps trying after it first failed
/// while the broker is away (a restart): about as long as a parent's
/// catch-up waits for it. (One try may itself take the client's
/// acknowledgement timeout, 5 s, while the server is gone.)
const RETRY_FOR: Duration = Duration::from_secs(10);

/// Runs `op` again, every 250 ms, while it fails and `RETRY_FOR` has not
/// passed since its first failure; the last error when it never went
/// through.
async fn retried<T, F, Fut>(what: &str, mut op: F) -> Result<T, FleetError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, FleetError>>,
{
    let mut until = None;
    loop {
        match op().await {
            Ok(v) => return Ok(v),
            Err(e)
                if until
                    .is_some_and(|u: tokio::time::Instant| tokio::time::Instant::now() >= u) =>
            {
                return Err(e);
            }
            Err(e) => {
                until.get_or_insert_with(|| tokio::time::Instant::now() + RETRY_FOR);
                tracing::warn!("{what}: {e}; trying again");
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        }
    }
}

/// How long one try at reading a bundle may go without a byte from the
/// broker before it fails (and is tried again, reading the object's
/// description afresh): the chunks of an object replaced while it is read
/// are gone, and the read would otherwise wait for them for ever.
const STALL: Duration = Duration::from_secs(10);

/// Stores `file` as object `name` (replacing one of that name: the old
/// one stays whole until the new one is), while `still_mine` holds: a
/// writer whose task moved to another worker tries no more.
async fn put(
    broker: &Broker,
    name: &str,
    file: &Path,
    still_mine: &(dyn Fn() -> bool + Sync),
) -> Result<(), FleetError> {
    retried(&format!("storing {name}"), || async {
        if !still_mine() {
            return Err(FleetError::Broker("the task's lease is lost".into()));
        }
        let store = broker.git_store().await?;
        let mut f = tokio::fs::File::open(file)
            .await
            .map_err(FleetError::broker)?;
        store.put(name, &mut f).await.map_err(FleetError::broker)?;
        Ok(())
    })
    .await
}

/// Reads object `name` into a file in a new temporary folder; `None` when
/// the store has no such object.
async fn get_if_any(
    broker: &Broker,
    name: &str,
) -> Result<Option<(tempfile::TempDir, PathBuf)>, FleetError> {
    use async_nats::jetstream::object_store::GetErrorKind;
    let bytes = retried(&format!("reading {name}"), || async {
        let store = broker.git_store().await?;
        let stalled = || FleetError::Broker(format!("reading {name}: nothing came for {STALL:?}"));
        let mut object = match tokio::time::timeout(STALL, store.get(name)).await {
            Err(_) => return Err(stalled()),
            Ok(Ok(o)) => o,
            Ok(Err(e)) if e.kind() == GetErrorKind::NotFound => return Ok(None),
            Ok(Err(e)) => return Err(FleetError::broker(e)),
        };
        let mut bytes = Vec::new();
        let mut chunk = vec![0; 128 * 1024];
        loop {
            let n = tokio::time::timeout(STALL, object.read(&mut chunk))
                .await
                .map_err(|_| stalled())?
                .map_err(FleetError::broker)?;
            if n == 0 {
                break;
            }
            if bytes.len() as u64 + n as u64 > MAX_BUNDLE_BYTES {
                return Err(FleetError::Broker(format!(
                    "{name} is larger than {MAX_BUNDLE_BYTES} bytes"
                )));
            }
            bytes.extend_from_slice(&chunk[..n]);
        }
        Ok(Some(bytes))
    })
    .await?;
    let Some(bytes) = bytes else {
        return Ok(None);
    };
    let dir = tempfile::tempdir().map_err(FleetError::broker)?;
    let file = dir.path().join("in.bundle");
    tokio::fs::write(&file, bytes)
        .await
        .map_err(FleetError::broker)?;
    Ok(Some((dir, file)))
}

/// [`get_if_any`] of an object that must be there.
async fn get(broker: &Broker, name: &str) -> Result<(tempfile::TempDir, PathBuf), FleetError> {
    get_if_any(broker, name)
        .await?
        .ok_or_else(|| FleetError::Broker(format!("the git bundle store has no {name}")))
}

/// Fetches the one commit bundle `file` names into `cwd`'s repository;
/// returns it. Blocking.
fn fetch_bundle(cwd: &Path, file: &Path) -> Result<String, FleetError> {
    let bundle = file.to_string_lossy().into_owned();
    let heads = git(cwd, &["bundle", "list-heads", &bundle])?;
    let (sha, head) = heads
        .lines()
        .find_map(|l| l.split_once(' '))
        .ok_or_else(|| FleetError::Broker("the bundle names no ref".into()))?;
    git(cwd, &["fetch", "--quiet", &bundle, head])?;
    Ok(sha.to_string())
}

/// `url` without its user and password (`scheme://user:pass@host/…`); an
/// scp-like `user@host:path` is left as it is (its user is no secret).
fn without_userinfo(url: &str) -> String {
    let Some(scheme) = url.find("://") else {
        return url.to_string();
    };
    let rest = &url[scheme + 3..];
    let authority = rest.find('/').map_or(rest, |end| &rest[..end]);
    match authority.rfind('@') {
        Some(at) => format!("{}{}", &url[..scheme + 3], &rest[at + 1..]),
        None => url.to_string(),
    }
}

/// What two spellings of one remote's URL have in common: no userinfo, no
/// trailing `/` or `.git`.
fn url_key(url: &str) -> String {
    let bare = without_userinfo(url);
    let bare = bare.trim_end_matches('/');
    bare.strip_suffix(".git").unwrap_or(bare).to_string()
}

/// Parent: a branch of a remote of `cwd`'s repository that holds commit
/// `sha`, if one does. Blocking.
pub fn pushed_to(cwd: &Path, sha: &str) -> Option<RemoteBranch> {
    let root = worktree::git_root(cwd).ok()?;
    let remotes = git(&root, &["remote"]).ok()?;
    let refs = git(
        &root,
        &[
            "for-each-ref",
            "--contains",
            sha,
            "--format=%(refname)",
            "refs/remotes/",
        ],
    )
    .ok()?;
    refs.lines().find_map(|r| {
        remotes.lines().find_map(|name| {
            let branch = r.strip_prefix(&format!("refs/remotes/{name}/"))?;
            if branch == "HEAD" {
                return None;
            }
            let url = git(&root, &["remote", "get-url", name]).ok()?;
            Some(RemoteBranch {
                name: name.to_string(),
                url: without_userinfo(&url),
                branch: branch.to_string(),
            })
        })
    })
}

/// Worker: fetches `remote`'s branch from this clone's own remote of the
/// same URL (or, failing that, of the same name); whether `sha` is here
/// then. A plan cannot make a worker fetch from a URL its clone does not
/// name. Blocking.
fn fetch_from_remote(cwd: &Path, sha: &str, remote: &RemoteBranch) -> bool {
    let has = || git(cwd, &["cat-file", "-e", &format!("{sha}^{{commit}}")]).is_ok();
    // Sibling tasks of one commit fetch it once.
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if has() {
        return true;
    }
    let Ok(names) = git(cwd, &["remote"]) else {
        return false;
    };
    let want = url_key(&remote.url);
    let by_url = names
        .lines()
        .filter(|n| git(cwd, &["remote", "get-url", n]).is_ok_and(|u| url_key(&u) == want));
    let by_name = names.lines().filter(|n| *n == remote.name);
    let mut tried = Vec::new();
    for name in by_url.chain(by_name) {
        if tried.contains(&name) {
            continue;
        }
        tried.push(name);
        let branch = format!("refs/heads/{}", remote.branch);
        // A fetch that fails after it got the objects (a ref lock lost
        // to another process) is as good as one that did not fail.
        if let Err(e) = git_env(
            cwd,
            &["fetch", "--quiet", "--no-write-fetch-head", name, &branch],
            &[("GIT_TERMINAL_PROMPT", Path::new("0"))],
        ) {
            tracing::debug!("fetching {sha} from remote {name}: {e}");
        }
        if has() {
            tracing::info!("commit {sha} fetched from remote {name}");
            return true;
        }
    }
    false
}

/// Worker: makes sure `cwd`'s repository has commit `sha`, fetching it
/// from the remote the parent names (`remote`: when it had pushed it), or
/// else from the parent's bundle.
pub async fn ensure_base(
    broker: &Broker,
    cwd: &Path,
    sha: &str,
    remote: Option<&RemoteBranch>,
) -> Result<(), FleetError> {
    let has = |cwd: PathBuf, sha: String| async move {
        tokio::task::spawn_blocking(move || {
            git(&cwd, &["cat-file", "-e", &format!("{sha}^{{commit}}")]).is_ok()
        })
        .await
        .unwrap_or(false)
    };
    if has(cwd.to_path_buf(), sha.to_string()).await {
        return Ok(());
    }
    if let Some(remote) = remote {
        let (at, sha, remote) = (cwd.to_path_buf(), sha.to_string(), remote.clone());
        let fetched = tokio::task::spawn_blocking(move || fetch_from_remote(&at, &sha, &remote))
            .await
            .unwrap_or(false);
        if fetched {
            return Ok(());
        }
    }
    let Some((_dir, file)) = get_if_any(broker, &base_object(sha)).await? else {
        return Err(FleetError::Broker(match remote {
            Some(r) => format!(
                "commit {sha} is not in this clone, could not be fetched from a remote of URL {} or named {}, and has no bundle",
                r.url, r.name
            ),
            None => format!("commit {sha} is not in this clone and has no bundle"),
        }));
    };
    let cwd = cwd.to_path_buf();
    tokio::task::spawn_blocking(move || fetch_bundle(&cwd, &file).map(|_| ()))
        .await
        .map_err(FleetError::broker)?
}

/// Worker: commits what the kept worktree `kept` holds uncommitted on its
/// branch, publishes a bundle of the branch's commits after `base` as
/// `object`, and removes the worktree and its branch here if the task is
/// `still_mine` then.
pub async fn send_branch(
    broker: &Broker,
    kept: &KeptWorktree,
    base: &str,
    object: &str,
    still_mine: impl Fn() -> bool + Sync,
) -> Result<(), FleetError> {
    let (k, base) = (kept.clone(), base.to_string());
    let (dir, file, root) = tokio::task::spawn_blocking(move || -> Result<_, FleetError> {
        let kept = k;
        let wt = &kept.path;
        let root = worktree::git_root(wt).map_err(FleetError::broker)?;
        if !git(wt, &["status", "--porcelain"])?.is_empty() {
            git(wt, &["add", "-A", "--", "."])?;
            let mut args = identity(wt);
            args.extend([
                "commit",
                "--quiet",
                "--no-verify",
                "-m",
                "cadre: the child's changes",
            ]);
            git(wt, &args)?;
        }
        let r = format!("refs/heads/{}", kept.branch);
        let (dir, file) = bundle_ref(&root, &r, Some(&base))?;
        Ok((dir, file, root))
    })
    .await
    .map_err(FleetError::broker)??;
    put(broker, object, &file, &still_mine).await?;
    drop(dir);
    if !still_mine() {
        // Another worker holds the task now: the worktree is its own.
        return Err(FleetError::Broker("the task's lease is lost".into()));
    }
    let kept = kept.clone();
    tokio::task::spawn_blocking(move || worktree::remove(&root, &kept.path, &kept.branch))
        .await
        .map_err(FleetError::broker)?
        .map_err(FleetError::Broker)
}

/// Parent: fetches the branch of bundle `object` into `cwd`'s repository
/// and checks it out as the child's worktree (`GITROOT/.cadre/worktrees/
/// agent-ID8`, as locally): the kept worktree the notification names.
pub async fn receive_branch(
    broker: &Broker,
    cwd: &Path,
    agent: &str,
    branch: &str,
    object: &str,
) -> Result<KeptWorktree, FleetError> {
    let (_dir, file) = get(broker, object).await?;
    let (cwd, agent, branch) = (cwd.to_path_buf(), agent.to_string(), branch.to_string());
    tokio::task::spawn_blocking(move || -> Result<KeptWorktree, FleetError> {
        let root = worktree::git_root(&cwd).map_err(FleetError::broker)?;
        let path = root
            .join(worktree::WORKTREES_DIR)
            .join(worktree::slug(&agent));
        let bundle = file.to_string_lossy().into_owned();
        let spec = format!("+refs/heads/{branch}:refs/heads/{branch}");
        let listed = git(&root, &["worktree", "list", "--porcelain"])?;
        let checked_out = listed
            .lines()
            .filter_map(|l| l.strip_prefix("worktree "))
            .any(|w| Path::new(w) == path);
        if checked_out {
            // A worktree of this branch is there already (the worker
            // shares this repository): it holds the result.
            let _ = git(&path, &["fetch", "--quiet", &bundle, &spec]);
        } else {
            git(&root, &["fetch", "--quiet", &bundle, &spec])?;
            git(
                &root,
                &[
                    "worktree",
                    "add",
                    "--quiet",
                    &path.to_string_lossy(),
                    &branch,
                ],
            )?;
        }
        Ok(KeptWorktree { path, branch })
    })
    .await
    .map_err(FleetError::broker)?
}

/// The bundle of the latest work in progress of run `run` of task
/// `agent`'s worktree.
pub fn wip_object(agent: &str, run: u32) -> String {
    format!("wip-{agent}-r{run}")
}

/// A worktree's state: its `HEAD` and the tree of its files (uncommitted
/// changes included). Blocking.
fn worktree_state(path: &Path) -> Result<(String, String), FleetError> {
    let head = git(path, &["rev-parse", "--verify", "HEAD"])?;
    let tree = checkout_tree(path, &head)?;
    Ok((head, tree))
}

/// The work in progress of a worktree child on a shared-nothing fleet, so
/// that a worker taking the task over (its worker died) starts from the
/// files the transcript describes, not from the base commit: a commit of
/// the worktree's files on top of its `HEAD` (the child's own commits
/// kept), published as a bundle (its history after the base) in the
/// object store, replacing the previous one.
pub struct Wip {
    path: PathBuf,
    base: String,
    object: String,
    /// The state last published, or found when the task started here.
    last: (String, String),
    /// git failed on the worktree (a child removed it, say): nothing more
    /// is published.
    broken: bool,
}

impl Wip {
    /// For the worktree at `path` as it is now (nothing to publish yet).
    /// Blocking.
    pub fn new(path: &Path, base: &str, object: String) -> Result<Wip, FleetError> {
        Ok(Wip {
            last: worktree_state(path)?,
            path: path.to_path_buf(),
            base: base.to_string(),
            object,
            broken: false,
        })
    }

    /// Publishes the worktree's state if it changed since the last one,
    /// while `still_mine` holds. `Err` only when the broker did not take it
    /// (tried again by the caller); a worktree git cannot read is given up
    /// on.
    pub async fn publish(
        &mut self,
        broker: &Broker,
        still_mine: &(dyn Fn() -> bool + Sync),
    ) -> Result<(), FleetError> {
        if self.broken {
            return Ok(());
        }
        let (path, base, last) = (self.path.clone(), self.base.clone(), self.last.clone());
        let made = tokio::task::spawn_blocking(move || -> Result<_, FleetError> {
            let now = worktree_state(&path)?;
            if now == last {
                return Ok(None);
            }
            let (head, tree) = &now;
            let commit = commit_tree(&path, tree, head, "cadre: a child's work in progress")?;
            let (dir, file) = bundle(&path, &commit, Some(&base))?;
            Ok(Some((now, dir, file)))
        })
        .await
        .map_err(FleetError::broker)?;
        let made = match made {
            Ok(m) => m,
            Err(e) => {
                tracing::warn!(
                    "{}: the worktree's state cannot be read ({e}): a worker taking the task over starts from the last one published",
                    self.path.display()
                );
                self.broken = true;
                return Ok(());
            }
        };
        if let Some((now, _dir, file)) = made {
            put(broker, &self.object, &file, still_mine).await?;
            self.last = now;
        }
        Ok(())
    }
}

/// Worker taking a worktree child over: fetches the latest work in
/// progress its earlier worker published (object `object`) into `cwd`'s
/// repository; the commit, or `None` when there is none.
pub async fn fetch_wip(
    broker: &Broker,
    cwd: &Path,
    object: &str,
) -> Result<Option<String>, FleetError> {
    let Some((_dir, file)) = get_if_any(broker, object).await? else {
        return Ok(None);
    };
    let cwd = cwd.to_path_buf();
    tokio::task::spawn_blocking(move || fetch_bundle(&cwd, &file).map(Some))
        .await
        .map_err(FleetError::broker)?
}

/// Makes the worktree at `path` hold work in progress `wip`: its branch at
/// the child's own commits (`wip`'s parent), its files as they were,
/// uncommitted. Blocking.
pub fn restore_wip(path: &Path, wip: &str) -> Result<(), worktree::GitError> {
    worktree::git(path, &["reset", "--quiet", "--hard", &format!("{wip}^")])?;
    worktree::git(path, &["clean", "-fdq"])?;
    worktree::git(path, &["read-tree", "-u", "-m", "HEAD", wip])?;
    // The index back at HEAD: the files stay, as uncommitted changes.
    worktree::git(path, &["reset", "--quiet"]).map(|_| ())
}

/// Removes a task's work in progress once its result is recorded.
pub async fn forget_wip(broker: &Broker, object: &str) {
    if let Ok(store) = broker.git_store().await {
        let _ = store.delete(object).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_remote_s_url_travels_without_credentials() {
        assert_eq!(
            without_userinfo("https://user:tok3n@git.example.com/team/app.git"),
            "https://git.example.com/team/app.git"
        );
        assert_eq!(
            without_userinfo("https://tok3n@git.example.com/a@b/app"),
            "https://git.example.com/a@b/app"
        );
        assert_eq!(
            without_userinfo("git@git.example.com:team/app.git"),
            "git@git.example.com:team/app.git"
        );
        assert_eq!(without_userinfo("/srv/app.git"), "/srv/app.git");
        assert_eq!(
            url_key("https://u:p@git.example.com/team/app.git/"),
            url_key("https://git.example.com/team/app")
        );
        assert_ne!(
            url_key("https://git.example.com/team/app"),
            url_key("https://git.example.com/team/other")
        );
    }
}
