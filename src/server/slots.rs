//! A shard's connection slots: who is connected, from where, and who is idle.
//!
//! One slot per open connection (and one for the accept loop). A connection waiting between
//! requests registers its waker here, so a stop can close it at once; it is then *idle*. The
//! slots also count connections per peer address, so that one client cannot take a shard's
//! every connection (`server.connections_per_address_max`), and at the shard's cap the accept
//! loop closes an idle connection of an address that holds more connections than the new
//! client's (the one that holds most) rather than refuse the new client. A client that fills
//! the shard by itself gets 503: eviction protects the others from it, not it from itself.
//! A client is its IPv4 address, or its IPv6 address's /64 (`server.ipv6_client_prefix_bits`,
//! [`client_of`]).

use crate::hash::FastMap;
use std::cell::{Cell, RefCell};
use std::net::IpAddr;
use std::task::{Context, Poll, Waker};

/// The address a peer's connections are counted under: an IPv4 address (an IPv4-mapped IPv6
/// one too), or the first `prefix_bits` (1 to 128; `server.ipv6_client_prefix_bits`, 64 by
/// default: one network's usual allocation, within which a client may take a new address for
/// every connection) of an IPv6 address.
pub fn client_of(ip: IpAddr, prefix_bits: u8) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let host_bits = 128 - u32::from(prefix_bits.clamp(1, 128));
                let mask = u128::MAX.checked_shl(host_bits).unwrap_or(0);
                IpAddr::V6(std::net::Ipv6Addr::from(u128::from(v6) & mask))
            }
        },
    }
}

#[derive(Default)]
struct Slot {
    waker: Option<Waker>,
    peer: Option<IpAddr>,
    /// When it began to wait between requests, as the shard's count of such waits (`None`:
    /// in a request). An order, not a time, so that going idle reads no clock: the smaller,
    /// the longer idle.
    idle_since: Option<u64>,
    /// Chosen to close, to make room for a new connection.
    evicted: bool,
}

#[derive(Default)]
pub struct ConnSlots {
    pub stopping: Cell<bool>,
    slots: RefCell<Vec<Slot>>,
    free: RefCell<Vec<usize>>,
    pub open: Cell<usize>,
    per_address: RefCell<FastMap<IpAddr, usize>>,
    /// Waits between requests begun so far (what [`Slot::idle_since`] counts in).
    idle_waits: Cell<u64>,
}

impl ConnSlots {
    /// A slot for a new connection from `peer` (`None` for the accept loop).
    pub fn acquire(&self, peer: Option<IpAddr>) -> usize {
        self.open.set(self.open.get() + 1);
        if let Some(ip) = peer {
            *self.per_address.borrow_mut().entry(ip).or_default() += 1;
        }
        let fresh = Slot {
            peer,
            ..Slot::default()
        };
        let mut slots = self.slots.borrow_mut();
        match self.free.borrow_mut().pop() {
            Some(slot) => {
                slots[slot] = fresh;
                slot
            }
            None => {
                slots.push(fresh);
                slots.len() - 1
            }
        }
    }

    pub fn release(&self, slot: usize) {
        self.open.set(self.open.get() - 1);
        let peer = std::mem::take(&mut self.slots.borrow_mut()[slot]).peer;
        if let Some(ip) = peer {
            let mut per_address = self.per_address.borrow_mut();
            if let Some(count) = per_address.get_mut(&ip) {
                *count -= 1;
                if *count == 0 {
                    per_address.remove(&ip);
                }
            }
        }
        self.free.borrow_mut().push(slot);
    }

    /// Connections open from `ip`.
    /// The client a connection's slot was taken for (`None` for the accept loop's, or a peer
    /// whose address could not be read).
    pub fn peer_of(&self, slot: usize) -> Option<IpAddr> {
        self.slots.borrow().get(slot).and_then(|entry| entry.peer)
    }

    pub fn count_of(&self, ip: IpAddr) -> usize {
        self.per_address.borrow().get(&ip).copied().unwrap_or(0)
    }

    /// Ready once the server stops or the connection was chosen to close; otherwise the
    /// connection is idle from now until [`ConnSlots::busy`].
    pub fn poll(&self, slot: usize, cx: &mut Context<'_>) -> Poll<()> {
        let mut slots = self.slots.borrow_mut();
        let entry = &mut slots[slot];
        if self.stopping.get() || entry.evicted {
            return Poll::Ready(());
        }
        match &mut entry.waker {
            Some(waker) if waker.will_wake(cx.waker()) => {}
            waker => *waker = Some(cx.waker().clone()),
        }
        if entry.idle_since.is_none() {
            let wait = self.idle_waits.get() + 1;
            self.idle_waits.set(wait);
            entry.idle_since = Some(wait);
        }
        Poll::Pending
    }

    /// The connection in `slot` has a request in progress.
    pub fn busy(&self, slot: usize) {
        if let Some(entry) = self.slots.borrow_mut().get_mut(slot) {
            entry.idle_since = None;
        }
    }

    /// Closes one idle connection to make room for a connection from `newcomer`: of an address
    /// holding more connections than the newcomer's (the one holding most), the connection idle
    /// longest. `false` when there is none.
    pub fn evict_idle(&self, newcomer: Option<IpAddr>) -> bool {
        let per_address = self.per_address.borrow();
        let newcomer_holds = newcomer
            .and_then(|ip| per_address.get(&ip).copied())
            .unwrap_or(0);
        let mut slots = self.slots.borrow_mut();
        let chosen = slots
            .iter()
            .enumerate()
            .filter(|(_, slot)| !slot.evicted && slot.waker.is_some())
            .filter_map(|(at, slot)| {
                let since = slot.idle_since?;
                let held = slot.peer.and_then(|ip| per_address.get(&ip).copied())?;
                (held > newcomer_holds).then_some((at, held, since))
            })
            .max_by(|a, b| a.1.cmp(&b.1).then(b.2.cmp(&a.2)))
            .map(|(at, _, _)| at);
        let Some(at) = chosen else {
            return false;
        };
        let slot = &mut slots[at];
        slot.evicted = true;
        if let Some(waker) = slot.waker.take() {
            waker.wake();
        }
        true
    }

    pub fn stop(&self) {
        self.stopping.set(true);
        for waker in self
            .slots
            .borrow_mut()
            .iter_mut()
            .filter_map(|slot| slot.waker.take())
        {
            waker.wake();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::Waker;

    #[test]
    fn a_client_is_an_ipv4_address_or_an_ipv6_slash_64() {
        let client = |text: &str| client_of(text.parse().unwrap(), 64).to_string();
        assert_eq!(client("192.0.2.7"), "192.0.2.7");
        assert_eq!(client("::ffff:192.0.2.7"), "192.0.2.7");
        assert_eq!(client("2001:db8:1:2:aaaa:bbbb:cccc:dddd"), "2001:db8:1:2::");
        assert_eq!(client("2001:db8:1:2::1"), client("2001:db8:1:2:ffff::9"));
        assert_ne!(client("2001:db8:1:2::1"), client("2001:db8:1:3::1"));
        assert_eq!(client("::1"), "::");
        // Each address alone, or a wider prefix.
        let address = "2001:db8:1:2:aaaa:bbbb:cccc:dddd".parse().unwrap();
        assert_eq!(client_of(address, 128), address);
        assert_eq!(client_of(address, 48).to_string(), "2001:db8:1::");
        assert_eq!(client_of(address, 1).to_string(), "::");
    }

    #[test]
    fn the_idle_connection_of_the_busiest_address_goes_first() {
        let slots = ConnSlots::default();
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let waker = Waker::noop();
        let mut cx = Context::from_waker(waker);
        let a1 = slots.acquire(Some(a));
        let a2 = slots.acquire(Some(a));
        let b1 = slots.acquire(Some(b));
        assert_eq!((slots.count_of(a), slots.count_of(b)), (2, 1));
        assert!(!slots.evict_idle(None), "nobody is idle yet");
        for slot in [b1, a1, a2] {
            assert!(slots.poll(slot, &mut cx).is_pending());
        }
        slots.busy(a1);
        // From a, which holds most, nobody is evicted for it: it gets no room from the others.
        assert!(!slots.evict_idle(Some(a)));
        // For a newcomer, a's idle connection goes (not b's, nor a's busy one).
        let c: IpAddr = "10.0.0.3".parse().unwrap();
        assert!(slots.evict_idle(Some(c)));
        assert!(
            slots.poll(a2, &mut cx).is_ready(),
            "a's idle connection was chosen"
        );
        assert!(slots.poll(b1, &mut cx).is_pending());
        assert!(slots.poll(a1, &mut cx).is_pending());
        slots.release(a2);
        assert_eq!(slots.count_of(a), 1);
        slots.release(a1);
        assert_eq!(slots.count_of(a), 0);
        let again = slots.acquire(Some(b));
        assert!(
            slots.poll(again, &mut cx).is_pending(),
            "a reused slot starts fresh"
        );
    }

    #[test]
    fn of_one_address_the_connection_idle_longest_goes_first() {
        let slots = ConnSlots::default();
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let newcomer: IpAddr = "10.0.0.9".parse().unwrap();
        let waker = Waker::noop();
        let mut cx = Context::from_waker(waker);
        let [a1, a2, a3] = [(); 3].map(|()| slots.acquire(Some(a)));
        for slot in [a1, a2, a3] {
            assert!(slots.poll(slot, &mut cx).is_pending());
        }
        // a1 answers a request and waits again: now it is the one idle the shortest. Polling
        // an idle connection again does not restart its wait.
        slots.busy(a1);
        assert!(slots.poll(a1, &mut cx).is_pending());
        assert!(slots.poll(a2, &mut cx).is_pending());
        let mut order = Vec::new();
        for _ in 0..3 {
            assert!(slots.evict_idle(Some(newcomer)));
            let chosen: Vec<usize> = [a1, a2, a3]
                .into_iter()
                .filter(|slot| slots.slots.borrow()[*slot].evicted && !order.contains(slot))
                .collect();
            assert_eq!(chosen.len(), 1, "one connection a round");
            order.extend(chosen);
        }
        assert_eq!(order, [a2, a3, a1]);
        assert!(!slots.evict_idle(Some(newcomer)), "nobody idle is left");
    }
}
