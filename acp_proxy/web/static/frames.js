// The frames view: the list of frames (pages loaded as you scroll, at most CAP rows kept,
// chunk runs folded into one row, sortable columns), the selection (j/k, the pair of a
// request and its response) and new frames pushed live. The detail of the selected frame is
// detail.js; the text filter through the search index, search.js.

import { showDetail } from "./detail.js";
import { $, api, h, setStatus } from "./dom.js";
import { filterForLive, queryString } from "./filters.js";
import { arrow, bytes, clock, dateTime, dirTitle, duration, ms } from "./format.js";
import { subscribe } from "./live.js";
import { searchHits, searching } from "./search.js";
import {
  emptyFilter, noteMaxId, route, setFilter, setFollowing, setFrame, setSort, setView, state,
  writeHash,
} from "./state.js";

export const ROW_H = 24;
const PAGE = 200;
const CAP = 3000; // rows kept in the DOM; the far end is dropped as you scroll

const list = { rows: [], hasBefore: false, hasAfter: false, loading: false, gen: 0, newCount: 0 };

const CHUNKS = new Set(["agent_message_chunk", "user_message_chunk", "agent_thought_chunk"]);
const expanded = new Set(); // first frame id of each unfolded chunk run
const SORTS = {
  seq: (r) => r.seq, time: (r) => r.ts, conn: (r) => r.connection_id, dir: (r) => r.direction,
  method: (r) => r.update_kind || r.method || "",
  pair: (r) => (r.pair && r.pair.latency_ms !== null ? r.pair.latency_ms : -1), size: (r) => r.size,
  preview: (r) => r.summary || r.label || "",
};

// The pair column: which way the other half is and how long it took (its frame number and
// the JSON-RPC id in the title; p jumps to it).
function pairText(fr) {
  if (!fr.pair) return [false, "", ""];
  const id = fr.rpc_id === null || fr.rpc_id === undefined ? "" : `id ${fr.rpc_id}`;
  if (fr.pair.seq === null) {
    const missing = fr.pair.role === "request" ? "no answer" : "no request";
    return [true, missing, `${id}: ${fr.pair.role === "request" ? "no response recorded" : "no request recorded"}`];
  }
  const arrowTo = fr.pair.role === "request" ? "→" : "←";
  const title = `${id} · ${fr.pair.role === "request" ? "answered by" : "answers"} #${fr.pair.seq} · ${ms(fr.pair.latency_ms)}`;
  return [false, `${arrowTo} ${ms(fr.pair.latency_ms)}`, title];
}
// The time column: minutes, seconds and milliseconds (the hour and date in the title).
const rowClock = (ts) => clock(ts).slice(3);
const fullTime = (ts) => dateTime(ts) + clock(ts).slice(8);
// The method column: the method, or for session/update the update variant alone.
function whatOf(fr) {
  if (fr.kind === "invalid") return "invalid";
  if (!fr.update_kind) return fr.method || fr.kind || "";
  return fr.method === "session/update" ? fr.update_kind : `${fr.method || ""} · ${fr.update_kind}`;
}
function whatTitle(fr) {
  const rpc = fr.rpc_id === null || fr.rpc_id === undefined ? "" : ` id ${fr.rpc_id}`;
  return `${fr.kind || "?"}${rpc}: ${fr.method || ""}${fr.update_kind ? ` · ${fr.update_kind}` : ""}`;
}

function rowFor(fr, extra) {
  const what = whatOf(fr);
  const [pairMissing, pair, pairTitle] = pairText(fr);
  const cls = "frow" + (fr.id === state.frame ? " selected" : "") + (extra && extra.child ? " child" : "") + ` k-${fr.kind || "none"}`;
  return h("div", {
    class: cls, role: "option", id: `fr-${fr.id}`, "aria-selected": fr.id === state.frame ? "true" : "false",
    dataset: { id: String(fr.id), kind: fr.kind || "" }, hidden: extra && extra.hidden,
  },
  h("span", { class: "c-id", title: `frame id ${fr.id}, sequence ${fr.seq} on connection ${fr.connection_id}` }, `#${fr.seq}`),
  h("span", { class: "c-time", title: fullTime(fr.ts) }, rowClock(fr.ts)),
  h("span", { class: "c-conn" }, String(fr.connection_id)),
  h("span", { class: `c-dir dir-${fr.direction}`, title: dirTitle(fr.direction) }, arrow(fr.direction)),
  h("span", { class: `c-method${fr.error || fr.kind === "invalid" ? " err" : ""}`, title: whatTitle(fr) }, what),
  h("span", { class: "c-pair", title: pairTitle }, pairMissing ? h("span", { class: "missing" }, pair) : pair),
  h("span", { class: "c-size", title: `${fr.size} bytes` }, bytes(fr.size)),
  h("span", { class: `c-preview${fr.error ? " err" : ""}`, title: fr.label || "" }, previewText(fr)));
}
// The preview without the method and variant the method column shows (acp/preview.py's
// summary); a search hit's snippet as it is.
function previewText(fr) {
  const said = fr.summary !== undefined && fr.summary !== null ? fr.summary : (fr.label || fr.preview);
  return said.slice(0, 300);
}

// A run of chunks of one message (same connection, session, variant and message id, one
// after the other) shows as one row: count, total bytes, the joined text.
function sameRun(a, b) {
  return a && b && CHUNKS.has(a.update_kind) && a.update_kind === b.update_kind
    && a.connection_id === b.connection_id && a.session_id === b.session_id
    && a.direction === b.direction && (a.message_id || null) === (b.message_id || null);
}
function groupsOf(rows) {
  const out = [];
  for (const r of rows) {
    const last = out[out.length - 1];
    if (!state.sort && last && sameRun(last[last.length - 1], r)) last.push(r);
    else out.push([r]);
  }
  return out;
}
function groupRow(run) {
  const first = run[0];
  const last = run[run.length - 1];
  const open = expanded.has(first.id);
  const total = run.reduce((n, r) => n + r.size, 0);
  const text = run.map((r) => r.text || "").join("");
  const shown = text.length > 240 ? text.slice(0, 239) + "…" : text;
  const label = `×${run.length} "${shown.replace(/\s+/g, " ")}"`;
  const toggle = h("button", {
    type: "button", class: "fold", "aria-expanded": String(open),
    title: open ? "fold the chunks into one row" : `show the ${run.length} chunks`,
    on: { click: (e) => { e.stopPropagation(); toggleRun(first.id); } },
  }, open ? "▾" : "▸");
  return h("div", {
    class: "frow group" + (first.id === state.frame ? " selected" : ""), role: "option",
    id: `grp-${first.id}`, "aria-selected": "false", "aria-expanded": String(open),
    dataset: { id: String(first.id), group: String(first.id), count: String(run.length) },
  },
  h("span", { class: "c-id", title: `frames #${first.seq}–#${last.seq}` }, toggle, `#${first.seq}`),
  h("span", { class: "c-time", title: fullTime(first.ts) }, rowClock(first.ts)),
  h("span", { class: "c-conn" }, String(first.connection_id)),
  h("span", { class: `c-dir dir-${first.direction}`, title: dirTitle(first.direction) }, arrow(first.direction)),
  h("span", { class: "c-method", title: `${run.length} ${whatOf(first)} notifications` }, whatOf(first)),
  h("span", { class: "c-pair", title: `${duration(last.ts - first.ts)} from first to last chunk` }, duration(last.ts - first.ts)),
  h("span", { class: "c-size", title: `${total} bytes in ${run.length} frames` }, bytes(total)),
  h("span", { class: "c-preview", title: text.slice(0, 2000) }, label));
}
export function toggleRun(firstId) {
  if (expanded.has(firstId)) expanded.delete(firstId); else expanded.add(firstId);
  renderRows();
}

function displayRows() {
  if (!state.sort) return list.rows;
  const key = SORTS[state.sort.key];
  const dir = state.sort.dir;
  return list.rows.slice().sort((a, b) => {
    const x = key(a), y = key(b);
    return (x < y ? -1 : x > y ? 1 : a.id - b.id) * dir;
  });
}

function rowsFragment(rows) {
  const frag = document.createDocumentFragment();
  for (const run of groupsOf(rows)) {
    if (run.length === 1) { frag.append(rowFor(run[0])); continue; }
    frag.append(groupRow(run));
    const open = expanded.has(run[0].id);
    for (const r of run) frag.append(rowFor(r, { child: true, hidden: !open }));
  }
  return frag;
}
export function renderRows() {
  $("frame-rows").replaceChildren(rowsFragment(displayRows()));
  markPair();
}
// A page added at one end: only its rows are built, unless sorting or a chunk run that
// crosses the page boundary needs the whole list redrawn.
function addPage(frames, atStart) {
  const rowsEl = $("frame-rows");
  const edge = atStart ? list.rows[0] : list.rows[list.rows.length - 1];
  const touching = atStart ? frames[frames.length - 1] : frames[0];
  if (state.sort || !edge || sameRun(atStart ? touching : edge, atStart ? edge : touching)) {
    list.rows = atStart ? frames.concat(list.rows) : list.rows.concat(frames);
    return false;
  }
  list.rows = atStart ? frames.concat(list.rows) : list.rows.concat(frames);
  if (atStart) rowsEl.prepend(rowsFragment(frames)); else rowsEl.append(rowsFragment(frames));
  return true;
}
// Rows beyond the cap leave the DOM from the far end (whole runs, so no run is cut).
function trimRows(fromStart) {
  const over = list.rows.length - CAP;
  if (over <= 0) return false;
  const gone = fromStart ? list.rows.splice(0, over) : list.rows.splice(list.rows.length - over, over);
  if (state.sort) return true;
  for (const r of gone) {
    const el = $(`fr-${r.id}`);
    if (el) el.remove();
    const grp = $(`grp-${r.id}`);
    if (grp) grp.remove();
  }
  // a run cut in two keeps a stale group row: redraw in that rare case
  const edge = fromStart ? list.rows[0] : list.rows[list.rows.length - 1];
  const edgeEl = edge && $(`fr-${edge.id}`);
  if (edgeEl && edgeEl.classList.contains("child")) renderRows();
  return true;
}

function renderSortHeads() {
  for (const b of document.querySelectorAll(".list-head [data-sort]")) {
    const on = state.sort && state.sort.key === b.dataset.sort;
    b.setAttribute("aria-sort", on ? (state.sort.dir > 0 ? "ascending" : "descending") : "none");
    b.dataset.arrow = on ? (state.sort.dir > 0 ? "▲" : "▼") : "";
  }
}
export function sortBy(key) {
  if (!state.sort || state.sort.key !== key) setSort({ key, dir: 1 });
  else if (state.sort.dir > 0) setSort({ key, dir: -1 });
  else setSort(null); // third click: back to recording order
  renderSortHeads();
  renderRows();
  updateFoot();
}

export function updateFoot() {
  const rows = list.rows;
  const parts = [];
  if (rows.length) parts.push(`${rows.length} frames loaded (ids ${Math.min(...rows.map((r) => r.id))}–${Math.max(...rows.map((r) => r.id))})`);
  else parts.push(list.loading ? "loading…" : "no frames match");
  if (state.connection === null) parts.push("all connections, in time order");
  if (state.sort) parts.push(`sorted by ${state.sort.key} (loaded frames)`);
  if (list.hasBefore) parts.push("more above");
  if (list.hasAfter) parts.push("more below");
  if (list.newCount) parts.push(`${list.newCount} new frame(s) — press G or enable Follow`);
  parts.push(`db max id ${state.maxId}`);
  $("list-foot-text").textContent = parts.join(" · ");
  $("export").href = "/api/export.jsonl?" + queryString();
}

export async function reloadList(opts) {
  const gen = ++list.gen;
  list.loading = true;
  list.rows = [];
  list.newCount = 0;
  $("frame-rows").replaceChildren();
  updateFoot();
  if (searching()) { await searchList(gen); return; }
  let page;
  try {
    if (opts && opts.around) {
      const before = await api("/api/frames?" + queryString({ before_id: opts.around, limit: PAGE / 2 }));
      const from = before.frames.length ? before.frames[before.frames.length - 1].id : 0;
      const after = await api("/api/frames?" + queryString({ after_id: from, limit: PAGE / 2 }));
      page = { frames: before.frames.concat(after.frames), has_more_before: before.has_more_before, has_more_after: after.has_more_after, max_id: after.max_id };
    } else if (opts && opts.end) {
      page = await api("/api/frames?" + queryString({ before_id: 9007199254740991, limit: PAGE }));
    } else {
      page = await api("/api/frames?" + queryString({ after_id: 0, limit: PAGE }));
    }
  } catch (e) {
    listFailed(gen, e);
    return;
  }
  if (gen !== list.gen) return;
  setStatus("");
  list.loading = false;
  list.rows = page.frames;
  list.hasBefore = page.has_more_before;
  list.hasAfter = page.has_more_after;
  noteMaxId(page.max_id);
  renderRows();
  const box = $("frame-list");
  if (opts && opts.around) {
    revealInRun(opts.around);
    const el = $(`fr-${opts.around}`);
    if (el) box.scrollTop = el.offsetTop - box.clientHeight / 3;
  } else if (opts && opts.end) {
    box.scrollTop = box.scrollHeight;
  } else {
    box.scrollTop = 0;
  }
  updateFoot();
  subscribe();
  maybeLoadMore();
}

// A page that could not be loaded: the reason where the rows were (unless a newer load began).
function listFailed(gen, e) {
  if (gen !== list.gen) return;
  list.loading = false;
  setStatus(e.message, true);
  $("frame-rows").replaceChildren(h("div", { class: "load-error", role: "alert" }, e.message));
  updateFoot();
}

// The text filter through the search index (search.js): its hits are the list.
async function searchList(gen) {
  let found;
  try { found = await searchHits(); }
  catch (e) {
    listFailed(gen, e);
    return;
  }
  if (gen !== list.gen) return;
  setStatus(found.status);
  list.loading = false;
  list.hasBefore = false;
  list.hasAfter = false;
  list.rows = found.rows;
  renderRows();
  $("frame-list").scrollTop = 0;
  updateFoot();
}

async function loadAfter() {
  if (list.loading || !list.hasAfter || !list.rows.length) return;
  const gen = list.gen;
  list.loading = true;
  try {
    const page = await api("/api/frames?" + queryString({ after_id: list.rows[list.rows.length - 1].id, limit: PAGE }));
    if (gen !== list.gen) return;
    appendRows(page.frames);
    list.hasAfter = page.has_more_after;
    noteMaxId(page.max_id);
    if (!list.hasAfter) { list.newCount = 0; subscribe(); }
  } catch (e) { setStatus(e.message, true); }
  finally { if (gen === list.gen) list.loading = false; updateFoot(); }
}

async function loadBefore() {
  if (list.loading || !list.hasBefore || !list.rows.length) return;
  const gen = list.gen;
  list.loading = true;
  try {
    const page = await api("/api/frames?" + queryString({ before_id: list.rows[0].id, limit: PAGE }));
    if (gen !== list.gen) return;
    const box = $("frame-list");
    const height = box.scrollHeight;
    const top = box.scrollTop;
    const added = addPage(page.frames, true);
    list.hasBefore = page.has_more_before;
    if (trimRows(false)) { list.hasAfter = true; subscribe(); }
    if (!added) renderRows();
    box.scrollTop = top + (box.scrollHeight - height); // keep what the user sees in place
  } catch (e) { setStatus(e.message, true); }
  finally { if (gen === list.gen) list.loading = false; updateFoot(); }
}

// Frames pushed live. With several writers (a fleet into one PostgreSQL database) a
// batch may be committed after frames with higher ids: such a frame goes to its place,
// in the order the server pages the list in (/api/info's pages_by_time).
function addLive(frames) {
  const have = new Set(list.rows.map((r) => r.id));
  const fresh = frames.filter((f) => !have.has(f.id));
  if (!fresh.length) return;
  const byTime = state.connection === null && !!(state.info && state.info.pages_by_time);
  const before = (a, b) => (byTime && a.ts !== b.ts ? a.ts < b.ts : a.id < b.id);
  const last = list.rows[list.rows.length - 1];
  if (!last || !fresh.some((f) => before(f, last))) { appendRows(fresh); return; }
  list.rows = list.rows.concat(fresh).sort((a, b) => (before(a, b) ? -1 : before(b, a) ? 1 : 0));
  if (trimRows(true)) list.hasBefore = true;
  renderRows();
}
function appendRows(frames) {
  if (!frames.length) return;
  const box = $("frame-list");
  const atBottom = box.scrollHeight - box.scrollTop - box.clientHeight < ROW_H * 2;
  const top = box.scrollTop;
  const added = addPage(frames, false);
  if (!added) renderRows();
  const height = box.scrollHeight;
  const trimmed = trimRows(true);
  if (trimmed) { list.hasBefore = true; if (state.sort) renderRows(); }
  box.scrollTop = trimmed ? Math.max(0, top - (height - box.scrollHeight)) : top;
  if (state.follow && atBottom) box.scrollTop = box.scrollHeight;
}

// A frame inside a folded run: unfold the run so the frame's row can be shown.
export function revealInRun(id) {
  const el = $(`fr-${id}`);
  if (!el || !el.hidden) return;
  let prev = el.previousElementSibling;
  while (prev && !prev.classList.contains("group")) prev = prev.previousElementSibling;
  if (prev) { expanded.add(Number(prev.dataset.group)); renderRows(); }
}

export function maybeLoadMore() {
  const box = $("frame-list");
  if (box.scrollHeight - box.scrollTop - box.clientHeight < ROW_H * 20) loadAfter();
  else if (box.scrollTop < ROW_H * 20) loadBefore();
}

// The visible row showing frame ``id``: its own row, or its folded run's row.
export function visibleRow(id) {
  const el = $(`fr-${id}`);
  if (!el) return null;
  if (!el.hidden) return el;
  let prev = el.previousElementSibling;
  while (prev && !prev.classList.contains("group")) prev = prev.previousElementSibling;
  return prev;
}
function markPair() {
  for (const el of document.querySelectorAll(".frow.selected")) { el.classList.remove("selected"); el.setAttribute("aria-selected", "false"); }
  for (const el of document.querySelectorAll(".frow.pair-of-selected")) el.classList.remove("pair-of-selected");
  if (state.frame === null) return;
  const el = visibleRow(state.frame);
  if (!el) return;
  el.classList.add("selected");
  el.setAttribute("aria-selected", "true");
  const fr = list.rows.find((r) => r.id === state.frame);
  if (fr && fr.pair && fr.pair.id) {
    const other = visibleRow(fr.pair.id);
    if (other) other.classList.add("pair-of-selected");
  }
}

export function selectFrame(id, opts) {
  setFrame(id);
  markPair();
  const el = visibleRow(id);
  if (el && (!opts || !opts.noScroll)) el.scrollIntoView({ block: "nearest" });
  writeHash(true);
  showDetail(id);
}

export function moveSelection(delta) {
  const visible = Array.from(document.querySelectorAll("#frame-rows .frow:not([hidden])"));
  if (!visible.length) return;
  const current = state.frame === null ? null : visibleRow(state.frame);
  let idx = current ? visible.indexOf(current) : -1;
  if (idx < 0) idx = delta > 0 ? -1 : visible.length;
  const next = Math.max(0, Math.min(visible.length - 1, idx + delta));
  selectFrame(Number(visible[next].dataset.id));
  if (next >= visible.length - 5) loadAfter();
  if (next <= 5) loadBefore();
}

export function jumpToFrame(id) {
  if ($(`fr-${id}`)) { revealInRun(id); selectFrame(id); return; }
  setFrame(id);
  reloadList({ around: id }).then(() => selectFrame(id));
}

export function openFrameInList(id) {
  setView("frames");
  setFilter(emptyFilter());
  setFrame(id);
  writeHash();
  route({ around: id });
}

export function setFollow(on) {
  setFollowing(on);
  $("f-follow").checked = on;
  if (on) { list.newCount = 0; reloadList({ end: true }); }
}

// ---- what the live feed (live.js) and the keys (app.js) need of the list ---------------------
// The subscription: follow the tail when the list shows the newest frames of this filter.
export function liveSubscription() {
  const tail = state.view === "frames" && !list.hasAfter && !list.loading && !searching();
  const after = list.rows.length ? list.rows[list.rows.length - 1].id : state.maxId;
  return { follow: tail, after_id: tail ? after : null, filter: filterForLive() };
}
export function onLiveFrames(frames) {
  if (state.view === "frames" && !list.hasAfter && !searching()) addLive(frames);
}
// frames recorded beyond the loaded end of the list: counted in the footer
export function countNewFrames(n) {
  if (list.hasAfter) list.newCount += n;
}
// a pending page load is dropped when it arrives (another view is shown)
export function cancelListLoads() { list.gen++; }
export function loadedCount() { return list.rows.length; }
