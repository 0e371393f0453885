//! A raw HTTP/1.1 server on loopback for tests that need exact bytes on the wire (a body
//! read until close, a body cut short, interim answers, garbage framing): it reads request
//! heads and writes what a script says, and records what it saw. Every connection lives at
//! most [`CONNECTION_MAX`]; an endless body stops at [`ENDLESS_CAP`].
//!
//! Each test crate uses a different part of this helper, hence `allow(dead_code)`.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;

/// The most an endless body writes: far past what a client may take.
pub const ENDLESS_CAP: u64 = 256 << 20;
/// The longest any server connection lives.
pub const CONNECTION_MAX: Duration = Duration::from_secs(20);

/// What the server does after writing its bytes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Then {
    /// Close the connection.
    Close,
    /// Read the next request on the same connection.
    KeepOpen,
    /// Write body bytes for ever (bounded by [`ENDLESS_CAP`]) until the client hangs up.
    Endless,
}

/// What the server saw.
#[derive(Default, Debug)]
pub struct Seen {
    /// Request lines, in order, with the number of the connection each came on.
    pub requests: Vec<(usize, String)>,
    /// Connections accepted.
    pub connections: usize,
    /// Connections ended (the client hung up, the script closed, or [`CONNECTION_MAX`]).
    pub closed: usize,
    /// Body bytes an endless answer wrote before the client hung up, if it did.
    pub endless_until_hangup: Option<u64>,
}

impl Seen {
    pub fn lines(&self) -> Vec<&str> {
        self.requests.iter().map(|(_, l)| l.as_str()).collect()
    }
}

type Script = dyn Fn(usize, &str) -> (Vec<u8>, Then) + Send + Sync;

/// A raw HTTP/1.1 server on 127.0.0.1:0: for the `n`-th request (from 0, over all
/// connections) with request line `line`, it writes `script(n, line)`'s bytes and then
/// does what it says.
pub struct Raw {
    pub addr: SocketAddr,
    seen: Arc<Mutex<Seen>>,
}

impl Raw {
    pub async fn start(
        script: impl Fn(usize, &str) -> (Vec<u8>, Then) + Send + Sync + 'static,
    ) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Seen::default()));
        let script: Arc<Script> = Arc::new(script);
        let s = Arc::clone(&seen);
        tokio::spawn(async move {
            while let Ok((sock, _)) = listener.accept().await {
                let conn = {
                    let mut seen = s.lock().unwrap();
                    seen.connections += 1;
                    seen.connections
                };
                let (s, script) = (Arc::clone(&s), Arc::clone(&script));
                tokio::spawn(async move {
                    let served = serve(sock, conn, Arc::clone(&s), script);
                    let _ = tokio::time::timeout(CONNECTION_MAX, served).await;
                    s.lock().unwrap().closed += 1;
                });
            }
        });
        Raw { addr, seen }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub fn seen(&self) -> std::sync::MutexGuard<'_, Seen> {
        self.seen.lock().unwrap()
    }
}

/// One connection: request heads in, scripted bytes out.
async fn serve<S: AsyncRead + AsyncWrite + Unpin>(
    mut sock: S,
    conn: usize,
    seen: Arc<Mutex<Seen>>,
    script: Arc<Script>,
) {
    loop {
        let Some(line) = read_head(&mut sock).await else {
            return;
        };
        let n = {
            let mut seen = seen.lock().unwrap();
            seen.requests.push((conn, line.clone()));
            seen.requests.len() - 1
        };
        let (bytes, then) = script(n, &line);
        if sock.write_all(&bytes).await.is_err() {
            return;
        }
        match then {
            Then::KeepOpen => {}
            Then::Close => {
                let _ = sock.shutdown().await;
                return;
            }
            Then::Endless => {
                let piece = vec![b'x'; 16 * 1024];
                let mut written = 0u64;
                while written < ENDLESS_CAP {
                    if sock.write_all(&piece).await.is_err() {
                        seen.lock().unwrap().endless_until_hangup = Some(written);
                        return;
                    }
                    written += piece.len() as u64;
                }
                return;
            }
        }
    }
}

/// The request line of the next request head, or `None` when the client closed.
pub async fn read_head<S: AsyncRead + Unpin>(sock: &mut S) -> Option<String> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    // Byte by byte, so nothing after the head is taken from the next request.
    while !head.ends_with(b"\r\n\r\n") {
        if head.len() > 64 * 1024 || sock.read(&mut byte).await.ok()? == 0 {
            return None;
        }
        head.push(byte[0]);
    }
    let text = String::from_utf8_lossy(&head);
    Some(text.lines().next().unwrap_or_default().to_owned())
}

/// A page of `len` bytes that shows where each part of it came from.
pub fn page(len: usize) -> Vec<u8> {
    (0..len).map(|i| b"0123456789abcdef"[i % 16]).collect()
}

pub fn answer(head: &str, body: &[u8]) -> Vec<u8> {
    let mut v = head.as_bytes().to_vec();
    v.extend_from_slice(body);
    v
}

impl Raw {
    /// [`Raw::start`] on a runtime in a thread of its own, for tests that are not async
    /// (those that run the program); the server stops after `life`.
    pub fn start_in_thread(
        script: impl Fn(usize, &str) -> (Vec<u8>, Then) + Send + Sync + 'static,
        life: Duration,
    ) -> Self {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime");
            rt.block_on(async move {
                let raw = Raw::start(script).await;
                let _ = tx.send((raw.addr, Arc::clone(&raw.seen)));
                tokio::time::sleep(life).await;
            });
        });
        let (addr, seen) = rx.recv().expect("the server started");
        Raw { addr, seen }
    }
}
