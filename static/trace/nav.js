// The trace viewer's navigation, as Perfetto's: W/S zoom while held, faster
// the longer they are held (a tap: one step), A/D pan the same way; the
// view a search hit or a selection is framed in.

// A tap of W zooms in 2x; held, the zoom runs at ZOOM_START per second,
// rising to ZOOM_TOP per second over RAMP_S: a whole run of a minute down to
// one 10 µs kernel (~1e7) in about three seconds held. Panning: PAN_START
// to PAN_TOP view widths per second.
export const TAP_ZOOM = 2;
export const ZOOM_START = 8;
export const ZOOM_TOP = 256;
export const RAMP_S = 1;
export const TAP_PAN = 0.15;
export const PAN_START = 0.8;
export const PAN_TOP = 3;

// The rate at `held` seconds: from `start` to `top`, geometrically.
export function rateAt(start, top, held) {
  return start * (top / start) ** Math.min(1, held / RAMP_S);
}

// Keys held: zoom(factor) / pan(fraction) per frame until released. A
// keydown that is the browser's auto-repeat only keeps the key held.
export class KeyMotion {
  constructor({zoom, pan, now = () => performance.now(), frame = (f) => requestAnimationFrame(f)}) {
    this.zoom = zoom;
    this.pan = pan;
    this.now = now;
    this.frame = frame;
    this.held = new Map();  // key -> {since, last}
    this.running = false;
  }

  // True when `key` (lower case) is one of W/A/S/D.
  static handles(key) {
    return key === 'w' || key === 's' || key === 'a' || key === 'd';
  }

  down(key, repeat) {
    if (this.held.has(key)) return;
    const t = this.now();
    this.held.set(key, {since: t, last: t});
    if (!repeat) this.step(key, null);  // a tap's step, at once.
    if (!this.running) {
      this.running = true;
      this.frame(() => this.tick());
    }
  }

  up(key) { this.held.delete(key); }
  stop() { this.held.clear(); }

  step(key, dt) {
    if (key === 'w' || key === 's') {
      const f = dt === null ? TAP_ZOOM : rateAt(ZOOM_START, ZOOM_TOP, (this.now() - this.held.get(key).since) / 1000) ** dt;
      this.zoom(key === 'w' ? 1 / f : f);
    } else {
      const d = dt === null ? TAP_PAN : rateAt(PAN_START, PAN_TOP, (this.now() - this.held.get(key).since) / 1000) * dt;
      this.pan(key === 'a' ? -d : d);
    }
  }

  tick() {
    if (this.held.size === 0) {
      this.running = false;
      return;
    }
    const t = this.now();
    for (const [key, h] of this.held) {
      // The first ~150 ms of a hold is the tap's: motion starts after it.
      if (t - h.since > 150) this.step(key, Math.min(0.25, (t - Math.max(h.last, h.since + 150)) / 1000));
      h.last = t;
    }
    this.frame(() => this.tick());
  }
}

// The view that shows event `e` ({ts, dur}) at `share` of its width,
// centred (an instant: a 10 µs view).
export function frameEvent(e, share) {
  const span = Math.max(e.dur / share, e.dur > 0 ? 0 : 10000, 50);
  const mid = e.ts + e.dur / 2;
  return {t0: mid - span / 2, t1: mid + span / 2};
}
