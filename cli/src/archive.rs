//! What is kept of an answer: the record's `final_url`, `content_type` and `sha256`
//! always, and with `--warc` / `--bodies` the page itself.
//!
//! Each answer is written as soon as its fetch settles and then dropped, so memory holds
//! only the bodies of the fetches in flight (at most `crawler.concurrency` ×
//! `crawler.max_body_bytes`), never a backlog. The writes are synchronous on the crawl's
//! thread, like `--out`'s: at a local site's full speed they show in the CPU cost (see docs/cli.md,
//! "Cost of the program"), at a real site's pace they do not.

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::SystemTime;

use exitcrawl::config::Settings;
use exitcrawl::redact::{mask_header, mask_url};
use exitcrawl_actors::FetchResponse;
use exitcrawl_net::DnsCache;
use serde::Serialize;
use sha2::{Digest, Sha256};
use url::Url;

use super::bodies::BodyStore;
use super::warc::{Exchange, Placed, WarcName, WarcWriter};
use super::warc_series::{NamedEnds, SeriesLock};
use super::Failure;

/// The record fields about the answer itself (without one: `null`, the WARC place left
/// out).
#[derive(Debug, Default, Serialize)]
pub struct Kept {
    /// The URL the answer came from (after redirects; the URL itself without one), masked.
    pub final_url: Option<String>,
    /// The answer's `Content-Type` header, as sent.
    pub content_type: Option<String>,
    /// SHA-256 of the body, lower-case hex (`--bodies` names its file so).
    pub sha256: Option<String>,
    /// With `--warc`: the file (name without directory) holding the answer's response
    /// and request records, and the bytes they take there. Left out of records without
    /// an archived answer, so records without `--warc` are as they always are.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warc_file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warc_offset: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warc_length: Option<u64>,
}

/// The outputs for pages: WARC files, the body store, neither or both.
pub struct Archive {
    warc: Option<WarcWriter>,
    bodies: Option<BodyStore>,
    bodies_dir: Option<PathBuf>,
    /// Exit name → source IP (for the WARC extension field).
    exits: HashMap<String, IpAddr>,
    user_agent: String,
    /// `[crawler.headers]` (with `-H`), secret-looking values masked, for the request
    /// records.
    headers: Vec<(String, String)>,
}

/// Where `--warc` and `--bodies` go.
pub struct ArchiveOptions<'a> {
    /// `--warc FILE` and its series' lock, taken when the outputs were checked.
    pub warc: Option<(&'a std::path::Path, SeriesLock)>,
    pub warc_max_bytes: Option<u64>,
    pub bodies: Option<&'a std::path::Path>,
    pub resume: bool,
    /// What the records of `--out` name of the series (`--resume`).
    pub named: &'a NamedEnds,
}

impl Archive {
    /// Open the outputs (an unusable path is an argument error: exit 2).
    pub fn open(o: ArchiveOptions<'_>, settings: &Settings) -> Result<Archive, Failure> {
        // The body store first: making its directory destroys nothing, while the WARC
        // writer truncates the file a run before left, which a refusal must keep.
        let bodies = match o.bodies {
            Some(dir) => Some(
                BodyStore::open(dir)
                    .map_err(|e| Failure::Usage(format!("--bodies {}: {e}", dir.display())))?,
            ),
            None => None,
        };
        let warc = match o.warc {
            Some((path, lock)) => {
                let name = WarcName::parse(path).map_err(Failure::Usage)?;
                let info = warcinfo(settings);
                let resuming = (o.resume, o.named);
                let w = WarcWriter::create(name, o.warc_max_bytes, info, resuming, lock)
                    .map_err(|e| Failure::Usage(format!("--warc {}: {e}", path.display())))?;
                Some(w)
            }
            None => None,
        };
        Ok(Archive {
            warc,
            bodies,
            bodies_dir: o.bodies.map(std::path::Path::to_path_buf),
            exits: exit_ips(settings),
            user_agent: settings.crawler.user_agent.clone(),
            headers: settings
                .crawler
                .headers
                .iter()
                .map(|(n, v)| (n.to_ascii_lowercase(), mask_header(n, v).to_owned()))
                .collect(),
        })
    }

    /// The record fields of `r`, after writing it to the WARC and body outputs. `peer`:
    /// the site's address, for `WARC-IP-Address`. `Err`: an output failed (exit 1).
    pub fn keep(&mut self, r: &FetchResponse, peer: Option<IpAddr>) -> Result<Kept, String> {
        let final_url = mask_url(r.final_url.as_deref().unwrap_or(&r.url));
        let content_type = r
            .headers
            .get(exitcrawl_actors::http::header::CONTENT_TYPE)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
        let sha256 = hex(&Sha256::digest(&r.body));
        if let Some(store) = self.bodies.as_mut() {
            store.put(&sha256, &r.body).map_err(|e| {
                let dir = self
                    .bodies_dir
                    .as_deref()
                    .unwrap_or(std::path::Path::new(""));
                format!("writing --bodies {}: {e}", dir.display())
            })?;
        }
        let (warc_file, warc_offset, warc_length) = match self.write_warc(r, &final_url, peer)? {
            Some(p) => (Some(p.file), Some(p.offset), Some(p.length)),
            None => (None, None, None),
        };
        Ok(Kept {
            final_url: Some(final_url),
            content_type,
            sha256: Some(sha256),
            warc_file,
            warc_offset,
            warc_length,
        })
    }

    /// Write `r`'s exchange to the WARC file, with `--warc`; where it went.
    fn write_warc(
        &mut self,
        r: &FetchResponse,
        target: &str,
        peer: Option<IpAddr>,
    ) -> Result<Option<Placed>, String> {
        let Some(warc) = self.warc.as_mut() else {
            return Ok(None);
        };
        let exit = match self.exits.get(&*r.exit) {
            Some(ip) => format!("name={}; source-ip={ip}", r.exit),
            None => format!("name={}", r.exit),
        };
        // Past a redirect off its origin the exit kept the configured credentials back.
        let sent = self
            .headers
            .iter()
            .filter(|(name, _)| !(r.left_origin && exitcrawl::redact::is_credential(name)));
        let request = request_head(target, &self.user_agent, sent);
        let response_head = response_head(r);
        let ex = Exchange {
            target_uri: target,
            date: SystemTime::now(),
            ip: peer,
            exit: &exit,
            request: request.as_bytes(),
            response_head: &response_head,
            body: &r.body,
            decoded_from: r.content_encoding.as_deref(),
            payload_sha1: sha1_smol::Sha1::from(&r.body[..]).digest().bytes(),
        };
        warc.write_exchange(&ex)
            .map(Some)
            .map_err(|e| format!("writing --warc {}: {e}", warc.current().display()))
    }

    /// With `--warc`: a page's record goes out to `--out` as soon as its exchange is in
    /// the WARC file (see [`crate::warc::WarcWriter::write_exchange`]), so that a kill
    /// leaves at most the page being written archived without a record.
    pub fn flushes_records(&self) -> bool {
        self.warc.is_some()
    }

    /// The WARC file being written, with `--warc`.
    pub fn warc_file(&self) -> Option<PathBuf> {
        self.warc.as_ref().map(WarcWriter::current)
    }

    /// With `--warc`: what is written to the WARC files is on the disk once this returns
    /// (see [`WarcWriter::sync`]). The body files are not synced (see `bodies.rs`).
    pub fn sync(&mut self) -> Result<(), String> {
        match self.warc.as_mut() {
            Some(w) => w
                .sync()
                .map_err(|e| format!("syncing --warc {}: {e}", w.current().display())),
            None => Ok(()),
        }
    }

    /// Flush the WARC file (the body files are whole as soon as they are written).
    pub fn finish(&mut self) -> Result<(), String> {
        match self.warc.as_mut() {
            Some(w) => w
                .finish()
                .map_err(|e| format!("writing --warc {}: {e}", w.current().display())),
            None => Ok(()),
        }
    }
}

/// The warcinfo record's fields.
fn warcinfo(s: &Settings) -> Vec<u8> {
    let robots = if s.crawl.robots { "obey" } else { "ignore" };
    format!(
        "software: exitcrawl/{}\r\nformat: WARC File Format 1.1\r\n\
         conformsTo: http://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/\r\n\
         robots: {robots}\r\nhttp-header-user-agent: {}\r\n",
        env!("CARGO_PKG_VERSION"),
        s.crawler.user_agent
    )
    .into_bytes()
}

fn exit_ips(s: &Settings) -> HashMap<String, IpAddr> {
    s.exits
        .iter()
        .map(|e| (e.name.clone(), e.source_ip))
        .collect()
}

/// The request the exit sent for `target`. awc does not hand back the bytes it wrote, so
/// this is rebuilt from what it sends for a `Fetch::get`: the request line, `host`,
/// `user-agent` and `accept-encoding` (the client's default headers), the configured
/// headers (secret-looking values as `***`; the credentials not, where the answer came
/// off the fetch's origin and they stayed behind): all it sends but the cookies of
/// `[crawler] cookies`, which the exit keeps to itself.
fn request_head<'a>(
    target: &str,
    user_agent: &str,
    headers: impl IntoIterator<Item = &'a (String, String)>,
) -> String {
    let (path, host) = match Url::parse(target) {
        Ok(u) => {
            let mut host = u.host_str().unwrap_or_default().to_string();
            if let Some(p) = u.port() {
                host.push_str(&format!(":{p}"));
            }
            (
                u[url::Position::BeforePath..url::Position::AfterQuery].to_string(),
                host,
            )
        }
        Err(_) => ("/".to_string(), String::new()),
    };
    let mut head = format!(
        "GET {path} HTTP/1.1\r\nhost: {host}\r\n\
         user-agent: {user_agent}\r\naccept-encoding: {}\r\n",
        exitcrawl_actors::ACCEPT_ENCODING
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head + "\r\n"
}

/// The answer's status line and headers as received — less `Transfer-Encoding`, since
/// the body is kept with the transfer coding removed (as `WARC-Payload-Digest` requires).
/// An encoded answer's `Content-Encoding` and `Content-Length` are gone already: the exit
/// decoded its body (the record names the encoding in `Exitcrawl-Content-Encoding`).
fn response_head(r: &FetchResponse) -> Vec<u8> {
    let reason = exitcrawl_actors::http::StatusCode::from_u16(r.status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("");
    let mut head = format!("HTTP/1.1 {} {reason}\r\n", r.status).into_bytes();
    for (name, value) in r.headers.iter() {
        if name == exitcrawl_actors::http::header::TRANSFER_ENCODING {
            continue;
        }
        head.extend_from_slice(name.as_str().as_bytes());
        head.extend_from_slice(b": ");
        head.extend_from_slice(value.as_bytes());
        head.extend_from_slice(b"\r\n");
    }
    head.extend_from_slice(b"\r\n");
    head
}

/// Lower-case hex.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 15)]));
    }
    s
}

/// The site's address for `WARC-IP-Address`, from a DNS cache of the same TTL as the
/// crawler's (an IP-literal host is its own answer): the first address of the exit's
/// family, which is the one its connector tries first.
pub struct Resolver {
    dns: DnsCache,
    exits: HashMap<String, IpAddr>,
}

impl Resolver {
    pub fn new(s: &Settings) -> Resolver {
        Resolver {
            dns: DnsCache::new(s.crawler.dns_ttl()),
            exits: exit_ips(s),
        }
    }

    pub async fn peer(&self, r: &FetchResponse) -> Option<IpAddr> {
        let url = Url::parse(r.final_url.as_deref().unwrap_or(&r.url)).ok()?;
        let addrs = self.dns.lookup(url.host_str()?).await.ok()?;
        let v4 = self.exits.get(&*r.exit).is_none_or(IpAddr::is_ipv4);
        addrs
            .iter()
            .find(|a| a.is_ipv4() == v4)
            .or(addrs.first())
            .copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_heads() {
        assert_eq!(
            request_head("http://127.0.0.1:8080/a/b?x=1&token=***", "bot/1", &[]),
            "GET /a/b?x=1&token=*** HTTP/1.1\r\nhost: 127.0.0.1:8080\r\n\
             user-agent: bot/1\r\naccept-encoding: gzip, deflate, br, zstd\r\n\r\n"
        );
        assert!(request_head("https://e.org", "b", &[]).contains("\r\nhost: e.org\r\n"));
        let with = request_head("http://h/", "b", &[("authorization".into(), "***".into())]);
        assert!(with.ends_with("\r\nauthorization: ***\r\n\r\n"), "{with}");
        assert_eq!(hex(&[0, 0xab, 0x10]), "00ab10");
    }
}
