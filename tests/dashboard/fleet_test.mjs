// The Fleet page in a real browser: a NATS server (JetStream), three agents
// (`liveprof demo --workers 4 --publish`, host-a, host-b, host-c; host-b's
// rank 2 slower) and `liveprof fleet` reading them, all on free ports. The
// page names the straggler (host-b, rank 2) in its firing alert, lists the
// three hosts live and the twelve ranks, and every number it shows is the
// /api/fleet answer it drew (the page's own responses, recorded by seq). A
// message from the network carrying HTML shows as text. An agent's own
// dashboard has no Fleet entry. A host's "open trace" shows its trace in the
// fleet view's trace viewer, every request through /api/fleet/trace?host=
// (what the agent's own /api/trace answers), none over the WebSocket.
// Run: node --test tests/dashboard/
import assert from 'node:assert/strict';
import {spawn} from 'node:child_process';
import {existsSync, mkdtempSync, rmSync} from 'node:fs';
import net from 'node:net';
import {tmpdir} from 'node:os';
import path from 'node:path';
import {after, before, describe, test} from 'node:test';
import {api, assertShown, launchBrowser, openPage, screenshot, startServer, stopServer} from './harness.mjs';

const NATS_SERVER = process.env.LIVEPROF_NATS_SERVER ?? '/usr/sbin/nats-server';
const JOB = `dashboard-fleet-${process.pid}`;
const HOSTS = ['host-a', 'host-b', 'host-c'];
const WORKERS = 4;
const XSS = '<img src=x onerror="window.__fleetXss=1">';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// A port nothing listens on now (the kernel's pick, closed again).
function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const {port} = s.address();
      s.close(() => resolve(port));
    });
  });
}

function connects(port) {
  return new Promise((resolve) => {
    const c = net.connect(port, '127.0.0.1');
    c.on('connect', () => { c.destroy(); resolve(true); });
    c.on('error', () => resolve(false));
  });
}

// nats-server with JetStream on a free port; resolves once it accepts
// connections. Another free port if the first was taken meanwhile.
async function startNats(storeDir) {
  for (let attempt = 0; ; attempt++) {
    const port = await freePort();
    const child = spawn(NATS_SERVER, ['-js', '-a', '127.0.0.1', '-p', String(port), '-sd', storeDir],
      {stdio: ['ignore', 'ignore', 'pipe']});
    let log = '';
    child.stderr.on('data', (d) => { log += d; });
    for (let i = 0; i < 100 && child.exitCode === null; i++) {  // 10 s
      if (await connects(port)) {
        child.port = port;
        return child;
      }
      await sleep(100);
    }
    child.kill('SIGKILL');
    if (attempt >= 2) throw new Error(`nats-server did not start on port ${port}:\n${log}`);
  }
}

// One message on `subject`, over NATS's text protocol (a plain publish: the
// job's stream keeps it and the fleet view reads it).
function natsPublish(port, subject, payload) {
  return new Promise((resolve, reject) => {
    const c = net.connect(port, '127.0.0.1');
    const timer = setTimeout(() => { c.destroy(); reject(new Error('NATS publish: no PONG in 5 s')); }, 5000);
    let got = '';
    c.on('data', (d) => {
      got += d;
      if (got.startsWith('INFO') && !c.sent) {
        c.sent = true;
        const body = Buffer.from(payload);
        c.write(`CONNECT {"verbose":false,"pedantic":false}\r\nPUB ${subject} ${body.length}\r\n`);
        c.write(body);
        c.write('\r\nPING\r\n');
      }
      if (/PONG\r\n/.test(got)) {
        clearTimeout(timer);
        c.end();
        resolve();
      }
      if (/-ERR/.test(got)) {
        clearTimeout(timer);
        c.destroy();
        reject(new Error(`NATS publish: ${got}`));
      }
    });
    c.on('error', (e) => { clearTimeout(timer); reject(e); });
  });
}

function stopNats(child) {
  return new Promise((resolve) => {
    if (!child || child.exitCode !== null) return resolve();
    child.on('exit', () => resolve());
    child.kill('SIGTERM');
  });
}

// Until `fn` holds in the page (20 s at most); else fails saying where the
// trace viewer stood (its hash, status line and details).
async function until(page, what, fn, arg) {
  try {
    await page.waitForFunction(fn, arg, {timeout: 20000});
  } catch (e) {
    const at = await page.evaluate(() => [location.hash, ...['.trace-status', '.trace-details']
      .map((s) => document.querySelector(`.page[data-page=trace_viewer] ${s}`)?.textContent)]).catch(() => []);
    throw new Error(`${what}: ${e.message.split('\n')[0]} (hash, status, details: ${JSON.stringify(at)})`);
  }
}

const firingStraggler = (f) => f.alerts.find((a) => a.rule === 'straggler' && a.state === 'firing');

let storeDir;
let nats;
let agents = [];
let fleet;
let browser;

before(async () => {
  if (!existsSync(NATS_SERVER)) return;
  storeDir = mkdtempSync(path.join(tmpdir(), 'liveprof-fleet-nats-'));
  nats = await startNats(storeDir);
  const url = `nats://127.0.0.1:${nats.port}`;
  const started = await Promise.allSettled([
    ...HOSTS.map((host) => startServer(['demo', '--port', '0', '--workers', String(WORKERS),
      ...(host === 'host-b' ? ['--straggler', '2'] : []), '--publish', url, '--job', JOB, '--fleet-host', host])),
    startServer(['fleet', '--nats', url, '--job', JOB, '--port', '0']),
    launchBrowser(),
  ]);
  agents = started.slice(0, HOSTS.length).map((s) => s.value).filter(Boolean);
  fleet = started[HOSTS.length].value;
  browser = started[HOSTS.length + 1].value;
  const failed = started.find((s) => s.status === 'rejected');
  if (failed) throw failed.reason;
});

after(async () => {
  await browser?.close();
  // The agents first (they flush to NATS as they stop), then the view, then NATS.
  await Promise.all(agents.map(stopServer));
  await stopServer(fleet);
  await stopNats(nats);
  if (storeDir) rmSync(storeDir, {recursive: true, force: true});
});

describe('the Fleet page', {skip: !existsSync(NATS_SERVER) && `no ${NATS_SERVER}`}, () => {
  test('an agent\'s own dashboard has no Fleet entry, and #fleet there lands on the overview', async () => {
    const r = await fetch(new URL('/api/fleet', agents[0].url));
    assert.equal(r.status, 404);
    await r.body?.cancel();
    // The page finds out from /api (the endpoints) and never asks /api/fleet
    // here: no 404 at all.
    const page = await openPage(browser, 'about:blank');
    const notFound = [];
    page.on('response', (res) => res.status() === 404 && notFound.push(new URL(res.url()).pathname));
    await page.goto(`${agents[0].url}#fleet`);
    await page.waitForSelector('nav a[data-page=fleet][data-probed]', {state: 'attached', timeout: 15000});
    assert.equal(await page.locator('nav a[data-page=fleet]').getAttribute('data-probed'), 'no');
    assert.equal(await page.locator('nav a[data-page=fleet]').isHidden(), true);
    assert.equal(await page.locator('nav a:visible', {hasText: /^Fleet$/}).count(), 0);
    await page.waitForFunction(() => location.hash === '#overview' &&
      document.querySelector('nav a.active')?.dataset.page === 'overview');
    assert.deepEqual(notFound, []);
    assert.deepEqual(page.errors, []);
    await page.close();
  });

  test('names the straggler, lists the hosts and ranks, and shows the numbers of /api/fleet', async () => {
    // A message from the network whose type is HTML: rejected, and its error is shown as text.
    await natsPublish(nats.port, `liveprof.${JOB}.step.host-x.0`,
      JSON.stringify({type: XSS, v: 1, job: JOB, host: 'host-x', agent: 'test'}));

    const page = await openPage(browser, fleet.url);
    // Every /api/fleet answer the page received, by seq: what it drew is one of them.
    const answers = new Map();
    page.on('response', async (r) => {
      if (new URL(r.url()).pathname !== '/api/fleet' || r.status() !== 200) return;
      try {
        const f = await r.json();
        if (f.type === 'fleet') answers.set(f.seq, f);
      } catch (e) { /* the probe's body, not read */ }
    });
    const link = page.locator('nav a[data-page=fleet]');
    await link.waitFor({state: 'visible', timeout: 15000});
    await link.click();
    await page.waitForFunction(() => location.hash === '#fleet' &&
      !document.querySelector('.page[data-page=fleet]')?.hidden);
    const root = page.locator('.page[data-page=fleet]');

    // The straggler alert, firing, naming host-b and rank 2 (30 s at most).
    const alert = root.locator('.fleet-alert.firing[data-rule=straggler]');
    await alert.waitFor({timeout: 30000});
    const alertText = await alert.innerText();
    assert.match(alertText, /firing/);
    assert.match(alertText, /host-b/);
    assert.match(alertText, /rank 2/);
    assert.equal(await alert.getAttribute('data-host'), 'host-b');
    assert.equal(await alert.getAttribute('data-label'), 'rank 2');

    // The page held still (Pause) on an answer with the alert firing, three
    // hosts live (with a status naming their 4 ranks) and twelve ranks; `f`
    // is that answer.
    let f = null;
    let seq = 0;
    for (const until = Date.now() + 15000; !f && Date.now() < until;) {
      await page.click('#pause');
      seq = +(await root.getAttribute('data-seq'));
      for (let k = 0; k < 30 && !answers.has(seq); k++) await sleep(50);
      const a = answers.get(seq);
      // (A host's ranks come with its status, every 2 s: they may lag its steps.)
      if (a && firingStraggler(a) && a.hosts.length === HOSTS.length &&
          a.hosts.every((h) => h.state === 'live' && h.url && h.ranks === WORKERS) &&
          a.ranks.length === HOSTS.length * WORKERS && a.pod.workers.length === HOSTS.length * WORKERS &&
          a.pod.straggler?.label === 'host-b · rank 2' &&
          a.counts.rejected.unknown_type > 0) {
        f = a;
        break;
      }
      await page.click('#pause');  // resume: the next answer.
      await sleep(500);
    }
    assert.ok(f, `no answer with the straggler firing, ${HOSTS.length} hosts live and ${HOSTS.length * WORKERS} ranks ` +
      `(last shown: #${seq}: ${JSON.stringify(answers.get(seq)?.alerts)})`);

    // /api/fleet read now agrees on who the straggler is and on the hosts and ranks (the
    // fleet's straggler rule can resolve for a moment as rank 2 falls behind: asked again).
    let now;
    for (let i = 0; i < 50; i++) {
      now = await api(fleet.url, '/api/fleet');
      if (firingStraggler(now)) break;
      await sleep(100);
    }
    const straggler = firingStraggler(now);
    assert.ok(straggler, `/api/fleet: the straggler alert is not firing: ${JSON.stringify(now.alerts)}`);
    assert.equal(straggler.host, 'host-b');
    assert.equal(straggler.label, 'rank 2');
    assert.equal(straggler.host, await alert.getAttribute('data-host'));
    assert.equal(straggler.label, await alert.getAttribute('data-label'));
    assert.deepEqual(now.hosts.map((h) => h.host).sort(), HOSTS);
    assert.deepEqual(now.ranks.map((r) => `${r.host}/${r.label}`).sort(), f.ranks.map((r) => `${r.host}/${r.label}`).sort());

    // The summary.
    const field = (name) => root.locator(`.fleet-summary [data-field="${name}"] .stat-value`).innerText();
    assert.equal(await field('hosts_live'), '3 of 3');
    assert.equal(await field('ranks'), '12');
    assert.equal(await field('straggler'), 'host-b · rank 2');

    // The hosts table: each host live, with its numbers and the link to its own dashboard.
    const hostRows = root.locator('.fleet-hosts tbody tr');
    assert.equal(await hostRows.count(), HOSTS.length);
    for (const h of f.hosts) {
      const row = root.locator(`.fleet-hosts tbody tr[data-host="${h.host}"]`);
      const cells = await row.locator('td').allInnerTexts();
      assert.equal(cells[0], h.host);
      assert.equal(cells[1], 'live');
      assert.equal(await row.locator('.host-state').getAttribute('class'), 'host-state state-live');
      assertShown(assert, cells[2], h.last_seen_s_ago, `${h.host} last seen`);
      assertShown(assert, cells[3], h.ranks, `${h.host} ranks`);
      assert.equal(h.ranks, WORKERS);
      assertShown(assert, cells[5], h.clock_skew_ms, `${h.host} clock skew`);
      assert.equal(/skewed/.test(cells[5]), h.clock_skewed);
      assertShown(assert, cells[6], h.steps_published, `${h.host} steps published`);
      assertShown(assert, cells[7], h.steps_dropped, `${h.host} steps dropped`);
      assertShown(assert, cells[8], h.outbox, `${h.host} outbox`);
      for (const a of h.alerts) assert.ok(cells[11].includes(a.rule), `${h.host}'s ${a.rule} alert is listed: ${cells[11]}`);
      assert.equal(await row.locator('td.dashboard a').getAttribute('href'), h.url);
      assert.equal(await row.locator('a.open-trace').getAttribute('href'), `#trace_viewer?host=${h.host}`);
    }
    const agentUrls = agents.map((a) => a.url).sort();
    assert.deepEqual(f.hosts.map((h) => h.url).sort(), agentUrls);

    // The ranks table: twelve ranks, each with /api's numbers; host-b rank 2 marked.
    const rankRows = root.locator('.fleet-ranks tbody tr');
    assert.equal(await rankRows.count(), HOSTS.length * WORKERS);
    const shown = [];
    for (let i = 0; i < HOSTS.length * WORKERS; i++) shown.push(await rankRows.nth(i).locator('td').allInnerTexts());
    assert.deepEqual(shown.map((c) => `${c[0]}/${c[2]}`),
      HOSTS.flatMap((h) => [0, 1, 2, 3].map((r) => `${h}/rank ${r}`)), 'ranks in host and rank order');
    for (const c of shown) {
      const r = f.ranks.find((x) => x.host === c[0] && x.label === c[2]);
      assert.ok(r, `rank ${c[0]} ${c[2]} is in /api/fleet`);
      const what = `${r.host} ${r.label}`;
      assertShown(assert, c[1], r.rank, `${what} rank`);
      assertShown(assert, c[3], r.steps, `${what} steps`);
      assertShown(assert, c[4], r.missing, `${what} missing`);
      assertShown(assert, c[5], r.duplicates, `${what} duplicates`);
      assertShown(assert, c[6], r.incarnations - 1, `${what} restarts`);
      assertShown(assert, c[7], r.last_step, `${what} last step`);
      assertShown(assert, c[8], r.last_step_ms, `${what} last step ms`);
      assert.equal(c[10], r.host === 'host-b' && r.label === 'rank 2' ? 'straggler (alert firing)' : '');
      assert.equal(c[11], 'open trace');
    }
    assert.deepEqual(await rankRows.evaluateAll((trs) => trs.map((tr) => tr.querySelector('a')?.getAttribute('href'))),
      shown.map((c) => `#trace_viewer?host=${c[0]}`), 'each rank links its host\'s trace');
    assert.deepEqual(await root.locator('.fleet-ranks tbody tr.selected td').allInnerTexts().then((c) => c.slice(0, 3)),
      ['host-b', '2', 'rank 2']);

    // The pod across all ranks: pod.js's view of the fleet's pod.
    const pod = root.locator('.fleet-pod');
    assert.equal(await pod.locator('.workers tbody tr').count(), f.pod.workers.length);
    assert.match(await pod.locator('.summary [data-field=straggler] .stat-value').innerText(),
      new RegExp(`^${f.pod.straggler.label} [+-]`));
    assert.equal(await pod.locator('.straggler-alert li').getAttribute('data-worker-label'), 'host-b · rank 2');
    assert.equal(await pod.locator('.pod-steps thead th[data-worker]').count(), f.pod.workers.length);
    // Ranks compared over the same steps (the newest every rank has): the
    // straggler has its cells in every row drawn and is the boxed worst of
    // each, not the ranks ahead of it; how far behind it is shows.
    const slow = f.pod.workers.find((w) => w.label === 'host-b · rank 2');
    assert.ok(slow.common && slow.common.lag_pct > 20, `host-b rank 2 over the same steps: ${JSON.stringify(slow.common)}`);
    // Twelve ranks run in real time on this machine's two cores: a healthy
    // rank's step now and then outlasts the straggler's (+45 %), so the
    // straggler is the worst of most rows, not of every one.
    const rows = f.pod.steps.map((st) => [st.step, st.worst, st.cells.map((c) => c.worker)]);
    assert.ok(f.pod.steps.length > 0 && f.pod.steps.every((st) => st.cells.some((c) => c.worker === slow.id)),
      `the fleet pod's rows: host-b rank 2 (${slow.id}) in each: ${JSON.stringify(rows)}`);
    assert.ok(f.pod.steps.filter((st) => st.worst === slow.id).length >= 0.8 * f.pod.steps.length,
      `the fleet pod's rows: host-b rank 2 (${slow.id}) the worst of most: ${JSON.stringify(rows)}`);
    const slowColumn = await pod.locator(`.pod-steps tbody td[data-worker="${slow.id}"]`).allInnerTexts();
    assert.ok(slowColumn.length > 0 && slowColumn.every((t) => Number(t.replace(/,/g, '')) > 0), `its column: ${slowColumn.slice(0, 4)}`);
    const boxed = await pod.locator('.pod-steps tbody td.worst').evaluateAll((tds) => tds.map((td) => td.dataset.worker));
    assert.equal(boxed.length, await pod.locator('.pod-steps tbody tr').count(), 'one boxed worst in each row');
    assert.ok(boxed.filter((w) => w === String(slow.id)).length >= 0.8 * boxed.length,
      `the boxed worst of most rows is the straggler (${slow.id}): ${boxed.join(',')}`);
    if (slow.behind_steps > 1) {
      assert.match(await pod.locator(`.pod-steps thead th[data-worker="${slow.id}"]`).innerText(), /[\d,]+ steps behind/);
    }

    // The counters: lag, rejected by reason, the recent errors as text.
    assertShown(assert, await root.locator('.fleet-counters [data-field=lag_p50] .stat-value').innerText(), f.lag.p50_ms, 'lag p50');
    assertShown(assert, await root.locator('.fleet-counters [data-field=lag_p99] .stat-value').innerText(), f.lag.p99_ms, 'lag p99');
    assertShown(assert, await root.locator('.fleet-counters [data-field=messages] .stat-value').innerText(), f.counts.messages, 'messages');
    for (const [reason, n] of Object.entries(f.counts.rejected)) {
      assertShown(assert, await root.locator(`.fleet-rejected [data-field="rejected_${reason}"] .stat-value`).innerText(), n,
        `rejected ${reason}`);
    }
    assert.equal(f.counts.rejected.unknown_type, 1);
    const errors = await root.locator('.fleet-error-list li').allInnerTexts();
    assert.deepEqual(errors, f.recent_errors);
    assert.ok(errors.some((e) => e.includes(XSS)), `the HTML shows as text: ${JSON.stringify(errors)}`);
    assert.equal(await root.locator('.fleet-errors img').count(), 0);
    assert.equal(await page.evaluate(() => window.__fleetXss), undefined);

    await screenshot(page, 'fleet');
    await page.click('#pause');  // resume

    // An agent that stops says so: its host turns "stopped", styled as such.
    await stopServer(agents[2]);
    const stopped = root.locator('.fleet-hosts tbody tr[data-host="host-c"][data-state=stopped]');
    await stopped.waitFor({timeout: 15000});
    assert.equal(await stopped.locator('.host-state').getAttribute('class'), 'host-state state-stopped');
    assert.equal(await field('hosts_live'), '2 of 3');
    assert.equal(await field('hosts_stopped'), '1');
    assert.deepEqual(page.errors, []);
    await page.close();
  });

  test('"open trace" shows host-b\'s trace through /api/fleet/trace, as its agent\'s /api/trace has it', async () => {
    const agent = agents[HOSTS.indexOf('host-b')];
    const page = await openPage(browser, `${fleet.url}#fleet`);
    // Every trace request the page makes, over HTTP and over the WebSocket.
    const asked = [];
    page.on('request', (r) => {
      const u = new URL(r.url());
      if (/^\/api\/(fleet\/)?trace/.test(u.pathname)) asked.push(u);
    });
    const wsTrace = [];
    page.on('websocket', (ws) => ws.on('framesent', (f) => /"type":"trace"/.test(f.payload) && wsTrace.push(f.payload)));
    const tv = (fn, arg) => page.evaluate(fn, arg);
    const link = page.locator('.fleet-hosts tbody tr[data-host="host-b"] a.open-trace');
    await link.waitFor({timeout: 15000});
    await link.click();
    await until(page, 'host-b\'s first tile', () => location.hash === '#trace_viewer?host=host-b' &&
      window.liveprofTrace?.ready() && +document.querySelector('.trace-canvas').dataset.drawn > 0);
    const viewer = page.locator('.page[data-page=trace_viewer]');
    assert.equal(await viewer.locator('.host-pick').inputValue(), 'host-b');
    assert.equal(await viewer.locator('.trace-host').isVisible(), true);
    assert.match(await viewer.locator('.trace-status').innerText(), /^host-b: [\d,]+ events stored/);

    // A stretch in the past (the whole trace's end moves as events come): the
    // tile in hand, its query, and the agent's own answer to that query.
    for (let i = 0; i < 100; i++) {
      if (await tv(() => window.liveprofTrace.state.bounds.last - window.liveprofTrace.state.bounds.first > 3e9)) break;
      await tv(() => window.liveprofTrace.fit());
      await sleep(100);
    }
    await tv(() => {
      const first = window.liveprofTrace.rawTile().first_ns;
      window.liveprofTrace.setView(first + 1e9, first + 1.1e9);
    });
    await until(page, 'the zoomed tile', () => window.liveprofTrace.ready() && window.liveprofTrace.state.query?.t0 !== undefined);
    // (as a string: a tile of nested arrays comes out of the page many times faster so)
    const got = JSON.parse(await tv(() => JSON.stringify({raw: window.liveprofTrace.rawTile(),
      query: window.liveprofTrace.state.query, via: window.liveprofTrace.state.tilesVia, host: window.liveprofTrace.host()})));
    assert.equal(got.host, 'host-b');
    assert.deepEqual(Object.keys(got.query).sort(), ['t0', 't1', 'width']);
    assert.equal(got.via.ws, 0);
    const tileAsked = asked.filter((u) => u.pathname === '/api/fleet/trace');
    assert.ok(tileAsked.length >= 2, tileAsked.join('\n'));
    assert.ok(tileAsked.every((u) => u.searchParams.get('host') === 'host-b'), tileAsked.join('\n'));
    assert.ok(tileAsked.some((u) => ['t0', 't1', 'width'].every((k) => u.searchParams.get(k) === String(got.query[k]))),
      `the tile in hand's query ${JSON.stringify(got.query)} was asked of /api/fleet/trace: ${tileAsked.join('\n')}`);
    const own = await api(agent.url, `/api/trace?${new URLSearchParams(got.query)}`);
    // (the store's totals grow between the two reads)
    const stable = ({events, last_ns: lastNs, ...rest}) => rest;
    assert.deepEqual(stable(got.raw), stable(own));
    assert.ok(own.tracks.some((t) => t.slices.length), 'the stretch has slices');

    // An event's details: through /api/fleet/trace/event?host=host-b.
    const id = own.tracks.find((t) => t.slices.length).slices[0][0];
    await tv((i) => window.liveprofTrace.select(i), id);
    await until(page, 'the event\'s details', () => document.querySelector('.trace-details h4'));
    const event = await api(agent.url, `/api/trace/event?id=${id}`);
    assert.equal(await viewer.locator('.trace-details h4').innerText(), event.name);
    assert.ok(asked.some((u) => u.pathname === '/api/fleet/trace/event' && u.searchParams.get('host') === 'host-b' &&
      u.searchParams.get('id') === String(id)), asked.join('\n'));
    // The search: through /api/fleet/trace/search?host=host-b.
    await viewer.locator('.search').fill(event.name);
    await viewer.locator('.search').press('Enter');
    await until(page, 'the search hit', () => window.liveprofTrace.search.hit);
    const hit = await tv(() => window.liveprofTrace.search.hit.name);
    assert.ok(hit.toLowerCase().includes(event.name.toLowerCase()), `the search for ${event.name} found ${hit}`);
    assert.ok(asked.some((u) => u.pathname === '/api/fleet/trace/search' && u.searchParams.get('host') === 'host-b' &&
      u.searchParams.get('q') === event.name), asked.join('\n'));

    // The picker: another host, in the hash too.
    await viewer.locator('.host-pick').selectOption('host-a');
    await until(page, 'host-a\'s tile', () => window.liveprofTrace.host() === 'host-a' && window.liveprofTrace.ready());
    assert.equal(await tv(() => location.hash), '#trace_viewer?host=host-a');
    assert.ok(asked.some((u) => u.pathname === '/api/fleet/trace' && u.searchParams.get('host') === 'host-a'));
    await screenshot(page, 'fleet_trace');

    // No agent of the host: the fleet view's 503, as text in the status.
    await tv((h) => { location.hash = `#trace_viewer?${new URLSearchParams({host: h})}`; }, XSS);
    await until(page, 'the 503', () => /HTTP 503/.test(document.querySelector('.trace-status').textContent));
    const status = await viewer.locator('.trace-status').innerText();
    assert.ok(status.includes(XSS), status);
    assert.equal(await viewer.locator('img').count(), 0);
    assert.equal(await page.evaluate(() => window.__fleetXss), undefined);

    // Never this server's own trace, never the WebSocket's tiles.
    assert.deepEqual(asked.filter((u) => !u.pathname.startsWith('/api/fleet/')).map(String), []);
    assert.deepEqual(wsTrace, []);
    // (Chromium logs the 503 as a console error)
    assert.deepEqual(page.errors.filter((e) => !/status of 503/.test(e)), []);
    await page.close();
  });
});
