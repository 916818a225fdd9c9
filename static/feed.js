// The connection to the liveprof server: the WebSocket feed (/ws) for the
// published views and the trace viewer's binary tiles, REST (/api) for other
// windows, CSV, and tiles while the socket is down. Reconnects with backoff;
// a server of another protocol version is said plainly and not retried
// (docs/protocol.md, Versioning).

export const PROTOCOL_VERSION = 1;

const BACKOFF_MIN_MS = 500;
const BACKOFF_MAX_MS = 10000;
const REQUEST_TIMEOUT_MS = 5000;
// How long a tile waits for a socket that is still connecting before it goes over HTTP.
const CONNECT_WAIT_MS = 2000;

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
    this.tiles = new Map();  // trace request id -> {resolve, reject, timer, q}: awaiting its tile.
    this.tileId = 0;
    this.tileReader = null;  // the import of trace/tile_reader.js, on first use.
    this.liveWaiters = [];   // resolved when the socket says hello, or fails.
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

  // POST /api/<path> with query parameters (capture on demand); resolves to
  // the JSON answer, throws with the server's message.
  async post(path, params = {}) {
    const q = new URLSearchParams(params);
    if (this.token) q.set('token', this.token);
    const r = await fetch(`${this.httpBase}/api/${path}?${q}`,
      {method: 'POST', signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS)});
    const body = await r.text();
    let msg = null;
    try {
      msg = JSON.parse(body);
    } catch (e) { /* not JSON */ }
    if (!r.ok) throw new Error(`POST /api/${path}: HTTP ${r.status}: ${msg?.message ?? body}`);
    return msg;
  }

  // GET /api/<topic> with query parameters; resolves to JSON, or text for
  // csv. Throws with the server's message, the HTTP status as `status`.
  async get(topic, params = {}, {timeoutMs = REQUEST_TIMEOUT_MS} = {}) {
    const q = new URLSearchParams(params);
    if (this.token) q.set('token', this.token);
    const qs = q.toString();
    const r = await fetch(`${this.httpBase}/api/${topic}${qs ? `?${qs}` : ''}`,
      {signal: AbortSignal.timeout(timeoutMs)});
    const body = await r.text();
    if (!r.ok) {
      let message = body;
      try {
        message = JSON.parse(body).message;
      } catch (e) { /* not JSON: the text as it is */ }
      const err = new Error(`GET /api/${topic}: HTTP ${r.status}: ${message}`);
      err.status = r.status;
      throw err;
    }
    if (params.format === 'csv') return body;
    const msg = JSON.parse(body);
    if (msg.v !== undefined && msg.v !== PROTOCOL_VERSION) this.mismatch(msg.v);  // (one event's details carry no v)
    return msg;
  }

  send(msg) {
    this.ws.send(JSON.stringify(msg));
  }

  // A trace-viewer tile: /api/trace's answer to the query `q` ({t0, t1,
  // width}, each optional). Over the WebSocket (a `trace` request answered
  // by a binary TraceTile frame with its id) while the socket is open and
  // its server offers tiles; else, or when the socket closes first, over
  // HTTP. Resolves to {tile, via: 'ws' | 'http'}; `tile` is the JSON's shape
  // either way.
  async traceTile(q) {
    // A socket not open yet (the page is loading: not started, or
    // connecting) is worth a short wait; one waiting out a backoff is not.
    const connecting = this.ws || this.timer === null;
    if (!this.open() && !this.stopped && connecting) await this.waitLive(CONNECT_WAIT_MS);
    const reader = this.open() && this.hello.trace ? await this.loadTileReader() : null;
    if (!reader || !this.open()) return {tile: await this.get('trace', q), via: 'http'};
    const id = this.tileId = (this.tileId + 1) % 2 ** 32;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {  // no answer on the socket: asked over HTTP.
        this.tiles.delete(id);
        console.warn(`liveprof: trace tile ${id}: no answer on the WebSocket in ${REQUEST_TIMEOUT_MS} ms`);
        this.get('trace', q).then((tile) => resolve({tile, via: 'http'}), reject);
      }, REQUEST_TIMEOUT_MS);
      this.tiles.set(id, {resolve, reject, timer, q});
      this.send({type: 'trace', id, ...q});
    });
  }

  open() {
    return !!this.ws && this.ws.readyState === WebSocket.OPEN && !!this.hello;
  }

  // Resolves once the socket has said hello, failed, or `ms` passed.
  waitLive(ms) {
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, ms);
      this.liveWaiters.push(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }
  wakeLiveWaiters() {
    for (const wake of this.liveWaiters.splice(0)) wake();
  }

  // The binary tile reader needs FlatBuffers' runtime in static/vendor/
  // (scripts/setup.sh): imported on first use; without it, tiles come over HTTP.
  loadTileReader() {
    this.tileReader ??= import('./trace/tile_reader.js').then((reader) => {
      reader.setKindNames(this.hello?.events?.kinds);
      return reader;
    }).catch((e) => {
      console.warn(`liveprof: trace tiles over HTTP: the binary reader did not load (${e.message}); run ./scripts/setup.sh`);
      return null;
    });
    return this.tileReader;
  }

  // A binary message: a tile someone is waiting for (events frames are not
  // this page's).
  async onBinary(data) {
    const reader = await this.tileReader;
    let got = null;
    try {
      got = reader?.readTraceTile(data);
    } catch (e) {
      console.warn(`liveprof: ${e.message}`);
    }
    const waiting = got && this.tiles.get(got.id);
    if (!waiting) return;
    this.tiles.delete(got.id);
    clearTimeout(waiting.timer);
    waiting.resolve({tile: got.tile, via: 'ws'});
  }

  // An error naming a tile request that is waiting fails it (true); other
  // errors are not a tile's (false).
  failTile(msg) {
    const waiting = this.tiles.get(msg.id);
    if (!waiting) return false;
    this.tiles.delete(msg.id);
    clearTimeout(waiting.timer);
    waiting.reject(new Error(`trace: ${msg.code}: ${msg.message}`));
    return true;
  }
  // The socket closed (or is given up): the tile requests still waiting are
  // asked over HTTP.
  tilesOverHttp() {
    for (const w of this.tiles.values()) {
      clearTimeout(w.timer);
      this.get('trace', w.q).then((tile) => w.resolve({tile, via: 'http'}), w.reject);
    }
    this.tiles.clear();
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
      this.wakeLiveWaiters();
      this.retry(String(e));
      return;
    }
    this.ws = ws;
    ws.binaryType = 'arraybuffer';  // trace tiles, read as they come
    ws.onmessage = (m) => {
      if (typeof m.data !== 'string') return this.onBinary(m.data);
      let msg;
      try {
        msg = JSON.parse(m.data);
      } catch (e) {
        console.error('liveprof: a message that is not JSON', e);
        return;
      }
      if (msg.type === 'hello') return this.onHello(msg);
      if (msg.type === 'error' && this.failTile(msg)) return;
      if (msg.type === 'error') return console.warn(`liveprof server: ${msg.code}: ${msg.message}`);
      if (msg.type === 'subscribed') return;
      if (msg.v !== PROTOCOL_VERSION) return this.mismatch(msg.v);
      this.onView(msg);
    };
    ws.onclose = (e) => {
      if (this.ws !== ws || this.stopped) return;
      this.ws = null;
      this.tilesOverHttp();
      this.wakeLiveWaiters();
      this.retry(e.code === 1006 ? 'the server cannot be reached' : `closed (${e.code}${e.reason ? `: ${e.reason}` : ''})`);
    };
  }

  onHello(hello) {
    if (hello.v !== PROTOCOL_VERSION) return this.mismatch(hello.v, hello.server);
    this.hello = hello;
    this.tileReader?.then((reader) => reader?.setKindNames(hello.events?.kinds));  // a restarted server's.
    this.attempt = 0;
    this.wakeLiveWaiters();
    this.onState({phase: 'live', detail: `liveprof ${hello.server}, protocol v${hello.v}`, server: hello.server});
    const offered = new Set(hello.topics);
    const topics = [...this.topics].filter((t) => offered.has(t));
    if (topics.length) this.send({type: 'subscribe', topics});
  }

  mismatch(v, server = '') {
    this.stopped = true;
    if (this.ws) this.ws.close(1000, 'protocol version mismatch');
    this.ws = null;  // (its close event is then not ours: the tiles waiting go over HTTP here)
    this.tilesOverHttp();
    this.wakeLiveWaiters();
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
