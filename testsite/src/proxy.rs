//! Real proxy servers from the distribution's packages, for tests of proxy exits:
//! tinyproxy (HTTP `CONNECT`) and microsocks (SOCKS5), each on a free port of 127.0.0.1,
//! killed (and their files removed) on drop. `.ci/run` installs both.

use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A proxy process, killed on drop.
pub struct Proxy {
    child: Child,
    /// The port it listens on, on 127.0.0.1.
    pub port: u16,
    /// Its config and log, removed on drop.
    dir: Option<PathBuf>,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(dir) = &self.dir {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// Username and password a proxy asks of its clients: `user:pass`.
pub const CREDENTIALS: (&str, &str) = ("user", "pass");

impl Proxy {
    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// tinyproxy on 127.0.0.1, taking clients from `allow` only, connecting out from
    /// `bind`; with [`CREDENTIALS`] (Basic) when `credentials`.
    pub fn tinyproxy(allow: IpAddr, bind: IpAddr, credentials: bool) -> Self {
        let port = free_port();
        let dir =
            std::env::temp_dir().join(format!("exitcrawl-tinyproxy-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a directory for tinyproxy");
        let conf = dir.join("tinyproxy.conf");
        let auth = if credentials {
            format!("BasicAuth {} {}\n", CREDENTIALS.0, CREDENTIALS.1)
        } else {
            String::new()
        };
        std::fs::write(
            &conf,
            format!(
                "Port {port}\nListen 127.0.0.1\nBind {bind}\nAllow {allow}\nTimeout 30\n\
                 MaxClients 64\n{auth}LogLevel Info\nLogFile \"{log}\"\nPidFile \"{pid}\"\n",
                log = dir.join("log").display(),
                pid = dir.join("pid").display(),
            ),
        )
        .expect("tinyproxy's config");
        Self::start(
            Command::new("tinyproxy").arg("-d").arg("-c").arg(&conf),
            port,
            Some(dir),
        )
    }

    /// microsocks on 127.0.0.1, connecting out from `bind`; with [`CREDENTIALS`] when
    /// `credentials`.
    pub fn microsocks(bind: IpAddr, credentials: bool) -> Self {
        let port = free_port();
        let mut cmd = Command::new("microsocks");
        cmd.args(["-i", "127.0.0.1", "-p", &port.to_string()]);
        if credentials {
            cmd.args(["-u", CREDENTIALS.0, "-P", CREDENTIALS.1]);
        }
        cmd.args(["-b", &bind.to_string()]);
        Self::start(&mut cmd, port, None)
    }

    /// Start `command` and wait (bounded) until it accepts connections on `port`.
    fn start(command: &mut Command, port: u16, dir: Option<PathBuf>) -> Self {
        let name = format!("{:?}", command.get_program());
        let child = command
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{name} on PATH (.ci/run installs it): {e}"));
        let proxy = Proxy { child, port, dir };
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(proxy.addr()).is_err() {
            assert!(Instant::now() < deadline, "{name} on {port} did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        proxy
    }
}

/// A port of 127.0.0.1 free a moment ago.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .expect("a free port")
        .local_addr()
        .expect("its address")
        .port()
}
