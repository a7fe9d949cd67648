//! Newline-delimited input from a peer (stream-json on stdin, an MCP
//! server's stdout), read one line at a time with a cap on what is held:
//! a line longer than the cap is passed on in pieces to whoever wants to
//! look at it and never stored, and reading goes on after its newline.

use tokio::io::{AsyncBufRead, AsyncBufReadExt as _};

/// What [`next_line`] read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Line {
    /// A whole line is in the buffer, without its `\n` (or `\r\n`).
    Whole,
    /// The line was longer than the cap: it was skipped up to its newline
    /// and none of it kept. Its length in bytes, the newline not counted.
    TooLong(u64),
}

/// Reads the next line of `input` into `buf` (cleared first); `None` once
/// the input has ended. A last line without a newline counts as a line.
/// `buf` never grows past `max` bytes: a longer line is dropped, each of
/// its bytes handed to `overflow` once, in order, as it goes by.
pub async fn next_line<R: AsyncBufRead + Unpin>(
    input: &mut R,
    buf: &mut Vec<u8>,
    max: usize,
    mut overflow: impl FnMut(&[u8]),
) -> std::io::Result<Option<Line>> {
    buf.clear();
    let mut too_long: Option<u64> = None;
    loop {
        let chunk = input.fill_buf().await?;
        if chunk.is_empty() {
            return Ok(match too_long {
                Some(n) => Some(Line::TooLong(n)),
                None if buf.is_empty() => None,
                None => Some(whole(buf)),
            });
        }
        let newline = memchr::memchr(b'\n', chunk);
        let piece = &chunk[..newline.unwrap_or(chunk.len())];
        let used = piece.len() + usize::from(newline.is_some());
        match &mut too_long {
            Some(n) => {
                overflow(piece);
                *n += piece.len() as u64;
            }
            None if buf.len().saturating_add(piece.len()) > max => {
                overflow(buf.as_slice());
                overflow(piece);
                too_long = Some((buf.len() + piece.len()) as u64);
                buf.clear();
                buf.shrink_to(max.min(64 * 1024));
            }
            None => buf.extend_from_slice(piece),
        }
        input.consume(used);
        if newline.is_some() {
            return Ok(Some(match too_long {
                Some(n) => Line::TooLong(n),
                None => whole(buf),
            }));
        }
    }
}

fn whole(buf: &mut Vec<u8>) -> Line {
    if buf.last() == Some(&b'\r') {
        buf.pop();
    }
    Line::Whole
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// Every line of `input` read with a cap of `max` through a small
    /// read buffer, and the bytes handed to `overflow`.
    async fn lines(input: &[u8], max: usize) -> (Vec<Result<String, u64>>, Vec<u8>) {
        let mut r = tokio::io::BufReader::with_capacity(4, input);
        let mut buf = Vec::new();
        let mut out = Vec::new();
        let mut seen = Vec::new();
        while let Some(l) = next_line(&mut r, &mut buf, max, |b| seen.extend_from_slice(b))
            .await
            .unwrap()
        {
            assert!(buf.len() <= max);
            out.push(match l {
                Line::Whole => Ok(String::from_utf8(buf.clone()).unwrap()),
                Line::TooLong(n) => Err(n),
            });
        }
        (out, seen)
    }

    #[tokio::test]
    async fn a_line_over_the_cap_is_skipped_and_the_next_one_read() {
        let (out, seen) = lines(b"short\r\n0123456789abc\nnext\nlast", 8).await;
        assert_eq!(
            out,
            vec![
                Ok("short".into()),
                Err(13),
                Ok("next".into()),
                Ok("last".into())
            ]
        );
        assert_eq!(seen, b"0123456789abc");
    }

    #[tokio::test]
    async fn a_line_of_exactly_the_cap_is_whole_and_an_endless_one_ends_too_long() {
        let (out, _) = lines(b"12345678\n123456789", 8).await;
        assert_eq!(out, vec![Ok("12345678".into()), Err(9)]);
        let (out, _) = lines(b"", 8).await;
        assert!(out.is_empty());
    }
}
