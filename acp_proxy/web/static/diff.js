// The diff view: two connections side by side, aligned as `acp-proxy diff` aligns them
// (ids, sessionIds and timestamps ignored), the members that changed under each row.

import { showLoadError } from "./connections.js";
import { $, api, h } from "./dom.js";
import { ms } from "./format.js";
import { openFrameInList } from "./frames.js";
import { setDiffA, setDiffB, setDiffSeqs, state, writeHash } from "./state.js";

let diffGen = 0;
// what the two compared turns are ("turn 1 “Fix the test”"), when a turn's compare… chose them
let turnNames = null;
export function nameTurns(a, b) { turnNames = [a, b]; }
export async function loadDiff() {
  const body = $("diff-body");
  if (showLoadError(body)) return;
  const ids = state.connections.map((c) => c.id);
  if (ids.length < 2) { body.replaceChildren(h("p", { class: "muted" }, "A diff needs two connections; this recording has " + ids.length + ".")); return; }
  if (!ids.includes(state.diffA)) setDiffA(state.connection !== null && ids.includes(state.connection) ? state.connection : ids[0]);
  if (!ids.includes(state.diffB) || (state.diffB === state.diffA && !state.diffSeqs)) setDiffB(ids.find((x) => x !== state.diffA));
  const gen = ++diffGen;
  const pick = (which) => {
    const sel = h("select", { id: `diff-${which}`, "aria-label": `connection ${which.toUpperCase()}` },
      state.connections.map((c) => h("option", { value: String(c.id) }, `#${c.id} ${c.agent || ""} (${c.frame_count} frames)`)));
    sel.value = String(which === "a" ? state.diffA : state.diffB);
    sel.addEventListener("change", () => { if (which === "a") setDiffA(Number(sel.value)); else setDiffB(Number(sel.value)); setDiffSeqs(null); turnNames = null; writeHash(true); loadDiff(); });
    return sel;
  };
  const seqs = state.diffSeqs;
  const turns = seqs ? h("span", { id: "diff-turns", class: "diff-turns" },
    turnNames ? `${turnNames[0]} of A against ${turnNames[1]} of B: ` : "",
    `frames #${seqs[0][0]}–#${seqs[0][1]} of A against #${seqs[1][0]}–#${seqs[1][1]} of B (one turn each) `,
    h("button", { type: "button", class: "link", on: { click: () => { setDiffSeqs(null); turnNames = null; writeHash(true); loadDiff(); } } }, "compare the whole connections")) : null;
  const head = h("div", { class: "diff-pick" }, h("label", {}, "A ", pick("a")), h("label", {}, "B ", pick("b")), turns);
  body.replaceChildren(head, h("p", { class: "muted" }, "aligning…"));
  let data;
  const span = seqs ? `&as=${seqs[0].join("-")}&bs=${seqs[1].join("-")}` : "";
  try { data = await api(`/api/diff?a=${state.diffA}&b=${state.diffB}${span}`); }
  catch (e) { if (gen === diffGen) body.replaceChildren(head, h("p", { class: "warnline", role: "alert" }, e.message)); return; }
  if (gen !== diffGen) return;
  const s = data.summary;
  const summary = h("p", { id: "diff-summary" }, s.equal ? "The two connections are the same (ids, sessionIds and timestamps ignored)." + (s.slower ? ` ${s.slower} slower (reported, not a failure).` : "")
    : `${s.added} added · ${s.removed} removed · ${s.changed} changed · ${s.slower} slower`,
    data.alignment.note ? h("span", { class: "muted" }, ` · ${data.alignment.note}`) : null);
  const cell = (f, side) => {
    if (!f) return h("td", { class: "diff-cell empty" });
    return h("td", { class: "diff-cell" },
      h("button", { type: "button", class: "link", title: "open this frame", on: { click: () => openFrameInList(f.frame) } }, `#${f.seq}`), " ", f.what);
  };
  const rows = data.rows.map((r) => {
    const members = r.members ? h("tr", { class: "diff-members" }, h("td", { colspan: "3" },
      h("ul", {}, r.members.map((m) => h("li", {}, h("span", { class: "j-key" }, m.path), ": ",
        "old" in m ? h("span", { class: "diff-old" }, JSON.stringify(m.old)) : h("span", { class: "muted" }, "(missing)"), " → ",
        "new" in m ? h("span", { class: "diff-new" }, JSON.stringify(m.new)) : h("span", { class: "muted" }, "(missing)")))))) : null;
    const mark = { equal: "", changed: "~", removed: "−", added: "+" }[r.tag];
    const t = r.slower;
    const slower = t ? h("tr", { class: "diff-slower" }, h("td", { colspan: "3" },
      `slower ${t.what}: ${ms(t.a_ms)} → ${ms(t.b_ms)} (+${ms(t.b_ms - t.a_ms)})` + (t.fails ? "" : " · reported, not a failure"))) : null;
    return [h("tr", { class: `diff-row ${r.tag}` }, cell(r.a, "a"), h("td", { class: "diff-mark", title: r.tag }, mark + (t ? " slower" : "")), cell(r.b, "b")), members, slower];
  }).flat().filter(Boolean);
  const table = h("table", { class: "diff", id: "diff-table" },
    h("thead", {}, h("tr", {}, h("th", {}, `A · connection ${data.a.connection} (${data.a.frames} frames)`), h("th", {}, ""), h("th", {}, `B · connection ${data.b.connection} (${data.b.frames} frames)`))),
    h("tbody", {}, rows));
  const more = data.rowsTotal > data.rows.length ? h("p", { class: "muted" }, `showing ${data.rows.length} of ${data.rowsTotal} aligned rows; acp-proxy diff prints them all`) : null;
  body.replaceChildren(...[head, summary, table, more].filter(Boolean));
}
