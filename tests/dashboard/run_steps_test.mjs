// What `liveprof run` shows of a job's steps, in Chromium:
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
import {LIVEPROF, api, assertShownUs, launchBrowser, openPage, screenshot, startServer, stopServer, until} from './harness.mjs';

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

// A CPU CNN with its own stopwatch around the model's
// forward: its compute must read as compute, the forward as long as the
// stopwatch says.
const CPU_CNN = `
import time, torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
torch.manual_seed(0)
torch.set_num_threads(1)
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 16, 3)
        self.fc = nn.Linear(16 * 30 * 30, 10)
    def forward(self, x):
        return self.fc(torch.relu(self.conv(x)).flatten(1))
model, loss_fn = Net(), nn.CrossEntropyLoss()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
loader = DataLoader(TensorDataset(torch.randn(960, 3, 32, 32), torch.randint(0, 10, (960,))), batch_size=32)
forward_s, steps = 0.0, 0
for x, y in loader:
    opt.zero_grad()
    t = time.perf_counter()
    out = model(x)
    forward_s += time.perf_counter() - t
    loss_fn(out, y).backward()
    opt.step()
    steps += 1
print("CORPUS steps=%d forward_us=%.1f" % (steps, forward_s * 1e6 / steps), flush=True)
`;

let browser;
let dir;
let server;
let cpuJob = '';  // the CPU CNN's server, kept (--linger) for the next test.

async function run(name, script) {
  const file = path.join(dir, name);
  writeFileSync(file, script);
  await stopServer(server);
  server = await startServer(['run', '--port', '0', '--linger', '120', '--', '/usr/bin/python3', file]);
  server.output = '';
  server.stdout.on('data', (d) => { server.output += d; });
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

  test('a CPU job\'s compute: its forward and backward as ops, timed as its stopwatch says; never IDLE', async () => {
    const base = cpuJob = await run('cpu_cnn.py', CPU_CNN);
    const said = await until('the job\'s stopwatch', async () => server.output.match(/forward_us=([\d.]+)/), 10);
    const stopwatch = Number(said[1]);
    const t = await until('TF stats with the forward', async () => {
      const v = await api(base, '/api/tf_stats');
      return v.host.rows.find((r) => r.name === 'nn.Module.forward: Net')?.occurrences === 30 ? v : null;
    }, 30);
    const forward = t.host.rows.find((r) => r.name === 'nn.Module.forward: Net');
    // The same interval, less the stopwatch's own two clock reads and the
    // hooks' calls: within 10 % (a few µs of a ms-long forward).
    assert.ok(Math.abs(forward.avg_us - stopwatch) <= 0.1 * stopwatch,
      `forward ${forward.avg_us} µs a call, the script's stopwatch ${stopwatch} µs`);
    assert.equal(t.host.rows.find((r) => r.name === 'autograd.backward')?.occurrences, 30);
    assert.equal(t.host.rows.find((r) => r.name === 'IDLE'), undefined, 'no IDLE on a CPU job');
    assert.ok(t.host.rows.some((r) => r.name === 'Host compute (unattributed)'));
    const o = await api(base, '/api/overview');
    assert.equal(o.summary.pct.all_others, 0, JSON.stringify(o.summary.pct));
    assert.ok(o.summary.pct.host_compute > 80, JSON.stringify(o.summary.pct));
    const pt = await api(base, '/api/pytorch');
    const cpuExec = pt.steps.columns.findIndex((c) => c.name === 'CPU Exec');
    assert.ok(pt.steps.rows.length > 0 && pt.steps.rows.every((r) => r[cpuExec] > 0), 'CPU Exec in every step');
    const page = await openPage(browser, `${base}#tf_stats`);
    const note = page.locator('.page[data-page=tf_stats] [data-field=host_note]');
    await until('the host note', async () => /host level 3/.test(await note.innerText()), 15);
    assert.match(await note.innerText(), /not IDLE/);
    await screenshot(page, 'tf_stats_cpu_job');
    await page.goto(`${base}#trace_viewer`);
    await new Promise((r) => setTimeout(r, 3000));
    await screenshot(page, 'trace_viewer_cpu_job');
    assert.deepEqual(page.errors, []);
    await page.close();
  });
  test('a CPU job\'s pages are host-shaped: host categories, host top ops, no GPU advice, what Memory has not got', async () => {
    const base = cpuJob || await run('cpu_cnn.py', CPU_CNN);
    const status = await api(base, '/api/status');
    assert.equal(status.has_device, false);
    const o = await api(base, '/api/overview');
    assert.equal(o.has_device, false);
    assert.equal(o.top_ops_side, 'host');
    const page = await openPage(browser, `${base}#overview`);
    const ov = page.locator('.page[data-page=overview]');
    await ov.locator('[data-field=host_only]').waitFor();
    // The step's categories are the host's; no device figure is shown.
    const categories = await ov.locator('table.breakdown tbody td:first-child').allInnerTexts();
    assert.deepEqual(categories, ['Host compute', 'Input', 'Output', 'Compilation', 'All others']);
    assert.equal(await ov.locator('[data-field=gpu_utilization_pct] .stat-value').innerText(), 'no GPU');
    assert.equal(await ov.locator('[data-field=device_compute_16bit_pct]').count(), 0);
    const legend = await ov.locator('.steps-chart .u-legend').innerText();
    assert.doesNotMatch(legend, /Device|Kernel launch/, legend);
    assert.match(legend, /Host compute/);
    // The host's top ops, as /api has them, in the unit of their magnitude.
    assert.equal(await ov.locator('.top-ops-title').innerText(), 'Top 10 host operations (self time)');
    const headers = await ov.locator('.top-ops thead th:visible').allInnerTexts();
    assert.ok(!headers.some((h) => /Tensor Core/.test(h)), headers.join('|'));
    assert.ok(o.top_ops.length >= 3 && o.top_ops.every((r) => r.name !== 'Host compute (unattributed)'));
    const first = await ov.locator('.top-ops tbody tr').first().locator('td').allInnerTexts();
    assert.equal(first[0], o.top_ops[0].name);
    assertShownUs(assert, first[2], o.top_ops[0].self_us, `${o.top_ops[0].name}'s self time`);
    const advice = [...o.recommendation.advice, o.recommendation.next_step].join(' ');
    assert.doesNotMatch(advice, /GPU|pin_memory/, advice);
    await screenshot(page, 'overview_cpu_job');

    // Input pipeline: no kernel launch, no GPU in what to try.
    await page.goto(`${base}#input_pipeline`);
    const ip = page.locator('.page[data-page=input_pipeline]');
    await until('the input page', async () => /no device/.test(await ip.locator('.device-title').innerText()), 15);
    const labels = await ip.locator('.summary .stat-label').allInnerTexts();
    assert.ok(labels.includes('Host compute') && !labels.includes('Kernel launch'), labels.join('|'));
    const ipApi = await api(base, '/api/input_pipeline');
    if (ipApi.bottleneck.input_class === 'device') {  // not input-bound: TF's "device" is the host's compute here.
      assert.equal(await ip.locator('[data-field=input_class] .stat-value').innerText(), 'compute (host)');
      assert.match(ipApi.bottleneck.input_class_statement, /no device/);
    }
    assert.doesNotMatch(await ip.locator('.host-parts').innerText(), /Enqueuing data to the device/);
    const tips = await ip.locator('.advice li').allInnerTexts();
    assert.ok(tips.length >= 3, tips.join('|'));
    for (const tip of tips) assert.doesNotMatch(tip, /GPU|pin_memory/, tip);
    await screenshot(page, 'input_pipeline_cpu_job');

    // TF stats: the host's tables and pies only, and why.
    await page.goto(`${base}#tf_stats`);
    const tf = page.locator('.page[data-page=tf_stats]');
    await tf.locator('[data-field=no_device]').waitFor();
    assert.equal(await tf.locator('.device-part').isVisible(), false);
    assert.equal(await tf.locator('[data-pie=device-op]').isVisible(), false);
    assert.equal(await tf.locator('[data-pie=host-op]').isVisible(), true);

    // Kernel stats and Memory say what they have not got, instead of empty tables.
    await page.goto(`${base}#kernel_stats`);
    const ks = page.locator('.page[data-page=kernel_stats]');
    await ks.locator('[data-field=no_device]').waitFor();
    assert.match(await ks.locator('[data-field=no_device]').innerText(), /No GPU kernels.*TF stats/);
    assert.equal(await ks.locator('.kernels').isVisible(), false);
    await screenshot(page, 'kernel_stats_cpu_job');
    await page.goto(`${base}#memory`);
    const mem = page.locator('.page[data-page=memory]');
    await mem.locator('[data-field=no_device]').waitFor();
    assert.match(await mem.locator('[data-field=no_device]').innerText(), /No device memory.*RSS.*not recorded yet/);
    assert.equal(await mem.locator('.timeline').isVisible(), false);
    await screenshot(page, 'memory_cpu_job');

    // PyTorch: the plugin's summary of a CPU run, in the units that fit.
    await page.goto(`${base}#pytorch`);
    const pt = page.locator('.page[data-page=pytorch]');
    await until('the PyTorch page', async () => (await pt.locator('.gpu-title').innerText()) === 'Run summary (no GPU)', 15);
    assert.match(await pt.locator('[data-field=avg_step_us] .stat-value').innerText(), / ms$/);
    await screenshot(page, 'pytorch_cpu_job');
    assert.deepEqual(page.errors, []);
    await page.close();
  });
});
