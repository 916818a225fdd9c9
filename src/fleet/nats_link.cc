// NatsLink: cnats connection options, JetStream context, the job's stream.
#include "fleet/nats_link.h"

#include <nats/nats.h>

#include "fleet/fleet_wire.h"

#include <vector>

namespace liveprof {

namespace {

std::string StatusText(natsStatus s) {
  std::string out = natsStatus_GetText(s);
  if (const char* last = nats_GetLastError(nullptr); last != nullptr && *last != '\0') {
    out += " (";
    out += last;
    out += ")";
  }
  return out;
}

}  // namespace

std::string RedactNatsUrl(std::string_view url) {
  std::string out;
  size_t pos = 0;
  while (pos < url.size()) {  // (a list of URLs, comma separated)
    size_t end = url.find(',', pos);
    if (end == std::string_view::npos) end = url.size();
    std::string_view one = url.substr(pos, end - pos);
    const size_t scheme = one.find("://");
    const size_t auth_from = scheme == std::string_view::npos ? 0 : scheme + 3;
    const size_t at = one.rfind('@');  // (cnats splits user info at the last '@')
    if (!out.empty()) out += ',';
    if (at != std::string_view::npos && at >= auth_from) {
      out += std::string(one.substr(0, auth_from)) + "***" + std::string(one.substr(at));
    } else {
      out += one;
    }
    pos = end + 1;
  }
  return out;
}

std::string FleetStreamName(std::string_view job) { return "LIVEPROF_" + std::string(job); }

NatsLink::~NatsLink() { Close(); }

void NatsLink::OnDisconnected(natsConnection*, void* self) {
  static_cast<NatsLink*>(self)->disconnects_.fetch_add(1, std::memory_order_relaxed);
}
void NatsLink::OnReconnected(natsConnection*, void* self) {
  static_cast<NatsLink*>(self)->reconnects_.fetch_add(1, std::memory_order_relaxed);
}

void NatsLink::OnConnected(natsConnection*, void*) {}

void NatsLink::OnClosed(natsConnection*, void* self) {
  auto* link = static_cast<NatsLink*>(self);
  std::lock_guard lock(link->closed_mu_);
  link->closed_ = true;
  link->closed_cv_.notify_all();
}

void NatsLink::OnPublishError(jsCtx*, jsPubAckErr*, void* self) {
  static_cast<NatsLink*>(self)->publish_errors_.fetch_add(1, std::memory_order_relaxed);
}

bool NatsLink::Connect(const NatsOptions& options, std::string* error) {
  natsOptions* opts = nullptr;
  natsStatus s = natsOptions_Create(&opts);
  auto fail = [&](std::string what) {
    *error = "NATS " + RedactNatsUrl(options.url) + ": " + what;
    natsOptions_Destroy(opts);
    return false;
  };
  if (s != NATS_OK) return fail("options: " + StatusText(s));
  // A list of servers (a cluster): natsOptions_SetURL takes one only.
  std::vector<std::string> urls;
  for (size_t pos = 0; pos <= options.url.size();) {
    size_t end = options.url.find(',', pos);
    if (end == std::string::npos) end = options.url.size();
    std::string one = options.url.substr(pos, end - pos);
    while (!one.empty() && one.front() == ' ') one.erase(one.begin());
    while (!one.empty() && one.back() == ' ') one.pop_back();
    if (!one.empty()) urls.push_back(std::move(one));
    pos = end + 1;
  }
  if (urls.empty()) return fail("no server URL");
  std::vector<const char*> servers;
  for (const std::string& u : urls) servers.push_back(u.c_str());
  if ((s = natsOptions_SetServers(opts, servers.data(), static_cast<int>(servers.size()))) != NATS_OK) {
    return fail("bad URL: " + StatusText(s));
  }
  if (!options.name.empty()) natsOptions_SetName(opts, options.name.c_str());
  if (!options.creds_file.empty() &&
      (s = natsOptions_SetUserCredentialsFromFiles(opts, options.creds_file.c_str(), nullptr)) != NATS_OK) {
    return fail("creds file " + options.creds_file + ": " + StatusText(s));
  }
  natsOptions_SetTimeout(opts, options.connect_timeout_ms);
  natsOptions_SetMaxReconnect(opts, -1);  // forever: a restarted server is waited for.
  natsOptions_SetReconnectWait(opts, 250);
  natsOptions_SetReconnectBufSize(opts, 0);  // nothing is published blind while away: we keep our own outbox.
  natsOptions_SetPingInterval(opts, 1000);   // a server gone without a FIN shows within ~3 s.
  natsOptions_SetMaxPingsOut(opts, 2);
  natsOptions_SetDisconnectedCB(opts, &NatsLink::OnDisconnected, this);
  natsOptions_SetReconnectedCB(opts, &NatsLink::OnReconnected, this);
  natsOptions_SetClosedCB(opts, &NatsLink::OnClosed, this);
  // With a callback, a server not up yet is retried in the background and
  // Connect returns NATS_NOT_YET_CONNECTED (without one it would block).
  natsOptions_SetRetryOnFailedConnect(opts, true, &NatsLink::OnConnected, this);
  natsConnection* nc = nullptr;
  s = natsConnection_Connect(&nc, opts);
  nc_.store(nc, std::memory_order_release);
  if (s != NATS_OK && s != NATS_NOT_YET_CONNECTED) return fail("connect: " + StatusText(s));
  natsOptions_Destroy(opts);
  jsOptions jo;
  jsOptions_Init(&jo);
  jo.Wait = 5000;
  jo.PublishAsync.MaxPending = 4096;
  jo.PublishAsync.ErrHandler = &NatsLink::OnPublishError;
  jo.PublishAsync.ErrHandlerClosure = this;
  if ((s = natsConnection_JetStream(&js_, nc, &jo)) != NATS_OK) {
    *error = "NATS JetStream: " + StatusText(s);
    return false;
  }
  return true;
}

bool NatsLink::ConnectForJob(std::string_view job, NatsOptions options, std::string_view name, std::string* error) {
  if (std::string why = CheckJobName(job); !why.empty()) {
    *error = why;
    return false;
  }
  if (options.name.empty()) options.name = name;
  return Connect(options, error);
}

void NatsLink::Close() {
  if (js_ != nullptr) jsCtx_Destroy(js_);
  js_ = nullptr;
  if (natsConnection* nc = nc_.exchange(nullptr, std::memory_order_acq_rel); nc != nullptr) {
    natsConnection_Close(nc);
    {
      std::unique_lock lock(closed_mu_);
      closed_cv_.wait_for(lock, std::chrono::seconds(5), [&] { return closed_; });
    }
    natsConnection_Destroy(nc);
  }
}

bool NatsLink::connected() const {
  natsConnection* nc = nc_.load(std::memory_order_acquire);
  return nc != nullptr && natsConnection_Status(nc) == NATS_CONN_STATUS_CONNECTED;
}

bool NatsLink::EnsureStream(std::string_view job, int64_t max_age_s, int64_t max_bytes, std::string* error) {
  const std::string name = FleetStreamName(job);
  const std::string subject = "liveprof." + std::string(job) + ".>";
  const char* subjects[] = {subject.c_str()};
  jsStreamConfig cfg;
  jsStreamConfig_Init(&cfg);
  cfg.Name = name.c_str();
  cfg.Subjects = subjects;
  cfg.SubjectsLen = 1;
  cfg.Storage = js_FileStorage;
  cfg.Discard = js_DiscardOld;
  cfg.MaxAge = max_age_s * 1'000'000'000;
  cfg.MaxBytes = max_bytes;
  cfg.Duplicates = int64_t{120} * 1'000'000'000;
  jsStreamInfo* si = nullptr;
  jsErrCode jerr = static_cast<jsErrCode>(0);
  const natsStatus s = js_AddStream(&si, js_, &cfg, nullptr, &jerr);
  if (si != nullptr) jsStreamInfo_Destroy(si);
  // Already there with other limits (another agent's options): used as it is.
  if (s == NATS_OK || jerr == JSStreamNameExistErr) return true;
  *error = "JetStream stream " + name + ": " + StatusText(s) +
           (jerr != 0 ? " (JetStream error " + std::to_string(static_cast<int>(jerr)) + ")" : "");
  return false;
}

}  // namespace liveprof
