#include "import/chrome_trace.h"

#include <doctest/doctest.h>

#include <string>
#include <vector>

namespace liveprof::chrome_trace_test {
namespace {

struct Imported {
  std::vector<Event> defs, events;
  ImportReport report;
  std::string error;
  bool ok = false;
  ChromeTraceImporter importer;
  std::string Name(NameId id) const { return std::string(importer.names().Get(id)); }
  std::vector<Event> OfKind(EventKind k) const {
    std::vector<Event> out;
    for (const Event& e : events) {
      if (e.kind == k) out.push_back(e);
    }
    return out;
  }
};

void Import(Imported& r, std::string_view text) {
  r.ok = r.importer.ImportText(
      text,
      [&](std::span<const Event> d, std::span<const Event> ev) {
        r.defs.insert(r.defs.end(), d.begin(), d.end());
        r.events.insert(r.events.end(), ev.begin(), ev.end());
      },
      &r.report, &r.error);
}

// One event of each kind liveprof maps, in Kineto's new names (and one old).
constexpr std::string_view kKineto = R"json({"schemaVersion": 1, "traceEvents": [
  {"ph": "X", "cat": "cpu_op", "name": "aten::conv2d", "pid": 7, "tid": 25738, "ts": 1000.5, "dur": 20.25,
   "args": {"External id": 41, "Input Dims": [[8, 3, 224, 224]]}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 7, "tid": 25738, "ts": 1002, "dur": 4,
   "args": {"cbid": 211, "correlation": 900, "External id": 41}},
  {"ph": "X", "cat": "kernel", "name": "implicit_convolve_sgemm", "pid": 0, "tid": "stream 7", "ts": 1010, "dur": 55.5,
   "args": {"device": 0, "stream": 7, "correlation": 900, "External id": 41, "registers per thread": 72, "shared memory": 4096,
            "grid": [100, 2, 1], "block": [128, 1, 1], "est. achieved occupancy %": 25}},
  {"ph": "X", "cat": "Memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": 0, "tid": "stream 7", "ts": 1100, "dur": 3,
   "args": {"device": 0, "stream": 7, "correlation": 901, "bytes": 602112}},
  {"ph": "X", "cat": "gpu_memset", "name": "Memset (Device)", "pid": 0, "tid": "stream 7", "ts": 1110, "dur": 1,
   "args": {"device": 0, "stream": 7, "correlation": 902, "bytes": 256}},
  {"ph": "X", "cat": "python_function", "name": "train.py(12): step", "pid": 7, "tid": 25738, "ts": 999, "dur": 200},
  {"ph": "i", "s": "t", "name": "[memory]", "pid": 7, "tid": 25738, "ts": 1001,
   "args": {"Device Type": 1, "Device Id": 0, "Addr": 139800000000000, "Bytes": 1048576}},
  {"ph": "i", "s": "t", "name": "[memory]", "pid": 7, "tid": 25738, "ts": 1200,
   "args": {"Device Type": 1, "Device Id": 0, "Addr": 139800000000000, "Bytes": -1048576}},
  {"ph": "B", "name": "loader", "pid": 7, "tid": 25739, "ts": 900},
  {"ph": "E", "pid": 7, "tid": 25739, "ts": 950.125},
  {"ph": "E", "pid": 7, "tid": 25739, "ts": 960},
  {"ph": "C", "name": "queue", "pid": 7, "tid": 25739, "ts": 970, "args": {"depth": 3, "bytes": 1.5}},
  {"ph": "s", "cat": "ac2g", "id": 900, "pid": 7, "tid": 25738, "ts": 1002},
  {"ph": "s", "cat": "flow", "name": "send", "id": "0x402", "pid": 7, "tid": 25738, "ts": 1003},
  {"ph": "f", "cat": "flow", "name": "send", "id": "0x402", "pid": 7, "tid": 25739, "ts": 1004, "bp": "e"},
  {"ph": "M", "name": "thread_name", "pid": 7, "tid": 25739, "args": {"name": "dataloader"}},
  {"ph": "P", "name": "sample", "pid": 7, "tid": 25738, "ts": 1005}
], "baseTimeNanoseconds": 1700000000000000000})json";

TEST_CASE("import: Kineto's events become liveprof's, each with its fields") {
  Imported r;
  Import(r, kKineto);
  REQUIRE_MESSAGE(r.ok, r.error);
  CHECK(r.report.trace_events == 17);
  CHECK(r.report.has_base_time);
  CHECK(r.report.base_time_ns == 1700000000000000000);
  CHECK(r.report.schema == "1");

  const auto ops = r.OfKind(EventKind::kFrameworkOp);
  REQUIRE(ops.size() == 1);
  CHECK(r.Name(ops[0].name) == "aten::conv2d");
  CHECK(ops[0].ts == 1'000'500);
  CHECK(ops[0].dur == 20'250);
  CHECK(ops[0].corr == 41);

  const auto api = r.OfKind(EventKind::kRuntimeApi);
  REQUIRE(api.size() == 1);
  CHECK(api[0].corr == 900);
  CHECK(api[0].track == ops[0].track);

  const auto kernels = r.OfKind(EventKind::kKernel);
  REQUIRE(kernels.size() == 1);
  CHECK(kernels[0].corr == 900);
  CHECK(kernels[0].device == 0);
  CHECK(kernels[0].dur == 55'500);
  CHECK(r.Name(kernels[0].payload.kernel.details) ==
        "regs:72 static_shared:4096 dynamic_shared:0 grid:100,2,1 block:128,1,1 occ_pct:25");
  CHECK(kernels[0].track != ops[0].track);
  CHECK(r.Name(kernels[0].payload.kernel.op) == "aten::conv2d");  // through External id 41.

  const auto copies = r.OfKind(EventKind::kMemcpyHtoD);
  REQUIRE(copies.size() == 1);
  CHECK(copies[0].payload.copy.bytes == 602112);
  CHECK(copies[0].track == kernels[0].track);
  REQUIRE(r.OfKind(EventKind::kMemset).size() == 1);
  CHECK(r.OfKind(EventKind::kMemset)[0].payload.copy.bytes == 256);

  const auto allocs = r.OfKind(EventKind::kAlloc), frees = r.OfKind(EventKind::kFree);
  REQUIRE(allocs.size() == 1);
  REQUIRE(frees.size() == 1);
  CHECK(r.Name(allocs[0].name) == "CUDA:0");
  CHECK(allocs[0].payload.memory.address == 139800000000000ull);
  CHECK(allocs[0].payload.memory.bytes == 1048576);
  CHECK(frees[0].payload.memory.bytes == 1048576);

  const auto spans = r.OfKind(EventKind::kHostSpan);
  REQUIRE(spans.size() == 1);
  CHECK(r.Name(spans[0].name) == "loader");
  CHECK(spans[0].ts == 900'000);
  CHECK(spans[0].dur == 50'125);

  const auto counters = r.OfKind(EventKind::kCounter);
  REQUIRE(counters.size() == 2);
  CHECK(r.Name(counters[0].name) == "queue/depth");
  CHECK(counters[0].payload.counter.value == 3.0);
  CHECK(counters[1].payload.counter.value == 1.5);

  const auto flows = r.OfKind(EventKind::kFlow);
  REQUIRE(flows.size() == 2);
  CHECK(flows[0].corr == flows[1].corr);
  CHECK(flows[0].sub == 0);
  CHECK(flows[1].sub == 2);

  // What is not imported is counted, by reason.
  CHECK(r.report.dropped.at("category python_function (not analysed)") == 1);
  CHECK(r.report.dropped.at("E without B") == 1);
  CHECK(r.report.dropped.at("launch flows (the correlation ids carry the link)") == 1);
  CHECK(r.report.dropped.at("phase P (not imported)") == 1);
  CHECK(r.report.dropped_total() == 4);
  CHECK(r.report.events_out == r.events.size());

  // Every name and track an event uses is defined, once, before it is used.
  std::vector<bool> named(r.importer.names().size(), false), tracked(64, false);
  for (const Event& d : r.defs) {
    if (d.kind == EventKind::kNameDef) named[d.name] = true;
    if (d.kind == EventKind::kTrackDef) {
      CHECK(named[d.name]);
      tracked[d.track] = true;
    }
  }
  for (const Event& e : r.events) {
    CHECK(named[e.name]);
    CHECK(tracked[e.track]);
  }
  // The thread's name came from its M event.
  bool renamed = false;
  for (const Event& d : r.defs) renamed = renamed || (d.kind == EventKind::kTrackDef && r.Name(d.name) == "dataloader");
  CHECK(renamed);
}

TEST_CASE("import: members in any order, a runtime call with a stream arg stays on the host") {
  Imported r;
  Import(r, R"({"traceEvents": [
    {"name": "ctr", "args": {"value": 2, "bytes": 7.5}, "pid": 1, "tid": 1, "ts": 10, "ph": "C"},
    {"args": {"correlation": 5, "stream": 3}, "ph": "X", "cat": "cuda_runtime", "name": "hipLaunchKernel",
     "pid": 1, "tid": 1, "ts": 20, "dur": 4},
    {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": "stream 3", "ts": 30, "dur": 5,
     "args": {"device": 0, "stream": 3, "correlation": 5}},
    {"ph": "C", "name": "empty", "pid": 1, "tid": 1, "ts": 40, "args": {"note": "text"}}]})");
  REQUIRE(r.ok);
  const auto counters = r.OfKind(EventKind::kCounter);
  REQUIRE(counters.size() == 2);
  CHECK(r.Name(counters[0].name) == "ctr/value");
  CHECK(counters[0].payload.counter.value == 2);
  CHECK(r.Name(counters[1].name) == "ctr/bytes");
  CHECK(counters[1].payload.counter.value == 7.5);
  const auto calls = r.OfKind(EventKind::kRuntimeApi);
  REQUIRE(calls.size() == 1);
  CHECK(calls[0].corr == 5);
  CHECK(r.OfKind(EventKind::kKernel).size() == 1);
  CHECK(calls[0].track != r.OfKind(EventKind::kKernel)[0].track);
  CHECK(r.report.dropped.at("C without a numeric arg") == 1);
  CHECK(r.report.dropped_total() == 1);
}

TEST_CASE("import: malformed events are errors with the event's number, the events before are kept") {
  Imported r;
  Import(r, R"({"traceEvents": [{"ph":"i","name":"a","ts":1,"pid":1,"tid":1}, {"ph":"i","ts": tru}]})");
  CHECK(!r.ok);
  CHECK(r.error.starts_with("invalid JSON in trace event"));

  Imported s;
  Import(s, R"({"traceEvents": [{"ph":"X","name":"a","ts":"soon","dur":1,"pid":1,"tid":1}, 5,
                                  {"ph":"X","name":"b","ts":2,"dur":1,"pid":1,"tid":1}]})");
  CHECK(s.ok);
  CHECK(s.report.dropped.at("no usable ts") == 1);
  CHECK(s.report.dropped.at("not an object") == 1);
  CHECK(s.events.size() == 1);

  Imported n;  // a trace, but of nothing liveprof reads: an error that says what it holds.
  Import(n, R"({"traceEvents": [{"ph":"b","name":"a","ts":1,"pid":1,"tid":1,"id":"0x1","cat":"c"},
                                  {"ph":"O","name":"s","ts":2,"pid":1,"tid":1,"id":"0x1"}]})");
  CHECK(!n.ok);
  CHECK(n.error ==
        "nothing to import: none of its 2 trace events is of a kind liveprof reads "
        "(phase O (not imported): 1, phase b (not imported): 1)");

  Imported table;  // a TensorBoard profiler tool's JSON: objects, but tables.
  Import(table, R"([{"cols": [{"id": "stepnum"}], "rows": []}])");
  CHECK(!table.ok);
  CHECK(table.error ==
        "not a Chrome trace: none of its 1 trace events has a phase (\"ph\"); it holds tables "
        "(\"cols\", \"rows\"): the output of a TensorBoard profiler tool, not a trace");

  Imported t;  // an array of tables (an xprof tool's JSON), not of events.
  Import(t, R"([[1, 2], [3, 4]])");
  CHECK(!t.ok);
  CHECK(t.error == "not a Chrome trace: none of its 2 trace events is a JSON object");
}

TEST_CASE("import: distributedInfo and baseTimeNanoseconds, wherever they stand, are reported") {
  Imported r;
  Import(r, R"({"traceEvents": [{"ph":"i","name":"x","pid":1,"tid":1,"ts":5}],
    "distributedInfo": {"backend": "nccl", "rank": 3, "world_size": 8, "pg_config": [{"ranks": [0, 1]}]},
    "baseTimeNanoseconds": 1711964646000000000})");
  REQUIRE(r.ok);
  CHECK(r.report.rank == 3);
  CHECK(r.report.world_size == 8);
  CHECK(r.report.distributed == R"({"backend":"nccl","rank":3,"world_size":8,"pg_config":[{"ranks":[0,1]}]})");
  CHECK(r.report.has_base_time);
  CHECK(r.report.base_time_ns == 1711964646000000000);
  CHECK(r.events.at(0).ts == 5000);  // relative here; ImportWhole applies the base.

  Imported bad;
  Import(bad, R"({"distributedInfo": [1, 2], "traceEvents": [{"ph":"i","name":"x","pid":1,"tid":1,"ts":5}]})");
  REQUIRE(bad.ok);
  CHECK(bad.report.rank == -1);
  CHECK(bad.report.distributed.empty());
  CHECK(bad.report.caveats.at("distributedInfo that is not a JSON object (ignored)") == 1);
}

}  // namespace
}  // namespace liveprof::chrome_trace_test
