// The Pod page in a real browser against `liveprof demo --workers 4
// --straggler 2`: four simulated ranks, rank 2 half as slow again. The page
// shows the straggler alert naming rank 2, marks rank 2 in the workers
// table, and its step × worker table carries the numbers /api/pod says.
// With rank 2 behind the others, the ranks are compared over the steps every
// rank has: rank 2's lag there is its configured slowdown, it is the boxed
// worst of each row drawn, its column holds its times, and how far behind it
// is shows (its steps-behind against its pace in the balanced run).
// Run: node --test tests/dashboard/
import assert from 'node:assert/strict';
import {after, before, describe, test} from 'node:test';
import {api, assertShown, launchBrowser, openPage, screenshot, startServer, stopServer, until} from './harness.mjs';

const STEPS = 30;
const WORKERS = 4;
let server;
let browser;
let base;

before(async () => {
  server = await startServer(['demo', '--port', '0', '--scenario', 'balanced', '--steps', String(STEPS),
    '--workers', String(WORKERS), '--straggler', '2']);
  base = server.url;
  browser = await launchBrowser();
});

after(async () => {
  await browser?.close();
  await stopServer(server);
});

// Resolves with /api/pod once every rank's steps are in and nothing moves.
async function settled() {
  for (let i = 0; i < 900; i++) {  // 90 s: the suite runs beside other tests (tests/CMakeLists.txt).
    const p = await api(base, '/api/pod');
    // Every rank at its last step (a step whose device work came after it
    // closed, on a loaded machine, has no row: 29 cells, never 30).
    if (p.workers.length === WORKERS && p.workers.every((w) => w.last_step === STEPS - 1)) {
      await new Promise((r) => setTimeout(r, 400));
      const again = await api(base, '/api/pod');
      if (again.cells_total === p.cells_total) return again;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`the demo's ${WORKERS} ranks did not finish ${STEPS} steps in 90 s`);
}

// The grid's straggler column (data-worker `id`) holds a step time in
// every row drawn, and every boxed worst cell is the straggler's.
async function assertStragglerColumn(root, id) {
  const column = await root.locator(`.pod-steps tbody td[data-worker="${id}"]`).allInnerTexts();
  assert.ok(column.length > 0, 'the grid has rows');
  assert.ok(column.every((t) => Number(t.replace(/,/g, '')) > 0), `the straggler's column: ${column.slice(0, 5).join(' | ')}…`);
  const boxed = await root.locator('.pod-steps tbody td.worst').evaluateAll((tds) => tds.map((td) => td.dataset.worker));
  assert.equal(boxed.length, column.length, 'one boxed worst a row');
  assert.deepEqual([...new Set(boxed)], [id], 'the boxed worst of each row');
}

describe('the Pod page on the demo with a straggler', () => {
  test('shows the straggler, its alert, and rows of numbers equal to /api/pod', async () => {
    const pod = await settled();
    assert.deepEqual(pod.workers.map((w) => w.label), ['rank 0', 'rank 1', 'rank 2', 'rank 3']);
    assert.equal(pod.straggler.label, 'rank 2');
    const alerts = await api(base, '/api/alerts');
    const firing = alerts.firing.find((f) => f.rule === 'straggler');
    assert.ok(firing, `the straggler alert is not firing: ${JSON.stringify(alerts.firing.map((f) => f.rule))}`);
    assert.equal(firing.worker, 'rank 2');

    const page = await openPage(browser, `${base}#pod`);
    await page.waitForFunction((seq) => document.body.dataset.phase === 'live' &&
      +(document.querySelector('.page[data-page=pod]')?.dataset.seq ?? 0) >= seq, pod.seq);
    const root = page.locator('.page[data-page=pod]');

    // The alert, naming the worker.
    const alertText = await root.locator('.straggler-alert').innerText();
    assert.match(alertText, /straggler/);
    assert.match(alertText, /rank 2 is at least [\d.]+% slower than the median worker/);
    assert.equal(await root.locator('.straggler-alert li').getAttribute('data-worker-label'), 'rank 2');

    // The workers table: rank 2 is marked and highlighted, its numbers are /api's.
    const rows = root.locator('.workers tbody tr');
    assert.equal(await rows.count(), WORKERS);
    const straggler = root.locator('.workers tbody tr.selected');
    assert.equal(await straggler.count(), 1);
    const cells = await straggler.locator('td').allInnerTexts();
    assert.equal(cells[0], 'rank 2');
    assert.equal(cells[cells.length - 1], 'straggler (alert firing)');
    const r2 = pod.workers[2];
    assert.equal(cells[1], '0');  // every rank finished: none behind.
    assertShown(assert, cells[2], r2.common.mean_step_ms, 'rank 2 mean step over the same steps');
    assertShown(assert, cells[3], r2.common.lag_pct, 'rank 2 lag vs median over the same steps');
    assert.ok(r2.common.lag_pct > 20, `rank 2 lags the median by ${r2.common.lag_pct}%`);
    assertShown(assert, cells[5], r2.common.worst_count, 'rank 2 worst count');
    assertShown(assert, cells[7], r2.mean_step_ms, 'rank 2 own mean step');

    // The step × worker table: one row per step shown, newest first, each
    // with the median, the worst worker and a number per worker.
    const stepRows = root.locator('.pod-steps tbody tr');
    assert.equal(await stepRows.count(), pod.steps.length);
    const newest = pod.steps[pod.steps.length - 1];
    const first = stepRows.first();
    assert.equal(await first.getAttribute('data-step'), String(newest.step));
    assertShown(assert, await first.locator('td.median').innerText(), newest.median_ms, 'median of the newest step');
    assert.equal(await first.locator('td.worst-label').innerText(), 'rank 2');
    for (const c of newest.cells) {
      assertShown(assert, await first.locator(`td[data-worker="${c.worker}"]`).innerText(), c.step_ms,
        `worker ${c.worker} at step ${newest.step}`);
    }
    assert.equal(await first.locator('td.worst').getAttribute('data-worker'), '3');  // rank 2 is worker 3.
    const texts = await root.locator('.pod-steps tbody td.heat').allInnerTexts();
    assert.equal(texts.length, pod.steps.reduce((t, st) => t + st.cells.length, 0));
    assert.ok(texts.every((t) => Number(t.replace(/,/g, '')) > 0), 'every cell holds a step time');
    await screenshot(page, 'pod');
    assert.deepEqual(page.errors, []);
    await page.close();
  });

  // The run: `liveprof demo --workers 4 --straggler 2` as it
  // comes (the demo's schedule of scenarios), rank 2 1.5x slower and falling
  // behind. Ranks are compared over the steps every rank has: rank 2 lags
  // by about its configured slowdown there, is the boxed worst of each row
  // drawn, its column holds its step times, and how far behind it is shows.
  test('a rank behind is compared over the same steps, boxed, and its lag shown', async () => {
    const demo = await startServer(['demo', '--port', '0', '--workers', String(WORKERS), '--straggler', '2']);
    try {
      const pod = await until('rank 2 30 steps behind, 20 common steps', async () => {
        const p = await api(demo.url, '/api/pod');
        const r2 = p.workers.find((w) => w.label === 'rank 2');
        return p.workers.length === WORKERS && r2?.behind_steps >= 30 && p.common.steps >= 20 ? p : null;
      }, 120);
      const r2 = pod.workers.find((w) => w.label === 'rank 2');
      assert.equal(r2.id, 3);
      assert.equal(r2.behind_steps, pod.newest_step - r2.last_step);
      assert.equal(pod.common.frontier_step, r2.last_step, 'the common range ends at rank 2\'s last step');
      assert.equal(pod.common.workers, WORKERS);
      // The demo's configuration: rank 2's device compute 1.5x the others'
      // (+50 %; the host's share is not scaled, so a little less).
      assert.ok(r2.common.lag_pct >= 35 && r2.common.lag_pct <= 55, `rank 2 lags by ${r2.common.lag_pct}% over the same steps`);
      assert.equal(r2.common.worst_count, pod.common.steps, 'rank 2 is the worst of every common step');
      for (const w of pod.workers.filter((x) => x !== r2)) {
        assert.ok(Math.abs(w.common.lag_pct) < 10, `${w.label} lags by ${w.common.lag_pct}%`);
        assert.ok(w.common.mean_step_ms < r2.common.mean_step_ms, `${w.label} is faster than rank 2 over the same steps`);
      }
      assert.ok(pod.steps.length > 0 && pod.steps.every((st) => st.cells.length === WORKERS && st.worst === 3 &&
        st.step <= r2.last_step), 'every row drawn has every rank, rank 2 the worst');
      assert.equal(pod.straggler.label, 'rank 2');

      const page = await openPage(browser, `${demo.url}#pod`);
      await page.waitForFunction((seq) => +(document.querySelector('.page[data-page=pod]')?.dataset.seq ?? 0) >= seq, pod.seq);
      const root = page.locator('.page[data-page=pod]');
      await root.locator('.workers tbody tr.selected').first().waitFor({timeout: 15000});
      await page.click('#pause');  // (the page holds still while it is read)
      const cells = await root.locator('.workers tbody tr.selected td').allInnerTexts();
      assert.equal(cells[0], 'rank 2');
      assert.match(cells[1], /^\d[\d,]* behind$/, `rank 2's Behind cell: ${cells[1]}`);
      assert.ok(Number(cells[1].replace(/[, a-z]/g, '')) >= 30);
      assert.match(cells[3], /^\+(3[5-9]|4\d|5[0-5])\.\d%$/, `rank 2's lag over the same steps: ${cells[3]}`);
      assert.match(await root.locator('.pod-steps thead th[data-worker="3"]').innerText(), /rank 2\s+[\d,]+ steps behind/);
      assert.match(await root.locator('.behind-note').innerText(), /rank 2 is [\d,]+ steps behind/);
      assert.match(await root.locator('.summary [data-field=behind] .stat-value').innerText(), /^rank 2: [\d,]+ steps$/);
      await assertStragglerColumn(root, '3');
      await screenshot(page, 'pod_behind');
      assert.deepEqual(page.errors, []);
      await page.close();
    } finally {
      await stopServer(demo);
    }
  });

  // No step limit, so rank 2 falls further behind than the window (200)
  // of newest step numbers. The rows it has are kept for the common range:
  // it is still compared over the same steps, still the straggler with its
  // own steps, lag and how far behind, never a row of zeros, and no other
  // rank is named slowest.
  test('a rank far behind the window is still the straggler, with its numbers', async () => {
    // --rate: the model's time runs ~8x faster (60 k events/s a rank), so
    // rank 2 is 200 steps behind in seconds, not half a minute.
    const far = await startServer(['demo', '--port', '0', '--scenario', 'balanced', '--workers', String(WORKERS),
      '--straggler', '2', '--rate', '60000']);
    try {
      let pod;
      for (let i = 0; i < 1800; i++) {  // 180 s at most (about 5 s alone).
        pod = await api(far.url, '/api/pod');
        const r2 = pod.workers.find((w) => w.label === 'rank 2');
        if (r2 && r2.behind_steps > pod.window_steps) break;
        await new Promise((r) => setTimeout(r, 100));
      }
      const r2 = pod.workers.find((w) => w.label === 'rank 2');
      assert.ok(r2.behind_steps > pod.window_steps, `rank 2 is ${r2.behind_steps} steps behind`);
      assert.ok(r2.steps > 0 && r2.mean_step_ms > 0 && r2.compared_steps > 0, JSON.stringify(r2));
      assert.ok(r2.lag_pct > 20, `rank 2 lags by ${r2.lag_pct}%`);
      assert.equal(pod.straggler.label, 'rank 2');
      // One scenario (balanced): each rank's pace is constant, so how far
      // behind rank 2 is follows from how much slower its steps are: at the
      // newest step N of the others it is at N / r, r its mean step over the
      // same steps against theirs (the demo's configuration: 1.5x device
      // compute, r a little under 1.5 with the host's share unscaled).
      assert.ok(r2.common, `rank 2 is compared over the same steps: ${r2.not_common}`);
      const others = pod.workers.filter((w) => w.label !== 'rank 2');
      const r = r2.common.mean_step_ms / (others.reduce((t, w) => t + w.common.mean_step_ms, 0) / others.length);
      assert.ok(r > 1.3 && r <= 1.55, `rank 2's steps are ${r}x the others' (configured: 1.5x device compute)`);
      const expected = (pod.newest_step + 1) * (1 - 1 / r);
      assert.ok(Math.abs(r2.behind_steps - expected) <= 0.1 * expected,
        `rank 2 is ${r2.behind_steps} steps behind; ${expected.toFixed(0)} expected from its ${r.toFixed(3)}x steps`);
      const page = await openPage(browser, `${far.url}#pod`);
      await page.waitForFunction((seq) => +(document.querySelector('.page[data-page=pod]')?.dataset.seq ?? 0) >= seq, pod.seq);
      const root = page.locator('.page[data-page=pod]');
      const selected = root.locator('.workers tbody tr.selected');
      // (the table may be drawn a moment after the page's seq moved: wait for the row)
      await selected.first().waitFor({timeout: 15000});
      assert.equal(await selected.count(), 1);
      const cells = await selected.locator('td').allInnerTexts();
      assert.equal(cells[0], 'rank 2');
      assert.ok(Number(cells[6].replace(/,/g, '')) > 0, `rank 2 shows ${cells[6]} steps`);
      const shownBehind = Number(cells[1].replace(/,/g, '').replace(' behind', ''));
      assert.ok(shownBehind > 200, `rank 2 shows ${cells[1]} steps behind`);
      assert.match(cells[3], /^\+\d/, 'rank 2 lags over the same steps');
      assert.match(await root.locator('.summary').innerText(), /rank 2 \+/);
      // Still compared over the steps every rank has: its column holds numbers
      // and it is the boxed worst of the rows drawn.
      await assertStragglerColumn(root, '3');
      await screenshot(page, 'pod_far_behind');
      assert.deepEqual(page.errors, []);
      await page.close();
    } finally {
      await stopServer(far);
    }
  });
});
