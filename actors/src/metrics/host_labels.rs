//! The `host` label of the metrics: a host's own name for the first `[metrics]
//! host_labels` hosts the crawl meets, `other` beyond them, `all` when none are named.

use super::Metrics;

impl Metrics {
    /// The label for `host`: itself while under the cap, `other` beyond, `all` when off.
    pub(crate) fn host_label(&self, host: &str) -> String {
        self.host_label_of(host).0
    }

    /// The label for `host` (see [`Self::host_label`]), and whether it is the host's own:
    /// not `all` or `other`, which other hosts share. Counters fold into a shared label
    /// (they add up); a gauge of one host's state is exported only under the host's own,
    /// since folded, whichever host changed last would pass for all of them.
    pub(crate) fn host_label_of(&self, host: &str) -> (String, bool) {
        if self.host_cap == 0 {
            return ("all".into(), false);
        }
        let Ok(mut seen) = self.hosts.lock() else {
            return ("other".into(), false);
        };
        if seen.contains(host) {
            return (host.to_owned(), true);
        }
        if seen.len() < self.host_cap {
            seen.insert(host.to_owned());
            return (host.to_owned(), true);
        }
        ("other".into(), false)
    }

    /// The label `host` has now (see [`Self::host_label_of`]), without taking one of the
    /// named slots for it: for a host this process has not sent to, such as one whose
    /// pause another process of the fleet heard, which must not crowd out the hosts this
    /// crawl meets.
    pub(crate) fn host_label_now(&self, host: &str) -> (String, bool) {
        if self.host_cap == 0 {
            return ("all".into(), false);
        }
        match self.hosts.lock() {
            Ok(seen) if seen.contains(host) => (host.to_owned(), true),
            _ => ("other".into(), false),
        }
    }
}
