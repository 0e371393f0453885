//! Reading an answer's body: within `max_body_bytes` both on the wire and once decoded,
//! into one buffer.
//!
//! Why decode here and not let awc do it: awc decodes each chunk that arrives in one go,
//! so a few kilobytes of brotli or zstd that expand to gigabytes (a decompression bomb)
//! are in memory before any limit can be checked. Here each encoded chunk goes through a
//! streaming decoder that hands its output over in pieces of [`PIECE`] bytes, and the
//! limit is checked on each piece: a bomb ends as `body_too_large` with at most the limit
//! and a piece in memory. gzip and deflate (flate2's inflater, pure Rust, under framing
//! read here: see [`Flate`]), brotli (the reference decoder ported to Rust) and zstd (the
//! reference C library) are accepted; the crawler says so in `Accept-Encoding` unless a
//! fetch sets its own.
//!
//! A body is whole or the answer says it is not: an empty body under any encoding is an
//! empty body; a stream that stops short is `Cut` when the server's close ended the body
//! (the same as a `Content-Length` not reached), `Undecodable` when the framing said the
//! body was all there.
//!
//! Why one buffer sized from `Content-Length`, not awc's `body()`: that starts empty and
//! doubles as chunks come, so a 32 KiB page cost several reallocations and copies, and
//! with glibc's allocator about one page fault per request (`perf stat -e page-faults`
//! on `bench_raw --body 32768`).

mod flate;

use std::io::{self, Write};

use awc::error::PayloadError;
use awc::http::header::{HeaderMap, CONTENT_ENCODING, CONTENT_LENGTH, TRANSFER_ENCODING};
use bytes::{Bytes, BytesMut};
use flate::Flate;

/// What the crawler accepts, in `Accept-Encoding`: each has its decoder here.
pub use exitcrawl_net::ACCEPT_ENCODING;

/// The most a decoder hands over at once.
const PIECE: usize = 32 * 1024;

/// Which size of a body went over the limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Over {
    /// The length its `Content-Length` announced.
    Announced,
    /// The bytes that came over the wire (encoded, if it was).
    Wire,
    /// The body once decoded.
    Decoded,
}

impl std::fmt::Display for Over {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Over::Announced => "as its Content-Length announces",
            Over::Wire => "on the wire",
            Over::Decoded => "once decoded",
        })
    }
}

/// Why a body could not be read whole.
#[derive(Debug)]
pub(crate) enum BodyError {
    /// Larger than the limit: announced, on the wire, or once decoded.
    TooLarge(Over),
    /// A truncating body reached its limit: not a failure, the end of the reading.
    Full,
    /// It does not decode from its `Content-Encoding`.
    Undecodable {
        /// The encoding.
        encoding: String,
        /// What the decoder said.
        error: io::Error,
    },
    /// The server's close ended a body that had neither a length nor chunks, and its
    /// encoded stream had not ended: cut short, as a body short of its `Content-Length`.
    Cut {
        /// The encoding.
        encoding: String,
        /// What the decoder said.
        error: io::Error,
    },
    /// Reading it off the connection failed (closed early, reset, garbage framing, timed
    /// out): awc's account of it.
    Read(PayloadError),
}

impl std::fmt::Display for BodyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BodyError::TooLarge(over) => write!(f, "the body is larger than the limit {over}"),
            BodyError::Full => f.write_str("the body was cut at the limit"),
            BodyError::Undecodable { encoding, error } => {
                write!(f, "the body does not decode as {encoding}: {error}")
            }
            BodyError::Cut { encoding, error } => write!(
                f,
                "the connection closed before the end of the body's {encoding} stream: {error}"
            ),
            BodyError::Read(e) => write!(f, "reading the body: {e}"),
        }
    }
}

impl std::error::Error for BodyError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            BodyError::TooLarge(_) | BodyError::Full => None,
            BodyError::Undecodable { error, .. } | BodyError::Cut { error, .. } => Some(error),
            BodyError::Read(e) => Some(e),
        }
    }
}

/// Where decoded bytes go: a buffer that refuses to grow past the limit. The decoders
/// write into it directly, so a bomb stops at the limit inside the decoder's own loop.
struct Sink {
    buf: BytesMut,
    limit: usize,
    /// A write was refused for the limit.
    over: bool,
    /// Keep what fits of a write over the limit (the body is cut there).
    truncate: bool,
}

impl Write for Sink {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        if self.buf.len() + data.len() > self.limit {
            if self.truncate {
                let room = self.limit - self.buf.len();
                self.buf.extend_from_slice(&data[..room]);
            }
            self.over = true;
            return Err(io::Error::other("decoded body larger than the limit"));
        }
        self.buf.extend_from_slice(data);
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Sink {
    fn empty() -> Self {
        Sink {
            buf: BytesMut::new(),
            limit: 0,
            over: false,
            truncate: false,
        }
    }
}

/// How the body is taken in: as it came, or through a decoder.
enum Input {
    Plain(Sink),
    /// gzip or deflate.
    Flate(Flate),
    Brotli(Box<brotli_decompressor::DecompressorWriter<Sink>>),
    /// The stream writer under `zstd::stream::write::Decoder`, whose `finish` tells a
    /// frame cut short (that wrapper's `flush` does not: a body cut mid-frame would come
    /// out as a whole answer).
    Zstd(zstd::stream::zio::Writer<Sink, zstd::stream::raw::Decoder<'static>>),
}

impl Input {
    /// The input for a `Content-Encoding` value (plain for identity, or for an encoding
    /// we do not decode: the body is then kept as it came), and whether it decodes.
    fn new(encoding: Option<&str>, sink: Sink) -> (Input, bool) {
        let enc = encoding.map(|v| v.trim().to_ascii_lowercase());
        let input = match enc.as_deref() {
            Some("gzip" | "x-gzip") => Input::Flate(Flate::new(sink, true)),
            Some("deflate") => Input::Flate(Flate::new(sink, false)),
            Some("br") => Input::Brotli(Box::new(brotli_decompressor::DecompressorWriter::new(
                sink, PIECE,
            ))),
            Some("zstd") => match zstd::stream::raw::Decoder::new() {
                Ok(d) => Input::Zstd(zstd::stream::zio::Writer::new(sink, d)),
                Err(_) => return (Input::Plain(sink), false),
            },
            _ => return (Input::Plain(sink), false),
        };
        (input, true)
    }

    fn sink(&mut self) -> &mut Sink {
        match self {
            Input::Plain(s) => s,
            Input::Flate(d) => &mut d.sink,
            Input::Brotli(d) => d.get_mut(),
            Input::Zstd(d) => d.writer_mut(),
        }
    }

    fn write_all(&mut self, data: &[u8]) -> io::Result<()> {
        match self {
            Input::Plain(s) => s.write_all(data),
            Input::Flate(d) => d.write_all(data),
            Input::Brotli(d) => d.write_all(data),
            Input::Zstd(d) => d.write_all(data),
        }
    }

    /// The sink, with no more of the decoder's output.
    fn into_sink(self) -> Sink {
        match self {
            Input::Plain(s) => s,
            Input::Flate(d) => d.sink,
            Input::Brotli(mut d) => std::mem::replace(d.get_mut(), Sink::empty()),
            Input::Zstd(d) => d.into_inner().0,
        }
    }

    /// The end of the input: flush what the decoder holds, and hand the sink back.
    fn finish(self) -> Result<Sink, (Sink, io::Error)> {
        match self {
            Input::Plain(s) => Ok(s),
            Input::Flate(d) => d.finish(),
            Input::Brotli(mut d) => match d.flush() {
                Ok(()) => d.into_inner().map_err(|s| {
                    let e =
                        io::Error::new(io::ErrorKind::UnexpectedEof, "brotli stream ended early");
                    (s, e)
                }),
                Err(e) => Err((std::mem::replace(d.get_mut(), Sink::empty()), e)),
            },
            Input::Zstd(mut d) => match d.finish() {
                Ok(()) => Ok(d.into_inner().0),
                Err(e) => Err((std::mem::replace(d.writer_mut(), Sink::empty()), e)),
            },
        }
    }
}

/// A body being read: the decoded bytes so far, the bytes that came over the wire.
pub(crate) struct Body {
    input: Input,
    /// The encoding that is decoded (its header is then taken off the answer).
    encoding: Option<String>,
    wire: u64,
    /// The length `Content-Length` announced.
    announced: Option<u64>,
    /// Neither a length nor chunks: the server's close ends the body.
    until_close: bool,
    /// The wire size went over the limit and the reading stopped there.
    wire_over: bool,
}

impl Body {
    /// Ready to read the body of `headers`' answer, at most `limit` bytes on the wire and
    /// once decoded. An announced length over the limit fails at once (for an encoded body
    /// that is the encoded length: its decoded form is longer still).
    /// `truncate`: a body over the limit is cut there ([`BodyError::Full`] ends the reading,
    /// [`Body::end`] makes the answer of it) instead of failing.
    pub(crate) fn new(
        headers: &HeaderMap,
        limit: usize,
        bodyless: bool,
        truncate: bool,
    ) -> Result<Self, BodyError> {
        let announced = headers
            .get(CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.trim().parse::<u64>().ok())
            .filter(|_| !bodyless);
        if !truncate && announced.is_some_and(|n| n > limit as u64) {
            return Err(BodyError::TooLarge(Over::Announced));
        }
        // Codings on several lines were applied in turn, as a comma list's are; one is
        // all that is decoded here, so such a body is kept as it came, headers and all,
        // as one in an encoding we do not know is.
        let mut codings = headers.get_all(CONTENT_ENCODING);
        let encoding = match (codings.next(), codings.next()) {
            (Some(one), None) => one.to_str().ok(),
            _ => None,
        }
        .filter(|_| !bodyless);
        let capacity = announced.map_or(0, |n| usize::try_from(n).unwrap_or(usize::MAX));
        let sink = Sink {
            buf: BytesMut::with_capacity(capacity.min(limit)),
            limit,
            over: false,
            truncate,
        };
        let (input, decodes) = Input::new(encoding, sink);
        Ok(Self {
            input,
            encoding: encoding.filter(|_| decodes).map(str::to_owned),
            wire: 0,
            announced,
            until_close: !bodyless
                && announced.is_none()
                && !headers.contains_key(TRANSFER_ENCODING),
            wire_over: false,
        })
    }

    /// Take one chunk as it came over the wire.
    pub(crate) fn append(&mut self, chunk: Result<Bytes, PayloadError>) -> Result<(), BodyError> {
        let chunk = chunk.map_err(|e| match e {
            PayloadError::Overflow => BodyError::TooLarge(Over::Wire),
            e => BodyError::Read(e),
        })?;
        self.wire += chunk.len() as u64;
        let wrote = self.input.write_all(&chunk);
        let decodes = self.encoding.is_some();
        let sink = self.input.sink();
        // The wire size is capped as well, as an announced length is: an encoded body
        // that decodes to little or nothing would otherwise be read as long as it comes.
        if wrote.is_ok() && self.wire > sink.limit as u64 {
            self.wire_over = true;
        }
        let (over, truncate) = (sink.over, sink.truncate);
        match wrote {
            // Whether the decoder passed the sink's refusal on or kept it to itself.
            _ if (over || self.wire_over) && truncate => Err(BodyError::Full),
            _ if over && decodes => Err(BodyError::TooLarge(Over::Decoded)),
            _ if over || self.wire_over => Err(BodyError::TooLarge(Over::Wire)),
            Ok(()) => Ok(()),
            Err(e) => Err(self.undecodable(e)),
        }
    }

    /// The reading ended with `read`: the body ([`Body::finish`]; cut at the limit when a
    /// truncating body filled up), or the failure.
    pub(crate) fn end(self, read: Result<(), BodyError>) -> Result<Finished, BodyError> {
        match read {
            Ok(()) | Err(BodyError::Full) => self.finish(),
            Err(e) => Err(e),
        }
    }

    fn undecodable(&self, error: io::Error) -> BodyError {
        BodyError::Undecodable {
            encoding: self.encoding.clone().unwrap_or_default(),
            error,
        }
    }

    /// The body ended: flush the decoder. A truncating body is cut when its sink refused
    /// bytes, or when the reading stopped at the wire limit before the announced length
    /// (or with none announced): then what fit is the body, whatever the decoder says of
    /// a stream it did not see the end of.
    pub(crate) fn finish(self) -> Result<Finished, BodyError> {
        let unread = self.wire_over && self.announced.is_none_or(|n| self.wire < n);
        let over = if self.encoding.is_some() {
            Over::Decoded
        } else {
            Over::Wire
        };
        // Nothing came: an empty body, whatever its encoding (no decoder takes an empty
        // stream for a whole one).
        let finished = if self.wire == 0 {
            Ok(self.input.into_sink())
        } else {
            self.input.finish()
        };
        let sink = match finished {
            Ok(sink) | Err((sink, _)) if sink.truncate && (sink.over || unread) => sink,
            Ok(sink) if !sink.over => sink,
            Ok(_) | Err((Sink { over: true, .. }, _)) => return Err(BodyError::TooLarge(over)),
            Err((_, error)) => {
                let encoding = self.encoding.unwrap_or_default();
                return Err(
                    if self.until_close && error.kind() == io::ErrorKind::UnexpectedEof {
                        BodyError::Cut { encoding, error }
                    } else {
                        BodyError::Undecodable { encoding, error }
                    },
                );
            }
        };
        Ok(Finished {
            truncated: sink.over || unread,
            body: sink.buf.freeze(),
            wire_bytes: self.wire,
            decoded: self.encoding,
        })
    }

    /// Decoded bytes so far.
    #[cfg(test)]
    fn len(&mut self) -> usize {
        self.input.sink().buf.len()
    }
}

/// A body read whole.
pub(crate) struct Finished {
    /// The body, decoded.
    pub body: Bytes,
    /// The bytes that came over the wire (encoded, if it was).
    pub wire_bytes: u64,
    /// The `Content-Encoding` that was decoded, if any.
    pub decoded: Option<String>,
    /// Cut at the limit, as the fetch asked.
    pub truncated: bool,
}

#[cfg(test)]
mod tests;
