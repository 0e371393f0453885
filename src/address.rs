//! Which addresses a crawl must not be led to: loopback, private, link-local, unspecified.
//!
//! Why: a page on the public web can link or redirect to `http://169.254.169.254/`
//! (cloud metadata), `127.0.0.1` or `10.x` — and a crawler that keeps pages would save
//! whatever those answer. URLs the user gives are trusted; links found in pages and
//! redirects are not: one that leads from a public address to a private one is refused
//! (`[crawl] allow_private = true` lifts the rule). The check runs on the *resolved*
//! address at connect time (the exit's connector), so DNS rebinding cannot slip past;
//! this module only says what counts as private — and which addresses no TCP connection
//! can be made to at all ([`unconnectable_kind`]).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

/// What kind of non-public address `ip` is, or `None` for a public one.
///
/// - IPv4: loopback `127.0.0.0/8`, private (RFC 1918) `10.0.0.0/8`, `172.16.0.0/12`,
///   `192.168.0.0/16`, link-local `169.254.0.0/16`, unspecified / "this network"
///   `0.0.0.0/8` (Linux connects `0.0.0.0` to the host itself), shared address space
///   (carrier-grade NAT, RFC 6598) `100.64.0.0/10`;
/// - IPv6: loopback `::1`, unspecified `::`, unique local (ULA) `fc00::/7`, link-local
///   `fe80::/10`, the deprecated site-local `fec0::/10`; an IPv4 address carried in IPv6
///   (IPv4-mapped `::ffff:a.b.c.d`, IPv4-compatible `::a.b.c.d`, NAT64 `64:ff9b::/96`) is
///   judged as that IPv4 address.
pub fn private_kind(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => v4_kind(v4),
        IpAddr::V6(v6) => v6_kind(v6),
    }
}

/// Whether `ip` is loopback, private, link-local or unspecified (see [`private_kind`]).
pub fn is_private(ip: IpAddr) -> bool {
    private_kind(ip).is_some()
}

fn v4_kind(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, ..] = ip.octets();
    if ip.is_loopback() {
        Some("loopback")
    } else if ip.is_private() {
        Some("private")
    } else if ip.is_link_local() {
        Some("link-local")
    } else if a == 0 {
        Some("unspecified")
    } else if a == 100 && (64..128).contains(&ip.octets()[1]) {
        // Shared address space (RFC 6598): no public site is there, and a cloud's
        // metadata service can be (Alibaba Cloud's at 100.100.100.200).
        Some("shared")
    } else {
        None
    }
}

fn v6_kind(ip: Ipv6Addr) -> Option<&'static str> {
    if ip.is_loopback() {
        return Some("loopback");
    }
    if ip.is_unspecified() {
        return Some("unspecified");
    }
    let s = ip.segments();
    if let Some(v4) = embedded_v4(ip) {
        return v4_kind(v4);
    }
    match s[0] & 0xfe00 {
        0xfc00 => return Some("private"),
        _ if s[0] & 0xffc0 == 0xfe80 => return Some("link-local"),
        _ if s[0] & 0xffc0 == 0xfec0 => return Some("private"),
        _ => {}
    }
    None
}

/// The IPv4 address an IPv6 address carries: IPv4-mapped (`::ffff:0:0/96`),
/// IPv4-compatible (`::/96`, but `::` and `::1`, handled before) or NAT64 (`64:ff9b::/96`).
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let low = Ipv4Addr::from(((u32::from(s[6])) << 16) | u32::from(s[7]));
    let mapped = s[..5] == [0; 5] && s[5] == 0xffff;
    let compatible = s[..6] == [0; 6];
    let nat64 = s[..6] == [0x64, 0xff9b, 0, 0, 0, 0];
    (mapped || compatible || nat64).then_some(low)
}

/// The private-address rule of one crawl: whether it holds (`[crawl] allow_private`
/// lifts it) and what counts as private.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AddressRule {
    allow_private: bool,
    /// Tests only: exactly these addresses count as private, every other one as public.
    only: Option<Arc<[IpAddr]>>,
}

impl AddressRule {
    /// The rule as configured: `allow_private = true` lifts it.
    pub fn new(allow_private: bool) -> Self {
        Self {
            allow_private,
            only: None,
        }
    }

    /// For tests on loopback, which cannot reach a real private network: exactly `ips`
    /// count as private and every other address as public (so a site on `127.0.0.1` is
    /// "public" and one on `127.0.0.9` "private"). Not a configuration key.
    #[doc(hidden)]
    pub fn with_private_only(mut self, ips: &[IpAddr]) -> Self {
        self.only = Some(ips.iter().map(|ip| unmapped(*ip)).collect());
        self
    }

    /// Whether private targets are ever refused (`false` with `allow_private`).
    pub fn enforced(&self) -> bool {
        !self.allow_private
    }

    /// What kind of non-public address `ip` is under this rule, or `None` when public.
    pub fn private_kind(&self, ip: IpAddr) -> Option<&'static str> {
        match &self.only {
            Some(only) => only.contains(&unmapped(ip)).then_some("private (test)"),
            None => private_kind(ip),
        }
    }

    /// Whether `ip` counts as private under this rule.
    pub fn is_private(&self, ip: IpAddr) -> bool {
        self.private_kind(ip).is_some()
    }
}

/// An IPv4-mapped IPv6 address (`::ffff:a.b.c.d`) as the IPv4 address it is; any other
/// address as it is. A socket of the exit's family connects to the IPv4 address, never to
/// its mapped form (an IPv6 socket bound to an IPv6 source refuses a mapped target).
pub fn unmapped(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// What kind of address `ip` is when no TCP connection can be made to it, or `None` for
/// a unicast address: IPv4 multicast `224.0.0.0/4`, the limited broadcast
/// `255.255.255.255`, the reserved `240.0.0.0/4`; IPv6 multicast `ff00::/8`. Linux refuses
/// a connect to any of them at once (`ENETUNREACH` or `EINVAL`), from every source; a
/// host that resolves to them is the site's doing. A subnet's broadcast address is one
/// too, but only the host's routes say which address that is.
pub fn unconnectable_kind(ip: IpAddr) -> Option<&'static str> {
    match unmapped(ip) {
        IpAddr::V4(v4) if v4.is_broadcast() => Some("broadcast"),
        IpAddr::V4(v4) if v4.is_multicast() => Some("multicast"),
        IpAddr::V4(v4) if v4.octets()[0] >= 240 => Some("reserved"),
        IpAddr::V6(v6) if v6.is_multicast() => Some("multicast"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(s: &str) -> Option<&'static str> {
        private_kind(s.parse().unwrap())
    }

    #[test]
    fn ipv4_ranges() {
        for (ip, k) in [
            ("127.0.0.1", "loopback"),
            ("127.255.255.254", "loopback"),
            ("10.0.0.1", "private"),
            ("172.16.0.1", "private"),
            ("172.31.255.255", "private"),
            ("192.168.1.1", "private"),
            ("169.254.169.254", "link-local"),
            ("0.0.0.0", "unspecified"),
            ("0.1.2.3", "unspecified"),
            ("100.64.0.1", "shared"),
            ("100.100.100.200", "shared"),
            ("100.127.255.255", "shared"),
        ] {
            assert_eq!(kind(ip), Some(k), "{ip}");
        }
        for ip in [
            "8.8.8.8",
            "172.15.255.255",
            "172.32.0.0",
            "192.169.0.1",
            "169.253.0.1",
            "100.63.255.255",
            "100.128.0.0",
            "1.0.0.0",
        ] {
            assert_eq!(kind(ip), None, "{ip}");
        }
    }

    #[test]
    fn ipv6_ranges_and_embedded_ipv4() {
        for (ip, k) in [
            ("::1", "loopback"),
            ("::", "unspecified"),
            ("fc00::1", "private"),
            ("fd12:3456::1", "private"),
            ("fe80::1", "link-local"),
            ("febf::1", "link-local"),
            ("fec0::1", "private"),
            ("::ffff:127.0.0.1", "loopback"),
            ("::ffff:10.1.2.3", "private"),
            ("::ffff:169.254.169.254", "link-local"),
            ("::ffff:0.0.0.0", "unspecified"),
            ("::10.0.0.1", "private"),
            ("64:ff9b::a9fe:a9fe", "link-local"),
        ] {
            assert_eq!(kind(ip), Some(k), "{ip}");
        }
        for ip in [
            "2001:db8::1",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
            "fe00::1",
        ] {
            assert_eq!(kind(ip), None, "{ip}");
        }
    }

    #[test]
    fn unconnectable_addresses_and_mapped_ones() {
        let kind = |s: &str| unconnectable_kind(s.parse().unwrap());
        for (ip, k) in [
            ("224.0.0.1", "multicast"),
            ("239.255.255.250", "multicast"),
            ("255.255.255.255", "broadcast"),
            ("240.0.0.1", "reserved"),
            ("ff02::1", "multicast"),
            ("ff05::2", "multicast"),
            ("::ffff:224.0.0.1", "multicast"),
        ] {
            assert_eq!(kind(ip), Some(k), "{ip}");
        }
        for ip in [
            "127.0.0.1",
            "223.255.255.255",
            "8.8.8.8",
            "0.0.0.0",
            "::1",
            "fe80::1",
            "2001:db8::1",
            "::ffff:127.0.0.1",
        ] {
            assert_eq!(kind(ip), None, "{ip}");
        }
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert_eq!(unmapped(ip("::ffff:127.0.0.1")), ip("127.0.0.1"));
        assert_eq!(unmapped(ip("::1")), ip("::1"));
        assert_eq!(unmapped(ip("64:ff9b::a9fe:a9fe")), ip("64:ff9b::a9fe:a9fe"));
        assert_eq!(unmapped(ip("10.0.0.1")), ip("10.0.0.1"));
    }

    #[test]
    fn the_rule_and_its_test_override() {
        let rule = AddressRule::new(false);
        assert!(rule.enforced());
        assert!(rule.is_private("127.0.0.1".parse().unwrap()));
        assert!(!AddressRule::new(true).enforced());
        let nine: IpAddr = "127.0.0.9".parse().unwrap();
        let t = AddressRule::new(false).with_private_only(&[nine]);
        assert!(t.is_private(nine));
        assert!(t.is_private("::ffff:127.0.0.9".parse().unwrap()));
        assert!(!t.is_private("127.0.0.1".parse().unwrap()));
        assert!(!t.is_private("10.0.0.1".parse().unwrap()));
    }
}
