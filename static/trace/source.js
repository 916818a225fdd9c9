// Where the trace viewer's events come from. On a liveprof server, its own
// store: tiles over the WebSocket (or /api/trace), /api/trace/event and
// /api/trace/search. On a fleet view (`liveprof fleet`, which stores no
// events), one host's: every request goes over HTTP to
// /api/fleet/trace[/event|/search]?host=H&..., which the fleet view
// forwards to that host's agent (docs/fleet.md); never the WebSocket, whose
// tiles would be the fleet view's own empty store. The host is carried in
// the page's hash (#trace_viewer?host=H: the Fleet page's "open trace"
// links) and picked in the viewer's bar.
import {esc} from '../format.js';

// A forwarded query waits up to 5 s for the agent (then the fleet view
// answers 504): the request waits a little longer, to show that answer.
const FLEET_TIMEOUT_MS = 8000;
const HOSTS_POLL_MS = 5000;  // the picker's list of hosts (/api/fleet), while the page is on screen.
const HOSTS_RETRY_MS = 1000;  // none yet: asked again sooner.

// `get(path, params)` answers as ctx.get does for 'trace', 'trace/event'
// and 'trace/search'; `tile(q)` resolves to {tile, via: 'ws' | 'http'}.
export function localSource(ctx) {
  return {host: null, tile: (q) => ctx.traceTile(q), get: (path, params) => ctx.get(path, params)};
}

export function fleetSource(ctx, host) {
  const get = (path, params = {}) => ctx.get(`fleet/${path}`, {host, ...params}, {timeoutMs: FLEET_TIMEOUT_MS});
  return {host, tile: async (q) => ({tile: await get('trace', q), via: 'http'}), get};
}

// The "#trace_viewer?host=H" of a host (the Fleet page's links).
export function traceHref(host) {
  return `#trace_viewer?${new URLSearchParams({host})}`;
}

// The host picker of the viewer's bar (hidden except on a fleet view): the
// hosts of /api/fleet with their state, the one in hand selected even when
// the list does not have it (yet). `onPick(host)` follows a choice;
// `hidden()` says the page is off screen (the list is not polled then).
export function mountHostPicker(root, ctx, {onPick, hidden}) {
  const label = root.querySelector('.trace-host');
  const select = label.querySelector('select');
  let hosts = [];       // /api/fleet's hosts: [{host, state}]
  let current = null;
  let timer = 0;
  let waiters = [];     // first(): resolved when a host is known

  function draw() {
    const names = hosts.map((h) => h.host);
    const list = current && !names.includes(current) ? [{host: current, state: 'not in /api/fleet'}, ...hosts] : hosts;
    const html = (current ? '' : '<option value="">choose a host</option>') +
      list.map((h) => `<option value="${esc(h.host)}">${esc(h.host)} (${esc(h.state)})</option>`).join('');
    if (select.dataset.html !== html) {
      select.innerHTML = html;
      select.dataset.html = html;
    }
    select.value = current ?? '';
  }
  async function poll() {
    clearTimeout(timer);
    if (!hidden()) {
      try {
        const f = await ctx.get('fleet');
        hosts = (f.hosts ?? []).map((h) => ({host: String(h.host), state: String(h.state)}))
          .sort((a, b) => a.host.localeCompare(b.host, 'en', {numeric: true}));
        draw();
        if (hosts.length) for (const w of waiters.splice(0)) w();
      } catch (e) {
        console.warn(`liveprof: the fleet's hosts: ${e.message}`);
      }
    }
    timer = setTimeout(poll, hosts.length ? HOSTS_POLL_MS : HOSTS_RETRY_MS);
  }
  select.addEventListener('change', () => {
    if (select.value) onPick(select.value);
  });
  return {
    show() {
      if (!label.hidden) return;
      label.hidden = false;
      poll();
    },
    hide() {
      label.hidden = true;
      clearTimeout(timer);
    },
    set(host) {
      current = host;
      draw();
    },
    // The host to show when none was asked for: the first live one (else
    // the first), once /api/fleet lists any.
    async first() {
      if (!hosts.length) await new Promise((resolve) => waiters.push(resolve));
      return (hosts.find((h) => h.state === 'live') ?? hosts[0]).host;
    },
  };
}
