// The trace viewer's canvas: the time axis, the rows' labels, every slice of
// the tile in hand (an event at least a pixel wide), the folded pixels
// (their opacity is the busy fraction), counters (a GPU's memory in use) as
// a step chart, flow arrows, the selection and the timing tool's interval. Synchronous: it draws what the tile has, at the
// view's zoom, whatever the tile's own.
import {bytes, duration, num} from '../format.js';
import {AXIS_H, GUTTER, LANE_H, ROW_PAD, laneY} from './layout.js';

const FONT = '11px system-ui, sans-serif';
const CHAR_W = 6.1;  // about one character of FONT, for cutting labels without measuring each.

// A tile as the drawing wants it: per track its slices and its folded
// pixels, each with the lane it draws in; flows and a map of slices by id.
export function prepareTile(tile) {
  const nspp = tile.ns_per_px;
  const tracks = new Map();
  const byId = new Map();
  const lanesNeeded = new Map();
  for (const t of tile.tracks) {
    if (t.type === 'memory' || t.type === 'counter') {
      // A counter: per pixel its samples' largest value and the last one's,
      // which holds until the next sample. Two lanes tall.
      const summaries = t.summaries.map(([px, count, , , , max, last]) =>
        ({px, count, max, last, lane: 0, ts: tile.t0 + px * nspp}));
      const held = t.held ? {ts: t.held[0], value: t.held[1]} : null;  // the level at the tile's t0.
      tracks.set(t.track, {slices: [], summaries, held, counter: true, unit: t.type === 'memory' ? 'bytes' : ''});
      lanesNeeded.set(t.track, 2);
      continue;
    }
    // Per tile pixel, the lanes of the slices that cover it whole (its
    // folded events' ancestors): folded events draw in the lane below.
    const occupied = new Uint8Array(tile.width_px);
    let lanes = 1;
    const slices = t.slices.map(([id, ts, dur, name, depth, kind]) => {
      const s = {id, ts, dur, name, depth, kind, track: t.track};
      byId.set(id, s);
      lanes = Math.max(lanes, depth + 1);
      const a = Math.max(0, Math.ceil((ts - tile.t0) / nspp));
      const b = Math.min(tile.width_px - 1, Math.floor((ts + dur - tile.t0) / nspp) - 1);
      for (let p = a; p <= b; p++) if (occupied[p] < depth + 1) occupied[p] = depth + 1;
      return s;
    });
    const summaries = t.summaries.map(([px, count, busy, longest, longestDur]) => {
      const lane = occupied[px];
      lanes = Math.max(lanes, lane + 1);
      return {px, count, busy, longest, longestDur, lane, ts: tile.t0 + px * nspp};
    });
    tracks.set(t.track, {slices, summaries});
    lanesNeeded.set(t.track, lanes);
  }
  const names = new Map(Object.entries(tile.names).map(([k, v]) => [+k, v]));
  return {t0: tile.t0, t1: tile.t1, nspp, tracks, byId, names, flows: tile.flows, lanesNeeded};
}

// A colour per name, stable across tiles and sessions.
const colors = new Map();
export function colorOf(name) {
  let c = colors.get(name);
  if (c) return c;
  let h = 2166136261;
  for (let i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 16777619);
  c = `hsl(${(h >>> 0) % 360}, 52%, ${62 + ((h >>> 9) % 3) * 5}%)`;
  colors.set(name, c);
  return c;
}

// A round step for the axis: 1, 2 or 5 times a power of ten, about `ns`.
export function niceStep(ns) {
  const p = 10 ** Math.floor(Math.log10(Math.max(ns, 1)));
  for (const m of [1, 2, 5, 10]) if (m * p >= ns) return m * p;
  return 10 * p;
}

export function timeToX(view, W, t) {
  return GUTTER + (t - view.t0) * (W - GUTTER) / (view.t1 - view.t0);
}

export function xToTime(view, W, x) {
  return view.t0 + (x - GUTTER) * (view.t1 - view.t0) / (W - GUTTER);
}

function drawAxis(g, s) {
  const {view, W, bounds} = s;
  const step = niceStep((view.t1 - view.t0) / ((W - GUTTER) / 110));
  g.fillStyle = '#f8f9fa';
  g.fillRect(0, 0, W, AXIS_H);
  g.strokeStyle = '#dde2e7';
  g.fillStyle = '#3c4043';
  g.font = FONT;
  const origin = bounds.first;
  let t = origin + Math.ceil((view.t0 - origin) / step) * step;
  for (; t <= view.t1; t += step) {
    const x = Math.round(timeToX(view, W, t)) + 0.5;
    g.beginPath();
    g.moveTo(x, AXIS_H - 7);
    g.lineTo(x, s.H);
    g.stroke();
    g.fillText(duration(Math.round(t - origin)), x + 3, AXIS_H - 10);
  }
  g.fillStyle = '#69737d';
  g.fillText(`${duration(Math.round(view.t1 - view.t0))} in view`, 6, AXIS_H - 10);
}

function cut(text, px) {
  const n = Math.floor((px - 6) / CHAR_W);
  if (n <= 0) return '';
  return text.length <= n ? text : `${text.slice(0, Math.max(0, n - 1))}…`;
}

export function counterText(data, v) {
  return data.unit === 'bytes' ? bytes(v) : num(v);
}

// A step chart from 0 (or the lowest value, if below) to the largest value
// in the tile: each pixel's largest value, then its last until the next.
function drawCounter(g, s, row, data) {
  const {view, W} = s;
  const x0 = GUTTER, scale = (W - GUTTER) / (view.t1 - view.t0);
  if (data.summaries.length === 0 && !data.held) return;
  let hi = 0, lo = 0;
  if (data.held) hi = Math.max(hi, data.held.value), lo = Math.min(lo, data.held.value);
  for (const f of data.summaries) hi = Math.max(hi, f.max), lo = Math.min(lo, f.last, f.max);
  const top = row.y + ROW_PAD, h = row.h - 2 * ROW_PAD;
  const y = (v) => top + h - (hi > lo ? (v - lo) / (hi - lo) : 0) * h;
  const w = Math.max(1, s.tile.nspp * scale);
  g.fillStyle = 'rgba(26, 115, 232, 0.35)';
  // A bar from 0 to v over [left, right), clipped to the timeline.
  const bar = (left, right, v) => {
    const l = Math.max(left, x0), r = Math.min(right, W);
    if (r > l) g.fillRect(l, Math.min(y(v), y(0)), r - l, Math.abs(y(0) - y(v)));
  };
  const list = data.summaries;
  if (data.held) {  // the level a sample before the tile left, until its first.
    bar(x0 + (s.tile.t0 - view.t0) * scale, list.length ? x0 + (list[0].ts - view.t0) * scale : W, data.held.value);
  }
  for (let i = 0; i < list.length; i++) {
    const f = list[i];
    const a = x0 + (f.ts - view.t0) * scale;
    const b = i + 1 < list.length ? x0 + (list[i + 1].ts - view.t0) * scale : W;
    bar(a, a + w, f.max);   // its pixel: the largest.
    bar(a + w, b, f.last);  // then the last, held until the next sample.
  }
  g.fillStyle = '#3c4043';
  g.fillText(`max ${counterText(data, hi)}`, W - 90, top + 10);
}

function drawTrack(g, s, row, data) {
  const {view, W} = s;
  if (data.counter) return drawCounter(g, s, row, data);
  const x0 = GUTTER, scale = (W - GUTTER) / (view.t1 - view.t0);
  const name = (id) => s.names.get(id) ?? '';
  for (const sl of data.slices) {
    const a = x0 + (sl.ts - view.t0) * scale;
    const w = Math.max(1, sl.dur * scale);
    if (a > W || a + w < x0) continue;
    const left = Math.max(a, x0), right = Math.min(a + w, W);
    const y = laneY(row, sl.depth);
    const label = name(sl.name);
    g.fillStyle = sl.id === s.selectedId ? '#1a73e8' : colorOf(label);
    g.fillRect(left, y, Math.max(1, right - left - (w > 4 ? 1 : 0)), LANE_H - 1);  // a seam between neighbours.
    if (right - left > 24) {
      g.fillStyle = sl.id === s.selectedId ? '#fff' : '#1d2329';
      g.fillText(cut(label, right - left), left + 3, y + LANE_H - 5);
    }
  }
  // Folded pixels: a tile pixel's events, as wide as that pixel is now.
  const w = Math.max(1, s.tile.nspp * scale);
  for (const f of data.summaries) {
    const a = x0 + (f.ts - view.t0) * scale;
    if (a > W || a + w < x0) continue;
    g.globalAlpha = 0.35 + 0.65 * f.busy;
    g.fillStyle = colorOf(name(f.longest));
    g.fillRect(Math.max(a, x0), laneY(row, f.lane), w, LANE_H - 1);
  }
  g.globalAlpha = 1;
}

function drawFlows(g, s, rowsById) {
  const {view, W, tile} = s;
  const many = tile.flows.length > 400;  // then only the selected event's.
  g.strokeStyle = 'rgba(60, 64, 67, 0.75)';
  g.fillStyle = 'rgba(60, 64, 67, 0.75)';
  for (const [from, to] of tile.flows) {
    if (many && from !== s.selectedId && to !== s.selectedId) continue;
    const a = tile.byId.get(from), b = tile.byId.get(to);
    const ra = a && rowsById.get(a.track), rb = b && rowsById.get(b.track);
    if (!ra || !rb) continue;
    const xa = timeToX(view, W, a.ts), xb = timeToX(view, W, b.ts);
    if (Math.max(xa, xb) < GUTTER || Math.min(xa, xb) > W) continue;
    const ya = laneY(ra, a.depth) + LANE_H / 2, yb = laneY(rb, b.depth) + LANE_H / 2;
    g.beginPath();
    g.moveTo(xa, ya);
    g.lineTo(xb, yb);
    g.stroke();
    const angle = Math.atan2(yb - ya, xb - xa);
    g.beginPath();
    g.moveTo(xb, yb);
    g.lineTo(xb - 7 * Math.cos(angle - 0.4), yb - 7 * Math.sin(angle - 0.4));
    g.lineTo(xb - 7 * Math.cos(angle + 0.4), yb - 7 * Math.sin(angle + 0.4));
    g.fill();
  }
}

function drawInterval(g, s, iv, fill, stroke, label) {
  const a = Math.max(GUTTER, timeToX(s.view, s.W, iv.t0)), b = Math.min(s.W, timeToX(s.view, s.W, iv.t1));
  if (b < GUTTER || a > s.W) return;
  g.fillStyle = fill;
  g.fillRect(a, AXIS_H, Math.max(1, b - a), s.H - AXIS_H);
  g.strokeStyle = stroke;
  g.strokeRect(a + 0.5, AXIS_H + 0.5, Math.max(1, b - a), s.H - AXIS_H - 1);
  if (label) {
    const text = duration(Math.round(iv.t1 - iv.t0));
    g.fillStyle = stroke;
    g.fillRect(a, 0, Math.max(CHAR_W * text.length + 8, b - a), 14);
    g.fillStyle = '#fff';
    g.fillText(text, a + 4, 11);
  }
}

// s: {W, H, view, bounds, rows, tile (prepareTile's), names, selectedId,
// box ({t0, t1, y0, y1} being selected), timing ({t0, t1}), rowsById}.
export function drawTrace(g, s) {
  g.clearRect(0, 0, s.W, s.H);
  g.font = FONT;
  g.textBaseline = 'alphabetic';
  drawAxis(g, s);
  const rowsById = new Map();
  for (const row of s.rows) {
    if (row.kind === 'section') {
      g.fillStyle = '#eef1f4';
      g.fillRect(0, row.y, s.W, row.h);
      g.fillStyle = '#1d2329';
      g.font = `600 ${FONT}`;
      g.fillText(`${row.collapsed ? '▸' : '▾'} ${row.title}${row.collapsed ? ` (${row.count} rows)` : ''}`, 6, row.y + 14);
      g.font = FONT;
      continue;
    }
    rowsById.set(row.id, row);
    g.fillStyle = '#fff';
    g.fillRect(0, row.y, s.W, row.h);
    g.strokeStyle = '#eceff1';
    g.beginPath();
    g.moveTo(0, row.y + row.h - 0.5);
    g.lineTo(s.W, row.y + row.h - 0.5);
    g.stroke();
    g.fillStyle = '#3c4043';
    g.fillText(cut(row.label, GUTTER - 10), 14, row.y + ROW_PAD + LANE_H - 5);
    const data = s.tile?.tracks.get(row.id);
    if (data) {
      g.save();
      g.beginPath();
      g.rect(GUTTER, row.y, s.W - GUTTER, row.h);
      g.clip();
      drawTrack(g, s, row, data);
      g.restore();
    }
  }
  if (s.tile) drawFlows(g, s, rowsById);
  if (s.timing) drawInterval(g, s, s.timing, 'rgba(26, 115, 232, 0.10)', '#1a73e8', true);
  if (s.box) {
    const a = timeToX(s.view, s.W, s.box.t0), b = timeToX(s.view, s.W, s.box.t1);
    g.strokeStyle = '#1a73e8';
    g.setLineDash([4, 3]);
    g.strokeRect(Math.min(a, b) + 0.5, Math.min(s.box.y0, s.box.y1) + 0.5, Math.abs(b - a), Math.abs(s.box.y1 - s.box.y0));
    g.setLineDash([]);
  }
  g.strokeStyle = '#dde2e7';
  g.beginPath();
  g.moveTo(GUTTER - 0.5, 0);
  g.lineTo(GUTTER - 0.5, s.H);
  g.stroke();
}
