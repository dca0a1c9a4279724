//! Which of a shard's connections have bytes waiting to be read: one epoll set per shard with
//! every accepted socket in it (level-triggered, read side), each under its connection slot.
//!
//! What it is for: a connection whose client pipelines and keeps its socket full never waits
//! for it, so its task is always ready, and the executor (which polls its sockets only when no
//! task is ready) would leave every other connection of the shard unread for as long as that
//! client keeps sending. Such a connection pauses for the others now and then
//! ([`crate::http::conn`]); a pause costs a whole turn of the executor's reactor, so it asks
//! here first and pauses only when another connection has something to read. One
//! `epoll_wait` with no timeout (about a microsecond) per check.
//!
//! Why epoll beside io_uring: the sockets' readiness is already watched by glommio's ring, but
//! nothing there can be asked "is any other socket readable?" without waiting for it. The
//! system calls come from `nix`, which the server already uses for them. A socket leaves the
//! set when it is closed (the kernel drops closed files from epoll sets), so a slot given to a
//! new connection never sees the old one's events.

use std::os::fd::{AsRawFd, BorrowedFd};

use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags};

/// Events read per question: enough to find one that is not the asker's own.
const EVENTS_READ: usize = 4;

pub struct ReadableSockets {
    /// `None` if the set could not be made: every question is then answered "yes" (a pause
    /// too many costs time; a missing one lets a client hold the shard).
    epoll: Option<Epoll>,
}

impl ReadableSockets {
    pub fn new() -> ReadableSockets {
        let epoll = Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC);
        if let Err(error) = &epoll {
            tracing::warn!(%error, "no epoll set for the connections' readiness; pipelining clients pause always");
        }
        ReadableSockets { epoll: epoll.ok() }
    }

    /// Watches `socket` for the connection in `slot` until the socket is closed.
    pub fn watch(&self, socket: &impl AsRawFd, slot: usize) {
        let Some(epoll) = &self.epoll else {
            return;
        };
        // SAFETY: `socket` is borrowed for this call, so its descriptor stays open while the
        // borrowed handle exists; `add` only passes the number to `epoll_ctl`, which keeps a
        // reference to the open file of its own, and does not keep the handle.
        let fd = unsafe { BorrowedFd::borrow_raw(socket.as_raw_fd()) };
        let event = EpollEvent::new(EpollFlags::EPOLLIN | EpollFlags::EPOLLRDHUP, slot as u64);
        if let Err(error) = epoll.add(fd, event) {
            tracing::debug!(%error, slot, "a connection's socket is not watched for readiness");
        }
    }

    /// Whether a connection other than the one in `slot` has bytes (or a hang-up) to read.
    pub fn others_readable(&self, slot: usize) -> bool {
        let Some(epoll) = &self.epoll else {
            return true;
        };
        let mut events = [EpollEvent::empty(); EVENTS_READ];
        match epoll.wait(&mut events, 0) {
            Ok(ready) => events[..ready]
                .iter()
                .any(|event| event.data() != slot as u64),
            Err(_) => true,
        }
    }
}

impl Default for ReadableSockets {
    fn default() -> Self {
        ReadableSockets::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::net::UnixStream;

    #[test]
    fn only_other_connections_with_bytes_count() {
        let sockets = ReadableSockets::new();
        let (mut client_1, server_1) = UnixStream::pair().unwrap();
        let (mut client_2, server_2) = UnixStream::pair().unwrap();
        sockets.watch(&server_1, 1);
        sockets.watch(&server_2, 2);
        assert!(!sockets.others_readable(1), "nothing was sent");
        client_1.write_all(b"GET / HTTP/1.1\r\n").unwrap();
        assert!(
            !sockets.others_readable(1),
            "only the asker's own socket has bytes"
        );
        assert!(sockets.others_readable(2));
        client_2.write_all(b"GET / HTTP/1.1\r\n").unwrap();
        assert!(sockets.others_readable(1));
    }

    #[test]
    fn a_closed_socket_leaves_the_set() {
        let sockets = ReadableSockets::new();
        let (mut client, server) = UnixStream::pair().unwrap();
        sockets.watch(&server, 3);
        client.write_all(b"x").unwrap();
        assert!(sockets.others_readable(0));
        drop(server);
        assert!(!sockets.others_readable(0));
    }

    #[test]
    fn a_hang_up_counts() {
        let sockets = ReadableSockets::new();
        let (client, server) = UnixStream::pair().unwrap();
        sockets.watch(&server, 5);
        drop(client);
        assert!(sockets.others_readable(0));
    }
}
