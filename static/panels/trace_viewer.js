// The trace viewer: every event the server keeps, drawn on a canvas from
// the tile in hand (trace/tiles.js) while a better one loads. Input as in
// Perfetto's UI: W/S zoom and A/D pan, faster while held (trace/nav.js);
// the wheel (or ctrl+wheel, a pinch) zooms about the mouse, shift+wheel
// pans; 1-4 pick the mouse's mode (select, pan, zoom, timing); F frames the
// selection or the search hit; 0 the whole trace; Esc clears; Enter /
// Shift+Enter step through the search's matches (trace/search.js); ? the
// keys. A click selects one event (its details and flows), a drag in
// select mode sums up every event of a box (the store's, /api/trace/area,
// as Perfetto's area selection), the timing tool marks an interval
// and says its length; the dot left of a row's timeline pins it to the top
// (kept there while the page scrolls). "Follow" tails the newest events at
// the current zoom. On a fleet view (liveprof fleet) it shows one host's
// trace, picked in its bar or by the hash (#trace_viewer?host=H), every
// request forwarded to that host's agent (trace/source.js). The labels'
// gutter is as wide as its handle is dragged (trace/gutter.js); the canvas
// draws in the page's light or dark theme (trace/theme.js).
import {bytes, duration, esc, int, num} from '../format.js';
import {counterText, drawTrace, prepareTile, xToTime} from '../trace/draw.js';
import {AXIS_H, GUTTER, MAX_LANES, PIN_W, laneAt, layoutPinned, layoutRows, rowAt} from '../trace/layout.js';
import {KeyMotion, frameEvent} from '../trace/nav.js';
import {mountSearch, noMatch} from '../trace/search.js';
import {sumArea} from '../trace/area.js';
import {mountGutter} from '../trace/gutter.js';
import {watchTheme} from '../trace/theme.js';
import {TileLoader, covers} from '../trace/tiles.js';
import {fleetSource, localSource, mountHostPicker} from '../trace/source.js';

const MODES = ['select', 'pan', 'zoom', 'timing'];
const MIN_SPAN_NS = 200;
const HIT_SHARE = 1 / 3;   // a search hit spans a third of the view.
const FIT_SHARE = 0.8;     // F: the selection spans 80 % of it.
const MAX_SAMPLES = 2000;
const HELP = [['W / S', 'zoom in / out (hold: faster)'], ['A / D', 'pan left / right (hold: faster)'],
  ['wheel, ctrl+wheel', 'zoom about the mouse'], ['shift+wheel', 'pan'], ['F', 'frame the selection or search hit'],
  ['0', 'the whole trace'], ['1-4', 'mouse: select, pan, zoom, timing'], ['Enter / Shift+Enter', 'next / previous match'],
  ['Esc', 'leave the search box; clear the selection'], ['●/○ left of a row', 'pin the row to the top'], ['?', 'these keys']];
const FOLLOW_MS = 500;
const RETRY_MS = 3000;  // no tile yet and the host's agent did not answer (503, 504): asked again.

export default {
  id: 'trace_viewer',
  title: 'Trace viewer',
  topics: [],

  mount(root, ctx) {
    root.innerHTML = `<section class="card trace-card">
      <div class="trace-bar">
        <label class="trace-host" hidden title="the host whose trace this is: its agent answers, through this fleet view">host
          <select class="host-pick" aria-label="host"></select></label>
        <span class="trace-modes" role="group" aria-label="mouse mode">${MODES.map((m, i) =>
          `<button data-mode="${m}" title="${m} (${i + 1})">${i + 1} ${m}</button>`).join('')}</span>
        <label><input type="checkbox" class="follow"> follow</label>
        <button class="fit" title="the whole trace (0)">whole trace</button>
        <input type="search" class="search" placeholder="find event by name" aria-label="find event by name">
        <button class="prev" title="previous match (Shift+Enter)">◀</button><button class="next" title="next match (Enter)">▶</button>
        <span class="search-count muted" aria-live="polite"></span>
        <a class="export" download="liveprof-trace.json.gz" title="the events in view as Chrome trace JSON">export view</a>
        <button class="help-button" title="keys (?)">?</button>
        <span class="spacer"></span><span class="trace-status muted"></span>
      </div>
      <div class="trace-help hidden"><table class="kv">${HELP.map(([k, v]) =>
        `<tr><th>${esc(k)}</th><td>${esc(v)}</td></tr>`).join('')}</table></div>
      <div class="trace-canvas-box"><canvas class="trace-head" aria-label="time axis and pinned rows"></canvas>
        <canvas class="trace-canvas" tabindex="0" aria-label="trace timeline"></canvas>
        <div class="trace-tip hidden"></div></div>
      <div class="trace-details" aria-live="polite"><p class="muted">Click an event for its details; drag to sum up a
        box of events; W/S zoom, A/D pan, wheel zooms, F frames the selection, 1-4 mouse mode, ? all keys.</p></div>
    </section>`;
    const $ = (s) => root.querySelector(s);
    const canvas = $('.trace-canvas');
    const g = canvas.getContext('2d');
    const head = $('.trace-head');  // the axis and the pinned rows, on top while the page scrolls.
    const gh = head.getContext('2d');
    const tip = $('.trace-tip');
    const detailsHelp = $('.trace-details').innerHTML;  // what the details say before a click

    const st = {
      view: null,            // {t0, t1} ns
      bounds: {first: 0, last: 1},
      tile: null,            // prepareTile's
      tracks: new Map(),     // id -> the answer's track (name, type, device, os_id)
      lanes: new Map(),      // id -> lanes the tile in hand needs
      collapsed: new Set(),
      pinned: new Set(),     // track ids, in the order pinned.
      layout: {rows: [], height: 100},     // the rows' canvas
      pinLayout: {rows: [], height: AXIS_H},  // the header's: the axis, then the pinned rows
      hit: null,             // the search hit: {id, ts, dur, track, name}
      selected: null,        // the selected event as /api/trace/event gave it
      out: {}, outHead: {},  // what the last frame drew (draw.js): ticks, counters, flows, hit
      mode: 'select',
      follow: false,
      selectedId: null,
      timing: null,
      box: null,
      drag: null,
      mouse: null,           // the last {x, y} over the canvas
      W: 800,
      events: 0,
      dropped: 0,
      loadMs: 0,
      tilesVia: {ws: 0, http: 0},  // how the tiles came: the WebSocket, or /api/trace
      query: null,
      inputAt: null,         // the first input not yet drawn with its own data
      inputFramed: false,    // and whether a frame has followed it
      fitting: false,        // the next tile is the whole trace: show it whole
      samples: {frame: [], data: []},  // input -> drawn frame; input -> frame with fresh data (ms)
      error: null,           // why the last tile did not come (shown in the status), until one does
      note: null,            // what the status says while there is no tile (a fleet view waiting for a host)
    };
    // This server's store, or on a fleet view the host's (trace/source.js).
    let source = localSource(ctx);
    let fleet = null;  // on a fleet view: whether known yet (null), true / false

    const loader = new TileLoader(async (q) => {
      const from = source;
      const {tile, via} = await from.tile(q);
      if (from === source) {  // (else another host's: the loader drops it)
        st.tilesVia[via]++;
        st.query = q;  // the tile in hand's query (tests ask /api/trace the same)
      }
      return tile;
    }, (tile, ms) => {
      st.error = null;
      st.loadMs = ms;
      st.bounds = {first: tile.first_ns, last: Math.max(tile.last_ns, tile.first_ns + 1)};
      st.events = tile.events;
      st.dropped = tile.dropped_events;
      for (const t of tile.tracks) if (!st.tracks.has(t.track)) st.tracks.set(t.track, t);
      st.tile = prepareTile(tile);
      for (const [id, n] of st.tile.lanesNeeded) st.lanes.set(id, n);
      if (!st.view || st.fitting) st.view = {t0: st.bounds.first, t1: st.bounds.last};
      st.fitting = false;
      if (!tile.events) setTimeout(fit, 1000);  // nothing stored yet: look again.
      st.fresh = true;
      relayout();
      request();
    }, (e) => {
      // (text only: the message may be an agent's, from the network)
      st.error = `could not load the trace${source.host ? ` of ${source.host}` : ''}: ${e.message}`;
      const from = source;
      if (!st.tile && (e.status === 503 || e.status === 504)) {
        setTimeout(() => from === source && !st.tile && !loader.inflight && fit(), RETRY_MS);
      }
      schedule();
    });

    // ---- view changes ----

    function px() { return Math.max(1, st.W - GUTTER); }
    function request(force = false) {
      if (st.view) loader.want({t0: st.view.t0, t1: st.view.t1, px: px()}, st.bounds, force);
    }
    // An input's time, for the latency samples (the first one not yet drawn with its data).
    function markInput() {
      if (st.inputAt !== null) return;
      st.inputAt = performance.now();
      st.inputFramed = false;
    }
    // The view, kept inside the trace as Perfetto keeps it: never wider
    // than the trace, never before its start or past its end.
    function setView(t0, t1) {
      let span = Math.max(MIN_SPAN_NS, t1 - t0);
      const {first, last} = st.bounds;
      span = Math.min(span, Math.max(last - first, MIN_SPAN_NS));
      let a = (t0 + t1) / 2 - span / 2;
      a = Math.max(first, Math.min(a, last - span));
      st.view = {t0: a, t1: a + span};
      markInput();
      request();
      schedule();
    }
    function zoom(factor, atX) {
      if (!st.view) return;
      const x = atX ?? (GUTTER + px() / 2);
      const t = xToTime(st.view, st.W, x);
      setView(t - (t - st.view.t0) * factor, t + (st.view.t1 - t) * factor);
    }
    function pan(fraction) {
      if (!st.view) return;
      const d = (st.view.t1 - st.view.t0) * fraction;
      setView(st.view.t0 + d, st.view.t1 + d);
    }
    // The whole trace as it is now: asks the server (the bounds in hand are
    // those of the last tile, and events keep coming).
    function fit() {
      if (fleet !== false && !source.host) return;  // (not known yet which trace: its first tile comes then)
      st.fitting = true;
      markInput();
      loader.want(null, st.bounds, true, px());
    }

    // ---- drawing ----

    function relayout() {
      st.pinLayout = layoutPinned(st.tracks, st.lanes, st.pinned, AXIS_H);
      st.layout = layoutRows(st.tracks, st.lanes, st.collapsed, st.pinned, 0);
      schedule();
    }
    function togglePin(id) {
      if (st.pinned.has(id)) st.pinned.delete(id);
      else st.pinned.add(id);
      relayout();
    }
    let frame = 0;
    function schedule() { if (!frame) frame = requestAnimationFrame(draw); }
    // The page's theme, read again when the system's changes; the gutter's width, dragged.
    watchTheme($('.trace-canvas-box'), () => schedule());
    const gutter = mountGutter($('.trace-canvas-box'), {width: () => st.W, onChange: () => {
      request();
      schedule();
    }});
    // A canvas `c` sized W x H css px at the screen's resolution.
    function size(c, W, H, dpr) {
      if (c.width !== Math.round(W * dpr) || c.height !== Math.round(H * dpr)) {
        c.width = Math.round(W * dpr);
        c.height = Math.round(H * dpr);
        c.style.width = `${W}px`;
        c.style.height = `${H}px`;
      }
    }
    function draw() {
      frame = 0;
      const dpr = window.devicePixelRatio || 1;
      const W = Math.max(300, $('.trace-canvas-box').clientWidth);
      const H = Math.max(1, Math.min(st.layout.height, 16000));
      const HH = Math.min(st.pinLayout.height + (st.pinned.size ? 4 : 0), 4000);
      size(canvas, W, H, dpr);
      size(head, W, HH, dpr);
      head.style.top = `${document.querySelector('header')?.offsetHeight ?? 0}px`;
      if (W !== st.W) {
        st.W = W;
        gutter.fit();  // (within the new width)
        request();
      }
      if (st.view) {
        const common = {W, view: st.view, bounds: st.bounds, tile: st.tile, names: st.tile?.names ?? new Map(),
          selectedId: st.selectedId, timing: st.timing, hit: st.hit ?? st.selected, pinned: st.pinned, sliceName};
        labelSteps();
        st.out = {};
        st.outHead = {};
        g.setTransform(dpr, 0, 0, dpr, 0, 0);
        drawTrace(g, {...common, H, rows: st.layout.rows, box: st.box, header: false, out: st.out});
        gh.setTransform(dpr, 0, 0, dpr, 0, 0);
        drawTrace(gh, {...common, H: HH, rows: st.pinLayout.rows, header: true, out: st.outHead});
      }
      const now = performance.now();
      if (st.inputAt !== null) {
        if (!st.inputFramed) push(st.samples.frame, now - st.inputAt);  // its first frame, from the tile in hand
        st.inputFramed = true;
        // Drawn from a tile that covers the view at its resolution: the input's data is in.
        if (st.tile && !loader.inflight && covers(loader.tile, {...st.view, px: px()}, st.bounds)) {
          push(st.samples.data, now - st.inputAt);
          st.inputAt = null;
        }
      }
      st.fresh = false;
      drawStatus();
      canvas.dataset.drawn = String(Number(canvas.dataset.drawn ?? 0) + 1);
      $('.trace-help').classList.toggle('hidden', !st.help);
    }
    // A replay's later loops number their ProfilerStep#N spans on (the
    // pages' step numbers): each such span wide enough for a label is named
    // as /api/trace/event names it, ProfilerStep#<N + the loop's shift>.
    const stepLabels = new Map();  // id -> its name; null while asked
    function labelSteps() {
      if (!st.tile || !st.view) return;
      const scale = (st.W - GUTTER) / (st.view.t1 - st.view.t0);
      let asked = 0;
      for (const [, d] of st.tile.tracks) {
        for (const sl of d.slices) {
          if (asked >= 64 || stepLabels.has(sl.id) || sl.dur * scale < 24) continue;
          if (!(st.tile.names.get(sl.name) ?? '').startsWith('ProfilerStep#')) continue;
          asked++;
          stepLabels.set(sl.id, null);
          const from = source;
          source.get('trace/event', {id: sl.id}).then((e) => {
            if (from !== source) return;
            stepLabels.set(sl.id, e.name);
            schedule();
          }, () => stepLabels.delete(sl.id));
        }
      }
    }
    const sliceName = (sl) => stepLabels.has(sl.id) ? stepLabels.get(sl.id) ?? 'ProfilerStep#…'
      : st.tile?.names.get(sl.name) ?? '';
    function push(a, v) {
      a.push(v);
      if (a.length > MAX_SAMPLES) a.shift();
    }
    function drawStatus() {
      const v = st.view;
      const parts = [source.host ? `${source.host}: ${int(st.events)} events stored` : `${int(st.events)} events stored`];
      if (st.dropped) parts.push(`${int(st.dropped)} freed by retention`);
      if (st.tile) parts.push(`tile ${num(st.loadMs, 0)} ms`);
      if (v) parts.push(`${duration(Math.round(v.t1 - v.t0))} in view`);
      // (an error is text: it may be an agent's, from the network)
      $('.trace-status').textContent = st.error ?? (st.note && !st.tile ? st.note : parts.join(' · '));
      $('.trace-status').classList.toggle('bad', !!st.error);
      for (const b of root.querySelectorAll('[data-mode]')) b.setAttribute('aria-pressed', String(b.dataset.mode === st.mode));
      $('.export').hidden = !!source.host;  // (a host's export is its own dashboard's)
      if (v) {
        const q = new URLSearchParams({t0: Math.max(0, Math.floor(v.t0)), t1: Math.ceil(v.t1)});
        if (ctx.token) q.set('token', ctx.token);
        $('.export').href = `api/export?${q}`;
      }
    }

    // ---- picking ----

    function pick(x, y, layout = st.layout) {
      const row = rowAt(layout.rows, y);
      if (!row || row.kind !== 'track' || !st.tile || x < GUTTER) return {row};
      const lane = laneAt(row, y);
      const data = st.tile.tracks.get(row.id);
      if (!data) return {row};
      const t = xToTime(st.view, st.W, x);
      const slack = 2 * (st.view.t1 - st.view.t0) / px();
      let best = null;
      for (const s of data.slices) {
        const sLane = Math.min(s.depth, row.lanes - 1, MAX_LANES - 1);
        if (sLane !== lane || s.ts > t + slack || s.ts + s.dur < t - slack) continue;
        if (!best || s.dur < best.dur) best = s;
      }
      if (best) return {row, slice: best};
      if (data.counter) {  // the value at t: the last sample's at or before it (before the tile: held).
        let at = data.held ? {count: 0, last: data.held.value, max: data.held.value, ts: data.held.ts} : null;
        for (const f of data.summaries) if (f.ts <= t) at = f;
        return {row, counter: at, data};
      }
      const w = st.tile.nspp;
      const folded = data.summaries.find((f) => f.lane === lane && f.ts <= t + slack && f.ts + w >= t - slack);
      return {row, folded};
    }

    async function select(id, known = null) {
      st.selectedId = id;
      if (st.hit && st.hit.id !== id) st.hit = null;
      if (st.selected?.id !== id) st.selected = known;
      schedule();
      const box = $('.trace-details');
      if (id === null) {
        box.innerHTML = '';
        return;
      }
      try {
        const e = known ?? await source.get('trace/event', {id});
        if (st.selectedId !== id) return;
        st.selected = e;
        box.innerHTML = eventDetails(e);
        for (const b of box.querySelectorAll('[data-goto]')) b.addEventListener('click', () => reveal(+b.dataset.goto));
      } catch (err) {
        box.innerHTML = `<p class="note">${esc(err.message)}</p>`;
      }
    }
    function eventDetails(e) {
      const skip = new Set(['id', 'name', 'track', 'ts', 'dur']);
      const track = st.tracks.get(e.track);
      const rows = [['Name', e.name], ['Start', `${duration(e.ts - st.bounds.first)} (ts ${e.ts} ns)`],
        ['Duration', duration(e.dur)], ['Row', track ? `${track.name || `track ${e.track}`}` : e.track]];
      for (const [k, v] of Object.entries(e)) {
        if (skip.has(k) || v === '' || v === 0 && k !== 'step_num') continue;
        rows.push([k, k === 'bytes' ? `${bytes(v)} (${int(v)})` : v]);
      }
      const links = (st.tile?.flows ?? []).filter(([a, b]) => a === e.id || b === e.id).map(([a, b]) => {
        const other = a === e.id ? b : a;
        const o = st.tile.byId.get(other);
        const label = o ? st.tile.names.get(o.name) : other;
        return `<button data-goto="${other}">${a === e.id ? 'launches' : 'launched by'}: ${esc(label)}</button>`;
      });
      return `<h4>${esc(e.name)}</h4><table class="kv">${rows.map(([k, v]) =>
        `<tr><th>${esc(k)}</th><td>${esc(v)}</td></tr>`).join('')}</table>${links.length ? `<p>${links.join(' ')}</p>` : ''}`;
    }
    // Centres an event (by id) and selects it; the zoom stays unless it is too narrow.
    async function reveal(id) {
      try {
        showEvent(await source.get('trace/event', {id}));
      } catch (err) {
        $('.trace-details').insertAdjacentHTML('beforeend', `<p class="note">${esc(err.message)}</p>`);
      }
    }
    // Frames an event at `share` of the view (a search hit: a third, as
    // Perfetto's) and selects it.
    function showEvent(e, share = HIT_SHARE) {
      st.follow = false;
      $('.follow').checked = false;
      const v = frameEvent(e, share);
      setView(v.t0, v.t1);
      select(e.id, e);
    }

    // The events of a box, every one of them (trace/area.js).
    let areaAsked = 0;
    function summarize(box, layout = st.layout) {
      const ask = ++areaAsked;
      sumArea(box, layout, {st, source, el: $('.trace-details'), current: () => ask === areaAsked});
    }

    // ---- input ----

    function local(e, c = canvas) {
      const r = c.getBoundingClientRect();
      return {x: e.clientX - r.left, y: e.clientY - r.top};
    }
    for (const c of [canvas, head]) {
      c.addEventListener('wheel', (e) => {
        if (!st.view) return;
        e.preventDefault();
        const {x} = local(e, c);
        if (e.shiftKey || Math.abs(e.deltaX) > Math.abs(e.deltaY)) pan((e.deltaX || e.deltaY) / px());
        else zoom(Math.exp(e.deltaY * (e.ctrlKey ? 0.01 : 0.002)), Math.max(GUTTER, x));  // (ctrl: a pinch's small steps)
      }, {passive: false});
      c.addEventListener('mousedown', (e) => mouseDown(e, c));
    }
    function mouseDown(e, c) {
      if (!st.view) return;
      const p = local(e, c);
      const layout = c === head ? st.pinLayout : st.layout;
      canvas.focus();
      if (p.x < GUTTER) {
        const row = rowAt(layout.rows, p.y);
        if (row?.kind === 'section') {
          if (st.collapsed.has(row.key)) st.collapsed.delete(row.key);
          else st.collapsed.add(row.key);
          relayout();
        } else if (row?.kind === 'track' && p.x >= GUTTER - PIN_W - 4) {
          togglePin(row.id);
        }
        return;
      }
      if (c === head && p.y < AXIS_H) return;
      const mode = e.button === 1 ? 'pan' : st.mode;
      st.drag = {mode, x: p.x, y: p.y, t: xToTime(st.view, st.W, p.x), view: {...st.view}, moved: false, c, layout};
      e.preventDefault();
    }
    window.addEventListener('mousemove', (e) => {
      const p = local(e);
      st.mouse = p;
      const d = st.drag;
      if (!d) return hover(e.target === head ? local(e, head) : p, e);
      if (Math.abs(p.x - d.x) + Math.abs(p.y - d.y) > 3) d.moved = true;
      if (!d.moved) return;
      const t = xToTime(d.view, st.W, p.x);
      if (d.mode === 'pan') {
        const dt = (p.x - d.x) * (d.view.t1 - d.view.t0) / px();
        setView(d.view.t0 - dt, d.view.t1 - dt);
      } else if (d.mode === 'timing') {
        st.timing = {t0: Math.min(d.t, t), t1: Math.max(d.t, t)};
      } else {
        st.box = {t0: d.t, t1: t, y0: d.mode === 'zoom' ? 0 : d.y, y1: d.mode === 'zoom' ? st.layout.height : p.y};
      }
      schedule();
    });
    window.addEventListener('mouseup', (e) => {
      const d = st.drag;
      if (!d) return;
      st.drag = null;
      const p = local(e, d.c);
      if (!d.moved) {
        const hit = pick(p.x, p.y, d.layout);
        if (hit.slice) select(hit.slice.id);
        else if (hit.counter) {
          const f = hit.counter;
          $('.trace-details').innerHTML = f.count === 0
            ? `<h4>${esc(hit.row.label)}: ${counterText(hit.data, f.last)}</h4><p>Held since the sample at
              ${duration(f.ts - st.bounds.first)}, before this stretch; it holds until the next sample.</p>`
            : `<h4>${esc(hit.row.label)}: ${counterText(hit.data, f.last)}</h4><p>From
            ${int(f.count)} samples under one pixel, the last ${counterText(hit.data, f.last)}, the largest
            ${counterText(hit.data, f.max)}; it holds until the next sample.</p>`;
        } else if (hit.folded) {
          const f = hit.folded;
          $('.trace-details').innerHTML = `<h4>${int(f.count)} events under one pixel</h4><p>The longest:
            ${esc(st.tile.names.get(f.longest) ?? '')} (${duration(f.longestDur)}); busy ${num(f.busy * 100, 0)} % of the pixel.
            Zoom in (W) to see them one by one.</p>`;
        } else select(null);
        return;
      }
      if (d.mode === 'zoom' && st.box) {
        const a = Math.min(st.box.t0, st.box.t1), b = Math.max(st.box.t0, st.box.t1);
        st.box = null;
        setView(a, b);
      } else if (d.mode === 'select' && st.box) {
        summarize(st.box, d.layout);  // (a box drawn over the pinned rows sums those)
        st.box = null;
      }
      schedule();
    });
    // The tooltip: a slice's name and length, a counter's value at the
    // mouse, or in the gutter a row's whole name (cut there). It sits on the
    // hovered row, right of the mouse (never over another row's events).
    function hover(p, e) {
      if ((e.target !== canvas && e.target !== head) || !st.tile) {
        tip.classList.add('hidden');
        st.tipRow = null;
        return;
      }
      const hit = pick(p.x, p.y, e.target === head ? st.pinLayout : st.layout);
      const s = hit.slice;
      const gutter = p.x < GUTTER - PIN_W - 4 && hit.row?.kind === 'track';
      if (!s && !hit.counter && !gutter) {
        tip.classList.add('hidden');
        st.tipRow = null;
        return;
      }
      tip.textContent = gutter ? rowTitle(hit.row) : s ? `${sliceName(s)} · ${duration(s.dur)}`
        : `${hit.row.label}: ${counterText(hit.data, hit.counter.last)}`;  // a counter's value at the mouse.
      tip.classList.remove('hidden');
      tip.style.zIndex = '6';  // (over the sticky header too)
      const top = hit.row.y + (e.target === head ? head.offsetTop : canvas.offsetTop);
      const tw = tip.offsetWidth, th = tip.offsetHeight;
      const left = p.x + 14 + tw <= st.W ? p.x + 14 : Math.max(0, p.x - 14 - tw);  // (left of the mouse at the right edge)
      tip.style.left = `${left}px`;
      tip.style.top = `${top + Math.max(0, (hit.row.h - th) / 2)}px`;
      st.tipRow = hit.row.id;
    }
    // A row's whole name, and what it is.
    function rowTitle(row) {
      const t = st.tracks.get(row.id);
      const what = {host_thread: 'thread', gpu_stream: 'GPU stream', counter: 'counter', memory: 'counter',
        steps: 'steps', framework_ops: 'framework ops', process: 'process'}[t?.type] ?? '';
      return `${row.label}${what ? ` (${what}${t?.os_id ? ` ${t.os_id}` : ''})` : ''}`;
    }
    // W/A/S/D: held keys move the view every frame (trace/nav.js), about the mouse when over the timeline.
    const motion = new KeyMotion({
      zoom: (f) => zoom(f, st.mouse && st.mouse.x > GUTTER && st.mouse.x < st.W ? st.mouse.x : undefined),
      pan: (d) => pan(d),
    });
    // Keys are the timeline's unless a text box has the focus: then they are the box's only.
    const typing = (e) => !!e.target.closest?.('input, select, textarea');
    const hidden = () => root.hidden || !!root.closest('[hidden]');
    document.addEventListener('keydown', (e) => {
      if (hidden() || typing(e) || e.ctrlKey || e.metaKey || e.altKey) return;
      const k = e.key.toLowerCase();
      if (KeyMotion.handles(k)) motion.down(k, e.repeat);
      else if (k >= '1' && k <= '4') st.mode = MODES[+k - 1];
      else if (k === '0') fit();
      else if (k === 'f') {
        const s = st.hit ?? st.selected ?? (st.selectedId !== null && st.tile?.byId.get(st.selectedId));
        if (s) {
          const v = frameEvent(s, FIT_SHARE);
          setView(v.t0, v.t1);
        } else if (st.timing) setView(st.timing.t0, st.timing.t1);
      } else if (k === 'enter' && search.active() && !e.target.closest?.('button, a')) search.find(!e.shiftKey);  // (a button: its click)
      else if (k === '?') st.help = !st.help;
      else if (k === 'escape') {
        st.timing = null;
        st.help = false;
        select(null);
      } else return;
      e.preventDefault();
      schedule();
    });
    document.addEventListener('keyup', (e) => motion.up(e.key.toLowerCase()));
    window.addEventListener('blur', () => motion.stop());
    $('.help-button').addEventListener('click', () => {
      st.help = !st.help;
      schedule();
    });
    for (const b of root.querySelectorAll('[data-mode]')) {
      b.addEventListener('click', () => { st.mode = b.dataset.mode; schedule(); });
    }
    $('.fit').addEventListener('click', fit);
    $('.follow').addEventListener('change', (e) => {
      st.follow = e.target.checked;
      if (st.follow) follow();
    });
    // Search (trace/search.js): a hit is framed at a third of the view, highlighted and selected.
    const search = mountSearch(root, {
      get: (path, params) => source.get(path, params),
      view: () => st.view,
      onHit(e) {
        st.hit = e;
        showEvent(e, HIT_SHARE);
      },
      onNone(q) {
        st.hit = null;
        $('.trace-details').innerHTML = noMatch(q);
        schedule();
      },
      onError(err) { $('.trace-details').innerHTML = `<p class="note">${esc(err.message)}</p>`; },
      focusTimeline() {
        $('.search').blur();
        canvas.focus({preventScroll: true});
      },
    });
    new ResizeObserver(() => schedule()).observe($('.trace-canvas-box'));

    // Follow: the newest events at the zoom on screen.
    function follow() {
      if (!st.view || !st.follow) return;
      const span = st.view.t1 - st.view.t0;
      st.view = {t0: st.bounds.last - span, t1: st.bounds.last};
      request(true);
      schedule();
    }

    // What tests and the benchmark read.
    window.liveprofTrace = {
      state: st,
      stepLabels,
      search: search.state,
      zoom, pan, fit, setView, select, togglePin,
      ready: () => !!st.tile && !loader.inflight,
      rawTile: () => loader.tile,  // the tile in hand as it came: /api/trace's shape
      host: () => source.host,     // on a fleet view, the host shown
    };

    // ---- the source: this server's store, or a host's through the fleet view ----

    const picker = mountHostPicker(root, ctx, {onPick: (host) => showHost(host), hidden});
    let asked = null;  // the hash's host (route())
    // Everything of the trace in hand goes: another one comes, the whole of it first.
    function setSource(next) {
      source = next;
      loader.reset();
      Object.assign(st, {view: null, bounds: {first: 0, last: 1}, tile: null, hit: null, selected: null, selectedId: null,
        timing: null, box: null, drag: null, events: 0, dropped: 0, query: null, error: null, note: null, follow: false});
      st.tracks = new Map();
      st.lanes = new Map();
      stepLabels.clear();
      st.pinned = new Set();
      $('.follow').checked = false;
      search.clear();
      $('.trace-details').innerHTML = detailsHelp;
      relayout();
      st.fitting = true;
      loader.want(null, st.bounds, true, Math.max(300, root.clientWidth - GUTTER));  // the first tile: the whole trace
    }
    function showHost(host) {
      picker.set(host);
      if (!hidden()) ctx.setRoute({host});  // (linkable: the hash says which host)
      if (source.host !== host) setSource(fleetSource(ctx, host));
    }
    // Which trace: this server's, unless it is a fleet view (then the host
    // asked for, the one in hand, or the first live one).
    async function choose() {
      if (fleet === null) return;
      if (!fleet) {
        picker.hide();
        if (source.host || !st.tile && !loader.inflight) setSource(localSource(ctx));
        return;
      }
      picker.show();
      if (asked || source.host) return showHost(asked ?? source.host);
      st.note = 'this fleet view keeps no events of its own: waiting for a host to publish (the Fleet page lists them)';
      schedule();
      const first = await picker.first();
      if (fleet && !source.host) showHost(asked ?? first);
    }
    ctx.probed('fleet').then((ok) => {
      fleet = ok;
      choose();
    });
    // (the page's render follows the feed's status, which the header takes
    // first: a timer of its own instead)
    setInterval(() => {
      if (st.follow && !root.closest('[hidden]')) follow();
    }, FOLLOW_MS);
    return {
      render() {},
      // The hash's parameters: host=H on a fleet view.
      route(params) {
        asked = params.host || null;
        choose();
      },
      // The server answered the probe otherwise after a reconnection (another server).
      probed(name, ok) {
        if (name !== 'fleet') return;
        fleet = ok;
        choose();
      },
    };
  },
};
