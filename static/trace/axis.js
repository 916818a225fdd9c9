// The trace viewer's time axis: ticks at round steps of time since the
// trace's start, never before it (no negative times), in the unit the view
// reads best in (s, ms, µs, ns), with as many decimals as the step needs,
// and spaced so that no two labels overlap. Pure but for the measuring.

const UNITS = [[1e9, 's'], [1e6, 'ms'], [1e3, 'µs'], [1, 'ns']];
const GAP_PX = 14;  // between one label's end and the next one's start.

// A round step: 1, 2 or 5 times a power of ten, at least `ns` (and 1 ns).
export function niceStep(ns) {
  const p = 10 ** Math.floor(Math.log10(Math.max(ns, 1)));
  for (const m of [1, 2, 5, 10]) if (m * p >= ns) return m * p;
  return 10 * p;
}

// The unit of a label: the largest that the view's latest time reaches
// (so a view 40 s into the trace reads "40.0000012 s", not 40,000,001.2 µs).
export function unitFor(maxNs, stepNs) {
  for (const [scale, name] of UNITS) if (Math.max(maxNs, stepNs) >= scale) return {scale, name};
  return {scale: 1, name: 'ns'};
}

// `t` ns since the start, in `unit`, with the decimals `step` needs.
export function timeLabel(t, unit, step) {
  const decimals = Math.max(0, Math.min(9, Math.round(Math.log10(unit.scale / step) + 0.49)));
  return `${(t / unit.scale).toFixed(decimals)} ${unit.name}`;
}

// Ticks for `view` ({t0, t1} ns, absolute) over `px` pixels starting at
// `x0`, times since `origin` (the trace's first ns). `measure(text)`: a
// label's width in px. Returns [{t (ns since origin), x, label, w}].
export function axisTicks(view, origin, x0, px, measure) {
  const span = view.t1 - view.t0;
  if (!(span > 0) || px <= 0) return [];
  const a = Math.max(0, view.t0 - origin), b = view.t1 - origin;
  if (b < 0) return [];
  const toX = (rel) => x0 + (rel + origin - view.t0) * px / span;
  let step = niceStep(span / Math.max(1, px / 80));
  for (let tries = 0; tries < 12; tries++) {
    const unit = unitFor(b, step);
    const ticks = [];
    for (let k = Math.ceil(a / step); k * step <= b && ticks.length < 200; k++) {
      const t = k * step;
      const label = timeLabel(t, unit, step);
      ticks.push({t, x: toX(t), label, w: measure(label)});
    }
    const widest = Math.max(0, ...ticks.map((k) => k.w));
    if (widest + GAP_PX <= step * px / span || ticks.length <= 1) return ticks;
    step = niceStep(step * 1.5);  // the next round step: 1 -> 2 -> 5 -> 10.
  }
  return [];
}
