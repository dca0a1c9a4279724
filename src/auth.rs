//! Who is calling: the API key from the request, checked against the store (`docs/interface.md#keys`).
//!
//! A key may come as `Authorization: Bearer`, as `X-Api-Key` (or Google's `X-Goog-Api-Key`),
//! and on the compatible routes as `api_secret` (Perspective's `?key=`). Where several are sent they must be the same key, else 401: a request that
//! names two different callers is refused rather than guessed at.
//!
//! Order of refusals: missing, malformed, unknown or wrong secret (one message for both, so the
//! answer does not reveal which ids exist), then the key's state (revoked, expired, rotated
//! past its grace), then the organization (gone: 401, suspended: 403). What the key may do
//! with a route (scopes, workflows, plan) is [`Caller::authorize`]'s part.

use std::rc::Rc;

use crate::content::ContentKind;
use crate::error::{ApiError, ApiResult, ErrorKind};
use crate::http::head::RequestHead;
use crate::store::keys;
use crate::store::records::{KeyRecord, KeyState, WorkflowRecord};
use crate::store::view::{OrgEntry, StoreView};

/// An authenticated caller: the key and its organization, as cached by the shard.
#[derive(Clone, Debug)]
pub struct Caller {
    pub key: Rc<KeyRecord>,
    pub org: Rc<OrgEntry>,
}

/// How the refusal of a request that presents no key begins (routes that answer in another
/// API's shape tell it from a key that is not valid by it).
pub const MISSING_KEY: &str = "missing API key:";

/// The key the request presents, from the headers and (compatible routes, `compat`)
/// `api_secret`.
pub fn presented_key<'a>(
    head: &'a RequestHead,
    api_secret: Option<&'a str>,
    compat: bool,
) -> ApiResult<&'a str> {
    let bearer = match head.authorization() {
        Some(value) => Some(bearer_token(value)?),
        None => None,
    };
    let mut found: Option<&str> = None;
    for candidate in [bearer, head.api_key(), api_secret].into_iter().flatten() {
        match found {
            Some(key) if key != candidate => {
                return Err(ApiError::unauthorized(
                    "different API keys were sent in one request",
                ))
            }
            _ => found = Some(candidate),
        }
    }
    found.ok_or_else(|| {
        ApiError::unauthorized(if compat {
            "missing API key: send it in the 'api_secret' field"
        } else {
            "missing API key: send 'Authorization: Bearer <key>' or 'X-Api-Key: <key>'"
        })
    })
}

fn bearer_token(value: &str) -> ApiResult<&str> {
    let (scheme, token) = value.split_once(' ').unwrap_or((value, ""));
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(ApiError::unauthorized(
            "unsupported Authorization scheme: use 'Bearer <key>'",
        ));
    }
    Ok(token.trim_start_matches(' '))
}

/// Checks `key` against the store as of now.
pub fn authenticate(view: &StoreView, key: &str, now_ms: i64) -> ApiResult<Caller> {
    let id = keys::parse_id(key).ok_or_else(|| {
        ApiError::unauthorized(
            "malformed API key: expected mg_live_<12 characters>_<32 characters>",
        )
    })?;
    let record = view
        .key(id)
        .map_err(store_error)?
        .filter(|record| keys::verify(key, &record.key_sha256))
        .ok_or_else(|| ApiError::unauthorized("invalid API key"))?;
    match record.state(now_ms) {
        KeyState::Active | KeyState::InGrace { .. } => {}
        KeyState::Revoked => return Err(ApiError::unauthorized("this API key was revoked")),
        KeyState::Expired => return Err(ApiError::unauthorized("this API key has expired")),
        KeyState::Retired => {
            return Err(ApiError::unauthorized(
                "this API key was rotated and its grace delay is over",
            ))
        }
    }
    let org = view
        .org(&record.org)
        .map_err(store_error)?
        .ok_or_else(|| ApiError::unauthorized("this API key's organization no longer exists"))?;
    if org.record.suspended {
        return Err(ApiError::new(
            ErrorKind::OrganizationSuspended,
            "the organization of this API key is suspended",
        ));
    }
    Ok(Caller { key: record, org })
}

impl Caller {
    /// May this caller check `kind` with `workflow`? Existence first (400
    /// `unknown_workflow`), then the key's scopes, allow-list and the plan (403).
    pub fn authorize<'w>(
        &self,
        kind: ContentKind,
        workflow: &str,
        workflows: &'w crate::store::view::Workflows,
    ) -> ApiResult<&'w Rc<WorkflowRecord>> {
        let shown = crate::text::first_chars(workflow, 64);
        let record = workflows.get(workflow).ok_or_else(|| {
            ApiError::new(
                ErrorKind::UnknownWorkflow,
                format!("unknown workflow '{shown}'"),
            )
        })?;
        self.require_scope(kind)?;
        if !self.allowed(record) {
            return Err(ApiError::forbidden(
                if record.definition.paid_only && !self.org.limits.paid {
                    format!("workflow '{shown}' needs a paid plan")
                } else {
                    format!("this API key may not use workflow '{shown}'")
                },
            ));
        }
        Ok(record)
    }

    /// 403 unless the key has the scope of `kind` (`docs/interface.md#keys`); checked right after the key,
    /// before any content is read.
    pub fn require_scope(&self, kind: ContentKind) -> ApiResult<()> {
        let (scoped, what) = match kind {
            ContentKind::Image => (self.key.scopes.image, "images"),
            ContentKind::Text => (self.key.scopes.text, "texts"),
        };
        if scoped {
            Ok(())
        } else {
            Err(ApiError::forbidden(format!(
                "this API key may not check {what}"
            )))
        }
    }

    /// Whether the key's allow-list and the organization's plan admit `workflow`.
    fn allowed(&self, workflow: &WorkflowRecord) -> bool {
        self.key.workflows.allows(&workflow.name)
            && (!workflow.definition.paid_only || self.org.limits.paid)
    }

    /// Whether the key may use `workflow` for some kind of content it may check: what
    /// `GET /v1/workflows` lists.
    pub fn may_use(&self, workflow: &WorkflowRecord) -> bool {
        let definition = &workflow.definition;
        let kinds = (self.key.scopes.text && !definition.text_checks.is_empty())
            || (self.key.scopes.image && !definition.image_checks.is_empty());
        self.allowed(workflow) && kinds
    }
}

fn store_error(error: heed::Error) -> ApiError {
    tracing::error!(%error, "store read failed");
    ApiError::internal("the key store could not be read")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::head::{parse_head, HeadLimits};

    fn head(authorization: Option<&str>, api_key: Option<&str>) -> RequestHead {
        let mut raw = String::from("GET / HTTP/1.1\r\nHost: a\r\n");
        if let Some(value) = authorization {
            raw.push_str(&format!("Authorization: {value}\r\n"));
        }
        if let Some(value) = api_key {
            raw.push_str(&format!("X-Api-Key: {value}\r\n"));
        }
        raw.push_str("\r\n");
        let (head, _) = parse_head(raw.as_bytes(), &HeadLimits::default())
            .expect("a valid head")
            .expect("a complete head");
        head
    }

    #[test]
    fn key_sources() {
        assert_eq!(
            presented_key(&head(Some("Bearer k1"), None), None, false),
            Ok("k1")
        );
        assert_eq!(
            presented_key(&head(Some("bearer  k1"), None), None, false),
            Ok("k1")
        );
        assert_eq!(
            presented_key(&head(None, Some("k2")), None, false),
            Ok("k2")
        );
        assert_eq!(
            presented_key(&head(None, None), Some("k3"), false),
            Ok("k3")
        );
        assert_eq!(
            presented_key(&head(Some("Bearer k"), Some("k")), Some("k"), false),
            Ok("k")
        );
        for (auth, api_key, secret) in [
            (None, None, None),
            (Some("Basic abc"), None, None),
            (Some("Bearer a"), Some("b"), None),
            (None, Some("a"), Some("b")),
        ] {
            let error = presented_key(&head(auth, api_key), secret, false).unwrap_err();
            assert_eq!(error.kind, ErrorKind::Unauthorized);
        }
        // No key at all, and only then, says so the way MISSING_KEY tells.
        for compat in [false, true] {
            let error = presented_key(&head(None, None), None, compat).unwrap_err();
            assert!(error.message.starts_with(MISSING_KEY), "{}", error.message);
        }
        let error = presented_key(&head(Some("Basic abc"), None), None, false).unwrap_err();
        assert!(!error.message.starts_with(MISSING_KEY), "{}", error.message);
    }

    proptest::proptest! {
        /// Issue 14, defect 1: any UTF-8 in any of the three key places is a key or a 401,
        /// never a panic, and what is presented is one of the values sent.
        #[test]
        fn any_text_in_the_key_places_is_a_key_or_a_refusal(
            authorization in proptest::option::of("\\PC{0,70}"),
            api_key in proptest::option::of("\\PC{0,70}"),
            secret in proptest::option::of("\\PC{0,70}"),
            compat in proptest::bool::ANY,
        ) {
            let head = head(authorization.as_deref(), api_key.as_deref());
            match presented_key(&head, secret.as_deref(), compat) {
                Ok(key) => {
                    let sent = [authorization.as_deref(), api_key.as_deref(), secret.as_deref()];
                    proptest::prop_assert!(sent.iter().flatten().any(|value| value.contains(key)));
                    if let Some(id) = keys::parse_id(key) {
                        proptest::prop_assert!(keys::is_valid_id(id));
                    }
                }
                Err(error) => proptest::prop_assert_eq!(error.kind, ErrorKind::Unauthorized),
            }
        }
    }
}
