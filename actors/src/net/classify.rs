//! Sorting request failures by whose fault they are.
//!
//! Why: the scheduler must not punish a site (back off, count an error against it) for a
//! failure that happened on our side before anything was sent — a source IP that vanished
//! from the host, a v4 exit asked for a v6-only host, ephemeral ports exhausted. Those are
//! the exit's problem: move the fetch to another exit and let the health machine judge the
//! exit. Everything else (refused, reset, timed out) involved the site or the path to it.

use std::io;

use awc::error::{ConnectError, SendRequestError};

use super::connector::SocketError;

/// The kind of a failed request, for the scheduler and health tracking.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FailureKind {
    /// Failed on this host before anything was sent (bind failed, EADDRNOTAVAIL, ports
    /// exhausted): the exit's fault, not the site's.
    LocalConnect,
    /// This process is out of file descriptors (`EMFILE`, `ENFILE`): nothing was sent, and
    /// it is neither the site's fault nor the exit's — every exit would fail alike until
    /// requests in flight give some back, so the exit is not ejected for it.
    OutOfFiles,
    /// The host has no address of the exit's family (an IPv4 exit, an IPv6-only host):
    /// nothing was sent, and it is neither the exit's fault nor the site's — another exit
    /// may reach it.
    WrongFamily,
    /// The exit's proxy could not be reached, refused the tunnel (407, 403, another
    /// answer to `CONNECT`, a SOCKS5 refusal) or broke the handshake: nothing reached the
    /// site, and it is the exit's fault — the fetch moves to another exit.
    Proxy,
    /// The site (or something on the path) refused the TCP connection (RST to SYN).
    ConnectRefused,
    /// Connect, or waiting for the response, took too long.
    Timeout,
    /// The connection was reset or closed under us after it was established (also a
    /// body cut short of its framing: `incomplete_body`).
    Reset,
    /// Anything else: DNS failure, protocol/parse errors, invalid URL, TLS, HTTP/2.
    Other,
}

impl FailureKind {
    /// True when nothing reached the site, so the failure must not count against it.
    pub fn is_local(self) -> bool {
        matches!(
            self,
            FailureKind::LocalConnect
                | FailureKind::WrongFamily
                | FailureKind::OutOfFiles
                | FailureKind::Proxy
        )
    }

    /// True when the exit itself failed (counts towards ejecting it).
    pub fn is_exit_fault(self) -> bool {
        matches!(self, FailureKind::LocalConnect | FailureKind::Proxy)
    }
}

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

/// Classify a failed awc request. See [`FailureKind`].
pub fn classify(err: &SendRequestError) -> FailureKind {
    match err {
        SendRequestError::Connect(e) => classify_connect(e),
        SendRequestError::Timeout => FailureKind::Timeout,
        SendRequestError::Send(e) => classify_io(e),
        SendRequestError::Response(e) => classify_parse(e),
        _ => FailureKind::Other,
    }
}

/// Classify a connect-phase error (also what `classify` does for `SendRequestError::Connect`).
pub fn classify_connect(err: &ConnectError) -> FailureKind {
    match err {
        ConnectError::Timeout => FailureKind::Timeout,
        // Despite the name, awc reports this when the connection hit EOF after the request
        // was written but before a response head arrived: the site closed on us.
        ConnectError::Disconnected => FailureKind::Reset,
        ConnectError::Io(e) => {
            // Our connector wraps its failures in SocketError, which knows the failed step.
            if let Some(se) = e.get_ref().and_then(|r| r.downcast_ref::<SocketError>()) {
                if se.stage == super::connector::Stage::AddressFamily {
                    return FailureKind::WrongFamily;
                }
                if out_of_files(&se.error) {
                    return FailureKind::OutOfFiles;
                }
                if matches!(
                    se.stage,
                    super::connector::Stage::ProxyConnect | super::connector::Stage::Proxy
                ) {
                    return FailureKind::Proxy;
                }
                if se.is_local() {
                    return FailureKind::LocalConnect;
                }
                return classify_io(&se.error);
            }
            // awc's own connector (or anything else) gives a bare OS error: EADDRNOTAVAIL
            // can then only come from bind/connect on this host.
            match e.kind() {
                _ if out_of_files(e) => FailureKind::OutOfFiles,
                io::ErrorKind::AddrNotAvailable => FailureKind::LocalConnect,
                _ => classify_io(e),
            }
        }
        _ => FailureKind::Other,
    }
}

/// `EMFILE` (this process's limit) or `ENFILE` (the system's).
fn out_of_files(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
}

fn classify_io(e: &io::Error) -> FailureKind {
    match e.kind() {
        io::ErrorKind::ConnectionRefused => FailureKind::ConnectRefused,
        io::ErrorKind::TimedOut => FailureKind::Timeout,
        io::ErrorKind::ConnectionReset
        | io::ErrorKind::ConnectionAborted
        | io::ErrorKind::BrokenPipe
        | io::ErrorKind::UnexpectedEof => FailureKind::Reset,
        _ => FailureKind::Other,
    }
}

fn classify_parse(e: &actix_http::error::ParseError) -> FailureKind {
    use actix_http::error::ParseError;
    match e {
        ParseError::Io(e) => classify_io(e),
        // The server closed the connection before a full response head arrived.
        ParseError::Incomplete => FailureKind::Reset,
        ParseError::Timeout => FailureKind::Timeout,
        _ => FailureKind::Other,
    }
}
