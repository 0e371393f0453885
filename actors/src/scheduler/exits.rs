//! The exits as the scheduler starts them: one [`ExitSlot`] per `[[exits]]` entry, its
//! actor started on the scheduler's Arbiter or one of its own (`crawler.arbiters`), its
//! client and request settings drawn from `[crawler]`, `[limiter]` and `[crawl]`.

use std::rc::Rc;
use std::sync::Arc;

use actix::prelude::*;
use exitcrawl::config::{Arbiters, ExitSettings, Settings};

use super::ExitSlot;
use crate::exit::{ExitActor, ExitCore, ExitOptions, ExitShare};
use crate::metrics::Metrics;
use crate::net::{ClientOptions, DnsCache};

/// Start every exit's actor (on the current Arbiter or one of its own, per
/// `crawler.arbiters`) and register its metrics: the scheduler's slots, in configuration
/// order, and the Arbiters started.
pub(crate) fn start_exits(settings: &Settings, metrics: &Metrics) -> (Vec<ExitSlot>, Vec<Arbiter>) {
    let dns = DnsCache::new(settings.crawler.dns_ttl());
    let mut arbiters = Vec::new();
    let mut slots = Vec::new();
    for e in &settings.exits {
        let opts = exit_options(settings, e);
        let dns = dns.clone();
        metrics.register_exit(&e.name, e.source_ip, e.max_concurrent, e.enabled);
        // The scheduler refills the exit's bucket on the runtime's clock: start it on it.
        let now = crate::clock::now();
        let active = metrics
            .exit_active
            .get_or_create(&Metrics::exit(&e.name, e.source_ip))
            .clone();
        let share = ExitShare::new(active, e.quota(), now);
        let (addr, local) = match settings.crawler.arbiters {
            Arbiters::Single => {
                // Same Arbiter as the scheduler: it starts requests on the core itself.
                let core = ExitCore::new(opts, dns.clone(), share.clone());
                let addr = ExitActor::with_core(Rc::clone(&core), dns).start();
                (addr, Some(core))
            }
            Arbiters::PerExit => {
                // The awc client is !Send: it is built on the exit's own thread.
                let arbiter = Arbiter::new();
                let share = share.clone();
                let addr = ExitActor::start_in_arbiter(&arbiter.handle(), move |_| {
                    ExitActor::new(opts, dns, share)
                });
                arbiters.push(arbiter);
                (addr, None)
            }
        };
        slots.push(ExitSlot {
            name: Arc::from(e.name.as_str()),
            source_ip: e.source_ip,
            family: (e.proxy.is_none() && !e.unbound())
                .then(|| exitcrawl::select::Family::of(e.source_ip)),
            region: e.region.clone(),
            enabled: e.enabled,
            healthy: true,
            health_error: None,
            addr,
            local,
            max_concurrent: e.max_concurrent,
            share,
            report_next: false,
            answer_reported: None,
            returns: 0,
        });
    }
    (slots, arbiters)
}

/// One exit's client and request settings, from `[crawler]`, `[limiter]` and `[crawl]`.
fn exit_options(settings: &Settings, e: &ExitSettings) -> ExitOptions {
    let c = &settings.crawler;
    let client = ClientOptions {
        source_ip: e.source_ip,
        // Validated with the settings: a bad URL never gets this far.
        proxy: e.proxy_url().and_then(Result::ok),
        max_concurrent: e.max_concurrent as usize,
        per_host_connections: c.per_host_connections as usize,
        connect_timeout: c.connect_timeout(),
        timeout: c.timeout(),
        keep_alive: c.keep_alive(),
        pool_hosts: c.pool_hosts as usize,
        max_redirects: c.max_redirects as usize,
        user_agent: c.user_agent.clone(),
        dns_ttl: c.dns_ttl(),
    };
    ExitOptions {
        client,
        max_body_bytes: usize::try_from(c.max_body_bytes).unwrap_or(usize::MAX),
        throttle_statuses: settings.limiter.throttle_statuses.clone(),
        headers: c
            .headers
            .iter()
            .map(|(n, v)| (n.clone(), v.clone()))
            .collect(),
        cookies: c.cookies,
        addresses: settings.crawl.address_rule(),
    }
}
