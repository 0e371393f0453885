//! The handshakes that turn a TCP connection to a proxy into a tunnel to the site: HTTP
//! `CONNECT` (RFC 9110 §9.3.6) and SOCKS5 (RFC 1928, with RFC 1929's username/password).
//!
//! Why here, under the connector: awc speaks HTTP (and TLS) over whatever stream its TCP
//! connector hands it. A tunnel is such a stream, so everything above it — pooling per
//! site, TLS with the site's name, framing — works through a proxy exactly as it does
//! from a source address, and the site sees one connection per tunnel.
//!
//! Why `CONNECT` for plain `http` too, rather than absolute-form requests: one path for
//! both schemes, the pool keeps its one-connection-per-site meaning, and the proxy cannot
//! rewrite or cache what it forwards. A proxy that allows `CONNECT` only to port 443
//! (squid's default `SSL_ports` rule) refuses plain-http targets; that refusal is the
//! proxy's answer, reported as such.
//!
//! Who is at fault: the proxy refusing us (407, 403, any answer to `CONNECT` but those
//! below; a SOCKS method, auth or rule refusal; garbage) is the exit's fault — another
//! exit may succeed. An answer to `CONNECT` that says the proxy could not reach the target
//! (500, 502, 503, 504; see `unreached`) and a SOCKS5 reply that says the *target*
//! refused, was unreachable or timed out are the site's, reported with the matching I/O
//! error kind, and so is a general failure to reach a name the proxy was to resolve (see
//! `socks_reply`).

use std::io;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use exitcrawl::proxy::{ProxyScheme, ProxyUrl};

/// Where the tunnel should lead: the name (for `CONNECT` and `socks5h`) or the address
/// resolved here (for `socks5`), and the port.
#[derive(Debug, Clone)]
pub enum Target<'a> {
    /// A host name (or an address literal) the proxy resolves.
    Name(&'a str, u16),
    /// An address resolved here.
    Addr(std::net::SocketAddr),
}

/// How a handshake failed.
#[derive(Debug)]
pub enum HandshakeError {
    /// The proxy refused or failed: the exit's fault.
    Proxy(String),
    /// The proxy says the target refused, was unreachable or timed out: the site's. The
    /// error's kind is the matching one (`ConnectionRefused`, `TimedOut`, …).
    Target(io::Error),
    /// The proxy cannot reach an address of the family sent (SOCKS5 reply 8 to an
    /// address: an IPv4-only proxy sent an IPv6 address). Neither the exit's fault nor
    /// the site's: another address of the name, or another exit, may do.
    Family(String),
    /// Reading or writing the proxy's socket failed.
    Io(io::Error),
}

/// The first part of the proxy's handshake on `stream`, what the proxy answers by itself
/// before it is asked for a target: SOCKS5's greeting and credentials; nothing for an
/// HTTP proxy, whose first word is its answer to `CONNECT`. A proxy that does not answer
/// it is stalled: the exit's fault, whatever the site.
pub async fn greet(stream: &mut TcpStream, proxy: &ProxyUrl) -> Result<(), HandshakeError> {
    match proxy.scheme {
        ProxyScheme::Http => Ok(()),
        ProxyScheme::Socks5 | ProxyScheme::Socks5h => socks5_greet(stream, proxy).await,
    }
}

/// The rest of the handshake, after [`greet`]: ask for the tunnel to `target`. The proxy
/// answers once it has connected to the target, so a slow answer is a slow site.
pub async fn ask(
    stream: &mut TcpStream,
    proxy: &ProxyUrl,
    target: Target<'_>,
) -> Result<(), HandshakeError> {
    match proxy.scheme {
        ProxyScheme::Http => http_connect(stream, proxy, target).await,
        ProxyScheme::Socks5 | ProxyScheme::Socks5h => socks5_ask(stream, target).await,
    }
}

/// Longest answer head to `CONNECT` read before giving up on the proxy.
const MAX_CONNECT_HEAD: usize = 16 * 1024;

async fn http_connect(
    stream: &mut TcpStream,
    proxy: &ProxyUrl,
    target: Target<'_>,
) -> Result<(), HandshakeError> {
    let authority = match target {
        Target::Name(host, port) if host.contains(':') && !host.starts_with('[') => {
            format!("[{host}]:{port}")
        }
        Target::Name(host, port) => format!("{host}:{port}"),
        Target::Addr(addr) => addr.to_string(),
    };
    let mut head = format!("CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n");
    if let Some(auth) = proxy.basic_auth() {
        head.push_str("Proxy-Authorization: ");
        head.push_str(&auth);
        head.push_str("\r\n");
    }
    head.push_str("\r\n");
    stream
        .write_all(head.as_bytes())
        .await
        .map_err(HandshakeError::Io)?;

    // Read the answer's head only: nothing follows it until the client speaks (TLS and
    // HTTP both start with the client), so no byte of the tunnel is taken here.
    let mut buf = Vec::with_capacity(256);
    let mut chunk = [0u8; 512];
    let end = loop {
        let n = stream.read(&mut chunk).await.map_err(HandshakeError::Io)?;
        if n == 0 {
            return Err(HandshakeError::Proxy(
                "closed the connection before answering CONNECT".into(),
            ));
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        if buf.len() > MAX_CONNECT_HEAD {
            return Err(HandshakeError::Proxy(format!(
                "answered CONNECT with a head longer than {MAX_CONNECT_HEAD} bytes"
            )));
        }
    };
    let status_line =
        String::from_utf8_lossy(&buf[..buf.iter().position(|b| *b == b'\r').unwrap_or(0)])
            .into_owned();
    let mut parts = status_line.splitn(3, ' ');
    let version = parts.next().unwrap_or_default();
    let code = parts.next().and_then(|c| c.parse::<u16>().ok());
    match code {
        _ if !version.starts_with("HTTP/1.") => Err(HandshakeError::Proxy(format!(
            "answered CONNECT with {status_line:?}, not HTTP/1.x"
        ))),
        // A refusal may come with a body; a tunnel's first byte must be the site's.
        Some(200..=299) if end != buf.len() => Err(HandshakeError::Proxy(
            "sent bytes after its 2xx answer to CONNECT, before the site could speak".into(),
        )),
        Some(200..=299) => Ok(()),
        // 407 is the standard answer; tinyproxy gives 401 to a CONNECT it will not
        // authorise.
        Some(401 | 407) => Err(HandshakeError::Proxy(format!(
            "answered CONNECT {authority} with {status_line:?}: {}",
            if proxy.credentials.is_some() {
                "the proxy refused the credentials"
            } else {
                "the proxy wants credentials (http://user:pass@host:port)"
            }
        ))),
        Some(code @ (500 | 502 | 503 | 504)) => {
            let (kind, what) = unreached(code);
            Err(HandshakeError::Target(io::Error::new(
                kind,
                format!("answered CONNECT {authority} with {status_line:?}: {what}"),
            )))
        }
        Some(_) => Err(HandshakeError::Proxy(format!(
            "answered CONNECT {authority} with {status_line:?}"
        ))),
        None => Err(HandshakeError::Proxy(format!(
            "answered CONNECT with {status_line:?}, which has no status code"
        ))),
    }
}

/// The I/O error kind, and the words, for an answer to `CONNECT` that says the proxy could
/// not reach the target.
///
/// Why these are the site's: tinyproxy answers 500 for a name that does not resolve and
/// for a closed port alike, squid 502 or 503 (504 when the connect timed out). Taken for
/// the proxy's fault, every dead link would move to the next exit and count towards
/// ejecting each, and a broad crawl through HTTP proxies would eject all of them. 403 is
/// not among them: tinyproxy and squid give it to a client they do not allow as well as
/// for a port they do not tunnel to, and the first is the exit's own.
fn unreached(code: u16) -> (io::ErrorKind, &'static str) {
    match code {
        504 => (
            io::ErrorKind::TimedOut,
            "the proxy timed out reaching the target",
        ),
        _ => (
            io::ErrorKind::ConnectionRefused,
            "the proxy could not connect to the target",
        ),
    }
}

async fn socks5_greet(stream: &mut TcpStream, proxy: &ProxyUrl) -> Result<(), HandshakeError> {
    let io = HandshakeError::Io;
    // Greeting: offer "no auth", or only username/password when we have credentials (a
    // proxy that would take either must not pick "no auth" and skip the check we were
    // configured for).
    let method: u8 = if proxy.credentials.is_some() { 2 } else { 0 };
    stream.write_all(&[5, 1, method]).await.map_err(io)?;
    let mut reply = [0u8; 2];
    stream.read_exact(&mut reply).await.map_err(io)?;
    if reply[0] != 5 {
        return Err(HandshakeError::Proxy(format!(
            "is not a SOCKS5 proxy (it answered version {})",
            reply[0]
        )));
    }
    if reply[1] != method {
        return Err(HandshakeError::Proxy(if reply[1] == 0xff && method == 0 {
            "wants credentials (socks5://user:pass@host:port)".into()
        } else {
            format!(
                "refused the authentication method (answered {:#04x})",
                reply[1]
            )
        }));
    }
    if let Some((user, pass)) = &proxy.credentials {
        let mut auth = Vec::with_capacity(3 + user.len() + pass.len());
        auth.push(1);
        auth.push(user.len() as u8);
        auth.extend_from_slice(user.as_bytes());
        auth.push(pass.len() as u8);
        auth.extend_from_slice(pass.as_bytes());
        stream.write_all(&auth).await.map_err(io)?;
        stream.read_exact(&mut reply).await.map_err(io)?;
        if reply[1] != 0 {
            return Err(HandshakeError::Proxy(
                "refused the username and password".into(),
            ));
        }
    }
    Ok(())
}

async fn socks5_ask(stream: &mut TcpStream, target: Target<'_>) -> Result<(), HandshakeError> {
    let io = HandshakeError::Io;
    let mut req = vec![5, 1, 0];
    let port = push_address(&mut req, target)?;
    let named = req[3] == 3;
    req.extend_from_slice(&port.to_be_bytes());
    stream.write_all(&req).await.map_err(io)?;

    let mut head = [0u8; 4];
    stream.read_exact(&mut head).await.map_err(io)?;
    if head[1] != 0 {
        return Err(socks_reply(head[1], named, req[3]));
    }
    // The bound address the proxy reports: read it whole so the tunnel starts clean.
    let rest = match head[3] {
        1 => 4 + 2,
        4 => 16 + 2,
        3 => {
            let mut len = [0u8; 1];
            stream.read_exact(&mut len).await.map_err(io)?;
            usize::from(len[0]) + 2
        }
        other => {
            return Err(HandshakeError::Proxy(format!(
                "answered with address type {other}, which SOCKS5 does not have"
            )))
        }
    };
    let mut skip = vec![0u8; rest];
    stream.read_exact(&mut skip).await.map_err(io)?;
    Ok(())
}

/// Append the SOCKS5 address of `target` (type, address) to `req`; its port.
fn push_address(req: &mut Vec<u8>, target: Target<'_>) -> Result<u16, HandshakeError> {
    let port = match target {
        Target::Addr(addr) => {
            match addr.ip() {
                std::net::IpAddr::V4(ip) => {
                    req.push(1);
                    req.extend_from_slice(&ip.octets());
                }
                std::net::IpAddr::V6(ip) => {
                    req.push(4);
                    req.extend_from_slice(&ip.octets());
                }
            }
            addr.port()
        }
        Target::Name(host, port) => {
            let bare = host.trim_start_matches('[').trim_end_matches(']');
            match bare.parse::<std::net::IpAddr>() {
                Ok(std::net::IpAddr::V4(ip)) => {
                    req.push(1);
                    req.extend_from_slice(&ip.octets());
                }
                Ok(std::net::IpAddr::V6(ip)) => {
                    req.push(4);
                    req.extend_from_slice(&ip.octets());
                }
                Err(_) => {
                    let Ok(len) = u8::try_from(bare.len()) else {
                        return Err(HandshakeError::Proxy(format!(
                            "cannot be sent a host name of {} bytes (SOCKS5 allows 255)",
                            bare.len()
                        )));
                    };
                    req.push(3);
                    req.push(len);
                    req.extend_from_slice(bare.as_bytes());
                }
            }
            port
        }
    };
    Ok(port)
}

/// A SOCKS5 reply code other than success (RFC 1928 §6); `named`: the target was sent
/// as a name for the proxy to resolve; `atyp`: the address type sent.
///
/// Why a general failure to a name is the site's: RFC 1928 has no code for a name that
/// does not resolve, and proxies answer it with 1 (microsocks, dante). Taken for the
/// proxy's fault, every URL of an expired domain would count against each exit it was
/// moved to, and a few such URLs would eject every `socks5h` exit.
fn socks_reply(code: u8, named: bool, atyp: u8) -> HandshakeError {
    let target = |kind, what: &str| HandshakeError::Target(io::Error::new(kind, what.to_owned()));
    match code {
        3 => target(
            io::ErrorKind::NetworkUnreachable,
            "SOCKS5: network unreachable",
        ),
        4 => target(io::ErrorKind::HostUnreachable, "SOCKS5: host unreachable"),
        5 => target(
            io::ErrorKind::ConnectionRefused,
            "SOCKS5: connection refused",
        ),
        6 => target(io::ErrorKind::TimedOut, "SOCKS5: TTL expired"),
        1 if named => target(
            io::ErrorKind::HostUnreachable,
            "SOCKS5: general failure (the proxy could not resolve or reach the name)",
        ),
        1 => HandshakeError::Proxy("SOCKS5: general failure".into()),
        2 => HandshakeError::Proxy("SOCKS5: connection not allowed by ruleset".into()),
        7 => HandshakeError::Proxy("SOCKS5: command not supported".into()),
        8 if !named => HandshakeError::Family(format!(
            "SOCKS5: address type not supported (an IPv{} address was sent)",
            if atyp == 4 { 6 } else { 4 }
        )),
        8 => HandshakeError::Proxy("SOCKS5: address type not supported".into()),
        other => HandshakeError::Proxy(format!("SOCKS5: reply code {other}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The whole handshake, as the connector runs it (in two timed parts).
    async fn handshake(
        stream: &mut TcpStream,
        proxy: &ProxyUrl,
        target: Target<'_>,
    ) -> Result<(), HandshakeError> {
        greet(stream, proxy).await?;
        ask(stream, proxy, target).await
    }

    /// A SOCKS5 server on loopback that takes "no auth" and answers every CONNECT with
    /// reply code `code`; the handshake's result for `target`.
    async fn refused_with(code: u8, target: Target<'_>) -> HandshakeError {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = actix_rt::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut greeting = [0u8; 3];
            s.read_exact(&mut greeting).await.unwrap();
            s.write_all(&[5, 0]).await.unwrap();
            let mut head = [0u8; 4];
            s.read_exact(&mut head).await.unwrap();
            let rest = match head[3] {
                1 => 4 + 2,
                4 => 16 + 2,
                _ => {
                    let mut len = [0u8; 1];
                    s.read_exact(&mut len).await.unwrap();
                    usize::from(len[0]) + 2
                }
            };
            let mut skip = vec![0u8; rest];
            s.read_exact(&mut skip).await.unwrap();
            s.write_all(&[5, code, 0, 1, 0, 0, 0, 0, 0, 0])
                .await
                .unwrap();
        });
        let proxy: ProxyUrl = format!("socks5h://{addr}").parse().unwrap();
        let mut stream = TcpStream::connect(addr).await.unwrap();
        let e = handshake(&mut stream, &proxy, target)
            .await
            .expect_err("refused");
        server.await.unwrap();
        e
    }

    /// The handshake's result when an HTTP proxy answers `CONNECT` with `status_line`.
    async fn answered(status_line: &str) -> HandshakeError {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let answer = format!("{status_line}\r\nContent-Length: 0\r\n\r\n");
        let server = actix_rt::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") {
                s.read_exact(&mut byte).await.unwrap();
                head.push(byte[0]);
            }
            s.write_all(answer.as_bytes()).await.unwrap();
        });
        let proxy: ProxyUrl = format!("http://{addr}").parse().unwrap();
        let mut stream = TcpStream::connect(addr).await.unwrap();
        let e = handshake(&mut stream, &proxy, Target::Name("site.test", 80))
            .await
            .expect_err("no tunnel");
        server.await.unwrap();
        e
    }

    #[actix_rt::test]
    async fn a_proxy_that_could_not_reach_the_site_is_the_sites_failure() {
        for (status, kind) in [
            (
                "HTTP/1.1 500 Unable to connect",
                io::ErrorKind::ConnectionRefused,
            ),
            ("HTTP/1.1 502 Bad Gateway", io::ErrorKind::ConnectionRefused),
            (
                "HTTP/1.1 503 Service Unavailable",
                io::ErrorKind::ConnectionRefused,
            ),
            ("HTTP/1.1 504 Gateway Timeout", io::ErrorKind::TimedOut),
        ] {
            let e = answered(status).await;
            assert!(
                matches!(&e, HandshakeError::Target(io) if io.kind() == kind
                    && io.to_string().contains(status)),
                "{status}: {e:?}"
            );
        }
        // Credentials, a client or port the proxy does not allow, anything else: the
        // proxy's.
        for status in [
            "HTTP/1.1 407 Proxy Authentication Required",
            "HTTP/1.0 401 Unauthorized",
            "HTTP/1.0 403 Access denied",
            "HTTP/1.1 405 Method Not Allowed",
        ] {
            let e = answered(status).await;
            assert!(matches!(e, HandshakeError::Proxy(_)), "{status}: {e:?}");
        }
    }

    #[actix_rt::test]
    async fn a_general_failure_to_reach_a_name_is_the_sites_not_the_proxys() {
        // What microsocks answers for a name that does not resolve: the domain is gone, the
        // proxy is fine.
        let e = refused_with(1, Target::Name("gone.test", 80)).await;
        assert!(
            matches!(&e, HandshakeError::Target(io) if io.kind() == io::ErrorKind::HostUnreachable),
            "{e:?}"
        );
        // Sent an address, a general failure is the proxy's own.
        let e = refused_with(1, Target::Addr("127.0.0.1:80".parse().unwrap())).await;
        assert!(matches!(e, HandshakeError::Proxy(_)), "{e:?}");
        // So is a ruleset's refusal, whatever was sent.
        let e = refused_with(2, Target::Name("gone.test", 80)).await;
        assert!(matches!(e, HandshakeError::Proxy(_)), "{e:?}");
    }

    #[actix_rt::test]
    async fn an_address_of_a_family_the_proxy_lacks_is_neither_the_proxys_nor_the_sites() {
        // What microsocks answers when it cannot open a socket of the address's family.
        let e = refused_with(8, Target::Addr("[2001:db8::1]:80".parse().unwrap())).await;
        assert!(
            matches!(&e, HandshakeError::Family(m) if m.contains("IPv6")),
            "{e:?}"
        );
        // A proxy that takes no names at all is the proxy's fault.
        let e = refused_with(8, Target::Name("site.test", 80)).await;
        assert!(matches!(e, HandshakeError::Proxy(_)), "{e:?}");
    }
}
