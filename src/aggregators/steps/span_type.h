// SpanType: what each event of a step counts as in the step-time breakdown
// (docs/semantics-tf.md §2.1, §2.3), worked out once, when the event
// joins its step (StepAssembler) and read by the breakdown's sweep.
//
// Deviations from xprof, both deliberate: copies are classified by their CUPTI
// kind rather than by name (xprof's name test misses CUPTI's "MemcpyH2D", see
// §2.3's caveat), and host-to-host copies are HOST_TO_HOST (not shown) rather
// than device compute.
#ifndef LIVEPROF_AGGREGATORS_STEPS_SPAN_TYPE_H_
#define LIVEPROF_AGGREGATORS_STEPS_SPAN_TYPE_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "stream/event.h"

namespace liveprof {

// xprof's EventType values divided by 10 (§2.1): the index is the priority.
enum class SpanType : uint8_t {
  kUnknown = 0,
  kHostCompute = 1,
  kHostPreprocess = 2,
  kHostPostprocess = 3,
  kHostBatchFormation = 4,
  kHostRuntime = 5,
  kHostCompile = 6,
  kHostToHost = 7,
  kHostToDevice = 8,
  kHostPrepare = 9,
  kDeviceCollectives = 10,
  kHostWaitInput = 11,
  kDeviceToDevice = 12,
  kDeviceToHost = 13,
  kDeviceCompute32 = 14,
  kDeviceCompute16 = 15,
  kDeviceWaitDevice = 16,
  kDeviceWaitHost = 17,
};
inline constexpr size_t kSpanTypeCount = 18;

// What a name says for classification (§2.3), worked out once per name.
// liveprof run's spans of a CPU job's model passes (src/python/liveprof/
// _model.py): "nn.Module.forward: <Class>", "autograd.backward",
// "autograd.grad". Host compute, but not the program's own annotation: a
// CPU-only step with only these still counts the time nothing claims as
// host compute (step_breakdown.cc), as an unannotated one does.
bool IsModelPassName(std::string_view name);

inline constexpr uint8_t kNameClassified = 1 << 0;
inline constexpr uint8_t kNameCollective = 1 << 1;  // starts with "nccl" (any case).
inline constexpr uint8_t kName16Bit = 1 << 2;       // contains "half" or "fp16".
inline constexpr uint8_t kNameIgnored = 1 << 3;     // EagerExecute*, FunctionRun*, "nn.Module: "*...
inline constexpr uint8_t kNameToDevice = 1 << 4;    // MemcpyHToD*, InfeedEnqueue*.
inline constexpr uint8_t kNameHostToHost = 1 << 5;  // MemcpyHToH*.
inline constexpr uint8_t kNameExecutor = 1 << 6;    // ExecutorState::Process*.
inline constexpr uint8_t kNameWaitInput = 1 << 7;   // IteratorGetNext* (any case), a PyTorch
                                                    // DataLoader's __next__ (IsDataLoaderName).
uint8_t ClassifyName(std::string_view name);

// Classification, also used by tests. Inline: the step assembler classifies
// every event of every step with these.
inline SpanType ClassifyDeviceEvent(const Event& e, uint8_t name_bits) {
  switch (e.kind) {
    case EventKind::kMemcpyHtoD: return SpanType::kHostToDevice;
    case EventKind::kMemcpyDtoH: return SpanType::kDeviceToHost;
    case EventKind::kMemcpyDtoD:
    case EventKind::kMemcpyPtoP: return SpanType::kDeviceToDevice;
    case EventKind::kMemcpyHtoH: return SpanType::kHostToHost;
    default: break;
  }
  if (e.kind == EventKind::kKernel && (name_bits & kNameCollective) != 0) {
    return SpanType::kDeviceCollectives;
  }
  // §2.3: 16-bit when the producer says so, or the name has "half" / "fp16".
  if ((e.flags & kFlag16Bit) != 0 || (name_bits & kName16Bit) != 0) return SpanType::kDeviceCompute16;
  return SpanType::kDeviceCompute32;
}

inline SpanType ClassifyHostEvent(const Event& e, uint8_t name_bits, bool has_device, bool* ignore) {
  *ignore = (name_bits & kNameIgnored) != 0;
  if (*ignore) return SpanType::kUnknown;
  if (e.kind == EventKind::kInputSpan && static_cast<InputStage>(e.sub) == InputStage::kEnqueue) {
    return SpanType::kHostToDevice;  // §2.3 host rule 1 (InfeedEnqueue / MemcpyHToD).
  }
  if (name_bits & kNameToDevice) return SpanType::kHostToDevice;
  if (name_bits & kNameHostToHost) return SpanType::kHostToHost;
  if (has_device && (e.kind == EventKind::kRuntimeApi || (name_bits & kNameExecutor) != 0)) {
    return SpanType::kHostPrepare;
  }
  if (e.kind == EventKind::kInputSpan || (name_bits & kNameWaitInput) != 0) {
    return SpanType::kHostWaitInput;
  }
  return SpanType::kHostCompute;
}

SpanType ClassifyDeviceEvent(const Event& e, std::string_view name);
// `has_device`: the profile has a GPU. kUnknown with *ignore = true for the
// names xprof skips (EagerExecute*, FunctionRun*...).
SpanType ClassifyHostEvent(const Event& e, std::string_view name, bool has_device, bool* ignore);

}  // namespace liveprof

#endif  // LIVEPROF_AGGREGATORS_STEPS_SPAN_TYPE_H_
