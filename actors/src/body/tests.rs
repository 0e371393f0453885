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
        Err(BodyError::TooLarge(_))
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
    assert!(matches!(r, Err(BodyError::TooLarge(_))), "{r:?}");
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

fn with_length(encoding: &str, len: usize) -> HeaderMap {
    let mut h = headers(encoding);
    h.insert(CONTENT_LENGTH, HeaderValue::from(len));
    h
}

fn deflate(data: &[u8], zlib: bool) -> Vec<u8> {
    let level = flate2::Compression::fast();
    if zlib {
        let mut e = flate2::write::ZlibEncoder::new(Vec::new(), level);
        e.write_all(data).unwrap();
        e.finish().unwrap()
    } else {
        let mut e = flate2::write::DeflateEncoder::new(Vec::new(), level);
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }
}

/// `data` in chunks of `chunk` bytes, then the end.
fn read(h: &HeaderMap, limit: usize, data: &[u8], chunk: usize) -> Result<Finished, BodyError> {
    let mut b = Body::new(h, limit, false, false)?;
    for c in data.chunks(chunk) {
        b.append(Ok(Bytes::copy_from_slice(c)))?;
    }
    b.finish()
}

#[test]
fn an_empty_body_in_any_encoding_is_an_empty_body() {
    for enc in ["gzip", "x-gzip", "deflate", "br", "zstd"] {
        let h = with_length(enc, 0);
        let f = Body::new(&h, 100, false, false).unwrap().finish();
        let f = f.unwrap_or_else(|e| panic!("{enc}: {e}"));
        assert_eq!(
            (f.body.len(), f.wire_bytes, f.truncated),
            (0, 0, false),
            "{enc}"
        );
        assert_eq!(f.decoded.as_deref(), Some(enc));
        // An empty chunk is nothing on the wire either.
        let mut b = Body::new(&h, 100, false, false).unwrap();
        b.append(Ok(Bytes::new())).unwrap();
        let f = b
            .finish()
            .unwrap_or_else(|e| panic!("{enc}, an empty chunk: {e}"));
        assert_eq!(f.body.len(), 0, "{enc}");
    }
}

#[test]
fn gzip_with_bytes_after_it_or_in_several_members_decodes() {
    let (a, b) = (b"<html>first ".repeat(300), b"second</html>".repeat(300));
    let both = [a.clone(), b.clone()].concat();
    let cases: [(&str, Vec<u8>, &[u8]); 5] = [
        ("a newline after", [gzip(&a), b"\n".to_vec()].concat(), &a),
        ("zeros after", [gzip(&a), vec![0; 9]].concat(), &a),
        ("two members", [gzip(&a), gzip(&b)].concat(), &both),
        (
            "two members, then a newline",
            [gzip(&a), gzip(&b), b"\r\n".to_vec()].concat(),
            &both,
        ),
        ("an empty member", [gzip(b""), gzip(&a)].concat(), &a),
    ];
    for (case, wire, want) in cases {
        for chunk in [1, 5, 4096, wire.len()] {
            let f = read(&headers("gzip"), 1 << 20, &wire, chunk)
                .unwrap_or_else(|e| panic!("{case} in chunks of {chunk}: {e}"));
            assert_eq!(f.body, want, "{case} in chunks of {chunk}");
            // What came after the last member is ignored, but it came.
            assert_eq!(f.wire_bytes, wire.len() as u64, "{case}");
        }
    }
}

#[test]
fn gzip_headers_with_every_optional_field_decode() {
    let page = b"<html>".repeat(1000);
    let mut e = flate2::GzBuilder::new()
        .filename("page.html")
        .comment("made for a test")
        .extra(vec![7; 300])
        .write(Vec::new(), flate2::Compression::fast());
    e.write_all(&page).unwrap();
    let named = e.finish().unwrap();
    // FHCRC: two bytes after the fixed part (not checked).
    let mut hcrc = gzip(&page);
    hcrc[3] |= 0x02;
    hcrc.splice(10..10, [0xab, 0xcd]);
    for (case, wire) in [("named", named), ("header CRC", hcrc)] {
        for chunk in [1, 3, 11, wire.len()] {
            let f = read(&headers("gzip"), 1 << 20, &wire, chunk)
                .unwrap_or_else(|e| panic!("{case} in chunks of {chunk}: {e}"));
            assert_eq!(f.body, page[..], "{case} in chunks of {chunk}");
        }
    }
    // A file name that does not end is not read for ever.
    let mut endless = vec![0x1f, 0x8b, 8, 0x08, 0, 0, 0, 0, 0, 0xff];
    endless.extend(b"x".repeat(100_000));
    let r = read(&headers("gzip"), 1 << 20, &endless, 4096);
    assert!(
        matches!(r, Err(BodyError::Undecodable { .. })),
        "{:?}",
        r.err()
    );
}

#[test]
fn deflate_with_or_without_the_zlib_header_decodes() {
    let page = b"<html>".repeat(5000);
    for zlib in [true, false] {
        let wire = deflate(&page, zlib);
        for chunk in [1, 7, 4096, wire.len()] {
            let f = read(&headers("deflate"), 1 << 20, &wire, chunk)
                .unwrap_or_else(|e| panic!("zlib {zlib}, chunks of {chunk}: {e}"));
            assert_eq!(f.body, page[..], "zlib {zlib}, chunks of {chunk}");
            assert_eq!(f.decoded.as_deref(), Some("deflate"));
        }
    }
}

#[test]
fn gzip_and_deflate_that_do_not_add_up_are_undecodable() {
    let page = b"<html>".repeat(500);
    let mut bad_crc = gzip(&page);
    let n = bad_crc.len();
    bad_crc[n - 8] ^= 1;
    let mut bad_adler = deflate(&page, true);
    let n = bad_adler.len();
    bad_adler[n - 1] ^= 1;
    let cases = [
        ("gzip", bad_crc, "a wrong CRC"),
        ("deflate", bad_adler, "a wrong Adler-32"),
        ("gzip", b"\n".to_vec(), "no member at all"),
        (
            "gzip",
            vec![0x1f, 0x8b, 9, 0, 0, 0, 0, 0, 0, 0xff],
            "another method than deflate",
        ),
        (
            "gzip",
            [gzip(&page), gzip(&page)[..20].to_vec()].concat(),
            "a second member cut short",
        ),
    ];
    for (enc, wire, case) in cases {
        let r = read(&with_length(enc, wire.len()), 1 << 20, &wire, 4096);
        assert!(
            matches!(r, Err(BodyError::Undecodable { .. })),
            "{case}: {:?}",
            r.err()
        );
    }
}

#[test]
fn bombs_in_several_gzip_members_or_deflate_stop_at_the_limit() {
    let zeros = vec![0u8; 4 << 20];
    let member = gzip(&zeros);
    let cases = [
        ("gzip", [member.clone(), member.clone(), member].concat()),
        (
            "deflate",
            deflate(&[zeros.clone(), zeros.clone()].concat(), true),
        ),
        ("deflate", deflate(&[zeros.clone(), zeros].concat(), false)),
    ];
    for (enc, bomb) in cases {
        let mut b = Body::new(&headers(enc), 1 << 20, false, false).unwrap();
        let mut failed = false;
        for c in bomb.chunks(16 * 1024) {
            if b.append(Ok(Bytes::copy_from_slice(c))).is_err() {
                failed = true;
                break;
            }
            assert!(b.len() <= 1 << 20);
        }
        assert!(failed, "the {enc} bomb must end as too large");
    }
}

#[test]
fn a_compressed_body_read_until_close_and_cut_short_is_incomplete() {
    // No length: the close ended the framing, not the stream. With a length that was
    // reached, the stream itself is short: undecodable.
    let page = b"<html>".repeat(5000);
    for (enc, data) in [
        ("gzip", gzip(&page)),
        ("deflate", deflate(&page, true)),
        ("deflate", deflate(&page, false)),
        ("zstd", zstd::stream::encode_all(&page[..], 3).unwrap()),
        (
            "br",
            include_bytes!("../../../testsite/fixtures/page.html.br").to_vec(),
        ),
    ] {
        let half = &data[..data.len() / 2];
        let r = read(&headers(enc), 1 << 20, half, 4096);
        assert!(
            r.is_err() && !matches!(r, Err(BodyError::Undecodable { .. })),
            "{enc}, read until close: {:?}",
            r.err()
        );
        let r = read(&with_length(enc, half.len()), 1 << 20, half, 4096);
        assert!(
            matches!(r, Err(BodyError::Undecodable { .. })),
            "{enc}, a length reached: {:?}",
            r.err()
        );
    }
}

#[test]
fn a_whole_compressed_body_over_the_wire_cap_is_not_cut() {
    // 90 bytes that do not compress: more than 100 on the wire, 90 decoded.
    let mut x = 0x2545_f491_u32;
    let noise: Vec<u8> = (0..90)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect();
    let wire = gzip(&noise);
    assert!(wire.len() > 100);
    // A truncating body whose length was reached: all of it came, and it decoded whole.
    let mut b = Body::new(&with_length("gzip", wire.len()), 100, false, true).unwrap();
    let r = b.append(Ok(Bytes::from(wire.clone())));
    let f = b.end(r).unwrap();
    assert_eq!((&f.body[..], f.truncated), (&noise[..], false));
    // Read until close, the reading stops there: what else would have come is not
    // known, so it may be cut.
    let mut b = Body::new(&headers("gzip"), 100, false, true).unwrap();
    let r = b.append(Ok(Bytes::from(wire.clone())));
    let f = b.end(r).unwrap();
    assert!(f.truncated);
    // Not truncating: too large on the wire, whatever it decodes to.
    let r = read(&headers("gzip"), 100, &wire, wire.len());
    let e = r.err().expect("too large on the wire");
    assert!(e.to_string().contains("on the wire"), "{e}");
}

#[test]
fn a_body_that_does_not_decode_is_an_error_not_garbage() {
    let mut b = Body::new(&headers("gzip"), 100, false, false).unwrap();
    let r = b.append(Ok(Bytes::from_static(b"not gzip at all")));
    let r = r.and_then(|()| b.finish().map(|_| ()));
    assert!(matches!(r, Err(BodyError::Undecodable { .. })), "{r:?}");
}
