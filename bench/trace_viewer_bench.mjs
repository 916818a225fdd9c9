// The trace viewer's browser benchmark: with LIVEPROF_VIEWER_EVENTS (default 100 M)
// events in the server's trace store, zooms and pans in the trace viewer
// (Debian's Chromium through playwright-core), each timed from the input to
//   frame: the first frame drawn after it (from the tile in hand), and
//   data:  the first frame drawn from a tile that covers the new view at
//          its resolution (the tile fetched, parsed and drawn).
// Target: p95 <= 100 ms. Run: node bench/trace_viewer_bench.mjs (after the build).
import {readFileSync} from 'node:fs';
import {api, launchBrowser, openPage, startServer, stopServer} from '../tests/dashboard/harness.mjs';

const EVENTS = Number(process.env.LIVEPROF_VIEWER_EVENTS ?? 100e6);
const RATE = 5e6;
const INPUTS = Number(process.env.LIVEPROF_VIEWER_INPUTS ?? 200);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Events per step at RATE, from a short run: the real run stops its workload
// after enough steps, so nothing appends while the browser is measured.
async function eventsPerStep() {
  const s = await startServer(['demo', '--port', '0', '--rate', String(RATE), '--trace-mb', '0']);
  await sleep(3000);
  const st = await api(s.url, '/api/status');
  await stopServer(s);
  return st.events_consumed / Math.max(1, st.steps_closed + st.steps_open);
}

function pct(a, p) {
  const s = [...a].sort((x, y) => x - y);
  return s[Math.min(s.length - 1, Math.floor(p * s.length))];
}

const eps = await eventsPerStep();
const steps = Math.ceil(EVENTS / eps * 1.06);  // steps vary: a margin over the target
const mb = Math.ceil(EVENTS * 24 / 2 ** 20) + 256;
const started = Date.now();
const server = await startServer(['demo', '--port', '0', '--rate', String(RATE), '--steps', String(steps), '--trace-mb', String(mb)]);
let stored = 0;
for (let last = -1; ;) {
  await sleep(2000);
  stored = (await api(server.url, '/api/trace?width=1')).events;
  if (stored === last && stored > 0) break;  // the workload has stopped.
  last = stored;
}
const rss = 1024 * Number(readFileSync(`/proc/${server.pid}/status`, 'utf8').match(/^VmRSS:\s+(\d+)/m)?.[1] ?? 0);
console.log(`${stored.toLocaleString()} events stored in ${((Date.now() - started) / 1000).toFixed(0)} s` +
  `${rss ? `; server RSS ${(rss / 2 ** 30).toFixed(2)} GiB` : ''}`);

const browser = await launchBrowser();
const page = await openPage(browser, `${server.url}#trace_viewer`);
await page.waitForFunction(() => window.liveprofTrace?.ready(), null, {timeout: 60000});
const box = await page.locator('.trace-canvas').boundingBox();
await page.locator('.trace-canvas').focus();
let seed = 7;
const rand = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
// A session: zoom in from the whole trace to a few µs and back out, panning on the way.
for (let i = 0; i < INPUTS; i++) {
  await page.mouse.move(box.x + 200 + rand() * (box.width - 220), box.y + 60);
  const phase = Math.floor(i / 50) % 2;  // 50 inputs mostly in, 50 mostly out
  const r = rand();
  const key = r < 0.6 ? (phase === 0 ? 'w' : 's') : r < 0.8 ? 'a' : 'd';
  if (rand() < 0.3) await page.mouse.wheel(0, phase === 0 ? -200 : 200);
  else await page.keyboard.press(key);
  await page.waitForFunction(() => window.liveprofTrace.state.inputAt === null, null, {timeout: 30000});
}
const s = await page.evaluate(() => window.liveprofTrace.state.samples);
const views = await page.evaluate(() => window.liveprofTrace.state.view);
console.log(`${INPUTS} inputs (W/S/A/D and the wheel), last view ${((views.t1 - views.t0) / 1e3).toFixed(1)} µs`);
console.log(`input -> first frame: p50 ${pct(s.frame, 0.5).toFixed(1)} ms, p95 ${pct(s.frame, 0.95).toFixed(1)} ms, max ${Math.max(...s.frame).toFixed(1)} ms (n=${s.frame.length})`);
console.log(`input -> frame with its data: p50 ${pct(s.data, 0.5).toFixed(1)} ms, p95 ${pct(s.data, 0.95).toFixed(1)} ms, max ${Math.max(...s.data).toFixed(1)} ms (n=${s.data.length})`);
if (page.errors.length) console.log('page errors:', page.errors);
await browser.close();
await stopServer(server);
