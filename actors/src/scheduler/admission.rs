use std::future::Future;
use std::rc::Rc;
use std::sync::Arc;
use std::task::Poll;

use actix::dev::MessageResponse;
use actix::prelude::*;
use awc::http::Uri;
use tokio::sync::{oneshot, Semaphore};

use crate::messages::{Fetch, FetchErrorKind};
use crate::robots::RobotsGate;

use super::pending::Pending;
use super::{Enqueue, Ingress, Queues, Reply, Scheduler, SchedulerActor};

/// Longest URL accepted: beyond this most servers answer 414 anyway, and a runaway input
/// line must not become a request.
pub const MAX_URL_BYTES: usize = 8192;

/// The URL as sent: non-ASCII URLs (IDN hosts, raw UTF-8 paths) go out in their ASCII form.
pub(super) fn wire_uri(url: &str) -> Result<Uri, String> {
    let ascii = if url.is_ascii() {
        None
    } else {
        url::Url::parse(url).ok().map(String::from)
    };
    ascii
        .as_deref()
        .unwrap_or(url)
        .parse()
        .map_err(|e| format!("not a valid URL ({e})"))
}

/// A port in the URL must be 1–65535 (an empty one means the scheme's default): `http::Uri`
/// keeps a port it cannot read as a `u16` (`:70000`) and reports none, so the connection
/// would go to the default port instead. `port` is the text after the host's `:`.
pub(super) fn check_port(port: &str) -> Result<(), String> {
    if port.is_empty() {
        return Ok(());
    }
    match port.parse::<u32>() {
        Ok(n) if (1..=65535).contains(&n) && port.bytes().all(|b| b.is_ascii_digit()) => Ok(()),
        _ => Err(format!("port {port:?} is not a port (expected 1..=65535)")),
    }
}

/// The URL parsed as sent, and its host in lowercase (shared with `hosts`' key when the
/// host is already there, which saves an allocation per fetch to a busy host), or why it
/// cannot be fetched.
pub(super) fn parse_url(url: &str, hosts: &Queues) -> Result<(Uri, Arc<str>), String> {
    let uri = wire_uri(url)?;
    match uri.scheme_str() {
        Some("http") | Some("https") => {}
        Some(other) => {
            return Err(format!(
                "unsupported scheme {other:?} (expected http or https)"
            ))
        }
        None => return Err("not an absolute URL (expected http:// or https://)".into()),
    }
    let (host, port) = crate::net::host_and_port(&uri)
        .filter(|(h, _)| !h.is_empty())
        .ok_or_else(|| "URL has no host".to_string())?;
    check_port(port)?;
    let host = if host.bytes().any(|b| b.is_ascii_uppercase()) {
        Arc::from(host.to_ascii_lowercase().as_str())
    } else {
        match hosts.known(host) {
            Some(known) => Arc::clone(known),
            None => Arc::from(host),
        }
    };
    Ok((uri, host))
}

impl Scheduler {
    /// The URL as sent and its host, or why the fetch is answered at once.
    pub(super) fn validate(
        &self,
        fetch: &Fetch,
    ) -> Result<(Uri, Arc<str>), (FetchErrorKind, String)> {
        if fetch.url.len() > MAX_URL_BYTES {
            let m = format!(
                "URL is {} bytes long; at most {MAX_URL_BYTES} are accepted",
                fetch.url.len()
            );
            return Err((FetchErrorKind::InvalidUrl, m));
        }
        if !fetch.url.is_ascii() && fetch.url.contains('\u{FFFD}') {
            // A replacement character is what a lossy decode of non-UTF-8 input leaves.
            let m = "URL contains bytes that are not valid UTF-8".to_string();
            return Err((FetchErrorKind::InvalidUrl, m));
        }
        let parsed =
            parse_url(&fetch.url, &self.queues).map_err(|m| (FetchErrorKind::InvalidUrl, m))?;
        if self.shutting_down {
            return Err((FetchErrorKind::Shutdown, "crawler is shutting down".into()));
        }
        Ok(parsed)
    }

    /// The queue's slots: `CrawlerHandle::fetch` takes one before it hands a fetch in.
    pub(crate) fn queue_slots(&self) -> Arc<Semaphore> {
        Arc::clone(self.queues.slots())
    }
}

impl Handler<Fetch> for SchedulerActor {
    type Result = Admission;

    fn handle(&mut self, fetch: Fetch, _ctx: &mut Self::Context) -> Self::Result {
        Admission {
            ingress: Rc::clone(&self.ingress),
            robots: self.robots.clone(),
            fetch,
        }
    }
}

/// How a `Fetch` is answered: on a task of its own, robots.txt asked first as a polite
/// `CrawlerHandle::fetch` asks it (`[crawl] robots`), by the same way in as
/// `CrawlerHandle::fetch` ([`Ingress::fetch`]): the direct path when the fetch may go now,
/// else the queue through the intake channel, with backpressure. One way in means one
/// admission, one queue and one settle for every fetch, whoever sends it.
///
/// Why a task per message and not long-lived workers (as the exits use): `bench_raw`
/// measured a task per message faster on the wall clock on a 2-core machine, although
/// workers ran fewer instructions.
pub struct Admission {
    ingress: Rc<Ingress>,
    robots: Option<Arc<RobotsGate>>,
    fetch: Fetch,
}

impl MessageResponse<SchedulerActor, Fetch> for Admission {
    fn handle(self, _ctx: &mut Context<SchedulerActor>, tx: Option<oneshot::Sender<Reply>>) {
        let Self {
            ingress,
            robots,
            fetch,
        } = self;
        // Boxed: tokio copies a task's future whole when it is spawned and again at each
        // change of its stage (running, finished), and a fetch's future is nearly 2 KB; a
        // boxed one is a pointer (`bench_raw --via addr`: about 900 instructions less per
        // fetch under callgrind). A future of its own for each way, not one that picks its
        // way as it runs: that one would be as large as the robots.txt way's, which holds
        // the other way's future and more, and a fetch that does not ask robots.txt would
        // allocate and write all of it.
        match robots {
            Some(gate) => actix_rt::spawn(Box::pin(async move {
                let work = std::pin::pin!(gate.obey(fetch, |f| ingress.fetch(f)));
                reply(work, tx).await;
            })),
            None => actix_rt::spawn(Box::pin(async move {
                let work = std::pin::pin!(ingress.fetch(fetch));
                reply(work, tx).await;
            })),
        };
    }
}

/// Run `work` and send its reply through `tx`, unless the sender stops waiting first.
async fn reply<W: Future<Output = Reply>>(
    mut work: std::pin::Pin<&mut W>,
    tx: Option<oneshot::Sender<Reply>>,
) {
    let Some(mut tx) = tx else {
        // `do_send`: nobody waits for the reply, but the sender wants the fetch.
        let _ = work.await;
        return;
    };
    // A sender that stops waiting (`Request::timeout`, the request dropped) withdraws the
    // fetch as a dropped `CrawlerHandle::fetch` does: dropping the way in's future gives
    // back its slot, and a fetch still queued is not sent.
    let answered = std::future::poll_fn(|cx| {
        if let Poll::Ready(r) = work.as_mut().poll(cx) {
            return Poll::Ready(Some(r));
        }
        tx.poll_closed(cx).map(|()| None)
    })
    .await;
    if let Some(r) = answered {
        let _ = tx.send(r);
    }
}

impl Scheduler {
    pub(super) fn enqueue(&mut self, m: Enqueue, ctx: &mut Context<SchedulerActor>) {
        let p = Pending {
            fetch: m.fetch,
            uri: Some(m.uri),
            host: m.host.clone(),
            reply: m.reply,
            done: self.metrics.urls_done.clone(),
            slot: m.slot,
            attempts: 0,
            throttled: 0,
            awaits_budget: false,
            excluded: Default::default(),
            arrived: m.arrived,
            local_failure: None,
            local: None,
            local_passes: false,
            waited: false,
            backlog: 0,
            last_exit: None,
            last_exit_name: None,
            avoid: None,
            span: None,
        };
        if self.shutting_down {
            p.fail(
                FetchErrorKind::Shutdown,
                "crawler is shutting down",
                &self.exits,
            );
            return;
        }
        self.queues.push(p);
        self.dispatch(ctx);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_outside_1_to_65535_is_refused_never_replaced() {
        let hosts = Queues::new(1, Default::default());
        for url in [
            "http://127.0.0.1:70000/page/1",
            "http://127.0.0.1:0/",
            "http://[::1]:65536/",
            "http://user:pw@example.com:99999/",
        ] {
            let err = parse_url(url, &hosts).expect_err(url);
            assert!(
                err.contains("is not a port (expected 1..=65535)"),
                "{url}: {err}"
            );
        }
        for url in [
            "http://127.0.0.1:65535/",
            "http://127.0.0.1:1/",
            "http://example.com:/",
            "http://[::1]/",
            "http://user:pw@[::1]:8080/",
        ] {
            assert!(parse_url(url, &hosts).is_ok(), "{url}");
        }
    }
}
