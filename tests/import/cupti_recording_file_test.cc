// CUPTI recordings as files: what a bad one does (truncated, corrupt, a
// record of a kind this build cannot size, another CUPTI's layouts), and
// the names section liveprof's writer adds, round trip. Built on the real
// H200 recording of ../shared/data/gpu, cut and damaged here.
#include "import/cupti_recording_file.h"

#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "import/trace_analysis.h"
#include "producers/cupti_recording.h"
#include "real_traces.h"

namespace liveprof::cupti_recording_file_test {
namespace {

using nlohmann::json;

std::string ReadBytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// A file that removes itself.
struct TempFile {
  std::string path;
  explicit TempFile(const std::string& bytes, const std::string& tag = "")
      : path(std::filesystem::temp_directory_path() /
             ("liveprof-recording-test-" + std::to_string(::getpid()) + tag + ".bin")) {
    std::ofstream(path, std::ios::binary) << bytes;
  }
  ~TempFile() { std::remove(path.c_str()); }
};

// Header (16 bytes), then buffer 0's header (16) and records.
constexpr size_t kFirstBufferRecords = 32;

struct Imported {
  bool ok = false;
  std::string error;
  ImportReport report;
  size_t events = 0, kernels = 0;
};
Imported Import(const std::string& path) {
  Imported r;
  NameTable names;
  r.ok = ImportCuptiRecordingFile(
      path, &names,
      [&](std::span<const Event>, std::span<const Event> events) {
        r.events += events.size();
        for (const Event& e : events) r.kernels += e.kind == EventKind::kKernel;
      },
      &r.report, &r.error);
  return r;
}

}  // namespace

TEST_CASE("CUPTI recording file: truncated anywhere, it says where, and keeps every whole buffer") {
  const std::string path = test::GpuDataPath("h200/h200_loop.bin");
  if (path.empty()) return;
  const std::string whole = ReadBytes(path);
  const Imported full = Import(path);
  REQUIRE(full.ok);
  REQUIRE(full.kernels == 80);

  SUBCASE("inside the header: nothing to read, refused") {
    const TempFile f(whole.substr(0, 10));
    const Imported r = Import(f.path);
    CHECK(!r.ok);
    CHECK(r.error == f.path + ": CUPTI recording: at byte 8: the header ends early (10 bytes)");
  }
  SUBCASE("inside the first buffer: refused, naming the buffer and its size") {
    const TempFile f(whole.substr(0, 1000));
    const Imported r = Import(f.path);
    CHECK(!r.ok);
    CHECK(r.error.find("buffer 0: valid_size 58440 is past the end of the file (968 bytes left") != std::string::npos);
    CHECK(r.error.find("at byte 16") != std::string::npos);
  }
  SUBCASE("inside the clock pairs: the buffers are read, the truncation noted") {
    // The pairs' count is right after the buffers' terminator.
    CuptiRecording rec;
    std::string error;
    REQUIRE(ParseCuptiRecording(whole, &rec, &error));
    size_t end_of_buffers = 16;
    for (const auto& b : rec.buffers) end_of_buffers += 16 + b.size;
    const TempFile f(whole.substr(0, end_of_buffers + 8 + 4 + 20));  // count + 1.25 pairs
    const Imported r = Import(f.path);
    REQUIRE(r.ok);
    CHECK(r.kernels == 80);
    size_t truncation_notes = 0;
    for (const auto& [caveat, n] : r.report.caveats) {
      truncation_notes += caveat.find("21 clock pairs do not fit") != std::string::npos ? n : 0;
    }
    CHECK(truncation_notes == 1);
  }
  SUBCASE("every cut point parses or fails with a byte named, never a crash") {
    for (size_t cut = 0; cut < whole.size(); cut += 97) {
      CuptiRecording rec;
      std::string error;
      if (!ParseCuptiRecording(std::string_view(whole).substr(0, cut), &rec, &error)) {
        CHECK(error.find("at byte ") != std::string::npos);
      }
    }
  }
}

TEST_CASE("CUPTI recording file: a record of a kind this build cannot size ends its buffer's walk, counted") {
  const std::string path = test::GpuDataPath("h200/h200_loop.bin");
  if (path.empty()) return;
  std::string bytes = ReadBytes(path);
  // The 4th record of buffer 0 (an API or kernel record) becomes kind 9999.
  CuptiRecording rec;
  std::string error;
  REQUIRE(ParseCuptiRecording(bytes, &rec, &error));
  const uint8_t* records = rec.buffers[0].data();
  size_t offset = 0;
  // CUPTI 13.0's record sizes of the kinds this recording holds.
  const std::map<uint32_t, size_t> kSizes = {{1, 96},  {2, 88},  {4, 40},  {5, 40},   {10, 216},
                                             {17, 56}, {38, 56}, {39, 24}, {49, 128}, {50, 80}};
  for (int i = 0; i < 3; ++i) {
    uint32_t kind;
    std::memcpy(&kind, records + offset, 4);
    REQUIRE(kSizes.count(kind) == 1);
    offset += kSizes.at(kind);
  }
  // The kernels the walk still reaches: those before the damaged record,
  // and every one of the later buffers.
  size_t kernels_left = 0;
  for (size_t at = 0, i = 0; at < offset; ++i) {
    uint32_t kind;
    std::memcpy(&kind, records + at, 4);
    kernels_left += kind == 10;
    at += kSizes.at(kind);
  }
  for (size_t b = 1; b < rec.buffers.size(); ++b) {
    for (size_t at = 0; at < rec.buffers[b].size;) {
      uint32_t kind;
      std::memcpy(&kind, rec.buffers[b].data() + at, 4);
      kernels_left += kind == 10;
      at += kSizes.at(kind);
    }
  }
  const uint32_t unknown = 9999;
  std::memcpy(bytes.data() + kFirstBufferRecords + offset, &unknown, 4);
  const TempFile f(bytes, "-unknown");
  const Imported r = Import(f.path);
  REQUIRE(r.ok);
  CHECK(r.report.dropped.at("cupti_unknown_record") == 1);
  CHECK(r.kernels == kernels_left);  // the rest of buffer 0 could not be walked
}

TEST_CASE("CUPTI recording file: another CUPTI's record layouts are refused by name") {
  const std::string path = test::GpuDataPath("h200/h200_loop.bin");
  if (path.empty()) return;
  std::string bytes = ReadBytes(path);
  const uint32_t newer = 140000;
  std::memcpy(bytes.data() + 8, &newer, 4);
  const TempFile f(bytes, "-newer");
  const Imported r = Import(f.path);
  CHECK(!r.ok);
  CHECK(r.error == f.path +
                       ": recorded by CUPTI 14.0 (140000); this build reads the records of CUPTI 13.0 "
                       "(130001), whose layouts may differ: not read");
  // Nor does it play into a stream.
  CuptiRecording rec;
  std::string error;
  REQUIRE(ParseCuptiRecording(bytes, &rec, &error));
  Stream stream;
  const CuptiPlayResult played = PlayCuptiRecording(rec, stream, {});
  CHECK(!played.complete);
  CHECK(played.events == 0);
  CHECK(played.error.find("recorded by CUPTI 14.0") == 0);
}

TEST_CASE("CUPTI recording file: a gzip cut short is refused with both faults named, never read past") {
  const std::string path = test::GpuDataPath("h200/resnet18_8steps_injected.bin.gz");
  if (path.empty()) return;
  const std::string gz = ReadBytes(path);
  // Half the compressed file: about half the first buffer's bytes inflate.
  const TempFile f(gz.substr(0, gz.size() / 2), "-cut.gz");
  const Imported r = Import(f.path);
  if (r.ok) {
    // (a cut past a whole buffer: those are read, the cut noted)
    CHECK(r.kernels > 0);
    CHECK(!r.report.caveats.empty());
  } else {
    CHECK(r.error.find("CUPTI recording: at byte") != std::string::npos);
    CHECK(r.error.find("gzip") != std::string::npos);
  }
}

TEST_CASE("CUPTI recording file: clock pairs that go back are left out and noted") {
  const std::string path = test::GpuDataPath("h200/h200_loop.bin");
  if (path.empty()) return;
  CuptiRecording rec;
  std::string error;
  REQUIRE(ReadCuptiRecordingFile(path, &rec, &error));
  const size_t n = rec.clock_pairs.size();
  rec.clock_pairs.push_back({rec.clock_pairs.back().first - 1000, rec.clock_pairs.back().second + 1000});
  rec.clock_pairs.push_back({rec.clock_pairs[n - 1].first + 1000, rec.clock_pairs[n - 1].second - 1000});
  Stream stream;
  RecordedCupti input(rec, stream.names());
  CHECK(input.pairs_ignored() == 2);
  CHECK(input.clock().slope() > 0.99);
  CHECK(input.clock().slope() < 1.01);
}

TEST_CASE("CUPTI recording file: bytes after the pairs that are not a names section are refused") {
  const std::string path = test::GpuDataPath("h200/h200_loop.bin");
  if (path.empty()) return;
  const TempFile f(ReadBytes(path) + "garbage!", "-trailing");
  CuptiRecording rec;
  std::string error;
  CHECK(!ReadCuptiRecordingFile(f.path, &rec, &error));
  CHECK(error.find("8 bytes after the clock pairs that are not a names section") != std::string::npos);
}

TEST_CASE("CUPTI recording file: the writer's names section names kernels and ops, round trip") {
  const std::string path = test::GpuDataPath("h200/h200_loop.bin");
  if (path.empty()) return;
  CuptiRecording original;
  std::string error;
  REQUIRE_MESSAGE(ReadCuptiRecordingFile(path, &original, &error), error);
  // The three kernel-name pointers of the recording, by first appearance.
  std::vector<uint64_t> pointers;
  {
    Stream stream;
    RecordedCupti input(original, stream.names());
    CuptiRecordParser parser(stream, input.parser_options());
    std::unique_ptr<SpscRing> ring = SpscRing::Create(4096);
    for (const auto& b : original.buffers) {
      parser.Parse(b.data(), b.size, *ring);
      ring->Drain([&](std::span<Event> events) {
        for (const Event& e : events) {
          if (e.kind != EventKind::kKernel) continue;
          const uint64_t p = std::stoull(std::string(stream.names().Get(e.name).substr(9)), nullptr, 16);
          if (std::find(pointers.begin(), pointers.end(), p) == pointers.end()) pointers.push_back(p);
        }
      });
    }
  }
  REQUIRE(pointers.size() == 3);

  const std::string out =
      std::filesystem::temp_directory_path() / ("liveprof-recording-roundtrip-" + std::to_string(::getpid()) + ".bin");
  {
    CuptiRecordingWriter w;
    REQUIRE_MESSAGE(w.Open(out, original.cupti_version, &error), error);
    for (const auto& b : original.buffers) w.AddBuffer(b.data(), b.size, b.stream_id);
    for (const auto& [cupti, host] : original.clock_pairs) w.AddClockPair(cupti, host);
    const char* kNames[] = {"first_kernel", "second_kernel", "third_kernel"};
    for (size_t i = 0; i < 3; ++i) w.AddKernelName(reinterpret_cast<const void*>(pointers[i]), kNames[i]);
    w.SetOpExternalKind(3);  // the loop pushed CUSTOM0 = 1000 * step + k
    for (uint64_t step = 0; step < 20; ++step) w.AddOpName(1000 * step + 2, "relu_op");
    CHECK(w.buffers_written() == original.buffers.size());
    REQUIRE(w.Close(&error));
  }
  CuptiRecording back;
  REQUIRE_MESSAGE(ReadCuptiRecordingFile(out, &back, &error), error);
  CHECK(back.cupti_version == original.cupti_version);
  REQUIRE(back.buffers.size() == original.buffers.size());
  for (size_t i = 0; i < back.buffers.size(); ++i) {
    CHECK(back.buffers[i].size == original.buffers[i].size);
    CHECK(std::memcmp(back.buffers[i].data(), original.buffers[i].data(), back.buffers[i].size) == 0);
  }
  CHECK(back.clock_pairs == original.clock_pairs);
  CHECK(back.has_names);
  CHECK(back.op_external_kind == 3);
  CHECK(back.kernel_names.size() == 3);
  CHECK(back.op_names.size() == 20);

  // Analysed, the kernels have their names, and relu its op.
  TraceAnalysis analysis;
  REQUIRE_MESSAGE(AnalyzeTrace(out, AnalysesOptions{}, RenderOptions{}, &analysis, &error), error);
  std::remove(out.c_str());
  std::map<std::string, uint64_t> kernels;
  std::map<std::string, std::string> op_of;
  const json kernel_stats = json::parse(analysis.views.kernel_stats);
  for (const json& row : kernel_stats["rows"]) {
    kernels[row["kernel_name"]] += row["occurrences"].get<uint64_t>();
    op_of[row["kernel_name"]] = row["op_name"];
  }
  CHECK(kernels == std::map<std::string, uint64_t>{{"first_kernel", 40}, {"second_kernel", 20}, {"third_kernel", 20}});
  CHECK(op_of["second_kernel"] == "relu_op");  // relu ran second, under 1000 s + 2
  CHECK(op_of["first_kernel"] == "");
  CHECK(analysis.report.caveats.empty());
}

}  // namespace liveprof::cupti_recording_file_test
