// The frame filter: the direction / method / update / session selects and the text box, and
// the filter as query parameters of /api/frames and of the live subscription.

import { $, api, h, setStatus } from "./dom.js";
import { state } from "./state.js";

// ---- filter selects ----------------------------------------------------------------------
export async function loadValues() {
  try {
    const data = await api("/api/values");
    fillSelect($("f-method"), data.methods, state.filter.method);
    fillSelect($("f-update"), data.updates, state.filter.update);
  } catch (e) { setStatus(e.message, true); }
}
function fillSelect(sel, values, current) {
  const opts = [h("option", { value: "" }, "any")];
  let found = false;
  for (const v of values) {
    opts.push(h("option", { value: v.value }, `${v.value} (${v.count})`));
    if (v.value === current) found = true;
  }
  if (current && !found) opts.push(h("option", { value: current }, current));
  sel.replaceChildren(...opts);
  sel.value = current || "";
}
export function fillSessionSelect() {
  const counts = new Map();
  for (const c of state.connections) {
    if (state.connection !== null && c.id !== state.connection) continue;
    for (const s of c.sessions) counts.set(s.session_id, (counts.get(s.session_id) || 0) + s.frame_count);
  }
  const values = Array.from(counts, ([value, count]) => ({ value, count }));
  fillSelect($("f-session"), values, state.filter.session);
}

// ---- the filter as query parameters: of /api/frames and of the live subscription ------
export function queryString(extra) {
  const p = new URLSearchParams();
  if (state.connection !== null) p.set("connection", String(state.connection));
  const f = state.filter;
  if (f.direction) p.set("direction", f.direction);
  if (f.method) p.set("method", f.method);
  if (f.update) p.set("update", f.update);
  if (f.session) p.set("session", f.session);
  if (f.q) p.set("q", f.q);
  for (const [k, v] of Object.entries(extra || {})) p.set(k, String(v));
  return p.toString();
}
export function filterForLive() {
  const f = state.filter;
  const out = {};
  if (state.connection !== null) out.connection = String(state.connection);
  if (f.direction) out.direction = f.direction;
  if (f.method) out.method = f.method;
  if (f.update) out.update = f.update;
  if (f.session) out.session = f.session;
  if (f.q) out.q = f.q;
  return out;
}

// the filter form shows the state's filter; filterFromForm() reads what the user set
export function showFilter() {
  $("f-direction").value = state.filter.direction;
  $("f-method").value = state.filter.method;
  $("f-update").value = state.filter.update;
  $("f-text").value = state.filter.q;
  $("f-words").checked = state.filter.words;
  fillSessionSelect();
}
export function filterFromForm() {
  return {
    direction: $("f-direction").value,
    method: $("f-method").value,
    update: $("f-update").value,
    session: $("f-session").value,
    q: $("f-text").value,
    words: $("f-words").checked,
  };
}

// The method and update selects are refreshed at most every 3 s while frames arrive.
let valuesAt = 0;
export function valuesStale() {
  const now = Date.now();
  if (now - valuesAt < 3000) return false;
  valuesAt = now;
  return true;
}
