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
# A client reads the classes of Sightengine's documented nudity-2.1 answer (a missing one is
# a KeyError here, as in the client's own code).
CLASSES = [
    "sexual_activity", "sexual_display", "erotica", "very_suggestive", "suggestive",
    "mildly_suggestive", "suggestive_classes.bikini", "suggestive_classes.cleavage",
    "suggestive_classes.cleavage_categories.very_revealing",
    "suggestive_classes.cleavage_categories.revealing",
    "suggestive_classes.cleavage_categories.none", "suggestive_classes.lingerie",
    "suggestive_classes.male_chest", "suggestive_classes.male_chest_categories.very_revealing",
    "suggestive_classes.male_chest_categories.revealing",
    "suggestive_classes.male_chest_categories.slightly_revealing",
    "suggestive_classes.male_chest_categories.none", "suggestive_classes.male_underwear",
    "suggestive_classes.miniskirt", "suggestive_classes.minishort",
    "suggestive_classes.nudity_art", "suggestive_classes.schematic", "suggestive_classes.sextoy",
    "suggestive_classes.suggestive_focus", "suggestive_classes.suggestive_pose",
    "suggestive_classes.swimwear_male", "suggestive_classes.swimwear_one_piece",
    "suggestive_classes.visibly_undressed", "suggestive_classes.other", "none",
    "context.sea_lake_pool", "context.outdoor_other", "context.indoor_other",
]
read = {}
for path in CLASSES:
    node = out["bytes"]["nudity"]
    for key in path.split("."):
        node = node[key]
    read[path] = float(node)
out["nudity_2_1_read"] = read
print(json.dumps(out))
