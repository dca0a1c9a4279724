//! `modgate check`: one check sent to a running server, its decision printed for people.
//!
//! An image file goes as the raw body of `POST /v1/image`, `--url` as `?url=` with an empty
//! body, `--text` as a TextRequest to `POST /v1/text`. The answer is printed as the action,
//! the reasons (highest score first, as the server orders them) and every score as a bar;
//! `--json` prints the server's JSON unchanged. A refusal prints its status, type and message
//! and fails the command.
//!
//! The key comes from `--key` or `MODGATE_KEY` (so that it stays out of shell history), the
//! server from `--server` or `MODGATE_SERVER` (default `http://127.0.0.1:8080`).

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use serde::{Deserialize, Serialize};

/// How long one check may take, download and models included.
pub const CHECK_TIMEOUT: Duration = Duration::from_secs(60);
/// Width of a score bar, in characters.
pub const BAR_WIDTH: usize = 20;

/// What to check and where.
pub struct CheckRequest {
    pub image: Option<PathBuf>,
    pub text: Option<String>,
    pub url: Option<String>,
    pub workflow: Option<String>,
    pub reference: Option<String>,
    pub server: String,
    pub key: String,
    pub json: bool,
}

#[derive(Deserialize)]
struct Answer {
    workflow: String,
    workflow_version: u64,
    summary: Summary,
    scores: std::collections::BTreeMap<String, f64>,
    time_ms: u64,
    request_id: String,
    #[serde(default)]
    unchecked: Option<Vec<String>>,
}

#[derive(Deserialize)]
struct Summary {
    action: String,
    reject_reason: Vec<Reason>,
    review_reason: Vec<Reason>,
}

#[derive(Deserialize)]
struct Reason {
    id: String,
    text: String,
    message: String,
    score: f64,
    threshold: f64,
    source: String,
}

#[derive(Deserialize)]
struct Failure {
    error: FailureBody,
}

#[derive(Deserialize)]
struct FailureBody {
    #[serde(rename = "type")]
    kind: String,
    message: String,
}

/// Sends the check and prints the outcome on stdout.
pub fn run(request: &CheckRequest) -> anyhow::Result<()> {
    let (status, body) = send(request)?;
    if request.json {
        println!("{body}");
        if status != 200 {
            bail!("the server answered {status}");
        }
        return Ok(());
    }
    let mut bytes = body.into_bytes();
    if status != 200 {
        let failure: Failure = simd_json::serde::from_slice(&mut bytes)
            .map_err(|_| anyhow!("the server answered {status} without an error envelope"))?;
        bail!(
            "refused: {status} {}: {}",
            failure.error.kind,
            failure.error.message
        );
    }
    let answer: Answer = simd_json::serde::from_slice(&mut bytes)
        .map_err(|error| anyhow!("the answer is not a decision: {error}"))?;
    print!("{}", render(&answer));
    Ok(())
}

fn send(request: &CheckRequest) -> anyhow::Result<(u16, String)> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(CHECK_TIMEOUT))
        .build()
        .into();
    let base = url::Url::parse(&request.server)
        .with_context(|| format!("--server {}: not a URL", request.server))?;
    let authorization = format!("Bearer {}", request.key);
    let mut response = match (&request.image, &request.text, &request.url) {
        (None, Some(text), None) => {
            let url = base.join("/v1/text")?;
            let body = text_body(
                text,
                request.workflow.as_deref(),
                request.reference.as_deref(),
            );
            agent
                .post(url.as_str())
                .header("Authorization", &authorization)
                .header("Content-Type", "application/json")
                .send(body.as_bytes())
        }
        (image, None, remote) if image.is_some() != remote.is_some() => {
            let mut url = base.join("/v1/image")?;
            {
                let mut query = url.query_pairs_mut();
                if let Some(workflow) = &request.workflow {
                    query.append_pair("workflow", workflow);
                }
                if let Some(reference) = &request.reference {
                    query.append_pair("ref", reference);
                }
                if let Some(remote) = remote {
                    query.append_pair("url", remote);
                }
            }
            let body = match image {
                Some(path) => {
                    std::fs::read(path).with_context(|| format!("reading {}", path.display()))?
                }
                None => Vec::new(),
            };
            agent
                .post(url.as_str())
                .header("Authorization", &authorization)
                .header("Content-Type", "application/octet-stream")
                .send(&body[..])
        }
        _ => bail!("give one of: an image file, --text TEXT, --url URL"),
    }
    .with_context(|| format!("sending the check to {}", request.server))?;
    let status = response.status().as_u16();
    let body = response
        .body_mut()
        .read_to_string()
        .context("reading the answer")?;
    Ok((status, body))
}

/// A TextRequest (`workflow` and `ref` only when given).
fn text_body(text: &str, workflow: Option<&str>, reference: Option<&str>) -> String {
    #[derive(Serialize)]
    struct TextRequest<'a> {
        text: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        workflow: Option<&'a str>,
        #[serde(rename = "ref", skip_serializing_if = "Option::is_none")]
        reference: Option<&'a str>,
    }
    let request = TextRequest {
        text,
        workflow,
        reference,
    };
    // Strings and options of strings always serialize.
    simd_json::to_string(&request).unwrap_or_default()
}

/// A score in [0, 1] as a bar of [`BAR_WIDTH`] characters.
fn bar(score: f64) -> String {
    let filled = ((score.clamp(0.0, 1.0) * BAR_WIDTH as f64).round() as usize).min(BAR_WIDTH);
    format!("{}{}", "█".repeat(filled), "░".repeat(BAR_WIDTH - filled))
}

fn render(answer: &Answer) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}  (workflow {} v{}, {} ms, request {})",
        answer.summary.action.to_uppercase(),
        answer.workflow,
        answer.workflow_version,
        answer.time_ms,
        answer.request_id
    );
    for (label, reasons) in [
        ("reject", &answer.summary.reject_reason),
        ("review", &answer.summary.review_reason),
    ] {
        for reason in reasons {
            let _ = writeln!(
                out,
                "  {label}: {} ({}) {:.2} >= {:.2}, from {}",
                reason.text, reason.id, reason.score, reason.threshold, reason.source
            );
            let _ = writeln!(out, "          {}", reason.message);
        }
    }
    let width = answer.scores.keys().map(String::len).max().unwrap_or(0);
    let mut scores: Vec<(&String, &f64)> = answer.scores.iter().collect();
    scores.sort_by(|a, b| b.1.total_cmp(a.1).then_with(|| a.0.cmp(b.0)));
    out.push_str("scores:\n");
    for (category, score) in scores {
        let _ = writeln!(out, "  {category:<width$}  {} {score:.2}", bar(*score));
    }
    if let Some(unchecked) = answer.unchecked.as_ref().filter(|u| !u.is_empty()) {
        let _ = writeln!(
            out,
            "unchecked (not scored on this server): {}",
            unchecked.join(", ")
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_and_text_bodies() {
        assert_eq!(bar(0.0), "░".repeat(BAR_WIDTH));
        assert_eq!(bar(1.0), "█".repeat(BAR_WIDTH));
        assert_eq!(
            bar(0.5).chars().filter(|&c| c == '█').count(),
            BAR_WIDTH / 2
        );
        assert_eq!(bar(7.0), "█".repeat(BAR_WIDTH));
        assert_eq!(
            text_body("a \"b\"\n\u{1}", Some("default"), None),
            "{\"text\":\"a \\\"b\\\"\\n\\u0001\",\"workflow\":\"default\"}"
        );
    }

    #[test]
    fn a_decision_reads_top_down() {
        let mut json = br#"{"status":"success","workflow":"default","summary":{"action":"review","reject_prob":0.0,"reject_reason":[],"review_reason":[{"id":"pii_email","text":"E-mail address","message":"An e-mail address.","score":0.95,"threshold":0.9,"source":"pii"}]},"scores":{"pii_email":0.95,"profanity":0.1},"time_ms":1,"request_id":"r1","workflow_version":2,"ref":null,"unchecked":["toxic"]}"#.to_vec();
        let answer: Answer = simd_json::serde::from_slice(&mut json).unwrap();
        let text = render(&answer);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("REVIEW  (workflow default v2"));
        assert!(lines[1].contains("review: E-mail address (pii_email) 0.95 >= 0.90, from pii"));
        assert!(lines[4].starts_with("  pii_email"), "{text}");
        assert!(lines[5].starts_with("  profanity"), "{text}");
        assert!(text.contains("unchecked (not scored on this server): toxic"));
    }
}
