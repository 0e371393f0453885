//! A small HTML tokenizer for link discovery: start tags and chosen attributes, nothing else.
//!
//! # Why our own
//! html5gum 0.9 (the newest on crates.io) inlines its state functions into each other
//! (`ControlToken::inline_next_state`), and the chain after-attribute-value →
//! before-attribute-name → attribute-name → before-attribute-value → attribute-value
//! (double-quoted) → after-attribute-value … nests one call deeper per `name="value"`. One tag
//! with many such attributes overflows the stack, and that *aborts* the process — no
//! `catch_unwind` can stop it. In a release build on the 8 MiB main stack 20,000 attributes
//! passed and 30,000 aborted, so a 300 KB page `<a x="1" x="1" …>` (50,000 of them) killed
//! the crawler; in debug 2.4 KB (~200 attributes) overflowed a 2 MiB test thread. A crawler
//! reads hostile pages, so this tokenizer is a loop over an explicit state: constant stack,
//! linear time (10 MB of nested tags in ~0.2 s in release, as fast as html5gum), memory at
//! most proportional to the input (the input is copied once if it holds `\r`; only the
//! values asked for are kept), and a tag with a million attributes is fine.
//!
//! # What it follows of the WHATWG tokenizer
//! <https://html.spec.whatwg.org/multipage/parsing.html#tokenization>, as far as finding
//! start tags and their attributes goes, behaving like html5gum 0.9 with
//! `naively_switch_states(true)`:
//! - input preprocessing: CR LF and lone CR become LF;
//! - `<` + ASCII letter opens a start tag, `</` + letter an end tag (whose attributes are read,
//!   quoted `>` included, and dropped); `</>` is nothing; `<!--` comments end at `-->` or
//!   `--!>`, or at once for `<!-->` and `<!--->`; other `<!…` (DOCTYPE, CDATA outside foreign
//!   content), `<?…` and `</` + non-letter are bogus comments to the next `>`; any other `<`
//!   is text. The comment states for `<!--` inside a comment only change the comment's text
//!   and errors, not where it ends, so they are not modelled;
//! - tag and attribute names are ASCII-lowercased (NUL → U+FFFD); values double-quoted,
//!   single-quoted or unquoted (ending at whitespace or `>`); `/` before `>` is fine; of a
//!   duplicated attribute the first wins; EOF inside a tag drops the tag;
//! - after a start tag (self-closing or not) the content is text up to the matching end tag
//!   (`</name` + whitespace, `/` or `>`, ASCII case-insensitive) for title and textarea
//!   (RCDATA), style, xmp, iframe, noembed, noframes and noscript (RAWTEXT, as with scripting
//!   on), and script, with the script-data escape states (`<!--` … `<script>` … `</script>`
//!   inside a script does not end it); plaintext makes the rest of the document text. This
//!   is html5gum's `naive_next_state` but for `noframes`, which it misspells `noframe`;
//! - character references in attribute values: decimal and hexadecimal (0, surrogates and
//!   values past U+10FFFF → U+FFFD, 0x80–0x9F through the windows-1252 table) and all 2,231
//!   named references of the spec (longest match; a name without `;` followed by `=` or an
//!   ASCII alphanumeric is left as written, so `?a=1&copy=2` stays). Character references
//!   in text are not decoded, as no text is reported;
//! - bytes that are not UTF-8 stay as they are; values are bytes.
//!
//! # What it does not do
//! - No tree builder, so none of its effects: foreign content (`<svg>`, `<math>`) and real
//!   CDATA sections in it, `<template>` contents (an `<a>` in a template is reported), tags
//!   the tree builder drops or moves (a second `<html>`, misnested tables, `<a>` in `<a>`),
//!   the scripting flag (noscript is always RAWTEXT), and text states chosen by the
//!   insertion mode rather than by the tag name alone (`<noscript>` in `<head>` with
//!   scripting off, `<plaintext>` or `<xmp>` where the tree builder would ignore the tag).
//! - No text, comment, DOCTYPE or end-tag tokens, no parse errors, no spans.
//! - Time is linear for a visitor that keeps a bounded set of attribute names (duplicates
//!   are checked against the names kept so far); [`super::links`] keeps one.
//!
//! # Compared with html5gum
//! `tests/fuzz_parsers.rs` (`links_vs_html5gum`) compares the raw hrefs and base with
//! html5gum's on every fuzz input it cannot overflow on. Its events are read with the
//! spec's rules, as here: a start tag counts once complete (`CloseStartTag`), the first
//! `href` wins and an empty one is `""` (its callback emitter sends no event for an empty
//! value). The one difference left is html5gum's: it switches to RAWTEXT after `<noframe>`
//! instead of `<noframes>`; inputs holding `<noframe` are not compared.

mod charref;

use std::borrow::Cow;

use charref::decode_attribute_value;

/// An attribute kept for a [`Visitor`]: its name (ASCII-lowercased) and its value
/// (character references decoded, NUL as U+FFFD, bytes as in the page otherwise).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attribute {
    /// The name, ASCII-lowercased.
    pub name: Vec<u8>,
    /// The value; empty for an attribute without `=`.
    pub value: Vec<u8>,
}

/// What the tokenizer reports to: complete start tags, with the attributes asked for.
pub trait Visitor {
    /// Whether to keep attribute `attr` of start tag `tag` (both ASCII-lowercased). Asked
    /// once per occurrence of a name not kept yet in this tag; the answer must not change
    /// while the tag is read. Values of attributes not kept are never stored.
    fn wants(&mut self, tag: &[u8], attr: &[u8]) -> bool;
    /// A complete start tag (EOF inside a tag drops it) and its kept attributes, each name
    /// once (the first occurrence), in document order.
    fn start_tag(&mut self, tag: &[u8], attrs: &[Attribute]);
}

/// Tokenize `html`, reporting start tags to `visitor`.
pub fn tokenize(html: &[u8], visitor: &mut impl Visitor) {
    let input = normalize_newlines(html);
    let mut t = Tokenizer {
        s: &input,
        pos: 0,
        state: State::Data,
        visitor,
        tag: Vec::new(),
        end_tag: false,
        attr: Vec::new(),
        keep: false,
        value: Vec::new(),
        attrs: Vec::new(),
    };
    t.run();
}

fn normalize_newlines(html: &[u8]) -> Cow<'_, [u8]> {
    if !html.contains(&b'\r') {
        return Cow::Borrowed(html);
    }
    let mut out = Vec::with_capacity(html.len());
    let mut bytes = html.iter().peekable();
    while let Some(&b) = bytes.next() {
        if b == b'\r' {
            out.push(b'\n');
            bytes.next_if_eq(&&b'\n');
        } else {
            out.push(b);
        }
    }
    Cow::Owned(out)
}

fn is_space(b: u8) -> bool {
    matches!(b, b'\t' | b'\n' | b'\x0C' | b' ')
}

const REPLACEMENT: &[u8] = "\u{FFFD}".as_bytes();

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum State {
    Data,
    TagName,
    BeforeAttrName,
    AttrName,
    AfterAttrName,
    BeforeAttrValue,
    AttrValueQuoted(u8),
    AttrValueUnquoted,
    AfterAttrValueQuoted,
    SelfClosing,
    /// RCDATA or RAWTEXT: text up to the appropriate end tag (character references in
    /// RCDATA text do not matter here).
    RawText,
    ScriptData,
    PlainText,
}

/// The text state a start tag switches to (html5gum's `naive_next_state`, `noframes` spelt
/// right).
fn text_state(tag: &[u8]) -> State {
    match tag {
        b"title" | b"textarea" | b"style" | b"xmp" | b"iframe" | b"noembed" | b"noframes"
        | b"noscript" => State::RawText,
        b"script" => State::ScriptData,
        b"plaintext" => State::PlainText,
        _ => State::Data,
    }
}

struct Tokenizer<'a, V> {
    s: &'a [u8],
    pos: usize,
    state: State,
    visitor: &'a mut V,
    /// The current tag's name; after a start tag, the name an appropriate end tag needs.
    tag: Vec<u8>,
    end_tag: bool,
    /// The current attribute's name, and whether its value is kept (into `value`).
    attr: Vec<u8>,
    keep: bool,
    value: Vec<u8>,
    attrs: Vec<Attribute>,
}

impl<V: Visitor> Tokenizer<'_, V> {
    fn run(&mut self) {
        while self.pos < self.s.len() {
            match self.state {
                State::Data => self.data(),
                State::RawText => self.raw_text(),
                State::ScriptData => self.script_data(),
                State::PlainText => self.pos = self.s.len(),
                _ => self.in_tag(),
            }
        }
        // EOF: a tag being read is dropped; nothing else is reported.
    }

    /// Data, tag open and end tag open: up to the next tag, comment or bogus comment.
    fn data(&mut self) {
        let s = self.s;
        let Some(lt) = find_byte(s, self.pos, b'<') else {
            self.pos = s.len();
            return;
        };
        let next = s.get(lt + 1).copied();
        let after = s.get(lt + 2).copied();
        self.pos = match (next, after) {
            (Some(c), _) if c.is_ascii_alphabetic() => self.open_tag(lt + 1, false),
            (Some(b'/'), Some(c)) if c.is_ascii_alphabetic() => self.open_tag(lt + 2, true),
            (Some(b'/'), Some(b'>')) => lt + 3,
            (Some(b'/'), Some(_)) => bogus_comment_end(s, lt + 2),
            (Some(b'!'), _) if s[lt + 2..].starts_with(b"--") => comment_end(s, lt + 4),
            (Some(b'!' | b'?'), _) => bogus_comment_end(s, lt + 1),
            _ => lt + 1,
        };
    }

    /// Start reading a tag whose name starts at `at`; returns where to go on.
    fn open_tag(&mut self, at: usize, end_tag: bool) -> usize {
        self.tag.clear();
        self.attrs.clear();
        self.end_tag = end_tag;
        self.keep = false;
        self.state = State::TagName;
        at
    }

    /// One byte of a tag (or a value's run of bytes), from its name to `>`.
    fn in_tag(&mut self) {
        use State::*;
        let c = self.s[self.pos];
        let mut reconsume = false;
        match (self.state, c) {
            (TagName, c) if is_space(c) => self.state = BeforeAttrName,
            (TagName | AfterAttrName | AfterAttrValueQuoted, b'/') => self.state = SelfClosing,
            (TagName | AfterAttrName | BeforeAttrValue | AttrValueUnquoted, b'>') => self.emit(),
            (AfterAttrValueQuoted | SelfClosing, b'>') => self.emit(),
            (TagName, c) => push_name_byte(&mut self.tag, c),

            (BeforeAttrName | AfterAttrName | BeforeAttrValue, c) if is_space(c) => {}
            (BeforeAttrName, b'/' | b'>') => (self.state, reconsume) = (AfterAttrName, true),
            (BeforeAttrName, b'=') => {
                self.start_attribute();
                self.attr.push(b'=');
            }
            (AfterAttrName, b'=') => self.state = BeforeAttrValue,
            (BeforeAttrName | AfterAttrName, _) => {
                self.start_attribute();
                reconsume = true;
            }

            (AttrName, c) if is_space(c) || c == b'/' || c == b'>' => {
                self.name_done();
                (self.state, reconsume) = (AfterAttrName, true);
            }
            (AttrName, b'=') => {
                self.name_done();
                self.state = BeforeAttrValue;
            }
            (AttrName, c) => push_name_byte(&mut self.attr, c),

            (BeforeAttrValue, b'"' | b'\'') => self.state = AttrValueQuoted(c),
            (BeforeAttrValue, _) => (self.state, reconsume) = (AttrValueUnquoted, true),
            (AttrValueQuoted(quote), _) => {
                self.quoted_value(quote);
                return;
            }
            (AttrValueUnquoted, c) if is_space(c) => self.state = BeforeAttrName,
            (AttrValueUnquoted, _) => {
                let s = self.s;
                let rest = &s[self.pos..];
                let len = rest.iter().position(|&b| is_space(b) || b == b'>');
                let len = len.unwrap_or(rest.len());
                self.push_value(&rest[..len]);
                self.pos += len;
                return;
            }

            (AfterAttrValueQuoted, c) if is_space(c) => self.state = BeforeAttrName,
            (AfterAttrValueQuoted | SelfClosing, _) => {
                (self.state, reconsume) = (BeforeAttrName, true)
            }
            (Data | RawText | ScriptData | PlainText, _) => unreachable!("not a tag state"),
        }
        if !reconsume {
            self.pos += 1;
        }
    }

    /// A quoted value from `pos` to its closing quote (or EOF).
    fn quoted_value(&mut self, quote: u8) {
        let end = find_byte(self.s, self.pos, quote).unwrap_or(self.s.len());
        self.push_value(&self.s[self.pos..end]);
        self.state = State::AfterAttrValueQuoted;
        self.pos = end + 1;
    }

    fn start_attribute(&mut self) {
        self.finish_attribute();
        self.attr.clear();
        self.state = State::AttrName;
    }

    /// The name is complete: keep the value if the visitor wants it and the name is new.
    fn name_done(&mut self) {
        self.keep = !self.end_tag
            && !self.attrs.iter().any(|a| a.name == self.attr)
            && self.visitor.wants(&self.tag, &self.attr);
    }

    fn push_value(&mut self, bytes: &[u8]) {
        if !self.keep {
            return;
        }
        for chunk in bytes.split_inclusive(|&b| b == 0) {
            match chunk.split_last() {
                Some((0, head)) => {
                    self.value.extend_from_slice(head);
                    self.value.extend_from_slice(REPLACEMENT);
                }
                _ => self.value.extend_from_slice(chunk),
            }
        }
    }

    fn finish_attribute(&mut self) {
        if std::mem::take(&mut self.keep) {
            let value = decode_attribute_value(&self.value);
            self.attrs.push(Attribute {
                name: self.attr.clone(),
                value,
            });
        }
        self.value.clear();
    }

    /// `>`: report a start tag and switch to the text state its name calls for.
    fn emit(&mut self) {
        self.finish_attribute();
        self.state = State::Data;
        if !self.end_tag {
            self.visitor.start_tag(&self.tag, &self.attrs);
            self.state = text_state(&self.tag);
        }
    }

    /// `at` is just past `</`: `Ok(end of name)` if an appropriate end tag (one for the
    /// last start tag, `self.tag`) starts there, else `Err(end of the letters read)`.
    fn appropriate_end_tag(&self, at: usize) -> Result<usize, usize> {
        let name_end = letters_end(self.s, at);
        match self.s.get(name_end) {
            Some(&c)
                if (is_space(c) || matches!(c, b'/' | b'>'))
                    && self.s[at..name_end].eq_ignore_ascii_case(&self.tag) =>
            {
                Ok(name_end)
            }
            _ => Err(name_end),
        }
    }

    /// Leave a text state for the end tag whose name ends at `name_end`.
    /// The tag name state then sees whitespace, `/` or `>`; an end tag's name is not needed.
    fn end_tag_at(&mut self, name_end: usize) {
        self.pos = self.open_tag(name_end, true);
    }

    /// RCDATA and RAWTEXT: text up to an appropriate end tag.
    fn raw_text(&mut self) {
        let mut at = self.pos;
        while let Some(lt) = find_byte(self.s, at, b'<') {
            if self.s.get(lt + 1) != Some(&b'/') {
                at = lt + 1;
                continue;
            }
            match self.appropriate_end_tag(lt + 2) {
                Ok(name_end) => return self.end_tag_at(name_end),
                Err(letters_end) => at = letters_end,
            }
        }
        self.pos = self.s.len();
    }

    /// Script data with its escaped (`<!--`) and double-escaped (`<!--<script>`) states:
    /// only an appropriate end tag outside the double-escaped state ends it.
    fn script_data(&mut self) {
        use Script::*;
        let s = self.s;
        let mut state = Plain;
        let mut i = self.pos;
        while i < s.len() {
            let c = s[i];
            i += 1;
            state = match (state, c) {
                (Plain | Escaped | EscapedDash | EscapedDashDash, b'<')
                    if s.get(i) == Some(&b'/') =>
                {
                    match self.appropriate_end_tag(i + 1) {
                        Ok(name_end) => return self.end_tag_at(name_end),
                        Err(letters_end) => i = letters_end,
                    }
                    if state == Plain {
                        Plain
                    } else {
                        Escaped
                    }
                }
                (Plain, b'<') if s[i..].starts_with(b"!--") => {
                    i += 3;
                    EscapedDashDash
                }
                (Plain, _) => Plain,
                (Escaped | EscapedDash | EscapedDashDash, b'<')
                    if s.get(i).is_some_and(u8::is_ascii_alphabetic) =>
                {
                    // Double escape start: `<script` + whitespace, `/` or `>`.
                    let (end, is_script) = script_word(s, i);
                    i = end;
                    if is_script {
                        Double
                    } else {
                        Escaped
                    }
                }
                (EscapedDashDash | DoubleDashDash, b'>') => Plain,
                (Escaped, b'-') => EscapedDash,
                (EscapedDash | EscapedDashDash, b'-') => EscapedDashDash,
                (Escaped | EscapedDash | EscapedDashDash, _) => Escaped,
                (Double | DoubleDash | DoubleDashDash, b'<') if s.get(i) == Some(&b'/') => {
                    // Double escape end: `</script` + whitespace, `/` or `>`.
                    let (end, is_script) = script_word(s, i + 1);
                    i = end;
                    if is_script {
                        Escaped
                    } else {
                        Double
                    }
                }
                (Double, b'-') => DoubleDash,
                (DoubleDash | DoubleDashDash, b'-') => DoubleDashDash,
                (Double | DoubleDash | DoubleDashDash, _) => Double,
            };
        }
        self.pos = s.len();
    }
}

/// The states inside script data: the spec's script data, escaped and double-escaped
/// states (their less-than-sign and tag-name states are lookaheads in `script_data`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Script {
    Plain,
    Escaped,
    EscapedDash,
    EscapedDashDash,
    Double,
    DoubleDash,
    DoubleDashDash,
}

fn find_byte(s: &[u8], from: usize, byte: u8) -> Option<usize> {
    let rest = s.get(from..)?;
    rest.iter().position(|&c| c == byte).map(|i| from + i)
}

fn letters_end(s: &[u8], at: usize) -> usize {
    let rest = s.get(at..).unwrap_or_default();
    at + rest.iter().take_while(|b| b.is_ascii_alphabetic()).count()
}

/// The letters at `at` in escaped script data: `(where to go on, whether they are `script`
/// followed by whitespace, `/` or `>`)`; that last byte is consumed only in the second case
/// (the others reconsume it; whitespace, `/` and `>` mean nothing in those states anyway).
fn script_word(s: &[u8], at: usize) -> (usize, bool) {
    let end = letters_end(s, at);
    let ends = s
        .get(end)
        .is_some_and(|&c| is_space(c) || matches!(c, b'/' | b'>'));
    if ends && s[at..end].eq_ignore_ascii_case(b"script") {
        (end + 1, true)
    } else {
        (end, false)
    }
}

fn push_name_byte(name: &mut Vec<u8>, c: u8) {
    if c == 0 {
        name.extend_from_slice(REPLACEMENT);
    } else {
        name.push(c.to_ascii_lowercase());
    }
}

/// A bogus comment (or a DOCTYPE) whose text starts at `at` ends just past the next `>`.
fn bogus_comment_end(s: &[u8], at: usize) -> usize {
    find_byte(s, at, b'>').map_or(s.len(), |gt| gt + 1)
}

/// A comment whose text starts at `at` (just past `<!--`) ends just past `-->` or `--!>`,
/// or at once for `<!-->` and `<!--->`.
fn comment_end(s: &[u8], at: usize) -> usize {
    let body = &s[at..];
    if body.starts_with(b">") {
        return at + 1;
    }
    if body.starts_with(b"->") {
        return at + 2;
    }
    let mut from = 0;
    while let Some(dash) = find_byte(body, from, b'-') {
        let rest = &body[dash..];
        if rest.starts_with(b"-->") {
            return at + dash + 3;
        }
        if rest.starts_with(b"--!>") {
            return at + dash + 4;
        }
        from = dash + 1;
    }
    s.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records start tags as `name attr=value …`, keeping every attribute but those whose
    /// names start with `x`.
    #[derive(Default)]
    struct Record(Vec<String>);

    impl Visitor for Record {
        fn wants(&mut self, tag: &[u8], attr: &[u8]) -> bool {
            assert!(!tag.is_empty() && !attr.is_empty());
            !attr.starts_with(b"x")
        }

        fn start_tag(&mut self, tag: &[u8], attrs: &[Attribute]) {
            let mut t = String::from_utf8_lossy(tag).into_owned();
            for a in attrs {
                let (name, value) = (&a.name, &a.value);
                t += &format!(" {}={}", lossy(name), lossy(value));
            }
            self.0.push(t);
        }
    }

    fn lossy(b: &[u8]) -> String {
        String::from_utf8_lossy(b).into_owned()
    }

    fn tags(html: impl AsRef<[u8]>) -> Vec<String> {
        let mut r = Record::default();
        tokenize(html.as_ref(), &mut r);
        r.0
    }

    #[test]
    fn attributes_names_values_and_case() {
        assert_eq!(
            tags(r#"<A HREF="/d" Title='s' id=u data-X=1 checked xskip=1 /><br/>"#),
            ["a href=/d title=s id=u data-x=1 checked="]
                .into_iter()
                .chain(["br"])
                .collect::<Vec<_>>()
        );
        // Unquoted values end at whitespace or `>` and keep quotes, `=`, `<` and `/`.
        assert_eq!(tags("<a b=x/ c=a'b\"c=d<e>"), ["a b=x/ c=a'b\"c=d<e"]);
        // Missing whitespace after a quoted value, `/` between attributes, `=` first.
        assert_eq!(tags(r#"<a b="1"c='2'/d =e =f>"#), ["a b=1 c=2 d=e =f="]);
        assert_eq!(tags("<a b = \"1\" c\n=\n2\t>"), ["a b=1 c=2"]);
        // The first of duplicated attributes wins, whatever the case.
        assert_eq!(tags("<a href=1 HREF=2 href='3'>"), ["a href=1"]);
        assert_eq!(tags("<a href href=2>"), ["a href="]);
        // NUL in names and values is U+FFFD; uppercase only ASCII is lowered.
        assert_eq!(
            tags("<a\0 h\0=v\0w É=1>"),
            ["a\u{FFFD} h\u{FFFD}=v\u{FFFD}w É=1"]
        );
    }

    #[test]
    fn eof_inside_a_tag_drops_it() {
        for cut in [
            "<a href=/x",
            "<a href=/x ",
            "<a href=\"/x\"",
            "<a href=\"/x",
            "<a href='/x' /",
            "<a href=",
            "<a href",
            "<a",
        ] {
            assert_eq!(tags(format!("<b>{cut}")), ["b"], "{cut}");
        }
    }

    #[test]
    fn end_tags_comments_and_bogus_comments() {
        let html = concat!(
            "<p></p title=\"><a href=1>\" x='>'><a href=2></ a href=no>",
            "<!--><a href=4><!---><a href=5><!-- <a href=no> --!><a href=6>",
            "<!----><a href=7><!-- <!-- --><a href=8><!---!> <a href=no> -- > --->",
            "<!DOCTYPE html SYSTEM \"a>\"><a href=9><![CDATA[ <a href=no ]]><a href=10>",
            "<?xml <a href=no?><a href=11>< a href=no> <1 href=no></><a href=12>",
        );
        let want: Vec<String> = ["p", "a href=2"]
            .into_iter()
            .map(String::from)
            .chain((4..=12).map(|i| format!("a href={i}")))
            .collect();
        assert_eq!(tags(html), want);
        // A `>` inside a quoted end-tag attribute does not end the end tag.
        assert_eq!(tags("</a title='>'<b>'><i>"), ["i"]);
        // Unclosed comments and bogus comments run to the end.
        assert!(tags("<!-- <a>").is_empty() && tags("<!x <a>").is_empty());
    }

    #[test]
    fn raw_text_elements() {
        for name in [
            "title", "textarea", "style", "xmp", "iframe", "noembed", "noframes", "noscript",
        ] {
            let upper = name.to_ascii_uppercase();
            let html = format!(
                "<{name}><a href=1></{name}x><a href=2></{name}\n\
                 x='>'><a href=3><{upper}/></{upper}/><a href=4>"
            );
            assert_eq!(tags(&html), [name, "a href=3", name, "a href=4"], "{name}");
        }
        // Not raw text: html5gum's misspelt `noframe`, and names that only start alike.
        assert_eq!(
            tags("<noframe><a><titles><a>"),
            ["noframe", "a", "titles", "a"]
        );
        assert_eq!(tags("<plaintext><a></plaintext><b>"), ["plaintext"]);
        assert_eq!(tags("<title></title"), ["title"]);
    }

    #[test]
    fn script_data_and_its_escapes() {
        let cases = [
            ("<script>a<b</scrip></script x=\">\"><a>", true),
            ("<script><!-- <a> --></script><a>", true),
            ("<script><!-- <script> </script> <a> </script><a>", true),
            ("<script><!--<script>--></script><a>", true),
            ("<script><!--<scriptx></script><a>", true),
            ("<script><!--<script/x</script>--></script><a>", true),
            ("<script><!--<script></script>--></script><a>", true),
            ("<script><!--<script> </script ", false),
            ("<script><!--<script></SCRIPT></script><a>", true),
            ("<script><!--<script> --> <a> </script><a>", true),
            ("<script><!-x</script><a>", true),
            ("<script><!--></script><a>", true),
        ];
        for (html, found) in cases {
            let got = tags(html);
            assert_eq!(
                got.last().map(String::as_str) == Some("a"),
                found,
                "{html}: {got:?}"
            );
            assert_eq!(got.len(), 1 + usize::from(found), "{html}: {got:?}");
        }
    }

    #[test]
    fn newlines_are_normalised_first() {
        assert_eq!(tags("<a\rhref=\"1\r\n2\r3\n\r\">"), ["a href=1\n2\n3\n\n"]);
        assert_eq!(tags("<title></title\r><a>"), ["title", "a"]);
    }

    #[test]
    fn a_million_attributes_on_a_2_mib_thread() {
        let mut html = b"<a".to_vec();
        for _ in 0..1_000_000 {
            html.extend_from_slice(b" x=\"1\"");
        }
        html.extend_from_slice(b" href=/a>");
        html.extend_from_slice(&b" href=\"2\"".repeat(1_000_000));
        html.extend_from_slice(b"><b>");
        let run = move || tags(&html);
        let got = std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn(run)
            .expect("thread")
            .join()
            .expect("no overflow");
        assert_eq!(got, ["a href=/a", "b"]);
    }

    #[test]
    fn ten_megabytes_of_nested_tags() {
        let unit = b"<div class=c><a href=\"/p?a=1&amp;b=2\"><span>";
        let n = 10_000_000 / unit.len();
        let got = tags(unit.repeat(n));
        assert_eq!(got.len(), 3 * n);
        assert_eq!(got[1], "a href=/p?a=1&b=2");
        assert_eq!(got[3 * n - 2], got[1]);
    }
}
