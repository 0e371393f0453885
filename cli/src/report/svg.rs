//! The report's charts as inline SVG, drawn here so the page needs no script: the
//! timeline, a host's rate over time, horizontal bar charts, and the small
//! ok/throttled/other bar of a table row.
//! Every label goes through [`esc`].

use std::fmt::Write;

use super::esc;
use crate::breakdown::{Bucket, HostRate};

/// Most columns the timeline draws; more buckets are summed into wider columns.
const COLUMNS: usize = 600;

const WIDTH: f64 = 1100.0;
const HEIGHT: f64 = 260.0;
const LEFT: f64 = 56.0;
const RIGHT: f64 = 12.0;
const TOP: f64 = 14.0;
const BOTTOM: f64 = 34.0;

/// The timeline: records ok, throttle answers and records failed per second, as step
/// lines over the seconds since the start. `width`: seconds per bucket.
pub fn timeline(width: u64, buckets: &[Bucket]) -> String {
    let sum = |f: fn(&Bucket) -> u32| buckets.iter().map(|b| u64::from(f(b))).sum::<u64>();
    let (ok, throttled, failed) = (sum(|b| b.ok), sum(|b| b.throttled), sum(|b| b.failed));
    let mut svg = format!(
        "<svg id=\"timeline\" class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" \
         viewBox=\"0 0 {WIDTH} {HEIGHT}\" width=\"{WIDTH}\" height=\"{HEIGHT}\" role=\"img\" \
         data-ok=\"{ok}\" data-throttled=\"{throttled}\" data-failed=\"{failed}\" \
         data-bucket-s=\"{width}\"><title>ok, throttled and failed per second</title>"
    );
    if buckets.is_empty() {
        let _ = write!(
            svg,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">no fetched records</text></svg>",
            WIDTH / 2.0,
            HEIGHT / 2.0
        );
        return svg;
    }
    let per = buckets.len().div_ceil(COLUMNS);
    let columns: Vec<Bucket> = buckets.chunks(per).map(fold).collect();
    // Rates per second: a column covers `per` buckets of `width` seconds.
    let secs = (per as u64 * width) as f64;
    let peak = columns
        .iter()
        .map(|c| c.ok.max(c.throttled).max(c.failed))
        .max()
        .unwrap_or(0);
    let top = nice_ceiling(f64::from(peak.max(1)) / secs);
    let span = columns.len() as f64 * secs;
    axes(&mut svg, top, span);
    let plot_w = WIDTH - LEFT - RIGHT;
    let x = |i: usize| LEFT + plot_w * i as f64 / columns.len() as f64;
    let y = |n: u32| HEIGHT - BOTTOM - (HEIGHT - TOP - BOTTOM) * (f64::from(n) / secs) / top;
    for (class, f) in [
        ("ok", (|b: &Bucket| b.ok) as fn(&Bucket) -> u32),
        ("throttled", |b| b.throttled),
        ("failed", |b| b.failed),
    ] {
        let mut points = String::new();
        for (i, c) in columns.iter().enumerate() {
            let _ = write!(
                points,
                "{:.1},{:.1} {:.1},{:.1} ",
                x(i),
                y(f(c)),
                x(i + 1),
                y(f(c))
            );
        }
        let _ = write!(
            svg,
            "<polyline class=\"line {class}\" fill=\"none\" points=\"{}\"/>",
            points.trim_end()
        );
    }
    svg.push_str("</svg>");
    svg
}

/// `host`'s requests per second over the crawl's first `span_s` seconds, one bar per bucket
/// of `rate`, with a mark at each bucket that had throttle answers.
pub fn host_rate(host: &str, rate: &HostRate, span_s: u64) -> String {
    const H: f64 = 150.0;
    let requests: u64 = rate.buckets.iter().map(|b| u64::from(b.requests)).sum();
    let throttled: u64 = rate.buckets.iter().map(|b| u64::from(b.throttled)).sum();
    let width = rate.width;
    let span = span_s.max(rate.buckets.last().map_or(1, |b| (b.at + 1) * width));
    let per_s = |n: u32| f64::from(n) / width as f64;
    let peak = rate
        .buckets
        .iter()
        .map(|b| per_s(b.requests))
        .fold(0.0, f64::max);
    let top = nice_ceiling(peak.max(1.0));
    let mut svg = format!(
        "<svg class=\"chart host-rate\" xmlns=\"http://www.w3.org/2000/svg\" \
         viewBox=\"0 0 {WIDTH} {H}\" width=\"{WIDTH}\" height=\"{H}\" role=\"img\" \
         data-host=\"{}\" data-requests=\"{requests}\" data-throttled=\"{throttled}\" \
         data-bucket-s=\"{width}\" data-peak-rps=\"{peak:.2}\"><title>{} requests per \
         second, throttles marked</title>",
        esc(host),
        esc(host)
    );
    let (bottom, right) = (H - BOTTOM, WIDTH - RIGHT);
    let plot_w = right - LEFT;
    let x = |s: u64| LEFT + plot_w * s as f64 / span as f64;
    let _ = write!(
        svg,
        "<line class=\"grid\" x1=\"{LEFT}\" y1=\"{TOP}\" x2=\"{right}\" y2=\"{TOP}\"/>\
         <line class=\"grid\" x1=\"{LEFT}\" y1=\"{bottom}\" x2=\"{right}\" y2=\"{bottom}\"/>\
         <text class=\"tick\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}/s</text>\
         <text class=\"tick\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">0</text>\
         <text class=\"tick\" x=\"{LEFT}\" y=\"{:.1}\">0 s</text>\
         <text class=\"tick\" x=\"{right}\" y=\"{:.1}\" text-anchor=\"end\">{span} s</text>",
        LEFT - 6.0,
        TOP + 4.0,
        short(top),
        LEFT - 6.0,
        bottom + 4.0,
        bottom + 16.0,
        bottom + 16.0,
    );
    for b in &rate.buckets {
        let (x0, x1) = (x(b.at * width), x((b.at + 1) * width));
        let h = (bottom - TOP) * per_s(b.requests) / top;
        let _ = write!(
            svg,
            "<rect class=\"bar plain rate\" data-s=\"{}\" data-n=\"{}\" x=\"{x0:.1}\" \
             y=\"{:.1}\" width=\"{:.1}\" height=\"{h:.1}\"/>",
            b.at * width,
            b.requests,
            bottom - h,
            (x1 - x0).max(1.0)
        );
        if b.throttled > 0 {
            let mid = (x0 + x1) / 2.0;
            let _ = write!(
                svg,
                "<line class=\"throttle-mark\" data-s=\"{}\" data-n=\"{}\" x1=\"{mid:.1}\" \
                 y1=\"{TOP}\" x2=\"{mid:.1}\" y2=\"{bottom}\"><title>{} throttle answers \
                 </title></line>",
                b.at * width,
                b.throttled,
                b.throttled
            );
        }
    }
    svg.push_str("</svg>");
    svg
}

fn fold(bs: &[Bucket]) -> Bucket {
    bs.iter().fold(Bucket::default(), |a, b| Bucket {
        ok: a.ok + b.ok,
        throttled: a.throttled.saturating_add(b.throttled),
        failed: a.failed + b.failed,
    })
}

/// The plot's frame, its y scale (0 to `top` per second) and x scale (0 to `span` s).
fn axes(svg: &mut String, top: f64, span: f64) {
    let (bottom, right) = (HEIGHT - BOTTOM, WIDTH - RIGHT);
    for step in 0..=4 {
        let v = top * f64::from(step) / 4.0;
        let yy = bottom - (bottom - TOP) * f64::from(step) / 4.0;
        let _ = write!(
            svg,
            "<line class=\"grid\" x1=\"{LEFT}\" y1=\"{yy:.1}\" x2=\"{right}\" y2=\"{yy:.1}\"/>\
             <text class=\"tick\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            LEFT - 6.0,
            yy + 4.0,
            short(v)
        );
    }
    for step in 0..=5 {
        let xx = LEFT + (right - LEFT) * f64::from(step) / 5.0;
        let _ = write!(
            svg,
            "<text class=\"tick\" x=\"{xx:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{} s</text>",
            bottom + 16.0,
            short(span * f64::from(step) / 5.0)
        );
    }
    let _ = write!(
        svg,
        "<text class=\"tick\" x=\"{LEFT}\" y=\"{:.1}\">per second</text>",
        TOP - 3.0
    );
}

/// The smallest of 1, 2, 5 × 10ⁿ at or above `v`.
fn nice_ceiling(v: f64) -> f64 {
    let mut step = 10f64.powf(v.log10().floor());
    while step * 5.0 < v {
        step *= 10.0;
    }
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * step)
        .find(|c| *c >= v)
        .unwrap_or(v)
}

/// A tick's number: whole when it is, else one decimal.
fn short(v: f64) -> String {
    if (v - v.round()).abs() < 1e-9 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// One bar of [`bars`]: its label, value and CSS class (its colour).
pub struct Bar<'a> {
    pub label: &'a str,
    pub value: u64,
    pub class: &'a str,
}

/// A horizontal bar chart with id `id`: one labelled bar a row, the longest the largest.
pub fn bars(id: &str, title: &str, rows: &[Bar<'_>]) -> String {
    const ROW: f64 = 26.0;
    const LABEL: f64 = 220.0;
    const W: f64 = 800.0;
    let h = ROW * rows.len().max(1) as f64 + 8.0;
    let max = rows.iter().map(|r| r.value).max().unwrap_or(0).max(1);
    let mut svg = format!(
        "<svg id=\"{}\" class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" \
         viewBox=\"0 0 {W} {h}\" width=\"{W}\" height=\"{h}\" role=\"img\"><title>{}</title>",
        esc(id),
        esc(title)
    );
    for (i, r) in rows.iter().enumerate() {
        let y = 4.0 + ROW * i as f64;
        let len = (W - LABEL - 80.0) * r.value as f64 / max as f64;
        let _ = write!(
            svg,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>\
             <rect class=\"bar {}\" x=\"{LABEL}\" y=\"{y:.1}\" width=\"{len:.1}\" height=\"{:.1}\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\">{}</text>",
            LABEL - 8.0,
            y + 16.0,
            esc(r.label),
            esc(r.class),
            ROW - 8.0,
            LABEL + len + 6.0,
            y + 16.0,
            r.value
        );
    }
    svg.push_str("</svg>");
    svg
}

/// A table row's bar: the shares of `ok`, `throttled` and `other` of their sum.
pub fn split(ok: u64, throttled: u64, other: u64) -> String {
    const W: f64 = 160.0;
    let total = (ok + throttled + other).max(1) as f64;
    let mut svg = format!(
        "<svg class=\"split\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {W} 12\" \
         width=\"{W}\" height=\"12\">"
    );
    let mut x = 0.0;
    for (class, n) in [("ok", ok), ("throttled", throttled), ("failed", other)] {
        let w = W * n as f64 / total;
        if w > 0.0 {
            let _ = write!(
                svg,
                "<rect class=\"bar {class}\" x=\"{x:.1}\" y=\"0\" width=\"{w:.1}\" height=\"12\"/>"
            );
        }
        x += w;
    }
    svg.push_str("</svg>");
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scales_round_up() {
        assert_eq!(nice_ceiling(0.3), 0.5);
        assert_eq!(nice_ceiling(7.0), 10.0);
        assert_eq!(nice_ceiling(12.0), 20.0);
        assert_eq!(nice_ceiling(1.0), 1.0);
    }

    #[test]
    fn timeline_sums_its_buckets_and_draws_three_lines() {
        let b = |ok, throttled, failed| Bucket {
            ok,
            throttled,
            failed,
        };
        let svg = timeline(1, &[b(3, 1, 0), b(0, 0, 2), b(5, 4, 1)]);
        assert!(svg.contains("data-ok=\"8\" data-throttled=\"5\" data-failed=\"3\""));
        assert_eq!(svg.matches("<polyline").count(), 3);
        assert!(svg.ends_with("</svg>"));
        let many = vec![b(1, 0, 0); COLUMNS * 3 + 1];
        let svg = timeline(2, &many);
        assert!(svg.contains(&format!("data-ok=\"{}\"", COLUMNS * 3 + 1)));
    }

    #[test]
    fn a_host_rate_has_a_bar_per_bucket_and_a_mark_per_throttled_one() {
        use crate::breakdown::HostBucket;
        let b = |at, requests, throttled| HostBucket {
            at,
            requests,
            throttled,
        };
        let rate = HostRate {
            width: 2,
            buckets: vec![b(0, 4, 0), b(3, 6, 2), b(4, 1, 1)],
        };
        let svg = host_rate("h<1>", &rate, 20);
        assert!(svg.contains("data-host=\"h&lt;1&gt;\" data-requests=\"11\" data-throttled=\"3\""));
        assert!(
            svg.contains("data-bucket-s=\"2\" data-peak-rps=\"3.00\""),
            "{svg}"
        );
        assert_eq!(svg.matches("<rect class=\"bar plain rate\"").count(), 3);
        assert_eq!(svg.matches("<line class=\"throttle-mark\"").count(), 2);
        assert!(svg.contains("data-s=\"6\" data-n=\"2\""), "{svg}");
        assert!(
            !svg.contains("<polyline"),
            "the timeline's lines stay the only ones"
        );
    }

    #[test]
    fn labels_are_escaped() {
        let svg = bars(
            "x",
            "t",
            &[Bar {
                label: "<b>&\"'",
                value: 1,
                class: "ok",
            }],
        );
        assert!(svg.contains("&lt;b&gt;&amp;&quot;&#39;"), "{svg}");
    }
}
