// Formatting for people: times, durations, latencies, sizes, directions.

const pad = (n, w) => String(n).padStart(w, "0");
export function clock(ts) {
  if (ts === null || ts === undefined) return "-";
  const d = new Date(ts * 1000);
  return `${pad(d.getHours(), 2)}:${pad(d.getMinutes(), 2)}:${pad(d.getSeconds(), 2)}.${pad(d.getMilliseconds(), 3)}`;
}
export function dateTime(ts) {
  if (ts === null || ts === undefined) return "-";
  const d = new Date(ts * 1000);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1, 2)}-${pad(d.getDate(), 2)} ${clock(ts).slice(0, 8)}`;
}
export function duration(sec) {
  if (sec === null || sec === undefined) return "running";
  if (sec < 1) return `${Math.round(sec * 1000)}ms`;
  if (sec < 120) return `${sec.toFixed(1)}s`;
  return `${Math.floor(sec / 60)}m${pad(Math.floor(sec % 60), 2)}s`;
}
export function ms(v) {
  if (v === null || v === undefined) return "";
  if (v < 10) return `${v.toFixed(2)}ms`;
  if (v < 1000) return `${v.toFixed(0)}ms`;
  return `${(v / 1000).toFixed(2)}s`;
}
export function bytes(n) {
  if (n < 1024) return `${n}B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)}K`;
  return `${(n / 1048576).toFixed(1)}M`;
}
export const arrow = (d) => (d === "c2a" ? "C→A" : "A→C");
export const dirTitle = (d) => (d === "c2a" ? "client → agent" : "agent → client");
