// An example training loop instrumented with the host tracing API: what
// `liveprof demo` runs until the simulated GPU workload exists. One training
// thread runs steps (input wait, forward and backward ops, an optimizer
// update, allocations), and a data-loader thread prepares batches.
#ifndef LIVEPROF_APP_EXAMPLE_TRAINING_H_
#define LIVEPROF_APP_EXAMPLE_TRAINING_H_

#include <cstdint>

namespace liveprof {

struct ExampleTrainingOptions {
  int steps = 50;
  // Milliseconds of work per step, split between input, compute and update.
  double step_ms = 20;
  // Share of each step spent waiting for the next batch (0..1).
  double input_share = 0.25;
};

// Runs the loop on the calling thread plus one loader thread; returns when
// every step is done and the loader has exited.
void RunExampleTraining(const ExampleTrainingOptions& options);

}  // namespace liveprof

#endif  // LIVEPROF_APP_EXAMPLE_TRAINING_H_
