// `liveprof run` (run.h): the job, its environment, its signals.
#include "app/run.h"

#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "app/paths.h"
#include "ingest/ingest_endpoint.h"

namespace liveprof {
namespace {

double SteadySeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

bool IsFile(const std::string& path) { return !path.empty() && access(path.c_str(), R_OK) == 0; }

std::string Joined(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& w : words) out += (out.empty() ? "" : " ") + w;
  return out;
}

}  // namespace

std::vector<std::string> JobEnvironment(const std::string& ingest_address, std::vector<std::string>* notes) {
  std::vector<std::string> set = {"LIVEPROF_SERVER=" + ingest_address};
  // The Python package (with its libliveprof.so) and the bootstrap: in the
  // build tree <build>/python next to <build>/bin/liveprof (both folders go
  // on PYTHONPATH), or where LIVEPROF_PYTHON_DIR says; installed by pip, this
  // executable is <package>/bin/liveprof and the bootstrap is
  // <package>/bootstrap, which alone goes on PYTHONPATH: it loads the package
  // it is in (not the whole site-packages ahead of the job's standard library).
  const std::string exe_dir = ExecutableDir();
  std::string python_dir = exe_dir + "/../python";
  std::string package = python_dir + "/liveprof";
  std::string bootstrap = python_dir + "/bootstrap";
  if (const char* d = std::getenv("LIVEPROF_PYTHON_DIR"); d != nullptr && *d != '\0') {
    python_dir = d;
    package = python_dir + "/liveprof";
    bootstrap = python_dir + "/bootstrap";
  } else if (IsFile(exe_dir + "/../__init__.py") && IsFile(exe_dir + "/../bootstrap/sitecustomize.py")) {
    package = exe_dir + "/..";
    bootstrap = package + "/bootstrap";
    python_dir = "";  // (nothing more on PYTHONPATH)
  }
  std::string library;
  if (const char* l = std::getenv("LIVEPROF_LIBRARY"); l != nullptr && *l != '\0') {
    library = l;
  } else if (IsFile(package + "/libliveprof.so")) {
    library = package + "/libliveprof.so";
  } else if (IsFile(exe_dir + "/../lib/libliveprof.so")) {
    library = exe_dir + "/../lib/libliveprof.so";
  }
  if (char* real = library.empty() ? nullptr : realpath(library.c_str(), nullptr); real != nullptr) {
    library = real;
    std::free(real);
  }
  if (library.empty()) {
    notes->push_back("libliveprof.so not found (looked in " + package + " and " + exe_dir +
                     "/../lib; LIVEPROF_LIBRARY names it): the job's GPU activity is not traced");
  } else {
    set.push_back("LIVEPROF_LIBRARY=" + library);  // the package loads this very file: one copy.
    const char* other = std::getenv("CUDA_INJECTION64_PATH");
    if (other != nullptr && *other != '\0' && library != other) {
      notes->push_back(std::string("CUDA_INJECTION64_PATH is already set (") + other +
                       ": another tool's?): kept; the job's GPU activity is not traced by liveprof");
    } else {
      set.push_back("CUDA_INJECTION64_PATH=" + library);
    }
  }
  const auto real_path = [](const std::string& path) {
    char* real = realpath(path.c_str(), nullptr);
    const std::string out = real != nullptr ? real : path;
    std::free(real);
    return out;
  };
  if (IsFile(bootstrap + "/sitecustomize.py")) {
    std::string path = real_path(bootstrap);
    if (!python_dir.empty()) path += ":" + real_path(python_dir);
    const char* old = std::getenv("PYTHONPATH");
    set.push_back("PYTHONPATH=" + path + (old != nullptr && *old != '\0' ? ":" + std::string(old) : std::string()));
  } else {
    notes->push_back("the Python bootstrap is not at " + bootstrap +
                     " (LIVEPROF_PYTHON_DIR names the folder of bootstrap/ and liveprof/): a Python job is not "
                     "instrumented");
  }
  return set;
}

bool Job::Check() {
  std::string error;
  if (!ChildProcess::Resolve(args_.command.empty() ? "" : args_.command[0], &path_, &exit_status_, &error)) {
    std::fprintf(stderr, "liveprof run: %s\n", error.c_str());
    return false;
  }
  return true;
}

bool Job::Start(const std::string& ingest_address, const sigset_t& mask) {
  std::vector<std::string> notes;
  const std::vector<std::string> env = EnvironmentWith(JobEnvironment(ingest_address, &notes));
  for (const std::string& n : notes) std::fprintf(stderr, "liveprof run: %s\n", n.c_str());
  std::string error;
  if (!child_.Start(path_, args_.command, env, mask, &error)) {
    std::fprintf(stderr, "liveprof run: %s\n", error.c_str());
    exit_status_ = child_.start_errno() == ENOENT ? kExitNotFound : kExitCannotExecute;
    return false;
  }
  std::printf("liveprof run: job %s (pid %d) reporting to %s\n", Joined(args_.command).c_str(),
              static_cast<int>(child_.pid()), ingest_address.c_str());
  std::fflush(stdout);
  return true;
}

void Job::OnSignal(int sig, int si_code) {
  if (!child_.running()) {
    ended_at_ = 1;  // (long ago: no linger once asked to stop)
    return;
  }
  ++interrupts_;
  // A terminal's Ctrl-C went to the whole foreground process group: the job
  // has it too, if it is still in ours (a job that made a group of its own,
  // setsid, did not get it: it is passed on).
  const bool job_has_it = sig == SIGINT && si_code == SI_KERNEL && getpgid(child_.pid()) == getpgrp();
  const int pass = interrupts_ == 1 ? sig : interrupts_ == 2 ? SIGTERM : SIGKILL;
  if (interrupts_ > 1 || !job_has_it) child_.Signal(pass);
  std::fprintf(stderr, "liveprof run: %s: %s the job (pid %d)%s\n", sig == SIGINT ? "SIGINT" : "SIGTERM",
               interrupts_ == 1  ? "stopping"
               : pass == SIGTERM ? "SIGTERM to"
                                 : "SIGKILL to",
               static_cast<int>(child_.pid()),
               interrupts_ == 1 ? "; the server stops when it has ended (again: SIGTERM, then SIGKILL)" : "");
}

bool Job::KeepServing() {
  if (ended_at_ == 0 && child_.Reap()) {
    ended_at_ = SteadySeconds();
    exit_status_ = child_.exit_status();
  }
  if (ended_at_ == 0) return true;
  if (!reported_) {
    reported_ = true;
    const bool linger = interrupts_ == 0 && args_.linger_s > 0;
    std::printf("liveprof run: the job %s%s\n", child_.Ended().c_str(),
                linger ? ("; the dashboard stays up " + std::to_string(static_cast<int>(args_.linger_s)) +
                          " s (--linger; Ctrl-C stops)")
                             .c_str()
                       : "");
    std::fflush(stdout);
    if (!linger) return false;
  }
  return interrupts_ == 0 && SteadySeconds() - ended_at_ < args_.linger_s;
}

void AddRunOptions(CLI::App* sub, RunArgs* args, Commands* commands) {
  commands->passthrough.emplace_back(sub->get_name(), &args->after_dashes);
  sub->add_option("--connect", args->connect,
                  "report to the server at ADDRESS (unix:PATH or tcp:127.0.0.1:PORT, `liveprof serve "
                  "--ingest`) instead of starting one");
  AddNumber(sub, "--linger", args->linger_s, 0, 1e6,
            "keep the dashboard up this many seconds after the job ends by itself (default 5)");
  // COMMAND [ARGS...]: everything from the first word that is not one of
  // run's options on (`--` may mark it), the job's own options included.
  // COMMAND [ARGS...] come after `--` (ParseAndRun hands them over unparsed:
  // the job's options are its own); without `--`, words that are not run's
  // options are the command, and an option of the job is refused as ours.
  sub->add_option("COMMAND", args->command, "the job and its arguments, after --");
  sub->footer("Usage: liveprof run [OPTIONS] -- COMMAND [ARGS...]");
}

int RunConnected(const RunArgs& args) {
  IngestEndpoint e;
  std::string error;
  if (!ParseIngestEndpoint(args.connect, &e, &error)) {
    std::fprintf(stderr, "liveprof run: --connect: %s\n", error.c_str());
    return 2;
  }
  RunArgs no_linger = args;  // (no dashboard here to keep up)
  no_linger.linger_s = 0;
  Job job(no_linger);
  if (!job.Check()) return job.exit_status();
  sigset_t signals, old;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGCHLD);
  pthread_sigmask(SIG_BLOCK, &signals, &old);
  if (!job.Start(args.connect, old)) return job.exit_status();
  for (;;) {
    siginfo_t info{};
    const timespec tick{1, 0};
    const int sig = sigtimedwait(&signals, &info, &tick);
    if (sig == SIGINT || sig == SIGTERM) job.OnSignal(sig, info.si_code);
    if (!job.KeepServing()) break;
  }
  return job.exit_status();
}

}  // namespace liveprof
