#include "producers/simulated_model.h"

#include <algorithm>
#include <string>

#include "stream/reorder_buffer.h"

namespace liveprof {

namespace {

// Launch costs and latencies of a recent GPU, in ns.
constexpr uint64_t kLaunchApiNs = 6'000;       // cudaLaunchKernel on the host.
constexpr uint64_t kTinyLaunchApiNs = 20'000;  // the launch-bound loop's launches
                                               // (Python dispatch included).
constexpr uint64_t kLaunchLatencyNs = 3'000;   // API end to kernel start, at best.
constexpr uint64_t kHostGapNs = 1'000;         // between two calls on the host.
constexpr uint64_t kH2dBytesPerNs = 25;        // pinned copies, PCIe 4: 25 GB/s.

// What one scenario changes in a step.
struct Params {
  uint64_t input_ns;  // the training thread waits this long for the batch.
  uint32_t ops;
  uint32_t kernels_per_op;
  uint64_t kernel_ns;  // mean kernel duration.
  uint64_t launch_ns;  // host cost of each launch.
  bool leak;           // memory growth.
};

Params ParamsFor(Scenario s, const SimulatedModelOptions& o) {
  const uint32_t ops = std::max<uint32_t>(o.ops_per_step, 4);
  const uint32_t kpo = std::max<uint32_t>(o.kernels_per_op, 1);
  const uint64_t kernel_ns = std::max<uint64_t>(o.step_ns / (uint64_t{ops} * kpo), 2'000);
  switch (s) {
    case Scenario::kInputBound:
      // The wait is 0.8x the compute: about 44 % of the step.
      return {o.step_ns * 8 / 10, ops, kpo, kernel_ns, kLaunchApiNs, false};
    case Scenario::kLaunchBound:
      // Twelve 4 us kernels an op, each behind a 20 us launch.
      return {o.step_ns / 200, ops, 12, 4'000, kTinyLaunchApiNs, false};
    case Scenario::kMemoryGrowth: return {o.step_ns / 100, ops, kpo, kernel_ns, kLaunchApiNs, true};
    case Scenario::kBalanced: break;
  }
  return {o.step_ns / 100, ops, kpo, kernel_ns, kLaunchApiNs, false};
}

// The interned names, by index into SimulatedModel::ids_.
enum Name : uint32_t {
  kTrainStep,
  kIteratorGetNext,
  kFileRead,
  kDecode,
  kMemcpyApi,
  kLaunchApi,
  kMemsetApi,
  kSyncApi,
  kAllocator,
  kNcclKernel,
  kNcclOp,
  kMemsetName,
  kDeviceName,
  kNameCount,
};

constexpr const char* kFixedNames[kNameCount] = {
    "train_step",
    "IteratorGetNext",
    "TFRecordDataset::Read",
    "ParallelMapDataset::DecodeAndAugment",
    "cudaMemcpyAsync",
    "cudaLaunchKernel",
    "cudaMemsetAsync",
    "cudaStreamSynchronize",
    "gpu0_bfc",
    "ncclKernel_AllReduce_RING_LL_Sum_float",
    "gradients/AllReduce:NcclAllReduce",
    "Memset",
    "Simulated GPU (A100-SXM4-40GB class)",
};

// Layer types of the simulated network, with their kernels.
struct LayerKind {
  const char* op_type;
  const char* kernel;
  const char* details;
  bool half;  // 16-bit math.
};
constexpr LayerKind kLayers[] = {
    {"Conv2D", "volta_scudnn_128x64_relu_interior_nn_v1",
     "regs:128 static_shared:0 dynamic_shared:49152 grid:196,1,1 block:256,1,1", false},
    {"BiasAdd", "elementwise_kernel_bias_add", "regs:16 static_shared:0 dynamic_shared:0 grid:4096,1,1 block:256,1,1",
     false},
    {"Relu", "elementwise_kernel_relu", "regs:16 static_shared:0 dynamic_shared:0 grid:4096,1,1 block:256,1,1", false},
    {"MatMul", "volta_h884gemm_128x128_ldg8_nn",
     "regs:232 static_shared:0 dynamic_shared:65536 grid:64,8,1 block:256,1,1", true},
    {"Mean", "reduce_1Block_kernel", "regs:32 static_shared:2048 dynamic_shared:0 grid:1,1,1 block:512,1,1", false},
};
constexpr uint32_t kLayerKinds = sizeof(kLayers) / sizeof(kLayers[0]);

}  // namespace

std::string_view ScenarioName(Scenario s) {
  switch (s) {
    case Scenario::kBalanced: return "balanced";
    case Scenario::kInputBound: return "input_bound";
    case Scenario::kLaunchBound: return "launch_bound";
    case Scenario::kMemoryGrowth: return "memory_growth";
  }
  return "balanced";
}

std::optional<Scenario> ParseScenario(std::string_view name) {
  std::string n(name);
  std::replace(n.begin(), n.end(), '-', '_');
  for (Scenario s : {Scenario::kBalanced, Scenario::kInputBound, Scenario::kLaunchBound, Scenario::kMemoryGrowth}) {
    if (ScenarioName(s) == n) return s;
  }
  return std::nullopt;
}

std::vector<ScenarioPhase> DefaultSchedule() {
  return {{Scenario::kBalanced, 60},
          {Scenario::kInputBound, 60},
          {Scenario::kBalanced, 60},
          {Scenario::kLaunchBound, 60},
          {Scenario::kMemoryGrowth, 80}};
}

SimulatedModel::SimulatedModel(SimulatedModelOptions options, NameTable* names)
    : options_(std::move(options)), names_(names) {
  options_.streams = std::clamp<uint32_t>(options_.streams, 1, 3);
  if (options_.schedule.empty()) options_.schedule = {{Scenario::kBalanced, 1}};
  for (ScenarioPhase& p : options_.schedule) p.steps = std::max<uint32_t>(p.steps, 1);
  ids_.resize(kNameCount + 3 * kLayerKinds);
  for (uint32_t i = 0; i < kNameCount; ++i) ids_[i] = names_->Intern(kFixedNames[i]);
  for (uint32_t k = 0; k < kLayerKinds; ++k) {
    ids_[kNameCount + 3 * k] = names_->Intern(kLayers[k].kernel);
    ids_[kNameCount + 3 * k + 1] = names_->Intern(kLayers[k].details);
    // The backward kernel of a layer kind: same kernel family, "_bwd".
    ids_[kNameCount + 3 * k + 2] = names_->Intern(std::string(kLayers[k].kernel) + "_bwd");
  }
}

NameId SimulatedModel::OpName(uint32_t layer, bool backward) {
  const size_t key = size_t{layer} * 2 + (backward ? 1 : 0);
  if (key >= op_ids_.size()) op_ids_.resize(key + 1, 0);
  NameId& id = op_ids_[key];
  if (id == 0) {
    const std::string type = kLayers[layer % kLayerKinds].op_type;
    // TF style "scope/name:Type", so the TF-stats table groups by type.
    id = names_->Intern(backward
                            ? "gradients/model/layer_" + std::to_string(layer) + "/" + type + "_grad:" + type + "Grad"
                            : "model/layer_" + std::to_string(layer) + "/" + type + ":" + type);
  }
  return id;
}

Scenario SimulatedModel::ScenarioAt(uint64_t index) const {
  uint64_t cycle = 0;
  for (const ScenarioPhase& p : options_.schedule) cycle += p.steps;
  uint64_t at = index % cycle;
  for (const ScenarioPhase& p : options_.schedule) {
    if (at < p.steps) return p.scenario;
    at -= p.steps;
  }
  return options_.schedule.back().scenario;
}

Event SimulatedModel::DeviceInfo(uint64_t ts) const {
  Event e;
  e.kind = EventKind::kDeviceInfo;
  e.ts = ts;
  e.name = ids_[kDeviceName];
  e.device = options_.device;
  e.payload.device_info.memory_bytes = options_.memory_capacity;
  e.payload.device_info.sm_count = 108;
  e.payload.device_info.cc_major = 8;
  e.payload.device_info.cc_minor = 0;
  return e;
}

SimulatedStep SimulatedModel::Next(uint64_t start_ns) {
  const uint64_t index = step_++;
  const Scenario scenario = ScenarioAt(index);
  const Params p = ParamsFor(scenario, options_);
  std::mt19937_64 rng(options_.seed * 0x9E3779B97F4A7C15ull + index);
  auto jitter = [&rng](uint64_t mean) {  // uniform in [0.5, 1.5) x mean.
    return mean / 2 + rng() % std::max<uint64_t>(mean, 1);
  };
  const uint8_t dev = options_.device;

  SimulatedStep out;
  out.scenario = scenario;
  out.begin_ns = start_ns;
  auto host = [&](EventKind kind, NameId name, uint64_t ts, uint64_t dur, TrackId track) -> Event& {
    Event e;
    e.kind = kind;
    e.name = name;
    e.ts = ts;
    e.dur = dur;
    e.track = track;
    out.host.push_back(e);
    return out.host.back();
  };
  std::array<uint64_t, 3> stream_free{};
  uint64_t device_end = start_ns;
  auto device = [&](EventKind kind, NameId name, uint64_t api_end, uint64_t dur, uint32_t stream,
                    uint32_t corr) -> Event& {
    Event e;
    e.kind = kind;
    e.name = name;
    e.ts = std::max(api_end + kLaunchLatencyNs, stream_free[stream]);
    e.dur = dur;
    e.track = options_.stream_tracks[stream];
    e.corr = corr;
    e.device = dev;
    stream_free[stream] = e.end();
    device_end = std::max(device_end, e.end());
    out.device.push_back(e);
    return out.device.back();
  };
  auto memory = [&](EventKind kind, uint64_t ts, uint64_t address, uint64_t bytes) {
    Event& e = host(kind, ids_[kAllocator], ts, 0, options_.main_track);
    e.sub = static_cast<uint8_t>(MemoryKind::kDevice);
    e.device = dev;
    e.payload.memory = {address, bytes};
  };

  // Input: the training thread waits; the loader reads and decodes.
  uint64_t t = start_ns;
  host(EventKind::kInputSpan, ids_[kIteratorGetNext], t, p.input_ns, options_.main_track).sub =
      static_cast<uint8_t>(InputStage::kWait);
  host(EventKind::kInputSpan, ids_[kFileRead], t + p.input_ns / 20, p.input_ns * 3 / 10, options_.loader_track).sub =
      static_cast<uint8_t>(InputStage::kRead);
  host(EventKind::kInputSpan, ids_[kDecode], t + p.input_ns * 7 / 20, p.input_ns * 11 / 20, options_.loader_track).sub =
      static_cast<uint8_t>(InputStage::kPreprocess);
  t += p.input_ns;

  // The batch goes to the device.
  const uint32_t copy_corr = next_corr_++;
  host(EventKind::kRuntimeApi, ids_[kMemcpyApi], t, 8'000, options_.main_track).corr = copy_corr;
  Event& h2d = device(EventKind::kMemcpyHtoD, 0, t + 8'000, options_.batch_bytes / kH2dBytesPerNs, 0, copy_corr);
  h2d.payload.copy = {options_.batch_bytes, static_cast<uint32_t>(MemoryKind::kPinned),
                      static_cast<uint32_t>(MemoryKind::kDevice)};
  t += 8'000 + kHostGapNs;

  // Forward (first half of the ops) and backward (second half), then the
  // all-reduce of the gradients.
  std::vector<std::pair<uint64_t, uint64_t>> activations;  // address, bytes.
  const uint32_t forward = p.ops / 2;
  for (uint32_t j = 0; j < p.ops; ++j) {
    const bool backward = j >= forward;
    const uint32_t layer = backward ? p.ops - 1 - j : j;
    const LayerKind& kind = kLayers[layer % kLayerKinds];
    const uint32_t k = layer % kLayerKinds;
    const NameId op = OpName(layer, backward);
    const uint64_t op_begin = t;
    if (!backward) {
      const uint64_t bytes = (uint64_t{2} << 20) * (1 + layer % 8);
      activations.push_back({next_address_, bytes});
      memory(EventKind::kAlloc, t, next_address_, bytes);
      next_address_ += bytes;
    }
    // Every third op of the backward pass runs on the second stream.
    const uint32_t stream = (backward && j % 3 == 0) ? 1 % options_.streams : 0;
    if (backward && j == forward) {  // zero the gradient buffers first.
      const uint32_t c = next_corr_++;
      host(EventKind::kRuntimeApi, ids_[kMemsetApi], t, 4'000, options_.main_track).corr = c;
      device(EventKind::kMemset, ids_[kMemsetName], t + 4'000, 2'000, stream, c).payload.copy.bytes = 4 << 20;
      t += 4'000 + kHostGapNs;
    }
    for (uint32_t n = 0; n < p.kernels_per_op; ++n) {
      const uint32_t c = next_corr_++;
      host(EventKind::kRuntimeApi, ids_[kLaunchApi], t, p.launch_ns, options_.main_track).corr = c;
      Event& ke = device(EventKind::kKernel, ids_[kNameCount + 3 * k + (backward ? 2 : 0)], t + p.launch_ns,
                         jitter(p.kernel_ns), stream, c);
      ke.payload.kernel.details = ids_[kNameCount + 3 * k + 1];
      ke.payload.kernel.op = op;
      if (kind.half) ke.flags |= kFlag16Bit;
      t += p.launch_ns + kHostGapNs;
    }
    host(EventKind::kFrameworkOp, op, op_begin, t - op_begin, options_.main_track);
    if (backward && !activations.empty()) {
      const auto [address, bytes] = activations.back();
      activations.pop_back();
      memory(EventKind::kFree, t, address, bytes);
    }
    t += kHostGapNs;
  }
  {
    const uint32_t c = next_corr_++;
    const uint64_t op_begin = t;
    host(EventKind::kRuntimeApi, ids_[kLaunchApi], t, p.launch_ns, options_.main_track).corr = c;
    const uint32_t stream = options_.streams - 1;
    Event& nccl = device(EventKind::kKernel, ids_[kNcclKernel], t + p.launch_ns,
                         std::max<uint64_t>(options_.step_ns / 33, 2'000), stream, c);
    nccl.payload.kernel.op = ids_[kNcclOp];
    t += p.launch_ns + kHostGapNs;
    host(EventKind::kFrameworkOp, ids_[kNcclOp], op_begin, t - op_begin, options_.main_track);
  }
  for (const auto& [address, bytes] : activations) memory(EventKind::kFree, t, address, bytes);

  // Memory growth: a block that is never freed, larger each step, until the
  // leak passes 90 % of capacity and is "released" at once.
  const uint64_t leak_bytes = options_.memory_capacity / 64;
  if (p.leak) {
    memory(EventKind::kAlloc, t, next_address_, leak_bytes);
    leaked_.push_back(next_address_);
    next_address_ += leak_bytes;
  }
  if (!leaked_.empty() && (!p.leak || leaked_.size() * leak_bytes > options_.memory_capacity * 9 / 10)) {
    for (const uint64_t address : leaked_) memory(EventKind::kFree, t, address, leak_bytes);
    leaked_.clear();
  }

  // The loop waits for the device (loss.item()), then the step ends.
  const uint64_t sync_end = std::max(t, device_end) + 2'000;
  host(EventKind::kRuntimeApi, ids_[kSyncApi], t, sync_end - t, options_.main_track).corr = next_corr_++;
  Event& marker =
      host(EventKind::kStepMarker, ids_[kTrainStep], start_ns, sync_end + 1'000 - start_ns, options_.main_track);
  marker.payload.step.step_num = static_cast<int64_t>(index);
  out.end_ns = marker.end() + 20'000;  // a little host work between steps.
  if (leaked_.empty() && next_address_ > (uint64_t{1} << 46)) next_address_ = 0x7f0000000000;

  std::stable_sort(out.host.begin(), out.host.end(), CompletionOrderLess);
  std::stable_sort(out.device.begin(), out.device.end(), CompletionOrderLess);
  return out;
}

}  // namespace liveprof
