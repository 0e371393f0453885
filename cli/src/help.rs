//! `--help` and `-h` as printed: the usage lines, the text after the flags (what the
//! progress line's fields mean, robots.txt, stopping, exit status), and the wrapping of
//! clap's text to the terminal's width. clap wraps only with its `wrap_help` feature,
//! whose terminal-size crate this build does not have; [`wrap`] does it on the rendered
//! text instead, keeping each line's hanging indent.

/// Widest help, in columns, however wide the terminal: longer lines are hard to read.
const MAX_WIDTH: usize = 100;

/// Text after the flags in `-h`: the progress line's fields in brief.
pub const AFTER_SHORT_HELP: &str = "\
Progress: done/total, ok, throttled (429/503 answers), failed; per exit: allowed \
R/s (the rate its limiter allows) and sent S/s (what it sent). --help says more.";

/// Text after the flags in `--help`. One source line per paragraph or field: [`wrap`]
/// flows them to the terminal.
pub const AFTER_HELP: &str = "\
PROGRESS:
    When stderr is a terminal: a bar and a few lines under it. Otherwise: a status line \
    every 5 s (every second with --demo). Their fields:
      120/3000            URLs done of the total: exact for the demo and for a regular \
                         --urls file up to 16 MiB (counted in a quick first pass); \
                         estimated from the bytes read for a larger file (shown with ~); \
                         the URLs read so far for stdin. URLs --resume skips count as \
                         done, and in the total
      38 done, 120 found  with --follow: pages done, and URLs found so far (seeds \
                         included); no percentage or eta while links are still being found
      ok / failed         URLs answered 2xx / that ended otherwise (another status but \
                         a redirect, an error, a skip)
      throttled           429 and 503 answers met (each is retried later)
      skipped             URLs --resume found already done in --out
      URLs/s              URLs done per second
      NAME allowed R/s    per exit: the rate its limiter allows now, summed over the hosts \
                         it talks to: a ceiling, not a promise
      sent S/s            the requests the exit actually sent per second. Sent stays below \
                         allowed when fewer URLs are ready than the limiter would let \
                         through: --concurrency is reached, answers are slow, the crawl \
                         waits on robots.txt or on new links
      EJECTED             the exit failed its health checks: it gets no URLs until it \
                         passes again

ROBOTS.TXT:
    Obeyed in every mode unless [crawl] robots = false or --ignore-robots: fetched once \
    per site through the same exits, cached ([crawl] robots_ttl_ms); a disallowed URL gets \
    a record with skipped \"robots\" and is never fetched; Crawl-delay makes the site serial \
    and spaced. A throttled robots.txt (429, 503) is waited for, as a throttled page is; \
    one answered 5xx, or throttled past [crawler] give_up_after_ms, disallows the site \
    until a retry a minute later (error \"robots_unavailable: ...\", fetched again by \
    --resume); one that gets no answer (closed \
    port, refused, TLS to a plain port) makes each URL's record that error.

STOPPING:
    Ctrl-C (or SIGTERM) stops reading URLs, lets in-flight fetches finish for --grace \
    seconds, records every URL sent but not finished as interrupted (URLs read ahead but \
    not yet sent get no record: --resume fetches them; the summary counts them in \
    left_queued), flushes --out, writes --summary and exits 130. A second Ctrl-C exits \
    at once (records already written stay; --resume completes the job). A --frontier \
    consumer gives the URLs it did not finish back to the queue; the same command goes \
    on (it appends to --out).

SECURITY:
    Credentials in URLs are masked in --out, in WARC headers and on stderr: the password \
    of user:pass@ and the values of query parameters named like token, key, password, \
    secret, auth, sig become ***. --resume compares these masked forms. So are the values \
    of headers (-H, [crawler.headers]) named Authorization, Cookie or like token, key, \
    secret, password, auth, sig, in messages and WARC request records; Authorization, \
    Cookie and Proxy-Authorization are not sent past a redirect to another origin.

PRIVATE ADDRESSES:
    URLs you give (--urls, --sitemap) are trusted. A link found in a page, a URL listed \
    in a sitemap or a redirect that leads from a public address to a loopback, private \
    (10/8, 172.16/12, 192.168/16, fc00::/7), shared (100.64/10), link-local (169.254/16, \
    fe80::/10) or unspecified (0/8, ::) address is refused, checked on the address connected to: its record says \
    error \"private address refused\". A crawl that starts on a private host follows its \
    own links there. [crawl] allow_private = true lifts the rule.

EXIT STATUS:
    0 the crawl ran (even if some URLs failed); 1 an output could not be written, \
    reading --urls failed, reading a --dedupe input or the --out of --resume failed once \
    open, every exit was out of service for longer than the crawler \
    waits for one (or, with --frontier/--enqueue, Redis failed or lost the queue, or a \
    consumer stopped because its fetches all failed on its own side); 2 bad arguments or \
    configuration; 130 interrupted
";

/// Usage lines, with the program's name; each fits 80 columns after `Usage: exitcrawl `.
pub fn usage(name: &str) -> String {
    [
        "[-c FILE] -u FILE [-o FILE [--resume]] [-s FILE] [OPTIONS]",
        "[-c FILE] URL... [-u FILE] [-o FILE [--resume]] [OPTIONS]",
        "--demo [--demo-urls N] [-o FILE] [-s FILE] [OPTIONS]",
        "[-c FILE] -u SEEDS --follow [-o FILE] [OPTIONS]",
        "[-c FILE] --sitemap URL [-u SEEDS] [--follow] [OPTIONS]",
        "[--exit IP]... [--proxy URL]... -u FILE [OPTIONS]",
        "--enqueue FILE --frontier redis://HOST:PORT/QUEUE [--recrawl]",
        "-c FILE --frontier redis://HOST:PORT/QUEUE -o FILE [OPTIONS]",
        "--dedupe FILE [--dedupe FILE]... -o FILE",
        "completions bash|zsh|fish",
    ]
    .iter()
    .enumerate()
    .map(|(i, l)| {
        let pad = if i == 0 { "" } else { "       " };
        format!("{pad}{name} {l}")
    })
    .collect::<Vec<_>>()
    .join("\n")
}

/// The width to wrap help to: `COLUMNS` when set, else stdout's terminal, else (a pipe
/// or file) the widest; never more than [`MAX_WIDTH`].
pub fn width() -> usize {
    let columns = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<usize>().ok())
        .filter(|&c| c > 0);
    let term = || {
        console::Term::stdout()
            .size_checked()
            .map(|(_, cols)| usize::from(cols))
    };
    columns.or_else(term).unwrap_or(MAX_WIDTH).min(MAX_WIDTH)
}

/// `text` with every line longer than `width` broken at spaces. A continuation line
/// starts where the line's text does, or, for a two-column line (`  --flag <V>  help`,
/// `  field   meaning`), where its second column does; a usage line's where the
/// command's arguments do. A word too long for the room left is cut.
pub fn wrap(text: &str, width: usize, name: &str) -> String {
    let width = width.max(20);
    let mut out = String::with_capacity(text.len() + text.len() / 8);
    for line in text.lines() {
        let line = line.trim_end();
        if line.chars().count() <= width {
            out.push_str(line);
            out.push('\n');
            continue;
        }
        let indent = hanging_indent(line, name).min(width / 2);
        wrap_line(line, width, indent, &mut out);
    }
    out
}

/// Where a long line's continuation lines start (see [`wrap`]).
fn hanging_indent(line: &str, name: &str) -> usize {
    let lead = line.len() - line.trim_start().len();
    let rest = &line[lead..];
    let usage = format!("{name} ");
    if rest.starts_with("Usage: ") || (lead > 0 && rest.starts_with(&usage)) {
        return "Usage: ".len() + usage.len();
    }
    // A second column: a run of two or more spaces after the first word(s).
    match rest.find("  ") {
        Some(gap) => {
            let after = rest[gap..].len() - rest[gap..].trim_start().len();
            lead + gap + after
        }
        None => lead,
    }
}

fn wrap_line(line: &str, width: usize, indent: usize, out: &mut String) {
    let pad = " ".repeat(indent);
    let lead = line.len() - line.trim_start().len();
    let mut current = line[..lead].to_owned();
    let mut len = lead;
    let mut empty = true;
    // The line's own spacing between its columns is kept: split at single spaces only
    // after the first gap has been laid out as is.
    for word in split_keeping_gaps(&line[lead..]) {
        let (gap, word) = word;
        let wlen = word.chars().count();
        if !empty && len + gap.len() + wlen > width {
            out.push_str(&current);
            out.push('\n');
            current = pad.clone();
            len = indent;
            empty = true;
        }
        if !empty {
            current.push_str(gap);
            len += gap.len();
        }
        // A word longer than a whole line: cut it.
        let mut chars = word.chars().peekable();
        while chars.peek().is_some() {
            let room = width.saturating_sub(len).max(1);
            let piece: String = chars.by_ref().take(room).collect();
            len += piece.chars().count();
            current.push_str(&piece);
            empty = false;
            if chars.peek().is_some() {
                out.push_str(&current);
                out.push('\n');
                current = pad.clone();
                len = indent;
            }
        }
    }
    out.push_str(&current);
    out.push('\n');
}

/// The words of `s`, each with the spaces before it (empty for the first).
fn split_keeping_gaps(s: &str) -> Vec<(&str, &str)> {
    let mut words = Vec::new();
    let mut rest = s;
    while !rest.is_empty() {
        let gap_len = rest.len() - rest.trim_start_matches(' ').len();
        let (gap, tail) = rest.split_at(gap_len);
        let end = tail.find(' ').unwrap_or(tail.len());
        let (word, next) = tail.split_at(end);
        if !word.is_empty() {
            words.push((gap, word));
        }
        rest = next;
    }
    words
}

#[cfg(test)]
mod tests {
    use super::*;

    fn widest(text: &str) -> usize {
        text.lines().map(|l| l.chars().count()).max().unwrap_or(0)
    }

    #[test]
    fn a_long_flag_line_wraps_under_its_help_column() {
        let line = "  -o, --out <FILE>  JSONL records, one per URL, written as results \
                    arrive: url, status, exit, attempts, elapsed_ms, bytes";
        let got = wrap(line, 50, "exitcrawl");
        assert!(widest(&got) <= 50, "{got}");
        let lines: Vec<&str> = got.lines().collect();
        assert!(lines.len() >= 3, "{got}");
        assert!(lines[0].starts_with("  -o, --out <FILE>  JSONL"), "{got}");
        for l in &lines[1..] {
            assert!(l.starts_with(&" ".repeat(20)), "{got}");
            assert!(!l[20..].starts_with(' '), "{got}");
        }
        // Every word is kept, in order.
        let words = |s: &str| s.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
        assert_eq!(words(&got), words(line));
    }

    #[test]
    fn paragraphs_keep_their_indent_and_short_lines_are_untouched() {
        let text = "HEADING:\n    one two three four five six seven eight nine ten\n";
        let got = wrap(text, 24, "x");
        assert!(widest(&got) <= 24, "{got}");
        assert!(got.starts_with("HEADING:\n    one two"), "{got}");
        assert!(got
            .lines()
            .skip(1)
            .all(|l| l.starts_with("    ") && !l[4..].starts_with(' ')));
        assert_eq!(wrap("short\n", 24, "x"), "short\n");
    }

    #[test]
    fn usage_continues_under_the_arguments_and_long_words_are_cut() {
        let got = wrap(
            "Usage: prog --aaaa FILE --bbbb FILE --cccc FILE",
            30,
            "prog",
        );
        let lines: Vec<&str> = got.lines().collect();
        assert!(
            lines.len() > 1 && lines[1].starts_with(&" ".repeat(12)),
            "{got}"
        );
        let got = wrap(&"y".repeat(70), 30, "prog");
        assert!(widest(&got) <= 30, "{got}");
        assert_eq!(got.replace('\n', "").trim(), "y".repeat(70));
    }
}
