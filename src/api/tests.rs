//! The request path without a server: each route's refusal order and parameter handling,
//! answered by [`super::handle`] against a real [`Context`] (LMDB store and journal in a
//! temporary directory, the shipped text models, no model worker), one request at a time
//! through an in-memory connection.

use std::sync::Arc;

use serde_json::Value;

use super::context::{Context, ContextParts, Readiness};
use crate::checks::{Engine, TextModels};
use crate::config::Config;
use crate::download::Downloader;
use crate::http::conn::testing::answer;
use crate::journal::Journal;
use crate::limits::lease::{LocalLeases, Sources};
use crate::limits::ShardLimits;
use crate::metrics::Metrics;
use crate::store::records::{Scopes, WorkflowAccess};
use crate::store::view::StoreView;
use crate::store::Store;
use crate::workflow;

struct Ready;

impl Readiness for Ready {
    fn is_ready(&self) -> bool {
        true
    }
}

/// Keys made for a test: every scope, text only, and one limited to `default`.
struct Keys {
    all: String,
    text_only: String,
    default_only: String,
}

/// Runs `test` on a glommio executor (the journal commits on its blocking pool) with a fresh
/// context.
fn with_context(test: impl FnOnce(Rc<Context>, Keys) -> LocalFuture + Send + 'static) {
    with_context_and_leases(move |cx, keys, _| test(cx, keys));
}

/// [`with_context`], with the context's lease source.
fn with_context_and_leases(
    test: impl FnOnce(Rc<Context>, Keys, Arc<LocalLeases>) -> LocalFuture + Send + 'static,
) {
    glommio::LocalExecutorBuilder::default()
        .spawn(move || async move {
            let dir = tempfile::tempdir().expect("tempdir");
            let config = Config::default();
            let store = Store::open(dir.path()).expect("store");
            store.put_plans(&config.plans).expect("plans");
            let defs = workflow::parse_workflows(workflow::SHIPPED_WORKFLOWS).expect("shipped");
            store.import_workflows(&defs, 0).expect("workflows");
            store.create_org("acme", "free", 0).expect("org");
            let key = |scopes, workflows| {
                store
                    .create_key("acme", scopes, workflows, None, 0)
                    .expect("key")
                    .key
            };
            let keys = Keys {
                all: key(Scopes::CHECKS, WorkflowAccess::All),
                text_only: key(
                    Scopes {
                        image: false,
                        text: true,
                        lists: false,
                        feedback: false,
                    },
                    WorkflowAccess::All,
                ),
                default_only: key(Scopes::CHECKS, WorkflowAccess::Only(vec!["default".into()])),
            };
            let models = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("models");
            let (text, _) = TextModels::load(&models).expect("text models");
            let metrics = Metrics::new(true);
            let journal = Journal::start(dir.path(), 0, config.journal_config(), metrics.clone())
                .expect("journal");
            let leases = Arc::new(LocalLeases::open(dir.path()).expect("leases"));
            let cx = Rc::new(Context::new(ContextParts {
                shard: 0,
                scheme: "http",
                clock: config.clock(),
                request_limits: config.limits.clone(),
                panic_path: None,
                lists: crate::store::lists_follower::ListsView::new(
                    crate::store::lists_follower::start(store.clone()).expect("lists"),
                ),
                list_writer: Arc::new(crate::store::lists::LocalLists),
                store: StoreView::new(store),
                limits: ShardLimits::new(Sources::local(leases.clone()), 1),
                checks: Engine {
                    text: Arc::new(text),
                    worker: None,
                    toxblock_ready: false,
                    harm_ready: false,
                    image_slots_loaded: 0,
                    measures_ready: crate::image::Measures::NONE,
                    normalizer: Default::default(),
                    turns: Default::default(),
                    pace: crate::inference::share::Pace::off(),
                    images_kept: std::cell::RefCell::new(crate::inference::repeats::Repeats::new(
                        0,
                    )),
                    toxblock_kept: std::cell::RefCell::new(
                        crate::checks::toxblock::KeptWindows::new(0),
                    ),
                    metrics: metrics.clone(),
                },
                journals: {
                    let journals = crate::journal::shelf::Shelf::new(1);
                    let (env, db) = journal.disk();
                    journals.put(0, env, db);
                    Arc::new(journals)
                },
                journal,
                metrics,
                downloader: Downloader::new(
                    false,
                    None,
                    crate::bounds::IMAGE_BYTES_MAX,
                    &[80, 443],
                    None,
                )
                .expect("downloader"),
                readiness: Arc::new(Ready),
            }));
            test(cx, keys, leases).await;
            drop(dir);
        })
        .expect("executor")
        .join()
        .expect("test");
}

use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
type LocalFuture = Pin<Box<dyn Future<Output = ()>>>;

/// Status and JSON body of the answer to `request`.
async fn ask(cx: &Context, request: &str) -> (u16, Value) {
    ask_bytes(cx, request.as_bytes()).await
}

async fn ask_bytes(cx: &Context, request: &[u8]) -> (u16, Value) {
    let response = answer(cx, request).await;
    let body = serde_json::from_slice(&response.body).unwrap_or(Value::Null);
    (response.status, body)
}

fn error_type(body: &Value) -> &str {
    body["error"]["type"].as_str().unwrap_or("")
}

fn json_post(path: &str, key: &str, body: &str, extra: &str) -> String {
    format!(
        "POST {path} HTTP/1.1\r\nHost: t\r\nX-Api-Key: {key}\r\nContent-Type: application/json\r\n{extra}Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

fn form_post(path: &str, fields: &[(&str, &str)]) -> String {
    let boundary = "b0undary";
    let mut body = String::new();
    for (name, value) in fields {
        body.push_str(&format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n"
        ));
    }
    body.push_str(&format!("--{boundary}--\r\n"));
    format!(
        "POST {path} HTTP/1.1\r\nHost: t\r\nContent-Type: multipart/form-data; boundary={boundary}\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

#[test]
fn origin_comes_before_everything() {
    with_context(|cx, _| {
        Box::pin(async move {
            // An unknown path, no key, a wrong method: still 403 for the Origin.
            for request in [
                "GET /nowhere HTTP/1.1\r\nHost: t\r\nOrigin: https://a.example\r\n\r\n",
                "DELETE /v1/text HTTP/1.1\r\nHost: t\r\nOrigin: null\r\n\r\n",
                "GET /health HTTP/1.1\r\nHost: t\r\nOrigin: https://a.example\r\n\r\n",
            ] {
                let (status, body) = ask(&cx, request).await;
                assert_eq!((status, error_type(&body)), (403, "forbidden"), "{request}");
            }
        })
    });
}

#[test]
fn the_request_itself_comes_before_the_key() {
    with_context(|cx, _| {
        Box::pin(async move {
            let (status, body) = ask(&cx, "GET /v2/text HTTP/1.1\r\nHost: t\r\n\r\n").await;
            assert_eq!((status, error_type(&body)), (404, "bad_request"));
            let (status, _) = ask(&cx, "GET /v1/text HTTP/1.1\r\nHost: t\r\n\r\n").await;
            assert_eq!(status, 405);
            // Over the route's body limit by Content-Length, without a key: 413 first.
            let (status, body) = ask(
                &cx,
                "POST /v1/text HTTP/1.1\r\nHost: t\r\nContent-Length: 99999999\r\n\r\n",
            )
            .await;
            assert_eq!((status, error_type(&body)), (413, "body_too_large"));
            let (status, body) = ask(
                &cx,
                "GET /v1/workflows HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\nabc",
            )
            .await;
            assert_eq!((status, error_type(&body)), (413, "body_too_large"));
        })
    });
}

#[test]
fn the_key_comes_before_parameters_and_content() {
    with_context(|cx, keys| {
        Box::pin(async move {
            // No key, and not JSON either: the key is reported.
            let (status, body) = ask(
                &cx,
                "POST /v1/text HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\nhi",
            )
            .await;
            assert_eq!((status, error_type(&body)), (401, "unauthorized"));
            // A text-only key on the image route with a bad `ref` and `url`: the scope first.
            let request = format!(
                "POST /v1/image?ref=&url=ftp://x HTTP/1.1\r\nHost: t\r\nX-Api-Key: {}\r\n\r\n",
                keys.text_only
            );
            let (status, body) = ask(&cx, &request).await;
            assert_eq!((status, error_type(&body)), (403, "forbidden"));
            // With a key: now the content type.
            let request = format!(
                "POST /v1/text HTTP/1.1\r\nHost: t\r\nX-Api-Key: {}\r\nContent-Length: 2\r\n\r\nhi",
                keys.all
            );
            let (status, body) = ask(&cx, &request).await;
            assert_eq!((status, error_type(&body)), (415, "unsupported_media"));
        })
    });
}

#[test]
fn text_parameters() {
    with_context(|cx, keys| {
        Box::pin(async move {
            let key = &keys.all;
            let cases: Vec<(String, u16, &str)> = vec![
                (r#"[1]"#.into(), 400, "bad_request"),
                (r#"{"text": 5}"#.into(), 400, "bad_request"),
                (r#"{"workflow": "default"}"#.into(), 400, "bad_request"),
                (r#"{"text": "hi", "ref": ""}"#.into(), 400, "bad_request"),
                (
                    format!(r#"{{"text": "hi", "context": "{}"}}"#, "é".repeat(2001)),
                    413,
                    "text_too_long",
                ),
                (
                    format!(r#"{{"text": "{}"}}"#, "a".repeat(5001)),
                    413,
                    "text_too_long",
                ),
                (
                    r#"{"text": "hi", "workflow": "nope"}"#.into(),
                    400,
                    "unknown_workflow",
                ),
                (
                    format!(
                        r#"{{"text": "hi", "x": {}1{}}}"#,
                        "[".repeat(40),
                        "]".repeat(40)
                    ),
                    400,
                    "bad_request",
                ),
            ];
            for (body, status, kind) in cases {
                let (got, answer) = ask(&cx, &json_post("/v1/text", key, &body, "")).await;
                assert_eq!((got, error_type(&answer)), (status, kind), "{body:.80}");
            }
            // A good one: decided, with the ref and the workflow's version.
            let (status, answer) = ask(
                &cx,
                &json_post(
                    "/v1/text",
                    key,
                    r#"{"text": "you are an idiot, mail me at bob@example.com", "ref": "r-1"}"#,
                    "",
                ),
            )
            .await;
            assert_eq!(status, 200, "{answer}");
            assert_eq!(answer["ref"], "r-1");
            assert_eq!(answer["workflow"], "default");
            assert_ne!(answer["summary"]["action"], "accept");
        })
    });
}

#[test]
fn workflow_existence_comes_before_the_allow_list() {
    with_context(|cx, keys| {
        Box::pin(async move {
            let key = &keys.default_only;
            let (status, body) = ask(
                &cx,
                &json_post("/v1/text", key, r#"{"text": "hi", "workflow": "nope"}"#, ""),
            )
            .await;
            assert_eq!((status, error_type(&body)), (400, "unknown_workflow"));
            let listed = ask(
                &cx,
                &format!("GET /v1/workflows HTTP/1.1\r\nHost: t\r\nX-Api-Key: {key}\r\n\r\n"),
            )
            .await;
            assert_eq!(listed.0, 200);
            let names: Vec<&str> = listed.1["workflows"]
                .as_array()
                .expect("workflows")
                .iter()
                .filter_map(|w| w["name"].as_str())
                .collect();
            assert_eq!(names, ["default"]);
            let other = workflow::parse_workflows(workflow::SHIPPED_WORKFLOWS)
                .expect("shipped")
                .into_keys()
                .find(|name| name != "default")
                .expect("a second shipped workflow");
            let body = format!(r#"{{"text": "hi", "workflow": "{other}"}}"#);
            let (status, answer) = ask(&cx, &json_post("/v1/text", key, &body, "")).await;
            assert_eq!((status, error_type(&answer)), (403, "forbidden"));
        })
    });
}

#[test]
fn image_parameters() {
    with_context(|cx, keys| {
        Box::pin(async move {
            let key = &keys.all;
            let post = |query: &str, body: &[u8]| {
                let mut request = format!(
                    "POST /v1/image{query} HTTP/1.1\r\nHost: t\r\nX-Api-Key: {key}\r\nContent-Length: {}\r\n\r\n",
                    body.len()
                )
                .into_bytes();
                request.extend_from_slice(body);
                request
            };
            let cases: Vec<(Vec<u8>, u16, &str)> = vec![
                (post("?ref=a&ref=b", b""), 400, "bad_request"),
                (post("?ref=%ZZ", b""), 400, "bad_request"),
                (post("?workflow=nope", b"x"), 400, "unknown_workflow"),
                (
                    post("?url=https%3A%2F%2Fa.example%2Fi.png", b"x"),
                    400,
                    "bad_request",
                ),
                (post("", b"hello, not an image"), 415, "unsupported_media"),
                (post("", b"\x89PNG\r\n\x1a\n\0\0"), 400, "corrupt_media"),
                (
                    post("?url=http%3A%2F%2F127.0.0.1%2Fa.png", b""),
                    400,
                    "url_refused",
                ),
            ];
            for (request, status, kind) in cases {
                let (got, answer) = ask_bytes(&cx, &request).await;
                assert_eq!(
                    (got, error_type(&answer)),
                    (status, kind),
                    "{}",
                    String::from_utf8_lossy(&request[..request.len().min(120)])
                );
            }
        })
    });
}

#[test]
fn compatible_routes_read_their_forms_then_the_key() {
    with_context(|cx, keys| {
        Box::pin(async move {
            // Not multipart: 400 on the text route (before the key, which is in the form).
            let (status, body) = ask(
                &cx,
                "POST /1.0/text/check-workflow.json HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\nhi",
            )
            .await;
            assert_eq!((status, error_type(&body)), (400, "bad_request"));
            assert_eq!(body["status"], "failure");
            // A form without a key: 401 in the compatible envelope.
            let (status, body) = ask(
                &cx,
                &form_post("/1.0/text/check-workflow.json", &[("text", "hi")]),
            )
            .await;
            assert_eq!((status, error_type(&body)), (401, "unauthorized"));
            // With the key in the form but no text: 400.
            let (status, body) = ask(
                &cx,
                &form_post(
                    "/1.0/text/check-workflow.json",
                    &[("api_secret", &keys.all)],
                ),
            )
            .await;
            assert_eq!((status, error_type(&body)), (400, "bad_request"));
            // Decided, in the compatible shape.
            let (status, body) = ask(
                &cx,
                &form_post(
                    "/1.0/text/check-workflow.json",
                    &[("api_secret", &keys.all), ("text", "hello there")],
                ),
            )
            .await;
            assert_eq!(status, 200, "{body}");
            assert_eq!(body["workflow"]["id"], "default");
            assert_eq!(body["request"]["operations"], 1);
            assert!(body["request"]["timestamp"]
                .as_f64()
                .is_some_and(|t| t > 1.0e9));
            // The image GET route: `media` in a query is a missing image.
            let request = format!(
                "GET /1.0/check-workflow.json?media=x&api_secret={} HTTP/1.1\r\nHost: t\r\n\r\n",
                keys.all
            );
            let (status, body) = ask(&cx, &request).await;
            assert_eq!((status, error_type(&body)), (400, "bad_request"));
            let request = format!(
                "GET /1.0/check-workflow.json?api_secret={} HTTP/1.1\r\nHost: t\r\n\r\n",
                keys.all
            );
            let (status, body) = ask(&cx, &request).await;
            assert_eq!((status, error_type(&body)), (400, "bad_request"));
            // Both `media` and `url` in the image form.
            let (status, body) = ask(
                &cx,
                &form_post(
                    "/1.0/check-workflow.json",
                    &[
                        ("api_secret", &keys.all),
                        ("media", "x"),
                        ("url", "https://a.example/i.png"),
                    ],
                ),
            )
            .await;
            assert_eq!((status, error_type(&body)), (400, "bad_request"));
        })
    });
}

#[test]
fn every_check_request_is_journaled_and_refusals_cost_no_quota() {
    with_context(|cx, keys| {
        Box::pin(async move {
            let before = cx.metrics.counters().journal_commit_records.sum;
            let (status, _) = ask(
                &cx,
                &json_post("/v1/text", &keys.all, r#"{"text": "hi"}"#, ""),
            )
            .await;
            assert_eq!(status, 200);
            let (status, _) =
                ask(&cx, &json_post("/v1/text", &keys.all, r#"{"text": 1}"#, "")).await;
            assert_eq!(status, 400);
            let after = cx.metrics.counters().journal_commit_records.sum;
            assert_eq!(
                after - before,
                2,
                "one record per check request, refused or not"
            );
            let caller = cx.authenticate_key(&keys.all, cx.now_ms()).expect("key");
            let headers = cx.limits.headers(&caller, cx.now_ms());
            assert_eq!(headers.quota_used, 1, "the refusal did not count");
        })
    });
}

/// Issue 13: no check waits for the quota ledger's disk. With the ledger's LMDB writer held by
/// another thread for the whole test (as a commit stalled behind another process's bulk
/// writes holds it), checks are admitted through every lease refill until the quota is used
/// up, then refused 429: a lease that runs dry is refilled from the ledger in memory.
#[test]
fn no_check_waits_for_the_quota_ledgers_disk() {
    use crate::auth::Caller;
    use crate::error::ErrorKind;
    use crate::store::records::PlanLimits;
    use crate::store::view::OrgEntry;
    with_context_and_leases(|cx, keys, leases| {
        Box::pin(async move {
            let env = leases.ledger_env();
            let (held, is_held) = std::sync::mpsc::channel();
            let (release, released) = std::sync::mpsc::channel::<()>();
            let holder = std::thread::spawn(move || {
                let txn = env.write_txn().expect("the ledger's writer");
                held.send(()).expect("held");
                // Until the test lets go, or 30 s so that a failing test ends.
                let let_go = released
                    .recv_timeout(std::time::Duration::from_secs(30))
                    .is_ok();
                drop(txn);
                let_go
            });
            is_held.recv().expect("held");
            let caller = cx.authenticate_key(&keys.all, cx.now_ms()).expect("key");
            let limits = PlanLimits {
                rate_per_s: 1_000_000,
                rate_burst: 1_000_000,
                concurrent_max: 1_000_000,
                quota_per_month: 5_000,
                ..caller.org.limits.clone()
            };
            let caller = Caller {
                key: caller.key.clone(),
                org: Rc::new(OrgEntry {
                    record: caller.org.record.clone(),
                    limits,
                }),
            };
            let now_ms = cx.now_ms();
            for check in 0..5_000 {
                let admission = cx
                    .limits
                    .admit(&caller, now_ms)
                    .await
                    .unwrap_or_else(|error| panic!("check {check}: {}", error.message));
                cx.limits.finish(admission, true, now_ms);
            }
            let refused = cx.limits.admit(&caller, now_ms).await;
            assert_eq!(
                refused.err().map(|error| error.kind),
                Some(ErrorKind::QuotaExceeded)
            );
            let _ = release.send(());
            assert!(
                holder.join().expect("holder"),
                "the checks were admitted only once the ledger's writer let go"
            );
            // What the ledger in memory granted reaches the disk once the writer is free.
            assert_eq!(leases.flush().expect("flush"), 1, "the one key changed");
            assert_eq!(
                leases
                    .quota_used(&caller.org.record.name, crate::clock::month_of(now_ms))
                    .expect("used"),
                5_000
            );
        })
    });
}
