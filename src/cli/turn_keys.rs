//! Keys pressed while a chat turn runs: Esc cancels the turn (as Ctrl-C
//! does), and what else is typed is kept for the next prompt.
//!
//! The terminal's line discipline hands input over only at Enter, so a
//! watcher thread switches it to byte-at-a-time input without echo for the
//! length of the turn (signals stay on: Ctrl-C still raises SIGINT) and
//! polls stdin in short slices. Everything else that reads the terminal
//! during a turn (a permission question, an MCP server's form, the model's
//! questions) first takes the terminal with [`hold_terminal`]: the watcher
//! then gives the line discipline back as it was and waits until the
//! question is answered.

use std::io::IsTerminal;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::termios::{self, LocalFlags, SetArg, SpecialCharacterIndices, Termios};
use tokio_util::sync::CancellationToken;

/// How long one poll of stdin waits: the longest a question waits for the
/// watcher to let go of the terminal, and the longest a turn's end waits
/// for the watcher to stop.
const SLICE: Duration = Duration::from_millis(50);

/// How long after an Esc byte the rest of an escape sequence (an arrow
/// key, a function key) may arrive; a lone Esc is a key press.
const SEQUENCE_GAP: Duration = Duration::from_millis(30);

/// Ctrl-D on an empty line, typed while a turn ran: the chat ends when
/// it gets there.
pub const END: char = '\u{4}';

/// The terminal, while the watcher or a question has it.
static TERMINAL: Mutex<()> = Mutex::new(());

/// How many questions are waiting for the terminal.
static WANTED: AtomicUsize = AtomicUsize::new(0);

/// The line discipline as it was before the first turn: what is put back
/// when a watcher stops, and at exit.
static SAVED: Mutex<Option<Termios>> = Mutex::new(None);

/// The terminal for a question during a turn: while the guard lives, the
/// watcher reads nothing and the terminal is in its normal mode.
pub fn hold_terminal() -> MutexGuard<'static, ()> {
    WANTED.fetch_add(1, Ordering::SeqCst);
    let guard = TERMINAL.lock().unwrap_or_else(|p| p.into_inner());
    WANTED.fetch_sub(1, Ordering::SeqCst);
    guard
}

/// Puts the terminal's line discipline back as it was before any turn
/// (at exit, so that a killed chat does not leave the shell without echo).
pub fn restore_terminal() {
    let saved = SAVED.lock().unwrap_or_else(|p| p.into_inner()).clone();
    if let Some(t) = saved {
        let _ = termios::tcsetattr(std::io::stdin().as_fd(), SetArg::TCSANOW, &t);
    }
}

/// The watcher of one turn.
pub struct TurnKeys {
    stop: Arc<AtomicBool>,
    typed: Arc<Mutex<Vec<u8>>>,
    thread: Option<JoinHandle<()>>,
}

impl TurnKeys {
    /// Watches the terminal until [`TurnKeys::finish`]; Esc cancels
    /// `cancel`. Nothing is watched when stdin is not a terminal.
    pub fn watch(cancel: CancellationToken) -> TurnKeys {
        let stop = Arc::new(AtomicBool::new(false));
        let typed = Arc::new(Mutex::new(Vec::new()));
        let thread = std::io::stdin().is_terminal().then(|| {
            let stop = Arc::clone(&stop);
            let typed = Arc::clone(&typed);
            std::thread::spawn(move || watch_loop(&cancel, &stop, &typed))
        });
        TurnKeys {
            stop,
            typed,
            thread,
        }
    }

    /// Stops watching (the terminal is back in its normal mode when this
    /// returns) and gives what was typed during the turn, Esc and escape
    /// sequences left out, each Enter as a `\n`.
    pub fn finish(mut self) -> String {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let typed = std::mem::take(&mut *self.typed.lock().unwrap_or_else(|p| p.into_inner()));
        typed_text(&typed)
    }
}

fn watch_loop(cancel: &CancellationToken, stop: &AtomicBool, typed: &Mutex<Vec<u8>>) {
    let stdin = std::io::stdin();
    let fd = stdin.as_fd();
    let Ok(normal) = termios::tcgetattr(fd) else {
        return;
    };
    SAVED
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get_or_insert_with(|| normal.clone());
    let mut raw = normal.clone();
    raw.local_flags
        .remove(LocalFlags::ICANON | LocalFlags::ECHO | LocalFlags::ECHONL);
    raw.control_chars[SpecialCharacterIndices::VMIN as usize] = 0;
    raw.control_chars[SpecialCharacterIndices::VTIME as usize] = 0;
    while !stop.load(Ordering::SeqCst) {
        if WANTED.load(Ordering::SeqCst) > 0 {
            std::thread::sleep(SLICE);
            continue;
        }
        let Ok(_held) = TERMINAL.try_lock() else {
            std::thread::sleep(SLICE);
            continue;
        };
        if termios::tcsetattr(fd, SetArg::TCSANOW, &raw).is_err() {
            return;
        }
        // Hold the terminal in byte mode until a question wants it or the
        // turn ends.
        while !stop.load(Ordering::SeqCst) && WANTED.load(Ordering::SeqCst) == 0 {
            let mut bytes = read_slice(fd, SLICE);
            if bytes.last() == Some(&0x1b) {
                // A lone Esc, or the start of a sequence still arriving.
                bytes.extend(read_slice(fd, SEQUENCE_GAP));
            }
            if has_lone_escape(&bytes) {
                cancel.cancel();
            }
            typed
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .extend(without_sequences(&bytes));
        }
        // What arrived since the last read is kept too: the line
        // discipline would otherwise hand it to the prompt as a line of
        // its own, cut from what was read before.
        let rest = read_slice(fd, Duration::ZERO);
        typed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend(without_sequences(&rest));
        let _ = termios::tcsetattr(fd, SetArg::TCSANOW, &normal);
    }
}

/// What stdin has within `wait` (at most 256 bytes).
fn read_slice(fd: std::os::fd::BorrowedFd<'_>, wait: Duration) -> Vec<u8> {
    let millis = u16::try_from(wait.as_millis()).unwrap_or(u16::MAX);
    let mut fds = [PollFd::new(fd, PollFlags::POLLIN)];
    match poll(&mut fds, PollTimeout::from(millis)) {
        Ok(n) if n > 0 => {
            let mut buf = [0u8; 256];
            match nix::unistd::read(fd, &mut buf) {
                Ok(n) => buf[..n].to_vec(),
                Err(_) => Vec::new(),
            }
        }
        _ => Vec::new(),
    }
}

/// Keys typed as text: an Enter (CR or LF) is a `\n`, Backspace takes the
/// last character back, Ctrl-D on an empty line is kept as [`END`] (and
/// ends what was typed), other control characters are left out.
fn typed_text(bytes: &[u8]) -> String {
    let mut text = String::new();
    for c in String::from_utf8_lossy(bytes).chars() {
        match c {
            END if text.is_empty() || text.ends_with('\n') => {
                text.push(END);
                break;
            }
            '\r' | '\n' => text.push('\n'),
            '\u{7f}' | '\u{8}' => {
                if text.ends_with('\n') {
                    continue;
                }
                text.pop();
            }
            c if c.is_control() => {}
            c => text.push(c),
        }
    }
    text
}

/// Whether `bytes` hold an Esc that does not start an escape sequence
/// (`ESC [`, `ESC O`, or Alt with a key).
fn has_lone_escape(bytes: &[u8]) -> bool {
    bytes
        .iter()
        .enumerate()
        .any(|(i, &b)| b == 0x1b && matches!(bytes.get(i + 1), None | Some(0x1b)))
}

/// `bytes` without Esc and the escape sequences it starts (a CSI sequence
/// up to its final byte; `ESC O x`; Alt with one key).
fn without_sequences(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != 0x1b {
            out.push(bytes[i]);
            i += 1;
            continue;
        }
        match bytes.get(i + 1) {
            Some(b'[') => {
                i += 2;
                while i < bytes.len() && !(0x40..=0x7e).contains(&bytes[i]) {
                    i += 1;
                }
                i += 1;
            }
            Some(b'O') => i += 3,
            Some(0x1b) | None => i += 1,
            Some(_) => i += 2,
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lone_escape_is_a_key_and_a_sequence_is_not() {
        assert!(has_lone_escape(b"\x1b"));
        assert!(has_lone_escape(b"ab\x1b"));
        assert!(has_lone_escape(b"\x1b\x1b[A"));
        assert!(!has_lone_escape(b"\x1b[A"));
        assert!(!has_lone_escape(b"\x1bOP"));
        assert!(!has_lone_escape(b"\x1bx"));
        assert!(!has_lone_escape(b"plain"));
    }

    #[test]
    fn typed_keys_become_text_with_enter_and_backspace() {
        assert_eq!(typed_text(b"ls\rnext"), "ls\nnext");
        assert_eq!(typed_text(b"nexy\x7ft\x03"), "next");
        assert_eq!(typed_text(b"a\n\x7f"), "a\n");
        assert_eq!(typed_text(b"ls\r\x04more"), "ls\n\u{4}");
        assert_eq!(typed_text(b"ab\x04c"), "abc");
    }

    #[test]
    fn typed_text_keeps_its_keys_and_drops_sequences() {
        assert_eq!(without_sequences(b"ab\x1b[1;5Acd"), b"abcd");
        assert_eq!(without_sequences(b"\x1bOPx\x1b"), b"x");
        assert_eq!(without_sequences(b"\x1bqz"), b"z");
        assert_eq!(without_sequences(b"n\xc3\xa9"), "né".as_bytes());
    }
}
