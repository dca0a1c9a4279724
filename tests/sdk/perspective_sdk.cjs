// npm perspective-api-client, unchanged, against modgate's Perspective API (tests/sdks.rs): it
// posts to https://commentanalyzer.googleapis.com/v1alpha1/comments:analyze?key=..., which the
// test's mount namespace resolves to 127.0.0.1 (modgate, TLS with the test's authority, trusted
// through NODE_EXTRA_CA_CERTS). Prints one JSON object.
const Perspective = require("perspective-api-client");

async function main() {
  const perspective = new Perspective({ apiKey: process.env.PERSPECTIVE_API_KEY });
  const out = {};
  out.analyze = await perspective.analyze("You are a stupid worthless idiot. Have a nice day!", {
    attributes: ["toxicity", "insult", "profanity"],
  });
  try {
    await perspective.analyze("hello", { attributes: ["flirtation"] });
    out.unknown_attribute = "no error";
  } catch (error) {
    out.unknown_attribute = { status: error.response.status, message: error.message };
  }
  console.log(JSON.stringify(out));
}
main().catch((error) => {
  console.error(error);
  process.exit(1);
});
