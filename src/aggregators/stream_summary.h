// StreamSummary: what the stream carried, by kind, track, name and step. The
// smallest aggregator: `liveprof demo` prints it, and the status view will
// build on it. Pure: Consume() and Snapshot(), no I/O, no locks, no threads.
#ifndef LIVEPROF_AGGREGATORS_STREAM_SUMMARY_H_
#define LIVEPROF_AGGREGATORS_STREAM_SUMMARY_H_

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "aggregators/catalog.h"
#include "stream/event.h"

namespace liveprof {

struct StreamSummarySnapshot {
  uint64_t events = 0;  // every event but definitions.
  uint64_t name_defs = 0;
  uint64_t track_defs = 0;
  uint64_t late = 0;  // events flagged kFlagLate.
  std::array<uint64_t, kEventKindCount> by_kind{};
  uint64_t first_ts = 0;  // earliest begin seen (0 if none).
  uint64_t last_end = 0;  // latest end seen.

  struct Track {
    TrackId id;
    std::string name;
    uint64_t events;
  };
  std::vector<Track> tracks;  // by id.

  struct Name {
    std::string name;
    EventKind kind;
    uint64_t count;
    uint64_t total_ns;
    uint64_t max_ns;
  };
  std::vector<Name> top_names;  // spans by total time, descending.

  struct Step {
    int64_t step_num;
    uint64_t begin_ns;
    uint64_t dur_ns;
  };
  std::vector<Step> steps;  // in completion order.
};

class StreamSummary {
 public:
  // Adds a batch of events in stream order. Definitions name what follows.
  void Consume(std::span<const Event> events);

  // The summary so far, with the `top_n` span names of largest total time.
  StreamSummarySnapshot Snapshot(size_t top_n = 10) const;

 private:
  struct NameKey {
    NameId name;
    EventKind kind;
    bool operator==(const NameKey&) const = default;
  };
  struct NameKeyHash {
    size_t operator()(const NameKey& k) const {
      return (static_cast<size_t>(k.name) << 8) ^ static_cast<size_t>(k.kind);
    }
  };
  struct NameStats {
    uint64_t count = 0;
    uint64_t total_ns = 0;
    uint64_t max_ns = 0;
  };

  StreamSummarySnapshot totals_;
  Catalog catalog_;                                                  // the names the stream defined.
  std::unordered_map<TrackId, std::pair<NameId, uint64_t>> tracks_;  // name, events.
  std::unordered_map<NameKey, NameStats, NameKeyHash> spans_;
};

}  // namespace liveprof

#endif  // LIVEPROF_AGGREGATORS_STREAM_SUMMARY_H_
