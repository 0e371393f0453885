//! What a URL waiting in the frontier costs in memory, counted by the allocator: the
//! figure `[crawl] seen_limit`'s documentation gives (and `src/discover/frontier.rs`).
//! Its own test binary, because it installs a counting global allocator.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

use exitcrawl::discover::frontier::Frontier;
use url::Url;

/// Bytes allocated and not yet freed, by everything in this process.
static LIVE: AtomicIsize = AtomicIsize::new(0);

struct Counting;

// SAFETY: forwards to the system allocator; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Pages of `LINKS` links each on one host, every link a new URL of about 70 bytes, as
/// a crawl of a big site queues them; the frontier holds them all.
#[test]
fn a_waiting_url_costs_about_60_bytes_plus_its_length() {
    const PAGES: usize = 100;
    const LINKS: usize = 1_000;
    let pages: Vec<Url> = (0..PAGES)
        .map(|p| Url::parse(&format!("https://www.example.com/archive/page/{p}")).unwrap())
        .collect();
    let links: Vec<Vec<Url>> = (0..PAGES)
        .map(|p| {
            (0..LINKS)
                .map(|i| {
                    let u =
                        format!("https://www.example.com/articles/2026/{p:03}/a-slug-{i:06}.html");
                    Url::parse(&u).unwrap()
                })
                .collect()
        })
        .collect();
    let url_bytes: usize = links.iter().flatten().map(|u| u.as_str().len()).sum();
    let n = PAGES * LINKS;

    let before = LIVE.load(Ordering::Relaxed);
    let mut frontier = Frontier::new();
    // Clones, so what the frontier keeps is all that the count sees grow.
    for (page, links) in pages.iter().zip(&links) {
        for url in links {
            frontier.push(url.clone(), 1, Some(page.clone()));
        }
    }
    let held = LIVE.load(Ordering::Relaxed) - before;
    assert_eq!(frontier.len(), n);

    let per_url = held as f64 / n as f64;
    let overhead = per_url - url_bytes as f64 / n as f64;
    println!("{n} URLs waiting: {per_url:.0} bytes each, {overhead:.0} above the URL's length");
    assert!(
        overhead <= 64.0,
        "{overhead:.0} bytes per URL above its length"
    );
}
