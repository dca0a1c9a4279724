//! The model worker's count of unfinished jobs, which a paced shard asks before it pauses
//! (`crate::inference::share`): it comes back to zero after every job, answered, abandoned by
//! its caller or stopped past its time, so a shard never pauses for a worker that has nothing
//! to do; and a job past `inference.job_time_max_ms` is answered 503 `busy`, not run. Runs a
//! real worker on the real ONNX Runtime (no models loaded: a tox-block job is answered with an
//! error at once). Alone in its file: the runtime's telemetry switch is an environment
//! variable, set before any other thread exists.

use std::path::Path;
use std::time::{Duration, Instant};

use modgate::checks::registry;
use modgate::error::ErrorKind;
use modgate::image::probe::probe;
use modgate::image::Measures;
use modgate::inference::share::CoreSharing;
use modgate::inference::{self, Worker, WorkerModels};

const MODELS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/models");

/// Waits up to 10 s for the worker to have no unfinished job; whether it came to that.
async fn idle_within(worker: &Worker) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while worker.busy() {
        if Instant::now() > deadline {
            return false;
        }
        glommio::timer::sleep(Duration::from_millis(5)).await;
    }
    true
}

#[test]
fn the_worker_is_idle_after_answered_and_abandoned_jobs() {
    inference::disable_runtime_telemetry();
    let library = format!("{MODELS}/cache/libonnxruntime.so.1.31.1");
    let environment = inference::load_runtime(Path::new(&library))
        .expect("the ONNX Runtime library (make fetch)");
    let models = WorkerModels::verified(&environment, Path::new(MODELS), &[]).unwrap();
    let config = registry::worker_config(4, 8, CoreSharing::Weights, 0.0, 0);
    glommio::LocalExecutorBuilder::default()
        .spawn(move || async move {
            let (worker, ready) = Worker::spawn(0, None, models, config).unwrap();
            ready.await.unwrap().unwrap();
            assert!(!worker.busy());

            // Answered: tox-block is not loaded, so the job fails, and is finished.
            assert!(worker.toxblock(vec![0; 100]).await.is_err());
            assert!(idle_within(&worker).await, "busy after an answered job");

            // Abandoned: submitted by the first poll, then its caller goes away (most likely
            // before the worker takes it, which then skips it; the count must not care).
            for _ in 0..3 {
                let mut job = Box::pin(worker.toxblock(vec![0; 100]));
                let _ = futures_lite::future::poll_once(job.as_mut()).await;
                drop(job);
            }
            assert!(idle_within(&worker).await, "busy after abandoned jobs");

            // An image is decoded and measured within the default time.
            let outcome = worker
                .image(
                    PNG_1X1.to_vec(),
                    probe(PNG_1X1).unwrap(),
                    0,
                    Measures::default(),
                    None,
                )
                .await
                .unwrap();
            assert!(outcome.scores.is_ok());
        })
        .unwrap()
        .join()
        .unwrap();

    // A worker whose jobs have no time: each is answered busy without running, and leaves
    // nothing unfinished.
    let models = WorkerModels::verified(&environment, Path::new(MODELS), &[]).unwrap();
    let mut config = registry::worker_config(4, 8, CoreSharing::Weights, 0.0, 0);
    config.job_time_max = Duration::ZERO;
    glommio::LocalExecutorBuilder::default()
        .spawn(move || async move {
            let (worker, ready) = Worker::spawn(0, None, models, config).unwrap();
            ready.await.unwrap().unwrap();
            let error = worker.toxblock(vec![0; 100]).await.unwrap_err();
            assert_eq!((error.kind, error.status()), (ErrorKind::Busy, 503));
            let error = worker
                .image(
                    PNG_1X1.to_vec(),
                    probe(PNG_1X1).unwrap(),
                    0,
                    Measures::default(),
                    None,
                )
                .await
                .err()
                .expect("busy");
            assert_eq!(error.kind, ErrorKind::Busy);
            assert!(
                idle_within(&worker).await,
                "busy after jobs past their time"
            );
        })
        .unwrap()
        .join()
        .unwrap();
}

/// A 1 x 1 RGBA PNG.
const PNG_1X1: &[u8] = &[
    0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0x00, 0x00, 0x00, 0x0D, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1F, 0x15, 0xC4,
    0x89, 0x00, 0x00, 0x00, 0x0A, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9C, 0x63, 0x00, 0x01, 0x00, 0x00,
    0x05, 0x00, 0x01, 0x0D, 0x0A, 0x2D, 0xB4, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4E, 0x44, 0xAE,
    0x42, 0x60, 0x82,
];
