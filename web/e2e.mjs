// End-to-end test of the browser demo: serves web/dist, opens it in the system's headless
// Chromium (puppeteer-core), draws MNIST test digits onto the pad with mouse strokes, checks
// the predicted labels, generates text from a prompt, once on the CPU (WebAssembly) and once
// on WebGPU (SwiftShader in headless Chromium), and checks both paths agree. Screenshots and a
// summary land in web/artifacts/.
//
//     node web/e2e.mjs            (after web/build.sh; needs chromium-headless-shell)
import http from "node:http";
import fs from "node:fs";
import path from "node:path";
import zlib from "node:zlib";
import { fileURLToPath } from "node:url";
import puppeteer from "puppeteer-core";

const here = path.dirname(fileURLToPath(import.meta.url));
const dist = path.join(here, "dist");
const artifacts = path.join(here, "artifacts");
fs.mkdirSync(artifacts, { recursive: true });
const DIGITS = Number(process.env.E2E_DIGITS || 10);
const CHARS = 200;
const expectedText = fs.readFileSync(path.join(here, "models", "gpt-greedy.txt"), "utf8");
const failures = [];
const fail = (msg) => { console.log(`FAIL: ${msg}`); failures.push(msg); };

// ---- MNIST test digits (the copy the repo ships) ----
const gunzip = (f) => zlib.gunzipSync(fs.readFileSync(path.join(here, "..", "data", "mnist", f)));
const images = gunzip("t10k-images-idx3-ubyte.gz");
const labels = gunzip("t10k-labels-idx1-ubyte.gz");
const digit = (i) => images.subarray(16 + i * 784, 16 + (i + 1) * 784);

// Strokes that redraw a digit: one horizontal drag per run of inked pixels in each row.
function strokes(px) {
  const out = [];
  for (let y = 0; y < 28; y++) {
    let x = 0;
    while (x < 28) {
      if (px[y * 28 + x] < 128) { x++; continue; }
      const x0 = x;
      while (x < 28 && px[y * 28 + x] >= 128) x++;
      out.push([x0, x - 1, y]);
    }
  }
  return out;
}

// ---- a static server for web/dist ----
const types = { ".html": "text/html", ".js": "text/javascript", ".wasm": "application/wasm" };
const server = http.createServer((req, res) => {
  const url = new URL(req.url, "http://x");
  const file = path.join(dist, path.normalize(url.pathname === "/" ? "/index.html" : url.pathname));
  if (!file.startsWith(dist) || !fs.existsSync(file)) { res.writeHead(404); res.end(); return; }
  res.writeHead(200, { "content-type": types[path.extname(file)] || "application/octet-stream" });
  fs.createReadStream(file).pipe(res);
});
await new Promise((r) => server.listen(0, "127.0.0.1", r));
const base = `http://127.0.0.1:${server.address().port}/`;

const executablePath = process.env.CHROMIUM ||
  ["/usr/bin/chromium-headless-shell", "/usr/bin/chromium"].find((p) => fs.existsSync(p));
const browser = await puppeteer.launch({
  executablePath,
  headless: "shell",
  args: ["--no-sandbox", "--enable-unsafe-webgpu", "--enable-features=Vulkan",
         "--use-angle=swiftshader", "--use-webgpu-adapter=swiftshader"],
});

async function run(device, simd = true) {
  const name = simd ? device : `${device}-scalar`;
  const page = await browser.newPage();
  const logs = [];
  try {
  page.on("console", (m) => logs.push(`${m.type()}: ${m.text()}`));
  page.on("pageerror", (e) => logs.push(`pageerror: ${e}`));
  await page.setViewport({ width: 1100, height: 800 });
  const t0 = Date.now();
  await page.goto(`${base}?device=${device}&chars=${CHARS}${simd ? "" : "&simd=0"}`);
  await page.waitForFunction(() => window.might && (window.might.ready || window.might.error), { timeout: 120000 });
  const st = await page.evaluate(() => ({ device: window.might.device, adapter: window.might.adapter, error: window.might.error }));
  const loadMs = Date.now() - t0;
  console.log(`[${name}] page ready in ${loadMs} ms on ${st.device}${st.adapter ? ` (${st.adapter})` : ""}`);
  if (st.error) fail(`[${name}] ${st.error}\n${logs.join("\n")}`);
  if (st.device !== device) fail(`[${name}] the page runs on ${st.device}`);
  const result = { name, device: st.device, adapter: st.adapter, loadMs, predictions: [] };

  const box = await (await page.$("#pad")).boundingBox();
  const cell = box.width / 28;
  for (let i = 0; i < DIGITS; i++) {
    await page.click("#clear");
    for (const [x0, x1, y] of strokes(digit(i))) {
      const yy = box.y + (y + 0.5) * cell;
      await page.mouse.move(box.x + (x0 + 0.5) * cell, yy);
      await page.mouse.down();
      await page.mouse.move(box.x + (x1 + 0.5) * cell, yy, { steps: 2 });
      await page.mouse.up();
    }
    await page.evaluate(() => window.might.idle());
    const last = await page.evaluate(() => window.might.last);
    const want = labels[8 + i];
    result.predictions.push({ want, got: last ? last.label : null, probs: last ? last.probs : null });
    console.log(`[${name}] digit ${i}: label ${want}, predicted ${last ? last.label : "nothing"} (${last ? (100 * last.probs[last.label]).toFixed(1) : 0} %)`);
    if (i < 3) await page.screenshot({ path: path.join(artifacts, `${name}-digit-${i}.png`) });
  }
  const right = result.predictions.filter((p) => p.got === p.want).length;
  if (right < DIGITS - 1) fail(`[${name}] only ${right} of ${DIGITS} digits recognised`);
  const perf = await page.evaluate(() => ({ first: window.might.firstPredictionMs, mean: window.might.predictMs / window.might.predictions, n: window.might.predictions }));
  Object.assign(result, { right, firstPredictionMs: perf.first, msPerPrediction: perf.mean, predictionCount: perf.n });

  // text: greedy, so the CPU must reproduce the native sample of gpt-greedy.txt exactly
  await page.$eval("#prompt", (e) => { e.value = "ROMEO:"; });
  await page.$eval("#temperature", (e) => { e.value = "0"; });
  await page.$eval("#topk", (e) => { e.value = "0"; });
  await page.click("#generate");
  await page.waitForFunction(() => window.might.text.done !== null && window.might.text.done !== undefined, { timeout: 300000 });
  const text = await page.evaluate(() => window.might.text);
  result.text = text.done;
  result.charsPerSecond = 1000 * text.chars / text.ms;
  console.log(`[${name}] generated ${text.chars} characters at ${result.charsPerSecond.toFixed(0)}/s:\n${text.done}\n`);
  await page.screenshot({ path: path.join(artifacts, `${name}-page.png`) });
  if (text.error) fail(`[${name}] text: ${text.error}`);
  const agree = [...expectedText].findIndex((c, k) => c !== [...(text.done || "")][k]);
  result.textAgreesFor = agree < 0 ? expectedText.length : agree;
  if (device === "cpu" && result.textAgreesFor !== expectedText.length)
    fail(`[cpu] greedy text differs from the native sample (gpt-greedy.txt) at character ${result.textAgreesFor}`);
  if (logs.some((l) => l.startsWith("pageerror"))) fail(`[${name}] page errors:\n${logs.join("\n")}`);
  return result;
  } finally {
    fs.writeFileSync(path.join(artifacts, `${name}-console.log`), logs.join("\n"));
    await page.close().catch(() => {});
  }
}

let cpu, scalar, gpu;
try {
  cpu = await run("cpu");
  // the same page on the kernels' scalar build: the simd128 kernels must agree with it
  scalar = await run("cpu", false);
  let worst = 0;
  cpu.predictions.forEach((p, i) => {
    const q = scalar.predictions[i];
    if (p.got !== q.got) fail(`digit ${i}: SIMD128 says ${p.got}, scalar says ${q.got}`);
    if (p.probs && q.probs) p.probs.forEach((v, k) => { worst = Math.max(worst, Math.abs(v - q.probs[k])); });
  });
  console.log(`wasm SIMD128 vs scalar kernels: largest probability difference ${worst.toExponential(2)}`);
  if (worst > 1e-5) fail(`SIMD128 and scalar probabilities differ by ${worst}`);
  if (scalar.textAgreesFor < 100) fail(`scalar greedy text leaves the SIMD128 one after ${scalar.textAgreesFor} characters`);
  gpu = await run("gpu");
  // the two paths must agree: same labels, close probabilities, the same greedy start
  if (gpu.device === "gpu") {
    let worst = 0;
    cpu.predictions.forEach((p, i) => {
      const q = gpu.predictions[i];
      if (p.got !== q.got) fail(`digit ${i}: CPU says ${p.got}, WebGPU says ${q.got}`);
      if (p.probs && q.probs) p.probs.forEach((v, k) => { worst = Math.max(worst, Math.abs(v - q.probs[k])); });
    });
    console.log(`CPU vs WebGPU: largest probability difference ${worst.toExponential(2)}`);
    if (worst > 1e-3) fail(`CPU and WebGPU probabilities differ by ${worst}`);
    if (gpu.textAgreesFor < 40) fail(`WebGPU greedy text leaves the CPU's after ${gpu.textAgreesFor} characters`);
  }
} catch (e) {
  fail(String(e && e.stack || e));
} finally {
  await browser.close();
  server.close();
}
const summary = { cpu, scalar, gpu, failures };
fs.writeFileSync(path.join(artifacts, "summary.json"), JSON.stringify(summary, null, 2));
for (const r of [cpu, scalar, gpu].filter(Boolean))
  console.log(`${r.name}: ${r.right}/${DIGITS} digits, first prediction ${r.firstPredictionMs?.toFixed(0)} ms after load, ${r.msPerPrediction?.toFixed(2)} ms per prediction, ${r.charsPerSecond?.toFixed(0)} chars/s, text agrees for ${r.textAgreesFor} chars`);
console.log(failures.length ? `browser e2e: ${failures.length} failure(s)` : "browser e2e: ok");
process.exit(failures.length ? 1 : 0);
