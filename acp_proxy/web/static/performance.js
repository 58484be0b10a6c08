// The performance figures of one connection (under its timeline): latency per method and
// direction (p50/p95/p99/max), the turns, the slowest exchanges with links to their frames.

import { h } from "./dom.js";
import { arrow, ms } from "./format.js";
import { openFrameInList } from "./frames.js";

function frameLink(seq, data, text) {
  const id = seq === null || seq === undefined ? undefined : data.seqToId[String(seq)];
  if (!id) return h("span", { class: "muted" }, text || (seq === null || seq === undefined ? "" : `#${seq}`));
  return h("button", { type: "button", class: "link", on: { click: () => openFrameInList(id) } }, text || `#${seq}`);
}

export function performanceSections(data) {
  const perf = data.performance;
  const cell = (v) => h("td", {}, v === null || v === undefined ? "–" : ms(v));
  const methods = h("table", { class: "perf", id: "perf-methods" },
    h("thead", {}, h("tr", {}, ["method", "dir", "count", "errors", "no answer", "p50", "p95", "p99", "max"].map((x) => h("th", {}, x)))),
    h("tbody", {}, perf.methods.map((m) => h("tr", {},
      h("td", {}, m.method), h("td", {}, arrow(m.direction)), h("td", {}, String(m.count)), h("td", {}, String(m.errors)),
      h("td", {}, String(m.unanswered)), cell(m.p50Ms), cell(m.p95Ms), cell(m.p99Ms), cell(m.maxMs)))));
  const tt = perf.turns;
  const turns = h("p", { id: "perf-turns" }, `${tt.count} turn(s), ${tt.finished} ended · p50 ${ms(tt.p50Ms) || "–"} · p95 ${ms(tt.p95Ms) || "–"} · p99 ${ms(tt.p99Ms) || "–"} · max ${ms(tt.maxMs) || "–"} · time to first chunk p50 ${ms(tt.firstChunkP50Ms) || "–"}`);
  const slow = h("table", { class: "perf", id: "perf-slowest" },
    h("thead", {}, h("tr", {}, ["exchange", "latency", "request", "response"].map((x) => h("th", {}, x)))),
    h("tbody", {}, perf.slowest.map((b) => h("tr", {},
      h("td", {}, `${arrow(b.direction)} ${b.method} id ${b.id}`), cell(b.latencyMs),
      h("td", {}, frameLink(b.startSeq, data)), h("td", {}, frameLink(b.endSeq, data))))));
  return [h("h3", {}, "Performance"), methods, h("h3", {}, "Turns"), turns, h("h3", {}, "Slowest exchanges"), slow];
}
