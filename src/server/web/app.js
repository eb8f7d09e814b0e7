// strata's page: a chat over /v1/chat/completions and the live status of /status.
// Model output is only ever put into the page as text (textContent, or escaped before the few
// markdown tags are added), so nothing a model writes can run in the page.
"use strict";

const state = {
  key: localStorage.getItem("strata-api-key") || "",
  defaults: {},
  messages: [],  // the conversation as the API takes it
  abort: null,
  history: { speed: [], queue: [] },
  last: null,  // the previous /status sample, for rates
};
const $ = (id) => document.getElementById(id);
const el = (tag, cls, text) => {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
};

// ---- the API ---------------------------------------------------------------------------

class NeedsKey extends Error {}

async function api(path, options = {}) {
  const headers = Object.assign({}, options.headers || {});
  if (state.key) headers["Authorization"] = "Bearer " + state.key;
  const res = await fetch(path, Object.assign({}, options, { headers }));
  if (res.status === 401) {
    showKeyPrompt(state.key ? "That key was refused." : "");
    throw new NeedsKey("API key needed");
  }
  return res;
}

function showKeyPrompt(message) {
  $("key-prompt").hidden = false;
  $("key-error").textContent = message;
  $("view-chat").hidden = true;
  $("view-status").hidden = true;
}

$("key-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  state.key = $("key-input").value.trim();
  localStorage.setItem("strata-api-key", state.key);
  $("key-prompt").hidden = true;
  showView("chat");
  start();
});

// ---- views ------------------------------------------------------------------------------

function showView(name) {
  for (const b of document.querySelectorAll("button.tab"))
    b.classList.toggle("active", b.dataset.view === name);
  $("view-chat").hidden = name !== "chat";
  $("view-status").hidden = name !== "status";
  $("view-plan").hidden = name !== "plan";
  if (name === "status") drawStatus();
  if (name === "plan") loadPlan();
}
for (const b of document.querySelectorAll("button.tab"))
  b.addEventListener("click", () => showView(b.dataset.view));

// ---- settings ---------------------------------------------------------------------------

const kSettings = ["temperature", "top_p", "top_k", "min_p", "repetition_penalty", "max_tokens"];

function fillSettings() {
  for (const name of kSettings) {
    const v = state.defaults[name];
    // /props gives the server's 32-bit floats as doubles (0.949999988): shown as 0.95.
    $("set-" + name).value = v === null || v === undefined ? "" : Number(Number(v).toPrecision(6));
  }
}
$("reset-settings").addEventListener("click", fillSettings);

// The tools box: nothing, or a JSON array (an error names what is wrong and stops the send).
function toolsField() {
  const text = $("tools").value.trim();
  $("tools-error").textContent = "";
  if (!text) return {};
  let tools;
  try {
    tools = JSON.parse(text);
  } catch (e) {
    $("tools-error").textContent = "tools: not JSON (" + e.message + ")";
    $("settings").open = true;
    return null;
  }
  if (!Array.isArray(tools)) {
    $("tools-error").textContent = "tools: expected a JSON array of tool definitions";
    $("settings").open = true;
    return null;
  }
  return tools.length ? { tools } : {};
}

function samplingFields() {
  const out = {};
  for (const name of kSettings) {
    const text = $("set-" + name).value.trim();
    if (text === "") continue;
    const value = Number(text);
    if (Number.isFinite(value)) out[name] = name === "top_k" || name === "max_tokens" ? Math.round(value) : value;
  }
  return out;
}

// ---- markdown, safely ---------------------------------------------------------------------

function escapeHtml(s) {
  return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;")
          .replace(/"/g, "&quot;").replace(/'/g, "&#39;");
}

// Inline markup of already escaped text: `code`, **bold**, *italic*.
function inline(escaped) {
  return escaped
    .replace(/`([^`]+)`/g, "<code>$1</code>")
    .replace(/\*\*([^*]+)\*\*/g, "<strong>$1</strong>")
    .replace(/(^|[^*])\*([^*\s][^*]*)\*/g, "$1<em>$2</em>");
}

// Paragraphs, headings and lists of plain text (no code fences inside).
function renderProse(text, into) {
  for (const block of text.split(/\n{2,}/)) {
    if (!block.trim()) continue;
    const lines = block.split("\n");
    if (lines.every((l) => /^\s*([-*]|\d+\.)\s+/.test(l))) {
      const ordered = /^\s*\d+\./.test(lines[0]);
      const list = el(ordered ? "ol" : "ul");
      for (const l of lines) {
        const li = el("li");
        li.innerHTML = inline(escapeHtml(l.replace(/^\s*([-*]|\d+\.)\s+/, "")));
        list.appendChild(li);
      }
      into.appendChild(list);
      continue;
    }
    const heading = /^(#{1,6})\s+(.*)$/.exec(lines[0]);
    if (heading && lines.length === 1) {
      const h = el("h" + Math.min(6, heading[1].length + 2));
      h.innerHTML = inline(escapeHtml(heading[2]));
      into.appendChild(h);
      continue;
    }
    const p = el("p");
    p.innerHTML = lines.map((l) => inline(escapeHtml(l))).join("<br>");
    into.appendChild(p);
  }
}

function renderMarkdown(text, into) {
  into.replaceChildren();
  const fence = /```([^\n`]*)\n([\s\S]*?)(```|$)/g;
  let at = 0;
  for (let m; (m = fence.exec(text)) !== null;) {
    renderProse(text.slice(at, m.index), into);
    const pre = el("pre");
    const code = el("code", null, m[2]);
    if (m[1].trim()) code.dataset.language = m[1].trim();
    pre.appendChild(code);
    into.appendChild(pre);
    at = m.index + m[0].length;
    if (m[0].length === 0) break;
  }
  renderProse(text.slice(at), into);
}

// ---- chat -------------------------------------------------------------------------------

function messageBox(role) {
  const box = el("div", "msg " + role);
  box.appendChild(el("div", "role", role));
  $("messages").appendChild(box);
  return box;
}

function showUser(text) {
  const box = messageBox("user");
  box.appendChild(el("div", "text", text));
}

// One assistant answer as it streams: folded reasoning, the text, the tool calls.
class Answer {
  constructor() {
    this.box = messageBox("assistant");
    this.reasoning = "";
    this.content = "";
    this.calls = [];
    this.reasoningBox = el("details", "reasoning");
    this.reasoningBox.appendChild(el("summary", null, "Reasoning"));
    this.reasoningText = el("div");
    this.reasoningBox.appendChild(this.reasoningText);
    this.reasoningBox.hidden = true;
    this.text = el("div", "text");
    this.callsBox = el("div", "calls");
    this.meta = el("div", "meta");
    this.box.append(this.reasoningBox, this.text, this.callsBox, this.meta);
  }
  add(delta) {
    if (delta.reasoning_content) {
      this.reasoning += delta.reasoning_content;
      this.reasoningBox.hidden = false;
      this.reasoningText.textContent = this.reasoning;
    }
    if (delta.content) {
      this.content += delta.content;
      renderMarkdown(this.content, this.text);
    }
    for (const d of delta.tool_calls || []) {
      const c = this.calls[d.index] || (this.calls[d.index] = { id: "", name: "", arguments: "" });
      if (d.id) c.id = d.id;
      if (d.function && d.function.name) c.name += d.function.name;
      if (d.function && d.function.arguments) c.arguments += d.function.arguments;
    }
    if (delta.tool_calls) this.drawCalls();
    $("messages").scrollTop = $("messages").scrollHeight;
  }
  drawCalls() {
    this.callsBox.replaceChildren();
    for (const c of this.calls) {
      if (!c) continue;
      const box = el("div", "tool-call");
      box.appendChild(el("div", "name", "call " + c.name));
      box.appendChild(el("pre", null, c.arguments));
      this.callsBox.appendChild(box);
    }
  }
  asMessage() {
    const m = { role: "assistant", content: this.content };
    const calls = this.calls.filter(Boolean);
    if (calls.length)
      m.tool_calls = calls.map((c) => ({ id: c.id, type: "function",
                                         function: { name: c.name, arguments: c.arguments } }));
    return m;
  }
}

function setBusy(busy) {
  $("send").disabled = busy;
  $("stop").disabled = !busy;
}

async function send(text, tools) {
  showUser(text);
  state.messages.push({ role: "user", content: text });
  const system = $("system-prompt").value.trim();
  const messages = (system ? [{ role: "system", content: system }] : []).concat(state.messages);
  const body = Object.assign({ messages, stream: true, stream_options: { include_usage: true } },
                             samplingFields(), tools);
  const answer = new Answer();
  state.abort = new AbortController();
  setBusy(true);
  const started = performance.now();
  let first = 0, chunks = 0, finish = "", usage = null;
  const showSpeed = () => {
    if (!first || chunks < 2) return;
    const rate = (chunks - 1) / ((performance.now() - first) / 1000);
    $("speed").textContent = rate.toFixed(1) + " tok/s";
  };
  try {
    const res = await api("/v1/chat/completions", {
      method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body), signal: state.abort.signal,
    });
    if (!res.ok) {
      const err = await res.json().catch(() => ({}));
      throw new Error((err.error && err.error.message) || "HTTP " + res.status);
    }
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let cut;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        const event = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        if (!event.startsWith("data: ")) continue;
        const data = event.slice(6);
        if (data === "[DONE]") continue;
        const chunk = JSON.parse(data);
        if (chunk.error) throw new Error(chunk.error.message);
        if (chunk.usage) usage = chunk.usage;
        for (const choice of chunk.choices || []) {
          if (choice.finish_reason) finish = choice.finish_reason;
          const d = choice.delta || {};
          if (d.content || d.reasoning_content || d.tool_calls) {
            if (!first) first = performance.now();
            ++chunks;
            answer.add(d);
            showSpeed();
          }
        }
      }
    }
  } catch (e) {
    if (e.name === "AbortError") {
      finish = "stopped";
    } else if (!(e instanceof NeedsKey)) {
      answer.meta.classList.add("error");
      finish = "error: " + e.message;
    }
  } finally {
    state.abort = null;
    setBusy(false);
  }
  state.messages.push(answer.asMessage());
  const parts = [];
  if (usage) {
    const seconds = first ? (performance.now() - first) / 1000 : 0;
    parts.push(usage.prompt_tokens + " prompt tokens (" +
               ((usage.prompt_tokens_details || {}).cached_tokens || 0) + " cached)");
    parts.push(usage.completion_tokens + " generated");
    if (seconds > 0 && usage.completion_tokens > 1)
      parts.push(((usage.completion_tokens - 1) / seconds).toFixed(1) + " tok/s");
  }
  parts.push(((performance.now() - started) / 1000).toFixed(2) + " s");
  if (finish) parts.push(finish);
  answer.meta.textContent = parts.join(" · ");
  answer.box.dataset.finished = finish || "done";
}

$("chat-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const text = $("prompt").value.trim();
  if (!text || state.abort) return;
  const tools = toolsField();
  if (!tools) return;
  $("prompt").value = "";
  send(text, tools);
});
$("prompt").addEventListener("keydown", (ev) => {
  if (ev.key === "Enter" && !ev.shiftKey) {
    ev.preventDefault();
    $("chat-form").requestSubmit();
  }
});
$("stop").addEventListener("click", () => state.abort && state.abort.abort());
$("clear").addEventListener("click", () => {
  if (state.abort) state.abort.abort();
  state.messages = [];
  $("messages").replaceChildren();
  $("speed").textContent = "";
});

// ---- status -----------------------------------------------------------------------------

const kDeviceColors = ["#2f9e6b", "#c77d1a", "#7b55c7", "#c7476a"];
const deviceColors = new Map([["CPU", "#8a8f98"]]);
function deviceColor(name) {
  if (!deviceColors.has(name))
    deviceColors.set(name, kDeviceColors[(deviceColors.size - 1) % kDeviceColors.length]);
  return deviceColors.get(name);
}

function bytes(n) {
  if (!n) return "0 B";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; ++i; }
  return (i ? n.toFixed(2) : n) + " " + units[i];
}

function figures(table, rows) {
  table.replaceChildren();
  for (const [label, value, metric, raw] of rows) {
    const tr = el("tr");
    const td = el("td", null, value);
    if (metric) { td.dataset.metric = metric; td.dataset.value = String(raw); }
    tr.append(el("td", null, label), td);
    table.appendChild(tr);
  }
}

function plot(svg, values) {
  const max = Math.max(1, ...values);
  const n = Math.max(2, values.length);
  const points = values.map((v, i) => (i * 300 / (n - 1)).toFixed(1) + "," +
                                      (58 - 56 * v / max).toFixed(1)).join(" ");
  svg.replaceChildren();
  const line = document.createElementNS("http://www.w3.org/2000/svg", "polyline");
  line.setAttribute("points", points);
  svg.appendChild(line);
}

function drawLayers(placement) {
  const box = $("layers");
  box.replaceChildren();
  placement.layers.forEach((l, i) => {
    const row = el("div", "layer");
    row.dataset.layer = i;
    const attention = el("span", "dev", l.attention);
    attention.style.background = deviceColor(l.attention);
    attention.title = "layer " + i + ": attention, norms, router and KV cache on " + l.attention;
    const experts = el("div", "experts");
    const total = l.experts.reduce((a, e) => a + e.count, 0);
    for (const e of l.experts) {
      if (!e.count) continue;
      const part = el("div");
      part.style.width = (100 * e.count / total) + "%";
      part.style.background = deviceColor(e.device);
      part.title = e.count + " experts on " + e.device;
      part.dataset.device = e.device;
      part.dataset.count = e.count;
      experts.appendChild(part);
    }
    if (!total) experts.appendChild(el("span", "hint", "dense"));
    row.append(el("span", "hint", "layer " + i), attention, experts);
    box.appendChild(row);
  });
  const legend = $("legend");
  legend.replaceChildren(el("span", "hint", "each layer: attention on"));
  for (const [name, color] of deviceColors) {
    const chip = el("span", "dev", name);
    chip.style.background = color;
    legend.appendChild(chip);
  }
  legend.appendChild(el("span", "hint", "then its experts by device"));
  const out = el("div", "layer");
  const head = el("span", "dev", placement.output);
  head.style.background = deviceColor(placement.output);
  out.append(el("span", "hint", "output"), head, el("span", "hint", "output head"));
  box.appendChild(out);
}

function drawHeat(experts) {
  const canvas = $("heat");
  if (!experts) {
    canvas.hidden = true;
    $("st-heat-caption").textContent = "A dense model: no experts.";
    return;
  }
  canvas.hidden = false;
  const rows = experts.counts, n_layer = rows.length, n_expert = rows[0] ? rows[0].length : 0;
  canvas.width = n_expert;
  canvas.height = n_layer;
  canvas.style.height = Math.max(60, Math.min(8 * n_layer, 480)) + "px";
  const ctx = canvas.getContext("2d");
  const image = ctx.createImageData(Math.max(1, n_expert), Math.max(1, n_layer));
  rows.forEach((row, il) => {
    const max = Math.max(1, ...row);
    row.forEach((c, e) => {
      const t = c / max, o = 4 * (il * n_expert + e);
      image.data[o] = 255 * t; image.data[o + 1] = 80 + 60 * t; image.data[o + 2] = 140 * (1 - t) + 40;
      image.data[o + 3] = 255;
    });
  });
  ctx.putImageData(image, 0, 0);
  $("st-heat-caption").textContent = experts.tokens + " tokens routed, " + experts.used_per_token +
      " experts each; one row per layer, one column per expert, brighter = chosen more often " +
      "(each row against its busiest expert)";
}

function drawRequests(list) {
  const t = $("st-requests");
  t.replaceChildren();
  const head = el("tr");
  for (const h of ["time", "path", "status", "prompt", "cached", "generated", "tok/s", "s", ""])
    head.appendChild(el("th", null, h));
  t.appendChild(head);
  for (const r of list.slice().reverse()) {
    const tr = el("tr");
    const cells = [r.time, r.method + " " + r.path, r.status, r.prompt_tokens ?? "",
                   r.cached_tokens ?? "", r.generated_tokens ?? "",
                   r.tokens_per_second !== undefined ? r.tokens_per_second.toFixed(1) : "",
                   r.seconds.toFixed(3), r.error || ""];
    for (const c of cells) tr.appendChild(el("td", null, String(c)));
    t.appendChild(tr);
  }
}

function drawMachine(t) {
  const rows = [];
  for (const g of t.gpus) {
    const parts = [];
    if (g.temperature_celsius !== undefined) parts.push(g.temperature_celsius.toFixed(0) + " °C");
    if (g.power_watts !== undefined) parts.push(g.power_watts.toFixed(0) + " W");
    if (g.sm_clock_mhz !== undefined) parts.push(g.sm_clock_mhz + " MHz");
    if (g.memory_used_bytes !== undefined)
      parts.push(bytes(g.memory_used_bytes) + " of " + bytes(g.memory_total_bytes) + " used");
    rows.push(["GPU " + g.index + " " + g.name, parts.join(" · ") || "no figures",
               "strata_gpu_temperature_celsius", g.temperature_celsius]);
  }
  if (t.cpu) {
    rows.push(["CPU (" + t.cpu.sensor + ")", t.cpu.temperature_celsius.toFixed(1) + " °C",
               "strata_cpu_temperature_celsius", t.cpu.temperature_celsius]);
  } else {
    rows.push(["CPU", "no temperature sensor"]);
  }
  if (!t.gpus.length) rows.push(["GPUs", "no NVML on this machine"]);
  figures($("st-machine"), rows);
  const limits = [];
  if (t.limits.max_gpu_celsius) limits.push("GPU " + t.limits.max_gpu_celsius + " °C");
  if (t.limits.max_cpu_celsius) limits.push("CPU " + t.limits.max_cpu_celsius + " °C");
  $("st-limits").textContent = limits.length ? "new requests wait above " + limits.join(", ")
                                             : "no temperature limits (--max-gpu-temp, --max-cpu-temp)";
}

function drawStatus() {
  const s = state.status;
  if (!s || $("view-status").hidden) return;
  const sch = s.scheduler;
  $("st-speed").textContent = sch.generated_tokens_per_second.toFixed(1) + " tok/s";
  $("st-speed").dataset.value = sch.generated_tokens_per_second;
  plot($("speed-plot"), state.history.speed);
  $("st-slots").textContent = sch.slots_busy + " of " + sch.slots_total + " busy, " +
      sch.queue_depth + " waiting" + (sch.hold_reason ? " (held: too hot)" : "");
  plot($("queue-plot"), state.history.queue);
  const kvShare = sch.kv_pages_total ? sch.kv_pages_used / sch.kv_pages_total : 0;
  $("st-kv").textContent = (100 * kvShare).toFixed(1) + "% used";
  const used = el("div");
  used.style.width = 100 * kvShare + "%";
  $("kv-bar").replaceChildren(used);
  $("st-kv-detail").textContent = sch.kv_pages_used + " of " + sch.kv_pages_total + " pages of " +
      sch.kv_page_size + " positions (" + sch.kv_pages_active + " held by running requests), " +
      bytes(s.memory.kv.bytes) + " in all";
  const mem = s.memory;
  const rows = [["weights (file)", bytes(mem.weights_bytes)],
                ["KV cache", bytes(mem.kv.bytes_used) + " of " + bytes(mem.kv.bytes)],
                ...(mem.recurrent_state_bytes ? [["recurrent state", bytes(mem.recurrent_state_bytes)]] : []),
                ["this process (RAM)", bytes(mem.ram.process_resident_bytes)],
                ["RAM available", bytes(mem.ram.available_bytes) + " of " + bytes(mem.ram.total_bytes)]];
  for (const d of mem.devices) {
    rows.push([d.device, bytes(d.allocated_bytes) +
               (d.budget_bytes ? " of " + bytes(d.budget_bytes) : "")]);
    if (d.pinned_host_bytes) rows.push([d.device + " pinned RAM", bytes(d.pinned_host_bytes)]);
  }
  figures($("st-memory"), rows);
  figures($("st-totals"), [
    ["generations", String(sch.generations_finished), "strata_generations_finished_total", sch.generations_finished],
    ["prompt tokens", String(sch.prompt_tokens), "strata_prompt_tokens_total", sch.prompt_tokens],
    ["cached prompt tokens", String(sch.prompt_tokens_cached), "strata_prompt_tokens_cached_total", sch.prompt_tokens_cached],
    ["generated tokens", String(sch.generated_tokens), "strata_generated_tokens_total", sch.generated_tokens],
    ["drafts kept", sch.draft_tokens_accepted + " of " + sch.draft_tokens, "strata_draft_tokens_accepted_total", sch.draft_tokens_accepted],
    ["forward steps", String(sch.forward_steps), "strata_forward_steps_total", sch.forward_steps],
  ]);
  $("st-placement").textContent = s.model.architecture + ", " + s.model.n_layer + " layers" +
      (s.model.n_expert ? ", " + s.model.n_expert + " experts (" + s.model.n_expert_used + " used)" : "") +
      ". " + s.placement.summary;
  drawMachine(s.telemetry);
  drawLayers(s.placement);
  drawHeat(s.experts);
  drawRequests(s.recent_requests);
  $("view-status").dataset.updated = String(Date.now());
}

async function poll() {
  try {
    const res = await api("/status");
    const s = await res.json();
    const now = performance.now();
    if (state.last) {
      const dt = (now - state.last.at) / 1000;
      const made = s.scheduler.generated_tokens - state.last.generated;
      state.history.speed.push(dt > 0 ? made / dt : 0);
      state.history.queue.push(s.scheduler.queue_depth);
      for (const h of Object.values(state.history)) if (h.length > 120) h.shift();
    }
    state.last = { at: now, generated: s.scheduler.generated_tokens };
    state.status = s;
    $("status-error").textContent = "";
    const hold = s.scheduler.hold_reason;
    $("hold-banner").hidden = !hold;
    $("hold-banner").textContent = hold ? "New requests wait: " + hold : "";
    drawStatus();
  } catch (e) {
    if (e instanceof NeedsKey) return;  // the prompt is up; start() polls again
    $("status-error").textContent = "status: " + e.message;
  }
  setTimeout(poll, 1000);
}

// ---- plan -------------------------------------------------------------------------------

let planLoading = false;
async function loadPlan() {
  if (planLoading || $("plan-text").textContent) return;
  planLoading = true;
  $("plan-state").textContent = "planning…";
  try {
    const res = await api("/plan");
    const body = await res.json();
    if (!res.ok) throw new Error((body.error && body.error.message) || "HTTP " + res.status);
    // The curve is an SVG drawn by the server: shown as an image, it runs nothing.
    $("plan-curve").src = "data:image/svg+xml;charset=utf-8," + encodeURIComponent(body.svg);
    $("plan-curve").hidden = false;
    $("plan-text").textContent = body.text;
    $("plan-state").textContent = "";
  } catch (e) {
    if (!(e instanceof NeedsKey)) $("plan-state").textContent = "no plan: " + e.message;
  } finally {
    planLoading = false;
  }
}

// ---- start ------------------------------------------------------------------------------

async function start() {
  try {
    const props = await (await api("/props")).json();
    $("model-name").textContent = props.model + " · " + props.n_ctx + " context";
    document.title = "strata · " + props.model;
    state.defaults = props.default_generation_settings || {};
    fillSettings();
    poll();
  } catch (e) {
    if (!(e instanceof NeedsKey)) $("model-name").textContent = "cannot reach the server: " + e.message;
  }
}
start();
