// StringIds: dense ids for distinct strings, numbered in order of first
// appearance. The snapshots group rows by name (a kernel-stats row key, an op
// name) through it, so that ranking compares integers and only the rows that
// are shown are spelled out as strings.
//
// Not thread-safe; owned by one aggregator on the pipeline thread.
#ifndef LIVEPROF_BASE_STRING_IDS_H_
#define LIVEPROF_BASE_STRING_IDS_H_

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>

namespace liveprof {

class StringIds {
 public:
  static constexpr uint32_t kAbsent = UINT32_MAX;

  // The id of `s`, a new one (== size() before the call) if it is new.
  uint32_t Id(std::string_view s) {
    const auto it = ids_.find(s);
    if (it != ids_.end()) return it->second;
    const uint32_t id = static_cast<uint32_t>(strings_.size());
    strings_.emplace_back(s);
    ids_.emplace(strings_.back(), id);  // a deque never moves its elements.
    return id;
  }
  // The id of `s`, or kAbsent.
  uint32_t Find(std::string_view s) const {
    const auto it = ids_.find(s);
    return it == ids_.end() ? kAbsent : it->second;
  }
  const std::string& operator[](uint32_t id) const { return strings_[id]; }
  uint32_t size() const { return static_cast<uint32_t>(strings_.size()); }

 private:
  std::deque<std::string> strings_;
  std::unordered_map<std::string_view, uint32_t> ids_;
};

}  // namespace liveprof

#endif  // LIVEPROF_BASE_STRING_IDS_H_
