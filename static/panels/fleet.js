// Fleet: every host and rank of a job, as `liveprof fleet` sees them from
// its agents' NATS stream (the `fleet` view model of /api/fleet, polled: the
// WebSocket feed does not carry it). The fleet's alerts (a straggler named
// by host and rank, a host gone, ranks input-bound), the hosts (live, gone,
// stopped; clock skew; what each agent published and still holds; its own
// alerts; a link to its dashboard, and "open trace": its trace in this
// dashboard's trace viewer, through the fleet view, as on each rank's row),
// the pod across all ranks (pod.js's view, its workers labelled "host ·
// rank"), the ranks, and the view's own counters: lag, what it rejected
// and why, its recent errors. Everything here came over the network from
// the agents: it is escaped.
import {esc, int, num} from '../format.js';
import {Table} from '../table.js';
import {stat} from './common.js';
import {podView} from './pod.js';
import {traceHref} from '../trace/source.js';

const HISTORY_SHOWN = 20;  // the newest fleet alert transitions listed.

function signed(v, decimals) {
  if (v === null || v === undefined || !Number.isFinite(v)) return '—';
  return `${v > 0 ? '+' : ''}${num(v, decimals)}`;
}

// Seconds since `ns` (unix ns) at the view's `nowNs`.
function ago(ns, nowNs) {
  if (!ns || !nowNs) return '—';
  const s = (nowNs - ns) / 1e9;
  return Number.isFinite(s) && s >= 0 ? `${num(s, 1)} s ago` : '—';
}

// "host-b · rank 2", as the fleet's pod labels its workers.
function where(host, label) {
  return [host, label].filter(Boolean).join(' · ');
}

// An agent's own URL, if it is one a link may carry (http or https).
function safeUrl(url) {
  try {
    const u = new URL(url);
    return u.protocol === 'http:' || u.protocol === 'https:' ? u.href : '';
  } catch (e) {
    return '';
  }
}

const HOST_COLUMNS = 14;

// Puts `rows` ([{attrs, cells: ['<td…>…</td>', …]}]) into `tbody`, replacing
// only the cells whose HTML changed: "last seen" changes on every poll, and
// a link rebuilt between a click's mousedown and mouseup would lose the click.
function fillRows(tbody, rows) {
  while (tbody.rows.length > rows.length) tbody.deleteRow(-1);
  rows.forEach((r, i) => {
    const tr = tbody.rows[i] ?? Object.assign(tbody.insertRow(), {cellHtml: []});
    for (const a of [...tr.attributes]) if (!(a.name in r.attrs)) tr.removeAttribute(a.name);
    for (const [k, v] of Object.entries(r.attrs)) if (tr.getAttribute(k) !== v) tr.setAttribute(k, v);
    r.cells.forEach((html, c) => {
      if (tr.cellHtml[c] === html) return;
      const t = document.createElement('template');
      t.innerHTML = html;
      if (tr.cells[c]) tr.replaceChild(t.content.firstElementChild, tr.cells[c]);
      else tr.append(t.content.firstElementChild);
      tr.cellHtml[c] = html;
    });
    while (tr.cells.length > r.cells.length) tr.deleteCell(-1);
    tr.cellHtml.length = r.cells.length;
  });
}

const STATE_TITLES = {
  live: 'The agent published within the last gone_after_s seconds.',
  gone: 'Nothing from the agent for longer than gone_after_s seconds, and it did not say it was stopping.',
  stopped: 'The agent said it was stopping (a clean exit).',
};

export default {
  id: 'fleet',
  title: 'Fleet',
  topics: ['fleet'],
  pollMs: 500,
  probe: 'fleet',  // in the navigation only where /api/fleet answers (app.js).

  mount(root) {
    root.innerHTML = `
      <section class="card"><h3>Fleet <span class="muted fleet-seq"></span></h3>
        <div class="fleet-summary"></div>
        <div class="fleet-alerts"></div>
        <details class="fleet-history"><summary class="muted">Alert history</summary><ul class="history-list"></ul></details></section>
      <section class="card"><h3>Hosts <span class="muted">(state: live, gone after <span class="gone-after">—</span> s
        without a message, stopped when the agent said so; clock skew: the host's clock against this one's)</span></h3>
        <div class="table-scroll"><table class="fleet-hosts"></table></div></section>
      <div class="fleet-pod"></div>
      <section class="card"><h3>Ranks <span class="muted">(restarts: the rank's incarnations after the first;
        missing and duplicates: step messages by their sequence numbers)</span></h3><div class="fleet-ranks"></div></section>
      <section class="card"><h3>The fleet view's counters</h3><div class="fleet-counters"></div>
        <h4>Rejected messages, by reason</h4><div class="fleet-rejected"></div>
        <h4>Recent errors</h4><div class="fleet-errors"></div></section>`;
    const seqEl = root.querySelector('.fleet-seq');
    const summary = root.querySelector('.fleet-summary');
    const alertsEl = root.querySelector('.fleet-alerts');
    const historyEl = root.querySelector('.history-list');
    const goneAfter = root.querySelector('.gone-after');
    const hostsEl = root.querySelector('.fleet-hosts');
    hostsEl.innerHTML = '<thead><tr><th>Host</th><th>State</th><th class="num">Last seen</th><th class="num">Ranks</th>' +
      '<th class="num" title="agent incarnations seen publishing as this host">Agents</th><th class="num">Clock skew (ms)</th>' +
      '<th class="num">Steps published</th><th class="num">Steps dropped</th>' +
      '<th class="num" title="step messages the agent holds, not yet acknowledged by NATS">Outbox</th>' +
      '<th class="num">Events</th><th class="num">Events dropped</th>' +
      '<th title="as the agent last said (a gone agent\'s are as it left them)">Agent\'s alerts firing</th><th>Dashboard</th>' +
      '<th title="the host\'s trace in this dashboard\'s trace viewer, asked of its agent through this fleet view">Trace</th>' +
      '</tr></thead><tbody></tbody>';
    const counters = root.querySelector('.fleet-counters');
    const rejected = root.querySelector('.fleet-rejected');
    const errorsEl = root.querySelector('.fleet-errors');
    const pod = podView(root.querySelector('.fleet-pod'), {
      title: 'Pod across all ranks',
      order: (a, b) => a.label.localeCompare(b.label, 'en', {numeric: true}),  // "host-a · rank 2" before "… rank 10".
      noSteps: () => 'No steps from any agent yet: the agents (liveprof serve or demo with --publish and --job) ' +
        'send each rank\'s steps as they close.',
    });
    const ranks = new Table(root.querySelector('.fleet-ranks'), [
      {key: 'host', label: 'Host'},
      {key: 'rank', label: 'Rank', numeric: true, fmt: int},
      {key: 'label', label: 'Label'},
      {key: 'steps', label: 'Steps', numeric: true, fmt: int},
      {key: 'missing', label: 'Missing', numeric: true, fmt: int},
      {key: 'duplicates', label: 'Duplicates', numeric: true, fmt: int},
      {key: 'restarts', label: 'Restarts', numeric: true, fmt: int, title: 'incarnations after the first'},
      {key: 'last_step', label: 'Last step', numeric: true, fmt: int},
      {key: 'last_step_ms', label: 'Last step (ms)', numeric: true, fmt: (v) => num(v, 2)},
      {key: 'agent', label: 'Agent'},
      {key: 'status', label: 'Status'},
      {key: 'trace', label: 'Trace', fmt: () => 'open trace', href: (r) => traceHref(r.host),
        title: 'the host\'s trace (all its ranks) in this dashboard\'s trace viewer'},
    ], {sort: {key: 'order', desc: false}, rowKey: (r) => r.key, filterKeys: ['host', 'label'], filterLabel: 'host or rank'});
    let historyHtml = '';
    let errorsHtml = '';

    function drawAlerts(f) {
      const firing = f.alerts.filter((a) => a.state === 'firing');
      const ok = f.alerts.filter((a) => a.state !== 'firing');
      alertsEl.innerHTML = (firing.length
        ? `<ul class="alert-list fleet-firing">${firing.map((a) => `<li class="fleet-alert firing" data-rule="${esc(a.rule)}" ` +
          `data-host="${esc(a.host)}" data-label="${esc(a.label)}"><span class="badge firing">firing</span> <b>${esc(a.rule)}</b>` +
          `${a.host ? ` <span class="where">${esc(where(a.host, a.label))}</span>` : ''}: ${esc(a.summary)} ` +
          `<span class="muted">(since ${esc(ago(a.since_unix_ns, f.now_unix_ns))})</span></li>`).join('')}</ul>`
        : '<p class="ok fleet-none-firing">No fleet alert firing.</p>') +
        (ok.length ? `<p class="muted fleet-ok">Not firing: ${ok.map((a) => `<span data-rule="${esc(a.rule)}">${esc(a.rule)}</span>`).join(', ')}</p>` : '');
      const history = (f.alert_history ?? []).slice(-HISTORY_SHOWN).reverse();
      const html = history.length
        ? history.map((t) => `<li><span class="badge ${t.state === 'firing' ? 'firing' : 'resolved'}">${esc(t.state)}</span> ` +
          `<b>${esc(t.rule)}</b> ${esc(t.summary)} <span class="muted">${esc(ago(t.unix_ns, f.now_unix_ns))}</span></li>`).join('')
        : '<li class="muted">No transitions yet.</li>';
      if (html !== historyHtml) historyEl.innerHTML = historyHtml = html;
      return firing;
    }

    function drawHosts(f) {
      goneAfter.textContent = num(f.gone_after_s, 0);
      const rows = f.hosts.map((h) => {
        const url = safeUrl(h.url);
        const state = ['live', 'gone', 'stopped'].includes(h.state) ? h.state : 'unknown';
        const gone = h.gone_count || h.back_count ? ` (gone ${int(h.gone_count)}×, back ${int(h.back_count)}×)` : '';
        const alerts = (h.alerts ?? []).map((a) => `<span class="host-alert sev-${esc(a.severity)}" title="${esc(a.summary)}">` +
          `<b>${esc(a.rule)}</b>${a.worker ? ` ${esc(a.worker)}` : ''}</span>`).join(', ');
        return {attrs: {'data-host': h.host, 'data-state': state, class: `host-${state}`}, cells: [
          `<td class="host">${esc(h.host)}</td>`,
          `<td><span class="host-state state-${esc(state)}" title="${esc(STATE_TITLES[state] ?? '')}">${esc(h.state)}</span>${esc(gone)}</td>`,
          `<td class="num">${num(h.last_seen_s_ago, 1)} s ago</td>`,
          `<td class="num">${int(h.ranks)}</td>`, `<td class="num">${int(h.agents)}</td>`,
          `<td class="num${h.clock_skewed ? ' skewed' : ''}" data-field="clock_skew"${h.clock_skewed
            ? ' title="skewed: its step times are compared, its timestamps are not trusted"' : ''}>` +
          `${signed(h.clock_skew_ms, 1)}${h.clock_skewed ? ' ⚠ skewed' : ''}</td>`,
          `<td class="num">${int(h.steps_published)}</td>`, `<td class="num${h.steps_dropped ? ' bad' : ''}">${int(h.steps_dropped)}</td>`,
          `<td class="num">${int(h.outbox)}</td>`, `<td class="num">${int(h.events_consumed)}</td>`,
          `<td class="num${h.events_dropped ? ' bad' : ''}">${int(h.events_dropped)}</td>`,
          `<td class="host-alerts">${alerts || '<span class="muted">none</span>'}</td>`,
          `<td class="dashboard">${url ? `<a href="${esc(url)}" target="_blank" rel="noopener noreferrer">${esc(url)}</a>` : '<span class="muted">—</span>'}</td>`,
          `<td><a class="open-trace" href="${esc(traceHref(h.host))}">open trace</a></td>`,
        ]};
      });
      fillRows(hostsEl.tBodies[0], rows.length ? rows
        : [{attrs: {}, cells: [`<td colspan="${HOST_COLUMNS}" class="muted">No agent has published yet.</td>`]}]);
    }

    function drawRanks(f, straggler) {
      ranks.selected = straggler ? `${straggler.host}\u0000${straggler.label}` : null;
      ranks.setRows(f.ranks.map((r) => ({...r,
        key: `${r.host}\u0000${r.label}`,
        order: `${r.host}\u0000${String(r.rank).padStart(10, '0')}`,
        restarts: Math.max(0, (r.incarnations ?? 1) - 1),
        status: ranks.selected === `${r.host}\u0000${r.label}` ? 'straggler (alert firing)' : '',
      })));
    }

    function drawCounters(f) {
      const c = f.counts ?? {};
      const lag = f.lag ?? {};
      counters.innerHTML = '<div class="stats">' +
        stat('Lag p50 (ms)', num(lag.p50_ms, 1), 'lag_p50') + stat('Lag p99 (ms)', num(lag.p99_ms, 1), 'lag_p99') +
        stat('Lag max (ms)', num(lag.max_ms, 1), 'lag_max') + stat('Lag samples', int(lag.samples), 'lag_samples') +
        stat('Messages', int(c.messages), 'messages') + stat('Redelivered', int(c.redelivered), 'redelivered') +
        stat('Steps', int(c.steps), 'steps') + stat('Statuses', int(c.statuses), 'statuses') +
        stat('Alerts', int(c.alerts), 'alerts') + stat('Duplicate steps', int(c.duplicate_steps), 'duplicate_steps') +
        stat('Missing steps', int(c.missing_steps), 'missing_steps') + stat('Restarts', int(c.restarts), 'restarts') +
        stat('Ranks over the cap', int(c.ranks_over_cap), 'ranks_over_cap') + stat('Skewed hosts', int(c.skewed_hosts), 'skewed_hosts') +
        stat('Steps from the future', int(c.steps_from_future), 'steps_from_future') + '</div>' +
        '<p class="muted">Lag: from a step\'s end on its host to its arrival here (NATS and the agent\'s batching).</p>';
      const reasons = Object.entries(c.rejected ?? {});
      rejected.innerHTML = `<div class="stats">${reasons.map(([k, v]) => stat(k, int(v), `rejected_${k}`)).join('')}</div>`;
      for (const [k, v] of reasons) rejected.querySelector(`[data-field="rejected_${CSS.escape(k)}"]`)?.classList.toggle('bad', v > 0);
      const errs = f.recent_errors ?? [];
      const html = errs.length
        ? `<ul class="fleet-error-list">${errs.map((e) => `<li><code>${esc(typeof e === 'string' ? e : JSON.stringify(e))}</code></li>`).join('')}</ul>`
        : '<p class="ok fleet-no-errors">None.</p>';
      if (html !== errorsHtml) errorsEl.innerHTML = errorsHtml = html;
    }

    return {
      render({fleet: f, status}) {
        if (!f) return;
        seqEl.textContent = `#${f.seq}`;
        const firing = drawAlerts(f);
        const straggler = firing.find((a) => a.rule === 'straggler' && a.host);
        const states = {live: 0, gone: 0, stopped: 0};
        for (const h of f.hosts) states[h.state] = (states[h.state] ?? 0) + 1;
        summary.innerHTML = `<div class="stats">${stat('Hosts live', `${int(states.live)} of ${int(f.hosts.length)}`, 'hosts_live')}` +
          stat('Gone', int(states.gone), 'hosts_gone') + stat('Stopped', int(states.stopped), 'hosts_stopped') +
          stat('Ranks', int(f.ranks.length), 'ranks') + stat('Alerts firing', int(firing.length), 'alerts_firing') +
          stat('Straggler', straggler ? where(straggler.host, straggler.label) : '—', 'straggler') +
          stat('Lag p50 / p99 (ms)', `${num(f.lag?.p50_ms, 1)} / ${num(f.lag?.p99_ms, 1)}`, 'lag') + '</div>';
        summary.querySelector('[data-field="hosts_gone"]').classList.toggle('bad', states.gone > 0);
        drawHosts(f);
        // The pod's straggler alert is the fleet's, naming its worker as the pod labels it.
        pod.render(f.pod, firing.filter((a) => a.rule === 'straggler' && a.host)
          .map((a) => ({rule: a.rule, severity: 'warning', summary: a.summary, worker: where(a.host, a.label)})), status);
        drawRanks(f, straggler);
        drawCounters(f);
      },
    };
  },
};
