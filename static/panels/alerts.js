// Alerts: the rules and their states, what fires now, and the history of
// transitions (the `alerts` view model; docs/alerts.md). The header's notice
// of a new firing alert is the app's (app.js), on every page.
import {esc, num} from '../format.js';
import {Table} from '../table.js';

// A value in its unit ("16.49 %", "+23.4 % vs baseline", "61.0 s", "3 events").
function withUnit(v, unit, change) {
  if (v === null || v === undefined || !Number.isFinite(v)) return '—';
  const n = `${change && v > 0 ? '+' : ''}${num(v, 2)}`;
  if (!unit) return n;
  return `${n} ${unit}${change ? ' vs baseline' : ''}`;
}

// The steps a window covered; "—" for a time window or none.
function steps(first, last) {
  if (!(first >= 0) || !(last >= 0)) return '—';
  return first === last ? `${first}` : `${first}–${last}`;
}

function when(ns, nowNs) {
  if (!ns) return '—';
  const ago = (nowNs - ns) / 1e9;
  return ago >= 0 && Number.isFinite(ago) ? `${num(ago, 1)} s ago` : '—';
}

export default {
  id: 'alerts',
  title: 'Alerts',
  topics: ['alerts'],

  mount(root) {
    root.innerHTML = `
      <section class="card"><h3>Firing now</h3><div class="firing-now"></div>
        <div class="closed-at-end" hidden><h4>Closed at end of job</h4><ul class="alert-list"></ul></div>
        <h4>Resolved recently</h4><div class="resolved"></div></section>
      <section class="card"><h3>Rules</h3><div class="rules"></div></section>
      <section class="card"><h3>History <span class="muted dropped"></span></h3><div class="history"></div></section>`;
    const rules = new Table(root.querySelector('.rules'), [
      {key: 'name', label: 'Rule'},
      {key: 'state', label: 'State'},
      {key: 'severity', label: 'Severity'},
      {key: 'metric', label: 'Metric'},
      {key: 'value', label: 'Value now', numeric: true, fmt: (v, r) => withUnit(v, r.unit, !!r.baseline)},
      {key: 'condition', label: 'Condition'},
      {key: 'window_text', label: 'Window'},
    ], {sort: {key: 'name', desc: false}});
    const history = new Table(root.querySelector('.history'), [
      {key: 'ts_ns', label: '#', numeric: true, fmt: (v, r) => r.index},
      {key: 'ago', label: 'When', numeric: true},
      {key: 'state', label: 'Became'},
      {key: 'rule', label: 'Rule'},
      {key: 'severity', label: 'Severity'},
      {key: 'value', label: 'Value then', numeric: true, fmt: (v, r) => withUnit(v, r.unit, !!r.baseline)},
      {key: 'steps', label: 'Steps'},
      {key: 'summary', label: 'Summary', name: true},
    ], {sort: {key: 'ts_ns', desc: true}, filterKeys: ['rule', 'summary', 'state']});

    return {
      render({alerts: a}) {
        if (!a) return;
        const now = a.last_evaluated_ns;
        // The summary is the value when it fired; the rule's value now beside it.
        const byName = new Map(a.rules.map((r) => [r.name, r]));
        const nowText = (f) => {
          const r = byName.get(f.rule);
          return r && r.value !== null ? `now ${withUnit(r.value, r.unit, !!r.baseline)}; ` : '';
        };
        const firedSteps = (f) => (f.first_step >= 0 ? `, steps ${steps(f.first_step, f.last_step)}` : '');
        root.querySelector('.firing-now').innerHTML = a.firing.length
          ? `<ul class="alert-list">${a.firing.map((f) => `<li class="sev-${esc(f.severity)}" data-rule="${esc(f.rule)}"><b>${esc(f.rule)}</b> ` +
            `<span class="badge firing">firing</span> ${esc(f.summary)} <span class="muted now">(${esc(nowText(f))}fired ${esc(when(f.ts_ns, now))}${esc(firedSteps(f))})</span></li>`).join('')}</ul>`
          : `<p class="ok">Nothing is firing. ${esc(a.rules.length)} rules, ${esc(a.evaluations)} evaluations.</p>`;
        // The job ended with these firing: closed then, with their last value
        // (the rule's state 'closed' until a job runs again).
        const closedRules = new Set(a.rules.filter((r) => r.state === 'closed').map((r) => r.name));
        const closedAt = new Map();
        for (const h of a.history) if (h.state === 'closed' && closedRules.has(h.rule)) closedAt.set(h.rule, h);
        const closedBox = root.querySelector('.closed-at-end');
        closedBox.hidden = closedAt.size === 0;
        closedBox.querySelector('ul').innerHTML = [...closedAt.values()].map((h) => {
          const r = byName.get(h.rule);
          return `<li class="sev-${esc(h.severity)}" data-rule="${esc(h.rule)}"><b>${esc(h.rule)}</b> ` +
            `<span class="badge closed">closed at end of job</span> last ${esc(withUnit(h.value, h.unit, !!r?.baseline))} ` +
            `<span class="muted">(closed ${esc(when(h.ts_ns, now))}) ${esc(h.summary)}</span></li>`;
        }).join('');
        const resolved = a.history.filter((h) => h.state === 'resolved').slice(-5).reverse();
        root.querySelector('.resolved').innerHTML = resolved.length
          ? `<ul class="alert-list">${resolved.map((h) => `<li><b>${esc(h.rule)}</b> <span class="badge resolved">resolved</span> ` +
            `${esc(when(h.ts_ns, now))} <span class="muted">${esc(h.summary)}</span></li>`).join('')}</ul>`
          : '<p class="muted">None resolved yet.</p>';
        rules.setRows(a.rules.map((r) => ({...r, condition: r.baseline
          ? `${r.metric} change ${r.comparison} ${withUnit(r.threshold, r.unit, true)}`
          : `${r.metric} ${r.comparison} ${withUnit(r.threshold, r.unit, false)}`})));
        history.setRows(a.history.map((h, i) => ({...h, index: a.history_dropped + i + 1, ago: when(h.ts_ns, now),
          steps: steps(h.first_step, h.last_step)})));
        root.querySelector('.dropped').textContent = a.history_dropped ? `(${a.history_dropped} older not shown)` : '';
      },
    };
  },
};
