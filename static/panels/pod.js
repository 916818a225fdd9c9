// Pod: the workers (training ranks) side by side, as TensorBoard's pod
// viewer shows them: step time by step number × worker, coloured against
// each step's median, with the worst worker of each step marked; per worker
// its mean step, step breakdown, input %, lag behind the median and how often
// it was the worst; the straggler and its alert (the `pod` view model, and
// `alerts` for the alert).
import {esc, int, num, pct} from '../format.js';
import {Table} from '../table.js';
import {BREAKDOWN_KEYS, stat, whyNoSteps} from './common.js';

const MAX_COLUMNS = 64;  // workers shown in the step table; the rest are listed below it.

// A cell's background: at or under the step's median green, then through
// yellow to red at +50 % and beyond.
function heat(ms, median) {
  if (!(median > 0)) return '#f1f3f4';
  const over = Math.min(Math.max((ms / median - 1) / 0.5, 0), 1);
  return `hsl(${Math.round(120 - 120 * over)}, 65%, 85%)`;
}

function signed(v, decimals, unit) {
  if (v === null || v === undefined || Number.isNaN(v)) return '—';
  return `${v > 0 ? '+' : ''}${num(v, decimals)}${unit}`;
}

// The pod view drawn into `root`, for any `pod` view model: this page's
// (/api/pod, one host's ranks) and the Fleet page's (every host's ranks).
// options: {title, noSteps(status) -> why there are no workers yet, order(a, b):
// the workers' order (rows and columns; by default the view's, rows by id)}.
// Returns {render(pod, firing, status)}: `firing`, the straggler alerts
// firing now as [{rule, severity, summary, worker}] (`worker`: the label of
// the worker they name, as the pod view labels it).
export function podView(root, options = {}) {
  root.innerHTML = `
    <section class="card"><h3>${esc(options.title ?? 'Pod')} <span class="muted range"></span></h3>
      <div class="straggler-alert"></div><div class="summary"></div></section>
    <section class="card"><h3>Workers <span class="muted">(each over its own newest steps; lag: against each step's median;
      behind: steps behind the furthest worker)</span></h3>
      <div class="workers"></div></section>
    <section class="card"><h3>Step time by worker (ms) <span class="muted">— colour: against the step's median, green at or
      under it, red at +50 % and beyond; <b>bold</b>: the step's worst worker</span></h3>
      <div class="table-scroll"><table class="pod-steps"></table></div><p class="muted more"></p></section>
    <section class="card"><h3>Mean step-time breakdown per worker (ms)</h3><div class="breakdown-table"></div></section>`;
  const alertEl = root.querySelector('.straggler-alert');
  const summary = root.querySelector('.summary');
  const range = root.querySelector('.range');
  const stepsTable = root.querySelector('.pod-steps');
  const more = root.querySelector('.more');
  let straggler = null;  // the straggler's id, for the status column.
  const workers = new Table(root.querySelector('.workers'), [
    {key: 'label', label: 'Worker'},
    {key: 'steps', label: 'Steps', numeric: true, fmt: int},
    {key: 'mean_step_ms', label: 'Mean step (ms)', numeric: true, fmt: (v) => num(v, 2)},
    {key: 'behind_steps', label: 'Behind (steps)', numeric: true, fmt: int},
    {key: 'lag_pct', label: 'Lag vs median', numeric: true, fmt: (v, r) => (r.compared_steps ? signed(v, 1, '%') : '—')},
    {key: 'lag_ms', label: 'Lag (ms)', numeric: true, fmt: (v, r) => (r.compared_steps ? signed(v, 2, '') : '—')},
    {key: 'input_pct', label: 'Input %', numeric: true, fmt: (v) => pct(v, 1)},
    {key: 'worst_count', label: 'Worst (steps)', numeric: true, fmt: int},
    {key: 'straggler_pct', label: 'Held excess', numeric: true, fmt: (v) => signed(v, 1, '%'),
      title: 'the smallest excess over the median over its last steps (the straggler rule\'s value)'},
    {key: 'status', label: 'Status'},
  ], {sort: {key: options.order ? 'order' : 'id', desc: false}, rowKey: (r) => r.id});
  const breakdown = new Table(root.querySelector('.breakdown-table'), [
    {key: 'label', label: 'Worker'},
    {key: 'mean_step_ms', label: 'Step', numeric: true, fmt: (v) => num(v, 2)},
    ...BREAKDOWN_KEYS.map(([k, label]) => ({key: k, label, numeric: true, fmt: (v) => num(v, 2),
      title: `mean ${label} per step (ms)`})),
  ], {sort: {key: options.order ? 'order' : 'id', desc: false}});

  // The pod alerts firing now; returns the labels of the workers they name.
  function drawAlert(firing) {
    alertEl.innerHTML = firing.length
      ? `<ul class="alert-list">${firing.map((f) => `<li class="sev-${esc(f.severity)}" data-worker-label="${esc(f.worker ?? '')}">` +
        `<b>${esc(f.rule)}</b> <span class="badge firing">firing</span> ${esc(f.summary)}</li>`).join('')}</ul>`
      : '<p class="ok">No straggler alert firing.</p>';
    return new Set(firing.map((f) => f.worker));
  }

  function drawSteps(p, shown) {
    const label = new Map(p.workers.map((w) => [w.id, w.label]));
    const head = `<thead><tr><th class="num">Step</th><th class="num">Median</th><th>Worst</th>${
      shown.map((w) => `<th class="num${w.id === straggler ? ' straggler' : ''}" data-worker="${w.id}">${esc(w.label)}</th>`).join('')}</tr></thead>`;
    const rows = p.steps.slice().reverse().map((s) => {
      const cells = new Map(s.cells.map((c) => [c.worker, c]));
      return `<tr data-step="${s.step}"><td class="num">${s.step}</td><td class="num median">${num(s.median_ms, 2)}</td>` +
        `<td class="worst-label">${s.worst === null ? '—' : esc(label.get(s.worst) ?? s.worst)}</td>${shown.map((w) => {
          const c = cells.get(w.id);
          if (!c) return `<td class="num missing" data-worker="${w.id}">—</td>`;
          const tip = `${w.label}, step ${s.step}: ${num(c.step_ms, 2)} ms\n` +
            p.bucket_names.map((n, b) => (c.ms[b] ? `${n}: ${num(c.ms[b], 2)} ms` : '')).filter(Boolean).join('\n');
          return `<td class="num heat${s.worst === w.id ? ' worst' : ''}" data-worker="${w.id}" style="background:${heat(c.step_ms, s.median_ms)}"` +
            ` title="${esc(tip)}">${num(c.step_ms, 2)}</td>`;
        }).join('')}</tr>`;
    }).join('');
    stepsTable.innerHTML = `${head}<tbody>${rows}</tbody>`;
  }

  return {
    render(p, firing, status) {
      const alerted = drawAlert(firing ?? []);
      if (!p) return;
      const list = options.order ? p.workers.slice().sort(options.order) : p.workers;
      const s = p.straggler;
      straggler = s && s.pct > 0 ? s.worker : null;
      range.textContent = p.steps.length
        ? `steps ${p.steps[0].step}–${p.steps[p.steps.length - 1].step} shown; ${int(p.steps_in_window)} in the window (at most ${int(p.window_steps)})`
        : '';
      summary.innerHTML = `<div class="stats">${stat('Workers', int(p.workers.length), 'workers')}` +
        stat('Steps in window', int(p.steps_in_window), 'steps_in_window') +
        stat(`Slowest vs median (held ${p.straggler_steps} steps)`, s ? `${s.label} ${signed(s.pct, 1, '%')}` : '—', 'straggler') +
        stat('Worker steps seen', int(p.cells_total)) + '</div>' +
        (p.workers.length === 0 ? `<p class="empty-why" data-field="why_no_steps">${esc((options.noSteps ?? whyNoSteps)(status, 0))}</p>` : '') +
        (p.workers.length === 1 ? '<p class="muted">One worker: the pod view compares workers (training ranks) once a second one sends its steps ' +
          '(liveprof serve --ingest; liveprof demo --workers 4 --straggler 2 simulates four).</p>' : '');
      const rows = list.map((w, order) => ({...w, order,
        status: alerted.has(w.label) ? 'straggler (alert firing)' : w.id === straggler ? 'slowest' : ''}));
      workers.selected = straggler;  // its row is highlighted.
      workers.setRows(rows);
      breakdown.setRows(list.map((w, order) => Object.fromEntries([['id', w.id], ['order', order], ['label', w.label], ['mean_step_ms', w.mean_step_ms],
        ...BREAKDOWN_KEYS.map(([k], b) => [k, w.mean_ms[b]])])));
      const shown = list.slice(0, MAX_COLUMNS);
      drawSteps(p, shown);
      more.textContent = p.workers.length > shown.length ? `${p.workers.length - shown.length} more workers not shown as columns` : '';
    },
  };
}

export default {
  id: 'pod',
  title: 'Pod',
  topics: ['pod', 'alerts'],

  mount(root) {
    const view = podView(root);
    return {
      render({pod, alerts, status}) {
        view.render(pod, (alerts?.firing ?? []).filter((f) => f.metric.startsWith('pod.')), status);
      },
    };
  },
};
