#include "app/example_training.h"

#include <pthread.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "producers/host_api.h"

namespace liveprof {
namespace {

// Burns CPU for `us` microseconds (stands in for an op's work).
void Spin(double us) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(static_cast<int64_t>(us * 1000));
  volatile uint64_t x = 0;
  while (std::chrono::steady_clock::now() < until) x = x + 1;
}

class BatchQueue {
 public:
  void Put(int batch) {
    std::lock_guard<std::mutex> lock(mu_);
    q_.push_back(batch);
    cv_.notify_one();
  }
  int Take() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return !q_.empty(); });
    const int b = q_.front();
    q_.pop_front();
    return b;
  }
  size_t Size() {
    std::lock_guard<std::mutex> lock(mu_);
    return q_.size();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<int> q_;
};

}  // namespace

void RunExampleTraining(const ExampleTrainingOptions& o) {
  // The loader needs a whole step's time per batch and the trainer computes
  // for (1 - input_share) of it, so in steady state each step waits
  // input_share of its time for the next batch.
  const double loader_us = o.step_ms * 1000;
  const double compute_us = o.step_ms * 1000 * (1 - o.input_share);
  BatchQueue queue;

  std::thread loader([&] {
    pthread_setname_np(pthread_self(), "data_loader");
    for (int b = 0; b < o.steps; ++b) {
      LIVEPROF_INPUT("Iterator::Map::ParseExample");
      {
        LIVEPROF_INPUT("Iterator::TFRecord::Read");
        Spin(loader_us * 0.5);
      }
      Spin(loader_us * 0.45);
      queue.Put(b);
      LIVEPROF_COUNTER("loader/queue_depth", queue.Size());
    }
  });

  pthread_setname_np(pthread_self(), "train");
  for (int step = 0; step < o.steps; ++step) {
    LIVEPROF_STEP(step);
    {
      LIVEPROF_INPUT("IteratorGetNext");
      queue.Take();
    }
    std::vector<float> activations(1 << 14);
    LIVEPROF_ALLOC("host_bfc", activations.data(), activations.size() * sizeof(float));
    {
      LIVEPROF_OP("model/dense/MatMul:MatMul");
      Spin(compute_us * 0.35);
    }
    {
      LIVEPROF_OP("model/dense/Relu:Relu");
      Spin(compute_us * 0.1);
    }
    {
      LIVEPROF_OP("gradients/model/dense/MatMul_grad/MatMul:MatMul");
      Spin(compute_us * 0.35);
    }
    {
      LIVEPROF_SCOPE("optimizer/Adam/update");
      Spin(compute_us * 0.15);
    }
    LIVEPROF_FREE("host_bfc", activations.data(), activations.size() * sizeof(float));
    if (step % 10 == 9) LIVEPROF_INSTANT("checkpoint");
  }
  loader.join();
}

}  // namespace liveprof
