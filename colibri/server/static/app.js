// The chat page: streams /v1/chat/completions with "colibri": {"routes": true} and draws,
// token by token, which experts each MoE layer chose for the answer. Plain JS, no build step.
"use strict";

const $ = (id) => document.getElementById(id);
const state = { model: null, info: null, history: [], abort: null, counts: null, routes: [], hover: null,
                answer: null };   // answer: the bubble whose tokens state.routes describes

function headers() {
  const h = { "Content-Type": "application/json" };
  const key = $("api_key").value.trim();
  if (key) h["Authorization"] = "Bearer " + key;
  return h;
}

function setStatus(text, kind) {
  const el = $("status");
  el.textContent = text;
  el.className = "status " + (kind || "");
}

async function connect() {
  for (;;) {
    try {
      const health = await fetch("/health");
      if (health.ok) break;
      setStatus("loading the model…");
    } catch (e) {
      setStatus("server unreachable", "bad");
    }
    await new Promise((r) => setTimeout(r, 1000));
  }
  const res = await fetch("/v1/models", { headers: headers() });
  if (!res.ok) {
    setStatus(res.status === 401 ? "API key needed" : "error " + res.status, "bad");
    return;
  }
  const card = (await res.json()).data[0];
  state.model = card.id;
  state.info = card.colibri;
  $("model").textContent = `${card.id} · ${card.colibri.moe_layers.length} MoE layers × ${card.colibri.experts} ` +
    `experts, top-${card.colibri.top_k} · ${card.max_model_len} positions`;
  setStatus("ready", "ok");
  resetHeatmap();
}

// ---- heatmap ----------------------------------------------------------------------------
const LEFT = 26, TOP = 4;

function resetHeatmap() {
  const info = state.info;
  state.routes = [];
  state.counts = info ? info.moe_layers.map(() => new Float64Array(info.experts)) : null;
  drawHeatmap();
}

function addRoute(route) {
  state.routes.push(route);
  route.experts.forEach((row, layer) => row.forEach((e) => { state.counts[layer][e] += 1; }));
}

function shade(t) {   // 0 → paper, 1 → accent (#0f7b6c)
  const mix = (a, b) => Math.round(a + (b - a) * t);
  return `rgb(${mix(244, 15)},${mix(246, 123)},${mix(249, 108)})`;
}

function drawHeatmap() {
  const canvas = $("heatmap");
  const info = state.info;
  const ctx = canvas.getContext("2d");
  if (!info || !info.experts) {
    ctx.clearRect(0, 0, canvas.width, canvas.height);
    return;
  }
  const rows = info.moe_layers.length, cols = info.experts;
  const cell = Math.max(4, Math.min(28, Math.floor(300 / cols)));
  const rowH = Math.max(6, Math.min(24, Math.floor(220 / rows)));
  canvas.width = LEFT + cols * cell + 2;
  canvas.height = TOP + rows * rowH + 2;
  ctx.fillStyle = "#ffffff";
  ctx.fillRect(0, 0, canvas.width, canvas.height);
  const n = state.routes.length;
  ctx.font = "10px ui-monospace, monospace";
  ctx.textBaseline = "middle";
  for (let r = 0; r < rows; r++) {
    ctx.fillStyle = "#6b7385";
    if (rowH >= 9) ctx.fillText("L" + info.moe_layers[r], 2, TOP + r * rowH + rowH / 2);
    for (let c = 0; c < cols; c++) {
      const share = n ? state.counts[r][c] / n : 0;   // share of tokens; top_k experts per token
      ctx.fillStyle = shade(Math.min(1, share * cols / Math.max(1, info.top_k) / 2));
      ctx.fillRect(LEFT + c * cell, TOP + r * rowH, cell - 1, rowH - 1);
    }
  }
  if (state.hover !== null && state.routes[state.hover]) {
    ctx.strokeStyle = "#d9480f";
    ctx.lineWidth = 2;
    state.routes[state.hover].experts.forEach((row, r) => row.forEach((c) => {
      ctx.strokeRect(LEFT + c * cell + 1, TOP + r * rowH + 1, cell - 3, rowH - 3);
    }));
  }
  canvas.dataset.tokens = String(n);
  $("balance").textContent = n ? "balance " + state.counts.map((row, r) =>
    `L${info.moe_layers[r]} ${balance(row).toFixed(2)}`).join(" · ") : "";
}

function balance(row) {   // entropy of the expert shares over log(experts): 1 = even
  const total = row.reduce((a, b) => a + b, 0);
  if (!total || row.length < 2) return 1;
  let h = 0;
  for (const v of row) if (v > 0) h -= (v / total) * Math.log(v / total);
  return h / Math.log(row.length);
}

let drawPending = false;
function scheduleDraw() {
  if (drawPending) return;
  drawPending = true;
  requestAnimationFrame(() => { drawPending = false; drawHeatmap(); });
}

// ---- chat -------------------------------------------------------------------------------
function bubble(role, text) {
  const div = document.createElement("div");
  div.className = "msg " + role;
  div.textContent = text || "";
  $("transcript").appendChild(div);
  div.scrollIntoView({ block: "end" });
  return div;
}

function number(id, parse) {
  const raw = $(id).value.trim();
  if (raw === "") return undefined;
  const v = parse(raw);
  return Number.isFinite(v) ? v : undefined;
}

function requestBody() {
  const messages = [];
  const system = $("system").value.trim();
  if (system) messages.push({ role: "system", content: system });
  messages.push(...state.history);
  const body = { model: state.model, messages, stream: true, stream_options: { include_usage: true },
                 colibri: { routes: true } };
  const fields = [["temperature", parseFloat], ["top_p", parseFloat], ["top_k", parseInt],
                  ["max_tokens", parseInt], ["seed", parseInt]];
  for (const [id, parse] of fields) {
    const v = number(id, parse);
    if (v !== undefined) body[id] = v;
  }
  return body;
}

async function* events(response) {   // the data: payloads of a server-sent event stream
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const event = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      for (const line of event.split("\n")) if (line.startsWith("data: ")) yield line.slice(6);
    }
  }
}

async function send(text) {
  state.history.push({ role: "user", content: text });
  bubble("user", text);
  const answer = bubble("assistant", "");
  state.answer = answer;
  resetHeatmap();
  $("send").disabled = true;
  $("stop").disabled = false;
  state.abort = new AbortController();
  const started = performance.now();
  let first = null, reply = "", usage = null;
  try {
    const res = await fetch("/v1/chat/completions", { method: "POST", headers: headers(),
      body: JSON.stringify(requestBody()), signal: state.abort.signal });
    if (!res.ok) {
      const err = await res.json().catch(() => ({}));
      throw new Error((err.error && err.error.message) || "HTTP " + res.status);
    }
    for await (const data of events(res)) {
      if (data === "[DONE]") break;
      const chunk = JSON.parse(data);
      if (chunk.error) throw new Error(chunk.error.message);
      if (chunk.usage) usage = chunk.usage;
      for (const choice of chunk.choices) {
        const routes = choice.colibri ? choice.colibri.routes : [];
        for (const route of routes) addRoute(route);
        const content = choice.delta.content;
        if (content) {
          if (first === null) first = performance.now();
          const span = document.createElement("span");
          span.className = "tok";
          span.textContent = content;
          span.dataset.i = String(state.routes.length - 1);
          answer.appendChild(span);
          reply += content;
        }
      }
      scheduleDraw();
      answer.scrollIntoView({ block: "end" });
    }
  } catch (e) {
    if (e.name !== "AbortError") {
      answer.classList.add("error");
      answer.textContent = reply + (reply ? "\n" : "") + "error: " + e.message;
    }
  } finally {
    state.history.push({ role: "assistant", content: reply });
    $("send").disabled = false;
    $("stop").disabled = true;
    state.abort = null;
    drawHeatmap();
    const seconds = (performance.now() - started) / 1000;
    const n = usage ? usage.completion_tokens : state.routes.length;
    $("stats").textContent = `${n} tokens in ${seconds.toFixed(2)} s` +
      (first !== null ? ` · first token ${((first - started) / 1000).toFixed(3)} s` : "") +
      (n > 1 && first !== null ? ` · ${((n - 1) / ((performance.now() - first) / 1000)).toFixed(1)} tok/s` : "") +
      (usage ? ` · prompt ${usage.prompt_tokens} (cached ${usage.prompt_tokens_details.cached_tokens})` : "");
  }
}

$("composer").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const text = $("input").value.trim();
  if (!text || state.abort || !state.model) return;
  $("input").value = "";
  send(text);
});
$("input").addEventListener("keydown", (ev) => {
  if (ev.key === "Enter" && !ev.shiftKey) {
    ev.preventDefault();
    $("composer").requestSubmit();
  }
});
$("stop").addEventListener("click", () => { if (state.abort) state.abort.abort(); });
$("clear").addEventListener("click", () => {
  if (state.abort) state.abort.abort();
  state.history = [];
  $("transcript").textContent = "";
  $("stats").textContent = "";
  resetHeatmap();
});
$("transcript").addEventListener("mouseover", (ev) => {
  const i = ev.target.parentElement === state.answer ? ev.target.dataset.i : undefined;
  state.hover = i === undefined ? null : Number(i);
  drawHeatmap();
});
$("api_key").addEventListener("change", () => { if (!state.model) connect(); });
connect();
