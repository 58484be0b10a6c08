// acp-proxy export --format html: builds the report from the embedded JSON.
// Every recorded value goes into the page as text (textContent), never as HTML.
"use strict";
(function () {
  const data = JSON.parse(document.getElementById("report-data").textContent);
  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") el.className = v;
      else if (k === "style") el.style.width = v;
      else el.setAttribute(k, v);
    }
    for (const c of children) {
      if (c === null || c === undefined) continue;
      el.append(typeof c === "string" ? document.createTextNode(c) : c);
    }
    return el;
  }
  const json = (v) => JSON.stringify(v);
  const short = (v, n) => { const t = typeof v === "string" ? v : json(v); return t.length > n ? t.slice(0, n - 1) + "…" : t; };
  const when = (ts) => (typeof ts === "number" ? new Date(ts * 1000).toISOString().replace("T", " ").slice(0, 23) : "-");
  function contentText(blocks) {
    const out = [];
    for (let b of blocks || []) {
      if (b && b.type === "content" && b.content) b = b.content;
      if (b && b.type === "text" && typeof b.text === "string") out.push(b.text);
      else if (b && b.type) out.push("[" + b.type + " " + (b.path || b.uri || b.mimeType || b.terminalId || "") + "]");
      else out.push(short(b, 200));
    }
    return out.join("");
  }
  function item(it) {
    if (it.item === "entity") {
      const f = it.fields || {};
      const who = { user_message: "user", agent_message: "agent", agent_thought: "thought" }[it.type] || it.type;
      const cls = it.type === "user_message" ? "user" : it.type;
      const head = [h("span", { class: "who" }, who)];
      if (it.type === "tool_call") head.push((f.title || "") + (f.kind ? " (" + f.kind + ")" : "") + " " + (f.status || ""));
      if (it.type === "terminal") head.push("$ " + (f.command || ""));
      let body = it.text || contentText(it.content);
      if (it.type === "plan" && f.plan && Array.isArray(f.plan.entries)) {
        body = f.plan.entries.map((e) => ({ completed: "[x] ", in_progress: "[~] " }[e && e.status] || "[ ] ") + (e && e.content)).join("\n");
      }
      return h("div", { class: "item " + cls, "data-seq": String(it.firstSeq) }, ...head, h("span", { class: "dim" }, " #" + it.firstSeq), body ? "\n" + body : "");
    }
    if (it.item === "rpc") {
      const arrow = it.direction === "c2a" ? "→ " : "← ";
      const err = it.response && it.response.error;
      const lat = it.answered ? (typeof it.latencyMs === "number" ? it.latencyMs.toFixed(1) + " ms" : "") : "no response";
      const lines = [h("span", { class: "who" }, arrow + it.method), h("span", { class: "dim" }, " #" + it.seq + " " + lat)];
      if (err) lines.push("\nerror " + short(err.code, 20) + ": " + short(err.message, 500));
      if (it.method === "session/prompt" && it.params && Array.isArray(it.params.prompt)) lines.push("\nyou: " + contentText(it.params.prompt));
      return h("div", { class: "item rpc" + (err || !it.answered ? " error" : "") }, ...lines);
    }
    const p = it.payload || {};
    const text = it.kind === "notice" ? (p.title || "") + (p.description ? "\n" + p.description : "") : short(p, 400);
    return h("div", { class: "item event" }, h("span", { class: "who" }, it.kind + (it.variant ? " " + it.variant : "")), h("span", { class: "dim" }, " #" + it.seq + " "), text);
  }
  function conversation(c) {
    const box = h("details", { open: "", class: "conversation" }, h("summary", {}, "Conversation"));
    if (!c.sessions.length) box.append(h("p", { class: "dim" }, "No session on this connection."));
    for (const s of c.sessions) {
      const v = s.view.session || { items: [] };
      box.append(h("h3", {}, "session " + s.sessionId));
      if (s.view.totalItems > v.items.length) box.append(h("p", { class: "note" }, "Showing " + v.items.length + " of " + s.view.totalItems + " items."));
      for (const it of v.items) box.append(item(it));
    }
    return box;
  }
  function findings(c) {
    const list = (c.findings && c.findings.findings) || [];
    const s = (c.findings && c.findings.summary) || {};
    const box = h("details", { open: "", class: "findings" }, h("summary", {}, "Findings (" + (s.error || 0) + " errors, " + (s.warning || 0) + " warnings, " + (s.info || 0) + " info)"));
    if (!list.length) box.append(h("p", { class: "dim" }, "No finding."));
    for (const f of list) {
      box.append(h("div", { class: "item finding finding-" + f.tier }, h("span", { class: "who" }, f.tier + " " + f.rule), h("span", { class: "dim" }, " " + (f.side || "") + " frames " + (f.seqs || []).join(", ")), "\n" + (f.reason || ""), f.rule_text ? h("div", { class: "dim" }, f.rule_text) : null));
    }
    return box;
  }
  function timeline(c) {
    const t = c.timeline || {};
    const span = t.spanMs || 1;
    const box = h("details", { class: "timeline" }, h("summary", {}, "Timeline (" + (t.bars || []).length + " requests, " + (t.turns || []).length + " turns)"));
    const table = h("table", {}, h("tr", {}, h("th", {}, "request"), h("th", {}, "start"), h("th", {}, "latency"), h("th", {}, "")));
    for (const b of t.bars || []) {
      const bar = h("div", { class: "bar" + (b.error ? " err" : ""), style: Math.max(0.2, (100 * ((b.endMs ?? span) - b.startMs)) / span) + "%" });
      bar.style.marginLeft = (100 * b.startMs) / span + "%";
      table.append(h("tr", {}, h("td", {}, (b.direction === "c2a" ? "→ " : "← ") + b.method + " #" + b.id), h("td", {}, b.startMs.toFixed(1) + " ms"), h("td", {}, typeof b.latencyMs === "number" ? b.latencyMs.toFixed(1) + " ms" : "pending"), h("td", { class: "lane" }, bar)));
    }
    box.append(table);
    for (const turn of t.turns || []) {
      box.append(h("div", { class: "item" }, "turn " + turn.sessionId + " #" + turn.startSeq + "–" + (turn.endSeq ?? "…") + " " + (turn.stopReason || "") + " " + (typeof turn.durationMs === "number" ? turn.durationMs.toFixed(1) + " ms" : "")));
    }
    return box;
  }
  function frames(c) {
    const box = h("details", { class: "frames" }, h("summary", {}, "Frames (" + c.frames.length + (c.framesTotal > c.frames.length ? " of " + c.framesTotal : "") + ")"));
    const table = h("table", {});
    for (const f of c.frames) {
      const what = [f.kind, f.method, f.rpcId !== null ? "#" + f.rpcId : null, f.update ? "[" + f.update + "]" : null].filter((x) => x).join(" ");
      const bytes = f.text !== undefined ? f.text : "base64: " + f.base64;
      table.append(h("tr", { "data-seq": String(f.seq) }, h("td", {}, String(f.seq)), h("td", { class: "dim" }, when(f.ts)), h("td", {}, f.direction === "c2a" ? "→" : "←"), h("td", {}, what), h("td", {}, h("pre", {}, bytes + (f.cut ? "\n[cut: " + f.size + " bytes in all]" : "")))));
    }
    box.append(table);
    return box;
  }
  const root = document.getElementById("report");
  root.textContent = "";
  const head = h("header", {}, h("h1", {}, "acp-proxy report: " + data.title));
  head.append(h("p", { class: "meta" }, data.connections.length + " connection(s). " + (data.redacted ? "Secrets are redacted ([REDACTED])." : "Not redacted: frames are the exact recorded bytes.")));
  if (data.framesCut > 0) head.append(h("p", { class: "note", id: "cut-note" }, data.framesCut + " frame(s) left out of the Frames lists (--max-frames " + data.maxFrames + "); the conversation, findings and timeline cover every frame."));
  root.append(head);
  for (const c of data.connections) {
    const r = c.connection;
    const title = ["connection " + r.id, r.transport, when(r.started_at), r.agent ? "agent: " + r.agent : null, r.client ? "client: " + r.client : null, r.label ? "label: " + r.label : null, r.state_reason].filter((x) => x).join(" · ");
    root.append(h("section", { class: "conn", id: "connection-" + r.id }, h("h2", {}, title), conversation(c), findings(c), timeline(c), frames(c)));
  }
})();
