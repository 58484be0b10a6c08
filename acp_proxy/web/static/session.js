// The session view: one session rebuilt from its frames as a conversation (messages,
// thoughts, tool calls, terminals, plans, permission prompts, RPCs, usage), each item linked to
// the frame it came from; replayed history in one band per replay, findings as badges on the
// items whose frames broke a rule.

import { renderConnections, selectSession, showLoadError, updateScope } from "./connections.js";
import { $, api, h } from "./dom.js";
import { arrow, ms } from "./format.js";
import { findingBadge } from "./findings.js";
import { openFrameInList } from "./frames.js";
import { setConnection, setSession, state, writeHash } from "./state.js";

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
  return [item.replayed ? h("span", { class: "badge muted replayed", title: "sent inside a load/resume replay window" }, "replayed") : null,
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

// Prompts (their item index) the agent echoed as a user message: echoes answer prompts in
// the order they were sent, so pipelined prompts (sent before the first echo) pair in turn.
function echoedPrompts(items) {
  const out = new Set();
  const waiting = [];
  items.forEach((it, i) => {
    if (it.item === "rpc" && it.method === "session/prompt" && it.direction === "c2a") waiting.push(i);
    else if (it.item === "entity" && it.type === "user_message" && !it.replayed && waiting.length) out.add(waiting.shift());
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
    case "session_info_update":
    case "available_commands_update":
    case "current_mode_update":
    case "config_option_update":
      return factLine(it, p, link);
    default:
      return h("div", { class: "item small" },
        h("div", { class: "who" }, it.kind === "notification" ? `notification ${it.method || ""}` : String(it.kind || it.item).replace(/_/g, " "), ...marks(it), link),
        folded(key, "details", jsonPre(p)));
  }
}

// A session fact that changed (title, commands, mode, config): one line, "title: …".
function factLine(it, p, link) {
  let said;
  if (it.kind === "available_commands_update") {
    const cmds = Array.isArray(p.availableCommands) ? p.availableCommands : [];
    said = `commands: ${cmds.length} (${cmds.map((c) => `/${c.name}`).join(", ")})`;
  } else if (it.kind === "current_mode_update") said = `mode: ${p.currentModeId}`;
  else if (it.kind === "config_option_update") said = `config options: ${Array.isArray(p.configOptions) ? p.configOptions.length : "?"}`;
  else {
    said = Object.entries(p).filter(([k]) => k !== "sessionUpdate" && k !== "_meta")
      .map(([k, v]) => `${k}: ${typeof v === "string" ? `“${v}”` : JSON.stringify(v)}`).join(" · ") || "(no fields)";
  }
  return h("div", { class: "item fact", dataset: { kind: it.kind } },
    h("span", { class: "fact-text", title: JSON.stringify(p) }, said), ...marks(it), link);
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
  const owners = findingOwners(s.items, sessionFindings);
  const rendered = s.items.map((it, i) => {
    const el = it.item === "entity" ? renderEntity(it, data, i) : renderEvent(it, data, i);
    if (owners.has(i)) badgeFindings(el, owners.get(i), data.connectionId);
    return el;
  });
  const items = h("div", { class: "items" }, replayBands(s.items, rendered));
  const total = data.totalItems || s.items.length;
  const more = total > s.items.length ? h("p", {},
    h("span", { class: "muted" }, `showing ${s.items.length} of ${total} items · `),
    h("button", { type: "button", class: "link", on: { click: () => { sessionLimit += SESSION_PAGE; loadSession(); } } },
      `show ${Math.min(SESSION_PAGE, total - s.items.length)} more`)) : null;
  box.replaceChildren(...[sessionPicker(), head, turnLine, items, more].filter(Boolean));
  box.scrollTop = atBottom ? box.scrollHeight : top;
}

// History the agent replayed (items inside a session/load or session/resume-with-replayFrom
// window, as acp/model.py marks them: the frames `check` reads as replay): one band per run.
function replayBands(items, rendered) {
  const out = [];
  let band = null;
  items.forEach((it, i) => {
    if (!it.replayed) { band = null; out.push(rendered[i]); return; }
    if (!band) {
      const opener = [...items.slice(0, i)].reverse().find((x) => x.item === "rpc" && (x.method === "session/load" || x.method === "session/resume"));
      band = { count: 0, head: h("div", { class: "replay-head" }, "Replayed history"), box: h("div", { class: "replay-band", role: "group", "aria-label": "replayed history" }) };
      band.opener = opener ? `${opener.method} id ${opener.id}` : "a load";
      band.box.append(band.head);
      out.push(band.box);
    }
    band.count++;
    band.head.textContent = `Replayed history · ${band.count} item${band.count > 1 ? "s" : ""} sent again by the agent for ${band.opener} (not new work)`;
    band.box.append(rendered[i]);
  });
  return out;
}

// Findings in place: each finding's frames (seqs) go to the item that holds that frame, an
// event or request by its own frames, else the entity whose span covers it (the narrowest).
let sessionFindings = null; // { connection, findings } of the session shown
function findingOwners(items, found) {
  const owners = new Map();
  if (!found || !found.findings.length) return owners;
  const exact = new Map();
  const spans = [];
  items.forEach((it, i) => {
    for (const q of [it.seq, it.responseSeq, it.firstSeq, it.lastSeq]) if (typeof q === "number" && !exact.has(q)) exact.set(q, i);
    if (typeof it.firstSeq === "number") spans.push([it.firstSeq, typeof it.lastSeq === "number" ? it.lastSeq : it.firstSeq, i]);
  });
  found.findings.forEach((f, index) => {
    const placed = new Set();
    for (const q of f.seqs || []) {
      let i = exact.get(q);
      if (i === undefined) {
        const covering = spans.filter(([a, b]) => a <= q && q <= b).sort((x, y) => (x[1] - x[0]) - (y[1] - y[0]));
        if (covering.length) i = covering[0][2];
      }
      if (i === undefined || placed.has(i)) continue;
      placed.add(i);
      if (!owners.has(i)) owners.set(i, []);
      owners.get(i).push([index, f]);
    }
  });
  return owners;
}
function badgeFindings(el, list, cid) {
  const badges = list.map(([index, f]) => findingBadge(cid, index, f));
  const who = el.querySelector(".who") || el;
  el.classList.add("has-finding");
  who.append(...badges);
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

export async function loadSession() {
  if (showLoadError($("session-body"))) return;
  if (state.connection === null || !state.session || !state.connections.some((c) => c.id === state.connection && c.sessions.some((s) => s.session_id === state.session))) {
    const first = state.connections.length ? firstSession() : null;
    if (first && !(state.connection !== null && state.session)) {
      setConnection(first[0]);
      setSession(first[1]);
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
    const cid = state.connection;
    const [data, found] = await Promise.all([
      api(`/api/connections/${cid}/sessions/${encodeURIComponent(state.session)}?limit=${sessionLimit}`),
      api(`/api/connections/${cid}/findings`).catch(() => null),
    ]);
    if (gen !== sessionGen) return;
    sessionData = data;
    sessionFindings = found;
    renderSession();
  } catch (e) {
    if (gen === sessionGen) $("session-body").replaceChildren(h("p", { class: "warnline", role: "alert" }, e.message));
  }
}
