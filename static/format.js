// Formatting shared by the panels: numbers as the TF Profiler shows them,
// byte sizes, and HTML escaping for the tables built as strings.

const ESCAPES = {'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;'};

export function esc(s) {
  return String(s ?? '').replace(/[&<>"']/g, (c) => ESCAPES[c]);
}

// One formatter per number of decimals: building an Intl.NumberFormat (which
// toLocaleString does on every call) costs more than the formatting.
const formatters = [];
function formatter(decimals) {
  return (formatters[decimals] ??= new Intl.NumberFormat('en-US',
    {minimumFractionDigits: decimals, maximumFractionDigits: decimals}));
}

// A fixed number of decimals; '—' for a missing value.
export function num(v, decimals = 2) {
  if (v === null || v === undefined || Number.isNaN(v)) return '—';
  return formatter(decimals).format(v);
}

export function pct(v, decimals = 1) {
  return v === null || v === undefined ? '—' : `${num(v, decimals)}%`;
}

export function int(v) {
  return v === null || v === undefined ? '—' : formatter(0).format(v);
}

const UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
export function bytes(v) {
  if (v === null || v === undefined) return '—';
  let x = Math.abs(v);
  let u = 0;
  while (x >= 1024 && u < UNITS.length - 1) {
    x /= 1024;
    u++;
  }
  return `${v < 0 ? '-' : ''}${u === 0 ? x : x.toFixed(2)} ${UNITS[u]}`;
}

// A time given in microseconds, in the unit that fits its magnitude, as
// Perfetto and TensorBoard show times: "269.6 ms" rather than "269,609.0 µs",
// "812.0 µs", "3.20 s", "450 ns". A table column of times in µs shows
// them so with `fmt: (v) => us(v)` (table.js sorts on the number).
export function us(v, decimals = 1) {
  if (v === null || v === undefined || !Number.isFinite(v)) return '—';
  const a = Math.abs(v);
  if (a >= 1e6) return `${num(v / 1e6, 2)} s`;
  if (a >= 1e3) return `${num(v / 1e3, decimals)} ms`;
  if (a > 0 && a < 1) return `${num(v * 1e3, 0)} ns`;
  return `${num(v, decimals)} µs`;
}

// A duration in nanoseconds, in the unit that reads best.
export function duration(ns) {
  if (ns === null || ns === undefined) return '—';
  if (ns >= 1e9) return `${(ns / 1e9).toFixed(2)} s`;
  if (ns >= 1e6) return `${(ns / 1e6).toFixed(2)} ms`;
  if (ns >= 1e3) return `${(ns / 1e3).toFixed(1)} µs`;
  return `${ns} ns`;
}

// One CSV field (RFC 4180).
export function csvField(v) {
  const s = String(v ?? '');
  return /[",\n\r]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}

// A long C++ name made readable, as TensorBoard shows kernel names: template
// arguments folded to <…> (innermost first), a parameter list to (…), a
// leading "void " dropped, and what is still over `max` characters cut in
// the middle. Names that are not C++ are left as they are ("<module>",
// "Memcpy HtoD (Pageable -> Device)").
export function shortName(name, max = 120) {
  let t = String(name);
  const folded = '\u0001';
  for (let prev = ''; prev !== t;) {
    prev = t;
    t = t.replace(/([A-Za-z0-9_:])<[^<>]*>/g, `$1${folded}`);
  }
  t = t.replaceAll(folded, '<…>');
  t = t.replace(/^void\s+/, '');
  const call = t.match(/^([A-Za-z_][\w:~]*(?:<…>)?(?:::[\w~]+(?:<…>)?)*)\(.*\)$/s);
  if (call && call[0].length > call[1].length + 3) t = `${call[1]}(…)`;
  if (t.length > max) t = `${t.slice(0, Math.ceil(max * 0.6))}…${t.slice(t.length - Math.floor(max * 0.4) + 1)}`;
  return t;
}
