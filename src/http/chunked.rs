//! `Transfer-Encoding: chunked` as a state machine over byte slices (RFC 9112 section 7.1).
//!
//! [`ChunkedDecoder::step`] does no I/O and never copies: it reads framing bytes and hands back
//! the position of chunk data inside the slice it was given, so the caller can move the data
//! straight to where it belongs. It keeps its state between calls, so a chunk header or a CRLF
//! split across reads at any byte decodes the same.
//!
//! Strict on purpose (a lenient chunked parser is a request smuggling vector): chunk sizes are
//! hex digits only, at most [`CHUNK_SIZE_DIGITS_MAX`] of them; every line ends in CRLF; chunk
//! extensions are skipped but bounded by [`CHUNK_LINE_BYTES_MAX`]; trailer fields are skipped
//! but bounded by [`TRAILER_BYTES_MAX`]. The total size of the body is the caller's limit.

use std::fmt;

/// Bytes of a chunk-size line including extensions, excluding CRLF.
pub const CHUNK_LINE_BYTES_MAX: usize = 1024;
/// Hex digits of a chunk size: 15 keeps the size below 2^60, far over any body limit.
pub const CHUNK_SIZE_DIGITS_MAX: usize = 15;
/// Bytes of the whole trailer section.
pub const TRAILER_BYTES_MAX: usize = 8 * 1024;
/// Bytes of chunk extensions over a whole body: extensions carry nothing we use, and without
/// this bound a client could send 1 KiB of them per byte of data.
pub const EXTENSION_BYTES_MAX: usize = 4 * 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Reading the hex digits of a chunk size.
    Size,
    /// After the digits: optional whitespace, then `;` or CR.
    SizeEnd,
    /// Inside chunk extensions, up to CR.
    Extension,
    /// Saw CR of the size line.
    SizeLf,
    /// Inside chunk data; `remaining` bytes to go.
    Data,
    /// Data done, expecting CR.
    DataCr,
    /// Expecting LF after the data.
    DataLf,
    /// At the start of a trailer line (or of the final CRLF).
    TrailerStart,
    /// Inside a trailer field's name (token characters up to the colon).
    TrailerName,
    /// Inside a trailer field's value.
    TrailerLine,
    /// Saw CR of a trailer line.
    TrailerLf,
    /// Saw CR of the final empty line.
    EndLf,
    /// The last chunk and the trailers are through.
    Done,
}

/// What one [`ChunkedDecoder::step`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Chunk data at `input[start..end]` (already counted in `consumed`).
    Data { start: usize, end: usize },
    /// All of the input was framing; feed more.
    NeedMore,
    /// The body is complete; bytes after `consumed` belong to the next request.
    Done,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChunkedError {
    BadSize,
    LineTooLong,
    TrailerTooLarge,
    MissingCrlf,
    /// A trailer line that breaks the header grammar: a bare LF, a folded line, a name that
    /// is not a token (a space in it or before the colon), a control character.
    BadTrailer,
}

impl fmt::Display for ChunkedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ChunkedError::BadSize => "invalid chunk size",
            ChunkedError::LineTooLong => "chunk size line too long",
            ChunkedError::TrailerTooLarge => "chunked trailer section too large",
            ChunkedError::MissingCrlf => "chunk not terminated by CRLF",
            ChunkedError::BadTrailer => "malformed chunked trailer field",
        })
    }
}

#[derive(Clone, Debug)]
pub struct ChunkedDecoder {
    state: State,
    /// Size of the chunk being read (while in `Size`), then data bytes left in it.
    remaining: u64,
    /// Digits read of the current size.
    digits: usize,
    /// Bytes of the current size line, for [`CHUNK_LINE_BYTES_MAX`].
    line_bytes: usize,
    /// Bytes of trailers so far, for [`TRAILER_BYTES_MAX`].
    trailer_bytes: usize,
    /// Bytes of chunk extensions so far, for [`EXTENSION_BYTES_MAX`].
    extension_bytes: usize,
}

impl Default for ChunkedDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl ChunkedDecoder {
    pub fn new() -> Self {
        ChunkedDecoder {
            state: State::Size,
            remaining: 0,
            digits: 0,
            line_bytes: 0,
            trailer_bytes: 0,
            extension_bytes: 0,
        }
    }

    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Decodes from the start of `input`. Returns how many bytes were used and what was found.
    /// After `Step::Data` or `Step::Done`, call again with `&input[consumed..]` to go on.
    pub fn step(&mut self, input: &[u8]) -> Result<(usize, Step), ChunkedError> {
        let mut i = 0;
        while i < input.len() {
            let byte = input[i];
            match self.state {
                State::Size => match hex_value(byte) {
                    Some(value) => {
                        self.digits += 1;
                        if self.digits > CHUNK_SIZE_DIGITS_MAX {
                            return Err(ChunkedError::BadSize);
                        }
                        self.remaining = (self.remaining << 4) | u64::from(value);
                        self.count_line_byte()?;
                        i += 1;
                    }
                    None if self.digits == 0 => return Err(ChunkedError::BadSize),
                    None => self.state = State::SizeEnd,
                },
                State::SizeEnd => {
                    match byte {
                        b' ' | b'\t' => {}
                        b';' => self.state = State::Extension,
                        b'\r' => self.state = State::SizeLf,
                        _ => return Err(ChunkedError::BadSize),
                    }
                    self.count_line_byte()?;
                    i += 1;
                }
                State::Extension => {
                    match byte {
                        b'\r' => self.state = State::SizeLf,
                        b'\t' | b' '..=b'~' | 0x80..=0xff => {}
                        _ => return Err(ChunkedError::BadSize),
                    }
                    self.extension_bytes += 1;
                    if self.extension_bytes > EXTENSION_BYTES_MAX {
                        return Err(ChunkedError::LineTooLong);
                    }
                    self.count_line_byte()?;
                    i += 1;
                }
                State::SizeLf => {
                    if byte != b'\n' {
                        return Err(ChunkedError::MissingCrlf);
                    }
                    i += 1;
                    self.line_bytes = 0;
                    self.digits = 0;
                    self.state = if self.remaining == 0 {
                        State::TrailerStart
                    } else {
                        State::Data
                    };
                }
                State::Data => {
                    let available = (input.len() - i) as u64;
                    let take = available.min(self.remaining) as usize;
                    self.remaining -= take as u64;
                    if self.remaining == 0 {
                        self.state = State::DataCr;
                    }
                    return Ok((
                        i + take,
                        Step::Data {
                            start: i,
                            end: i + take,
                        },
                    ));
                }
                State::DataCr => {
                    if byte != b'\r' {
                        return Err(ChunkedError::MissingCrlf);
                    }
                    i += 1;
                    self.state = State::DataLf;
                }
                State::DataLf => {
                    if byte != b'\n' {
                        return Err(ChunkedError::MissingCrlf);
                    }
                    i += 1;
                    self.state = State::Size;
                }
                // Trailers follow the header grammar (RFC 9112 7.1.2, RFC 9110 5.1): a field
                // line is a token, a colon and a value, ended by CRLF. A bare LF, a folded
                // line or a name that is not a token is refused (and the connection closed),
                // so that no front proxy can read a second request where we read trailers.
                State::TrailerStart => {
                    if byte == b'\r' {
                        self.state = State::EndLf;
                    } else if is_tchar(byte) {
                        self.count_trailer_byte()?;
                        self.state = State::TrailerName;
                    } else {
                        return Err(ChunkedError::BadTrailer);
                    }
                    i += 1;
                }
                State::TrailerName => {
                    if byte == b':' {
                        self.state = State::TrailerLine;
                    } else if !is_tchar(byte) {
                        return Err(ChunkedError::BadTrailer);
                    }
                    self.count_trailer_byte()?;
                    i += 1;
                }
                State::TrailerLine => {
                    if byte == b'\r' {
                        self.state = State::TrailerLf;
                    } else if byte == b'\n' || (byte.is_ascii_control() && byte != b'\t') {
                        return Err(ChunkedError::BadTrailer);
                    }
                    self.count_trailer_byte()?;
                    i += 1;
                }
                State::TrailerLf => {
                    if byte != b'\n' {
                        return Err(ChunkedError::MissingCrlf);
                    }
                    self.count_trailer_byte()?;
                    i += 1;
                    self.state = State::TrailerStart;
                }
                State::EndLf => {
                    if byte != b'\n' {
                        return Err(ChunkedError::MissingCrlf);
                    }
                    self.state = State::Done;
                    return Ok((i + 1, Step::Done));
                }
                State::Done => return Ok((i, Step::Done)),
            }
        }
        if self.state == State::Done {
            return Ok((i, Step::Done));
        }
        Ok((i, Step::NeedMore))
    }

    fn count_line_byte(&mut self) -> Result<(), ChunkedError> {
        self.line_bytes += 1;
        if self.line_bytes > CHUNK_LINE_BYTES_MAX {
            return Err(ChunkedError::LineTooLong);
        }
        Ok(())
    }

    fn count_trailer_byte(&mut self) -> Result<(), ChunkedError> {
        self.trailer_bytes += 1;
        if self.trailer_bytes > TRAILER_BYTES_MAX {
            return Err(ChunkedError::TrailerTooLarge);
        }
        Ok(())
    }
}

fn hex_value(byte: u8) -> Option<u8> {
    match byte {
        b'0'..=b'9' => Some(byte - b'0'),
        b'a'..=b'f' => Some(byte - b'a' + 10),
        b'A'..=b'F' => Some(byte - b'A' + 10),
        _ => None,
    }
}

/// A token character of a field name (RFC 9110 5.6.2).
fn is_tchar(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&byte)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_all(input: &[u8]) -> Result<(usize, Step), ChunkedError> {
        let mut decoder = ChunkedDecoder::new();
        let mut at = 0;
        loop {
            let (used, step) = decoder.step(&input[at..])?;
            at += used;
            match step {
                Step::Data { .. } => continue,
                Step::Done => return Ok((at, step)),
                Step::NeedMore => return Ok((at, step)),
            }
        }
    }

    /// Issue 14, defect 5: trailers follow the header grammar, so nothing after the last
    /// chunk can be read as a smuggled request by a front proxy that accepts bare LF.
    #[test]
    fn chunked_trailers_follow_the_header_grammar() {
        for bad in [
            &b"0\r\n\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"[..],
            b"0\r\nX-A: 1\nX-B: 2\r\n\r\n",
            b"0\r\nX-A: 1\r\n folded\r\n\r\n",
            b"0\r\nX-A : 1\r\n\r\n",
            b"0\r\nBad Name: 1\r\n\r\n",
            b"0\r\nX-A: a\x00b\r\n\r\n",
            b"0\r\nno-colon\r\n\r\n",
        ] {
            assert_eq!(
                decode_all(bad),
                Err(ChunkedError::BadTrailer),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        // `Content_Length` is a valid token, so a valid trailer name: it is read as nothing
        // but a trailer (never as Content-Length; trailers are dropped).
        for good in [
            &b"0\r\n\r\n"[..],
            b"0\r\nX-Checksum: abc\tdef\r\nContent_Length: 5\r\n\r\n",
        ] {
            assert_eq!(decode_all(good), Ok((good.len(), Step::Done)));
        }
    }
    use proptest::prelude::*;

    /// Feeds `input` in pieces of `piece` bytes; returns the data and the bytes left after Done.
    fn decode_in_pieces(input: &[u8], piece: usize) -> Result<(Vec<u8>, usize), ChunkedError> {
        let mut decoder = ChunkedDecoder::new();
        let mut data = Vec::new();
        let mut fed = 0;
        let mut pending: Vec<u8> = Vec::new();
        loop {
            if pending.is_empty() {
                if fed >= input.len() {
                    return Err(ChunkedError::MissingCrlf); // ran out: incomplete
                }
                let end = (fed + piece).min(input.len());
                pending.extend_from_slice(&input[fed..end]);
                fed = end;
            }
            let (used, step) = decoder.step(&pending)?;
            match step {
                Step::Data { start, end } => data.extend_from_slice(&pending[start..end]),
                Step::NeedMore => assert_eq!(used, pending.len()),
                Step::Done => {
                    let leftover = pending.len() - used + (input.len() - fed);
                    return Ok((data, leftover));
                }
            }
            pending.drain(..used);
        }
    }

    #[test]
    fn decodes_the_rfc_example_at_every_split() {
        let body = b"4\r\nWiki\r\n5;name=value\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\nExpires: never\r\n\r\nNEXT";
        for piece in 1..body.len() {
            let (data, leftover) = decode_in_pieces(body, piece).unwrap();
            assert_eq!(data, b"Wikipedia in\r\n\r\nchunks.");
            assert_eq!(leftover, 4, "piece {piece}");
        }
    }

    #[test]
    fn empty_body() {
        assert_eq!(decode_in_pieces(b"0\r\n\r\n", 1).unwrap(), (vec![], 0));
    }

    #[test]
    fn strict_framing() {
        let bad: &[&[u8]] = &[
            b"\r\n\r\n",                // no size
            b"x\r\n",                   // not hex
            b"-1\r\n",                  // sign
            b"4\nWiki\r\n0\r\n\r\n",    // bare LF after size
            b"4\r\nWikiX\r\n0\r\n\r\n", // data longer than size
            b"4\r\nWiki\n0\r\n\r\n",    // bare LF after data
            b"0\r\nX: y\n\r\n",         // bare LF in trailer
            b"4 x\r\n",                 // junk after size
            b"1000000000000000\r\n",    // 16 digits
        ];
        for case in bad {
            assert!(
                decode_in_pieces(case, 64).is_err(),
                "{:?}",
                String::from_utf8_lossy(case)
            );
        }
    }

    #[test]
    fn extensions_are_bounded_over_the_whole_body() {
        let mut body = Vec::new();
        for _ in 0..10 {
            body.extend_from_slice(b"1;");
            body.extend(std::iter::repeat_n(b'e', 500));
            body.extend_from_slice(b"\r\nx\r\n");
        }
        body.extend_from_slice(b"0\r\n\r\n");
        assert_eq!(decode_in_pieces(&body, 256), Err(ChunkedError::LineTooLong));
    }

    #[test]
    fn limits_on_lines_and_trailers() {
        let mut line = b"1;".to_vec();
        line.extend(std::iter::repeat_n(b'a', CHUNK_LINE_BYTES_MAX));
        line.extend_from_slice(b"\r\nx\r\n0\r\n\r\n");
        assert_eq!(decode_in_pieces(&line, 100), Err(ChunkedError::LineTooLong));
        let mut trailer = b"0\r\n".to_vec();
        for _ in 0..1000 {
            trailer.extend_from_slice(b"X-Trailer: 0123456789\r\n");
        }
        trailer.extend_from_slice(b"\r\n");
        assert_eq!(
            decode_in_pieces(&trailer, 100),
            Err(ChunkedError::TrailerTooLarge)
        );
    }

    fn encode(chunks: &[Vec<u8>]) -> Vec<u8> {
        let mut out = Vec::new();
        for chunk in chunks.iter().filter(|c| !c.is_empty()) {
            out.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
            out.extend_from_slice(chunk);
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b"0\r\n\r\n");
        out
    }

    proptest! {
        #[test]
        fn round_trips_at_any_split(
            chunks in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 0..8),
            piece in 1usize..64,
        ) {
            let encoded = encode(&chunks);
            let (data, leftover) = decode_in_pieces(&encoded, piece).unwrap();
            prop_assert_eq!(data, chunks.concat());
            prop_assert_eq!(leftover, 0);
        }

        #[test]
        fn random_bytes_never_panic_or_overrun(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let mut decoder = ChunkedDecoder::new();
            let mut at = 0;
            while at < bytes.len() {
                match decoder.step(&bytes[at..]) {
                    Ok((used, step)) => {
                        prop_assert!(at + used <= bytes.len());
                        if let Step::Data { start, end } = step {
                            prop_assert!(start <= end && end <= used);
                        }
                        if used == 0 { break; }
                        at += used;
                        if step == Step::Done { break; }
                    }
                    Err(_) => break,
                }
            }
        }
    }
}
