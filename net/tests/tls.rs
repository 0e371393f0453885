//! HTTPS to a site given as an IPv6 address literal: the TLS handshake starts, its server
//! name being the address (`::1`), not the bracketed host the URL has (`[::1]`), which is
//! no server name. Loopback only.

use std::net::{IpAddr, Ipv6Addr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use exitcrawl_net::{build_client, ClientOptions, DnsCache};
use tokio::io::AsyncReadExt;
use tokio::net::TcpListener;

/// A listener on `ip:0` that keeps the first bytes of every connection (a TLS client
/// sends its ClientHello first) and then closes it: the handshake never finishes.
async fn first_bytes(ip: IpAddr) -> (std::net::SocketAddr, Arc<Mutex<Vec<Vec<u8>>>>) {
    let listener = TcpListener::bind((ip, 0)).await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = Arc::clone(&seen);
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let mut head = [0u8; 6];
            let read = tokio::time::timeout(Duration::from_secs(5), sock.read_exact(&mut head));
            let bytes = match read.await {
                Ok(Ok(_)) => head.to_vec(),
                _ => Vec::new(),
            };
            s.lock().expect("lock").push(bytes);
        }
    });
    (addr, seen)
}

#[actix_rt::test]
async fn https_to_an_ipv6_literal_starts_the_handshake() {
    let v6 = IpAddr::V6(Ipv6Addr::LOCALHOST);
    let (addr, seen) = first_bytes(v6).await;
    let opts = ClientOptions {
        connect_timeout: Duration::from_secs(2),
        timeout: Duration::from_secs(5),
        ..ClientOptions::new(v6)
    };
    let client = build_client(&opts, DnsCache::new(Duration::from_secs(60)));
    let url = format!("https://[::1]:{}/", addr.port());
    let err = client
        .get(&url)
        .send()
        .await
        .expect_err("no handshake can finish");
    let text = err.to_string();
    assert!(!text.to_ascii_lowercase().contains("server name"), "{text}");
    let seen = seen.lock().expect("lock").clone();
    assert_eq!(seen.len(), 1, "one connection: {seen:?} ({text})");
    // A TLS handshake record (22), TLS 1.x, whose first message is a ClientHello (1).
    let hello = &seen[0];
    assert!(
        hello.len() == 6 && hello[0] == 22 && hello[1] == 3 && hello[5] == 1,
        "not a ClientHello: {hello:?} ({text})"
    );
}
