// A raw ingest sender for the browser tests: frames of src/stream/liveprof.fbs
// (IngestHello, IngestBatch) built with the FlatBuffers runtime and written
// to a `liveprof serve --ingest unix:PATH` socket, so a test can send what
// the real senders never should (an event on a track never defined).
import {createConnection} from 'node:net';
import * as flatbuffers from 'flatbuffers';

// The Body union's types and the Frame's identifier (liveprof.fbs).
const BODY_INGEST_HELLO = 3;
const BODY_INGEST_BATCH = 4;
const BODY_INGEST_PING = 6;
const BODY_INGEST_PONG = 7;
const FILE_IDENTIFIER = 'LPF1';
export const KIND_HOST_SPAN = 10;  // EventKind::kHostSpan (src/stream/event.h)

// One Frame whose body `body(builder)` builds, as the C++ ends write it
// (src/ingest/ingest_wire.h): its u32 size, then the FlatBuffers bytes
// (aligned from their own start, not the prefix's) padded with zeros.
function frame(bodyType, body) {
  const b = new flatbuffers.Builder(1024);
  const bodyOffset = body(b);
  b.startObject(3);
  b.addFieldInt32(0, 1, 0);  // version
  b.addFieldInt8(1, bodyType, 0);
  b.addFieldOffset(2, bodyOffset, 0);
  b.finish(b.endObject(), FILE_IDENTIFIER);
  const bytes = b.asUint8Array();
  const size = bytes.length + (8 - ((4 + bytes.length) % 8)) % 8;
  const out = Buffer.alloc(4 + size);
  out.writeUInt32LE(size, 0);
  out.set(bytes, 4);
  return out;
}

export function helloFrame({rank, clockNs, host = 'dashboard-test', pid = 1, program = 'ingest_client.mjs'}) {
  return frame(BODY_INGEST_HELLO, (b) => {
    const h = b.createString(host);
    const p = b.createString(program);
    b.startObject(7);
    b.addFieldInt32(0, 1, 0);  // protocol
    b.addFieldOffset(1, h, 0);
    b.addFieldInt64(2, BigInt(pid), 0n);
    b.addFieldInt32(3, rank, -1);
    b.addFieldOffset(4, p, 0);
    b.addFieldInt64(5, BigInt(clockNs), 0n);
    return b.endObject();
  });
}

export const KIND_COUNTER = 40;    // EventKind::kCounter: payload.counter.value, a double.

// A double's bits as the int64 the payload's first word holds.
function doubleBits(v) {
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, v, true);
  return view.getBigInt64(0, true);
}

// names: [{id, name}]; tracks: [{id, name}] (host threads); events: [{ts,
// dur, name, track, kind, value}] (48-byte Event structs, written as the C++
// struct; `value`: a counter sample's); cost: liveprof's own cost in the
// sender's process, an IngestCost without threads: {atNs, rssBytes, hookNs,
// hookCalls, steps, cuptiOverheadNs}.
export function batchFrame({seq, names = [], tracks = [], events = [], cost = null}) {
  return frame(BODY_INGEST_BATCH, (b) => {
    let costOffset = 0;
    if (cost) {
      b.startObject(7);
      b.addFieldInt64(0, BigInt(cost.atNs), 0n);
      b.addFieldInt64(1, BigInt(cost.rssBytes ?? 0), 0n);
      b.addFieldInt64(3, BigInt(cost.hookNs ?? 0), 0n);
      b.addFieldInt64(4, BigInt(cost.hookCalls ?? 0), 0n);
      b.addFieldInt64(5, BigInt(cost.steps ?? 0), 0n);
      b.addFieldInt64(6, BigInt(cost.cuptiOverheadNs ?? 0), 0n);
      costOffset = b.endObject();
    }
    const nameDefs = names.map(({id, name}) => {
      const s = b.createString(name);
      b.startObject(2);
      b.addFieldInt32(0, id, 0);
      b.addFieldOffset(1, s, 0);
      return b.endObject();
    });
    const trackDefs = tracks.map(({id, name}) => {
      b.startObject(4);
      b.addFieldInt32(0, id, 0);
      b.addFieldInt32(1, name, 0);
      return b.endObject();
    });
    const offsets = (list) => {
      b.startVector(4, list.length, 4);
      for (let i = list.length - 1; i >= 0; i--) b.addOffset(list[i]);
      return b.endVector();
    };
    const namesVec = offsets(nameDefs);
    const tracksVec = offsets(trackDefs);
    b.startVector(48, events.length, 8);
    for (let i = events.length - 1; i >= 0; i--) {  // a struct's fields, last first.
      const e = events[i];
      b.prep(8, 48);
      b.writeInt64(0n);  // payload1
      b.writeInt64(e.value === undefined ? 0n : doubleBits(e.value));  // payload0
      b.writeInt8(0);    // device
      b.writeInt8(0);    // flags
      b.writeInt8(0);    // sub
      b.writeInt8(e.kind ?? KIND_HOST_SPAN);
      b.writeInt32(0);   // corr
      b.writeInt32(e.track);
      b.writeInt32(e.name);
      b.writeInt64(BigInt(e.dur));
      b.writeInt64(BigInt(e.ts));
    }
    const eventsVec = b.endVector();
    b.startObject(7);
    b.addFieldInt64(0, BigInt(seq), 0n);
    b.addFieldOffset(1, namesVec, 0);
    b.addFieldOffset(2, tracksVec, 0);
    b.addFieldOffset(3, eventsVec, 0);
    if (costOffset) b.addFieldOffset(6, costOffset, 0);
    return b.endObject();
  });
}

// The pong to a server's ping: its id and clock echoed, with the sender's.
function pongFrame(id, serverNs, senderNs) {
  return frame(BODY_INGEST_PONG, (b) => {
    b.startObject(3);
    b.addFieldInt32(0, id, 0);
    b.addFieldInt64(1, serverNs, 0n);
    b.addFieldInt64(2, senderNs, 0n);
    return b.endObject();
  });
}

// Each whole frame in `buf` (u32 size, then a Frame): calls f(bodyType, bb,
// body) and returns the bytes left over.
function readFrames(buf, f) {
  while (buf.length >= 4) {
    const size = buf.readUInt32LE(0);
    if (buf.length < 4 + size) break;
    const bb = new flatbuffers.ByteBuffer(new Uint8Array(buf.subarray(4, 4 + size)));
    const root = bb.readInt32(0);
    const typeAt = bb.__offset(root, 6);
    const bodyAt = bb.__offset(root, 8);
    if (typeAt && bodyAt) f(bb.readUint8(root + typeAt), bb, bb.__indirect(root + bodyAt));
    buf = buf.subarray(4 + size);
  }
  return buf;
}

// Connects to a unix socket; resolves with the socket once connected. What
// the server sends (acks, pings) is read and ignored, unless `pong` is
// given ({clockNs}: the sender's clock at its hello): then each ping is
// answered, with that clock advanced by the time since the connection, as
// a real sender does (the server closes a source that answers no ping for
// 5 s: a test that keeps a raw connection longer needs it).
export function connectIngest(socketPath, {pong = null} = {}) {
  return new Promise((resolve, reject) => {
    const s = createConnection({path: socketPath}, () => resolve(s));
    s.on('error', reject);
    const start = process.hrtime.bigint();
    let pending = Buffer.alloc(0);
    s.on('data', (data) => {
      if (!pong) return;
      pending = readFrames(Buffer.concat([pending, data]), (type, bb, body) => {
        if (type !== BODY_INGEST_PING) return;
        const idAt = bb.__offset(body, 4);
        const serverAt = bb.__offset(body, 6);
        const id = idAt ? bb.readUint32(body + idAt) : 0;
        const serverNs = serverAt ? bb.readUint64(body + serverAt) : 0n;
        s.write(pongFrame(id, serverNs, BigInt(pong.clockNs) + (process.hrtime.bigint() - start)));
      });
    });
  });
}
