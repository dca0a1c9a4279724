#!/usr/bin/env python3
"""Generates openapi.json for modgate (OpenAPI 3.1). Run: python3 gen_openapi.py

The JSON file is the deliverable; this script only keeps it consistent
(the same conditions are repeated on many operations).
"""
import copy
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))


def ref(kind, name):
    return {"$ref": f"#/components/{kind}/{name}"}


def sref(name):
    return ref("schemas", name)


# --------------------------------------------------------------------------------------------
# Shared wording
# --------------------------------------------------------------------------------------------

KEY_FORMAT = (
    "`mg_live_<id>_<secret>`: the fixed prefix `mg_live_`, an id of 12 ASCII letters or digits, "
    "`_`, and a secret of 32 ASCII letters or digits (pattern "
    "`^mg_live_[A-Za-z0-9]{12}_[A-Za-z0-9]{32}$`). The id is not secret; it identifies the key in "
    "the dashboard and the journal. The key is stored only as a hash and cannot be shown again."
)

CTRL_PATTERN = "^[^\\u0000-\\u001F\\u007F-\\u009F]*$"

REF_RULE = (
    "1 to 128 characters (Unicode scalar values), no control character (Unicode general "
    "category Cc: U+0000 to U+001F and U+007F to U+009F)"
)

DOWNLOAD_RULES = (
    "The server downloads the address from the public internet only (loopback, private, "
    "link-local, multicast and other non-public addresses are refused, also after a redirect), "
    "following at most 3 redirects, within 10 seconds in all, and at most 15 MB "
    "(15,000,000 bytes); the reply must have `Content-Type: image/*`. Any failure (address not "
    "`http`/`https` or not parseable, refused address, DNS or connect failure, timeout, too many "
    "redirects, wrong content type, over 15,000,000 bytes, an error status) is "
    "400 `url_refused` with the reason in the message. The downloaded image then follows the "
    "image rules (formats, pixels, side)."
)

IMAGE_RULES = (
    "Accepted formats: JPEG, PNG, WebP, GIF (first frame only); the format is recognised from "
    "the bytes. At most 15 MB (15,000,000 bytes), 50 megapixels (50,000,000 pixels; 12 megapixels "
    "= 12,000,000 pixels on the free plan) and 16,384 px on a side."
)

ORIGIN_COND = (
    "`forbidden`: the request carried an `Origin` header (any value). The service is called from "
    "servers only and does not answer browser requests; this is checked before anything else."
)

PRE_ROUTE_NOTE = (
    "Sent while the request head is read, before authentication; only `X-Request-Id` is sent "
    "with it."
)


def types_line(types):
    return "Error types: " + ", ".join(f"`{t}`" for t in types) + "."


# --------------------------------------------------------------------------------------------
# Headers
# --------------------------------------------------------------------------------------------

def int_header(desc, required, minimum=0):
    return {
        "description": desc,
        "required": required,
        "schema": {"type": "integer", "format": "int64", "minimum": minimum},
    }


RL_DESC = {
    "RateLimit-Limit": (
        "The key's burst capacity: the most checks it may send at once (the size of its token "
        "bucket). The bucket refills at the plan's rate in checks per second."
    ),
    "RateLimit-Remaining": (
        "Checks the key may send now without being limited (tokens left in its bucket after this "
        "request), as the answering shard sees it: shards take tokens from the one bucket in "
        "small blocks, so checks answered by other shards since their last block may not show "
        "yet. The limit itself is exact: over any window T a key gets at most `RateLimit-Limit` "
        "+ rate × T checks."
    ),
    "RateLimit-Reset": (
        "Whole seconds until the key's bucket is full again (rounded up); 0 when it is full."
    ),
    "X-Quota-Used": (
        "Checks counted this calendar month (UTC) for the key's organization, this one included. "
        "Refused requests are not counted. Checks answered by the same shard count at once; "
        "those answered by other shards within about 0.2 s (shards share their counts on a "
        "0.2 s tick)."
    ),
    "X-Quota-Limit": "The organization's monthly quota of checks (calendar month, UTC).",
}

headers = {
    "X-Request-Id": {
        "description": (
            "Id of this request, sent on every answer (errors included). Unique across shards "
            "and restarts. The same value as `request_id` (native answers) and `request.id` "
            "(compatible answers), and kept in the journal."
        ),
        "required": True,
        "schema": {"type": "string", "minLength": 1},
    },
    "Retry-After": int_header(
        "Whole seconds to wait before retrying. Sent with every 429 and 503 answer (except the "
        "503 of `GET /health`). For `quota_exceeded`: the seconds until the next calendar month "
        "(UTC) begins.",
        True,
    ),
    "Allow": {
        "description": "The methods the path accepts, comma-separated (for example `POST`).",
        "required": True,
        "schema": {"type": "string"},
    },
}
for name, desc in RL_DESC.items():
    headers[name] = int_header(
        desc + " Sent on every answer to an authenticated request (2xx, and the errors found after "
        "the key was accepted).",
        True,
    )
    headers[name + ".ifAuthenticated"] = int_header(
        desc + " Sent when the refusal came after the key was accepted; absent when the request "
        "was refused before (Origin, framing, size of the request) or the key was refused.",
        False,
    )

RL_NAMES = list(RL_DESC)


def hdrs(kind):
    """kind: 'pre' (request id only), 'auth' (all rate/quota headers required),
    'maybe' (rate/quota headers optional), 'noauth' (unauthenticated route)."""
    h = {"X-Request-Id": ref("headers", "X-Request-Id")}
    if kind == "auth":
        for n in RL_NAMES:
            h[n] = ref("headers", n)
    elif kind == "maybe":
        for n in RL_NAMES:
            h[n] = ref("headers", n + ".ifAuthenticated")
    return h


# --------------------------------------------------------------------------------------------
# Schemas
# --------------------------------------------------------------------------------------------

ERROR_TYPES = [
    "unauthorized", "forbidden", "organization_suspended", "bad_request", "unknown_workflow",
    "unsupported_media", "corrupt_media", "body_too_large", "image_too_large", "text_too_long",
    "workflow_unavailable", "request_timeout", "rate_limited", "too_many_concurrent",
    "quota_exceeded", "url_refused", "busy", "internal",
]

unit_number = {"type": "number", "format": "float", "minimum": 0, "maximum": 1}

answer_props = {
    "status": {"const": "success", "description": "Always `success`."},
    "workflow": {
        "type": "string",
        "description": "Name of the workflow the content was checked against.",
    },
    "summary": sref("Summary"),
    "scores": {
        "type": "object",
        "description": (
            "Best score per category the workflow checks, each in [0, 1], keyed by the service's "
            "own category ids. Categories listed in `unchecked` have no score."
        ),
        "additionalProperties": unit_number,
    },
    "time_ms": {
        "type": "integer", "format": "int64", "minimum": 0,
        "description": "Time spent checking, in milliseconds.",
    },
    "request_id": {
        "type": "string", "minLength": 1,
        "description": (
            "Id of this request; also sent in the `X-Request-Id` header and kept in the journal."
        ),
    },
    "workflow_version": {
        "type": "integer", "format": "int64", "minimum": 0,
        "description": "Version of the workflow that decided.",
    },
    "ref": {
        "type": ["string", "null"], "minLength": 1, "maxLength": 128,
        "description": (
            "The caller's own id, as sent, or null when the request had none (always null on the "
            "compatible routes, which take no `ref`)."
        ),
    },
    "unchecked": {
        "type": ["array", "null"],
        "items": {"type": "string"},
        "minItems": 1,
        "uniqueItems": True,
        "description": (
            "Categories of the workflow this server could not check (their model is not "
            "installed). modgate omits the field when every category was checked; it never sends "
            "`[]` or `null` (null is allowed by the type only because the specification declares "
            "it)."
        ),
    },
}
answer_props["language"] = {
    "type": ["object", "null"],
    "required": ["code", "confidence"],
    "additionalProperties": False,
    "description": (
        "Texts: the language the text is written in, or null for a text without letters. By "
        "default from modgate's own classifier over langdetect's profiles (55 languages and six "
        "scripts of one language, the first 120 characters); when the workflow names the "
        "`language` check, from whatlang (69 languages, the first 400 characters), and "
        "`unread_language` is then scored: the detection's confidence when none of the "
        "workflow's word-judging checks reads that language, else 0."
    ),
    "properties": {
        "code": {"type": "string", "pattern": "^[a-z]{2}$", "description": "ISO 639-1."},
        "confidence": {"type": "number", "minimum": 0, "maximum": 1},
    },
}
answer_props["qr_codes"] = {
    "type": "array",
    "maxItems": 8,
    "description": "The image's QR codes that decode, when the workflow names the `qr` check "
                   "(`[]`: checked, none found).",
    "items": {"type": "object", "required": ["payload", "x1", "y1", "x2", "y2"],
              "additionalProperties": False,
              "properties": {
                  "payload": {"type": "string"},
                  "x1": {"type": "number", "minimum": 0, "maximum": 1,
                         "description": "Bounding box, fractions of the width and height."},
                  "y1": {"type": "number", "minimum": 0, "maximum": 1},
                  "x2": {"type": "number", "minimum": 0, "maximum": 1},
                  "y2": {"type": "number", "minimum": 0, "maximum": 1}}},
}
_point = {"type": "object", "required": ["x", "y"], "additionalProperties": False,
          "properties": {"x": {"type": "number", "minimum": 0, "maximum": 1},
                         "y": {"type": "number", "minimum": 0, "maximum": 1}}}
answer_props["face_count"] = {
    "type": "integer", "minimum": 0,
    "description": "How many faces the `faces` check found, when the workflow names it.",
}
answer_props["faces"] = {
    "type": "array",
    "description": "The image's faces, surest first, when the workflow names the `faces` check "
                   "(`[]`: checked, none found). MTCNN on the image, "
                   "decoded to at least 480 px on its short side and scaled to at most 640 px a "
                   "side; faces under 20 px there (about 3 % of the larger side) are not found.",
    "items": {"type": "object", "required": ["x1", "y1", "x2", "y2", "score", "features"],
              "additionalProperties": False,
              "properties": {
                  "x1": {"type": "number", "minimum": 0, "maximum": 1,
                         "description": "Bounding box, fractions of the width and height, cut "
                                        "to the image."},
                  "y1": {"type": "number", "minimum": 0, "maximum": 1},
                  "x2": {"type": "number", "minimum": 0, "maximum": 1},
                  "y2": {"type": "number", "minimum": 0, "maximum": 1},
                  "score": {"type": "number", "minimum": 0, "maximum": 1,
                            "description": "The detector's confidence (above 0.7)."},
                  "features": {
                      "type": "object", "additionalProperties": False,
                      "required": ["left_eye", "right_eye", "nose_tip", "left_mouth_corner",
                                   "right_mouth_corner"],
                      "description": "Landmarks, fractions of the width and height; left is "
                                     "the image's left.",
                      "properties": {name: _point for name in [
                          "left_eye", "right_eye", "nose_tip", "left_mouth_corner",
                          "right_mouth_corner"]}}}},
}
_corner = {"type": "array", "minItems": 2, "maxItems": 2,
           "items": {"type": "number", "minimum": 0, "maximum": 1}}
answer_props["text_lines"] = {
    "type": "array",
    "maxItems": 32,
    "description": "The lines of text written in the image, in reading order, when the workflow "
                   "names the `ocr` check (`[]`: checked, none read). PaddleOCR's PP-OCRv6 "
                   "networks as rapidocr 3.10.0 runs them, on the image scaled to at most "
                   "1,280 px on its larger side (text of about 1 % of that side and up is read); "
                   "at most 32 lines, the largest. The text is checked by the word list, the PII "
                   "scanners, the linear profanity model and the link check (reasons with the "
                   "sources `ocr+wordlist`, `ocr+profanity_svm`, `ocr+pii`, `ocr+links`).",
    "items": {"type": "object", "required": ["text", "score", "box"],
              "additionalProperties": False,
              "properties": {
                  "text": {"type": "string"},
                  "score": {"type": "number", "minimum": 0.5, "maximum": 1,
                            "description": "The recognition's mean probability (lines under "
                                           "0.5 are dropped)."},
                  "box": {"type": "array", "minItems": 4, "maxItems": 4, "items": _corner,
                          "description": "Corners [x, y] in fractions of the width and height: "
                                         "top-left, top-right, bottom-right, bottom-left of the "
                                         "line as read (turned text gives a turned box)."}}},
}
answer_props["properties"] = {
    "allOf": [sref("ImageProperties")],
    "description": "An image's properties, when the workflow names the `properties` check.",
}
answer_required = [
    "status", "workflow", "summary", "scores", "time_ms", "request_id", "workflow_version",
]

compat_answer_props = {}
for k, v in answer_props.items():
    compat_answer_props[k] = v
    if k == "workflow":
        compat_answer_props[k] = sref("CompatWorkflow")
compat_answer_props["request_id"] = dict(
    answer_props["request_id"],
    description="Id of this request; the same as `request.id` and the `X-Request-Id` header.",
)
compat_answer_props["request"] = sref("CompatRequest")

reason_example = {
    "id": "nudity",
    "text": "Nudity",
    "message": "This image appears to contain nudity.",
    "score": 0.97,
    "threshold": 0.8,
    "source": "nsfw-image-model",
}
summary_example = {
    "action": "reject",
    "reject_prob": 0.97,
    "reject_reason": [reason_example],
    "review_reason": [],
}
answer_example = {
    "status": "success",
    "workflow": "default",
    "summary": summary_example,
    "scores": {"nudity": 0.97, "violence": 0.02},
    "time_ms": 41,
    "request_id": "01JD7Q3S6Z8K2M4N5P6Q7R8S9T",
    "workflow_version": 3,
    "ref": "upload-8841",
}
text_answer_example = {
    "status": "success",
    "workflow": "default",
    "summary": {
        "action": "review",
        "reject_prob": 0,
        "reject_reason": [],
        "review_reason": [{
            "id": "pii_iban",
            "text": "Bank account number",
            "message": "This text appears to contain a bank account number.",
            "score": 1.0,
            "threshold": 0.5,
            "source": "pii-detector",
        }],
    },
    "scores": {"pii_iban": 1.0, "toxicity": 0.01},
    "time_ms": 3,
    "request_id": "01JD7Q3S6Z8K2M4N5P6Q7R8S9V",
    "workflow_version": 1,
    "ref": None,
    "unchecked": ["threat"],
}
compat_request_example = {"id": "01JD7Q3S6Z8K2M4N5P6Q7R8S9W", "timestamp": 1732214400.125,
                          "operations": 1}
compat_answer_example = dict(answer_example)
compat_answer_example.update({
    "workflow": {"id": "default"},
    "request_id": compat_request_example["id"],
    "ref": None,
    "request": compat_request_example,
})

schemas = {
    "Answer": {
        "type": "object",
        "description": (
            "Reply of `POST /v1/image` and `POST /v1/text`. Every plan receives every field."
        ),
        "additionalProperties": False,
        "required": answer_required,
        "properties": answer_props,
    },
    "CompatAnswer": {
        "type": "object",
        "description": (
            "Reply of the compatible routes: every field of Answer, except that `workflow` is an "
            "object, plus `request`. The category ids in `scores` (and in the reasons) are the "
            "service's own, not those of the third-party API."
        ),
        "additionalProperties": False,
        "required": answer_required + ["request"],
        "properties": compat_answer_props,
    },
    "CompatWorkflow": {
        "type": "object",
        "description": "The workflow of a compatible answer.",
        "additionalProperties": False,
        "required": ["id"],
        "properties": {
            "id": {"type": "string", "description": "The workflow's name."},
        },
    },
    "Summary": {
        "type": "object",
        "description": "The decision.",
        "additionalProperties": False,
        "required": ["action", "reject_prob", "reject_reason", "review_reason"],
        "properties": {
            "action": {
                "type": "string",
                "enum": ["accept", "review", "reject"],
                "description": (
                    "`reject` when a reject threshold is reached; else `review` when a review "
                    "threshold is reached; else `accept`. Computed per check; not a lifecycle."
                ),
            },
            "reject_prob": dict(unit_number, description=(
                "Highest score among the rejected categories; 0 when none is rejected."
            )),
            "reject_reason": {
                "type": "array",
                "items": sref("Reason"),
                "description": "Why the content is rejected, highest score first.",
            },
            "review_reason": {
                "type": "array",
                "items": sref("Reason"),
                "description": "Why the content goes to review, highest score first.",
            },
        },
    },
    "Reason": {
        "type": "object",
        "description": "One category that reached its threshold.",
        "additionalProperties": False,
        "required": ["id", "text", "message", "score", "threshold", "source"],
        "properties": {
            "id": {
                "type": "string",
                "description": (
                    "Category id, for example `nudity` or `pii_iban`; callers map it to their own "
                    "messages."
                ),
            },
            "text": {"type": "string", "description": "Short English title."},
            "message": {
                "type": "string",
                "description": "Full English sentence that may be shown to an end user.",
            },
            "score": dict(unit_number, description="Score of the category."),
            "threshold": dict(unit_number, description="Threshold that was reached."),
            "source": {"type": "string", "description": "The tool that produced the score."},
        },
    },
    "CompatRequest": {
        "type": "object",
        "description": "The `request` object of compatible answers and errors.",
        "additionalProperties": False,
        "required": ["id", "timestamp", "operations"],
        "properties": {
            "id": {
                "type": "string", "minLength": 1,
                "description": "Id of this request, same as `X-Request-Id`.",
            },
            "timestamp": {
                "type": "number", "format": "double", "minimum": 0,
                "description": "Gateway clock when it answered, in seconds since the Unix epoch.",
            },
            "operations": {
                "type": "integer", "format": "int32", "minimum": 0,
                "description": "1 for a check that ran, 0 for a refusal.",
            },
        },
    },
    "TextRequest": {
        "type": "object",
        "description": (
            "Body of `POST /v1/text`. Unknown fields are ignored. Lengths count characters as "
            "Unicode scalar values (a JSON escape of an unpaired surrogate is malformed JSON: "
            "400 `bad_request`)."
        ),
        "required": ["text"],
        "properties": {
            "text": {
                "type": "string",
                "maxLength": 20000,
                "description": (
                    "The text to check. At most 20,000 characters; at most 5,000 on the free "
                    "plan. Longer: 413 `text_too_long`."
                ),
            },
            "workflow": {
                "type": ["string", "null"],
                "description": "Workflow to check against; `default` when absent or null.",
            },
            "ref": {
                "type": ["string", "null"],
                "minLength": 1,
                "maxLength": 128,
                "pattern": CTRL_PATTERN,
                "description": (
                    f"Caller's id for the text: {REF_RULE}. Echoed in the answer and kept in the "
                    "journal. A refused ref: 400 `bad_request`."
                ),
            },
            "context": {
                "type": ["string", "null"],
                "maxLength": 2000,
                "description": (
                    "Where the text comes from, in plain words; at most 2,000 characters (longer: "
                    "413 `text_too_long`, the message naming `context`; checked on every plan). "
                    "Paid plans use it in their advanced AI workflows; the free plan ignores it."
                ),
            },
        },
    },
    "WorkflowList": {
        "type": "object",
        "description": "Reply of `GET /v1/workflows`.",
        "additionalProperties": False,
        "required": ["status", "workflows"],
        "properties": {
            "status": {"const": "success", "description": "Always `success`."},
            "workflows": {
                "type": "array",
                "items": sref("WorkflowVersion"),
                "description": "Workflows the key may use.",
            },
        },
    },
    "WorkflowVersion": {
        "type": "object",
        "additionalProperties": False,
        "required": ["name", "version"],
        "properties": {
            "name": {"type": "string", "description": "Workflow name."},
            "version": {
                "type": "integer", "format": "int64", "minimum": 0,
                "description": (
                    "The current version, the same number that appears as `workflow_version` in "
                    "answers."
                ),
            },
        },
    },
    "ErrorEnvelope": {
        "type": "object",
        "description": "Every error reply of the native routes, `/health` and `/openapi.json`.",
        "additionalProperties": False,
        "required": ["status", "error"],
        "properties": {
            "status": {"const": "failure", "description": "Always `failure`."},
            "error": sref("ErrorBody"),
        },
    },
    "CompatErrorEnvelope": {
        "type": "object",
        "description": (
            "Every error reply on the compatible paths: ErrorEnvelope plus `request` "
            "(with `operations` = 0)."
        ),
        "additionalProperties": False,
        "required": ["status", "error", "request"],
        "properties": {
            "status": {"const": "failure", "description": "Always `failure`."},
            "error": sref("ErrorBody"),
            "request": sref("CompatRequest"),
        },
    },
    "ErrorBody": {
        "type": "object",
        "additionalProperties": False,
        "required": ["type", "code", "message"],
        "properties": {
            "type": {
                "type": "string",
                "enum": ERROR_TYPES,
                "description": "Stable value to switch on.",
            },
            "code": {
                "type": "integer", "format": "int32", "minimum": 0,
                "description": "The HTTP status, repeated.",
            },
            "message": {"type": "string", "description": "What went wrong, in English."},
        },
    },
    "Health": {
        "type": "object",
        "additionalProperties": False,
        "required": ["status"],
        "properties": {
            "status": {
                "type": "string",
                "enum": ["ok", "unavailable"],
                "description": "`ok` with HTTP 200; `unavailable` with HTTP 503.",
            },
        },
    },
    "CompatImageForm": {
        "type": "object",
        "description": (
            "Form of `POST /1.0/check-workflow.json`. All fields are optional in the schema; "
            "unknown fields are ignored (but still limited to 64 KiB each). The whole form must "
            "arrive within 10 seconds (408 `request_timeout`); every field except `media` holds "
            "at most 64 KiB (65,536 bytes; more: 413 `body_too_large`). Send exactly one of "
            "`media` and `url`: neither is 400 `bad_request` (missing image), both is "
            "400 `bad_request`."
        ),
        "properties": {
            "api_secret": {
                "type": "string",
                "description": f"The API key, {KEY_FORMAT}",
            },
            "api_user": {"type": "string", "description": "Accepted and ignored."},
            "media": {
                "type": "string",
                "contentMediaType": "application/octet-stream",
                "description": (
                    f"The image bytes; or send `url`. {IMAGE_RULES} Over 15,000,000 bytes: 413 "
                    "`body_too_large`."
                ),
            },
            "url": {
                "type": "string",
                "description": f"Address (`http` or `https`) of the image. {DOWNLOAD_RULES}",
            },
            "workflow": {
                "type": "string",
                "description": "Workflow name; `default` when absent.",
            },
        },
    },
    "CompatTextForm": {
        "type": "object",
        "description": (
            "Form of `POST /1.0/text/check-workflow.json`. Unknown fields are ignored (but still "
            "limited to 64 KiB each). The whole form must arrive within 10 seconds "
            "(408 `request_timeout`); every field except `text` holds at most 64 KiB "
            "(65,536 bytes; more: 413 `body_too_large`). Fields are UTF-8."
        ),
        "required": ["text"],
        "properties": {
            "api_secret": {
                "type": "string",
                "description": f"The API key, {KEY_FORMAT}",
            },
            "api_user": {"type": "string", "description": "Accepted and ignored."},
            "workflow": {
                "type": "string",
                "description": "Workflow name; `default` when absent.",
            },
            "text": {
                "type": "string",
                "maxLength": 20000,
                "description": (
                    "The text to check: at most 20,000 characters (Unicode scalar values), 5,000 "
                    "on the free plan (longer: 413 `text_too_long`). Missing: 400 `bad_request`."
                ),
            },
        },
    },
}

# --------------------------------------------------------------------------------------------
# Responses
# --------------------------------------------------------------------------------------------

def envelope(compat):
    return "CompatErrorEnvelope" if compat else "ErrorEnvelope"


def err_example(compat, code, etype, message):
    ex = {"status": "failure", "error": {"type": etype, "code": code, "message": message}}
    if compat:
        ex["request"] = {"id": "01JD7Q3S6Z8K2M4N5P6Q7R8S9X", "timestamp": 1732214400.5,
                         "operations": 0}
    return ex


EXAMPLE_MSG = {
    "bad_request": "ref must be 1 to 128 characters without control characters",
    "unknown_workflow": "unknown workflow: 'strict2'",
    "corrupt_media": "the image could not be decoded",
    "url_refused": "url refused: address is not on the public internet",
    "unauthorized": "missing or invalid API key",
    "forbidden": "requests carrying an Origin header are not answered",
    "organization_suspended": "the organization is suspended",
    "request_timeout": "the form was not received within 10 seconds",
    "body_too_large": "body is over 15000000 bytes",
    "image_too_large": "image is over 50000000 pixels",
    "text_too_long": "text is over 20000 characters",
    "unsupported_media": "not a JPEG, PNG, WebP or GIF image",
    "rate_limited": "rate limit reached",
    "too_many_concurrent": "too many checks in progress",
    "quota_exceeded": "monthly quota reached",
    "workflow_unavailable": "workflow 'default' cannot run on this server",
    "busy": "server busy, retry later",
    "internal": "internal error",
}


def err_response(code, compat, desc, types, hkind, extra_headers=None, schema=None):
    h = hdrs(hkind)
    for n in extra_headers or []:
        h[n] = ref("headers", n)
    env = envelope(compat)
    return {
        "description": desc + "\n\n" + types_line(types),
        "headers": h,
        "content": {
            "application/json": {
                "schema": schema or sref(env),
                "example": err_example(compat, code, types[0], EXAMPLE_MSG[types[0]]),
            }
        },
        "x-error-types": types,
    }


responses = {}
for compat in (False, True):
    p = "Compat" if compat else ""
    where = (
        " On the compatible paths the answer uses CompatErrorEnvelope."
        if compat else ""
    )
    responses[p + "HeadTimeout"] = err_response(
        408, compat,
        "The request head (request line and header fields) was not received within the "
        "server's header read timeout; the connection is then closed. " + PRE_ROUTE_NOTE + where
        + (" When not even the request line arrived, the path is unknown: ErrorEnvelope, and the "
           "request belongs to no operation." if compat else ""),
        ["request_timeout"], "pre")
    responses[p + "UriTooLong"] = err_response(
        414, compat,
        "The request target (path and query) is longer than the server accepts. "
        + PRE_ROUTE_NOTE + where,
        ["bad_request"], "pre")
    responses[p + "ExpectationFailed"] = err_response(
        417, compat,
        "The request carried an `Expect` header other than `100-continue` (which is answered "
        "with `100 Continue`). " + PRE_ROUTE_NOTE + where,
        ["bad_request"], "pre")
    responses[p + "HeadTooLarge"] = err_response(
        431, compat,
        "The request head is larger than the server accepts, or has too many header fields. "
        + PRE_ROUTE_NOTE + where,
        ["bad_request"], "pre")
    responses[p + "MethodNotAllowed"] = err_response(
        405, compat,
        "The path exists but not with this method; `Allow` lists the methods it accepts. "
        + PRE_ROUTE_NOTE + where,
        ["bad_request"], "pre", ["Allow"])

responses["NotFound"] = err_response(
    404, False,
    "No route has this path (any method). Always with ErrorEnvelope. Listed here only: it "
    "belongs to no operation. " + PRE_ROUTE_NOTE,
    ["bad_request"], "pre")
responses["MalformedHead"] = err_response(
    400, False,
    "The request head could not be parsed at all (bad request line or header syntax), so no "
    "route was chosen. Always with ErrorEnvelope; the connection is then closed. Listed here "
    "only: it belongs to no operation. " + PRE_ROUTE_NOTE,
    ["bad_request"], "pre")


def framing_refs(compat, form_timeout=False):
    p = "Compat" if compat else ""
    r = {
        "405": ref("responses", p + "MethodNotAllowed"),
        "408": ref("responses", p + "HeadTimeout"),
        "414": ref("responses", p + "UriTooLong"),
        "417": ref("responses", p + "ExpectationFailed"),
        "431": ref("responses", p + "HeadTooLarge"),
    }
    if form_timeout:
        del r["408"]
    return r


FRAMING_400 = (
    "`bad_request`: malformed body framing: a `Content-Length` that is not a decimal number, "
    "or sent more than once; `Content-Length` together with `Transfer-Encoding`; a transfer "
    "coding other than `chunked`; malformed chunked encoding (trailer fields follow the header "
    "grammar: a bare LF, a folded line or a name that is not a token is refused and the "
    "connection closed)."
)

AUTH_401 = (
    "`unauthorized`: the key is missing, malformed (not " + "`mg_live_<12 letters or digits>_<32 "
    "letters or digits>`), unknown, revoked, expired, or a rotated key whose grace delay has "
    "ended; or the key was sent in more than one place with different values. Every 401 carries "
    "`WWW-Authenticate: Bearer realm=\"modgate\", ApiKey realm=\"modgate\", header=\"X-Api-Key\"`"
)

ORDER_NOTE = (
    "Order of refusals: the `Origin` header (403); the framing of the request and a "
    "`Content-Length` over the route's limit (400, 413); on the compatible POST routes, the "
    "cap on uploads in progress and a full work queue (503), then the form itself (415, 400, "
    "408, 413; 503 `busy` past the server's budget for forms whose key is inside them), since "
    "the key is inside it (a key sent in a header is checked before the form is read); then "
    "the key (401, 403 `organization_suspended`) "
    "and its scope (403); then the plan's limits (429); then the parameters and the workflow "
    "(400, 403 for a workflow outside the key's list); then the content (so a key error is "
    "reported before a bad `url`)."
)


def status_429(compat, check=True):
    if check:
        desc = (
            "`rate_limited`: the key's token bucket is empty (see the `RateLimit-*` headers). "
            "`too_many_concurrent`: the plan's cap on checks in progress at once is reached. "
            "`quota_exceeded`: the organization's monthly quota (`X-Quota-Limit`) is used up, "
            "or all leased with some units not spent yet. "
            "`Retry-After` is sent: for `quota_exceeded`, until the next UTC month once every "
            "unit is spent, else 2 seconds. Refused requests do not count toward the quota."
        )
        types = ["rate_limited", "too_many_concurrent", "quota_exceeded"]
    else:
        desc = (
            "`rate_limited`: the key's token bucket is empty (listing workflows takes one token "
            "like a check, but is not a check: it neither counts toward the quota nor is refused "
            "for it). `Retry-After` is sent."
        )
        types = ["rate_limited"]
    return err_response(429, compat, desc, types, "auth", ["Retry-After"])


def status_403(compat, kind):
    conds = [ORIGIN_COND]
    if kind in ("image", "text"):
        conds.append(
            f"`forbidden`: the key lacks the `{kind}` scope; or the key is limited to a list of "
            "workflows that does not contain the named one (a name that does not exist is "
            "400 `unknown_workflow` instead); or the workflow is reserved for paid plans and the "
            "key's organization is on the free plan."
        )
    conds.append("`organization_suspended`: the key's organization is suspended.")
    return err_response(403, compat, "\n\n".join(conds),
                        ["forbidden", "organization_suspended"], "maybe")


def status_503(compat, kind):
    conds = []
    if kind in ("image", "text"):
        conds.append(
            "`workflow_unavailable`: none of the workflow's checks can run on this server (their "
            "models are not installed)."
        )
    busy = (
        "`busy`: the shard's work queue is full. A connection over the shard's connection cap is "
        "answered 503 `busy` at once, before its request is read (so always in ErrorEnvelope), "
        "and closed."
    )
    if kind in ("image", "text") and compat:
        busy = busy.replace("is full;", "is full; too many uploads are in progress on this "
                                        "shard (compatible POST routes);")
    conds.append(busy)
    conds.append("`Retry-After` is sent.")
    types = (["workflow_unavailable", "busy"] if kind in ("image", "text") else ["busy"])
    return err_response(503, compat, "\n\n".join(conds), types, "maybe", ["Retry-After"])


def status_500(compat):
    return err_response(
        500, compat,
        "`internal`: an unexpected failure (for example the journal record of a check could not "
        "be committed: a check is answered only after its record is committed). The message "
        "gives no internals.",
        ["internal"], "maybe")


def status_401(compat, extra=""):
    return err_response(401, compat, AUTH_401 + extra + ".", ["unauthorized"], "pre")


def error_responses(route):
    """route: image, text, workflows, compat_image, compat_image_get, compat_text, health, openapi"""
    compat = route.startswith("compat")
    r = {}
    if route == "image":
        r["400"] = err_response(400, False, "\n\n".join([
            FRAMING_400 + " Also: `url` together with a non-empty body; a refused `ref` ("
            + REF_RULE + "); a query parameter given twice or badly percent-encoded; a workflow "
            "with no checks for images.",
            "`unknown_workflow`: the named workflow does not exist (checked before the key's "
            "workflow list).",
            "`corrupt_media`: the bytes start with the signature of JPEG, PNG, WebP or GIF but do "
            "not decode.",
            "`url_refused`: the `url` was refused or its download failed; the message gives the "
            "reason. " + DOWNLOAD_RULES,
            ORDER_NOTE,
        ]), ["bad_request", "unknown_workflow", "corrupt_media", "url_refused"], "maybe")
    elif route == "text":
        r["400"] = err_response(400, False, "\n\n".join([
            FRAMING_400 + " Also: malformed JSON (the message gives the line and column), a body "
            "that is not a JSON object or nests deeper than 16 levels, `text` missing or not a "
            "string, another field of the wrong type, a refused `ref` (" + REF_RULE + "), a "
            "workflow with no checks for texts.",
            "`unknown_workflow`: the named workflow does not exist (checked before the key's "
            "workflow list).",
        ]), ["bad_request", "unknown_workflow"], "maybe")
    elif route == "compat_image":
        r["400"] = err_response(400, True, "\n\n".join([
            FRAMING_400 + " Also: a malformed multipart body (a `multipart/form-data` content "
            "type with a missing or bad boundary, bad part headers, an unterminated part), a "
            "field other than `media` that is not UTF-8, a known field sent twice, neither "
            "`media` nor `url` (missing image), both `media` and `url`, a workflow with no checks "
            "for images.",
            "`unknown_workflow`: the named workflow does not exist (checked before the key's "
            "workflow list).",
            "`corrupt_media`: the bytes start with the signature of JPEG, PNG, WebP or GIF but do "
            "not decode.",
            "`url_refused`: the `url` was refused or its download failed; the message gives the "
            "reason. " + DOWNLOAD_RULES,
            ORDER_NOTE,
        ]), ["bad_request", "unknown_workflow", "corrupt_media", "url_refused"], "maybe")
    elif route == "compat_image_get":
        r["400"] = err_response(400, True, "\n\n".join([
            FRAMING_400 + " Also: no `url` (a query cannot carry an image), and `media` in the "
            "query (it counts as a missing image, even beside a `url`); a query parameter given "
            "twice or badly percent-encoded; a workflow with no checks for images.",
            "`unknown_workflow`: the named workflow does not exist (checked before the key's "
            "workflow list).",
            "`corrupt_media`: the downloaded bytes start with the signature of JPEG, PNG, WebP or "
            "GIF but do not decode.",
            "`url_refused`: the `url` was refused or its download failed; the message gives the "
            "reason. " + DOWNLOAD_RULES,
            ORDER_NOTE,
        ]), ["bad_request", "unknown_workflow", "corrupt_media", "url_refused"], "maybe")
    elif route == "compat_text":
        r["400"] = err_response(400, True, "\n\n".join([
            FRAMING_400 + " Also: a body that is neither `multipart/form-data` nor "
            "`application/x-www-form-urlencoded` (this route answers no 415), a URL-encoded field "
            "that is not valid percent-encoded UTF-8, a malformed multipart body (missing or bad boundary, bad part "
            "headers, an unterminated part), no `text` field, a field that is not UTF-8, a known "
            "field sent twice, a workflow with no checks for texts.",
            "`unknown_workflow`: the named workflow does not exist (checked before the key's "
            "workflow list).",
        ]), ["bad_request", "unknown_workflow"], "maybe")
    else:
        r["400"] = err_response(400, compat, FRAMING_400, ["bad_request"], "pre")

    if route in ("health", "openapi"):
        pass
    elif compat:
        r["401"] = status_401(True, "; or the key sent in `Authorization` or `X-Api-Key` differs "
                                    "from `api_secret`")
    else:
        r["401"] = status_401(False)

    if route in ("health", "openapi"):
        r["403"] = err_response(403, False, ORIGIN_COND + " (`/health` and `/openapi.json` "
                                "included.)", ["forbidden"], "pre")
    elif route == "workflows":
        r["403"] = status_403(False, "workflows")
    else:
        r["403"] = status_403(compat, "text" if route.endswith("text") else "image")

    if route in ("compat_image", "compat_text"):
        r["408"] = err_response(
            408, True,
            "`request_timeout`: the whole form was not received within 10 seconds of the end of "
            "the request head (the key is inside the form, so a slow form is refused before the "
            "key is known); or the request head itself was not received within the server's "
            "header read timeout (the connection is then closed).",
            ["request_timeout"], "pre")

    if route in ("image", "text"):
        r["408"] = err_response(
            408, False,
            "`request_timeout`: the body was not received within `limits.body_read_timeout_ms` "
            "(default 30 seconds) of the end of the request head; the connection is then closed. "
            "Or the request head itself was not received within the server's header read "
            "timeout (then without the limit headers).",
            ["request_timeout"], "maybe")

    if route in ("image", "compat_image"):
        r["413"] = err_response(413, compat, "\n\n".join(filter(None, [
            (
                "`body_too_large`: the body is over 15 MB (15,000,000 bytes); decided from "
                "`Content-Length` before reading when it is sent."
                if not compat else
                "`body_too_large`: the `media` field is over 15 MB (15,000,000 bytes); a field "
                "other than `media` is over 64 KiB (65,536 bytes); or the whole body is over the "
                "route's limit (15,000,000 bytes for `media` plus room for the other fields), "
                "decided from `Content-Length` before reading when it is sent."
            ),
            "`image_too_large`: the image is over 16,384 px wide or high, or over 50 megapixels "
            "(50,000,000 pixels; 12,000,000 on the free plan); also for an image downloaded by "
            "`url`.",
        ])), ["body_too_large", "image_too_large"], "maybe")
    elif route == "compat_image_get":
        r["413"] = err_response(
            413, True,
            "`image_too_large`: the downloaded image is over 16,384 px wide or high, or over 50 "
            "megapixels (50,000,000 pixels; 12,000,000 on the free plan). A download over "
            "15,000,000 bytes is 400 `url_refused`.\n\n`body_too_large`: the request has a body "
            "(this route takes none).",
            ["image_too_large", "body_too_large"], "maybe")
    elif route == "text":
        r["413"] = err_response(413, False, "\n\n".join([
            "`body_too_large`: the body is over the route's limit, `limits.text_body_bytes_max` "
            "(default 524,288 bytes: enough for any TextRequest within the field limits, even "
            "fully JSON-escaped); decided from `Content-Length` before reading when it is sent.",
            "`text_too_long`: `text` over 20,000 characters (5,000 on the free plan), or "
            "`context` over 2,000 characters (checked on every plan); the message names the "
            "field. Characters are Unicode scalar values.",
        ]), ["body_too_large", "text_too_long"], "maybe")
    elif route == "compat_text":
        r["413"] = err_response(413, True, "\n\n".join([
            "`body_too_large`: a field other than `text` over 64 KiB (65,536 bytes), or the body "
            "over the route's limit, `limits.text_form_bytes_max` (default 1,048,576 bytes).",
            "`text_too_long`: `text` over 20,000 characters (5,000 on the free plan), Unicode "
            "scalar values.",
        ]), ["body_too_large", "text_too_long"], "maybe")

    if route in ("workflows", "health", "openapi"):
        r["413"] = err_response(
            413, False,
            "`body_too_large`: this route takes no request body (a `Content-Length` above 0 or a "
            "chunked body).",
            ["body_too_large"], "pre")

    if route in ("image", "compat_image", "compat_image_get"):
        desc = (
            "`unsupported_media`: the image is not JPEG, PNG, WebP or GIF (for example BMP, TIFF, "
            "text)"
        )
        if route == "image":
            desc += ", or the body is empty and no `url` was given"
        elif route == "compat_image":
            desc += (", or the `media` field is empty; or the body is neither `multipart/form-data` "
                     "nor `application/x-www-form-urlencoded` (which can carry `url`)")
        desc += "; also for an image downloaded by `url`."
        r["415"] = err_response(415, compat, desc, ["unsupported_media"], "maybe")
    elif route == "text":
        r["415"] = err_response(
            415, False,
            "`unsupported_media`: the body was sent without the JSON content type "
            "(`Content-Type: application/json`, parameters such as `charset=utf-8` allowed).",
            ["unsupported_media"], "maybe")

    if route in ("image", "text", "compat_image", "compat_image_get", "compat_text"):
        r["429"] = status_429(compat)
    elif route == "workflows":
        r["429"] = status_429(False, check=False)

    if route in ("image", "text", "compat_image", "compat_image_get", "compat_text"):
        r["503"] = status_503(compat, "text" if route.endswith("text") else "image")
    elif route in ("workflows", "openapi"):
        r["503"] = status_503(False, "other")

    r["500"] = status_500(compat)
    r.update(framing_refs(compat, form_timeout=route in ("compat_image", "compat_text", "image",
                                                         "text")))
    return dict(sorted(r.items()))


def ok_answer(schema, example, desc, auth=True):
    return {
        "description": desc,
        "headers": hdrs("auth" if auth else "pre"),
        "content": {"application/json": {"schema": sref(schema), "example": example}},
    }


# --------------------------------------------------------------------------------------------
# Parameters
# --------------------------------------------------------------------------------------------

def qparam(name, schema, desc, required=False):
    return {"name": name, "in": "query", "required": required, "schema": schema,
            "description": desc}


p_workflow = qparam("workflow", {"type": "string"}, "Workflow name; `default` when absent.")
p_ref = qparam(
    "ref",
    {"type": "string", "minLength": 1, "maxLength": 128, "pattern": CTRL_PATTERN},
    f"Caller's id for the image: {REF_RULE}, after percent-decoding. Echoed in the answer and "
    "kept in the journal. A refused ref: 400 `bad_request`.",
)
p_url_native = qparam(
    "url", {"type": "string", "format": "uri"},
    "`http` or `https` address of the image, used instead of a body (the body must then be "
    "empty: a non-empty body is 400 `bad_request`). " + DOWNLOAD_RULES,
)
p_url_compat = qparam(
    "url", {"type": "string", "format": "uri"},
    "Image address. Needed in practice: without it the answer is 400 `bad_request` (a query "
    "cannot carry an image, so `media` in the query also counts as a missing image). "
    + DOWNLOAD_RULES,
)
p_api_user = qparam("api_user", {"type": "string"}, "Accepted and ignored.")
p_api_secret = qparam(
    "api_secret", {"type": "string"},
    "The API key, " + KEY_FORMAT + " It may instead be sent in `Authorization: Bearer` or "
    "`X-Api-Key`; a header key that differs from `api_secret` is 401 `unauthorized`.",
)

SEC_NATIVE = [{"bearer": []}, {"apiKeyHeader": []}]
SEC_COMPAT = [{"apiSecret": []}, {"bearer": []}, {"apiKeyHeader": []}]

multipart_encoding_common = {
    "api_secret": {"contentType": "text/plain"},
    "api_user": {"contentType": "text/plain"},
    "workflow": {"contentType": "text/plain"},
}

paths = {
    "/v1/image": {
        "post": {
            "operationId": "checkImage",
            "tags": ["native"],
            "summary": "Check an image given as raw body or as a `url`",
            "description": (
                "Checks one image against a workflow. Send the raw image as the body, or an "
                "empty body and a `url`. " + IMAGE_RULES + " " + ORDER_NOTE
            ),
            "security": SEC_NATIVE,
            "parameters": [p_workflow, p_ref, p_url_native],
            "requestBody": {
                "required": False,
                "description": (
                    "The raw image bytes. Required unless `url` is given; then the body is empty "
                    "(a non-empty body with `url` is 400 `bad_request`; an empty body without "
                    "`url` is 415 `unsupported_media`). " + IMAGE_RULES + " Over 15,000,000 "
                    "bytes: 413 `body_too_large`."
                ),
                "content": {
                    "application/octet-stream": {
                        "schema": {"type": "string",
                                   "contentMediaType": "application/octet-stream"},
                    }
                },
            },
            "responses": {
                "200": ok_answer("Answer", answer_example, "The decision."),
                **error_responses("image"),
            },
        }
    },
    "/v1/text": {
        "post": {
            "operationId": "checkText",
            "tags": ["native"],
            "summary": "Check a text given as JSON",
            "description": (
                "Checks one text against a workflow. The body must be sent with "
                "`Content-Type: application/json` (else 415 `unsupported_media`). " + ORDER_NOTE
            ),
            "security": SEC_NATIVE,
            "requestBody": {
                "required": True,
                "content": {
                    "application/json": {
                        "schema": sref("TextRequest"),
                        "example": {
                            "text": "Pay to DE89 3704 0044 0532 0130 00 please",
                            "workflow": "default",
                            "ref": "msg-1207",
                            "context": "Private message between two users of a marketplace",
                        },
                    }
                },
            },
            "responses": {
                "200": ok_answer("Answer", text_answer_example, "The decision."),
                **error_responses("text"),
            },
        }
    },
    "/v1/workflows": {
        "get": {
            "operationId": "listWorkflows",
            "tags": ["native"],
            "summary": "List workflows the key may use",
            "description": (
                "Names and current versions of the workflows the key may use (all, or the key's "
                "list; workflows reserved for paid plans are left out for a free plan key). No "
                "parameters, no body."
            ),
            "security": SEC_NATIVE,
            "responses": {
                "200": ok_answer(
                    "WorkflowList",
                    {"status": "success", "workflows": [{"name": "default", "version": 3},
                                                        {"name": "strict", "version": 1}]},
                    "The workflows.",
                ),
                **error_responses("workflows"),
            },
        }
    },
    "/1.0/check-workflow.json": {
        "post": {
            "operationId": "compatCheckImage",
            "tags": ["compatible"],
            "summary": "Check an image, multipart form",
            "description": (
                "Compatible route in the shape of a third-party moderation API. The key is the "
                "`api_secret` form field (or one of the two headers). The whole form must arrive "
                "within 10 seconds (else 408 `request_timeout`); every field except `media` holds "
                "at most 64 KiB (else 413 `body_too_large`). " + IMAGE_RULES + " Every error "
                "uses CompatErrorEnvelope. " + ORDER_NOTE
            ),
            "security": SEC_COMPAT,
            "requestBody": {
                "required": True,
                "content": {
                    "multipart/form-data": {
                        "schema": sref("CompatImageForm"),
                        "encoding": dict(
                            multipart_encoding_common,
                            media={"contentType": "application/octet-stream"},
                            url={"contentType": "text/plain"},
                        ),
                    }
                },
            },
            "responses": {
                "200": ok_answer("CompatAnswer", compat_answer_example, "The decision."),
                **error_responses("compat_image"),
            },
        },
        "get": {
            "operationId": "compatCheckImageByUrl",
            "tags": ["compatible"],
            "summary": "Check an image by `url`, query string",
            "description": (
                "Compatible route: the image is downloaded from `url`. The key is the "
                "`api_secret` query parameter (or one of the two headers). Every error uses "
                "CompatErrorEnvelope. " + ORDER_NOTE
            ),
            "security": SEC_COMPAT,
            "parameters": [
                p_url_compat,
                qparam("workflow", {"type": "string"}, "`default` when absent."),
                p_api_user,
                p_api_secret,
            ],
            "responses": {
                "200": ok_answer("CompatAnswer", compat_answer_example, "The decision."),
                **error_responses("compat_image_get"),
            },
        },
    },
    "/1.0/text/check-workflow.json": {
        "post": {
            "operationId": "compatCheckText",
            "tags": ["compatible"],
            "summary": "Check a text, multipart form",
            "description": (
                "Compatible route for texts. The key is the `api_secret` form field (or one of "
                "the two headers). The whole form must arrive within 10 seconds (else 408 "
                "`request_timeout`); every field except `text` holds at most 64 KiB (else 413 "
                "`body_too_large`). `text`: at most 20,000 characters, 5,000 on the free plan. "
                "Every error uses CompatErrorEnvelope. " + ORDER_NOTE
            ),
            "security": SEC_COMPAT,
            "requestBody": {
                "required": True,
                "content": {
                    "multipart/form-data": {
                        "schema": sref("CompatTextForm"),
                        "encoding": dict(
                            multipart_encoding_common,
                            text={"contentType": "text/plain; charset=utf-8"},
                        ),
                    },
                    "application/x-www-form-urlencoded": {"schema": sref("CompatTextForm")},
                },
            },
            "responses": {
                "200": ok_answer(
                    "CompatAnswer",
                    dict(text_answer_example, workflow={"id": "default"},
                         request_id=compat_request_example["id"],
                         request=compat_request_example),
                    "The decision.",
                ),
                **error_responses("compat_text"),
            },
        }
    },
    "/health": {
        "get": {
            "operationId": "health",
            "tags": ["service"],
            "summary": "Readiness, no key",
            "description": (
                "No key, no parameters. 200 `ok` once the engine and a snapshot are ready; 503 "
                "`unavailable` while starting (no snapshot yet, or a model not loaded) or once a "
                "stop has begun. No other details are given. A connection over the shard's "
                "connection cap gets 503 `busy` (ErrorEnvelope) before its request is read. A "
                "request carrying `Origin` "
                "gets 403 `forbidden` here too."
            ),
            "security": [],
            "responses": {
                "200": {
                    "description": "Ready: `status` is `ok`.",
                    "headers": hdrs("pre"),
                    "content": {"application/json": {"schema": sref("Health"),
                                                      "example": {"status": "ok"}}},
                },
                "503": {
                    "description": (
                        "Not ready: `status` is `unavailable` (starting: no snapshot yet or a "
                        "model not loaded; or stopping)."
                    ),
                    "headers": hdrs("pre"),
                    "content": {"application/json": {"schema": sref("Health"),
                                                      "example": {"status": "unavailable"}}},
                },
                **error_responses("health"),
            },
        }
    },
    "/openapi.json": {
        "get": {
            "operationId": "openapi",
            "tags": ["service"],
            "summary": "The OpenAPI 3.1 document of the running version, no key",
            "description": (
                "This document. No key, no parameters. A request carrying `Origin` gets 403 "
                "`forbidden` here too."
            ),
            "security": [],
            "responses": {
                "200": {
                    "description": "The OpenAPI 3.1 document (JSON).",
                    "headers": hdrs("pre"),
                    "content": {"application/json": {"schema": {"type": "object"}}},
                },
                **error_responses("openapi"),
            },
        }
    },
}

security_schemes = {
    "bearer": {
        "type": "http",
        "scheme": "bearer",
        "bearerFormat": "mg_live_<id>_<secret>",
        "description": (
            "`Authorization: Bearer <API_KEY>`; equivalent to `X-Api-Key`. Key format: "
            + KEY_FORMAT
        ),
    },
    "apiKeyHeader": {
        "type": "apiKey",
        "in": "header",
        "name": "X-Api-Key",
        "description": (
            "`X-Api-Key: <API_KEY>`; equivalent to `Authorization: Bearer`. Google's "
            "`X-Goog-Api-Key` is read as this header (a request with both gets 400). Key format: "
            + KEY_FORMAT
        ),
    },
    "apiSecret": {
        "type": "apiKey",
        "in": "query",
        "name": "api_secret",
        "description": (
            "Compatible routes only. On `GET /1.0/check-workflow.json` the key is the "
            "`api_secret` query parameter; on the POST compatible routes it is the `api_secret` "
            "field of the multipart form (OpenAPI has no form-field location, hence `in: query` "
            "here). The compatible routes also accept the key in `Authorization: Bearer` or "
            "`X-Api-Key`; a header key that differs from `api_secret` gets 401 `unauthorized`. "
            "Key format: " + KEY_FORMAT
        ),
    },
}

DECISIONS = [
    "`Origin` is refused with 403 `forbidden` on every route, `/health` and `/openapi.json` "
    "included (CompatErrorEnvelope on the compatible paths); so are the Fetch Metadata fields "
    "only browsers send (`Sec-Fetch-Site`, `Sec-Fetch-Dest`, `Sec-Fetch-User`), which an "
    "`<img src>` sends without an `Origin`: a key in such a URL is a key leaked. "
    "`Sec-Fetch-Mode` alone is accepted: Node's built-in `fetch` sends it from servers.",
    "Order of refusals: `Origin`, then the framing and size limits of the request itself, then "
    "the key (401/403), then parameters and content. A key error is reported before a bad `url`.",
    "MB and megapixel are decimal: 15 MB = 15,000,000 bytes; 50 MP = 50,000,000 pixels; "
    "12 MP = 12,000,000 pixels. KiB is binary: 64 KiB = 65,536 bytes.",
    "Characters are Unicode scalar values (Rust `char`), for `text`, `context` and `ref`.",
    "`context` over 2,000 characters: 413 `text_too_long`, the message naming the field; it is "
    "checked on every plan even where the free plan then ignores it. `text` over its limit: 413 "
    "`text_too_long` too.",
    "The compatible routes take the key in `api_secret`; they also accept the two headers, and a "
    "request whose header key and `api_secret` differ gets 401. On every route, a key sent in "
    "two places with different values gets 401.",
    "Bytes that start with a supported format's signature but do not decode: 400 "
    "`corrupt_media`; anything else (BMP, TIFF, text, empty body): 415 `unsupported_media`.",
    "A `url` together with a non-empty body (or, on the compatible form, with `media`): 400 "
    "`bad_request`.",
    "Download failures (DNS, connect, timeout, too many redirects, wrong content type, over "
    "15,000,000 bytes, refused address): 400 `url_refused` with the reason in the message.",
    "Unknown path 404 and wrong method 405 use the error envelope with type `bad_request`; 405 "
    "carries `Allow`.",
    "`unchecked` is absent when every category was checked, never `[]` or null.",
    "Refused requests do not count toward the quota; `operations` is 0 for them.",
    "A key limited to a list of workflows asking for a workflow that does not exist: 400 "
    "`unknown_workflow` (existence first), then 403 `forbidden` for one outside its list.",
    "A workflow reserved for paid plans asked for with a free plan key: 403 `forbidden`.",
    "Error types by status: 400 `bad_request` (malformed framing; malformed JSON, with its "
    "position; a `Content-Length` that is not a number or is repeated; `Content-Length` with "
    "`Transfer-Encoding`; a transfer coding other than `chunked`; `url` with a non-empty body; a "
    "refused `ref`; a missing `url` or `media` in the query of the GET compatible route), "
    "`unknown_workflow`, `corrupt_media`, `url_refused`; 401 `unauthorized`; 403 `forbidden`, "
    "`organization_suspended`; 404 and 405 `bad_request`; 408 `request_timeout`; 413 "
    "`body_too_large`, `image_too_large`, `text_too_long`; 414, 417 and 431 `bad_request`; 415 "
    "`unsupported_media`; 429 `rate_limited`, `too_many_concurrent`, `quota_exceeded`; 500 "
    "`internal`; 503 `workflow_unavailable`, `busy`. Each error response lists its types in "
    "`x-error-types`.",
    "408 `request_timeout`: on the compatible POST routes, the form not received within 10 "
    "seconds of the end of the request head; on the native check routes, the body not received "
    "within `limits.body_read_timeout_ms` (default 30 s; the specification lists no status for "
    "a slow body there, and an answer can still be sent); on every route, the request head not "
    "received within the header read timeout (the connection is then closed).",
    "`HEAD` is answered on `GET /health`, `GET /openapi.json` and `GET /v1/workflows`; not on "
    "`GET /1.0/check-workflow.json`, which runs a check (405 with `Allow: GET, POST`).",
    "414 (URI too long), 417 (an `Expect` other than `100-continue`) and 431 (request head too "
    "large or too many header fields) are `bad_request`.",
    "415 on the JSON route: a body without the JSON content type; on the compatible image route: "
    "a body that is not `multipart/form-data` (the compatible text route answers that with 400, "
    "its statuses in the specification having no 415).",
    "413 `body_too_large` also for a form field other than `media`/`text` over 64 KiB; "
    "`image_too_large` over 16,384 px on a side or over 50 MP (12 MP on the free plan).",
    "503 `busy` with `Retry-After`: the work queue is full, or too many uploads are in progress "
    "(compatible POST routes). A connection over the "
    "shard's connection cap is answered 503 `busy` (ErrorEnvelope) before its request is read, "
    "then closed. `GET /health` answers with Health (503 `unavailable` while starting or "
    "stopping).",
    "Envelope: every error on the two compatible paths (any method) uses CompatErrorEnvelope; "
    "every other error uses ErrorEnvelope. A request whose request line never arrived, a "
    "request head that cannot be parsed at all "
    "(`components.responses.MalformedHead`) and an unknown path (`NotFound`) belong to no "
    "operation and use ErrorEnvelope.",
    "Rate limit headers: `RateLimit-Limit` is the key's burst capacity (the most checks it may "
    "send at once; the bucket refills at the plan's checks per second), `RateLimit-Remaining` "
    "the checks that may be sent now, `RateLimit-Reset` the whole seconds until the bucket is "
    "full again (0 when full). `X-Quota-Used` counts this calendar month's (UTC) checks of the "
    "organization, this one included; `X-Quota-Limit` is its monthly quota. These five headers "
    "are on every answer to an authenticated request (2xx and the errors found after the key "
    "was accepted). `X-Request-Id` is on every answer, unique across shards and restarts. "
    "`Retry-After` (whole seconds) is on 429 and 503.",
    "Request bodies and forms: unknown fields are ignored.",
]

DESCRIPTION = (
    "modgate is a content moderation gateway. A caller sends an image or a text, optionally "
    "names a workflow (a named set of checks, each giving a score per category, with review and "
    "reject thresholds per category), and receives a decision: `accept`, `review` or `reject`, "
    "with per-category scores. Every check is recorded in a journal with the key id and the "
    "caller's `ref`. Besides the native `/v1` routes, three compatible `/1.0` routes accept "
    "multipart forms or query strings in the shape of a third-party moderation API and return "
    "the same decision fields plus a `request` object.\n\n"
    "The service is called from the caller's servers only. Every route except `GET /health` and "
    "`GET /openapi.json` needs an API key of an organization: " + KEY_FORMAT + " Keys are created "
    "in a dashboard (not part of this interface) with scopes (`image`, `text` or both), "
    "workflows (all or a list) and an optional expiry. Rotation creates a new key with the same "
    "scopes; the old key keeps working for a grace delay of 0 to 24 hours and counts toward the "
    "plan's number of keys meanwhile. Revocation stops a key at once.\n\n"
    "Limits: images at most 15 MB (15,000,000 bytes), 50 megapixels (12 on the free plan), "
    "16,384 px on a side, JPEG/PNG/WebP/GIF (first frame); downloads by `url`: 3 redirects, 10 "
    "seconds, 15 MB, public internet only, `Content-Type: image/*`; texts at most 20,000 "
    "characters (5,000 on the free plan); `context` at most 2,000 characters; `ref` 1 to 128 "
    "characters without control characters; compatible forms: the whole form within 10 seconds "
    "(408), 64 KiB per field except `media`/`text` (413); key rotation grace 0 to 24 hours. "
    "Plans set a rate limit (429 `rate_limited`), a cap on concurrent checks (429 "
    "`too_many_concurrent`), a monthly quota (429 `quota_exceeded`) and a number of keys.\n\n"
    "Each workflow has an integer version; answers carry the version that decided. Native routes "
    "carry the major version in the prefix `/v1`; the compatible routes live under `/1.0`.\n\n"
    "Decisions on points the specification leaves open:\n\n"
    + "\n".join("- " + d for d in DECISIONS)
)

# --------------------------------------------------------------------------------------------
# OpenAI's moderation endpoint (src/api/dialect/openai.rs)
# --------------------------------------------------------------------------------------------

OPENAI_CATEGORIES = [
    ("harassment", "From modgate's `harassment` (or tox-block's `insult`)."),
    ("harassment/threatening", "From modgate's `violence` (or tox-block's `threat`)."),
    ("hate", "From modgate's `hate` (or tox-block's `identity_hate`)."),
    ("hate/threatening", "The lower of modgate's `hate` and `violence`; flagged when both are."),
    ("illicit", None),
    ("illicit/violent", None),
    ("self-harm", "From modgate's `self_harm`."),
    ("self-harm/intent", "From modgate's `self_harm` (trained on suicidal intent)."),
    ("self-harm/instructions", None),
    ("sexual", "From modgate's `sexual` for a text, `nudity` for an image."),
    ("sexual/minors", None),
    ("violence", "From modgate's `violence` (or tox-block's `threat`)."),
    ("violence/graphic", None),
]


def by_category(schema):
    return {
        "type": "object",
        "required": [name for name, _ in OPENAI_CATEGORIES],
        "additionalProperties": False,
        "properties": {
            name: dict(schema, description=(
                ours if ours else "No model here measures it: no labelled data to train one."))
            for name, ours in OPENAI_CATEGORIES
        },
    }


schemas["ModerationRequest"] = {
    "type": "object",
    "description": (
        "OpenAI's moderation request. `input`: a string (one result), an array of at most 32 "
        "strings (one result each), or an array of `text` and `image_url` parts (one result for "
        "them all, at most one image: a `data:` URL or an `http(s)` address fetched under the "
        "download rules). All the texts together count against the plan's characters per check; "
        "the request is one check of the quota."
    ),
    "required": ["input"],
    "properties": {
        "input": {
            "oneOf": [
                {"type": "string"},
                {"type": "array", "minItems": 1, "maxItems": 32, "items": {"type": "string"}},
                {"type": "array", "minItems": 1, "items": {"oneOf": [
                    {"type": "object", "required": ["type", "text"],
                     "properties": {"type": {"const": "text"}, "text": {"type": "string"}}},
                    {"type": "object", "required": ["type", "image_url"],
                     "properties": {"type": {"const": "image_url"}, "image_url": {
                         "type": "object", "required": ["url"],
                         "properties": {"url": {"type": "string"}}}}},
                ]}},
            ]
        },
        "model": {
            "type": "string",
            "description": (
                "OpenAI's model names (`omni-moderation-latest`, the default, "
                "`omni-moderation-2024-09-26`, `text-moderation-latest`, `text-moderation-stable`, "
                "`text-moderation-007`) run the shipped `moderation` workflow; another name is a "
                "workflow of the organization; neither is 404 `model_not_found`."
            ),
        },
    },
}
schemas["ModerationResult"] = {
    "type": "object",
    "required": ["flagged", "categories", "category_scores", "category_applied_input_types"],
    "additionalProperties": False,
    "properties": {
        "flagged": {"type": "boolean", "description": "Whether any category is flagged."},
        "categories": by_category({
            "type": "boolean",
            "description": "Flagged: the score reached the workflow's reject threshold.",
        }),
        "category_scores": by_category({
            "type": ["number", "null"], "minimum": 0, "maximum": 1,
            "description": "The highest score over the input types that measured it; null when none did.",
        }),
        "category_applied_input_types": by_category({
            "type": "array", "items": {"enum": ["text", "image"]},
            "description": "The input types whose checks scored the category; empty when none did.",
        }),
    },
}
schemas["ModerationAnswer"] = {
    "type": "object",
    "required": ["id", "model", "results"],
    "additionalProperties": False,
    "properties": {
        "id": {"type": "string", "pattern": "^modr-", "description": "`modr-` and the request id."},
        "model": {"type": "string", "description": "The `model` asked for."},
        "results": {"type": "array", "items": sref("ModerationResult")},
    },
}
schemas["OpenAIError"] = {
    "type": "object",
    "required": ["error"],
    "additionalProperties": False,
    "properties": {"error": {
        "type": "object",
        "required": ["message", "type", "param", "code"],
        "additionalProperties": False,
        "properties": {
            "message": {"type": "string"},
            "type": {"type": "string", "description": (
                "`invalid_request_error` (4xx), `requests` (429 rate or concurrency), "
                "`insufficient_quota` (429 quota), `server_error` (5xx).")},
            "param": {"type": "null"},
            "code": {"type": "string", "description": (
                "`invalid_api_key` (401), `model_not_found` (404), `rate_limit_exceeded`, "
                "`insufficient_quota`, else modgate's error type.")},
        },
    }},
}


def openai_error(desc):
    return {"description": desc, "content": {"application/json": {"schema": sref("OpenAIError")}}}


paths["/v1/moderations"] = {
    "post": {
        "operationId": "createModeration",
        "tags": ["openai"],
        "summary": "OpenAI's moderation endpoint",
        "description": (
            "For OpenAI's SDKs. The key as `Authorization: Bearer`. Categories no model here "
            "measures are `false` with a null score and no applied input type."
        ),
        "security": SEC_NATIVE,
        "requestBody": {
            "required": True,
            "content": {"application/json": {
                "schema": sref("ModerationRequest"),
                "example": {"model": "omni-moderation-latest", "input": "I will find you"},
            }},
        },
        "responses": {
            "200": {"description": "One result per string, or one for the parts.",
                    "content": {"application/json": {"schema": sref("ModerationAnswer")}}},
            "400": openai_error("A malformed body or input, or a refused image."),
            "401": openai_error("No key, or a key that is not valid (`invalid_api_key`)."),
            "403": openai_error("The key's scope, workflow list or plan does not allow it."),
            "404": openai_error("An unknown `model` (`model_not_found`)."),
            "413": openai_error("The body, the texts or the image is over its limit."),
            "415": openai_error("The body is not `application/json`."),
            "429": openai_error("The plan's rate, concurrency or quota."),
            "503": openai_error("The server is busy; `Retry-After` says when to retry."),
        },
    }
}

# --------------------------------------------------------------------------------------------
# Google's Perspective API (src/api/dialect/perspective.rs)
# --------------------------------------------------------------------------------------------

PERSPECTIVE_ATTRIBUTES = ["TOXICITY", "SEVERE_TOXICITY", "IDENTITY_ATTACK", "INSULT", "PROFANITY", "THREAT"]

score_schema = {
    "type": "object", "required": ["value", "type"], "additionalProperties": False,
    "properties": {"value": {"type": "number", "minimum": 0, "maximum": 1},
                   "type": {"const": "PROBABILITY"}},
}
schemas["AnalyzeCommentRequest"] = {
    "type": "object",
    "description": (
        "Perspective's request. Attributes scored: " + ", ".join(PERSPECTIVE_ATTRIBUTES)
        + " (TOXICITY from the harm classifier's `offensive`, IDENTITY_ATTACK `hate`, INSULT "
        "`harassment`, THREAT `violence`; SEVERE_TOXICITY from tox-block's `severe_toxic`; "
        "PROFANITY from the linear profanity model). Another is 400 `INVALID_ARGUMENT`; so is a language other than `en` in `languages`. "
        "Without `languages`, the text's language is detected: one surely found to be another "
        "language (at least 40 letters in its first 120 characters, confidence 0.99) is 400 "
        "`INVALID_ARGUMENT` with `LANGUAGE_NOT_SUPPORTED_BY_ATTRIBUTE` in `error.details`, before any "
        "model runs; a shorter text is scored as English. `doNotStore`, "
        "`sessionId`, `communityId` are accepted (modgate never stores a text)."
    ),
    "required": ["comment", "requestedAttributes"],
    "properties": {
        "comment": {"type": "object", "required": ["text"],
                    "properties": {"text": {"type": "string", "minLength": 1}, "type": {"type": "string"}}},
        "requestedAttributes": {"type": "object", "minProperties": 1, "additionalProperties": {
            "type": "object", "properties": {
                "scoreThreshold": {"type": "number", "description": "Leave the attribute out below it."},
                "scoreType": {"type": "string"}}}},
        "languages": {"type": "array", "items": {"type": "string"}},
        "doNotStore": {"type": "boolean"},
        "spanAnnotations": {"type": "boolean",
                            "description": "One span per sentence, each scored on its own (at most 32)."},
        "clientToken": {"type": "string", "description": "Echoed in the answer."},
    },
}
schemas["AnalyzeCommentResponse"] = {
    "type": "object",
    "required": ["attributeScores", "languages"],
    "additionalProperties": False,
    "properties": {
        "attributeScores": {
            "type": "object",
            "propertyNames": {"enum": PERSPECTIVE_ATTRIBUTES},
            "additionalProperties": {
                "type": "object", "required": ["summaryScore", "spanScores"], "additionalProperties": False,
                "properties": {
                    "summaryScore": score_schema,
                    "spanScores": {"type": "array", "minItems": 1, "items": {
                        "type": "object", "required": ["begin", "end", "score"], "additionalProperties": False,
                        "properties": {"begin": {"type": "integer", "minimum": 0},
                                       "end": {"type": "integer", "minimum": 0},
                                       "score": score_schema},
                        "description": "Offsets in Unicode code points."}},
                },
            },
        },
        "languages": {"type": "array", "items": {"type": "string", "pattern": "^[a-z]{2,3}$"},
                      "minItems": 1, "maxItems": 1,
                      "description": "The language the text was scored in (ISO 639-1): the first "
                      "of `languages` (its language, for a code with a region), the one surely "
                      "detected, or `en`."},
        "detectedLanguages": {"type": "array", "items": {"type": "string", "pattern": "^[a-z]{2,3}$"},
                              "maxItems": 1,
                              "description": "For a request without `languages`, the language the "
                              "text was surely found in; absent when nothing sure was found (a short "
                              "text, say): it is scored as English."},
        "clientToken": {"type": "string"},
    },
}
schemas["GoogleError"] = {
    "type": "object", "required": ["error"], "additionalProperties": False,
    "properties": {"error": {
        "type": "object", "required": ["code", "message", "status"], "additionalProperties": False,
        "properties": {"code": {"type": "integer"}, "message": {"type": "string"},
                       "details": {"type": "array", "description": (
                           "Perspective's error detail, on a language an attribute does not read: "
                           "`errorType` `LANGUAGE_NOT_SUPPORTED_BY_ATTRIBUTE`, the attribute, and the "
                           "languages requested or detected."),
                           "items": {
                               "type": "object", "additionalProperties": False,
                               "required": ["@type", "errorType", "languageNotSupportedByAttributeError"],
                               "properties": {
                                   "@type": {"const": "type.googleapis.com/google.commentanalyzer.v1alpha1.Error"},
                                   "errorType": {"const": "LANGUAGE_NOT_SUPPORTED_BY_ATTRIBUTE"},
                                   "languageNotSupportedByAttributeError": {
                                       "type": "object", "additionalProperties": False,
                                       "required": ["attribute"],
                                       "properties": {
                                           "attribute": {"enum": PERSPECTIVE_ATTRIBUTES},
                                           "requestedLanguages": {"type": "array", "items": {"type": "string"}},
                                           "detectedLanguages": {"type": "array", "items": {"type": "string"}},
                                       }}}}},
                       "status": {"enum": ["INVALID_ARGUMENT", "UNAUTHENTICATED", "PERMISSION_DENIED",
                                           "NOT_FOUND", "UNIMPLEMENTED", "DEADLINE_EXCEEDED",
                                           "RESOURCE_EXHAUSTED", "UNAVAILABLE", "INTERNAL",
                                           "FAILED_PRECONDITION"]}},
    }},
}


def google_error(desc):
    return {"description": desc, "content": {"application/json": {"schema": sref("GoogleError")}}}


paths["/v1alpha1/comments:analyze"] = {
    "post": {
        "operationId": "analyzeComment",
        "tags": ["perspective"],
        "summary": "Perspective's comments:analyze",
        "description": "For Perspective's clients. The key as `?key=`, or in Google's `X-Goog-Api-Key` header (read as `X-Api-Key` is, on every route), or modgate's headers. Runs the shipped `perspective` workflow.",
        "parameters": [{"name": "key", "in": "query", "schema": {"type": "string"},
                        "description": "The API key."}],
        "requestBody": {"required": True, "content": {"application/json": {
            "schema": sref("AnalyzeCommentRequest"),
            "example": {"comment": {"text": "you are an idiot"}, "requestedAttributes": {"TOXICITY": {}}},
        }}},
        "responses": {
            "200": {"description": "The scores.",
                    "content": {"application/json": {"schema": sref("AnalyzeCommentResponse")}}},
            "400": google_error("A malformed request, an attribute not scored here, a language named "
                                "or surely detected that a requested attribute is not read in "
                                "(with `error.details`: TOXICITY, IDENTITY_ATTACK, INSULT and THREAT "
                                "are read in en, de, fr, ar, zh, pl, pt and hi; PROFANITY and "
                                "SEVERE_TOXICITY in en), a key "
                                "that is not valid, a body or text over its limit "
                                "or not `application/json` (all `INVALID_ARGUMENT`, as at Google)."),
            "403": google_error("No key (`PERMISSION_DENIED`, as at Google), or the key's scope, "
                                "workflow list or plan does not allow it."),
            "429": google_error("The plan's rate, concurrency or quota."),
            "503": google_error("The server is busy, or the models are not loaded."),
        },
    }
}
paths["/$discovery/rest"] = {
    "get": {
        "operationId": "discoveryDocument",
        "tags": ["perspective"],
        "summary": "The discovery document of the Perspective API",
        "description": "What Google's client libraries build a client from, with this server as `rootUrl` (the request's `Host`). No key.",
        "parameters": [{"name": "version", "in": "query", "required": True,
                        "schema": {"const": "v1alpha1"}}],
        "responses": {
            "200": {"description": "The document.", "content": {"application/json": {"schema": {
                "type": "object", "required": ["kind", "rootUrl", "resources", "schemas"]}}}},
            "404": google_error("Another version."),
        },
    }
}

# --------------------------------------------------------------------------------------------
# Sightengine's check.json (src/api/dialect/sightengine/mod.rs)
# --------------------------------------------------------------------------------------------

unit = {"type": "number", "minimum": 0, "maximum": 1}


def units(*names):
    """An object of the named scores, each required, nothing else."""
    return {"type": "object", "required": list(names), "additionalProperties": False,
            "properties": {name: unit for name in names}}


# Sightengine's nudity-2.1 answer, every class (`nudity-2.0` answers the same, and `sextoy` at
# the top level, where that version lists it).
NUDITY_INTENSITY = ["sexual_activity", "sexual_display", "erotica", "sextoy", "very_suggestive",
                    "suggestive", "mildly_suggestive", "none"]
SUGGESTIVE_CLASSES = ["bikini", "cleavage", "lingerie", "male_chest", "male_underwear",
                      "miniskirt", "minishort", "nudity_art", "schematic", "sextoy",
                      "suggestive_focus", "suggestive_pose", "swimwear_male",
                      "swimwear_one_piece", "visibly_undressed", "other"]
suggestive_classes = units(*SUGGESTIVE_CLASSES)
suggestive_classes["required"] += ["cleavage_categories", "male_chest_categories"]
suggestive_classes["properties"]["cleavage_categories"] = units("very_revealing", "revealing",
                                                                "none")
suggestive_classes["properties"]["male_chest_categories"] = units(
    "very_revealing", "revealing", "slightly_revealing", "none")
nudity_v2 = units(*NUDITY_INTENSITY)
nudity_v2["required"] += ["suggestive_classes", "context"]
nudity_v2["properties"]["suggestive_classes"] = suggestive_classes
nudity_v2["properties"]["context"] = {
    **units("sea_lake_pool", "outdoor_other", "indoor_other"),
    "description": "No model here measures the scene: 1/3 each.",
}
color = {"type": "object", "required": ["r", "g", "b", "hex"], "additionalProperties": False,
         "properties": {"r": {"type": "integer", "minimum": 0, "maximum": 255},
                        "g": {"type": "integer", "minimum": 0, "maximum": 255},
                        "b": {"type": "integer", "minimum": 0, "maximum": 255},
                        "hex": {"type": "string", "pattern": "^#[0-9a-f]{6}$"}}}
properties_fields = {
    "sharpness": dict(unit, description=(
        "The 90th percentile of the Laplacian's variance over 32-px tiles of luma, v, as "
        "v / (v + 60): a photo in focus scores above 0.85, blurred below about 0.6.")),
    "brightness": dict(unit, description="Mean luma (Rec. 601) over 255."),
    "contrast": dict(unit, description="Luma's 5th to 95th percentile spread over 255."),
    "colors": {"type": "object", "required": ["dominant", "accent", "other"],
               "additionalProperties": False,
               "properties": {
                   "dominant": dict(color, description="The fullest cell of an 8x8x8 RGB grid."),
                   "accent": {"type": "array", "maxItems": 3, "items": color,
                              "description": "Saturated, bright colours on at least 0.2 % of "
                                             "the image."},
                   "other": {"type": "array", "maxItems": 5, "items": color,
                             "description": "The next colours on at least 3 % of the image."}}},
}
schemas["ImageProperties"] = {
    "type": "object",
    "description": (
        "Measured from the pixels (no model), on the decoded image resized to at most 512 px "
        "on its long side."
    ),
    "required": list(properties_fields),
    "additionalProperties": False,
    "properties": properties_fields,
}
# What an addition to a list did (`/v1/lists/{name}/entries`, check.json's `add_to_list`).
added_entries_fields = {
    "added": {"type": "array", "items": sref("ListEntry")},
    "existing": {"type": "array", "items": {"type": "integer"},
                 "description": "Entry ids that already held a hash given (a hash is in a "
                                "list once)."},
}
def rule_lists(description):
    """`qr` and `text` of a Sightengine answer: rule matches by category, without positions."""
    return {"type": "object", "required": ["link", "personal", "profanity"],
            "additionalProperties": False,
            "description": description,
            "properties": {k: {"type": "array", "items": {
                "type": "object", "required": ["type", "match"], "additionalProperties": False,
                "properties": {"type": {"type": "string"},
                               "intensity": {"enum": ["high", "medium"]},
                               "match": {"type": "string"}}}}
                for k in ("link", "personal", "profanity")}}


schemas["SightengineAnswer"] = {
    "type": "object",
    "description": (
        "Sightengine's answer: one field per model asked. `properties`: `sharpness`, `brightness`, "
        "`contrast` and `colors` at the top level. `type`: `photo` and `illustration`. "
        "`models=nudity` (`raw` from modgate's `nudity`, `partial` from "
        "`suggestive`, `safe` = 1 - the larger) or `models=nudity-2.0|nudity-2.1` "
        "(every class of Sightengine's nudity-2.1 answer: `sexual_display` from `nudity`, "
        "`suggestive` from `suggestive`, `none` = 1 - the larger; the other classes are "
        "approximations from the same measures, and `context` is 1/3 each: "
        "docs/moving-from-a-hosted-api.md gives the mapping)."
    ),
    "required": ["status", "request", "media"],
    "additionalProperties": {
        "type": "object",
        "description": "A model the operator's own classifier answers (`[[models.custom]]` with "
                       "`sightengine`): its declared fields, each a score in [0, 1] at its "
                       "dotted path (`classes.firearm` is `{\"classes\": {\"firearm\": ...}}`).",
    },
    "properties": {
        **properties_fields,
        "status": {"const": "success"},
        "request": sref("CompatRequest"),
        "qr": rule_lists("`models=qr-content`: the matches of every QR code's payload, as "
                         "`/1.0/text/check.json` lists them, without positions."),
        "text": rule_lists("`models=text-content`: the matches of the text read in the "
                           "image (its lines joined, one a line), as `/1.0/text/check.json` "
                           "lists them, without positions. Sightengine's other rule "
                           "categories have no list here and are absent. 503 "
                           "`workflow_unavailable` when the OCR models are not installed."),
        "faces": {**answer_props["faces"],
                  "description": "`models=faces`: the faces, surest first, boxes and `features` "
                                 "in fractions of the width and height, and modgate's `score` "
                                 "per face; Sightengine's `attributes` have no model here and "
                                 "are absent. 503 `workflow_unavailable` when the face detector "
                                 "is not installed."},
        "type": {"type": "object", "required": ["photo", "illustration"],
                 "additionalProperties": False,
                 "description": "`models=type`: `illustration` is nsfwjs's Drawing plus Hentai, "
                                "`photo` 1 minus it.",
                 "properties": {"photo": unit, "illustration": unit}},
        "nudity": {"oneOf": [
            {"type": "object", "required": ["raw", "safe", "partial"], "additionalProperties": False,
             "properties": {"raw": unit, "safe": unit, "partial": unit}},
            nudity_v2,
        ]},
        "media": {"type": "object", "required": ["id", "uri"], "additionalProperties": False,
                  "properties": {"id": {"type": "string", "pattern": "^med_"},
                                 "uri": {"type": ["string", "null"],
                                         "description": "The `url`, or the uploaded file's name."}}},
        "list_matches": {
            "type": "array", "items": sref("ListMatch"),
            "description": (
                "modgate's own field, present when lists were consulted (`lists`, or the "
                "workflow's when its `hashlist` check runs for `nudity`): each list's best match "
                "(`[]`: none), as on `/v1/image`. Scores are not changed by a match."
            ),
        },
        "added_to_list": {
            "type": "object", "additionalProperties": False,
            "required": ["list", "added", "existing"],
            "description": "modgate's own field: what `add_to_list` added.",
            "properties": {"list": {"type": "string"}, **added_entries_fields},
        },
    },
}
p_models = qparam("models", {"type": "string"},
                  "Comma list of `nudity`, `nudity-2.0` or `nudity-2.1` (one version), `type`, "
                  "`properties`, `qr-content`, `text-content` and `faces`, and the models the operator's own classifiers answer "
                  "(`[[models.custom]]` with `sightengine`). Any other model is 400 `bad_request` naming it "
                  "and the supported ones. Required unless `add_to_list` or `lists` is given.")
check_json_list_fields = {
    "lists": {"type": "string", "description": (
        "modgate's own: a comma list of at most 16 of the organization's list names to look "
        "the image up in (answered in `list_matches`).")},
    "add_to_list": {"type": "string", "pattern": "^[a-z0-9_-]{1,64}$", "description": (
        "As Sightengine documents it: adds the image's hashes (PDQ when its detail allows, MD5, "
        "SHA-256) to the organization's list of this name (modgate's list names, not "
        "Sightengine's `ili_` ids). The key needs the `lists` scope (403 `forbidden`); no such "
        "list: 404.")},
    "custom_id": {"type": "string", "maxLength": 256,
                  "description": "With `add_to_list`: the entries' `id`."},
}
p_check_json_lists = [qparam(name, schema, schema["description"])
                      for name, schema in check_json_list_fields.items()]
paths["/1.0/check.json"] = {
    "post": {
        "operationId": "sightengineCheck",
        "tags": ["compatible"],
        "summary": "Sightengine's check.json, multipart form",
        "description": (
            "For Sightengine's SDKs: the form of `/1.0/check-workflow.json` with `models` in place "
            "of (or beside) `workflow`; the image is checked by the workflow's image checks "
            "(`default` when absent). Every error uses CompatErrorEnvelope."
        ),
        "security": SEC_COMPAT,
        "requestBody": {"required": True, "content": {"multipart/form-data": {
            "schema": {"allOf": [sref("CompatImageForm"), {"type": "object",
                       "properties": {"models": {"type": "string"},
                                      **check_json_list_fields}}]}}}},
        "responses": {
            "200": {"description": "The scores.",
                    "content": {"application/json": {"schema": sref("SightengineAnswer")}}},
            **error_responses("compat_image"),
        },
    },
    "get": {
        "operationId": "sightengineCheckByUrl",
        "tags": ["compatible"],
        "summary": "Sightengine's check.json by `url`",
        "description": "As the POST, the image downloaded from `url`.",
        "security": SEC_COMPAT,
        "parameters": [p_models, p_url_compat, p_api_user, p_api_secret, *p_check_json_lists],
        "responses": {
            "200": {"description": "The scores.",
                    "content": {"application/json": {"schema": sref("SightengineAnswer")}}},
            **error_responses("compat_image_get"),
        },
    },
}

for _method in ("post", "get"):
    _responses = paths["/1.0/check.json"][_method]["responses"]
    _responses["403"] = err_response(403, True, (
        status_403(True, "image")["description"].split("\n\nError types:")[0]
        + "\n\n`forbidden` also: `add_to_list` with a key that lacks the `lists` scope."
    ), ["forbidden", "organization_suspended"], "maybe")
    _responses["404"] = err_response(
        404, True, "`bad_request`: `add_to_list` names no list of the organization.",
        ["bad_request"], "maybe")
    for _code, _also in (
        ("400", "`bad_request` also: `lists` or `add_to_list` not list names, over 16 `lists`, "
                "`custom_id` without `add_to_list`, `add_to_list` naming a list of terms or a "
                "full one."),
        ("503", "`busy` also: with `add_to_list` on a fleet node, PostgreSQL could not take "
                "the write (after a failed or timed-out commit the message says the outcome "
                "is unknown)."),
    ):
        _responses[_code] = dict(_responses[_code])
        _responses[_code]["description"] = _responses[_code]["description"].replace(
            "\n\nError types:", "\n\n" + _also + "\n\nError types:", 1)
    paths["/1.0/check.json"][_method]["responses"] = dict(sorted(_responses.items()))

# --------------------------------------------------------------------------------------------
# Sightengine's text/check.json (src/api/dialect/sightengine/text.rs)
# --------------------------------------------------------------------------------------------

schemas["SightengineTextForm"] = {
    "type": "object",
    "description": (
        "Form of Sightengine's `POST /1.0/text/check.json`, multipart or URL-encoded. Unknown "
        "fields are ignored (at most 64 KiB each); the whole form must arrive within 10 seconds."
    ),
    "required": ["text", "mode"],
    "properties": {
        "text": {"type": "string", "maxLength": 20000,
                 "description": "The text: at most 20,000 characters, 5,000 on the free plan."},
        "mode": {"enum": ["rules", "standard", "ml"],
                 "description": "`standard` is the older name of `rules`. Others: 400."},
        "lang": {"type": "string",
                 "description": "Comma list of ISO 639-1 codes; only `en` is read (absent: `en`)."},
        "categories": {"type": "string",
                       "description": "mode=rules: comma list of `profanity`, `personal`, `link` "
                                      "(absent: all three). Another category: 400 naming it."},
        "opt_countries": {"type": "string",
                          "description": "mode=rules: comma list of two-letter country codes "
                                         "(at most 64; absent: `us`). North American numbers "
                                         "without a country code are listed only with `us` or "
                                         "`ca`; international numbers always."},
        "models": {"type": "string",
                   "description": "mode=ml: comma list; only `general` (absent: `general`)."},
        "api_secret": {"type": "string", "description": f"The API key, {KEY_FORMAT}"},
        "api_user": {"type": "string", "description": "Accepted and ignored."},
    },
}
text_match = {
    "type": "object",
    "required": ["type", "match", "start", "end"],
    "additionalProperties": False,
    "properties": {
        "type": {"type": "string"},
        "intensity": {"enum": ["high", "medium"], "description": "Profanity only."},
        "match": {"type": "string", "description": "The text as written."},
        "start": {"type": "integer", "minimum": 0,
                  "description": "Index of the first character (Unicode code points)."},
        "end": {"type": "integer", "minimum": 0,
                "description": "Index of the last character (inclusive)."},
    },
}
matches = {"type": "object", "required": ["matches"], "additionalProperties": False,
           "properties": {"matches": {"type": "array", "maxItems": 1000, "items": text_match}}}
schemas["SightengineTextRulesAnswer"] = {
    "type": "object",
    "description": (
        "mode=rules: one object per category asked. `profanity` types: `sexual`, "
        "`discriminatory`, `insult`, `inappropriate`; `personal` types: `email`, "
        "`phone_number_XX` or `phone_number`, `ip`, `iban`, `credit_card`; `link` type: `url`."
    ),
    "required": ["status", "request"],
    "additionalProperties": False,
    "properties": {
        "status": {"const": "success"},
        "request": sref("CompatRequest"),
        "profanity": matches,
        "personal": matches,
        "link": matches,
    },
}
schemas["SightengineTextMlAnswer"] = {
    "type": "object",
    "description": (
        "mode=ml: the harm classifier's scores under Sightengine's class names (`sexual` from "
        "sexual, `discriminatory` from hate, `insulting` from harassment, `violent` from "
        "violence, `toxic` from offensive). `self-harm` is absent."
    ),
    "required": ["status", "request", "moderation_classes"],
    "additionalProperties": False,
    "properties": {
        "status": {"const": "success"},
        "request": sref("CompatRequest"),
        "moderation_classes": {
            "type": "object",
            "required": ["available", "sexual", "discriminatory", "insulting", "violent", "toxic"],
            "additionalProperties": False,
            "properties": {
                "available": {"type": "array", "items": {"enum": [
                    "sexual", "discriminatory", "insulting", "violent", "toxic"]}},
                "sexual": unit, "discriminatory": unit, "insulting": unit, "violent": unit,
                "toxic": unit,
            },
        },
    },
}
text_check_errors = error_responses("compat_text")
text_check_errors["400"] = err_response(400, True, "\n\n".join([
    FRAMING_400 + " Also: a body that is neither `multipart/form-data` nor "
    "`application/x-www-form-urlencoded`, a malformed form, no `text` field, a field that is not "
    "UTF-8, a known field sent twice, `mode` missing, or a mode, category, model, language or "
    "country code this server does not answer (the message names it and the supported ones).",
]), ["bad_request"], "maybe")
paths["/1.0/text/check.json"] = {
    "post": {
        "operationId": "sightengineTextCheck",
        "tags": ["compatible"],
        "summary": "Sightengine's text/check.json",
        "description": (
            "mode=rules lists the word list's, the PII scanners' and the link scanner's matches "
            "(the shipped `text-rules` workflow); mode=ml scores tox-block's classes (the shipped "
            "`text-ml` workflow). Every error uses CompatErrorEnvelope."
        ),
        "security": SEC_COMPAT,
        "requestBody": {"required": True, "content": {
            "multipart/form-data": {"schema": sref("SightengineTextForm")},
            "application/x-www-form-urlencoded": {"schema": sref("SightengineTextForm")},
        }},
        "responses": {
            "200": {"description": "The matches or the scores.",
                    "content": {"application/json": {"schema": {"oneOf": [
                        sref("SightengineTextRulesAnswer"), sref("SightengineTextMlAnswer")]}}}},
            **text_check_errors,
        },
    },
}

# --------------------------------------------------------------------------------------------
# Hash lists (/v1/lists)
# --------------------------------------------------------------------------------------------

list_match_schema = {
    "type": "object",
    "description": "An entry of one of the organization's lists that the image matched.",
    "additionalProperties": False,
    "required": ["list", "kind", "entry_id", "hash_type", "distance", "label", "id"],
    "properties": {
        "list": {"type": "string"},
        "kind": {"enum": ["block", "allow"]},
        "entry_id": {"type": "integer", "minimum": 1},
        "hash_type": {"enum": ["pdq", "md5", "sha256", "term"],
                      "description": "An exact hash (md5, sha256) wins over a PDQ match; "
                                     "`term` for a text list's entry."},
        "distance": {"type": "integer", "minimum": 0, "maximum": 63,
                     "description": "PDQ bits that differ of 256; 0 for an exact hash or a "
                                    "term."},
        "label": {"type": ["string", "null"]},
        "id": {"type": ["string", "null"], "description": "The caller's id of the entry."},
        "term": {"type": "string", "description": "A text list's entry: its term as given."},
    },
}
schemas["ListMatch"] = list_match_schema
schemas["Answer"]["properties"]["list_matches"] = {
    "type": "array",
    "items": sref("ListMatch"),
    "description": (
        "When the workflow names the `hashlist` (images) or `termlist` (texts) check: the "
        "first match in each of the organization's lists the workflow names (`[]`: none). A "
        "block list's match scores `known_image` or `listed_term` 1 and that reason carries it "
        "as `match`. An image allow list's match exempts the image: no category but "
        "`known_image` is then a reason. A text allow list's terms are hidden from the word "
        "list and the block lists."
    ),
}
schemas["Answer"]["properties"]["image_hashes"] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["md5", "sha256"],
    "description": (
        "Images, when the workflow names the `hashlist` check: the image's hashes, to keep and "
        "list later (`POST /v1/lists/{name}/entries` with `hash_type` and `hash`) without "
        "sending the image again. `pdq` (at 512 px on the long side, what entries made from "
        "uploads hold) is absent for an image under 5 px a side."
    ),
    "properties": {
        "pdq": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
        "pdq_quality": {"type": "integer", "minimum": 0, "maximum": 100,
                        "description": "Under 50, the hash is too weak to match on."},
        "md5": {"type": "string", "pattern": "^[0-9a-f]{32}$",
                "description": "Of the file as sent."},
        "sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
    },
}
if "CompatAnswer" in schemas:
    schemas["CompatAnswer"]["properties"]["list_matches"] = schemas["Answer"]["properties"][
        "list_matches"]
    schemas["CompatAnswer"]["properties"]["image_hashes"] = schemas["Answer"]["properties"][
        "image_hashes"]
schemas["Reason"]["properties"]["match"] = dict(
    sref("ListMatch"),
    description="`known_image` and `listed_term` only: the block list's entry that matched.",
)
list_schema = {
    "type": "object",
    "additionalProperties": False,
    "required": ["name", "kind", "content", "distance", "entries", "created"],
    "properties": {
        "name": {"type": "string", "pattern": "^[a-z0-9_-]{1,64}$"},
        "kind": {"enum": ["block", "allow"],
                 "description": "block: a match is `known_image` or `listed_term`; allow: a "
                                "match exempts the image, or hides the term."},
        "content": {"enum": ["image", "text"],
                    "description": "Image hashes (the `hashlist` check) or words and phrases "
                                   "(the `termlist` check)."},
        "distance": {"type": "integer", "minimum": 0, "maximum": 63,
                     "description": "PDQ matches within this many bits (default 31, PDQ's "
                                    "recommendation)."},
        "entries": {"type": "integer", "minimum": 0},
        "created": {"type": "string", "format": "date-time"},
    },
}
schemas["HashList"] = list_schema
entry_schema = {
    "type": "object",
    "additionalProperties": False,
    "required": ["entry_id", "hash_type", "label", "id", "added"],
    "properties": {
        "entry_id": {"type": "integer", "minimum": 1,
                     "description": "Given by the server, increasing, never reused."},
        "hash_type": {"enum": ["pdq", "md5", "sha256", "term"]},
        "hash": {"type": "string", "pattern": "^[0-9a-f]{32}([0-9a-f]{32})?$",
                 "description": "Image lists."},
        "term": {"type": "string", "maxLength": 128, "description": "Text lists."},
        "label": {"type": ["string", "null"], "maxLength": 256},
        "id": {"type": ["string", "null"], "maxLength": 256},
        "added": {"type": "string", "format": "date-time"},
    },
}
schemas["ListEntry"] = entry_schema
schemas["ListAnswer"] = {
    "type": "object", "additionalProperties": False, "required": ["status", "list"],
    "properties": {"status": {"const": "success"}, "list": sref("HashList")},
}
schemas["ListsAnswer"] = {
    "type": "object", "additionalProperties": False, "required": ["status", "lists"],
    "properties": {"status": {"const": "success"},
                   "lists": {"type": "array", "items": sref("HashList")}},
}
schemas["EntriesPage"] = {
    "type": "object", "additionalProperties": False, "required": ["status", "list", "entries"],
    "properties": {
        "status": {"const": "success"},
        "list": sref("HashList"),
        "entries": {"type": "array", "items": sref("ListEntry"), "maxItems": 1000},
        "next_after": {"type": "integer",
                       "description": "The `after` of the next page; absent on the last."},
    },
}
schemas["EntriesAdded"] = {
    "type": "object", "additionalProperties": False,
    "required": ["status", "added", "existing", "skipped", "skipped_count"],
    "properties": {
        "status": {"const": "success"},
        **added_entries_fields,
        "skipped": {"type": "array", "maxItems": 100, "items": {
            "type": "object", "additionalProperties": False, "required": ["line", "reason"],
            "properties": {"line": {"type": "integer", "minimum": 1},
                           "reason": {"type": "string"}}},
                    "description": "Import: rows of hash types this server does not match "
                                   "(and NEGATIVE_CLASS rows), the first 100."},
        "skipped_count": {"type": "integer", "minimum": 0,
                          "description": "Import: such rows in all (0 for other adds)."},
    },
}
schemas["ListCreate"] = {
    "type": "object", "additionalProperties": False, "required": ["name", "kind"],
    "properties": {
        "name": {"type": "string", "pattern": "^[a-z0-9_-]{1,64}$"},
        "kind": {"enum": ["block", "allow"]},
        "content": {"enum": ["image", "text"], "default": "image"},
        "distance": {"type": "integer", "minimum": 0, "maximum": 63, "default": 31},
    },
}
schemas["ListEntriesRequest"] = {
    "type": "object", "additionalProperties": False, "required": ["entries"],
    "properties": {"entries": {"type": "array", "maxItems": 200000, "items": {
        "type": "object", "additionalProperties": False,
        "oneOf": [{"required": ["hash_type", "hash"]}, {"required": ["term"]}],
        "properties": {
            "hash_type": {"enum": ["pdq", "md5", "sha256"]},
            "hash": {"type": "string", "description": "Hex, either case."},
            "term": {"type": "string", "maxLength": 128,
                     "description": "A text list's word or phrase (matched after the word "
                                    "list's normalisation, on whole words)."},
            "label": {"type": "string", "maxLength": 256},
            "id": {"type": "string", "maxLength": 256},
        }}}},
}


def scoped_route_errors(bad_request, scope, extra=None):
    """The errors of a native route that is not a check: `bad_request` (with its 404 and
    409), the key, its `scope`, the key's rate."""
    r = {
        "400": err_response(400, False, bad_request, ["bad_request"], "maybe"),
        "401": status_401(False),
        "403": err_response(403, False, f"`forbidden`: the key has no `{scope}` scope; or "
                            + ORIGIN_COND, ["forbidden"], "maybe"),
        "429": status_429(False, check=False),
        "500": status_500(False),
    }
    if extra:
        r.update(extra)
    return dict(sorted(r.items()))


def list_errors():
    return scoped_route_errors((
        "`bad_request`: a malformed request (JSON, CSV with its line, a hash that is not "
        "its type's hex, a name outside [a-z0-9_-]{1,64}, a distance over 63, over 200,000 "
        "entries a request, over 100 lists an organization, over 10,000,000 entries a "
        "list). 404 (also `bad_request`): no such list or entry. 409 (also `bad_request`): "
        "a list of that name exists."
    ), "lists", {
        "503": err_response(503, False, (
            "`busy`: this node is part of a fleet and its PostgreSQL could not take a write "
            "(nothing was written; after 30 s without an answer the write may or may not be "
            "made: read the list to know). A connection over the shard's connection cap is "
            "answered 503 `busy` at once, before its request is read, and closed. "
            "`Retry-After` is sent."
        ), ["busy"], "maybe", ["Retry-After"]),
    })


p_list_name = {"name": "name", "in": "path", "required": True,
               "schema": {"type": "string", "pattern": "^[a-z0-9_-]{1,64}$"}}


def list_op(op_id, summary, desc, ok, body=None, params=None, status="200"):
    op = {"operationId": op_id, "tags": ["lists"], "summary": summary, "description": desc,
          "security": SEC_NATIVE, "responses": {status: ok, **list_errors()}}
    if body:
        op["requestBody"] = body
    if params:
        op["parameters"] = params
    return op


def json_ok(schema, desc):
    return {"description": desc, "headers": hdrs("maybe"),
            "content": {"application/json": {"schema": sref(schema)}}}


paths["/v1/lists"] = {
    "get": list_op("listLists", "The organization's hash lists",
                   "Every list of the key's organization. Keys need the `lists` scope.",
                   json_ok("ListsAnswer", "The lists.")),
    "post": list_op("createList", "Create a hash list",
                    "A block list (a match scores `known_image` or `listed_term` 1) or an allow "
                    "list (a match exempts the image from the models' decision; an allowed "
                    "term is hidden from the word list), of image hashes or of terms. "
                    "Workflows name the lists their `hashlist` and `termlist` checks consult "
                    "(`lists = [...]`).",
                    json_ok("ListAnswer", "The new list."), status="201",
                    body={"required": True, "content": {
                        "application/json": {"schema": sref("ListCreate")}}}),
}
paths["/v1/lists/{name}"] = {
    "parameters": [p_list_name],
    "get": list_op("getList", "One hash list", "The list's settings and size.",
                   json_ok("ListAnswer", "The list.")),
    "delete": list_op("deleteList", "Delete a hash list", "The list and all its entries.",
                      json_ok("ListAnswer", "The deleted list.")),
}
paths["/v1/lists/{name}/entries"] = {
    "parameters": [p_list_name],
    "get": list_op(
        "listEntries", "A page of entries", "In the order they were added.",
        json_ok("EntriesPage", "The page."),
        params=[qparam("after", {"type": "integer", "minimum": 0},
                       "Entries with an `entry_id` above this (the previous page's "
                       "`next_after`)."),
                qparam("limit", {"type": "integer", "minimum": 1, "maximum": 1000,
                                 "default": 100}, "Entries per page.")]),
    "post": list_op(
        "addEntries", "Add entries",
        "Hashes as JSON (`Content-Type: application/json`); or an image as the body (any "
        "other content type; up to 15 MB) or by `url` (empty body), whose PDQ hash (when its "
        "quality is 50 or more), MD5 and SHA-256 are added, made as a check makes them. A hash "
        "already in the list is not added again: its entry id is in `existing`.",
        json_ok("EntriesAdded", "What was added."), status="201",
        params=[qparam("label", {"type": "string", "maxLength": 256}, "Image entries' label."),
                qparam("id", {"type": "string", "maxLength": 256},
                       "Image entries' caller id."),
                qparam("url", {"type": "string", "format": "uri"},
                       "An image to download instead of a body. " + DOWNLOAD_RULES)],
        body={"required": False, "content": {
            "application/json": {"schema": sref("ListEntriesRequest")},
            "application/octet-stream": {"schema": {"type": "string",
                                                    "contentMediaType": "image/*"}}}}),
}
paths["/v1/lists/{name}/entries/{entry_id}"] = {
    "parameters": [p_list_name, {"name": "entry_id", "in": "path", "required": True,
                                 "schema": {"type": "integer", "minimum": 1}}],
    "delete": list_op("removeEntry", "Remove an entry", "Matching stops within a second.",
                      {"description": "The removed entry.", "headers": hdrs("maybe"),
                       "content": {"application/json": {"schema": {
                           "type": "object", "additionalProperties": False,
                           "required": ["status", "removed"],
                           "properties": {"status": {"const": "success"},
                                          "removed": sref("ListEntry")}}}}}),
}
paths["/v1/lists/{name}/import"] = {
    "parameters": [p_list_name],
    "post": list_op(
        "importEntries", "Import entries from CSV",
        "Up to 200,000 entries a request (the CLI's `modgate list import` takes more). Read: "
        "this server's export (`signal_type,signal,label,id`); any CSV with a header naming "
        "its hash column (`signal`, `signal_str`, `hash`, or `pdq`/`md5`/`sha256`) and "
        "optionally its type, label and id columns; ThreatExchange's `dataset --csv` "
        "(NEGATIVE_CLASS rows skipped); headerless `type,hash[,label[,id]]`; PDQ tools' "
        "`hash,quality,name`; and threatexchange local files (`type hash` per line). Rows of "
        "other signal types are skipped and reported; a bad hash refuses the import with its "
        "line. All or nothing. A text list reads one term per line, or its own export "
        "(`term,label,id`).",
        json_ok("EntriesAdded", "What was added."), status="201",
        body={"required": True, "content": {"text/csv": {"schema": {"type": "string"}}}}),
}
paths["/v1/lists/{name}/export"] = {
    "parameters": [p_list_name],
    "get": list_op("exportEntries", "Export entries as CSV",
                   "Header `signal_type,signal,label,id` (a text list: `term,label,id`), one row "
                   "per entry in the order added.",
                   {"description": "The entries.", "headers": hdrs("maybe"),
                    "content": {"text/csv": {"schema": {"type": "string"}}}}),
}

# --------------------------------------------------------------------------------------------
# The platform's own judgement (/v1/feedback, /v1/checks/{request_id})
REQUEST_ID_PATTERN = "^[0-9A-HJKMNP-TV-Z]{26}$"
schemas["FeedbackRequest"] = {
    "type": "object", "additionalProperties": False, "required": ["request_id"],
    "description": "Feedback on one check: at least one of `action`, `labels` and `note`. "
                   "Merged into what the check has: the last word on each category wins, as "
                   "do the last action and note.",
    "properties": {
        "request_id": {"type": "string", "pattern": REQUEST_ID_PATTERN,
                       "description": "The check's `request_id`, as it was answered."},
        "action": {"enum": ["accept", "review", "reject"],
                   "description": "The action the check should have had. `accept` also "
                                  "labels every category the feedback does not name as not "
                                  "harm, for calibration."},
        "labels": {"type": "object", "maxProperties": 64,
                   "propertyNames": {"pattern": "^[a-z0-9_]{1,64}$"},
                   "additionalProperties": {"type": "boolean"},
                   "description": "By category id: whether the content was that harm."},
        "note": {"type": "string", "maxLength": 1000},
    },
}
schemas["Feedback"] = {
    "type": "object", "additionalProperties": False,
    "required": ["action", "labels", "note", "given_by", "first_given", "last_given"],
    "properties": {
        "action": {"type": ["string", "null"], "enum": ["accept", "review", "reject", None]},
        "labels": {"type": "object", "additionalProperties": {"type": "boolean"}},
        "note": {"type": ["string", "null"]},
        "given_by": {"type": "string",
                     "description": "The key id that gave the last feedback, or `import` "
                                    "(`modgate feedback import`)."},
        "first_given": {"type": "string", "format": "date-time"},
        "last_given": {"type": "string", "format": "date-time"},
    },
}
schemas["FeedbackAnswer"] = {
    "type": "object", "additionalProperties": False,
    "required": ["status", "request_id", "feedback"],
    "properties": {"status": {"const": "success"},
                   "request_id": {"type": "string", "pattern": REQUEST_ID_PATTERN},
                   "feedback": sref("Feedback")},
}
schemas["ExplainedCheck"] = {
    "type": "object", "additionalProperties": False,
    "required": ["status", "request_id", "time", "route", "http_status", "workflow", "action",
                 "error_type", "decided_by", "categories", "unchecked", "thresholds_kept",
                 "thresholds_give_action", "feedback"],
    "description": "How a check was decided, from its journal record: enough for a statement "
                   "of reasons. No content is kept, so none is shown.",
    "properties": {
        "status": {"const": "success"},
        "request_id": {"type": "string", "pattern": REQUEST_ID_PATTERN},
        "time": {"type": "string", "format": "date-time"},
        "route": {"type": "string", "description": "The path the check was sent to."},
        "http_status": {"type": "integer", "description": "The status it was answered."},
        "workflow": {"oneOf": [{"type": "null"}, {
            "type": "object", "additionalProperties": False, "required": ["name", "version"],
            "properties": {"name": {"type": "string"},
                           "version": {"type": "integer", "minimum": 1}}}]},
        "action": {"type": ["string", "null"], "enum": ["accept", "review", "reject", None],
                   "description": "The action answered; null for a request refused before "
                                  "its checks ran."},
        "error_type": {"type": ["string", "null"],
                       "description": "The refusal's `error.type`, for such a request."},
        "decided_by": {"type": "array", "items": {"type": "string"},
                       "description": "The categories whose scores reached the thresholds of "
                                      "the action answered."},
        "categories": {"type": "array", "items": {
            "type": "object", "additionalProperties": False,
            "required": ["category", "score", "review", "reject", "decides"],
            "properties": {
                "category": {"type": "string"},
                "score": {"type": "number", "minimum": 0, "maximum": 1},
                "review": {"type": ["number", "null"]},
                "reject": {"type": ["number", "null"]},
                "decides": {"type": ["string", "null"],
                            "enum": ["accept", "review", "reject", None],
                            "description": "What this category alone decided under the "
                                           "thresholds of the version the check was decided "
                                           "under (null when that version is not kept)."},
            }}},
        "unchecked": {"type": "array", "items": {"type": "string"}},
        "thresholds_kept": {"type": "boolean",
                            "description": "Whether the thresholds of the workflow version "
                                           "were found (every version imported since versions "
                                           "are kept, and the one in force)."},
        "thresholds_give_action": {"type": ["boolean", "null"],
                                   "description": "Whether the thresholds give the action "
                                                  "answered; false when something other than "
                                                  "scores decided (an allow list exempts an "
                                                  "image)."},
        "feedback": {"oneOf": [{"type": "null"}, sref("Feedback")]},
    },
}


def judgement_errors():
    return scoped_route_errors((
        "`bad_request`: a malformed body, an action other than accept, review or reject, "
        "a label that is not a category id or not a boolean, over 64 labels, a note over "
        "1,000 characters, or feedback on a request refused before its checks ran. 404 "
        "(also `bad_request`): no check of the key's organization has that request id."
    ), "feedback")


paths["/v1/feedback"] = {
    "post": {
        "operationId": "giveFeedback", "tags": ["judgement"],
        "summary": "Feedback on one of the organization's checks",
        "description": "The action a check should have had and, by category, whether its "
                       "content was that harm, for `modgate calibrate` and "
                       "`GET /v1/checks/{request_id}`. Keys need the `feedback` scope. Stored "
                       "with a durable commit before the answer.",
        "security": SEC_NATIVE,
        "requestBody": {"required": True, "content": {
            "application/json": {"schema": sref("FeedbackRequest")}}},
        "responses": {"200": json_ok("FeedbackAnswer", "The check's feedback as it now is."),
                      **judgement_errors()},
    },
}
paths["/v1/checks/{request_id}"] = {
    "parameters": [{"name": "request_id", "in": "path", "required": True,
                    "schema": {"type": "string", "pattern": REQUEST_ID_PATTERN}}],
    "get": {
        "operationId": "explainCheck", "tags": ["judgement"],
        "summary": "How one of the organization's checks was decided",
        "description": "The decision as it was made: the workflow and its version, each "
                       "category's score and the thresholds of that version, the categories "
                       "that decided, what was unchecked, and the feedback given since. Keys "
                       "need the `feedback` scope.",
        "security": SEC_NATIVE,
        "responses": {"200": json_ok("ExplainedCheck", "The check."), **judgement_errors()},
    },
}

# --------------------------------------------------------------------------------------------
# Sightengine's own routes answer Sightengine's documented error types (ErrorKind's
# `sightengine_type` in src/error.rs); `/1.0/check-workflow.json` keeps modgate's (the spec's).
SIGHTENGINE_ERROR_TYPES = ["api_error", "argument_error", "callback_error", "credentials_error",
                           "media_error", "plan_error", "request_error", "unknown_error",
                           "usage_limit"]
SIGHTENGINE_TYPE_OF = {
    "unauthorized": "credentials_error", "forbidden": "credentials_error",
    "organization_suspended": "plan_error", "unknown_workflow": "argument_error",
    "text_too_long": "argument_error", "unsupported_media": "media_error",
    "corrupt_media": "media_error", "body_too_large": "media_error",
    "image_too_large": "media_error", "url_refused": "media_error",
    "request_timeout": "request_error", "rate_limited": "usage_limit",
    "too_many_concurrent": "usage_limit", "quota_exceeded": "usage_limit",
    "workflow_unavailable": "api_error", "busy": "api_error", "internal": "api_error",
}


def sightengine_type(code, modgate_type):
    if modgate_type == "bad_request":
        # 400, 409 and 404 (a list `add_to_list` names that does not exist) are about the
        # arguments; 405, 414, 417 and 431 about the request.
        return "argument_error" if int(code) in (400, 404, 409) else "request_error"
    return SIGHTENGINE_TYPE_OF[modgate_type]


# CompatErrorEnvelope with ErrorBody's `type` taking Sightengine's values.
schemas["SightengineErrorEnvelope"] = copy.deepcopy(schemas["CompatErrorEnvelope"])
schemas["SightengineErrorEnvelope"]["description"] = (
    "Every error reply of `/1.0/check.json` and `/1.0/text/check.json`: CompatErrorEnvelope "
    "with Sightengine's documented `error.type`s, so that code written against Sightengine "
    "keeps working (the HTTP status and `code` are modgate's)."
)
schemas["SightengineErrorEnvelope"]["properties"]["error"] = copy.deepcopy(schemas["ErrorBody"])
schemas["SightengineErrorEnvelope"]["properties"]["error"]["properties"]["type"]["enum"] = (
    SIGHTENGINE_ERROR_TYPES)


def with_sightengine_errors(operation):
    """Rewrites the error answers of `operation` to SightengineErrorEnvelope."""
    out = {}
    for code, answer in operation["responses"].items():
        if "$ref" in answer:
            answer = responses[answer["$ref"].rsplit("/", 1)[1]]
        answer = copy.deepcopy(answer)
        media = answer.get("content", {}).get("application/json")
        types = answer.get("x-error-types")
        if code[0] in "45" and media is not None and types:
            media["schema"] = sref("SightengineErrorEnvelope")
            example = media.get("example")
            if example:
                example["error"]["type"] = sightengine_type(code, example["error"]["type"])
            answer["description"] += (
                "\n\nOn this route `error.type` is Sightengine's: "
                + ", ".join(f"`{t}` is `{sightengine_type(code, t)}`" for t in types) + "."
            )
            answer["x-error-types"] = sorted({sightengine_type(code, t) for t in types})
        out[code] = answer
    operation["responses"] = out


for _path, _methods in (("/1.0/check.json", ("post", "get")), ("/1.0/text/check.json", ("post",))):
    for _method in _methods:
        with_sightengine_errors(paths[_path][_method])

doc = {
    "openapi": "3.1.0",
    "info": {
        "title": "modgate",
        "version": "0.1.0",
        "description": DESCRIPTION,
    },
    "servers": [{"url": "/"}],
    "tags": [
        {"name": "native", "description": "Native routes under `/v1`."},
        {"name": "compatible",
         "description": "Routes in the shape of a third-party moderation API, under `/1.0`."},
        {"name": "service", "description": "Health and this document; no key."},
        {"name": "openai", "description": "OpenAI's moderation endpoint, for its SDKs."},
        {"name": "perspective", "description": "Google's Perspective API, for its clients."},
        {"name": "lists", "description": "The organization's hash lists (keys with the `lists` "
                                         "scope)."},
        {"name": "judgement", "description": "Feedback on the organization's checks and how "
                                             "each was decided (keys with the `feedback` "
                                             "scope)."},
    ],
    "paths": paths,
    "components": {
        "schemas": schemas,
        "responses": responses,
        "headers": headers,
        "securitySchemes": security_schemes,
    },
}

# /health answers 503 with Retry-After (sent in every 503 case).
doc["paths"]["/health"]["get"]["responses"]["503"]["headers"]["Retry-After"] = {
    "$ref": "#/components/headers/Retry-After"
}

if __name__ == "__main__":
    out = os.path.join(HERE, "openapi.json")
    with open(out, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=2, ensure_ascii=False)
        f.write("\n")
    print(out)
