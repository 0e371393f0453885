//! The command line after clap has parsed it (`flags`): [`validate`] checks the rules
//! between flags (which flags go together), with the messages scripts already know.
//!
//! Every flag takes its value as `--flag VALUE` or `--flag=VALUE`; a value may start with
//! `-` (`--urls -` is stdin); a valued flag given twice is an error, a switch given twice
//! is not. Exit status 2 for any argument error (clap's own included).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap_complete::Shell;

pub use super::flags::{Cli, LogFormat};
use super::flags::{Flags, Sub};
use super::overrides::exit_args;
pub use super::overrides::{ExitArg, Overrides};
use super::source::{FrontierUrl, UrlSource};

/// URLs the demo generates unless `--demo-urls` says otherwise.
pub const DEFAULT_DEMO_URLS: u64 = 3000;
/// Default `--grace`.
pub const DEFAULT_STOP_GRACE: Duration = Duration::from_secs(10);
/// Default `--claim-idle`.
pub const DEFAULT_CLAIM_IDLE: Duration = Duration::from_secs(30);
/// Default `--idle-exit`.
pub const DEFAULT_IDLE_EXIT: Duration = Duration::from_secs(5);
/// Default `--redis-wait`.
pub const DEFAULT_REDIS_WAIT: Duration = exitcrawl::shared_frontier::DEFAULT_REDIS_WAIT;

/// What the command line asks for.
#[derive(Debug)]
pub enum Command {
    /// A crawl: URL list, demo, follow or frontier consumer.
    Run(Box<RunArgs>),
    /// `--enqueue FILE --frontier URL`: push the URLs of FILE and exit.
    Enqueue {
        urls: UrlSource,
        frontier: FrontierUrl,
        recrawl: bool,
    },
    /// `--dedupe FILE... --out FILE`: merge results files.
    Dedupe { inputs: Vec<PathBuf>, out: PathBuf },
    /// `completions SHELL`.
    Completions(Shell),
}

/// A crawl's arguments, checked.
#[derive(Debug, Clone)]
pub struct RunArgs {
    /// `None` in demo mode (the demo builds its own settings).
    pub config: Option<PathBuf>,
    pub urls: UrlSource,
    /// URLs given as arguments: lines read before `urls`.
    pub given: Vec<String>,
    pub out: Option<PathBuf>,
    pub summary: Option<PathBuf>,
    pub report: Option<PathBuf>,
    pub resume: bool,
    pub grace: Duration,
    pub metrics: Option<SocketAddr>,
    pub quiet: bool,
    pub log_format: LogFormat,
    pub follow: bool,
    pub ignore_robots: bool,
    pub claim_idle: Duration,
    pub idle_exit: Duration,
    pub redis_wait: Duration,
    pub warc: Option<PathBuf>,
    pub warc_max_bytes: Option<u64>,
    pub bodies: Option<PathBuf>,
    /// `-H`, parsed: name and value.
    pub headers: Vec<(String, String)>,
    pub user_agent: Option<String>,
    pub sitemaps: Vec<String>,
    pub no_dedupe: bool,
    /// `--exit`, `--proxy` and `--proxies`, in that order; empty when none was given.
    pub exits: Vec<ExitArg>,
    /// The everyday settings given as flags.
    pub overrides: Overrides,
}

impl RunArgs {
    pub fn is_demo(&self) -> bool {
        matches!(self.urls, UrlSource::Demo(_))
    }

    /// Whether `--out` (and `--warc`) are appended to: `--resume`, or a frontier
    /// consumer, which never truncates what an earlier run of it recorded.
    pub fn appends(&self) -> bool {
        self.resume || matches!(self.urls, UrlSource::Frontier(_))
    }
}

/// The rules between flags. `Err` is a message for stderr (exit 2).
pub fn validate(cli: Cli) -> Result<Command, String> {
    if let Some(Sub::Completions { shell }) = cli.command {
        return Ok(Command::Completions(shell));
    }
    let f = cli.flags;
    if !f.dedupe.is_empty() {
        return dedupe_command(f);
    }
    if let Some(file) = f.enqueue.clone() {
        if f.frontier.is_none() {
            return Err("--enqueue needs --frontier redis://HOST:PORT/QUEUE".into());
        }
        only(
            &f,
            &["--enqueue", "--frontier", "--recrawl"],
            "--enqueue only goes with --frontier and --recrawl",
        )?;
        let frontier = f.frontier.expect("checked above");
        return Ok(Command::Enqueue {
            urls: UrlSource::from_arg(&file),
            frontier,
            recrawl: f.recrawl,
        });
    }
    if f.recrawl {
        return Err("--recrawl only goes with --enqueue FILE --frontier URL".into());
    }
    if (f.claim_idle.is_some() || f.idle_exit.is_some() || f.redis_wait.is_some())
        && f.frontier.is_none()
    {
        return Err("--claim-idle/--idle-exit/--redis-wait only go with --frontier".into());
    }
    check_keep_flags(&f)?;
    f.overrides().check()?;
    let headers = parse_headers(&f.header)?;
    if let Some(ua) = &f.user_agent {
        check_user_agent(ua)?;
    }
    let urls = url_source(&f)?;
    let exits = exit_args(f.demo, &f.exits, &f.proxies, f.proxies_file.as_deref())?;
    if f.resume && f.out.as_deref().is_none_or(|p| p == Path::new("-")) {
        return Err("--resume needs --out FILE (the results of the earlier run)".into());
    }
    let overrides = f.overrides();
    Ok(Command::Run(Box::new(RunArgs {
        config: f.config,
        urls,
        given: f.given,
        out: f.out,
        summary: f.summary,
        report: f.report,
        resume: f.resume,
        grace: f.grace.unwrap_or(DEFAULT_STOP_GRACE),
        metrics: f.metrics,
        quiet: f.quiet,
        log_format: f.log_format.unwrap_or_default(),
        follow: f.follow,
        ignore_robots: f.ignore_robots,
        claim_idle: f.claim_idle.unwrap_or(DEFAULT_CLAIM_IDLE),
        idle_exit: f.idle_exit.unwrap_or(DEFAULT_IDLE_EXIT),
        redis_wait: f.redis_wait.unwrap_or(DEFAULT_REDIS_WAIT),
        warc: f.warc,
        warc_max_bytes: f.warc_max_bytes,
        bodies: f.bodies,
        headers,
        user_agent: f.user_agent,
        sitemaps: f.sitemap,
        no_dedupe: f.no_dedupe,
        exits,
        overrides,
    })))
}

impl Flags {
    /// The everyday settings given as flags.
    fn overrides(&self) -> Overrides {
        Overrides {
            concurrency: self.concurrency,
            max_rps: self.max_rps,
            initial_rps: self.initial_rps,
            timeout: self.timeout,
            retries: self.retries,
            depth: self.depth,
            max_pages: self.max_pages,
            scope: self.scope,
        }
    }

    /// The flags given, by their long names, in `--help`'s order (the URL arguments are
    /// not flags: see `given`).
    fn named(&self) -> Vec<&'static str> {
        [
            ("--config", self.config.is_some()),
            ("--urls", self.urls.is_some()),
            ("--sitemap", !self.sitemap.is_empty()),
            ("--no-dedupe", self.no_dedupe),
            ("--out", self.out.is_some()),
            ("--resume", self.resume),
            ("--summary", self.summary.is_some()),
            ("--report", self.report.is_some()),
            ("--warc", self.warc.is_some()),
            ("--warc-max-bytes", self.warc_max_bytes.is_some()),
            ("--bodies", self.bodies.is_some()),
            ("--dedupe", !self.dedupe.is_empty()),
            ("--exit", !self.exits.is_empty()),
            ("--proxy", !self.proxies.is_empty()),
            ("--proxies", self.proxies_file.is_some()),
            ("--header", !self.header.is_empty()),
            ("--user-agent", self.user_agent.is_some()),
            ("--concurrency", self.concurrency.is_some()),
            ("--max-rps", self.max_rps.is_some()),
            ("--initial-rps", self.initial_rps.is_some()),
            ("--timeout", self.timeout.is_some()),
            ("--retries", self.retries.is_some()),
            ("--ignore-robots", self.ignore_robots),
            ("--grace", self.grace.is_some()),
            ("--follow", self.follow),
            ("--depth", self.depth.is_some()),
            ("--scope", self.scope.is_some()),
            ("--max-pages", self.max_pages.is_some()),
            ("--frontier", self.frontier.is_some()),
            ("--enqueue", self.enqueue.is_some()),
            ("--recrawl", self.recrawl),
            ("--claim-idle", self.claim_idle.is_some()),
            ("--idle-exit", self.idle_exit.is_some()),
            ("--redis-wait", self.redis_wait.is_some()),
            ("--quiet", self.quiet),
            ("--metrics", self.metrics.is_some()),
            ("--log-format", self.log_format.is_some()),
            ("--demo", self.demo),
            ("--demo-urls", self.demo_urls.is_some()),
        ]
        .into_iter()
        .filter_map(|(name, given)| given.then_some(name))
        .collect()
    }
}

/// A command that takes only the flags `takes` (no URL arguments): `Err` is `refusal`
/// naming the first other one given, which would otherwise be ignored.
fn only(f: &Flags, takes: &[&str], refusal: &str) -> Result<(), String> {
    if !f.given.is_empty() {
        return Err(format!("{refusal} (drop the URL arguments)"));
    }
    match f.named().into_iter().find(|name| !takes.contains(name)) {
        Some(name) => Err(format!("{refusal} (drop {name})")),
        None => Ok(()),
    }
}

/// `--dedupe FILE... --out FILE`, alone.
fn dedupe_command(f: Flags) -> Result<Command, String> {
    only(
        &f,
        &["--dedupe", "--out"],
        "--dedupe only goes with --out FILE",
    )?;
    let out = f
        .out
        .ok_or("--dedupe needs --out FILE (the merged results)")?;
    Ok(Command::Dedupe {
        inputs: f.dedupe,
        out,
    })
}

/// `-H 'Name: value'` each, checked as `[crawler.headers]` entries are; a message that
/// shows a secret-looking header's value masked.
fn parse_headers(raw: &[String]) -> Result<Vec<(String, String)>, String> {
    let max = exitcrawl::config::MAX_HEADERS;
    if raw.len() > max {
        return Err(format!(
            "-H: given {} times; at most {max} headers",
            raw.len()
        ));
    }
    let mut out: Vec<(String, String)> = Vec::new();
    for h in raw {
        let Some((name, value)) = h.split_once(':') else {
            let shown = exitcrawl::redact::mask_header(h, h);
            return Err(format!(
                "-H {shown:?}: expected 'Name: value' (a header name, a colon, its value)"
            ));
        };
        let (name, value) = (name.trim(), value.trim());
        if let Err(why) = exitcrawl::config::check_header(name, value) {
            let shown = format!("{name}: {}", exitcrawl::redact::mask_header(name, value));
            return Err(format!("-H {shown:?}: {why}"));
        }
        out.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
        out.push((name.to_owned(), value.to_owned()));
    }
    Ok(out)
}

/// `--user-agent`: what `[crawler] user_agent` allows.
fn check_user_agent(ua: &str) -> Result<(), String> {
    if ua.is_empty() || ua.len() > 512 || !ua.chars().all(|c| (' '..='~').contains(&c)) {
        return Err(format!(
            "--user-agent {ua:?}: must be 1..=512 characters of visible ASCII or spaces (it is sent as an HTTP header)"
        ));
    }
    Ok(())
}

/// `--warc`, `--warc-max-bytes`, `--bodies`.
fn check_keep_flags(f: &Flags) -> Result<(), String> {
    if f.warc_max_bytes.is_some() && f.warc.is_none() {
        return Err("--warc-max-bytes only goes with --warc FILE".into());
    }
    if let Some(w) = &f.warc {
        super::warc::WarcName::parse(w)?;
    }
    if f.bodies.as_deref() == Some(Path::new("-")) {
        return Err("--bodies: \"-\" is not a directory (files are written into DIR)".into());
    }
    Ok(())
}

/// Where a crawl's URLs come from: the frontier, the demo or `--urls`.
fn url_source(f: &Flags) -> Result<UrlSource, String> {
    if let Some(fr) = &f.frontier {
        if f.demo || f.urls.is_some() || !f.given.is_empty() {
            return Err(
                "--frontier pulls its URLs from Redis: drop --urls/--demo and the URL arguments"
                    .into(),
            );
        }
        if f.config.is_none() {
            return Err("--frontier needs --config FILE".into());
        }
        if f.follow || !f.sitemap.is_empty() {
            return Err("--frontier does not go with --follow or --sitemap".into());
        }
        if f.out.as_deref().is_none_or(|p| p == Path::new("-")) {
            return Err("--frontier needs --out FILE (records are written before the ack)".into());
        }
        return Ok(UrlSource::Frontier(fr.clone()));
    }
    if f.demo {
        if f.config.is_some() || f.urls.is_some() || !f.sitemap.is_empty() || !f.given.is_empty() {
            return Err(
                "--demo builds its own settings and URLs: drop --config/--urls/--sitemap \
                 and the URL arguments"
                    .into(),
            );
        }
        if f.resume {
            return Err(
                "--resume does not go with --demo (its site's port changes every run)".into(),
            );
        }
        return Ok(UrlSource::Demo(f.demo_urls.unwrap_or(DEFAULT_DEMO_URLS)));
    }
    if f.demo_urls.is_some() {
        return Err("--demo-urls only goes with --demo".into());
    }
    match f.urls.as_deref() {
        None if !f.sitemap.is_empty() || !f.given.is_empty() => Ok(UrlSource::Nothing),
        None => Err(
            "missing URLs: give them as arguments, or --urls FILE (or - for stdin), or \
             --sitemap URL"
                .into(),
        ),
        Some(u) => Ok(UrlSource::from_arg(u)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory, Parser};

    fn parse(args: &[&str]) -> Result<Command, String> {
        let cli = Cli::try_parse_from(std::iter::once("crawl").chain(args.iter().copied()))
            .map_err(|e| e.to_string())?;
        validate(cli)
    }

    #[test]
    fn clap_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn inline_values_repeats_and_hyphens() {
        let Ok(Command::Run(a)) = parse(&[
            "--config=c.toml",
            "--urls",
            "-",
            "--quiet",
            "--quiet",
            "--grace=0.5",
        ]) else {
            panic!("parses");
        };
        assert_eq!(a.urls, UrlSource::Stdin);
        assert_eq!(a.grace, Duration::from_millis(500));
        assert!(a.quiet);
        let e = parse(&["--config", "a", "--config", "b", "--urls", "u"]).unwrap_err();
        assert!(e.contains("--config"), "{e}");
        let e = parse(&["--config", "c", "--urls", "u", "--grace", "-1"]).unwrap_err();
        assert!(
            e.contains("--grace") && e.contains("-1 seconds is out of range"),
            "{e}"
        );
        let e = parse(&["--config", "c", "--urls", "u", "--grace", "86401"]).unwrap_err();
        assert!(
            e.contains("86401 seconds is out of range (0 to 86400)"),
            "{e}"
        );
        let e = parse(&["--config", "c", "--urls", "u", "--grace", "soon"]).unwrap_err();
        assert!(e.contains("is not a number of seconds (0 to 86400)"), "{e}");
        let e = parse(&["--config", "c", "--urls="]).unwrap_err();
        assert!(e.contains("--urls"), "{e}");
    }

    /// A value each flag takes, for a command line that gives it.
    fn sample(long: &str) -> &'static str {
        match long {
            "warc" => "x.warc.gz",
            "warc-max-bytes" => "1M",
            "sitemap" => "http://h/s.xml",
            "exit" => "127.0.0.2",
            "proxy" => "http://127.0.0.1:9",
            "header" => "A: b",
            "scope" => "any",
            "frontier" => "redis://127.0.0.1:9/q",
            "metrics" => "127.0.0.1:9",
            "log-format" => "json",
            "config" | "urls" | "out" | "summary" | "report" | "bodies" | "dedupe" | "enqueue"
            | "proxies" | "user-agent" => "x",
            _ => "1",
        }
    }

    #[test]
    fn dedupe_and_enqueue_refuse_every_flag_they_do_not_take() {
        let cmd = Cli::command();
        let longs: Vec<&str> = cmd
            .get_arguments()
            .filter_map(|a| Some((a.get_long()?, a.get_action().takes_values())))
            .filter(|(long, _)| !["help", "version"].contains(long))
            .map(|(long, _)| long)
            .collect();
        assert!(longs.len() > 30, "{longs:?}");
        let base: [&[&str]; 2] = [
            &["--dedupe", "a", "--out", "b"],
            &["--enqueue", "u", "--frontier", "redis://127.0.0.1:9/q"],
        ];
        for long in longs {
            let arg = cmd
                .get_arguments()
                .find(|a| a.get_long() == Some(long))
                .expect("the flag");
            let flag = format!("--{long}");
            for base in base {
                if base.contains(&flag.as_str()) || (long == "recrawl" && base[0] == "--enqueue") {
                    continue;
                }
                let mut args = base.to_vec();
                args.push(&flag);
                if arg.get_action().takes_values() {
                    args.push(sample(long));
                }
                let e = parse(&args).expect_err(&format!("{args:?} refused"));
                // `--dedupe` given to `--enqueue` is the merge refusing `--enqueue`'s flags.
                assert!(
                    e.contains("only goes with") && e.contains(&flag),
                    "{args:?}: {e}"
                );
            }
        }
        let e = parse(&["http://h/", "--dedupe", "a", "--out", "b"]).unwrap_err();
        assert!(e.contains("drop the URL arguments"), "{e}");
        assert!(parse(&["--dedupe", "a", "--dedupe", "b", "--out", "c"]).is_ok());
        assert!(parse(&["--enqueue", "u", "--frontier", "redis://h:1/q", "--recrawl"]).is_ok());
    }

    #[test]
    fn keep_flags_need_a_crawl() {
        let e = parse(&["--config", "c", "--urls", "u", "--warc-max-bytes", "1M"]).unwrap_err();
        assert!(e.contains("--warc-max-bytes only goes with --warc"), "{e}");
        let e = parse(&["--config", "c", "--urls", "u", "--warc", "x.zip"]).unwrap_err();
        assert!(e.contains("--warc") && e.contains(".warc.gz"), "{e}");
        let e = parse(&["--dedupe", "a", "--out", "b", "--warc", "x.warc.gz"]).unwrap_err();
        assert!(e.contains("--dedupe only goes with --out"), "{e}");
        assert!(matches!(
            parse(&["completions", "zsh"]),
            Ok(Command::Completions(Shell::Zsh))
        ));
    }
}
