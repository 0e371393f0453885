//! Sitemaps (sitemaps.org): the URLs a site lists for crawlers, with their `<lastmod>`.
//!
//! A sitemap is a `<urlset>` of `<url><loc>…</loc><lastmod>…</lastmod></url>` entries,
//! a sitemap index a `<sitemapindex>` of `<sitemap><loc>…</loc></sitemap>` entries naming
//! further sitemaps, or a plain text file of one URL a line. [`parse`] reads any of them
//! from the (already decompressed) body with quick-xml's streaming reader: no tree is
//! built, elements of extensions (`<image:loc>` inside a `<url>`) are passed over, and
//! entities other than XML's five and character references are never expanded (a
//! DOCTYPE cannot make a small file large). Namespace prefixes are ignored.
//!
//! Bounds, as the protocol sets them: at most [`MAX_ENTRIES`] entries a file (the rest
//! are counted in [`Sitemap::dropped`]), `<loc>` under [`MAX_LOC`] characters; and per
//! crawl at most [`MAX_SITEMAPS`] sitemap files ([`Sitemaps`]). Gzip'd sitemaps are
//! recognised by their magic bytes ([`is_gzip`]); decompressing them is the caller's
//! job, within its body limit.

use std::collections::HashSet;

use quick_xml::events::Event;
use quick_xml::Reader;
use url::Url;

/// Most entries read from one file (the protocol's limit).
pub const MAX_ENTRIES: usize = 50_000;
/// `<loc>` values of this many characters or more are skipped (the protocol's limit).
pub const MAX_LOC: usize = 2048;
/// Most sitemap files one crawl reads (indexes and the sitemaps they name together).
pub const MAX_SITEMAPS: usize = 1_000;

/// What kind of file a sitemap was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SitemapKind {
    /// `<urlset>`: the entries are pages.
    UrlSet,
    /// `<sitemapindex>`: the entries are further sitemaps.
    Index,
    /// One URL a line: pages.
    Text,
}

/// One entry: a page (or, in an index, a sitemap) and when it last changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SitemapEntry {
    /// The `<loc>`, whitespace trimmed, entities resolved; not yet parsed as a URL.
    pub loc: String,
    /// The `<lastmod>` as written (a W3C date or date-time), if it looks like one.
    pub lastmod: Option<String>,
}

/// What a sitemap file lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sitemap {
    /// Pages or further sitemaps.
    pub kind: SitemapKind,
    /// The entries, in file order.
    pub entries: Vec<SitemapEntry>,
    /// Entries past [`MAX_ENTRIES`], or without a usable `<loc>`.
    pub dropped: usize,
    /// The file was malformed from this point on (the entries before it are kept).
    pub error: Option<String>,
}

/// Why a body is no sitemap at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SitemapError {
    /// XML whose root is neither `<urlset>` nor `<sitemapindex>`.
    #[error("not a sitemap: the root element is <{0}> (expected <urlset> or <sitemapindex>)")]
    Root(String),
    /// Malformed before any root element.
    #[error("not a sitemap: {0}")]
    Malformed(String),
}

/// Whether `body` is gzip data (a `.xml.gz` sitemap served without `Content-Encoding`).
pub fn is_gzip(body: &[u8]) -> bool {
    body.starts_with(&[0x1f, 0x8b])
}

/// Read a sitemap, sitemap index or text sitemap (see the module doc).
pub fn parse(body: &[u8]) -> Result<Sitemap, SitemapError> {
    let body = body.strip_prefix(b"\xef\xbb\xbf").unwrap_or(body);
    let start = body.iter().position(|b| !b.is_ascii_whitespace());
    match start.map(|i| body[i]) {
        Some(b'<') => parse_xml(body),
        _ => Ok(parse_text(body)),
    }
}

fn parse_text(body: &[u8]) -> Sitemap {
    let mut map = Sitemap {
        kind: SitemapKind::Text,
        entries: Vec::new(),
        dropped: 0,
        error: None,
    };
    for line in String::from_utf8_lossy(body).lines() {
        let line = line.trim();
        let lower = line.get(..8).unwrap_or(line).to_ascii_lowercase();
        if lower.starts_with("http://") || lower.starts_with("https://") {
            map.push(line.to_owned(), None);
        }
    }
    map
}

/// Where the reader is: which element's text it collects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    None,
    Loc,
    Lastmod,
}

fn parse_xml(body: &[u8]) -> Result<Sitemap, SitemapError> {
    let mut reader = Reader::from_reader(body);
    let mut map: Option<Sitemap> = None;
    let mut depth = 0usize;
    let mut in_entry = false;
    let (mut field, mut loc, mut lastmod) = (Field::None, String::new(), String::new());
    loop {
        let event = match reader.read_event() {
            Ok(e) => e,
            Err(e) => {
                let why = format!("{e} at byte {}", reader.error_position());
                return match map {
                    Some(mut m) => {
                        m.error = Some(why);
                        Ok(m)
                    }
                    None => Err(SitemapError::Malformed(why)),
                };
            }
        };
        match event {
            Event::Start(e) => {
                let name = e.local_name();
                let name = name.as_ref();
                match (depth, &map) {
                    (0, _) => map = Some(root(name)?),
                    (1, _) => in_entry = matches!(name, "url" | "sitemap"),
                    (2, Some(_)) if in_entry => {
                        field = match name {
                            "loc" => Field::Loc,
                            "lastmod" => Field::Lastmod,
                            _ => Field::None,
                        };
                    }
                    _ => field = Field::None,
                }
                depth += 1;
            }
            Event::Empty(e) if depth == 0 => {
                // `<urlset/>`: a sitemap that lists nothing.
                return root(e.local_name().as_ref());
            }
            Event::End(_) => {
                depth = depth.saturating_sub(1);
                field = Field::None;
                if depth == 1 && std::mem::take(&mut in_entry) {
                    if let Some(m) = map.as_mut() {
                        let lm = std::mem::take(&mut lastmod);
                        m.push(std::mem::take(&mut loc), Some(lm));
                    }
                }
            }
            Event::Text(t) => collect(field, &t.into_inner(), &mut loc, &mut lastmod),
            Event::CData(t) => collect(field, &t.into_inner(), &mut loc, &mut lastmod),
            Event::GeneralRef(r) => {
                let resolved = match r.resolve_char_ref() {
                    Ok(Some(c)) => Some(c.to_string()),
                    Ok(None) => quick_xml::escape::resolve_predefined_entity(&r.into_inner())
                        .map(str::to_owned),
                    Err(_) => None,
                };
                if let Some(s) = resolved {
                    collect(field, &s, &mut loc, &mut lastmod);
                }
            }
            Event::Eof => break,
            _ => {}
        }
    }
    map.ok_or_else(|| SitemapError::Malformed("no root element".into()))
}

fn root(name: &str) -> Result<Sitemap, SitemapError> {
    let kind = match name {
        "urlset" => SitemapKind::UrlSet,
        "sitemapindex" => SitemapKind::Index,
        other => return Err(SitemapError::Root(other.chars().take(64).collect())),
    };
    Ok(Sitemap {
        kind,
        entries: Vec::new(),
        dropped: 0,
        error: None,
    })
}

/// Text inside `<loc>` or `<lastmod>` goes to its buffer (bounded: a `<loc>` that
/// grows past the limit is dropped at the end of its entry anyway).
fn collect(field: Field, text: &str, loc: &mut String, lastmod: &mut String) {
    let buf = match field {
        Field::Loc => loc,
        Field::Lastmod => lastmod,
        Field::None => return,
    };
    if buf.len() <= MAX_LOC {
        buf.push_str(text);
    }
}

impl Sitemap {
    fn push(&mut self, loc: String, lastmod: Option<String>) {
        let loc = loc.trim();
        if loc.is_empty() || loc.chars().count() >= MAX_LOC || self.entries.len() >= MAX_ENTRIES {
            self.dropped += 1;
            return;
        }
        let lastmod = lastmod.and_then(|l| {
            let l = l.trim();
            is_w3c_date(l).then(|| l.to_owned())
        });
        self.entries.push(SitemapEntry {
            loc: loc.to_owned(),
            lastmod,
        });
    }
}

/// `YYYY`, `YYYY-MM`, `YYYY-MM-DD`, or a date with a time (`T…`, at most 40 characters of
/// digits, `:`, `.`, `+`, `-`, `Z`): what W3C Datetime allows, loosely.
fn is_w3c_date(s: &str) -> bool {
    let b = s.as_bytes();
    let digits =
        |r: std::ops::Range<usize>| b.get(r).is_some_and(|d| d.iter().all(u8::is_ascii_digit));
    if !digits(0..4) || s.len() > 40 {
        return false;
    }
    match s.len() {
        4 => true,
        7 => b[4] == b'-' && digits(5..7),
        10 => b[4] == b'-' && b[7] == b'-' && digits(5..7) && digits(8..10),
        _ => {
            b.len() > 11
                && b[4] == b'-'
                && b[7] == b'-'
                && digits(5..7)
                && digits(8..10)
                && b[10] == b'T'
                && b[11..]
                    .iter()
                    .all(|c| c.is_ascii_digit() || b":.+-Z".contains(c))
        }
    }
}

/// Whether a sitemap at `sitemap` may list `page`: the protocol lets a sitemap speak for
/// its own host only (any scheme or port of it, any path).
pub fn may_list(sitemap: &Url, page: &Url) -> bool {
    sitemap.host_str().is_some()
        && sitemap
            .host_str()
            .zip(page.host_str())
            .is_some_and(|(a, b)| a.eq_ignore_ascii_case(b))
}

/// The sitemap files of one crawl: each read once, at most a number of them.
#[derive(Debug, Clone)]
pub struct Sitemaps {
    seen: HashSet<String>,
    limit: usize,
    refused: u64,
}

impl Default for Sitemaps {
    fn default() -> Self {
        Self::new(MAX_SITEMAPS)
    }
}

impl Sitemaps {
    /// At most `limit` files.
    pub fn new(limit: usize) -> Self {
        Self {
            seen: HashSet::new(),
            limit,
            refused: 0,
        }
    }

    /// Whether `url` is to be read: not read before, and under the limit.
    pub fn admit(&mut self, url: &Url) -> bool {
        if self.seen.contains(url.as_str()) {
            return false;
        }
        if self.seen.len() >= self.limit {
            self.refused += 1;
            return false;
        }
        self.seen.insert(url.as_str().to_owned())
    }

    /// Sitemap files admitted so far.
    pub fn len(&self) -> usize {
        self.seen.len()
    }

    /// Whether none was admitted.
    pub fn is_empty(&self) -> bool {
        self.seen.is_empty()
    }

    /// New sitemap files turned away by the limit.
    pub fn refused(&self) -> u64 {
        self.refused
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn locs(m: &Sitemap) -> Vec<&str> {
        m.entries.iter().map(|e| e.loc.as_str()).collect()
    }

    #[test]
    fn a_urlset_with_lastmod_entities_cdata_and_extensions() {
        let xml = br#"<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"
        xmlns:image="http://www.google.com/schemas/sitemap-image/1.1">
  <url>
    <loc> http://e.com/a?x=1&amp;y=2 </loc>
    <lastmod>2024-05-01</lastmod>
    <changefreq>daily</changefreq>
    <image:image><image:loc>http://e.com/img.png</image:loc></image:image>
  </url>
  <url><loc><![CDATA[http://e.com/b]]></loc><lastmod>2024-05-02T10:00:00+00:00</lastmod></url>
  <url><loc>http://e.com/&#x63;</loc><lastmod>yesterday</lastmod></url>
  <url><lastmod>2024-01-01</lastmod></url>
</urlset>"#;
        let m = parse(xml).unwrap();
        assert_eq!(m.kind, SitemapKind::UrlSet);
        assert_eq!(
            locs(&m),
            ["http://e.com/a?x=1&y=2", "http://e.com/b", "http://e.com/c"]
        );
        let lastmods: Vec<_> = m.entries.iter().map(|e| e.lastmod.as_deref()).collect();
        assert_eq!(
            lastmods,
            [Some("2024-05-01"), Some("2024-05-02T10:00:00+00:00"), None]
        );
        assert_eq!((m.dropped, m.error.as_deref()), (1, None));
    }

    #[test]
    fn an_index_names_further_sitemaps() {
        let xml = b"\xef\xbb\xbf<sm:sitemapindex xmlns:sm=\"http://www.sitemaps.org/schemas/sitemap/0.9\">\
            <sm:sitemap><sm:loc>http://e.com/s1.xml.gz</sm:loc><sm:lastmod>2024</sm:lastmod></sm:sitemap>\
            <sm:sitemap><sm:loc>http://e.com/s2.xml</sm:loc></sm:sitemap></sm:sitemapindex>";
        let m = parse(xml).unwrap();
        assert_eq!(m.kind, SitemapKind::Index);
        assert_eq!(locs(&m), ["http://e.com/s1.xml.gz", "http://e.com/s2.xml"]);
        assert_eq!(m.entries[0].lastmod.as_deref(), Some("2024"));
    }

    #[test]
    fn text_sitemaps_empty_ones_and_what_is_not_a_sitemap() {
        let m =
            parse(b"http://e.com/a\r\n\n  https://e.com/b  \nftp://e.com/c\nnot a url\n").unwrap();
        assert_eq!(m.kind, SitemapKind::Text);
        assert_eq!(locs(&m), ["http://e.com/a", "https://e.com/b"]);
        assert!(parse(b"<urlset/>").unwrap().entries.is_empty());
        assert!(parse(b"").unwrap().entries.is_empty());
        assert_eq!(
            parse(b"<html><body>hi</body></html>"),
            Err(SitemapError::Root("html".into()))
        );
        assert!(matches!(parse(b"<"), Err(SitemapError::Malformed(_))));
    }

    #[test]
    fn a_malformed_tail_keeps_what_came_before_and_entities_stay_small() {
        let m = parse(
            b"<urlset><url><loc>http://e.com/a</loc></url><url><loc>http://e.com/b</loc></oops>",
        )
        .unwrap();
        assert_eq!(locs(&m), ["http://e.com/a"]);
        assert!(m.error.is_some());
        let xml = br#"<!DOCTYPE urlset [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;">]>
            <urlset><url><loc>http://e.com/&b;</loc></url></urlset>"#;
        let m = parse(xml).unwrap();
        assert_eq!(
            locs(&m),
            ["http://e.com/"],
            "custom entities are not expanded"
        );
    }

    #[test]
    fn entries_and_locs_are_bounded() {
        let mut xml = String::from("<urlset>");
        for i in 0..MAX_ENTRIES + 3 {
            xml.push_str(&format!("<url><loc>http://e.com/{i}</loc></url>"));
        }
        xml.push_str(&format!(
            "<url><loc>http://e.com/{}</loc></url></urlset>",
            "x".repeat(MAX_LOC)
        ));
        let m = parse(xml.as_bytes()).unwrap();
        assert_eq!(m.entries.len(), MAX_ENTRIES);
        assert_eq!(m.dropped, 4);
    }

    #[test]
    fn gzip_magic_same_host_rule_and_each_sitemap_once() {
        assert!(is_gzip(&[0x1f, 0x8b, 8, 0]));
        assert!(!is_gzip(b"<urlset>"));
        let u = |s: &str| Url::parse(s).unwrap();
        let sm = u("http://E.com:8080/maps/sitemap.xml");
        assert!(may_list(&sm, &u("https://e.com/anything")));
        assert!(!may_list(&sm, &u("http://other.com/")));
        assert!(!may_list(&sm, &u("http://sub.e.com/")));
        let mut set = Sitemaps::new(2);
        assert!(set.admit(&u("http://e.com/a.xml")));
        assert!(!set.admit(&u("http://e.com/a.xml")));
        assert!(set.admit(&u("http://e.com/b.xml")));
        assert!(!set.admit(&u("http://e.com/c.xml")));
        assert_eq!((set.len(), set.refused()), (2, 1));
    }
}
