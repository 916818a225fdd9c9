// The connection to the liveprof server: the WebSocket feed (/ws) for the
// published views, REST (/api) for other windows and CSV. Reconnects with
// backoff; a server of another protocol version is said plainly and not
// retried (docs/protocol.md, Versioning).

export const PROTOCOL_VERSION = 1;

const BACKOFF_MIN_MS = 500;
const BACKOFF_MAX_MS = 10000;
const REQUEST_TIMEOUT_MS = 5000;

// state: {phase, detail, retryAt, server}. phase is one of
//   connecting | live | reconnecting | version_mismatch
export class Feed {
  constructor({onView, onState, token = null, location = window.location}) {
    this.onView = onView;
    this.onState = onState;
    this.token = token;
    this.base = `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/ws`;
    this.httpBase = `${location.protocol}//${location.host}`;
    this.topics = new Set();
    this.ws = null;
    this.attempt = 0;
    this.timer = null;
    this.stopped = false;
    this.hello = null;
  }

  start() {
    this.connect();
  }

  // The view topics wanted now; subscribes and unsubscribes the difference.
  setTopics(topics) {
    const next = new Set(topics);
    const added = [...next].filter((t) => !this.topics.has(t));
    const removed = [...this.topics].filter((t) => !next.has(t));
    this.topics = next;
    if (!this.ws || this.ws.readyState !== WebSocket.OPEN || !this.hello) return;
    if (added.length) this.send({type: 'subscribe', topics: added});
    if (removed.length) this.send({type: 'unsubscribe', topics: removed});
  }

  // GET /api/<topic> with query parameters; resolves to JSON, or text for csv.
  async get(topic, params = {}) {
    const q = new URLSearchParams(params);
    if (this.token) q.set('token', this.token);
    const qs = q.toString();
    const r = await fetch(`${this.httpBase}/api/${topic}${qs ? `?${qs}` : ''}`,
      {signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS)});
    const body = await r.text();
    if (!r.ok) {
      let message = body;
      try {
        message = JSON.parse(body).message;
      } catch (e) { /* not JSON: the text as it is */ }
      throw new Error(`GET /api/${topic}: HTTP ${r.status}: ${message}`);
    }
    if (params.format === 'csv') return body;
    const msg = JSON.parse(body);
    if (msg.v !== undefined && msg.v !== PROTOCOL_VERSION) this.mismatch(msg.v);  // (one event's details carry no v)
    return msg;
  }

  send(msg) {
    this.ws.send(JSON.stringify(msg));
  }

  connect() {
    clearTimeout(this.timer);
    this.hello = null;
    this.onState({phase: this.attempt ? 'reconnecting' : 'connecting', detail: 'connecting…'});
    // A browser cannot set headers on a WebSocket: the token travels as a
    // subprotocol, or, when it has characters a subprotocol may not, in the URL.
    const protocols = ['liveprof'];
    let url = this.base;
    if (this.token && /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(this.token)) {
      protocols.push(`liveprof.token.${this.token}`);
    } else if (this.token) {
      url += `?token=${encodeURIComponent(this.token)}`;
    }
    let ws;
    try {
      ws = new WebSocket(url, protocols);
    } catch (e) {
      this.retry(String(e));
      return;
    }
    this.ws = ws;
    ws.onmessage = (m) => {
      if (typeof m.data !== 'string') return;  // events frames: the trace viewer's.
      let msg;
      try {
        msg = JSON.parse(m.data);
      } catch (e) {
        console.error('liveprof: a message that is not JSON', e);
        return;
      }
      if (msg.type === 'hello') return this.onHello(msg);
      if (msg.type === 'error') return console.warn(`liveprof server: ${msg.code}: ${msg.message}`);
      if (msg.type === 'subscribed') return;
      if (msg.v !== PROTOCOL_VERSION) return this.mismatch(msg.v);
      this.onView(msg);
    };
    ws.onclose = (e) => {
      if (this.ws !== ws || this.stopped) return;
      this.ws = null;
      this.retry(e.code === 1006 ? 'the server cannot be reached' : `closed (${e.code}${e.reason ? `: ${e.reason}` : ''})`);
    };
  }

  onHello(hello) {
    if (hello.v !== PROTOCOL_VERSION) return this.mismatch(hello.v, hello.server);
    this.hello = hello;
    this.attempt = 0;
    this.onState({phase: 'live', detail: `liveprof ${hello.server}, protocol v${hello.v}`, server: hello.server});
    const offered = new Set(hello.topics);
    const topics = [...this.topics].filter((t) => offered.has(t));
    if (topics.length) this.send({type: 'subscribe', topics});
  }

  mismatch(v, server = '') {
    this.stopped = true;
    if (this.ws) this.ws.close(1000, 'protocol version mismatch');
    this.ws = null;
    this.onState({
      phase: 'version_mismatch',
      detail: `This dashboard speaks liveprof protocol v${PROTOCOL_VERSION}, but the server` +
        `${server ? ` (liveprof ${server})` : ''} speaks v${v}. Load the dashboard that server ` +
        `serves (reload this page from it), or run a liveprof of the same version.`,
    });
  }

  retry(why) {
    const delay = Math.min(BACKOFF_MAX_MS, BACKOFF_MIN_MS * 2 ** this.attempt) * (0.8 + 0.4 * Math.random());
    this.attempt++;
    const retryAt = Date.now() + delay;
    this.onState({phase: 'reconnecting', detail: why, retryAt});
    this.timer = setTimeout(() => this.connect(), delay);
  }
}
