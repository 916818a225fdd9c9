// The job `liveprof run` starts (app/run.cc): found on PATH, started with
// fork + execve in liveprof's process group (so a terminal's Ctrl-C reaches
// it first, directly), signalled, reaped. POSIX only; no thread of its own.
//
// The job never outlives liveprof unnoticed: it is started with
// PR_SET_PDEATHSIG = SIGTERM, so if liveprof dies (even by SIGKILL) the job
// is told to stop, as if by a Ctrl-C from the outside.
#ifndef LIVEPROF_APP_CHILD_PROCESS_H_
#define LIVEPROF_APP_CHILD_PROCESS_H_

#include <signal.h>
#include <sys/types.h>

#include <string>
#include <vector>

namespace liveprof {

// Exit statuses of a command that could not be run, as the shell's and
// env(1)'s: 126 found but not executable, 127 not found.
inline constexpr int kExitCannotExecute = 126;
inline constexpr int kExitNotFound = 127;

class ChildProcess {
 public:
  ChildProcess() = default;
  ~ChildProcess();  // a job still running is sent SIGTERM, then reaped (5 s), then SIGKILL.
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // The file `name` runs as execvp would find it: a name with a slash as
  // is, else the first executable match on PATH. False with the reason and
  // the status a shell would give (127 not found, 126 not executable).
  static bool Resolve(const std::string& name, std::string* path, int* status, std::string* error);

  // Starts `path` with `argv` and the environment `env` ("NAME=value"
  // each), the signal mask `mask` and default signal dispositions. False
  // with the reason (execve's errno included) if it could not be started.
  bool Start(const std::string& path, const std::vector<std::string>& argv, const std::vector<std::string>& env,
             const sigset_t& mask, std::string* error);

  pid_t pid() const { return pid_; }
  int start_errno() const { return start_errno_; }  // execve's, when Start failed there.
  bool running() const { return pid_ > 0 && !exited_; }
  // Sends `sig` to the job if it runs.
  void Signal(int sig) const;
  // Reaps the job if it has ended (never waits). True once it has ended.
  bool Reap();
  // After it ended: its exit status, or 128 + the signal that killed it
  // (as a shell gives it), and that in words.
  int exit_status() const { return exit_status_; }
  std::string Ended() const;

 private:
  pid_t pid_ = -1;
  bool exited_ = false;
  int exit_status_ = 0;
  int signal_ = 0;  // the signal that killed it, or 0.
  int start_errno_ = 0;
};

// The environment of this process with `set` ("NAME=value" each) replacing
// or adding those names.
std::vector<std::string> EnvironmentWith(const std::vector<std::string>& set);

}  // namespace liveprof

#endif  // LIVEPROF_APP_CHILD_PROCESS_H_
