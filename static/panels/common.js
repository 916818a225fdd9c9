// What several panels share: the step-time categories' colours (as
// TensorBoard's profiler shows them: input red, device compute green) and
// small HTML pieces.
import {esc} from '../format.js';

export const CATEGORY_COLORS = {
  'Device compute': '#2ca02c',
  'Device to device': '#9467bd',
  'Device collective communication': '#8c564b',
  'Host compute': '#1f77b4',
  'Kernel launch': '#ff7f0e',
  'Input': '#d62728',
  'Output': '#e377c2',
  'Compilation': '#7f7f7f',
  'All others': '#bcbd22',
};

// The overview/steps `pct` keys, in the order of the steps view's columns.
export const BREAKDOWN_KEYS = [
  ['device_compute', 'Device compute'],
  ['device_to_device', 'Device to device'],
  ['device_collectives', 'Device collective communication'],
  ['host_compute', 'Host compute'],
  ['kernel_launch', 'Kernel launch'],
  ['input', 'Input'],
  ['output', 'Output'],
  ['compilation', 'Compilation'],
  ['all_others', 'All others'],
];

// The categories a job with no device never has (left out of its views).
export const DEVICE_CATEGORIES = new Set(['Device compute', 'Device to device', 'Device collective communication',
  'Kernel launch']);

export function colorOf(category, i) {
  return CATEGORY_COLORS[category] ?? ['#17becf', '#aec7e8', '#ffbb78'][i % 3];
}

// A labelled value; `field` names it for tests and screen readers.
export function stat(label, value, field = '') {
  return `<div class="stat"${field ? ` data-field="${esc(field)}"` : ''}><span class="stat-label">${esc(label)}</span>` +
    `<span class="stat-value">${esc(value)}</span></div>`;
}

// The steps view's rows as (xs, per-column values), for the step graphs.
export function stepSeries(steps) {
  const rows = steps?.rows ?? [];
  const xs = rows.map((r) => r.step);
  const values = (steps?.columns ?? []).map((_, c) => rows.map((r) => r.ms[c] ?? 0));
  return {xs, values};
}

export function section(title, body, cls = '') {
  return `<section class="card ${cls}"><h3>${esc(title)}</h3>${body}</section>`;
}

// Why a page that needs closed steps has none, from the status view: no
// events, no step closed yet (and how steps are found), or steps closed but
// left out (and which diagnostic says so). "" when steps are there.
export function whyNoSteps(status, stepsShown) {
  if (!status || stepsShown > 0) return '';
  const diag = Object.fromEntries((status.diagnostics ?? []).map((d) => [d.name, d]));
  const count = (n) => diag[n]?.count ?? 0;
  if (!status.events_consumed) return 'No events yet: nothing is connected, or the job has not started.';
  if (!status.steps_closed && !(status.step_sources ?? []).length) {
    const ended = status.job_state === 'finished' || status.job_state === 'disconnected';
    return `${status.events_consumed.toLocaleString('en-US')} events, but ` +
      (ended ? 'the job ended without a training step' : 'no training step has closed yet') +
      (status.steps_open ? ` (${status.steps_open} open)` : '') + '. liveprof looked for: an optimizer step ' +
      '(optimizer.step(), under liveprof run), torch.profiler\'s profile.step() or ProfilerStep#N spans, the ' +
      'program\'s own step marks, and a name pattern (--step-pattern). An inference loop has no training steps. ' +
      'To mark steps: liveprof.step() or wrap_loader() in Python (LIVEPROF_STEP in C++), torch.profiler\'s ' +
      'profile.step() once per iteration, or liveprof run --step-pattern \'NAME{n}\' for spans named so.' +
      (count('events_without_step') ? ` ${count('events_without_step').toLocaleString('en-US')} events fell outside every step.` : '');
  }
  const left = count('step_without_compute');
  if (left) {
    return `${status.steps_closed.toLocaleString('en-US')} steps closed, ${left.toLocaleString('en-US')} left out as ` +
      `step_without_compute: ${diag.step_without_compute.description}.`;
  }
  return `${status.steps_closed.toLocaleString('en-US')} steps closed; none is in this window.`;
}
