// The sidebar: the recording's connections and their sessions (with findings badges, fetched
// one connection at a time), picking one, and the scope line beside the tabs.

import { clearDetail } from "./detail.js";
import { $, api, h, setStatus } from "./dom.js";
import { fillSessionSelect } from "./filters.js";
import { dateTime, duration } from "./format.js";
import {
  route, setConnection, setConnectionFindings, setConnections, setFilter, setFrame, setSession,
  setView, state, writeHash,
} from "./state.js";

// ---- connections sidebar ---------------------------------------------------------------
const findingsFetched = new Map(); // connection id -> when its findings were last asked for
let findingsBusy = false;

export async function loadConnections() {
  try {
    const data = await api("/api/connections");
    setConnections(data.connections, null);
    renderConnections();
    fillSessionSelect();
    fetchMissingFindings();
    if (state.view === "session") updateScope();
  } catch (e) {
    setStatus(e.message, true);
    setConnections(null, e.message);
    // The recording cannot be read (damaged, replaced, removed): say so where the
    // connections were, instead of leaving an empty or stale list.
    $("connections").replaceChildren(h("li", { class: "load-error", role: "alert" }, e.message));
  }
}

export function findingBadges(f) {
  if (!f) return [];
  const out = [];
  if (f.error) out.push(h("span", { class: "badge error", title: "errors (MUST)" }, `${f.error} error${f.error > 1 ? "s" : ""}`));
  if (f.warning) out.push(h("span", { class: "badge warning", title: "warnings (SHOULD)" }, `${f.warning} warn`));
  if (f.info) out.push(h("span", { class: "badge info", title: "informational" }, `${f.info} info`));
  if (!out.length) out.push(h("span", { class: "badge ok", title: "no findings" }, "clean"));
  return out;
}

export function renderConnections() {
  const ul = $("connections");
  const items = [];
  const all = h("li", { class: "all" + (state.connection === null ? " current" : "") },
    h("button", { type: "button", on: { click: () => selectConnection(null) } },
      h("div", { class: "conn-title" }, h("span", { class: "name" }, "All frames")),
      h("div", { class: "conn-meta" }, `${state.connections.length} connection(s)`)));
  items.push(all);
  for (const c of state.connections) {
    const live = c.live === true; // the server derives it: no end and a fresh heartbeat
    const meta = [
      c.client ? `client ${c.client}` : null,
      c.protocol_version ? `v${c.protocol_version}` : null,
      c.transport,
      c.host ? `host ${c.host}` : null,
      dateTime(c.started_at),
      live ? "running" : duration(c.duration),
      `${c.frame_count} frames`,
    ].filter(Boolean).join(" · ");
    const sessions = h("ul", { class: "sessions" },
      c.sessions.map((s) => h("li", {
        class: "sess" + (state.connection === c.id && state.session === s.session_id && state.view === "session" ? " current" : ""),
      }, h("button", {
        type: "button", title: `session ${s.session_id}: ${s.frame_count} frames`,
        on: { click: () => selectSession(c.id, s.session_id) },
      }, h("span", { class: "sid" }, s.session_id), " ",
        h("span", { class: "conn-meta" }, `${s.frame_count} fr · ${duration(s.duration)}`)))));
    const title = h("div", { class: "conn-title" },
      h("span", {}, `#${c.id}`),
      h("span", { class: "name", title: c.agent || "" }, c.agent || "(unknown agent)"),
      live ? h("span", { class: "badge live" }, "live") : null,
      c.frames_dropped ? h("span", { class: "badge error", title: "frames the recorder dropped" }, `${c.frames_dropped} dropped`) : null);
    items.push(h("li", { class: "conn" + (state.connection === c.id && state.view !== "session" ? " current" : "") },
      h("button", { type: "button", on: { click: () => selectConnection(c.id) } },
        title, labelAndEnd(c), h("div", { class: "conn-meta" }, meta),
        h("div", { class: "conn-meta" }, findingBadges(c.findings))),
      sessions));
  }
  ul.replaceChildren(...items);
}

// The connection's --label and how it ended, in the words `ls` and `stats` use (the server's
// state_reason: "exit 0", "signal 9", "ended (unknown end)", "running"; the recorded
// end_reason explained in the title).
function labelAndEnd(c) {
  const reason = c.state_reason || (c.live ? "running" : "ended");
  const bad = c.state === "unknown-end" || (c.exit_status !== null && c.exit_status !== undefined && c.exit_status !== 0);
  const title = c.end_note || (c.state === "unknown-end" ? "no end was recorded and the recorder's heartbeat stopped" : reason);
  return h("div", { class: "conn-line" },
    c.label ? h("span", { class: "conn-label", title: "the connection's --label" }, c.label) : null,
    h("span", { class: `conn-end${bad ? " bad" : ""}${c.live ? " live" : ""}`, title }, reason));
}

async function fetchMissingFindings() {
  if (findingsBusy) return;
  const now = Date.now();
  const todo = state.connections.find((c) => (!c.findings || c.findings.stale)
    && now - (findingsFetched.get(c.id) || 0) > 2000);
  if (!todo) return;
  findingsBusy = true;
  findingsFetched.set(todo.id, now);
  try {
    const data = await api(`/api/connections/${todo.id}/findings`);
    setConnectionFindings(todo, data.summary);
    renderConnections();
  } catch (e) { /* shown when the findings tab is opened */ }
  findingsBusy = false;
  setTimeout(fetchMissingFindings, 0);
}

export function selectConnection(id) {
  setConnection(id);
  setSession(null);
  setFilter({ session: "" });
  setFrame(null);
  clearDetail(); // the previous connection's frame is not this one's
  setView("frames");
  writeHash();
  route();
}
export function selectSession(cid, sid) {
  if (cid !== state.connection) { setFrame(null); clearDetail(); }
  setConnection(cid);
  setSession(sid);
  setView("session");
  writeHash();
  route();
}

export function showLoadError(box) {
  if (!state.loadError) return false;
  box.replaceChildren(h("p", { class: "warnline", role: "alert" }, state.loadError));
  return true;
}

// ---- the scope line beside the tabs: what the views show ------------------------------
export function updateScope() {
  const parts = [];
  if (state.connection !== null) {
    const c = state.connections.find((x) => x.id === state.connection);
    parts.push(`connection ${state.connection}${c && c.agent ? ` (${c.agent})` : ""}`);
  } else parts.push("all connections");
  if (state.view === "session" && state.session) parts.push(`session ${state.session}`);
  $("scope").textContent = parts.join(" · ");
}
