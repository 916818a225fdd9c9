// The trace viewer's rows, as TF's viewer lays them out (tf-profiler-
// semantics.md §9.1): per GPU a section with its Steps row, its Framework
// ops row, its Memory in use (a counter) and one row per stream; then the
// host's threads, nested; then counters. Sections collapse. Pinned rows
// (Perfetto's pin) leave their section for the header, which stays on top
// while the page scrolls. Pure: tracks in, rows with y positions out.

export const AXIS_H = 26;
export const SECTION_H = 20;
export const LANE_H = 17;
export const ROW_PAD = 3;
// The labels' column, left of the timeline: resizable (trace/gutter.js
// drags its edge), so a live binding that setGutter changes for every module.
export const GUTTER_DEFAULT = 190;
export const GUTTER_MIN = 100;
export const GUTTER_MAX = 640;
export let GUTTER = GUTTER_DEFAULT;
export const PIN_W = 16;       // the pin's place at the gutter's right end.
export const MAX_LANES = 24;   // deeper nesting draws in the last lane.

// The gutter's width, kept within [GUTTER_MIN, GUTTER_MAX] and at most
// `maxShare` of a canvas `W` px wide (the timeline keeps the rest). Returns it.
export function setGutter(px, W = Infinity, maxShare = 0.6) {
  const hi = Math.max(GUTTER_MIN, Math.min(GUTTER_MAX, Math.floor(W * maxShare)));
  GUTTER = Math.round(Math.max(GUTTER_MIN, Math.min(hi, Number.isFinite(px) ? px : GUTTER_DEFAULT)));
  return GUTTER;
}

// Which section a track belongs to, and its order inside it.
function place(t) {
  switch (t.type) {
    case 'steps': return {key: `gpu:${t.device}`, title: `GPU ${t.device}`, order: [0, 0, t.track]};
    case 'framework_ops': return {key: `gpu:${t.device}`, title: `GPU ${t.device}`, order: [0, 1, t.track]};
    case 'memory': return {key: `gpu:${t.device}`, title: `GPU ${t.device}`, order: [0, 2, t.track]};
    case 'gpu_stream': return {key: `gpu:${t.device}`, title: `GPU ${t.device}`, order: [0, 3, t.os_id ?? t.track]};
    case 'counter': return {key: 'counters', title: 'Counters', order: [2, 0, t.track]};
    default: return {key: 'host', title: 'Host threads', order: [1, 0, t.track]};
  }
}

function sectionRank(key) {
  if (key.startsWith('gpu:')) return [0, +key.slice(4)];
  return [key === 'host' ? 1 : 2, 0];
}

function cmp(a, b) {
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return a[i] < b[i] ? -1 : 1;
  return 0;
}

export function trackLabel(t) {
  if (t.name) return t.name;
  return `track ${t.track}`;
}

function trackRow(t, lanes, y) {
  const n = Math.min(MAX_LANES, Math.max(1, lanes.get(t.track) ?? 1));
  return {kind: 'track', id: t.track, t, label: trackLabel(t), y, h: n * LANE_H + 2 * ROW_PAD, lanes: n};
}

// The pinned rows, in the order they were pinned, from `top` down.
export function layoutPinned(tracks, lanes, pinned, top) {
  const rows = [];
  let y = top;
  for (const id of pinned) {
    const t = tracks.get(id);
    if (!t) continue;
    rows.push(trackRow(t, lanes, y));
    y += rows.at(-1).h;
  }
  return {rows, height: y};
}

// `tracks`: Map id -> {track, name, type, device, os_id}; `lanes`: Map id ->
// lanes it needs; `collapsed`: Set of section keys; `pinned`: Set of track
// ids left out (drawn by layoutPinned); `top`: the first row's y. Returns
// {rows, height}: rows are {kind: 'section', key, title, count, y, h,
// collapsed} or {kind: 'track', id, t, label, y, h, lanes}.
export function layoutRows(tracks, lanes, collapsed, pinned = new Set(), top = AXIS_H) {
  const sections = new Map();
  for (const t of tracks.values()) {
    if (pinned.has(t.track)) continue;
    const p = place(t);
    if (!sections.has(p.key)) sections.set(p.key, {key: p.key, title: p.title, items: []});
    sections.get(p.key).items.push({t, order: p.order});
  }
  const keys = [...sections.keys()].sort((a, b) => cmp(sectionRank(a), sectionRank(b)));
  const rows = [];
  let y = top;
  for (const key of keys) {
    const s = sections.get(key);
    s.items.sort((a, b) => cmp(a.order, b.order));
    const isCollapsed = collapsed.has(key);
    rows.push({kind: 'section', key, title: s.title, count: s.items.length, y, h: SECTION_H, collapsed: isCollapsed});
    y += SECTION_H;
    if (isCollapsed) continue;
    for (const {t} of s.items) {
      rows.push(trackRow(t, lanes, y));
      y += rows.at(-1).h;
    }
  }
  return {rows, height: y + 4};
}

// The row under a y coordinate, or null.
export function rowAt(rows, y) {
  for (const r of rows) if (y >= r.y && y < r.y + r.h) return r;
  return null;
}

// The lane of a y inside a track row.
export function laneAt(row, y) {
  return Math.max(0, Math.min(row.lanes - 1, Math.floor((y - row.y - ROW_PAD) / LANE_H)));
}

export function laneY(row, lane) {
  return row.y + ROW_PAD + Math.min(lane, row.lanes - 1) * LANE_H;
}
