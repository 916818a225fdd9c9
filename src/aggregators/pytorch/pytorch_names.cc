#include "aggregators/pytorch/pytorch_names.h"

#include <limits>

namespace liveprof::pytorch {

namespace {

constexpr std::string_view kCommNames[] = {
    "nccl:broadcast", "nccl:reduce", "nccl:all_reduce", "nccl:all_gather", "nccl:reduce_scatter",
    "gloo:broadcast", "gloo:reduce", "gloo:all_reduce", "gloo:all_gather", "gloo:reduce_scatter",
};

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

}  // namespace

bool ParseStepNumber(std::string_view s, int64_t* out) {
  const size_t hash = s.find('#');
  if (hash != std::string_view::npos) s = s.substr(0, hash);
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  bool negative = false;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  if (s.empty()) return false;
  // Python accepts arbitrarily large ints; we keep int64 (else: not a step).
  unsigned __int128 v = 0;
  bool prev_digit = false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c >= '0' && c <= '9') {
      v = v * 10 + static_cast<unsigned>(c - '0');
      if (v > (static_cast<unsigned __int128>(1) << 63)) return false;
      prev_digit = true;
    } else if (c == '_' && prev_digit && i + 1 < s.size() && s[i + 1] >= '0' && s[i + 1] <= '9') {
      prev_digit = false;
    } else {
      return false;
    }
  }
  if (!negative && v > static_cast<unsigned __int128>(std::numeric_limits<int64_t>::max())) return false;
  *out = negative ? static_cast<int64_t>(-static_cast<__int128>(v)) : static_cast<int64_t>(v);
  return true;
}

bool IsDataLoaderName(std::string_view name) {
  return (name.starts_with("enumerate(DataLoader)#") && name.ends_with(".__next__")) ||
         name.starts_with("enumerate(DataPipe)#");
}

NameClass NameClassifier::Classify(std::string_view name, int64_t* step_num) {
  constexpr std::string_view kStep = "ProfilerStep#";
  if (name.starts_with(kStep)) {
    if (ParseStepNumber(name.substr(kStep.size()), step_num)) return NameClass::kProfilerStep;
    return NameClass::kPlain;  // the plugin would fail to load; we call it an operator.
  }
  if (IsDataLoaderName(name)) return NameClass::kDataLoader;
  for (const std::string_view c : kCommNames) {
    if (name == c) return NameClass::kCommunication;
  }
  return NameClass::kPlain;
}

}  // namespace liveprof::pytorch
