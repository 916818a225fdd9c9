// The Modules page in a real browser, on a real PyTorch job: `liveprof run
// -- /usr/bin/python3 examples/pytorch_plain.py` (Debian's python3-torch,
// no `import liveprof`) at host trace level 3, so the job's module hooks
// record each module's forward and backward. The page lists the modules
// /api/modules has, with its numbers; before any, it says how to get them.
import assert from 'node:assert/strict';
import {existsSync} from 'node:fs';
import path from 'node:path';
import {after, before, describe, test} from 'node:test';
import {LIVEPROF, api, assertShown, launchBrowser, openPage, screenshot, startServer, stopServer} from './harness.mjs';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');
const STEPS = 40;
// What `liveprof run` puts in a Python job, next to the binary's build. The
// sanitizer builds make none (a sanitized library cannot load into a plain
// Python): there the job runs unprofiled, and this test is the release
// suite's.
const LIBRARY = path.join(path.dirname(LIVEPROF), '..', 'python', 'liveprof', 'libliveprof.so');
const SKIP = existsSync(LIBRARY) ? false : `no ${LIBRARY} in this build (a sanitizer build): the release suite runs it`;
let server;
let browser;

before(async () => {
  if (SKIP) return;
  process.env.LIVEPROF_HOST_LEVEL = '3';  // (the job inherits it)
  server = await startServer(['run', '--port', '0', '--linger', '120', '--', '/usr/bin/python3',
    path.join(root, 'examples/pytorch_plain.py'), '--steps', String(STEPS), '--quiet']);
  browser = await launchBrowser();
});

after(async () => {
  if (SKIP) return;
  await browser?.close();
  await stopServer(server);
});

// Resolves with /api/modules once the job's last steps are in and nothing moves.
async function settled(base) {
  let last = null;
  for (let i = 0; i < 600; i++) {
    const m = await api(base, '/api/modules');
    const calls = m.rows.find((r) => r.name === 'SmallCnn')?.calls ?? 0;
    if (calls >= STEPS && last && JSON.stringify(last.rows) === JSON.stringify(m.rows)) return m;
    last = m;
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`no settled module table in 150 s: ${JSON.stringify(last)}`);
}

describe('the Modules page on an unmodified PyTorch job at level 3', {skip: SKIP}, () => {
  test('lists each module with its forward, self and backward time as /api/modules', async () => {
    const m = await settled(server.url);
    const names = m.rows.map((r) => r.name).sort();
    assert.deepEqual(names, ['SmallCnn', 'SmallCnn.conv1 (Conv2d)', 'SmallCnn.conv2 (Conv2d)', 'SmallCnn.fc (Linear)']);
    const model = m.rows.find((r) => r.name === 'SmallCnn');
    assert.equal(model.backward_calls, 0);  // fed with data, no parameters of its own: no end to observe.
    assert.ok(model.forward_self_ms < model.forward_ms);
    for (const r of m.rows.filter((x) => x.name !== 'SmallCnn')) {
      assert.equal(r.calls, model.calls, r.name);
      assert.equal(r.backward_calls, r.calls, r.name);
      assert.ok(r.backward_ms > 0 && r.forward_self_ms === r.forward_ms, r.name);
      assert.equal(r.memory_bytes_last, null);  // (no CUDA here)
    }

    const page = await openPage(browser, `${server.url}#modules`);
    const rows = page.locator('.page[data-page=modules] .modules-table tbody tr');
    await rows.first().waitFor({timeout: 15000});
    assert.equal(await rows.count(), m.rows.length);
    assert.equal(await page.locator('.page[data-page=modules] .empty').isVisible(), false);
    const conv1 = m.rows.find((r) => r.name === 'SmallCnn.conv1 (Conv2d)');
    const cells = await rows.filter({hasText: 'SmallCnn.conv1 (Conv2d)'}).locator('td').allInnerTexts();
    assert.equal(cells[0], 'SmallCnn.conv1 (Conv2d)');
    assertShown(assert, cells[1], conv1.calls, 'conv1 calls');
    assertShown(assert, cells[2], conv1.forward_ms, 'conv1 forward');
    assertShown(assert, cells[5], conv1.backward_ms, 'conv1 backward');
    assert.equal(cells[7], '—');
    const model_cells = await rows.filter({has: page.locator('td:first-child', {hasText: /^SmallCnn$/})})
      .locator('td').allInnerTexts();
    assert.equal(model_cells[0], 'SmallCnn');
    assert.equal(model_cells[5], '—');  // no backward observed
    await screenshot(page, 'modules');
    assert.deepEqual(page.errors, []);
    await page.close();
  });
});
