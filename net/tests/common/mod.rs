//! Helpers shared by the connector's tests.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use socket2::{Domain, Socket, Type};
use tokio::net::TcpStream;

/// An address where `connect()` hangs, as at a host behind a firewall that drops SYNs: a
/// listener that never accepts, with the smallest backlog, its accept queue filled, so
/// Linux drops every further SYN. Loopback only, no root, no route changes.
pub struct BlackHole {
    pub addr: SocketAddr,
    _listener: Socket,
    _queued: Vec<TcpStream>,
}

/// A [`BlackHole`] at `ip:port` (any address of 127.0.0.0/8; port 0 for any).
pub async fn black_hole(ip: Ipv4Addr, port: u16) -> BlackHole {
    let listener = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    listener
        .bind(&SocketAddr::from((ip, port)).into())
        .unwrap_or_else(|e| panic!("bind {ip}:{port}: {e}"));
    listener.listen(0).unwrap();
    let addr = listener.local_addr().unwrap().as_socket().unwrap();
    // Backlog 0 still queues one or two; a connect that does not complete shows it full.
    let mut queued = Vec::new();
    for _ in 0..8 {
        match tokio::time::timeout(Duration::from_millis(100), TcpStream::connect(addr)).await {
            Ok(Ok(stream)) => queued.push(stream),
            Ok(Err(e)) => panic!("connect to {addr}: {e}"),
            Err(_) => {
                return BlackHole {
                    addr,
                    _listener: listener,
                    _queued: queued,
                }
            }
        }
    }
    panic!("the accept queue of {addr} never filled");
}
