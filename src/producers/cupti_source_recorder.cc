#include "producers/cupti_source_recorder.h"

#include <vector>

namespace liveprof {

bool CuptiSourceRecorder::Open(const std::string& path, uint32_t cupti_version, uint32_t op_external_kind,
                               std::string* error) {
  if (!writer_.Open(path, cupti_version, error)) return false;
  path_ = path;
  writer_.SetOpExternalKind(op_external_kind);
  return true;
}

void CuptiSourceRecorder::AddBuffer(uint8_t* buffer, size_t valid, uint32_t stream_id) {
  if (valid == 0) return;
  if (next_record_ != nullptr) {
    // The new name pointers first (outside the lock), then their strings.
    std::vector<const char*> names;
    CUpti_Activity* record = nullptr;
    while (next_record_(buffer, valid, &record) == CUPTI_SUCCESS) {
      if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && record->kind != CUPTI_ACTIVITY_KIND_KERNEL) {
        continue;
      }
      const char* name = reinterpret_cast<const CUpti_ActivityKernel10*>(record)->name;
      if (name == nullptr) continue;
      if (names.empty() || names.back() != name) names.push_back(name);
    }
    std::lock_guard<std::mutex> lock(mu_);
    for (const char* name : names) {
      if (kernels_seen_.insert(reinterpret_cast<uintptr_t>(name)).second) {
        writer_.AddKernelName(name, name);
      }
    }
  }
  writer_.AddBuffer(buffer, valid, stream_id);
}

void CuptiSourceRecorder::AddClockPair(uint64_t cupti_ns, uint64_t host_ns) { writer_.AddClockPair(cupti_ns, host_ns); }

void CuptiSourceRecorder::AddOp(uint64_t id, std::string_view name) {
  std::lock_guard<std::mutex> lock(mu_);
  if (ops_seen_.insert(id).second) writer_.AddOpName(id, name);
}

size_t CuptiSourceRecorder::kernel_names() const {
  std::lock_guard<std::mutex> lock(mu_);
  return kernels_seen_.size();
}

std::string CuptiSourceRecorder::Close() {
  std::string error;
  const bool ok = writer_.Close(&error);
  std::string line = "liveprof: CUPTI recording: " + std::to_string(writer_.buffers_written()) + " buffers to " + path_;
  if (!ok) line += " (" + (error.empty() ? std::string("a write failed") : error) + ")";
  return line;
}

}  // namespace liveprof
