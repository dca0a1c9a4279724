//! Sightengine's `POST /1.0/text/check.json`, so that an integration written against its
//! text moderation works against modgate with only the address changed.
//!
//! The form (multipart or URL-encoded, [`crate::api::form`]) carries `text`, `lang`, `mode`, the
//! key as `api_secret` (or a header), and per mode:
//!
//! - `mode=rules` (or `standard`, its older name): `categories`, a comma list of
//!   [`RULE_CATEGORIES`] (all three when absent), and `opt_countries`. The text is checked by
//!   the shipped `text-rules` workflow's checks for the categories asked (and its `termlist`,
//!   when an organization's edit names lists: block terms count in the decision, allow terms
//!   are not profanity), and every match is listed with `type`, `match`, `start` and `end` (and `intensity` for profanity):
//!   - `profanity`: the word list's whole-word matches after normalisation (so `f.u.c.k` and
//!     `$h1t` are found, and `match` is the text as written). `type` is `sexual`,
//!     `discriminatory`, `insult` or `inappropriate` for the hand-classified severe terms
//!     (`checks::wordlist::SEVERE`), and `inappropriate` for the other terms the list rates 2;
//!     `intensity` is `high` for severe terms, `medium` for the others. Sightengine's
//!     `grawlix` type and `low` intensity have no counterpart here and never appear.
//!   - `personal`: the PII scanners' hits: `email`, `phone_number_XX` (XX the country of an
//!     international number's calling code, [`CALLING_CODES`], or `phone_number` for other
//!     codes; North American numbers without one are `phone_number_us` and listed only when
//!     `opt_countries` names `us` or `ca`; it is `us` when absent), `ip` (v4 and v6), and two
//!     types Sightengine does not list: `iban` and `credit_card`. US social security numbers
//!     are not scanned for.
//!   - `link`: the link scanner's URLs and host names, type `url`.
//!
//!   At most [`MATCHES_MAX`] matches per category are listed. `start` and `end` count Unicode
//!   code points, and `end` is the index of the match's last character (inclusive), as in
//!   Sightengine's documented answers. `opt_countries` only filters what is listed: the
//!   journal and the decision count every phone number found.
//! - `mode=ml`: `models`, a comma list of [`ML_MODELS`] (`general` when absent). The harm
//!   classifier (the shipped `text-ml` workflow) scores the classes of the same meaning
//!   ([`ML_CLASSES`]) and `moderation_classes.available` lists them (its `sexual` head was
//!   trained on sexual harassment: the only labelled sexual text found). `models=self-harm`
//!   is still refused: its answer's shape is not implemented here.
//!
//! `lang` must be `en` (the word list and the models read English; absent means `en`). Any
//! other mode, category, model, language or country code is refused with the compatible
//! error envelope, naming what is supported. The request counts as one check.

use std::sync::Arc;

use futures_lite::{AsyncRead, AsyncWrite};
use serde::Serialize;

use super::workflow_text::{form_text, read_text_form};
use crate::api::context::Context;
use crate::api::envelope::{json_response, CompatRequest};
use crate::api::form::Form;
use crate::api::request::{scored, truncated, CheckSummary, RequestNotes};
use crate::checks::board::ScoreBoard;
use crate::checks::{self, links, pii, registry, wordlist};
use crate::content::ContentKind;
use crate::decision::decide;
use crate::error::{ApiError, ApiResult, ErrorKind};
use crate::http::conn::Exchange;
use crate::http::response::Response;
use crate::lists::CompiledList;

/// The workflow that checks `mode=rules`.
pub const RULES_WORKFLOW: &str = "text-rules";
/// The workflow that scores `mode=ml`.
pub const ML_WORKFLOW: &str = "text-ml";
/// The rule categories this route answers, and the check each is read from.
pub const RULE_CATEGORIES: &[(&str, &str)] = &[
    ("profanity", wordlist::SOURCE),
    ("personal", pii::SOURCE),
    ("link", links::SOURCE),
];
/// The ML models this route answers.
pub const ML_MODELS: &[&str] = &["general"];
/// The ML classes answered, and the modgate category each is read from.
pub const ML_CLASSES: &[(&str, &str)] = &[
    ("sexual", "sexual"),
    ("discriminatory", "hate"),
    ("insulting", "harassment"),
    ("violent", "violence"),
    ("toxic", "offensive"),
];
/// Matches listed per category, at most.
pub const MATCHES_MAX: usize = 1_000;
/// Country codes in `opt_countries`, at most.
pub const COUNTRIES_MAX: usize = 64;
/// International calling codes and the country a number under each is typed as (`+1` is
/// the North American plan, typed `us` as Sightengine does).
pub const CALLING_CODES: &[(&str, &str)] = &[
    ("1", "us"),
    ("7", "ru"),
    ("31", "nl"),
    ("32", "be"),
    ("33", "fr"),
    ("34", "es"),
    ("39", "it"),
    ("41", "ch"),
    ("43", "at"),
    ("44", "gb"),
    ("45", "dk"),
    ("46", "se"),
    ("47", "no"),
    ("48", "pl"),
    ("49", "de"),
    ("52", "mx"),
    ("55", "br"),
    ("61", "au"),
    ("64", "nz"),
    ("81", "jp"),
    ("82", "kr"),
    ("86", "cn"),
    ("91", "in"),
    ("351", "pt"),
    ("353", "ie"),
];

/// What the form asks for.
#[derive(Debug, PartialEq)]
enum Mode {
    Rules {
        /// Indexes into [`RULE_CATEGORIES`], in its order.
        categories: Vec<usize>,
        /// Whether North American numbers without a country code are listed.
        north_america: bool,
    },
    Ml,
}

#[derive(Serialize)]
struct RulesAnswer<'a> {
    status: &'static str,
    request: CompatRequest<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    profanity: Option<Matches<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    personal: Option<Matches<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    link: Option<Matches<'a>>,
}

#[derive(Serialize)]
pub(super) struct Matches<'a> {
    pub(super) matches: Vec<Match<'a>>,
}

#[derive(Serialize, Debug, PartialEq)]
pub(super) struct Match<'a> {
    #[serde(rename = "type")]
    pub(super) kind: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) intensity: Option<&'static str>,
    #[serde(rename = "match")]
    pub(super) matched: &'a str,
    start: usize,
    end: usize,
}

#[derive(Serialize)]
struct MlAnswer<'a> {
    status: &'static str,
    request: CompatRequest<'a>,
    moderation_classes: MlClasses,
}

#[derive(Serialize)]
struct MlClasses {
    available: Vec<&'static str>,
    #[serde(flatten)]
    scores: std::collections::BTreeMap<&'static str, f64>,
}

pub async fn check<S: AsyncRead + AsyncWrite + Unpin>(
    cx: &Context,
    exchange: &mut Exchange<'_, S>,
    notes: &mut RequestNotes,
) -> ApiResult<Response> {
    let (form, caller, payload) = read_text_form(cx, exchange, notes).await?;
    let mode = read_mode(&form)?;
    let text = form_text(&form, &payload)?;
    let workflows = cx.workflows()?;
    let name = match mode {
        Mode::Rules { .. } => RULES_WORKFLOW,
        Mode::Ml => ML_WORKFLOW,
    };
    notes.note_workflow(&workflows, name);
    let chars_max = caller.org.limits.text_chars_max as usize;
    if text.len() > chars_max && text.chars().count() > chars_max {
        return Err(ApiError::new(
            ErrorKind::TextTooLong,
            format!("`text` is over the {chars_max} characters of this plan"),
        ));
    }
    let workflow = caller.authorize(ContentKind::Text, name, &workflows)?;
    let checks: Vec<String> = match &mode {
        Mode::Rules { categories, .. } => {
            let wanted: Vec<&str> = categories
                .iter()
                .map(|&index| RULE_CATEGORIES[index].1)
                .collect();
            workflow
                .definition
                .text_checks
                .iter()
                // The word lists' own check too: a block list's terms count in the decision,
                // an allow list's terms are hidden from the profanity matches below.
                .filter(|check| {
                    wanted.contains(&check.as_str()) || check.as_str() == registry::TERMLIST.name
                })
                .cloned()
                .collect()
        }
        Mode::Ml => workflow.definition.text_checks.clone(),
    };
    let lists = cx.lists_of(&caller.org.record.name, &workflow.definition.lists);
    let board = cx.checks.check_text(&checks, &lists, text, None).await?;
    let decision = decide(&workflow.definition, &board);
    notes.check = Some(CheckSummary::of(workflow, &decision));
    let request = CompatRequest {
        id: exchange.request_id.as_str(),
        timestamp: cx.now_ms() as f64 / 1000.0,
        operations: 1,
    };
    Ok(match mode {
        Mode::Rules {
            categories,
            north_america,
        } => {
            let allow = if checks.iter().any(|c| c == registry::TERMLIST.name) {
                lists.as_slice()
            } else {
                &[]
            };
            let found = RuleMatches::find(cx, text, allow, &categories, north_america);
            json_response(
                200,
                &RulesAnswer {
                    status: "success",
                    request,
                    profanity: found.profanity,
                    personal: found.personal,
                    link: found.link,
                },
            )
        }
        Mode::Ml => json_response(
            200,
            &MlAnswer {
                status: "success",
                request,
                moderation_classes: ml_classes(&board)?,
            },
        ),
    })
}

/// The mode and its fields, or the 400 that names what is supported.
fn read_mode(form: &Form) -> ApiResult<Mode> {
    for lang in form.lang.as_deref().unwrap_or("en").split(',') {
        let lang = lang.trim();
        if !lang.eq_ignore_ascii_case("en") {
            return Err(ApiError::bad_request(format!(
                "language `{}` is not supported: this server reads English (`en`)",
                truncated(lang)
            )));
        }
    }
    let mode = form
        .mode
        .as_deref()
        .ok_or_else(|| ApiError::bad_request("`mode` is required: `rules` or `ml`"))?;
    match mode.trim() {
        "rules" | "standard" => Ok(Mode::Rules {
            categories: rule_categories(form.categories.as_deref())?,
            north_america: north_america(form.opt_countries.as_deref())?,
        }),
        "ml" => {
            for model in form.models.as_deref().unwrap_or("general").split(',') {
                let model = model.trim();
                if !ML_MODELS.contains(&model) {
                    return Err(ApiError::bad_request(format!(
                        "model `{}` is not available on this server: mode=ml answers {}",
                        truncated(model),
                        ML_MODELS.join(", ")
                    )));
                }
            }
            Ok(Mode::Ml)
        }
        other => Err(ApiError::bad_request(format!(
            "mode `{}` is not available on this server: it answers `rules` and `ml`",
            truncated(other)
        ))),
    }
}

/// `categories`: indexes into [`RULE_CATEGORIES`], each once, in its order.
fn rule_categories(asked: Option<&str>) -> ApiResult<Vec<usize>> {
    let Some(asked) = asked else {
        return Ok((0..RULE_CATEGORIES.len()).collect());
    };
    let mut categories = Vec::new();
    for category in asked.split(',').map(str::trim) {
        let index = RULE_CATEGORIES
            .iter()
            .position(|&(name, _)| name == category)
            .ok_or_else(|| {
                let supported: Vec<&str> = RULE_CATEGORIES.iter().map(|&(name, _)| name).collect();
                ApiError::bad_request(format!(
                    "category `{}` is not available on this server: mode=rules answers {}",
                    truncated(category),
                    supported.join(", ")
                ))
            })?;
        if !categories.contains(&index) {
            categories.push(index);
        }
    }
    categories.sort_unstable();
    Ok(categories)
}

/// Whether `opt_countries` (ISO 3166 two-letter codes; `us` when absent) names the United
/// States or Canada.
fn north_america(countries: Option<&str>) -> ApiResult<bool> {
    let Some(countries) = countries else {
        return Ok(true);
    };
    let mut north_america = false;
    for (at, country) in countries.split(',').map(str::trim).enumerate() {
        if at >= COUNTRIES_MAX {
            return Err(ApiError::bad_request(format!(
                "`opt_countries` names more than {COUNTRIES_MAX} countries"
            )));
        }
        if country.len() != 2 || !country.bytes().all(|b| b.is_ascii_alphabetic()) {
            return Err(ApiError::bad_request(format!(
                "`opt_countries` holds `{}`, which is not a two-letter country code",
                truncated(country)
            )));
        }
        north_america |= country.eq_ignore_ascii_case("us") || country.eq_ignore_ascii_case("ca");
    }
    Ok(north_america)
}

/// The answer's `moderation_classes`: every class a loaded model scored.
fn ml_classes(board: &ScoreBoard) -> ApiResult<MlClasses> {
    let mut classes = MlClasses {
        available: Vec::new(),
        scores: Default::default(),
    };
    for &(class, category) in ML_CLASSES {
        classes.available.push(class);
        classes.scores.insert(class, scored(board, category)?);
    }
    Ok(classes)
}

/// The matches of the categories asked, each list in text order.
#[derive(Default)]
pub(super) struct RuleMatches<'t> {
    pub(super) profanity: Option<Matches<'t>>,
    pub(super) personal: Option<Matches<'t>>,
    pub(super) link: Option<Matches<'t>>,
}

impl<'t> RuleMatches<'t> {
    /// Every rule category's matches in `text` (North American numbers included).
    pub(super) fn all(cx: &Context, text: &'t str) -> Self {
        let every: Vec<usize> = (0..RULE_CATEGORIES.len()).collect();
        Self::find(cx, text, &[], &every, true)
    }

    /// The matches of `categories` in `text`; the terms of the allow lists among `lists` are
    /// not profanity.
    fn find(
        cx: &Context,
        text: &'t str,
        lists: &[Arc<CompiledList>],
        categories: &[usize],
        north_america: bool,
    ) -> Self {
        let chars = CharIndex::new(text);
        let mut found = RuleMatches::default();
        for &category in categories {
            let mut list = Vec::new();
            let slot = match RULE_CATEGORIES[category].1 {
                wordlist::SOURCE => {
                    profanity(cx, text, lists, &chars, &mut list);
                    &mut found.profanity
                }
                pii::SOURCE => {
                    personal(text, &chars, north_america, &mut list);
                    &mut found.personal
                }
                _ => {
                    list.extend(links::links(text).take(MATCHES_MAX).map(|link| {
                        chars.matched(text, "url".to_owned(), None, link.start, link.end)
                    }));
                    &mut found.link
                }
            };
            *slot = Some(Matches { matches: list });
        }
        found
    }
}

fn profanity<'t>(
    cx: &Context,
    text: &'t str,
    lists: &[Arc<CompiledList>],
    chars: &CharIndex,
    out: &mut Vec<Match<'t>>,
) {
    let mut normalised = String::new();
    let mut from = Vec::new();
    cx.checks
        .normalizer
        .borrow_mut()
        .normalize_tracked(text, &mut normalised, &mut from);
    // Blanking keeps every byte in place, so `from` still maps `normalised` to `text`.
    checks::blank_allowed_terms(lists, &mut normalised, |_| {});
    for term in cx.checks.text.wordlist.terms(&normalised) {
        // Tracked indexes are characters of `text`, one per byte of `normalised`: the match
        // is already in code points.
        let (first, last) = (from[term.start] as usize, from[term.end - 1] as usize);
        let intensity = if term.score >= wordlist::SEVERE_SCORE {
            "high"
        } else {
            "medium"
        };
        out.push(Match {
            kind: term.kind.as_str().to_owned(),
            intensity: Some(intensity),
            matched: &text[chars.byte(first)..chars.byte(last + 1)],
            start: first,
            end: last,
        });
        if out.len() >= MATCHES_MAX {
            break;
        }
    }
    out.sort_by_key(|matched| (matched.start, matched.end));
}

fn personal<'t>(text: &'t str, chars: &CharIndex, north_america: bool, out: &mut Vec<Match<'t>>) {
    for hit in pii::find_all(text) {
        let kind = match hit.kind {
            pii::Kind::Email => "email".to_owned(),
            pii::Kind::NationalPhone if !north_america => continue,
            pii::Kind::NationalPhone => "phone_number_us".to_owned(),
            pii::Kind::InternationalPhone => phone_type(&text[hit.start..hit.end]),
            pii::Kind::Ipv4 | pii::Kind::Ipv6 => "ip".to_owned(),
            pii::Kind::Iban => "iban".to_owned(),
            pii::Kind::Card => "credit_card".to_owned(),
        };
        out.push(chars.matched(text, kind, None, hit.start, hit.end));
        if out.len() >= MATCHES_MAX {
            break;
        }
    }
}

/// `phone_number_XX` for an international number (`+CC…` or `00CC…`), from its calling code.
fn phone_type(number: &str) -> String {
    // After `+`, or after the `00` that stands for it.
    let skip = if number.starts_with('+') { 0 } else { 2 };
    let digits: String = number
        .chars()
        .filter(char::is_ascii_digit)
        .skip(skip)
        .take(3)
        .collect();
    // The longest code that prefixes the number: `+351` is Portugal, not `+3`.
    CALLING_CODES
        .iter()
        .filter(|(code, _)| digits.starts_with(code))
        .max_by_key(|(code, _)| code.len())
        .map_or_else(
            || "phone_number".to_owned(),
            |(_, country)| format!("phone_number_{country}"),
        )
}

/// Byte offsets of a text's characters, to turn byte ranges into code-point positions.
struct CharIndex {
    /// The byte offset of each character, then the text's length.
    starts: Vec<usize>,
}

impl CharIndex {
    fn new(text: &str) -> CharIndex {
        let mut starts: Vec<usize> = text.char_indices().map(|(at, _)| at).collect();
        starts.push(text.len());
        CharIndex { starts }
    }

    /// The byte offset of character `index`.
    fn byte(&self, index: usize) -> usize {
        self.starts[index.min(self.starts.len() - 1)]
    }

    /// The character at byte offset `at` (a character boundary).
    fn char_at(&self, at: usize) -> usize {
        self.starts.partition_point(|&start| start < at)
    }

    /// A match of bytes `start..end` of `text`, in code points with an inclusive end.
    fn matched<'t>(
        &self,
        text: &'t str,
        kind: String,
        intensity: Option<&'static str>,
        start: usize,
        end: usize,
    ) -> Match<'t> {
        let first = self.char_at(start);
        Match {
            kind,
            intensity,
            matched: &text[start..end],
            start: first,
            end: self.char_at(end).saturating_sub(1).max(first),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn form(fields: &[(&str, &str)]) -> Form {
        let mut form = Form::default();
        for &(name, value) in fields {
            let slot = match name {
                "mode" => &mut form.mode,
                "lang" => &mut form.lang,
                "categories" => &mut form.categories,
                "opt_countries" => &mut form.opt_countries,
                "models" => &mut form.models,
                _ => unreachable!("{name}"),
            };
            *slot = Some(value.to_owned());
        }
        form
    }

    fn refused(fields: &[(&str, &str)]) -> String {
        read_mode(&form(fields)).unwrap_err().message.into_owned()
    }

    #[test]
    fn modes_are_read_or_refused_naming_what_is_supported() {
        assert_eq!(
            read_mode(&form(&[("mode", "rules")])).unwrap(),
            Mode::Rules {
                categories: vec![0, 1, 2],
                north_america: true
            }
        );
        assert_eq!(
            read_mode(&form(&[
                ("mode", "standard"),
                ("categories", "link, profanity,link"),
                ("opt_countries", "fr,gb"),
                ("lang", "en"),
            ]))
            .unwrap(),
            Mode::Rules {
                categories: vec![0, 2],
                north_america: false
            }
        );
        assert_eq!(read_mode(&form(&[("mode", "ml")])).unwrap(), Mode::Ml);
        assert!(refused(&[]).contains("`mode` is required"));
        assert!(refused(&[("mode", "username")]).contains("`rules` and `ml`"));
        assert!(refused(&[("mode", "rules"), ("categories", "drug")])
            .contains("category `drug` is not available on this server: mode=rules answers profanity, personal, link"));
        assert!(refused(&[("mode", "ml"), ("models", "general,self-harm")])
            .contains("model `self-harm` is not available"));
        assert!(refused(&[("mode", "rules"), ("lang", "en,fr")]).contains("language `fr`"));
        assert!(refused(&[("mode", "rules"), ("opt_countries", "usa")]).contains("`usa`"));
        let many = vec!["us"; COUNTRIES_MAX + 1].join(",");
        assert!(refused(&[("mode", "rules"), ("opt_countries", &many)]).contains("more than"));
    }

    #[test]
    fn phone_types_come_from_calling_codes() {
        assert_eq!(phone_type("+44 20 7946 0958"), "phone_number_gb");
        assert_eq!(phone_type("0033 1 23 45 67 89"), "phone_number_fr");
        assert_eq!(phone_type("+1 (555) 123-4567"), "phone_number_us");
        assert_eq!(phone_type("+351 912 345 678"), "phone_number_pt");
        assert_eq!(phone_type("+299 123456"), "phone_number");
    }

    #[test]
    fn positions_are_code_points_with_an_inclusive_end() {
        let text = "é mail a@b.io";
        let chars = CharIndex::new(text);
        let at = text.find("a@").unwrap();
        let matched = chars.matched(text, "email".into(), None, at, text.len());
        assert_eq!(
            (matched.matched, matched.start, matched.end),
            ("a@b.io", 7, 12)
        );
    }

    proptest! {
        #[test]
        fn any_fields_are_read_or_refused(
            mode in "\\PC{0,12}", categories in "\\PC{0,40}", countries in "\\PC{0,40}",
        ) {
            let _ = read_mode(&form(&[
                ("mode", &mode), ("categories", &categories), ("opt_countries", &countries),
            ]));
        }

        #[test]
        fn char_positions_round_trip(text in "\\PC{0,60}") {
            let chars = CharIndex::new(&text);
            for (index, (at, _)) in text.char_indices().enumerate() {
                prop_assert_eq!(chars.char_at(at), index);
                prop_assert_eq!(chars.byte(index), at);
            }
        }
    }
}
