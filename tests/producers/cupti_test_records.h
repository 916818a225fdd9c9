// Helpers of the CUPTI parser tests: an 8-byte aligned buffer of real CUDA 13
// activity records (value-initialised, filled in by hand, back to back as
// CUPTI lays them out), a parser with a known clock, and record factories.
#ifndef LIVEPROF_TESTS_PRODUCERS_CUPTI_TEST_RECORDS_H_
#define LIVEPROF_TESTS_PRODUCERS_CUPTI_TEST_RECORDS_H_

#include <cupti_activity.h>
#include <doctest/doctest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "producers/cupti_records.h"

namespace liveprof::cupti_test {

// Sizes the walk relies on (those of CUDA 13.0's cupti_activity.h).
static_assert(sizeof(CUpti_ActivityKernel10) == 216);
static_assert(sizeof(CUpti_ActivityMemcpy6) == 96);
static_assert(sizeof(CUpti_ActivityMemset4) == 88);
static_assert(sizeof(CUpti_ActivityMemory4) == 128);
static_assert(sizeof(CUpti_ActivityAPI) == 40);

// CUPTI timestamps of the tests, and the clock that maps them: host = 2·t + 8 ms
// (two pairs; a slope of 2 shows that durations are mapped, not copied).
constexpr uint64_t kT0 = 1'000'000;
constexpr uint64_t kT1 = 1'250'000;
constexpr uint64_t kT2 = 1'600'000;
constexpr uint64_t Host(uint64_t t) { return 2 * t + 8'000'000; }

constexpr uint32_t kDevice = 1;
constexpr uint32_t kContext = 3;
constexpr uint32_t kStreamId = 7;
constexpr uint32_t kCorr = 42;
constexpr uint32_t kThread = 4321;

// An 8-byte aligned activity buffer, as CUPTI's.
class RecordBuffer {
 public:
  template <typename T>
  void Add(const T& record) {
    AddBytes(&record, sizeof record);
  }
  void AddBytes(const void* p, size_t n) {
    words_.resize((size_ + n + 7) / 8 + 1);
    std::memcpy(reinterpret_cast<uint8_t*>(words_.data()) + size_, p, n);
    size_ += n;
  }
  const uint8_t* data() const { return reinterpret_cast<const uint8_t*>(words_.data()); }
  size_t size() const { return size_; }

 private:
  std::vector<uint64_t> words_;
  size_t size_ = 0;
};

struct Fixture {
  Stream stream;
  ClockMap clock;
  std::unique_ptr<SpscRing> ring = SpscRing::Create(1024);
  std::unique_ptr<CuptiRecordParser> parser;

  explicit Fixture(CuptiRecordParser::Options options = {}) {
    clock.AddPair(1'000'000, Host(1'000'000));
    clock.AddPair(2'000'000, Host(2'000'000));
    options.clock = &clock;
    parser = std::make_unique<CuptiRecordParser>(stream, std::move(options));
  }

  CuptiRecordParser::Result Parse(const RecordBuffer& b) { return parser->Parse(b.data(), b.size(), *ring); }
  std::vector<Event> Drain() {
    std::vector<Event> out;
    ring->Drain([&](std::span<Event> s) { out.insert(out.end(), s.begin(), s.end()); });
    return out;
  }
  std::string Name(NameId id) const { return std::string(stream.names().Get(id)); }
  uint64_t DiagCount(liveprof::Diag d) const { return stream.diagnostics().Get(d); }
};

// Every field of an Event, one CHECK each so a failure names the field.
inline void CheckEvent(const Event& got, const Event& want) {
  CHECK(got.ts == want.ts);
  CHECK(got.dur == want.dur);
  CHECK(got.name == want.name);
  CHECK(got.track == want.track);
  CHECK(got.corr == want.corr);
  CHECK(got.kind == want.kind);
  CHECK(got.sub == want.sub);
  CHECK(got.flags == want.flags);
  CHECK(got.device == want.device);
  CHECK(got.payload.raw[0] == want.payload.raw[0]);
  CHECK(got.payload.raw[1] == want.payload.raw[1]);
}

inline CUpti_ActivityKernel10 KernelRecord(const char* name, uint32_t corr = kCorr) {
  CUpti_ActivityKernel10 k{};
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.start = kT0;
  k.end = kT1;
  k.deviceId = kDevice;
  k.contextId = kContext;
  k.streamId = kStreamId;
  k.gridX = 120;
  k.gridY = 2;
  k.gridZ = 1;
  k.blockX = 256;
  k.blockY = 1;
  k.blockZ = 1;
  k.registersPerThread = 64;
  k.staticSharedMemory = 1024;
  k.dynamicSharedMemory = 2048;
  k.correlationId = corr;
  k.name = name;
  return k;
}

inline constexpr const char* kDetails = "regs:64 static_shared:1024 dynamic_shared:2048 grid:120,2,1 block:256,1,1";

inline CUpti_ActivityAPI ApiRecord(CUpti_ActivityKind kind, uint32_t cbid, uint32_t corr) {
  CUpti_ActivityAPI a{};
  a.kind = kind;
  a.cbid = cbid;
  a.start = kT0;
  a.end = kT1;
  a.processId = 99;
  a.threadId = kThread;
  a.correlationId = corr;
  return a;
}

inline CUpti_ActivityExternalCorrelation External(
    uint32_t corr, uint64_t id, CUpti_ExternalCorrelationKind kind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2) {
  CUpti_ActivityExternalCorrelation x{};
  x.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
  x.externalKind = kind;
  x.externalId = id;
  x.correlationId = corr;
  return x;
}

}  // namespace liveprof::cupti_test

#endif  // LIVEPROF_TESTS_PRODUCERS_CUPTI_TEST_RECORDS_H_
