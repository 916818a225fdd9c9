// Charts: uPlot (from npm, copied to static/vendor/ by scripts/setup.sh) for
// the time series, and a few small canvas/HTML drawings where uPlot has no
// chart type (pies, horizontal bars). Each chart is made once and given new
// data on every publication (setData), never rebuilt.
import {esc} from './format.js';

// uPlot's minified build defines the global `uPlot` (index.html loads it
// before the modules run).
const uPlot = globalThis.uPlot ?? null;
if (!uPlot) console.error('liveprof: uPlot is missing (static/vendor/uPlot.iife.min.js); run ./scripts/setup.sh');

function missing(el) {
  el.innerHTML = '<p class="note">Charts need static/vendor/uPlot.iife.min.js: run ./scripts/setup.sh.</p>';
  return null;
}

// Axis text, ticks and grid in the page's colours (style.css's variables:
// readable in light and in dark mode).
function themed(opts) {
  const css = getComputedStyle(document.documentElement);
  const fg = css.getPropertyValue('--fg').trim() || '#1d2329';
  const line = css.getPropertyValue('--line').trim() || '#dde2e7';
  const axes = (opts.axes ?? [{}, {}]).map((a) => ({stroke: fg, ...a, grid: {stroke: line, width: 1, ...a.grid},
    ticks: {stroke: line, width: 1, ...a.ticks}}));
  return {...opts, axes};
}

// A uPlot that follows its container's width.
function make(el, opts, data) {
  opts = themed(opts);
  const width = Math.max(200, el.clientWidth || 600);
  let observer = null;
  const hooks = {...opts.hooks, destroy: [...(opts.hooks?.destroy ?? []), () => observer?.disconnect()]};
  const plot = new uPlot({width, ...opts, hooks}, data, el);
  observer = new ResizeObserver(() => {
    const w = el.clientWidth;
    if (w > 0 && Math.abs(w - plot.width) > 1) plot.setSize({width: w, height: opts.height});
  });
  observer.observe(el);
  return plot;
}

// Whole steps on the x axis.
const STEP_INCRS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 1e5, 1e6];

// Stacked bars: one bar per x, one stacked segment per category, the first
// category at the bottom. The legend and hover show each segment's own value.
export class StackedBars {
  // categories: [{label, color}]; xLabel, yLabel; fmt(v) for the legend.
  constructor(el, {categories, height = 260, xLabel = '', yLabel = '', fmt = (v) => v}) {
    this.el = el;
    this.categories = categories;
    this.raw = categories.map(() => []);
    if (!uPlot) return void missing(el);
    const bars = uPlot.paths.bars({size: [0.85, 40], align: 0});
    // Drawn top segment first: each series is filled from 0 to its cumulative
    // value, and the lower categories (drawn later) paint over it.
    const series = [{label: xLabel}];
    for (let i = categories.length - 1; i >= 0; i--) {
      const c = categories[i];
      series.push({
        label: c.label,
        stroke: c.color,
        fill: c.color,
        width: 0,
        paths: bars,
        points: {show: false},
        value: (u, v, s, idx) => (idx === null || idx === undefined ? '—' : fmt(this.raw[i][idx])),
      });
    }
    this.plot = make(el, {
      height,
      series,
      scales: {x: {time: false}, y: {range: (u, min, max) => [0, max > 0 ? max * 1.05 : 1]}},
      axes: [{label: xLabel, incrs: STEP_INCRS}, {label: yLabel, size: 60}],
      legend: {live: true},
      // Every step chart follows one cursor: hover step N on one, see it on all.
      cursor: {points: {show: false}, sync: {key: 'steps'}},
    }, [[], ...categories.map(() => [])]);
  }

  destroy() {
    if (this.plot) this.plot.destroy();
    this.plot = null;
  }

  // xs: the x values; values[c][i]: category c at xs[i].
  setData(xs, values) {
    this.raw = values;
    if (!this.plot) return;
    const n = xs.length;
    const cumulative = [];
    const sum = new Float64Array(n);
    for (let c = 0; c < this.categories.length; c++) {
      for (let i = 0; i < n; i++) sum[i] += values[c][i] ?? 0;
      cumulative.push(Array.from(sum));
    }
    cumulative.reverse();
    this.plot.setData([xs, ...cumulative]);
    // Without a hover, the legend shows the newest step.
    if (n && this.plot.cursor.idx == null) this.plot.setLegend({idx: n - 1});
  }
}

// Lines over time, with an optional second (right) axis.
// series: [{label, color, scale: 'y'|'right', fmt, width, show}]
// Tick labels with as many decimals as their spacing needs (uPlot's own
// repeated "-0.004" five times over a 5 ms span).
export function plainTicks(vals) {
  if (vals.length < 2) return vals.map((v) => String(v));
  const step = Math.abs(vals[1] - vals[0]);
  let decimals = 0;
  while (decimals < 9 && Math.abs(step * 10 ** decimals - Math.round(step * 10 ** decimals)) > 1e-6) decimals++;
  return vals.map((v) => (Object.is(+v.toFixed(decimals), -0) ? 0 : v).toFixed(decimals));
}

// left: {label, values, incrs, range}: the y axis's tick labels, tick
// increments and range function (uPlot's); marks: horizontal lines drawn
// across the plot where their value is on the y scale (setMarks).
export class Lines {
  constructor(el, {series, height = 280, xLabel = '', left = {}, right = null}) {
    this.marks = [];
    if (!uPlot) return void missing(el);
    const s = [{label: xLabel}];
    for (const d of series) {
      s.push({label: d.label, stroke: d.color, width: d.width ?? 1.5, scale: d.scale ?? 'y', show: d.show ?? true,
        value: (u, v) => (v === null || v === undefined ? '—' : d.fmt ? d.fmt(v) : v)});
    }
    // (the labels drawn are kept on the element: canvas text is not in the DOM)
    const xTicks = (u, vals) => {
      const t = plainTicks(vals);
      el.dataset.xTicks = JSON.stringify(t);
      return t;
    };
    const axes = [{label: xLabel, values: xTicks},
      {label: left.label ?? '', size: 80, values: left.values, incrs: left.incrs}];
    const scales = {x: {time: false}};
    if (left.range) scales.y = {range: left.range};
    if (right) {
      axes.push({scale: 'right', side: 1, label: right.label, size: 60, grid: {show: false}, values: right.values});
      scales.right = {range: right.range};
    }
    const hooks = {draw: [(u) => this.drawMarks(u)]};
    this.plot = make(el, {height, series: s, axes, scales, hooks, cursor: {points: {size: 6}}},
      [[], ...series.map(() => [])]);
  }

  setData(data) {
    if (this.plot) this.plot.setData(data);
  }

  // Shows or hides series i (0 = the first of `series`).
  show(i, on) {
    if (this.plot && this.plot.series[i + 1].show !== on) this.plot.setSeries(i + 1, {show: on});
  }

  // marks: [{value, label, color}] on the y scale; redrawn with the data.
  setMarks(marks) {
    this.marks = marks;
    if (this.plot) this.plot.redraw(false);
  }

  drawMarks(u) {
    const {ctx} = u;
    const {left, top, width, height} = u.bbox;
    for (const m of this.marks) {
      const y = Math.round(u.valToPos(m.value, 'y', true));
      if (!(y >= top && y <= top + height)) continue;
      ctx.save();
      ctx.strokeStyle = m.color;
      ctx.fillStyle = m.color;
      ctx.lineWidth = 1.5 * devicePixelRatio;
      ctx.setLineDash([6 * devicePixelRatio, 4 * devicePixelRatio]);
      ctx.beginPath();
      ctx.moveTo(left, y);
      ctx.lineTo(left + width, y);
      ctx.stroke();
      ctx.font = `${11 * devicePixelRatio}px sans-serif`;
      ctx.textAlign = 'right';
      ctx.fillText(m.label, left + width - 4, y - 4 * devicePixelRatio);
      ctx.restore();
    }
  }
}

// Byte axes in binary units: tick steps are powers of two (…, 64 MiB,
// 128 MiB, 256 MiB, …) and labels use one unit, chosen by the axis's top.
export const BYTE_INCRS = Array.from({length: 51}, (_, i) => 2 ** i);
const BYTE_UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];

export function byteUnit(max) {
  let u = 0;
  while (u < BYTE_UNITS.length - 1 && max >= 1024 ** (u + 1)) u++;
  return u;
}

// Tick labels for `vals` on an axis whose top is `max`.
export function byteTicks(vals, max) {
  const u = byteUnit(max);
  return vals.map((v) => `${+(v / 1024 ** u).toFixed(3)} ${BYTE_UNITS[u]}`);
}

// The top of a byte axis for data up to `max`: 10 % of headroom, rounded up
// to a quarter of the power of two below it (so the top is a tick).
export function byteAxisTop(max) {
  if (!(max > 0)) return 1024;
  const target = max * 1.1;
  const step = Math.max(1, 2 ** Math.floor(Math.log2(target)) / 4);
  return Math.ceil(target / step) * step;
}

// Vertical bars of one series (a histogram).
export class Bars {
  constructor(el, {label, color, height = 220, xLabel = '', yLabel = '', xfmt = (v) => v}) {
    if (!uPlot) return void missing(el);
    this.plot = make(el, {
      height,
      series: [{label: xLabel, value: (u, v) => (v === null ? '—' : xfmt(v))},
        {label, stroke: color, fill: color, width: 0, paths: uPlot.paths.bars({size: [0.9, 60], align: 1}), points: {show: false}}],
      scales: {x: {time: false}},
      axes: [{label: xLabel, values: (u, vals) => vals.map(xfmt)}, {label: yLabel, size: 50}],
    }, [[], []]);
  }

  setData(xs, ys) {
    if (this.plot) this.plot.setData([xs, ys]);
  }
}

export const PALETTE = ['#4e79a7', '#f28e2b', '#59a14f', '#e15759', '#76b7b2', '#edc948', '#b07aa1',
  '#ff9da7', '#9c755f', '#bab0ac'];

// A pie of the biggest slices (the rest summed as "other"), with its legend.
// slices: [{label, value}]
export function pie(el, title, slices, {top = 8, fmt = (v) => v} = {}) {
  const sorted = slices.filter((s) => s.value > 0).sort((a, b) => b.value - a.value);
  const shown = sorted.slice(0, top);
  const rest = sorted.slice(top).reduce((a, s) => a + s.value, 0);
  if (rest > 0) shown.push({label: 'other', value: rest});
  const total = shown.reduce((a, s) => a + s.value, 0);
  if (!el.firstChild) {
    el.innerHTML = `<h4>${esc(title)}</h4><canvas width="180" height="180"></canvas><ul class="legend"></ul>`;
  }
  const canvas = el.querySelector('canvas');
  const ctx = canvas.getContext('2d');
  ctx.clearRect(0, 0, canvas.width, canvas.height);
  let angle = -Math.PI / 2;
  shown.forEach((s, i) => {
    const a = total > 0 ? (s.value / total) * 2 * Math.PI : 0;
    ctx.beginPath();
    ctx.moveTo(90, 90);
    ctx.arc(90, 90, 85, angle, angle + a);
    ctx.closePath();
    ctx.fillStyle = PALETTE[i % PALETTE.length];
    ctx.fill();
    angle += a;
  });
  el.querySelector('.legend').innerHTML = shown.length
    ? shown.map((s, i) => `<li><i style="background:${PALETTE[i % PALETTE.length]}"></i>${esc(s.label)} <b>${
      (100 * s.value / total).toFixed(1)}%</b> <span class="muted">${esc(fmt(s.value))}</span></li>`).join('')
    : '<li class="muted">nothing yet</li>';
}

// Horizontal bars: [{label, value, text}] scaled to the largest.
export function barList(el, items, color = PALETTE[0]) {
  const max = Math.max(1e-12, ...items.map((i) => i.value));
  el.innerHTML = items.length
    ? items.map((i) => `<div class="bar-row"><span class="bar-label" title="${esc(i.label)}">${esc(i.label)}</span>
        <span class="bar-track"><span class="bar-fill" style="width:${(100 * i.value / max).toFixed(2)}%;background:${color}"></span></span>
        <span class="bar-value">${esc(i.text)}</span></div>`).join('')
    : '<p class="muted">nothing yet</p>';
}
