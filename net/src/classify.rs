//! Reading awc's errors as the core's [`Failure`]s, sorted by whose fault they are.
//!
//! Why here: only the I/O layer knows awc's and the connector's error types; the core's
//! vocabulary says what each failure means for the site, the exit and the fetch.

use std::io;

use awc::error::{ConnectError, SendRequestError};

use exitcrawl::outcome::Failure;

use super::connector::SocketError;
use super::dns::out_of_files;

/// The refusal of the private-address rule inside a failed request (the connector's
/// [`Stage::Refused`](super::Stage::Refused) or [`Stage::Changed`](super::Stage::Changed)),
/// if that is what it was.
pub fn refusal(err: &SendRequestError) -> Option<&SocketError> {
    let SendRequestError::Connect(ConnectError::Io(e)) = err else {
        return None;
    };
    let se = e.get_ref()?.downcast_ref::<SocketError>()?;
    matches!(
        se.stage,
        super::connector::Stage::Refused | super::connector::Stage::Changed
    )
    .then_some(se)
}

/// Classify a failed awc request. See [`Failure`].
pub fn classify(err: &SendRequestError) -> Failure {
    match err {
        SendRequestError::Connect(e) => classify_connect(e),
        SendRequestError::Timeout => Failure::Timeout,
        SendRequestError::Send(e) => classify_io(e),
        SendRequestError::Response(e) => classify_parse(e),
        _ => Failure::Other,
    }
}

/// Classify a connect-phase error (also what `classify` does for `SendRequestError::Connect`).
pub fn classify_connect(err: &ConnectError) -> Failure {
    match err {
        ConnectError::Timeout => Failure::Timeout,
        // Despite the name, awc reports this when the connection hit EOF after the request
        // was written but before a response head arrived: the site closed on us.
        ConnectError::Disconnected => Failure::Reset,
        ConnectError::Io(e) => {
            // Our connector wraps its failures in SocketError, which knows the failed step.
            if let Some(se) = e.get_ref().and_then(|r| r.downcast_ref::<SocketError>()) {
                match se.stage {
                    super::connector::Stage::AddressFamily => return Failure::WrongFamily,
                    // No connection can be made to the site's addresses: ending the same
                    // way through every exit, every time.
                    super::connector::Stage::Unconnectable => return Failure::Other,
                    _ => {}
                }
                if out_of_files(&se.error) {
                    return Failure::OutOfFiles;
                }
                if matches!(
                    se.stage,
                    super::connector::Stage::ProxyConnect | super::connector::Stage::Proxy
                ) {
                    return Failure::Proxy;
                }
                if se.is_local() {
                    return Failure::LocalConnect;
                }
                return classify_io(&se.error);
            }
            // awc's own connector (or anything else) gives a bare OS error: EADDRNOTAVAIL
            // can then only come from bind/connect on this host.
            match e.kind() {
                _ if out_of_files(e) => Failure::OutOfFiles,
                io::ErrorKind::AddrNotAvailable => Failure::LocalConnect,
                _ => classify_io(e),
            }
        }
        ConnectError::Resolver(e) => e
            .downcast_ref::<io::Error>()
            .map_or(Failure::Other, resolver_failure),
        _ => Failure::Other,
    }
}

/// A resolver's error as the core's [`Failure`]: [`Failure::OutOfFiles`] when the
/// process had no descriptor to resolve with (the system resolver checks, see
/// `dns::system_lookup`), [`Failure::Unresolved`] when it may pass (a temporary failure,
/// `EAI_AGAIN`, or a timeout), else [`Failure::Other`] (a name that does not exist).
pub fn resolver_failure(e: &io::Error) -> Failure {
    if out_of_files(e) {
        Failure::OutOfFiles
    } else if super::dns::temporary(e) {
        Failure::Unresolved
    } else {
        Failure::Other
    }
}

fn classify_io(e: &io::Error) -> Failure {
    match e.kind() {
        // An ICMP unreachable from the path (or a SOCKS5 proxy's "unreachable") is a
        // refusal by something on the way, which passes as a refusal may: taken for
        // `Other`, it ended its URL at the first try.
        io::ErrorKind::ConnectionRefused
        | io::ErrorKind::HostUnreachable
        | io::ErrorKind::NetworkUnreachable => Failure::ConnectRefused,
        io::ErrorKind::TimedOut => Failure::Timeout,
        io::ErrorKind::ConnectionReset
        | io::ErrorKind::ConnectionAborted
        | io::ErrorKind::BrokenPipe
        | io::ErrorKind::UnexpectedEof => Failure::Reset,
        _ => Failure::Other,
    }
}

fn classify_parse(e: &actix_http::error::ParseError) -> Failure {
    use actix_http::error::ParseError;
    match e {
        ParseError::Io(e) => classify_io(e),
        // The server closed the connection before a full response head arrived.
        ParseError::Incomplete => Failure::Reset,
        ParseError::Timeout => Failure::Timeout,
        _ => Failure::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connector::Stage;

    fn at_connect(errno: i32) -> Failure {
        let se = SocketError {
            stage: Stage::Connect,
            source_ip: "127.0.0.2".parse().unwrap(),
            target: Some("127.0.0.1:80".parse().unwrap()),
            error: io::Error::from_raw_os_error(errno),
        };
        classify_connect(&ConnectError::Io(io::Error::other(se)))
    }

    fn at(stage: Stage, errno: i32) -> Failure {
        let se = SocketError {
            stage,
            source_ip: "127.0.0.2".parse().unwrap(),
            target: Some("224.0.0.1:80".parse().unwrap()),
            error: io::Error::from_raw_os_error(errno),
        };
        classify_connect(&ConnectError::Io(io::Error::other(se)))
    }

    #[test]
    fn a_resolver_out_of_descriptors_waits_and_a_missing_name_is_final() {
        for errno in [libc::EMFILE, libc::ENFILE] {
            let e = io::Error::from_raw_os_error(errno);
            assert_eq!(resolver_failure(&e), Failure::OutOfFiles);
        }
        let gone =
            io::Error::other("failed to lookup address information: Name or service not known");
        assert_eq!(resolver_failure(&gone), Failure::Other);
    }

    #[test]
    fn an_unreachable_network_is_the_exits_only_when_its_routes_are_gone() {
        // connect() said so for the site's address: the kernel says it of a multicast or
        // broadcast address too, so it is the site's (and passes, as a refusal may).
        let network = at_connect(libc::ENETUNREACH);
        assert_eq!(network, Failure::ConnectRefused);
        assert!(!network.is_exit_fault() && !network.is_local());
        // The connector found the source without a route to anything of that family.
        assert_eq!(at(Stage::Route, libc::ENETUNREACH), Failure::LocalConnect);
        assert!(Failure::LocalConnect.is_exit_fault());
        // An address no connection can be made to: the site's, for good.
        let group = at(Stage::Unconnectable, libc::ENETUNREACH);
        assert_eq!(group, Failure::Other);
        assert!(!group.is_local() && !group.is_transient());
        // Something on the path said the host is out of reach: worth another try.
        let host = at_connect(libc::EHOSTUNREACH);
        assert_eq!(host, Failure::ConnectRefused);
        assert!(host.is_transient());
        assert_eq!(at_connect(libc::ECONNREFUSED), Failure::ConnectRefused);
        assert_eq!(at_connect(libc::EADDRNOTAVAIL), Failure::LocalConnect);
    }
}
