//! Which of a site's addresses the connector tries, and whose fault it is when the kernel
//! finds none of them reachable.
//!
//! Why here: Linux refuses a TCP connect to a multicast or broadcast address at once with
//! `ENETUNREACH`, the same error a source whose link or routes are gone gets. Read as the
//! exit's fault, a link to `http://224.0.0.1/` (or a name resolving there) would eject
//! every exit it went through; read as the site's, a dead route would never eject its
//! exit. So the addresses no connection can be made to are dropped before connecting, and
//! an `ENETUNREACH` from every address left is blamed by asking the kernel's routes
//! ([`route`]: a UDP connect, which sends nothing) whether the source reaches anything at
//! all.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use socket2::{Domain, Socket, Type};

use exitcrawl::address::{unconnectable_kind, unmapped};

use super::{SocketError, Stage};

/// Make `targets` the addresses a connection can be made to, in resolver order, an
/// IPv4-mapped one as the IPv4 address it carries; the site's final failure
/// ([`Stage::Unconnectable`]) when none is left. `host` names the site in the error.
pub(super) fn keep_connectable(
    targets: &mut Vec<SocketAddr>,
    source_ip: IpAddr,
    host: &str,
) -> Result<(), SocketError> {
    for t in targets.iter_mut() {
        t.set_ip(unmapped(t.ip()));
    }
    let first = targets.first().copied();
    targets.retain(|t| unconnectable_kind(t.ip()).is_none());
    match first {
        Some(first) if targets.is_empty() => {
            let kind = unconnectable_kind(first.ip()).unwrap_or("unconnectable");
            let ip = first.ip();
            let message = if crate::dns::parse_ip_literal(host).is_some() {
                format!("{ip} is a {kind} address, which cannot be connected to")
            } else {
                format!("{host} resolves to {ip}, a {kind} address, which cannot be connected to")
            };
            Err(unconnectable(source_ip, first, message))
        }
        _ => Ok(()),
    }
}

/// Whose fault `err` is, the last of the connect failures from a source that were all
/// `ENETUNREACH` (network unreachable), one per address of the site; `route` says whether
/// the source has a route to an address (see [`route`]).
///
/// - A route to the site's address exists: the address is one TCP may not connect to
///   (the broadcast address of a subnet of this host): the site's, final
///   ([`Stage::Unconnectable`]).
/// - No route to it, but to other addresses of its family: the site's address lies outside
///   this host's routes: the site's, as any unreachable network is (left as it is).
/// - No route to any address of the family: the source's routes are gone (its link down):
///   the exit's ([`Stage::Route`]). For an exit on the default route, that is the exit's
///   only when it has no route of the other family either; otherwise the host has no
///   network of that family, and the site is one of another family
///   ([`Stage::AddressFamily`]).
///
/// A probe that cannot tell (out of descriptors, an address the source may not use)
/// leaves `err` as it is: the site's.
pub(super) fn blame_unreachable<R>(err: SocketError, route: R) -> SocketError
where
    R: Fn(IpAddr, SocketAddr) -> io::Result<()>,
{
    let Some(target) = err.target else {
        return err;
    };
    let source = err.source_ip;
    let unreachable = |e: &io::Error| e.raw_os_error() == Some(libc::ENETUNREACH);
    let no_route = |to: SocketAddr| route(source, to).is_err_and(|e| unreachable(&e));
    match route(source, target) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EACCES) => {}
        Err(e) if unreachable(&e) => {
            let v4 = target.is_ipv4();
            if !no_route(reference(v4)) {
                return err;
            }
            let family = |v4: bool| if v4 { "IPv4" } else { "IPv6" };
            if source.is_unspecified() && !no_route(reference(!v4)) {
                let message = format!(
                    "this host has no route to any {} address, so {target} cannot be reached from the default route",
                    family(v4)
                );
                return SocketError {
                    stage: Stage::AddressFamily,
                    error: io::Error::new(io::ErrorKind::Unsupported, message),
                    ..err
                };
            }
            let message = format!(
                "no route from {}: not to {target}, nor to any other {} address (its link or routes are gone): {}",
                if source.is_unspecified() {
                    "the default route".to_owned()
                } else {
                    format!("source {source}")
                },
                family(v4),
                err.error
            );
            return SocketError {
                stage: Stage::Route,
                error: io::Error::new(io::ErrorKind::NetworkUnreachable, message),
                ..err
            };
        }
        Err(_) => return err,
    }
    let message = format!(
        "{} cannot be connected to: a route to it exists, and the kernel still refuses a TCP connection to it (a broadcast address): {}",
        target.ip(),
        err.error
    );
    unconnectable(source, target, message)
}

/// Whether `source` has a route to `target`: a UDP socket bound to it, connected to the
/// target. Nothing is sent; the kernel only looks up the route (`ENETUNREACH` when there
/// is none, `EACCES` for a broadcast address).
pub(super) fn route(source: IpAddr, target: SocketAddr) -> io::Result<()> {
    let socket = Socket::new(Domain::for_address(target), Type::DGRAM, None)?;
    if !source.is_unspecified() {
        socket.bind(&SocketAddr::new(source, 0).into())?;
    }
    socket.connect(&target.into())
}

/// An address of the family that any route of it covers, a default route included: one
/// of the documentation prefixes (RFC 5737, RFC 3849), which no site is at.
fn reference(v4: bool) -> SocketAddr {
    let ip = if v4 {
        IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1))
    } else {
        IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1))
    };
    SocketAddr::new(ip, 80)
}

fn unconnectable(source_ip: IpAddr, target: SocketAddr, message: String) -> SocketError {
    SocketError {
        stage: Stage::Unconnectable,
        source_ip,
        target: Some(target),
        error: io::Error::new(io::ErrorKind::InvalidInput, message),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unreachable_from(source: &str, target: &str) -> SocketError {
        SocketError {
            stage: Stage::Connect,
            source_ip: source.parse().unwrap(),
            target: Some(target.parse().unwrap()),
            error: io::Error::from_raw_os_error(libc::ENETUNREACH),
        }
    }

    /// A host whose routes are `routed`: every address in it has a route, every other
    /// none; `broadcast` answers as a subnet's broadcast address does.
    fn routes(
        routed: &'static [&'static str],
        broadcast: &'static str,
    ) -> impl Fn(IpAddr, SocketAddr) -> io::Result<()> {
        move |_source, to| {
            let to = to.ip().to_string();
            if to == broadcast {
                Err(io::Error::from_raw_os_error(libc::EACCES))
            } else if routed.contains(&to.as_str()) {
                Ok(())
            } else {
                Err(io::Error::from_raw_os_error(libc::ENETUNREACH))
            }
        }
    }

    #[test]
    fn a_subnet_broadcast_is_the_sites_and_final() {
        let err = unreachable_from("10.0.0.5", "10.0.0.255:80");
        let blamed = blame_unreachable(err, routes(&["192.0.2.1"], "10.0.0.255"));
        assert_eq!(blamed.stage, Stage::Unconnectable, "{blamed}");
        assert!(!blamed.is_local());
        assert!(
            blamed.to_string().contains("cannot be connected to"),
            "{blamed}"
        );
    }

    #[test]
    fn an_address_outside_the_routes_of_a_source_that_has_others_is_the_sites() {
        let err = unreachable_from("10.0.0.5", "198.18.0.1:80");
        let blamed = blame_unreachable(err, routes(&["192.0.2.1"], ""));
        assert_eq!(blamed.stage, Stage::Connect, "{blamed}");
        assert_eq!(blamed.error.raw_os_error(), Some(libc::ENETUNREACH));
        assert!(!blamed.is_local());
    }

    #[test]
    fn a_source_with_no_route_at_all_is_the_exits() {
        let err = unreachable_from("10.0.0.5", "198.18.0.1:80");
        let blamed = blame_unreachable(err, routes(&[], ""));
        assert_eq!(blamed.stage, Stage::Route, "{blamed}");
        assert!(blamed.is_local());
        let text = blamed.to_string();
        assert!(text.contains("source 10.0.0.5"), "{text}");
        assert!(text.contains("198.18.0.1:80"), "{text}");
    }

    #[test]
    fn the_default_route_without_a_network_of_the_sites_family_is_the_wrong_family() {
        // A host with IPv4 routes only, asked for an IPv6 site.
        let err = unreachable_from("0.0.0.0", "[2001:db8::5]:80");
        let blamed = blame_unreachable(err, routes(&["192.0.2.1"], ""));
        assert_eq!(blamed.stage, Stage::AddressFamily, "{blamed}");
        // No route of either family: the default route itself is gone.
        let err = unreachable_from("0.0.0.0", "[2001:db8::5]:80");
        let blamed = blame_unreachable(err, routes(&[], ""));
        assert_eq!(blamed.stage, Stage::Route, "{blamed}");
        assert!(blamed.to_string().contains("the default route"), "{blamed}");
    }

    #[test]
    fn a_probe_that_cannot_tell_leaves_the_failure_the_sites() {
        let err = unreachable_from("10.0.0.5", "198.18.0.1:80");
        let blamed = blame_unreachable(err, |_, _| Err(io::Error::from_raw_os_error(libc::EMFILE)));
        assert_eq!(blamed.stage, Stage::Connect, "{blamed}");
    }

    #[test]
    fn the_kernel_routes_loopbacks_broadcast_as_a_broadcast() {
        let source: IpAddr = "127.0.0.2".parse().unwrap();
        let e = route(source, "127.255.255.255:80".parse().unwrap()).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EACCES), "{e}");
        route(source, "127.0.0.1:80".parse().unwrap()).unwrap();
    }

    #[test]
    fn mapped_addresses_are_unmapped_and_unconnectable_ones_dropped() {
        let source: IpAddr = "127.0.0.2".parse().unwrap();
        let mut targets: Vec<SocketAddr> =
            ["224.0.0.1:80", "[::ffff:127.0.0.1]:80", "[ff02::1]:80"]
                .iter()
                .map(|t| t.parse().unwrap())
                .collect();
        keep_connectable(&mut targets, source, "h.test").unwrap();
        assert_eq!(targets, ["127.0.0.1:80".parse::<SocketAddr>().unwrap()]);
        let mut none: Vec<SocketAddr> = vec!["[::ffff:224.0.0.1]:80".parse().unwrap()];
        let err = keep_connectable(&mut none, source, "h.test").unwrap_err();
        assert_eq!(err.stage, Stage::Unconnectable);
        assert_eq!(
            err.to_string(),
            "h.test resolves to 224.0.0.1, a multicast address, which cannot be connected to"
        );
        let mut literal: Vec<SocketAddr> = vec!["[ff02::1]:80".parse().unwrap()];
        let err = keep_connectable(&mut literal, source, "[ff02::1]").unwrap_err();
        assert_eq!(
            err.to_string(),
            "ff02::1 is a multicast address, which cannot be connected to"
        );
    }
}
