// Reference scores of the ORIGINAL nsfwjs 4.3.0 pipeline ("MobileNetV2Mid" model bundled in
// the npm package), run on @tensorflow/tfjs 4.22.0's pure-JS CPU backend.
//
// Usage: node reference_nsfwjs.mjs [--model MobileNetV2Mid|InceptionV3] [--out scores.json]
//                                  [--dump-tensors DIR] [--dump-rgb DIR] FILE|DIR...
// (--model: the nsfwjs model name, default MobileNetV2Mid; InceptionV3 uses SIZE 299, the
// others 224 -- nsfwjs's dist/esm/models/*.js options.)
//
// For each image: decode with a pure-JS decoder to 8-bit RGBA/RGB, build an int32
// tensor3d [H, W, 3] (alpha DROPPED, RGB kept as stored; gray and palette expanded to RGB),
// then call nsfwjs's own model.classify(tensor, 5) -- this is the recipe of nsfwjs's README
// ("Node JS App": jpeg-js -> tf.tensor3d(values, [h, w, 3], 'int32') -> classify).
// classify() -> infer(): x.toFloat().div(255); if (h, w) != (224, 224):
// tf.image.resizeBilinear(x, [224, 224], alignCorners = true) (halfPixelCenters = false);
// reshape [1, 224, 224, 3] (SIZE = 224; 299 for InceptionV3); model.predict -> the graph's Softmax output; getTopKClasses just
// sorts those values (NO extra softmax). We map the 5 {className, probability} back to fixed keys.
//
// Decoders (all pure JS / wasm from npm, no native code):
//   .jpg/.jpeg  jpeg-js 0.4.4  decode(buf, {formatAsRGBA: true}) (EXIF orientation ignored)
//   .png        pngjs 7.0.0    PNG.sync.read -> RGBA8 (palette/gray/tRNS expanded, 16-bit -> 8-bit)
//   .gif        omggif 1.0.10  frame 0 blitted (decodeAndBlitFrameRGBA) into a zeroed canvas
//                              (transparent / uncovered pixels -> RGB 0,0,0)
//   .webp       @jsquash/webp 1.5.0 (libwebp decoder compiled to wasm) -> RGBA8; for animated
//                              WebP, the first ANMF frame's bitstream is re-wrapped as a still
//                              WebP and decoded (frame must cover the whole canvas; checked)
//   .ppm        binary P6 8-bit RGB (to feed pixels decoded elsewhere, e.g. by Pillow)
//
// --dump-tensors DIR writes, per image, the exact float32 [1,SIZE,SIZE,3] tensor that nsfwjs
// passes to model.predict (captured by wrapping predict) as DIR/<file>.f32 (little endian),
// used by make_reference_scores.py to compare the converted ONNX model with the original.
// --dump-rgb DIR writes the decoded RGB (what went into tensor3d) as DIR/<file>.ppm.

import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import * as tf from '@tensorflow/tfjs';
import * as nsfwjs from 'nsfwjs';
import jpeg from 'jpeg-js';
import { PNG } from 'pngjs';
import omggif from 'omggif';
import webpDecode, { init as webpInit } from '@jsquash/webp/decode.js';

const require = createRequire(import.meta.url);

const KEYS = { Drawing: 'drawing', Hentai: 'hentai', Neutral: 'neutral', Porn: 'porn', Sexy: 'sexy' };

function parseArgs(argv) {
  const a = { model: 'MobileNetV2Mid', out: null, dump: null, dumpRgb: null, files: [] };
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--model') a.model = argv[++i];
    else if (argv[i] === '--out') a.out = argv[++i];
    else if (argv[i] === '--dump-tensors') a.dump = argv[++i];
    else if (argv[i] === '--dump-rgb') a.dumpRgb = argv[++i];
    else a.files.push(argv[i]);
  }
  const files = [];
  for (const f of a.files) {
    if (fs.statSync(f).isDirectory()) {
      for (const g of fs.readdirSync(f).sort()) {
        if (/\.(jpe?g|png|gif|webp|ppm)$/i.test(g)) files.push(path.join(f, g));
      }
    } else files.push(f);
  }
  a.files = files;
  return a;
}

let webpReady = null;
async function ensureWebp() {
  if (!webpReady) {
    const wasmPath = require.resolve('@jsquash/webp/codec/dec/webp_dec.wasm');
    const mod = await WebAssembly.compile(fs.readFileSync(wasmPath));
    webpReady = webpInit(mod);
  }
  return webpReady;
}

// Return the first frame of an animated WebP as a standalone still WebP file.
function firstWebpFrameAsStill(buf) {
  if (buf.toString('ascii', 0, 4) !== 'RIFF' || buf.toString('ascii', 8, 12) !== 'WEBP') return null;
  let i = 12;
  let canvasW = 0, canvasH = 0, animated = false;
  while (i + 8 <= buf.length) {
    const tag = buf.toString('ascii', i, i + 4);
    const n = buf.readUInt32LE(i + 4);
    const body = i + 8;
    if (tag === 'VP8X') {
      animated = (buf[body] & 0x02) !== 0;
      canvasW = 1 + buf.readUIntLE(body + 4, 3);
      canvasH = 1 + buf.readUIntLE(body + 7, 3);
    } else if (tag === 'ANMF') {
      if (!animated) throw new Error('ANMF without animation flag');
      const x = 2 * buf.readUIntLE(body, 3), y = 2 * buf.readUIntLE(body + 3, 3);
      const w = 1 + buf.readUIntLE(body + 6, 3), h = 1 + buf.readUIntLE(body + 9, 3);
      if (x !== 0 || y !== 0 || w !== canvasW || h !== canvasH) {
        throw new Error(`first WebP frame does not cover the canvas (${x},${y},${w}x${h} vs ${canvasW}x${canvasH})`);
      }
      const frameData = buf.subarray(body + 16, body + n); // ALPH? + VP8/VP8L chunks
      const hasAlph = frameData.toString('ascii', 0, 4) === 'ALPH';
      let payload;
      if (hasAlph) {
        // Needs a VP8X header for ALPH + VP8.
        const vp8x = Buffer.alloc(18);
        vp8x.write('VP8X', 0, 'ascii'); vp8x.writeUInt32LE(10, 4);
        vp8x[8] = 0x10; // alpha flag
        vp8x.writeUIntLE(w - 1, 12, 3); vp8x.writeUIntLE(h - 1, 15, 3);
        payload = Buffer.concat([vp8x, frameData]);
      } else payload = frameData;
      const hdr = Buffer.alloc(12);
      hdr.write('RIFF', 0, 'ascii'); hdr.writeUInt32LE(4 + payload.length, 4); hdr.write('WEBP', 8, 'ascii');
      return Buffer.concat([hdr, payload]);
    }
    i = body + n + (n & 1);
  }
  return null; // not animated
}

function readPPM(buf) {
  // P6\n<w> <h>\n255\n<data>
  const tokens = [];
  let i = 0;
  while (tokens.length < 4) {
    while (/\s/.test(String.fromCharCode(buf[i]))) i++;
    if (buf[i] === 0x23) { while (buf[i] !== 0x0a) i++; continue; }
    let s = '';
    while (!/\s/.test(String.fromCharCode(buf[i]))) s += String.fromCharCode(buf[i++]);
    tokens.push(s);
  }
  i++;
  if (tokens[0] !== 'P6' || tokens[3] !== '255') throw new Error('only 8-bit P6 PPM');
  const width = +tokens[1], height = +tokens[2];
  return { width, height, channels: 3, data: buf.subarray(i, i + width * height * 3) };
}

async function decode(file) {
  const buf = fs.readFileSync(file);
  const ext = path.extname(file).toLowerCase();
  if (ext === '.jpg' || ext === '.jpeg') {
    const im = jpeg.decode(buf, { useTArray: true, formatAsRGBA: true, maxResolutionInMP: 200, maxMemoryUsageInMB: 2048 });
    return { width: im.width, height: im.height, channels: 4, data: im.data, decoder: 'jpeg-js' };
  }
  if (ext === '.png') {
    const im = PNG.sync.read(buf);
    return { width: im.width, height: im.height, channels: 4, data: im.data, decoder: 'pngjs' };
  }
  if (ext === '.gif') {
    const r = new omggif.GifReader(new Uint8Array(buf));
    const data = new Uint8Array(r.width * r.height * 4); // zeroed canvas
    r.decodeAndBlitFrameRGBA(0, data);
    return { width: r.width, height: r.height, channels: 4, data, decoder: 'omggif(frame 0)' };
  }
  if (ext === '.webp') {
    await ensureWebp();
    const still = firstWebpFrameAsStill(buf);
    const src = still || buf;
    const ab = src.buffer.slice(src.byteOffset, src.byteOffset + src.length);
    const im = await webpDecode(ab);
    return { width: im.width, height: im.height, channels: 4, data: im.data,
      decoder: still ? '@jsquash/webp(first ANMF frame)' : '@jsquash/webp' };
  }
  if (ext === '.ppm') return { ...readPPM(buf), decoder: 'ppm' };
  throw new Error('unsupported file type: ' + file);
}

function toTensor(im, dumpPath) {
  const n = im.width * im.height;
  const values = new Int32Array(n * 3);
  for (let i = 0; i < n; i++) {
    for (let c = 0; c < 3; c++) values[i * 3 + c] = im.data[i * im.channels + c];
  }
  if (dumpPath) {
    const hdr = Buffer.from(`P6\n${im.width} ${im.height}\n255\n`, 'ascii');
    fs.writeFileSync(dumpPath, Buffer.concat([hdr, Buffer.from(Uint8Array.from(values))]));
  }
  return tf.tensor3d(values, [im.height, im.width, 3], 'int32');
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  await tf.setBackend('cpu');
  await tf.ready();
  const model = await nsfwjs.load(args.model);
  let captured = null;
  if (args.dumpRgb) fs.mkdirSync(args.dumpRgb, { recursive: true });
  if (args.dump) {
    fs.mkdirSync(args.dump, { recursive: true });
    const inner = model.model;
    const orig = inner.predict.bind(inner);
    inner.predict = (x, cfg) => { captured = x.dataSync().slice(); return orig(x, cfg); };
  }
  const out = {};
  for (const f of args.files) {
    const im = await decode(f);
    const t = toTensor(im, args.dumpRgb ? path.join(args.dumpRgb, path.basename(f) + '.ppm') : null);
    const preds = await model.classify(t, 5);
    t.dispose();
    const r = {};
    for (const p of preds) r[KEYS[p.className]] = p.probability;
    const key = path.basename(f);
    out[key] = { drawing: r.drawing, hentai: r.hentai, neutral: r.neutral, porn: r.porn, sexy: r.sexy };
    if (args.dump && captured) {
      fs.writeFileSync(path.join(args.dump, key + '.f32'), Buffer.from(captured.buffer));
    }
    process.stderr.write(`${key} ${im.width}x${im.height} [${im.decoder}] ${JSON.stringify(out[key])}\n`);
  }
  const meta = {
    tfjs: tf.version.tfjs, backend: tf.getBackend(),
    nsfwjs: JSON.parse(fs.readFileSync(new URL('./node_modules/nsfwjs/package.json', import.meta.url))).version, model: args.model,
  };
  process.stderr.write(JSON.stringify(meta) + '\n');
  const json = JSON.stringify(out, null, 1) + '\n';
  if (args.out) fs.writeFileSync(args.out, json); else process.stdout.write(json);
}

main().catch((e) => { console.error(e); process.exit(1); });
