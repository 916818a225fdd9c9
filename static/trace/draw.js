// The trace viewer's canvas: the time axis, the rows' labels, every slice of
// the tile in hand (an event at least a pixel wide), the folded pixels
// (their opacity is the busy fraction), counters (a GPU's memory in use) as
// a step chart, flow arrows, the selection and the timing tool's interval. Synchronous: it draws what the tile has, at the
// view's zoom, whatever the tile's own. Its colours are the page's theme
// (trace/theme.js: light or dark), the slices' colour per name in both.
import {duration} from '../format.js';
import {axisTicks} from './axis.js';
import {counterText, drawCounter} from './counters.js';
import {AXIS_H, GUTTER, LANE_H, PIN_W, ROW_PAD, laneY} from './layout.js';
import {colors} from './theme.js';

export {counterText};

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
  // Flows' ends that are not slices here (outside the tile, or folded):
  // by id too, for the arrows and the details, never drawn as slices.
  for (const [id, track, ts, dur, name, kind] of tile.flow_ends ?? []) {
    if (!byId.has(id)) byId.set(id, {id, ts, dur, name, depth: 0, kind, track, far: true});
  }
  const names = new Map(Object.entries(tile.names).map(([k, v]) => [+k, v]));
  return {t0: tile.t0, t1: tile.t1, nspp, tracks, byId, names, flows: tile.flows, lanesNeeded};
}

// A colour per name, stable across tiles and sessions.
const sliceColors = new Map();
export function colorOf(name) {
  let c = sliceColors.get(name);
  if (c) return c;
  let h = 2166136261;
  for (let i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 16777619);
  c = `hsl(${(h >>> 0) % 360}, 52%, ${62 + ((h >>> 9) % 3) * 5}%)`;
  sliceColors.set(name, c);
  return c;
}

export function timeToX(view, W, t) {
  return GUTTER + (t - view.t0) * (W - GUTTER) / (view.t1 - view.t0);
}

export function xToTime(view, W, x) {
  return view.t0 + (x - GUTTER) * (view.t1 - view.t0) / (W - GUTTER);
}

// The axis (labels: the header's canvas) or its grid lines alone (the rows').
// The ticks drawn go to s.out.ticks.
function drawAxis(g, s, labels) {
  const {view, W, bounds} = s;
  const ticks = axisTicks(view, bounds.first, GUTTER, W - GUTTER, (t) => g.measureText(t).width);
  if (labels) {
    g.fillStyle = colors.axisBg;
    g.fillRect(0, 0, W, AXIS_H);
  }
  g.strokeStyle = colors.grid;
  g.fillStyle = colors.label;
  for (const k of ticks) {
    const x = Math.round(k.x) + 0.5;
    g.beginPath();
    g.moveTo(x, labels ? AXIS_H - 7 : 0);
    g.lineTo(x, s.H);
    g.stroke();
    if (labels) g.fillText(k.label, x + 3, AXIS_H - 10);
  }
  if (labels) {
    g.fillStyle = colors.axisBg;  // the gutter's corner: the span in view, over any label under it.
    g.fillRect(0, 0, GUTTER, AXIS_H);
    g.fillStyle = colors.muted;
    g.fillText(`${duration(Math.round(view.t1 - view.t0))} in view`, 6, AXIS_H - 10);
    s.out.ticks = ticks.map((k) => ({t: k.t, x: k.x, w: k.w, label: k.label}));
  }
}

function cut(text, px) {
  const n = Math.floor((px - 6) / CHAR_W);
  if (n <= 0) return '';
  return text.length <= n ? text : `${text.slice(0, Math.max(0, n - 1))}…`;
}

// A Steps row's label where the whole name does not fit: its number ("#47" for ProfilerStep#47).
function stepLabel(label, px) {
  return label.length * CHAR_W + 6 > px ? label.replace(/^ProfilerStep#/, '#') : label;
}

function drawTrack(g, s, row, data) {
  const {view, W} = s;
  if (data.counter) return drawCounter(g, s, row, data);
  const x0 = GUTTER, scale = (W - GUTTER) / (view.t1 - view.t0);
  const name = (id) => s.names.get(id) ?? '';
  const steps = row.t?.type === 'steps';
  for (const sl of data.slices) {
    const a = x0 + (sl.ts - view.t0) * scale;
    const w = Math.max(1, sl.dur * scale);
    if (a > W || a + w < x0) continue;
    const left = Math.max(a, x0), right = Math.min(a + w, W);
    const y = laneY(row, sl.depth);
    const label = s.sliceName ? s.sliceName(sl) : name(sl.name);  // (a replayed loop's step: its number)
    g.fillStyle = sl.id === s.selectedId ? colors.accent : colorOf(name(sl.name));
    g.fillRect(left, y, Math.max(1, right - left - (w > 4 ? 1 : 0)), LANE_H - 1);  // a seam between neighbours.
    const room = right - left;
    const text = steps ? stepLabel(label, room) : label;
    const shown = room > 12 ? cut(text, room) : '';
    if (steps ? shown.length > 1 && (shown === text || room > 24) : room > 24) {  // (a step's number whole, or more)
      g.fillStyle = sl.id === s.selectedId ? colors.onAccent : colors.sliceText;
      g.fillText(shown, left + 3, y + LANE_H - 5);
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

// The search hit (or the selection when it is not in the tile): an outline
// at its time on its row, at least a few pixels wide, in front of the rest.
function drawHit(g, s, rowsById) {
  const e = s.hit;
  const row = e && rowsById.get(e.track);
  if (!row) return;
  const a = timeToX(s.view, s.W, e.ts), b = timeToX(s.view, s.W, e.ts + e.dur);
  const inTile = s.tile?.byId.get(e.id);
  const y = laneY(row, inTile && !inTile.far ? inTile.depth : 0);
  const left = Math.max(GUTTER, Math.min(a, (a + b) / 2 - 2)), right = Math.min(s.W, Math.max(b, (a + b) / 2 + 2));
  if (right < GUTTER || left > s.W) return;
  g.save();
  g.beginPath();
  g.rect(GUTTER, row.y, s.W - GUTTER, row.h);
  g.clip();
  g.fillStyle = colors.hit;
  g.fillRect(left, y, right - left, LANE_H - 1);
  g.strokeStyle = colors.hitLine;
  g.lineWidth = 2;
  g.strokeRect(left - 1, y - 1, right - left + 2, LANE_H + 1);
  if (right - left > 24) {
    g.fillStyle = '#1d2329';  // (on the hit's yellow, in both themes)
    g.fillText(cut(s.names.get(inTile?.name) ?? e.name ?? '', right - left), left + 3, y + LANE_H - 5);
  }
  g.restore();
  s.out.hit = {x: left, w: right - left, y, h: LANE_H - 1, row: row.id};
}

// An arrow head at (x, y) pointing along `angle`.
function head(g, x, y, angle) {
  g.beginPath();
  g.moveTo(x, y);
  g.lineTo(x - 7 * Math.cos(angle - 0.4), y - 7 * Math.sin(angle - 0.4));
  g.lineTo(x - 7 * Math.cos(angle + 0.4), y - 7 * Math.sin(angle + 0.4));
  g.fill();
}

// Launch -> device work. An end outside the view (or not a slice here: the
// server's flow_ends) is drawn to the timeline's edge, with the arrow head
// there when it is the work's end; a flow with both ends outside, only
// when it is the selected event's. What was drawn goes to s.out.flows.
function drawFlows(g, s, rowsById) {
  const {view, W, tile} = s;
  const many = tile.flows.length > 400;  // then only the selected event's.
  g.strokeStyle = colors.flow;
  g.fillStyle = colors.flow;
  const drawn = [];
  for (const [from, to] of tile.flows) {
    if (many && from !== s.selectedId && to !== s.selectedId) continue;
    const a = tile.byId.get(from), b = tile.byId.get(to);
    const ra = a && rowsById.get(a.track), rb = b && rowsById.get(b.track);
    if (!ra || !rb) continue;
    let xa = timeToX(view, W, a.ts), xb = timeToX(view, W, b.ts);
    if (Math.max(xa, xb) < GUTTER || Math.min(xa, xb) > W) continue;
    // Both ends off screen (a line across the whole view): the selected event's only.
    const seen = (x) => x >= GUTTER && x <= W;
    if (!seen(xa) && !seen(xb) && from !== s.selectedId && to !== s.selectedId) continue;
    const ya = laneY(ra, a.depth) + LANE_H / 2, yb = laneY(rb, b.depth) + LANE_H / 2;
    // An end off screen: at the timeline's edge, on its own row (where to look for it).
    const clip = (x) => (x < GUTTER ? GUTTER : x > W ? W : x);
    const ca = clip(xa) !== xa, cb = clip(xb) !== xb;
    xa = clip(xa);
    xb = clip(xb);
    const angle = Math.atan2(yb - ya, xb - xa);
    g.beginPath();
    g.moveTo(xa, ya);
    g.lineTo(xb, yb);
    g.stroke();
    head(g, xb, yb, angle);  // at the work, or where the line leaves the view towards it.
    if (ca) g.fillRect(xa - 1, ya - 3, 3, 6);  // the launch is off to that side.
    drawn.push({from, to, xa, ya, xb, yb, clippedFrom: ca, clippedTo: cb});
  }
  s.out.flows = drawn;
}

function drawInterval(g, s, iv, fill, stroke, label) {
  const a = Math.max(GUTTER, timeToX(s.view, s.W, iv.t0)), b = Math.min(s.W, timeToX(s.view, s.W, iv.t1));
  if (b < GUTTER || a > s.W) return;
  const top = s.header ? AXIS_H : 0;
  g.fillStyle = fill;
  g.fillRect(a, top, Math.max(1, b - a), s.H - top);
  g.strokeStyle = stroke;
  g.strokeRect(a + 0.5, top + 0.5, Math.max(1, b - a), s.H - top - 1);
  if (label && s.header) {
    const text = duration(Math.round(iv.t1 - iv.t0));
    g.fillStyle = stroke;
    g.fillRect(a, 0, Math.max(CHAR_W * text.length + 8, b - a), 14);
    g.fillStyle = colors.onAccent;
    g.fillText(text, a + 4, 11);
  }
}

// s: {W, H, view, bounds, rows, tile (prepareTile's), names, selectedId,
// hit ({id, ts, dur, track}: the search hit), pinned (Set of track ids),
// header (this canvas holds the axis's labels: the pinned rows' canvas),
// box ({t0, t1, y0, y1} being selected), timing ({t0, t1}), out (what was
// drawn is written here: ticks, counters, flows, hit, labels: each row's
// name as drawn, cut to the gutter)}.
export function drawTrace(g, s) {
  g.clearRect(0, 0, s.W, s.H);
  g.font = FONT;
  g.textBaseline = 'alphabetic';
  drawAxis(g, s, s.header);
  const rowsById = new Map();
  for (const row of s.rows) {
    if (row.kind === 'section') {
      g.fillStyle = colors.sectionBg;
      g.fillRect(0, row.y, s.W, row.h);
      g.fillStyle = colors.text;
      g.font = `600 ${FONT}`;
      g.fillText(`${row.collapsed ? '▸' : '▾'} ${row.title}${row.collapsed ? ` (${row.count} rows)` : ''}`, 6, row.y + 14);
      g.font = FONT;
      continue;
    }
    rowsById.set(row.id, row);
    g.fillStyle = colors.bg;
    g.fillRect(0, row.y, s.W, row.h);
    g.strokeStyle = colors.rowLine;
    g.beginPath();
    g.moveTo(0, row.y + row.h - 0.5);
    g.lineTo(s.W, row.y + row.h - 0.5);
    g.stroke();
    g.fillStyle = colors.label;
    const text = cut(row.label, GUTTER - 10 - PIN_W);  // (the whole name: the gutter's tooltip, or a wider gutter)
    g.fillText(text, 14, row.y + ROW_PAD + LANE_H - 5);
    (s.out.labels ??= {})[row.id] = text;
    // The pin (Perfetto's): filled on a pinned row, faint on the others.
    const pinned = s.pinned?.has(row.id);
    g.fillStyle = pinned ? colors.accent : colors.pin;
    g.fillText(pinned ? '●' : '○', GUTTER - PIN_W, row.y + ROW_PAD + LANE_H - 5);
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
  if (s.tile) {
    g.save();
    g.beginPath();
    g.rect(GUTTER, s.header ? AXIS_H : 0, s.W - GUTTER, s.H);
    g.clip();
    drawFlows(g, s, rowsById);
    g.restore();
  }
  drawHit(g, s, rowsById);
  if (s.timing) drawInterval(g, s, s.timing, colors.timingFill, colors.accent, true);
  if (s.box) {
    const a = timeToX(s.view, s.W, s.box.t0), b = timeToX(s.view, s.W, s.box.t1);
    g.strokeStyle = colors.accent;
    g.setLineDash([4, 3]);
    g.strokeRect(Math.min(a, b) + 0.5, Math.min(s.box.y0, s.box.y1) + 0.5, Math.abs(b - a), Math.abs(s.box.y1 - s.box.y0));
    g.setLineDash([]);
  }
  g.strokeStyle = colors.grid;
  g.beginPath();
  g.moveTo(GUTTER - 0.5, 0);
  g.lineTo(GUTTER - 0.5, s.H);
  g.stroke();
}
