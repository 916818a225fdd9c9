#include "aggregators/steps/span_type.h"

#include "aggregators/pytorch/pytorch_names.h"
#include "aggregators/tf/tf_op_name.h"

namespace liveprof {

bool IsModelPassName(std::string_view name) {
  return name.starts_with("nn.Module.forward: ") || name == "autograd.backward" || name == "autograd.grad";
}

uint8_t ClassifyName(std::string_view name) {
  uint8_t bits = kNameClassified;
  if (StartsWithNoCase(name, "nccl")) bits |= kNameCollective;
  if (name.find("half") != std::string_view::npos || name.find("fp16") != std::string_view::npos) {
    bits |= kName16Bit;
  }
  if (name.starts_with("EagerExecute") || name.starts_with("EagerLocalExecute") ||
      name.starts_with("EagerKernelExecute") || name.starts_with("FunctionRun") ||
      // liveprof run's per-module spans and counters (level 3, module_stats.h):
      // the Modules view's, not the step's (turning them on for a while must
      // not move the breakdown).
      name.starts_with("nn.Module: ") || name.starts_with("nn.Module memory: ")) {
    bits |= kNameIgnored;
  }
  if (StartsWithNoCase(name, "memcpyhtod") || name.starts_with("InfeedEnqueue")) bits |= kNameToDevice;
  if (StartsWithNoCase(name, "memcpyhtoh")) bits |= kNameHostToHost;
  if (name.starts_with("ExecutorState::Process")) bits |= kNameExecutor;
  // The training loop's wait for its next batch: TF's IteratorGetNext, and a
  // PyTorch DataLoader's __next__ (pytorch_names.h).
  if (StartsWithNoCase(name, "iteratorgetnext") || pytorch::IsDataLoaderName(name)) bits |= kNameWaitInput;
  return bits;
}

SpanType ClassifyDeviceEvent(const Event& e, std::string_view name) {
  return ClassifyDeviceEvent(e, ClassifyName(name));
}

SpanType ClassifyHostEvent(const Event& e, std::string_view name, bool has_device, bool* ignore) {
  return ClassifyHostEvent(e, ClassifyName(name), has_device, ignore);
}

}  // namespace liveprof
