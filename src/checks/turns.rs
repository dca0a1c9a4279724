//! Turns at a shard's CPU: the checks that run on the shard itself take them one at a time, in
//! the order they ask, and a check always waits at least once at the back of the ready tasks.
//!
//! Why: a shard's executor runs its ready tasks in the order they were woken, each until it
//! next waits, and polls the network only between such runs. Under a saturating text load,
//! every connection's task is ready with a whole check to run (tens of µs each), so a request
//! that needs a few µs (`/health`, a workflow list) waited behind all of them: 32 connections
//! made `/health`'s median 2 ms and its p99 7 ms beside texts and images (issue 13).
//!
//! With turns, a task that reaches a check asks for a turn and waits: the turn is granted by
//! waking it, which puts it at the back of the ready tasks, behind the light requests woken
//! with it, and only one check holds a turn, so at most one waits among them. A light request
//! thus waits for one check and the light parts of the others, not for every check woken with
//! it. (glommio polls the network every few tasks under load: 0.2 `io_uring_enter` calls per
//! check at saturation, counted with `strace -c`.)
//!
//! Measured (2026-11-26, one shard beside 32 connections of 1 KiB texts, `/health` at 100/s):
//! `/health`'s median 1.09 → 0.67 to 0.93 ms, its p99 unchanged at about 2 ms; no change in
//! the CPU of a check (48.7 against 49.9 µs). Beside images as well, the wait for the core
//! (the model worker's share of it) was most of `/health`'s 6 to 8 ms p99, until the shard
//! paced itself instead of leaving the split to the kernel ([`crate::inference::share`]).
//!
//! Fairness among checks comes with it: turns are granted first come, first served, so a
//! client with many requests waiting cannot pass one with a single request.
//!
//! Invariants: at most one [`Turn`] is alive; a turn is granted only by waking its waiter
//! (never inside the poll that asks, nor inside the drop that frees it), and a waiter dropped
//! before or after being granted passes the turn on, so a cancelled request never stalls the
//! others. Waiters are bounded by the shard's connections (one check at a time each).

use std::cell::RefCell;
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

/// A shard's turns (one per shard; single-threaded, like everything a shard owns).
#[derive(Default)]
pub struct Turns {
    state: RefCell<State>,
}

#[derive(Default)]
struct State {
    /// The ticket that holds the turn (granted, whether or not its waiter has seen it yet).
    holder: Option<u64>,
    next_ticket: u64,
    /// Tickets waiting, first come first; the waker of each.
    waiting: VecDeque<(u64, Waker)>,
}

impl State {
    /// Gives a free turn to the first waiting ticket; its waker, to wake once the state is
    /// no longer borrowed (a wake may drop a task, whose drop may come back here).
    #[must_use]
    fn grant_next(&mut self) -> Option<Waker> {
        if self.holder.is_some() {
            return None;
        }
        let (ticket, waker) = self.waiting.pop_front()?;
        self.holder = Some(ticket);
        Some(waker)
    }

    /// Frees `ticket`'s turn or its place in the queue; the waker of the next holder.
    #[must_use]
    fn leave(&mut self, ticket: u64) -> Option<Waker> {
        if self.holder == Some(ticket) {
            self.holder = None;
            self.grant_next()
        } else {
            self.waiting.retain(|(waiting, _)| *waiting != ticket);
            None
        }
    }
}

impl Turns {
    fn leave(&self, ticket: u64) {
        let next = self.state.borrow_mut().leave(ticket);
        if let Some(waker) = next {
            waker.wake();
        }
    }
}

impl Turns {
    /// Waits for a turn; it lasts until the [`Turn`] is dropped.
    pub fn take(&self) -> TakeTurn<'_> {
        TakeTurn {
            turns: self,
            asked: Asked::Not,
        }
    }

    /// How many checks wait for a turn (the holder not counted).
    #[cfg(test)]
    fn waiting(&self) -> usize {
        self.state.borrow().waiting.len()
    }
}

/// The future of [`Turns::take`].
pub struct TakeTurn<'a> {
    turns: &'a Turns,
    asked: Asked,
}

/// Where a [`TakeTurn`] is.
#[derive(Clone, Copy)]
enum Asked {
    /// Not polled yet.
    Not,
    /// In the queue with this ticket, or holding the turn with it (not yet handed over).
    Waiting(u64),
    /// The turn went to a [`Turn`], which frees it.
    HandedOver,
}

impl<'a> Future for TakeTurn<'a> {
    type Output = Turn<'a>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Turn<'a>> {
        let turns = self.turns;
        let mut state = turns.state.borrow_mut();
        let ticket = match self.asked {
            Asked::Waiting(ticket) => ticket,
            // Polled again after completing: its turn is the [`Turn`]'s, nothing more comes.
            Asked::HandedOver => return Poll::Pending,
            Asked::Not => {
                // First poll: join the queue and wait, even when the turn is free (it is then
                // granted at once, and the wake puts this task behind the ones already ready).
                let ticket = state.next_ticket;
                state.next_ticket += 1;
                state.waiting.push_back((ticket, cx.waker().clone()));
                let granted = state.grant_next();
                drop(state);
                self.asked = Asked::Waiting(ticket);
                if let Some(waker) = granted {
                    waker.wake();
                }
                return Poll::Pending;
            }
        };
        if state.holder == Some(ticket) {
            drop(state);
            self.asked = Asked::HandedOver;
            return Poll::Ready(Turn { turns, ticket });
        }
        if let Some((_, waker)) = state.waiting.iter_mut().find(|(t, _)| *t == ticket) {
            waker.clone_from(cx.waker());
        }
        Poll::Pending
    }
}

impl Drop for TakeTurn<'_> {
    fn drop(&mut self) {
        if let Asked::Waiting(ticket) = self.asked {
            self.turns.leave(ticket);
        }
    }
}

/// The shard's turn at CPU-heavy work; dropping it passes the turn on.
pub struct Turn<'a> {
    turns: &'a Turns,
    ticket: u64,
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        self.turns.leave(self.ticket);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::rc::Rc;

    #[test]
    fn a_free_turn_still_waits_once_behind_the_ready_tasks() {
        let turns = Turns::default();
        let mut take = std::pin::pin!(turns.take());
        let mut cx = Context::from_waker(Waker::noop());
        assert!(take.as_mut().poll(&mut cx).is_pending());
        // Granted by the first poll's wake; the second poll has it.
        assert!(matches!(take.as_mut().poll(&mut cx), Poll::Ready(_)));
    }

    #[test]
    fn turns_go_one_at_a_time_in_order_of_asking() {
        let ex = glommio::LocalExecutor::default();
        ex.run(async {
            let turns = Rc::new(Turns::default());
            let log = Rc::new(RefCell::new(Vec::new()));
            let tasks: Vec<_> = (0..5)
                .map(|i| {
                    let (turns, log) = (turns.clone(), log.clone());
                    glommio::spawn_local(async move {
                        let _turn = turns.take().await;
                        log.borrow_mut().push(("start", i));
                        glommio::yield_if_needed().await;
                        futures_lite::future::yield_now().await;
                        log.borrow_mut().push(("end", i));
                    })
                })
                .collect();
            for task in tasks {
                task.await;
            }
            let log = log.borrow();
            let expected: Vec<_> = (0..5).flat_map(|i| [("start", i), ("end", i)]).collect();
            assert_eq!(*log, expected);
        });
    }

    #[test]
    fn a_light_task_woken_with_the_checks_runs_before_all_but_one() {
        let ex = glommio::LocalExecutor::default();
        ex.run(async {
            let turns = Rc::new(Turns::default());
            let log = Rc::new(RefCell::new(Vec::new()));
            let mut tasks = Vec::new();
            for i in 0..4 {
                let (turns, log) = (turns.clone(), log.clone());
                tasks.push(glommio::spawn_local(async move {
                    let _turn = turns.take().await;
                    log.borrow_mut().push(format!("check {i}"));
                }));
            }
            let light = log.clone();
            tasks.push(glommio::spawn_local(async move {
                light.borrow_mut().push("health".to_owned());
            }));
            for task in tasks {
                task.await;
            }
            // Without turns the light task would come last, behind four checks.
            assert_eq!(log.borrow()[0], "health");
        });
    }

    thread_local! {
        /// Waiters that [`DropsWaiters`] drops when it is woken.
        static PARKED: RefCell<Vec<Pin<Box<TakeTurn<'static>>>>> = const { RefCell::new(Vec::new()) };
    }

    /// A waker whose wake drops other waiters, as a wake that ends a task can.
    struct DropsWaiters;

    impl std::task::Wake for DropsWaiters {
        fn wake(self: std::sync::Arc<Self>) {
            PARKED.with(|parked| parked.borrow_mut().clear());
        }
    }

    #[test]
    fn a_wake_that_drops_a_waiter_finds_the_turns_free_to_borrow() {
        let turns: &'static Turns = Box::leak(Box::default());
        let mut noop = Context::from_waker(Waker::noop());
        let mut first = Box::pin(turns.take());
        assert!(first.as_mut().poll(&mut noop).is_pending());
        let Poll::Ready(turn) = first.as_mut().poll(&mut noop) else {
            panic!("a free turn was not granted");
        };
        let dropping = Waker::from(std::sync::Arc::new(DropsWaiters));
        let mut second = Box::pin(turns.take());
        assert!(second
            .as_mut()
            .poll(&mut Context::from_waker(&dropping))
            .is_pending());
        let mut third = Box::pin(turns.take());
        assert!(third.as_mut().poll(&mut noop).is_pending());
        PARKED.with(|parked| parked.borrow_mut().push(third));
        // Passes the turn to `second`, whose wake drops `third`, which leaves the queue.
        drop(turn);
        assert_eq!(turns.waiting(), 0);
        assert!(second.as_mut().poll(&mut noop).is_ready());
    }

    #[test]
    fn a_dropped_waiter_passes_the_turn_on() {
        let turns = Turns::default();
        let mut cx = Context::from_waker(Waker::noop());
        let mut first = Box::pin(turns.take());
        let mut second = Box::pin(turns.take());
        let mut third = Box::pin(turns.take());
        assert!(first.as_mut().poll(&mut cx).is_pending());
        assert!(second.as_mut().poll(&mut cx).is_pending());
        assert!(third.as_mut().poll(&mut cx).is_pending());
        assert_eq!(turns.waiting(), 2);
        // The holder, granted but never polled again, and a waiter behind it go away.
        drop(first);
        assert_eq!(turns.waiting(), 1);
        drop(second);
        assert_eq!(turns.waiting(), 0);
        let turn = match third.as_mut().poll(&mut cx) {
            Poll::Ready(turn) => turn,
            Poll::Pending => panic!("the turn was not passed on"),
        };
        drop(turn);
        let mut fourth = Box::pin(turns.take());
        assert!(fourth.as_mut().poll(&mut cx).is_pending());
        assert!(fourth.as_mut().poll(&mut cx).is_ready());
    }
}
