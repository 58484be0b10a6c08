// acp-proxy inspector. Vanilla JS, no build step, no third-party code.
// Safety rule: recorded data is only ever put into the page with textContent / text nodes
// (see h() below). Nothing here assigns innerHTML.
"use strict";

(function () {
  const ROW_H = 24;
  const PAGE = 200;
  const CAP = 3000; // rows kept in the DOM; the far end is dropped as you scroll
  const $ = (id) => document.getElementById(id);
  const VIEWS = ["frames", "session", "findings", "timeline", "diff"];

  // ---- tiny DOM helper: strings become text nodes, never markup -------------------------
  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    if (attrs) {
      for (const [k, v] of Object.entries(attrs)) {
        if (v === null || v === undefined || v === false) continue;
        if (k === "class") el.className = v;
        else if (k === "text") el.textContent = v;
        else if (k === "dataset") Object.assign(el.dataset, v);
        else if (k === "on") for (const [ev, fn] of Object.entries(v)) el.addEventListener(ev, fn);
        else if (k.startsWith("on")) throw new Error("use the on: {} attribute");
        else el.setAttribute(k, v === true ? "" : String(v));
      }
    }
    for (const c of children.flat()) {
      if (c === null || c === undefined || c === false) continue;
      el.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return el;
  }

  async function api(path) {
    const res = await fetch(path, { headers: { Accept: "application/json" }, credentials: "same-origin" });
    let body = null;
    try { body = await res.json(); } catch (e) { body = null; }
    if (!res.ok) throw new Error((body && body.error) || `${res.status} ${res.statusText}`);
    return body;
  }

  // ---- state -----------------------------------------------------------------------------
  const state = {
    view: "frames",
    connection: null, // number | null
    session: null, // string | null
    filter: { direction: "", method: "", update: "", session: "", q: "", words: false },
    diffA: null, // connection ids compared in the diff view
    diffB: null,
    follow: false,
    frame: null, // selected frame id
    connections: [],
    info: null,
    maxId: 0,
    showParsed: false,
    sort: null, // { key, dir } over the loaded rows, or null for recording order
    finding: null, // index of the finding to point at in the findings view
    unreadable: false, // the live poll reported the recording unreadable
  };
  const list = { rows: [], hasBefore: false, hasAfter: false, loading: false, gen: 0, newCount: 0 };

  function setStatus(text, isError) {
    const el = $("status");
    el.textContent = text || "";
    el.classList.toggle("error", !!isError);
  }

  // ---- routing (the hash holds the view, connection, session, filters and frame) -------
  function readHash() {
    const p = new URLSearchParams(location.hash.replace(/^#/, ""));
    state.view = VIEWS.includes(p.get("view")) ? p.get("view") : "frames";
    state.connection = p.get("c") ? Number(p.get("c")) : null;
    state.session = p.get("s") || null;
    state.filter = {
      direction: p.get("dir") || "", method: p.get("m") || "", update: p.get("u") || "",
      session: p.get("fs") || "", q: p.get("q") || "", words: p.get("w") === "1",
    };
    state.diffA = p.get("da") ? Number(p.get("da")) : null;
    state.diffB = p.get("db") ? Number(p.get("db")) : null;
    state.frame = p.get("f") ? Number(p.get("f")) : null;
    state.finding = p.get("fi") || null;
  }
  function writeHash(replace) {
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
    if (state.frame) p.set("f", String(state.frame));
    if (state.view === "findings" && state.finding) p.set("fi", state.finding);
    const hash = "#" + p.toString();
    if (hash === location.hash) return;
    if (replace) history.replaceState(null, "", hash);
    else history.pushState(null, "", hash);
  }

  // ---- formatting ------------------------------------------------------------------------
  const pad = (n, w) => String(n).padStart(w, "0");
  function clock(ts) {
    if (ts === null || ts === undefined) return "-";
    const d = new Date(ts * 1000);
    return `${pad(d.getHours(), 2)}:${pad(d.getMinutes(), 2)}:${pad(d.getSeconds(), 2)}.${pad(d.getMilliseconds(), 3)}`;
  }
  function dateTime(ts) {
    if (ts === null || ts === undefined) return "-";
    const d = new Date(ts * 1000);
    return `${d.getFullYear()}-${pad(d.getMonth() + 1, 2)}-${pad(d.getDate(), 2)} ${clock(ts).slice(0, 8)}`;
  }
  function duration(sec) {
    if (sec === null || sec === undefined) return "running";
    if (sec < 1) return `${Math.round(sec * 1000)}ms`;
    if (sec < 120) return `${sec.toFixed(1)}s`;
    return `${Math.floor(sec / 60)}m${pad(Math.floor(sec % 60), 2)}s`;
  }
  function ms(v) {
    if (v === null || v === undefined) return "";
    if (v < 10) return `${v.toFixed(2)}ms`;
    if (v < 1000) return `${v.toFixed(0)}ms`;
    return `${(v / 1000).toFixed(2)}s`;
  }
  function bytes(n) {
    if (n < 1024) return `${n}B`;
    if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)}K`;
    return `${(n / 1048576).toFixed(1)}M`;
  }
  const arrow = (d) => (d === "c2a" ? "C→A" : "A→C");
  const dirTitle = (d) => (d === "c2a" ? "client → agent" : "agent → client");

  // ---- connections sidebar ---------------------------------------------------------------
  const findingsFetched = new Map(); // connection id -> when its findings were last asked for
  let findingsBusy = false;

  async function loadConnections() {
    try {
      const data = await api("/api/connections");
      state.connections = data.connections;
      state.loadError = null;
      renderConnections();
      fillSessionSelect();
      fetchMissingFindings();
      if (state.view === "session") updateScope();
    } catch (e) {
      setStatus(e.message, true);
      state.loadError = e.message;
      // The recording cannot be read (damaged, replaced, removed): say so where the
      // connections were, instead of leaving an empty or stale list.
      $("connections").replaceChildren(h("li", { class: "load-error", role: "alert" }, e.message));
    }
  }

  function findingBadges(f) {
    if (!f) return [];
    const out = [];
    if (f.error) out.push(h("span", { class: "badge error", title: "errors (MUST)" }, `${f.error} error${f.error > 1 ? "s" : ""}`));
    if (f.warning) out.push(h("span", { class: "badge warning", title: "warnings (SHOULD)" }, `${f.warning} warn`));
    if (f.info) out.push(h("span", { class: "badge info", title: "informational" }, `${f.info} info`));
    if (!out.length) out.push(h("span", { class: "badge ok", title: "no findings" }, "clean"));
    return out;
  }

  function renderConnections() {
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
        c.state === "unknown-end" ? h("span", { class: "badge warning", title: "the recorder stopped before the connection closed its row" }, "unknown end") : null,
        c.frames_dropped ? h("span", { class: "badge error", title: "frames the recorder dropped" }, `${c.frames_dropped} dropped`) : null);
      items.push(h("li", { class: "conn" + (state.connection === c.id && state.view !== "session" ? " current" : "") },
        h("button", { type: "button", on: { click: () => selectConnection(c.id) } },
          title, h("div", { class: "conn-meta" }, meta),
          h("div", { class: "conn-meta" }, findingBadges(c.findings))),
        sessions));
    }
    ul.replaceChildren(...items);
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
      todo.findings = data.summary;
      renderConnections();
    } catch (e) { /* shown when the findings tab is opened */ }
    findingsBusy = false;
    setTimeout(fetchMissingFindings, 0);
  }

  function selectConnection(id) {
    state.connection = id;
    state.session = null;
    state.filter.session = "";
    state.frame = null;
    clearDetail(); // the previous connection's frame is not this one's
    state.view = "frames";
    writeHash();
    applyRoute();
  }
  function selectSession(cid, sid) {
    if (cid !== state.connection) { state.frame = null; clearDetail(); }
    state.connection = cid;
    state.session = sid;
    state.view = "session";
    writeHash();
    applyRoute();
  }

  // ---- filter selects ----------------------------------------------------------------------
  async function loadValues() {
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
  function fillSessionSelect() {
    const counts = new Map();
    for (const c of state.connections) {
      if (state.connection !== null && c.id !== state.connection) continue;
      for (const s of c.sessions) counts.set(s.session_id, (counts.get(s.session_id) || 0) + s.frame_count);
    }
    const values = Array.from(counts, ([value, count]) => ({ value, count }));
    fillSelect($("f-session"), values, state.filter.session);
  }

  // ---- frame list ---------------------------------------------------------------------------
  function queryString(extra) {
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
  function filterForLive() {
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

  const CHUNKS = new Set(["agent_message_chunk", "user_message_chunk", "agent_thought_chunk"]);
  const expanded = new Set(); // first frame id of each unfolded chunk run
  const SORTS = {
    seq: (r) => r.seq, time: (r) => r.ts, conn: (r) => r.connection_id, dir: (r) => r.direction,
    kind: (r) => r.kind || "", method: (r) => r.update_kind || r.method || "", rpc: (r) => r.rpc_id || "",
    pair: (r) => (r.pair && r.pair.latency_ms !== null ? r.pair.latency_ms : -1), size: (r) => r.size,
    preview: (r) => r.label || "",
  };

  function pairText(fr) {
    if (!fr.pair) return [false, ""];
    if (fr.pair.seq === null) return [true, fr.pair.role === "request" ? "no response" : "no request"];
    return [false, `${fr.pair.role === "request" ? "→" : "←"} #${fr.pair.seq} ${ms(fr.pair.latency_ms)}`];
  }
  function whatOf(fr) {
    if (!fr.update_kind) return fr.method || "";
    return fr.method === "session/update" ? `update · ${fr.update_kind}` : `${fr.method || ""} · ${fr.update_kind}`;
  }

  function rowFor(fr, extra) {
    const what = whatOf(fr);
    const [pairMissing, pair] = pairText(fr);
    const cls = "frow" + (fr.id === state.frame ? " selected" : "") + (extra && extra.child ? " child" : "");
    return h("div", {
      class: cls, role: "option", id: `fr-${fr.id}`, "aria-selected": fr.id === state.frame ? "true" : "false",
      dataset: { id: String(fr.id) }, hidden: extra && extra.hidden,
    },
    h("span", { class: "c-id", title: `frame id ${fr.id}, sequence ${fr.seq} on connection ${fr.connection_id}` }, `#${fr.seq}`),
    h("span", { class: "c-time", title: dateTime(fr.ts) }, clock(fr.ts)),
    h("span", { class: "c-conn" }, String(fr.connection_id)),
    h("span", { class: `c-dir dir-${fr.direction}`, title: dirTitle(fr.direction) }, arrow(fr.direction)),
    h("span", { class: `c-kind k-${fr.kind || "none"}${fr.error ? " err" : ""}`, title: fr.kind || "" }, fr.kind || "?"),
    h("span", { class: "c-method", title: what }, what),
    h("span", { class: "c-rpc", title: fr.rpc_id || "" }, fr.rpc_id === null ? "" : fr.rpc_id),
    h("span", { class: "c-pair", title: pair }, pairMissing ? h("span", { class: "missing" }, pair) : pair),
    h("span", { class: "c-size", title: `${fr.size} bytes` }, bytes(fr.size)),
    h("span", { class: `c-preview${fr.error ? " err" : ""}`, title: fr.label || "" }, previewParts(fr)));
  }
  // The preview, its leading method / variant apart: a narrow window hides that part, which
  // the method column already shows.
  function previewParts(fr) {
    const label = (fr.label || fr.preview).slice(0, 300);
    if (fr.kind === "response" || !fr.method) return label;
    const prefix = fr.update_kind && label.startsWith(`${fr.method} · ${fr.update_kind}`) ? `${fr.method} · ${fr.update_kind}` : fr.method;
    if (!label.startsWith(prefix) || label.length === prefix.length) return label;
    return [h("span", { class: "p-what" }, prefix), label.slice(prefix.length)];
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
    const label = `${first.update_kind} ×${run.length} "${shown.replace(/\s+/g, " ")}"`;
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
    h("span", { class: "c-time", title: dateTime(first.ts) }, clock(first.ts)),
    h("span", { class: "c-conn" }, String(first.connection_id)),
    h("span", { class: `c-dir dir-${first.direction}`, title: dirTitle(first.direction) }, arrow(first.direction)),
    h("span", { class: "c-kind k-notification", title: `${run.length} notifications` }, `${run.length} chunks`),
    h("span", { class: "c-method", title: whatOf(first) }, whatOf(first)),
    h("span", { class: "c-rpc" }, ""),
    h("span", { class: "c-pair", title: `${duration(last.ts - first.ts)} from first to last chunk` }, duration(last.ts - first.ts)),
    h("span", { class: "c-size", title: `${total} bytes in ${run.length} frames` }, bytes(total)),
    h("span", { class: "c-preview", title: text.slice(0, 2000) }, label));
  }
  function toggleRun(firstId) {
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
  function renderRows() {
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
  function sortBy(key) {
    if (!state.sort || state.sort.key !== key) state.sort = { key, dir: 1 };
    else if (state.sort.dir > 0) state.sort = { key, dir: -1 };
    else state.sort = null; // third click: back to recording order
    renderSortHeads();
    renderRows();
    updateFoot();
  }

  function updateFoot() {
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

  async function reloadList(opts) {
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
      if (gen === list.gen) {
        list.loading = false;
        setStatus(e.message, true);
        $("frame-rows").replaceChildren(h("div", { class: "load-error", role: "alert" }, e.message));
        updateFoot();
      }
      return;
    }
    if (gen !== list.gen) return;
    setStatus("");
    list.loading = false;
    list.rows = page.frames;
    list.hasBefore = page.has_more_before;
    list.hasAfter = page.has_more_after;
    state.maxId = Math.max(state.maxId, page.max_id);
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

  // The text filter through the search index (words in messages, tool output, methods,
  // errors, as `acp-proxy search` finds them), instead of a byte search of the raw frames.
  async function searchList(gen) {
    const p = new URLSearchParams({ q: state.filter.q, limit: "500" });
    if (state.connection !== null) p.set("connection", String(state.connection));
    if (state.filter.session) p.set("session", state.filter.session);
    let data;
    try { data = await api("/api/search?" + p.toString()); }
    catch (e) {
      if (gen === list.gen) {
        list.loading = false;
        setStatus(e.message, true);
        $("frame-rows").replaceChildren(h("div", { class: "load-error", role: "alert" }, e.message));
        updateFoot();
      }
      return;
    }
    if (gen !== list.gen) return;
    setStatus(data.more ? `first ${data.limit} hits` : `${data.hits.length} hit(s) in the search index`);
    list.loading = false;
    list.hasBefore = false;
    list.hasAfter = false;
    const seen = new Set();
    list.rows = [];
    for (const hit of data.hits) {
      const fr = hit.summary;
      if (!fr || seen.has(fr.id)) continue;
      seen.add(fr.id);
      list.rows.push({ ...fr, label: `${hit.snippet}${hit.frames > 1 ? ` (${hit.frames} frames, #${hit.seq}–#${hit.last_seq})` : ""}` });
    }
    renderRows();
    $("frame-list").scrollTop = 0;
    updateFoot();
  }

  function searching() { return state.filter.words && !!state.filter.q; }

  async function loadAfter() {
    if (list.loading || !list.hasAfter || !list.rows.length) return;
    const gen = list.gen;
    list.loading = true;
    try {
      const page = await api("/api/frames?" + queryString({ after_id: list.rows[list.rows.length - 1].id, limit: PAGE }));
      if (gen !== list.gen) return;
      appendRows(page.frames);
      list.hasAfter = page.has_more_after;
      state.maxId = Math.max(state.maxId, page.max_id);
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
  function revealInRun(id) {
    const el = $(`fr-${id}`);
    if (!el || !el.hidden) return;
    let prev = el.previousElementSibling;
    while (prev && !prev.classList.contains("group")) prev = prev.previousElementSibling;
    if (prev) { expanded.add(Number(prev.dataset.group)); renderRows(); }
  }

  function maybeLoadMore() {
    const box = $("frame-list");
    if (box.scrollHeight - box.scrollTop - box.clientHeight < ROW_H * 20) loadAfter();
    else if (box.scrollTop < ROW_H * 20) loadBefore();
  }

  // The visible row showing frame ``id``: its own row, or its folded run's row.
  function visibleRow(id) {
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

  function selectFrame(id, opts) {
    state.frame = id;
    markPair();
    const el = visibleRow(id);
    if (el && (!opts || !opts.noScroll)) el.scrollIntoView({ block: "nearest" });
    writeHash(true);
    showDetail(id);
  }

  function moveSelection(delta) {
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

  function clearDetail() {
    detailGen++;
    currentDetail = null;
    $("detail-body").replaceChildren(h("div", { id: "detail-empty", class: "muted" }, "Select a frame (click, or j/k) to see its exact bytes."));
  }

  // ---- frame detail -----------------------------------------------------------------------
  let detailGen = 0;
  let currentDetail = null;
  async function showDetail(id) {
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

  async function copyText(text, what) {
    try { await navigator.clipboard.writeText(text); setStatus(`copied ${what}`); }
    catch (e) { setStatus(`could not copy: ${e.message}`, true); }
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
      const rawBtn = h("button", { type: "button", "aria-pressed": String(!state.showParsed), on: { click: () => { state.showParsed = false; renderDetail(); } } }, "raw text");
      const parsedBtn = h("button", { type: "button", "aria-pressed": String(state.showParsed), on: { click: () => { state.showParsed = true; renderDetail(); } } }, "parsed JSON");
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

  function jumpToFrame(id) {
    if ($(`fr-${id}`)) { revealInRun(id); selectFrame(id); return; }
    state.frame = id;
    reloadList({ around: id }).then(() => selectFrame(id));
  }

  // ---- session view -------------------------------------------------------------------------
  let sessionGen = 0;
  let sessionData = null;
  const SESSION_PAGE = 2000;
  let sessionLimit = SESSION_PAGE;
  let sessionKey = null;
  const openDetails = new Set();

  function seqLink(seq, data) {
    if (seq === null || seq === undefined) return null;
    const id = data.seqToId ? data.seqToId[String(seq)] : undefined;
    if (!id) return h("span", { class: "seqlink muted" }, `#${seq}`);
    return h("button", {
      type: "button", class: "link seqlink", title: "show this frame's raw bytes",
      on: { click: () => openFrameInList(id) },
    }, `frame #${seq}`);
  }
  function openFinding(cid, index) {
    state.view = "findings";
    state.connection = cid;
    state.finding = `${cid}-${index}`;
    writeHash();
    applyRoute();
  }
  function openFrameInList(id) {
    state.view = "frames";
    state.filter = { direction: "", method: "", update: "", session: "", q: "", words: false };
    state.frame = id;
    writeHash();
    applyRoute({ around: id });
  }

  function blockText(b) {
    if (b === null || b === undefined) return "";
    if (typeof b === "string") return b;
    if (b.type === "text") return b.text || "";
    if (b.type === "resource_link") return `[link ${b.uri || ""}]`;
    if (b.type === "resource") return `[resource ${(b.resource && b.resource.uri) || ""}]\n${(b.resource && b.resource.text) || ""}`;
    if (b.type === "image" || b.type === "audio") return `[${b.type} ${b.mimeType || ""}, ${(b.data || "").length} base64 chars]`;
    if (b.type === "content" && b.content) return blockText(b.content);
    if (b.type === "diff") return `[diff ${b.path || ""}]\n${b.newText || ""}`;
    if (b.type === "terminal") return `[terminal ${b.terminalId || ""}]`;
    return JSON.stringify(b);
  }
  function contentText(blocks) {
    if (!Array.isArray(blocks)) return "";
    return blocks.map(blockText).join("");
  }
  function jsonPre(v) { return h("pre", {}, JSON.stringify(v, null, 2)); }
  function folded(key, summary, ...content) {
    const d = h("details", { dataset: { key } }, h("summary", {}, summary), ...content);
    if (openDetails.has(key)) d.open = true;
    d.addEventListener("toggle", () => { if (d.open) openDetails.add(key); else openDetails.delete(key); });
    return d;
  }
  function marks(item) {
    return [item.replayed ? h("span", { class: "badge muted", title: "sent inside a load/resume replay window" }, "replayed") : null,
      item.continued ? h("span", { class: "badge muted" }, "continued") : null,
      item.removed ? h("span", { class: "badge muted" }, "removed") : null,
      item.problems ? h("span", { class: "badge warning", title: item.problems.join("; ") }, "problem") : null];
  }

  function renderEntity(it, data, idx) {
    const link = seqLink(it.firstSeq, data);
    const f = it.fields || {};
    const key = `${it.type}:${it.id}`;
    if (it.type === "user_message" || it.type === "agent_message") {
      const user = it.type === "user_message";
      return h("div", { class: `item ${user ? "user" : "agent"}` },
        h("div", { class: "who" }, user ? "User" : "Agent", it.syntheticId ? null : h("span", { class: "muted", title: "messageId" }, it.id), ...marks(it), link),
        h("div", { class: "text" }, it.content === null ? h("span", { class: "muted" }, "(no content)") : contentText(it.content)));
    }
    if (it.type === "agent_thought") {
      const text = contentText(it.content);
      return h("div", { class: "item thought" },
        folded(key, `Thought: ${text.slice(0, 140)}`, h("div", { class: "text" }, text)),
        h("div", { class: "who" }, ...marks(it), link));
    }
    if (it.type === "tool_call") {
      const status = f.status || "pending";
      return h("div", { class: "item tool" },
        h("div", { class: "who" }, "Tool call", f.kind ? h("span", {}, f.kind) : null,
          h("span", { class: `status-${status}` }, status), ...marks(it), link),
        h("div", { class: "text" }, f.title || it.id),
        it.content && it.content.length ? h("pre", {}, contentText(it.content)) : null,
        f.rawInput !== undefined ? folded(key + ":in", "input", jsonPre(f.rawInput)) : null,
        f.rawOutput !== undefined ? folded(key + ":out", "output", jsonPre(f.rawOutput)) : null,
        f.locations ? folded(key + ":loc", "locations", jsonPre(f.locations)) : null);
    }
    if (it.type === "terminal") {
      return h("div", { class: "item tool" },
        h("div", { class: "who" }, "Terminal", h("span", { class: "muted" }, it.id),
          f.exitStatus ? h("span", {}, `exit ${JSON.stringify(f.exitStatus)}`) : null, ...marks(it), link),
        f.command ? h("div", { class: "text" }, `$ ${f.command} ${(f.args || []).join(" ")}`) : null,
        it.outputText ? h("pre", {}, it.outputText) : null);
    }
    if (it.type === "plan") {
      const plan = f.plan || {};
      const entries = Array.isArray(plan.entries) ? plan.entries : null;
      return h("div", { class: "item plan", dataset: { turn: it.turn === null || it.turn === undefined ? "" : String(it.turn + 1) } },
        h("div", { class: "who" }, "Plan", it.id ? h("span", { class: "muted" }, it.id) : null,
          it.atTurnEnd && it.turn !== null && it.turn !== undefined ? h("span", { class: "badge muted", title: "the plan as it stood when this turn ended" }, `at the end of turn ${it.turn + 1}`) : null,
          ...marks(it), link),
        entries ? h("ol", { class: "plan-entries" }, entries.map((e) => h("li", {},
          h("span", { class: `status-${e.status}` }, `[${e.status || "?"}] `), e.content || JSON.stringify(e),
          e.priority ? h("span", { class: "muted" }, ` (${e.priority})`) : null)))
          : jsonPre(plan));
    }
    if (it.type === "compaction") {
      return h("div", { class: "item small" },
        h("div", { class: "who" }, "Compaction", h("span", { class: `status-${f.status}` }, f.status || ""), ...marks(it), link),
        it.summary && it.summary.length ? folded(key, "summary", h("div", { class: "text" }, contentText(it.summary))) : null);
    }
    return h("div", { class: "item" }, h("div", { class: "who" }, it.type, ...marks(it), link), jsonPre(it));
  }

  // A finding's frames as links, apart ("#3, #6"); three or more in a row as a range
  // ("#6–#15", both ends linked), as `acp-proxy check` prints them.
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

  // The prompt a client sent, as what the user said: the agent echoes it as a user message
  // in most sessions, but a v1 agent need not (then this card is the only place it shows).
  function renderPrompt(it, link, key) {
    const params = it.params || {};
    const result = it.result || {};
    const outcome = it.error !== undefined ? h("span", { class: "status-failed" }, `error ${JSON.stringify(it.error)}`)
      : it.answered ? h("span", { class: "status-completed" }, `${result.stopReason || "ok"} · ${ms(it.latencyMs)}`)
        : h("span", { class: "status-pending" }, "no response");
    return h("div", { class: "item user prompt" },
      h("div", { class: "who" }, "User", h("span", { class: "muted", title: "the session/prompt request" }, `session/prompt id ${it.id}`), outcome, ...marks(it), link),
      h("div", { class: "text" }, Array.isArray(params.prompt) ? contentText(params.prompt) : h("span", { class: "muted" }, "(no prompt)")),
      folded(key, "params / result", jsonPre({ params: it.params, result: it.result, error: it.error })));
  }

  // Prompts (their item index) the agent echoed as a user message before the next prompt.
  function echoedPrompts(items) {
    const out = new Set();
    let last = null;
    items.forEach((it, i) => {
      if (it.item === "rpc" && it.method === "session/prompt" && it.direction === "c2a") last = i;
      else if (it.item === "entity" && it.type === "user_message" && !it.replayed && last !== null) { out.add(last); last = null; }
    });
    return out;
  }

  function renderEvent(it, data, idx) {
    const link = seqLink(it.seq, data);
    const p = it.payload || {};
    const key = `ev:${it.seq}:${idx}`;
    switch (it.item === "rpc" ? "rpc" : it.kind) {
      case "state_update": {
        const label = p.state === "idle" ? `idle${p.stopReason ? ` · ${p.stopReason}` : ""}` : String(p.state);
        return h("div", { class: "divider" }, h("span", {}, label), p.error ? h("span", { class: "status-failed" }, JSON.stringify(p.error)) : null, link);
      }
      case "notice":
        return h("div", { class: "item notice" },
          h("div", { class: "who" }, "Notice", h("span", { class: "badge warning", title: "live-only: not history, not replayed" }, "live-only"),
            p.severity ? h("span", {}, p.severity) : null, ...marks(it), link),
          h("div", { class: "text" }, [p.title, p.message || p.description].filter(Boolean).join(" — ") || JSON.stringify(p)));
      case "unknown":
        return h("div", { class: "item unknown" },
          h("div", { class: "who" }, `Unknown update ${it.variant || ""}`, h("span", { class: "muted" }, "kept as raw JSON"), ...marks(it), link),
          jsonPre(p));
      case "rpc": {
        if (it.method === "session/request_permission") return renderPermission(it, link, key);
        if (it.method === "session/prompt" && it.direction === "c2a" && !(data.echoed && data.echoed.has(idx))) return renderPrompt(it, link, key);
        const outcome = it.error !== undefined ? h("span", { class: "status-failed" }, `error ${JSON.stringify(it.error)}`)
          : it.answered ? h("span", { class: "status-completed" }, `ok ${ms(it.latencyMs)}`) : h("span", { class: "status-pending" }, "no response");
        return h("div", { class: "item rpc" },
          h("div", { class: "who" }, h("span", { class: `dir-${it.direction}` }, arrow(it.direction)), it.method, h("span", { class: "muted" }, `id ${it.id}`), outcome, ...marks(it), link),
          folded(key, "params / result", jsonPre({ params: it.params, result: it.result, error: it.error })));
      }
      case "invalid":
        return h("div", { class: "item invalid" }, h("div", { class: "who" }, "Invalid frame", it.reason ? h("span", {}, it.reason) : null, link), h("pre", {}, String(p)));
      case "orphan_response": {
        const err = p && p.error;
        return h("div", { class: "item invalid orphan" },
          h("div", { class: "who" }, h("span", { class: `dir-${it.direction}` }, arrow(it.direction)), `Response id ${it.id} to no request`,
            err ? h("span", { class: "status-failed" }, `error ${err.code !== undefined ? err.code : ""} ${err.message || ""}`.trim()) : null, link),
          h("pre", {}, JSON.stringify(p)));
      }
      case "usage_update": {
        const cost = p.cost && typeof p.cost === "object" && p.cost.amount !== undefined ? `${p.cost.amount} ${p.cost.currency || ""}`.trim() : null;
        return h("div", { class: "item small usage" }, h("div", { class: "who" }, "Usage", link),
          h("span", { class: "usage-tokens" }, `${p.used !== undefined ? p.used : "?"}/${p.size !== undefined ? p.size : "?"} tokens`),
          cost ? h("span", { class: "usage-cost" }, ` · cost ${cost}`) : null);
      }
      default:
        return h("div", { class: "item small" },
          h("div", { class: "who" }, it.kind === "notification" ? `notification ${it.method || ""}` : String(it.kind || it.item).replace(/_/g, " "), ...marks(it), link),
          folded(key, "details", jsonPre(p)));
    }
  }

  // A permission prompt: what was asked, the options, the one chosen (or cancelled).
  function renderPermission(it, link, key) {
    const params = it.params || {};
    const call = params.toolCall || {};
    const options = Array.isArray(params.options) ? params.options : [];
    const out = it.result && it.result.outcome ? it.result.outcome : null;
    let chosen;
    if (it.error !== undefined) chosen = h("span", { class: "status-failed" }, `error ${JSON.stringify(it.error)}`);
    else if (!it.answered) chosen = h("span", { class: "status-pending" }, "not answered");
    else if (out && out.outcome === "cancelled") chosen = h("span", { class: "status-failed" }, "cancelled");
    else if (out && out.outcome === "selected") {
      const opt = options.find((o) => o.optionId === out.optionId);
      chosen = h("span", { class: "status-completed" }, `chose “${opt ? opt.name : out.optionId}”${opt && opt.kind ? ` (${opt.kind})` : ""}`);
    } else chosen = h("span", {}, JSON.stringify(it.result));
    return h("div", { class: "item permission" },
      h("div", { class: "who" }, "Permission request", h("span", { class: "muted" }, `id ${it.id}`), chosen,
        it.latencyMs !== undefined && it.latencyMs !== null ? h("span", { class: "muted" }, `after ${ms(it.latencyMs)}`) : null, ...marks(it), link),
      h("div", { class: "text" }, call.title || call.toolCallId || "(no tool call title)"),
      options.length ? h("div", { class: "muted" }, "options: " + options.map((o) => `${o.name || o.optionId}${o.kind ? ` [${o.kind}]` : ""}`).join(", ")) : null,
      folded(key, "params / result", jsonPre({ params: it.params, result: it.result, error: it.error })));
  }

  function renderSession() {
    const data = sessionData;
    const body = $("session-body");
    if (!data) return;
    const s = data.session || { items: [], facts: {} };
    const facts = s.facts || {};
    const box = body;
    const key = `${data.connectionId}/${s.sessionId}`;
    const same = box.dataset.rendered === key;
    const atBottom = same && box.scrollHeight - box.scrollTop - box.clientHeight < 40;
    const top = same ? box.scrollTop : 0;
    box.dataset.rendered = key;
    const head = h("div", { class: "s-head" },
      h("span", { class: "sid" }, `session ${s.sessionId}`),
      h("span", {}, `connection ${data.connectionId}`),
      data.protocolVersion ? h("span", {}, `protocol v${data.protocolVersion}`) : null,
      facts.title ? h("span", {}, `“${facts.title}”`) : null,
      facts.state ? h("span", {}, `state ${facts.state}${facts.stopReason ? ` (${facts.stopReason})` : ""}`) : null,
      facts.currentModeId ? h("span", {}, `mode ${facts.currentModeId}`) : null,
      h("span", { class: "muted" }, `${s.items.length} items`));
    const turns = (data.turns || []).slice(-8);
    const turnCount = data.turnCount || 0;
    const turnLine = turnCount ? h("div", { class: "turns muted" },
      `${turnCount} turn(s)${turnCount > turns.length ? `, last ${turns.length}` : ""}: ` + turns.map((t) => `${t.stopReason || (t.error && t.error.code !== undefined ? `error ${t.error.code}` : t.endSeq === null ? "open" : "ended")}${t.durationMs !== null ? " " + ms(t.durationMs) : ""}`).join(", ")) : null;
    data.echoed = echoedPrompts(s.items);
    const items = h("div", { class: "items" }, s.items.map((it, i) => it.item === "entity" ? renderEntity(it, data, i) : renderEvent(it, data, i)));
    const total = data.totalItems || s.items.length;
    const more = total > s.items.length ? h("p", {},
      h("span", { class: "muted" }, `showing ${s.items.length} of ${total} items · `),
      h("button", { type: "button", class: "link", on: { click: () => { sessionLimit += SESSION_PAGE; loadSession(); } } },
        `show ${Math.min(SESSION_PAGE, total - s.items.length)} more`)) : null;
    box.replaceChildren(...[sessionPicker(), head, turnLine, items, more].filter(Boolean));
    box.scrollTop = atBottom ? box.scrollHeight : top;
  }

  function firstSession() {
    const pool = state.connections.filter((c) => state.connection === null || c.id === state.connection);
    for (const c of pool.concat(state.connections)) if (c.sessions.length) return [c.id, c.sessions[0].session_id];
    return null;
  }
  function sessionPicker() {
    const sel = h("select", { id: "session-pick", "aria-label": "session" });
    for (const c of state.connections) {
      for (const s of c.sessions) {
        const opt = h("option", { value: `${c.id}\u0000${s.session_id}` }, `#${c.id} ${c.agent || ""} · ${s.session_id} (${s.frame_count} frames)`);
        if (c.id === state.connection && s.session_id === state.session) opt.selected = true;
        sel.append(opt);
      }
    }
    sel.addEventListener("change", () => { const [cid, sid] = sel.value.split("\u0000"); selectSession(Number(cid), sid); });
    return h("label", { class: "picker" }, "Session ", sel);
  }

  function showLoadError(box) {
    if (!state.loadError) return false;
    box.replaceChildren(h("p", { class: "warnline", role: "alert" }, state.loadError));
    return true;
  }

  async function loadSession() {
    if (showLoadError($("session-body"))) return;
    if (state.connection === null || !state.session || !state.connections.some((c) => c.id === state.connection && c.sessions.some((s) => s.session_id === state.session))) {
      const first = state.connections.length ? firstSession() : null;
      if (first && !(state.connection !== null && state.session)) {
        state.connection = first[0];
        state.session = first[1];
        writeHash(true);
        renderConnections();
        updateScope();
      } else if (!first) {
        $("session-body").replaceChildren(h("p", { class: "muted" }, state.connections.length ? "No session in this recording yet." : "No connections yet."));
        return;
      }
    }
    const gen = ++sessionGen;
    const key = `${state.connection}/${state.session}`;
    if (key !== sessionKey) { sessionKey = key; sessionLimit = SESSION_PAGE; }
    try {
      const data = await api(`/api/connections/${state.connection}/sessions/${encodeURIComponent(state.session)}?limit=${sessionLimit}`);
      if (gen !== sessionGen) return;
      sessionData = data;
      renderSession();
    } catch (e) {
      if (gen === sessionGen) $("session-body").replaceChildren(h("p", { class: "warnline", role: "alert" }, e.message));
    }
  }

  // ---- findings view --------------------------------------------------------------------------
  async function loadFindings() {
    const body = $("findings-body");
    const ids = state.connection !== null ? [state.connection] : state.connections.map((c) => c.id);
    if (!ids.length) { body.replaceChildren(h("p", { class: "muted" }, "No connections yet.")); return; }
    const parts = [];
    for (const cid of ids) {
      let data;
      try { data = await api(`/api/connections/${cid}/findings`); }
      catch (e) { parts.push(h("p", { class: "warnline" }, `connection ${cid}: ${e.message}`)); continue; }
      const conn = state.connections.find((c) => c.id === cid);
      if (conn) conn.findings = data.summary;
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

  // ---- timeline: waterfall, turns, performance -------------------------------------------------
  let timelineGen = 0;
  async function loadTimeline() {
    const body = $("timeline-body");
    if (showLoadError(body)) return;
    const cid = state.connection !== null ? state.connection : (state.connections[0] && state.connections[0].id);
    if (cid === undefined || cid === null) { body.replaceChildren(h("p", { class: "muted" }, "No connections yet.")); return; }
    const gen = ++timelineGen;
    let data;
    let events = null;
    try {
      [data, events] = await Promise.all([
        api(`/api/connections/${cid}/timeline`),
        api(`/api/connections/${cid}/events`).catch(() => null),
      ]);
    }
    catch (e) { if (gen === timelineGen) body.replaceChildren(h("p", { class: "warnline", role: "alert" }, e.message)); return; }
    if (gen !== timelineGen) return;
    timelineShown = { data, events };
    drawTimeline();
  }

  // How the waterfall is drawn: zoom (the track's width, scrolled sideways), start-up folded
  // (the axis starts at the first turn; null: folded when start-up takes longer than the rest)
  // and per-turn scale (each turn's rows on the turn's own span).
  const wfView = { zoom: 1, fold: null, perTurn: false };
  let timelineShown = null;
  function drawTimeline() {
    if (!timelineShown) return;
    const { data, events } = timelineShown;
    renderTimeline(data);
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

  function frameLink(seq, data, text) {
    const id = seq === null || seq === undefined ? undefined : data.seqToId[String(seq)];
    if (!id) return h("span", { class: "muted" }, text || (seq === null || seq === undefined ? "" : `#${seq}`));
    return h("button", { type: "button", class: "link", on: { click: () => openFrameInList(id) } }, text || `#${seq}`);
  }

  function renderTimeline(data) {
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
    const barRow = (b, nested, pct) => h("div", { class: "wf-row" + (nested ? " nested" : ""), dataset: { bar: String(b.index) } },
      h("span", { class: "wf-name", title: `${dirTitle(b.direction)} ${b.method} id ${b.id}` }, `${arrow(b.direction)} ${b.method}`),
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
      const said = t.promptText ? h("span", { class: "wf-prompt", title: t.promptText, dataset: { left: pct(t.startMs), width: "" } }, `“${t.promptText}”`) : null;
      const group = [h("div", { class: "wf-row turn", dataset: { turn: String(t.index) } },
        h("span", { class: "wf-name", title: `turn in session ${t.sessionId}${t.promptText ? `: ${t.promptText}` : ""}` }, `turn ${t.index + 1} · ${outcome}${t.firstChunkMs !== null ? ` · 1st chunk ${ms(t.firstChunkMs)}` : ""}`),
        h("span", { class: "wf-track turn" }, said, h("span", { class: "wf-bar turn", title: `${t.origin} turn: ${t.durationMs === null ? "not ended" : ms(t.durationMs)}`, dataset: { left: pct(t.startMs), width: `calc(${pct(end)} - ${pct(t.startMs)})` } }), tick, cancel),
        h("span", { class: "wf-ms" }, t.durationMs === null ? "open" : ms(t.durationMs)))];
      for (const i of t.bars) { inTurn.add(i); group.push(barRow(data.bars[i], data.bars[i].method !== "session/prompt", pct)); }
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
        h("button", { type: "button", class: "link wf-name", title: "show start-up on the time axis", on: { click: () => { wfView.fold = false; drawTimeline(); } } },
          `start-up folded · ${folded.length} exchange(s) · ${folded.map((b) => b.method).slice(0, 3).join(", ")}${folded.length > 3 ? "…" : ""}`),
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
    const note = data.barsTotal > data.bars.length ? h("p", { class: "muted" }, `drawing the first ${data.bars.length} of ${data.barsTotal} exchanges; the figures cover all`) : null;
    $("timeline-body").replaceChildren(
      h("h3", {}, `Connection ${data.connectionId} · ${ms(data.spanMs)} from first to last frame`),
      h("p", { class: "muted" }, "Bars run from a request to its response (blue: client → agent, purple: agent → client, red: error); turns span prompt to end (v1: the prompt's response, v2: idle); the green tick is the first chunk, the red one a session/cancel. Click a bar for its frames."),
      controls, ...[wfBox, note].filter(Boolean), h("h3", {}, "Performance"), methods, h("h3", {}, "Turns"), turns, h("h3", {}, "Slowest exchanges"), slow);
  }

  // ---- diff: two connections side by side (the alignment `acp-proxy diff` makes) -------------
  let diffGen = 0;
  async function loadDiff() {
    const body = $("diff-body");
    if (showLoadError(body)) return;
    const ids = state.connections.map((c) => c.id);
    if (ids.length < 2) { body.replaceChildren(h("p", { class: "muted" }, "A diff needs two connections; this recording has " + ids.length + ".")); return; }
    if (!ids.includes(state.diffA)) state.diffA = state.connection !== null && ids.includes(state.connection) ? state.connection : ids[0];
    if (!ids.includes(state.diffB) || state.diffB === state.diffA) state.diffB = ids.find((x) => x !== state.diffA);
    const gen = ++diffGen;
    const pick = (which) => {
      const sel = h("select", { id: `diff-${which}`, "aria-label": `connection ${which.toUpperCase()}` },
        state.connections.map((c) => h("option", { value: String(c.id) }, `#${c.id} ${c.agent || ""} (${c.frame_count} frames)`)));
      sel.value = String(which === "a" ? state.diffA : state.diffB);
      sel.addEventListener("change", () => { if (which === "a") state.diffA = Number(sel.value); else state.diffB = Number(sel.value); loadDiff(); });
      return sel;
    };
    const head = h("div", { class: "diff-pick" }, h("label", {}, "A ", pick("a")), h("label", {}, "B ", pick("b")));
    body.replaceChildren(head, h("p", { class: "muted" }, "aligning…"));
    let data;
    try { data = await api(`/api/diff?a=${state.diffA}&b=${state.diffB}`); }
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

  // ---- live push -------------------------------------------------------------------------------
  let ws = null;
  let wsRetry = 500;
  function connectLive() {
    const proto = location.protocol === "https:" ? "wss:" : "ws:";
    ws = new WebSocket(`${proto}//${location.host}/api/live`);
    ws.addEventListener("open", () => {
      wsRetry = 500;
      $("live").className = "livestate on";
      $("live-text").textContent = "watching";
      subscribe();
    });
    ws.addEventListener("close", () => {
      $("live").className = "livestate off";
      $("live-text").textContent = "reconnecting";
      setTimeout(connectLive, wsRetry);
      wsRetry = Math.min(wsRetry * 2, 10000);
    });
    ws.addEventListener("message", (ev) => {
      let msg;
      try { msg = JSON.parse(ev.data); } catch (e) { return; }
      onLive(msg);
    });
  }
  function subscribe() {
    if (!ws || ws.readyState !== WebSocket.OPEN) return;
    const tail = state.view === "frames" && !list.hasAfter && !list.loading && !searching();
    const after = list.rows.length ? list.rows[list.rows.length - 1].id : state.maxId;
    ws.send(JSON.stringify({ follow: tail, after_id: tail ? after : null, filter: filterForLive() }));
  }
  let refreshTimer = null;
  function scheduleRefresh() {
    if (refreshTimer) return;
    refreshTimer = setTimeout(() => {
      refreshTimer = null;
      loadConnections();
      if (state.view === "session") loadSession();
      if (state.view === "timeline") loadTimeline();
    }, 300);
  }
  function onLive(msg) {
    if (msg.type === "frames") {
      if (state.view === "frames" && !list.hasAfter && !searching()) addLive(msg.frames);
      state.maxId = Math.max(state.maxId, msg.max_id);
      updateFoot();
    } else if (msg.type === "state") {
      if (!state.info) api("/api/info").then((info) => { state.info = info; $("db-name").textContent = info.name; }).catch(() => {});
      const grew = msg.max_id > state.maxId;
      if (grew && list.hasAfter) list.newCount += msg.max_id - state.maxId;
      state.maxId = Math.max(state.maxId, msg.max_id);
      if (grew || msg.changed || state.unreadable) scheduleRefresh();
      state.unreadable = false;
      if (grew && valuesStale()) loadValues();
      updateFoot();
      setStatus("");
    } else if (msg.type === "error") {
      // The recording became unreadable while served: show it in the lists too.
      setStatus(msg.message, true);
      state.unreadable = true;
      loadConnections();
    }
  }
  let valuesAt = 0;
  function valuesStale() {
    const now = Date.now();
    if (now - valuesAt < 3000) return false;
    valuesAt = now;
    return true;
  }

  // ---- view switching ----------------------------------------------------------------------------
  function updateScope() {
    const parts = [];
    if (state.connection !== null) {
      const c = state.connections.find((x) => x.id === state.connection);
      parts.push(`connection ${state.connection}${c && c.agent ? ` (${c.agent})` : ""}`);
    } else parts.push("all connections");
    if (state.view === "session" && state.session) parts.push(`session ${state.session}`);
    $("scope").textContent = parts.join(" · ");
  }

  function applyRoute(listOpts) {
    for (const v of VIEWS) {
      $(`view-${v}`).hidden = state.view !== v;
      $(`tab-${v}`).setAttribute("aria-selected", String(state.view === v));
    }
    $("tab-timeline").disabled = state.connection === null && !state.connections.length;
    $("f-direction").value = state.filter.direction;
    $("f-method").value = state.filter.method;
    $("f-update").value = state.filter.update;
    $("f-text").value = state.filter.q;
    $("f-words").checked = state.filter.words;
    fillSessionSelect();
    $("view-frames").classList.toggle("one-conn", state.connection !== null);
    $("f-follow").checked = state.follow;
    renderConnections();
    updateScope();
    if (state.view === "frames") {
      const opts = listOpts || (state.frame ? { around: state.frame } : (state.follow ? { end: true } : {}));
      reloadList(opts).then(() => { if (state.frame && $(`fr-${state.frame}`)) selectFrame(state.frame, { noScroll: !!opts.end }); });
    } else {
      list.gen++;
      subscribe();
      if (state.view === "session") loadSession();
      if (state.view === "findings") loadFindings();
      if (state.view === "timeline") loadTimeline();
      if (state.view === "diff") loadDiff();
    }
  }

  function switchView(v) {
    state.view = v;
    writeHash();
    applyRoute();
  }

  // ---- input wiring --------------------------------------------------------------------------------
  let textTimer = null;
  function wire() {
    for (const b of document.querySelectorAll(".tabs [role=tab]")) b.addEventListener("click", () => switchView(b.dataset.view));
    const onFilter = () => {
      state.filter.direction = $("f-direction").value;
      state.filter.method = $("f-method").value;
      state.filter.update = $("f-update").value;
      state.filter.session = $("f-session").value;
      state.filter.q = $("f-text").value;
      state.filter.words = $("f-words").checked;
      state.frame = null;
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

  function setFollow(on) {
    state.follow = on;
    $("f-follow").checked = on;
    if (on) { list.newCount = 0; reloadList({ end: true }); }
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
      case "g": if (frames) { state.frame = null; reloadList({}).then(() => moveSelection(1)); } break;
      case "G": if (frames) { state.frame = null; reloadList({ end: true }).then(() => moveSelection(list.rows.length)); } break;
      case "f": if (frames) setFollow(!state.follow); break;
      case "r": if (currentDetail) { state.showParsed = !state.showParsed; renderDetail(); } break;
      case "p": if (currentDetail && currentDetail.pair && currentDetail.pair.id) jumpToFrame(currentDetail.pair.id); break;
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
    wire();
    try {
      state.info = await api("/api/info");
      $("db-name").textContent = state.info.name;
      document.title = `${state.info.name} · acp-proxy inspector`;
      state.maxId = state.info.max_id;
    } catch (e) {
      setStatus(e.message, true);
    }
    await loadConnections();
    await loadValues();
    if (!location.hash && state.connections.some((c) => c.live === true)) state.follow = true;
    applyRoute();
    connectLive();
  }
  start();
})();
