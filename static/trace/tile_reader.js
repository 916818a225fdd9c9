// The trace viewer's binary tiles: a reader of liveprof.fbs's Frame with a
// TraceTile body (docs/protocol.md), the answer to a WebSocket `trace`
// request. It gives the very object /api/trace's JSON parses to for the same
// query, so the viewer (draw.js's prepareTile) takes either.
//
// Written by hand on FlatBuffers' JavaScript runtime (static/vendor/, copied
// there by scripts/setup.sh): flatc's reader is TypeScript, and this page is
// served without a compiler. The offsets below are the schema's: a table's
// field n has vtable slot 4 + 2n; structs lie as flatc lays them out (sizes
// and offsets in the comments; tests/web/trace_tile_test.cc checks them on
// the C++ side, tests/dashboard/trace_viewer_test.mjs that a tile read here
// equals /api/trace's JSON).
import {ByteBuffer} from '../vendor/flatbuffers/flatbuffers.js';

export const FILE_IDENTIFIER = 'LPF1';
export const FRAME_VERSION = 1;
const BODY_TRACE_TILE = 2;  // Body: NONE 0, EventFrame 1, TraceTile 2.

// EventKind values and their names: liveprof.fbs's `enum EventKind`, as the
// server's hello lists them (events.kinds, from flatc's generated code);
// feed.js hands them over with setKindNames before the first tile.
let kindNames = new Map();
export function setKindNames(kinds) {
  kindNames = new Map(Object.entries(kinds ?? {}).map(([value, name]) => [Number(value), name]));
}
// TileTrackType: the JSON's "type"; 0 (none) is a track the store never had defined.
const TRACK_TYPES = ['', 'host_thread', 'gpu_stream', 'counter', 'process', 'steps', 'framework_ops', 'memory'];

// A uint64 as a number: the two halves, added once (rounded as JSON.parse
// rounds the same integer; ids and ns stay far below 2^53).
function u64(bb, at) {
  return bb.readUint32(at) + bb.readUint32(at + 4) * 2 ** 32;
}

// Field n of the table at `pos`: where its value is, or 0 when it is absent.
function field(bb, pos, n) {
  const o = bb.__offset(pos, 4 + 2 * n);
  return o ? pos + o : 0;
}
const uint = (bb, pos, n) => { const at = field(bb, pos, n); return at ? bb.readUint32(at) : 0; };
const ubyte = (bb, pos, n) => { const at = field(bb, pos, n); return at ? bb.readUint8(at) : 0; };
const ulong = (bb, pos, n) => { const at = field(bb, pos, n); return at ? u64(bb, at) : 0; };
const double = (bb, pos, n) => { const at = field(bb, pos, n); return at ? bb.readFloat64(at) : 0; };
const string = (bb, pos, n) => { const at = field(bb, pos, n); return at ? bb.__string(at) : null; };
const table = (bb, pos, n) => { const at = field(bb, pos, n); return at ? bb.__indirect(at) : 0; };

// A vector field: {start, length}, empty when absent. `size`: its element's
// bytes; a vector running past the buffer is an error, not garbage.
function vector(bb, pos, n, size) {
  const at = field(bb, pos, n);
  if (!at) return {start: 0, length: 0};
  const start = bb.__vector(at);
  const length = bb.__vector_len(at);
  if (start + length * size > bb.capacity()) throw new Error(`trace tile: a vector of ${length} runs past the frame`);
  return {start, length};
}

// A JSON number's value: the JSON writes a non-finite double as null.
const finite = (x) => (Number.isFinite(x) ? x : null);

function readTrack(bb, pos) {
  const type = TRACK_TYPES[ubyte(bb, pos, 1)] ?? '';
  const out = {track: uint(bb, pos, 0)};
  if (type) Object.assign(out, {name: string(bb, pos, 2) ?? '', type, device: ubyte(bb, pos, 3), os_id: ulong(bb, pos, 4)});
  // TileSlice, 32 bytes: id 0, ts 8, dur 16, name 24 (uint), depth 28, kind 29 (ubyte).
  const sv = vector(bb, pos, 5, 32);
  out.slices = new Array(sv.length);
  for (let i = 0, at = sv.start; i < sv.length; i++, at += 32) {
    const kind = bb.readUint8(at + 29);
    out.slices[i] = [u64(bb, at), u64(bb, at + 8), u64(bb, at + 16), bb.readUint32(at + 24), bb.readUint8(at + 28),
      kindNames.get(kind) ?? 'unknown'];
  }
  // TileSummary, 24 bytes: px 0, count 4 (uint), busy_e4 8 (ushort), longest 12 (uint), longest_dur 16.
  // TileCounterValue, 16 bytes: max_value 0, last_value 8 (double); counter rows only, one per summary.
  const pv = vector(bb, pos, 6, 24);
  const cv = type === 'counter' || type === 'memory' ? vector(bb, pos, 7, 16) : {length: 0};
  out.summaries = new Array(pv.length);
  for (let i = 0, at = pv.start; i < pv.length; i++, at += 24) {
    const s = [bb.readUint32(at), bb.readUint32(at + 4), bb.readUint16(at + 8) / 10000, bb.readUint32(at + 12),
      u64(bb, at + 16)];
    if (i < cv.length) s.push(finite(bb.readFloat64(cv.start + 16 * i)), finite(bb.readFloat64(cv.start + 16 * i + 8)));
    out.summaries[i] = s;
  }
  // TileHeld, 16 bytes inline: ts 0, value 8 (double); a counter row's level at t0.
  const held = field(bb, pos, 8);
  if (held) out.held = [u64(bb, held), finite(bb.readFloat64(held + 8))];
  return out;
}

// The tile in binary frame `data` (an ArrayBuffer or a Uint8Array):
// {id, tile}, `tile` shaped as /api/trace's JSON. null for a frame of
// another body (an events frame); throws on a frame that is not liveprof's.
export function readTraceTile(data) {
  const bytes = data instanceof Uint8Array ? data : new Uint8Array(data);
  if (bytes.length < 8) throw new Error(`trace tile: ${bytes.length} bytes is no frame`);
  const bb = new ByteBuffer(bytes);
  if (!bb.__has_identifier(FILE_IDENTIFIER)) throw new Error('trace tile: not a liveprof frame (no LPF1)');
  const frame = bb.readInt32(0);  // the root table: Frame {version, body_type, body}.
  if (ubyte(bb, frame, 1) !== BODY_TRACE_TILE) return null;
  const version = uint(bb, frame, 0);
  if (version !== FRAME_VERSION) throw new Error(`trace tile: frame version ${version}, this page reads ${FRAME_VERSION}`);
  const t = table(bb, frame, 2);
  const tile = {type: 'trace', v: 1,  // as the JSON's head
    t0: ulong(bb, t, 1), t1: ulong(bb, t, 2), width_px: uint(bb, t, 3), ns_per_px: double(bb, t, 4),
    first_ns: ulong(bb, t, 5), last_ns: ulong(bb, t, 6), dropped_events: ulong(bb, t, 7), events: ulong(bb, t, 8),
    unstored_events: ulong(bb, t, 9), disk_bytes: ulong(bb, t, 10), spilled_chunks: ulong(bb, t, 11),
    read_errors: ulong(bb, t, 12)};
  const spill = string(bb, t, 13);
  if (spill !== null) tile.spill_error = spill;
  const tv = vector(bb, t, 14, 4);
  tile.tracks = new Array(tv.length);
  for (let i = 0; i < tv.length; i++) tile.tracks[i] = readTrack(bb, bb.__indirect(tv.start + 4 * i));
  // TileFlow, 16 bytes: from 0, to 8.
  const fv = vector(bb, t, 15, 16);
  tile.flows = new Array(fv.length);
  for (let i = 0, at = fv.start; i < fv.length; i++, at += 16) tile.flows[i] = [u64(bb, at), u64(bb, at + 8)];
  // TileFlowEnd, 40 bytes: id 0, ts 8, dur 16, track 24, name 28 (uint), kind 32 (ubyte): the JSON's
  // [id, track, ts, dur, name, kind].
  const ev = vector(bb, t, 17, 40);
  tile.flow_ends = new Array(ev.length);
  for (let i = 0, at = ev.start; i < ev.length; i++, at += 40) {
    tile.flow_ends[i] = [u64(bb, at), bb.readUint32(at + 24), u64(bb, at + 8), u64(bb, at + 16), bb.readUint32(at + 28),
      kindNames.get(bb.readUint8(at + 32)) ?? 'unknown'];
  }
  // NameDef tables {id, name}: the JSON's names object, keyed by the id's digits.
  const nv = vector(bb, t, 16, 4);
  tile.names = {};
  for (let i = 0; i < nv.length; i++) {
    const n = bb.__indirect(nv.start + 4 * i);
    tile.names[uint(bb, n, 0)] = string(bb, n, 1) ?? '';
  }
  return {id: uint(bb, t, 0), tile};
}
