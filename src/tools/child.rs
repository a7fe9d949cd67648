//! What cadre keeps of a child process it runs in a process group of its
//! own: its output, bounded — the first and last bytes up to a limit at
//! each end, and a count of what was dropped between them (the middle of
//! longer output is counted as it streams past, never stored, so a command
//! that writes gigabytes costs a fixed amount of memory) — and a guard that
//! kills the whole group once, at the latest when the guard is dropped.
//! Used by the Bash tool and by hooks; this file knows nothing of either.

use std::collections::VecDeque;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

use super::outcome::Clip;
use super::truncate_middle;

/// Output bytes: the first and last `keep`, and a count of the rest.
#[derive(Debug)]
pub struct Captured {
    keep: usize,
    head: Vec<u8>,
    tail: VecDeque<u8>,
    dropped: usize,
}

impl Captured {
    /// Keeps up to `keep` bytes at each end.
    pub fn new(keep: usize) -> Captured {
        Captured {
            keep,
            head: Vec::new(),
            tail: VecDeque::new(),
            dropped: 0,
        }
    }

    pub fn push(&mut self, bytes: &[u8]) {
        let room = self.keep.saturating_sub(self.head.len());
        let (to_head, rest) = bytes.split_at(room.min(bytes.len()));
        self.head.extend_from_slice(to_head);
        self.tail.extend(rest);
        if self.tail.len() > self.keep {
            let excess = self.tail.len() - self.keep;
            self.tail.drain(..excess);
            self.dropped += excess;
        }
    }

    /// Bytes seen but not kept.
    pub fn dropped(&self) -> usize {
        self.dropped
    }

    /// The kept text, at most `max_chars` characters of it with the cut
    /// (and the dropped middle) counted between head and tail.
    pub fn text(&self, max_chars: usize) -> Clip {
        let head = String::from_utf8_lossy(&self.head);
        let tail: Vec<u8> = self.tail.iter().copied().collect();
        let tail = String::from_utf8_lossy(&tail);
        if self.dropped == 0 {
            return truncate_middle(&format!("{head}{tail}"), max_chars);
        }
        // The middle was never stored: cut around it and count it too.
        let keep = max_chars / 2;
        let head_chars = head.chars().count();
        let tail_chars = tail.chars().count();
        let head_kept: String = head.chars().take(keep).collect();
        let tail_kept: String = tail.chars().skip(tail_chars.saturating_sub(keep)).collect();
        let cut = head_chars.saturating_sub(keep) + tail_chars.saturating_sub(keep) + self.dropped;
        Clip {
            head: head_kept,
            cut: cut as u64,
            about: true,
            tail: tail_kept,
        }
    }
}

/// Kills a process group once: on [`GroupGuard::kill`] or on drop (so a
/// call whose future is dropped, or a process that ends, leaves nothing of
/// its group behind).
pub struct GroupGuard(Option<Pid>);

impl GroupGuard {
    /// Guards the group `pgid` (a child started with `process_group(0)`:
    /// its pid); `None` guards nothing.
    pub fn new(pgid: Option<Pid>) -> GroupGuard {
        GroupGuard(pgid)
    }

    pub fn kill(&mut self) {
        if let Some(pgid) = self.0.take() {
            // ESRCH (the group is already gone) is the common, harmless case.
            let _ = killpg(pgid, Signal::SIGKILL);
        }
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.kill();
    }
}
