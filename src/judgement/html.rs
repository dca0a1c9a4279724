//! The reports as one self-contained HTML file each (`--html FILE`): inline CSS and SVG, no
//! script and nothing fetched, so a file mailed or opened offline shows the same.
//!
//! Calibration: per category, the precision-recall curve with the thresholds in force and the
//! suggested ones marked, and the histogram of scores split by label. Replay: the matrix of
//! actions before and after, and the flips by category.

use std::fmt::Write as _;

use super::calibrate::{self, CategoryReport};
use super::replay;

/// The curve's colour; the test that renders a report looks for its pixels.
pub const CURVE_COLOUR: &str = "#1f5fbf";
pub const POSITIVE_COLOUR: &str = "#c0392b";
pub const NEGATIVE_COLOUR: &str = "#7f8c8d";

const PLOT_WIDTH: f64 = 360.0;
const PLOT_HEIGHT: f64 = 240.0;
const MARGIN: f64 = 40.0;

/// Text for HTML: `&`, `<`, `>`, `"` and `'` escaped.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

fn page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{title}</title>\
         <style>body{{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222}}\
         table{{border-collapse:collapse;margin:1em 0}}td,th{{border:1px solid #ccc;padding:4px 8px;text-align:right}}\
         th:first-child,td:first-child{{text-align:left}}section{{margin:2em 0}}\
         svg{{margin-right:2em;background:#fff}}.axis{{stroke:#444;stroke-width:1}}\
         .note{{color:#666}}</style></head><body>\n<h1>{title}</h1>\n{body}</body></html>\n",
        title = escape(title)
    )
}

/// Plot x and y from values in [0, 1].
fn at(x: f64, y: f64) -> (f64, f64) {
    (
        MARGIN + x.clamp(0.0, 1.0) * PLOT_WIDTH,
        MARGIN + (1.0 - y.clamp(0.0, 1.0)) * PLOT_HEIGHT,
    )
}

fn axes(out: &mut String, x_label: &str, y_label: &str) {
    let (x0, y0) = at(0.0, 0.0);
    let (x1, y1) = at(1.0, 1.0);
    let _ = write!(
        out,
        "<line class=\"axis\" x1=\"{x0}\" y1=\"{y0}\" x2=\"{x1}\" y2=\"{y0}\"/>\
         <line class=\"axis\" x1=\"{x0}\" y1=\"{y0}\" x2=\"{x0}\" y2=\"{y1}\"/>\
         <text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\
         <text x=\"12\" y=\"{}\" transform=\"rotate(-90 12 {})\" text-anchor=\"middle\">{}</text>",
        (x0 + x1) / 2.0,
        y0 + 30.0,
        escape(x_label),
        (y0 + y1) / 2.0,
        (y0 + y1) / 2.0,
        escape(y_label)
    );
    for tick in [0.0, 0.5, 1.0] {
        let (x, _) = at(tick, 0.0);
        let (_, y) = at(0.0, tick);
        let _ = write!(
            out,
            "<text x=\"{x}\" y=\"{}\" text-anchor=\"middle\" font-size=\"11\">{tick}</text>\
             <text x=\"{}\" y=\"{}\" text-anchor=\"end\" font-size=\"11\">{tick}</text>",
            y0 + 14.0,
            x0 - 4.0,
            y + 4.0
        );
    }
}

fn svg_open(out: &mut String, label: &str) {
    let _ = write!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" role=\"img\" aria-label=\"{}\" width=\"{}\" height=\"{}\">",
        escape(label),
        PLOT_WIDTH + 2.0 * MARGIN,
        PLOT_HEIGHT + 2.0 * MARGIN
    );
}

/// The precision-recall curve, with a marker at each threshold (in force: hollow; suggested:
/// filled).
fn curve_svg(out: &mut String, category: &CategoryReport) {
    svg_open(
        out,
        &format!("precision-recall curve of {}", category.category),
    );
    axes(out, "recall", "precision");
    let points: Vec<String> = category
        .curve
        .iter()
        .map(|point| {
            let (x, y) = at(point.recall, point.precision);
            format!("{x:.1},{y:.1}")
        })
        .collect();
    if !points.is_empty() {
        let _ = write!(
            out,
            "<polyline fill=\"none\" stroke=\"{CURVE_COLOUR}\" stroke-width=\"2.5\" points=\"{}\"/>",
            points.join(" ")
        );
    }
    let markers = [
        (&category.review, "review in force", false),
        (&category.reject, "reject in force", false),
    ];
    for (point, title, filled) in markers {
        if let (Some(precision), Some(recall)) = (point.precision, point.recall) {
            marker(out, recall, precision, title, point.threshold, filled);
        }
    }
    for (suggestion, title) in [
        (&category.suggested_review, "suggested review"),
        (&category.suggested_reject, "suggested reject"),
    ] {
        if let Some(point) = &suggestion.at {
            if let (Some(precision), Some(recall)) = (point.precision, point.recall) {
                marker(out, recall, precision, title, point.threshold, true);
            }
        }
    }
    out.push_str("</svg>");
}

fn marker(
    out: &mut String,
    recall: f64,
    precision: f64,
    title: &str,
    threshold: f64,
    filled: bool,
) {
    let (x, y) = at(recall, precision);
    let fill = if filled { "#222" } else { "none" };
    let _ = write!(
        out,
        "<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"5\" fill=\"{fill}\" stroke=\"#222\"><title>{} at {threshold}</title></circle>",
        escape(title)
    );
}

/// The histogram of labelled scores: negatives and positives side by side in each bin.
fn histogram_svg(out: &mut String, category: &CategoryReport) {
    svg_open(out, &format!("score histogram of {}", category.category));
    let histogram = &category.histogram;
    let tallest = histogram
        .positives
        .iter()
        .chain(&histogram.negatives)
        .copied()
        .max()
        .unwrap_or(0)
        .max(1);
    axes(out, "score", "share of the tallest bin");
    let bins = calibrate::HISTOGRAM_BINS as f64;
    let bar = PLOT_WIDTH / bins / 2.0;
    for (bin, (positives, negatives)) in histogram
        .positives
        .iter()
        .zip(&histogram.negatives)
        .enumerate()
    {
        for (side, (count, colour, label)) in [
            (negatives, NEGATIVE_COLOUR, "not harm"),
            (positives, POSITIVE_COLOUR, "harm"),
        ]
        .into_iter()
        .enumerate()
        {
            if *count == 0 {
                continue;
            }
            let (x, _) = at(bin as f64 / bins, 0.0);
            let (_, top) = at(0.0, *count as f64 / tallest as f64);
            let (_, base) = at(0.0, 0.0);
            let _ = write!(
                out,
                "<rect x=\"{:.1}\" y=\"{top:.1}\" width=\"{bar:.1}\" height=\"{:.1}\" fill=\"{colour}\"><title>{count} {label}</title></rect>",
                x + side as f64 * bar,
                base - top
            );
        }
    }
    out.push_str("</svg>");
}

fn ratio(value: Option<f64>) -> String {
    value.map_or("–".to_owned(), |v| format!("{v:.3}"))
}

/// The calibration report as a page.
pub fn calibration(report: &calibrate::Report) -> String {
    let mut body = String::new();
    let _ = write!(
        body,
        "<p>Workflow <b>{}</b> version {}: {} checks, {} with feedback. Review suggested at \
         precision {}, reject at {}.</p>\n<table><tr><th>category</th><th>labelled</th><th>harm</th>\
         <th>AUPRC</th><th>review in force (P / R)</th><th>reject in force (P / R)</th>\
         <th>suggested review</th><th>suggested reject</th></tr>",
        escape(&report.workflow),
        report.version,
        report.checks,
        report.with_feedback,
        report.precision,
        report.reject_precision
    );
    let at = |point: &calibrate::AtThreshold| {
        format!(
            "{} ({} / {})",
            point.threshold,
            ratio(point.precision),
            ratio(point.recall)
        )
    };
    let suggestion = |s: &calibrate::Suggestion| match &s.kept_because {
        None => s.at.as_ref().map_or(s.threshold.to_string(), at),
        Some(why) => format!(
            "{} <span class=\"note\">kept: {}</span>",
            s.threshold,
            escape(why)
        ),
    };
    for category in &report.categories {
        let _ = write!(
            body,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&category.category),
            category.labelled,
            category.positives,
            ratio(category.auprc),
            at(&category.review),
            at(&category.reject),
            suggestion(&category.suggested_review),
            suggestion(&category.suggested_reject)
        );
    }
    body.push_str("</table>\n");
    for category in report.categories.iter().filter(|c| c.labelled > 0) {
        let _ = write!(body, "<section><h2>{}</h2>", escape(&category.category));
        curve_svg(&mut body, category);
        histogram_svg(&mut body, category);
        body.push_str(
            "<p class=\"note\">Circles: the thresholds in force (hollow) and suggested \
             (filled). Bars: labelled checks by score, not harm (grey) and harm (red).</p></section>\n",
        );
    }
    page(
        &format!("Calibration of workflow {}", report.workflow),
        &body,
    )
}

/// The replay report as a page.
pub fn replay(report: &replay::Report) -> String {
    let actions = ["accept", "review", "reject"];
    let mut body = String::new();
    let _ = write!(
        body,
        "<p>Workflow <b>{}</b>: {} checks replayed, {} flip.</p>\n<table><tr><th>before \\ after</th>",
        escape(&report.workflow),
        report.checks,
        report.flipped
    );
    for action in actions {
        let _ = write!(body, "<th>{action}</th>");
    }
    body.push_str("</tr>");
    for before in actions {
        let _ = write!(body, "<tr><td>{before}</td>");
        for after in actions {
            let count = report
                .matrix
                .get(before)
                .and_then(|row| row.get(after))
                .copied()
                .unwrap_or(0);
            let style = if before != after && count > 0 {
                " style=\"background:#fde2e0\""
            } else {
                ""
            };
            let _ = write!(body, "<td{style}>{count}</td>");
        }
        body.push_str("</tr>");
    }
    body.push_str(
        "</table>\n<h2>Flips</h2><table><tr><th>flip</th><th>checks</th><th>for example</th></tr>",
    );
    for (kind, flips) in &report.flips {
        let _ = write!(
            body,
            "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(kind),
            flips.count,
            escape(&flips.samples.join(" "))
        );
    }
    body.push_str("</table>\n<h2>By category</h2><table><tr><th>category</th><th>decides more</th><th>decides less</th></tr>");
    for (category, flips) in &report.categories {
        let _ = write!(
            body,
            "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(category),
            flips.up,
            flips.down
        );
    }
    body.push_str("</table>\n");
    page(&format!("Replay of workflow {}", report.workflow), &body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped() {
        assert_eq!(
            escape("<a href='x'>&\"</a>"),
            "&lt;a href=&#39;x&#39;&gt;&amp;&quot;&lt;/a&gt;"
        );
    }

    #[test]
    fn a_replay_page_holds_its_matrix() {
        let workflow: crate::workflow::WorkflowDef = toml::from_str(
            "description = 'x'\n[categories]\nhate = { review = 0.5, reject = 0.9 }\n",
        )
        .expect("workflow");
        let mut runner = replay::Replay::new("w<1>", &workflow);
        runner.add("a", "accept", &[("hate".to_owned(), 0.6)], &workflow);
        let page = super::replay(&runner.finish());
        assert!(page.contains("Replay of workflow w&lt;1&gt;"));
        assert!(page.contains("<td>accept -&gt; review</td><td>1</td>"));
        assert!(!page.contains("<script"));
    }
}
