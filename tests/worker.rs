//! The model worker's count of unfinished jobs, which a paced shard asks before it pauses
//! (`crate::inference::share`): it comes back to zero after every job, answered or abandoned
//! by its caller, so a shard never pauses for a worker that has nothing to do. Runs a real
//! worker on the real ONNX Runtime (no models loaded: a tox-block job is answered with an
//! error at once). Alone in its file: the runtime's telemetry switch is an environment
//! variable, set before any other thread exists.

use std::path::Path;
use std::time::{Duration, Instant};

use modgate::checks::registry;
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
        })
        .unwrap()
        .join()
        .unwrap();
}
