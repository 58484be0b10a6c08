// acp-proxy inspector. Vanilla JS, no build step, no third-party code.
// Safety rule: recorded data is only ever put into the page with textContent / text nodes
// (see h() below). Nothing here assigns innerHTML.
"use strict";

(function () {
  const ROW_H = 24;
  const PAGE = 200;
  const CAP = 3000; // rows kept in the DOM; the far end is dropped as you scroll
  const $ = (id) => document.getElementById(id);

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
    filter: { direction: "", method: "", update: "", session: "", q: "" },
    follow: false,
    frame: null, // selected frame id
    connections: [],
    info: null,
    maxId: 0,
    showParsed: false,
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
    state.view = ["frames", "session", "findings"].includes(p.get("view")) ? p.get("view") : "frames";
    state.connection = p.get("c") ? Number(p.get("c")) : null;
    state.session = p.get("s") || null;
    state.filter = {
      direction: p.get("dir") || "", method: p.get("m") || "", update: p.get("u") || "",
      session: p.get("fs") || "", q: p.get("q") || "",
    };
    state.frame = p.get("f") ? Number(p.get("f")) : null;
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
    if (state.frame) p.set("f", String(state.frame));
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
      renderConnections();
      fillSessionSelect();
      fetchMissingFindings();
      if (state.view === "session") updateScope();
    } catch (e) {
      setStatus(e.message, true);
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
    state.view = "frames";
    writeHash();
    applyRoute();
  }
  function selectSession(cid, sid) {
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

  function rowFor(fr) {
    const isErr = fr.kind === "response" && fr.preview.includes('"error":') && !fr.preview.includes('"result":');
    const what = fr.update_kind ? (fr.method === "session/update" ? `update · ${fr.update_kind}` : `${fr.method || ""} · ${fr.update_kind}`) : (fr.method || "");
    let pair = "";
    let pairMissing = false;
    if (fr.pair) {
      if (fr.pair.seq === null) { pair = fr.pair.role === "request" ? "no response" : "no request"; pairMissing = true; }
      else pair = `${fr.pair.role === "request" ? "→" : "←"} #${fr.pair.seq} ${ms(fr.pair.latency_ms)}`;
    }
    const row = h("div", {
      class: "frow" + (fr.id === state.frame ? " selected" : ""),
      role: "option", id: `fr-${fr.id}`, "aria-selected": fr.id === state.frame ? "true" : "false",
      dataset: { id: String(fr.id) },
    },
    h("span", { class: "c-id", title: `frame id ${fr.id}, sequence ${fr.seq} on connection ${fr.connection_id}` }, `#${fr.seq}`),
    h("span", { class: "c-time", title: dateTime(fr.ts) }, clock(fr.ts)),
    h("span", { class: "c-conn" }, String(fr.connection_id)),
    h("span", { class: `c-dir dir-${fr.direction}`, title: dirTitle(fr.direction) }, arrow(fr.direction)),
    h("span", { class: `c-kind k-${fr.kind || "none"}${isErr ? " err" : ""}` }, fr.kind || "?"),
    h("span", { class: "c-method", title: what }, what),
    h("span", { class: "c-rpc", title: fr.rpc_id || "" }, fr.rpc_id === null ? "" : fr.rpc_id),
    h("span", { class: "c-pair" }, pairMissing ? h("span", { class: "missing" }, pair) : pair),
    h("span", { class: "c-size" }, bytes(fr.size)),
    h("span", { class: "c-preview" }, fr.preview.slice(0, 300)));
    return row;
  }

  function updateFoot() {
    const rows = list.rows;
    const parts = [];
    if (rows.length) parts.push(`showing ids ${rows[0].id}–${rows[rows.length - 1].id} (${rows.length} loaded)`);
    else parts.push(list.loading ? "loading…" : "no frames match");
    if (list.hasBefore) parts.push("more above");
    if (list.hasAfter) parts.push("more below");
    if (list.newCount) parts.push(`${list.newCount} new frame(s) — press G or enable Follow`);
    parts.push(`db max id ${state.maxId}`);
    $("list-foot").textContent = parts.join(" · ");
  }

  async function reloadList(opts) {
    const gen = ++list.gen;
    list.loading = true;
    list.rows = [];
    list.newCount = 0;
    $("frame-rows").replaceChildren();
    updateFoot();
    let page;
    try {
      if (opts && opts.around) {
        const before = await api("/api/frames?" + queryString({ before_id: opts.around + 1, limit: PAGE / 2 }));
        const after = await api("/api/frames?" + queryString({ after_id: opts.around, limit: PAGE / 2 }));
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
    $("frame-rows").replaceChildren(...page.frames.map(rowFor));
    const box = $("frame-list");
    if (opts && opts.around) {
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
      const frag = document.createDocumentFragment();
      for (const fr of page.frames) frag.append(rowFor(fr));
      $("frame-rows").prepend(frag);
      list.rows = page.frames.concat(list.rows);
      box.scrollTop += page.frames.length * ROW_H; // keep what the user sees in place
      list.hasBefore = page.has_more_before;
      const over = list.rows.length - CAP;
      if (over > 0) {
        const rowsEl = $("frame-rows");
        for (let i = 0; i < over; i++) rowsEl.lastChild.remove();
        list.rows.splice(list.rows.length - over, over);
        list.hasAfter = true;
        subscribe();
      }
    } catch (e) { setStatus(e.message, true); }
    finally { if (gen === list.gen) list.loading = false; updateFoot(); }
  }

  function appendRows(frames) {
    if (!frames.length) return;
    const box = $("frame-list");
    const atBottom = box.scrollHeight - box.scrollTop - box.clientHeight < ROW_H * 2;
    const frag = document.createDocumentFragment();
    for (const fr of frames) frag.append(rowFor(fr));
    $("frame-rows").append(frag);
    list.rows = list.rows.concat(frames);
    const over = list.rows.length - CAP;
    if (over > 0) {
      const rowsEl = $("frame-rows");
      for (let i = 0; i < over; i++) rowsEl.firstChild.remove();
      list.rows.splice(0, over);
      box.scrollTop -= over * ROW_H;
      list.hasBefore = true;
    }
    if (state.follow && atBottom) box.scrollTop = box.scrollHeight;
  }

  function maybeLoadMore() {
    const box = $("frame-list");
    if (box.scrollHeight - box.scrollTop - box.clientHeight < ROW_H * 20) loadAfter();
    else if (box.scrollTop < ROW_H * 20) loadBefore();
  }

  function selectFrame(id, opts) {
    const prev = state.frame;
    state.frame = id;
    if (prev !== null) {
      const old = $(`fr-${prev}`);
      if (old) { old.classList.remove("selected"); old.setAttribute("aria-selected", "false"); }
    }
    for (const el of document.querySelectorAll(".frow.pair-of-selected")) el.classList.remove("pair-of-selected");
    const el = $(`fr-${id}`);
    if (el) {
      el.classList.add("selected");
      el.setAttribute("aria-selected", "true");
      if (!opts || !opts.noScroll) el.scrollIntoView({ block: "nearest" });
      const fr = list.rows.find((r) => r.id === id);
      if (fr && fr.pair && fr.pair.id) {
        const other = $(`fr-${fr.pair.id}`);
        if (other) other.classList.add("pair-of-selected");
      }
    }
    writeHash(true);
    showDetail(id);
  }

  function moveSelection(delta) {
    if (!list.rows.length) return;
    let idx = list.rows.findIndex((r) => r.id === state.frame);
    if (idx < 0) idx = delta > 0 ? -1 : list.rows.length;
    const next = Math.max(0, Math.min(list.rows.length - 1, idx + delta));
    selectFrame(list.rows[next].id);
    if (next >= list.rows.length - 5) loadAfter();
    if (next <= 5) loadBefore();
  }

  // ---- frame detail -----------------------------------------------------------------------
  let detailGen = 0;
  let currentDetail = null;
  async function showDetail(id) {
    const gen = ++detailGen;
    let d;
    try { d = await api(`/api/frames/${id}`); }
    catch (e) {
      if (gen === detailGen) $("detail").replaceChildren(h("div", { class: "warnline" }, e.message));
      return;
    }
    if (gen !== detailGen) return;
    currentDetail = d;
    renderDetail();
  }

  function terminatorNote(text) {
    if (text.endsWith("\r\n")) return "ends with CR LF (\\r\\n)";
    if (text.endsWith("\n")) return "ends with LF (\\n)";
    return "no line terminator";
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
    const tools = h("div", { class: "detail-tools" });
    const body = [];
    if (d.utf8) {
      const rawBtn = h("button", { type: "button", "aria-pressed": String(!state.showParsed), on: { click: () => { state.showParsed = false; renderDetail(); } } }, "raw text");
      const parsedBtn = h("button", { type: "button", "aria-pressed": String(state.showParsed), on: { click: () => { state.showParsed = true; renderDetail(); } } }, "parsed JSON");
      tools.append(rawBtn, parsedBtn, h("span", { class: "muted" }, "r toggles · raw is exactly what crossed the wire"));
      let shown = d.text;
      let note = null;
      if (state.showParsed) {
        try { shown = JSON.stringify(JSON.parse(d.text), null, 2); note = "parsed and re-indented for reading; numbers beyond 2^53 may differ — the raw text is the truth"; }
        catch (e) { note = `not JSON (${e.message}); showing raw text`; }
      }
      body.push(h("pre", { class: "raw", id: "raw-text" }, shown));
      body.push(h("div", { class: "term-note" }, (note ? note + " · " : "") + terminatorNote(d.text)));
    } else {
      tools.append(h("span", { class: "badge warning" }, "not valid UTF-8"), h("span", { class: "muted" }, "shown as hex and base64"));
      body.push(h("div", { class: "muted" }, "hex"));
      body.push(h("pre", { class: "raw", id: "raw-hex" }, d.hex));
      body.push(h("div", { class: "muted" }, "base64"));
      body.push(h("pre", { class: "raw", id: "raw-base64" }, d.base64));
    }
    if (d.truncated) body.unshift(h("div", { class: "warnline" }, `showing the first ${d.shown_bytes} of ${d.size} bytes; download for all of them`));
    $("detail").replaceChildren(head, tools, ...body);
  }

  function jumpToFrame(id) {
    if ($(`fr-${id}`)) { selectFrame(id); return; }
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
  function openFrameInList(id) {
    state.view = "frames";
    state.filter = { direction: "", method: "", update: "", session: "", q: "" };
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
      return h("div", { class: "item" },
        h("div", { class: "who" }, "Plan", it.id ? h("span", { class: "muted" }, it.id) : null, ...marks(it), link),
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
        const outcome = it.error !== undefined ? h("span", { class: "status-failed" }, `error ${JSON.stringify(it.error)}`)
          : it.answered ? h("span", { class: "status-completed" }, `ok ${ms(it.latencyMs)}`) : h("span", { class: "status-pending" }, "no response");
        return h("div", { class: "item rpc" },
          h("div", { class: "who" }, h("span", { class: `dir-${it.direction}` }, arrow(it.direction)), it.method, h("span", { class: "muted" }, `id ${it.id}`), outcome, ...marks(it), link),
          folded(key, "params / result", jsonPre({ params: it.params, result: it.result, error: it.error })));
      }
      case "invalid":
        return h("div", { class: "item invalid" }, h("div", { class: "who" }, "Invalid frame", it.reason ? h("span", {}, it.reason) : null, link), h("pre", {}, String(p)));
      case "usage_update":
        return h("div", { class: "item small" }, h("div", { class: "who" }, "usage", link), JSON.stringify(p));
      default:
        return h("div", { class: "item small" },
          h("div", { class: "who" }, it.kind === "notification" ? `notification ${it.method || ""}` : String(it.kind || it.item).replace(/_/g, " "), ...marks(it), link),
          folded(key, "details", jsonPre(p)));
    }
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
      `${turnCount} turn(s)${turnCount > turns.length ? `, last ${turns.length}` : ""}: ` + turns.map((t) => `${t.stopReason || (t.endSeq === null ? "open" : "ended")}${t.durationMs !== null ? " " + ms(t.durationMs) : ""}`).join(", ")) : null;
    const items = h("div", { class: "items" }, s.items.map((it, i) => it.item === "entity" ? renderEntity(it, data, i) : renderEvent(it, data, i)));
    const total = data.totalItems || s.items.length;
    const more = total > s.items.length ? h("p", {},
      h("span", { class: "muted" }, `showing ${s.items.length} of ${total} items · `),
      h("button", { type: "button", class: "link", on: { click: () => { sessionLimit += SESSION_PAGE; loadSession(); } } },
        `show ${Math.min(SESSION_PAGE, total - s.items.length)} more`)) : null;
    box.replaceChildren(...[head, turnLine, items, more].filter(Boolean));
    box.scrollTop = atBottom ? box.scrollHeight : top;
  }

  async function loadSession() {
    if (state.connection === null || !state.session) {
      $("session-body").replaceChildren(h("p", { class: "muted" }, "Pick a session in the sidebar to read its conversation."));
      return;
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
      if (gen === sessionGen) $("session-body").replaceChildren(h("p", { class: "warnline" }, e.message));
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
      const rows = data.findings.map((f) => h("tr", {},
        h("td", {}, h("span", { class: `badge ${f.tier}` }, f.tier)),
        h("td", { class: "rule" }, f.rule || f.rule_id || f.id || ""),
        h("td", {}, f.reason || f.message || "", f.rule_text || f.quote ? h("div", { class: "muted" }, f.rule_text || f.quote) : null),
        h("td", {}, (f.seqs || []).map((seq, i) => f.frame_ids[i]
          ? h("button", { type: "button", class: "link", on: { click: () => openFrameInList(f.frame_ids[i]) } }, `#${seq} `)
          : h("span", {}, `#${seq} `)))));
      parts.push(h("table", { class: "findings" },
        h("thead", {}, h("tr", {}, h("th", {}, "tier"), h("th", {}, "rule"), h("th", {}, "reason"), h("th", {}, "frames"))),
        h("tbody", {}, rows)));
    }
    body.replaceChildren(...parts);
    renderConnections();
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
    const tail = state.view === "frames" && !list.hasAfter && !list.loading;
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
    }, 300);
  }
  function onLive(msg) {
    if (msg.type === "frames") {
      if (state.view === "frames" && !list.hasAfter) {
        const last = list.rows.length ? list.rows[list.rows.length - 1].id : 0;
        appendRows(msg.frames.filter((f) => f.id > last));
      }
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
    for (const v of ["frames", "session", "findings"]) {
      $(`view-${v}`).hidden = state.view !== v;
      $(`tab-${v}`).setAttribute("aria-selected", String(state.view === v));
    }
    $("tab-session").disabled = !state.session;
    $("f-direction").value = state.filter.direction;
    $("f-method").value = state.filter.method;
    $("f-update").value = state.filter.update;
    $("f-text").value = state.filter.q;
    fillSessionSelect();
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
    }
  }

  function switchView(v) {
    if (v === "session" && !state.session) return;
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
      state.frame = null;
      writeHash(true);
      reloadList(state.follow ? { end: true } : {});
    };
    for (const id of ["f-direction", "f-method", "f-update", "f-session"]) $(id).addEventListener("change", onFilter);
    $("f-text").addEventListener("input", () => { clearTimeout(textTimer); textTimer = setTimeout(onFilter, 250); });
    $("filters").addEventListener("submit", (e) => { e.preventDefault(); clearTimeout(textTimer); onFilter(); });
    $("f-follow").addEventListener("change", () => setFollow($("f-follow").checked));
    $("frame-list").addEventListener("scroll", () => maybeLoadMore(), { passive: true });
    $("frame-rows").addEventListener("click", (e) => {
      const row = e.target.closest(".frow");
      if (row) { selectFrame(Number(row.dataset.id), { noScroll: true }); $("frame-list").focus({ preventScroll: true }); }
    });
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
