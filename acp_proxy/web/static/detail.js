// The selected frame's detail, below the list: its exact bytes (raw text, or hex and base64
// when not UTF-8), the JSON tree with what ACP says the members are, its pair, its findings.

import { $, api, copyText, h } from "./dom.js";
import { openFinding } from "./findings.js";
import { clock, dateTime, dirTitle, ms } from "./format.js";
import { jumpToFrame } from "./frames.js";
import { setShowParsed, state } from "./state.js";

let detailGen = 0;
let currentDetail = null;

export function clearDetail() {
  detailGen++;
  currentDetail = null;
  $("detail-body").replaceChildren(h("div", { id: "detail-empty", class: "muted" }, "Select a frame (click, or j/k) to see its exact bytes."));
}

export async function showDetail(id) {
  const gen = ++detailGen;
  let d;
  try { d = await api(`/api/frames/${id}`); }
  catch (e) {
    if (gen === detailGen) $("detail-body").replaceChildren(h("div", { class: "warnline" }, e.message));
    return;
  }
  if (gen !== detailGen) return;
  currentDetail = d;
  renderDetail();
  const found = await findingsOf(d.connection_id);
  if (gen !== detailGen || !found) return;
  d.findings = found.findings.map((f, i) => ({ ...f, index: i })).filter((f) => (f.frame_ids || []).includes(d.id));
  renderDetail();
}

const findingsCache = new Map(); // connection id -> { at, data }
async function findingsOf(cid) {
  const hit = findingsCache.get(cid);
  if (hit && Date.now() - hit.at < 3000) return hit.data;
  try {
    const data = await api(`/api/connections/${cid}/findings`);
    findingsCache.set(cid, { at: Date.now(), data });
    return data;
  } catch (e) { return null; }
}

function terminatorNote(text) {
  if (text.endsWith("\r\n")) return "ends with CR LF (\\r\\n)";
  if (text.endsWith("\n")) return "ends with LF (\\n)";
  return "no line terminator";
}

// ---- the JSON tree, with what ACP says the members are ----------------------------------
const ENTITY_KEYS = { messageId: "message", toolCallId: "tool call", planId: "plan", terminalId: "terminal", compactionId: "compaction", sessionId: "session" };
const TREE_MAX_NODES = 4000;
function treeLabel(key, value, path, d) {
  if (path.length === 1 && key === "id" && d.pair) {
    if (!d.pair.id) return d.pair.role === "request" ? "never answered" : "answers no request";
    return d.pair.role === "request" ? `answered by #${d.pair.seq} after ${ms(d.pair.latency_ms)}` : `answers #${d.pair.seq} (${ms(d.pair.latency_ms)})`;
  }
  if (path.length === 1 && key === "method") return "ACP method";
  if (key === "sessionUpdate") return "update variant";
  if (key === "stopReason") return "turn end";
  if (ENTITY_KEYS[key] && typeof value === "string") return `${ENTITY_KEYS[key]} id`;
  if (path.length === 1 && key === "error") return "error response";
  return null;
}
function jsonTree(value, d) {
  let nodes = 0;
  function leaf(v) {
    if (v === null) return h("span", { class: "j-null" }, "null");
    if (typeof v === "string") return h("span", { class: "j-str" }, JSON.stringify(v.length > 20000 ? v.slice(0, 20000) + "…" : v));
    return h("span", { class: `j-${typeof v}` }, String(v));
  }
  function node(key, v, path) {
    nodes++;
    const label = key === null ? null : treeLabel(key, v, path, d);
    const name = key === null ? null : h("span", { class: "j-key" }, typeof key === "number" ? `${key}` : JSON.stringify(key));
    const note = label ? h("span", { class: "j-note" }, label) : null;
    if (v === null || typeof v !== "object") return h("li", {}, name, name ? ": " : null, leaf(v), note);
    const entries = Array.isArray(v) ? v.map((x, i) => [i, x]) : Object.entries(v);
    const brief = Array.isArray(v) ? `[${entries.length}]` : `{${entries.length}}`;
    const det = h("details", { open: path.length < 4 });
    det.append(h("summary", {}, name, name ? ": " : null, h("span", { class: "muted" }, brief), note));
    const ul = h("ul", {});
    for (const [k, x] of entries) {
      if (nodes > TREE_MAX_NODES) { ul.append(h("li", { class: "muted" }, "… (tree cut: see the raw text)")); break; }
      ul.append(node(k, x, path.concat([k])));
    }
    det.append(ul);
    return h("li", {}, det);
  }
  return h("ul", { class: "json-tree", id: "json-tree" }, node(null, value, []));
}
function acpChips(d) {
  const chips = [];
  const chip = (k, v) => chips.push(h("span", { class: "chip" }, h("span", { class: "muted" }, k + " "), v));
  if (d.method) chip("method", d.method);
  if (d.update_kind) chip("update", d.update_kind);
  if (d.entity_type) chip(d.entity_type.replace(/_/g, " "), d.entity_id || "(anonymous)");
  if (d.session_id) chip("session", d.session_id);
  if (d.pair && d.pair.id) chips.push(h("button", { type: "button", class: "chip link", title: "p", on: { click: () => jumpToFrame(d.pair.id) } },
    d.pair.role === "request" ? `response #${d.pair.seq} · ${ms(d.pair.latency_ms)}` : `request #${d.pair.seq} · ${ms(d.pair.latency_ms)}`));
  return h("div", { class: "chips", id: "acp-chips" }, chips);
}

async function rawLine(d) {
  if (!d.truncated && d.utf8) return d.text;
  const res = await fetch(`/api/frames/${d.id}/raw`, { credentials: "same-origin" });
  return await res.text();
}

function renderDetail() {
  const d = currentDetail;
  if (!d) return;
  const head = h("div", { class: "detail-head" },
    h("span", { class: "title" }, `connection ${d.connection_id} · #${d.seq}`),
    h("span", { class: `dir-${d.direction}` }, dirTitle(d.direction)),
    h("span", {}, d.kind || "?"),
    d.method ? h("span", {}, d.method) : null,
    d.update_kind ? h("span", {}, `update ${d.update_kind}`) : null,
    d.rpc_id !== null ? h("span", {}, `id ${d.rpc_id}`) : null,
    d.session_id ? h("span", {}, `session ${d.session_id}`) : null,
    h("span", {}, `${d.size} bytes`),
    h("span", {}, dateTime(d.ts) + clock(d.ts).slice(8)),
    d.binary ? h("span", { class: "badge warning" }, "binary WebSocket message") : null,
    d.pair && d.pair.id ? h("button", {
      type: "button", class: "link", title: "p",
      on: { click: () => jumpToFrame(d.pair.id) },
    }, d.pair.role === "request" ? `response #${d.pair.seq} after ${ms(d.pair.latency_ms)}` : `answers request #${d.pair.seq} (${ms(d.pair.latency_ms)})`) : null,
    d.pair && !d.pair.id ? h("span", { class: "badge warning" }, d.pair.role === "request" ? "no response recorded" : "no matching request") : null,
    h("a", { href: `/api/frames/${d.id}/raw`, download: `frame-${d.id}.bin` }, "download exact bytes"));
  const found = d.findings || [];
  const findingLine = found.length ? h("div", { class: "frame-findings", id: "frame-findings" },
    h("span", { class: "muted" }, `${found.length} finding(s) on this frame: `),
    found.map((f) => h("button", { type: "button", class: "link", on: { click: () => openFinding(d.connection_id, f.index) } },
      h("span", { class: `badge ${f.tier}` }, f.tier), ` ${f.rule || ""} `))) : null;
  const tools = h("div", { class: "detail-tools" });
  let parsed;
  let parsedOk = false;
  if (d.utf8 && !d.truncated) { try { parsed = JSON.parse(d.text); parsedOk = true; } catch (e) { parsedOk = false; } }
  const body = [];
  if (d.utf8) {
    const rawBtn = h("button", { type: "button", "aria-pressed": String(!state.showParsed), on: { click: () => { setShowParsed(false); renderDetail(); } } }, "raw text");
    const parsedBtn = h("button", { type: "button", "aria-pressed": String(state.showParsed), on: { click: () => { setShowParsed(true); renderDetail(); } } }, "parsed JSON");
    tools.append(rawBtn, parsedBtn,
      h("button", { type: "button", id: "copy-raw", title: "the exact line, terminator included", on: { click: async () => copyText(await rawLine(d), "the raw line") } }, "copy raw line"),
      parsedOk ? h("button", { type: "button", id: "copy-json", on: { click: () => copyText(JSON.stringify(parsed, null, 2), "as JSON") } }, "copy as JSON") : null,
      h("span", { class: "muted" }, "r toggles · raw is exactly what crossed the wire"));
    let shown = d.text;
    let note = null;
    if (state.showParsed) {
      try { shown = JSON.stringify(JSON.parse(d.text), null, 2); note = "parsed and re-indented for reading; numbers beyond 2^53 may differ — the raw text is the truth"; }
      catch (e) { note = `not JSON (${e.message}); showing raw text`; }
    }
    const raw = h("div", { class: "pane" }, h("div", { class: "pane-head muted" }, "exact bytes"),
      h("pre", { class: "raw", id: "raw-text" }, shown),
      h("div", { class: "term-note" }, (note ? note + " · " : "") + terminatorNote(d.text)));
    if (parsedOk) {
      body.push(h("div", { class: "side-by-side" },
        h("div", { class: "pane" }, h("div", { class: "pane-head muted" }, "JSON tree"), acpChips(d), jsonTree(parsed, d)), raw));
    } else body.push(raw);
  } else {
    tools.append(h("span", { class: "badge warning" }, "not valid UTF-8"), h("span", { class: "muted" }, "shown as hex and base64"));
    body.push(h("div", { class: "muted" }, "hex"));
    body.push(h("pre", { class: "raw", id: "raw-hex" }, d.hex));
    body.push(h("div", { class: "muted" }, "base64"));
    body.push(h("pre", { class: "raw", id: "raw-base64" }, d.base64));
  }
  if (d.truncated) body.unshift(h("div", { class: "warnline" }, `showing the first ${d.shown_bytes} of ${d.size} bytes; download for all of them`));
  $("detail-body").replaceChildren(...[head, findingLine, tools, ...body].filter(Boolean));
}

// the r and p keys: raw text / parsed JSON, and the paired request or response
export function toggleParsed() {
  if (currentDetail) { setShowParsed(!state.showParsed); renderDetail(); }
}
export function jumpToPair() {
  if (currentDetail && currentDetail.pair && currentDetail.pair.id) jumpToFrame(currentDetail.pair.id);
}
