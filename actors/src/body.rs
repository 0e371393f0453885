//! Reading an answer's body: within `max_body_bytes` *after decoding*, and on the wire
//! too, into one buffer.
//!
//! Why decode here and not let awc do it: awc decodes each chunk that arrives in one go,
//! so a few kilobytes of brotli or zstd that expand to gigabytes (a decompression bomb)
//! are in memory before any limit can be checked. Here each encoded chunk goes through a
//! streaming decoder that hands its output over in pieces of [`PIECE`] bytes, and the
//! limit is checked on each piece: a bomb ends as `body_too_large` with at most the limit
//! and a piece in memory. gzip and deflate (flate2, pure Rust), brotli (the reference
//! decoder ported to Rust) and zstd (the reference C library) are accepted; the crawler
//! says so in `Accept-Encoding` unless a fetch sets its own.
//!
//! Why one buffer sized from `Content-Length`, not awc's `body()`: that starts empty and
//! doubles as chunks come, so a 32 KiB page cost several reallocations and copies, and
//! with glibc's allocator about one page fault per request (`perf stat -e page-faults`
//! on `bench_raw --body 32768`).

use std::io::Write;

use awc::error::PayloadError;
use awc::http::header::{HeaderMap, CONTENT_ENCODING, CONTENT_LENGTH};
use bytes::{Bytes, BytesMut};

/// What the crawler accepts, in `Accept-Encoding`: each has its decoder here.
pub use exitcrawl_net::ACCEPT_ENCODING;

/// The most a decoder hands over at once.
const PIECE: usize = 32 * 1024;

/// Why a body could not be read whole.
#[derive(Debug)]
pub(crate) enum BodyError {
    /// Larger than the limit once decoded (or as announced).
    TooLarge,
    /// A truncating body reached its limit: not a failure, the end of the reading.
    Full,
    /// It does not decode from its `Content-Encoding`.
    Undecodable {
        /// The encoding.
        encoding: String,
        /// What the decoder said.
        error: std::io::Error,
    },
    /// Reading it off the connection failed (closed early, reset, garbage framing, timed
    /// out): awc's account of it.
    Read(PayloadError),
}

impl std::fmt::Display for BodyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BodyError::TooLarge => f.write_str("the body is larger than the limit"),
            BodyError::Full => f.write_str("the body was cut at the limit"),
            BodyError::Undecodable { encoding, error } => {
                write!(f, "the body does not decode as {encoding}: {error}")
            }
            BodyError::Read(e) => write!(f, "reading the body: {e}"),
        }
    }
}

impl std::error::Error for BodyError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            BodyError::TooLarge | BodyError::Full => None,
            BodyError::Undecodable { error, .. } => Some(error),
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
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        if self.buf.len() + data.len() > self.limit {
            if self.truncate {
                let room = self.limit - self.buf.len();
                self.buf.extend_from_slice(&data[..room]);
            }
            self.over = true;
            return Err(std::io::Error::other("decoded body larger than the limit"));
        }
        self.buf.extend_from_slice(data);
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// How the body is taken in: as it came, or through a decoder.
enum Input {
    Plain(Sink),
    Gzip(flate2::write::GzDecoder<Sink>),
    Deflate(flate2::write::ZlibDecoder<Sink>),
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
            Some("gzip" | "x-gzip") => Input::Gzip(flate2::write::GzDecoder::new(sink)),
            Some("deflate") => Input::Deflate(flate2::write::ZlibDecoder::new(sink)),
            Some("br") => Input::Brotli(Box::new(brotli_decompressor::DecompressorWriter::new(
                sink, PIECE,
            ))),
            Some("zstd") => match zstd::stream::raw::Decoder::new() {
                Ok(d) => Input::Zstd(zstd::stream::zio::Writer::new(sink, d)),
                Err(_) => return (Input::Plain(Sink::empty()), false),
            },
            _ => return (Input::Plain(sink), false),
        };
        (input, true)
    }

    fn sink(&mut self) -> &mut Sink {
        match self {
            Input::Plain(s) => s,
            Input::Gzip(d) => d.get_mut(),
            Input::Deflate(d) => d.get_mut(),
            Input::Brotli(d) => d.get_mut(),
            Input::Zstd(d) => d.writer_mut(),
        }
    }

    fn write_all(&mut self, data: &[u8]) -> std::io::Result<()> {
        match self {
            Input::Plain(s) => s.write_all(data),
            Input::Gzip(d) => d.write_all(data),
            Input::Deflate(d) => d.write_all(data),
            Input::Brotli(d) => d.write_all(data),
            Input::Zstd(d) => d.write_all(data),
        }
    }

    /// The end of the input: flush what the decoder holds, and hand the sink back.
    fn finish(self) -> Result<Sink, (Sink, std::io::Error)> {
        match self {
            Input::Plain(s) => Ok(s),
            Input::Gzip(mut d) => match d.try_finish() {
                Ok(()) => d.finish().map_err(|e| (Sink::empty(), e)),
                Err(e) => Err((std::mem::replace(d.get_mut(), Sink::empty()), e)),
            },
            Input::Deflate(mut d) => match d.try_finish() {
                Ok(()) => d.finish().map_err(|e| (Sink::empty(), e)),
                Err(e) => Err((std::mem::replace(d.get_mut(), Sink::empty()), e)),
            },
            Input::Brotli(mut d) => match d.flush() {
                Ok(()) => d.into_inner().map_err(|s| {
                    let e = std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        "brotli stream ended early",
                    );
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

/// A body being read: the decoded bytes so far, the bytes that came over the wire.
pub(crate) struct Body {
    input: Input,
    /// The encoding that is decoded (its header is then taken off the answer).
    encoding: Option<String>,
    wire: u64,
}

impl Body {
    /// Ready to read the body of `headers`' answer, at most `limit` bytes once decoded.
    /// An announced length over the limit fails at once (for an encoded body that is the
    /// encoded length: its decoded form is longer still).
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
            .and_then(|v| v.to_str().ok()?.parse::<usize>().ok())
            .filter(|_| !bodyless);
        if !truncate && announced.is_some_and(|n| n > limit) {
            return Err(BodyError::TooLarge);
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
        let sink = Sink {
            buf: BytesMut::with_capacity(announced.unwrap_or(0).min(limit)),
            limit,
            over: false,
            truncate,
        };
        let (input, decodes) = Input::new(encoding, sink);
        Ok(Self {
            input,
            encoding: encoding.filter(|_| decodes).map(str::to_owned),
            wire: 0,
        })
    }

    /// Take one chunk as it came over the wire.
    pub(crate) fn append(&mut self, chunk: Result<Bytes, PayloadError>) -> Result<(), BodyError> {
        let chunk = chunk.map_err(|e| match e {
            PayloadError::Overflow => BodyError::TooLarge,
            e => BodyError::Read(e),
        })?;
        self.wire += chunk.len() as u64;
        let wrote = self.input.write_all(&chunk);
        let sink = self.input.sink();
        // The wire size is capped as well, as an announced length is: an encoded body
        // that decodes to little or nothing would otherwise be read as long as it comes.
        if wrote.is_ok() && self.wire > sink.limit as u64 {
            sink.over = true;
        }
        let (over, truncate) = (sink.over, sink.truncate);
        match wrote {
            // Whether the decoder passed the sink's refusal on or kept it to itself.
            _ if over && truncate => Err(BodyError::Full),
            _ if over => Err(BodyError::TooLarge),
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

    fn undecodable(&self, error: std::io::Error) -> BodyError {
        BodyError::Undecodable {
            encoding: self.encoding.clone().unwrap_or_default(),
            error,
        }
    }

    /// The body ended: flush the decoder. A truncating body that filled up is what fit
    /// (the decoder's flush into the full sink fails, as it should).
    pub(crate) fn finish(self) -> Result<Finished, BodyError> {
        let sink = match self.input.finish() {
            Ok(sink) | Err((sink, _)) if sink.over && sink.truncate => sink,
            Ok(sink) if !sink.over => sink,
            Ok(_) => return Err(BodyError::TooLarge),
            Err((sink, _)) if sink.over => return Err(BodyError::TooLarge),
            Err((_, error)) => {
                return Err(BodyError::Undecodable {
                    encoding: self.encoding.unwrap_or_default(),
                    error,
                })
            }
        };
        Ok(Finished {
            truncated: sink.over,
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
mod tests {
    use super::*;
    use awc::http::header::HeaderValue;

    fn headers(encoding: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(CONTENT_ENCODING, HeaderValue::from_str(encoding).unwrap());
        h
    }

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn a_truncating_body_keeps_its_first_bytes_and_says_it_was_cut() {
        let page = b"0123456789".repeat(100);
        // Plain, a length announced over the limit: no failure, the first 64 bytes.
        let mut h = HeaderMap::new();
        h.insert(CONTENT_LENGTH, HeaderValue::from_static("1000"));
        let mut body = Body::new(&h, 64, false, true).unwrap();
        let read = body.append(Ok(Bytes::from(page.clone())));
        assert!(matches!(read, Err(BodyError::Full)));
        let f = body.end(read).unwrap();
        assert_eq!((&f.body[..], f.truncated), (&page[..64], true));
        // Gzip: the decoded prefix.
        let mut body = Body::new(&headers("gzip"), 100, false, true).unwrap();
        let read = body.append(Ok(Bytes::from(gzip(&page))));
        let f = body.end(read).unwrap();
        assert_eq!((&f.body[..], f.truncated), (&page[..100], true));
        // Under the limit: whole, not cut.
        let mut body = Body::new(&HeaderMap::new(), 5000, false, true).unwrap();
        let read = body.append(Ok(Bytes::from(page.clone())));
        let f = body.end(read).unwrap();
        assert_eq!((f.body.len(), f.truncated), (1000, false));
        // Without truncation the same body over the limit fails.
        assert!(matches!(
            Body::new(&h, 64, false, false),
            Err(BodyError::TooLarge)
        ));
    }

    #[test]
    fn gzip_and_zstd_bodies_decode_in_any_chunking() {
        let page = b"<html>".repeat(5000);
        for (enc, data) in [
            ("gzip", gzip(&page)),
            ("zstd", zstd::stream::encode_all(&page[..], 3).unwrap()),
        ] {
            for chunk in [1, 7, 4096, data.len()] {
                let mut b = Body::new(&headers(enc), 1 << 20, false, false).unwrap();
                for c in data.chunks(chunk) {
                    b.append(Ok(Bytes::copy_from_slice(c))).unwrap();
                }
                let f = b.finish().unwrap();
                assert_eq!(f.body, page[..], "{enc} in chunks of {chunk}");
                assert_eq!(f.wire_bytes, data.len() as u64);
                assert_eq!(f.decoded.as_deref(), Some(enc));
            }
        }
    }

    #[test]
    fn a_bomb_stops_at_the_limit_with_bounded_memory() {
        // 16 MiB of zeros in about 16 KiB of gzip, 1 MiB allowed.
        let bomb = gzip(&vec![0u8; 16 << 20]);
        let mut b = Body::new(&headers("gzip"), 1 << 20, false, false).unwrap();
        let mut failed = false;
        for c in bomb.chunks(16 * 1024) {
            if b.append(Ok(Bytes::copy_from_slice(c))).is_err() {
                failed = true;
                break;
            }
            assert!(b.len() <= 1 << 20);
        }
        assert!(failed, "the bomb must end as too large");
    }

    #[test]
    fn an_encoded_body_is_capped_on_the_wire_too() {
        // A gzip header and empty stored blocks: nothing decoded, 100 bytes on the wire.
        let mut wire = vec![0x1f, 0x8b, 0x08, 0, 0, 0, 0, 0, 0, 0xff];
        wire.extend([0u8, 0, 0, 0xff, 0xff].repeat(18));
        let mut b = Body::new(&headers("gzip"), 64, false, false).unwrap();
        let r = b.append(Ok(Bytes::from(wire.clone())));
        assert!(matches!(r, Err(BodyError::TooLarge)), "{r:?}");
        // Truncating: the reading ends there, and the answer says it was cut.
        let mut b = Body::new(&headers("gzip"), 64, false, true).unwrap();
        let r = b.append(Ok(Bytes::from(wire)));
        assert!(matches!(r, Err(BodyError::Full)), "{r:?}");
        let f = b.end(r).unwrap();
        assert_eq!((f.body.len(), f.truncated), (0, true));
    }

    #[test]
    fn an_unknown_encoding_is_kept_as_it_came() {
        let mut b = Body::new(&headers("compress"), 100, false, false).unwrap();
        b.append(Ok(Bytes::from_static(b"raw"))).unwrap();
        let f = b.finish().unwrap();
        assert_eq!(f.body, "raw");
        assert_eq!(f.decoded, None);
    }

    #[test]
    fn a_compressed_body_cut_short_is_an_error_not_a_whole_page() {
        // A connection closed mid-stream, with no length to tell: every decoder must say
        // the stream did not end (zstd's writer said nothing of a frame cut short).
        let page = b"<html>".repeat(5000);
        for (enc, data) in [
            ("gzip", gzip(&page)),
            ("zstd", zstd::stream::encode_all(&page[..], 3).unwrap()),
        ] {
            let mut b = Body::new(&headers(enc), 1 << 20, false, false).unwrap();
            b.append(Ok(Bytes::copy_from_slice(&data[..data.len() / 2])))
                .unwrap();
            let r = b.finish();
            assert!(r.is_err(), "{enc}: half a stream read as a whole body");
        }
    }

    #[test]
    fn a_body_that_does_not_decode_is_an_error_not_garbage() {
        let mut b = Body::new(&headers("gzip"), 100, false, false).unwrap();
        let r = b.append(Ok(Bytes::from_static(b"not gzip at all")));
        let r = r.and_then(|()| b.finish().map(|_| ()));
        assert!(matches!(r, Err(BodyError::Undecodable { .. })), "{r:?}");
    }
}
