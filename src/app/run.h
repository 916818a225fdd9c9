// `liveprof run [options] -- COMMAND [ARGS...]` (docs/attach.md): the server
// (serve's options; app/serve.cc runs it) and the job under it, started with
// what it needs to report there and no change to it:
//   LIVEPROF_SERVER            the server's ingest address;
//   CUDA_INJECTION64_PATH      libliveprof.so: CUDA loads it at cuInit and it
//                              traces the job's GPU activity (src/attach);
//   PYTHONPATH                 + the bootstrap (sitecustomize) and the
//                              liveprof package: a Python job instruments
//                              PyTorch when it imports it (src/python);
//   LIVEPROF_LIBRARY           the same libliveprof.so for the package.
// Signals: a terminal's Ctrl-C reaches the job directly (same process group);
// SIGINT/SIGTERM sent to liveprof are passed on; a second one sends SIGTERM,
// a third SIGKILL. The server stops once the job has ended (after --linger
// seconds if it ended by itself). Exit status: the job's (128 + N if signal
// N killed it); 125 if liveprof itself failed, 126/127 if COMMAND cannot be
// run / is not found, as env(1).
#ifndef LIVEPROF_APP_RUN_H_
#define LIVEPROF_APP_RUN_H_

#include <signal.h>

#include <memory>
#include <string>
#include <vector>

#include "app/args.h"
#include "app/child_process.h"

namespace liveprof {

inline constexpr int kExitLiveprofFailed = 125;

struct RunArgs {
  std::vector<std::string> command;       // COMMAND [ARGS...]
  std::vector<std::string> after_dashes;  // the words after `--` (args.h, Commands::passthrough).
  std::string connect;                    // send to this server instead of starting one.
  double linger_s = 5;                    // the dashboard stays up this long after the job ends.
};

// The job and what happens to it; the serve loop (or RunConnected's) calls
// it from one thread.
class Job {
 public:
  explicit Job(const RunArgs& args) : args_(args) {}

  // Checks that COMMAND can be run (before any server starts). False: the
  // reason is on stderr and exit_status() says which.
  bool Check();
  // Starts it, reporting to `ingest_address`, with signal mask `mask`. False:
  // the reason is on stderr; exit_status() is 125/126/127.
  bool Start(const std::string& ingest_address, const sigset_t& mask);
  // SIGINT/SIGTERM taken by the loop, with its siginfo code (SI_KERNEL: from
  // the terminal, which the job got too).
  void OnSignal(int sig, int si_code);
  // Called on each wake of the loop (a SIGCHLD, a second): reaps the job if
  // it ended. True while the server should go on serving.
  bool KeepServing();
  int exit_status() const { return exit_status_; }

 private:
  const RunArgs& args_;
  ChildProcess child_;
  std::string path_;
  int exit_status_ = kExitLiveprofFailed;
  int interrupts_ = 0;
  bool reported_ = false;
  double ended_at_ = 0;  // seconds on the steady clock; 0: still running.
};

// The environment a job gets to report to `ingest_address` (see above), and
// notes about what could not be set up (libliveprof.so not found...).
std::vector<std::string> JobEnvironment(const std::string& ingest_address, std::vector<std::string>* notes);

// Adds run's own options (--connect, --linger, COMMAND) to `sub`.
void AddRunOptions(CLI::App* sub, RunArgs* args, Commands* commands);
// `liveprof run --connect ADDRESS -- COMMAND`: the job alone, reporting to a
// server that runs elsewhere.
int RunConnected(const RunArgs& args);

}  // namespace liveprof

#endif  // LIVEPROF_APP_RUN_H_
