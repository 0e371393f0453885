//! The fault listener: a second listener of every [`TestSite`](crate::TestSite), served by a
//! small hand-written HTTP/1.1 loop on a raw tokio socket so it can misbehave in ways a
//! real HTTP server library will not (close without answering, garbage status lines, a
//! body that trickles or never ends).
//!
//! Which fault a request gets depends only on its path, so a crawl is reproducible:
//! - `/fault/<code>/<tag>` always gets the fault `<code>` names ([`Fault::path`] builds
//!   these, [`Fault::from_path`] reads them; `<tag>` is free, e.g. a URL number);
//! - any other path gets a fault from the seeded [`FaultMix`] of
//!   [`SiteConfig::faults`](crate::SiteConfig::faults), or none;
//! - no fault: 200 with a body of [`SiteConfig::body_size`](crate::SiteConfig::body_size)
//!   bytes, keep-alive.
//!
//! Every request is recorded at arrival (peer, path, time, fault, status sent) in the
//! site's request log and counters, before the fault is acted out, so the log is complete
//! once the client has its answer or error.

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::clock::SiteClock;
use crate::server::Shared;
use crate::RequestRecord;

/// The longest a stalled write, an idle keep-alive connection or (by default, see
/// [`SiteConfig::hang_max`](crate::SiteConfig::hang_max)) a [`Fault::Hang`] holds a
/// connection when the client never gives up. Keeps every server loop bounded.
pub const HANG_MAX: Duration = Duration::from_secs(60);

/// The largest request head the fault listener reads; a longer one closes the connection.
const MAX_HEAD: usize = 16 * 1024;

/// The largest request body the fault listener skips; a longer one closes the connection.
const MAX_REQUEST_BODY: usize = 1024 * 1024;

/// What `Retry-After` a [`Fault::TooMany`] answer carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RetryHint {
    /// No `Retry-After` header.
    None,
    /// `Retry-After: N` (delay in seconds).
    Seconds(u32),
    /// `Retry-After: <HTTP-date>` at least N seconds after the answer is sent (the date is
    /// rounded up to the next whole second, so the wait it asks for is ≥ N s).
    Date(u32),
}

/// One misbehaviour of the fault listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fault {
    /// Read the request, then close the connection without answering.
    Close,
    /// Read the request and never answer; the connection stays open until the client
    /// closes it (its timeout) or [`SiteConfig::hang_max`](crate::SiteConfig::hang_max)
    /// passes ([`HANG_MAX`] by default), then the site closes it.
    Hang,
    /// Answer this status (500, 502, 503, …) with a short body, keep-alive.
    Status(u16),
    /// Answer 429 with the given `Retry-After`.
    TooMany(RetryHint),
    /// Answer 200 announcing (`Content-Length`) and sending a body of this many bytes, in
    /// 16 KiB writes, until the client stops reading (then the connection is dropped).
    BigBody(u64),
    /// Answer 200 with `Content-Length: bytes` and send one byte every `every_ms`
    /// milliseconds (slowloris).
    Trickle {
        /// Body length.
        bytes: u32,
        /// Milliseconds between two bytes.
        every_ms: u32,
    },
    /// Answer a garbage status line (`HTTP/1.1 ??? garbage`), then close.
    Malformed,
    /// Answer 302 with `Location:` the request's own path, for ever.
    RedirectLoop,
    /// Answer 302 with `Location: ftp://<same host:port>/landed/<path>`. A request that
    /// arrives on `/landed/…` means the client followed a non-http redirect.
    RedirectScheme,
    /// Answer 200 with [`ENCODED_PAGE`] compressed in this `Content-Encoding` (a fixture
    /// made once with the reference tools: gzip, brotli, zstd).
    Encoded(Encoding),
    /// Answer 200 with `Content-Encoding: zstd` and a body of about 4 bytes per 128 KiB
    /// that decodes to this many zero bytes: a decompression bomb (1 GiB in 32 KiB).
    ZstdBomb(u64),
}

/// The page [`Fault::Encoded`] answers, before encoding.
pub const ENCODED_PAGE: &[u8] = include_bytes!("../fixtures/page.html");

/// A `Content-Encoding` the fault listener can answer in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Encoding {
    /// `gzip`.
    Gzip,
    /// `br`.
    Brotli,
    /// `zstd`.
    Zstd,
}

impl Encoding {
    /// The header value.
    pub fn name(self) -> &'static str {
        match self {
            Encoding::Gzip => "gzip",
            Encoding::Brotli => "br",
            Encoding::Zstd => "zstd",
        }
    }

    /// [`ENCODED_PAGE`] in this encoding.
    pub fn page(self) -> &'static [u8] {
        match self {
            Encoding::Gzip => include_bytes!("../fixtures/page.html.gz"),
            Encoding::Brotli => include_bytes!("../fixtures/page.html.br"),
            Encoding::Zstd => include_bytes!("../fixtures/page.html.zst"),
        }
    }
}

/// A zstd frame that decodes to `len` zero bytes, built from RLE blocks (RFC 8878 §3.1.1):
/// no compressor needed, about 4 bytes per 128 KiB.
pub fn zstd_zeros(len: u64) -> Vec<u8> {
    const BLOCK: u64 = 128 * 1024;
    let mut out = vec![0x28, 0xB5, 0x2F, 0xFD];
    // Frame header: no content size, no checksum, no dictionary; a 128 KiB window.
    out.push(0x00);
    out.push(7 << 3);
    let mut left = len;
    loop {
        let size = left.min(BLOCK);
        left -= size;
        let last = u32::from(left == 0);
        // Block header, 3 bytes little-endian: last flag, type 1 (RLE), size.
        let header = last | (1 << 1) | ((size as u32) << 3);
        out.extend_from_slice(&header.to_le_bytes()[..3]);
        out.push(0);
        if left == 0 {
            return out;
        }
    }
}

impl Fault {
    /// The path segment naming this fault: `close`, `hang`, `s500`, `429`, `429s2`,
    /// `429d2`, `big1048576`, `trickle50x100`, `garbage`, `loop`, `scheme`, `gzip`, `br`,
    /// `zstd`, `zbomb1073741824`.
    pub fn code(&self) -> String {
        match *self {
            Fault::Close => "close".into(),
            Fault::Hang => "hang".into(),
            Fault::Status(s) => format!("s{s}"),
            Fault::TooMany(RetryHint::None) => "429".into(),
            Fault::TooMany(RetryHint::Seconds(n)) => format!("429s{n}"),
            Fault::TooMany(RetryHint::Date(n)) => format!("429d{n}"),
            Fault::BigBody(n) => format!("big{n}"),
            Fault::Trickle { bytes, every_ms } => format!("trickle{bytes}x{every_ms}"),
            Fault::Malformed => "garbage".into(),
            Fault::RedirectLoop => "loop".into(),
            Fault::RedirectScheme => "scheme".into(),
            Fault::Encoded(e) => e.name().into(),
            Fault::ZstdBomb(n) => format!("zbomb{n}"),
        }
    }

    /// Parse a [`Fault::code`].
    pub fn from_code(code: &str) -> Option<Fault> {
        let num = |s: &str| s.parse::<u64>().ok();
        let small = |s: &str| s.parse::<u32>().ok();
        Some(match code {
            "close" => Fault::Close,
            "hang" => Fault::Hang,
            "429" => Fault::TooMany(RetryHint::None),
            "garbage" => Fault::Malformed,
            "loop" => Fault::RedirectLoop,
            "scheme" => Fault::RedirectScheme,
            "gzip" => Fault::Encoded(Encoding::Gzip),
            "br" => Fault::Encoded(Encoding::Brotli),
            "zstd" => Fault::Encoded(Encoding::Zstd),
            _ => {
                if let Some(n) = code.strip_prefix("429s") {
                    Fault::TooMany(RetryHint::Seconds(small(n)?))
                } else if let Some(n) = code.strip_prefix("429d") {
                    Fault::TooMany(RetryHint::Date(small(n)?))
                } else if let Some(n) = code.strip_prefix("zbomb") {
                    Fault::ZstdBomb(num(n)?)
                } else if let Some(n) = code.strip_prefix("big") {
                    Fault::BigBody(num(n)?)
                } else if let Some(rest) = code.strip_prefix("trickle") {
                    let (b, ms) = rest.split_once('x')?;
                    Fault::Trickle {
                        bytes: small(b)?,
                        every_ms: small(ms)?,
                    }
                } else if let Some(s) = code.strip_prefix('s') {
                    let s = s.parse::<u16>().ok().filter(|s| (100..1000).contains(s))?;
                    Fault::Status(s)
                } else {
                    return None;
                }
            }
        })
    }

    /// `/fault/<code>/<tag>`: a path that always gets this fault.
    pub fn path(&self, tag: impl fmt::Display) -> String {
        format!("/fault/{}/{tag}", self.code())
    }

    /// The fault a `/fault/<code>/…` path names.
    pub fn from_path(path: &str) -> Option<Fault> {
        let rest = path.strip_prefix("/fault/")?;
        let code = rest.split('/').next()?;
        Fault::from_code(code)
    }

    /// The status line's code this fault sends, 0 when it sends none.
    pub fn status(&self) -> u16 {
        match *self {
            Fault::Close | Fault::Hang | Fault::Malformed => 0,
            Fault::Status(s) => s,
            Fault::TooMany(_) => 429,
            Fault::BigBody(_) | Fault::Trickle { .. } | Fault::Encoded(_) | Fault::ZstdBomb(_) => {
                200
            }
            Fault::RedirectLoop | Fault::RedirectScheme => 302,
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.code())
    }
}

/// A seeded mix of faults for paths that do not name one: each path's fault is a pure
/// function of `(seed, path)`, or with `per_request` of `(seed, path, how many times the
/// path was asked before)`.
///
/// A site with broken pages — 5 % of them drop the connection, 2 % hang, 3 % answer 500,
/// every time — is `FaultMix { seed, faults: vec![(Fault::Close, 50), (Fault::Hang, 20),
/// (Fault::Status(500), 30)], per_request: false }`; with `per_request: true` the same
/// shares are a flaky site's, whose every request draws its fault afresh (a page that
/// failed answers on a later try as often as any other). Bound the hangs below the
/// client's timeout with [`SiteConfig::hang_max`](crate::SiteConfig::hang_max) to model a
/// proxy that drops them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FaultMix {
    /// Seed of the choice.
    pub seed: u64,
    /// Each fault with its weight in per mille; what the weights leave of 1000 gets no
    /// fault.
    pub faults: Vec<(Fault, u32)>,
    /// Draw each request's fault afresh (a flaky site) instead of each page's once (a
    /// site with broken pages).
    pub per_request: bool,
}

impl FaultMix {
    /// The fault of the `nth` request (0-based) for `path`, None: answer normally. Without
    /// `per_request`, `nth` is not looked at.
    pub fn pick_nth(&self, path: &str, nth: u32) -> Option<Fault> {
        if self.per_request && nth > 0 {
            return self.pick(&format!("{path}#{nth}"));
        }
        self.pick(path)
    }

    /// The fault of `path`'s first request (None: answer normally).
    pub fn pick(&self, path: &str) -> Option<Fault> {
        // FNV-1a over the path, mixed with the seed by SplitMix64's finaliser.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in path.bytes() {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        let mut z = h ^ self.seed.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        let mut roll = (z % 1000) as u32;
        for (fault, weight) in &self.faults {
            if roll < *weight {
                return Some(*fault);
            }
            roll -= weight;
        }
        None
    }
}

/// The fault the `nth` request for a path gets from `mix` (explicit `/fault/…` paths
/// first).
pub(crate) fn fault_for(mix: Option<&FaultMix>, path: &str, nth: u32) -> Option<Fault> {
    if path.starts_with("/fault/") {
        return Fault::from_path(path);
    }
    mix.and_then(|m| m.pick_nth(path, nth))
}

/// Accept loop of the fault listener: runs until the System stops.
pub(crate) async fn serve(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(conn) => conn,
            Err(e) => {
                tracing::warn!(error = %e, "test site fault listener: accept failed");
                actix_rt::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        shared.count_connection(peer.ip());
        let _ = stream.set_nodelay(true);
        let shared = Arc::clone(&shared);
        actix_rt::spawn(async move {
            let port = shared.fault_port();
            if let Err(e) = connection(stream, peer, port, &shared).await {
                tracing::debug!(%peer, error = %e, "test site fault listener: connection ended");
            }
        });
    }
}

/// One parsed request head.
struct Head {
    path: String,
    target: String,
    close: bool,
    body_len: usize,
}

fn parse_head(head: &[u8]) -> Option<Head> {
    let text = std::str::from_utf8(head).ok()?;
    let mut lines = text.split("\r\n");
    let mut parts = lines.next()?.split_ascii_whitespace();
    let _method = parts.next()?;
    let target = parts.next()?.to_owned();
    let version = parts.next()?;
    let mut close = version == "HTTP/1.0";
    let mut body_len = 0;
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("connection") {
            close = value.eq_ignore_ascii_case("close");
        } else if name.eq_ignore_ascii_case("content-length") {
            body_len = value.parse().ok()?;
        }
    }
    // Origin form or absolute form: keep the path only.
    let path_start = if target.starts_with('/') {
        0
    } else {
        target
            .find("://")
            .and_then(|i| target[i + 3..].find('/').map(|j| i + 3 + j))
            .unwrap_or(target.len())
    };
    let path = target[path_start..]
        .split(['?', '#'])
        .next()
        .unwrap_or("/")
        .to_owned();
    Some(Head {
        path: if path.is_empty() { "/".into() } else { path },
        target,
        close,
        body_len,
    })
}

fn find_head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4)
}

fn response_head(
    status: u16,
    reason: &str,
    len: u64,
    close: bool,
    extra: &[(&str, &str)],
) -> Vec<u8> {
    let mut h = format!("HTTP/1.1 {status} {reason}\r\ncontent-length: {len}\r\n");
    for (k, v) in extra {
        h.push_str(k);
        h.push_str(": ");
        h.push_str(v);
        h.push_str("\r\n");
    }
    if close {
        h.push_str("connection: close\r\n");
    }
    h.push_str("\r\n");
    h.into_bytes()
}

async fn write_all(stream: &mut TcpStream, bytes: &[u8]) -> std::io::Result<()> {
    match tokio::time::timeout(HANG_MAX, stream.write_all(bytes)).await {
        Ok(r) => r,
        Err(_) => Err(std::io::ErrorKind::TimedOut.into()),
    }
}

/// Serve one connection: requests in a row (keep-alive) until a fault ends it, the client
/// closes, or a head is malformed.
async fn connection(
    mut stream: TcpStream,
    peer: SocketAddr,
    port: u16,
    shared: &Shared,
) -> std::io::Result<()> {
    let mut buf: Vec<u8> = Vec::with_capacity(2048);
    loop {
        let Some((head, arrived)) = read_request(&mut stream, &mut buf, shared.clock).await? else {
            return Ok(());
        };
        let nth = shared.fault_asks(&head.path);
        let fault = fault_for(shared.cfg.faults.as_ref(), &head.path, nth);
        let status = fault.map_or(200, |f| f.status());
        shared.record_fault_request(peer.ip(), &head.path, arrived, fault, status);
        let close = head.close;
        if !answer(&mut stream, &head, fault, port, shared).await? {
            return Ok(());
        }
        if close {
            return Ok(());
        }
    }
}

/// Read the next request from `buf` and the stream: its head (bounded) and when it
/// arrived; its body is skipped (the crawler's GETs have none). `None`: the connection
/// ends (closed, silent for `HANG_MAX`, or a head too long or malformed).
async fn read_request(
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
    clock: SiteClock,
) -> std::io::Result<Option<(Head, Instant)>> {
    // Read one request head (bounded).
    let end = loop {
        if let Some(end) = find_head_end(buf) {
            break end;
        }
        if buf.len() > MAX_HEAD {
            return Ok(None);
        }
        let mut chunk = [0u8; 4096];
        let n = match tokio::time::timeout(HANG_MAX, stream.read(&mut chunk)).await {
            Ok(r) => r?,
            Err(_) => return Ok(None),
        };
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let arrived = clock.now();
    let Some(head) = parse_head(&buf[..end]) else {
        return Ok(None);
    };
    if head.body_len > MAX_REQUEST_BODY {
        return Ok(None);
    }
    // Skip the request body (the crawler's GETs have none).
    while buf.len() < end + head.body_len {
        let mut chunk = [0u8; 4096];
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    buf.drain(..end + head.body_len);
    Ok(Some((head, arrived)))
}

/// Answer one request: 200 with the site's body, or what `fault` says. `Ok(false)`: the
/// fault ends the connection.
async fn answer(
    stream: &mut TcpStream,
    head: &Head,
    fault: Option<Fault>,
    port: u16,
    shared: &Shared,
) -> std::io::Result<bool> {
    let close = head.close;
    match fault {
        None => {
            let mut out = response_head(
                200,
                "OK",
                shared.body.len() as u64,
                close,
                &[("content-type", "application/octet-stream")],
            );
            out.extend_from_slice(&shared.body);
            write_all(stream, &out).await?;
        }
        Some(Fault::Close) => return Ok(false),
        Some(Fault::Hang) => {
            hang(stream, shared.cfg.hang_max).await;
            return Ok(false);
        }
        Some(Fault::Status(s)) => {
            let body = format!("fault: status {s}\n");
            let mut out = response_head(s, "Fault", body.len() as u64, close, &[]);
            out.extend_from_slice(body.as_bytes());
            write_all(stream, &out).await?;
        }
        Some(Fault::TooMany(hint)) => {
            let value = retry_after(hint);
            let body = b"too many requests\n";
            let extra: Vec<(&str, &str)> = value
                .as_deref()
                .map(|v| vec![("retry-after", v)])
                .unwrap_or_default();
            let mut out = response_head(429, "Too Many Requests", body.len() as u64, close, &extra);
            out.extend_from_slice(body);
            write_all(stream, &out).await?;
        }
        Some(Fault::BigBody(n)) => {
            write_all(stream, &response_head(200, "OK", n, close, &[])).await?;
            let chunk = [b'b'; 16 * 1024];
            let mut left = n;
            while left > 0 {
                let k = left.min(chunk.len() as u64) as usize;
                write_all(stream, &chunk[..k]).await?;
                shared.fault_bytes.fetch_add(k as u64, Ordering::Relaxed);
                left -= k as u64;
            }
        }
        Some(Fault::Encoded(e)) => {
            let extra = [
                ("content-encoding", e.name()),
                ("content-type", "text/html"),
            ];
            write_counted_body(stream, e.page(), close, &extra, shared).await?;
        }
        Some(Fault::ZstdBomb(n)) => {
            let body = zstd_zeros(n);
            let extra = [("content-encoding", "zstd")];
            write_counted_body(stream, &body, close, &extra, shared).await?;
        }
        Some(Fault::Trickle { bytes, every_ms }) => {
            let h = response_head(200, "OK", u64::from(bytes), close, &[]);
            write_all(stream, &h).await?;
            for _ in 0..bytes {
                actix_rt::time::sleep(Duration::from_millis(u64::from(every_ms))).await;
                write_all(stream, b"t").await?;
                shared.fault_bytes.fetch_add(1, Ordering::Relaxed);
            }
        }
        Some(Fault::Malformed) => {
            write_all(
                stream,
                b"HTTP/1.1 ??? garbage\r\nthis is not a header\r\n\r\n",
            )
            .await?;
            return Ok(false);
        }
        Some(Fault::RedirectLoop) => {
            let out = response_head(302, "Found", 0, close, &[("location", &head.target)]);
            write_all(stream, &out).await?;
        }
        Some(Fault::RedirectScheme) => {
            let location = format!("ftp://127.0.0.1:{port}/landed{}", head.path);
            let out = response_head(302, "Found", 0, close, &[("location", &location)]);
            write_all(stream, &out).await?;
        }
    }
    Ok(true)
}

/// Read (and drop) whatever comes until the client closes or `hang_max`.
async fn hang(stream: &mut TcpStream, hang_max: Duration) {
    let deadline = tokio::time::Instant::now() + hang_max;
    let mut scratch = [0u8; 1024];
    while let Ok(Ok(n)) = tokio::time::timeout_at(deadline, stream.read(&mut scratch)).await {
        if n == 0 {
            break;
        }
    }
}

/// The Retry-After value of a 429 fault, if it has one.
fn retry_after(hint: RetryHint) -> Option<String> {
    match hint {
        RetryHint::None => None,
        RetryHint::Seconds(n) => Some(n.to_string()),
        RetryHint::Date(n) => {
            // HTTP-dates have whole seconds: round up so the wait is ≥ n s.
            let now = SystemTime::now();
            let since = now
                .duration_since(SystemTime::UNIX_EPOCH)
                .unwrap_or_default();
            let up = Duration::from_secs(since.as_secs() + 1 + u64::from(n));
            Some(httpdate::fmt_http_date(SystemTime::UNIX_EPOCH + up))
        }
    }
}

/// A 200 with `body` (and the `extra` headers), its bytes counted in `fault_bytes`.
async fn write_counted_body(
    stream: &mut TcpStream,
    body: &[u8],
    close: bool,
    extra: &[(&str, &str)],
    shared: &Shared,
) -> std::io::Result<()> {
    let mut out = response_head(200, "OK", body.len() as u64, close, extra);
    out.extend_from_slice(body);
    write_all(stream, &out).await?;
    shared
        .fault_bytes
        .fetch_add(body.len() as u64, Ordering::Relaxed);
    Ok(())
}

/// A request the fault listener saw, for [`Shared::record_fault_request`].
pub(crate) fn record(
    peer: IpAddr,
    path: &str,
    arrived: Instant,
    fault: Option<Fault>,
    status: u16,
) -> RequestRecord {
    RequestRecord {
        peer,
        // The fault listener parses only the request line's path.
        method: String::new(),
        headers: Vec::new(),
        path: path.to_owned(),
        arrived,
        status,
        fault,
        latency: Duration::ZERO,
        queued: Duration::ZERO,
    }
}
