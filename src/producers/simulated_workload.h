// SimulatedWorkload: runs a SimulatedModel (simulated_model.h) as a live
// producer, on its own two threads and through the stream's rings, exactly
// as the host API and the CUPTI source would:
//
//   "sim host" thread   the training thread's and the loader's spans, the
//                       allocations and the step markers, each written when
//                       its end time has passed (host-clock ns);
//   "sim gpu" thread    kernels, copies and memsets, delivered in batches
//                       every flush period (100 ms), as CUPTI delivers its
//                       activity buffers; first the kDeviceInfo of the GPU.
//
// Both threads step the same deterministic model (same options, same seed),
// so they agree on every step without talking to each other.
//
// Rate: the model's own shape gives about 7 k events/s. `events_per_second`
// (10 k to 5 M) compresses time instead of changing the shape: every
// timestamp and duration is divided by the same factor, so each scenario's
// breakdown and classification stay what they are at any rate.
//
// Workers: by default the workload is this process (its tracks' process 0).
// With `workers` = W it is W training ranks instead, as other processes would
// send them through the ingest server: rank i is worker i + 1 (a kProcess
// track "rank i" and its own tracks with that process), with its own model
// (seed + i), threads and rings. Their correlation ids collide, as separate
// processes' do. `straggler` makes one rank's device work slower.
//
// Paced (the demo): events carry real host-clock times and are written when
// they happen; a full ring drops and counts, as for any producer. Unpaced
// (tests, benches): the events of `steps` steps are written as fast as the
// rings take them, waiting (never dropping) when a ring is full, so a run is
// the same for the same seed.
#ifndef LIVEPROF_PRODUCERS_SIMULATED_WORKLOAD_H_
#define LIVEPROF_PRODUCERS_SIMULATED_WORKLOAD_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "producers/simulated_model.h"
#include "stream/stream.h"

namespace liveprof {

struct SimulatedWorkloadOptions {
  SimulatedModelOptions model;   // its tracks are registered by the workload.
  uint64_t steps = 0;            // 0: until Stop().
  double events_per_second = 0;  // 0: the model's own rate; else 1e4..5e6.
  bool paced = true;
  uint64_t start_ns = 0;                   // unpaced: the first step's begin (0: now).
  uint64_t flush_period_ns = 100'000'000;  // paced: device batches.
  // Paced: device events are written only this long after they end, the
  // progress declared as far behind (CUPTI, while the GPU runs behind the
  // CPU, gives a buffer back a second or more after its kernels ended).
  uint64_t device_delay_ns = 0;
  uint32_t workers = 0;           // 0: this process; W: ranks 0..W-1 (workers 1..W).
  int32_t straggler = -1;         // the rank that is slower, or -1.
  double straggler_factor = 1.5;  // its device compute per step, times this.
};

inline constexpr uint32_t kMaxSimulatedWorkers = 64;

class SimulatedWorkload {
 public:
  SimulatedWorkload(Stream& stream, SimulatedWorkloadOptions options);
  ~SimulatedWorkload();  // Stop().
  SimulatedWorkload(const SimulatedWorkload&) = delete;
  SimulatedWorkload& operator=(const SimulatedWorkload&) = delete;

  // Registers the tracks and rings and starts both threads. Once.
  void Start();
  // Waits for both threads to finish `steps` steps (returns at once if
  // steps == 0 and Stop() was not called... so call Stop() for endless runs).
  void Wait();
  // Stops both threads (a step in progress is cut short) and closes the rings.
  void Stop();

  // Steps every simulated worker has done.
  uint64_t steps_done() const;
  // The factor timestamps were divided by (1 when no rate was asked).
  double time_scale() const { return scale_; }

 private:
  // One simulated process: its model's options (tracks included), rings and
  // threads.
  struct Lane {
    SimulatedModelOptions model;
    std::shared_ptr<Ring> host_ring;
    std::shared_ptr<Ring> device_ring;
    std::atomic<uint64_t> host_steps{0};
    std::thread host_thread;
    std::thread device_thread;
  };

  // Registers a lane's tracks (and rings) for `process`, labelled `label`
  // (process 0: the names of a single-process run). False if a ring failed.
  bool AddLane(uint32_t process, const std::string& label, SimulatedModelOptions model);
  void RunHost(Lane& lane);
  void RunDevice(Lane& lane);
  // Writes `e` (with its times scaled) to `ring`; unpaced, waits while full.
  bool Write(Ring& ring, const Event& e);
  Event Scaled(const Event& e) const;
  SimulatedModel MakeModel(const Lane& lane);

  Stream& stream_;
  SimulatedWorkloadOptions options_;
  std::vector<std::unique_ptr<Lane>> lanes_;
  bool started_ = false;
  uint64_t model_t0_ = 0;  // the model's first step begin.
  uint64_t t0_ = 0;        // where it maps to on the host clock.
  double scale_ = 1;
  std::atomic<bool> stop_{false};
};

}  // namespace liveprof

#endif  // LIVEPROF_PRODUCERS_SIMULATED_WORKLOAD_H_
