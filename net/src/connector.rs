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
//! - resolve through the shared [`DnsCache`] and keep only addresses of the exit's family;
//! - keep only the addresses its [`Reach`] allows: the private-address rule is checked on
//!   the address actually connected to, after resolving, so DNS rebinding cannot slip past
//!   (a name that resolved to a public address when a link was found, and to
//!   `169.254.169.254` now, is refused here);
//! - report failures as [`SocketError`], which says which step failed (bind vs connect) so
//!   [`classify`](super::classify) can tell an exit's local failure (nothing was sent, move
//!   the fetch to another exit) from the site refusing us.

use std::fmt;
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::time::Duration;

use actix_service::Service;
use actix_tls::connect::{ConnectError, ConnectInfo, Connection};
use awc::http::Uri;
use socket2::{Domain, Protocol, SockAddr, Socket, TcpKeepalive, Type};
use tokio::net::{TcpSocket, TcpStream};

use exitcrawl::address::AddressRule;
use exitcrawl::proxy::{ProxyScheme, ProxyUrl};

use super::dns::DnsCache;
use super::proxy::Target;

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
    /// `connect(2)`, including the connect timeout.
    Connect,
    /// Not connected: the target's addresses are private and the connector reaches public
    /// ones only ([`Reach::Public`]). The fetch is refused, not failed.
    Refused,
    /// Not connected: the target was found private when the hop was planned and resolves
    /// to public addresses only now ([`Reach::Private`]).
    Changed,
    /// Resolving or connecting to the exit's proxy failed: the exit's fault.
    ProxyConnect,
    /// The proxy refused the tunnel (407, 403, an answer to `CONNECT` that does not say the
    /// target was out of reach, a SOCKS5 refusal) or broke the handshake: the exit's
    /// fault. A proxy that could not reach the target is [`Stage::Tunnel`].
    Proxy,
    /// The proxy could not reach the target (its answer to `CONNECT` or its SOCKS5 reply
    /// says so), or opened no tunnel within the connect timeout: the site's failure, as a
    /// direct exit's [`Stage::Connect`] would be. The error's kind says which.
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
            Stage::AddressFamily | Stage::Socket | Stage::SetOption | Stage::Bind => true,
            // Nothing reached the site, and another exit (another proxy) may do better.
            Stage::ProxyConnect | Stage::Proxy => true,
            // Every exit would refuse the same target: not the exit's fault, and not one
            // another exit can do better on.
            Stage::Refused | Stage::Changed => false,
            // The site failed behind the proxy.
            Stage::Tunnel => false,
            // With IP_BIND_ADDRESS_NO_PORT the port is chosen at connect(): running out of
            // ephemeral ports shows up here as EADDRNOTAVAIL (or EADDRINUSE without it).
            // ENETUNREACH at connect() is this host's routing for the exit's address (its
            // link or route gone): another exit may have one.
            Stage::Connect => matches!(
                self.error.kind(),
                io::ErrorKind::AddrNotAvailable
                    | io::ErrorKind::AddrInUse
                    | io::ErrorKind::NetworkUnreachable
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
            (Stage::Refused | Stage::Changed, _) => write!(f, "{}", self.error)?,
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
    /// A connector for one exit. `connect_timeout` bounds each TCP connect attempt (awc adds
    /// its own overall timeout around resolution + connect; see `build_client`).
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
        if let Some(proxy) = &self.proxy {
            return self.connect_via(proxy, req).await;
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
                .dns
                .lookup(host)
                .await
                .map_err(|e| ConnectError::Resolver(Box::new(e)))?;
            targets = ips.iter().map(|ip| SocketAddr::new(*ip, port)).collect();
        }

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

        // Try each address in resolver order; report the last failure.
        let mut last = None;
        for target in targets {
            match connect_from(self.source_ip, target, self.connect_timeout).await {
                Ok(stream) => return Ok(Connection::new(req.request().clone(), stream)),
                Err(e) => {
                    tracing::debug!(source = %self.source_ip, %target, error = %e, "connect failed");
                    let local = e.is_local();
                    last = Some(e);
                    // A local failure (bad source IP) will repeat for every address.
                    if local {
                        break;
                    }
                }
            }
        }
        let err = last.expect("targets is non-empty, so at least one attempt was made");
        Err(ConnectError::Io(err.into_io()))
    }
}

impl ExitConnector {
    /// Open a tunnel to the request's target through `proxy`: connect to the proxy from
    /// the exit's source IP, then run its handshake (see [`super::proxy`]).
    ///
    /// When the proxy is sent addresses ([`Self::tunnel_targets`]), each is tried in
    /// resolver order until one opens, as a direct exit tries a name's addresses: a dual
    /// stack name's first address is often IPv6, which an IPv4-only proxy cannot reach.
    /// The site's failure on the last one is reported (or that the proxy reaches none of
    /// the addresses' families); the proxy's own failure at once.
    async fn connect_via(
        &self,
        proxy: &ProxyUrl,
        req: ConnectInfo<Uri>,
    ) -> Result<Connection<Uri, TcpStream>, ConnectError> {
        let host = req.hostname().to_owned();
        let port = req.port();
        let targets = self.tunnel_targets(proxy, &host, port).await?;
        let mut last = None;
        for target in targets {
            match self.tunnel(proxy, target, &host, port).await {
                Ok(stream) => return Ok(Connection::new(req.request().clone(), stream)),
                Err(e) if !matches!(e.stage, Stage::Tunnel | Stage::AddressFamily) => {
                    return Err(ConnectError::Io(e.into_io()))
                }
                Err(e) => {
                    tracing::debug!(source = %self.source_ip, %proxy, error = %e, "tunnel failed");
                    // The site's failure says more than a family the proxy cannot reach.
                    let site_failed = |l: &SocketError| l.stage == Stage::Tunnel;
                    if e.stage == Stage::Tunnel || !last.as_ref().is_some_and(site_failed) {
                        last = Some(e);
                    }
                }
            }
        }
        let err = last.expect("tunnel_targets returns at least one target");
        Err(ConnectError::Io(err.into_io()))
    }

    /// What to ask `proxy` to tunnel to, in the order to try them.
    ///
    /// The private-address rule is checked here on the addresses the target resolves to
    /// locally, and those are what the proxy is sent (for `http` and `socks5h` too, whose
    /// proxy would otherwise resolve the name again). A name that does not resolve here is the site's failure
    /// (`dns`) for `socks5`; `http` and `socks5h` send it anyway: there the proxy's
    /// resolver is the one that counts (names only the proxy's network knows, Tor's
    /// `.onion`), and a proxy that cannot reach it says so, the site's failure.
    async fn tunnel_targets<'h>(
        &self,
        proxy: &ProxyUrl,
        host: &'h str,
        port: u16,
    ) -> Result<Vec<Target<'h>>, ConnectError> {
        let literal = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<IpAddr>()
            .ok();
        let local = match literal {
            Some(ip) => Some(Ok(vec![SocketAddr::new(ip, port)])),
            None if proxy.scheme == ProxyScheme::Socks5 || self.reach != Reach::Any => Some(
                self.dns
                    .lookup(host)
                    .await
                    .map(|ips| ips.iter().map(|ip| SocketAddr::new(*ip, port)).collect()),
            ),
            None => None,
        };
        match (proxy.scheme, local) {
            (ProxyScheme::Socks5, Some(Err(e))) => Err(ConnectError::Resolver(Box::new(e))),
            (_, Some(Ok(mut addrs))) => {
                if let Some(err) = self.keep_reachable(&mut addrs, host) {
                    return Err(ConnectError::Io(err.into_io()));
                }
                // Where the rule is checked, a proxy that resolves names itself is sent
                // the addresses checked here, not the name (TLS and `Host` still carry
                // it, from the URL): resolving it again, the proxy could reach an address
                // never checked (a name whose addresses the rule refuses in part, or a
                // DNS server that answers the proxy otherwise than us).
                let checked = self.reach != Reach::Any;
                if (proxy.scheme == ProxyScheme::Socks5 || checked) && !addrs.is_empty() {
                    Ok(addrs.into_iter().map(Target::Addr).collect())
                } else {
                    Ok(vec![Target::Name(host, port)])
                }
            }
            _ => Ok(vec![Target::Name(host, port)]),
        }
    }

    /// One tunnel to `target` through `proxy`. A failure at the site (the proxy could not
    /// reach it, or took too long) is [`Stage::Tunnel`]; an address of a family the proxy
    /// cannot reach [`Stage::AddressFamily`]; the proxy's own failure is
    /// [`Stage::ProxyConnect`] or [`Stage::Proxy`].
    async fn tunnel(
        &self,
        proxy: &ProxyUrl,
        target: Target<'_>,
        host: &str,
        port: u16,
    ) -> Result<TcpStream, SocketError> {
        let mut stream = self.connect_to_proxy(proxy).await?;
        let site = match target {
            Target::Addr(addr) => Some(addr),
            Target::Name(..) => None,
        };
        let fail = |stage, target, error| SocketError {
            stage,
            source_ip: self.source_ip,
            target,
            error,
        };
        match tokio::time::timeout(
            self.connect_timeout,
            super::proxy::handshake(&mut stream, proxy, target),
        )
        .await
        {
            Ok(Ok(())) => Ok(stream),
            Ok(Err(e)) => match e.into_io(proxy) {
                (Stage::Proxy, error) => Err(fail(Stage::Proxy, stream.peer_addr().ok(), error)),
                (stage, error) => Err(fail(stage, site, error)),
            },
            // The proxy holds its answer until it has connected to the target, so a slow
            // handshake is most often a slow site: a timeout, as a direct connect's is.
            Err(_) => Err(fail(
                Stage::Tunnel,
                site,
                io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "proxy {proxy} did not open a tunnel to {host}:{port} within {:?}",
                        self.connect_timeout
                    ),
                ),
            )),
        }
    }

    /// A TCP connection to the proxy from the exit's source IP; failures are
    /// [`Stage::ProxyConnect`] (the exit's fault).
    async fn connect_to_proxy(&self, proxy: &ProxyUrl) -> Result<TcpStream, SocketError> {
        let proxy_fail = |target, error: io::Error| SocketError {
            stage: Stage::ProxyConnect,
            source_ip: self.source_ip,
            target,
            error: io::Error::new(error.kind(), format!("proxy {proxy}: {error}")),
        };
        let mut addrs: Vec<SocketAddr> = match proxy.host.parse::<IpAddr>() {
            Ok(ip) => vec![SocketAddr::new(ip, proxy.port)],
            Err(_) => self
                .dns
                .lookup(&proxy.host)
                .await
                .map_err(|e| proxy_fail(None, io::Error::other(e.to_string())))?
                .iter()
                .map(|ip| SocketAddr::new(*ip, proxy.port))
                .collect(),
        };
        if !self.source_ip.is_unspecified() {
            addrs.retain(|a| a.is_ipv4() == self.source_ip.is_ipv4());
        }
        let mut last = None;
        for addr in addrs {
            match connect_from(self.source_ip, addr, self.connect_timeout).await {
                Ok(stream) => return Ok(stream),
                Err(e) if e.is_local() => return Err(e),
                Err(e) => last = Some((addr, e.error)),
            }
        }
        Err(match last {
            Some((addr, e)) => proxy_fail(Some(addr), e),
            None => proxy_fail(
                None,
                io::Error::new(
                    io::ErrorKind::Unsupported,
                    "has no address of the exit's source address family",
                ),
            ),
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
