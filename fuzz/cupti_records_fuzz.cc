// libFuzzer target: the CUPTI record parser (producers/cupti_records.h) on
// recorded activity buffers, and the recording format around them
// (producers/cupti_recording.h). The seeds are the real H200 recordings of
// ../shared/data/gpu, cut at record boundaries (fuzz/cupti_seeds.py).
//
// The first byte picks the input's form: even, a whole recording file
// (header, buffers, clock pairs, names); odd, one activity buffer's bytes.
// Pointers inside records (kernel and marker names) are never read: a
// recording's pointers belong to a process that is gone, which is exactly
// how the parser reads recordings.
//
// For any input it must return (never crash under ASan+UBSan), and:
//   - every event written has a known kind, a track the stream defines
//     (never 0) and, for a kernel, details the stream defines;
//   - the walk reads no byte past valid_size (ASan: the buffer is an exact
//     heap allocation);
//   - a recording that does not parse says why, naming a byte.
// Any disagreement aborts, which libFuzzer reports as a crash.
//
// Built and run by fuzz/build_and_run.sh (clang 14, not part of CMake).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

#include "producers/cupti_recording.h"
#include "producers/cupti_records.h"
#include "stream/spsc_ring.h"
#include "stream/stream.h"

namespace {

[[noreturn]] void Fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "cupti_records_fuzz: %s: %s\n", what, detail.c_str());
  std::abort();
}

void Check(const liveprof::Stream& stream, liveprof::SpscRing& ring) {
  ring.Drain([&](std::span<liveprof::Event> events) {
    for (const liveprof::Event& e : events) {
      if (liveprof::EventKindName(e.kind) == "unknown" || e.kind == liveprof::EventKind::kInvalid) {
        Fail("unknown kind", std::to_string(+static_cast<uint8_t>(e.kind)));
      }
      if (e.track == 0 || e.track >= stream.track_count()) Fail("undefined track", std::to_string(e.track));
      if (e.name >= stream.names().size()) Fail("undefined name", std::to_string(e.name));
      if (e.kind == liveprof::EventKind::kKernel && e.payload.kernel.details >= stream.names().size()) {
        Fail("undefined details", std::to_string(e.payload.kernel.details));
      }
    }
  });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool whole_file = data[0] % 2 == 0;
  liveprof::Stream stream;
  std::unique_ptr<liveprof::SpscRing> ring = liveprof::SpscRing::Create(size_t{1} << 12);
  if (whole_file) {
    liveprof::CuptiRecording recording;
    std::string error;
    const std::string_view bytes(reinterpret_cast<const char*>(data + 1), size - 1);
    if (!liveprof::ParseCuptiRecording(bytes, &recording, &error)) {
      if (error.find("at byte ") == std::string::npos) Fail("an error that names no byte", error);
    }
    liveprof::RecordedCupti input(recording, stream.names());
    liveprof::CuptiRecordParser parser(stream, input.parser_options());
    for (const liveprof::CuptiRecording::Buffer& b : recording.buffers) {
      if (b.size > b.words.size() * 8) Fail("a buffer larger than its storage", std::to_string(b.size));
      parser.Parse(b.data(), b.size, *ring);
      Check(stream, *ring);
    }
    return 0;
  }
  // One buffer, in an exact allocation (8-byte aligned as CUPTI's are), so
  // that ASan sees any read past its end.
  const size_t n = size - 1;
  std::unique_ptr<uint64_t[]> words(new uint64_t[(n + 7) / 8]);
  uint8_t* buffer = reinterpret_cast<uint8_t*>(words.get());
  std::memcpy(buffer, data + 1, n);
  liveprof::CuptiRecording empty;
  liveprof::RecordedCupti input(empty, stream.names());
  liveprof::CuptiRecordParser parser(stream, input.parser_options());
  parser.Parse(buffer, n, *ring);
  Check(stream, *ring);
  return 0;
}
