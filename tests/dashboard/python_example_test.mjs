// The dashboard on real Python jobs sending to `liveprof serve --ingest`
// (Debian's python3-torch): first the smallest setup a user writes
// (examples/pytorch_minimal.py: connect and wrap_loader, nothing else), then
// the Python example (examples/pytorch_train.py, slow loader then fast).
// A minimal job must get its step time and input share on the pages; a
// finished job reads "job finished", not live and not stalled; late events
// are shown apart from drops.
import assert from 'node:assert/strict';
import {spawn} from 'node:child_process';
import {existsSync, mkdtempSync, rmSync} from 'node:fs';
import {tmpdir} from 'node:os';
import path from 'node:path';
import {after, before, describe, test} from 'node:test';
import {LIVEPROF, api, assertShown, assertShownSoon, launchBrowser, openPage, screenshot, startServer, stopServer, until} from './harness.mjs';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');
const PYTHONPATH = path.join(path.dirname(LIVEPROF), '..', 'python');
// The module's native part is made by the release build only (a sanitized
// library cannot load into a plain Python): elsewhere the release suite runs this.
const LIBRARY = path.join(PYTHONPATH, 'liveprof', 'libliveprof.so');
const SKIP = existsSync(LIBRARY) ? false : `no ${LIBRARY} in this build (a sanitizer build): the release suite runs it`;
let server;
let browser;
let dir;

function runPython(script, args) {
  return new Promise((resolve, reject) => {
    const child = spawn('/usr/bin/python3', [path.join(root, 'examples', script), ...args],
      {env: {...process.env, PYTHONPATH, PYTHONDONTWRITEBYTECODE: '1'}, stdio: ['ignore', 'pipe', 'pipe']});
    let out = '';
    child.stdout.on('data', (d) => { out += d; });
    child.stderr.on('data', (d) => { out += d; });
    child.on('exit', (code) => (code === 0 ? resolve(out) : reject(new Error(`${script} exited with ${code}:\n${out}`))));
  });
}

// Each job its own server: with several sources the views follow the first.
async function freshServer() {
  await stopServer(server);
  server = await startServer(['serve', '--port', '0', '--ingest', `unix:${dir}/ingest.sock`]);
  return server.url;
}

before(async () => {
  if (SKIP) return;
  dir = mkdtempSync(path.join(tmpdir(), 'liveprof-python-example-'));
  browser = await launchBrowser();
});

after(async () => {
  if (SKIP) return;
  await browser?.close();
  await stopServer(server);
  rmSync(dir, {recursive: true, force: true});
});

describe('the dashboard on Python jobs', {skip: SKIP}, () => {
  test('a minimal setup (connect + wrap_loader) gets its steps, input share and Pod row; then it has finished', async () => {
    const base = await freshServer();
    const page = await openPage(browser, `${base}#overview`);
    await until('the job is waited for', async () => (await api(base, '/api/status')).job_state === 'waiting', 10);
    await until('the badge says waiting', async () => (await page.locator('#conn').innerText()) === 'waiting for a job', 10);
    await runPython('pytorch_minimal.py', ['--connect', `unix:${dir}/ingest.sock`, '--steps', '200']);
    const status = await until('the job finished', async () => {
      const s = await api(base, '/api/status');
      return s.job_state === 'finished' && s.steps_closed >= 199 ? s : null;
    }, 30);
    // Every step has its row: no step left out for lack of device compute.
    assert.equal(status.diagnostics.find((d) => d.name === 'step_without_compute').count, 0);
    const o = await api(base, '/api/overview');
    assert.ok(o.summary.steps > 0, 'the overview has steps');
    assert.ok(o.summary.step_time_ms_avg >= 5, `average step ${o.summary.step_time_ms_avg} ms (5 ms of it a sleep)`);
    assert.ok(o.summary.pct.host_compute > 50, `compute ${o.summary.pct.host_compute}%: what is not input is compute`);
    assert.ok(Math.abs(o.summary.pct.host_compute + o.summary.pct.input + o.summary.pct.all_others - 100) < 1e-6);
    await page.locator('.page[data-page=overview] [data-field=step_time_ms_avg]').waitFor();
    await until('the overview draws the steps', async () =>
      (await page.locator('.page[data-page=overview] [data-field=step_time_ms_avg] .stat-value').innerText()) !== '—', 10);
    // The last steps may still be on their way: the page and /api agree
    // once both have the newest publication.
    await assertShownSoon(assert, page, '.page[data-page=overview] [data-field=step_time_ms_avg] .stat-value',
      async () => (await api(base, '/api/overview')).summary.step_time_ms_avg, 'average step', 10);
    assert.equal(await page.locator('.page[data-page=overview] [data-field=device_core_count]').count(), 0, 'a CPU job has no device cores');
    // Finished, not live (the stall clock's stop is analyses_test's: it takes 60 s).
    await until('the badge says finished', async () => (await page.locator('#conn').innerText()) === 'job finished', 10);
    // Dropped counts losses only; late events, if any, apart.
    const lost = status.events_dropped + status.diagnostics.filter((d) => d.severity === 'data_loss').reduce((t, d) => t + d.count, 0);
    assert.equal(Number((await page.locator('#drops b').innerText()).replace(/,/g, '')), lost);
    await screenshot(page, 'overview_python_minimal');
    await page.goto(`${base}#pod`);
    const pod = await api(base, '/api/pod');
    assert.equal(pod.workers.length, 1);
    assert.ok(pod.workers[0].steps > 0);
    await page.locator('.page[data-page=pod] .workers tbody tr').first().waitFor();
    // (the workers table's "Own steps" column: its own newest steps)
    const headers = await page.locator('.page[data-page=pod] .workers thead th').allInnerTexts();
    const own = headers.findIndex((h) => h.startsWith('Own steps'));
    assert.ok(own > 0, `a column "Own steps" in ${JSON.stringify(headers)}`);
    assertShown(assert, await page.locator('.page[data-page=pod] .workers tbody tr td').nth(own).innerText(), pod.workers[0].steps, 'Pod steps');
    await screenshot(page, 'pod_python_minimal');
    assert.deepEqual(page.errors, []);
    await page.close();
  });

  test('the Python example: its pages, screenshotted', async () => {
    const base = await freshServer();
    const job = runPython('pytorch_train.py', ['--connect', `unix:${dir}/ingest.sock`, '--steps', '60',
      '--loader-delay-ms', '30', '--fast-after', '40', '--program', 'python_example', '--quiet']);
    const page = await openPage(browser, `${base}#input_pipeline`);
    await until('the job is live', async () => (await api(base, '/api/status')).job_state === 'live', 30);
    await job;
    await until('the job finished', async () => (await api(base, '/api/status')).job_state === 'finished', 30);
    for (const id of ['overview', 'input_pipeline', 'tf_stats', 'alerts', 'pytorch', 'trace_viewer']) {
      await page.goto(`${base}#${id}`);
      await page.locator(`.page[data-page=${id}]`).waitFor();
      await new Promise((r) => setTimeout(r, id === 'pytorch' || id === 'trace_viewer' ? 3500 : 800));
      await screenshot(page, `${id}_python_example`);
    }
    // The CPU job's compute is compute, not idle.
    const ip = await api(base, '/api/input_pipeline');
    assert.equal(ip.bottleneck.compute_on, 'host');
    assert.ok(ip.bottleneck.compute_pct > ip.bottleneck.idle_pct, JSON.stringify(ip.bottleneck));
    assert.deepEqual(page.errors, []);
    await page.close();
  });
});
