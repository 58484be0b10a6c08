// The timeline view of one connection: the waterfall (each request to its response, turns
// from prompt to end, zoom, start-up folded, per-turn scale, findings as badges, "compare…" a
// turn with another connection's) and the transport's events beside the frames. The
// performance figures under it are performance.js.

import { showLoadError } from "./connections.js";
import { $, api, h } from "./dom.js";
import { arrow, dateTime, dirTitle, ms } from "./format.js";
import { nameTurns } from "./diff.js";
import { findingBadge } from "./findings.js";
import { openFrameInList } from "./frames.js";
import { performanceSections } from "./performance.js";
import { route, setDiffA, setDiffB, setDiffSeqs, setView, state, writeHash } from "./state.js";

let timelineGen = 0;
export async function loadTimeline() {
  const body = $("timeline-body");
  if (showLoadError(body)) return;
  const cid = state.connection !== null ? state.connection : (state.connections[0] && state.connections[0].id);
  if (cid === undefined || cid === null) { body.replaceChildren(h("p", { class: "muted" }, "No connections yet.")); return; }
  const gen = ++timelineGen;
  let data;
  let events = null;
  let found = null;
  try {
    [data, events, found] = await Promise.all([
      api(`/api/connections/${cid}/timeline`),
      api(`/api/connections/${cid}/events`).catch(() => null),
      api(`/api/connections/${cid}/findings`).catch(() => null),
    ]);
  }
  catch (e) { if (gen === timelineGen) body.replaceChildren(h("p", { class: "warnline", role: "alert" }, e.message)); return; }
  if (gen !== timelineGen) return;
  timelineShown = { data, events, found };
  drawTimeline();
}

// How the waterfall is drawn: zoom (the track's width, scrolled sideways), start-up folded
// (the axis starts at the first turn; null: folded when start-up takes longer than the rest)
// and per-turn scale (each turn's rows on the turn's own span).
const wfView = { zoom: 1, fold: null, perTurn: false };
let timelineShown = null;
function drawTimeline() {
  if (!timelineShown) return;
  const { data, events, found } = timelineShown;
  renderTimeline(data, found);
  if (events && events.events.length) $("timeline-body").append(...transportEvents(events.events));
}

// What the transport recorded beside the frames (HTTP requests with their status and ACP
// headers, SSE streams opened and closed with their event ids, DELETE, WebSocket close),
// one row each in recording order, with the frame each follows.
function transportEvents(events) {
  const t0 = events[0].ts;
  const after = (e) => e.afterFrameId
    ? h("button", { type: "button", class: "link", on: { click: () => openFrameInList(e.afterFrameId) } }, `#${e.afterSeq}`)
    : h("span", { class: "muted" }, e.afterSeq ? `#${e.afterSeq}` : "start");
  return [
    h("h3", {}, "Transport events"),
    h("table", { class: "perf", id: "transport-events" },
      h("thead", {}, h("tr", {}, ["time", "after frame", "kind", "event"].map((x) => h("th", {}, x)))),
      h("tbody", {}, events.map((e) => h("tr", { class: "tev", dataset: { kind: e.kind } },
        h("td", { title: dateTime(e.ts) }, `+${ms((e.ts - t0) * 1000)}`), h("td", {}, after(e)),
        h("td", {}, e.kind), h("td", { class: "tev-text" }, e.text))))),
  ];
}

// Findings in place: a bar gets the findings that name its request or response frame, a
// turn row those that name one of its other frames.
function findingsBySeq(found) {
  const by = new Map();
  if (!found) return by;
  found.findings.forEach((f, index) => {
    for (const q of f.seqs || []) {
      if (!by.has(q)) by.set(q, []);
      if (!by.get(q).some(([i]) => i === index)) by.get(q).push([index, f]);
    }
  });
  return by;
}
function badgesFor(cid, list) { return list.map(([index, f]) => findingBadge(cid, index, f)); }

// "compare…" on a turn: the same turn of another connection (same prompt, else same
// number), side by side in the diff view, without picking two whole connections.
async function compareTurn(cid, turn, row) {
  const old = document.getElementById("turn-compare");
  if (old) old.remove();
  const box = h("div", { class: "wf-compare", id: "turn-compare" }, h("span", { class: "muted" }, "finding the turns of the other connections…"));
  row.after(box);
  const others = state.connections.filter((c) => c.id !== cid).slice(0, 20);
  const lists = await Promise.all(others.map((c) => api(`/api/connections/${c.id}/timeline`).then((d) => [c, d.turns]).catch(() => [c, []])));
  const options = [];
  for (const [c, turns] of lists) {
    for (const t of turns) options.push({ c, t, label: `#${c.id}${c.label ? ` ${c.label}` : ""} · turn ${t.index + 1}${t.promptText ? ` “${t.promptText.slice(0, 60)}”` : ""}` });
  }
  if (!options.length) { box.replaceChildren(h("span", { class: "muted" }, "No turn on another connection to compare with.")); return; }
  const best = options.find((o) => turn.promptText && o.t.promptText === turn.promptText) || options.find((o) => o.t.index === turn.index) || options[0];
  const sel = h("select", { id: "turn-compare-pick", "aria-label": "the turn to compare with" },
    options.map((o, i) => h("option", { value: String(i), selected: o === best }, o.label)));
  const span = (t) => [t.startSeq, t.endSeq === null || t.endSeq === undefined ? 2147483647 : t.endSeq];
  const go = h("button", { type: "button", id: "turn-compare-go", on: { click: () => {
    const o = options[Number(sel.value)];
    const named = (t) => `turn ${t.index + 1}${t.promptText ? ` “${t.promptText.slice(0, 40)}”` : ""}`;
    nameTurns(named(turn), named(o.t));
    setDiffA(cid);
    setDiffB(o.c.id);
    setDiffSeqs([span(turn), span(o.t)]);
    setView("diff");
    writeHash();
    route();
  } } }, "compare");
  box.replaceChildren(h("span", {}, `turn ${turn.index + 1} of connection ${cid} with `), sel, " ", go);
}

function renderTimeline(data, found) {
  const bySeq = findingsBySeq(found);
  const cid = data.connectionId;
  const startup = data.turns.length ? Math.min(...data.turns.map((t) => t.startMs)) : 0;
  const foldable = startup > 0;
  const fold = foldable && (wfView.fold === null ? startup > data.spanMs - startup : wfView.fold);
  const origin = fold ? startup : 0;
  // a position on [lo, hi] as a percentage of the track
  const scale = (lo, hi) => {
    const w = Math.max(hi - lo, 0.001);
    return (v) => `${(Math.min(Math.max(0, v - lo), w) / w) * 100}%`;
  };
  const whole = scale(origin, data.spanMs);
  const rows = [];
  const barEl = (b, pct) => {
    const end = b.endMs === null ? data.spanMs : b.endMs;
    const id = data.seqToId[String(b.startSeq)];
    return h("button", {
      type: "button", class: `wf-bar ${b.direction}${b.error ? " err" : ""}${b.endMs === null ? " open" : ""}`,
      style: null, title: `${b.method} id ${b.id}: ${b.latencyMs === null ? "no response" : ms(b.latencyMs)} (frames #${b.startSeq}${b.endSeq ? "–#" + b.endSeq : ""})`,
      dataset: { left: pct(b.startMs), width: `calc(${pct(end)} - ${pct(b.startMs)})` },
      on: { click: () => id && openFrameInList(id) },
    });
  };
  const barFindings = (b) => [...(bySeq.get(b.startSeq) || []), ...(b.endSeq ? bySeq.get(b.endSeq) || [] : [])]
    .filter((x, i, all) => all.findIndex((y) => y[0] === x[0]) === i);
  const onBars = new Set();
  const barRow = (b, nested, pct) => h("div", { class: "wf-row" + (nested ? " nested" : ""), dataset: { bar: String(b.index) } },
    h("span", { class: "wf-name", title: `${dirTitle(b.direction)} ${b.method} id ${b.id}` }, h("span", { class: "wf-label" }, `${arrow(b.direction)} ${b.method}`),
      ...badgesFor(cid, barFindings(b).map((x) => { onBars.add(x[0]); return x; }))),
    h("span", { class: "wf-track" }, barEl(b, pct)),
    h("span", { class: "wf-ms" }, b.latencyMs === null ? "open" : ms(b.latencyMs)));
  const inTurn = new Set();
  const items = []; // [startMs, element]
  for (const t of data.turns) {
    const end = t.endMs === null ? data.spanMs : t.endMs;
    const pct = wfView.perTurn ? scale(t.startMs, end) : whole;
    const tick = t.firstChunkMs !== null ? h("span", { class: "wf-tick", title: `first chunk after ${ms(t.firstChunkMs)}`, dataset: { left: pct(t.startMs + t.firstChunkMs), width: "" } }) : null;
    const cancel = t.cancelMs !== null && t.cancelMs !== undefined
      ? h("span", { class: "wf-cancel", title: `session/cancel #${t.cancelSeq} after ${ms(t.cancelMs - t.startMs)}`, dataset: { left: pct(t.cancelMs), width: "" } }) : null;
    const outcome = t.stopReason || (t.error ? `error ${t.error.code}` : t.endSeq === null ? "open" : "ended");
    // the prompt's text on the turn's row: after the turn's start, or ending there when the
    // turn starts in the right half (so it is not cut off at the track's end)
    const late = parseFloat(pct(t.startMs)) > 50;
    const said = t.promptText ? h("span", { class: "wf-prompt" + (late ? " before" : ""), title: t.promptText, dataset: late ? { right: `calc(100% - ${pct(t.startMs)})` } : { left: pct(t.startMs), width: "" } }, `“${t.promptText}”`) : null;
    const bars = t.bars.map((i) => barRow(data.bars[i], data.bars[i].method !== "session/prompt", pct));
    const inside = [];
    for (const [q, list] of bySeq) {
      if (q < t.startSeq || (t.endSeq !== null && q > t.endSeq)) continue;
      for (const x of list) if (!onBars.has(x[0]) && !inside.some((y) => y[0] === x[0])) inside.push(x);
    }
    const compare = h("button", { type: "button", class: "link wf-compare-open", title: "compare this turn with a turn of another connection", on: { click: (e) => compareTurn(cid, t, e.target.closest(".wf-row")) } }, "compare…");
    const group = [h("div", { class: "wf-row turn", dataset: { turn: String(t.index) } },
      h("span", { class: "wf-name", title: `turn in session ${t.sessionId}${t.promptText ? `: ${t.promptText}` : ""}` }, h("span", { class: "wf-label" }, `turn ${t.index + 1} · ${outcome}${t.firstChunkMs !== null ? ` · 1st chunk ${ms(t.firstChunkMs)}` : ""}`), ...badgesFor(cid, inside)),
      h("span", { class: "wf-track turn" }, said, h("span", { class: "wf-bar turn", title: `${t.origin} turn: ${t.durationMs === null ? "not ended" : ms(t.durationMs)}`, dataset: { left: pct(t.startMs), width: `calc(${pct(end)} - ${pct(t.startMs)})` } }), tick, cancel),
      h("span", { class: "wf-ms" }, state.connections.length > 1 ? compare : null, t.durationMs === null ? "open" : ms(t.durationMs)))];
    for (const i of t.bars) inTurn.add(i);
    group.push(...bars);
    items.push([t.startMs, group]);
  }
  const folded = [];
  for (const b of data.bars) {
    if (inTurn.has(b.index)) continue;
    if (fold && b.startMs < origin) folded.push(b);
    else items.push([b.startMs, [barRow(b, false, whole)]]);
  }
  items.sort((a, b) => a[0] - b[0]);
  if (folded.length) {
    rows.push(h("div", { class: "wf-row startup", id: "wf-startup" },
      h("span", { class: "wf-name" },
        h("button", { type: "button", class: "link wf-unfold wf-label", title: "show start-up on the time axis", on: { click: () => { wfView.fold = false; drawTimeline(); } } },
          `start-up folded · ${folded.length} exchange(s) · ${folded.map((b) => b.method).slice(0, 3).join(", ")}${folded.length > 3 ? "…" : ""}`),
        ...badgesFor(cid, folded.flatMap(barFindings).filter((x, i, all) => all.findIndex((y) => y[0] === x[0]) === i))),
      h("span", { class: "wf-track wf-fold-mark" }),
      h("span", { class: "wf-ms" }, ms(startup))));
  }
  for (const [, els] of items) rows.push(...els);
  const wf = h("div", { class: "wf", id: "waterfall" }, rows);
  wf.style.setProperty("--wf-zoom", String(wfView.zoom));
  // Positions through the CSSOM (the page's policy forbids inline style attributes).
  for (const el of wf.querySelectorAll("[data-left]")) {
    el.style.left = el.dataset.left;
    if (el.dataset.width) el.style.width = el.dataset.width;
  }
  for (const el of wf.querySelectorAll("[data-right]")) el.style.right = el.dataset.right;
  const zoomTo = (z) => { wfView.zoom = Math.min(64, Math.max(1, z)); drawTimeline(); };
  const controls = h("div", { class: "wf-controls", id: "wf-controls" },
    h("span", { class: "muted" }, "zoom"),
    h("button", { type: "button", id: "wf-zoom-out", title: "zoom out", disabled: wfView.zoom <= 1, on: { click: () => zoomTo(wfView.zoom / 2) } }, "−"),
    h("span", { id: "wf-zoom" }, `×${wfView.zoom}`),
    h("button", { type: "button", id: "wf-zoom-in", title: "zoom in (scroll sideways)", disabled: wfView.zoom >= 64, on: { click: () => zoomTo(wfView.zoom * 2) } }, "+"),
    foldable ? h("label", {}, h("input", { type: "checkbox", id: "wf-fold", checked: fold, on: { change: (e) => { wfView.fold = e.target.checked; drawTimeline(); } } }),
      ` fold start-up (${ms(startup)} before the first turn)`) : null,
    h("label", {}, h("input", { type: "checkbox", id: "wf-per-turn", checked: wfView.perTurn, on: { change: (e) => { wfView.perTurn = e.target.checked; drawTimeline(); } } }),
      " each turn on its own scale"));
  const wfBox = h("div", { class: "wf-scroll" }, wf);
  const note = data.barsTotal > data.bars.length ? h("p", { class: "muted" }, `drawing the first ${data.bars.length} of ${data.barsTotal} exchanges; the figures cover all`) : null;
  $("timeline-body").replaceChildren(
    h("h3", {}, `Connection ${data.connectionId} · ${ms(data.spanMs)} from first to last frame`),
    h("p", { class: "muted" }, "Bars run from a request to its response (blue: client → agent, purple: agent → client, red: error); turns span prompt to end (v1: the prompt's response, v2: idle); the green tick is the first chunk, the red one a session/cancel. Click a bar for its frames."),
    controls, ...[wfBox, note].filter(Boolean), ...performanceSections(data));
}
