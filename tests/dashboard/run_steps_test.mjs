// What `liveprof run` shows of a job's steps (issue 41), in Chromium:
// an inference-only job (no optimizer) says on the Overview that the job
// ended without a training step, what was looked for and how to mark
// steps, and its Sources row says "none"; two ranks started with
// torch.multiprocessing.spawn (no RANK in their environment) are named by
// torch.distributed's rank, each with the job's own count of steps and
// its step source on the Sources page, and the parent is a source, not a
// rank. Debian's python3-torch (CPU), unmodified scripts.
import assert from 'node:assert/strict';
import {existsSync, mkdtempSync, rmSync, writeFileSync} from 'node:fs';
import {tmpdir} from 'node:os';
import path from 'node:path';
import {after, before, describe, test} from 'node:test';
import {LIVEPROF, api, launchBrowser, openPage, screenshot, startServer, stopServer} from './harness.mjs';

const LIBRARY = path.join(path.dirname(LIVEPROF), '..', 'python', 'liveprof', 'libliveprof.so');
const SKIP = existsSync(LIBRARY) ? false : `no ${LIBRARY} in this build (a sanitizer build): the release suite runs it`;

const INFERENCE = `
import torch
from torch.utils.data import DataLoader, TensorDataset
torch.set_num_threads(1)
model = torch.nn.Linear(16, 4).eval()
with torch.no_grad():
    for (x,) in DataLoader(TensorDataset(torch.randn(256, 16)), batch_size=8):
        model(x)
print("CORPUS steps=0", flush=True)
`;

const STEPS = 20;
const SPAWNED = `
import os, torch, torch.distributed as dist, torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP
def train(rank, world):
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.set_num_threads(1)
    model = DDP(torch.nn.Linear(16, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    steps = 0
    for _ in range(${STEPS}):
        opt.zero_grad()
        model(torch.randn(8, 16)).pow(2).mean().backward()
        opt.step()
        steps += 1
    print("CORPUS rank=%d steps=%d" % (rank, steps), flush=True)
    dist.destroy_process_group()
if __name__ == "__main__":
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = os.environ.get("TEST_PORT", "29561")
    mp.spawn(train, args=(2,), nprocs=2, join=True)
`;

let browser;
let dir;
let server;

async function until(what, f, seconds = 60) {
  for (let i = 0; i < seconds * 10; i++) {
    const v = await f();
    if (v) return v;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${what}: not within ${seconds} s`);
}

async function run(name, script) {
  const file = path.join(dir, name);
  writeFileSync(file, script);
  await stopServer(server);
  server = await startServer(['run', '--port', '0', '--linger', '120', '--', '/usr/bin/python3', file]);
  const base = server.url.replace(/\/$/, '');
  await until(`${name} finished`, async () => {
    try {
      return ['finished', 'disconnected'].includes((await api(base, '/api/status')).job_state);
    } catch {
      return false;  // (no publication yet)
    }
  }, 120);
  return base;
}

// The Sources page's rows: {worker label: its Steps cell}.
async function sourcesSteps(page) {
  await page.locator('.page[data-page=capture] .sources tbody tr').first().waitFor();
  const headers = await page.locator('.page[data-page=capture] .sources thead th').allInnerTexts();
  const label = headers.findIndex((h) => h.startsWith('Worker'));
  const steps = headers.findIndex((h) => h.startsWith('Steps'));
  const out = {};
  for (const row of await page.locator('.page[data-page=capture] .sources tbody tr').all()) {
    const cells = await row.locator('td').allInnerTexts();
    out[cells[label]] = cells[steps];
  }
  return out;
}

before(async () => {
  if (SKIP) return;
  dir = mkdtempSync(path.join(tmpdir(), 'liveprof-run-steps-'));
  browser = await launchBrowser();
});

after(async () => {
  if (SKIP) return;
  await browser?.close();
  await stopServer(server);
  rmSync(dir, {recursive: true, force: true});
});

describe('liveprof run: the job\'s steps on the dashboard', {skip: SKIP}, () => {
  test('an inference-only job: no training steps, said with how to mark them', async () => {
    const base = await run('inference.py', INFERENCE);
    const status = await api(base, '/api/status');
    assert.equal(status.steps_closed, 0);
    assert.deepEqual(status.step_sources, []);
    assert.ok(status.events_consumed > 0, 'its DataLoader waits came');
    const page = await openPage(browser, `${base}#overview`);
    const why = page.locator('.page[data-page=overview] [data-field=why_no_steps]');
    await why.waitFor();
    await until('the job\'s end is said', async () => /the job ended without a training step/.test(await why.innerText()), 15);
    const text = await why.innerText();
    for (const needle of ['optimizer step', 'torch.profiler', 'liveprof.step()', '--step-pattern']) {
      assert.ok(text.includes(needle), `the Overview's note names ${needle}: ${text}`);
    }
    await screenshot(page, 'overview_run_inference_only');
    await page.goto(`${base}#capture`);
    const rows = await sourcesSteps(page);
    assert.deepEqual(Object.values(rows), ['none'], JSON.stringify(rows));
    await screenshot(page, 'sources_run_inference_only');
    assert.deepEqual(page.errors, []);
    await page.close();
  });

  test('two ranks of torch.multiprocessing.spawn: named by their rank, the job\'s count each', async () => {
    const base = await run('spawned.py', SPAWNED);
    const status = await until('both ranks\' steps', async () => {
      const s = await api(base, '/api/status');
      return s.step_sources.length === 2 && s.step_sources.every((w) => w.steps === STEPS) ? s : null;
    }, 30);
    assert.deepEqual(status.step_sources.map((w) => w.label).sort(), ['rank 0', 'rank 1']);
    assert.ok(status.step_sources.every((w) => w.source === 'optimizer'), JSON.stringify(status.step_sources));
    assert.equal(status.server.ingest.length, 3, 'the two ranks and their parent');
    const pod = await api(base, '/api/pod');
    assert.deepEqual(pod.workers.map((w) => [w.label, w.steps_total, w.first_step, w.last_step]).sort(),
      [['rank 0', STEPS, 0, STEPS - 1], ['rank 1', STEPS, 0, STEPS - 1]]);
    const page = await openPage(browser, `${base}#capture`);
    const rows = await until('the Sources page\'s steps', async () => {
      const r = await sourcesSteps(page);
      return Object.keys(r).length === 3 && r['rank 0'] !== 'none' ? r : null;
    }, 15);
    assert.equal(rows['rank 0'], `${STEPS} · optimizer`);
    assert.equal(rows['rank 1'], `${STEPS} · optimizer`);
    assert.equal(Object.values(rows).filter((v) => v === 'none').length, 1, `the parent: ${JSON.stringify(rows)}`);
    await screenshot(page, 'sources_run_mp_spawn');
    await page.goto(`${base}#pod`);
    await page.locator('.page[data-page=pod] .workers tbody tr').nth(1).waitFor();
    await screenshot(page, 'pod_run_mp_spawn');
    assert.deepEqual(page.errors, []);
    await page.close();
  });
});
