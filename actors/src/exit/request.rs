//! What an exit puts on each hop besides the URL: the client it goes through (which
//! decides the addresses it may reach), the configured headers and the cookies it keeps;
//! and the two ways requests leave an exit, its fetches' and its health checks' ([`Way`]).

use std::cell::RefCell;
use std::time::{Duration, SystemTime};

use awc::error::SendRequestError;
use awc::http::header::{HeaderMap, HeaderName, HeaderValue, COOKIE, SET_COOKIE};
use exitcrawl::address::AddressRule;
use exitcrawl::cookies::{CookieJar, Stored};

use super::hop::{is_credential, Hop};
use crate::messages::{AttemptFailure, FetchErrorKind};
use crate::net::{build_client_reaching, host_of, Addrs, ClientOptions, DnsCache, Reach, Renewing};

/// An exit's awc clients, built when first needed: one that reaches any address when the
/// private-address rule is lifted; otherwise one for public and one for private targets,
/// each with its own pool, so a connection opened for one kind is never reused for the
/// other. Each is replaced by a fresh one after `pool_hosts` hosts, which closes the
/// idle connections awc would otherwise keep to every host (see [`Renewing`]).
pub(super) struct Clients {
    opts: ClientOptions,
    dns: DnsCache,
    rule: AddressRule,
    any: RefCell<Renewing>,
    public: RefCell<Renewing>,
    private: RefCell<Renewing>,
    /// The authority of the last hop decided whose host is an address literal, and whether
    /// that address is private. A literal's answer never changes (the rule is fixed, and no
    /// resolver is asked), so the next hop to the same authority reuses it instead of
    /// taking the host out of the URL and parsing the address again, which [`Self::decide`]
    /// would do for every request.
    literal: RefCell<(String, bool)>,
}

impl Clients {
    pub(super) fn new(opts: ClientOptions, dns: DnsCache, rule: AddressRule) -> Self {
        let renewing = || RefCell::new(Renewing::new(opts.pool_hosts));
        Self {
            any: renewing(),
            public: renewing(),
            private: renewing(),
            literal: RefCell::default(),
            opts,
            dns,
            rule,
        }
    }

    /// The client for `hop`, as [`Self::decide`] left it.
    pub(super) fn client(&self, hop: &Hop) -> awc::Client {
        // The rule is cloned into a `Reach` only when a client is built, not per request.
        let (cell, reach): (_, fn(&AddressRule) -> Reach) = match hop.private {
            _ if !self.rule.enforced() => (&self.any, |_| Reach::Any),
            Some(true) => (&self.private, |r| Reach::Private(r.clone())),
            _ => (&self.public, |r| Reach::Public(r.clone())),
        };
        let authority = hop.uri.authority().map_or("", |a| a.as_str());
        cell.borrow_mut().get(authority, || {
            build_client_reaching(&self.opts, self.dns.clone(), reach(&self.rule))
        })
    }

    /// Decide whether `hop` goes to a private address, when that can be known without
    /// waiting; `false` means: call [`Self::resolve`] first. A hop led to from a public
    /// address goes to public ones only; any other goes where its host resolves — private
    /// when it has no public address of the exit's family.
    pub(super) fn decide(&self, hop: &mut Hop) -> bool {
        if !self.rule.enforced() || hop.private.is_some() {
            return true;
        }
        if hop.public_only {
            hop.private = Some(false);
            return true;
        }
        let authority = hop.uri.authority().map_or("", |a| a.as_str());
        {
            let (last, private) = &*self.literal.borrow();
            if !last.is_empty() && last == authority {
                hop.private = Some(*private);
                return true;
            }
        }
        match self.dns.cached(host_of(&hop.uri).unwrap_or("")) {
            Some(addrs) => {
                let private = self.all_private(&addrs);
                if matches!(addrs, Addrs::Literal(_)) {
                    let mut memo = self.literal.borrow_mut();
                    memo.0.clear();
                    memo.0.push_str(authority);
                    memo.1 = private;
                }
                hop.private = Some(private);
                true
            }
            None => false,
        }
    }

    /// [`Self::decide`] after resolving the host; a name that does not resolve ends the
    /// attempt with the resolver's error. Why not send it as public and let the
    /// connector report it: the connector resolves again, and a name whose resolver
    /// failed only the first time would then resolve to its private address there, and
    /// be refused for good as a public hop led to a private one. Through a proxy it is
    /// sent as public all the same: the proxy may resolve what this host cannot (a name
    /// only the proxy's network knows), and the connector hands it the name.
    pub(super) async fn resolve(&self, hop: &mut Hop) -> Result<(), AttemptFailure> {
        let host = host_of(&hop.uri).unwrap_or("");
        match self.dns.lookup(host).await {
            Ok(addrs) => {
                hop.private = Some(self.all_private(&addrs));
                Ok(())
            }
            Err(_) if self.opts.proxy.is_some() => {
                hop.private = Some(false);
                Ok(())
            }
            Err(e) => Err(unresolved(host, &e)),
        }
    }

    /// [`Self::resolve`] before `deadline`, the request's: a resolver slower than what is
    /// left of the request's timeout ends the attempt then, as a name not resolved this
    /// time ([`Failure::Unresolved`](exitcrawl::outcome::Failure::Unresolved), `dns`):
    /// the resolver's failure, retried, and not the site's, as the same slow resolver
    /// inside the connector is (the limiter does not hear of it). The resolution goes on
    /// in the DNS cache, for the retry to find.
    pub(super) async fn resolve_by(
        &self,
        hop: &mut Hop,
        deadline: actix::clock::Instant,
    ) -> Result<(), AttemptFailure> {
        match tokio::time::timeout_at(deadline, self.resolve(hop)).await {
            Ok(resolved) => resolved,
            Err(_) => Err(AttemptFailure {
                kind: exitcrawl::outcome::Failure::Unresolved,
                error: FetchErrorKind::Dns,
                message: format!(
                    "failed resolving {}: the resolver took longer than what was left of the request's timeout",
                    host_of(&hop.uri).unwrap_or("")
                ),
            }),
        }
    }

    /// Whether every address of the exit's family (or, with none of it, every address) is
    /// private.
    fn all_private(&self, addrs: &[std::net::IpAddr]) -> bool {
        let v4 = self.opts.source_ip.is_ipv4();
        // An exit that reaches both families (a proxy's, the default route) has no family
        // of its own to prefer.
        let both = self.opts.source_ip.is_unspecified() || self.opts.proxy.is_some();
        let family = addrs.iter().filter(|a| both || a.is_ipv4() == v4);
        let mut any = false;
        for a in family {
            any = true;
            if !self.rule.is_private(*a) {
                return false;
            }
        }
        any || addrs.iter().all(|a| self.rule.is_private(*a))
    }
}

/// The failure of a hop whose `host` did not resolve: retried when the resolver's
/// `error` may pass, waited out when the process had no descriptor to resolve with
/// ([`crate::net::resolver_failure`]).
fn unresolved(host: &str, error: &std::io::Error) -> AttemptFailure {
    let kind = crate::net::resolver_failure(error);
    let message = if kind == exitcrawl::outcome::Failure::OutOfFiles {
        format!(
            "failed resolving {host}: {error}: this process is out of file descriptors \
             (raise `ulimit -n`, or lower crawler.pool_hosts or crawler.concurrency)"
        )
    } else {
        format!("failed resolving {host}: {error}")
    };
    AttemptFailure {
        kind,
        error: FetchErrorKind::Dns,
        message,
    }
}

/// One way requests leave an exit: the clients they go through and what each hop carries
/// besides its URL. An exit has two, each with its own pools: its fetches' way, and its
/// health checks', whose pool holds one connection and which keeps no cookies.
///
/// Why the checks have a way of their own: awc's pool lets a request connect only when
/// one of its `max_concurrent` connections is free, and a site that holds every
/// connection of the exit (it accepts and never answers) would keep a check waiting
/// until its timeout. The check would then fail for the site's slowness, which never
/// counts against the exit, and eject an exit whose address works. On a pool of its
/// own a check measures whether the exit reaches the health URL.
pub(super) struct Way {
    pub(super) clients: Clients,
    pub(super) identity: Identity,
}

impl Way {
    /// Send one hop of a request through the client its reach calls for (see
    /// [`Clients::decide`]): the fetch's own headers, then the configured ones and the
    /// kept cookies (see [`Identity::apply`]), minus credentials once a redirect has left
    /// the first origin. Not an `async fn`: awc's own future is awaited directly, one
    /// level of request future fewer; the cookies an answer sets are kept by the caller
    /// ([`Self::answered`]).
    pub(super) fn send_hop(
        &self,
        hop: &Hop,
        headers: &[(String, String)],
        timeout: Option<Duration>,
    ) -> awc::SendClientRequest {
        let mut req = self
            .clients
            .client(hop)
            .request(hop.method.clone(), hop.uri.clone());
        if let Some(t) = timeout {
            req = req.timeout(t);
        }
        for (name, value) in headers {
            if hop.cross_origin && is_credential(name) {
                continue;
            }
            if let (Ok(n), Ok(v)) = (
                HeaderName::from_bytes(name.as_bytes()),
                HeaderValue::from_str(value),
            ) {
                req = req.insert_header((n, v));
            }
        }
        self.identity.apply(req.headers_mut(), hop, headers);
        match &hop.body {
            Some(b) => req.send_body(b.clone()),
            None => req.send(),
        }
    }

    /// Keep the cookies of a hop's answer (with `[crawler] cookies`), whatever comes next.
    pub(super) fn answered(
        &self,
        hop: &Hop,
        sent: Result<awc::ClientResponse, SendRequestError>,
    ) -> Result<awc::ClientResponse, SendRequestError> {
        if let Ok(resp) = &sent {
            self.identity.remember(hop, resp.headers());
        }
        sent
    }
}

/// The headers of `[crawler.headers]`, ready to send, and the cookie jar when
/// `[crawler] cookies` is on.
#[derive(Default)]
pub(super) struct Identity {
    headers: Vec<(HeaderName, HeaderValue)>,
    jar: Option<RefCell<CookieJar>>,
}

impl Identity {
    /// From validated settings' name/value pairs (a pair that is no header is left out,
    /// which validation has already made impossible).
    pub(super) fn new(headers: &[(String, String)], cookies: bool) -> Self {
        let headers = headers
            .iter()
            .filter_map(|(n, v)| {
                Some((
                    HeaderName::from_bytes(n.as_bytes()).ok()?,
                    HeaderValue::from_str(v).ok()?,
                ))
            })
            .collect();
        Self {
            headers,
            jar: cookies.then(RefCell::default),
        }
    }

    /// Put the configured headers and the cookies for `hop` into `map`, which holds the
    /// fetch's own headers already (they win). Credentials stay behind once a redirect
    /// has left the first origin, as the fetch's own do; the jar's cookies are the hop's
    /// host's own, so they go with every hop to it.
    pub(super) fn apply(&self, map: &mut HeaderMap, hop: &Hop, own: &[(String, String)]) {
        let owns = |name: &HeaderName| {
            own.iter()
                .any(|(n, _)| name.as_str().eq_ignore_ascii_case(n))
        };
        for (name, value) in &self.headers {
            if (hop.cross_origin && is_credential(name.as_str())) || owns(name) {
                continue;
            }
            map.insert(name.clone(), value.clone());
        }
        let Some(jar) = &self.jar else {
            return;
        };
        // The fetch's own `Cookie` wins while it is sent; past a redirect to another
        // origin it stays behind, and the new host's jar cookies go instead.
        if owns(&COOKIE) && !hop.cross_origin {
            return;
        }
        let https = hop.uri.scheme_str() == Some("https");
        let host = host_of(&hop.uri).unwrap_or("");
        let Some(kept) = jar.borrow_mut().header(host, https, SystemTime::now()) else {
            return;
        };
        let value = match map.get(COOKIE).and_then(|v| v.to_str().ok()) {
            Some(configured) => format!("{configured}; {kept}"),
            None => kept,
        };
        if let Ok(v) = HeaderValue::from_str(&value) {
            map.insert(COOKIE, v);
        }
    }

    /// Keep the cookies an answer to `hop` sets.
    pub(super) fn remember(&self, hop: &Hop, answer: &HeaderMap) {
        let Some(jar) = &self.jar else {
            return;
        };
        let host = host_of(&hop.uri).unwrap_or("");
        let now = SystemTime::now();
        let mut jar = jar.borrow_mut();
        for v in answer.get_all(SET_COOKIE) {
            let text = String::from_utf8_lossy(v.as_bytes());
            if jar.store(host, &text, now) == Stored::Refused {
                tracing::debug!(
                    host,
                    "a Set-Cookie was not kept: unusable, too long, or too many hosts"
                );
            }
        }
    }
}
