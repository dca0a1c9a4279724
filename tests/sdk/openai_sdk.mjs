// OpenAI's official Node SDK (npm `openai`), unchanged, against modgate (tests/sdks.rs).
//
// The client is built with no base URL: it calls https://api.openai.com/v1, which the test's
// mount namespace resolves to 127.0.0.1, where modgate serves TLS with a certificate of the
// test's own authority (NODE_EXTRA_CA_CERTS). The key comes from OPENAI_API_KEY, as usual.
// Prints one JSON object with what the SDK returned.
import { readFileSync } from "node:fs";
import OpenAI from "openai";

const image = readFileSync(process.argv[2]).toString("base64");
const client = new OpenAI({ maxRetries: 0 });
const out = { base_url: client.baseURL };

out.one = await client.moderations.create({
  model: "omni-moderation-latest",
  input: "I will kill you, you stupid idiot",
});
out.many = await client.moderations.create({
  input: ["have a nice day", "you are a worthless idiot"],
});
out.parts = await client.moderations.create({
  model: "omni-moderation-latest",
  input: [
    { type: "text", text: "look at my cat" },
    { type: "image_url", image_url: { url: `data:image/jpeg;base64,${image}` } },
  ],
});
try {
  await client.moderations.create({ model: "no-such-model", input: "x" });
  out.unknown_model = "no error";
} catch (error) {
  out.unknown_model = {
    status: error.status,
    code: error.code,
    type: error.type,
    not_found: error instanceof OpenAI.NotFoundError,
  };
}
try {
  await new OpenAI({ apiKey: "mg_live_notakeyatall", maxRetries: 0 }).moderations.create({ input: "x" });
  out.bad_key = "no error";
} catch (error) {
  out.bad_key = { status: error.status, code: error.code };
}
console.log(JSON.stringify(out));
