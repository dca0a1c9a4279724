//! Sightengine's `GET|POST /1.0/check.json`, so that its SDKs (PyPI and npm `sightengine`)
//! work against modgate with only DNS changed.
//!
//! The image comes as on `/1.0/check-workflow.json` (`media` in a form, or `url`; the key as
//! `api_secret`, [`workflow_image::receive`]) and is checked by the `default` workflow's
//! image checks (or the `workflow` field's). `models` names what to answer, and only what this
//! server can honestly score or measure is accepted ([`SUPPORTED_MODELS`]); any other model is
//! refused with the compatible error envelope, naming it and the supported ones:
//!
//! - `nudity`: `raw` is modgate's `nudity` (open-NSFW and nsfwjs), `partial` its `suggestive`
//!   (nsfwjs), `safe` is 1 minus the larger of the two.
//! - `nudity-2.0`, `nudity-2.1`: every class of Sightengine's documented nudity-2.1 answer,
//!   each a number in [0, 1], so that a client that reads any of them works unchanged
//!   (`NudityV2::derive`). modgate's models measure explicit nudity (open-NSFW's nsfw,
//!   nsfwjs's Porn: modgate's `nudity`, the larger), suggestive content (nsfwjs's Sexy:
//!   `suggestive`) and drawn nudity (nsfwjs's Hentai: `drawn_nudity`); nsfwjs's Drawing and
//!   Neutral are what is left (`none`). They do not measure Sightengine's finer classes, so
//!   most classes are approximations, each the score of the measure that covers it:
//!   - measured: `sexual_display` is `nudity`, `suggestive` is `suggestive`, `none` is 1
//!     minus the larger of the two;
//!   - approximations: `sexual_activity`, `erotica` and `sextoy` (in `suggestive_classes`,
//!     and at the top level, where version 2.0 lists it) are `nudity` (no model here tells
//!     activity from display from bare skin);
//!   - approximations: `very_suggestive`, `mildly_suggestive` and every garment, pose and
//!     focus class of `suggestive_classes` (`bikini`, `cleavage` and its
//!     `cleavage_categories`, `lingerie`, `male_chest` and its `male_chest_categories`,
//!     `male_underwear`, `miniskirt`, `minishort`, `swimwear_one_piece`, `swimwear_male`,
//!     `visibly_undressed`, `suggestive_focus`, `suggestive_pose`, `other`) are `suggestive`
//!     (nothing here tells which garment); each categories object's `none` is 1 minus it;
//!   - approximations: `nudity_art` and `schematic` are `drawn_nudity`;
//!   - not measured: `context` (`sea_lake_pool`, `outdoor_other`, `indoor_other`) is 1/3
//!     each, so a rule that relaxes on a context (a bikini at the beach) never fires.
//!
//!   Sightengine's classes of one group sum to about 1 (its model weighs the most explicit
//!   class that applies); these do not: a threshold on any class catches what its measure
//!   sees. nsfwjs runs for these versions whatever the workflow names (Hentai is its class).
//! - `type`: `illustration` is nsfwjs's drawing classes (Drawing plus Hentai, modgate's
//!   `illustration`), `photo` is 1 minus it. nsfwjs runs for it whatever the workflow names.
//! - `properties`: `sharpness`, `brightness`, `contrast` and `colors`, measured from the
//!   pixels ([`crate::image::properties`]), at the answer's top level as Sightengine's are.
//! - `qr-content`: `qr.link`, `qr.personal` and `qr.profanity`, the matches of every QR code's
//!   payload as `/1.0/text/check.json` lists them (`type`, `match`, and `intensity` for
//!   profanity; no positions). Sightengine's `category` of a link (unsafe sites) and its `spam`
//!   list have nothing behind them here and are absent.
//! - `text-content`: `text.link`, `text.personal` and `text.profanity`, the matches of the
//!   text read in the image ([`crate::checks::ocr`]: its lines joined, one a line), listed as
//!   for `qr-content`. Sightengine's other rule categories (`extremism`, `drug`, `spam`, ...)
//!   have no list here and are absent.
//! - `faces`: `faces`, each face's box (`x1`, `y1`, `x2`, `y2`) and `features` (`left_eye`,
//!   `right_eye`, `nose_tip`, `left_mouth_corner`, `right_mouth_corner`, each `{x, y}`), in
//!   fractions of the width and height as Sightengine gives them, from the `faces` check
//!   ([`crate::checks::faces`]), plus modgate's `score` per face. Sightengine's `attributes`
//!   (age group, sunglasses) have no model here and are absent.
//! - a model an operator's own classifier answers (`[[models.custom]]` with `sightengine`,
//!   [`custom::SightengineModel`]): its object holds the declared fields, each a dotted path
//!   read from one of that model's categories, and nothing else. A declaration cannot take
//!   over one of the models above ([`check_declared_models`], at start).
//!
//! The organization's lists (`ListAsks`):
//!
//! - `add_to_list=NAME` (with an optional `custom_id`), as Sightengine documents it, adds the
//!   image's hashes to the organization's list `NAME` (the key needs the `lists` scope; names
//!   are modgate's list names, not Sightengine's `ili_` ids). The answer's `added_to_list`
//!   (modgate's own field: Sightengine's answer to it is not documented where this was
//!   written) says what was added, as `/v1/lists/{name}/entries` does.
//! - `lists=a,b` (modgate's own) names lists to look the image up in; the workflow's lists
//!   are consulted too when its `hashlist` check runs (for `nudity`). The answer's
//!   `list_matches` (modgate's own field) gives each list's best match, as `/v1/image` does;
//!   the scores are not changed by a match (the caller decides what a block or allow match
//!   means for them). Sightengine's own way to match its lists is not known here, so none is
//!   imitated.
//!
//! With `add_to_list` or `lists`, `models` may be left out.
//!
//! Only the checks the models need run: `properties` alone decodes the image and runs no model.
//! `models` is read once the image is received (a refusal of it comes after the upload or the
//! download). `request.operations` counts the models answered. The quota counts the request
//! as one check, or, under a plan with `quota_counts = "operations"`, as its operations (one
//! for a request naming no model), reserved once `models` is read: 429 `quota_exceeded` when
//! they are not all left, before any model runs.

pub mod text;
pub mod workflow_image;
pub mod workflow_text;

use serde::Serialize;

use crate::api::answer::Matches;
use crate::api::context::Context;
use crate::api::envelope::{json_response, CompatRequest};
use crate::api::form::ListFields;
use crate::api::image::score_image_with;
use crate::api::lists::{add_image_hashes, require_lists_scope, AddedView};
use crate::api::request::{scored, CheckSummary, RequestNotes};
use crate::checks::categories::{DRAWN_NUDITY, ILLUSTRATION};
use crate::checks::custom::{self, SightengineAnswer};
use crate::checks::{faces, nsfwjs, ocr, qr, registry};
use crate::decision::decide;
use crate::error::ErrorKind;
use crate::error::{ApiError, ApiResult};
use crate::http::conn::Exchange;
use crate::http::response::Response;
use crate::image::faces::FoundFace;
use crate::image::properties::Properties;
use futures_lite::{AsyncRead, AsyncWrite};
use text::RuleMatches;
use workflow_image::receive;

/// The models this route answers.
pub const SUPPORTED_MODELS: &[&str] = &[
    "nudity",
    "nudity-2.0",
    "nudity-2.1",
    "properties",
    "type",
    "qr-content",
    "text-content",
    "faces",
];

/// The version of `nudity` asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Nudity {
    V1,
    V2,
}

/// Refuses a declared model (`[[models.custom]]`'s `sightengine`) that would answer one of
/// this route's own models: checked once at start.
pub fn check_declared_models() -> Result<(), String> {
    match custom::sightengine_models().find(|model| SUPPORTED_MODELS.contains(model)) {
        Some(model) => Err(format!(
            "models.custom: sightengine model '{model}' is answered by this server's own models"
        )),
        None => Ok(()),
    }
}

/// Every model this route answers: its own, then the declared ones.
fn answered_models() -> String {
    SUPPORTED_MODELS
        .iter()
        .copied()
        .chain(custom::sightengine_models())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The models a request asks for.
#[derive(Debug, Default, PartialEq)]
struct Asked {
    nudity: Option<Nudity>,
    properties: bool,
    /// `type`: photo or illustration.
    kind: bool,
    /// `qr-content`: what the QR codes carry.
    qr: bool,
    /// `text-content`: what the text written in the image says.
    text: bool,
    /// `faces`: the faces and their landmarks.
    faces: bool,
    /// Models the operator's own classifiers answer.
    declared: Vec<&'static SightengineAnswer>,
}

impl Asked {
    /// `request.operations`: one per model answered.
    fn operations(&self) -> u32 {
        u32::from(self.nudity.is_some())
            + u32::from(self.properties)
            + u32::from(self.kind)
            + u32::from(self.qr)
            + u32::from(self.text)
            + u32::from(self.faces)
            + self.declared.len() as u32
    }

    /// The image checks that answer them: the workflow's for `nudity`, nsfwjs for `type` and
    /// `nudity-2.x`, the `properties` measurement.
    fn checks(&self, workflow_checks: &[String]) -> Vec<String> {
        let mut checks = Vec::new();
        if self.nudity.is_some() {
            checks.extend(workflow_checks.iter().cloned());
        }
        // `type` reads nsfwjs's drawing classes, `nudity-2.x` its Hentai class too.
        let nsfwjs = self.kind || self.nudity == Some(Nudity::V2);
        if nsfwjs && !checks.iter().any(|check| check == nsfwjs::SOURCE) {
            checks.push(nsfwjs::SOURCE.to_owned());
        }
        if self.properties {
            checks.push(registry::PROPERTIES.name.to_owned());
        }
        if self.qr {
            checks.push(qr::SOURCE.to_owned());
        }
        if self.text {
            checks.push(ocr::SOURCE.to_owned());
        }
        if self.faces {
            checks.push(faces::SOURCE.to_owned());
        }
        for declared in &self.declared {
            if !checks.iter().any(|check| check == declared.check) {
                checks.push(declared.check.to_owned());
            }
        }
        checks
    }
}

#[derive(Serialize)]
#[serde(untagged)]
enum NudityAnswer {
    V1 { raw: f64, safe: f64, partial: f64 },
    V2(Box<NudityV2>),
}

/// `nudity-2.0` and `nudity-2.1`: every class of Sightengine's nudity-2.1 answer, each from
/// what modgate's models measure (the module doc gives the mapping and which classes are
/// approximations). Sightengine's classes of one group sum to about 1 (its model puts the
/// weight on the most explicit class that applies); here each class carries the score of
/// the measure that covers it, so that a client's threshold on any of them catches what that
/// measure sees.
#[derive(Serialize, Debug, PartialEq)]
struct NudityV2 {
    sexual_activity: f64,
    sexual_display: f64,
    erotica: f64,
    /// Version 2.0 lists it among its explicit classes; 2.1 among `suggestive_classes`.
    sextoy: f64,
    very_suggestive: f64,
    suggestive: f64,
    mildly_suggestive: f64,
    suggestive_classes: SuggestiveClasses,
    none: f64,
    context: NudityContext,
}

#[derive(Serialize, Debug, PartialEq)]
struct SuggestiveClasses {
    bikini: f64,
    cleavage: f64,
    cleavage_categories: CleavageCategories,
    lingerie: f64,
    male_chest: f64,
    male_chest_categories: MaleChestCategories,
    male_underwear: f64,
    miniskirt: f64,
    minishort: f64,
    nudity_art: f64,
    schematic: f64,
    sextoy: f64,
    suggestive_focus: f64,
    suggestive_pose: f64,
    swimwear_male: f64,
    swimwear_one_piece: f64,
    visibly_undressed: f64,
    other: f64,
}

#[derive(Serialize, Debug, PartialEq)]
struct CleavageCategories {
    very_revealing: f64,
    revealing: f64,
    none: f64,
}

#[derive(Serialize, Debug, PartialEq)]
struct MaleChestCategories {
    very_revealing: f64,
    revealing: f64,
    slightly_revealing: f64,
    none: f64,
}

/// Where the picture was taken: no model here measures it.
#[derive(Serialize, Debug, PartialEq)]
struct NudityContext {
    sea_lake_pool: f64,
    outdoor_other: f64,
    indoor_other: f64,
}

/// Each context class when nothing measured the scene: the three share it evenly, so that a
/// rule that relaxes on a context (a bikini at the beach) never fires on a guess.
const CONTEXT_UNMEASURED: f64 = 1.0 / 3.0;

impl NudityV2 {
    /// The classes from modgate's `nudity` (`explicit`: the larger of open-NSFW's nsfw and
    /// nsfwjs's Porn), `suggestive` (nsfwjs's Sexy) and `drawn_nudity` (`drawn`: nsfwjs's
    /// Hentai), each in [0, 1].
    fn derive(explicit: f64, suggestive: f64, drawn: f64) -> NudityV2 {
        let covered = |score: f64| 1.0 - score;
        NudityV2 {
            sexual_activity: explicit,
            sexual_display: explicit,
            erotica: explicit,
            sextoy: explicit,
            very_suggestive: suggestive,
            suggestive,
            mildly_suggestive: suggestive,
            suggestive_classes: SuggestiveClasses {
                bikini: suggestive,
                cleavage: suggestive,
                cleavage_categories: CleavageCategories {
                    very_revealing: suggestive,
                    revealing: suggestive,
                    none: covered(suggestive),
                },
                lingerie: suggestive,
                male_chest: suggestive,
                male_chest_categories: MaleChestCategories {
                    very_revealing: suggestive,
                    revealing: suggestive,
                    slightly_revealing: suggestive,
                    none: covered(suggestive),
                },
                male_underwear: suggestive,
                miniskirt: suggestive,
                minishort: suggestive,
                nudity_art: drawn,
                schematic: drawn,
                sextoy: explicit,
                suggestive_focus: suggestive,
                suggestive_pose: suggestive,
                swimwear_male: suggestive,
                swimwear_one_piece: suggestive,
                visibly_undressed: suggestive,
                other: suggestive,
            },
            none: covered(explicit.max(suggestive)),
            context: NudityContext {
                sea_lake_pool: CONTEXT_UNMEASURED,
                outdoor_other: CONTEXT_UNMEASURED,
                indoor_other: CONTEXT_UNMEASURED,
            },
        }
    }
}

/// `qr-content` and `text-content`: the rule matches of every QR code's payload, or of the
/// image's text, by category.
#[derive(Serialize, Default)]
struct RuleAnswer<'a> {
    link: Vec<RuleMatch<'a>>,
    personal: Vec<RuleMatch<'a>>,
    profanity: Vec<RuleMatch<'a>>,
}

#[derive(Serialize)]
struct RuleMatch<'a> {
    #[serde(rename = "type")]
    kind: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    intensity: Option<&'static str>,
    #[serde(rename = "match")]
    matched: &'a str,
}

#[derive(Serialize)]
struct TypeAnswer {
    photo: f64,
    illustration: f64,
}

#[derive(Serialize)]
struct Answer<'a> {
    status: &'static str,
    request: CompatRequest<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    nudity: Option<NudityAnswer>,
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    kind: Option<TypeAnswer>,
    #[serde(skip_serializing_if = "Option::is_none")]
    qr: Option<RuleAnswer<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    text: Option<RuleAnswer<'a>>,
    /// `faces`: Sightengine's boxes and `features` (no `attributes`: nothing here measures them).
    #[serde(skip_serializing_if = "Option::is_none")]
    faces: Option<&'a [FoundFace]>,
    /// `sharpness`, `brightness`, `contrast` and `colors`, at the top level as Sightengine
    /// answers them.
    #[serde(flatten)]
    properties: Option<&'a Properties>,
    /// The declared models' objects, by model name.
    #[serde(flatten)]
    declared: Fields,
    /// modgate's: each consulted list's best match, as on `/v1/image` (present when lists
    /// were consulted).
    #[serde(skip_serializing_if = "Option::is_none")]
    list_matches: Option<Matches<'a>>,
    /// modgate's: what `add_to_list` added.
    #[serde(skip_serializing_if = "Option::is_none")]
    added_to_list: Option<AddedToList<'a>>,
    media: Media<'a>,
}

#[derive(Serialize)]
struct Media<'a> {
    id: &'a str,
    uri: Option<&'a str>,
}

/// Lists a request names in `lists` at most.
pub const LISTS_PER_REQUEST_MAX: usize = 16;

/// What a request asks of the organization's lists: the lists to consult (those of `lists`,
/// then the workflow's when its `hashlist` check runs for `nudity`) and the list to add the
/// image to.
#[derive(Debug, Default, PartialEq)]
struct ListAsks {
    consult: Vec<String>,
    add_to: Option<String>,
    custom_id: Option<String>,
}

impl ListAsks {
    fn parse(
        fields: &ListFields,
        asked: &Asked,
        workflow: &crate::workflow::WorkflowDef,
    ) -> ApiResult<ListAsks> {
        let mut consult = Vec::new();
        if let Some(names) = &fields.lists {
            for name in names.split(',').map(str::trim) {
                crate::lists::validate_name(name)
                    .map_err(|why| ApiError::bad_request(format!("`lists`: {why}")))?;
                if !consult.iter().any(|known| known == name) {
                    // Checked as the names come, so a long field costs no more than 16 names.
                    if consult.len() == LISTS_PER_REQUEST_MAX {
                        return Err(ApiError::bad_request(format!(
                            "`lists` names at most {LISTS_PER_REQUEST_MAX} lists"
                        )));
                    }
                    consult.push(name.to_owned());
                }
            }
        }
        let hashlist = registry::HASHLIST.name;
        if asked.nudity.is_some() && workflow.image_checks.iter().any(|check| check == hashlist) {
            for name in &workflow.lists {
                if !consult.contains(name) {
                    consult.push(name.clone());
                }
            }
        }
        if let Some(name) = &fields.add_to_list {
            crate::lists::validate_name(name)
                .map_err(|why| ApiError::bad_request(format!("`add_to_list`: {why}")))?;
        }
        if let Some(id) = &fields.custom_id {
            if fields.add_to_list.is_none() {
                return Err(ApiError::bad_request(
                    "`custom_id` names the entry `add_to_list` adds: send both",
                ));
            }
            crate::lists::validate_entry_text("custom_id", &Some(id.clone()))
                .map_err(ApiError::bad_request)?;
        }
        Ok(ListAsks {
            consult,
            add_to: fields.add_to_list.clone(),
            custom_id: fields.custom_id.clone(),
        })
    }

    /// Whether the image must be hashed.
    fn hashes(&self) -> bool {
        !self.consult.is_empty() || self.add_to.is_some()
    }
}

/// `added_to_list`: what `add_to_list` added.
#[derive(Serialize)]
struct AddedToList<'a> {
    list: &'a str,
    #[serde(flatten)]
    entries: AddedView<'a>,
}

pub async fn check<S: AsyncRead + AsyncWrite + Unpin>(
    cx: &Context,
    exchange: &mut Exchange<'_, S>,
    notes: &mut RequestNotes,
) -> ApiResult<Response> {
    let received = receive(cx, exchange, notes).await?;
    let fields = &received.list_fields;
    let lists_only = fields.add_to_list.is_some() || fields.lists.is_some();
    let asked = match (received.models.as_deref(), lists_only) {
        // Adding an image to a list, or looking it up in lists, asks for no model.
        (None, true) => Asked::default(),
        (models, _) => parse_models(models)?,
    };
    let workflow = received.workflow.clone();
    let lists = ListAsks::parse(&received.list_fields, &asked, &workflow.definition)?;
    if lists.add_to.is_some() {
        require_lists_scope(&received.caller)?;
    }
    // Before any model runs: a plan counting operations is charged one unit per model.
    notes.charge_operations(cx, asked.operations()).await?;
    let mut checks = asked.checks(&workflow.definition.image_checks);
    let hashlist = registry::HASHLIST.name;
    if lists.hashes() && !checks.iter().any(|check| check == hashlist) {
        checks.push(hashlist.to_owned());
    }
    let board = score_image_with(
        cx,
        &received.caller,
        &checks,
        &lists.consult,
        received.bytes,
    )
    .await?;
    let added = match &lists.add_to {
        Some(name) => {
            let hashes = board
                .measured
                .hashes
                .as_ref()
                .ok_or_else(|| ApiError::internal("the image was not hashed"))?;
            Some(
                add_image_hashes(cx, &received.caller, name, hashes, lists.custom_id.clone())
                    .await?,
            )
        }
        None => None,
    };
    let decision = decide(&workflow.definition, &board);
    notes.check = Some(CheckSummary::of(&workflow, &decision));
    let nudity = match asked.nudity {
        Some(version) => {
            let nudity = scored(&board, "nudity")?;
            let suggestive = scored(&board, "suggestive")?;
            let clean = 1.0 - nudity.max(suggestive);
            Some(match version {
                Nudity::V1 => NudityAnswer::V1 {
                    raw: nudity,
                    safe: clean,
                    partial: suggestive,
                },
                Nudity::V2 => NudityAnswer::V2(Box::new(NudityV2::derive(
                    nudity,
                    suggestive,
                    scored(&board, DRAWN_NUDITY)?,
                ))),
            })
        }
        None => None,
    };
    let kind = match asked.kind {
        true => {
            let illustration = scored(&board, ILLUSTRATION)?;
            Some(TypeAnswer {
                photo: 1.0 - illustration,
                illustration,
            })
        }
        false => None,
    };
    let properties = match asked.properties {
        true => Some(board.measured.properties.as_ref().ok_or_else(|| {
            ApiError::internal("the image's properties were asked for and not measured")
        })?),
        false => None,
    };
    let qr_codes = match asked.qr {
        true => Some(board.measured.qr_codes.as_deref().ok_or_else(|| {
            // The reader refuses images tiled with finder-like patterns (crate::image::qr):
            // an empty list would say "no QR code", which was not checked.
            ApiError::bad_request(format!(
                "the QR codes of this image cannot be read: it holds more than {} \
                 finder-like patterns",
                crate::image::qr::FINDER_CANDIDATES_MAX
            ))
        })?),
        false => None,
    };
    let qr = qr_codes.map(|codes| {
        let mut answer = RuleAnswer::default();
        for code in codes {
            answer.add(cx, &code.payload);
        }
        answer
    });
    let image_text = match asked.text {
        true => Some(ocr::joined(&board.measured).ok_or_else(|| {
            ApiError::new(
                crate::error::ErrorKind::WorkflowUnavailable,
                "the OCR models are not installed on this server",
            )
            .with_retry_after(60)
        })?),
        false => None,
    };
    let text = image_text.as_deref().map(|text| {
        let mut answer = RuleAnswer::default();
        answer.add(cx, text);
        answer
    });
    let faces = match asked.faces {
        true => Some(board.measured.faces.as_deref().ok_or_else(|| {
            ApiError::new(
                crate::error::ErrorKind::WorkflowUnavailable,
                "the face detector is not installed on this server",
            )
            .with_retry_after(60)
        })?),
        false => None,
    };
    let mut declared = Fields::default();
    for answer in &asked.declared {
        declared.0.push((
            answer.model,
            Field::Object(declared_answer(&board, answer)?),
        ));
    }
    let request_id = exchange.request_id.as_str();
    let media_id = format!("med_{request_id}");
    Ok(json_response(
        200,
        &Answer {
            status: "success",
            request: CompatRequest {
                id: request_id,
                timestamp: cx.now_ms() as f64 / 1000.0,
                operations: asked.operations(),
            },
            nudity,
            kind,
            qr,
            text,
            faces,
            properties,
            declared,
            list_matches: (!lists.consult.is_empty()).then(|| Matches(&board.list_matches)),
            added_to_list: match (&lists.add_to, &added) {
                (Some(list), Some(added)) => Some(AddedToList {
                    list,
                    entries: AddedView::of(added),
                }),
                _ => None,
            },
            media: Media {
                id: &media_id,
                uri: received.uri.as_deref(),
            },
        },
    ))
}

/// The rule matches of the QR codes' payloads, as `/1.0/text/check.json` finds them.
impl<'a> RuleAnswer<'a> {
    /// Adds the rule matches of `text`.
    fn add(&mut self, cx: &Context, text: &'a str) {
        let found = RuleMatches::all(cx, text);
        for (matches, list) in [
            (found.link, &mut self.link),
            (found.personal, &mut self.personal),
            (found.profanity, &mut self.profanity),
        ] {
            list.extend(
                matches
                    .into_iter()
                    .flat_map(|m| m.matches)
                    .map(|m| RuleMatch {
                        kind: m.kind,
                        intensity: m.intensity,
                        matched: m.matched,
                    }),
            );
        }
    }
}

/// A field of a declared model's object: a score, or an object of fields.
#[derive(Debug)]
enum Field {
    Score(f64),
    Object(Fields),
}

/// Fields by name, in the order they were declared.
#[derive(Debug, Default)]
struct Fields(Vec<(&'static str, Field)>);

impl Serialize for Field {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Field::Score(score) => serializer.serialize_f64(*score),
            Field::Object(fields) => fields.serialize(serializer),
        }
    }
}

impl Serialize for Fields {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (name, field) in &self.0 {
            map.serialize_entry(name, field)?;
        }
        map.end()
    }
}

/// A declared model's object: each field's category score at its path. A category the model
/// could not score here (a failed run) is an error, not a made-up number.
fn declared_answer(
    board: &crate::checks::board::ScoreBoard,
    answer: &SightengineAnswer,
) -> ApiResult<Fields> {
    let mut root = Fields::default();
    for (path, category) in &answer.fields {
        let score = scored(board, category)?;
        let Some((last, parents)) = path.split_last() else {
            continue;
        };
        let mut node = &mut root;
        for parent in parents {
            let at = match node.0.iter().position(|(name, _)| name == parent) {
                Some(at) => at,
                None => {
                    node.0.push((parent, Field::Object(Fields::default())));
                    node.0.len() - 1
                }
            };
            // Validated at start: a path is never both a score and an object.
            let Field::Object(next) = &mut node.0[at].1 else {
                return Err(ApiError::internal(
                    "a declared Sightengine field is both a score and an object",
                ));
            };
            node = next;
        }
        node.0.push((last, Field::Score(score)));
    }
    Ok(root)
}

/// The `models` asked for.
fn parse_models(models: Option<&str>) -> ApiResult<Asked> {
    let models = models.ok_or_else(|| {
        ApiError::bad_request(format!(
            "`models` is required: this server answers {}",
            answered_models()
        ))
    })?;
    let mut asked = Asked::default();
    for model in models.split(',').map(str::trim) {
        let version = match model {
            "nudity" => Nudity::V1,
            "nudity-2.0" | "nudity-2.1" => Nudity::V2,
            "properties" => {
                asked.properties = true;
                continue;
            }
            "type" => {
                asked.kind = true;
                continue;
            }
            "qr-content" => {
                asked.qr = true;
                continue;
            }
            "faces" => {
                asked.faces = true;
                continue;
            }
            "text-content" => {
                asked.text = true;
                continue;
            }
            other => {
                if let Some(declared) = custom::sightengine_answer(other) {
                    if !asked
                        .declared
                        .iter()
                        .any(|known| known.model == declared.model)
                    {
                        asked.declared.push(declared);
                    }
                    continue;
                }
                let shown: String = other.chars().take(40).collect();
                return Err(ApiError::bad_request(format!(
                    "model `{shown}` is not available on this server: it answers {}",
                    answered_models()
                )));
            }
        };
        if asked.nudity.is_some_and(|known| known != version) {
            return Err(ApiError::bad_request(
                "ask for one version of `nudity`: both answer in the same `nudity` object",
            ));
        }
        asked.nudity = Some(version);
    }
    Ok(asked)
}

/// Sightengine's documented nudity-2.1 answer: every class, by its dotted path (what the
/// tests hold every answer of versions 2.0 and 2.1 to).
pub const NUDITY_2_1_CLASSES: &[&str] = &[
    "sexual_activity",
    "sexual_display",
    "erotica",
    "very_suggestive",
    "suggestive",
    "mildly_suggestive",
    "suggestive_classes.bikini",
    "suggestive_classes.cleavage",
    "suggestive_classes.cleavage_categories.very_revealing",
    "suggestive_classes.cleavage_categories.revealing",
    "suggestive_classes.cleavage_categories.none",
    "suggestive_classes.lingerie",
    "suggestive_classes.male_chest",
    "suggestive_classes.male_chest_categories.very_revealing",
    "suggestive_classes.male_chest_categories.revealing",
    "suggestive_classes.male_chest_categories.slightly_revealing",
    "suggestive_classes.male_chest_categories.none",
    "suggestive_classes.male_underwear",
    "suggestive_classes.miniskirt",
    "suggestive_classes.minishort",
    "suggestive_classes.nudity_art",
    "suggestive_classes.schematic",
    "suggestive_classes.sextoy",
    "suggestive_classes.suggestive_focus",
    "suggestive_classes.suggestive_pose",
    "suggestive_classes.swimwear_male",
    "suggestive_classes.swimwear_one_piece",
    "suggestive_classes.visibly_undressed",
    "suggestive_classes.other",
    "none",
    "context.sea_lake_pool",
    "context.outdoor_other",
    "context.indoor_other",
];

/// The `error.type` Sightengine documents for a kind of refusal: what `/1.0/check.json` and
/// `/1.0/text/check.json` answer, so that code written against Sightengine
/// (`if error.type == "usage_limit"`) keeps working. The HTTP status is modgate's either way.
pub const fn error_type(kind: ErrorKind) -> &'static str {
    use ErrorKind::*;
    match kind {
        Unauthorized | Forbidden => "credentials_error",
        OrganizationSuspended => "plan_error",
        // On these routes a 404 is a list that `add_to_list` names and that does not exist.
        BadRequest | UnknownWorkflow | TextTooLong | Conflict | NotFound => "argument_error",
        UnsupportedMedia | CorruptMedia | BodyTooLarge | ImageTooLarge | UrlRefused => {
            "media_error"
        }
        MethodNotAllowed | RequestTimeout | UriTooLong | ExpectationFailed | HeadTooLarge => {
            "request_error"
        }
        RateLimited | TooManyConcurrent | QuotaExceeded => "usage_limit",
        WorkflowUnavailable | Busy | Internal => "api_error",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_one_of_sightengines_documented_types() {
        const DOCUMENTED: [&str; 9] = [
            "api_error",
            "argument_error",
            "callback_error",
            "credentials_error",
            "media_error",
            "plan_error",
            "request_error",
            "unknown_error",
            "usage_limit",
        ];
        for kind in ErrorKind::ALL {
            assert!(DOCUMENTED.contains(&error_type(kind)), "{kind:?}");
        }
    }
    use proptest::prelude::*;

    #[test]
    fn models_are_read_or_refused() {
        let nudity = |version| Asked {
            nudity: Some(version),
            ..Asked::default()
        };
        assert_eq!(parse_models(Some("nudity")).unwrap(), nudity(Nudity::V1));
        assert_eq!(
            parse_models(Some("nudity-2.1, nudity-2.0")).unwrap(),
            nudity(Nudity::V2)
        );
        let all = parse_models(Some("type,nudity-2.1,properties")).unwrap();
        assert_eq!(all.operations(), 3);
        let workflow = vec!["open_nsfw".to_owned(), "nsfwjs".to_owned()];
        assert_eq!(all.checks(&workflow), ["open_nsfw", "nsfwjs", "properties"]);
        let only = parse_models(Some("properties,type")).unwrap();
        assert_eq!((only.nudity, only.operations()), (None, 2));
        assert_eq!(only.checks(&workflow), ["nsfwjs", "properties"]);
        let refused = |models: Option<&str>, says: &str| {
            let message = parse_models(models).unwrap_err().message;
            assert!(message.contains(says), "{message}");
        };
        refused(None, "is required");
        refused(Some("nudity,gore-2.0"), "model `gore-2.0` is not available");
        let text = parse_models(Some("text-content")).unwrap();
        assert_eq!(
            (text.operations(), text.checks(&workflow)),
            (1, vec!["ocr".to_owned()])
        );
        let faces = parse_models(Some("faces,nudity")).unwrap();
        assert_eq!(faces.operations(), 2);
        assert_eq!(faces.checks(&workflow), ["open_nsfw", "nsfwjs", "faces"]);
        refused(Some("nudity,nudity-2.1"), "one version");
        refused(Some(""), "model `` is not available");
        refused(Some(&"é".repeat(100)), "is not available");
    }

    proptest! {
        /// Whatever the models measured, the answer has every documented class, a number in
        /// [0, 1]; the measured classes are the measures themselves.
        #[test]
        fn every_documented_nudity_class_is_a_number(
            explicit in 0.0f64..=1.0,
            suggestive in 0.0f64..=1.0,
            drawn in 0.0f64..=1.0,
        ) {
            let answer = serde_json::to_value(NudityV2::derive(explicit, suggestive, drawn)).unwrap();
            for path in NUDITY_2_1_CLASSES {
                let value = path.split('.').fold(&answer, |node, key| &node[key]);
                let number = value.as_f64();
                prop_assert!(number.is_some_and(|n| (0.0..=1.0).contains(&n)), "{path}: {answer}");
            }
            prop_assert_eq!(answer["sexual_display"].as_f64(), Some(explicit));
            prop_assert_eq!(answer["suggestive"].as_f64(), Some(suggestive));
            prop_assert_eq!(answer["none"].as_f64(), Some(1.0 - explicit.max(suggestive)));
            prop_assert_eq!(answer["suggestive_classes"]["nudity_art"].as_f64(), Some(drawn));
        }
    }

    /// A workflow whose hashlist check consults `known` and `a`.
    fn listing_workflow() -> crate::workflow::WorkflowDef {
        crate::workflow::parse_workflows(
            "[workflows.w]\ndescription = 'w'\nimage_checks = ['hashlist']\nlists = ['known', 'a']\n[workflows.w.categories.known_image]\nreview = 0.5\nreject = 0.9\n",
        )
        .unwrap()
        .remove("w")
        .unwrap()
    }

    #[test]
    fn list_fields_are_read_or_refused() {
        let workflow = listing_workflow();
        let fields = |lists: Option<&str>, add: Option<&str>, id: Option<&str>| ListFields {
            lists: lists.map(str::to_owned),
            add_to_list: add.map(str::to_owned),
            custom_id: id.map(str::to_owned),
        };
        let none = Asked::default();
        let nudity = parse_models(Some("nudity")).unwrap();
        let read = |fields: &ListFields, asked: &Asked| ListAsks::parse(fields, asked, &workflow);
        let asks = read(&fields(Some("a, b,a"), None, None), &none).unwrap();
        assert_eq!(asks.consult, ["a", "b"]);
        assert!(asks.hashes());
        // The workflow's lists join when its hashlist check runs, for `nudity`.
        let asks = read(&fields(Some("b"), None, None), &nudity).unwrap();
        assert_eq!(asks.consult, ["b", "known", "a"]);
        assert!(!read(&fields(None, None, None), &none).unwrap().hashes());
        let asks = read(&fields(None, Some("known"), Some("u-1")), &none).unwrap();
        assert_eq!(
            (asks.add_to.as_deref(), asks.custom_id.as_deref()),
            (Some("known"), Some("u-1"))
        );
        assert!(asks.hashes() && asks.consult.is_empty());
        for (fields, says) in [
            (fields(Some("Bad"), None, None), "`lists`"),
            (fields(Some("a,,b"), None, None), "`lists`"),
            (fields(None, Some("x y"), None), "`add_to_list`"),
            (fields(None, None, Some("u-1")), "send both"),
            (fields(None, Some("k"), Some("a\u{7}")), "custom_id"),
        ] {
            let message = read(&fields, &none).unwrap_err().message;
            assert!(message.contains(says), "{message}");
        }
        let many = (0..17)
            .map(|n| format!("l{n}"))
            .collect::<Vec<_>>()
            .join(",");
        let message = read(&fields(Some(&many), None, None), &none)
            .unwrap_err()
            .message;
        assert!(message.contains("at most 16"), "{message}");
    }

    proptest! {
        #[test]
        fn any_models_are_read_or_refused(models in "\\PC{0,64}") {
            let _ = parse_models(Some(&models));
        }

        #[test]
        fn any_list_fields_are_read_or_refused(
            lists in proptest::option::of("\\PC{0,80}"),
            add in proptest::option::of("\\PC{0,80}"),
            id in proptest::option::of("\\PC{0,300}"),
        ) {
            let workflow = listing_workflow();
            let fields = ListFields { lists, add_to_list: add, custom_id: id };
            if let Ok(asks) = ListAsks::parse(&fields, &Asked::default(), &workflow) {
                prop_assert!(asks.consult.len() <= LISTS_PER_REQUEST_MAX);
            }
        }
    }
}
