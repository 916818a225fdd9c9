#include "ingest/ingest_status.h"

#include "base/json_writer.h"
#include "base/self_cost.h"

namespace liveprof {

std::string IngestSourcesJson(const std::vector<IngestServer::SourceStatus>& sources, uint64_t now_ns) {
  JsonWriter w;
  w.BeginArray();
  for (const IngestServer::SourceStatus& s : sources) {
    w.BeginObject();
    w.KV("id", s.id);
    w.KV("endpoint", s.endpoint);
    w.KV("label", s.label);
    w.KV("host", s.host);
    w.KV("pid", s.pid);
    w.KV("rank", static_cast<int64_t>(s.rank));
    w.KV("program", s.program);
    w.KV("peer", s.peer);
    w.KV("connected", s.connected);
    w.KV("closed_reason", s.closed_reason);
    w.KV("closed_cleanly", s.closed_cleanly);
    w.KV("frames", s.frames);
    w.KV("batches", s.batches);
    w.KV("acked_seq", s.acked_seq);
    w.KV("unacked_batches", s.unacked_batches);
    w.KV("events", s.events);
    w.KV("lost_batches", s.lost_batches);
    w.KV("sender_dropped", s.sender_dropped);
    w.KV("ring_dropped", s.ring_dropped);
    w.KV("clock_offset_ns", s.clock_offset_ns);
    w.KV("best_rtt_ns", s.best_rtt_ns);
    w.KV("worker", static_cast<uint64_t>(s.worker));
    w.KV("duplicate_batches", s.duplicate_batches);
    w.KV("future_dropped", s.future_dropped);
    w.KV("refused_events", s.refused_events);
    w.Key("refused");  // by reason, each with its first event's message.
    w.BeginArray();
    for (const IngestRefusal& r : s.refused) {
      w.BeginObject();
      w.KV("reason", r.reason);
      w.KV("events", r.events);
      w.KV("example", r.example);
      w.EndObject();
    }
    w.EndArray();
    w.Key("capture");
    if (!s.capture.known) {
      w.Null();
    } else {
      w.BeginObject();
      w.KV("control_id", static_cast<uint64_t>(s.capture.control_id));
      w.KV("host_level", static_cast<int64_t>(s.capture.host_level));
      w.KV("python_scopes", s.capture.python_scopes);
      w.KV("gpu", s.capture.gpu);
      w.KV("gpu_available", s.capture.gpu_available);
      w.Key("gpu_level");  // the GPU producer's capture level; null: none.
      if (s.capture.gpu_level < 0) {
        w.Null();
      } else {
        w.String(s.capture.gpu_level == 1 ? "full" : "default");
      }
      w.KV("until_ns", s.capture.until_ns);
      w.KV("seconds_left", s.capture.until_ns > now_ns ? static_cast<double>(s.capture.until_ns - now_ns) / 1e9 : 0.0);
      w.EndObject();
    }
    w.Key("cost");  // liveprof's own cost in its process (IngestBatch.cost); null: none said.
    if (s.cost.now.at_ns == 0) {
      w.Null();
    } else {
      w.BeginObject();
      WriteSelfCostFields(w, s.cost.prev, s.cost.now);
      WriteHookCostFields(w, s.cost);  // (the time its hooks add per step)
      w.EndObject();
    }
    w.EndObject();
  }
  w.EndArray();
  return w.Take();
}

}  // namespace liveprof
