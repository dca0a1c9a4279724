"""Sightengine's Python SDK (PyPI `sightengine`), unchanged, against modgate (tests/sdks.rs):
it calls https://api.sightengine.com/1.0/check.json, which the test's mount namespace resolves
to 127.0.0.1 (modgate, TLS with the test's authority, trusted through REQUESTS_CA_BUNDLE).
Arguments: an image file and the address of the same image. Prints one JSON object.
"""
import json
import os
import sys

from sightengine.client import SightengineClient

client = SightengineClient("any-user", os.environ["SIGHTENGINE_SECRET"])
path, url = sys.argv[1], sys.argv[2]
out = {
    "file": client.check("nudity").set_file(path),
    "bytes": client.check("nudity-2.1").set_bytes(open(path, "rb").read()),
    "url": client.check("nudity").set_url(url),
    "properties": client.check("properties", "type").set_url(url),
    "unsupported": client.check("nudity", "gore-2.0").set_file(path),
}
print(json.dumps(out))
