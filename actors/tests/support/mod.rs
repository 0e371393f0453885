//! Shared test helpers: exits on 127.0.0.x, and a real `redis-server` that each test
//! starts on a free loopback port (no persistence, or an append-only file in a directory
//! of its own) and that is killed on drop. Without
//! `redis-server` on PATH the Redis tests fail, never skip: CI installs it in `.ci/run`;
//! locally, `apt-get install -y redis-server`.
//!
//! Each test crate uses a different part of this helper, hence `allow(dead_code)`.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use exitcrawl::config::ExitSettings;
use exitcrawl_redis::{Redis, RedisOptions};

/// Poll `cond` every 20 ms until it holds or `limit` passes.
pub async fn eventually<F, Fut>(limit: Duration, mut cond: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if cond().await {
            return true;
        }
        if tokio::time::Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Held by tests that measure wall-clock rates at the server (goodput, a budget shared
/// through Redis): run alongside each other on a 2-core machine, their crawlers steal
/// each other's CPU and the arrival times they assert on pick up scheduling delays that
/// are not the crawler's doing. Spacing claims do not need it: they run on paused time
/// against `TestSite::start_on_runtime`, where CPU load cannot move an arrival.
///
/// Async tests hold it across awaits on purpose: each test has its own runtime on its
/// own thread, so waiting here blocks only the tests queued behind it.
pub fn wall_clock_guard() -> WallClockGuard {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    // A failed test poisons the lock; the next one still runs.
    WallClockGuard(LOCK.lock().unwrap_or_else(|e| e.into_inner()))
}

/// See [`wall_clock_guard`]; released on drop.
pub struct WallClockGuard(#[allow(dead_code)] std::sync::MutexGuard<'static, ()>);

/// Pause the test's runtime and serve `cfg` on it (`TestSite::start_on_runtime`): the
/// site's buckets, latencies and log then run on the same paused clock as the crawler, so
/// spacing is exact and a loaded machine cannot stretch it. Pair it with
/// [`timeouts_for_paused_time`].
pub fn paused_site(cfg: exitcrawl_testsite::SiteConfig) -> exitcrawl_testsite::TestSite {
    tokio::time::pause();
    exitcrawl_testsite::TestSite::start_on_runtime(cfg)
}

/// Request and connect timeouts of ten minutes, for a crawl on paused time: when every
/// task waits, tokio jumps paused time to the next timer, and a usual 5 s request timeout
/// could be that timer while loopback I/O is still being handed between the crawler and
/// the site; ten minutes is beyond any pacing or latency timer, so a jump can only reach
/// those.
pub fn timeouts_for_paused_time(s: &mut exitcrawl::config::Settings) {
    s.crawler.timeout_ms = 600_000;
    s.crawler.connect_timeout_ms = 600_000;
}

/// An IP literal.
pub fn ip(s: &str) -> std::net::IpAddr {
    s.parse().expect("ip literal")
}

/// `n` exits named e2, e3, … bound to 127.0.0.2, 127.0.0.3, …
pub fn exits(n: u8, max_concurrent: u32) -> Vec<ExitSettings> {
    (2..2 + n)
        .map(|i| {
            let mut e = ExitSettings::new(format!("e{i}"), ip(&format!("127.0.0.{i}")));
            e.max_concurrent = max_concurrent;
            e
        })
        .collect()
}

/// A `redis-server` child on 127.0.0.1:`port`, killed on drop.
pub struct RedisServer {
    pub port: u16,
    child: Option<Child>,
    /// With an append-only file: its directory (removed on drop).
    aof_dir: Option<std::path::PathBuf>,
}

impl RedisServer {
    /// No persistence: a restart comes back empty.
    pub fn start() -> Self {
        Self::start_with(None)
    }

    /// `appendonly yes` (fsync every second, Redis's default) in a fresh directory: a
    /// restart comes back with the data.
    pub fn start_aof() -> Self {
        let dir = std::env::temp_dir().join(format!(
            "exitcrawl-redis-aof-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default()
                .as_nanos()
        ));
        std::fs::create_dir_all(&dir).expect("create the AOF directory");
        Self::start_with(Some(dir))
    }

    fn start_with(aof_dir: Option<std::path::PathBuf>) -> Self {
        let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .and_then(|l| l.local_addr())
            .expect("bind 127.0.0.1:0")
            .port();
        let mut s = Self {
            port,
            child: None,
            aof_dir,
        };
        s.restart();
        s
    }

    /// (Re)starts the server on the same port and waits (≤ 5 s) until it answers PING.
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "server already running");
        let mut cmd = Command::new("redis-server");
        cmd.args(["--port", &self.port.to_string()])
            .args(["--bind", "127.0.0.1"])
            .args(["--save", ""]);
        match &self.aof_dir {
            Some(dir) => cmd
                .args(["--appendonly", "yes", "--appendfsync", "everysec"])
                .arg("--dir")
                .arg(dir),
            None => cmd.args(["--appendonly", "no"]),
        };
        let child = cmd.stdout(Stdio::null()).stderr(Stdio::null()).spawn();
        let child = match child {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if std::env::var_os("CI").is_some() {
                    panic!(
                        "CI: redis-server is not on PATH; .ci/run must install it \
                         (apt-get install -y redis-server)"
                    );
                }
                panic!("install redis-server (apt-get install -y redis-server)");
            }
            Err(e) => panic!("starting redis-server: {e}"),
        };
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if self.pings() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!(
            "redis-server on port {} did not answer PING within 5 s",
            self.port
        );
    }

    pub fn pings(&self) -> bool {
        let Ok(mut s) = TcpStream::connect((Ipv4Addr::LOCALHOST, self.port)) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(Duration::from_millis(200)));
        let mut buf = [0u8; 7];
        s.write_all(b"PING\r\n").is_ok() && s.read_exact(&mut buf).is_ok() && &buf == b"+PONG\r\n"
    }

    /// A command over a fresh connection, without a runtime (for tests that run the
    /// binary): the reply as text — an integer's digits, a string, an error's message, or
    /// an array's length as `*N`.
    pub fn cmd(&self, args: &[&str]) -> String {
        let mut s = TcpStream::connect((Ipv4Addr::LOCALHOST, self.port)).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut req = format!("*{}\r\n", args.len());
        for a in args {
            req.push_str(&format!("${}\r\n{a}\r\n", a.len()));
        }
        s.write_all(req.as_bytes()).expect("send");
        let mut reader = std::io::BufReader::new(s);
        let mut line = String::new();
        std::io::BufRead::read_line(&mut reader, &mut line).expect("reply");
        let line = line.trim_end();
        match line.split_at(1) {
            ("$", "-1") => String::new(),
            ("$", _) => {
                let mut v = String::new();
                std::io::BufRead::read_line(&mut reader, &mut v).expect("bulk");
                v.trim_end().to_string()
            }
            ("*", n) => format!("*{n}"),
            (_, rest) => rest.to_string(),
        }
    }

    /// An integer reply (`XLEN`, `SCARD`, `EXISTS`, …).
    pub fn int(&self, args: &[&str]) -> i64 {
        let r = self.cmd(args);
        r.parse()
            .unwrap_or_else(|_| panic!("{args:?} answered {r:?}"))
    }

    /// SIGKILL, like a crash.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    pub fn connect(&self) -> Redis {
        Redis::connect(&self.url(), RedisOptions::default()).expect("valid url")
    }

    /// A raw command over a fresh connection (for test set-up, e.g. SCRIPT FLUSH).
    pub async fn raw(&self, args: &[&str]) -> redis::Value {
        let client = redis::Client::open(self.url()).unwrap();
        let mut c = client.get_multiplexed_async_connection().await.unwrap();
        let mut cmd = redis::cmd(args[0]);
        for a in &args[1..] {
            cmd.arg(*a);
        }
        cmd.query_async(&mut c).await.unwrap()
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
        if let Some(dir) = &self.aof_dir {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// The target of a `CONNECT` head, read a byte at a time: nothing after the head is read.
pub async fn read_connect(client: &mut tokio::net::TcpStream) -> Option<std::net::SocketAddr> {
    use tokio::io::AsyncReadExt;
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if client.read(&mut byte).await.ok()? == 0 {
            return None;
        }
        head.push(byte[0]);
    }
    let line = std::str::from_utf8(&head).ok()?.lines().next()?;
    line.strip_prefix("CONNECT ")?
        .split(' ')
        .next()?
        .parse()
        .ok()
}
