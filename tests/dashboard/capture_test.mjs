// The Sources page in a real browser: `liveprof serve --ingest unix:PATH`
// with a `liveprof example --connect` process sending to it. The page lists
// the source with its worker and what it records, and its form turns the
// source's host level down for a few seconds (POST /api/capture): the state
// the sender reports comes back in the table, then returns by itself. A raw
// sender (ingest_client.mjs) with one event on a track it never defined keeps
// its connection; the page, /api/status and /metrics count the refusal.
import assert from 'node:assert/strict';
import {spawn} from 'node:child_process';
import {rmSync} from 'node:fs';
import {tmpdir} from 'node:os';
import path from 'node:path';
import {after, before, describe, test} from 'node:test';
import {LIVEPROF, api, launchBrowser, openPage, screenshot, startServer, stopServer, until} from './harness.mjs';
import {batchFrame, connectIngest, helloFrame} from './ingest_client.mjs';
import {bytes, pct, us} from '../../static/format.js';

let server;
let sender;
let browser;
const socket = path.join(tmpdir(), `liveprof-capture-test-${process.pid}.sock`);

before(async () => {
  server = await startServer(['serve', '--port', '0', '--ingest', `unix:${socket}`]);
  // 1,500 steps of 20 ms: it sends for the whole test (killed at the end).
  sender = spawn(LIVEPROF, ['example', '--connect', `unix:${socket}`, '--rank', '4', '--steps', '1500', '--step-ms', '20'],
    {stdio: 'ignore'});
  browser = await launchBrowser();
});

after(async () => {
  sender?.kill('SIGKILL');
  await browser?.close();
  await stopServer(server);
  rmSync(socket, {force: true});
});

describe('the Sources page with a program sending to the server', () => {
  test('shows liveprof\'s own cost: each server thread\'s CPU and the memory, as /proc says', async () => {
    const page = await openPage(browser, `${server.url}#capture`);
    // Two samples a second apart give each thread's CPU over the interval;
    // the pipeline thread consumes the sender's events: it spends CPU (a
    // clock tick of it can take a few seconds at this rate).
    const st = await until('two samples of liveprof\'s cost, the pipeline\'s CPU in them', async () => {
      const s = await api(server.url, '/api/status');
      return s.liveprof_cost?.interval_s > 0 &&
        s.liveprof_cost.threads.find((t) => t.name === 'liveprof pipe')?.cpu_s > 0 ? s : null;
    }, 30);
    const cost = st.liveprof_cost;
    assert.equal(cost.process, 'server');
    const names = cost.threads.map((t) => t.name);
    for (const n of ['liveprof pipe', 'liveprof drain', 'liveprof web', 'liveprof ingest']) assert.ok(names.includes(n), names.join('|'));
    assert.ok(cost.threads.every((t) => t.name.startsWith('liveprof') && t.cpu_s >= 0 && t.cpu_pct >= 0));
    assert.ok(cost.rss_bytes > 1 << 20, `${cost.rss_bytes}`);
    const card = page.locator('.self-cost');
    await card.locator('tbody tr', {hasText: 'liveprof pipe'}).waitFor({timeout: 10000});
    const shown = await card.locator('tbody td:first-child').allInnerTexts();
    assert.ok(shown.includes('liveprof ingest'), shown.join('|'));
    assert.match(await card.locator('[data-field=self_rss] .stat-value').innerText(), /MiB|GiB/);
    // /metrics: each thread by name, promtool's own format checked elsewhere.
    const metrics = await (await fetch(`${server.url.replace(/\/$/, '')}/metrics`)).text();
    assert.match(metrics, /^liveprof_self_cpu_seconds_total\{thread="liveprof pipe"\} [0-9.e-]+$/m);
    assert.match(metrics, /^liveprof_self_resident_bytes [0-9]+$/m);
    await screenshot(page, 'sources_self_cost');
    assert.deepEqual(page.errors, []);
    await page.close();
  });

  test('each source\'s row shows liveprof\'s CPU in its process and the process\'s memory, as its sender read them', async () => {
    const page = await openPage(browser, `${server.url}#capture`);
    const rank4 = (st) => st.server.ingest.find((o) => o.label === 'rank 4' && o.connected);
    // Every /api/status answer the page gets (it polls them once a second).
    const answers = [];
    page.on('response', async (r) => {
      if (!r.url().includes('/api/status')) return;
      try {
        const s = rank4(await r.json());
        if (s?.cost) answers.push(s.cost);
      } catch { /* (a reply cut short when the page closes) */ }
    });
    // The sender reads its /proc once a second: two readings give its CPU over the interval.
    const source = await until('two cost readings from rank 4', async () => {
      const s = rank4(await api(server.url, '/api/status'));
      return s?.cost?.interval_s > 0 ? s : null;
    }, 15);
    const cost = source.cost;
    const names = cost.threads.map((t) => t.name);
    assert.ok(names.includes('liveprof send'), names.join('|'));
    assert.ok(cost.threads.every((t) => t.name.startsWith('liveprof') && t.tid > 0 && t.cpu_s >= 0 && t.cpu_pct >= 0),
      JSON.stringify(cost.threads));
    assert.ok(Math.abs(cost.cpu_pct - cost.threads.reduce((a, t) => a + t.cpu_pct, 0)) < 1e-9);
    assert.ok(cost.interval_s >= 0.9 && cost.interval_s < 5, `${cost.interval_s}`);
    assert.ok(cost.rss_bytes > 1 << 20, `${cost.rss_bytes}`);
    // The row, against the /api/status answer the page itself drew it from.
    const col = async (label) => (await page.locator('.sources thead th').allInnerTexts()).indexOf(label);
    const cpuCol = await col('liveprof CPU');
    const rssCol = await col('Process memory');
    assert.ok(cpuCol > 0 && rssCol > 0);
    const row = page.locator('.sources tbody tr', {hasText: 'rank 4'});
    await row.waitFor({timeout: 15000});
    // The row shows one of those answers exactly (under load the page may
    // have drawn a newer one by the time a given answer is read here).
    let drawn = null;
    const cells = await until('the row drawn from an answer', async () => {
      const texts = await row.locator('td').allInnerTexts();
      const got = [texts[cpuCol], texts[rssCol]];
      drawn = answers.findLast((c) => c.cpu_pct >= 0 && pct(c.cpu_pct, 1) === got[0] && bytes(c.rss_bytes) === got[1]);
      return drawn ? got : null;
    }, 10);
    assert.ok(drawn.cpu_pct >= 0);
    assert.match(cells[0], /^[0-9.]+%$/);
    assert.match(cells[1], /^[0-9.]+ (MiB|GiB)$/);
    // Hover: each of its liveprof threads with its share.
    const title = await row.locator('td').nth(cpuCol).getAttribute('title');
    for (const t of drawn.threads) assert.ok(title.includes(`${t.name} (tid ${t.tid}): ${pct(t.cpu_pct, 1)}`), title);
    // /metrics: the same, by source ring and thread.
    const metrics = await api(server.url, '/metrics', 'text');
    assert.match(metrics,
      /^liveprof_source_self_cpu_seconds_total\{source="ingest rank 4",thread="liveprof send"\} [0-9.e-]+$/m);
    const rss = Number(metrics.match(/^liveprof_source_resident_bytes\{source="ingest rank 4"\} ([0-9]+)$/m)?.[1]);
    assert.ok(rss > 1 << 20, `${rss}`);
    // `liveprof example` is C++ on the host API: it has steps but no liveprof
    // hook, so nothing is added per step by hooks, and the page says so.
    assert.equal(drawn.hook_calls, 0);
    assert.ok(drawn.steps > 0, `${drawn.steps}`);
    assert.equal(drawn.hook_per_step_us, -1);
    assert.match(metrics, /^liveprof_source_hook_seconds_total\{source="ingest rank 4"\} 0$/m);
    const hookCol = await col('Added per step');
    assert.ok(hookCol > rssCol);
    assert.equal(await row.locator('td').nth(hookCol).innerText(), '—');
    assert.match(await row.locator('td').nth(hookCol).getAttribute('title'), /^No liveprof hook runs in this process/);
    await screenshot(page, 'sources_source_cost');
    assert.deepEqual(page.errors, []);
    await page.close();
  });

  test('each source\'s row shows the time liveprof\'s hooks add per step, as the hooks measured it', async () => {
    // A raw sender whose batches carry its cost with the hooks' counters
    // (IngestCost.hook_ns, hook_calls, steps), a second apart: 50 steps
    // between readings, 2.47 ms of hooks over the first 50, 125 ms over the next.
    // It answers the server's pings: the test keeps it longer than the 5 s
    // a silent source is kept.
    const raw = await connectIngest(socket, {pong: {clockNs: 1_000_000}});
    raw.write(helloFrame({rank: 5, clockNs: 1_000_000}));
    const reading = (seq, atS, hookNs, hookCalls, steps) =>
      batchFrame({seq, cost: {atNs: atS * 1e9, rssBytes: 300 << 20, hookNs, hookCalls, steps}});
    raw.write(reading(1, 10, 1_000_000, 50, 10));
    raw.write(reading(2, 11, 3_470_000, 300, 60));
    const rank5 = async (pred) => until('rank 5\'s cost', async () => {
      const s = (await api(server.url, '/api/status')).server.ingest.find((o) => o.label === 'rank 5' && o.connected);
      return s && pred(s.cost) ? s.cost : null;
    }, 15);
    let cost = await rank5((c) => c?.steps === 60);
    assert.equal(cost.hook_calls, 300);
    assert.equal(cost.hook_s, 0.00347);
    assert.ok(Math.abs(cost.hook_per_step_us - 49.4) < 1e-9, `${cost.hook_per_step_us}`);
    assert.equal(cost.hook_per_step_steps, 50);
    assert.ok(Math.abs(cost.hook_pct - 0.247) < 1e-9, `${cost.hook_pct}`);

    const page = await openPage(browser, `${server.url}#capture`);
    const row = page.locator('.sources tbody tr', {hasText: 'rank 5'});
    await row.waitFor({timeout: 15000});
    const hookCol = (await page.locator('.sources thead th').allInnerTexts()).indexOf('Added per step');
    assert.ok(hookCol > 0);
    const cell = row.locator('td').nth(hookCol);
    const shows = (text) => until(`the row's "Added per step" ${text}`, async () =>
      ((await cell.innerText()) === text ? text : null), 10);
    await shows(us(49.4));
    assert.equal(us(49.4), '49.4 µs');
    const title = await cell.getAttribute('title');
    assert.match(title, /^liveprof's hooks: 49\.4 µs a step over its last 50 steps; 0\.25% of the process's time/);
    assert.match(title, /0\.003 s in 300 hook calls over 60 steps since it started$/);
    const header = await page.locator('.sources thead th', {hasText: 'Added per step'}).getAttribute('title');
    assert.match(header, /as the hooks measured themselves/);

    // The next 50 steps cost the hooks 125 ms: 2.5 ms a step, in ms.
    raw.write(reading(3, 12, 128_470_000, 550, 110));
    cost = await rank5((c) => c?.steps === 110);
    assert.ok(Math.abs(cost.hook_per_step_us - 2500) < 1e-9, `${cost.hook_per_step_us}`);
    await shows('2.5 ms');
    let metrics = await api(server.url, '/metrics', 'text');
    assert.match(metrics, /^liveprof_source_hook_seconds_total\{source="ingest rank 5"\} 0\.12847$/m);
    assert.match(metrics, /^liveprof_source_cupti_overhead_seconds_total\{source="ingest rank 5"\} 0$/m);

    // CUPTI's own work (IngestCost.cupti_overhead_ns): 21 ms at the start,
    // then 1 ms over the next 50 steps: 20 µs a step, added to the hooks'.
    const withCupti = (seq, atS, hookNs, hookCalls, steps, cuptiOverheadNs) =>
      batchFrame({seq, cost: {atNs: atS * 1e9, rssBytes: 300 << 20, hookNs, hookCalls, steps, cuptiOverheadNs}});
    raw.write(withCupti(4, 13, 130_970_000, 600, 160, 21_000_000));
    raw.write(withCupti(5, 14, 133_470_000, 650, 210, 22_000_000));
    cost = await rank5((c) => c?.steps === 210);
    assert.ok(Math.abs(cost.hook_per_step_us - 50) < 1e-9, `${cost.hook_per_step_us}`);
    assert.ok(Math.abs(cost.cupti_overhead_per_step_us - 20) < 1e-9, `${cost.cupti_overhead_per_step_us}`);
    assert.equal(cost.cupti_overhead_s, 0.022);
    await shows(us(70));
    const both = await cell.getAttribute('title');
    assert.match(both, /^liveprof's hooks: 50\.0 µs a step over its last 50 steps/);
    assert.match(both, /\nCUPTI's own work \(its OVERHEAD records[^)]*\): 20\.0 µs a step over the same steps; 0\.022 s since it started$/);
    metrics = await api(server.url, '/metrics', 'text');
    assert.match(metrics, /^liveprof_source_cupti_overhead_seconds_total\{source="ingest rank 5"\} 0\.022$/m);
    await screenshot(page, 'sources_hook_cost');
    assert.deepEqual(page.errors, []);
    await page.close();
    raw.destroy();
  });

  test('lists the source and turns its capture level down for a while', async () => {
    const page = await openPage(browser, `${server.url}#capture`);
    const row = page.locator('.sources tbody tr', {hasText: 'rank 4'});
    await row.waitFor({timeout: 15000});
    assert.match(await row.innerText(), /connected/);
    assert.match(await row.innerText(), /level 2 · Python scopes on · no GPU producer/);
    const events = Number((await row.locator('td').nth(5).innerText()).replace(/[^0-9]/g, ''));
    assert.ok(events > 0, `events shown: ${events}`);
    // No GPU producer in it: the GPU choices (activity, level) are greyed
    // out, saying why.
    assert.equal(await page.locator('select[name=gpu]').isDisabled(), true);
    assert.match(await page.locator('select[name=gpu]').getAttribute('title'), /no GPU producer to turn on or off/);
    assert.equal(await page.locator('select[name=gpu_level]').isDisabled(), true);
    assert.match(await page.locator('select[name=gpu_level]').getAttribute('title'),
      /no GPU producer to switch the level of/);
    assert.deepEqual(await page.locator('select[name=gpu_level] option').evaluateAll((os) => os.map((o) => o.value)),
      ['', 'default', 'full']);

    await page.selectOption('select[name=host_level]', '1');
    await page.fill('input[name=seconds]', '4');
    await page.click('.capture-form button[type=submit]');
    await page.locator('.capture-result', {hasText: 'Sent to source'}).waitFor();
    await page.locator('.sources tbody tr', {hasText: /rank 4.*level 1 .*capture #1, \d+ s left/s}).waitFor({timeout: 10000});
    const status = await api(server.url, '/api/status');
    const source = status.server.ingest.find((s) => s.label === 'rank 4');
    assert.equal(source.capture.host_level, 1);
    assert.equal(source.capture.control_id, 1);
    assert.equal(source.capture.gpu_level, null);  // no GPU producer: no level.
    assert.ok(source.capture.seconds_left > 0 && source.capture.seconds_left <= 4, `${source.capture.seconds_left}`);
    await screenshot(page, 'sources_capture');
    // Four seconds later the sender is back at level 2 by itself.
    await page.locator('.sources tbody tr', {hasText: /rank 4.*level 2 · /s}).waitFor({timeout: 15000});
    assert.deepEqual(page.errors, []);
    await page.close();
  });

  test('a refusal is shown with the server\'s reason', async () => {
    const page = await openPage(browser, `${server.url}#capture`);
    await page.locator('.sources tbody tr', {hasText: 'rank 4'}).waitFor({timeout: 15000});
    // A source that has gone: the server answers 409 with why.
    await page.evaluate(() => {
      const o = document.createElement('option');
      o.value = '999';
      o.textContent = '999: gone';
      document.querySelector('select[name=source]').append(o);
      document.querySelector('select[name=source]').value = '999';
    });
    await page.click('.capture-form button[type=submit]');
    await page.locator('.capture-result', {hasText: 'HTTP 409: source 999 is unknown'}).waitFor();
    await page.close();
  });

  test('a source that sent one event on a track never defined keeps its connection; the refusal is counted', async () => {
    const raw = await connectIngest(socket);
    const spans = (from, count, badAt) => Array.from({length: count}, (_, i) => (
      {ts: from + i * 1000, dur: 500, name: 1, track: i === badAt ? 0 : 1}));
    raw.write(helloFrame({rank: 9, clockNs: 1_000_000}));
    raw.write(batchFrame({seq: 1, names: [{id: 1, name: 'raw span'}, {id: 2, name: 'raw thread'}],
      tracks: [{id: 1, name: 2}], events: spans(1_000_000, 100, 57)}));
    const source = async (pred) => {
      for (let i = 0; i < 100; i++) {
        const s = (await api(server.url, '/api/status')).server.ingest.find((o) => o.label === 'rank 9');
        if (s && pred(s)) return s;
        await new Promise((r) => setTimeout(r, 100));
      }
      throw new Error('rank 9 never got there');
    };
    let s = await source((o) => o.batches === 1);
    assert.equal(s.connected, true);
    assert.equal(s.events, 99);
    assert.equal(s.refused_events, 1);
    assert.equal(s.refused.length, 1);
    assert.equal(s.refused[0].reason, 'undefined_track');
    assert.equal(s.refused[0].events, 1);
    assert.match(s.refused[0].example, /^frame 2 \(bytes \d+\.\.\d+\): event 57: track 0 was never defined$/);
    // The next batch is taken whole, on the same connection.
    raw.write(batchFrame({seq: 2, events: spans(2_000_000, 100, -1)}));
    s = await source((o) => o.batches === 2);
    s = await source((o) => o.acked_seq === 2);  // once the pipeline has handled it
    assert.equal(s.unacked_batches, 0);
    assert.equal(s.connected, true);
    assert.equal(s.events, 199);
    assert.equal(s.refused_events, 1);
    assert.equal(s.cost, null);  // its batches carry no cost (IngestBatch.cost): none said.

    const metrics = await api(server.url, '/metrics', 'text');
    assert.match(metrics, /^# TYPE liveprof_ingest_refused_events_total counter$/m);
    assert.match(metrics, /^liveprof_ingest_refused_events_total\{source="ingest rank 9",reason="undefined_track"\} 1$/m);

    const page = await openPage(browser, `${server.url}#capture`);
    const row = page.locator('.sources tbody tr', {hasText: 'rank 9'});
    await row.waitFor({timeout: 15000});
    assert.equal(await row.locator('td').nth(7).innerText(), '1 (undefined_track 1)');
    // Both batches handled: acknowledged through batch 2, none waiting.
    await row.locator('td', {hasText: /^batch 2$/}).waitFor({timeout: 10000});
    assert.equal(await row.locator('td').nth(8).innerText(), 'batch 2');
    assert.equal(await row.locator('td').nth(9).innerText(), '—');  // liveprof CPU: not said,
    assert.equal(await row.locator('td').nth(10).innerText(), '—');  // nor its memory,
    assert.equal(await row.locator('td').nth(11).innerText(), '—');  // nor its hooks' time.
    assert.match(await page.locator('.page[data-page=capture] .note').innerText(), /a kill -9 of the server loses none it acknowledged/);
    assert.match(await row.innerText(), /connected/);
    const said = page.locator('.refusals li', {hasText: 'rank 9'});
    await said.waitFor({timeout: 5000});
    assert.match(await said.innerText(), /rank 9\): 1 event refused, undefined_track; the first: frame 2 \(bytes \d+\.\.\d+\): event 57: track 0 was never defined/);
    await screenshot(page, 'sources_refused');
    assert.deepEqual(page.errors, []);
    await page.close();
    raw.destroy();
  });
});
