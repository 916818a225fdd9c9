// PyTorch: the PyTorch profiler TensorBoard plugin's Overview, live (the
// `pytorch` view: `liveprof analyze --view pytorch` over what the server
// holds; docs/protocol.md). Its step time breakdown by the plugin's roles
// (Kernel, Memcpy, Memset, Communication, Runtime, DataLoader, CPU Exec,
// Other), the average step, the GPU summary and the plugin's
// recommendations. The server computes it for each request (a batch over its
// buffer): the page polls it every few seconds rather than taking the feed.
// The plugin's GPU rows keep the plugin's rules (its GPU Utilization, its
// Tensor Core allowlist); beside them, labelled with their own definitions,
// liveprof's GPU utilization (the Overview's, from the `overview` view) and
// the Tensor Core share by kernel family (the Kernel stats page's).
import {StackedBars} from '../charts.js';
import {esc, pct, us} from '../format.js';
import {Table} from '../table.js';
import {colorOf, stat} from './common.js';

// The plugin's roles in the colours of the closest TF categories.
const ROLE_COLORS = {
  'Kernel': colorOf('Device compute'),
  'Memcpy': colorOf('Device to device'),
  'Memset': '#17becf',
  'Communication': colorOf('Device collective communication'),
  'Runtime': colorOf('Kernel launch'),
  'DataLoader': colorOf('Input'),
  'CPU Exec': colorOf('Host compute'),
  'Other': colorOf('All others'),
};

// A recommendation as HTML: its text escaped, and the plugin's links to
// pytorch.org (`<a href="https://...">text</a>`) made links again.
function linked(text) {
  const parts = String(text).split(/(<a href="https:\/\/[^"<>]*"[^<>]*>[^<>]*<\/a>)/);
  return parts.map((p) => {
    const m = p.match(/^<a href="(https:\/\/[^"<>]*)"[^<>]*>([^<>]*)<\/a>$/);
    return m ? `<a href="${esc(m[1])}" target="_blank" rel="noopener">${esc(m[2])}</a>` : esc(p);
  }).join('');
}

// The roles of a `steps.columns` list: its number columns (the others are
// the plugin's tooltips).
function roles(columns) {
  return columns.filter((c, i) => i > 0 && c.type === 'number').map((c) => c.name);
}

export default {
  id: 'pytorch',
  title: 'PyTorch',
  topics: ['pytorch', 'overview'],
  pollMs: 3000,

  mount(root) {
    root.innerHTML = `
      <div class="grid2">
        <section class="card"><h3>Performance summary <span class="muted">(the PyTorch profiler plugin's Overview)</span></h3>
          <div class="summary"></div></section>
        <section class="card"><h3>Recommendation</h3><ul class="recommendations"></ul>
          <h4 class="gpu-title">GPU summary</h4><div class="gpu"></div></section>
      </div>
      <section class="card"><h3>Step time breakdown <span class="muted range"></span></h3>
        <div class="chart pytorch-chart"></div><div class="steps-table"></div></section>
      <p class="muted notes"></p>`;
    const summary = root.querySelector('.summary');
    const range = root.querySelector('.range');
    const notes = root.querySelector('.notes');
    let chart = null;
    let table = null;
    let shape = '';

    // The chart in ms when the steps are (the plugin's µs otherwise); the
    // tables in the unit of each value's magnitude.
    let scale = 1;
    function layout(names, unitScale) {
      const key = `${names.join('|')}/${unitScale}`;
      scale = unitScale;
      if (key === shape) return;
      shape = key;
      const el = root.querySelector('.pytorch-chart');
      chart?.destroy();
      el.innerHTML = '';
      chart = new StackedBars(el, {
        categories: names.map((n, i) => ({label: n, color: ROLE_COLORS[n] ?? colorOf(n, i)})),
        xLabel: 'step', yLabel: scale === 1 ? 'µs' : 'ms', fmt: (v) => us(v * scale),
      });
      table = new Table(root.querySelector('.steps-table'), [
        {key: 'step', label: 'Step'},
        ...names.map((n, i) => ({key: `r${i}`, label: n, numeric: true, fmt: (v) => us(v)})),
        {key: 'total', label: 'Total', numeric: true, fmt: (v) => us(v)},
      ], {sort: {key: 'order', desc: true}});
    }

    return {
      render({pytorch: p, overview: o}) {
        if (!p) return;
        root.dataset.pytorchSeq = p.seq;  // the answer drawn (the overview moves data-seq too).
        const names = roles(p.steps?.columns ?? []);
        const rows = p.steps?.rows ?? [];
        // A row: [step, value, tooltip, value, tooltip, ...].
        const values = names.map((_, i) => rows.map((r) => +r[1 + 2 * i]));
        const longest = Math.max(0, ...rows.map((_, k) => values.reduce((t, v) => t + v[k], 0)));
        layout(names, longest >= 1e3 ? 1e3 : 1);
        // The step numbers on the x axis when they run forward; else the
        // rows' order (the plugin's fallback step is "0").
        const nums = rows.map((r) => +r[0]);
        const forward = nums.every((n, i) => Number.isFinite(n) && (i === 0 || n > nums[i - 1]));
        const xs = forward ? nums : rows.map((_, i) => i);
        chart.setData(xs, values.map((v) => v.map((x) => x / scale)));
        table.setRows(rows.map((r, k) => Object.fromEntries([['order', k], ['step', r[0]],
          ...names.map((_, i) => [`r${i}`, +r[1 + 2 * i]]), ['total', names.reduce((t, _, i) => t + +r[1 + 2 * i], 0)]])));
        range.textContent = rows.length ? `steps ${rows[0][0]}–${rows[rows.length - 1][0]} (${rows.length})` : '';

        const perf = p.performance?.[0];
        summary.innerHTML = perf
          ? `<div class="stats">${stat('Average step time', us(+perf.value), 'avg_step_us')}</div>` +
            `<table class="breakdown"><thead><tr><th>Role</th><th class="num">per step</th><th class="num">% of step</th></tr></thead><tbody>${
              (perf.children ?? []).map((c) => `<tr data-role="${esc(c.name)}"><td><i class="swatch" style="background:${ROLE_COLORS[c.name] ?? '#999'}"></i>` +
                `${esc(c.name)}</td><td class="num">${us(+c.value)}</td><td class="num">${pct(+c.extra, 2)}</td></tr>`).join('')}</tbody></table>`
          : '<p class="muted empty-why">No step yet: the PyTorch view needs ProfilerStep#N spans (torch.profiler) or, failing them, any ' +
            'operator and device events to make one step of the whole run.</p>';
        const recs = p.liveprof?.recommendation_list ?? [];
        root.querySelector('.recommendations').innerHTML = recs.length
          ? recs.map((r) => `<li>${linked(r)}</li>`).join('') : '<li class="muted">N/A</li>';
        const gpu = p.gpu_metrics?.data ?? [];
        const lp = p.liveprof ?? {};
        const defs = lp.definitions ?? {};
        // Each plugin row that has a definition says so (hover, and a line
        // under it); liveprof's own figures follow, each with its own.
        const defined = (title, value, def, field) =>
          `<tr data-field="${esc(field)}" title="${esc(def)}"><td>${esc(title)}</td><td class="num">${esc(value)}</td></tr>` +
          `<tr class="definition"><td colspan="2" class="muted" style="white-space: normal; font-size: 0.85em">= ${esc(def)}</td></tr>`;
        const field = (t) => t.toLowerCase().replace(/[^a-z0-9]+/g, '_');
        const ours = [];
        if (o && o.gpu_utilization_pct >= 0) {
          ours.push(defined('GPU utilization (liveprof, as on Overview)', pct(o.gpu_utilization_pct, 2),
            o.gpu_utilization_definition ?? '', 'liveprof_gpu_utilization'));
        }
        for (const g of lp.gpus ?? []) {
          ours.push(defined(`GPU ${g.device}: Kernel time on Tensor Cores (liveprof, by kernel family)`,
            pct(g.tensor_cores_by_family_pct, 2), defs.tensor_cores_by_family_pct ?? '', `liveprof_tensor_cores_${g.device}`));
        }
        root.querySelector('.gpu-title').textContent = gpu.length ? 'GPU summary' : 'Run summary (no GPU)';
        root.querySelector('.gpu').innerHTML = gpu.length
          ? `<table class="gpu-summary"><tbody>${gpu.map((g) => (g.value === ''
            ? `<tr><th colspan="2">${esc(g.title)}</th></tr>`
            : defs[g.title] ? defined(`${g.title} (PyTorch plugin)`, g.value, defs[g.title], `plugin_${field(g.title)}`)
              : `<tr><td>${esc(g.title)}</td><td class="num">${esc(g.value)}</td></tr>`)).join('')}` +
            `${ours.length ? `<tr><th colspan="2">liveprof</th></tr>${ours.join('')}` : ''}</tbody></table>`
          : `<p class="muted">${esc((p.environments ?? []).map((e) => `${e.title}: ${e.value}`).join('; ') || 'no GPU')}</p>`;
        notes.textContent = [
          lp.fallback_step ? 'No ProfilerStep#N spans: the whole run is one step, as the plugin does.' : '',
          lp.dropped_tail_steps ? `The last ${lp.dropped_tail_steps} step(s) left out as the plugin does (is_remove_tail_steps).` : '',
          lp.dropped_events ? `${lp.dropped_events.toLocaleString('en-US')} of the oldest events left the view's buffer.` : '',
        ].filter(Boolean).join(' ');
      },
    };
  },
};
