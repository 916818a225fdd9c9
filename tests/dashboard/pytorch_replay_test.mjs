// A real PyTorch job on the dashboard: `liveprof replay --loop` of the H200
// slow-loader trace (../shared/data/gpu/README.md: ResNet-18 whose DataLoader
// sleeps 200 ms a batch). The input-bound alert fires, and the Input
// pipeline page says the input is a PyTorch DataLoader with num_workers=0
// and offers PyTorch's knobs, not tf.data's; the Annotations page lists its
// record_function ranges with the kernels they launched.
import assert from 'node:assert/strict';
import {execFileSync} from 'node:child_process';
import {after, before, describe, test} from 'node:test';
import {LIVEPROF, api, assertShown, assertShownUs, launchBrowser, openPage, screenshot, sharedData, startServer, stopServer, until} from './harness.mjs';

// The real data is absent on a laptop (skip), never under CI=true (fail).
const {file: TRACE, absent} = sharedData('gpu/h200/resnet18_h200_slowloader.pt.trace.json.gz');

let server;
let browser;
let base;

describe('a replayed PyTorch job whose DataLoader is slow', {skip: absent && `${TRACE} is absent`}, () => {
  before(async () => {
    server = await startServer(['replay', '--port', '0', '--loop', '--speed', 'max', TRACE]);
    base = server.url;
    browser = await launchBrowser();
  });

  after(async () => {
    await browser?.close();
    await stopServer(server);
  });

  test('input_bound_high fires, and the Input pipeline page names the DataLoader and its knobs', async () => {
    let alerts;
    for (let i = 0; i < 200; i++) {
      alerts = await api(base, '/api/alerts');
      if (alerts.firing.some((a) => a.rule === 'input_bound_high')) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    const fired = alerts.firing.find((a) => a.rule === 'input_bound_high');
    assert.ok(fired, `input_bound_high did not fire in 20 s: ${JSON.stringify(alerts.firing)}`);
    // 91.598 % of each step waits for the DataLoader (tests/import/pytorch_traces_test.cc).
    assert.ok(fired.value > 91.5 && fired.value < 91.7, `value ${fired.value}`);

    const ip = await api(base, '/api/input_pipeline');
    assert.equal(ip.host_side.source, 'pytorch_dataloader');
    const page = await openPage(browser, base);
    await page.goto(`${base}#input_pipeline`);
    const card = page.locator('.page[data-page=input_pipeline]');
    await card.locator('[data-field=source_statement]:not([hidden])').waitFor({timeout: 10000});
    assert.match(await card.locator('[data-field=input_classification]').innerText(), /HIGHLY input-bound/);
    assertShown(assert, await card.locator('[data-field=input_pct] .stat-value').innerText(),
      ip.bottleneck.input_pct, 'waiting for input');
    const source = await card.locator('[data-field=source_statement]').innerText();
    assert.match(source, /PyTorch DataLoader with num_workers=0/);
    const advice = await card.locator('.advice').innerText();
    for (const knob of ['num_workers', 'persistent_workers', 'prefetch_factor', 'pin_memory']) {
      assert.ok(advice.includes(knob), `"What to try" lacks ${knob}:\n${advice}`);
    }
    assert.ok(!advice.includes('num_parallel_calls'), `tf.data's advice for a PyTorch job:\n${advice}`);
    await screenshot(page, 'input_pipeline_pytorch_replay');
    assert.deepEqual(page.errors, []);
    await page.close();
  });

  test('the Annotations page lists its record_function ranges with the GPU time they launched', async () => {
    const a = await api(base, '/api/annotations');
    const names = a.rows.map((r) => r.name);
    assert.deepEqual(names, ['ProfilerStep#*', 'Optimizer.step#SGD.step',
      'enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__', 'Optimizer.zero_grad#SGD.zero_grad']);
    // Per loop of the trace (tests/import/pytorch_traces_test.cc): 572 of
    // 1,496 kernels under the 4 steps alone (143 a step), 1 under each
    // optimizer step; live, a step's last kernels may not have come yet.
    const step = a.rows[0];
    assert.ok(Math.abs(step.kernels - 143 * step.count) <= 143, `${step.kernels} kernels in ${step.count} steps`);
    assert.ok(Math.abs(a.rows[1].kernels - a.rows[1].count) <= 1, JSON.stringify(a.rows[1]));
    const page = await openPage(browser, base);
    await page.goto(`${base}#annotations`);
    const card = page.locator('.page[data-page=annotations]');
    await card.locator('.annotations-table tbody tr').first().waitFor({timeout: 10000});
    const text = await card.locator('.annotations-table').innerText();
    for (const name of names) assert.ok(text.includes(name), `the table lacks ${name}`);
    assert.match(await card.locator('.totals').innerText(), /4 annotations, since the start/);
    await screenshot(page, 'annotations_pytorch_replay');
    assert.deepEqual(page.errors, []);
    await page.close();
  });

  test('--loop numbers each loop\'s steps on from the last: the step axes run forward', async () => {
    let steps;
    for (let i = 0; i < 600; i++) {  // until a few loops of 4 steps are in.
      steps = await api(base, '/api/steps?last=100');
      if (steps.rows.length >= 10) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    const ns = steps.rows.map((r) => r.step);
    assert.ok(ns.length >= 10, `${ns.length} steps`);
    for (let i = 1; i < ns.length; i++) assert.ok(ns[i] > ns[i - 1], `steps ${ns.join(' ')} do not run forward`);
    const page = await openPage(browser, `${base}#overview`);
    const field = page.locator('.page[data-page=overview] [data-field=steps] .stat-value');
    await field.waitFor();
    const m = (await field.innerText()).match(/\((\d+)–(\d+)\)/);
    assert.ok(m && +m[1] <= +m[2], `the overview reads ${await field.innerText()}`);
    await page.close();
  });

  test('GPU kernel stats: long C++ kernel names shown short, whole on hover; the table fits 1600 px', async () => {
    const k = await api(base, '/api/kernel_stats');
    const long = k.rows.find((r) => r.kernel_name.length > 150 && r.kernel_name.includes('<'));
    assert.ok(long, 'the trace has long template kernel names');
    const page = await openPage(browser, `${base}#kernel_stats`);
    await page.setViewportSize({width: 1600, height: 1000});
    const card = page.locator('.page[data-page=kernel_stats]');
    await card.locator('tbody tr').first().waitFor({timeout: 10000});
    await card.locator('input.filter').first().fill(long.kernel_name.slice(0, 60));
    const cell = card.locator('tbody tr td.name').first();
    await cell.waitFor();
    const [shown, title] = [await cell.innerText(), await cell.getAttribute('title')];
    assert.ok(shown.length < 125 && shown.includes('<…>'), `shown: ${shown}`);
    assert.equal(title, long.kernel_name);
    await card.locator('input.filter').first().fill('');
    // Every header cell, Occupancy included, within the window's width.
    const right = await card.locator('thead th').evaluateAll((ths) => Math.max(...ths.map((t) => t.getBoundingClientRect().right)));
    assert.ok(right <= 1600, `the table reaches ${right} px`);
    assert.ok(await card.locator('thead th', {hasText: 'Occupancy'}).isVisible());
    await screenshot(page, 'kernel_stats_pytorch_replay');
    assert.deepEqual(page.errors, []);
    await page.close();
  });

  test('the PyTorch page shows the plugin\'s overview, live, equal to /api/pytorch', async () => {
    let py;
    for (let i = 0; i < 300; i++) {  // until a step is in (the plugin drops the tail step).
      py = await api(base, '/api/pytorch');
      if (py.performance.length) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.ok(py.performance.length, 'no PyTorch step');
    const page = await openPage(browser, base);
    // The page polls /api/pytorch and the loop moves the numbers: keep every
    // answer it got by seq, read what it draws in one go, and compare that
    // with the answer of the seq it drew.
    const answers = new Map();
    page.on('response', (r) => {
      if (r.url().includes('/api/pytorch') && r.status() === 200) {
        r.json().then((j) => answers.set(String(j.seq), j), () => {});
      }
    });
    await page.goto(`${base}#pytorch`);
    const card = page.locator('.page[data-page=pytorch]');
    await card.locator('[data-field=avg_step_us] .stat-value').waitFor({timeout: 10000});
    const drawn = await card.evaluate((root) => {
      const texts = (sel) => [...root.querySelectorAll(sel)].map((e) => e.innerText);
      return {
        seq: root.dataset.pytorchSeq,
        avg: root.querySelector('[data-field=avg_step_us] .stat-value').innerText,
        dlRow: texts('tr[data-role=DataLoader] td'),
        recs: texts('.recommendations li'),
        links: root.querySelectorAll('.recommendations a[href^="https://pytorch.org/"]').length,
        gpuText: root.querySelector('.gpu').innerText,
        stepRows: root.querySelectorAll('.steps-table tbody tr').length,
      };
    });
    await until(`the answer of seq ${drawn.seq}`, () => answers.has(drawn.seq), 10);
    const now = answers.get(drawn.seq);
    const perf = now.performance[0];
    assertShownUs(assert, drawn.avg, perf.value, 'average step');
    const dl = perf.children.find((c) => c.name === 'DataLoader');
    assert.ok(dl.extra > 80, `DataLoader is ${dl.extra}% of the slow-loader step`);
    assertShownUs(assert, drawn.dlRow[1], dl.value, 'DataLoader per step');
    assertShown(assert, drawn.dlRow[2], dl.extra, 'DataLoader %');
    // The plugin's text, its pytorch.org link a link (no HTML shown as text).
    const plain = now.liveprof.recommendation_list.map((r) => r.replace(/<a [^>]*>([^<]*)<\/a>/g, '$1'));
    assert.deepEqual(drawn.recs, plain.length ? plain : ['N/A']);
    assert.ok(!drawn.recs.join('').includes('<a '), 'HTML shown as text');
    assert.ok(drawn.links >= 1);
    assert.match(drawn.recs.join('\n'), /DataLoader/);
    assert.match(drawn.gpuText, /GPU Utilization/);
    assert.match(drawn.gpuText, /H200/);
    assert.equal(drawn.stepRows, now.steps.rows.length);
    await screenshot(page, 'pytorch_pytorch_replay');
    assert.deepEqual(page.errors, []);
    await page.close();
  });
});

// One trace, one figure per definition. Replayed once (no loop),
// the finished job's /api/overview, /api/kernel_stats and /api/pytorch equal
// `liveprof analyze --json` of the same file; the Overview shows liveprof's
// GPU utilization with its definition, the PyTorch page the plugin's figures
// each labelled as the plugin's, and liveprof's beside them, equal to /api.
describe('GPU utilization and Tensor Cores of the H200 slow-loader trace, each with its definition', {skip: absent && `${TRACE} is absent`}, () => {
  let once;
  let onceBrowser;
  before(async () => {
    once = await startServer(['replay', '--port', '0', '--speed', 'max', TRACE]);
    onceBrowser = await launchBrowser();
  });
  after(async () => {
    await onceBrowser?.close();
    await stopServer(once);
  });

  test('/api, analyze and the pages agree, and say how each figure is counted', async () => {
    for (let i = 0; i < 300; i++) {  // until the replay has finished.
      if ((await api(once.url, '/api/status')).job_state === 'finished') break;
      await new Promise((r) => setTimeout(r, 100));
    }
    const analyzed = JSON.parse(execFileSync(LIVEPROF, ['analyze', '--json', TRACE], {maxBuffer: 1 << 28}).toString());
    const o = await api(once.url, '/api/overview');
    const k = await api(once.url, '/api/kernel_stats');
    const py = await api(once.url, '/api/pytorch');
    // liveprof's figure: the same in the overview, analyze and its device table.
    assert.equal(o.gpu_utilization_pct, analyzed.overview.gpu_utilization_pct);
    assert.equal(o.gpu_utilization_pct, analyzed.device[0].utilization_pct);
    assert.ok(Math.abs(o.gpu_utilization_pct - 4.5649) < 1e-3, `${o.gpu_utilization_pct}`);
    assert.equal(o.gpu_utilization_definition, analyzed.overview.gpu_utilization_definition);
    assert.match(o.gpu_utilization_definition, /kernel, copy or memset/);
    // The plugin's: its own rule, its own label.
    const row = (title) => py.gpu_metrics.data.find((r) => r.title === title)?.value;
    const arow = (title) => analyzed.pytorch_breakdown.gpu_metrics.data.find((r) => r.title === title)?.value;
    assert.equal(row('GPU Utilization'), '2.59 %');
    assert.equal(row('GPU Utilization'), arow('GPU Utilization'));
    const defs = py.liveprof.definitions;
    assert.match(defs['GPU Utilization'], /PyTorch plugin/);
    assert.notEqual(defs['GPU Utilization'], o.gpu_utilization_definition);
    // Tensor Cores: the plugin's allowlist keeps 2.72 %; by kernel family
    // (the sm90/sm80 xmma and CUTLASS tensor-op kernels) 36.40 %, the same
    // on Kernel stats, the PyTorch page's liveprof row and analyze.
    assert.equal(row('Kernel Time using Tensor Cores'), '2.72 %');
    assert.ok(Math.abs(k.tensor_core_pct - 36.397) < 0.01, `${k.tensor_core_pct}`);
    assert.equal(k.tensor_core_pct, analyzed.kernel_stats.tensor_core_pct);
    assert.equal(py.liveprof.gpus[0].tensor_cores_by_family_pct, 36.4);
    const xmma = k.rows.filter((r) => r.kernel_name.startsWith('sm90_xmma_wgrad'));
    assert.ok(xmma.length && xmma.every((r) => r.kernel_uses_tc && r.tc_family === 'xmma'), 'sm90_xmma_wgrad reads Uses TC: no');

    const page = await openPage(onceBrowser, `${once.url}#overview`);
    const card = page.locator('.page[data-page=overview]');
    await card.locator('[data-field=gpu_utilization_definition]').waitFor({timeout: 10000});
    assertShown(assert, await card.locator('[data-field=gpu_utilization_pct] .stat-value').innerText(), o.gpu_utilization_pct, 'GPU utilization');
    assert.ok((await card.locator('[data-field=gpu_utilization_definition]').innerText()).includes(o.gpu_utilization_definition));
    await screenshot(page, 'overview_gpu_utilization_h200');

    await page.goto(`${once.url}#pytorch`);
    const pcard = page.locator('.page[data-page=pytorch]');
    await pcard.locator('[data-field=liveprof_gpu_utilization]').waitFor({timeout: 10000});
    const cells = async (f) => pcard.locator(`[data-field=${f}] td`).allInnerTexts();
    const plugin = await cells('plugin_gpu_utilization');
    assert.match(plugin[0], /GPU Utilization \(PyTorch plugin\)/);
    assert.equal(plugin[1], row('GPU Utilization'));
    const ours = await cells('liveprof_gpu_utilization');
    assert.match(ours[0], /GPU utilization \(liveprof, as on Overview\)/);
    assertShown(assert, ours[1], o.gpu_utilization_pct, 'liveprof GPU utilization on the PyTorch page');
    const tc = await cells('plugin_kernel_time_using_tensor_cores');
    assert.equal(tc[1], '2.72 %');
    const ourTc = await cells('liveprof_tensor_cores_0');
    assertShown(assert, ourTc[1], py.liveprof.gpus[0].tensor_cores_by_family_pct, 'Tensor Cores by family');
    const text = await pcard.locator('.gpu').innerText();
    for (const d of [defs['GPU Utilization'], defs['Kernel Time using Tensor Cores'], o.gpu_utilization_definition]) {
      assert.ok(text.includes(d), `the GPU summary does not say: ${d}`);
    }
    await screenshot(page, 'pytorch_gpu_definitions_h200');

    await page.goto(`${once.url}#kernel_stats`);
    const kcard = page.locator('.page[data-page=kernel_stats]');
    await kcard.locator('[data-field=tensor_core_pct]').waitFor({timeout: 10000});
    assertShown(assert, await kcard.locator('[data-field=tensor_core_pct]').innerText(), k.tensor_core_pct, 'TC share');
    await screenshot(page, 'kernel_stats_tensor_cores_h200');
    assert.deepEqual(page.errors, []);
    await page.close();
  });
});
