// Pod: the workers (training ranks) side by side, as TensorBoard's pod
// viewer shows them: step time by step number × worker, coloured against
// each step's median, with the worst worker of each step boxed. Workers are
// compared over the same steps (the common range: the newest step numbers
// every worker has), so a worker behind the others is in every row drawn and
// boxed where it is the slowest; how far behind each is stands out. Per
// worker its mean step, breakdown, lag behind the median and how often it
// was the worst over those steps, and its own newest steps' figures,
// labelled as such; the straggler and its alert (the `pod` view model, and
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
      <div class="straggler-alert"></div><div class="summary"></div><p class="behind-note"></p></section>
    <section class="card"><h3>Workers <span class="muted">(same steps: over the common steps, the newest every worker has;
      own: each over its own newest steps; lag: against each step's median; behind: steps behind the furthest worker)</span></h3>
      <div class="workers"></div></section>
    <section class="card"><h3>Step time by worker (ms) <span class="muted grid-range"></span> <span class="muted">— colour: against the
      step's median, green at or under it, red at +50 % and beyond; <b>boxed</b>: the step's worst worker</span></h3>
      <p class="muted grid-note"></p>
      <div class="table-scroll"><table class="pod-steps"></table></div><p class="muted more"></p></section>
    <section class="card"><h3>Mean step-time breakdown per worker (ms) <span class="muted breakdown-range"></span></h3>
      <div class="breakdown-table"></div></section>`;
  const alertEl = root.querySelector('.straggler-alert');
  const summary = root.querySelector('.summary');
  const range = root.querySelector('.range');
  const behindNote = root.querySelector('.behind-note');
  const gridRange = root.querySelector('.grid-range');
  const gridNote = root.querySelector('.grid-note');
  const breakdownRange = root.querySelector('.breakdown-range');
  const stepsTable = root.querySelector('.pod-steps');
  const more = root.querySelector('.more');
  let straggler = null;  // the straggler's id, for the status column.
  const same = (f) => (v, r) => (r.compared ? f(v, r) : '—');
  const workers = new Table(root.querySelector('.workers'), [
    {key: 'label', label: 'Worker'},
    {key: 'behind_steps', label: 'Behind (steps)', numeric: true, fmt: (v) => (v > 0 ? `${int(v)} behind` : '0'),
      title: 'the newest step number of any worker less this worker\'s last step'},
    {key: 'c_mean_step_ms', label: 'Mean step, same steps (ms)', numeric: true, fmt: same((v) => num(v, 2)),
      title: 'over the common steps: the step numbers every worker has'},
    {key: 'c_lag_pct', label: 'Lag vs median, same steps', numeric: true,
      fmt: same((v, r) => (r.c_compared_steps ? signed(v, 1, '%') : '—'))},
    {key: 'c_lag_ms', label: 'Lag (ms), same steps', numeric: true, fmt: same((v, r) => (r.c_compared_steps ? signed(v, 2, '') : '—'))},
    {key: 'c_worst_count', label: 'Worst, same steps', numeric: true, fmt: same((v) => int(v)),
      title: 'of the common steps, those where it was the slowest worker'},
    {key: 'steps', label: 'Own steps', numeric: true, fmt: int, title: 'its own newest steps (at most 100), in the window or not'},
    {key: 'mean_step_ms', label: 'Own mean step (ms)', numeric: true, fmt: (v) => num(v, 2),
      title: 'over its own newest steps: for a worker behind the others, another part of the run than theirs'},
    {key: 'lag_pct', label: 'Own lag vs median', numeric: true, fmt: (v, r) => (r.compared_steps ? signed(v, 1, '%') : '—'),
      title: 'its own newest steps, each against the median of the same step number'},
    {key: 'input_pct', label: 'Input %', numeric: true, fmt: (v) => pct(v, 1),
      title: 'over the common steps; a worker not compared: over its own newest steps'},
    {key: 'straggler_pct', label: 'Held excess', numeric: true, fmt: (v) => signed(v, 1, '%'),
      title: 'the smallest excess over the median over its last steps (the straggler rule\'s value)'},
    {key: 'status', label: 'Status'},
  ], {sort: {key: options.order ? 'order' : 'id', desc: false}, rowKey: (r) => r.id});
  const breakdown = new Table(root.querySelector('.breakdown-table'), [
    {key: 'label', label: 'Worker'},
    {key: 'over', label: 'Over'},
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

  // The step × worker grid: the rows are the common range's (the newest
  // steps at or below the frontier), so a worker behind has its cells in
  // each; a worker not compared (stopped, or behind the held steps) says
  // so in its header and in the rows it has not reached.
  function drawSteps(p, shown) {
    const label = new Map(p.workers.map((w) => [w.id, w.label]));
    const head = `<thead><tr><th class="num">Step</th><th class="num">Median</th><th>Worst</th>${
      shown.map((w) => `<th class="num${w.id === straggler ? ' straggler' : ''}" data-worker="${w.id}">${esc(w.label)}${
        w.behind_steps > 0 ? `<br><span class="behind"${w.behind_steps > 1 ? ' style="color: var(--bad)"' : ''} data-behind="${w.behind_steps}">` +
          `${int(w.behind_steps)} ${w.behind_steps === 1 ? 'step' : 'steps'} behind</span>` : ''}</th>`).join('')}</tr></thead>`;
    const rows = p.steps.slice().reverse().map((s) => {
      const cells = new Map(s.cells.map((c) => [c.worker, c]));
      return `<tr data-step="${s.step}"><td class="num">${s.step}</td><td class="num median">${num(s.median_ms, 2)}</td>` +
        `<td class="worst-label">${s.worst === null ? '—' : esc(label.get(s.worst) ?? s.worst)}</td>${shown.map((w) => {
          const c = cells.get(w.id);
          if (!c && w.last_step < s.step) {
            return `<td class="num missing behind" style="color: var(--bad)" data-worker="${w.id}" title="${esc(`${w.label} has not reached step ${s.step}: ` +
              `its last step is ${w.last_step}`)}">${int(s.step - w.last_step)} behind</td>`;
          }
          if (!c) return `<td class="num missing" data-worker="${w.id}" title="no step ${s.step} from ${esc(w.label)}">—</td>`;
          const tip = `${w.label}, step ${s.step}: ${num(c.step_ms, 2)} ms\n` +
            p.bucket_names.map((n, b) => (c.ms[b] ? `${n}: ${num(c.ms[b], 2)} ms` : '')).filter(Boolean).join('\n');
          return `<td class="num heat${s.worst === w.id ? ' worst' : ''}" data-worker="${w.id}" style="background:${heat(c.step_ms, s.median_ms)}"` +
            ` title="${esc(tip)}">${num(c.step_ms, 2)}</td>`;
        }).join('')}</tr>`;
    }).join('');
    stepsTable.innerHTML = `${head}<tbody>${rows}</tbody>`;
  }

  // What the page says about the common range and the workers behind.
  // (A worker one step behind is in step: its step in flight.)
  function drawRange(p) {
    const c = p.common ?? {};
    const behind = p.workers.filter((w) => w.behind_steps > 1).sort((a, b) => b.behind_steps - a.behind_steps);
    const far = behind[0];
    range.textContent = c.steps
      ? `compared over steps ${c.first_step}–${c.last_step} (${int(c.steps)} every worker has); newest step ${p.newest_step}`
      : '';
    gridRange.textContent = p.steps.length ? `steps ${p.steps[0].step}–${p.steps[p.steps.length - 1].step}` : '';
    gridNote.textContent = p.newest_step > c.frontier_step && c.frontier_step >= 0
      ? `Drawn up to step ${c.frontier_step}, the last one every compared worker has: steps ${c.frontier_step + 1}–${p.newest_step} ` +
        `are not drawn${far ? ` (${far.label} is ${int(far.behind_steps)} steps behind)` : ''}.`
      : '';
    behindNote.innerHTML = behind.length
      ? behind.slice(0, 4).map((w) => `<span class="behind-worker" data-worker="${w.id}"><b>${esc(w.label)}</b> is ` +
        `<b style="color: var(--bad)">${int(w.behind_steps)} steps behind</b> (its last step ${w.last_step}, the newest ${p.newest_step})` +
        `${w.not_common ? ` — not compared: ${esc(w.not_common)}` : ''}</span>`).join('; ') +
        (behind.length > 4 ? `; ${behind.length - 4} more behind` : '')
      : '';
    breakdownRange.textContent = c.steps ? `(over steps ${c.first_step}–${c.last_step}; a worker not compared: its own newest steps)` : '';
  }

  return {
    render(p, firing, status) {
      const alerted = drawAlert(firing ?? []);
      if (!p) return;
      const list = options.order ? p.workers.slice().sort(options.order) : p.workers;
      const s = p.straggler;
      straggler = s && s.pct > 0 ? s.worker : null;
      drawRange(p);
      const far = p.workers.reduce((a, w) => (w.behind_steps > Math.max(a?.behind_steps ?? 0, 1) ? w : a), null);
      summary.innerHTML = `<div class="stats">${stat('Workers', int(p.workers.length), 'workers')}` +
        stat('Common steps', p.common?.steps ? `${p.common.first_step}–${p.common.last_step}` : '—', 'common') +
        stat('Furthest behind', far ? `${far.label}: ${int(far.behind_steps)} steps` : 'none', 'behind') +
        stat(`Slowest vs median (held ${p.straggler_steps} steps)`, s ? `${s.label} ${signed(s.pct, 1, '%')}` : '—', 'straggler') +
        stat('Steps in window', int(p.steps_in_window), 'steps_in_window') +
        stat('Worker steps seen', int(p.cells_total)) + '</div>' +
        (p.workers.length === 0 ? `<p class="empty-why" data-field="why_no_steps">${esc((options.noSteps ?? whyNoSteps)(status, 0))}</p>` : '') +
        (p.workers.length === 1 ? '<p class="muted">One worker: the pod view compares workers (training ranks) once a second one sends its steps ' +
          '(liveprof serve --ingest; liveprof demo --workers 4 --straggler 2 simulates four).</p>' : '');
      const rows = list.map((w, order) => {
        const c = w.common;
        return {...w, order, compared: !!c,
          c_mean_step_ms: c?.mean_step_ms, c_lag_pct: c?.lag_pct, c_lag_ms: c?.lag_ms, c_worst_count: c?.worst_count,
          c_compared_steps: c?.compared_steps ?? 0, input_pct: c ? c.input_pct : w.input_pct,
          status: alerted.has(w.label) ? 'straggler (alert firing)' : w.id === straggler ? 'slowest'
            : w.not_common ? `not compared: ${w.not_common}` : ''};
      });
      workers.selected = straggler;  // its row is highlighted.
      workers.setRows(rows);
      breakdown.setRows(list.map((w, order) => {
        const from = w.common ?? w;
        return Object.fromEntries([['id', w.id], ['order', order], ['label', w.label],
          ['over', w.common ? 'same steps' : 'own steps'], ['mean_step_ms', from.mean_step_ms],
          ...BREAKDOWN_KEYS.map(([k], b) => [k, from.mean_ms[b]])]);
      }));
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
