#include "app/child_process.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/close_range.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

extern char** environ;

namespace liveprof {

bool ChildProcess::Resolve(const std::string& name, std::string* path, int* status, std::string* error) {
  auto executable = [](const std::string& p) {
    struct stat st;
    return stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(p.c_str(), X_OK) == 0;
  };
  if (name.empty()) {
    *status = kExitNotFound;
    *error = "no command given";
    return false;
  }
  if (name.find('/') != std::string::npos) {
    struct stat st;
    if (stat(name.c_str(), &st) != 0) {
      *status = kExitNotFound;
      *error = name + ": " + std::strerror(errno);
      return false;
    }
    if (!executable(name)) {
      *status = kExitCannotExecute;
      *error = name + ": " + (S_ISDIR(st.st_mode) ? "is a directory" : "not executable");
      return false;
    }
    *path = name;
    return true;
  }
  const char* env = std::getenv("PATH");
  const std::string dirs = env != nullptr ? env : "/usr/local/bin:/usr/bin:/bin";
  bool found_not_executable = false;
  for (size_t begin = 0; begin <= dirs.size();) {
    size_t end = dirs.find(':', begin);
    if (end == std::string::npos) end = dirs.size();
    const std::string dir = end > begin ? dirs.substr(begin, end - begin) : ".";
    const std::string candidate = dir + "/" + name;
    if (executable(candidate)) {
      *path = candidate;
      return true;
    }
    if (access(candidate.c_str(), F_OK) == 0) found_not_executable = true;
    begin = end + 1;
  }
  *status = found_not_executable ? kExitCannotExecute : kExitNotFound;
  *error = name + (found_not_executable ? ": not executable" : ": command not found (PATH searched)");
  return false;
}

bool ChildProcess::Start(const std::string& path, const std::vector<std::string>& argv,
                         const std::vector<std::string>& env, const sigset_t& mask, std::string* error) {
  // Everything the child needs is made before fork: after it, in a process
  // with threads, the child may only call async-signal-safe functions.
  std::vector<char*> args, envp;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  for (const std::string& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  int report[2];  // the child writes execve's errno here; closed on a successful exec.
  if (pipe2(report, O_CLOEXEC) != 0) {
    *error = std::string("pipe: ") + std::strerror(errno);
    return false;
  }
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    *error = std::string("fork: ") + std::strerror(errno);
    close(report[0]);
    close(report[1]);
    return false;
  }
  if (pid == 0) {
    close(report[0]);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(kExitCannotExecute);  // liveprof died meanwhile.
    // What the job inherits is what liveprof inherited, except what the
    // server changed: SIGPIPE (ignored for its sockets) and SIGCHLD. An
    // inherited SIG_IGN (nohup's SIGHUP) stays, as it would without liveprof.
    signal(SIGPIPE, SIG_DFL);
    signal(SIGCHLD, SIG_DFL);
    sigprocmask(SIG_SETMASK, &mask, nullptr);
    // No descriptor of liveprof's reaches the job (the web server's listening
    // socket, which Asio opens without close-on-exec, above all): a job's
    // child that outlives liveprof would keep its port.
    syscall(SYS_close_range, 3u, ~0u, CLOSE_RANGE_CLOEXEC);
    execve(path.c_str(), args.data(), envp.data());
    const int e = errno;
    (void)!write(report[1], &e, sizeof e);
    _exit(e == ENOENT ? kExitNotFound : kExitCannotExecute);
  }
  close(report[1]);
  int e = 0;
  ssize_t n;
  do {
    n = read(report[0], &e, sizeof e);
  } while (n < 0 && errno == EINTR);
  close(report[0]);
  if (n == static_cast<ssize_t>(sizeof e)) {
    int status;
    waitpid(pid, &status, 0);
    start_errno_ = e;
    *error = path + ": " + std::strerror(e);
    return false;
  }
  pid_ = pid;
  return true;
}

void ChildProcess::Signal(int sig) const {
  if (running()) kill(pid_, sig);
}

bool ChildProcess::Reap() {
  if (pid_ <= 0) return false;
  if (exited_) return true;
  int status = 0;
  pid_t r;
  do {
    r = waitpid(pid_, &status, WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r < 0 && errno == ECHILD) {  // (reaped by someone else: SIGCHLD ignored; its status is lost)
    exited_ = true;
    exit_status_ = 125;  // (liveprof cannot say: run.h's kExitLiveprofFailed)
    return true;
  }
  if (r != pid_) return false;
  exited_ = true;
  if (WIFSIGNALED(status)) {
    signal_ = WTERMSIG(status);
    exit_status_ = 128 + signal_;
  } else {
    exit_status_ = WEXITSTATUS(status);
  }
  return true;
}

std::string ChildProcess::Ended() const {
  if (signal_ != 0) {
    const char* name = sigabbrev_np(signal_);
    return std::string("killed by SIG") + (name != nullptr ? name : std::to_string(signal_)) + " (status " +
           std::to_string(exit_status_) + ")";
  }
  return "exited with status " + std::to_string(exit_status_);
}

ChildProcess::~ChildProcess() {
  if (!running()) return;
  Signal(SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!Reap() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (!exited_) {
    kill(pid_, SIGKILL);
    int status;
    waitpid(pid_, &status, 0);
  }
}

std::vector<std::string> EnvironmentWith(const std::vector<std::string>& set) {
  std::vector<std::string> out;
  auto name_of = [](const std::string& kv) { return kv.substr(0, kv.find('=')); };
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string kv = *e;
    bool replaced = false;
    for (const std::string& s : set) replaced = replaced || name_of(s) == name_of(kv);
    if (!replaced) out.push_back(kv);
  }
  out.insert(out.end(), set.begin(), set.end());
  return out;
}

}  // namespace liveprof
