// The text filter through the search index (words in messages, tool output, methods,
// errors, as `acp-proxy search` finds them), instead of a byte search of the raw frames:
// its hits, one row per frame, the snippet as the row's preview (frames.js shows them).

import { api } from "./dom.js";
import { state } from "./state.js";

export function searching() { return state.filter.words && !!state.filter.q; }

export async function searchHits() {
  const p = new URLSearchParams({ q: state.filter.q, limit: "500" });
  if (state.connection !== null) p.set("connection", String(state.connection));
  if (state.filter.session) p.set("session", state.filter.session);
  const data = await api("/api/search?" + p.toString());
  const seen = new Set();
  const rows = [];
  for (const hit of data.hits) {
    const fr = hit.summary;
    if (!fr || seen.has(fr.id)) continue;
    seen.add(fr.id);
    const said = `${hit.snippet}${hit.frames > 1 ? ` (${hit.frames} frames, #${hit.seq}–#${hit.last_seq})` : ""}`;
    rows.push({ ...fr, label: said, summary: said });
  }
  return { rows, status: data.more ? `first ${data.limit} hits` : `${data.hits.length} hit(s) in the search index` };
}
