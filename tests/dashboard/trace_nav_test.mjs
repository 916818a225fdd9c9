// The trace viewer's navigation as Perfetto's, in a real browser
// against `liveprof demo`: a search hit framed and highlighted with "k of N"
// (the server's count) and next/previous; W/S that zoom by a useful factor
// and faster while held, and never type into the search box unless it has
// the focus; F framing the selection; an axis that is never negative, in
// order and readable at every zoom; pinned rows kept on top; flows drawn
// to an end outside the view; Framework ops stacked by nesting, not in a
// staircase. Counters recorded on a thread (liveprof.counter) drawn as
// counter rows, with a `liveprof serve --ingest` source.
import assert from 'node:assert/strict';
import {mkdtempSync, rmSync} from 'node:fs';
import {tmpdir} from 'node:os';
import path from 'node:path';
import {gunzipSync} from 'node:zlib';
import {after, before, describe, test} from 'node:test';
import {api, launchBrowser, openPage, screenshot, sharedData, startServer, stopServer, waitForDemo} from './harness.mjs';
import {KIND_COUNTER, batchFrame, connectIngest, helloFrame} from './ingest_client.mjs';
import {foldedLanes, nestingDepths, parseTick, pixel, stackLanes} from './trace_nav_lib.mjs';

const GUTTER = 190;
let server;
let browser;
let base;

before(async () => {
  server = await startServer(['demo', '--port', '0', '--scenario', 'input_bound', '--steps', '30']);
  base = server.url;
  browser = await launchBrowser();
  await waitForDemo(base, 30);
});

after(async () => {
  await browser?.close();
  await stopServer(server);
});

const tv = (page, fn, arg) => page.evaluate(fn, arg);
const ready = (page) => page.waitForFunction(() => window.liveprofTrace?.ready());
const view = (page) => tv(page, () => ({...window.liveprofTrace.state.view}));
// After a view change: the tile for it is in and drawn.
async function settle(page) {
  await page.waitForTimeout(100);
  await ready(page);
  await page.waitForTimeout(150);
}

async function openViewer(url = base) {
  const page = await openPage(browser, `${url}#trace_viewer`);
  await ready(page);
  return page;
}

// A kernel of step 5 with its launch: from a fine tile of that step.
async function kernelWithLaunch() {
  const whole = await api(base, '/api/trace?width=2000');
  const step = whole.tracks.find((t) => t.type === 'steps').slices[5];
  const fine = await api(base, `/api/trace?t0=${step[1]}&t1=${step[1] + step[2]}&width=65536`);
  for (const [from, to] of fine.flows) {
    const kernel = await api(base, `/api/trace/event?id=${to}`);
    if (kernel.kind === 'kernel' && kernel.name) return {step, launch: await api(base, `/api/trace/event?id=${from}`), kernel};
  }
  throw new Error('no kernel with a launch in step 5');
}

describe('search, keys and the axis', () => {
  test('a search hit is framed at a third of the view and highlighted, "k of N" is the server\'s count', async () => {
    const page = await openViewer();
    const {kernel} = await kernelWithLaunch();
    const q = kernel.name;
    const first = (await api(base, '/api/trace?width=1')).first_ns;
    const one = await api(base, `/api/trace/search?${new URLSearchParams({q, dir: 'next', from: first - 1})}`);
    assert.ok(one.matches > 2 && one.index === 1, JSON.stringify(one).slice(0, 200));
    await page.locator('.search').fill(q);
    await page.locator('.search').press('Enter');
    await page.waitForFunction((id) => window.liveprofTrace.state.hit?.id === id, one.event.id);
    await settle(page);
    assert.equal(await page.locator('.search-count').innerText(), `1 of ${one.matches}`);
    // Framed: the hit spans about a third of the timeline, all of it on screen, drawn in the highlight.
    const drawn = await tv(page, () => ({hit: window.liveprofTrace.state.out.hit, W: window.liveprofTrace.state.W}));
    assert.ok(drawn.hit, 'the hit is drawn');
    const share = drawn.hit.w / (drawn.W - GUTTER);
    assert.ok(share > 0.25 && share < 0.4, `the hit spans ${share} of the view`);
    assert.ok(drawn.hit.x >= GUTTER && drawn.hit.x + drawn.hit.w <= drawn.W, JSON.stringify(drawn));
    const [r, gg, b] = await pixel(page, '.trace-canvas', drawn.hit.x + drawn.hit.w * 0.9, drawn.hit.y + drawn.hit.h / 2);
    assert.ok(r > 200 && gg > 120 && b < 170, `highlight colour, not ${[r, gg, b]}`);
    // The keys are the timeline's again: Enter steps to the 2nd match (the server's next from the 1st).
    assert.notEqual(await tv(page, () => document.activeElement.className), 'search');
    const two = await api(base, `/api/trace/search?${new URLSearchParams({q, dir: 'next', from: one.event.ts, from_id: one.event.id})}`);
    assert.equal(two.index, 2);
    await page.keyboard.press('Enter');
    await page.waitForFunction((id) => window.liveprofTrace.state.hit?.id === id, two.event.id);
    assert.equal(await page.locator('.search-count').innerText(), `2 of ${one.matches}`);
    await page.locator('.prev').click();
    await page.waitForFunction((id) => window.liveprofTrace.state.hit?.id === id, one.event.id);
    assert.equal(await page.locator('.search-count').innerText(), `1 of ${one.matches}`);
    await settle(page);
    await screenshot(page, 'trace_nav_search_hit');
    // W zooms (it does not type into the box), F frames the hit.
    const v0 = await view(page);
    await page.keyboard.press('w');
    const v1 = await view(page);
    assert.equal(await page.locator('.search').inputValue(), q);
    assert.ok((v0.t1 - v0.t0) / (v1.t1 - v1.t0) >= 1.99, 'W zoomed in 2x');
    await page.keyboard.press('f');
    const v2 = await view(page);
    assert.ok(Math.abs((v2.t1 - v2.t0) - one.event.dur / 0.8) <= 1 && Math.abs((v2.t0 + v2.t1) / 2 - (one.event.ts + one.event.dur / 2)) <= 1,
      `F frames the hit: ${JSON.stringify(v2)}`);
    // In the box, keys are the box's only; Escape gives them back.
    await page.locator('.search').focus();
    await page.keyboard.press('End');
    await page.keyboard.press('w');
    assert.equal(await page.locator('.search').inputValue(), `${q}w`);
    assert.deepEqual(await view(page), v2, 'W in the box does not zoom');
    await page.keyboard.press('Escape');
    await page.keyboard.press('s');
    const v3 = await view(page);
    assert.ok((v3.t1 - v3.t0) > 1.99 * (v2.t1 - v2.t0), 'S zooms out once the box has no focus');
    // ? lists the keys (and Escape hides them).
    await page.keyboard.press('?');
    await page.locator('.trace-help').waitFor({state: 'visible'});
    const help = await page.locator('.trace-help').innerText();
    for (const key of ['W / S', 'A / D', 'F', 'Enter / Shift+Enter', 'pin']) assert.ok(help.includes(key), `${key} in: ${help}`);
    await screenshot(page, 'trace_nav_help');
    await page.keyboard.press('Escape');
    await page.locator('.trace-help').waitFor({state: 'hidden'});
    assert.deepEqual(page.errors, []);
    await page.close();
  });

  test('W held zooms on, faster the longer; F frames a clicked slice', async () => {
    const page = await openViewer();
    await page.mouse.move(5, 5);  // away from the timeline: the zoom is about the centre.
    await page.locator('.trace-canvas').focus();
    const v0 = await view(page);
    const t0 = Date.now();
    await page.keyboard.down('w');
    await page.waitForTimeout(2000);
    await page.keyboard.up('w');
    const held = (Date.now() - t0) / 1000;
    const v1 = await view(page);
    const ratio = (v0.t1 - v0.t0) / (v1.t1 - v1.t0);
    console.log(`# W held ${held.toFixed(2)} s: zoomed ${ratio.toFixed(0)}x (${(v0.t1 - v0.t0) / 1e6} ms -> ${((v1.t1 - v1.t0) / 1e3).toFixed(1)} µs)`);
    assert.ok(ratio > 100, `W held 2 s zoomed ${ratio}x`);  // (1.3x a press before: ~1.6x in 2 s of repeats)
    // F: a clicked step fills 80 % of the view.
    await page.keyboard.press('0');
    await settle(page);
    const steps = await tv(page, () => {
      const s = window.liveprofTrace.state;
      const row = s.layout.rows.find((r) => r.label === 'Steps');
      return {row, slices: s.tile.tracks.get(row.id).slices};
    });
    const step = steps.slices[10];
    const box = await page.locator('.trace-canvas').boundingBox();
    const x = await tv(page, (t) => {
      const s = window.liveprofTrace.state;
      return 190 + (t - s.view.t0) * (s.W - 190) / (s.view.t1 - s.view.t0);
    }, step.ts + step.dur / 2);
    await page.mouse.click(box.x + x, box.y + steps.row.y + 10);
    await page.waitForFunction((id) => window.liveprofTrace.state.selected?.id === id, step.id);
    await page.keyboard.press('f');
    const v = await view(page);
    assert.ok(Math.abs((v.t1 - v.t0) - step.dur / 0.8) <= 1, `${v.t1 - v.t0} for a step of ${step.dur}`);
    assert.ok(Math.abs((v.t0 + v.t1) / 2 - (step.ts + step.dur / 2)) <= 1);
    assert.deepEqual(page.errors, []);
    await page.close();
  });

  test('the axis: never negative, in order, labels apart, at every zoom', async () => {
    const page = await openViewer();
    const {kernel, step} = await kernelWithLaunch();
    const bounds = await tv(page, () => window.liveprofTrace.state.bounds);
    const views = [null, [step[1], step[1] + step[2]], [kernel.ts, kernel.ts + kernel.dur],
      [kernel.ts, kernel.ts + 400], [bounds.first, bounds.first + 3000],
      [bounds.first - 5e9, bounds.first + 1e6],  // before the start: kept inside.
      [bounds.first + 0.5 * (bounds.last - bounds.first), bounds.first + 0.5 * (bounds.last - bounds.first) + 3000]];
    for (const v of views) {
      if (v) await tv(page, ([a, b]) => window.liveprofTrace.setView(a, b), v);
      else await tv(page, () => window.liveprofTrace.fit());
      await settle(page);
      const {ticks, vw} = await tv(page, () => ({ticks: window.liveprofTrace.state.outHead.ticks,
        vw: window.liveprofTrace.state.view}));
      assert.ok(vw.t0 >= bounds.first - 1e-6, `the view starts at the trace's start or later: ${vw.t0} < ${bounds.first}`);
      assert.ok(ticks.length >= 2, `${ticks.length} ticks at ${JSON.stringify(vw)}`);
      const span = vw.t1 - vw.t0;
      let prev = -Infinity;
      for (let i = 0; i < ticks.length; i++) {
        const k = ticks[i];
        const ns = parseTick(k.label);
        assert.ok(ns >= 0, `label ${k.label} is negative`);
        assert.ok(ns > prev, `labels in order: ${ticks.map((x) => x.label).join(', ')}`);
        assert.ok(Math.abs(ns - k.t) <= Math.max(1, span * 1e-6), `${k.label} says ${k.t} ns since the start`);
        prev = ns;
        if (i + 1 < ticks.length) assert.ok(k.x + k.w + 3 < ticks[i + 1].x, `labels overlap: ${k.label} | ${ticks[i + 1].label}`);
      }
      // The unit reads the span: nanoseconds or microseconds at a kernel's zoom, seconds or ms for the run.
      const unit = ticks.at(-1).label.split(' ')[1];
      if (span < 5000 && vw.t1 - bounds.first < 1e6) assert.ok(['ns', 'µs'].includes(unit), unit);
    }
    await screenshot(page, 'trace_nav_axis_deep');
    assert.deepEqual(page.errors, []);
    await page.close();
  });
});

describe('rows', () => {
  test('a pinned row leaves its section for the header, which stays on top while the page scrolls', async () => {
    const page = await openViewer();
    const row = await tv(page, () => window.liveprofTrace.state.layout.rows.find((r) => r.label === 'sim: data loader'));
    const box = await page.locator('.trace-canvas').boundingBox();
    await page.mouse.click(box.x + GUTTER - 8, box.y + row.y + 10);  // its pin
    await page.waitForFunction(() => window.liveprofTrace.state.pinned.size === 1);
    await page.setViewportSize({width: 1400, height: 300});  // a window the rows overflow
    await settle(page);
    const layout = await tv(page, () => ({pinned: window.liveprofTrace.state.pinLayout.rows.map((r) => r.label),
      rest: window.liveprofTrace.state.layout.rows.map((r) => r.label ?? r.title)}));
    assert.deepEqual(layout.pinned, ['sim: data loader']);
    assert.ok(!layout.rest.includes('sim: data loader'));
    // Scrolled down: the header (axis and the pinned row) is where it was on screen, the rows went up.
    const before = await tv(page, () => ({head: document.querySelector('.trace-head').getBoundingClientRect().top,
      rows: document.querySelector('.trace-canvas').getBoundingClientRect().top}));
    await tv(page, () => window.scrollTo(0, 400));
    await page.waitForTimeout(200);
    const after = await tv(page, () => ({head: document.querySelector('.trace-head').getBoundingClientRect(),
      rows: document.querySelector('.trace-canvas').getBoundingClientRect(), header: document.querySelector('header').offsetHeight,
      scrolled: window.scrollY}));
    assert.ok(after.scrolled > before.head - after.header + 20, `the page scrolled past the rows' top: ${after.scrolled}`);
    assert.ok(Math.abs((before.rows - after.rows.top) - after.scrolled) <= 1, 'the rows went up with the page');
    assert.ok(Math.abs(after.head.top - after.header) <= 1, `the header canvas stays under the page's header: ${after.head.top}`);
    // The pinned row is drawn there: its slices' colours in the header canvas.
    const pinned = await tv(page, () => window.liveprofTrace.state.pinLayout.rows[0]);
    let coloured = 0;
    for (let x = 200; x < 1200; x += 10) {
      const [r, g, b] = await pixel(page, '.trace-head', x, pinned.y + pinned.h / 2);
      coloured += !(r > 245 && g > 245 && b > 245) && !(r === 0 && g === 0 && b === 0);
    }
    assert.ok(coloured > 5, `${coloured} coloured pixels on the pinned row`);
    await screenshot(page, 'trace_nav_pinned');
    await tv(page, (id) => window.liveprofTrace.togglePin(id), row.id);
    assert.equal(await tv(page, () => window.liveprofTrace.state.pinLayout.rows.length), 0);
    assert.deepEqual(page.errors, []);
    await page.close();
  });

  test('a flow whose launch is outside the view is drawn to the timeline\'s edge', async () => {
    const page = await openViewer();
    const {launch, kernel} = await kernelWithLaunch();
    assert.ok(launch.ts + launch.dur <= kernel.ts, 'the launch ends before its kernel starts');
    await tv(page, ([a, b]) => window.liveprofTrace.setView(a, b), [kernel.ts, kernel.ts + kernel.dur]);
    await settle(page);
    const got = await tv(page, (ids) => {
      const s = window.liveprofTrace.state;
      return {flows: s.tile.flows.filter(([a, b]) => a === ids[0] && b === ids[1]),
        ends: window.liveprofTrace.rawTile().flow_ends.map((e) => e[0]), drawn: s.out.flows ?? [], view: s.view};
    }, [launch.id, kernel.id]);
    assert.ok(got.view.t0 > launch.ts + launch.dur, 'the launch is out of view');
    assert.equal(got.flows.length, 1, 'the tile has the flow');
    assert.ok(got.ends.includes(launch.id), 'and its far end');
    const arrow = got.drawn.find((f) => f.from === launch.id && f.to === kernel.id);
    assert.ok(arrow, `drawn: ${JSON.stringify(got.drawn).slice(0, 300)}`);
    assert.ok(arrow.clippedFrom && Math.abs(arrow.xa - GUTTER) < 0.5, JSON.stringify(arrow));
    assert.ok(!arrow.clippedTo && arrow.xb >= GUTTER);
    // A dark pixel on the line, just inside the edge.
    const t = 0.05;
    const [r, g, b] = await pixel(page, '.trace-canvas', arrow.xa + (arrow.xb - arrow.xa) * t, arrow.ya + (arrow.yb - arrow.ya) * t);
    assert.ok(r < 190 && g < 190 && b < 190, `the line is drawn there: ${[r, g, b]}`);
    await screenshot(page, 'trace_nav_flow_edge');
    assert.deepEqual(page.errors, []);
    await page.close();
  });

  test('Framework ops: lanes are the slices\' nesting depth, not a staircase', async () => {
    const page = await openViewer();
    const {step} = await kernelWithLaunch();
    for (const v of [[step[1], step[1] + 4 * step[2]], [step[1], step[1] + step[2] / 8]]) {
      await tv(page, ([a, b]) => window.liveprofTrace.setView(a, b), v);
      await settle(page);
      const {raw, lanes} = await tv(page, () => {
        const s = window.liveprofTrace.state;
        const row = s.layout.rows.find((r) => r.label === 'Framework ops');
        return {raw: window.liveprofTrace.rawTile(), lanes: row.lanes};
      });
      const ops = raw.tracks.find((t) => t.type === 'framework_ops');
      const depths = nestingDepths(ops.slices);
      for (let i = 0; i < ops.slices.length; i++) assert.equal(ops.slices[i][4], depths.get(ops.slices[i][0]), `slice ${i}`);
      const deepest = Math.max(0, ...depths.values());
      const want = Math.max(deepest + 1, foldedLanes(raw, ops, depths));
      assert.equal(lanes, want, `Framework ops: ${lanes} lanes, nesting needs ${want} (${ops.slices.length} slices)`);
    }
    assert.deepEqual(page.errors, []);
    await page.close();
  });
});

const LONG_NAME = 'vm:14497 · loader 1 · python3 worker';

describe('counters recorded on a thread', () => {
  let ingest;
  let dir;
  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'liveprof-counters-'));
    const socket = path.join(dir, 'ingest.sock');
    ingest = await startServer(['serve', '--port', '0', '--ingest', `unix:${socket}`]);
    const raw = await connectIngest(socket);
    raw.write(helloFrame({rank: 0, clockNs: 1_000_000}));
    // A training thread: steps of 10 ms; "loss" falling, "lr" stepping down, one sample a step.
    const events = [];
    for (let i = 0; i < 50; i++) {
      const ts = 2_000_000 + i * 10_000_000;
      events.push({ts, dur: 9_000_000, name: 1, track: 1});
      events.push({ts: ts + 8_000_000, dur: 0, name: 2, track: 1, kind: KIND_COUNTER, value: 3 * Math.exp(-i / 15) + 0.05 * (i % 3)});
      events.push({ts: ts + 8_500_000, dur: 0, name: 3, track: 1, kind: KIND_COUNTER, value: i < 25 ? 0.1 : 0.01});
    }
    // And a thread with a long name (it used to be cut in the gutter), loading a batch a step.
    for (let i = 0; i < 50; i++) events.push({ts: 2_000_000 + i * 10_000_000, dur: 4_000_000, name: 6, track: 2});
    events.sort((a, b) => a.ts + a.dur - (b.ts + b.dur));
    raw.write(batchFrame({seq: 1, names: [{id: 1, name: 'train'}, {id: 2, name: 'loss'}, {id: 3, name: 'lr'},
      {id: 4, name: 'trainer'}, {id: 5, name: LONG_NAME}, {id: 6, name: 'load'}],
    tracks: [{id: 1, name: 4}, {id: 2, name: 5}], events}));
    for (let i = 0; i < 100; i++) {
      const t = await api(ingest.url, '/api/trace?width=10');
      if (t.tracks.filter((x) => x.type === 'counter').length === 2) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    raw.destroy();
  });
  after(async () => {
    await stopServer(ingest);
    rmSync(dir, {recursive: true, force: true});
  });

  test('each counter name is a counter row, drawn with the values /api/trace gives', async () => {
    const page = await openViewer(ingest.url);
    await settle(page);
    const got = await tv(page, () => {
      const s = window.liveprofTrace.state;
      const rows = s.layout.rows.filter((r) => r.kind === 'track' && r.t.type === 'counter');
      return {rows, sections: s.layout.rows.filter((r) => r.kind === 'section').map((r) => r.title),
        drawn: s.out.counters, query: s.query};
    });
    assert.deepEqual(got.rows.map((r) => r.label).sort(), ['loss', 'lr']);
    assert.ok(got.sections.includes('Counters'), got.sections.join(', '));
    const json = await api(ingest.url, `/api/trace?${new URLSearchParams(got.query)}`);
    for (const row of got.rows) {
      const t = json.tracks.find((x) => x.track === row.id);
      const drawn = got.drawn[row.id];
      assert.ok(drawn, `${row.label} drawn`);
      const values = t.summaries.map((f) => f[6]);
      assert.equal(drawn.hi, Math.max(0, ...t.summaries.map((f) => Math.max(f[5], f[6]))), `${row.label}: the scale's top`);
      // Every sample in view, drawn with its value: the last of its pixel.
      const shown = drawn.points.filter((p) => !p.held).map((p) => p.last);
      assert.deepEqual(shown, values.slice(0, shown.length));
      // Samples closer than a pixel fold into one (the last shown): how many
      // depends on how fast the client sent them (42 of 50 beside a busy
      // suite, 50 alone); half is the floor.
      assert.ok(shown.length >= values.length / 2, `${shown.length} samples drawn of ${values.length}`);
      // The line at a sample's level: blue at y(last), a few pixels right of its start.
      const p = drawn.points[Math.floor(drawn.points.length / 2)];
      const y = drawn.top + drawn.h - (p.last - drawn.lo) / (drawn.hi - drawn.lo) * drawn.h;
      const [r, g, b] = await pixel(page, '.trace-canvas', p.x + 3, Math.round(y) + 0.5);
      assert.ok(b > 180 && r < 120, `the line at ${p.last}: ${[r, g, b]}`);
    }
    // The samples stay on their thread too (the event's details, exports).
    assert.ok(json.tracks.some((x) => x.type === 'host_thread' && x.summaries.length > 0));
    await screenshot(page, 'trace_nav_counters');
    assert.deepEqual(page.errors, []);
    await page.close();
  });

  test('the labels\' gutter drags wider, the whole name drawn, the width kept', async () => {
    const page = await openViewer(ingest.url);
    await settle(page);
    const state = () => tv(page, (name) => {
      const s = window.liveprofTrace.state;
      const row = s.layout.rows.find((r) => r.kind === 'track' && r.label.includes(name.slice(0, 8)));
      if (!row) throw new Error(`no row named ${name}: ${s.layout.rows.map((r) => r.label ?? r.title)}`);
      return {row, drawn: s.out.labels[row.id], gutter: +document.querySelector('.trace-canvas-box').dataset.gutter,
        stored: localStorage.getItem('liveprof.trace.gutter')};
    }, LONG_NAME);
    const before = await state();
    const label = before.row.label;  // (the ingest source's process first: "rank 0 · …")
    assert.ok(label.endsWith(LONG_NAME), label);
    assert.equal(before.gutter, GUTTER);
    assert.ok(before.drawn.endsWith('…') && before.drawn.length < label.length, `drawn: ${before.drawn}`);
    // The whole name on hover, at any width.
    const canvas = await page.locator('.trace-canvas').boundingBox();
    await page.mouse.move(canvas.x + 60, canvas.y + before.row.y + before.row.h / 2);
    await page.locator('.trace-tip:not(.hidden)').waitFor();
    assert.ok((await page.locator('.trace-tip').innerText()).startsWith(label));
    // Drag the handle at the gutter's right edge 160 px right.
    const handle = await page.locator('.trace-gutter-handle').boundingBox();
    assert.ok(Math.abs(handle.x + handle.width / 2 - (canvas.x + GUTTER)) <= 1, `the handle at ${handle.x}`);
    const frames = await tv(page, () => Number(document.querySelector('.trace-canvas').dataset.drawn));
    await page.mouse.move(handle.x + handle.width / 2, canvas.y + 40);
    await page.mouse.down();
    await page.mouse.move(handle.x + handle.width / 2 + 80, canvas.y + 40, {steps: 4});
    await page.mouse.move(handle.x + handle.width / 2 + 160, canvas.y + 40, {steps: 4});
    await page.mouse.up();
    await page.waitForFunction((n) => Number(document.querySelector('.trace-canvas').dataset.drawn) > n, frames);
    await settle(page);
    const after = await state();
    assert.equal(after.gutter, GUTTER + 160);
    assert.equal(after.stored, String(GUTTER + 160));
    assert.equal(after.drawn, label, 'the whole name drawn');
    // The timeline is the rest, from the gutter's new edge: the axis's ticks right of it, and a tile
    // at least as fine as its pixels.
    const got = await tv(page, () => {
      const s = window.liveprofTrace.state;
      return {ticks: s.outHead.ticks, W: s.W, query: s.query};
    });
    assert.ok(got.ticks.length > 2 && got.ticks.every((k) => k.x >= GUTTER + 160), JSON.stringify(got.ticks));
    assert.ok(got.query.width >= got.W - GUTTER - 160, `a tile ${got.query.width} px wide for ${got.W - GUTTER - 160}`);
    await screenshot(page, 'trace_nav_gutter');
    // Kept: a page opened later has it (localStorage); a double click gives the default back.
    const again = await openViewer(ingest.url);
    await settle(again);
    assert.equal(await again.locator('.trace-canvas-box').getAttribute('data-gutter'), String(GUTTER + 160));
    await again.locator('.trace-gutter-handle').dblclick();
    assert.equal(await again.locator('.trace-canvas-box').getAttribute('data-gutter'), String(GUTTER));
    assert.equal(await again.evaluate(() => localStorage.getItem('liveprof.trace.gutter')), null);
    // Bounded: dragged far left it stops at its minimum.
    const h2 = await again.locator('.trace-gutter-handle').boundingBox();
    await again.mouse.move(h2.x + 3, h2.y + 40);
    await again.mouse.down();
    await again.mouse.move(h2.x - 400, h2.y + 40, {steps: 4});
    await again.mouse.up();
    assert.equal(await again.locator('.trace-canvas-box').getAttribute('data-gutter'), '100');
    await again.locator('.trace-gutter-handle').dblclick();  // (the next tests' default)
    for (const p of [page, again]) {
      assert.deepEqual(p.errors, []);
      await p.close();
    }
  });
});

const {file: TRACE, absent} = sharedData('gpu/h200/resnet18_h200_slowloader.pt.trace.json.gz');

// Step `r`'s (/api/steps) device work from the store's own events
// (/api/export, Chrome JSON in µs): the kernels, copies and memsets whose
// launch (same correlation) begins in its host ProfilerStep span. Times in
// the store's ns: the export's µs less its offset, found from the host span.
async function stepWork(url, r) {
  const res = await fetch(new URL(`/api/export?t0=${r.begin_ns}&t1=${r.begin_ns + Math.round(r.step_ms * 1e6) + 5e8}`, url));
  const events = JSON.parse(gunzipSync(Buffer.from(await res.arrayBuffer()))).traceEvents;
  const host = events.filter((e) => e.ph === 'X' && e.name.startsWith('ProfilerStep#') &&
    Math.abs(e.dur - r.step_ms * 1e3) < 0.01).sort((a, b) => a.ts - b.ts)[0];
  assert.ok(host, `step ${r.step}: its ProfilerStep span in the export`);
  const offset = r.begin_ns - host.ts * 1e3;
  const launched = new Set(events.filter((e) => e.ph === 'X' && (e.cat === 'cuda_runtime' || e.cat === 'cuda_driver') &&
    e.args?.correlation && e.ts >= host.ts && e.ts < host.ts + host.dur).map((e) => e.args.correlation));
  let begin = Infinity, end = -Infinity, n = 0;
  for (const e of events) {
    if (e.ph !== 'X' || !['kernel', 'gpu_memcpy', 'gpu_memset'].includes(e.cat) || !launched.has(e.args?.correlation)) continue;
    begin = Math.min(begin, e.ts);
    end = Math.max(end, e.ts + e.dur);
    n++;
  }
  return {begin: Math.round(begin * 1e3 + offset), end: Math.round(end * 1e3 + offset), events: n};
}

describe('a replayed PyTorch trace (ResNet-18 on an H200)', {skip: absent && `${TRACE} is absent`}, () => {
  let replay;
  before(async () => {
    replay = await startServer(['replay', '--port', '0', '--loop', '--speed', 'max', TRACE]);
    for (let i = 0; i < 200; i++) {
      const t = await api(replay.url, '/api/trace?width=10');
      if (t.tracks.some((x) => x.type === 'framework_ops') && t.events > 50000) break;
      await new Promise((r) => setTimeout(r, 100));
    }
  });
  after(async () => stopServer(replay));

  test('a Steps row under the GPU over its own work, its ProfilerStep#N numbered as the pages number the steps', async () => {
    // (f) TF's viewer has a Steps row per device: each step over that device's work.
    let whole;
    for (let i = 0; i < 100; i++) {
      whole = await api(replay.url, '/api/trace?width=2000');
      if ((whole.tracks.find((t) => t.type === 'steps')?.slices.length ?? 0) > 12) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    const steps = whole.tracks.find((t) => t.type === 'steps');
    assert.ok(steps?.slices.length > 12, `Steps row: ${steps?.slices.length} steps`);
    assert.ok(steps.slices.every((s) => whole.names[s[3]].startsWith('ProfilerStep#')));
    // (b) Three steps of a later loop, as the pages number them (/api/steps): the Steps row has them,
    // labelled so, not ProfilerStep#3-6 again.
    const rows = (await api(replay.url, '/api/steps?last=30')).rows.slice(-6, -3);
    const near = await api(replay.url, `/api/trace?t0=${rows[0].begin_ns - 1e6}&t1=${rows[2].begin_ns + 1e9}&width=4000`);
    const named = new Map();
    for (const s of near.tracks.find((t) => t.type === 'steps').slices) {
      named.set((await api(replay.url, `/api/trace/event?id=${s[0]}`)).name, s);
    }
    const late = rows.map((r) => named.get(`ProfilerStep#${r.step}`));
    assert.ok(late.every(Boolean), `the Steps row has steps ${rows.map((r) => r.step).join(', ')}: ${[...named.keys()]}`);
    // Each span is the GPU's work of that step, from the events
    // themselves (/api/export): the kernels, copies and memsets launched in the host step,
    // first start to last end. The GPU starts after the DataLoader's wait: shifted from the host's.
    for (const [i, r] of rows.entries()) {
      const work = await stepWork(replay.url, r);
      const [, ts, dur] = late[i];
      assert.ok(Math.abs(ts - work.begin) <= 2, `step ${r.step}: the row begins at ${ts}, its GPU work at ${work.begin}`);
      assert.ok(Math.abs(ts + dur - work.end) <= 2, `step ${r.step}: the row ends at ${ts + dur}, its GPU work at ${work.end}`);
      assert.ok(Math.abs(dur / 1e6 - r.gpu.total_ms) < 1e-6, `step ${r.step}: ${dur / 1e6} ms, /api/steps' GPU range ${r.gpu.total_ms} ms`);
      assert.ok(ts - r.begin_ns > 100e6, `step ${r.step}: its GPU work begins ${(ts - r.begin_ns) / 1e6} ms into the host's step`);
      assert.ok(work.events > 100, `step ${r.step}: ${work.events} device events`);
    }
    const page = await openViewer(replay.url);
    await tv(page, ([a, b]) => window.liveprofTrace.setView(a, b), [rows[0].begin_ns, late[2][1] + late[2][2]]);
    await settle(page);
    await page.waitForFunction((ids) => ids.every((id) => window.liveprofTrace.stepLabels.get(id)), late.map((s) => s[0]));
    const labels = await tv(page, (ids) => ids.map((id) => window.liveprofTrace.stepLabels.get(id)), late.map((s) => s[0]));
    assert.deepEqual(labels, rows.map((r) => `ProfilerStep#${r.step}`));
    assert.ok(rows[0].step > 6, `a later loop: ${rows[0].step}`);
    const e = await api(replay.url, `/api/trace/event?id=${late[1][0]}`);
    assert.equal(e.name, labels[1]);
    assert.equal(e.step_num, rows[1].step);
    await screenshot(page, 'trace_nav_replay_steps');
    assert.deepEqual(page.errors, []);
    await page.close();
  });

  test('Framework ops stack by nesting in a launch-bound stretch; search frames a kernel', async () => {
    const page = await openViewer(replay.url);
    // Where Framework ops are busiest: the ops of a forward and backward, back to back.
    const whole = await api(replay.url, '/api/trace?width=4000');
    const ops = whole.tracks.find((t) => t.type === 'framework_ops');
    let raw, lanes, track;
    for (const busiest of [...ops.summaries].sort((a, b) => b[1] - a[1]).slice(0, 20)) {
      // One of the busiest pixels of the whole run (at most 20 ms of it): its ops one by one.
      const at = whole.t0 + busiest[0] * whole.ns_per_px;
      const span = Math.min(whole.ns_per_px, 20e6);
      const probe = await api(replay.url, `/api/trace?t0=${Math.floor(at)}&t1=${Math.ceil(at + span)}&width=1000`);
      if ((probe.tracks.find((t) => t.type === 'framework_ops')?.slices.length ?? 0) < 20) continue;
      await tv(page, ([a, b]) => window.liveprofTrace.setView(a, b), [at, at + span]);
      await settle(page);
      ({raw, lanes} = await tv(page, () => ({raw: window.liveprofTrace.rawTile(),
        lanes: window.liveprofTrace.state.layout.rows.find((r) => r.label === 'Framework ops').lanes})));
      track = raw.tracks.find((t) => t.type === 'framework_ops');
      if (track.slices.length >= 20) break;
    }
    assert.ok(track?.slices.length >= 20, `${track?.slices.length} Framework ops slices in view`);
    const depths = nestingDepths(track.slices);
    for (const s of track.slices) assert.equal(s[4], depths.get(s[0]));
    const want = Math.max(Math.max(0, ...depths.values()) + 1, foldedLanes(raw, track, depths));
    console.log(`# replay: Framework ops ${track.slices.length} slices, ${lanes} lanes; the former stack made ${stackLanes(track.slices)}`);
    assert.equal(lanes, want);
    assert.ok(lanes <= 4, `${lanes} lanes for ${track.slices.length} ops`);
    await screenshot(page, 'trace_nav_replay_ops');
    // A kernel found by name: framed at a third of the view.
    const kernel = raw.tracks.filter((t) => t.type === 'gpu_stream').flatMap((t) => t.slices).find((s) => s[5] === 'kernel');
    const searchedFrom = Math.max(0, Math.floor((await view(page)).t0 - 1));
    await page.locator('.search').fill(raw.names[kernel[3]]);
    await page.locator('.search').press('Enter');
    await page.waitForFunction(() => window.liveprofTrace.search.index > 0);
    await settle(page);
    const drawn = await tv(page, () => ({hit: window.liveprofTrace.state.out.hit, W: window.liveprofTrace.state.W,
      count: document.querySelector('.search-count').textContent}));
    // (from the view's start: the first match there, and its place among all)
    const expected = await api(replay.url, `/api/trace/search?${new URLSearchParams({q: raw.names[kernel[3]], dir: 'next',
      from: searchedFrom})}`);
    // (the replay goes on: later matches only add to the count)
    const [k, n] = drawn.count.split(' of ').map(Number);
    assert.equal(k, expected.index, drawn.count);
    assert.ok(n >= k && n <= expected.matches, `${drawn.count}: ${expected.matches} matches asked after`);
    assert.ok(drawn.hit && drawn.hit.w > (drawn.W - GUTTER) / 5, JSON.stringify(drawn));
    await screenshot(page, 'trace_nav_replay_search');
    assert.deepEqual(page.errors, []);
    await page.close();
  });
});
