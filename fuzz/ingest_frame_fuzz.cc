// libFuzzer target: socket ingest's frame decoding (ingest/ingest_frames.h),
// as a connection drives it: the input is a byte stream, fed to a
// FrameSplitter in pieces (the first byte sets their size), each whole frame
// decoded by one IngestDecoder until one is refused.
//
// For any input it must return (never crash under ASan+UBSan), and:
//   - frames come out in order, each within 1..kMaxIngestFrameBytes, and the
//     bytes they span add up to the stream's (no byte skipped or read twice);
//   - a refused frame appends nothing, leaves no name or track behind, and
//     says which frame;
//   - every event appended has a known kind, a name the stream defines, a
//     track the stream defines (a description: track 0), an end within
//     2^64 ns whatever the clock offset (the first byte's top bits pick
//     one), and no late flag (the server's to set); decoded as the server
//     does (a worker's rows, a resume point after a reconnect);
//   - an event refused alone (its batch taken) is counted by reason, each
//     reason with an example that names its frame, and the counts add up.
// Any disagreement aborts, which libFuzzer reports as a crash.
//
// Built and run by fuzz/build_and_run.sh (clang 14, not part of CMake).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ingest/ingest_frames.h"

namespace {

[[noreturn]] void Fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "ingest_frame_fuzz: %s: %s\n", what, detail.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t piece = 1 + data[0] % 64;
  // The clock offset too: none, the extremes, a second either way.
  constexpr int64_t kOffsets[] = {0, INT64_MAX, INT64_MIN, -1'000'000'000, 1'000'000'000};
  const std::string_view bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  liveprof::Stream stream;
  liveprof::FrameSplitter splitter;
  liveprof::IngestDecoder decoder(stream);
  decoder.set_clock_offset_ns(kOffsets[(data[0] >> 6) % 5]);
  // As the server drives it: a worker's rows kept by the server, and (bit 5)
  // a reconnect whose first two batches were taken before.
  std::unordered_map<std::string, liveprof::TrackId> rows;
  decoder.set_worker(1, &rows);
  if (data[0] & 0x20) decoder.set_resume_seq(2);
  std::vector<liveprof::Event> out;
  uint64_t expect_begin = 0;
  bool refused = false;
  for (size_t at = 0; at < bytes.size() && !refused; at += piece) {
    splitter.Feed(bytes.substr(at, piece));
    while (auto frame = splitter.Next()) {
      if (splitter.frame_begin() != expect_begin) Fail("frames out of place", std::to_string(splitter.frame_begin()));
      if (frame->empty() || frame->size() > liveprof::kMaxIngestFrameBytes)
        Fail("frame size", std::to_string(frame->size()));
      expect_begin = splitter.frame_end();
      const std::string where = "frame " + std::to_string(splitter.frames());
      const size_t had = out.size();
      const uint32_t names = stream.names().size(), tracks = stream.track_count();
      if (!decoder.Decode(*frame, where, &out)) {
        if (out.size() != had) Fail("a refused frame appended events", decoder.error());
        if (stream.names().size() != names || stream.track_count() != tracks) {
          Fail("a refused frame left names or tracks", decoder.error());
        }
        if (decoder.error().rfind(where + ": ", 0) != 0) Fail("an error that does not name its frame", decoder.error());
        refused = true;
        break;
      }
    }
  }
  if (!refused && splitter.error().empty() && expect_begin + splitter.pending_bytes() != bytes.size()) {
    Fail("bytes lost", std::to_string(expect_begin) + " + " + std::to_string(splitter.pending_bytes()));
  }
  uint64_t by_reason = 0;
  for (const liveprof::IngestRefusal& r : decoder.refusals()) {
    if (r.events == 0 || r.reason.empty() || r.example.rfind("frame ", 0) != 0)
      Fail("a refusal", r.reason + ": " + r.example);
    by_reason += r.events;
  }
  if (by_reason != decoder.refused_events()) Fail("refusals by reason do not add up", std::to_string(by_reason));
  const uint32_t tracks = stream.track_count();
  for (const liveprof::Event& e : out) {
    if (liveprof::EventKindName(e.kind) == "unknown") Fail("unknown kind", std::to_string(static_cast<int>(e.kind)));
    if (e.ts + e.dur < e.ts) Fail("an event past 2^64 ns", std::to_string(e.ts));
    if ((e.flags & liveprof::kFlagLate) != 0) Fail("a sender set the late flag", std::to_string(e.flags));
    const uint32_t names = stream.names().size();
    if (e.name >= names) Fail("a name the stream does not define", std::to_string(e.name));
    if (e.kind == liveprof::EventKind::kKernel && (e.payload.kernel.details >= names || e.payload.kernel.op >= names)) {
      Fail("a kernel's names the stream does not define", std::to_string(e.payload.kernel.details));
    }
    if (e.kind != liveprof::EventKind::kDeviceInfo && (e.track == 0 || e.track >= tracks)) {
      Fail("a track the stream does not define", std::to_string(e.track));
    }
  }
  return 0;
}
