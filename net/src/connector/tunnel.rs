//! The connector's way through the exit's proxy: resolve and connect to the proxy, then
//! run its handshake (see [`crate::proxy`]), every step within the connect's one
//! [`Deadline`].
//!
//! Whose fault a step's running out of time is: the proxy's connect and, for SOCKS5, its
//! greeting and credentials are the proxy's alone (the exit's fault, [`Stage::ProxyConnect`]
//! or [`Stage::Proxy`]); the wait for its answer to the request for the target is the
//! site's connect, carried out by the proxy ([`Stage::Tunnel`]).

use std::io;
use std::net::{IpAddr, SocketAddr};

use actix_tls::connect::{ConnectError, ConnectInfo, Connection};
use awc::http::Uri;
use tokio::net::TcpStream;

use exitcrawl::proxy::{ProxyScheme, ProxyUrl};

use super::{connect_from, Deadline, ExitConnector, Reach, SocketError, Stage};
use crate::proxy::{HandshakeError, Target};

impl ExitConnector {
    /// Open a tunnel to the request's target through `proxy`: connect to the proxy from
    /// the exit's source IP, then run its handshake (see [`crate::proxy`]).
    ///
    /// When the proxy is sent addresses ([`Self::tunnel_targets`]), each is tried in
    /// resolver order until one opens, as a direct exit tries a name's addresses: a dual
    /// stack name's first address is often IPv6, which an IPv4-only proxy cannot reach.
    /// Each gets its share of the time left ([`Deadline::share`]). The site's failure on
    /// the last one is reported (or that the proxy reaches none of the addresses'
    /// families); the proxy's own failure at once.
    pub(super) async fn connect_via(
        &self,
        proxy: &ProxyUrl,
        req: ConnectInfo<Uri>,
        deadline: Deadline,
    ) -> Result<Connection<Uri, TcpStream>, ConnectError> {
        let host = req.hostname().to_owned();
        let port = req.port();
        let targets = self.tunnel_targets(proxy, &host, port, deadline).await?;
        let count = targets.len();
        let mut last = None;
        for (i, target) in targets.into_iter().enumerate() {
            let share = deadline.share(count - i);
            match self.tunnel(proxy, target, &host, port, share).await {
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
        deadline: Deadline,
    ) -> Result<Vec<Target<'h>>, ConnectError> {
        let literal = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<IpAddr>()
            .ok();
        let local = match literal {
            Some(ip) => Some(Ok(vec![SocketAddr::new(ip, port)])),
            None if proxy.scheme == ProxyScheme::Socks5 || self.reach != Reach::Any => Some(
                self.resolve(host, deadline)
                    .await
                    .map(|ips| ips.iter().map(|ip| SocketAddr::new(*ip, port)).collect()),
            ),
            None => None,
        };
        match (proxy.scheme, local) {
            (ProxyScheme::Socks5, Some(Err(e))) => Err(ConnectError::Resolver(Box::new(e))),
            // Resolving took all the time there was: the name's failure, not the proxy's,
            // which would be left no time to connect.
            (_, Some(Err(e))) if e.kind() == io::ErrorKind::TimedOut => {
                Err(ConnectError::Resolver(Box::new(e)))
            }
            (_, Some(Ok(mut addrs))) => {
                super::targets::keep_connectable(&mut addrs, self.source_ip, host)
                    .map_err(|e| ConnectError::Io(e.into_io()))?;
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

    /// One tunnel to `target` through `proxy`, opened by `deadline`. A failure at the site
    /// (the proxy could not reach it, or did not answer the request for it in time) is
    /// [`Stage::Tunnel`]; an address of a family the proxy cannot reach
    /// [`Stage::AddressFamily`]; the proxy's own failure, or its stall before it was
    /// asked for the target, is [`Stage::ProxyConnect`] or [`Stage::Proxy`].
    async fn tunnel(
        &self,
        proxy: &ProxyUrl,
        target: Target<'_>,
        host: &str,
        port: u16,
        deadline: Deadline,
    ) -> Result<TcpStream, SocketError> {
        let mut stream = self.connect_to_proxy(proxy, deadline).await?;
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
        let timed_out = |what: String| {
            io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "proxy {proxy} {what} within the connect timeout ({:?})",
                    self.connect_timeout
                ),
            )
        };
        let failed = |e: HandshakeError, stream: &TcpStream| match stage_of(e, proxy) {
            (Stage::Proxy, error) => fail(Stage::Proxy, stream.peer_addr().ok(), error),
            (stage, error) => fail(stage, site, error),
        };
        // What a SOCKS5 proxy answers by itself (its greeting, the credentials) it answers
        // at once: one that stalls there is stalled, the exit's fault.
        match deadline
            .within(crate::proxy::greet(&mut stream, proxy))
            .await
        {
            Some(Ok(())) => {}
            Some(Err(e)) => return Err(failed(e, &stream)),
            None => {
                let what = if proxy.credentials.is_some() {
                    "did not answer the SOCKS5 greeting and credentials"
                } else {
                    "did not answer the SOCKS5 greeting"
                };
                let peer = stream.peer_addr().ok();
                return Err(fail(Stage::Proxy, peer, timed_out(what.to_owned())));
            }
        }
        match deadline
            .within(crate::proxy::ask(&mut stream, proxy, target))
            .await
        {
            Some(Ok(())) => Ok(stream),
            Some(Err(e)) => Err(failed(e, &stream)),
            // The proxy holds its answer until it has connected to the target, so a slow
            // answer is most often a slow site: a timeout, as a direct connect's is.
            None => Err(fail(
                Stage::Tunnel,
                site,
                timed_out(format!("did not open a tunnel to {host}:{port}")),
            )),
        }
    }

    /// A TCP connection to the proxy from the exit's source IP, opened before `deadline`:
    /// its name resolved, then its addresses tried in resolver order, each within its share
    /// of the time left, one share more being kept for the handshake. Failures, running out
    /// of time included, are [`Stage::ProxyConnect`] (the exit's fault).
    ///
    /// Why a share kept for the handshake: the wait for the proxy's answer to the request
    /// for the site is counted as the site's, so a proxy slow to connect must not eat that
    /// time, or its slowness would be counted against the site.
    async fn connect_to_proxy(
        &self,
        proxy: &ProxyUrl,
        deadline: Deadline,
    ) -> Result<TcpStream, SocketError> {
        let proxy_fail = |target, error: io::Error| SocketError {
            stage: Stage::ProxyConnect,
            source_ip: self.source_ip,
            target,
            error: io::Error::new(error.kind(), format!("proxy {proxy}: {error}")),
        };
        let mut addrs: Vec<SocketAddr> = match proxy.host.parse::<IpAddr>() {
            Ok(ip) => vec![SocketAddr::new(ip, proxy.port)],
            Err(_) => self
                .resolve(&proxy.host, deadline)
                .await
                .map_err(|e| proxy_fail(None, e))?
                .iter()
                .map(|ip| SocketAddr::new(*ip, proxy.port))
                .collect(),
        };
        if !self.source_ip.is_unspecified() {
            addrs.retain(|a| a.is_ipv4() == self.source_ip.is_ipv4());
        }
        let count = addrs.len();
        let mut last = None;
        for (i, addr) in addrs.into_iter().enumerate() {
            let timeout = deadline.share(count - i + 1).remaining();
            match connect_from(self.source_ip, addr, timeout).await {
                Ok(stream) => return Ok(stream),
                Err(e) if e.is_local() => return Err(e),
                Err(e) => {
                    tracing::debug!(source = %self.source_ip, %proxy, error = %e, "connect to proxy failed");
                    last = Some((addr, e.error));
                }
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
}

/// The connector's stage for a failed handshake, and an `io::Error` whose message says
/// what the proxy did: the proxy's refusal or a broken exchange is the exit's
/// ([`Stage::Proxy`]); its word that the target failed the site's ([`Stage::Tunnel`]); an
/// address of a family it cannot reach neither's ([`Stage::AddressFamily`]).
fn stage_of(e: HandshakeError, proxy: &ProxyUrl) -> (Stage, io::Error) {
    let said = |e: io::Error| io::Error::new(e.kind(), format!("proxy {proxy}: {e}"));
    match e {
        HandshakeError::Proxy(m) => (Stage::Proxy, said(io::Error::other(m))),
        HandshakeError::Target(e) => (Stage::Tunnel, said(e)),
        HandshakeError::Family(m) => (
            Stage::AddressFamily,
            said(io::Error::new(io::ErrorKind::Unsupported, m)),
        ),
        HandshakeError::Io(e) => (Stage::Proxy, said(e)),
    }
}
