// Input pipeline analyzer: is the program input-bound, how much of each step
// waits for input (device side), where the host spends its input time, and
// the input ops (the `input_pipeline` view model, `steps` for the graph).
import {StackedBars, barList} from '../charts.js';
import {esc, num, pct} from '../format.js';
import {Table} from '../table.js';
import {colorOf, stat, stepSeries} from './common.js';

const HOST_PARTS = [
  ['enqueue_us', 'Enqueuing data to the device'],
  ['demanded_file_read_us', 'Reading data from files on demand'],
  ['advanced_file_read_us', 'Reading data from files in advance'],
  ['preprocessing_us', 'Data preprocessing'],
  ['unclassified_non_enqueue_us', 'Other data reading or processing'],
];

export default {
  id: 'input_pipeline',
  title: 'Input pipeline',
  topics: ['input_pipeline', 'steps'],
  csv: 'input_pipeline',

  mount(root, ctx) {
    root.innerHTML = `
      <section class="card"><h3>Summary</h3><div class="summary"></div></section>
      <section class="card"><h3><span class="device-title">Device-side analysis: input time of each step</span> <span class="muted step-range"></span></h3>
        <div class="stats device-stats"></div><div class="chart device-chart"></div></section>
      <div class="grid2">
        <section class="card"><h3>Host-side analysis: where input time goes</h3>
          <p class="input-source" data-field="source_statement"></p>
          <div class="loader-workers" hidden><h4>DataLoader worker processes (their own time, not the training process's)</h4>
            <div class="workers-table"></div></div>
          <div class="host-parts"></div>
          <h4>By input-op category (self time)</h4><div class="host-categories"></div></section>
        <section class="card"><h3>What to try</h3><ul class="advice"></ul></section>
      </div>
      <section class="card"><h3>Input operations <button class="csv">Export CSV</button></h3><div class="ops"></div></section>`;
    const summary = root.querySelector('.summary');
    const deviceStats = root.querySelector('.device-stats');
    const range = root.querySelector('.step-range');
    const chart = new StackedBars(root.querySelector('.device-chart'), {
      categories: [{label: 'Everything else', color: colorOf('Device compute')}, {label: 'Input', color: colorOf('Input')}],
      xLabel: 'step', yLabel: 'ms', fmt: (v) => `${num(v, 2)} ms`,
    });
    const ops = new Table(root.querySelector('.ops'), [
      {key: 'name', label: 'Input op', name: true},
      {key: 'category', label: 'Category'},
      {key: 'count', label: 'Count', numeric: true},
      {key: 'total_ms', label: 'Total (ms)', numeric: true, fmt: (v) => num(v, 3)},
      {key: 'total_pct', label: 'Total %', numeric: true, fmt: (v) => pct(v, 1)},
      {key: 'self_ms', label: 'Self (ms)', numeric: true, fmt: (v) => num(v, 3)},
      {key: 'self_pct', label: 'Self %', numeric: true, fmt: (v) => pct(v, 1)},
    ], {filterKeys: ['name', 'category'], sort: {key: 'self_ms', desc: true}});
    const workers = new Table(root.querySelector('.workers-table'), [
      {key: 'process', label: 'Process', name: true},
      {key: 'fetches', label: 'Batches fetched', numeric: true},
      {key: 'fetch_ms', label: 'Fetching (ms)', numeric: true, fmt: (v) => num(v, 1)},
      {key: 'busy_pct', label: 'Busy % of the steps\' time', numeric: true, fmt: (v) => pct(v, 1)},
    ], {sort: {key: 'process'}});
    root.querySelector('.csv').addEventListener('click', () => ctx.exportCsv('input_pipeline'));

    return {
      render({input_pipeline: ip, steps, status}) {
        if (ip) {
          const b = ip.bottleneck;
          // TF's "device side" is the step as the device runs it; a job with
          // no device has the host's steps only, and no kernel to launch.
          const hostOnly = status?.has_device === false;
          root.querySelector('.device-title').textContent = hostOnly ? 'Input time of each step (no device: the host\'s steps)'
            : 'Device-side analysis: input time of each step';
          const bad = b.input_classification && !/^not|unknown/i.test(b.input_classification);
          summary.innerHTML =
            `<p class="bottleneck ${bad ? 'bad' : ''}" data-field="input_classification">${esc(b.input_classification || 'unknown')}</p>` +
            `<div class="stats">${stat('Waiting for input', pct(b.input_pct), 'input_pct')}` +
            `${stat(b.compute_on === 'host' ? 'Host compute' : 'Device compute', pct(b.compute_pct), 'compute_pct')}` +
            `${hostOnly ? '' : stat('Kernel launch', pct(b.kernel_launch_pct))}${stat('Idle', pct(b.idle_pct))}${stat('Input on', hostOnly && b.input_class === 'device' ? 'compute (host)' : b.input_class || '—', 'input_class')}</div>` +
            (b.input_class_statement ? `<p class="muted" data-field="input_class_statement">${esc(b.input_class_statement)}</p>` : '') +
            `<p>${esc(b.statement)}</p>${b.next_step ? `<p><b>Next step:</b> ${esc(b.next_step)}</p>` : ''}`;
          const d = ip.device_side;
          const w = ip.window;
          deviceStats.innerHTML = stat('Input % of step: average', pct(d.input_pct_avg, 2), 'input_pct_avg') +
            stat('standard deviation', pct(d.input_pct_stddev, 2)) + stat('range', `${pct(d.input_pct_min)} – ${pct(d.input_pct_max)}`) +
            stat('Step time: average', `${num(w.step_time_ms_avg, 2)} ms`) + stat('standard deviation', `${num(w.step_time_ms_stddev, 2)} ms`) +
            stat('range', `${num(w.step_time_ms_min, 1)} – ${num(w.step_time_ms_max, 1)} ms`);
          const h = ip.host_side;
          const source = root.querySelector('.input-source');
          source.textContent = h.source_statement ?? '';
          source.hidden = !h.source_statement;
          const workerRows = h.workers?.rows ?? [];
          root.querySelector('.loader-workers').hidden = !workerRows.length;
          workers.setRows(workerRows);
          const hostTotal = HOST_PARTS.reduce((t, [k]) => t + h[k], 0);
          const parts = root.querySelector('.host-parts');
          if (hostTotal > 0) {
            // No device: nothing is enqueued to one (the row left out when 0).
            barList(parts, HOST_PARTS.filter(([k]) => !(hostOnly && k === 'enqueue_us' && !h[k])).map(([k, label]) => ({label, value: h[k],
              text: `${num(h[k] / 1e3, 1)} ms${` (${pct(100 * h[k] / hostTotal, 0)})`}`})), colorOf('Input'));
            if (!h.enqueue_scaled) {
              parts.insertAdjacentHTML('beforeend', '<p class="muted basis">The input ops\' own (self) time by category: ' +
                'no enqueue-to-device op was seen to scale them by, as TensorBoard does.</p>');
            }
          } else {
            parts.innerHTML = `<p class="muted empty-why">${esc(h.ops.length
              ? 'The input ops have no time in these categories.'
              : h.wait_ms > 0
                ? `The loop waited ${num(h.wait_ms, 1)} ms for input, but no input op says what it did (reading, preprocessing, enqueue): ` +
                  'mark the stages (liveprof.input(stage=...), LIVEPROF_INPUT) to see them here.'
                : 'No input op has run in this window.')}</p>`;
          }
          const byCategory = new Map();
          for (const op of h.ops) byCategory.set(op.category, (byCategory.get(op.category) ?? 0) + op.self_ms);
          barList(root.querySelector('.host-categories'), [...byCategory].sort((a, b) => b[1] - a[1])
            .map(([label, ms]) => ({label, value: ms, text: `${num(ms, 1)} ms`})), '#ff7f0e');
          const advice = [...(b.advice ?? []), ...(h.recommendations ?? [])];
          root.querySelector('.advice').innerHTML = advice.length
            ? advice.map((a) => `<li>${esc(a)}</li>`).join('') : '<li class="muted">nothing to suggest</li>';
          ops.setRows(h.ops);
        }
        if (steps) {
          const {xs, values} = stepSeries(steps);
          const input = steps.columns.indexOf('Input');
          const inputMs = input >= 0 ? values[input] : xs.map(() => 0);
          const rest = steps.rows.map((r, i) => r.step_ms - inputMs[i]);
          chart.setData(xs, [rest, inputMs]);
          range.textContent = xs.length ? `steps ${xs[0]}–${xs[xs.length - 1]}` : 'no step closed yet';
        }
      },
    };
  },
};
