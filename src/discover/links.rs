//! Link extraction: `<a href>` (and `<base href>`) from fetched HTML.
//!
//! Regexes over HTML get comments, `<script>` bodies, entities (`&amp;`) and unquoted
//! attributes wrong, so we use a tokenizer that follows the WHATWG spec where links are
//! concerned: our own, [`super::html`], a loop over an explicit state. html5gum 0.9, the
//! spec tokenizer on crates.io, recurses once per `name="value"` and aborts the process on
//! a tag with tens of thousands of them (see [`super::html`] for the figures, what ours
//! covers and what it does not). We only need start tags and one attribute, so a tokenizer
//! is enough; no DOM is built.
//!
//! Links resolve against the first `<base href>` (itself resolved against the page URL),
//! else the page URL, as browsers do — the base applies to links before it as well.
//! Output is in document order, without duplicates, capped at [`MAX_LINKS_PER_PAGE`].

use std::collections::HashSet;

use url::Url;

use super::html::{tokenize, Attribute, Visitor};
use super::normalize::resolve;

/// Default cap on the links taken from one page (hostile or generated pages can hold
/// millions). Raw `href`s past the cap are not even collected.
pub const MAX_LINKS_PER_PAGE: usize = 10_000;

/// Links of `<a href>` in `html`, resolved and normalised, at most [`MAX_LINKS_PER_PAGE`].
pub fn extract_links(html: &[u8], page_url: &Url) -> Vec<Url> {
    extract_links_capped(html, page_url, MAX_LINKS_PER_PAGE)
}

/// [`extract_links`], and how many `<a href>` past the cap were left out (a crawl counts
/// them: a page that hit the cap is not crawled whole).
pub fn extract_links_counted(html: &[u8], page_url: &Url) -> (Vec<Url>, u64) {
    let (hrefs, base_href, over) = collect(html, MAX_LINKS_PER_PAGE);
    (resolve_all(&hrefs, base_href, page_url), over)
}

/// [`extract_links`] with an explicit cap.
pub fn extract_links_capped(html: &[u8], page_url: &Url, cap: usize) -> Vec<Url> {
    let (hrefs, base_href) = raw_links(html, cap);
    resolve_all(&hrefs, base_href, page_url)
}

fn resolve_all(hrefs: &[String], base_href: Option<String>, page_url: &Url) -> Vec<Url> {
    let base = base_href
        .and_then(|b| page_url.join(b.trim()).ok())
        .unwrap_or_else(|| page_url.clone());
    let mut seen = HashSet::new();
    hrefs
        .iter()
        .filter_map(|h| resolve(&base, h))
        .filter(|u| seen.insert(u.as_str().to_owned()))
        .collect()
}

/// The raw `href` values, as written in the page with character references decoded and
/// unresolved: of the `<a>` tags (the first `href` of each, at most `cap`, in document
/// order, duplicates kept, `""` for `<a href>`), and of the first `<base>` that has one.
/// Bytes that are not UTF-8 become U+FFFD. [`extract_links_capped`] resolves these; the
/// tests compare them with other tokenizers.
pub fn raw_links(html: &[u8], cap: usize) -> (Vec<String>, Option<String>) {
    let (hrefs, base, _) = collect(html, cap);
    (hrefs, base)
}

/// The raw hrefs, the base, and the `<a href>` past the cap.
fn collect(html: &[u8], cap: usize) -> (Vec<String>, Option<String>, u64) {
    let mut links = Links {
        cap,
        hrefs: Vec::new(),
        base: None,
        over: 0,
    };
    tokenize(html, &mut links);
    (links.hrefs, links.base, links.over)
}

struct Links {
    cap: usize,
    hrefs: Vec<String>,
    base: Option<String>,
    /// `<a href>` seen once `hrefs` was full.
    over: u64,
}

impl Visitor for Links {
    fn wants(&mut self, tag: &[u8], attr: &[u8]) -> bool {
        attr == b"href"
            && match tag {
                b"a" if self.hrefs.len() < self.cap => true,
                b"a" => {
                    self.over += 1;
                    false
                }
                b"base" => self.base.is_none(),
                _ => false,
            }
    }

    fn start_tag(&mut self, tag: &[u8], attrs: &[Attribute]) {
        // Only `href` is asked for, so it is the one attribute if any.
        let Some(href) = attrs.first() else { return };
        let href = String::from_utf8_lossy(&href.value).into_owned();
        if tag == b"a" {
            self.hrefs.push(href);
        } else {
            self.base = Some(href);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn links(html: &str, page: &str) -> Vec<String> {
        let page = Url::parse(page).unwrap();
        extract_links(html.as_bytes(), &page)
            .into_iter()
            .map(String::from)
            .collect()
    }

    #[test]
    fn links_past_the_cap_are_counted_not_taken() {
        let page = Url::parse("http://h.test/").unwrap();
        let html: String = (0..MAX_LINKS_PER_PAGE + 5)
            .map(|i| format!("<a href=\"/{i}\">x</a>"))
            .collect();
        let (links, over) = extract_links_counted(html.as_bytes(), &page);
        assert_eq!(links.len(), MAX_LINKS_PER_PAGE);
        assert_eq!(over, 5);
        let (links, over) = extract_links_counted(b"<a href=/a>a</a><a>no href</a>", &page);
        assert_eq!((links.len(), over), (1, 0));
    }

    #[test]
    fn extracts_resolves_and_dedupes() {
        let html = r#"<html><body>
            <a href="b.html">b</a> <A HREF='/c?x=1&amp;y=2#f'>c</A>
            <a href=../d.html>d</a> <a href="b.html#again">dup</a>
            <a name="no-href">x</a> <a href="javascript:void(0)">js</a>
            <a href="mailto:x@y.z">m</a> <a href="//other.org/e">e</a>
            <!-- <a href="/commented">no</a> -->
            <script>var s = '<a href="/in-script">no</a>';</script>
            <link href="/style.css"> <img src="/i.png">
        </body></html>"#;
        assert_eq!(
            links(html, "http://e.com/dir/a.html"),
            vec![
                "http://e.com/dir/b.html",
                "http://e.com/c?x=1&y=2",
                "http://e.com/d.html",
                "http://other.org/e",
            ]
        );
    }

    #[test]
    fn base_href_applies_to_all_links() {
        let html = r#"<a href="x.html">x</a><base href="/sub/"><base href="/ignored/">
            <a href="y.html">y</a>"#;
        assert_eq!(
            links(html, "http://e.com/dir/a.html"),
            vec!["http://e.com/sub/x.html", "http://e.com/sub/y.html"]
        );
        // absolute base on another host
        let html = r#"<base href="https://cdn.e.com/r/"><a href="z">z</a>"#;
        assert_eq!(links(html, "http://e.com/"), vec!["https://cdn.e.com/r/z"]);
    }

    #[test]
    fn capped_and_tolerates_garbage() {
        let mut html = String::new();
        for i in 0..100 {
            html.push_str(&format!("<a href=/p{i}>"));
        }
        let page = Url::parse("http://e.com/").unwrap();
        assert_eq!(extract_links_capped(html.as_bytes(), &page, 7).len(), 7);
        let junk = b"\xff\xfe<a href=\"/ok\"><<<>>><a href=\"/\xc3\x28bad\"></a";
        let got = extract_links(junk, &page);
        assert_eq!(got[0].as_str(), "http://e.com/ok");
        assert!(extract_links(b"", &page).is_empty());
    }

    fn raw(html: &[u8]) -> (Vec<String>, Option<String>) {
        raw_links(html, MAX_LINKS_PER_PAGE)
    }

    #[test]
    fn raw_hrefs_follow_the_tokenizer_rules() {
        let html = concat!(
            "<A HREF=/1 href=/dup><a href=\"\" href=/dup><a href><a title=t>",
            "<!-- <a href=/comment> --!><a href=/2><!--><a href=/3>",
            "</a href='/end-tag>'><a href='/4'><?pi <a href=/pi><a href=\"/5\"/>",
            "<script><!-- <a href=/script> --></script><a href=/6>",
            "<textarea><a href=/text></textarea><a href=?a=1&copy=2&amp;b=&#x33;&#0;>",
            "<a href=/eof",
        );
        let want = [
            "/1",
            "",
            "",
            "/2",
            "/3",
            "/4",
            "/5",
            "/6",
            "?a=1&copy=2&b=3\u{FFFD}",
        ];
        assert_eq!(
            raw(html.as_bytes()),
            (want.map(String::from).to_vec(), None)
        );
    }

    #[test]
    fn the_first_base_with_an_href_counts() {
        let html = b"<base target=_top><a href=x><base HREF=/b/><base href=/c/>";
        assert_eq!(raw(html), (vec!["x".into()], Some("/b/".into())));
        let page = Url::parse("http://e.com/d/p.html").unwrap();
        assert_eq!(extract_links(html, &page)[0].as_str(), "http://e.com/b/x");
    }

    #[test]
    fn not_utf8_becomes_replacement_characters() {
        let html = b"<a href=\"/\xe9t\xc3\xa9\xff\">";
        assert_eq!(raw(html).0, ["/\u{FFFD}t\u{e9}\u{FFFD}"]);
    }

    #[test]
    fn empty_href_links_to_the_page_and_the_cap_counts_raw_hrefs() {
        let page = Url::parse("http://e.com/d/p.html?q#f").unwrap();
        let got = extract_links(b"<a href=\"\"><a href>", &page);
        assert_eq!(
            got.iter().map(Url::as_str).collect::<Vec<_>>(),
            ["http://e.com/d/p.html?q"]
        );
        // The cap counts raw hrefs, resolvable or not.
        let html = b"<a href=mailto:x><a href=/1><a href=/2>";
        assert_eq!(raw_links(html, 2).0, ["mailto:x", "/1"]);
        assert_eq!(extract_links_capped(html, &page, 2).len(), 1);
    }
}
