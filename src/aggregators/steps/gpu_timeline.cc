#include "aggregators/steps/gpu_timeline.h"

#include <algorithm>

namespace liveprof {

namespace {

// Not interval_ranges.h: that one ports the plugin's lists literally (their
// zero-length pieces included) and returns new vectors; this runs for every
// step into buffers kept between steps.
using Range = GpuTimelineScratch::Range;

uint64_t Length(const std::vector<Range>& r) {
  uint64_t n = 0;
  for (const Range& x : r) n += x.end - x.begin;
  return n;
}

// |a ∩ b| for two sorted lists of disjoint ranges.
uint64_t Overlap(const std::vector<Range>& a, const std::vector<Range>& b) {
  uint64_t n = 0;
  for (size_t i = 0, j = 0; i < a.size() && j < b.size();) {
    const uint64_t lo = std::max(a[i].begin, b[j].begin), hi = std::min(a[i].end, b[j].end);
    if (hi > lo) n += hi - lo;
    (a[i].end < b[j].end ? i : j) += 1;
  }
  return n;
}

// The union of two sorted lists of disjoint ranges, into *out.
void Unite(const std::vector<Range>& a, const std::vector<Range>& b, std::vector<Range>* out) {
  out->clear();
  for (size_t i = 0, j = 0; i < a.size() || j < b.size();) {
    const Range& r = j == b.size() || (i < a.size() && a[i].begin < b[j].begin) ? a[i++] : b[j++];
    if (!out->empty() && r.begin <= out->back().end) {
      out->back().end = std::max(out->back().end, r.end);
    } else {
      out->push_back(r);
    }
  }
}

}  // namespace

void GpuTimeline::Add(const GpuTimeline& o) {
  total_ns += o.total_ns;
  busy_ns += o.busy_ns;
  idle_ns += o.idle_ns;
  computation_ns += o.computation_ns;
  exposed_comm_ns += o.exposed_comm_ns;
  exposed_memcpy_ns += o.exposed_memcpy_ns;
  comm_ns += o.comm_ns;
  memcpy_ns += o.memcpy_ns;
}

void GpuTimeline::WriteJson(JsonWriter& w) const {
  auto ms = [](uint64_t ns) { return static_cast<double>(ns) / 1e6; };
  w.BeginObject();
  w.KV("total_ms", ms(total_ns));
  w.KV("busy_ms", ms(busy_ns));
  w.KV("idle_ms", ms(idle_ns));
  w.KV("computation_ms", ms(computation_ns));
  w.KV("exposed_comm_ms", ms(exposed_comm_ns));
  w.KV("exposed_memcpy_ms", ms(exposed_memcpy_ns));
  w.KV("comm_ms", ms(comm_ns));
  w.KV("memcpy_ms", ms(memcpy_ns));
  w.EndObject();
}

GpuTimeline ComputeGpuTimeline(std::vector<GpuInterval>* intervals, uint64_t begin, uint64_t end,
                               GpuTimelineScratch* scratch) {
  GpuTimeline t;
  if (end <= begin) return t;
  auto by_begin = [](const GpuInterval& a, const GpuInterval& b) { return a.begin < b.begin; };
  // Device work arrives in end order, often begin order too: sort only if not.
  if (!std::is_sorted(intervals->begin(), intervals->end(), by_begin)) {
    std::sort(intervals->begin(), intervals->end(), by_begin);
  }
  // One pass: the union of each kind of work, clipped to the window.
  std::vector<Range>* unions[3] = {&scratch->compute, &scratch->comm, &scratch->memcpy};
  for (std::vector<Range>* u : unions) u->clear();
  for (const GpuInterval& g : *intervals) {
    const uint64_t b = std::max(g.begin, begin), e = std::min(g.end, end);
    if (b >= e) continue;
    std::vector<Range>& u = *unions[static_cast<size_t>(g.work)];
    if (!u.empty() && b <= u.back().end) {
      u.back().end = std::max(u.back().end, e);
    } else {
      u.push_back({b, e});
    }
  }
  t.total_ns = end - begin;
  t.computation_ns = Length(scratch->compute);
  t.comm_ns = Length(scratch->comm);
  t.memcpy_ns = Length(scratch->memcpy);
  t.exposed_comm_ns = t.comm_ns - Overlap(scratch->comm, scratch->compute);
  if (scratch->comm.empty() && scratch->memcpy.empty()) {  // the common case: kernels only.
    t.busy_ns = t.computation_ns;
  } else {
    Unite(scratch->compute, scratch->comm, &scratch->busy);
    t.exposed_memcpy_ns = t.memcpy_ns - Overlap(scratch->memcpy, scratch->busy);
    t.busy_ns = Length(scratch->busy) + t.exposed_memcpy_ns;
  }
  t.idle_ns = t.total_ns - t.busy_ns;
  return t;
}

GpuTimeline GpuTimelineSweep::Finish() const {
  GpuTimeline t;
  if (end_ <= begin_) return t;
  t.total_ns = end_ - begin_;
  t.computation_ns = u_[kC].Length();
  t.comm_ns = u_[kM].Length();
  t.memcpy_ns = u_[kP].Length();
  const uint64_t compute_or_comm = u_[kCM].Length();
  t.busy_ns = u_[kAll].Length();
  t.exposed_comm_ns = compute_or_comm - t.computation_ns;
  t.exposed_memcpy_ns = t.busy_ns - compute_or_comm;
  t.idle_ns = t.total_ns - t.busy_ns;
  return t;
}

}  // namespace liveprof
