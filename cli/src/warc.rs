//! WARC 1.1 output (`--warc FILE`): a `warcinfo` record at the start of every file, then
//! a `request` and a `response` record per answer, each record one gzip member (for a
//! `.warc.gz` name; `.warc` is written plain), a new file once the current one reaches
//! `--warc-max-bytes`. Where each answer's two records went (file, offset, length) goes
//! into its JSONL record; the series' files on disk, its lock and where a resumed run goes
//! on are [`crate::warc_series`]'s.
//!
//! Why not a crate: the `warc` crate (0.4) writes records, but builds them from owned
//! buffers with chrono dates and uuid 0.8, and compresses whole streams rather than
//! records; the format itself is a header block and a body, which is all this file writes.
//! The tests read the files back with that crate's parser (an independent reader).
//!
//! Headers of an answer's records: `WARC-Type`, `WARC-Record-ID` (`<urn:uuid:…>`, v4),
//! `WARC-Date` (UTC, seconds), `WARC-Target-URI` (masked like the records),
//! `WARC-IP-Address` (the site's address, when known), `WARC-Warcinfo-ID`,
//! `WARC-Concurrent-To` (the request names its response), `WARC-Block-Digest` and, on the
//! response, `WARC-Payload-Digest` (`sha1:` + base32 of the body as received, transfer
//! coding removed), `Exitcrawl-Exit: name=…; source-ip=…` (the extension field naming
//! the exit), `Content-Type: application/http;msgtype=…`, `Content-Length`. The exit
//! decodes `Content-Encoding` itself (bounded, in the actors crate), so an encoded answer is
//! kept decoded, its encoding named in `Exitcrawl-Content-Encoding` and the headers that
//! described the encoded body (`Content-Encoding`, `Content-Length`) left out.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use flate2::{Compress, Compression, Crc, FlushCompress, Status};

use super::date::warc_date;
use super::output::sync_dir;
use super::warc_series::{start_index, NamedEnds, SeriesLock};

pub use super::warc_series::WarcName;

/// One answer as it goes into the archive.
pub struct Exchange<'a> {
    /// The URL the answer came from (masked).
    pub target_uri: &'a str,
    pub date: SystemTime,
    /// The site's address, when known.
    pub ip: Option<IpAddr>,
    /// `name=…; source-ip=…` of the exit that got the answer.
    pub exit: &'a str,
    /// The request as sent: request line and headers, ending in an empty line.
    pub request: &'a [u8],
    /// The response's status line and headers, ending in an empty line.
    pub response_head: &'a [u8],
    pub body: &'a [u8],
    /// The `Content-Encoding` the body came in, when the exit decoded it.
    pub decoded_from: Option<&'a str>,
    /// SHA-1 of `body`.
    pub payload_sha1: [u8; 20],
}

/// A `Write` that counts what goes through it.
struct Counting<W> {
    inner: W,
    bytes: u64,
}

impl<W: Write> Write for Counting<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.bytes += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// The WARC files of one run.
pub struct WarcWriter {
    name: WarcName,
    index: u32,
    out: Counting<BufWriter<File>>,
    max_bytes: Option<u64>,
    /// The warcinfo record's fields (`application/warc-fields`), the same in every file.
    info: Vec<u8>,
    warcinfo_id: String,
    ids: RecordIds,
    /// `Some` for `.warc.gz`.
    gzip: Option<GzipMembers>,
    /// Files written (the current one included).
    pub files: u32,
    /// Exchanges written, and [`HOLD_AFTER`]'s value.
    exchanges: u64,
    hold_after: Option<u64>,
    /// [`WarcWriter::sync`] was called: the writer keeps its files on the disk.
    syncs: bool,
    /// The current file's directory entry is not synced yet.
    new_file: bool,
    /// Held while the series is written.
    _lock: SeriesLock,
}

/// Where an exchange went: its file's name (without directory) and the bytes its response
/// and request records take there (for `.warc.gz`, their two gzip members).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placed {
    pub file: String,
    pub offset: u64,
    pub length: u64,
}

/// Test hook: the program stops for good (holding its files, its lock, its buffers) right
/// after the exchange numbered by this variable is through to the WARC file, before its
/// record is written, and says so on stderr; a test then kills it (SIGKILL) at exactly
/// that point, which timing alone hits only by luck.
const HOLD_AFTER: &str = "EXITCRAWL_TEST_HOLD_AFTER_WARC_EXCHANGE";

impl WarcWriter {
    /// Start the series `name` (its lock held) and write the first file's warcinfo
    /// record: FILE, truncated, for a new run; for a resumed one, after cutting the last
    /// file there back to what the records account for (`named`, see
    /// [`crate::warc_series::start_index`]), the file after it, or after the last one the
    /// records name. A file an interrupted run left is never appended to, so every file of
    /// the series reads whole. A new run finding later files of the series there refuses
    /// to start: they belong to another run's series, which this run would leave beside
    /// its own, repair as its own on `--resume`, or write over when it rotates.
    pub fn create(
        name: WarcName,
        max_bytes: Option<u64>,
        info: Vec<u8>,
        (resume, named): (bool, &NamedEnds),
        lock: SeriesLock,
    ) -> io::Result<WarcWriter> {
        let mut index = start_index(&name, resume, named)?;
        let out = if index == 0 && !resume {
            open(&name.file(index))?
        } else {
            open_new(&name, &mut index)?
        };
        let gzip = name.gzip.then(GzipMembers::new);
        let mut w = WarcWriter {
            name,
            index,
            out,
            max_bytes,
            info,
            warcinfo_id: String::new(),
            ids: RecordIds::new(),
            gzip,
            files: 1,
            exchanges: 0,
            hold_after: std::env::var(HOLD_AFTER).ok().and_then(|v| v.parse().ok()),
            syncs: false,
            new_file: true,
            _lock: lock,
        };
        w.write_warcinfo()?;
        Ok(w)
    }

    /// The file being written.
    pub fn current(&self) -> PathBuf {
        self.name.file(self.index)
    }

    fn write_warcinfo(&mut self) -> io::Result<()> {
        let id = self.ids.next();
        self.warcinfo_id = id.clone();
        let file_name = self.name.file_name(self.index);
        let date = warc_date(SystemTime::now());
        let headers = [
            ("WARC-Type", "warcinfo"),
            ("WARC-Record-ID", id.as_str()),
            ("WARC-Date", date.as_str()),
            ("WARC-Filename", &file_name),
            ("Content-Type", "application/warc-fields"),
        ];
        let info = std::mem::take(&mut self.info);
        let written = self.write_record(&headers, &[&info]);
        self.info = info;
        written
    }

    /// Write the response and request records of one answer (in the same file); where
    /// they went.
    pub fn write_exchange(&mut self, ex: &Exchange<'_>) -> io::Result<Placed> {
        if self.max_bytes.is_some_and(|m| self.out.bytes >= m) {
            self.rotate()?;
        }
        let offset = self.out.bytes;
        let response_id = self.ids.next();
        let request_id = self.ids.next();
        let date = warc_date(ex.date);
        let ip = ex.ip.map(|ip| ip.to_string());
        let payload = format!("sha1:{}", base32(&ex.payload_sha1));
        let warcinfo = self.warcinfo_id.clone();
        let mut common: Vec<(&str, &str)> = vec![
            ("WARC-Date", &date),
            ("WARC-Target-URI", ex.target_uri),
            ("WARC-Warcinfo-ID", &warcinfo),
        ];
        if let Some(ip) = &ip {
            common.push(("WARC-IP-Address", ip));
        }
        common.push(("Exitcrawl-Exit", ex.exit));

        let mut headers = vec![("WARC-Type", "response"), ("WARC-Record-ID", &response_id)];
        headers.extend_from_slice(&common);
        headers.push(("WARC-Payload-Digest", &payload));
        if let Some(enc) = ex.decoded_from {
            headers.push(("Exitcrawl-Content-Encoding", enc));
        }
        headers.push(("Content-Type", "application/http;msgtype=response"));
        self.write_record(&headers, &[ex.response_head, ex.body])?;

        let mut headers = vec![("WARC-Type", "request"), ("WARC-Record-ID", &request_id)];
        headers.extend_from_slice(&common);
        headers.push(("WARC-Concurrent-To", &response_id));
        headers.push(("Content-Type", "application/http;msgtype=request"));
        self.write_record(&headers, &[ex.request])?;
        // The exchange reaches the file before its record can reach `--out` (whose buffer
        // may go out whenever it fills): killed at any moment, the program leaves no
        // record naming bytes the archive lacks, and `--resume` cuts the archive back to
        // what the records name.
        self.out.flush()?;
        self.exchanges += 1;
        if self.hold_after == Some(self.exchanges) {
            hold(self.exchanges);
        }
        Ok(Placed {
            file: self.name.file_name(self.index),
            offset,
            length: self.out.bytes - offset,
        })
    }

    /// Finish the current file, open the next, and start it with a warcinfo record.
    fn rotate(&mut self) -> io::Result<()> {
        self.out.flush()?;
        if self.syncs {
            self.sync()?;
        }
        self.index += 1;
        self.out = open_new(&self.name, &mut self.index)?;
        self.new_file = true;
        self.files += 1;
        self.write_warcinfo()
    }

    /// One record: the version line, `headers`, the block digest, `Content-Length`, the
    /// block (`parts` one after the other) and the two CRLFs that end a record — as one
    /// gzip member when the name says so.
    fn write_record(&mut self, headers: &[(&str, &str)], parts: &[&[u8]]) -> io::Result<()> {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        let mut block_sha1 = sha1_smol::Sha1::new();
        for p in parts {
            block_sha1.update(p);
        }
        let mut head = String::with_capacity(512);
        head.push_str("WARC/1.1\r\n");
        for (k, v) in headers {
            push_field(&mut head, k, v);
        }
        let digest = format!("sha1:{}", base32(&block_sha1.digest().bytes()));
        push_field(&mut head, "WARC-Block-Digest", &digest);
        push_field(&mut head, "Content-Length", &len.to_string());
        head.push_str("\r\n");
        match self.gzip.as_mut() {
            Some(gz) => gz.write(&mut self.out, head.as_bytes(), parts),
            None => write_parts(&mut self.out, head.as_bytes(), parts),
        }
    }

    /// Flush what is buffered (at the end of a run).
    pub fn finish(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    /// Bring what is written to the disk: the current file's data and, for a file begun
    /// since the last sync, its directory entry. From the first sync on, a file finished by
    /// a rotation is synced before the next one is begun.
    pub fn sync(&mut self) -> io::Result<()> {
        self.syncs = true;
        self.out.flush()?;
        self.out.inner.get_ref().sync_data()?;
        if self.new_file {
            sync_dir(&self.current())?;
            self.new_file = false;
        }
        Ok(())
    }
}

/// See [`HOLD_AFTER`].
fn hold(exchange: u64) -> ! {
    eprintln!("exitcrawl: held after WARC exchange {exchange} ({HOLD_AFTER})");
    loop {
        std::thread::park();
    }
}

fn open(path: &Path) -> io::Result<Counting<BufWriter<File>>> {
    let f = File::create(path)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
    Ok(counting(f))
}

/// File `index` of the series, or the first after it that does not exist yet: a file of
/// the series is never written over (one put there while this run writes the series, by
/// other means than this program, keeps what it holds).
fn open_new(name: &WarcName, index: &mut u32) -> io::Result<Counting<BufWriter<File>>> {
    loop {
        let path = name.file(*index);
        match File::options().write(true).create_new(true).open(&path) {
            Ok(f) => return Ok(counting(f)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => *index += 1,
            Err(e) => return Err(io::Error::new(e.kind(), format!("{}: {e}", path.display()))),
        }
    }
}

fn counting(f: File) -> Counting<BufWriter<File>> {
    Counting {
        inner: BufWriter::with_capacity(64 * 1024, f),
        bytes: 0,
    }
}

/// Records as gzip members with one deflate state for all of them: a fresh state per
/// record (flate2's `GzEncoder`) is a few hundred KiB, which glibc hands out with `mmap`
/// and returns at once — two system calls and the page faults of a whole state per record.
struct GzipMembers {
    deflate: Compress,
    /// The record before and after compression (kept: their capacity is reused).
    plain: Vec<u8>,
    packed: Vec<u8>,
}

/// A gzip member header: deflate, no flags, no time, unknown OS (RFC 1952).
const GZIP_HEADER: [u8; 10] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255];

impl GzipMembers {
    fn new() -> Self {
        GzipMembers {
            deflate: Compress::new(Compression::fast(), false),
            plain: Vec::new(),
            packed: Vec::new(),
        }
    }

    /// `head`, `parts` and the record's closing CRLFs as one gzip member.
    fn write(&mut self, w: &mut impl Write, head: &[u8], parts: &[&[u8]]) -> io::Result<()> {
        self.plain.clear();
        write_parts(&mut self.plain, head, parts)?;
        let mut crc = Crc::new();
        crc.update(&self.plain);
        self.deflate.reset();
        self.packed.clear();
        self.packed.extend_from_slice(&GZIP_HEADER);
        loop {
            let done = usize::try_from(self.deflate.total_in()).unwrap_or(usize::MAX);
            // Stored blocks bound deflate's output: 5 bytes per 64 KiB over the input.
            self.packed
                .reserve(self.plain.len() - done + self.plain.len() / 8192 + 64);
            let status = self
                .deflate
                .compress_vec(&self.plain[done..], &mut self.packed, FlushCompress::Finish)
                .map_err(io::Error::other)?;
            if status == Status::StreamEnd {
                break;
            }
        }
        self.packed.extend_from_slice(&crc.sum().to_le_bytes());
        self.packed.extend_from_slice(&crc.amount().to_le_bytes());
        w.write_all(&self.packed)
    }
}

fn write_parts(w: &mut impl Write, head: &[u8], parts: &[&[u8]]) -> io::Result<()> {
    w.write_all(head)?;
    for p in parts {
        w.write_all(p)?;
    }
    w.write_all(b"\r\n\r\n")
}

/// `name: value\r\n`, with any CR or LF in the value turned into a space (a header value
/// must not end the header block early).
fn push_field(head: &mut String, name: &str, value: &str) {
    head.push_str(name);
    head.push_str(": ");
    head.extend(
        value
            .chars()
            .map(|c| if c == '\r' || c == '\n' { ' ' } else { c }),
    );
    head.push_str("\r\n");
}

/// RFC 4648 base32 (upper case, padded), as WARC digests are written.
pub fn base32(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 32] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
    let mut out = String::with_capacity(bytes.len().div_ceil(5) * 8);
    for chunk in bytes.chunks(5) {
        let mut buf = [0u8; 5];
        buf[..chunk.len()].copy_from_slice(chunk);
        let n = buf.iter().fold(0u64, |acc, b| (acc << 8) | u64::from(*b));
        let chars = (chunk.len() * 8).div_ceil(5);
        for i in 0..8 {
            if i < chars {
                out.push(char::from(ALPHABET[((n >> (35 - 5 * i)) & 31) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Random (version 4) record IDs: a per-process random seed through splitmix64, so IDs
/// never repeat within a run (splitmix64 is a bijection of its counter) and two runs
/// share none but by a 2⁻⁶⁴ chance.
struct RecordIds {
    state: u64,
}

impl RecordIds {
    fn new() -> Self {
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default()
                .as_nanos(),
        );
        h.write_u32(std::process::id());
        RecordIds { state: h.finish() }
    }

    fn split(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// `<urn:uuid:xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx>`
    fn next(&mut self) -> String {
        let hi = self.split();
        let lo = self.split();
        let hi = (hi & !0xF000) | 0x4000; // version 4
        let lo = (lo & !(0b11 << 62)) | (0b10 << 62); // RFC 4122 variant
        format!(
            "<urn:uuid:{:08x}-{:04x}-{:04x}-{:04x}-{:012x}>",
            hi >> 32,
            (hi >> 16) & 0xFFFF,
            hi & 0xFFFF,
            lo >> 48,
            lo & 0xFFFF_FFFF_FFFF
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base32_vectors() {
        // RFC 4648 §10.
        for (i, o) in [
            ("", ""),
            ("f", "MY======"),
            ("fo", "MZXQ===="),
            ("foo", "MZXW6==="),
            ("foob", "MZXW6YQ="),
            ("fooba", "MZXW6YTB"),
            ("foobar", "MZXW6YTBOI======"),
        ] {
            assert_eq!(base32(i.as_bytes()), o, "{i:?}");
        }
        // sha1("") as WARC tools write it.
        let empty = sha1_smol::Sha1::from("").digest().bytes();
        assert_eq!(base32(&empty), "3I42H3S6NNFQ2MSVX7XZKYAYSCX5QBYJ");
    }

    #[test]
    fn ids_are_uuid_v4_and_distinct() {
        let mut ids = RecordIds::new();
        let a = ids.next();
        let b = ids.next();
        assert_ne!(a, b);
        assert_eq!(a.len(), "<urn:uuid:>".len() + 36, "{a}");
        assert_eq!(&a[24..25], "4", "{a}");
        assert!("89ab".contains(&a[29..30]), "{a}");
    }

    #[test]
    fn a_series_is_never_mixed_with_another_runs_files() {
        let dir = std::env::temp_dir().join(format!("warc-series-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("w.warc");
        let name = || WarcName::parse(&file).unwrap();
        // An earlier run's series: w.warc and w-00001.warc.
        std::fs::write(name().file(0), b"").unwrap();
        std::fs::write(name().file(1), b"another run's").unwrap();
        let none = NamedEnds::new();
        let lock = || SeriesLock::take(&name()).unwrap();
        let e = WarcWriter::create(name(), None, Vec::new(), (false, &none), lock())
            .err()
            .expect("refused");
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
        assert!(e.to_string().contains("--resume"), "{e}");
        // Resumed, it goes on after the series; rotating past a file put there meanwhile
        // leaves that file as it was.
        let mut w = WarcWriter::create(name(), Some(1), Vec::new(), (true, &none), lock()).unwrap();
        assert_eq!(w.current(), name().file(2));
        std::fs::write(name().file(3), b"taken").unwrap();
        w.rotate().unwrap();
        assert_eq!(w.current(), name().file(4));
        assert_eq!(std::fs::read(name().file(3)).unwrap(), b"taken");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
