// OpStatsSnapshot as JSON and CSV (the TF-stats view and its download).
#include <string>

#include "aggregators/tf/op_stats.h"
#include "base/json_writer.h"

namespace liveprof {

namespace {

void WriteSide(JsonWriter& w, const OpStatsSide& side) {
  w.BeginObject();
  w.KV("total_us", static_cast<double>(side.total_ns) / 1e3);
  w.KV("op_us", static_cast<double>(side.op_ns) / 1e3);
  w.KV("idle_us", static_cast<double>(side.idle_ns) / 1e3);
  w.Key("rows");
  w.BeginArray();
  for (const OpStatsRow& r : side.rows) {
    w.BeginObject();
    w.KV("rank", r.rank);
    w.KV("side", r.side);
    w.KV("type", r.type);
    w.KV("name", r.name);
    w.KV("occurrences", r.occurrences);
    w.KV("total_us", r.total_us);
    w.KV("avg_us", r.avg_us);
    w.KV("self_us", r.self_us);
    w.KV("avg_self_us", r.avg_self_us);
    w.KV("self_pct", r.self_pct);
    w.KV("cumulative_pct", r.cumulative_pct);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
}

void AppendCsvRow(std::string* out, const OpStatsRow& r) {
  *out += std::to_string(r.rank);
  out->push_back(',');
  AppendCsvField(out, r.side);
  out->push_back(',');
  AppendCsvField(out, r.type);
  out->push_back(',');
  AppendCsvField(out, r.name);
  out->push_back(',');
  *out += std::to_string(r.occurrences);
  for (const double v : {r.total_us, r.avg_us, r.self_us, r.avg_self_us, r.self_pct, r.cumulative_pct}) {
    out->push_back(',');
    AppendCsvNumber(out, v);
  }
  out->push_back('\n');
}

}  // namespace

void OpStatsSnapshot::WriteJson(JsonWriter& w) const {
  w.BeginObject();
  w.KV("window_ns", window_ns);
  w.KV("include_idle", include_idle);
  w.Key("device");
  WriteSide(w, device);
  w.Key("host");
  WriteSide(w, host);
  w.EndObject();
}

std::string OpStatsSnapshot::ToCsv() const {
  std::string out =
      "rank,side,type,name,occurrences,total_us,avg_us,self_us,avg_self_us,self_pct,"
      "cumulative_pct\n";
  for (const OpStatsRow& r : device.rows) AppendCsvRow(&out, r);
  for (const OpStatsRow& r : host.rows) AppendCsvRow(&out, r);
  return out;
}

}  // namespace liveprof
