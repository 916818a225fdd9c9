// MemoryStateSnapshot as JSON (a columnar timeline) and as CSV. The state
// itself is kept in memory_state.cc.
#include <string>

#include "aggregators/tf/memory_state.h"
#include "base/json_writer.h"

namespace liveprof {

namespace {

void AppendU64(std::string* out, uint64_t v) { *out += std::to_string(v); }

}  // namespace

void MemoryStateSnapshot::WriteJson(JsonWriter& w) const {
  w.BeginObject();
  w.KV("window_ns", window_ns);
  w.KV("now_ns", now_ns);
  w.Key("memories");
  w.BeginArray();
  for (const Memory& m : memories) {
    w.BeginObject();
    w.KV("id", m.id);
    w.KV("allocator", m.allocator);
    w.KV("host", m.host);
    w.KV("device", static_cast<uint32_t>(m.device));
    w.KV("num_allocations", m.num_allocations);
    w.KV("num_deallocations", m.num_deallocations);
    w.KV("capacity_bytes", m.capacity_bytes);
    w.Key("reserved_bytes");
    if (m.reserved_bytes) {
      w.UInt(*m.reserved_bytes);
    } else {
      w.Null();
    }
    w.KV("lifetime_peak_heap_bytes", m.lifetime_peak_heap_bytes);
    w.KV("lifetime_peak_heap_ts_ns", m.lifetime_peak_heap_ts_ns);
    w.KV("live_allocations", m.live_allocations);
    w.KV("stack_bytes", m.stack_bytes);
    w.KV("heap_bytes", m.heap_bytes);
    w.KV("free_bytes", m.free_bytes);
    w.KV("fragmentation_pct", m.fragmentation_pct);
    w.KV("has_peak", m.has_peak);
    w.KV("peak_bytes", m.peak_bytes);
    w.KV("peak_ts_ns", m.peak_ts_ns);
    w.KV("peak_stack_bytes", m.peak_stack_bytes);
    w.KV("peak_heap_bytes", m.peak_heap_bytes);
    w.KV("peak_free_bytes", m.peak_free_bytes);
    w.Key("peak_fragmentation_pct");
    if (m.peak_fragmentation_pct) {
      w.Double(*m.peak_fragmentation_pct);
    } else {
      w.Null();
    }
    w.KV("peak_fragmentation_ts_ns", m.peak_fragmentation_ts_ns);
    w.KV("live_map_incomplete", m.live_map_incomplete);
    w.KV("breakdown_at_peak", m.breakdown_at_peak);
    w.KV("peak_allocations", m.peak_allocations);
    w.KV("peak_attributed_allocations", m.peak_attributed_allocations);
    w.KV("peak_attributed_bytes", m.peak_attributed_bytes);
    w.KV("peak_unseen_allocations", m.peak_unseen_allocations);
    w.KV("peak_unseen_bytes", m.peak_unseen_bytes);
    w.Key("breakdown");
    w.BeginArray();
    for (const BreakdownRow& r : m.breakdown) {
      w.BeginObject();
      w.KV("op", r.op);
      w.KV("bytes", r.bytes);
      w.KV("occurrences", r.occurrences);
      w.KV("total_bytes", r.total_bytes);
      w.KV("requested_bytes", r.requested_bytes);
      w.KV("region", r.region);
      w.KV("data_type", r.data_type);
      w.KV("shape", r.shape);
      w.EndObject();
    }
    w.EndArray();
    w.Key("breakdown_by_op");
    w.BeginArray();
    for (const OpRow& r : m.breakdown_by_op) {
      w.BeginObject();
      w.KV("op", r.op);
      w.KV("bytes", r.bytes);
      w.KV("allocations", r.allocations);
      w.EndObject();
    }
    w.EndArray();
    w.Key("timeline");
    w.BeginObject();
    auto column = [&](std::string_view key, auto field) {
      w.Key(key);
      w.BeginArray();
      for (const Point& p : m.timeline) w.UInt(p.*field);
      w.EndArray();
    };
    column("ts_ns", &Point::ts_ns);
    column("stack_bytes", &Point::stack_bytes);
    column("heap_bytes", &Point::heap_bytes);
    column("free_bytes", &Point::free_bytes);
    w.Key("fragmentation_pct");
    w.BeginArray();
    for (const Point& p : m.timeline) {
      if (p.fragmentation_pct) {
        w.Double(*p.fragmentation_pct);
      } else {
        w.Null();
      }
    }
    w.EndArray();
    w.EndObject();
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
}

std::string MemoryStateSnapshot::ToCsv() const {
  std::string out =
      "id,num_allocations,num_deallocations,capacity_bytes,reserved_bytes,"
      "lifetime_peak_heap_bytes,peak_bytes,peak_ts_ns,peak_stack_bytes,peak_heap_bytes,"
      "peak_free_bytes,peak_fragmentation_pct,live_allocations,stack_bytes,heap_bytes,"
      "free_bytes,fragmentation_pct\n";
  for (const Memory& m : memories) {
    AppendCsvField(&out, m.id);
    for (const uint64_t v : {m.num_allocations, m.num_deallocations, m.capacity_bytes}) {
      out += ',';
      AppendU64(&out, v);
    }
    out += ',';
    if (m.reserved_bytes) AppendU64(&out, *m.reserved_bytes);
    for (const uint64_t v : {m.lifetime_peak_heap_bytes, m.peak_bytes, m.peak_ts_ns, m.peak_stack_bytes,
                             m.peak_heap_bytes, m.peak_free_bytes}) {
      out += ',';
      AppendU64(&out, v);
    }
    out += ',';
    if (m.peak_fragmentation_pct) AppendCsvNumber(&out, *m.peak_fragmentation_pct);
    for (const uint64_t v : {m.live_allocations, m.stack_bytes, m.heap_bytes, m.free_bytes}) {
      out += ',';
      AppendU64(&out, v);
    }
    out += ',';
    AppendCsvNumber(&out, m.fragmentation_pct);
    out += '\n';
  }
  return out;
}

}  // namespace liveprof
