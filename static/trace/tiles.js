// The trace viewer's loader: keeps one "tile" of /api/trace (about three
// viewport widths at the screen's resolution, as TF's streaming viewer
// fetches: tf-profiler-semantics.md §9.4) and says when the view has left
// it. Drawing never waits for it: the view draws from the tile it has, and
// the loader fetches a better one in the background, one request at a time.

// Refetch when the view's centre-doubled range leaves the tile, or when its
// pixels are coarser than this many screen pixels (events under a tile
// pixel stay folded). The store's pixels are powers of two ns, the least at
// least the asked resolution: under twice it, so a new tile always covers.
export const ZOOM_REFETCH = 2;
export const FETCH_WIDTHS = 3;
export const MAX_WIDTH_PX = 65536;

// True when `tile` can stand for `view` ({t0, t1, px}) as drawn.
export function covers(tile, view, bounds) {
  if (!tile) return false;
  const span = view.t1 - view.t0;
  // The range to keep loaded: the view, doubled about its centre, inside the trace.
  const lo = Math.max(bounds.first, view.t0 - span / 2);
  const hi = Math.min(bounds.last, view.t1 + span / 2);
  if (tile.t0 > lo || tile.t1 < Math.max(lo, hi)) return false;
  // (never finer than 1 ns a pixel: the store's grid stops there)
  return tile.ns_per_px <= Math.max(1, ZOOM_REFETCH * (span / view.px));
}

// The query for `view`: three viewport widths about it, at its resolution.
export function fetchRange(view) {
  const span = view.t1 - view.t0;
  const t0 = Math.max(0, Math.floor(view.t0 - span));
  const t1 = Math.ceil(view.t1 + span);
  const px = Math.max(1, Math.min(MAX_WIDTH_PX, Math.round(view.px * (t1 - t0) / span)));
  return {t0, t1: Math.max(t1, t0 + 1), width: px};
}

// One tile in hand, one request in flight; `get(params)` resolves to the
// /api/trace answer. `onTile(tile, ms)` follows every new tile.
export class TileLoader {
  constructor(get, onTile, onError) {
    this.get = get;
    this.onTile = onTile;
    this.onError = onError;
    this.tile = null;
    this.inflight = null;
    this.next = null;  // the newest view asked for while one was in flight.
    this.generation = 0;  // bumped by reset(): answers to older requests are dropped.
  }

  // Forgets the tile in hand and what is asked (another trace now: a
  // fleet view's other host); a request in flight is let go.
  reset() {
    this.generation++;
    this.tile = null;
    this.inflight = null;
    this.next = null;
  }

  // Asks for `view` unless the tile covers it (or `force`: new events).
  // With no view: the whole trace at `px` pixels (the first tile).
  want(view, bounds, force = false, px = 1000) {
    if (view && !force && covers(this.tile, view, bounds)) return;
    if (this.inflight) {
      this.next = {view, bounds, force, px};
      return;
    }
    const q = view ? fetchRange(view) : {width: Math.min(MAX_WIDTH_PX, Math.round(px))};
    const started = performance.now();
    const generation = this.generation;
    this.inflight = this.get(q).then((tile) => {
      if (generation !== this.generation) return;
      this.tile = tile;
      this.onTile(tile, performance.now() - started);
    }, (e) => generation === this.generation && this.onError(e)).finally(() => {
      if (generation !== this.generation) return;
      this.inflight = null;
      const n = this.next;
      this.next = null;
      if (n) this.want(n.view, n.bounds, n.force, n.px);
    });
  }
}
