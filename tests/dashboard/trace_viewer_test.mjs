// The trace viewer in a real browser against `liveprof demo`: its rows are
// TF's (per GPU Steps, Framework ops, streams; host threads), its tiles come
// over the WebSocket as binary TraceTile frames (over /api/trace when the
// socket is not open), what it draws is what /api/trace answers, and the
// input works as in chrome://tracing:
// W/S/A/D, the wheel, click for details and flows, drag for a box's sums,
// the timing tool, search, collapsing, follow, export of the view.
import assert from 'node:assert/strict';
import {mkdtempSync, readdirSync, rmSync} from 'node:fs';
import {tmpdir} from 'node:os';
import path from 'node:path';
import {gunzipSync} from 'node:zlib';
import {after, before, describe, test} from 'node:test';
import {api, launchBrowser, openPage, screenshot, startServer, stopServer, waitForDemo} from './harness.mjs';
import {pixel} from './trace_nav_lib.mjs';

const STEPS = 40;
let server;
let browser;
let base;

before(async () => {
  server = await startServer(['demo', '--port', '0', '--scenario', 'input_bound', '--steps', String(STEPS)]);
  base = server.url;
  browser = await launchBrowser();
  // (the memory row's samples against the memory view's counts raced once beside a busy suite)
  await waitForDemo(base, STEPS);
  await new Promise((r) => setTimeout(r, 300));
});

after(async () => {
  await browser?.close();
  await stopServer(server);
});

const tv = (page, fn, arg) => page.evaluate(fn, arg);
const ready = (page) => page.waitForFunction(() => window.liveprofTrace?.ready());

// The canvas's page coordinates of a time and a row's lane.
async function point(page, t, trackId, lane = 0) {
  return tv(page, ([t, id, lane]) => {
    const s = window.liveprofTrace.state;
    const r = document.querySelector('.trace-canvas').getBoundingClientRect();
    const row = s.layout.rows.find((x) => x.kind === 'track' && x.id === id);
    const x = 190 + (t - s.view.t0) * (s.W - 190) / (s.view.t1 - s.view.t0);
    return {x: r.left + x, y: r.top + row.y + 3 + lane * 17 + 8};
  }, [t, trackId, lane]);
}

async function openViewer() {
  const page = await openPage(browser, `${base}#trace_viewer`);
  await ready(page);
  return page;
}

// The tile in hand as it came, its query, and how the tiles came.
const tileInHand = (page) => tv(page, () => {
  const s = window.liveprofTrace.state;
  return {raw: window.liveprofTrace.rawTile(), query: s.query, via: {...s.tilesVia}};
});

describe('the trace viewer', () => {
  test('tiles come over the WebSocket, each what /api/trace answers to the same query', async () => {
    const tilesSent = (await api(base, '/api/status')).server.trace_tiles_sent;
    const page = await openViewer();
    // The first tile (the whole trace), then a zoomed one: binary frames all.
    let got = await tileInHand(page);
    assert.ok(got.via.ws >= 1 && got.via.http === 0, JSON.stringify(got.via));
    assert.deepEqual(got.raw, await api(base, `/api/trace?${new URLSearchParams(got.query)}`));
    // Zoomed to one step: its kernels and ops one by one.
    const step = got.raw.tracks.find((t) => t.type === 'steps').slices[5];
    await tv(page, ([a, b]) => window.liveprofTrace.setView(a, b), [step[1], step[1] + step[2]]);
    await page.waitForFunction((n) => window.liveprofTrace.state.tilesVia.ws > n && window.liveprofTrace.ready(),
      got.via.ws);
    got = await tileInHand(page);
    assert.equal(got.via.http, 0);
    assert.deepEqual(Object.keys(got.query).sort(), ['t0', 't1', 'width']);
    const json = await api(base, `/api/trace?${new URLSearchParams(got.query)}`);
    assert.deepEqual(got.raw, json);
    // Zoomed in, the memory row starts at the level a sample before the view left.
    const mem = json.tracks.find((t) => t.type === 'memory');
    assert.ok(mem?.held && mem.held[0] < json.t0 && mem.held[1] >= 0, JSON.stringify(mem?.held));
    assert.deepEqual(await tv(page, (id) => window.liveprofTrace.state.tile.tracks.get(id).held, mem.track),
      {ts: mem.held[0], value: mem.held[1]});
    const slices = json.tracks.reduce((a, t) => a + t.slices.length, 0);
    assert.ok(slices > 100, `${slices} slices in the zoomed tile`);
    // What the viewer holds for drawing is that tile: every slice by id, with its name (the
    // ends of flows that are not slices here, `far`, are held for the arrows only).
    const drawn = await tv(page, () => {
      const t = window.liveprofTrace.state.tile;
      return [...t.byId.values()].filter((s) => !s.far).map((s) => [s.id, s.ts, s.dur, t.names.get(s.name), s.depth, s.kind]);
    });
    const want = json.tracks.flatMap((t) => t.slices.map(([id, ts, dur, name, depth, kind]) =>
      [id, ts, dur, json.names[name], depth, kind]));
    assert.deepEqual(drawn.sort((a, b) => a[0] - b[0]), want.sort((a, b) => a[0] - b[0]));
    // The server counted them.
    assert.equal((await api(base, '/api/status')).server.trace_tiles_sent, tilesSent + got.via.ws);
    assert.deepEqual(page.errors, []);
    await page.close();
  });

  test('without an open WebSocket, the tiles come over /api/trace', async () => {
    const page = await browser.newPage();
    page.errors = [];
    page.on('pageerror', (e) => page.errors.push(`pageerror: ${e.message}`));
    // A WebSocket that never opens: the feed keeps connecting.
    await page.addInitScript(() => {
      window.WebSocket = class extends EventTarget {
        static CONNECTING = 0;
        static OPEN = 1;
        readyState = 0;
        send() { throw new Error('not open'); }
        close() {}
      };
    });
    await page.goto(`${base}#trace_viewer`);
    await ready(page);
    const got = await tileInHand(page);
    assert.deepEqual(got.via, {ws: 0, http: 1});
    assert.deepEqual(got.raw, await api(base, `/api/trace?${new URLSearchParams(got.query)}`));
    assert.deepEqual(page.errors, []);
    await page.close();
  });

  test('rows as TF lays them out, and the tile drawn is /api/trace', async () => {
    const page = await openViewer();
    const rows = await tv(page, () => window.liveprofTrace.state.layout.rows.map((r) => r.kind === 'section' ? `# ${r.title}` : r.label));
    assert.deepEqual(rows.slice(0, 4), ['# GPU 0', 'Steps', 'Framework ops', 'Memory in use']);
    assert.ok(rows.slice(3).some((r) => /^GPU 0 stream/.test(r)), rows.join(' | '));
    const host = rows.indexOf('# Host threads');
    assert.ok(host > 3 && rows.includes('sim: training thread') && rows.includes('sim: data loader'), rows.join(' | '));
    assert.ok(!rows.includes('track 0'), 'device descriptions are not a row');

    // The tile in hand, asked again over HTTP: the same slices and folded pixels per track.
    const tile = await tv(page, () => {
      const t = window.liveprofTrace.state.tile;
      return {t0: t.t0, t1: t.t1, width: Math.round((t.t1 - t.t0) / t.nspp),
        tracks: [...t.tracks].map(([id, d]) => [id, d.slices.length, d.summaries.reduce((a, f) => a + f.count, 0)])};
    });
    const again = await api(base, `/api/trace?t0=${tile.t0}&t1=${tile.t1}&width=${tile.width}`);
    assert.deepEqual(tile.tracks, again.tracks.map((t) => [t.track, t.slices.length,
      t.summaries.reduce((a, f) => a + f[1], 0)]));
    const stored = again.tracks.reduce((a, t) => a + t.slices.length + t.summaries.reduce((b, f) => b + f[1], 0), 0);
    assert.ok(stored > 1000, `${stored} events in the first tile`);

    // Drawn: a pixel inside a step on the Steps row has the step's colour, not the background.
    const step = again.tracks.find((t) => t.type === 'steps').slices[3];
    const at = await point(page, step[1] + step[2] / 2, again.tracks.find((t) => t.type === 'steps').track);
    const pixel = await tv(page, ([x, y]) => {
      const c = document.querySelector('.trace-canvas');
      const r = c.getBoundingClientRect();
      const dpr = window.devicePixelRatio || 1;
      return [...c.getContext('2d').getImageData(Math.round((x - r.left) * dpr), Math.round((y - r.top) * dpr), 1, 1).data];
    }, [at.x, at.y]);
    assert.notDeepEqual(pixel.slice(0, 3), [255, 255, 255], 'a step is drawn where it is');
    // Memory in use: over the whole run, its largest value is the memory
    // profile's lifetime peak, its last the heap in use now (the analyses
    // compute those apart, from the same allocations).
    // (One pixel asked for; the store's grid, t0 rounded down, may give two.)
    const whole = await api(base, '/api/trace?width=1');
    const memRow = whole.tracks.find((t) => t.type === 'memory');
    const samples = memRow.summaries.reduce((a, f) => a + f[1], 0);
    const max = Math.max(...memRow.summaries.map((f) => f[5]));
    const last = memRow.summaries.at(-1)[6];
    const gpu0 = (await api(base, '/api/memory')).memories.find((m) => m.id.startsWith('GPU:0'));
    // Exact when every event came in order. A late one (past the reorder
    // window: a slow sanitizer build) meets the row out of order: a free
    // before its allocation is no sample there, so the row may lack at most
    // as many samples as events came late (and its peak differ).
    const st = await api(base, '/api/status');
    const late = st.diagnostics.find((d) => d.name === 'late_events').count;
    if (late === 0) {
      assert.equal(samples, gpu0.num_allocations + gpu0.num_deallocations);
      assert.equal(max, gpu0.lifetime_peak_heap_bytes);
      assert.equal(last, gpu0.heap_bytes);
    } else {
      const want = gpu0.num_allocations + gpu0.num_deallocations;
      assert.ok(samples <= want && want - samples <= late, `${samples} samples, ${want} in the view, ${late} late`);
    }
    // Drawn: the row holds the chart's blue somewhere.
    const memTrack = await tv(page, (id) => window.liveprofTrace.state.layout.rows.find((r) => r.id === id), memRow.track);
    const blue = await tv(page, (r) => {
      const c = document.querySelector('.trace-canvas');
      const dpr = window.devicePixelRatio || 1;
      const d = c.getContext('2d').getImageData(200 * dpr, r.y * dpr, (c.width - 200 * dpr), r.h * dpr).data;
      let n = 0;
      for (let i = 0; i < d.length; i += 4) n += d[i + 2] > 200 && d[i] < 200;
      return n;
    }, memTrack);
    assert.ok(blue > 100, `${blue} blue pixels in the Memory in use row`);
    await screenshot(page, 'trace_viewer_whole');
    assert.deepEqual(page.errors, []);
    await page.close();
  });

  test('a row\'s whole name on hover; a counter\'s labels off its line; its tooltip on its own row', async () => {
    const page = await openViewer();
    const canvas = await page.locator('.trace-canvas').boundingBox();
    const rows = await tv(page, () => window.liveprofTrace.state.layout.rows.filter((r) => r.kind === 'track')
      .map((r) => ({id: r.id, label: r.label, y: r.y, h: r.h, type: r.t.type})));
    // (c) The gutter cuts a long name: hovering it shows it whole.
    const longest = rows.reduce((a, r) => r.label.length > a.label.length ? r : a);
    await page.mouse.move(canvas.x + 60, canvas.y + longest.y + longest.h / 2);
    await page.locator('.trace-tip:not(.hidden)').waitFor();
    const named = await page.locator('.trace-tip').innerText();
    assert.ok(named.startsWith(longest.label), `hovered ${longest.label}: ${named}`);
    // (d) Memory in use: the max and end labels in a band above the plot, never over its line.
    const mem = rows.find((r) => r.type === 'memory');
    const drawn = await tv(page, (id) => window.liveprofTrace.state.out.counters[id], mem.id);
    assert.equal(drawn.labels.length, 2);
    for (const b of drawn.labels) {
      assert.ok(b.y1 <= drawn.top, `a label (${b.y0}-${b.y1}) over the plot from ${drawn.top}`);
      assert.ok(b.y0 >= mem.y, 'inside its row');
    }
    // (e) Its tooltip sits on the Memory row, not over the stream row below it.
    const p = drawn.points.find((q) => !q.held && q.x > 250 && q.x < canvas.width - 250) ?? drawn.points.at(-1);
    await page.mouse.move(canvas.x + Math.max(200, p.x + 2), canvas.y + mem.y + mem.h - 4);
    await page.waitForFunction((id) => window.liveprofTrace.state.tipRow === id, mem.id);
    const tip = await page.locator('.trace-tip').boundingBox();
    assert.ok(tip.y >= canvas.y + mem.y - 1 && tip.y + tip.height <= canvas.y + mem.y + mem.h + 1,
      `the tip ${tip.y}-${tip.y + tip.height} on the row ${canvas.y + mem.y}-${canvas.y + mem.y + mem.h}`);
    assert.match(await page.locator('.trace-tip').innerText(), /^Memory in use: /);
    await screenshot(page, 'trace_viewer_counter_tip');
    assert.deepEqual(page.errors, []);
    await page.close();
  });

  test('the canvas in the page\'s dark theme when the system asks, and light again', async () => {
    const page = await openViewer();
    const box = page.locator('.trace-canvas-box');
    const frames = () => tv(page, () => Number(document.querySelector('.trace-canvas').dataset.drawn));
    // What the canvas painted: a row's background (left of its label), a section's title row, the
    // axis's band (the header's canvas), the memory counter's line at a sample, and the tooltip.
    const painted = async () => {
      const got = await tv(page, () => {
        const s = window.liveprofTrace.state;
        const row = s.layout.rows.find((r) => r.kind === 'track' && r.t.type === 'gpu_stream');
        const section = s.layout.rows.find((r) => r.kind === 'section');
        const mem = s.layout.rows.find((r) => r.kind === 'track' && r.t.type === 'memory');
        return {row, section, mem, W: s.W, counter: s.out.counters[mem.id]};
      });
      const c = got.counter;
      // (a sample whose level holds 6 px at least: the line is flat there)
      const p = c.points.find((q, i) => !q.held && q.x > 250 && (c.points[i + 1]?.x ?? Infinity) - q.x >= 6);
      const lineY = Math.round(c.top + c.h - (p.last - c.lo) / (c.hi - c.lo) * c.h) + 0.5;
      const canvas = await page.locator('.trace-canvas').boundingBox();
      await page.mouse.move(canvas.x + p.x + 3, canvas.y + got.mem.y + got.mem.h - 4);  // the counter's tooltip
      await page.waitForFunction((id) => window.liveprofTrace.state.tipRow === id, got.mem.id);
      return {
        row: await pixel(page, '.trace-canvas', 4, got.row.y + 2),
        section: await pixel(page, '.trace-canvas', got.W - 4, got.section.y + 2),
        axis: await pixel(page, '.trace-head', got.W - 4, 3),
        line: await pixel(page, '.trace-canvas', p.x + 3, lineY),
        tip: await page.evaluate(() => getComputedStyle(document.querySelector('.trace-tip')).backgroundColor),
      };
    };
    const lum = ([r, g, b]) => (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255;
    const rgb = (css) => css.match(/\d+/g).slice(0, 3).map(Number);
    assert.equal(await box.getAttribute('data-theme'), 'light');
    const light = await painted();
    assert.deepEqual(light.row.slice(0, 3), [255, 255, 255], `a row's background: ${light.row}`);
    assert.ok(lum(light.axis) > 0.9 && lum(light.section) > 0.85, JSON.stringify(light));
    // The system turns dark: the canvas is drawn again from the dark theme's colours (style.css).
    const before = await frames();
    await page.emulateMedia({colorScheme: 'dark'});
    await page.waitForFunction((n) => document.querySelector('.trace-canvas-box').dataset.theme === 'dark' &&
      Number(document.querySelector('.trace-canvas').dataset.drawn) > n, before);
    const dark = await painted();
    const want = await page.evaluate(() => ['--trace-bg', '--trace-section-bg', '--trace-axis-bg', '--trace-counter-line']
      .map((v) => getComputedStyle(document.querySelector('.trace-canvas-box')).getPropertyValue(v).trim()));
    const hex = (h) => [1, 3, 5].map((i) => parseInt(h.slice(i, i + 2), 16));
    assert.deepEqual(dark.row.slice(0, 3), hex(want[0]), `a row's background ${dark.row}, the theme's ${want[0]}`);
    assert.deepEqual(dark.section.slice(0, 3), hex(want[1]), `a section's ${dark.section}, the theme's ${want[1]}`);
    assert.deepEqual(dark.axis.slice(0, 3), hex(want[2]), `the axis's ${dark.axis}, the theme's ${want[2]}`);
    for (const k of ['row', 'section', 'axis']) assert.ok(lum(dark[k]) < 0.2, `${k}: ${dark[k]} is dark`);
    // The counter's line in the dark theme's blue, light on the dark row.
    const [r, g, b] = dark.line;
    assert.ok(b > 200 && r > 100 && lum(dark.line) > 0.5, `the counter's line ${dark.line}, the theme's ${want[3]}`);
    assert.ok(lum(rgb(dark.tip)) < 0.25 && lum(rgb(dark.tip)) !== lum(dark.row), `the tooltip ${dark.tip}`);
    await screenshot(page, 'trace_viewer_dark');
    // And back.
    await page.emulateMedia({colorScheme: 'light'});
    await page.waitForFunction(() => document.querySelector('.trace-canvas-box').dataset.theme === 'light');
    await page.waitForTimeout(100);
    assert.deepEqual((await painted()).row.slice(0, 3), [255, 255, 255]);
    assert.deepEqual(page.errors, []);
    await page.close();
  });

  test('W/S zoom and A/D pan about the view; the next tile has the new resolution', async () => {
    const page = await openViewer();
    const v0 = await tv(page, () => ({...window.liveprofTrace.state.view}));
    await page.locator('.trace-canvas').focus();
    for (let i = 0; i < 4; i++) await page.keyboard.press('w');
    const v1 = await tv(page, () => ({...window.liveprofTrace.state.view}));
    const ratio = (v0.t1 - v0.t0) / (v1.t1 - v1.t0);
    assert.ok(Math.abs(ratio - 2 ** 4) < 1e-6, `zoomed ${ratio}x`);  // a tap of W: 2x (trace/nav.js)
    await page.keyboard.press('d');
    const v2 = await tv(page, () => ({...window.liveprofTrace.state.view}));
    assert.ok(Math.abs((v2.t0 - v1.t0) - 0.15 * (v1.t1 - v1.t0)) < 1, 'D pans 15 % of the view');
    await page.keyboard.press('a');
    await page.keyboard.press('s');
    await ready(page);
    const t = await tv(page, () => {
      const s = window.liveprofTrace.state;
      return {tileNspp: s.tile.nspp, viewNspp: (s.view.t1 - s.view.t0) / (s.W - 190), t0: s.tile.t0, t1: s.tile.t1, v: s.view};
    });
    assert.ok(t.tileNspp <= 2 * t.viewNspp + 1e-6, `tile ${t.tileNspp} ns/px for a view of ${t.viewNspp}`);  // (tiles.js ZOOM_REFETCH)
    assert.equal(Math.log2(t.tileNspp) % 1, 0, `the store answers in pixels of 2^k ns, not ${t.tileNspp}`);
    assert.ok(t.t0 <= t.v.t0 && t.t1 >= t.v.t1, 'the tile covers the view');
    // The wheel zooms about the mouse: the time under it stays put.
    const box = await page.locator('.trace-canvas').boundingBox();
    const x = box.x + 600;
    const before = await tv(page, (x) => {
      const s = window.liveprofTrace.state;
      return s.view.t0 + (x - 190) * (s.view.t1 - s.view.t0) / (s.W - 190);
    }, 600);
    await page.mouse.move(x, box.y + 60);
    await page.mouse.wheel(0, -300);
    await page.waitForFunction((span) => window.liveprofTrace.state.view.t1 - window.liveprofTrace.state.view.t0 < span,
      t.v.t1 - t.v.t0);
    const afterWheel = await tv(page, (x) => {
      const s = window.liveprofTrace.state;
      return {t: s.view.t0 + (x - 190) * (s.view.t1 - s.view.t0) / (s.W - 190), span: s.view.t1 - s.view.t0};
    }, 600);
    // (within the pixel: the mouse's position is whole pixels, the box's not)
    assert.ok(Math.abs(afterWheel.t - before) < t.viewNspp, 'the time under the mouse stays');
    assert.ok(afterWheel.span < t.v.t1 - t.v.t0, 'the wheel zoomed in');
    assert.deepEqual(page.errors, []);
    await page.close();
  });

  test('a click shows one event whole; its flow leads to the launch', async () => {
    const page = await openViewer();
    // Zoom to one step's first kernels, where launches and kernels are slices.
    const whole = await api(base, '/api/trace?width=2000');
    const step = whole.tracks.find((t) => t.type === 'steps').slices[5];
    const fine = await api(base, `/api/trace?t0=${step[1]}&t1=${step[1] + step[2]}&width=65536`);
    const [from, to] = fine.flows[0];
    const [l, k] = [await api(base, `/api/trace/event?id=${from}`), await api(base, `/api/trace/event?id=${to}`)];
    await tv(page, ([a, b]) => window.liveprofTrace.setView(a, b), [l.ts - 20000, k.ts + k.dur + 20000]);
    await ready(page);
    const target = await tv(page, () => {
      const s = window.liveprofTrace.state;
      const flows = new Set(s.tile.flows.map(([, to]) => to));
      return [...s.tile.byId.values()].find((x) => x.kind === 'kernel' && flows.has(x.id) &&
        x.ts > s.view.t0 && x.ts + x.dur < s.view.t1);
    });
    assert.ok(target, 'a kernel with its launch in view');
    const at = await point(page, target.ts + target.dur / 2, target.track, target.depth);
    await page.mouse.click(at.x, at.y);
    await page.waitForSelector('.trace-details h4');
    const e = await api(base, `/api/trace/event?id=${target.id}`);
    assert.equal(await page.locator('.trace-details h4').innerText(), e.name);
    assert.match(await page.locator('.trace-details').innerText(), new RegExp(`ts ${e.ts} ns`));
    assert.equal(e.kind, 'kernel');
    assert.equal(await tv(page, () => window.liveprofTrace.state.selectedId), target.id);
    await page.locator('.trace-details [data-goto]').first().click();
    await page.waitForFunction((id) => window.liveprofTrace.state.selectedId !== id, target.id);
    const launch = await api(base, `/api/trace/event?id=${await tv(page, () => window.liveprofTrace.state.selectedId)}`);
    assert.equal(launch.kind, 'runtime_api');
    assert.equal(launch.corr, e.corr);
    await screenshot(page, 'trace_viewer_flow');
    assert.deepEqual(page.errors, []);
    await page.close();
  });

  test('the timing tool measures, a box sums up, search finds, sections collapse, follow tails', async () => {
    const page = await openViewer();
    const box = await page.locator('.trace-canvas').boundingBox();
    await page.locator('.trace-canvas').focus();
    // Timing: 4, then a drag of 300 px is 300 px of time.
    await page.keyboard.press('4');
    const nspp = await tv(page, () => {
      const s = window.liveprofTrace.state;
      return (s.view.t1 - s.view.t0) / (s.W - 190);
    });
    await page.mouse.move(box.x + 300, box.y + 100);
    await page.mouse.down();
    await page.mouse.move(box.x + 450, box.y + 100);
    await page.mouse.move(box.x + 600, box.y + 100);
    await page.mouse.up();
    const timing = await tv(page, () => window.liveprofTrace.state.timing);
    assert.ok(Math.abs((timing.t1 - timing.t0) - 300 * nspp) < nspp, 'the interval is the drag');

    // A box over the training thread and the GPU's rows: the sums are every
    // event in it (/api/trace/area), the sub-pixel ones too, not the tile's
    // slices alone (not "22 of 9,512 events").
    await page.keyboard.press('1');
    const rowsY = await tv(page, () => window.liveprofTrace.state.layout.rows.find((r) => r.label === 'sim: training thread'));
    await page.mouse.move(box.x + 250, box.y + 2);
    await page.mouse.down();
    await page.mouse.move(box.x + 700, box.y + rowsY.y + rowsY.h - 2);
    await page.mouse.up();
    await page.waitForFunction(() => window.liveprofTrace.state.area?.answer);
    const area = await tv(page, () => window.liveprofTrace.state.area);
    const drawn = await tv(page, ([a, b]) => {
      const s = window.liveprofTrace.state;
      const t = (x) => s.view.t0 + (x - 190) * (s.view.t1 - s.view.t0) / (s.W - 190);
      let n = 0;
      for (const [, d] of s.tile.tracks) n += d.slices.filter((x) => x.ts <= t(b) && x.ts + x.dur >= t(a)).length;
      return n;
    }, [250, 700]);
    const served = await api(base, `/api/trace/area?${new URLSearchParams(area.query)}`);
    assert.ok(area.query.tracks.split(',').length >= 3, area.query.tracks);
    assert.ok(served.events > drawn, `${served.events} events in the box, ${drawn} of them slices in the tile`);
    const sums = await page.locator('.trace-details h4').innerText();
    assert.match(sums, new RegExp(`^${served.events.toLocaleString('en-US')} events in`), sums);
    assert.equal(await page.locator('.trace-details .area-note').count(), 0);
    const listed = await page.locator('.trace-details tbody tr').count();
    assert.equal(listed, Math.min(200, served.names.length));
    const first = await page.locator('.trace-details tbody tr').first().locator('td').allInnerTexts();
    assert.equal(first[0], served.names[0][0]);
    assert.equal(first[1], served.names[0][1].toLocaleString('en-US'));
    await screenshot(page, 'trace_viewer_area');

    // Search: the next "train_step" from the start, centred and selected.
    await page.locator('.search').fill('train_step');
    await page.locator('.search').press('Enter');
    await page.waitForFunction(() => window.liveprofTrace.state.selectedId !== null);
    const found = await api(base, `/api/trace/event?id=${await tv(page, () => window.liveprofTrace.state.selectedId)}`);
    assert.match(found.name, /train_step/);
    const v = await tv(page, () => window.liveprofTrace.state.view);
    assert.ok(v.t0 <= found.ts && v.t1 >= found.ts + found.dur, 'the found event is in view');

    // Collapse the GPU section: its rows go, the host's move up; and back.
    const count = await tv(page, () => window.liveprofTrace.state.layout.rows.length);
    // (The axis is the header canvas's: the rows' canvas starts with the GPU's section.)
    await page.mouse.click(box.x + 40, box.y + 8);
    const collapsed = await tv(page, () => window.liveprofTrace.state.layout.rows.map((r) => r.label ?? r.title));
    assert.ok(collapsed.length < count && !collapsed.includes('Steps'), collapsed.join(' | '));
    await page.mouse.click(box.x + 40, box.y + 8);
    assert.equal(await tv(page, () => window.liveprofTrace.state.layout.rows.length), count);

    // Export of the view: gzip Chrome trace JSON.
    const href = await page.locator('.export').getAttribute('href');
    const r = await fetch(new URL(href, base));
    assert.equal(r.status, 200);
    const json = JSON.parse(gunzipSync(Buffer.from(await r.arrayBuffer())).toString());
    assert.ok(json.traceEvents.length > 0);
    await screenshot(page, 'trace_viewer_tools');
    assert.deepEqual(page.errors, []);
    await page.close();
  });
});

describe('the trace viewer on a live run', () => {
  let live;
  before(async () => {
    live = await startServer(['demo', '--port', '0', '--scenario', 'balanced']);
  });
  after(async () => stopServer(live));

  test('"whole trace" and follow take in the events that came since the page opened', async () => {
    const page = await openPage(browser, `${live.url}#trace_viewer`);
    await ready(page);
    const first = await tv(page, () => window.liveprofTrace.state.view.t1);
    await new Promise((r) => setTimeout(r, 1500));
    const now = (await api(live.url, '/api/trace?width=1')).last_ns;
    assert.ok(now > first + 5e8, 'the run went on');
    await page.locator('.trace-canvas').focus();
    await page.keyboard.press('0');
    await page.waitForFunction((t) => window.liveprofTrace.state.view.t1 >= t, now);
    // Follow: at the zoom it had, the view's end moves with the newest events.
    await page.keyboard.press('w');
    await page.keyboard.press('w');
    const span = await tv(page, () => window.liveprofTrace.state.view.t1 - window.liveprofTrace.state.view.t0);
    await page.locator('.follow').check();
    const later = (await api(live.url, '/api/trace?width=1')).last_ns + 3e8;
    await page.waitForFunction((t) => window.liveprofTrace.state.view.t1 >= t, later, {timeout: 10000});
    const v = await tv(page, () => window.liveprofTrace.state.view);
    assert.ok(Math.abs((v.t1 - v.t0) - span) < 1, 'follow keeps the zoom');
    assert.deepEqual(page.errors, []);
    await page.close();
  });
});

describe('a run folder', () => {
  let dir;
  before(() => { dir = mkdtempSync(path.join(tmpdir(), 'liveprof-run-')); });
  after(() => rmSync(dir, {recursive: true, force: true}));

  test('a run killed with SIGKILL opens again (liveprof open) with every event it had sealed, drawn', async () => {
    const run = path.join(dir, 'run');
    // 2 MiB of RAM for the viewer: most of the run is only on disk.
    const live = await startServer(['demo', '--port', '0', '--rate', '300000', '--trace-dir', run, '--trace-mb', '2']);
    let before;
    for (let i = 0; i < 200; i++) {
      before = await api(live.url, '/api/trace?width=1');
      if (before.events > 600000 && before.spilled_chunks > 1000) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.ok(before.spilled_chunks > 1000, JSON.stringify(before).slice(0, 300));
    live.kill('SIGKILL');
    await new Promise((r) => live.on('exit', r));
    assert.ok(readdirSync(run).some((f) => /^seg-\d{8}\.lps$/.test(f)));

    const opened = await startServer(['open', run, '--port', '0']);
    try {
      const after = await api(opened.url, '/api/trace?width=1');
      // Every event the live server held when asked (all but each track's
      // open chunk, at most 64 per track), and those it took after.
      const tracks = after.tracks.length;
      assert.ok(after.events >= before.events - 64 * tracks, `${after.events} after, ${before.events} before`);
      assert.equal(after.first_ns, before.first_ns);
      assert.ok(after.last_ns >= before.last_ns - 1e9);
      assert.equal(after.read_errors, 0);
      // The viewer draws it: the first tile holds the events.
      const page = await openPage(browser, `${opened.url}#trace_viewer`);
      await ready(page);
      const shown = await tv(page, () => [...window.liveprofTrace.state.tile.tracks.values()]
        .reduce((a, d) => a + d.slices.length + d.summaries.reduce((b, f) => b + f.count, 0), 0));
      assert.ok(shown >= after.events * 0.99, `${shown} events in the tile of ${after.events}`);
      await screenshot(page, 'trace_viewer_opened_run');
      assert.deepEqual(page.errors, []);
      await page.close();
    } finally {
      await stopServer(opened);
    }
  });
});
