// The dashboard: one page per analysis (panels/), the header's live state
// (connection, pause, window, drops, alerts), and the routing of view
// messages to the page on screen. Views arrive on the WebSocket feed; a
// window other than the published one (or an option like "exclude IDLE") is
// fetched from /api once a second instead.
import {Feed} from './feed.js';
import {esc, int} from './format.js';
import alerts from './panels/alerts.js';
import capture from './panels/capture.js';
import fleet from './panels/fleet.js';
import inputPipeline from './panels/input_pipeline.js';
import kernelStats from './panels/kernel_stats.js';
import memory from './panels/memory.js';
import modules from './panels/modules.js';
import annotations from './panels/annotations.js';
import overview from './panels/overview.js';
import pod from './panels/pod.js';
import pytorch from './panels/pytorch.js';
import tfStats from './panels/tf_stats.js';
import traceViewer from './panels/trace_viewer.js';

const PAGES = [fleet, overview, inputPipeline, tfStats, kernelStats, memory, pytorch, modules, annotations, pod, alerts,
  traceViewer, capture];
const ALWAYS = ['status', 'alerts'];  // the header's drops indicator and alert notice.
// Polled, never on the feed, besides the views the server renders on request:
// the Fleet page's /api/fleet (not a view of the table).
const POLLED_NON_VIEWS = new Set(['fleet']);
const POLL_MS = 1000;
// A page redraws at most this often; the header follows every publication.
// Tables of a hundred rows cost a few ms of layout each: at the feed's 10 Hz
// the TF stats page kept the main thread 21 % busy, at 5 Hz about half.
const PAGE_REDRAW_MS = 200;

// The window selector's choices; 'published' is the feed's own window.
const WINDOWS = [
  {id: 'published', label: 'last 100 steps (live feed)', steps: 100, text: 'last 100 steps; tables since start'},
  {id: 'steps:20', label: 'last 20 steps', last: 20, text: 'last 20 steps; tables since start'},
  {id: 'steps:1000', label: 'last 1000 steps', last: 1000, text: 'last 1000 steps; tables since start'},
  {id: 's:10', label: 'last 10 seconds', last_s: 10, text: 'last 10 s (steps and tables)'},
  {id: 's:60', label: 'last 60 seconds', last_s: 60, text: 'last 60 s (steps and tables)'},
  {id: 's:600', label: 'last 10 minutes', last_s: 600, text: 'last 10 min (steps and tables)'},
];

const $ = (sel) => document.querySelector(sel);
const token = new URLSearchParams(location.search).get('token');

const state = {
  page: null,        // the page on screen
  views: {},         // topic -> the newest view message applied
  pending: {},       // topic -> newer messages held while paused
  dirty: new Set(),
  paused: false,
  window: WINDOWS[0],
  params: {},        // topic -> extra /api parameters a panel asked for
  firingSeen: new Set(),
  phase: 'connecting',
  probed: {},        // a page's `probe` endpoint -> true where it answers 200, false where not, absent while unknown.
  apiViews: null,    // the table of views as GET /api gave it (viewRow), where the hello has not.
};
const mounted = new Map();  // page id -> {el, panel}
const probeWaiters = {};    // a probe's endpoint -> resolvers waiting for its first answer

// The hash: a page's id, and its parameters after a '?' ("#trace_viewer?host=host-b": linkable).
function route(hash = location.hash) {
  const s = hash.replace(/^#/, '');
  const q = s.indexOf('?');
  return {id: q < 0 ? s : s.slice(0, q), params: Object.fromEntries(new URLSearchParams(q < 0 ? '' : s.slice(q + 1)))};
}

const ctx = {
  exportCsv,
  token,
  get: (path, params, options) => feed.get(path, params, options),
  post: (path, params) => feed.post(path, params),
  traceTile: (q) => feed.traceTile(q),  // {tile, via}: over the WebSocket when it is open
  // Resolves to whether /api lists /api/<name> (a page's probe: 'fleet'), once known.
  probed(name) {
    if (name in state.probed) return Promise.resolve(state.probed[name]);
    return new Promise((resolve) => (probeWaiters[name] ??= []).push(resolve));
  },
  // The page on screen's hash parameters, replaced (no new history entry, no hashchange).
  setRoute(params) {
    const q = new URLSearchParams(Object.entries(params).filter(([, v]) => v !== null && v !== undefined)).toString();
    history.replaceState(null, '', `#${state.page.id}${q ? `?${q}` : ''}`);
  },
  setParams(topic, params) {
    state.params[topic] = params;
    delete state.pending[topic];
    resubscribe();
  },
};

// A view's row of the server's table of views (src/aggregators/views.h), as
// its hello or GET /api gives it: {delivery: 'feed' | 'request', csv, last,
// last_s, include_idle}; undefined before either answered, or for a topic
// that is no view.
function viewRow(topic) {
  return feed.hello?.views?.[topic] ?? state.apiViews?.[topic];
}
// Views the server computes for each request (never on the feed), and the
// Fleet page's data: polled, at the page's own period (`pollMs`).
const pollOnly = (topic) => viewRow(topic)?.delivery === 'request' || POLLED_NON_VIEWS.has(topic);

// Query parameters a topic needs beyond the published window; {} for none.
function restParams(topic) {
  const p = {...(state.params[topic] ?? {})};
  if (state.window.last && viewRow(topic)?.last) p.last = state.window.last;
  if (state.window.last_s && viewRow(topic)?.last_s) p.last_s = state.window.last_s;
  return p;
}

function pageTopics() {
  return state.page ? state.page.topics : [];
}

// The page's topics that the published feed answers, and those polled.
function split() {
  const feed = new Set(ALWAYS);
  const polled = [];
  for (const t of pageTopics()) {
    if (pollOnly(t) || Object.keys(restParams(t)).length) polled.push(t);
    else feed.add(t);
  }
  return {feed: [...feed], polled};
}

const feed = new Feed({
  token,
  onView(msg) {
    if (split().polled.includes(msg.type)) return;  // the window on screen is another one.
    accept(msg);
  },
  onState(s) {
    if (s.phase === 'live' && state.phase !== 'live' && state.phase !== 'connecting') probeAll();  // reconnected: perhaps another server.
    // The hello's table of views says which of the page's topics are polled.
    if (s.phase === 'live' && state.phase !== 'live' && state.page) setTimeout(resubscribe, 0);
    state.phase = s.phase;
    state.connection = s;
    document.body.dataset.phase = s.phase;
    drawConnection();
  },
});

function accept(msg) {
  // Pause holds the page still; the header (drops, alerts) always follows.
  if (state.paused && !ALWAYS.includes(msg.type)) {
    state.pending[msg.type] = msg;
    drawHeader();
    return;
  }
  state.views[msg.type] = msg;
  state.dirty.add(msg.type);
  schedule();
}

let frame = 0;
function schedule() {
  if (!frame) frame = requestAnimationFrame(draw);
}

let lastPageDraw = 0;
let pageTimer = 0;
function draw() {
  frame = 0;
  if (state.dirty.has('status') || state.dirty.has('alerts')) drawHeader();
  if (state.dirty.has('steps')) drawWindowNote();
  drawEmpty();
  const page = state.page;
  const m = page && mounted.get(page.id);
  if (!m || !page.topics.some((t) => state.dirty.has(t))) {
    state.dirty.clear();
    return;
  }
  if (state.paused) return;  // what came before the pause draws on resume.
  const wait = lastPageDraw + PAGE_REDRAW_MS - performance.now();
  if (wait > 0) {
    // Too soon: the page's topics stay dirty and it draws when its time comes.
    if (!pageTimer) pageTimer = setTimeout(() => { pageTimer = 0; schedule(); }, wait);
    return;
  }
  lastPageDraw = performance.now();
  try {
    m.panel.render(state.views);
    // The publication the page shows (tests and the curious wait on it).
    m.el.dataset.seq = Math.max(0, ...page.topics.map((t) => state.views[t]?.seq ?? 0));
  } catch (e) {
    console.error(`liveprof: the ${page.id} page could not draw`, e);
  }
  state.dirty.clear();
}

// ---- the header ----

function drawConnection() {
  const s = state.connection;
  const el = $('#conn');
  el.className = `conn ${s.phase}`;
  const labels = {connecting: 'connecting…', live: state.paused ? 'paused' : 'live', reconnecting: 'reconnecting', version_mismatch: 'incompatible server'};
  // Connected to the server, the badge says where the job stands: a job that
  // ended is "finished", not live (status.job_state; docs/protocol.md).
  const job = state.views.status?.job_state;
  const jobLabels = {finished: 'job finished', waiting: 'waiting for a job', disconnected: 'job disconnected'};
  const jobTitles = {finished: 'Every source of the job closed cleanly (or the replay ended): the numbers are final.',
    waiting: 'The server is up; no job has connected yet.',
    disconnected: 'Every source of the job is gone, at least one cut off without a clean close.'};
  if (s.phase === 'live' && !state.paused && jobLabels[job]) {
    el.className = `conn job-${job}`;
    el.textContent = jobLabels[job];
    el.title = jobTitles[job];
  } else {
    el.textContent = labels[s.phase] ?? s.phase;
    el.title = s.detail ?? '';
  }
  const banner = $('#banner');
  if (s.phase === 'version_mismatch') {
    banner.className = 'banner error';
    banner.innerHTML = `<b>Protocol version mismatch.</b> ${esc(s.detail)}`;
  } else if (s.phase === 'reconnecting') {
    banner.className = 'banner warn';
    const left = Math.max(0, Math.round((s.retryAt - Date.now()) / 1000));
    banner.innerHTML = `<b>Not connected to the liveprof server at ${esc(location.host)}</b> (${esc(s.detail)}). ` +
      `Retrying${s.retryAt ? ` in ${left} s` : ''}; what is shown is the last data received.`;
  } else {
    banner.className = 'banner hidden';
    banner.textContent = '';
  }
}
setInterval(() => state.phase === 'reconnecting' && drawConnection(), 1000);

function drawHeader() {
  const st = state.views.status;
  const drops = $('#drops');
  if (st) {
    // Lost: ring drops and data_loss diagnostics. Late: delivered, kept in
    // the trace and the tables, but after their window or step had closed:
    // another count, shown apart, never added to "dropped".
    const diags = (st.diagnostics ?? []).filter((d) => d.count > 0);
    const dataLoss = diags.filter((d) => d.severity === 'data_loss');
    const late = diags.filter((d) => d.severity === 'late');
    const lost = st.events_dropped + dataLoss.reduce((a, d) => a + d.count, 0);
    drops.className = `drops ${lost ? 'bad' : 'ok'}`;
    drops.querySelector('b').textContent = int(lost);
    drops.title = [`${int(st.events_consumed)} events analysed; ${int(lost)} lost: ${int(st.events_dropped)} dropped by full rings`,
      ...(st.sources ?? []).map((s) => `${s.name}: ${int(s.published)} published, ${int(s.dropped)} dropped`),
      ...dataLoss.map((d) => `${d.name}: ${int(d.count)} (${d.description})`)].join('\n');
    const lateEl = $('#late');
    const lateCount = late.reduce((a, d) => a + d.count, 0);
    lateEl.classList.toggle('hidden', lateCount === 0);
    lateEl.querySelector('b').textContent = int(lateCount);
    lateEl.title = ['Late, not lost: these events arrived after the analysis they belonged to had moved on. ' +
      'They are in the trace viewer and the op, kernel and memory tables.',
      ...late.map((d) => `${d.name}: ${int(d.count)} (${d.description})`)].join('\n');
    $('#events').textContent = `${int(st.events_consumed)} events`;
    if (state.connection) drawConnection();
  }
  const seq = state.views.status?.seq ?? 0;
  $('#seq').dataset.seq = seq;
  const shown = state.page && mounted.get(state.page.id)?.el.dataset.seq;
  $('#seq').textContent = state.paused ? `paused at #${shown ?? '—'}; feed at #${seq}` : `#${seq}`;
  drawAlertNotice(state.views.alerts);
}

// The alerts closed at the end of the job (state 'closed'): the newest
// closed event of each, with its last value.
function closedAtEnd(a) {
  const closed = new Set((a?.rules ?? []).filter((r) => r.state === 'closed').map((r) => r.name));
  const events = new Map();
  for (const h of a?.history ?? []) if (h.state === 'closed' && closed.has(h.rule)) events.set(h.rule, h);
  return [...events.values()];
}

// The notice of what fires now, on every page, with the value now (the
// summary rendered with the rule's last value, not the one it fired with);
// once the job has ended, what was firing then, closed with its last value.
// Rebuilt only when the set changes (a click on it must not race a
// rebuild): the text follows in place. A new alert flashes.
let noticeKey = '';
function drawAlertNotice(a) {
  const notice = $('#alert-notice');
  const firing = a?.firing ?? [];
  const closed = firing.length ? [] : closedAtEnd(a);
  const keys = firing.length ? firing.map((f) => `${f.rule}@${f.ts_ns}`) : closed.map((c) => `closed ${c.rule}@${c.ts_ns}`);
  const key = keys.join('|');
  if (key !== noticeKey) {
    noticeKey = key;
    // Only what fires now is remembered: the set stays as small as the list.
    const fresh = firing.length ? keys.filter((k) => !state.firingSeen.has(k)) : [];
    state.firingSeen = new Set(firing.length ? keys : []);
    const n = firing.length || closed.length;
    const s = n > 1 ? 's' : '';
    if (firing.length) {
      notice.className = `alert-notice sev-${firing[0].severity}`;
      notice.innerHTML = `<a href="#alerts">⚠ ${n} alert${s} firing: <b>${esc(firing[0].rule)}</b> <span class="notice-text"></span></a>`;
    } else if (closed.length) {
      notice.className = 'alert-notice closed';
      notice.innerHTML = `<a href="#alerts">${n} alert${s} firing when the job ended, closed: <span class="notice-text"></span></a>`;
    } else {
      notice.className = 'alert-notice hidden';
      notice.textContent = '';
    }
    if (fresh.length) {
      notice.classList.add('flash');
      setTimeout(() => notice.classList.remove('flash'), 3000);
    }
  }
  const span = notice.querySelector('.notice-text');
  if (!span) return;
  const text = firing.length ? firing[0].summary_now || firing[0].summary : closed[0].summary;
  if (!span.firstChild) span.append(text);
  else if (span.firstChild.nodeValue !== text) span.firstChild.nodeValue = text;
}

// Beside the window selector, when a step window holds other than what it
// says: fewer steps than asked (the job has no more yet), or more than the
// step-time graph carries (docs/protocol.md, steps: rows_cap).
function drawWindowNote() {
  const s = state.views.steps;
  const asked = state.window.last ?? state.window.steps;
  const notes = [];
  if (s && state.page?.topics.includes('steps')) {
    const w = s.window;
    if (asked && w.steps < asked) {
      notes.push(w.steps ? `${int(w.steps)} steps so far (${w.first_step}–${w.last_step})` : 'no step closed yet');
    }
    if (s.rows_left_out > 0) {
      notes.push(`the graph draws the newest ${int(s.rows.length)} of the window's ${int(w.steps)} steps ` +
        `(at most ${int(s.rows_cap)} per view)`);
    }
  }
  $('#window-note').textContent = notes.join('; ');
}

// Nothing connected: the server runs but no producer has sent an event.
// A run read back (liveprof open): its events are in the trace viewer only.
// A fleet view (liveprof fleet) has no events of its own: it says where its
// numbers are instead.
function drawEmpty() {
  const st = state.views.status;
  const empty = st && st.events_consumed === 0 && !(st.sources ?? []).some((s) => s.published > 0);
  const opened = st?.run_environment?.opened_run;
  const isFleet = state.probed.fleet === true;
  const known = 'fleet' in state.probed;  // (until then a fleet view would flash "No events yet")
  $('#empty').classList.toggle('hidden', !empty || !!opened || isFleet || !known);
  // (the trace viewer shows a host's trace through the fleet view)
  $('#fleet-note').classList.toggle('hidden', !isFleet || state.page?.id === 'fleet' || state.page?.id === 'trace_viewer');
  $('#opened').classList.toggle('hidden', !opened);
  if (opened) $('#opened-dir').textContent = opened;
}

// ---- pages, windows, pause ----

// A page with a `probe` is in the navigation only where the server lists its
// endpoint (the Fleet page: /api/fleet, on liveprof fleet only); until the
// probe says so, its hash shows the overview.
function available(page) {
  return !page.probe || state.probed[page.probe] === true;
}

// `params`: the hash's (route()), handed to the page's `route` if it has one.
function showPage(id, params = {}) {
  const home = PAGES.find((p) => p.id === 'overview');
  let page = PAGES.find((p) => p.id === id) ?? home;
  if (!available(page)) page = home;
  state.page = page;
  for (const a of document.querySelectorAll('nav a')) a.classList.toggle('active', a.dataset.page === page.id);
  for (const [pid, m] of mounted) m.el.hidden = pid !== page.id;
  if (!mounted.has(page.id)) {
    const el = document.createElement('div');
    el.className = 'page';
    el.dataset.page = page.id;
    $('#pages').append(el);
    mounted.set(page.id, {el, panel: page.mount(el, ctx)});
  }
  mounted.get(page.id).panel.route?.(page.id === id ? params : {});
  document.title = `liveprof — ${page.title}`;
  for (const t of page.topics) {
    if (state.pending[t]) {  // paused: the page asked for shows the newest it has.
      state.views[t] = state.pending[t];
      delete state.pending[t];
    }
    state.dirty.add(t);
  }
  lastPageDraw = 0;
  resubscribe();
  schedule();
}

let pollTimer = 0;
let generation = 0;  // bumped when what is polled changes: older answers are dropped.
function resubscribe() {
  generation++;
  const {feed: topics, polled} = split();
  feed.setTopics(topics);
  clearTimeout(pollTimer);
  $('#window-text').textContent = state.window.text;
  drawWindowNote();
  if (polled.length) poll(polled);
}

async function poll(topics) {
  const asked = generation;
  if (!state.paused) {
    await Promise.all(topics.map(async (t) => {
      try {
        const msg = await feed.get(t, restParams(t));
        if (asked === generation && split().polled.includes(t)) accept(msg);
      } catch (e) {
        console.warn(`liveprof: ${e.message}`);
      }
    }));
  }
  clearTimeout(pollTimer);
  if (asked !== generation) return;  // a newer poll loop runs.
  pollTimer = setTimeout(() => {
    const now = split().polled;
    if (now.length) poll(now);
  }, state.page?.pollMs ?? POLL_MS);
}

function setPaused(paused) {
  state.paused = paused;
  $('#pause').textContent = paused ? '▶ Resume' : '❚❚ Pause';
  $('#pause').setAttribute('aria-pressed', String(paused));
  if (!paused) {
    for (const msg of Object.values(state.pending)) {
      state.views[msg.type] = msg;
      state.dirty.add(msg.type);
    }
    state.pending = {};
    schedule();
  }
  if (state.connection) drawConnection();
  drawHeader();
}

async function exportCsv(topic) {
  const status = $('#csv-status');
  try {
    const text = await feed.get(topic, {...restParams(topic), format: 'csv'});
    const a = document.createElement('a');
    a.href = URL.createObjectURL(new Blob([text], {type: 'text/csv'}));
    a.download = `liveprof-${topic}-${new Date().toISOString().replace(/[:.]/g, '-')}.csv`;
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(a.href), 10000);
    status.textContent = '';
  } catch (e) {
    status.textContent = `CSV export failed: ${e.message}`;
  }
}

function init() {
  // Pages with a probe are hidden until it answers.
  $('nav').innerHTML = PAGES.map((p) => `<a href="#${p.id}" data-page="${p.id}"${p.probe ? ' hidden' : ''}>${esc(p.title)}</a>`).join('');
  const select = $('#window');
  select.innerHTML = WINDOWS.map((w) => `<option value="${w.id}">${esc(w.label)}</option>`).join('');
  select.addEventListener('change', () => {
    state.window = WINDOWS.find((w) => w.id === select.value);
    // The held views belong to the window before.
    for (const t of Object.keys(state.views)) {
      if (!viewRow(t)?.last_s) continue;
      delete state.views[t];
      delete state.pending[t];
    }
    showPage(state.page.id);
  });
  $('#pause').addEventListener('click', () => setPaused(!state.paused));
  // The whole run in one click (/api/export: every event kept, with launch
  // flows and args), named for when it was taken.
  const download = $('#download-trace');
  download.href = `api/export${token ? `?${new URLSearchParams({token})}` : ''}`;
  download.addEventListener('click', () => {
    download.download = `liveprof-trace-${new Date().toISOString().replace(/[:.]/g, '-')}.json.gz`;
  });
  window.addEventListener('hashchange', () => {
    const r = route();
    showPage(r.id, r.params);
  });
  const r = route();
  showPage(r.id || 'overview', r.params);
  feed.start();
  probeAll(!location.hash);
}

// GET /api once: the page's link shows where its endpoint (/api/<probe>) is
// among the server's endpoints (never a request that fails: Chromium would
// log it), else it is hidden
// (and leaves the page, if on screen). "Not yet" (503) and no answer are asked
// again a few times. `land`: the page opened without a hash, and the probed
// page, found, becomes the one on screen (a fleet view's own page).
const PROBE_TRIES = 10;
const probing = new Set();  // the endpoints asked now
async function probe(page, land, tries = PROBE_TRIES) {
  if (tries === PROBE_TRIES && probing.has(page.probe)) return;
  probing.add(page.probe);
  let code = 0;
  try {
    const q = token ? `?${new URLSearchParams({token})}` : '';
    const r = await fetch(`/api${q}`, {signal: AbortSignal.timeout(5000)});
    code = r.status;
    if (code === 200) {
      const index = await r.json();
      if (index.views && !state.apiViews) {
        state.apiViews = index.views;
        if (!feed.hello && state.page) resubscribe();  // (no socket yet: the table from here)
      }
      if (!(index.endpoints || []).some((e) => e.path === `/api/${page.probe}`)) code = 404;
    } else {
      await r.body?.cancel();
    }
  } catch (e) { code = 0; /* no answer */ }
  if ((code === 0 || code === 503) && tries > 1) {
    setTimeout(() => probe(page, land, tries - 1), 1000);
    return;
  }
  probing.delete(page.probe);
  const ok = code === 200;
  const before = state.probed[page.probe];
  state.probed[page.probe] = ok;
  for (const resolve of probeWaiters[page.probe]?.splice(0) ?? []) resolve(ok);
  if (before !== undefined && before !== ok) {  // another server now: the pages that asked hear it.
    for (const m of mounted.values()) m.panel.probed?.(page.probe, ok);
  }
  const link = document.querySelector(`nav a[data-page="${page.id}"]`);
  if (link) {
    link.hidden = !ok;
    link.dataset.probed = ok ? 'yes' : 'no';  // (tests wait on it)
  }
  if (!ok && (state.page === page || route().id === page.id)) {
    history.replaceState(null, '', '#overview');
    showPage('overview');
  } else if (ok && ((land && !location.hash) || route().id === page.id) && state.page !== page) {
    history.replaceState(null, '', `#${page.id}`);
    showPage(page.id);
  }
  schedule();  // the empty-page notices depend on it.
}

function probeAll(land = false) {
  for (const p of PAGES) if (p.probe) probe(p, land);
}

init();
