//! A client that is replaced by a fresh one after it has served a number of hosts.
//!
//! Why: awc's connection pool closes an idle connection only when a request to the same
//! authority looks at it again, and has no timer that reaps the others; its `limit` counts
//! connections in use, not idle ones (awc 3.11, `client/pool.rs`; upstream
//! actix/actix-web#1460). A broad crawl goes to most hosts a few times and never again,
//! so each exit would keep a socket to every host it has been to — in `CLOSE_WAIT` once
//! the site hangs up — until the process runs out of file descriptors. Dropping the client
//! is the one way awc offers to close them: the pool closes its idle connections when the
//! last thing holding it goes, and a request in flight holds it, so renewing never cuts a
//! request short. Each renewal costs the hosts in use one new connection each.

use foldhash::HashSet;

/// An awc client, built when first asked for and again once it has been asked for
/// more than `hosts` different authorities.
pub struct Renewing {
    client: Option<awc::Client>,
    seen: HashSet<Box<str>>,
    hosts: usize,
}

impl Renewing {
    /// Renew after `hosts` authorities (at least one).
    pub fn new(hosts: usize) -> Self {
        Self {
            client: None,
            seen: HashSet::default(),
            hosts: hosts.max(1),
        }
    }

    /// The client for a request to `authority`: the current one, or — when it has already
    /// served `hosts` others, or there is none yet — a fresh one from `build`.
    pub fn get(&mut self, authority: &str, build: impl FnOnce() -> awc::Client) -> awc::Client {
        if !self.seen.contains(authority) {
            if self.seen.len() >= self.hosts {
                self.client = None;
                self.seen.clear();
            }
            self.seen.insert(authority.into());
        }
        self.client.get_or_insert_with(build).clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Which requests built a client, for `hosts = 2`.
    #[test]
    fn a_client_is_renewed_at_the_first_authority_past_its_share() {
        let mut pool = Renewing::new(2);
        let mut built = Vec::new();
        for (i, authority) in [
            "a:80", "b:80", "a:80", "b:80", "c:80", "c:80", "a:80", "d:80",
        ]
        .into_iter()
        .enumerate()
        {
            pool.get(authority, || {
                built.push(i);
                awc::Client::default()
            });
        }
        // The first; then c, the third host; then d, the third since (c, a).
        assert_eq!(built, [0, 4, 7]);
    }
}
