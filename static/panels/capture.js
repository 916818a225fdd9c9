// Sources and capture on demand (docs/ingest.md): the processes sending to
// this server (`liveprof serve --ingest ...`), what each records now, and a
// form that turns one source's capture up or down for a while, as
// TensorBoard's Capture Profile dialog but live (POST /api/capture).
// /api/status is polled every 2 s while the page is on screen: the ingest
// sources are a REST member of it (server.ingest), not a feed topic. Events
// the server refused alone (a track never defined...: the rest of their batch
// was taken) show per source, by reason, with the first one's message; the
// last batch acknowledged, what an acknowledgement promises. Each source's
// liveprof CPU and process memory, as its sender read them from its /proc
// (status.server.ingest[].cost), and the time liveprof's hooks add to each
// of its steps, as they measured themselves.
import {bytes, esc, int, num, pct, us} from '../format.js';
import {Table} from '../table.js';

const POLL_MS = 2000;

function captureText(c) {
  if (!c) return 'not said';
  const parts = [`level ${c.host_level}`, `Python scopes ${c.python_scopes ? 'on' : 'off'}`,
    c.gpu_available ? `GPU ${c.gpu ? 'on' : 'off'}${c.gpu_level ? ` (level ${c.gpu_level})` : ''}` : 'no GPU producer'];
  if (c.until_ns) {
    parts.push(c.seconds_left > 0 ? `capture #${c.control_id}, ${num(c.seconds_left, 0)} s left`
      : `capture #${c.control_id} ending`);
  } else if (c.control_id) {
    parts.push(`capture #${c.control_id} (until changed)`);
  }
  return parts.join(' · ');
}

// Whose GPU data a source's spans are (/api/status's gpu_handoffs, docs/
// protocol.md): "liveprof", or the newest span that went to another CUPTI
// client (torch.profiler run by the program itself), in seconds since the
// run's first event, as the trace viewer's axis.
function gpuDataText(windows, gpuAvailable) {
  if (!windows.length) return gpuAvailable ? 'liveprof' : '—';
  const w = windows[windows.length - 1];
  const span = w.to_s === null ? `since ${num(w.from_s, 3)} s` : `from ${num(w.from_s, 3)} s to ${num(w.to_s, 3)} s`;
  return `GPU data: ${w.client} ${span}${w.note ? ` (${w.note})` : ''}` +
    `${windows.length > 1 ? `; ${windows.length - 1} earlier` : ''}; liveprof the rest`;
}

// "undefined_track 200, bad_kind 1" (empty: none refused).
function refusedText(s) {
  return (s.refused ?? []).map((r) => `${r.reason} ${int(r.events)}`).join(', ');
}

// A source's liveprof threads, one a line, for the liveprof CPU cell's hover:
// "liveprof send (tid 4242): 1.2% (2.05 s since it started)".
function costThreadsText(c) {
  if (!c) return 'Not said: an older sender, or none read yet';
  return (c.threads ?? []).map((t) => `${t.name} (tid ${t.tid}): ${t.cpu_pct < 0 ? '—' : pct(t.cpu_pct, 1)} ` +
    `(${num(t.cpu_s, 2)} s since it started)`).join('\n');
}

// The "Added per step" cell: the hooks' time per step plus CUPTI's own
// (each where the process has it); -1 where it has neither figure.
function addedPerStep(c) {
  const hooks = c?.hook_calls ? c.hook_per_step_us ?? -1 : -1;
  const cupti = c?.cupti_overhead_per_step_us ?? -1;
  return hooks < 0 && cupti < 0 ? -1 : Math.max(hooks, 0) + Math.max(cupti, 0);
}

// The hooks' and CUPTI's cost, for the "Added per step" cell's hover.
function hookText(c) {
  if (!c) return 'Not said: an older sender, or none read yet';
  const lines = [];
  if (!c.hook_calls) {
    lines.push('No liveprof hook runs in this process (a program that is not under liveprof run\'s ' +
      'Python hooks, or an older sender)');
  } else {
    const perStep = c.hook_per_step_us < 0 ? 'no figure per step yet (two readings after steps are needed)'
      : `${us(c.hook_per_step_us)} a step over its last ${int(c.hook_per_step_steps)} steps`;
    lines.push(`liveprof's hooks: ${perStep}; ${c.hook_pct < 0 ? '—' : pct(c.hook_pct, 2)} of the process's time over ` +
      `${c.hook_per_step_us < 0 ? 'the last interval' : 'those steps'}; ${num(c.hook_s, 3)} s in ${int(c.hook_calls)} hook calls over ${int(c.steps)} steps since ` +
      'it started');
  }
  if (c.cupti_overhead_s > 0) {
    const perStep = (c.cupti_overhead_per_step_us ?? -1) < 0 ? 'no figure per step yet'
      : `${us(c.cupti_overhead_per_step_us)} a step over the same steps`;
    lines.push(`CUPTI's own work (its OVERHEAD records: buffer requests and flushes, instrumentation, resources): ` +
      `${perStep}; ${num(c.cupti_overhead_s, 3)} s since it started`);
  }
  return lines.join('\n');
}

export default {
  id: 'capture',
  title: 'Sources',
  topics: [],

  mount(root, ctx) {
    root.innerHTML = `
      <section class="card"><h3>Ingest sources</h3><p class="muted note"></p><div class="sources"></div>
        <ul class="refusals muted"></ul></section>
      <section class="card self-cost"><h3>liveprof's own cost <span class="muted">(this server, read from /proc every second)</span></h3>
        <div class="stats cost-stats"></div><div class="cost-threads"></div></section>
      <section class="card capture-form"><h3>Capture on demand</h3>
        <form>
          <label>Source <select name="source"></select></label>
          <label>Host level <select name="host_level">
            <option value="">unchanged</option>
            <option value="1">1: steps, input, counters, memory</option>
            <option value="2">2: + ops, runtime calls, scopes</option>
            <option value="3">3: + PyTorch modules' forward, backward, memory</option></select></label>
          <label>Python scopes <select name="python_scopes">
            <option value="">unchanged</option><option value="1">on</option><option value="0">off</option></select></label>
          <label>GPU activity <select name="gpu">
            <option value="">unchanged</option><option value="1">on</option><option value="0">off</option></select></label>
          <label>GPU level <select name="gpu_level">
            <option value="">unchanged</option>
            <option value="default">default: kernels, copies, memory, launch/copy/alloc/sync calls</option>
            <option value="full">full: + every API call, synchronization, overhead</option></select></label>
          <label>For <input name="seconds" type="number" min="0" max="86400" value="30"> s (0: until changed)</label>
          <button type="submit">Capture</button>
        </form>
        <p class="capture-result muted" role="status"></p></section>`;
    const table = new Table(root.querySelector('.sources'), [
      {key: 'id', label: 'Id', numeric: true},
      {key: 'label', label: 'Worker', name: true},
      {key: 'program', label: 'Program'},
      {key: 'state', label: 'State'},
      {key: 'steps', label: 'Steps', numeric: true, fmt: (v, r) => (v ? `${int(v)} · ${r.step_source}` : 'none'),
        title: 'Its steps and where they come from: optimizer (each iteration\'s optimizer steps, liveprof run), ' +
          'torch.profiler (profile.step() or ProfilerStep#N), program marks (liveprof.step), pattern ' +
          '(--step-pattern). None: a launcher, a loader worker, or a process that has made no training step yet'},
      {key: 'events', label: 'Events', numeric: true, fmt: (v) => int(v)},
      {key: 'lost', label: 'Lost', numeric: true, fmt: (v) => int(v)},
      {key: 'refused', label: 'Refused', numeric: true, fmt: (v, r) => (v ? `${int(v)} (${r.refused_reasons})` : '0'),
        title: 'Malformed events the server refused alone (the rest of their batch was taken), by reason'},
      {key: 'acked', label: 'Acknowledged', numeric: true,
        fmt: (v, r) => (v ? `batch ${int(v)}${r.unacked ? ` (${int(r.unacked)} waiting)` : ''}` : '—'),
        title: 'The last batch acknowledged: its events handled by the analyses and, with --trace-dir, written ' +
          'to the run folder (a kill -9 of the server loses none of them); waiting: batches taken since, ' +
          'not handled yet'},
      {key: 'cost_pct', label: 'liveprof CPU', numeric: true, fmt: (v) => (v < 0 ? '—' : pct(v, 1)),
        cellTitle: (v, r) => r.cost_threads,
        title: 'liveprof\'s own threads in the source\'s process (its sender, its CUPTI buffer thread), % of one ' +
          'core over the last interval its sender read (user + system time, from its /proc, about once a ' +
          'second); — before two readings, or from a sender that does not say. Hover a cell for each thread'},
      {key: 'rss', label: 'Process memory', numeric: true, fmt: (v) => (v > 0 ? bytes(v) : '—'),
        title: 'The source process\'s resident memory (RSS, from its /proc): the job\'s own memory, ' +
          'liveprof\'s included'},
      {key: 'hook_us', label: 'Added per step', numeric: true, fmt: (v) => (v < 0 ? '—' : us(v)),
        cellTitle: (v, r) => r.hook_text,
        title: 'The time liveprof\'s hooks in the program (liveprof run\'s Python hooks: DataLoader, optimizer, ' +
          'backward and module hooks) add to each training step, as the hooks measured themselves (each hook\'s ' +
          'own time on the program\'s threads, per step marked, over the last whole steps its sender read), plus ' +
          'CUPTI\'s own work over the same steps (its OVERHEAD records of buffer requests and flushes, ' +
          'instrumentation and resources; not CUDA\'s lazy loading); not an estimate from benchmarks. — for a ' +
          'process with neither, or before two readings after steps. Hover a cell for each part and the share of ' +
          'the process\'s time'},
      {key: 'offset_ms', label: 'Clock offset ms', numeric: true, fmt: (v) => num(v, 3)},
      {key: 'rtt_us', label: 'Best RTT µs', numeric: true, fmt: (v) => num(v, 1)},
      {key: 'capture', label: 'Records now'},
      {key: 'gpu_data', label: 'GPU data',
        title: 'Whose GPU data: liveprof\'s, except the spans another CUPTI client had (torch.profiler run by the ' +
          'program itself: before CUDA 13.3 / driver r610 CUPTI serves one client at a time, and liveprof steps ' +
          'aside for its window); seconds since the run\'s first event, as the trace viewer\'s axis'},
    ], {sort: {key: 'id', desc: false}});
    const costThreads = new Table(root.querySelector('.cost-threads'), [
      {key: 'name', label: 'Thread', name: true},
      {key: 'tid', label: 'Tid', numeric: true},
      {key: 'cpu_pct', label: 'CPU, last second', numeric: true, fmt: (v) => (v < 0 ? '—' : pct(v, 1)),
        title: '% of one core over the last sample interval (user + system time)'},
      {key: 'cpu_s', label: 'CPU since start', numeric: true, fmt: (v) => `${num(v, 2)} s`},
    ], {sort: {key: 'cpu_s', desc: true}});
    // liveprof's threads in this server and its memory (status.liveprof_cost).
    function drawCost(c) {
      root.querySelector('.self-cost').hidden = !c;
      if (!c) return;
      root.querySelector('.cost-stats').innerHTML =
        `<div class="stat" data-field="self_cpu_pct"><span class="stat-label">CPU, liveprof threads</span><span class="stat-value">${
          c.cpu_pct < 0 ? '—' : esc(pct(c.cpu_pct, 1))}</span></div>` +
        `<div class="stat" data-field="self_rss"><span class="stat-label">Server memory (RSS)</span><span class="stat-value">${
          esc(bytes(c.rss_bytes))}</span></div>`;
      costThreads.setRows(c.threads);
    }
    const note = root.querySelector('.note');
    const refusals = root.querySelector('.refusals');
    const select = root.querySelector('select[name=source]');
    const gpuSelects = ['gpu', 'gpu_level'].map((n) => root.querySelector(`select[name=${n}]`));
    const result = root.querySelector('.capture-result');
    let live = [];
    let timer = 0;

    // GPU activity and level can be turned only in a source with a GPU
    // producer (a CuptiSource): otherwise the choices are greyed out and say why.
    function gpuChoice() {
      const s = live.find((o) => String(o.id) === select.value);
      for (const gpu of gpuSelects) {
        gpu.disabled = !s?.capture?.gpu_available;
        gpu.title = !gpu.disabled ? ''
          : `This source has no GPU producer to ${gpu.name === 'gpu' ? 'turn on or off' : 'switch the level of'}`;
        if (gpu.disabled) gpu.value = '';
      }
    }
    select.addEventListener('change', gpuChoice);

    async function poll() {
      clearTimeout(timer);
      if (!root.isConnected) return;
      if (root.offsetParent !== null) {  // on screen
        try {
          const st = await ctx.get('status');
          drawCost(st.liveprof_cost);
          const sources = st.server?.ingest;
          if (!sources) {
            note.textContent = 'This server takes no ingest: start it with `liveprof serve --ingest unix:/path` ' +
              'and point programs at it (LIVEPROF_SERVER, liveprof.connect).';
            table.setRows([]);
          } else {
            live = sources.filter((s) => s.connected);
            const stepsOf = new Map((st.step_sources ?? []).map((s) => [s.worker, s]));
            const handoffsOf = (worker) => (st.gpu_handoffs ?? []).filter((h) => h.worker === worker);
            note.textContent = `${live.length} connected, ${sources.length - live.length} closed. A batch is ` +
              'acknowledged once its events are handled and, with --trace-dir, written to the run folder: a ' +
              'sender keeps each batch until then, and a kill -9 of the server loses none it acknowledged.';
            table.setRows(sources.map((s) => ({
              id: s.id, label: s.label || '(no hello yet)', program: s.program,
              state: s.connected ? 'connected' : `closed${s.closed_reason ? `: ${s.closed_reason}` : ''}`,
              steps: stepsOf.get(s.worker)?.steps ?? 0, step_source: stepsOf.get(s.worker)?.source ?? '',
              events: s.events, lost: s.sender_dropped + s.ring_dropped + s.future_dropped,
              refused: s.refused_events ?? 0, refused_reasons: refusedText(s),
              cost_pct: s.cost?.cpu_pct ?? -1, cost_threads: costThreadsText(s.cost), rss: s.cost?.rss_bytes ?? 0,
              hook_us: addedPerStep(s.cost), hook_text: hookText(s.cost),
              acked: s.acked_seq ?? 0, unacked: s.unacked_batches ?? 0,
              offset_ms: s.clock_offset_ns / 1e6, rtt_us: s.best_rtt_ns / 1e3,
              capture: captureText(s.capture),
              gpu_data: gpuDataText(handoffsOf(s.worker), s.capture?.gpu_available),
            })));
            // Each reason's first refused event, as the server's console said it.
            refusals.innerHTML = sources.flatMap((s) => (s.refused ?? []).map((r) =>
              `<li>Source ${esc(s.id)} (${esc(s.label)}): ${esc(int(r.events))} ${r.events === 1 ? 'event' : 'events'} ` +
              `refused, ${esc(r.reason)}; the first: ` +
              `${esc(r.example)}</li>`)).join('');
            const chosen = select.value;
            select.innerHTML = live.map((s) => `<option value="${esc(s.id)}">${esc(s.id)}: ${esc(s.label)}</option>`).join('');
            if (live.some((s) => String(s.id) === chosen)) select.value = chosen;
            gpuChoice();
          }
        } catch (e) {
          note.textContent = `Could not read /api/status: ${e.message}`;
        }
      }
      timer = setTimeout(poll, POLL_MS);
    }

    root.querySelector('form').addEventListener('submit', async (ev) => {
      ev.preventDefault();
      const form = new FormData(ev.target);
      const params = {};
      for (const [k, v] of form.entries()) if (v !== '') params[k] = v;
      if (!params.source) {
        result.textContent = 'No connected source to capture.';
        return;
      }
      try {
        await ctx.post('capture', params);
        result.textContent = `Sent to source ${params.source}; its state follows in the table.`;
        poll();
      } catch (e) {
        result.textContent = e.message;
      }
    });
    poll();
    return {render() {}};
  },
};
