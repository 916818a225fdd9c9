#include "import/cupti_recording_file.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "import/chunk_reader.h"
#include "producers/cupti_recording.h"
#include "stream/spsc_ring.h"
#include "stream/stream.h"

namespace liveprof {
namespace {

// The whole file, inflated. False with *error.
bool ReadAll(const std::string& path, size_t limit, std::string* out, std::string* error) {
  ChunkReader reader;
  if (!reader.Open(path)) {
    *error = reader.error();
    return false;
  }
  std::string_view chunk;
  while (true) {
    if (!reader.Next(&chunk)) {
      *error = reader.error();
      return false;
    }
    if (chunk.empty()) return true;
    const size_t take = std::min(chunk.size(), limit - out->size());
    out->append(chunk.substr(0, take));
    if (out->size() >= limit) return true;
  }
}

}  // namespace

bool IsCuptiRecordingFile(const std::string& path) {
  std::string head, error;
  return ReadAll(path, kCuptiRecordingMagic.size(), &head, &error) && IsCuptiRecording(head);
}

bool ReadCuptiRecordingFile(const std::string& path, CuptiRecording* out, std::string* error) {
  std::string bytes;
  std::string read_error;
  const bool read = ReadAll(path, SIZE_MAX, &bytes, &read_error);
  if (!read && bytes.empty()) {
    *error = read_error;
    return false;
  }
  // A gzip cut short still gives what it inflated: its whole buffers count.
  if (!ParseCuptiRecording(bytes, out, error)) {
    *error = path + ": " + *error + (read ? "" : " (" + read_error + ")");
    return false;
  }
  if (!read) {
    *error = path + ": " + read_error;
    return false;
  }
  return true;
}

bool ImportCuptiRecordingFile(const std::string& path, NameTable* names, const ChromeTraceImporter::Sink& sink,
                              ImportReport* report, std::string* error, const ImportProgressFn& progress) {
  CuptiRecording recording;
  std::string read_error;
  const bool whole = ReadCuptiRecordingFile(path, &recording, &read_error);
  report->bytes = recording.bytes;
  if (!whole && recording.buffers.empty()) {
    *error = read_error;
    return false;
  }
  if (std::string why; !CuptiRecordingReadable(recording, &why)) {
    *error = path + ": " + why;
    return false;
  }
  if (!whole) {
    // A truncated recording: its whole buffers are read, the rest named.
    AddCount(report->caveats, read_error);
  }
  if (recording.clock_pairs.empty()) {
    AddCount(report->caveats, "no clock pairs: CUPTI's clock taken as the host's");
  }
  if (!recording.has_names) {
    AddCount(report->caveats, "no names section: kernels are named by their recorded name pointer");
  }

  // The producer's own path: the parser writes into a ring, drained here.
  Stream stream;
  RecordedCupti input(recording, stream.names());
  if (input.pairs_ignored() != 0) {
    AddCount(report->caveats, "clock pairs not later than the previous one: left out", input.pairs_ignored());
  }
  CuptiRecordParser parser(stream, input.parser_options());
  size_t largest = 1;
  for (const CuptiRecording::Buffer& b : recording.buffers) largest = std::max(largest, b.size / 40 + 1);
  std::unique_ptr<SpscRing> ring = SpscRing::Create(std::max<size_t>(largest, 1024), error);
  if (ring == nullptr) return false;
  std::vector<Event> events;
  ImportProgress p;
  for (const CuptiRecording::Buffer& b : recording.buffers) {
    parser.Parse(b.data(), b.size, *ring);
    ring->Drain([&](std::span<Event> part) { events.insert(events.end(), part.begin(), part.end()); });
    if (progress) {
      p.json_bytes = b.offset + b.size;
      p.events = events.size();
      progress(p);
    }
  }
  const CuptiRecordParser::Stats& stats = parser.stats();
  report->trace_events = stats.records;
  for (size_t kind = 0; kind < stats.by_kind.size(); ++kind) {
    if (stats.by_kind[kind] != 0) AddCount(report->phases, CuptiRecordParser::KindName(kind), stats.by_kind[kind]);
  }
  const Diagnostics& diag = stream.diagnostics();
  for (const Diag d : {Diag::cupti_no_timestamp, Diag::cupti_unknown_record, Diag::cupti_truncated_buffer,
                       Diag::cupti_unmatched_marker}) {
    if (diag.Get(d) != 0) AddCount(report->dropped, DiagnosticInfo(d).name, diag.Get(d));
  }
  if (stats.ring_full != 0) AddCount(report->dropped, "ring full", stats.ring_full);

  // Definitions in the importer's name table; the events' ids moved there.
  std::vector<NameId> to_shared(stream.names().size(), 0);
  std::vector<Event> definitions;
  for (NameId id = 1; id < stream.names().size(); ++id) {
    to_shared[id] = names->Intern(stream.names().Get(id));
    definitions.push_back(NameDefEvent(to_shared[id], names->Get(to_shared[id])));
  }
  for (TrackId t = 1; t < stream.track_count(); ++t) {
    TrackInfo info = stream.track(t);
    info.name = to_shared[info.name];
    definitions.push_back(TrackDefEvent(t, info));
  }
  for (Event& e : events) {
    e.name = to_shared[e.name];
    if (e.kind == EventKind::kKernel) {
      e.payload.kernel.details = to_shared[e.payload.kernel.details];
      e.payload.kernel.op = e.payload.kernel.op < to_shared.size() ? to_shared[e.payload.kernel.op] : 0;
    }
  }
  report->events_out = events.size();
  sink(definitions, events);
  return true;
}

}  // namespace liveprof
