// What trace_nav_test.mjs computes on its own, to check the viewer against:
// the nesting depth by its definition, the lanes folded pixels need, an
// axis label read back in ns, and a canvas pixel.

// Slices [id, ts, dur, ...]: per id, the longest chain of slices each
// containing the next (starting no later, ending no earlier, and first in
// the store's order: by start, the longer first, by id). An instant at a
// slice's end is inside it; a slice starting at another's end is not.
export function nestingDepths(slices) {
  const v = [...slices].sort((a, b) => a[1] - b[1] || b[2] - a[2] || a[0] - b[0]);
  const depth = new Map();
  for (let i = 0; i < v.length; i++) {
    let d = 0;
    const end = v[i][1] + v[i][2];
    for (let p = 0; p < i; p++) {
      const pe = v[p][1] + v[p][2];
      if (pe >= end && !(pe === v[i][1] && v[i][2] !== 0)) d = Math.max(d, depth.get(v[p][0]) + 1);
    }
    depth.set(v[i][0], d);
  }
  return depth;
}

// The lanes a row's folded pixels need: a pixel's events go in the lane
// below the deepest slice that covers the whole pixel.
export function foldedLanes(raw, track, depths) {
  let lanes = 1;
  for (const [px] of track.summaries) {
    const lo = raw.t0 + px * raw.ns_per_px, hi = lo + raw.ns_per_px;
    let lane = 0;
    for (const s of track.slices) if (s[1] <= lo && s[1] + s[2] >= hi) lane = Math.max(lane, depths.get(s[0]) + 1);
    lanes = Math.max(lanes, lane + 1);
  }
  return lanes;
}

// The lanes the store's former nesting gave (for the record): a stack
// popped only when its top had ended, so each op overlapping the next
// by a rounding went a lane down.
export function stackLanes(slices) {
  const v = [...slices].sort((a, b) => a[1] - b[1] || b[2] - a[2] || a[0] - b[0]);
  const open = [];
  let lanes = 0;
  for (const [, ts, dur] of v) {
    while (open.length && open.at(-1) <= ts && !(dur === 0 && open.at(-1) === ts)) open.pop();
    lanes = Math.max(lanes, open.length + 1);
    open.push(ts + dur);
  }
  return lanes;
}

const SCALE = {s: 1e9, ms: 1e6, 'µs': 1e3, ns: 1};
// "40.0000012 s" -> ns.
export function parseTick(label) {
  const m = label.match(/^(-?[\d.]+) (s|ms|µs|ns)$/);
  if (!m) throw new Error(`axis label '${label}' is not a time`);
  return Number(m[1]) * SCALE[m[2]];
}

// The [r, g, b, a] at css pixel (x, y) of the canvas `selector`.
export function pixel(page, selector, x, y) {
  return page.evaluate(([sel, x, y]) => {
    const c = document.querySelector(sel);
    const dpr = window.devicePixelRatio || 1;
    return [...c.getContext('2d').getImageData(Math.floor(x * dpr), Math.floor(y * dpr), 1, 1).data];
  }, [selector, x, y]);
}
