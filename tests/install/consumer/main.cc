// A training loop as a C++ user writes one, instrumented with liveprof's host
// API from an installed liveprof: N steps, each waiting 4 ms for its input
// and computing 2 ms. LIVEPROF_SERVER in the environment sends the events to
// a liveprof server; the sender is flushed before exit, as a user would
// (the defaults), and says what it recorded, what the server acknowledged
// and what was lost:
//
//   consumer STEPS  ->  "consumer: N steps, R events recorded, D delivered, L lost"
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "ingest/global_sender.h"
#include "producers/host_api.h"

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::atoi(argv[1]) : 10;
  using std::chrono::milliseconds;
  for (int step = 0; step < steps; ++step) {
    LIVEPROF_STEP(step);
    {
      LIVEPROF_INPUT("IteratorGetNext");
      std::this_thread::sleep_for(milliseconds(4));
    }
    {
      LIVEPROF_OP("model/dense/MatMul:MatMul");
      std::this_thread::sleep_for(milliseconds(2));
    }
  }
  liveprof::DisconnectGlobalStream();  // (its default wait for the acknowledgements: 2 s)
  const liveprof::SenderStatus s = liveprof::GlobalSenderStatus();
  using u64 = unsigned long long;
  std::printf(
      "consumer: %d steps, %llu events recorded, %llu delivered, %llu lost (%llu in full rings, %llu unacknowledged"
      " at exit), %llu connections%s%s\n",
      steps, u64{s.events_recorded}, u64{s.events_delivered}, u64{s.events_lost()}, u64{s.events_ring_dropped},
      u64{s.events_unsent_at_stop}, u64{s.connects},
      s.last_error.empty() ? "" : "; last error: ", s.last_error.c_str());
  return s.events_recorded > 0 && s.events_delivered == s.events_recorded ? 0 : 1;
}
