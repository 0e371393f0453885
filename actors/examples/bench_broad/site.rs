//! The site of the benchmark in child processes: this program run again with `--serve I/N`
//! serves part I of N of the `BroadSite` and answers on stdin/stdout, so that the CPU time
//! and memory the parent measures are the crawler's alone, and the site's listeners and
//! connections are spread over several open-file limits.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use exitcrawl_testsite::{BroadConfig, BroadSite, HostClass, Rps};

/// Hosts per site process: their listeners, and their side of the crawler's connections,
/// stay well within one open-file limit.
pub(crate) const HOSTS_PER_PROCESS: usize = 2500;

/// Part `part` of `parts` of the site: a contiguous range of the hosts, every class kept
/// (with the hosts it has in the range, maybe none) so class numbers stay the same.
pub(crate) fn part_config(cfg: &BroadConfig, part: usize, parts: usize) -> BroadConfig {
    let total: usize = cfg.classes.iter().map(|c| c.hosts).sum();
    let (start, end) = (total * part / parts, total * (part + 1) / parts);
    let mut first = 0;
    let classes = cfg
        .classes
        .iter()
        .map(|c| {
            // The class's hosts inside [start, end); empty when it lies outside.
            let lo = first.max(start).min(first + c.hosts);
            let hi = (first + c.hosts).min(end).max(lo);
            let range = (lo - first)..(hi - first);
            first += c.hosts;
            let rps = match &c.rps {
                Rps::PerHost(v) => Rps::PerHost(v[range.clone()].to_vec()),
                other => other.clone(),
            };
            HostClass {
                hosts: range.len(),
                rps,
                ..c.clone()
            }
        })
        .collect();
    BroadConfig {
        classes,
        first_host: cfg.first_host + start,
        ..cfg.clone()
    }
}

/// One host as the child announced it.
pub(crate) struct Host {
    pub(crate) class: usize,
    pub(crate) rps: Option<f64>,
    pub(crate) base_url: String,
}

/// What one host counted.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Counted {
    pub(crate) requests: u64,
    pub(crate) ok: u64,
    pub(crate) limited: u64,
    /// TCP connections it accepted.
    pub(crate) connections: u64,
}

/// Child mode: start the site, announce every host (`host <class> <rps|-> <base url>`),
/// then `ready`; on a `stats` line print `stats <requests> <ok> <limited> <connections>`
/// per host and
/// `end`; exit when stdin ends.
pub(crate) fn serve(cfg: BroadConfig) {
    let site = BroadSite::start(cfg);
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for h in site.hosts() {
        let rps = h.rps.map_or_else(|| "-".to_owned(), |r| r.to_string());
        let _ = writeln!(out, "host {} {rps} {}", h.class, h.base_url);
    }
    let _ = writeln!(out, "ready");
    let _ = out.flush();
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        if line.trim() == "stats" {
            for s in site.stats() {
                let connections: u64 = s.peers.values().map(|p| p.connections).sum();
                let _ = writeln!(
                    out,
                    "stats {} {} {} {connections}",
                    s.requests, s.ok, s.limited
                );
            }
            let _ = writeln!(out, "end");
            let _ = out.flush();
        }
    }
}

pub(crate) struct SiteProcess {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    pub(crate) hosts: Vec<Host>,
}

impl SiteProcess {
    /// Run this program again with `--serve part/parts` and the same arguments; read its
    /// hosts.
    pub(crate) fn start(part: usize, parts: usize) -> Result<SiteProcess, String> {
        let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
        let mut child = Command::new(exe)
            .args(std::env::args().skip(1))
            .arg("--serve")
            .arg(format!("{part}/{parts}"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("spawn: {e}"))?;
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().ok_or("no stdout")?);
        let mut p = SiteProcess {
            child,
            stdin,
            stdout,
            hosts: Vec::new(),
        };
        loop {
            let line = p.line()?;
            if line == "ready" {
                return Ok(p);
            }
            let host = parse_host(&line).ok_or_else(|| format!("bad host line {line:?}"))?;
            p.hosts.push(host);
        }
    }

    fn line(&mut self) -> Result<String, String> {
        let mut line = String::new();
        match self.stdout.read_line(&mut line) {
            Ok(0) => Err("the site process ended".into()),
            Ok(_) => Ok(line.trim_end().to_owned()),
            Err(e) => Err(format!("reading the site process: {e}")),
        }
    }

    pub(crate) fn stats(&mut self) -> Result<Vec<Counted>, String> {
        let stdin = self.stdin.as_mut().ok_or("stdin closed")?;
        writeln!(stdin, "stats")
            .and_then(|()| stdin.flush())
            .map_err(|e| format!("asking for stats: {e}"))?;
        let mut all = Vec::with_capacity(self.hosts.len());
        loop {
            let line = self.line()?;
            if line == "end" {
                break;
            }
            let n: Vec<u64> = line
                .strip_prefix("stats ")
                .map(|r| r.split(' ').filter_map(|x| x.parse().ok()).collect())
                .unwrap_or_default();
            let [requests, ok, limited, connections] = n[..] else {
                return Err(format!("bad stats line {line:?}"));
            };
            all.push(Counted {
                requests,
                ok,
                limited,
                connections,
            });
        }
        Ok(all)
    }

    /// Close its stdin and wait (at most 10 s) for it to end; kill it otherwise.
    pub(crate) fn finish(&mut self) {
        self.stdin = None;
        let until = Instant::now() + Duration::from_secs(10);
        while Instant::now() < until {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        eprintln!("bench_broad: the site process did not end; killing it");
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn parse_host(line: &str) -> Option<Host> {
    let mut f = line.strip_prefix("host ")?.split(' ');
    let class = f.next()?.parse().ok()?;
    let rps = match f.next()? {
        "-" => None,
        r => Some(r.parse().ok()?),
    };
    let base_url = f.next()?.to_owned();
    Some(Host {
        class,
        rps,
        base_url,
    })
}
