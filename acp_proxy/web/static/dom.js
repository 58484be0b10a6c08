// The DOM helpers every view uses: $ (an element by id), h (build elements), api (GET JSON),
// setStatus (the status line) and copyText (the clipboard).
// Safety rule: recorded data is only ever put into the page with textContent / text nodes
// (h() below makes every string child a text node). Nothing here assigns innerHTML.

export const $ = (id) => document.getElementById(id);

// ---- tiny DOM helper: strings become text nodes, never markup -------------------------
export function h(tag, attrs, ...children) {
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

export async function api(path) {
  const res = await fetch(path, { headers: { Accept: "application/json" }, credentials: "same-origin" });
  let body = null;
  try { body = await res.json(); } catch (e) { body = null; }
  if (!res.ok) throw new Error((body && body.error) || `${res.status} ${res.statusText}`);
  return body;
}

export function setStatus(text, isError) {
  const el = $("status");
  el.textContent = text || "";
  el.classList.toggle("error", !!isError);
}

export async function copyText(text, what) {
  try { await navigator.clipboard.writeText(text); setStatus(`copied ${what}`); }
  catch (e) { setStatus(`could not copy: ${e.message}`, true); }
}
