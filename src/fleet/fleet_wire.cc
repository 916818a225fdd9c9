// The fleet's messages: JSON out with JsonWriter, in with nlohmann-json,
// every field checked.
#include "fleet/fleet_wire.h"

#include <nlohmann/json.hpp>

#include <charconv>

#include "base/json_writer.h"

namespace liveprof {

namespace {

using nlohmann::json;

void Header(JsonWriter& w, std::string_view type, std::string_view job, std::string_view host, std::string_view agent) {
  w.KV("type", type);
  w.KV("v", kFleetProtocolVersion);
  w.KV("job", job);
  w.KV("host", host);
  w.KV("agent", agent);
}

// Reads fields of one message; the first problem is kept, naming its field.
class Reader {
 public:
  Reader(const json& j, std::string_view subject) : j_(j), subject_(subject) {}
  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }

  std::string Str(const char* key, bool required = true, size_t max_len = 256) {
    const auto it = j_.find(key);
    if (it == j_.end() || it->is_null()) {
      if (required) Fail(key, "missing");
      return {};
    }
    if (!it->is_string()) return Fail(key, "not a string"), std::string();
    std::string s = it->get<std::string>();
    if (s.size() > max_len) return Fail(key, "longer than " + std::to_string(max_len) + " bytes"), std::string();
    if (required && s.empty()) return Fail(key, "empty"), std::string();
    return s;
  }
  uint64_t U64(const char* key, bool required = true) {
    const auto it = j_.find(key);
    if (it == j_.end()) {
      if (required) Fail(key, "missing");
      return 0;
    }
    if (!it->is_number_unsigned()) return Fail(key, "not a whole number >= 0"), 0;
    return it->get<uint64_t>();
  }
  int64_t I64(const char* key) {
    const auto it = j_.find(key);
    if (it == j_.end()) return Fail(key, "missing"), 0;
    if (!it->is_number_integer()) return Fail(key, "not a whole number"), 0;
    return it->get<int64_t>();
  }
  bool Bool(const char* key) {
    const auto it = j_.find(key);
    if (it == j_.end()) return false;
    if (!it->is_boolean()) return Fail(key, "not true or false"), false;
    return it->get<bool>();
  }
  const json* Get(const char* key) const {
    const auto it = j_.find(key);
    return it == j_.end() ? nullptr : &*it;
  }
  void Fail(std::string_view key, std::string_view what) {
    if (error_.empty()) error_ = std::string(subject_) + ": field '" + std::string(key) + "' " + std::string(what);
  }

 private:
  const json& j_;
  std::string_view subject_;
  std::string error_;
};

FleetDecoded Reject(FleetReject r, std::string error) {
  FleetDecoded d;
  d.reject = r;
  d.error = std::move(error);
  return d;
}

// "liveprof.<job>.<kind>.<host>[.<rank>]" split in tokens.
std::vector<std::string_view> Tokens(std::string_view subject) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (size_t i = 0; i <= subject.size(); ++i) {
    if (i == subject.size() || subject[i] == '.') {
      out.push_back(subject.substr(start, i - start));
      start = i + 1;
    }
  }
  return out;
}

}  // namespace

std::string_view FleetRejectName(FleetReject r) {
  switch (r) {
    case FleetReject::kNone: return "none";
    case FleetReject::kMalformed: return "malformed";
    case FleetReject::kUnknownType: return "unknown_type";
    case FleetReject::kNewerVersion: return "newer_version";
    case FleetReject::kForeignJob: return "foreign_job";
    case FleetReject::kSubjectMismatch: return "subject_mismatch";
    case FleetReject::kCount: break;
  }
  return "?";
}

std::string SubjectToken(std::string_view s) {
  std::string out(s.empty() ? "_" : s);
  for (char& c : out) {
    if (c == '.' || c == '*' || c == '>' || static_cast<unsigned char>(c) <= ' ' || c == 0x7f) c = '_';
  }
  return out;
}

int64_t RankOfLabel(std::string_view label) {
  constexpr std::string_view kPrefix = "rank ";
  if (!label.starts_with(kPrefix)) return -1;
  const std::string_view digits = label.substr(kPrefix.size());
  int64_t v = -1;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (ec != std::errc() || end != digits.data() + digits.size() || v < 0) return -1;
  return v;
}

std::string RankToken(const FleetStep& s) { return s.rank >= 0 ? std::to_string(s.rank) : "w" + SubjectToken(s.label); }

std::string CheckJobName(std::string_view job) {
  if (job.empty() || job.size() > 64) return "a job name is 1 to 64 characters";
  for (const char c : job) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    if (!ok) return "a job name is letters, digits, '_' and '-' only: '" + std::string(job) + "'";
  }
  return {};
}

std::string FleetStepSubject(std::string_view job, std::string_view host, const FleetStep& s) {
  return "liveprof." + std::string(job) + ".step." + SubjectToken(host) + "." + RankToken(s);
}
std::string FleetStatusSubject(std::string_view job, std::string_view host) {
  return "liveprof." + std::string(job) + ".status." + SubjectToken(host);
}
std::string FleetAlertSubject(std::string_view job, std::string_view host) {
  return "liveprof." + std::string(job) + ".alert." + SubjectToken(host);
}
std::string FleetQuerySubject(std::string_view job, std::string_view host) {
  return "liveprof-query." + std::string(job) + "." + SubjectToken(host);
}

std::string EncodeFleetStep(const FleetStep& s) {
  JsonWriter w;
  w.BeginObject();
  Header(w, "fleet_step", s.job, s.host, s.agent);
  w.KV("label", s.label);
  w.KV("rank", s.rank);
  w.KV("seq", s.seq);
  w.KV("step", s.step);
  w.KV("end_unix_ns", s.end_unix_ns);
  w.KV("step_ns", s.step_ns);
  w.Key("buckets_ns");
  w.BeginObject();
  for (size_t b = 0; b < kBucketCount; ++b) w.KV(BucketKey(static_cast<Bucket>(b)), s.bucket_ns[b]);
  w.EndObject();
  w.KV("mem_peak_bytes", s.mem_peak_bytes);
  w.KV("agent_dropped", s.agent_dropped);
  w.KV("sent_unix_ns", s.sent_unix_ns);
  w.EndObject();
  return w.Take();
}

std::string EncodeFleetStatus(const FleetStatus& s) {
  JsonWriter w;
  w.BeginObject();
  Header(w, "fleet_status", s.job, s.host, s.agent);
  w.KV("pid", s.pid);
  w.KV("started_unix_ns", s.started_unix_ns);
  w.KV("sent_unix_ns", s.sent_unix_ns);
  w.KV("url", s.url);
  w.Key("ranks");
  w.BeginArray();
  for (const std::string& r : s.ranks) w.String(r);
  w.EndArray();
  w.KV("events_consumed", s.events_consumed);
  w.KV("events_dropped", s.events_dropped);
  w.KV("steps_published", s.steps_published);
  w.KV("steps_dropped", s.steps_dropped);
  w.KV("outbox", s.outbox);
  w.KV("stopping", s.stopping);
  w.EndObject();
  return w.Take();
}

std::string EncodeFleetAlert(const FleetAlert& a) {
  JsonWriter w;
  w.BeginObject();
  Header(w, "fleet_alert", a.job, a.host, a.agent);
  w.KV("rule", a.rule);
  w.KV("state", a.firing ? "firing" : "resolved");
  w.KV("severity", a.severity);
  w.KV("summary", a.summary);
  w.KV("worker", a.worker);
  w.KV("unix_ns", a.unix_ns);
  w.EndObject();
  return w.Take();
}

FleetDecoded DecodeFleetMessage(std::string_view job, std::string_view subject, std::string_view data) {
  const std::string where(subject);
  json j = json::parse(data, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Reject(FleetReject::kMalformed, where + ": not JSON");
  if (!j.is_object()) return Reject(FleetReject::kMalformed, where + ": not a JSON object");
  Reader r(j, subject);
  const std::string type = r.Str("type");
  const json* v = r.Get("v");
  if (!r.ok()) return Reject(FleetReject::kMalformed, r.error());
  if (v == nullptr || !v->is_number_integer())
    return Reject(FleetReject::kMalformed, where + ": field 'v' missing or not a number");
  if (v->get<int64_t>() > kFleetProtocolVersion) {
    return Reject(FleetReject::kNewerVersion, where + ": protocol v" + std::to_string(v->get<int64_t>()) +
                                                  ", this fleet view reads v" + std::to_string(kFleetProtocolVersion));
  }
  if (v->get<int64_t>() < 1) return Reject(FleetReject::kMalformed, where + ": field 'v' below 1");
  const std::string msg_job = r.Str("job");
  const std::string host = r.Str("host", true, 255);
  const std::string agent = r.Str("agent", true, 64);
  if (!r.ok()) return Reject(FleetReject::kMalformed, r.error());
  if (msg_job != job)
    return Reject(FleetReject::kForeignJob, where + ": job '" + msg_job + "', not '" + std::string(job) + "'");

  if (type != "fleet_step" && type != "fleet_status" && type != "fleet_alert") {
    return Reject(FleetReject::kUnknownType, where + ": type '" + type + "' is not a fleet message");
  }
  const std::vector<std::string_view> t = Tokens(subject);
  const std::string kind = type.starts_with("fleet_") ? type.substr(6) : type;
  // liveprof . job . kind . host [. rank]
  const size_t tokens = type == "fleet_step" ? 5 : 4;
  if (t.size() != tokens || t[0] != "liveprof" || t[1] != job || t[2] != kind || t[3] != SubjectToken(host)) {
    return Reject(FleetReject::kSubjectMismatch,
                  where + ": a " + type + " of host '" + host + "' does not belong on this subject");
  }
  FleetDecoded d;
  if (type == "fleet_step") {
    FleetStep s;
    s.job = msg_job;
    s.host = host;
    s.agent = agent;
    s.label = r.Str("label", true, 128);
    s.rank = r.I64("rank");
    s.seq = r.U64("seq");
    s.step = r.I64("step");
    s.end_unix_ns = r.U64("end_unix_ns");
    s.step_ns = r.U64("step_ns");
    s.mem_peak_bytes = r.U64("mem_peak_bytes", false);
    s.agent_dropped = r.U64("agent_dropped", false);
    s.sent_unix_ns = r.U64("sent_unix_ns", false);
    if (r.ok() && s.seq == 0) r.Fail("seq", "is 0 (the first is 1)");
    if (r.ok() && s.step < 0) r.Fail("step", "is negative");
    const json* buckets = r.Get("buckets_ns");
    if (r.ok() && (buckets == nullptr || !buckets->is_object())) r.Fail("buckets_ns", "missing or not an object");
    if (r.ok()) {
      uint64_t sum = 0;
      for (const auto& [key, value] : buckets->items()) {
        size_t b = 0;
        while (b < kBucketCount && BucketKey(static_cast<Bucket>(b)) != key) ++b;
        if (b == kBucketCount) continue;  // a bucket a newer agent added: left out (the others still add up).
        if (!value.is_number_unsigned()) {
          r.Fail("buckets_ns." + key, "not a whole number >= 0");
          break;
        }
        s.bucket_ns[b] = value.get<uint64_t>();
        if (__builtin_add_overflow(sum, s.bucket_ns[b], &sum)) sum = UINT64_MAX;
      }
      // The buckets split the step: more than the step is not a breakdown.
      constexpr uint64_t kMaxStepNs = uint64_t{1} << 60;  // (36 years: anything above is broken)
      if (r.ok() && s.step_ns > kMaxStepNs) r.Fail("step_ns", "is over 2^60 ns");
      if (r.ok() && sum > s.step_ns + s.step_ns / 100 + 1000) r.Fail("buckets_ns", "add up to more than step_ns");
    }
    if (r.ok() && t[4] != RankToken(s)) {
      return Reject(FleetReject::kSubjectMismatch, where + ": rank '" + s.label + "' does not belong on this subject");
    }
    if (!r.ok()) return Reject(FleetReject::kMalformed, r.error());
    d.message = std::move(s);
  } else if (type == "fleet_status") {
    FleetStatus s;
    s.job = msg_job;
    s.host = host;
    s.agent = agent;
    s.pid = r.I64("pid");
    s.started_unix_ns = r.U64("started_unix_ns");
    s.sent_unix_ns = r.U64("sent_unix_ns");
    s.url = r.Str("url", false, 512);
    if (const json* ranks = r.Get("ranks"); ranks != nullptr) {
      if (!ranks->is_array() || ranks->size() > 4096) {
        r.Fail("ranks", "not an array of at most 4096 names");
      } else {
        for (const json& x : *ranks) {
          if (!x.is_string()) {
            r.Fail("ranks", "has a name that is not a string");
            break;
          }
          s.ranks.push_back(x.get<std::string>().substr(0, 128));
        }
      }
    }
    s.events_consumed = r.U64("events_consumed", false);
    s.events_dropped = r.U64("events_dropped", false);
    s.steps_published = r.U64("steps_published", false);
    s.steps_dropped = r.U64("steps_dropped", false);
    s.outbox = r.U64("outbox", false);
    s.stopping = r.Bool("stopping");
    if (!r.ok()) return Reject(FleetReject::kMalformed, r.error());
    d.message = std::move(s);
  } else if (type == "fleet_alert") {
    FleetAlert a;
    a.job = msg_job;
    a.host = host;
    a.agent = agent;
    a.rule = r.Str("rule", true, 128);
    const std::string state = r.Str("state");
    a.severity = r.Str("severity", false, 32);
    a.summary = r.Str("summary", false, 1024);
    a.worker = r.Str("worker", false, 128);
    a.unix_ns = r.U64("unix_ns");
    if (r.ok() && state != "firing" && state != "resolved") r.Fail("state", "is neither firing nor resolved");
    if (!r.ok()) return Reject(FleetReject::kMalformed, r.error());
    a.firing = state == "firing";
    d.message = std::move(a);
  } else {
    return Reject(FleetReject::kUnknownType, where + ": type '" + type + "' is not a fleet message");
  }
  return d;
}

}  // namespace liveprof
