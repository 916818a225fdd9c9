// A real nats-server (Debian's /usr/sbin/nats-server) on a free loopback
// port with JetStream and a store folder, started and killed by a test or a
// benchmark. Its log goes to /dev/null.
#ifndef LIVEPROF_TESTS_FLEET_NATS_TEST_SERVER_H_
#define LIVEPROF_TESTS_FLEET_NATS_TEST_SERVER_H_

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>

namespace liveprof::test {

inline constexpr const char* kNatsServer = "/usr/sbin/nats-server";

// A port nothing listens on now (the kernel's pick, released).
inline uint16_t FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

// True when 127.0.0.1:port accepts a connection.
inline bool Accepts(uint16_t port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  const bool ok = connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  close(fd);
  return ok;
}

// nats-server -js on 127.0.0.1:port with its store in `dir`; killed
// (SIGKILL) when it goes, if still running.
class NatsTestServer {
 public:
  NatsTestServer(uint16_t port, std::string dir, std::string binary = kNatsServer)
      : port_(port), dir_(std::move(dir)), binary_(std::move(binary)) {}
  ~NatsTestServer() { Kill(SIGKILL); }
  NatsTestServer(const NatsTestServer&) = delete;
  NatsTestServer& operator=(const NatsTestServer&) = delete;

  // Starts it and waits (up to 10 s) until it accepts connections.
  bool Start() {
    pid_ = fork();
    if (pid_ == 0) {
      const int null = open("/dev/null", O_WRONLY);
      dup2(null, 1);
      dup2(null, 2);
      const std::string p = std::to_string(port_);
      execl(binary_.c_str(), binary_.c_str(), "-js", "-a", "127.0.0.1", "-p", p.c_str(), "-sd", dir_.c_str(),
            static_cast<char*>(nullptr));
      _exit(127);
    }
    for (int i = 0; i < 1000 && pid_ > 0; ++i) {
      if (Accepts(port_)) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }
  void Kill(int sig) {
    if (pid_ <= 0) return;
    kill(pid_, sig);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  pid_t pid() const { return pid_; }
  std::string url() const { return "nats://127.0.0.1:" + std::to_string(port_); }

 private:
  uint16_t port_;
  std::string dir_, binary_;
  pid_t pid_ = -1;
};

}  // namespace liveprof::test

#endif  // LIVEPROF_TESTS_FLEET_NATS_TEST_SERVER_H_
