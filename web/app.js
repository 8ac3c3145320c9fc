// The demo page: a digit pad classified by the MNIST CNN as you draw, and a character GPT
// streaming Shakespeare. Both models run in might compiled to WebAssembly, on the CPU
// (simd128) or, where the browser has WebGPU, on might's GPU backend. `?device=cpu|gpu`
// forces one; `window.might` exposes the state the end-to-end test reads.
import init, * as wasm from "./pkg/might_web.js";

const t0 = performance.now();
const params = new URLSearchParams(location.search);
const $ = (id) => document.getElementById(id);
const state = {
  device: "loading",
  adapter: null,
  last: null,             // { label, probs, ms }
  predictions: 0,
  predictMs: 0,           // sum, for the mean
  firstPredictionMs: null,
  text: { running: false, chars: 0, ms: 0, done: null },
  error: null,
};
window.might = state;

async function fetchBytes(url) {
  const r = await fetch(url);
  if (!r.ok) throw new Error(`${url}: HTTP ${r.status}`);
  return new Uint8Array(await r.arrayBuffer());
}

let digits, text;

async function start() {
  await init();
  if (params.get("simd") === "0") wasm.setSimd(false);
  const [cnnBytes, gptBytes] = await Promise.all([
    fetchBytes("models/mnist-cnn.safetensors"),
    fetchBytes("models/gpt.safetensors"),
  ]);
  digits = new wasm.Digits(cnnBytes);
  text = new wasm.Text(gptBytes);
  const want = params.get("device") || "auto";
  state.device = "cpu";
  if (want !== "cpu" && typeof wasm.initGpu === "function" && navigator.gpu) {
    try {
      state.adapter = await wasm.initGpu();
      await digits.toGpu();
      await text.toGpu();
      state.device = "gpu";
    } catch (e) {
      console.warn("WebGPU unavailable, using the CPU:", e);
      if (want === "gpu") state.error = `WebGPU requested but unavailable: ${e}`;
    }
  } else if (want === "gpu") {
    state.error = navigator.gpu ? "this build has no WebGPU support" : "this browser has no WebGPU";
  }
  $("backend").textContent = state.device === "gpu"
    ? `Running on WebGPU${state.adapter ? ` (${state.adapter})` : ""} — might's wgpu backend compiled to WebAssembly`
    : `Running on the CPU — might compiled to WebAssembly (${params.get("simd") === "0" ? "scalar" : "SIMD128"})`;
  drawBars(null);
  state.ready = true;
}

// ---- digit pad ----
const pad = $("pad");
const ctx = pad.getContext("2d", { willReadFrequently: true });
function clearPad() {
  ctx.fillStyle = "#000";
  ctx.fillRect(0, 0, pad.width, pad.height);
  $("guess").textContent = "–";
  state.last = null;
  drawBars(null);
}
clearPad();
let drawing = false, lastXY = null, queued = false;
function pos(e) {
  const r = pad.getBoundingClientRect();
  return [(e.clientX - r.left) * pad.width / r.width, (e.clientY - r.top) * pad.height / r.height];
}
pad.addEventListener("pointerdown", (e) => {
  drawing = true;
  lastXY = pos(e);
  stroke(lastXY, lastXY);
  pad.setPointerCapture?.(e.pointerId);
});
pad.addEventListener("pointermove", (e) => {
  if (!drawing) return;
  const p = pos(e);
  stroke(lastXY, p);
  lastXY = p;
  schedule();
});
const end = () => { if (drawing) { drawing = false; classify(); } };
pad.addEventListener("pointerup", end);
pad.addEventListener("pointerleave", end);
$("clear").onclick = clearPad;

function stroke(a, b) {
  ctx.strokeStyle = "#fff";
  ctx.lineWidth = 20;
  ctx.lineCap = "round";
  ctx.lineJoin = "round";
  ctx.beginPath();
  ctx.moveTo(a[0], a[1]);
  ctx.lineTo(b[0], b[1]);
  ctx.stroke();
}

// classify at most once per frame while drawing
function schedule() {
  if (queued) return;
  queued = true;
  requestAnimationFrame(() => { queued = false; classify(); });
}

let classifying = Promise.resolve();
state.idle = () => classifying; // resolves once the queued classifications are done
function classify() {
  classifying = classifying.then(classifyNow).catch((e) => { state.error = String(e); console.error(e); });
  return classifying;
}

async function classifyNow() {
  if (!state.ready) return;
  const img = ctx.getImageData(0, 0, pad.width, pad.height).data;
  const ink = new Float32Array(pad.width * pad.height);
  for (let i = 0; i < ink.length; i++) ink[i] = img[4 * i] / 255;
  const x = wasm.mnistInput(ink, pad.width, pad.height);
  const t = performance.now();
  const probs = state.device === "gpu" ? await digits.predictGpu(x) : digits.predict(x);
  const ms = performance.now() - t;
  state.predictions++;
  state.predictMs += ms;
  if (state.firstPredictionMs === null) state.firstPredictionMs = performance.now() - t0;
  let best = 0;
  for (let i = 1; i < probs.length; i++) if (probs[i] > probs[best]) best = i;
  state.last = { label: best, probs: Array.from(probs), ms };
  $("guess").textContent = digits.classes()[best];
  drawBars(probs, best);
  $("digit-stats").textContent =
    `${ms.toFixed(2)} ms this prediction, ${(state.predictMs / state.predictions).toFixed(2)} ms mean over ${state.predictions}`;
}

function drawBars(probs, best) {
  const names = digits ? digits.classes() : [..."0123456789"];
  $("bars").innerHTML = names.map((n, i) => {
    const p = probs ? probs[i] : 0;
    return `<span>${n}</span><div class="bar${i === best ? " top" : ""}" style="width:${(p * 100).toFixed(1)}%"></div><span>${(p * 100).toFixed(1)}%</span>`;
  }).join("");
}

// ---- text ----
$("generate").onclick = () => generate();
$("stop").onclick = () => { state.text.running = false; };

async function generate() {
  if (!state.ready) return;
  const prompt = $("prompt").value;
  const temperature = Number($("temperature").value);
  const topK = Math.max(0, Math.floor(Number($("topk").value) || 0));
  const total = Number(params.get("chars") || 400);
  const seed = Number(params.get("seed") || 0);
  const out = $("sample");
  state.text = { running: true, chars: 0, ms: 0, done: null, error: null };
  try {
    text.start(prompt, temperature, topK, seed);
  } catch (e) {
    out.textContent = String(e);
    state.text.running = false;
    state.text.error = String(e);
    state.text.done = prompt;
    return;
  }
  out.textContent = prompt;
  try {
    while (state.text.running && state.text.chars < total) {
      const t = performance.now();
      const chunk = state.device === "gpu" ? await text.nextGpu(4) : text.next(4);
      state.text.ms += performance.now() - t;
      state.text.chars += chunk.length;
      out.textContent += chunk;
      $("text-stats").textContent =
        `${state.text.chars} characters, ${(1000 * state.text.chars / state.text.ms).toFixed(0)} characters/s`;
      await new Promise((r) => setTimeout(r, 0)); // let the page paint
    }
  } catch (e) {
    state.text.error = String(e);
    $("text-stats").textContent = String(e);
  }
  state.text.running = false;
  state.text.done = out.textContent;
}

start().catch((e) => {
  state.error = String(e);
  $("backend").textContent = `failed to start: ${e}`;
  console.error(e);
});
