// A counter row of the trace viewer (a GPU's Memory in use, a counter
// recorded with liveprof.counter / LIVEPROF_COUNTER): a step chart, as
// Perfetto draws counter tracks. Per tile pixel its samples' largest value
// (the bar of that pixel) and the last one, held until the next sample; a
// line along the held levels; labels, in a band above the plot (never over
// the line): the scale's top (and bottom, when below 0) and the value in force
// at the view's right edge. What it drew goes to s.out.counters.
import {bytes, num} from '../format.js';
import {GUTTER, ROW_PAD} from './layout.js';
import {colors} from './theme.js';

const LABEL_BAND = 11;  // px above the plot

export function counterText(data, v) {
  return data.unit === 'bytes' ? bytes(v) : num(v, Math.abs(v) >= 100 || v === Math.round(v) ? 0 : 3);
}

// The levels in force over the view: [{ts, max, last}] from the held sample and the tile's.
function levels(data) {
  const out = [];
  if (data.held) out.push({ts: data.held.ts, max: data.held.value, last: data.held.value, held: true});
  for (const f of data.summaries) out.push({ts: f.ts, max: f.max, last: f.last});
  return out;
}

export function drawCounter(g, s, row, data) {
  const {view, W} = s;
  const x0 = GUTTER, scale = (W - GUTTER) / (view.t1 - view.t0);
  const list = levels(data);
  if (list.length === 0) return;
  // The scale: from 0 (or the lowest value, if below) to the largest, over the tile.
  let hi = 0, lo = 0;
  for (const f of list) hi = Math.max(hi, f.max, f.last), lo = Math.min(lo, f.last, f.max);
  // A band on top for the labels (the scale's max, the value at the end): the plot below it, so no label covers the line.
  const band = LABEL_BAND;
  const top = row.y + ROW_PAD + 2 + band, h = row.h - 2 * ROW_PAD - 2 - band;
  const y = (v) => top + h - (hi > lo ? (v - lo) / (hi - lo) : 0) * h;
  const w = Math.max(1, s.tile.nspp * scale);
  const xOf = (ts) => x0 + (ts - view.t0) * scale;
  const bar = (left, right, v) => {  // from 0 to v over [left, right), clipped to the timeline.
    const l = Math.max(left, x0), r = Math.min(right, W);
    if (r > l) g.fillRect(l, Math.min(y(v), y(0)), r - l, Math.max(1, Math.abs(y(0) - y(v))));
  };
  g.fillStyle = colors.counterFill;
  const drawn = [];
  for (let i = 0; i < list.length; i++) {
    const f = list[i];
    const a = f.held ? xOf(s.tile.t0) : xOf(f.ts);
    const b = i + 1 < list.length ? xOf(list[i + 1].ts) : W;
    if (!f.held) bar(a, a + w, f.max);  // its pixel: the largest.
    bar(f.held ? a : a + w, b, f.last);  // then the last, held until the next sample.
    if (a <= W && b >= x0) drawn.push({ts: f.ts, x: a, max: f.max, last: f.last, held: !!f.held});
  }
  // The line along the levels (Perfetto's step line).
  g.strokeStyle = colors.counterLine;
  g.lineWidth = 1;
  g.beginPath();
  let started = false;
  for (let i = 0; i < list.length; i++) {
    const f = list[i];
    const a = Math.max(x0, f.held ? xOf(s.tile.t0) : xOf(f.ts));
    const b = Math.min(W, i + 1 < list.length ? xOf(list[i + 1].ts) : W);
    if (b < x0 || a > W) continue;
    const yy = Math.round(y(f.last)) + 0.5;
    if (!started) g.moveTo(a, yy), started = true;
    else g.lineTo(a, yy);
    g.lineTo(b, yy);
  }
  g.stroke();
  // Labels, in the band: the scale's max (and min, when below 0) at the
  // left, the value in force at the view's right edge at the right.
  let atEnd = null;
  for (const f of list) if (f.ts <= view.t1) atEnd = f;
  const boxes = [];
  let left = x0 + 4;
  const label = (text, right) => {
    const tw = g.measureText(text).width;
    const x = right ? W - tw - 5 : left, yy = top - 2;
    if (!right) left += tw + 10;
    g.fillStyle = colors.labelBand;
    g.fillRect(x - 3, top - band - 1, tw + 6, band);
    g.fillStyle = colors.label;
    g.fillText(text, x, yy);
    boxes.push({x0: x - 3, x1: x + tw + 3, y0: top - band - 1, y1: top - 1});
  };
  label(`max ${counterText(data, hi)}`, false);
  if (lo < 0) label(`min ${counterText(data, lo)}`, false);
  if (atEnd) label(`at the end ${counterText(data, atEnd.last)}`, true);
  (s.out.counters ??= {})[row.id] = {hi, lo, top, h, points: drawn, last: atEnd?.last ?? null, labels: boxes};
}
