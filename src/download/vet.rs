//! Which addresses a download may connect to: the public internet only.
//!
//! IPv4 is refused in every special-purpose block of the IANA registry: "this network" and
//! unspecified (0/8), private (10/8, 172.16/12, 192.168/16), CGNAT (100.64/10), loopback
//! (127/8), link-local (169.254/16), IETF protocol assignments (192.0.0/24), documentation
//! (192.0.2/24, 198.51.100/24, 203.0.113/24), 6to4 relay (192.88.99/24), benchmarking
//! (198.18/15), multicast (224/4), reserved (240/4) and broadcast.
//!
//! IPv6 is allowed only inside global unicast (2000::/3), and there not in the IETF
//! special-purpose block (2001::/23, Teredo included), documentation (2001:db8::/32,
//! 3fff::/20) or 6to4 (2002::/16, which would reach an embedded IPv4). Addresses that carry an
//! IPv4 address (IPv4-mapped ::ffff:0:0/96, IPv4-compatible ::/96, NAT64 64:ff9b::/96) are
//! judged by that IPv4 address; everything else outside 2000::/3 (loopback, unspecified,
//! unique-local fc00::/7, link-local fe80::/10, site-local fec0::/10, multicast ff00::/8,
//! local NAT64 64:ff9b:1::/48, discard 100::/64) is refused.
//!
//! Numeric hosts in the odd notations the OS accepts (`2130706433`, `0x7f.1`, `0177.0.0.1`)
//! are read as the OS reads them by the URL parser before they get here.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Why an address is refused, or `None` when it is public.
pub fn refusal(address: IpAddr) -> Option<&'static str> {
    match address {
        IpAddr::V4(v4) => refusal_v4(v4),
        IpAddr::V6(v6) => refusal_v6(v6),
    }
}

fn in_v4(address: Ipv4Addr, network: [u8; 4], prefix: u32) -> bool {
    let mask = if prefix == 0 {
        0
    } else {
        u32::MAX << (32 - prefix)
    };
    u32::from(address) & mask == u32::from(Ipv4Addr::from(network)) & mask
}

fn refusal_v4(address: Ipv4Addr) -> Option<&'static str> {
    const BLOCKS: &[([u8; 4], u32, &str)] = &[
        ([0, 0, 0, 0], 8, "an unspecified or 'this network' address"),
        ([10, 0, 0, 0], 8, "a private address"),
        ([100, 64, 0, 0], 10, "a carrier-grade NAT address"),
        ([127, 0, 0, 0], 8, "a loopback address"),
        ([169, 254, 0, 0], 16, "a link-local address"),
        ([172, 16, 0, 0], 12, "a private address"),
        ([192, 0, 0, 0], 24, "a reserved (IETF) address"),
        ([192, 0, 2, 0], 24, "a documentation address"),
        ([192, 88, 99, 0], 24, "a reserved (6to4 relay) address"),
        ([192, 168, 0, 0], 16, "a private address"),
        ([198, 18, 0, 0], 15, "a reserved (benchmarking) address"),
        ([198, 51, 100, 0], 24, "a documentation address"),
        ([203, 0, 113, 0], 24, "a documentation address"),
        ([224, 0, 0, 0], 4, "a multicast address"),
        ([240, 0, 0, 0], 4, "a reserved address"),
    ];
    if address == Ipv4Addr::BROADCAST {
        return Some("the broadcast address");
    }
    BLOCKS
        .iter()
        .find(|(network, prefix, _)| in_v4(address, *network, *prefix))
        .map(|(_, _, why)| *why)
}

fn in_v6(address: Ipv6Addr, network: [u16; 8], prefix: u32) -> bool {
    let mask = if prefix == 0 {
        0
    } else {
        u128::MAX << (128 - prefix)
    };
    u128::from(address) & mask == u128::from(Ipv6Addr::from(network)) & mask
}

/// The IPv4 address inside the last 32 bits.
fn embedded_v4(address: Ipv6Addr) -> Ipv4Addr {
    Ipv4Addr::from((u128::from(address) & 0xFFFF_FFFF) as u32)
}

fn refusal_v6(address: Ipv6Addr) -> Option<&'static str> {
    if address.is_unspecified() {
        return Some("the unspecified address");
    }
    if address.is_loopback() {
        return Some("a loopback address");
    }
    // Forms that carry an IPv4 address are as good as that address.
    if in_v6(address, [0, 0, 0, 0, 0, 0xFFFF, 0, 0], 96)
        || in_v6(address, [0, 0, 0, 0, 0, 0, 0, 0], 96)
        || in_v6(address, [0x64, 0xff9b, 0, 0, 0, 0, 0, 0], 96)
    {
        return refusal_v4(embedded_v4(address)).or(None);
    }
    if !in_v6(address, [0x2000, 0, 0, 0, 0, 0, 0, 0], 3) {
        return Some(match address.segments()[0] {
            0xfc00..=0xfdff => "a unique-local address",
            0xfe80..=0xfebf => "a link-local address",
            0xfec0..=0xfeff => "a site-local address",
            0xff00..=0xffff => "a multicast address",
            _ => "a reserved address",
        });
    }
    if in_v6(address, [0x2001, 0x0db8, 0, 0, 0, 0, 0, 0], 32)
        || in_v6(address, [0x3fff, 0, 0, 0, 0, 0, 0, 0], 20)
    {
        return Some("a documentation address");
    }
    if in_v6(address, [0x2001, 0, 0, 0, 0, 0, 0, 0], 23) {
        return Some("a reserved (IETF special-purpose) address");
    }
    if in_v6(address, [0x2002, 0, 0, 0, 0, 0, 0, 0], 16) {
        return Some("a 6to4 address");
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn refused(text: &str) -> bool {
        refusal(text.parse().unwrap()).is_some()
    }

    #[test]
    fn ipv4() {
        for text in [
            "0.0.0.0",
            "0.1.2.3",
            "10.0.0.1",
            "100.64.0.1",
            "100.127.255.254",
            "127.0.0.1",
            "127.255.0.9",
            "169.254.169.254",
            "172.16.0.1",
            "172.31.255.255",
            "192.0.0.8",
            "192.0.2.1",
            "192.88.99.1",
            "192.168.1.1",
            "198.18.0.1",
            "198.19.255.255",
            "198.51.100.7",
            "203.0.113.9",
            "224.0.0.1",
            "239.255.255.250",
            "240.0.0.1",
            "255.255.255.255",
        ] {
            assert!(refused(text), "{text} should be refused");
        }
        for text in [
            "1.1.1.1",
            "8.8.8.8",
            "100.63.255.255",
            "100.128.0.1",
            "172.15.255.255",
            "172.32.0.1",
            "192.0.1.1",
            "198.20.0.1",
            "223.255.255.255",
        ] {
            assert!(!refused(text), "{text} is public");
        }
    }

    #[test]
    fn ipv6() {
        for text in [
            "::",
            "::1",
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "fec0::1",
            "ff02::1",
            "2001:db8::1",
            "3fff::1",
            "2001::1",
            "2001:2::1",
            "2002:7f00:1::",
            "100::1",
            "64:ff9b:1::1",
            // IPv4-mapped, IPv4-compatible and NAT64 forms of refused IPv4 addresses.
            "::ffff:127.0.0.1",
            "::ffff:10.1.2.3",
            "::127.0.0.1",
            "64:ff9b::192.168.0.1",
            "64:ff9b::a9fe:a9fe",
        ] {
            assert!(refused(text), "{text} should be refused");
        }
        for text in [
            "2606:4700:4700::1111",
            "2a00:1450:4001:80b::200e",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
        ] {
            assert!(!refused(text), "{text} is public");
        }
    }

    #[test]
    fn odd_numeric_hosts_read_as_the_os_reads_them() {
        for url in [
            "http://2130706433/x",
            "http://0x7f.1/",
            "http://0177.0.0.1/",
            "http://127.1/",
            "http://0x7f000001/",
            "http://[::ffff:7f00:1]/",
        ] {
            let parsed = url::Url::parse(url).unwrap();
            let address: IpAddr = match parsed.host().unwrap() {
                url::Host::Ipv4(v4) => v4.into(),
                url::Host::Ipv6(v6) => v6.into(),
                url::Host::Domain(domain) => panic!("{url} read as a domain {domain}"),
            };
            assert!(refusal(address).is_some(), "{url} -> {address}");
        }
    }

    proptest! {
        #[test]
        fn mapped_forms_agree_with_ipv4(bits in any::<u32>()) {
            let v4 = Ipv4Addr::from(bits);
            prop_assert_eq!(refusal(IpAddr::V6(v4.to_ipv6_mapped())).is_some(), refusal(IpAddr::V4(v4)).is_some());
            let nat64 = Ipv6Addr::from((u128::from(Ipv6Addr::from([0x64, 0xff9b, 0, 0, 0, 0, 0, 0]))) | u128::from(bits));
            prop_assert_eq!(refusal(IpAddr::V6(nat64)).is_some(), refusal(IpAddr::V4(v4)).is_some());
        }
    }
}
