//! The TCP connector service that pins every connection to one exit's source IP.
//!
//! Why a custom connector rather than awc's `Connector::local_address`: awc binds the
//! source address but leaves everything else at the kernel defaults. Here we also
//! - set `IP_BIND_ADDRESS_NO_PORT` (Linux) so `bind(ip:0)` does not pick the ephemeral port
//!   at bind time. Without it each source IP has one ephemeral port range shared across all
//!   destinations (~28k connections in total); with it the port is chosen at `connect()` per
//!   4-tuple, so the range is per destination;
//! - set `TCP_NODELAY` (awc never does on client sockets; small requests otherwise wait on
//!   Nagle + delayed ACK) and TCP keepalive (pooled connections can sit idle for a long time;
//!   keepalive lets the kernel notice a dead peer);
//! - resolve through the shared [`DnsCache`], take an IPv4-mapped address as the IPv4
//!   address it carries, drop the addresses no connection can be made to (multicast,
//!   broadcast: the site's doing, see `targets.rs`) and keep only those of the exit's
//!   family;
//! - keep only the addresses its [`Reach`] allows: the private-address rule is checked on
//!   the address actually connected to, after resolving, so DNS rebinding cannot slip past
//!   (a name that resolved to a public address when a link was found, and to
//!   `169.254.169.254` now, is refused here);
//! - report failures as [`SocketError`], which says which step failed (bind vs connect) so
//!   [`classify`](super::classify) can tell an exit's local failure (nothing was sent, move
//!   the fetch to another exit) from the site refusing us;
//! - keep the whole connect within `connect_timeout` itself ([`Deadline`]), so that a step
//!   that runs out of time is reported as that step's failure, the site's or the proxy's.

use std::fmt;
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use actix_service::Service;
use actix_tls::connect::{ConnectError, ConnectInfo, Connection};
use awc::http::Uri;
use socket2::{Domain, Protocol, SockAddr, Socket, TcpKeepalive, Type};
use tokio::net::{TcpSocket, TcpStream};
use tokio::time::Instant;

use exitcrawl::address::AddressRule;
use exitcrawl::proxy::ProxyUrl;

use super::dns::DnsCache;

mod targets;
mod tunnel;

/// Which addresses a connector may connect to (see `exitcrawl::address`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Reach {
    /// Any address (the rule is lifted, or nothing asks for it).
    #[default]
    Any,
    /// Public addresses only: hops led to from a public address (links, redirects). A
    /// target with only private addresses is refused ([`Stage::Refused`]).
    Public(AddressRule),
    /// Private addresses only: hops whose host was found private when the hop was planned
    /// (a trusted URL on a private host). Connecting elsewhere would let a page that came
    /// from a public address pass as private, so a host that now resolves to public
    /// addresses only is not connected to ([`Stage::Changed`]).
    Private(AddressRule),
}

/// Idle time before the first keepalive probe, and the gap between probes. Short enough that
/// a pooled connection to a peer that vanished is found dead within about a minute, long
/// enough to cost nothing on busy connections (probes are only sent on idle ones).
const KEEPALIVE_TIME: Duration = Duration::from_secs(30);
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(10);

/// Which step of opening a connection failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// The target has no address of the source IP's family (v4 exit, v6-only target), or
    /// through a proxy: the proxy cannot reach an address of the family sent (SOCKS5
    /// reply 8).
    AddressFamily,
    /// `socket(2)` itself.
    Socket,
    /// A `setsockopt(2)` before connecting.
    SetOption,
    /// `bind(2)` to `source_ip:0`; EADDRNOTAVAIL here means the IP is not on this host.
    Bind,
    /// `connect(2)`, including running out of the connect timeout.
    Connect,
    /// Not connected: every address of the target is one no TCP connection can be made
    /// to (multicast, broadcast, reserved): the site's, and final.
    Unconnectable,
    /// `connect(2)` found no route from the source to any address of the target, and the
    /// source has none to any other address of that family either: its link or routes
    /// are gone, the exit's fault.
    Route,
    /// Not connected: the target's addresses are private and the connector reaches public
    /// ones only ([`Reach::Public`]). The fetch is refused, not failed.
    Refused,
    /// Not connected: the target was found private when the hop was planned and resolves
    /// to public addresses only now ([`Reach::Private`]).
    Changed,
    /// Resolving or connecting to the exit's proxy failed, or did not end within the
    /// connect timeout: the exit's fault.
    ProxyConnect,
    /// The proxy refused the tunnel (407, 403, an answer to `CONNECT` that does not say the
    /// target was out of reach, a SOCKS5 refusal), broke the handshake, or stalled before
    /// it was asked for the target (a SOCKS5 greeting unanswered within the connect
    /// timeout): the exit's fault. A proxy that could not reach the target is
    /// [`Stage::Tunnel`].
    Proxy,
    /// The proxy could not reach the target (its answer to `CONNECT` or its SOCKS5 reply
    /// says so), or did not answer the request for it within the connect timeout: the
    /// site's failure, as a direct exit's [`Stage::Connect`] would be. The error's kind
    /// says which.
    Tunnel,
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Stage::AddressFamily => "address family",
            Stage::Socket => "socket",
            Stage::SetOption => "setsockopt",
            Stage::Bind => "bind",
            Stage::Connect => "connect",
            Stage::Unconnectable => "unconnectable address",
            Stage::Route => "route",
            Stage::Refused => "private address refused",
            Stage::Changed => "address changed",
            Stage::ProxyConnect => "connect to proxy",
            Stage::Proxy => "proxy handshake",
            Stage::Tunnel => "tunnel",
        })
    }
}

/// A failure to open a connection from a source IP, carried inside the `io::Error` that
/// awc reports (`ConnectError::Io(e)`, with `e.get_ref()` downcasting to this type).
/// Its `Display` keeps the OS error, e.g. "(os error 99)" for EADDRNOTAVAIL.
#[derive(Debug)]
pub struct SocketError {
    /// The step that failed.
    pub stage: Stage,
    /// The exit's source IP.
    pub source_ip: IpAddr,
    /// The address we tried to reach, if one was chosen.
    pub target: Option<SocketAddr>,
    /// The underlying error; for OS errors `raw_os_error()` is set.
    pub error: io::Error,
}

impl SocketError {
    fn new(stage: Stage, source_ip: IpAddr, target: SocketAddr, error: io::Error) -> Self {
        Self {
            stage,
            source_ip,
            target: Some(target),
            error,
        }
    }

    /// Wrap into an `io::Error` of the same kind, so awc can carry it.
    pub fn into_io(self) -> io::Error {
        io::Error::new(self.error.kind(), self)
    }

    /// True when the failure happened on this host before anything was sent to the site:
    /// the exit's fault, so another exit may succeed.
    pub fn is_local(&self) -> bool {
        match self.stage {
            Stage::AddressFamily
            | Stage::Socket
            | Stage::SetOption
            | Stage::Bind
            | Stage::Route => true,
            // Nothing reached the site, and another exit (another proxy) may do better.
            Stage::ProxyConnect | Stage::Proxy => true,
            // Every exit would refuse the same target: not the exit's fault, and not one
            // another exit can do better on.
            Stage::Refused | Stage::Changed | Stage::Unconnectable => false,
            // The site failed behind the proxy.
            Stage::Tunnel => false,
            // With IP_BIND_ADDRESS_NO_PORT the port is chosen at connect(): running out of
            // ephemeral ports shows up here as EADDRNOTAVAIL (or EADDRINUSE without it).
            // ENETUNREACH at connect() is not: the kernel says it for a multicast or
            // broadcast target too, the site's doing; the connector tells the exit's dead
            // route apart ([`Stage::Route`]).
            Stage::Connect => matches!(
                self.error.kind(),
                io::ErrorKind::AddrNotAvailable | io::ErrorKind::AddrInUse
            ),
        }
    }
}

impl fmt::Display for SocketError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let source = if self.source_ip.is_unspecified() {
            "the default route".to_owned()
        } else {
            format!("source {}", self.source_ip)
        };
        match (self.stage, self.target) {
            (Stage::Refused | Stage::Changed | Stage::Unconnectable | Stage::Route, _) => {
                write!(f, "{}", self.error)?;
            }
            (Stage::Proxy | Stage::Tunnel, _) => write!(f, "{}", self.error)?,
            (Stage::Bind, _) => write!(
                f,
                "bind to source {}:0 failed: {}",
                self.source_ip, self.error
            )?,
            (stage, Some(target)) => write!(
                f,
                "{stage} from {source} to {target} failed: {}",
                self.error
            )?,
            (stage, None) => write!(f, "{stage} from {source} failed: {}", self.error)?,
        }
        Ok(())
    }
}

impl std::error::Error for SocketError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

/// awc connector service: resolve via [`DnsCache`], then [`connect_from`] the source IP.
///
/// Plug it in with `awc::Connector::new().connector(ExitConnector::new(..))`; it ignores
/// the local address in `ConnectInfo` (which is crate-private anyway) and always uses its
/// own `source_ip`. Cheap to clone (the DNS cache is shared).
#[derive(Clone, Debug)]
pub struct ExitConnector {
    source_ip: IpAddr,
    dns: DnsCache,
    connect_timeout: Duration,
    reach: Reach,
    proxy: Option<ProxyUrl>,
}

impl ExitConnector {
    /// A connector for one exit. `connect_timeout` bounds each connect as a whole: resolving,
    /// every address tried (each given its share of the time left), and through a proxy its
    /// connect and handshake. awc's own connect timeout must lie beyond it (see
    /// `build_client`), or it would end a connect before the connector could say whose
    /// step ran out of time.
    pub fn new(source_ip: IpAddr, dns: DnsCache, connect_timeout: Duration) -> Self {
        Self {
            source_ip,
            dns,
            connect_timeout,
            reach: Reach::Any,
            proxy: None,
        }
    }

    /// This connector, tunnelling every connection through `proxy` (reached from its
    /// source IP); `None` connects directly.
    pub fn through(mut self, proxy: Option<ProxyUrl>) -> Self {
        self.proxy = proxy;
        self
    }

    /// This connector, connecting only to the addresses `reach` allows.
    pub fn reaching(mut self, reach: Reach) -> Self {
        self.reach = reach;
        self
    }

    /// The source IP every connection is bound to.
    pub fn source_ip(&self) -> IpAddr {
        self.source_ip
    }

    async fn connect(
        self,
        mut req: ConnectInfo<Uri>,
    ) -> Result<Connection<Uri, TcpStream>, ConnectError> {
        let deadline = Deadline::after(self.connect_timeout);
        if let Some(proxy) = &self.proxy {
            return self.connect_via(proxy, req, deadline).await;
        }
        let port = req.port();
        // awc fills addrs only when the request set an explicit address
        // (`ClientRequest::address`); then there is nothing to resolve.
        let mut targets: Vec<SocketAddr> = req.take_addrs().collect();
        if targets.is_empty() {
            let host = req.hostname();
            if host.is_empty() {
                return Err(ConnectError::Unresolved);
            }
            let ips = self
                .resolve(host, deadline)
                .await
                .map_err(|e| ConnectError::Resolver(Box::new(e)))?;
            targets = ips.iter().map(|ip| SocketAddr::new(*ip, port)).collect();
        }

        targets::keep_connectable(&mut targets, self.source_ip, req.hostname())
            .map_err(|e| ConnectError::Io(e.into_io()))?;
        let all = targets.clone();
        if !self.source_ip.is_unspecified() {
            targets.retain(|t| t.is_ipv4() == self.source_ip.is_ipv4());
        }
        if targets.is_empty() {
            let family = if self.source_ip.is_ipv4() {
                "IPv4"
            } else {
                "IPv6"
            };
            let err = SocketError {
                stage: Stage::AddressFamily,
                source_ip: self.source_ip,
                target: all.first().copied(),
                error: io::Error::new(
                    io::ErrorKind::Unsupported,
                    format!(
                        "{} has no {family} address (it has {all:?}); an {family} exit cannot reach it",
                        req.hostname()
                    ),
                ),
            };
            return Err(ConnectError::Io(err.into_io()));
        }

        if let Some(err) = self.keep_reachable(&mut targets, req.hostname()) {
            return Err(ConnectError::Io(err.into_io()));
        }

        // Try each address in resolver order, each within its share of the time left;
        // report the last failure.
        let count = targets.len();
        let mut last = None;
        let mut unreachable = 0;
        for (i, target) in targets.into_iter().enumerate() {
            let timeout = deadline.share(count - i).remaining();
            match connect_from(self.source_ip, target, timeout).await {
                Ok(stream) => return Ok(Connection::new(req.request().clone(), stream)),
                Err(e) => {
                    tracing::debug!(source = %self.source_ip, %target, error = %e, "connect failed");
                    let local = e.is_local();
                    if e.error.raw_os_error() == Some(libc::ENETUNREACH) {
                        unreachable += 1;
                    }
                    last = Some(e);
                    // A local failure (bad source IP) will repeat for every address.
                    if local {
                        break;
                    }
                }
            }
        }
        let mut err = last.expect("targets is non-empty, so at least one attempt was made");
        // No address reachable: a broadcast address, one outside this host's routes, or
        // the source's routes gone; only the last is the exit's.
        if unreachable == count {
            err = targets::blame_unreachable(err, targets::route);
        }
        Err(ConnectError::Io(err.into_io()))
    }
}

impl ExitConnector {
    /// The addresses of `host`, resolved by `deadline`. A resolver still busy then is a
    /// resolution that timed out (`TimedOut`: it may pass, as the resolver's own timeout).
    async fn resolve(&self, host: &str, deadline: Deadline) -> io::Result<Arc<[IpAddr]>> {
        deadline
            .within(self.dns.lookup(host))
            .await
            .unwrap_or_else(|| {
                Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "resolving {host} took longer than the connect timeout ({:?})",
                        self.connect_timeout
                    ),
                ))
            })
    }

    /// Keep the targets this connector's [`Reach`] allows; the refusal when none is left.
    fn keep_reachable(&self, targets: &mut Vec<SocketAddr>, host: &str) -> Option<SocketError> {
        let (rule, want_private) = match &self.reach {
            Reach::Any => return None,
            Reach::Public(rule) => (rule, false),
            Reach::Private(rule) => (rule, true),
        };
        let first = targets.first().copied()?;
        targets.retain(|t| rule.is_private(t.ip()) == want_private);
        if !targets.is_empty() {
            return None;
        }
        let (stage, kind, message) = if want_private {
            (
                Stage::Changed,
                io::ErrorKind::Other,
                format!(
                    "{host} resolves to the public address {} now, not the private one it had when the fetch was planned; not connected",
                    first.ip()
                ),
            )
        } else {
            let what = rule.private_kind(first.ip()).unwrap_or("private");
            (
                Stage::Refused,
                io::ErrorKind::PermissionDenied,
                format!(
                    "private address refused: {host} resolves to {} ({what}), reached from a public address ([crawl] allow_private = true lifts the rule)",
                    first.ip()
                ),
            )
        };
        Some(SocketError {
            stage,
            source_ip: self.source_ip,
            target: Some(first),
            error: io::Error::new(kind, message),
        })
    }
}

/// When one connect must be done by: one budget of `connect_timeout` for all its steps
/// (resolving, each address tried, a proxy's connect and handshake).
///
/// Why one budget rather than a timeout per step: the connector alone knows whose step ran
/// out of time (the site's, or the exit's proxy's) and says so in its error; awc's timer
/// around the connector can only say "timeout", the site's. So the connector must run out
/// first, and awc's timer lies beyond the budget (see `build_client`).
#[derive(Debug, Clone, Copy)]
struct Deadline {
    end: Instant,
}

impl Deadline {
    /// `budget` from now.
    fn after(budget: Duration) -> Self {
        Self {
            end: Instant::now() + budget,
        }
    }

    /// The time left.
    fn remaining(self) -> Duration {
        self.end.saturating_duration_since(Instant::now())
    }

    /// The deadline of the next of `left` attempts made one after another: an equal share
    /// of the time left (all of it for the last).
    ///
    /// Why shares rather than happy eyeballs' staggered attempts in parallel (RFC 8305): a
    /// dead first address (SYNs dropped) costs its share, not the whole budget, so the next
    /// is still tried; one that fails at once (refused) leaves its share to the rest; and
    /// only one connection is opened at a time, so a site never sees a second connection
    /// from the exit that is closed unused (it counts against per-IP connection limits),
    /// and the address used is the resolver's first that answers, not a race's winner. The
    /// price: a first address slower than its share is given up for the next.
    fn share(self, left: usize) -> Self {
        let parts = u32::try_from(left.max(1)).unwrap_or(u32::MAX);
        Self::after(self.remaining() / parts)
    }

    /// `fut`'s output, if it ends by the deadline.
    async fn within<F: Future>(self, fut: F) -> Option<F::Output> {
        tokio::time::timeout_at(self.end, fut).await.ok()
    }
}

impl Service<ConnectInfo<Uri>> for ExitConnector {
    type Response = Connection<Uri, TcpStream>;
    type Error = ConnectError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>>>>;

    actix_service::always_ready!();

    fn call(&self, req: ConnectInfo<Uri>) -> Self::Future {
        Box::pin(self.clone().connect(req))
    }
}

/// Open one TCP connection from `source_ip` (port chosen by the kernel) to `target`.
///
/// Steps: socket2 socket (non-blocking, close-on-exec) → `IP_BIND_ADDRESS_NO_PORT` (Linux)
/// → `bind(source_ip:0)` → `TCP_NODELAY` + keepalive → non-blocking connect on tokio,
/// bounded by `timeout` (error kind `TimedOut`). A source/target family mismatch fails
/// before any syscall.
pub async fn connect_from(
    source_ip: IpAddr,
    target: SocketAddr,
    timeout: Duration,
) -> Result<TcpStream, SocketError> {
    let fail = |stage, error| SocketError::new(stage, source_ip, target, error);
    if !source_ip.is_unspecified() && source_ip.is_ipv4() != target.is_ipv4() {
        return Err(fail(
            Stage::AddressFamily,
            io::Error::new(
                io::ErrorKind::Unsupported,
                "source and target address families differ",
            ),
        ));
    }

    let socket = Socket::new(
        Domain::for_address(target),
        Type::STREAM,
        Some(Protocol::TCP),
    )
    .map_err(|e| fail(Stage::Socket, e))?;
    socket
        .set_nonblocking(true)
        .map_err(|e| fail(Stage::SetOption, e))?;
    // An unspecified source is not bound: the kernel picks the address by its routes at
    // connect(), as for any client that does not ask.
    if !source_ip.is_unspecified() {
        #[cfg(target_os = "linux")]
        set_bind_address_no_port(&socket).map_err(|e| fail(Stage::SetOption, e))?;
        socket
            .bind(&SockAddr::from(SocketAddr::new(source_ip, 0)))
            .map_err(|e| fail(Stage::Bind, e))?;
    }
    socket
        .set_tcp_nodelay(true)
        .map_err(|e| fail(Stage::SetOption, e))?;
    let keepalive = TcpKeepalive::new()
        .with_time(KEEPALIVE_TIME)
        .with_interval(KEEPALIVE_INTERVAL);
    socket
        .set_tcp_keepalive(&keepalive)
        .map_err(|e| fail(Stage::SetOption, e))?;

    // Hand the configured socket to tokio, which registers it with its reactor and does the
    // non-blocking connect (EINPROGRESS, wait writable, SO_ERROR).
    let socket = TcpSocket::from_std_stream(socket.into());
    match tokio::time::timeout(timeout, socket.connect(target)).await {
        Ok(Ok(stream)) => Ok(stream),
        Ok(Err(e)) => Err(fail(Stage::Connect, e)),
        Err(_) => Err(fail(
            Stage::Connect,
            io::Error::new(
                io::ErrorKind::TimedOut,
                format!("connect timed out after {timeout:?}"),
            ),
        )),
    }
}

/// Whether `source_ip` can be bound on this host now: a TCP socket bound to
/// `source_ip:0` (with `IP_BIND_ADDRESS_NO_PORT`, so no port is taken), then closed. A
/// crawler checks every exit this way at start, so an address that is not on this host
/// fails at once instead of through every URL's retries.
pub fn test_bind(source_ip: IpAddr) -> io::Result<()> {
    let addr = SocketAddr::new(source_ip, 0);
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    #[cfg(target_os = "linux")]
    set_bind_address_no_port(&socket)?;
    socket.bind(&SockAddr::from(addr))
}

/// `setsockopt(IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, 1)`: defer the ephemeral port choice
/// from `bind()` to `connect()`. socket2 0.6 has no setter for it. The option is at the
/// IPPROTO_IP level but Linux honours it on IPv6 sockets too.
#[cfg(target_os = "linux")]
fn set_bind_address_no_port(socket: &Socket) -> io::Result<()> {
    use std::os::fd::AsRawFd;

    let on: libc::c_int = 1;
    // SAFETY: the fd is a valid open socket owned by `socket` for the duration of the call;
    // `optval` points to a live `c_int` and `optlen` is exactly its size, which is what the
    // kernel reads for this option. No memory is retained by the kernel after the call.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::IPPROTO_IP,
            libc::IP_BIND_ADDRESS_NO_PORT,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}
