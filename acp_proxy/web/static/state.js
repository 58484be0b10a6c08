// What the page shows: the view, connection, session, filter, selected frame, sort, ... One
// object, `state`, read by every view; it is read-only outside this module (an assignment to
// it throws): it changes through the setters below, and from the URL hash (readHash), which
// holds what survives a reload (writeHash). route() redraws the page for the state (app.js
// registers the function that does it with onRoute).

export const VIEWS = ["frames", "session", "findings", "timeline", "diff"];

export function emptyFilter() {
  return { direction: "", method: "", update: "", session: "", q: "", words: false };
}

const store = {
  view: "frames",
  connection: null, // number | null
  session: null, // string | null
  filter: Object.freeze(emptyFilter()),
  diffA: null, // connection ids compared in the diff view
  diffB: null,
  diffSeqs: null, // [[first, last] of A, [first, last] of B]: two turns compared, or null
  follow: false,
  frame: null, // selected frame id
  connections: [],
  loadError: null, // why /api/connections failed, or null
  info: null,
  maxId: 0,
  showParsed: false,
  sort: null, // { key, dir } over the loaded rows, or null for recording order
  finding: null, // index of the finding to point at in the findings view
  unreadable: false, // the live poll reported the recording unreadable
};

function readOnly(_, key) {
  throw new TypeError(`state.${String(key)} is read-only: change it with its setter in state.js`);
}
export const state = new Proxy(store, { set: readOnly, deleteProperty: readOnly, defineProperty: readOnly });

// ---- setters -----------------------------------------------------------------------------
export function setView(view) { store.view = view; }
export function setConnection(id) { store.connection = id; }
export function setSession(sid) { store.session = sid; }
export function setFrame(id) { store.frame = id; }
// the members given replace those of the current filter
export function setFilter(members) { store.filter = Object.freeze({ ...store.filter, ...members }); }
export function setDiffA(id) { store.diffA = id; }
export function setDiffB(id) { store.diffB = id; }
export function setDiffSeqs(seqs) { store.diffSeqs = seqs === null ? null : Object.freeze(seqs); }
export function setFollowing(on) { store.follow = on; }
export function setConnections(connections, loadError) {
  if (connections !== null) store.connections = connections;
  store.loadError = loadError;
}
// a connection's findings summary, as /api/connections/ID/findings last reported it
export function setConnectionFindings(connection, summary) { connection.findings = summary; }
export function setInfo(info) { store.info = info; }
export function setMaxId(id) { store.maxId = id; }
// the highest frame id seen so far: the recording only grows
export function noteMaxId(id) { store.maxId = Math.max(store.maxId, id); }
export function setShowParsed(on) { store.showParsed = on; }
export function setSort(sort) { store.sort = sort === null ? null : Object.freeze(sort); }
export function setFinding(key) { store.finding = key; }
export function setUnreadable(on) { store.unreadable = on; }

// ---- routing (the hash holds the view, connection, session, filters and frame) -------
let router = null;
export function onRoute(fn) { router = fn; }
export function route(listOpts) { router(listOpts); }

export function readHash() {
  const p = new URLSearchParams(location.hash.replace(/^#/, ""));
  store.view = VIEWS.includes(p.get("view")) ? p.get("view") : "frames";
  store.connection = p.get("c") ? Number(p.get("c")) : null;
  store.session = p.get("s") || null;
  store.filter = Object.freeze({
    direction: p.get("dir") || "", method: p.get("m") || "", update: p.get("u") || "",
    session: p.get("fs") || "", q: p.get("q") || "", words: p.get("w") === "1",
  });
  store.diffA = p.get("da") ? Number(p.get("da")) : null;
  store.diffB = p.get("db") ? Number(p.get("db")) : null;
  const span = (v) => (v && /^\d+-\d+$/.test(v) ? v.split("-").map(Number) : null);
  store.diffSeqs = span(p.get("as")) && span(p.get("bs")) ? Object.freeze([span(p.get("as")), span(p.get("bs"))]) : null;
  store.frame = p.get("f") ? Number(p.get("f")) : null;
  store.finding = p.get("fi") || null;
}
export function writeHash(replace) {
  const p = new URLSearchParams();
  if (state.view !== "frames") p.set("view", state.view);
  if (state.connection !== null) p.set("c", String(state.connection));
  if (state.session) p.set("s", state.session);
  const f = state.filter;
  if (f.direction) p.set("dir", f.direction);
  if (f.method) p.set("m", f.method);
  if (f.update) p.set("u", f.update);
  if (f.session) p.set("fs", f.session);
  if (f.q) p.set("q", f.q);
  if (f.words) p.set("w", "1");
  if (state.view === "diff" && state.diffA !== null) p.set("da", String(state.diffA));
  if (state.view === "diff" && state.diffB !== null) p.set("db", String(state.diffB));
  if (state.view === "diff" && state.diffSeqs) { p.set("as", state.diffSeqs[0].join("-")); p.set("bs", state.diffSeqs[1].join("-")); }
  if (state.frame) p.set("f", String(state.frame));
  if (state.view === "findings" && state.finding) p.set("fi", state.finding);
  const hash = "#" + p.toString();
  if (hash === location.hash) return;
  if (replace) history.replaceState(null, "", hash);
  else history.pushState(null, "", hash);
}
