// The findings view: each connection's conformance findings (the rules `acp-proxy check`
// applies), with links to the frames they point at.

import { findingBadges, renderConnections } from "./connections.js";
import { $, api, h } from "./dom.js";
import { openFrameInList } from "./frames.js";
import { route, setConnection, setConnectionFindings, setFinding, setView, state, writeHash } from "./state.js";

export function openFinding(cid, index) {
  setView("findings");
  setConnection(cid);
  setFinding(`${cid}-${index}`);
  writeHash();
  route();
}

// A finding where it happened (Session and Timeline): a badge naming the rule; it opens the
// finding in the Findings view.
export function findingBadge(cid, index, f) {
  return h("button", {
    type: "button", class: `badge finding ${f.tier}`, title: `${f.tier}: ${f.reason || ""} (open in Findings)`,
    dataset: { finding: `${cid}-${index}` }, on: { click: (e) => { e.stopPropagation(); openFinding(cid, index); } },
  }, `⚑ ${f.rule}`);
}
function findingFrameLinks(seqs, ids) {
  const link = (i) => ids[i]
    ? h("button", { type: "button", class: "link", on: { click: () => openFrameInList(ids[i]) } }, `#${seqs[i]}`)
    : h("span", {}, `#${seqs[i]}`);
  const out = [];
  for (let i = 0; i < seqs.length;) {
    let end = i;
    while (end + 1 < seqs.length && seqs[end + 1] === seqs[end] + 1) end++;
    if (out.length) out.push(", ");
    if (end - i >= 2) out.push(link(i), "\u2013", link(end));
    else for (let k = i; k <= end; k++) out.push(...(k > i ? [", "] : []), link(k));
    i = end + 1;
  }
  return out;
}

export async function loadFindings() {
  const body = $("findings-body");
  const ids = state.connection !== null ? [state.connection] : state.connections.map((c) => c.id);
  if (!ids.length) { body.replaceChildren(h("p", { class: "muted" }, "No connections yet.")); return; }
  const parts = [];
  for (const cid of ids) {
    let data;
    try { data = await api(`/api/connections/${cid}/findings`); }
    catch (e) { parts.push(h("p", { class: "warnline" }, `connection ${cid}: ${e.message}`)); continue; }
    const conn = state.connections.find((c) => c.id === cid);
    if (conn) setConnectionFindings(conn, data.summary);
    const sum = data.summary || {};
    parts.push(h("h3", {}, `Connection ${cid} `, ...findingBadges(sum), data.complete ? null : h("span", { class: "badge live" }, "still recording")));
    if (!data.findings.length) {
      parts.push(h("p", { class: "muted" }, data.complete
        ? "No findings: every rule checked from the wire holds for this connection."
        : "No findings so far (end-of-connection rules run once the connection ends)."));
      continue;
    }
    const rows = data.findings.map((f, index) => h("tr", { id: `finding-${cid}-${index}`, class: state.finding === `${cid}-${index}` ? "pointed" : null },
      h("td", {}, h("span", { class: `badge ${f.tier}` }, f.tier)),
      h("td", { class: "rule" }, f.rule || f.rule_id || f.id || ""),
      h("td", {}, f.reason || f.message || "", f.rule_text || f.quote ? h("div", { class: "muted" }, f.rule_text || f.quote) : null),
      h("td", { class: "finding-frames" }, findingFrameLinks(f.seqs || [], f.frame_ids || []))));
    parts.push(h("table", { class: "findings" },
      h("thead", {}, h("tr", {}, h("th", {}, "tier"), h("th", {}, "rule"), h("th", {}, "reason"), h("th", {}, "frames"))),
      h("tbody", {}, rows)));
  }
  body.replaceChildren(...parts);
  renderConnections();
  const pointed = state.finding ? $(`finding-${state.finding}`) : null;
  if (pointed) pointed.scrollIntoView({ block: "center" });
}
