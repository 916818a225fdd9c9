// A synthetic training stream for the analyses' end-to-end test and the
// aggregator benchmarks: steps with an input span, nested framework ops,
// kernel launches and their kernels (which may run past the step), copies,
// allocations and frees, in completion order, with the name definitions
// first. Deterministic for a seed.
#ifndef LIVEPROF_TESTS_SYNTHETIC_WORKLOAD_H_
#define LIVEPROF_TESTS_SYNTHETIC_WORKLOAD_H_

#include <algorithm>
#include <deque>
#include <random>
#include <string>
#include <vector>

#include "stream/event.h"
#include "stream/reorder_buffer.h"

namespace liveprof::test {

struct Workload {
  std::deque<std::string> strings;  // NameDef payloads point here.
  std::vector<Event> definitions;
  std::vector<Event> events;  // completion order.
  uint64_t steps = 0;
};

struct WorkloadShape {
  uint64_t steps = 50;
  uint64_t input_ns = 2'000'000;  // data loading at the start of each step.
  uint64_t ops_per_step = 40;     // framework ops, each launching kernels.
  uint64_t kernels_per_op = 4;
  uint64_t kernel_ns = 50'000;
  size_t distinct_ops = 200;  // names cycle through this many ops.
  size_t distinct_kernels = 100;
  uint32_t seed = 1;
};

inline Workload MakeWorkload(const WorkloadShape& shape) {
  Workload w;
  std::mt19937 rng(shape.seed);
  NameId next = 1;
  auto name = [&](std::string s) {
    w.strings.push_back(std::move(s));
    Event d;
    d.kind = EventKind::kNameDef;
    d.name = next;
    d.payload.name_def.data = w.strings.back().c_str();
    d.payload.name_def.size = w.strings.back().size();
    w.definitions.push_back(d);
    return next++;
  };
  const NameId train = name("train");
  const NameId get_next = name("IteratorGetNext");
  const NameId decode = name("decode_jpeg");
  const NameId launch = name("cudaLaunchKernel");
  const NameId memcpy_api = name("cudaMemcpyAsync");
  const NameId sync = name("cudaStreamSynchronize");
  const NameId allocator = name("cuda_caching");
  std::vector<NameId> ops, kernels;
  for (size_t i = 0; i < shape.distinct_ops; ++i) {
    ops.push_back(name("model/layer_" + std::to_string(i) + "/MatMul:MatMul"));
  }
  for (size_t i = 0; i < shape.distinct_kernels; ++i) {
    kernels.push_back(name((i % 7 == 0 ? "volta_h884gemm_" : "elementwise_kernel_") + std::to_string(i)));
  }
  auto span = [&](EventKind k, uint64_t ts, uint64_t dur, NameId n, TrackId track) {
    Event e;
    e.kind = k;
    e.ts = ts;
    e.dur = dur;
    e.name = n;
    e.track = track;
    w.events.push_back(e);
    return &w.events.back();
  };
  uint64_t t = 1'000'000;
  uint32_t corr = 1;
  uint64_t address = 0x7f0000000000;
  size_t op_i = 0, k_i = 0;
  for (uint64_t s = 0; s < shape.steps; ++s) {
    const uint64_t begin = t;
    span(EventKind::kInputSpan, t, shape.input_ns, get_next, 1);
    Event* d = span(EventKind::kInputSpan, t + shape.input_ns / 4, shape.input_ns / 2, decode, 2);
    d->sub = static_cast<uint8_t>(InputStage::kPreprocess);
    t += shape.input_ns;
    // The batch goes to the device.
    const uint32_t copy_corr = corr++;
    span(EventKind::kRuntimeApi, t, 5'000, memcpy_api, 1)->corr = copy_corr;
    Event* h2d = span(EventKind::kMemcpyHtoD, t + 10'000, 200'000, 0, 100);
    h2d->corr = copy_corr;
    h2d->payload.copy.bytes = 1 << 22;
    t += 10'000;
    uint64_t device_t = t + 210'000;
    for (uint64_t o = 0; o < shape.ops_per_step; ++o) {
      const NameId op = ops[op_i++ % ops.size()];
      const uint64_t op_begin = t;
      for (uint64_t k = 0; k < shape.kernels_per_op; ++k) {
        const uint32_t c = corr++;
        span(EventKind::kRuntimeApi, t, 4'000, launch, 1)->corr = c;
        t += 5'000;
        const uint64_t kd = shape.kernel_ns / 2 + rng() % shape.kernel_ns;
        device_t = std::max(device_t, t) + 1'000;
        Event* ke = span(EventKind::kKernel, device_t, kd, kernels[k_i++ % kernels.size()], 100);
        ke->corr = c;
        ke->payload.kernel.op = op;
        device_t += kd;
      }
      Event* a = span(EventKind::kAlloc, t, 0, allocator, 0);
      a->sub = static_cast<uint8_t>(MemoryKind::kDevice);
      a->payload.memory = {address + (o << 20), uint64_t{1} << 20};
      span(EventKind::kFrameworkOp, op_begin, t - op_begin + 1'000, op, 1);
      t += 2'000;
    }
    for (uint64_t o = 0; o < shape.ops_per_step; ++o) {
      Event* f = span(EventKind::kFree, device_t, 0, allocator, 0);
      f->sub = static_cast<uint8_t>(MemoryKind::kDevice);
      f->payload.memory = {address + (o << 20), uint64_t{1} << 20};
    }
    // The loop synchronizes at the end of the step (loss.item()).
    const uint64_t sync_end = std::max(t, device_t) + 5'000;
    span(EventKind::kRuntimeApi, t, sync_end - t, sync, 1)->corr = corr++;
    Event* m = span(EventKind::kStepMarker, begin, sync_end + 1'000 - begin, train, 1);
    m->payload.step.step_num = static_cast<int64_t>(s);
    t = sync_end + 20'000;
  }
  std::stable_sort(w.events.begin(), w.events.end(), CompletionOrderLess);
  w.steps = shape.steps;
  return w;
}

}  // namespace liveprof::test

#endif  // LIVEPROF_TESTS_SYNTHETIC_WORKLOAD_H_
