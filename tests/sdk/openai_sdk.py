"""OpenAI's official Python SDK, unchanged, against modgate (tests/sdks.rs).

The client is built with no base URL: it calls https://api.openai.com/v1, which the test's
mount namespace resolves to 127.0.0.1, where modgate serves TLS with a certificate of the
test's own authority (SSL_CERT_FILE). The key comes from OPENAI_API_KEY, as usual. Prints one
JSON object with what the SDK returned.
"""
import base64
import json
import sys

import openai
from openai import OpenAI

image = base64.b64encode(open(sys.argv[1], "rb").read()).decode()
client = OpenAI(max_retries=0)
out = {"base_url": str(client.base_url), "sdk": openai.__version__}

one = client.moderations.create(model="omni-moderation-latest", input="I will kill you, you stupid idiot")
out["one"] = one.model_dump(by_alias=True)
out["one_flagged_attr"] = one.results[0].flagged
out["one_harassment_attr"] = one.results[0].category_scores.harassment

many = client.moderations.create(input=["have a nice day", "you are a worthless idiot"])
out["many"] = many.model_dump(by_alias=True)

parts = client.moderations.create(
    model="omni-moderation-latest",
    input=[
        {"type": "text", "text": "look at my cat"},
        {"type": "image_url", "image_url": {"url": f"data:image/jpeg;base64,{image}"}},
    ],
)
out["parts"] = parts.model_dump(by_alias=True)

try:
    client.moderations.create(model="no-such-model", input="x")
    out["unknown_model"] = "no error"
except openai.NotFoundError as error:
    out["unknown_model"] = {"status": error.status_code, "code": error.code, "type": error.type}

try:
    OpenAI(api_key="mg_live_notakeyatall", max_retries=0).moderations.create(input="x")
    out["bad_key"] = "no error"
except openai.AuthenticationError as error:
    out["bad_key"] = {"status": error.status_code, "code": error.code}

print(json.dumps(out))
