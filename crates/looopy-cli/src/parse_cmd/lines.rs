//! The I/O side of `looopy parse`: lines in, buffered output out, at the speed of the parsers.
//!
//! Input is read in large blocks into one growing buffer, checked as UTF-8 once per block and
//! split at newlines in place (the lines' JSON is decoded in `json_in`). Output accumulates
//! in one reused buffer that is written out before every read, i.e. exactly when the input
//! read so far is used up. A file or a fast producer therefore costs one `write(2)` per input
//! block, while a live pipe that sends one chunk at a time gets each chunk's events before
//! the next read blocks.

use std::io::{self, Read, Write};
use std::str::Utf8Error;

/// Bytes asked for per `read(2)`; a pipe delivers at most its buffer (64 KiB on Linux).
const READ_SIZE: usize = 64 * 1024;

/// Output is written out early once this much is pending, which bounds its buffer.
const OUTPUT_HIGH_WATER: usize = 256 * 1024;

/// What [`for_each_line`] reports.
pub(super) trait LineHandler {
    type Error: From<io::Error>;

    /// One line, numbered from 1, without its `\n`; an error if it is not UTF-8.
    fn line(&mut self, number: usize, line: Result<&str, Utf8Error>) -> Result<(), Self::Error>;

    /// All input read so far has been handled; the next read may block.
    fn before_read(&mut self) -> Result<(), Self::Error>;
}

/// Reads `input` line by line into `handler`.
pub(super) fn for_each_line<H: LineHandler>(
    mut input: impl Read,
    handler: &mut H,
) -> Result<(), H::Error> {
    let mut buf = vec![0u8; READ_SIZE];
    let mut filled = 0;
    // Bytes of `buf[..filled]` known to hold no newline (so a long line is scanned once).
    let mut scanned = 0;
    let mut line_no = 0;
    loop {
        handler.before_read()?;
        if buf.len() - filled < READ_SIZE / 2 {
            // Only a line longer than the buffer gets here: grow, never keep the bytes twice.
            buf.resize(buf.len() * 2, 0);
        }
        let n = match input.read(&mut buf[filled..]) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e.into()),
        };
        filled += n;
        // The complete lines read so far (at end of input, everything).
        let end = if n == 0 {
            filled
        } else {
            memchr::memrchr(b'\n', &buf[scanned..filled]).map_or(0, |at| scanned + at + 1)
        };
        line_no = lines(&buf[..end], line_no, handler)?;
        if n == 0 {
            return Ok(());
        }
        buf.copy_within(end..filled, 0);
        filled -= end;
        scanned = filled;
        if buf.len() > 4 * READ_SIZE && filled < READ_SIZE {
            // A long line has passed: give the memory back.
            buf.truncate(2 * READ_SIZE);
            buf.shrink_to_fit();
        }
    }
}

/// Hands the lines of `region` (whole lines, the last one possibly without `\n` at end of
/// input) to `handler`, numbering on from `number`; returns the last number used. The region
/// is checked as UTF-8 once, with SIMD (simdutf8: model output mixes ASCII with accents and
/// emoji, which defeats the standard library's ASCII fast path, and this check was a tenth of
/// the command's time); only when it fails are the lines checked one by one, to find the
/// culprit and say what is wrong.
fn lines<H: LineHandler>(
    region: &[u8],
    mut number: usize,
    handler: &mut H,
) -> Result<usize, H::Error> {
    let text = simdutf8::basic::from_utf8(region);
    let mut start = 0;
    let ends = memchr::memchr_iter(b'\n', region).chain(
        // A last line without a newline (only at end of input).
        (region.last().is_some_and(|&b| b != b'\n')).then_some(region.len()),
    );
    for end in ends {
        number += 1;
        let line = match &text {
            // `start` and `end` are at ASCII newlines (or the end): char boundaries.
            Ok(text) => Ok(&text[start..end]),
            Err(_) => std::str::from_utf8(&region[start..end]),
        };
        handler.line(number, line)?;
        start = end + 1;
    }
    Ok(number)
}

/// Buffered output that is written out only when asked (or when it grows large).
pub(super) struct Output<W: Write> {
    buf: Vec<u8>,
    sink: W,
}

impl<W: Write> Output<W> {
    pub(super) fn new(sink: W) -> Self {
        Self {
            buf: Vec::with_capacity(OUTPUT_HIGH_WATER + 4096),
            sink,
        }
    }

    /// Appends one event as a JSON line.
    pub(super) fn event<T: serde::Serialize + ?Sized>(&mut self, event: &T) -> io::Result<()> {
        self.write_with(|buf| {
            // Serialising into a `Vec` cannot fail for the payload types written here.
            if let Err(e) = serde_json::to_writer(&mut *buf, event) {
                tracing::error!(error = %e, "an event could not be serialised");
            }
            buf.push(b'\n');
        })
    }

    /// Appends what `write` puts in the buffer (one or more whole JSON lines).
    pub(super) fn write_with(&mut self, write: impl FnOnce(&mut Vec<u8>)) -> io::Result<()> {
        write(&mut self.buf);
        if self.buf.len() >= OUTPUT_HIGH_WATER {
            self.flush()?;
        }
        Ok(())
    }

    /// Writes out everything pending.
    pub(super) fn flush(&mut self) -> io::Result<()> {
        if !self.buf.is_empty() {
            self.sink.write_all(&self.buf)?;
            self.buf.clear();
        }
        self.sink.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader that returns its pieces one `read` at a time.
    struct Pieces(Vec<Vec<u8>>);

    impl Read for Pieces {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let Some(piece) = self.0.first_mut() else {
                return Ok(0);
            };
            let n = piece.len().min(buf.len());
            buf[..n].copy_from_slice(&piece[..n]);
            piece.drain(..n);
            if piece.is_empty() {
                self.0.remove(0);
            }
            Ok(n)
        }
    }

    #[derive(Default)]
    struct Collect {
        lines: Vec<(usize, Vec<u8>)>,
        reads: usize,
    }

    impl LineHandler for Collect {
        type Error = io::Error;

        fn line(&mut self, number: usize, line: Result<&str, Utf8Error>) -> io::Result<()> {
            let line = line.map_or_else(|_| b"<invalid>".to_vec(), |l| l.as_bytes().to_vec());
            self.lines.push((number, line));
            Ok(())
        }

        fn before_read(&mut self) -> io::Result<()> {
            self.reads += 1;
            Ok(())
        }
    }

    fn lines_of(pieces: &[&[u8]]) -> (Vec<(usize, Vec<u8>)>, usize) {
        let mut collect = Collect::default();
        let input = Pieces(pieces.iter().map(|p| p.to_vec()).collect());
        for_each_line(input, &mut collect).unwrap();
        (collect.lines, collect.reads)
    }

    #[test]
    fn lines_are_split_across_reads_and_the_last_needs_no_newline() {
        let (lines, reads) = lines_of(&[b"a\nb", b"c\n\nd"]);
        assert_eq!(
            lines,
            [
                (1, b"a".to_vec()),
                (2, b"bc".to_vec()),
                (3, b"".to_vec()),
                (4, b"d".to_vec())
            ]
        );
        assert_eq!(reads, 3, "one before each read, the last one seeing EOF");
    }

    #[test]
    fn a_line_longer_than_the_buffer_grows_it() {
        let long = vec![b'x'; READ_SIZE * 5 + 3];
        let mut input = long.clone();
        input.extend_from_slice(b"\nshort\n");
        let (lines, _) = lines_of(&[&input]);
        assert_eq!(lines, [(1, long), (2, b"short".to_vec())]);
    }

    #[test]
    fn invalid_utf8_is_reported_for_its_own_line_only() {
        let (lines, _) = lines_of(&[b"a\n\xffb\nc\n", b"\xe2\x82", b"\xac\n"]);
        assert_eq!(
            lines,
            [
                (1, b"a".to_vec()),
                (2, b"<invalid>".to_vec()),
                (3, b"c".to_vec()),
                (4, "€".as_bytes().to_vec())
            ]
        );
    }

    #[test]
    fn output_is_written_only_on_flush_or_when_large() {
        let mut out = Output::new(Vec::new());
        out.event("a").unwrap();
        assert!(out.sink.is_empty());
        out.flush().unwrap();
        assert_eq!(out.sink, b"\"a\"\n");
        let big = "x".repeat(OUTPUT_HIGH_WATER);
        out.event(&big).unwrap();
        assert!(out.buf.is_empty() && out.sink.len() > OUTPUT_HIGH_WATER);
    }
}
