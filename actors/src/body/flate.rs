//! gzip and deflate: the framing around flate2's inflater, read here.

use std::io::{self, Write};

use super::{Sink, PIECE};

/// Where a [`Flate`] stream is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// A gzip member's header, or deflate's first two bytes (which say whether zlib's
    /// header is there).
    Head,
    /// The deflate data.
    Data,
    /// A gzip member's CRC-32 and length.
    Trailer,
    /// Past the end of the stream: what comes is not decoded.
    Rest,
}

/// gzip (RFC 1952) and deflate on flate2's inflater, with the framing around the deflate
/// data read here, as browsers and curl read it:
///
/// - gzip: members one after another are decoded in turn (RFC 1952 §2.2), each checked
///   against its CRC-32 and length. Bytes after the last whole member that do not start
///   another (a newline, zero padding) are not decoded and not an error; they still count
///   in the wire size.
/// - deflate: RFC 9110 §8.4.1.2 says zlib (RFC 1950), and some servers send the bare
///   deflate stream (RFC 1951). The first two bytes tell: a zlib header has compression
///   method 8 and makes a multiple of 31 (RFC 1950 §2.2). Bytes after the stream's end
///   are not decoded, as for gzip.
///
/// flate2's own `write::GzDecoder` decodes one member and refuses anything after it, and
/// its `ZlibDecoder` only zlib.
pub(super) struct Flate {
    pub(super) sink: Sink,
    inflate: flate2::Decompress,
    gzip: bool,
    stage: Stage,
    /// The gzip header or trailer, or deflate's first two bytes, as far as they came.
    held: Vec<u8>,
    /// The CRC-32 and length of the gzip member's decoded bytes.
    crc: flate2::Crc,
    /// gzip members decoded whole.
    members: u32,
    /// The inflater's output, handed to the sink in pieces of at most this.
    out: Box<[u8]>,
}

impl Flate {
    pub(super) fn new(sink: Sink, gzip: bool) -> Self {
        Flate {
            sink,
            inflate: flate2::Decompress::new(false),
            gzip,
            stage: Stage::Head,
            held: Vec::new(),
            crc: flate2::Crc::new(),
            members: 0,
            out: vec![0; PIECE].into_boxed_slice(),
        }
    }

    pub(super) fn write_all(&mut self, mut data: &[u8]) -> io::Result<()> {
        while !data.is_empty() {
            match self.stage {
                Stage::Head if self.gzip => {
                    // A header that came whole in this chunk is read where it is; one in
                    // pieces is gathered in `held`.
                    let had = self.held.len();
                    let parsed = if had == 0 {
                        gzip_header(data)
                    } else {
                        self.held.extend_from_slice(data);
                        gzip_header(&self.held)
                    };
                    match parsed {
                        Ok(Some(len)) => {
                            data = &data[len - had..];
                            self.held.clear();
                            self.stage = Stage::Data;
                        }
                        Ok(None) => {
                            if had == 0 {
                                self.held.extend_from_slice(data);
                            }
                            return Ok(());
                        }
                        // Not another member: the rest is left undecoded.
                        Err(_) if self.members > 0 => {
                            self.held.clear();
                            self.stage = Stage::Rest;
                        }
                        Err(e) => return Err(e),
                    }
                }
                Stage::Head => {
                    let take = data.len().min(2 - self.held.len());
                    self.held.extend_from_slice(&data[..take]);
                    data = &data[take..];
                    if let [cmf, flg] = self.held[..] {
                        let zlib =
                            cmf & 0x0f == 8 && (u16::from(cmf) << 8 | u16::from(flg)) % 31 == 0;
                        self.inflate.reset(zlib);
                        self.stage = Stage::Data;
                        let first = std::mem::take(&mut self.held);
                        self.inflate(&first)?;
                    }
                }
                Stage::Data => {
                    let took = self.inflate(data)?;
                    data = &data[took..];
                }
                Stage::Trailer => {
                    let take = data.len().min(8 - self.held.len());
                    self.held.extend_from_slice(&data[..take]);
                    data = &data[take..];
                    if self.held.len() == 8 {
                        self.end_member()?;
                    }
                }
                Stage::Rest => return Ok(()),
            }
        }
        Ok(())
    }

    /// Inflate what of `input` the deflate stream takes, into the sink; how much it took.
    fn inflate(&mut self, input: &[u8]) -> io::Result<usize> {
        let mut taken = 0;
        loop {
            let (was_in, was_out) = (self.inflate.total_in(), self.inflate.total_out());
            let status = self
                .inflate
                .decompress(
                    &input[taken..],
                    &mut self.out,
                    flate2::FlushDecompress::None,
                )
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
            let took = usize::try_from(self.inflate.total_in() - was_in).unwrap_or(usize::MAX);
            let made = usize::try_from(self.inflate.total_out() - was_out).unwrap_or(usize::MAX);
            taken += took;
            if self.gzip {
                self.crc.update(&self.out[..made]);
            }
            self.sink.write_all(&self.out[..made])?;
            if status == flate2::Status::StreamEnd {
                self.stage = if self.gzip {
                    Stage::Trailer
                } else {
                    Stage::Rest
                };
                return Ok(taken);
            }
            // A full piece may not be all the inflater has for this input.
            if made == self.out.len() {
                continue;
            }
            if taken == input.len() {
                return Ok(taken);
            }
            if took == 0 && made == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "the deflate stream takes no more input",
                ));
            }
        }
    }

    /// A gzip member's trailer came: check it, and be ready for another member.
    fn end_member(&mut self) -> io::Result<()> {
        let word = |at: usize| {
            u32::from_le_bytes([
                self.held[at],
                self.held[at + 1],
                self.held[at + 2],
                self.held[at + 3],
            ])
        };
        if word(0) != self.crc.sum() || word(4) != self.crc.amount() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "a gzip member's CRC-32 or length does not match its data",
            ));
        }
        self.members += 1;
        self.held.clear();
        self.crc.reset();
        self.inflate.reset(false);
        self.stage = Stage::Head;
        Ok(())
    }

    /// The end of the input: the sink, or an unexpected-EOF error if the stream had not
    /// ended (bytes that could begin another gzip member after a whole one are ignored).
    pub(super) fn finish(self) -> Result<Sink, (Sink, io::Error)> {
        let whole = match self.stage {
            Stage::Rest => true,
            Stage::Head => self.gzip && self.members > 0,
            Stage::Data | Stage::Trailer => false,
        };
        if whole {
            return Ok(self.sink);
        }
        let what = match (self.gzip, self.stage) {
            (true, Stage::Head) => "the gzip header is cut short",
            (true, Stage::Trailer) => "the gzip trailer is cut short",
            (false, Stage::Head) => "the deflate stream is cut short after one byte",
            _ => "the deflate data is cut short",
        };
        Err((
            self.sink,
            io::Error::new(io::ErrorKind::UnexpectedEof, what),
        ))
    }
}

/// The longest gzip header taken: real ones hold a file name at most.
const MAX_GZIP_HEADER: usize = 64 * 1024;

/// The length of the gzip member header at the start of `b` (RFC 1952 §2.3), `None` while
/// what came could still be one that is not all there yet.
fn gzip_header(b: &[u8]) -> io::Result<Option<usize>> {
    match gzip_header_len(b)? {
        // A name or comment without its end: the header is read again as each piece
        // comes, so it is kept short.
        None if b.len() > MAX_GZIP_HEADER => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "a gzip header longer than 64 KiB",
        )),
        len => Ok(len),
    }
}

fn gzip_header_len(b: &[u8]) -> io::Result<Option<usize>> {
    let invalid = |what: &str| Err(io::Error::new(io::ErrorKind::InvalidData, what));
    if b.first().is_some_and(|&x| x != 0x1f) || b.get(1).is_some_and(|&x| x != 0x8b) {
        return invalid("not a gzip stream (no gzip magic number)");
    }
    if b.get(2).is_some_and(|&x| x != 8) {
        return invalid("a gzip member of a compression method other than deflate");
    }
    let Some(&flags) = b.get(3) else {
        return Ok(None);
    };
    if flags & 0xe0 != 0 {
        return invalid("a gzip header with reserved flags set");
    }
    // The fixed part: magic, method, flags, time, extra flags, system.
    let mut at = 10;
    // FEXTRA: a length and that many bytes.
    if flags & 0x04 != 0 {
        let Some(&[lo, hi]) = b.get(at..at + 2) else {
            return Ok(None);
        };
        at += 2 + usize::from(u16::from_le_bytes([lo, hi]));
    }
    // FNAME and FCOMMENT: each up to a zero byte.
    for flag in [0x08, 0x10] {
        if flags & flag != 0 {
            let Some(end) = b
                .get(at..)
                .and_then(|rest| rest.iter().position(|&x| x == 0))
            else {
                return Ok(None);
            };
            at += end + 1;
        }
    }
    // FHCRC: two bytes of the header's CRC, not checked.
    if flags & 0x02 != 0 {
        at += 2;
    }
    Ok((b.len() >= at).then_some(at))
}
