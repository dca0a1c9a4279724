// Sightengine's Node SDK (npm `sightengine`), unchanged, against modgate (tests/sdks.rs): it
// calls https://api.sightengine.com/1.0/check.json, which the test's mount namespace resolves
// to 127.0.0.1 (modgate, TLS with the test's authority, trusted through NODE_EXTRA_CA_CERTS).
// Arguments: an image file and the address of the same image. Prints one JSON object.
const fs = require("fs");
const sightengine = require("sightengine")("any-user", process.env.SIGHTENGINE_SECRET);

async function main() {
  const [path, url] = process.argv.slice(2);
  const out = {};
  out.file = await sightengine.check(["nudity"]).set_file(path);
  out.bytes = await sightengine.check(["nudity-2.1"]).set_bytes(fs.readFileSync(path), "cat.jpg");
  out.url = await sightengine.check(["nudity"]).set_url(url);
  out.properties = await sightengine.check(["properties", "type"]).set_url(url);
  out.unsupported = await sightengine.check(["nudity", "gore-2.0"]).set_file(path);
  console.log(JSON.stringify(out));
}
main().catch((error) => {
  console.error(error);
  process.exit(1);
});
