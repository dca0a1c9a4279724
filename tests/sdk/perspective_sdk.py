"""Google's API client library for Python (google-api-python-client), unchanged, against
modgate's Perspective API (tests/sdks.rs): the client is built from the discovery document at
https://commentanalyzer.googleapis.com/$discovery/rest?version=v1alpha1, as Perspective's own
documentation shows, which the test's mount namespace resolves to 127.0.0.1 (modgate, TLS with
the test's authority, trusted through HTTPLIB2_CA_CERTS). Prints one JSON object.
"""
import json
import os

from googleapiclient import discovery, errors

client = discovery.build(
    "commentanalyzer",
    "v1alpha1",
    developerKey=os.environ["PERSPECTIVE_API_KEY"],
    discoveryServiceUrl="https://commentanalyzer.googleapis.com/$discovery/rest?version=v1alpha1",
    static_discovery=False,
)
out = {}
out["analyze"] = client.comments().analyze(body={
    "comment": {"text": "You are a stupid worthless idiot. Have a nice day!"},
    "requestedAttributes": {"TOXICITY": {}, "INSULT": {}, "PROFANITY": {}, "THREAT": {"scoreThreshold": 0.99}},
    "languages": ["en"],
    "doNotStore": True,
    "spanAnnotations": True,
}).execute()
try:
    client.comments().analyze(body={
        "comment": {"text": "hello"},
        "requestedAttributes": {"FLIRTATION": {}},
    }).execute()
    out["unknown_attribute"] = "no error"
except errors.HttpError as error:
    out["unknown_attribute"] = {"status": error.resp.status, "reason": error._get_reason()}
try:
    # No `languages`: the language is detected, as Perspective detects it; SEVERE_TOXICITY
    # is read by an English model (TOXICITY would be scored in German).
    client.comments().analyze(body={
        "comment": {"text": "Ich habe heute keine Zeit, weil ich den ganzen Tag arbeiten muss."},
        "requestedAttributes": {"SEVERE_TOXICITY": {}},
    }).execute()
    out["other_language"] = "no error"
except errors.HttpError as error:
    # The client's own reading of Google's `error.details`.
    out["other_language"] = {"status": error.resp.status, "details": error.error_details}
print(json.dumps(out))
