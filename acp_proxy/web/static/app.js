// acp-proxy inspector. Vanilla JS in native ES modules, no build step, no third-party code:
// this module starts the page (the route: which view shows what, the tabs, the keys, the
// detail drawer); one module per view (connections, frames, detail, search, session,
// findings, timeline, performance, diff), the live feed (live.js), the filter (filters.js),
// the state every view reads (state.js) and the DOM and formatting helpers (dom.js,
// format.js). The modules only define functions when loaded; some call each other both ways
// (the list and its detail, the list and the live feed), which is safe for that reason.
// Safety rule: recorded data is only ever put into the page with textContent / text nodes
// (see h() in dom.js). Nothing here assigns innerHTML.

import { loadConnections, renderConnections, updateScope } from "./connections.js";
import { clearDetail, jumpToPair, toggleParsed } from "./detail.js";
import { loadDiff } from "./diff.js";
import { $, api, setStatus } from "./dom.js";
import { filterFromForm, loadValues, showFilter } from "./filters.js";
import { loadFindings } from "./findings.js";
import {
  ROW_H, cancelListLoads, loadedCount, maybeLoadMore, moveSelection, reloadList, selectFrame,
  setFollow, sortBy, toggleRun, visibleRow,
} from "./frames.js";
import { connectLive, subscribe } from "./live.js";
import { loadSession } from "./session.js";
import {
  VIEWS, onRoute, readHash, setFilter, setFollowing, setFrame, setInfo, setMaxId, setView, state,
  writeHash,
} from "./state.js";
import { loadTimeline } from "./timeline.js";

// ---- view switching ----------------------------------------------------------------------------
function applyRoute(listOpts) {
  for (const v of VIEWS) {
    $(`view-${v}`).hidden = state.view !== v;
    $(`tab-${v}`).setAttribute("aria-selected", String(state.view === v));
  }
  $("tab-timeline").disabled = state.connection === null && !state.connections.length;
  showFilter();
  $("view-frames").classList.toggle("one-conn", state.connection !== null);
  $("f-follow").checked = state.follow;
  renderConnections();
  updateScope();
  if (state.view === "frames") {
    const opts = listOpts || (state.frame ? { around: state.frame } : (state.follow ? { end: true } : {}));
    reloadList(opts).then(() => { if (state.frame && $(`fr-${state.frame}`)) selectFrame(state.frame, { noScroll: !!opts.end }); });
  } else {
    cancelListLoads();
    subscribe();
    if (state.view === "session") loadSession();
    if (state.view === "findings") loadFindings();
    if (state.view === "timeline") loadTimeline();
    if (state.view === "diff") loadDiff();
  }
}

function switchView(v) {
  setView(v);
  writeHash();
  applyRoute();
}

// ---- input wiring --------------------------------------------------------------------------------
let textTimer = null;
function wire() {
  for (const b of document.querySelectorAll(".tabs [role=tab]")) b.addEventListener("click", () => switchView(b.dataset.view));
  const onFilter = () => {
    setFilter(filterFromForm());
    setFrame(null);
    clearDetail();
    writeHash(true);
    reloadList(state.follow ? { end: true } : {});
  };
  for (const id of ["f-direction", "f-method", "f-update", "f-session", "f-words"]) $(id).addEventListener("change", onFilter);
  $("f-text").addEventListener("input", () => { clearTimeout(textTimer); textTimer = setTimeout(onFilter, 250); });
  $("filters").addEventListener("submit", (e) => { e.preventDefault(); clearTimeout(textTimer); onFilter(); });
  $("f-follow").addEventListener("change", () => setFollow($("f-follow").checked));
  $("frame-list").addEventListener("scroll", () => maybeLoadMore(), { passive: true });
  $("frame-rows").addEventListener("click", (e) => {
    const row = e.target.closest(".frow");
    if (row) { selectFrame(Number(row.dataset.id), { noScroll: true }); $("frame-list").focus({ preventScroll: true }); }
  });
  for (const b of document.querySelectorAll(".list-head [data-sort]")) b.addEventListener("click", () => sortBy(b.dataset.sort));
  wireSplitter();
  $("help-button").addEventListener("click", () => $("help").showModal());
  $("help-close").addEventListener("click", () => $("help").close());
  window.addEventListener("hashchange", () => { readHash(); applyRoute(); });
  document.addEventListener("keydown", onKey);
}

function onKey(e) {
  const t = e.target;
  const typing = t && (t.tagName === "INPUT" || t.tagName === "SELECT" || t.tagName === "TEXTAREA");
  if (e.key === "Escape") {
    if (typing) { t.blur(); $("frame-list").focus(); e.preventDefault(); }
    return;
  }
  if (typing || e.ctrlKey || e.metaKey || e.altKey) return;
  const frames = state.view === "frames";
  switch (e.key) {
    case "1": switchView("frames"); break;
    case "2": switchView("session"); break;
    case "3": switchView("findings"); break;
    case "4": switchView("timeline"); break;
    case "5": switchView("diff"); break;
    case "Enter": if (frames && state.frame !== null) { const el = visibleRow(state.frame); if (el && el.classList.contains("group")) toggleRun(Number(el.dataset.group)); } else return; break;
    case "/": if (frames) { $("f-text").focus(); $("f-text").select(); } break;
    case "?": $("help").open ? $("help").close() : $("help").showModal(); break;
    case "j": case "ArrowDown": if (frames) moveSelection(1); else return; break;
    case "k": case "ArrowUp": if (frames) moveSelection(-1); else return; break;
    case "PageDown": if (frames) moveSelection(Math.floor($("frame-list").clientHeight / ROW_H)); else return; break;
    case "PageUp": if (frames) moveSelection(-Math.floor($("frame-list").clientHeight / ROW_H)); else return; break;
    case "g": if (frames) { setFrame(null); reloadList({}).then(() => moveSelection(1)); } break;
    case "G": if (frames) { setFrame(null); reloadList({ end: true }).then(() => moveSelection(loadedCount())); } break;
    case "f": if (frames) setFollow(!state.follow); break;
    case "r": toggleParsed(); break;
    case "p": jumpToPair(); break;
    default: return;
  }
  e.preventDefault();
}

// ---- the detail drawer: drag the splitter to resize, double-click to fold -------------------
function wireSplitter() {
  const split = $("splitter");
  const detail = $("detail");
  const saved = Number(localStorage.getItem("acp-proxy.detail-height"));
  if (saved > 0) detail.style.height = `${saved}px`;
  let startY = 0;
  let startH = 0;
  const move = (e) => {
    const max = $("view-frames").clientHeight - 140;
    const height = Math.max(0, Math.min(max, startH + (startY - e.clientY)));
    detail.style.height = `${height}px`;
  };
  const up = () => {
    document.removeEventListener("pointermove", move);
    document.removeEventListener("pointerup", up);
    split.classList.remove("dragging");
    localStorage.setItem("acp-proxy.detail-height", String(detail.getBoundingClientRect().height));
  };
  split.addEventListener("pointerdown", (e) => {
    startY = e.clientY;
    startH = detail.getBoundingClientRect().height;
    split.classList.add("dragging");
    document.addEventListener("pointermove", move);
    document.addEventListener("pointerup", up);
    e.preventDefault();
  });
  split.addEventListener("dblclick", () => {
    detail.style.height = detail.getBoundingClientRect().height > 8 ? "0px" : "";
  });
  split.addEventListener("keydown", (e) => {
    if (e.key !== "ArrowUp" && e.key !== "ArrowDown") return;
    const now = detail.getBoundingClientRect().height;
    detail.style.height = `${Math.max(0, now + (e.key === "ArrowUp" ? 40 : -40))}px`;
    e.preventDefault();
    e.stopPropagation();
  });
}

// ---- start -----------------------------------------------------------------------------------------
async function start() {
  if (new URLSearchParams(location.search).has("token")) history.replaceState(null, "", location.pathname + location.hash);
  readHash();
  onRoute(applyRoute);
  wire();
  try {
    setInfo(await api("/api/info"));
    $("db-name").textContent = state.info.name;
    document.title = `${state.info.name} · acp-proxy inspector`;
    setMaxId(state.info.max_id);
  } catch (e) {
    setStatus(e.message, true);
  }
  await loadConnections();
  await loadValues();
  if (!location.hash && state.connections.some((c) => c.live === true)) setFollowing(true);
  applyRoute();
  connectLive();
}
start();
