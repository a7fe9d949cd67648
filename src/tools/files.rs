//! Opening files for the built-in tools: regular files only, never
//! blocking, never reading without bound.
//!
//! A path (or the target of a symlink) that is a FIFO, a socket or a device
//! is refused before anything reads or writes it: opening a FIFO blocks
//! until a writer comes, and `/dev/zero` never ends. The file is opened
//! with `O_NONBLOCK` and checked again through its descriptor, so a path
//! swapped between the check and the open is caught too. Reads are capped.

use std::fs::{File, Metadata, OpenOptions};
use std::io::{self, Read as _};
use std::os::unix::fs::{FileTypeExt as _, OpenOptionsExt as _};
use std::path::Path;

use super::ToolOutput;
use super::outcome::{FileAction, FileIo, FileNotFound, FileTooLarge, IsDirectory, NotRegularFile};

/// Why a tool will not use a path.
#[derive(Debug)]
pub(crate) enum Refusal {
    NotFound,
    Directory,
    /// Not a regular file: what it is instead.
    NotRegular(&'static str),
    /// Larger than the tool reads: its size and the limit.
    TooLarge(u64, u64),
    Io(io::Error),
}

/// What a non-regular file is, as the `error_not_regular_file` template
/// names it (`None` for a regular file).
pub(crate) fn kind_of(meta: &Metadata) -> Option<&'static str> {
    let t = meta.file_type();
    if t.is_file() {
        None
    } else if t.is_dir() {
        Some("directory")
    } else if t.is_fifo() {
        Some("fifo")
    } else if t.is_socket() {
        Some("socket")
    } else if t.is_char_device() {
        Some("char_device")
    } else if t.is_block_device() {
        Some("block_device")
    } else {
        Some("other")
    }
}

fn check(meta: &Metadata) -> Result<(), Refusal> {
    match kind_of(meta) {
        None => Ok(()),
        Some("directory") => Err(Refusal::Directory),
        Some(kind) => Err(Refusal::NotRegular(kind)),
    }
}

fn io(e: io::Error) -> Refusal {
    if e.kind() == io::ErrorKind::NotFound {
        Refusal::NotFound
    } else {
        Refusal::Io(e)
    }
}

/// Opens a regular file for reading (following symlinks).
pub(crate) fn open_read(path: &Path) -> Result<(File, Metadata), Refusal> {
    check(&std::fs::metadata(path).map_err(io)?)?;
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    check(&meta)?;
    Ok((file, meta))
}

/// Opens a file for writing, creating it when missing, without truncating
/// (the caller writes, then sets the length). Refuses a path that exists
/// and is not a regular file.
pub(crate) fn open_write(path: &Path) -> Result<File, Refusal> {
    match std::fs::metadata(path) {
        Ok(meta) => check(&meta)?,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(Refusal::Io(e)),
    }
    // O_NONBLOCK: a FIFO put in place meanwhile fails to open (ENXIO)
    // instead of waiting for a reader.
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(io)?;
    check(&file.metadata().map_err(io)?)?;
    Ok(file)
}

/// Reads a whole regular file of at most `max` bytes. A file that grows
/// past `max` while it is read is refused the same way.
pub(crate) fn read_capped(path: &Path, max: u64) -> Result<Vec<u8>, Refusal> {
    let (file, meta) = open_read(path)?;
    if meta.len() > max {
        return Err(Refusal::TooLarge(meta.len(), max));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.take(max.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(Refusal::Io)?;
    if bytes.len() as u64 > max {
        return Err(Refusal::TooLarge(bytes.len() as u64, max));
    }
    Ok(bytes)
}

/// Replaces the content of a regular file (created when missing) with
/// `bytes`.
pub(crate) fn write_whole(path: &Path, bytes: &[u8]) -> Result<(), Refusal> {
    use std::io::Write as _;
    let mut file = open_write(path)?;
    file.set_len(0).map_err(Refusal::Io)?;
    file.write_all(bytes).map_err(Refusal::Io)?;
    file.flush().map_err(Refusal::Io)
}

/// The outcome for a refused file operation of `tool` on `path`.
pub(crate) fn refused(tool: &str, action: FileAction, path: &Path, refusal: Refusal) -> ToolOutput {
    let shown = path.display().to_string();
    match refusal {
        Refusal::NotFound => ToolOutput::error(FileNotFound { path: shown }),
        Refusal::Directory => ToolOutput::error(IsDirectory {
            tool: tool.to_string(),
            path: shown,
        }),
        Refusal::NotRegular(kind) => not_regular(tool, path, kind),
        Refusal::TooLarge(size, max) => too_large(tool, path, size, max),
        Refusal::Io(e) => ToolOutput::error(FileIo {
            action,
            path: shown,
            error: e.to_string(),
        }),
    }
}

/// The tool result for a path that is not a regular file (template
/// `error_not_regular_file`).
pub(crate) fn not_regular(tool: &str, path: &Path, kind: &str) -> ToolOutput {
    ToolOutput::error(NotRegularFile {
        tool: tool.to_string(),
        path: path.display().to_string(),
        kind: kind.to_string(),
    })
}

/// The tool result for a file larger than a tool reads (template
/// `error_file_too_large`).
pub(crate) fn too_large(tool: &str, path: &Path, size: u64, max: u64) -> ToolOutput {
    ToolOutput::error(FileTooLarge {
        tool: tool.to_string(),
        path: path.display().to_string(),
        size,
        max,
        size_kib: size / 1024,
        max_kib: max / 1024,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn mkfifo(path: &Path) {
        let status = std::process::Command::new("mkfifo")
            .arg(path)
            .status()
            .unwrap();
        assert!(status.success());
    }

    #[test]
    fn fifos_devices_and_links_to_them_are_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("pipe");
        mkfifo(&fifo);
        let link = dir.path().join("zero");
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        assert!(matches!(open_read(&fifo), Err(Refusal::NotRegular("fifo"))));
        assert!(matches!(
            open_write(&fifo),
            Err(Refusal::NotRegular("fifo"))
        ));
        assert!(matches!(
            read_capped(&link, 1 << 20),
            Err(Refusal::NotRegular("char_device"))
        ));
        assert!(matches!(open_read(dir.path()), Err(Refusal::Directory)));
        assert!(matches!(
            open_read(&dir.path().join("missing")),
            Err(Refusal::NotFound)
        ));
    }

    #[test]
    fn reads_are_capped() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("f");
        std::fs::write(&f, vec![b'a'; 100]).unwrap();
        assert_eq!(read_capped(&f, 100).unwrap().len(), 100);
        assert!(matches!(
            read_capped(&f, 99),
            Err(Refusal::TooLarge(100, 99))
        ));
    }
}
