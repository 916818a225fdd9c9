// Overview: the performance summary, the step-time graph by category, the
// top device ops, the run environment and the recommendation (the
// `overview` view model, and `steps` for the graph).
import {StackedBars} from '../charts.js';
import {esc, int, num, pct, us} from '../format.js';
import {Table} from '../table.js';
import {BREAKDOWN_KEYS, DEVICE_CATEGORIES, colorOf, stat, stepSeries, whyNoSteps} from './common.js';

export default {
  id: 'overview',
  title: 'Overview',
  topics: ['overview', 'steps'],

  mount(root) {
    root.innerHTML = `
      <div class="grid2">
        <section class="card"><h3>Performance summary</h3><div class="summary"></div></section>
        <section class="card"><h3>Recommendation for next step</h3><div class="recommendation"></div></section>
      </div>
      <section class="card"><h3>Step-time graph <span class="muted step-range"></span></h3><div class="chart steps-chart"></div></section>
      <div class="grid2">
        <section class="card"><h3 class="top-ops-title">Top 10 device operations (self time)</h3><div class="top-ops"></div></section>
        <section class="card"><h3>Run environment</h3><div class="env"></div></section>
      </div>`;
    const summary = root.querySelector('.summary');
    const recommendation = root.querySelector('.recommendation');
    const env = root.querySelector('.env');
    const range = root.querySelector('.step-range');
    const topOps = new Table(root.querySelector('.top-ops'), [
      {key: 'name', label: 'Operation', name: true, short: true},
      {key: 'type', label: 'Type'},
      {key: 'self_us', label: 'Self time', numeric: true, fmt: (v) => us(v)},
      {key: 'self_pct', label: 'Self %', numeric: true, fmt: (v) => pct(v, 2)},
      {key: 'cumulative_pct', label: 'Cumulative %', numeric: true, fmt: (v) => pct(v, 2)},
      {key: 'uses_tc', label: 'Tensor Core', fmt: (v, r) => (v ? 'uses' : r.tc_eligible ? 'eligible, unused' : '—')},
    ], {sort: {key: 'self_us', desc: true}, rowLimit: 10});
    let chart = null;
    let columns = '';
    // A job with no device (a CPU job) gets host views: the step's host
    // categories, the host's top ops, no device precision or utilization.
    let hostOnly = false;

    return {
      render({overview: o, steps, status}) {
        if (o) {
          const s = o.summary;
          const why = whyNoSteps(status, s.steps);
          hostOnly = o.has_device === false;
          const keys = BREAKDOWN_KEYS.filter(([, label]) => !hostOnly || !DEVICE_CATEGORIES.has(label));
          summary.innerHTML =
            `<div class="stats">${stat('Average step time', s.steps ? `${num(s.step_time_ms_avg, 2)} ms` : '—', 'step_time_ms_avg')}` +
            stat('Standard deviation', `${num(s.step_time_ms_stddev, 2)} ms`) +
            stat('Steps in window', s.steps ? `${int(s.steps)} (${s.first_step}–${s.last_step})` : '0', 'steps') +
            stat('GPU utilization', o.gpu_utilization_pct >= 0 ? pct(o.gpu_utilization_pct, 2) : hostOnly ? 'no GPU' : '—',
              'gpu_utilization_pct') + '</div>' +
            // What the figure counts, one definition wherever it is shown
            // (the PyTorch page shows the plugin's beside it).
            (o.gpu_utilization_pct >= 0 ? `<p class="muted definition" data-field="gpu_utilization_definition">GPU utilization = ${
              esc(o.gpu_utilization_definition ?? '')}${o.gpu_utilization_window_ns ? ` (last ${num(o.gpu_utilization_window_ns / 1e9, 0)} s)` : ', since the start'}.</p>` : '') +
            (hostOnly ? '<p class="muted" data-field="host_only">No device in this job: the step is the host\'s time, ' +
              'by host category (the device\'s categories are left out).</p>' : '') +
            `<table class="breakdown"><thead><tr><th>Step-time category</th><th class="num">% of step</th><th class="num">avg ms</th></tr></thead><tbody>${
              keys.map(([k, label], i) => `<tr><td><i class="swatch" style="background:${colorOf(label, i)}"></i>${esc(label)}</td>` +
                `<td class="num" data-field="pct.${k}">${pct(s.pct[k], 1)}</td><td class="num">${num(s.avg_ms[k], 2)}</td></tr>`).join('')
            }</tbody></table>` +
            (hostOnly ? '' : `<div class="stats">${stat('Device compute precision: 16-bit', pct(s.device_compute_16bit_pct), 'device_compute_16bit_pct')}` +
              stat('32-bit', pct(s.device_compute_32bit_pct)) +
              stat('Host op time', pct(o.host_op_pct)) + stat('Device op time', pct(o.device_op_pct)) + '</div>');
          const r = o.recommendation;
          recommendation.innerHTML =
            `<p class="bottleneck ${/input-bound/.test(r.bottleneck) && !/not/i.test(r.bottleneck) ? 'bad' : ''}">${esc(r.bottleneck || '—')}</p>` +
            `<p>${esc(r.statement)}</p>${why ? `<p class="empty-why" data-field="why_no_steps">${esc(why)}</p>` : ''}` +
            `${r.next_step ? `<p><b>Next step:</b> ${esc(r.next_step)}</p>` : ''}` +
            (r.advice?.length ? `<ul>${r.advice.map((a) => `<li>${esc(a)}</li>`).join('')}</ul>` : '') +
            (r.precision_statement ? `<p>${esc(r.precision_statement)}</p>` : '') +
            (r.patterns?.length ? `<h4>Patterns found</h4><ul>${r.patterns.map((p) => `<li class="sev-${esc(p.severity)}">${esc(p.text)}</li>`).join('')}</ul>` : '');
          const hostOps = o.top_ops_side === 'host';
          root.querySelector('.top-ops-title').textContent = `Top 10 ${hostOps ? 'host' : 'device'} operations (self time)`;
          topOps.showColumn('uses_tc', !hostOps);
          // Host ops' type is mostly their name (TF stats has both): left out here.
          topOps.showColumn('type', !hostOps);
          topOps.setRows(o.top_ops);
          const e = o.run_environment;
          // A CPU-only run has no device cores to count; a long GPU note
          // (why tracing is off) is one line, the rest on demand.
          const note = e.gpu_note ?? '';
          const firstSentence = note.match(/^[^.:]*[.:]/)?.[0] ?? note;
          env.innerHTML = `<div class="stats">${stat('Host', e.hostname || '—')}${stat('Device type', e.device_type || '—')}` +
            `${e.device_core_count > 0 ? stat('Device cores', int(e.device_core_count), 'device_core_count') : ''}` +
            `${stat('Steps from', e.step_source)}${stat('Breakdown', e.breakdown_mode)}</div>` +
            (e.devices?.length ? `<table><thead><tr><th>#</th><th>Device</th><th class="num">Memory</th><th class="num">SMs</th><th>CC</th></tr></thead><tbody>${
              e.devices.map((d) => `<tr><td>${int(d.ordinal)}</td><td>${esc(d.name)}</td><td class="num">${num(d.memory_bytes / 2 ** 30, 1)} GiB</td>` +
                `<td class="num">${int(d.sm_count)}</td><td>${esc(d.compute_capability)}</td></tr>`).join('')}</tbody></table>` : '') +
            (!note ? '' : note.length <= 120 || firstSentence === note ? `<p class="note">${esc(note)}</p>`
              : `<details class="note"><summary>${esc(firstSentence)}</summary>${esc(note.slice(firstSentence.length))}</details>`);
        }
        if (steps) {
          // Without a device, the device's categories (always 0) are left out.
          const shown = steps.columns.map((c, i) => i).filter((i) => !hostOnly || !DEVICE_CATEGORIES.has(steps.columns[i]));
          const key = shown.map((i) => steps.columns[i]).join('|');
          if (key !== columns) {
            columns = key;
            const el = root.querySelector('.steps-chart');
            chart?.destroy();
            el.innerHTML = '';
            chart = new StackedBars(el, {
              categories: shown.map((i) => ({label: steps.columns[i], color: colorOf(steps.columns[i], i)})),
              xLabel: 'step', yLabel: 'ms', fmt: (v) => `${num(v, 2)} ms`,
            });
          }
          const {xs, values} = stepSeries(steps);
          chart.setData(xs, shown.map((i) => values[i]));
          range.textContent = xs.length ? `steps ${xs[0]}–${xs[xs.length - 1]} (${steps.mode})` : 'no step closed yet';
        }
      },
    };
  },
};
