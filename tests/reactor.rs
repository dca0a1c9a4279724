//! The shard's reactor as modgate patches it (vendor/README.md): glommio's rings are made with
//! `IORING_SETUP_COOP_TASKRUN`, so a socket's readiness and the preemption timer wait as task
//! work until the shard thread enters the kernel. A task that computes without a system call
//! must still be preempted, and the other tasks' sockets still served. The reactor keeps its
//! preemption timer in the ring across passes and sleeps while that timer fires no later than
//! needed: a shorter timer must still wake a sleep on time, a longer one must wake it after the
//! kept timer woke it early, and tasks must run on whenever the kept timer fires.

use std::cell::Cell;
use std::io::Write;
use std::rc::Rc;
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

use futures_lite::AsyncReadExt;
use glommio::{LocalExecutorBuilder, Shares};

/// How long the spinning task spins at most before giving up on the reader.
const SPIN_MAX: Duration = Duration::from_secs(10);

#[test]
fn a_task_that_never_enters_the_kernel_does_not_starve_a_socket() {
    let (byte, read_while_spinning, yields) = LocalExecutorBuilder::default()
        .spawn(|| async {
            let listener = glommio::net::TcpListener::bind("127.0.0.1:0").expect("bind");
            let address = listener.local_addr().expect("address");
            // The client connects, waits until the reader's receive is surely with the
            // kernel (the first attempt found nothing), then writes one byte.
            let client = std::thread::spawn(move || {
                let mut stream = std::net::TcpStream::connect(address).expect("connect");
                std::thread::sleep(Duration::from_millis(100));
                stream.write_all(b"x").expect("write");
                std::thread::sleep(Duration::from_millis(200));
            });
            let read = Rc::new(Cell::new(false));
            let spinning = glommio::executor().create_task_queue(
                Shares::default(),
                glommio::Latency::NotImportant,
                "spinning",
            );
            let reader = glommio::spawn_local({
                let read = read.clone();
                async move {
                    let mut stream = listener.accept().await.expect("accept");
                    let mut byte = [0u8; 1];
                    stream.read_exact(&mut byte).await.expect("read");
                    read.set(true);
                    byte[0]
                }
            });
            // Computes without a system call (the clock is read through the vDSO), yielding
            // only when the reactor asks for the CPU back (as yield_if_needed does).
            let spinner = glommio::spawn_local_into(
                {
                    let read = read.clone();
                    async move {
                        let start = Instant::now();
                        let mut yields = 0u64;
                        while !read.get() && start.elapsed() < SPIN_MAX {
                            // One look at the flag decides both the count and the yield:
                            // looking twice (need_preempt, then yield_if_needed) let the
                            // kernel set it between the looks, so the one yield that let
                            // the reader run went uncounted.
                            if glommio::executor().need_preempt() {
                                yields += 1;
                                glommio::executor().yield_task_queue_now().await;
                            }
                        }
                        (read.get(), yields)
                    }
                },
                spinning,
            )
            .expect("spawn");
            let byte = reader.await;
            let (read_while_spinning, yields) = spinner.await;
            client.join().expect("client");
            (byte, read_while_spinning, yields)
        })
        .expect("executor")
        .join()
        .expect("join");
    assert_eq!(byte, b'x');
    assert!(
        read_while_spinning,
        "the socket was read only after the spinning task gave up ({} yields)",
        yields
    );
    assert!(yields > 0, "the spinning task was never preempted");
}

/// The preemption time the timer tests' executors run with.
const PREEMPT: Duration = Duration::from_millis(100);

/// How long each of `rounds` sleeps of `sleep` took on an executor with `PREEMPT`, each after
/// the task ran (so a preemption timer is in the ring). A sleep still going 10 s after it was
/// due fails the test instead of hanging it.
fn sleeps(sleep: Duration, rounds: usize) -> Vec<Duration> {
    let (sent, received) = std::sync::mpsc::channel();
    let _executor = LocalExecutorBuilder::default()
        .preempt_timer(PREEMPT)
        .spawn(move || async move {
            for _ in 0..rounds {
                let start = Instant::now();
                glommio::timer::sleep(sleep).await;
                let _ = sent.send(start.elapsed());
            }
        })
        .expect("executor");
    (0..rounds)
        .map(
            |_| match received.recv_timeout(sleep + Duration::from_secs(10)) {
                Ok(took) => took,
                Err(RecvTimeoutError::Timeout) => {
                    panic!("the reactor slept past its timer for 10 s")
                }
                Err(RecvTimeoutError::Disconnected) => panic!("the executor ended early"),
            },
        )
        .collect()
}

#[test]
fn a_timer_shorter_than_the_preemption_time_wakes_a_sleeping_reactor_on_time() {
    // The preemption timer in the ring fires later than the sleep must end: the reactor must
    // not wait for it.
    let slowest = sleeps(Duration::from_millis(2), 20).into_iter().max();
    assert!(
        slowest < Some(PREEMPT / 2),
        "a 2 ms sleep took {slowest:?}: the reactor slept until its preemption timer"
    );
}

#[test]
fn a_timer_longer_than_the_preemption_time_wakes_a_sleeping_reactor_on_time() {
    // The preemption timer in the ring when the task goes to sleep fires first and wakes the
    // reactor early; the reactor must then sleep on and wake for the longer timer.
    let sleep = PREEMPT * 3 / 2;
    for took in sleeps(sleep, 3) {
        assert!(
            took < sleep + PREEMPT / 2,
            "a {sleep:?} sleep took {took:?}: the reactor woke for its timer late"
        );
    }
}

/// Round trips between two tasks in the ping-pong test.
const ROUND_TRIPS: u32 = 200_000;

#[test]
fn tasks_that_wake_each_other_keep_running_while_a_short_preemption_timer_fires() {
    // Two tasks hand a message back and forth without I/O, so a queue is always active,
    // while a 50 µs preemption timer kept in the ring fires at times unrelated to the
    // reactor's passes. Whenever it fires, the executor must run the tasks on, never park
    // with them queued (nothing else would wake it here).
    let (sent, received) = std::sync::mpsc::channel();
    let _executor = LocalExecutorBuilder::default()
        .preempt_timer(Duration::from_micros(50))
        .spawn(move || async move {
            let (to_pong, from_ping) = glommio::channels::local_channel::new_bounded(1);
            let (to_ping, from_pong) = glommio::channels::local_channel::new_bounded(1);
            let pong = glommio::spawn_local(async move {
                while let Some(n) = from_ping.recv().await {
                    if to_ping.send(n).await.is_err() {
                        break;
                    }
                }
            });
            let mut progress = Instant::now();
            for n in 0..ROUND_TRIPS {
                to_pong.send(n).await.expect("pong is there");
                assert_eq!(from_pong.recv().await, Some(n));
                if progress.elapsed() > Duration::from_millis(100) {
                    let _ = sent.send(n);
                    progress = Instant::now();
                }
            }
            drop(to_pong);
            pong.await;
            let _ = sent.send(ROUND_TRIPS);
        })
        .expect("executor");
    loop {
        match received.recv_timeout(Duration::from_secs(10)) {
            Ok(ROUND_TRIPS) => break,
            Ok(_) => {}
            Err(RecvTimeoutError::Timeout) => panic!("the tasks stopped for 10 s: parked"),
            Err(RecvTimeoutError::Disconnected) => panic!("the executor ended early"),
        }
    }
}
