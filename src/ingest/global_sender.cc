// The process's one sender (ingest_sender.h): ConnectGlobalStream(),
// DisconnectGlobalStream(), a fork's child, and LIVEPROF_SERVER at
// GlobalStream()'s creation.
#include <pthread.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>

#include "ingest/global_sender.h"
#include "ingest/ingest_sender.h"
#include "producers/host_api.h"

namespace liveprof {
namespace {

std::string ProgramName() {
  std::ifstream comm("/proc/self/comm");
  std::string name;
  std::getline(comm, name);
  return name.empty() ? "process" : name;
}

std::mutex g_sender_mu;
std::unique_ptr<IngestSender> g_sender;
SenderStatus g_final;  // the last sender's, once stopped.

// A child forked after the connect has the sender object but not its thread:
// it is left alone (never joined, never freed), and the child may connect
// anew (a DataLoader worker does: docs/attach.md). pthread_atfork makes that
// safe: the handlers below hold g_sender_mu across the fork, and host_api's
// hold the stream's locks (registered before these, so taken after
// g_sender_mu: the order ConnectGlobalStream takes them in), so that no
// thread of the parent holds one in the child. A fork that runs no handlers
// (a raw clone) is caught by the pid check: such a child may not connect.
bool g_forked_child = false;
void ForgetForkedSender() {
  if (g_sender != nullptr && !g_sender->InOwner()) {
    (void)g_sender.release();
    g_forked_child = true;
  }
}

void PrepareFork() { g_sender_mu.lock(); }
void AfterForkInParent() { g_sender_mu.unlock(); }
void AfterForkInChild() {
  if (g_sender != nullptr) g_sender->CloseInForkChild();
  (void)g_sender.release();  // (its thread is the parent's)
  g_final = SenderStatus{};
  g_forked_child = false;
  g_sender_mu.unlock();
}

}  // namespace

bool ConnectGlobalStream(const SenderOptions& options, std::string* error) {
  IngestEndpoint endpoint;
  if (!ParseIngestEndpoint(options.address, &endpoint, error)) {
    *error = "connecting to a liveprof server: " + *error;
    return false;
  }
  if (endpoint.tcp && endpoint.port == 0) {
    *error = "liveprof.connect(" + options.address + "): a TCP address needs the server's port";
    return false;
  }
  SenderOptions o = options;
  if (o.program.empty()) o.program = ProgramName();
  if (o.rank < 0) {
    if (const char* r = std::getenv("RANK"); r != nullptr && *r != '\0') o.rank = std::atoi(r);
  }
  Stream& stream = GlobalStream();  // (LIVEPROF_SERVER, if set, connects here first)
  std::lock_guard<std::mutex> lock(g_sender_mu);
  ForgetForkedSender();
  if (g_forked_child) {
    *error = "connecting to " + options.address +
             ": this process was forked from one that sends to a server; connect before the fork in the parent, "
             "or after an exec";
    return false;
  }
  if (g_sender != nullptr) {
    *error = "connecting to " + options.address + ": this process already sends to a server (" + g_sender->address() +
             "); disconnect first";
    return false;
  }
  static bool at_fork = pthread_atfork(PrepareFork, AfterForkInParent, AfterForkInChild) == 0;
  (void)at_fork;
  g_sender = std::make_unique<IngestSender>(stream, std::move(o), std::move(endpoint));
  g_sender->Start();
  static bool at_exit = [] { return std::atexit([] { DisconnectGlobalStream(1'000'000'000); }) == 0; }();
  (void)at_exit;
  return true;
}

void DisconnectGlobalStream(uint64_t timeout_ns) {
  std::unique_ptr<IngestSender> sender;
  {
    std::lock_guard<std::mutex> lock(g_sender_mu);
    ForgetForkedSender();
    sender = std::move(g_sender);
  }
  if (sender == nullptr) return;
  sender->Stop(timeout_ns);
  std::lock_guard<std::mutex> lock(g_sender_mu);
  g_final = sender->Status();
}

namespace internal {

void ConnectFromEnvironment() {
  const char* address = std::getenv("LIVEPROF_SERVER");
  if (address == nullptr || *address == '\0') return;
  SenderOptions options;
  options.address = address;
  // The name the server shows (default: the process's, /proc/self/comm);
  // liveprof run's Python bootstrap sets it to the script's.
  if (const char* program = std::getenv("LIVEPROF_PROGRAM"); program != nullptr) options.program = program;
  std::string error;
  if (!ConnectGlobalStream(options, &error)) std::fprintf(stderr, "liveprof: LIVEPROF_SERVER: %s\n", error.c_str());
}

}  // namespace internal

SenderStatus GlobalSenderStatus() {
  std::lock_guard<std::mutex> lock(g_sender_mu);
  ForgetForkedSender();
  return g_sender != nullptr ? g_sender->Status() : g_final;
}

}  // namespace liveprof

// The hook host_api.cc calls when GlobalStream() is created (a weak
// reference there: a program that does not link this library has none and
// never connects). liveprof_ingest_client's link options name it, so that a
// program linking the library always carries it.
extern "C" void liveprof_ingest_on_global_stream(void) { liveprof::internal::ConnectFromEnvironment(); }
