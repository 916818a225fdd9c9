// FleetState: the fleet view's picture of a job, built only from the
// messages of its JetStream stream (fleet_wire.h), so that a fleet view
// restarted mid-job rebuilds it by reading the stream again.
//
//   - The Pod across every rank of every host: a PodView fed each rank's
//     step summaries (AddExternalStep), step-aligned by step number, its
//     workers labelled "<host> · <rank label>". Medians never read a clock:
//     hosts whose clocks disagree by seconds still line up by step.
//   - Each rank's summaries checked against its agent's sequence (seq 1, 2,
//     3... per agent incarnation): a repeat is counted and not applied
//     again, a gap is counted as missing until its seq comes (a window sent
//     again after later ones were stored: then applied, counted late), a
//     new agent incarnation starts a new sequence (an agent restarted).
//   - Each host: its agent, last status, live / gone / stopped (no message
//     for Options::gone_after_ns: gone; its last status said stopping:
//     stopped), how often it went and came back, its clock's skew against
//     nats-server's (the status' send time less the time JetStream stored it).
//   - Fleet alerts: a straggling rank (the pod's straggler over
//     straggler_steps compared steps above straggler_pct), a host gone, an
//     input-bound rank (its mean input share over its recent steps at or
//     above input_bound_pct); and every agent's own alerts that are firing.
//   - Bad input (malformed, foreign job, newer protocol, wrong subject) is
//     counted by reason, the newest few errors kept: never applied.
//
// Times are Unix nanoseconds passed in (no clock read). Pure: no I/O, no
// lock, no thread; the fleet view's thread owns it.
#ifndef LIVEPROF_FLEET_FLEET_STATE_H_
#define LIVEPROF_FLEET_FLEET_STATE_H_

#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "aggregators/catalog.h"
#include "aggregators/tf/pod_view.h"
#include "fleet/fleet_wire.h"

namespace liveprof {

struct FleetStateOptions {
  uint64_t gone_after_ns = 6'000'000'000;  // a host silent this long is gone.
  uint64_t skew_warn_ns = 1'000'000'000;   // |clock skew| above: flagged.
  double straggler_pct = 20;               // as the local rule (docs/alerts.md).
  uint32_t straggler_steps = 3;
  double input_bound_pct = 20;  // "highly input bound" (docs/semantics-tf.md §3.3).
  size_t view_steps = 20;       // step rows the view carries.
  size_t max_workers = 16384;   // ranks; more are counted, left out.
  size_t max_hosts = 4096;      // hosts; the same.
  size_t lag_samples = 16384;   // the newest lags kept for percentiles.
  size_t alert_history = 100;
};

// One rank as the fleet view knows it.
struct FleetRank {
  uint32_t worker = 0;  // the pod's worker id (1, 2, ... in order of appearance).
  std::string host, label;
  int64_t rank = -1;
  std::string agent;          // the incarnation whose sequence is being followed.
  uint64_t incarnations = 0;  // agents seen for it (restarts + 1).
  uint64_t last_seq = 0;
  uint64_t steps = 0;       // summaries applied.
  uint64_t duplicates = 0;  // summaries of a seq already applied: not applied again.
  uint64_t missing = 0;     // seqs skipped and not come since (lost before the stream).
  uint64_t late = 0;        // seqs that came after a later one (a window sent again): applied.
  std::set<uint64_t> gaps;  // the seqs skipped, awaited (at most kMaxGapsKept; older ones stay missing).
  int64_t last_step = -1;
  uint64_t last_step_ns = 0;
  uint64_t last_mem_peak_bytes = 0;  // its newest step's (0: not known).
  uint64_t mem_peak_bytes = 0;       // the largest of its steps' since it appeared.
  uint64_t last_end_unix_ns = 0;
};

struct FleetHost {
  std::string host;
  std::string agent;
  FleetStatus status;  // the newest (its rank names not kept: ranks_count).
  uint64_t ranks_count = 0;
  bool has_status = false;
  uint64_t last_seen_unix_ns = 0;  // JetStream's time of its newest message.
  bool gone = false;
  uint64_t gone_count = 0, back_count = 0;
  uint64_t agents = 0;                   // incarnations seen.
  std::vector<std::string> agents_seen;  // their ids (the newest 16).
  uint64_t conflicts = 0;                // messages from an earlier agent after a newer one: two agents with one name.
  int64_t skew_ns = 0;                   // its clock less nats-server's, at its newest status.
  bool skewed = false;
  std::map<std::string, FleetAlert> firing;  // its agent's alerts firing, by rule and worker.
};

// "live", "gone" (its agent silent past gone_after) or "stopped" (its last
// status said it stopped cleanly): what /api/fleet and /metrics show.
std::string_view FleetHostStateName(const FleetHost& h);

struct FleetAlertState {
  std::string rule;  // "straggler", "host_gone", "input_bound".
  bool firing = false;
  std::string summary;
  std::string host, label;  // what it is about ("" for host_gone with several).
  uint64_t since_unix_ns = 0;
};

struct FleetCounts {
  uint64_t messages = 0;     // taken from the stream.
  uint64_t redelivered = 0;  // a stream sequence already applied (JetStream redelivery).
  std::array<uint64_t, static_cast<size_t>(FleetReject::kCount)> rejected{};
  uint64_t steps = 0, statuses = 0, alerts = 0;
  uint64_t duplicate_steps = 0, missing_steps = 0;
  uint64_t restarts = 0;  // a rank's new agent incarnation.
  uint64_t ranks_over_cap = 0;
  uint64_t hosts_over_cap = 0;  // messages of hosts past max_workers hosts: not applied.
  uint64_t host_conflicts = 0;  // hosts' agent flipping back to an earlier one (see FleetHost).
  uint64_t late_steps = 0;
  uint64_t skewed_hosts = 0;       // hosts flagged now.
  uint64_t steps_from_future = 0;  // end more than gone_after in the future: a clock.
};

class FleetState {
 public:
  explicit FleetState(FleetStateOptions options = {});
  ~FleetState();
  FleetState(const FleetState&) = delete;
  FleetState& operator=(const FleetState&) = delete;

  // One message of the job `job`'s stream: its subject and bytes, its
  // stream sequence, when JetStream stored it and when it is applied.
  // `live`: it was stored after this view started (a rebuild replays older
  // ones; only live ones sample the lag).
  void Apply(std::string_view job, std::string_view subject, std::string_view data, uint64_t stream_seq,
             uint64_t stored_unix_ns, uint64_t now_unix_ns, bool live);
  // A new consumer (of a stream that may have been made again): stream
  // sequences start over; repeats are still caught per rank.
  void ForgetStreamSequence() { last_stream_seq_ = 0; }
  // Re-evaluates gone hosts and the alerts at `now_unix_ns`, and takes the
  // pod's snapshot that RenderJson shows.
  void Tick(uint64_t now_unix_ns);
  // The view model {"type":"fleet","v":1,...} (docs/fleet.md), at
  // `now_unix_ns`, with the pod as of the last Tick(). The live steps it
  // shows for the first time give the lag samples (end to this render).
  std::string RenderJson(uint64_t now_unix_ns, uint64_t seq);

  const FleetCounts& counts() const { return counts_; }
  const std::map<std::string, FleetRank>& ranks() const { return ranks_; }  // by "host\x1flabel".
  const std::map<std::string, FleetHost>& hosts() const { return hosts_; }
  const std::vector<FleetAlertState>& alerts() const { return alerts_; }
  // The lag from a step's end (its agent's clock) to the first render that
  // shows it, ms: p50, p99, max over the newest lag_samples live steps (0
  // without any).
  struct Lag {
    double p50_ms = 0, p99_ms = 0, max_ms = 0;
    uint64_t samples = 0;
  };
  Lag lag() const;
  const PodView& pod() const { return *pod_; }
  const PodSnapshot& pod_snapshot() const { return pod_snapshot_; }  // as of the last Tick().
  const std::deque<std::string>& recent_errors() const { return errors_; }

 private:
  void ApplyStep(const FleetStep& s, uint64_t now_unix_ns, bool live);
  void ApplyStatus(FleetHost& h, const FleetStatus& s, uint64_t stored_unix_ns, bool live);
  void ApplyAlert(FleetHost& h, const FleetAlert& a);
  // The host's record (its agent and last-seen time updated); null past
  // max_workers hosts (counted).
  FleetHost* HostOf(const std::string& host, const std::string& agent, uint64_t stored_unix_ns);
  void SetAlert(std::string_view rule, bool firing, std::string summary, std::string host, std::string label,
                uint64_t now_unix_ns);

  FleetStateOptions options_;
  Catalog catalog_;  // (empty: the pod's workers are all fed from outside)
  std::unique_ptr<PodView> pod_;
  std::map<std::string, FleetRank> ranks_;
  std::map<std::string, FleetHost> hosts_;
  std::vector<FleetAlertState> alerts_;  // one per rule, in a fixed order.
  struct Transition {
    std::string rule, summary;
    bool firing = false;
    uint64_t unix_ns = 0;
  };
  std::deque<Transition> history_;
  uint64_t last_stream_seq_ = 0;
  uint32_t next_worker_ = 1;
  PodSnapshot pod_snapshot_;            // as of the last Tick().
  std::vector<uint64_t> pending_ends_;  // live steps applied since the last render: their ends.
  std::vector<double> lags_ms_;         // a ring of lag_samples.
  size_t lag_next_ = 0;
  uint64_t lag_total_ = 0;
  std::deque<std::string> errors_;  // the newest rejected messages' errors.
  FleetCounts counts_;
};

}  // namespace liveprof

#endif  // LIVEPROF_FLEET_FLEET_STATE_H_
