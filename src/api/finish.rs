//! The end of every check, whatever route it came by: the decision from the scores and the
//! workflow's thresholds, the summary the journal records ([`super::request::RequestNotes::check`]),
//! and the answer in the route's shape (Answer on the native routes, CompatAnswer on the
//! compatible ones, with the gateway's clock for `request.timestamp`). The journal record
//! itself is written by [`super::handle`] from the notes, for checks and refusals alike.

use super::answer::{check_answer, CheckAnswer, Shape};
use super::context::Context;
use super::request::{CheckSummary, RequestNotes};
use crate::checks::board::ScoreBoard;
use crate::decision::decide;
use crate::http::response::Response;
use crate::route::Route;
use crate::store::records::WorkflowRecord;

pub fn finish_check(
    cx: &Context,
    notes: &mut RequestNotes,
    workflow: &WorkflowRecord,
    board: &ScoreBoard,
    request_id: &str,
) -> Response {
    let decision = decide(&workflow.definition, board);
    let shape = if notes.route.is_some_and(Route::is_compat) {
        Shape::Compat {
            unix_ms: cx.now_ms(),
        }
    } else {
        Shape::Native
    };
    let answer = check_answer(&CheckAnswer {
        workflow,
        decision: &decision,
        request_id,
        reference: notes.reference.as_deref(),
        time_ms: notes.started.elapsed().as_millis() as u64,
        shape,
        properties: board.measured.properties.as_ref(),
        qr_codes: board.measured.qr_codes.as_deref(),
        faces: board.measured.faces.as_deref(),
        text_lines: board.measured.text_lines.as_deref(),
        language: board.language.as_ref().map(Option::as_ref),
        list_matches: board
            .lists_consulted
            .then_some(board.list_matches.as_slice()),
        image_hashes: board.measured.hashes.as_ref(),
    });
    // After the answer, the journal's summary takes the decision's scores instead of a copy.
    notes.check = Some(CheckSummary::taking(workflow, decision));
    answer
}
