// The live feed: the inspector server's WebSocket (/api/live) pushes new frames of the
// list's filter and the recording's state; the views are refreshed when it grows or changes.

import { loadConnections } from "./connections.js";
import { $, api, setStatus } from "./dom.js";
import { loadValues, valuesStale } from "./filters.js";
import { countNewFrames, liveSubscription, onLiveFrames, updateFoot } from "./frames.js";
import { loadSession } from "./session.js";
import { noteMaxId, setInfo, setUnreadable, state } from "./state.js";
import { loadTimeline } from "./timeline.js";

let ws = null;
let wsRetry = 500;
export function connectLive() {
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
export function subscribe() {
  if (!ws || ws.readyState !== WebSocket.OPEN) return;
  ws.send(JSON.stringify(liveSubscription()));
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
    onLiveFrames(msg.frames);
    noteMaxId(msg.max_id);
    updateFoot();
  } else if (msg.type === "state") {
    if (!state.info) api("/api/info").then((info) => { setInfo(info); $("db-name").textContent = info.name; }).catch(() => {});
    const grew = msg.max_id > state.maxId;
    if (grew) countNewFrames(msg.max_id - state.maxId);
    noteMaxId(msg.max_id);
    if (grew || msg.changed || state.unreadable) scheduleRefresh();
    setUnreadable(false);
    if (grew && valuesStale()) loadValues();
    updateFoot();
    setStatus("");
  } else if (msg.type === "error") {
    // The recording became unreadable while served: show it in the lists too.
    setStatus(msg.message, true);
    setUnreadable(true);
    loadConnections();
  }
}
