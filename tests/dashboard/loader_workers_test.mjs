// A PyTorch job with num_workers=2 under `liveprof run`,
// in Chromium: the Input pipeline page's advice follows what the loader
// workers' own rows show. Once the loader is fast the workers are mostly
// idle and the loop's short wait is each batch's hand-off ("add workers" is
// wrong there); while the loader is slow they are busy and more workers is
// the advice. "Input on" is said in words, the workers' rows are labelled
// with their processes, and TF stats of the training process leave out the
// workers' fetch time. Debian's python3-torch (CPU), examples/pytorch_plain.py.
import assert from 'node:assert/strict';
import {existsSync} from 'node:fs';
import path from 'node:path';
import {after, before, describe, test} from 'node:test';
import {LIVEPROF, api, launchBrowser, openPage, screenshot, startServer, stopServer, until} from './harness.mjs';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');

const LIBRARY = path.join(path.dirname(LIVEPROF), '..', 'python', 'liveprof', 'libliveprof.so');
const SKIP = existsSync(LIBRARY) ? false : `no ${LIBRARY} in this build (a sanitizer build): the release suite runs it`;
const EXAMPLE = path.join(root, 'examples', 'pytorch_plain.py');

let browser;
let server;

async function run(args) {
  await stopServer(server);
  server = await startServer(['run', '--port', '0', '--linger', '120', '--', '/usr/bin/python3', EXAMPLE,
    '--num-workers', '2', '--loader-delay-ms', '100', '--quiet', ...args]);
  const base = server.url.replace(/\/$/, '');
  await until('the job finished', async () => {
    try {
      return ['finished', 'disconnected'].includes((await api(base, '/api/status')).job_state);
    } catch {
      return false;  // (no publication yet)
    }
  }, 120);
  return base;
}

// The page against /api: its source statement, "Input on" words, workers'
// rows and advice are the view model's.
async function checkPage(base, name) {
  const page = await openPage(browser, `${base}#input_pipeline`);
  const sel = '.page[data-page=input_pipeline]';
  await page.locator(`${sel} .loader-workers:not([hidden]) tbody tr`).nth(1).waitFor();
  // The workers' last batches may come after the job's end: the page and
  // /api are compared once both have the newest publication.
  let ip;
  let shown;
  await until('the page and /api agree', async () => {
    ip = await api(base, '/api/input_pipeline');
    shown = [await page.locator(`${sel} [data-field=source_statement]`).innerText(),
      await page.locator(`${sel} [data-field=input_class_statement]`).innerText()];
    return shown[0] === ip.host_side.source_statement && shown[1] === ip.bottleneck.input_class_statement;
  }, 20).catch(() => {});
  assert.equal(shown[0], ip.host_side.source_statement);
  assert.equal(shown[1], ip.bottleneck.input_class_statement);
  const rows = [];
  for (const row of await page.locator(`${sel} .loader-workers tbody tr`).all()) rows.push(await row.locator('td').allInnerTexts());
  assert.deepEqual(rows.map((r) => r[0]).sort(), ip.host_side.workers.rows.map((r) => r.process).sort());
  for (const r of ip.host_side.workers.rows) {
    const shown = rows.find((x) => x[0] === r.process);
    assert.equal(Number(shown[1].replace(/,/g, '')), r.fetches, `${r.process}'s batches`);
  }
  const advice = await page.locator(`${sel} .advice li`).allInnerTexts();
  assert.deepEqual(advice, [...ip.bottleneck.advice, ...ip.host_side.recommendations]);
  await screenshot(page, name);
  assert.deepEqual(page.errors, []);
  await page.close();
  return {ip, advice};
}

async function checkTfStats(base) {
  const tf = await api(base, '/api/tf_stats');
  const fetches = tf.host.rows.filter((r) => r.name.startsWith('DataLoader fetch'));
  assert.deepEqual(fetches, [], 'the workers\' fetches are not the training process\'s host rows');
  const ip = await api(base, '/api/input_pipeline');
  const fetchMs = ip.host_side.ops.filter((o) => o.name.startsWith('DataLoader fetch')).reduce((t, o) => t + o.self_ms, 0);
  assert.ok(fetchMs > 0, 'the workers fetched');
  const page = await openPage(browser, `${base}#tf_stats`);
  await page.locator('.page[data-page=tf_stats] tbody tr').first().waitFor();
  const text = await page.locator('.page[data-page=tf_stats]').innerText();
  assert.ok(!text.includes('DataLoader fetch'), 'TF stats\' page has no fetch row');
  return page;
}

before(async () => {
  if (SKIP) return;
  browser = await launchBrowser();
});

after(async () => {
  if (SKIP) return;
  await browser?.close();
  await stopServer(server);
});

describe('num_workers=2: advice from the loader workers\' own rows', {skip: SKIP}, () => {
  test('fast loader: the workers idle, the wait is the hand-off, not "add workers"', async () => {
    // 200 steps, fast from step 60: the window's last 100 steps are all fast.
    const base = await run(['--steps', '200', '--fast-after', '60']);
    const {ip, advice} = await checkPage(base, 'input_pipeline_run_2_workers_fast');
    const h = ip.host_side;
    assert.equal(h.workers.rows.length, 2);
    assert.ok(h.workers.rows.every((r) => / · loader [01]$/.test(r.process)), JSON.stringify(h.workers.rows));
    assert.ok(h.workers.busy_pct < 50, `busy ${h.workers.busy_pct}%`);
    assert.equal(h.loader_verdict, 'handoff');
    assert.ok(!advice.some((a) => /raise num_workers|do not keep up/.test(a)), advice.join(' | '));
    assert.match(advice.join(' '), /hand-off/);
    assert.match(h.source_statement, /busy \d+\.\d% of it/);
    assert.ok(ip.bottleneck.input_class_statement.startsWith('Input on'));
    const page = await checkTfStats(base);
    await screenshot(page, 'tf_stats_run_2_workers');
    await page.close();
  });

  test('slow loader: the workers busy, the advice is more workers', async () => {
    const base = await run(['--steps', '60']);
    const {ip, advice} = await checkPage(base, 'input_pipeline_run_2_workers_slow');
    assert.ok(ip.host_side.workers.busy_pct >= 50, `busy ${ip.host_side.workers.busy_pct}%`);
    assert.equal(ip.host_side.loader_verdict, 'busy');
    assert.match(advice.join(' '), /raise num_workers/);
    assert.equal(ip.bottleneck.input_class, 'host');
  });
});
