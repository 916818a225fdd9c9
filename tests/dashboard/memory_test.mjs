// The Memory page: on `liveprof replay --loop` of the H200
// ResNet-18 trace (~700 MiB in use on a 139.8 GiB GPU) the timeline's y axis
// is scaled to the data with round binary ticks, the capacity is a label
// above the scale, and the breakdown at the peak lists the ops that made the
// live allocations, as /api/memory does. Screenshots of the page on the
// replay and on the demo.
import assert from 'node:assert/strict';
import {execFileSync} from 'node:child_process';
import {mkdtempSync, readFileSync, writeFileSync} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {after, describe, test} from 'node:test';
import {bytes, int} from '../../static/format.js';
import {api, launchBrowser, openPage, screenshot, sharedData, startServer, stopServer} from './harness.mjs';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');
const {file: TRACE, absent} = sharedData('gpu/h200/resnet18_h200_slowloader.pt.trace.json.gz');

const GIB = 1024 ** 3;
const UNIT = {B: 1, KiB: 1024, MiB: 1024 ** 2, GiB: GIB, TiB: 1024 ** 4};
const UNATTRIBUTED = 'unattributed (no enclosing op seen)';

let browser;
after(async () => browser?.close());

async function until(what, f, tries = 300) {
  for (let i = 0; i < tries; i++) {
    const v = await f();
    if (v) return v;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out waiting for ${what}`);
}

// The memory id's chart and table as the page shows them, once the page's
// peak equals the API's (the two read the same publications, in a race).
async function shown(page, base, id) {
  const card = page.locator('.page[data-page=memory]');
  await card.locator('select.allocator').selectOption(id);
  return until('the page to show the API\'s peak and breakdown', async () => {
    const m = (await api(base, '/api/memory')).memories.find((x) => x.id === id);
    const chart = card.locator('.timeline');
    const yMax = Number(await chart.getAttribute('data-y-max'));
    const ticks = JSON.parse((await chart.getAttribute('data-ticks')) ?? '[]');
    // The cells shown: TensorFlow's columns (requested size, region, data
    // type, shape) only when some row has them.
    const rows = await card.locator('.breakdown tbody tr').evaluateAll((trs) =>
      trs.map((tr) => [...tr.querySelectorAll('td:not([hidden])')].map((td) => td.innerText)));
    const annotated = m.breakdown.some((r) => r.requested_bytes || r.region || r.data_type || r.shape);
    const want = m.breakdown.map((r) => (annotated
      ? [r.op || UNATTRIBUTED, bytes(r.bytes), r.requested_bytes ? bytes(r.requested_bytes) : '—', int(r.occurrences),
        bytes(r.total_bytes), r.region, r.data_type, r.shape]
      : [r.op || UNATTRIBUTED, bytes(r.bytes), int(r.occurrences), bytes(r.total_bytes)]));
    const key = (r) => r.join('|');
    const same = rows.length === want.length && JSON.stringify(rows.map(key).sort()) === JSON.stringify(want.map(key).sort());
    return same && yMax > 0 && ticks.length > 1 ? {m, yMax, ticks, rows, card} : null;
  });
}

function assertBinaryTicks(ticks) {
  const values = ticks.map((t) => {
    const match = /^(\d+(?:\.\d+)?) (B|KiB|MiB|GiB|TiB)$/.exec(t);
    assert.ok(match, `tick label "${t}" is not a number and a binary unit`);
    return Number(match[1]) * UNIT[match[2]];
  });
  // One unit for all; evenly spaced by a power of two (64 MiB, 128 MiB, ...).
  assert.equal(new Set(ticks.map((t) => t.split(' ')[1])).size, 1, ticks.join(', '));
  const step = values[1] - values[0];
  assert.ok(Number.isInteger(Math.log2(step)), `tick step ${step} B is not a power of two: ${ticks.join(', ')}`);
  values.forEach((v, i) => assert.equal(v, values[0] + i * step, ticks.join(', ')));
}

describe('the Memory page on a replayed PyTorch job', {skip: absent && `${TRACE} is absent`}, () => {
  let server;
  after(async () => stopServer(server));

  test('the y axis fits the data, the capacity is a label, the breakdown is by op as the API says', async () => {
    server = await startServer(['replay', '--port', '0', '--loop', TRACE]);
    const base = server.url;
    const id = 'GPU:0 CUDA:0';
    await until('a GPU peak attributed to ops', async () => {
      const m = (await api(base, '/api/memory')).memories.find((x) => x.id === id);
      return m?.breakdown_at_peak && m.peak_attributed_allocations > 0;
    });
    browser ??= await launchBrowser();
    const page = await openPage(browser, base);
    await page.goto(`${base}#memory`);
    const {m, yMax, ticks, rows, card} = await shown(page, base, id);

    // The axis: the data with headroom, not the 139.8 GiB capacity.
    assert.ok(m.capacity_bytes > 100 * GIB, `capacity ${m.capacity_bytes}`);
    assert.ok(yMax >= m.peak_bytes && yMax <= 2 * m.peak_bytes, `y max ${yMax} for a peak of ${m.peak_bytes}`);
    assertBinaryTicks(ticks);
    assert.ok(ticks.every((t) => t.endsWith(' MiB')), ticks.join(', '));
    const marker = card.locator('.capacity-marker');
    assert.ok(await marker.isVisible());
    assert.match(await marker.innerText(), /^Capacity 139\.\d\d GiB: far above this scale/);

    // The breakdown: ops, and what is attributed said in numbers.
    assert.ok(rows.length > 1);
    assert.ok(rows.every((r) => r[0] !== '' && r[1] !== '0 B'), JSON.stringify(rows));
    assert.ok(rows.some((r) => r[0] === 'aten::cudnn_convolution'), JSON.stringify(rows));
    const note = await card.locator('.peak-note').innerText();
    assert.match(note, new RegExp(`Attributed to an op: ${int(m.peak_attributed_allocations)} of ${int(m.peak_allocations)} allocations`));
    assert.ok(!/Attributed: yes/.test(await card.innerText()));
    // PyTorch says no region, type or shape: those columns are not shown.
    assert.deepEqual(await card.locator('.breakdown th:not([hidden])').allInnerTexts(),
      ['Op', 'Allocation size', 'Occurrences', 'Total']);
    await screenshot(page, 'memory_replay');
    assert.deepEqual(page.errors, []);
    await page.close();
  });
});

describe('the Memory page on the demo', () => {
  let server;
  after(async () => stopServer(server));

  test('balanced: the peak is the forward pass\'s activations, attributed to its ops', async () => {
    server = await startServer(['demo', '--port', '0', '--scenario', 'balanced', '--steps', '20']);
    const base = server.url;
    const first = await until('a device memory peak', async () => {
      const ms = (await api(base, '/api/memory')).memories;
      return ms.find((x) => !x.host && x.breakdown_at_peak && x.peak_allocations > 0);
    });
    browser ??= await launchBrowser();
    const page = await openPage(browser, base);
    await page.goto(`${base}#memory`);
    const {m, yMax, ticks, rows, card} = await shown(page, base, first.id);
    assert.ok(yMax >= m.peak_bytes && yMax <= 2 * m.peak_bytes, `y max ${yMax} for a peak of ${m.peak_bytes}`);
    assertBinaryTicks(ticks);
    // Every activation is allocated inside its forward op.
    assert.equal(m.peak_attributed_allocations, m.peak_allocations, JSON.stringify(m.breakdown_by_op));
    assert.ok(rows.every((r) => r[0] !== UNATTRIBUTED), JSON.stringify(rows));
    assert.match(await card.locator('.capacity-marker').innerText(), /far above this scale/);
    await screenshot(page, 'memory_demo');
    assert.deepEqual(page.errors, []);
    await page.close();
    await stopServer(server);
    server = null;
  });

  test('memory_growth: capacity near the data is a line on the scale; the leak is unattributed', async () => {
    server = await startServer(['demo', '--port', '0', '--scenario', 'memory_growth', '--steps', '80']);
    const base = server.url;
    const first = await until('a device memory peak near the capacity', async () => {
      const ms = (await api(base, '/api/memory')).memories;
      return ms.find((x) => !x.host && x.breakdown_at_peak && x.capacity_bytes > 0 && x.peak_bytes > x.capacity_bytes / 2);
    });
    browser ??= await launchBrowser();
    const page = await openPage(browser, base);
    await page.goto(`${base}#memory`);
    const {m, yMax, ticks, rows, card} = await shown(page, base, first.id);
    // The leak grows toward the capacity: the axis takes the capacity in.
    assert.ok(yMax >= m.capacity_bytes && yMax <= 2 * m.capacity_bytes, `y max ${yMax}, capacity ${m.capacity_bytes}`);
    assertBinaryTicks(ticks);
    assert.match(await card.locator('.capacity-marker').innerText(), /the dashed line/);
    // The leaked blocks are allocated between ops (the model's "cache"): no
    // op to name, and the page says so rather than claiming attribution.
    assert.ok(m.peak_allocations > m.peak_attributed_allocations, JSON.stringify(m.breakdown_by_op));
    assert.ok(rows.some((r) => r[0] === UNATTRIBUTED), JSON.stringify(rows));
    const note = await card.locator('.peak-note').innerText();
    assert.match(note, new RegExp(`Attributed to an op: ${int(m.peak_attributed_allocations)} of ${int(m.peak_allocations)} allocations`));
    await screenshot(page, 'memory_demo_growth');
    assert.deepEqual(page.errors, []);
    await page.close();
  });
});

// TensorFlow's allocator events say the op, region, data type, shape and
// requested size of each allocation: the breakdown shows TensorBoard's
// columns, rows of equal fields merged (fixtures/tf_memory.txtpb, encoded
// here with protoc as the build encodes its schema).
describe('the Memory page on a TensorFlow trace with memory annotations', () => {
  let server;
  after(async () => stopServer(server));

  test('the breakdown has the op, requested size, region, data type and shape of each row', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'liveprof-tf-memory-'));
    const file = path.join(dir, 'tf_memory.xplane.pb');
    writeFileSync(file, execFileSync('protoc', [`-I${path.join(root, 'src/import')}`,
      '--encode=liveprof.xplane.XSpace', 'xplane.proto'],
    {input: readFileSync(path.join(root, 'tests/dashboard/fixtures/tf_memory.txtpb'))}));
    server = await startServer(['replay', '--port', '0', file]);
    const base = server.url;
    const id = 'GPU:0 GPU_0_bfc';
    const MIB = 1024 ** 2;
    const m = await until('the breakdown at the peak', async () => {
      const x = (await api(base, '/api/memory')).memories.find((y) => y.id === id);
      return x?.breakdown_at_peak && x.num_deallocations === 1 ? x : null;
    });
    // What the fixture says, row by row (total bytes descending).
    const row = (op, size, n, requested, region, type, shape) => ({op, bytes: size, occurrences: n,
      total_bytes: size * n, requested_bytes: requested, region, data_type: type, shape});
    assert.deepEqual(m.breakdown, [
      row('model/conv1/Conv2D', 4 * MIB, 2, 4 * MIB, 'output', 'float', '[32,64,32,16]'),
      row('model/dense/MatMul', 2 * MIB, 1, 2 * MIB, 'output', 'bfloat16', '[128,8192]'),
      row('model/conv1/Conv2D', MIB, 1, 1000000, 'temp', 'half', '[500000]'),
    ]);
    assert.equal(m.peak_bytes, 11 * MIB);
    assert.equal(m.peak_attributed_bytes, 11 * MIB);
    assert.deepEqual(m.breakdown_by_op, [
      {op: 'model/conv1/Conv2D', bytes: 9 * MIB, allocations: 3},
      {op: 'model/dense/MatMul', bytes: 2 * MIB, allocations: 1},
    ]);

    browser ??= await launchBrowser();
    const page = await openPage(browser, base);
    await page.goto(`${base}#memory`);
    const {rows, card} = await shown(page, base, id);
    assert.deepEqual(await card.locator('.breakdown th:not([hidden])').allInnerTexts(),
      ['Op', 'Allocation size', 'Requested size', 'Occurrences', 'Total', 'Region type', 'Data type', 'Shape']);
    // TF's events here say no capacity: not "0 B".
    assert.match(await card.locator('.stats').first().innerText(), /Capacity\s+not said[\s\S]*Free now\s+not said/);
    // A 5 ms trace: the time axis's labels are distinct (not "-0.004" thrice).
    const xTicks = JSON.parse(await card.locator('.timeline').getAttribute('data-x-ticks'));
    assert.ok(xTicks.length > 2 && new Set(xTicks).size === xTicks.length, xTicks.join(', '));
    assert.deepEqual(rows.find((r) => r[5] === 'temp'),
      ['model/conv1/Conv2D', '1.00 MiB', bytes(1000000), '1', '1.00 MiB', 'temp', 'half', '[500000]']);
    await screenshot(page, 'memory_tensorflow');
    assert.deepEqual(page.errors, []);
    await page.close();
  });
});
