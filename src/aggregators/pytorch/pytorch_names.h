// How the PyTorch profiler plugin reads an event's name (docs/semantics-
// pytorch.md §0.3, §2): ProfilerStep#N steps (N parsed as Python's int()
// parses it), DataLoader spans, and the ten collective op names of the
// Communication role. Classified once per name id.
#ifndef LIVEPROF_AGGREGATORS_PYTORCH_PYTORCH_NAMES_H_
#define LIVEPROF_AGGREGATORS_PYTORCH_PYTORCH_NAMES_H_

#include <algorithm>
#include <cstdint>
#include <string_view>
#include <vector>

#include "aggregators/catalog.h"

namespace liveprof::pytorch {

enum class NameClass : uint8_t {
  kUnknown = 0,  // not classified yet.
  kPlain,
  kDataLoader,
  kCommunication,
  kProfilerStep,
};

// Python int(s) for the text after "ProfilerStep#" (up to the next '#'):
// surrounding whitespace, an optional sign, digits with single '_' between.
bool ParseStepNumber(std::string_view s, int64_t* out);

// A PyTorch DataLoader's wait for the next batch, as the plugin decides it
// (§2): `enumerate(DataLoader)#<iterator class>.__next__` (the single- and
// multi-process iterators, `_SingleProcessDataLoaderIter` and
// `_MultiProcessingDataLoaderIter`, and any subclass), or
// `enumerate(DataPipe)#<datapipe>` (DataPipes iterated directly). PyTorch
// writes it with record_function (a user_annotation in Kineto traces); the
// TF-style views take it as the training loop's wait for input, like TF's
// IteratorGetNext (span_type.h).
bool IsDataLoaderName(std::string_view name);

class NameClassifier {
 public:
  explicit NameClassifier(const Catalog& catalog) : catalog_(catalog) {}

  // Class of a host span's name; `step_num` set for kProfilerStep.
  NameClass Get(NameId id, int64_t* step_num) {
    if (id >= classes_.size()) {
      const size_t n = std::max<size_t>(catalog_.name_count(), size_t{id} + 1);
      classes_.resize(n, NameClass::kUnknown);
      step_nums_.resize(n, 0);
    }
    NameClass& c = classes_[id];
    if (c == NameClass::kUnknown) {
      const std::string_view name = catalog_.Name(id);
      // Not defined yet: classified, not remembered (it may be defined later).
      if (name.empty()) return Classify(name, step_num);
      c = Classify(name, &step_nums_[id]);
    }
    *step_num = step_nums_[id];
    return c;
  }

  bool IsCommunication(NameId id) {
    if (id == 0) return false;
    int64_t unused = 0;
    return Get(id, &unused) == NameClass::kCommunication;
  }

 private:
  static NameClass Classify(std::string_view name, int64_t* step_num);

  const Catalog& catalog_;
  std::vector<NameClass> classes_;
  std::vector<int64_t> step_nums_;
};

}  // namespace liveprof::pytorch

#endif  // LIVEPROF_AGGREGATORS_PYTORCH_PYTORCH_NAMES_H_
