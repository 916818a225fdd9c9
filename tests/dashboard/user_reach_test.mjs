// What users reach for, and what the header says:
// the alert notice shows the value now and, once the job has ended, the
// alerts closed "at end of job" with their last values (in /api/alerts, the
// notice, the Alerts page, /metrics and the console); "last 1000 steps" on a
// 300-step job draws all 300 and says so; the whole run downloads in one
// click as a Chrome trace with launch → kernel flows and args; dark mode;
// times in the unit of their magnitude. Screenshots go to build/screenshots/
// (user_reach_*).
import assert from 'node:assert/strict';
import {spawn} from 'node:child_process';
import {existsSync, mkdtempSync, readFileSync, rmSync} from 'node:fs';
import {tmpdir} from 'node:os';
import path from 'node:path';
import {after, before, describe, test} from 'node:test';
import {gunzipSync} from 'node:zlib';
import {us} from '../../static/format.js';
import {LIVEPROF, api, assertShown, launchBrowser, openPage, screenshot, shownNumber, startServer, stopServer,
  until, waitForDemo} from './harness.mjs';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');
const TRACE = path.join(root, '..', 'shared', 'data', 'gpu', 'h200', 'resnet18_h200_slowloader.pt.trace.json.gz');
const STEPS = 300;

let browser;
before(async () => { browser = await launchBrowser(); });
after(async () => { await browser?.close(); });

describe('an input-bound demo of 300 steps', () => {
  let server;
  let base;
  before(async () => {
    server = await startServer(['demo', '--port', '0', '--scenario', 'input_bound', '--steps', String(STEPS),
      '--rate', '200000']);
    base = server.url;
    await waitForDemo(base, STEPS);
  });
  after(async () => { await stopServer(server); });

  test('the alert notice shows the value now, the one /api/alerts has, not the one it fired with', async () => {
    const a = await until('input_bound_high firing', async () => {
      const x = await api(base, '/api/alerts');
      return x.firing.some((f) => f.rule === 'input_bound_high') ? x : null;
    });
    const f = a.firing[0];
    const rule = a.rules.find((r) => r.name === f.rule);
    assert.equal(f.value_now, rule.value, 'value_now is the rule\'s last value');
    const page = await openPage(browser, `${base}#overview`);
    await page.locator('#alert-notice:not(.hidden)').waitFor();
    const text = await page.locator('#alert-notice').innerText();
    assert.ok(text.includes(f.summary_now), `the notice "${text}" shows the summary now "${f.summary_now}"`);
    assertShown(assert, text.match(/: ([\d.]+)% of the step time/)[1], f.value_now, 'the notice\'s value');
    console.log(`# fired at ${f.value.toFixed(2)} %, now ${f.value_now.toFixed(2)} %: the notice says "${text}"`);
    await screenshot(page, 'user_reach_alert_notice');
    assert.deepEqual(page.errors, []);
    await page.close();
  });

  test('"last 1000 steps" draws every step the job has, and says it has 300 so far', async () => {
    const page = await openPage(browser, `${base}#overview`);
    await page.selectOption('#window', 'steps:1000');
    const steps = await api(base, '/api/steps?last=1000');
    const w = steps.window;
    assert.equal(steps.rows.length, w.steps, 'every step of the window is in rows');
    assert.equal(steps.rows_left_out, 0);
    const want = `steps ${w.first_step}–${w.last_step}`;
    await page.waitForFunction((t) => document.querySelector('.page[data-page=overview] .step-range')?.innerText
      .startsWith(t), want, {timeout: 15000}).catch(() => {});
    const range = await page.locator('.page[data-page=overview] .step-range').innerText();
    assert.ok(range.startsWith(want), `the graph says "${range}", the window holds ${want}`);
    assert.equal(await page.locator('#window-note').innerText(),
      `${w.steps} steps so far (${w.first_step}–${w.last_step})`);
    await screenshot(page, 'user_reach_last_1000_steps');
    assert.deepEqual(page.errors, []);
    await page.close();
  });

  test('Download trace: the whole run in one click, with launch → kernel flows and args', async () => {
    const page = await openPage(browser, `${base}#overview`);
    const [download] = await Promise.all([page.waitForEvent('download'), page.click('#download-trace')]);
    assert.match(download.suggestedFilename(), /^liveprof-trace-.*\.json\.gz$/);
    const doc = JSON.parse(gunzipSync(readFileSync(await download.path())).toString());
    const events = doc.traceEvents;
    const kernels = events.filter((e) => e.cat === 'kernel');
    const copies = events.filter((e) => e.cat === 'gpu_memcpy');
    const launches = new Map(events.filter((e) => e.cat === 'cuda_runtime').map((e) => [e.args.correlation, e]));
    // The whole run: every kernel the kernel table counted since the start.
    const ks = await api(base, '/api/kernel_stats');
    assert.equal(kernels.length, ks.rows.reduce((n, r) => n + r.occurrences, 0));
    for (const k of kernels.slice(0, 50)) {
      for (const arg of ['correlation', 'stream', 'device', 'grid', 'block']) assert.ok(arg in k.args, `kernel arg ${arg}`);
    }
    assert.ok(copies.length > 0 && copies.every((c) => c.args.bytes > 0 && 'correlation' in c.args));
    // An arrow from each launch to its kernel: "s" on the call's thread, "f" on the kernel's stream.
    const starts = new Map(events.filter((e) => e.cat === 'ac2g' && e.ph === 's').map((e) => [e.id, e]));
    const ends = new Map(events.filter((e) => e.cat === 'ac2g' && e.ph === 'f').map((e) => [e.id, e]));
    const memsets = events.filter((e) => e.cat === 'gpu_memset');
    assert.equal(starts.size, kernels.length + copies.length + memsets.length, 'one flow per device activity');
    assert.equal(ends.size, starts.size);
    for (const k of kernels.slice(0, 50)) {
      const s = starts.get(k.args.correlation);
      const f = ends.get(k.args.correlation);
      assert.ok(s && f, `flow ${k.args.correlation}`);
      assert.equal(s.ts, launches.get(k.args.correlation).ts);
      assert.equal(f.ts, k.ts);
      assert.equal(f.tid, k.tid);
    }
    assert.deepEqual(page.errors, []);
    await page.close();
  });

  test('dark mode: the page follows prefers-color-scheme, its charts readable', async () => {
    const page = await openPage(browser, `${base}#overview`);
    await page.emulateMedia({colorScheme: 'dark'});
    await page.locator('.page[data-page=overview] .steps-chart canvas').first().waitFor();
    // Relative luminance of a computed colour.
    const lum = (rgb) => {
      const [r, g, b] = rgb.match(/\d+/g).map(Number).map((c) => c / 255);
      return 0.2126 * r + 0.7152 * g + 0.0722 * b;
    };
    const colors = await page.evaluate(() => {
      const cs = (sel, p) => getComputedStyle(document.querySelector(sel))[p];
      return {bg: cs('body', 'backgroundColor'), fg: cs('body', 'color'), card: cs('.card', 'backgroundColor'),
        header: cs('header', 'backgroundColor'), select: cs('#window', 'backgroundColor')};
    });
    for (const k of ['bg', 'card', 'header', 'select']) assert.ok(lum(colors[k]) < 0.25, `${k} ${colors[k]} is dark`);
    assert.ok(lum(colors.fg) > 0.7, `text ${colors.fg} is light`);
    // The charts' axes are drawn in the page's text colour when they are made:
    // reload so that they are made dark.
    await page.reload();
    await page.locator('.page[data-page=overview] .steps-chart canvas').first().waitFor();
    await new Promise((r) => setTimeout(r, 1500));
    await screenshot(page, 'user_reach_overview_dark');
    await page.goto(`${base}#alerts`);
    await page.locator('.page[data-page=alerts] .rules tbody tr').first().waitFor();
    await screenshot(page, 'user_reach_alerts_dark');
    assert.deepEqual(page.errors, []);
    await page.close();
  });
});

test('times read in the unit of their magnitude', () => {
  assert.equal(us(269609), '269.6 ms');
  assert.equal(us(812), '812.0 µs');
  assert.equal(us(3_204_000), '3.20 s');
  assert.equal(us(0.45), '450 ns');
  assert.equal(us(0), '0.0 µs');
  assert.equal(us(null), '—');
});

describe('a replayed PyTorch job: its annotations in ms', {skip: !existsSync(TRACE) && `${TRACE} is absent`}, () => {
  let server;
  before(async () => { server = await startServer(['replay', '--port', '0', '--speed', 'max', TRACE]); });
  after(async () => { await stopServer(server); });

  test('an annotation of ~270 ms reads "269.6 ms", not "269,609.0"', async () => {
    const base = server.url;
    const a = await until('annotations', async () => {
      const x = await api(base, '/api/annotations');
      return x.rows.some((r) => r.avg_host_us >= 1000) ? x : null;
    });
    const page = await openPage(browser, `${base}#annotations`);
    const row = a.rows.find((r) => r.avg_host_us >= 1000);
    const tr = page.locator('.page[data-page=annotations] tbody tr').filter({hasText: row.name}).first();
    await tr.waitFor();
    const cell = await tr.locator('td').nth(3).innerText();
    assert.match(cell, / ms$/, `avg host of ${row.name}: ${cell}`);
    assertShown(assert, cell, row.avg_host_us / 1000, `avg host of ${row.name}, ms`);
    assert.equal(shownNumber(cell).decimals, 1);
    await screenshot(page, 'user_reach_annotations_units');
    await page.emulateMedia({colorScheme: 'dark'});
    await screenshot(page, 'user_reach_annotations_dark');
    assert.deepEqual(page.errors, []);
    await page.close();
  });
});

describe('a job that ends with alerts firing', () => {
  let server;
  let dir;
  let console_ = '';
  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'liveprof-user-reach-'));
    server = await startServer(['serve', '--port', '0', '--ingest', `unix:${dir}/ingest.sock`]);
    server.stdout.on('data', (d) => { console_ += d; });
  });
  after(async () => {
    await stopServer(server);
    rmSync(dir, {recursive: true, force: true});
  });

  test('its alerts close "at end of job" with their last values: /api, notice, Alerts page, /metrics, console', async () => {
    const base = server.url;
    const page = await openPage(browser, `${base}#overview`);
    const job = spawn(LIVEPROF, ['example', '--steps', '80', '--step-ms', '5', '--input-share', '0.5',
      '--connect', `unix:${dir}/ingest.sock`], {stdio: 'ignore'});
    assert.equal(await new Promise((r) => job.on('exit', r)), 0, 'the example job ran');
    await until('the job finished', async () => (await api(base, '/api/status')).job_state === 'finished');
    const a = await until('the alerts closed', async () => {
      const x = await api(base, '/api/alerts');
      return x.rules.some((r) => r.state === 'closed') ? x : null;
    });
    assert.deepEqual(a.firing, [], 'nothing fires after the end');
    assert.ok(a.rules.every((r) => r.state !== 'firing' && r.state !== 'resolving'));
    const closed = a.history.filter((h) => h.state === 'closed');
    assert.ok(closed.some((h) => h.rule === 'input_bound_high'), 'input_bound_high fired, then closed');
    for (const h of closed) {
      const r = a.rules.find((x) => x.name === h.rule);
      assert.equal(r.state, 'closed');
      assert.equal(h.value, r.value, `${h.rule}: closed with its last value`);
      assert.match(h.summary, new RegExp(`^${h.rule} closed at end of job: last `));
    }
    // The notice: what was firing when the job ended, closed.
    await page.waitForFunction(() => document.querySelector('#alert-notice')?.classList.contains('closed'));
    const notice = await page.locator('#alert-notice').innerText();
    assert.match(notice, /firing when the job ended, closed: .* closed at end of job: last /);
    // The Alerts page: the same, each with its last value.
    await page.goto(`${base}#alerts`);
    const li = page.locator('.page[data-page=alerts] .closed-at-end li[data-rule=input_bound_high]');
    await li.waitFor();
    const h = closed.find((x) => x.rule === 'input_bound_high');
    assertShown(assert, (await li.innerText()).match(/last ([\d.]+)/)[1], h.value, 'last value on the Alerts page');
    const stateCell = page.locator('.page[data-page=alerts] .rules tbody tr').filter({hasText: 'input_bound_high'})
      .first().locator('td').nth(1);
    assert.equal(await stateCell.innerText(), 'closed');
    assert.match(await page.locator('.page[data-page=alerts] .firing-now').innerText(), /Nothing is firing/);
    await screenshot(page, 'user_reach_alerts_closed');
    // /metrics: no longer firing.
    const metrics = await api(base, '/metrics', 'text');
    assert.match(metrics, /liveprof_alert_firing\{rule="input_bound_high",severity="critical"\} 0/);
    // The console: firing, then closed with the last value.
    await until('the console line', async () => console_.includes('ALERT closed input_bound_high'), 5);
    assert.match(console_, /ALERT firing input_bound_high: [^\n]*\n(.*\n)*  ALERT closed input_bound_high: input_bound_high closed at end of job: last input_pct [\d.]+% \(>= 20% over the last 20 steps\)/);
    assert.deepEqual(page.errors, []);
    await page.close();
  });
});
