#include "producers/cupti_recording.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

namespace liveprof {
namespace {

// A little-endian reader over the recording's bytes that knows where it is.
class Reader {
 public:
  explicit Reader(std::string_view bytes) : bytes_(bytes) {}
  size_t offset() const { return offset_; }
  size_t left() const { return bytes_.size() - offset_; }
  bool at_end() const { return offset_ == bytes_.size(); }
  template <typename T>
  bool Read(T* out) {
    if (left() < sizeof(T)) return false;
    std::memcpy(out, bytes_.data() + offset_, sizeof(T));
    offset_ += sizeof(T);
    return true;
  }
  std::string_view Take(size_t n) {
    const std::string_view s = bytes_.substr(offset_, n);
    offset_ += n;
    return s;
  }
  void Skip(size_t n) { offset_ += n; }

 private:
  std::string_view bytes_;
  size_t offset_ = 0;
};

constexpr uint8_t kNameKernel = 1;
constexpr uint8_t kNameOp = 2;
// Sanity bounds: a CUPTI buffer is megabytes, a name a few KiB.
constexpr uint64_t kMaxBufferBytes = uint64_t{1} << 32;
constexpr uint32_t kMaxNameBytes = 1u << 20;

size_t Padded8(size_t n) { return (n + 7) & ~size_t{7}; }

}  // namespace

bool ParseCuptiRecording(std::string_view bytes, CuptiRecording* out, std::string* error) {
  *out = CuptiRecording{};
  out->bytes = bytes.size();
  Reader in(bytes);
  auto fail = [&](size_t at, const std::string& what) {
    *error = "CUPTI recording: at byte " + std::to_string(at) + ": " + what;
    return false;
  };
  if (!IsCuptiRecording(bytes)) {
    return fail(0, "not a recording (it does not begin with \"LPCUPTI1\")");
  }
  in.Skip(kCuptiRecordingMagic.size());
  uint32_t reserved = 0;
  if (!in.Read(&out->cupti_version) || !in.Read(&reserved)) {
    return fail(in.offset(), "the header ends early (" + std::to_string(bytes.size()) + " bytes)");
  }
  for (size_t index = 0;; ++index) {
    const size_t at = in.offset();
    uint64_t valid_size = 0;
    uint32_t stream_id = 0;
    if (!in.Read(&valid_size)) {
      return fail(at, "buffer " + std::to_string(index) +
                          ": the file ends inside its header (truncated: " + std::to_string(bytes.size()) + " bytes)");
    }
    if (valid_size == 0) break;
    if (!in.Read(&stream_id) || !in.Read(&reserved)) {
      return fail(at, "buffer " + std::to_string(index) +
                          ": the file ends inside its header (truncated: " + std::to_string(bytes.size()) + " bytes)");
    }
    if (valid_size > kMaxBufferBytes || valid_size > in.left()) {
      return fail(at, "buffer " + std::to_string(index) + ": valid_size " + std::to_string(valid_size) +
                          " is past the end of the file (" + std::to_string(in.left()) +
                          " bytes left; truncated or corrupt)");
    }
    CuptiRecording::Buffer buffer;
    buffer.stream_id = stream_id;
    buffer.offset = in.offset();
    buffer.size = static_cast<size_t>(valid_size);
    buffer.words.resize(Padded8(buffer.size) / 8);
    const std::string_view records = in.Take(buffer.size);
    std::memcpy(buffer.words.data(), records.data(), records.size());
    out->buffers.push_back(std::move(buffer));
  }
  uint32_t n_pairs = 0;
  if (!in.Read(&n_pairs)) return fail(in.offset(), "the clock pairs' count is missing (truncated)");
  if (uint64_t{n_pairs} * 16 > in.left()) {
    return fail(in.offset(), std::to_string(n_pairs) + " clock pairs do not fit in the " + std::to_string(in.left()) +
                                 " bytes left (truncated or corrupt)");
  }
  out->clock_pairs.reserve(n_pairs);
  for (uint32_t i = 0; i < n_pairs; ++i) {
    uint64_t cupti = 0, host = 0;
    in.Read(&cupti);
    in.Read(&host);
    out->clock_pairs.emplace_back(cupti, host);
  }
  if (in.at_end()) return true;
  // liveprof's names section.
  const size_t names_at = in.offset();
  const size_t trailing = in.left();
  if (!in.Take(kCuptiRecordingNamesMagic.size()).starts_with(kCuptiRecordingNamesMagic)) {
    return fail(names_at,
                std::to_string(trailing) + " bytes after the clock pairs that are not a names section (\"LPNAMES1\")");
  }
  uint32_t n_names = 0;
  if (!in.Read(&out->op_external_kind) || !in.Read(&n_names)) {
    return fail(in.offset(), "the names section's header ends early (truncated)");
  }
  out->has_names = true;
  for (uint32_t i = 0; i < n_names; ++i) {
    const size_t at = in.offset();
    uint8_t what = 0;
    uint8_t pad[3];
    uint32_t length = 0;
    uint64_t key = 0;
    if (!in.Read(&what) || !in.Read(&pad) || !in.Read(&length) || !in.Read(&key)) {
      return fail(at, "name " + std::to_string(i) + " of " + std::to_string(n_names) + ": truncated");
    }
    if (length > kMaxNameBytes || Padded8(length) > in.left()) {
      return fail(at, "name " + std::to_string(i) + ": length " + std::to_string(length) +
                          " is past the end of the file (truncated or corrupt)");
    }
    std::string text(in.Take(length));
    in.Skip(Padded8(length) - length);
    if (what == kNameKernel) {
      out->kernel_names[key] = std::move(text);
    } else if (what == kNameOp) {
      out->op_names[key] = std::move(text);
    } else {
      return fail(at, "name " + std::to_string(i) + ": unknown kind " + std::to_string(what));
    }
  }
  if (!in.at_end()) {
    return fail(in.offset(), std::to_string(in.left()) + " bytes after the names section");
  }
  return true;
}

// ---------------------------------------------------------------------------
// Reading a recording's buffers.

RecordedCupti::RecordedCupti(const CuptiRecording& recording, NameTable& names, Options options)
    : recording_(recording),
      names_(names),
      options_(std::move(options)),
      clock_(std::max<size_t>(64, recording.clock_pairs.size())) {
  // Pairs come from a file: only those later than the last taken in both
  // clocks count (a clock going back would fit a negative slope).
  uint64_t last_cupti = 0, last_host = 0;
  bool any = false;
  for (const auto& [cupti, host] : recording.clock_pairs) {
    if (any && (cupti <= last_cupti || host <= last_host)) {
      ++pairs_ignored_;
      continue;
    }
    clock_.AddPair(cupti, host + static_cast<uint64_t>(options_.host_shift_ns));  // (mod 2^64)
    last_cupti = cupti;
    last_host = host;
    any = true;
  }
}

bool CuptiRecordingReadable(const CuptiRecording& recording, std::string* why) {
  if (recording.cupti_version / 100 == CuptiRecordParser::kCuptiApiVersion / 100) return true;
  const auto version = [](uint32_t v) {
    return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + " (" + std::to_string(v) + ")";
  };
  *why = "recorded by CUPTI " + version(recording.cupti_version) + "; this build reads the records of CUPTI " +
         version(CuptiRecordParser::kCuptiApiVersion) + ", whose layouts may differ: not read";
  return false;
}

CuptiRecordParser::Options RecordedCupti::parser_options() {
  CuptiRecordParser::Options o;
  o.clock = &clock_;
  o.recorded = true;
  o.recorded_kernel_names = &recording_.kernel_names;
  o.owns_overhead_data = false;  // (a pointer of the recording process)
  o.op_external_kind = options_.op_external_kind != 0 ? options_.op_external_kind
                       : recording_.has_names         ? recording_.op_external_kind
                                                      : 0;  // (kind 0 is INVALID: no record has it)
  o.op_name = [this](uint64_t id) { return OpName(id); };
  return o;
}

NameId RecordedCupti::OpName(uint64_t id) {
  const auto [it, fresh] = ops_.try_emplace(id, 0);
  if (!fresh) return it->second;
  std::string name;
  if (options_.op_name) {
    name = options_.op_name(id);
  } else if (const auto named = recording_.op_names.find(id); named != recording_.op_names.end()) {
    name = named->second;
  }
  it->second = name.empty() ? 0 : names_.Intern(name);
  return it->second;
}

CuptiPlayResult PlayCuptiRecording(const CuptiRecording& recording, Stream& stream,
                                   const RecordedCupti::Options& options,
                                   const std::function<void(size_t, uint64_t)>& after_buffer) {
  CuptiPlayResult result;
  if (!CuptiRecordingReadable(recording, &result.error)) {
    result.complete = false;
    return result;
  }
  RecordedCupti input(recording, stream.names(), options);
  CuptiRecordParser parser(stream, input.parser_options());
  // Room for any buffer's events at once (a record with an event is at
  // least 40 bytes), so a buffer is parsed whole into the ring: Parse()
  // drops on a full ring, so wait for the drain loop to empty it first.
  size_t largest = 1;
  for (const CuptiRecording::Buffer& b : recording.buffers) largest = std::max(largest, b.size / 40 + 1);
  std::shared_ptr<Ring> ring = stream.AddRing(
      {.name = "cupti recording", .domain = TimeDomain::kHostNs, .capacity = std::max<size_t>(largest, 4096)});
  if (ring == nullptr) {
    result.complete = false;
    result.error = "no ring for the recording";
    return result;
  }
  for (size_t i = 0; i < recording.buffers.size(); ++i) {
    const CuptiRecording::Buffer& b = recording.buffers[i];
    // Room for the whole buffer; a ring nobody drains for kPlayStallMs is
    // given up on (the stream's drain loop stopped, or never ran).
    constexpr int kPlayStallMs = 10'000;
    int waited_ms = 0;
    size_t last_size = ring->queue->size();
    while (ring->queue->capacity() - ring->queue->size() < b.size / 40 + 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      const size_t size = ring->queue->size();
      waited_ms = size < last_size ? 0 : waited_ms + 1;
      last_size = size;
      if (waited_ms >= kPlayStallMs) {
        result.complete = false;
        result.error = "buffer " + std::to_string(i) + ": the ring was not drained for 10 s";
        ring->closed.store(true, std::memory_order_release);
        return result;
      }
    }
    const CuptiRecordParser::Result r = parser.Parse(b.data(), b.size, *ring->queue);
    ++result.buffers;
    result.records += r.records;
    result.events += r.events;
    result.complete = result.complete && r.complete;
    result.max_end_ns = std::max(result.max_end_ns, r.max_end);
    if (after_buffer) after_buffer(i, result.max_end_ns);
  }
  ring->closed.store(true, std::memory_order_release);
  return result;
}

// ---------------------------------------------------------------------------
// The writer.

CuptiRecordingWriter::~CuptiRecordingWriter() { Close(); }

bool CuptiRecordingWriter::Open(const std::string& path, uint32_t cupti_version, std::string* error) {
  std::lock_guard<std::mutex> lock(mu_);
  if (file_ != nullptr) {
    *error = "a recording is already open (" + path_ + ")";
    return false;
  }
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) {
    *error = "cannot create the CUPTI recording " + path + ": " + std::strerror(errno);
    return false;
  }
  file_ = f;
  path_ = path;
  failed_ = false;
  buffers_ = 0;
  op_external_kind_ = 0;
  pairs_.clear();
  kernel_names_.clear();
  op_names_.clear();
  const uint32_t reserved = 0;
  if (!WriteLocked(kCuptiRecordingMagic.data(), kCuptiRecordingMagic.size()) ||
      !WriteLocked(&cupti_version, sizeof cupti_version) || !WriteLocked(&reserved, sizeof reserved)) {
    *error = "cannot write the CUPTI recording " + path + ": " + std::strerror(errno);
    std::fclose(file_);
    file_ = nullptr;
    return false;
  }
  return true;
}

bool CuptiRecordingWriter::is_open() const {
  std::lock_guard<std::mutex> lock(mu_);
  return file_ != nullptr && !failed_;
}

bool CuptiRecordingWriter::WriteLocked(const void* data, size_t size) {
  if (file_ == nullptr || failed_) return false;
  if (size == 0 || std::fwrite(data, 1, size, file_) == size) return true;
  failed_ = true;
  std::fprintf(stderr, "liveprof: the CUPTI recording %s stopped: cannot write (%s)\n", path_.c_str(),
               std::strerror(errno));
  return false;
}

void CuptiRecordingWriter::AddBuffer(const uint8_t* buffer, size_t valid_size, uint32_t stream_id) {
  if (valid_size == 0) return;  // (0 would end the list)
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t size = valid_size;
  const uint32_t reserved = 0;
  if (WriteLocked(&size, sizeof size) && WriteLocked(&stream_id, sizeof stream_id) &&
      WriteLocked(&reserved, sizeof reserved) && WriteLocked(buffer, valid_size)) {
    ++buffers_;
  }
}

void CuptiRecordingWriter::AddClockPair(uint64_t cupti_ns, uint64_t host_ns) {
  std::lock_guard<std::mutex> lock(mu_);
  pairs_.emplace_back(cupti_ns, host_ns);
}

void CuptiRecordingWriter::AddKernelName(const void* pointer, std::string_view name) {
  std::lock_guard<std::mutex> lock(mu_);
  kernel_names_.try_emplace(reinterpret_cast<uintptr_t>(pointer), name);
}

void CuptiRecordingWriter::SetOpExternalKind(uint32_t kind) {
  std::lock_guard<std::mutex> lock(mu_);
  op_external_kind_ = kind;
}

void CuptiRecordingWriter::AddOpName(uint64_t external_id, std::string_view name) {
  std::lock_guard<std::mutex> lock(mu_);
  op_names_.try_emplace(external_id, name);
}

uint64_t CuptiRecordingWriter::buffers_written() const {
  std::lock_guard<std::mutex> lock(mu_);
  return buffers_;
}

bool CuptiRecordingWriter::Close(std::string* error) {
  std::lock_guard<std::mutex> lock(mu_);
  if (file_ == nullptr) return !failed_;
  const uint64_t end = 0;  // (a valid_size of 0 ends the list: no stream id follows)
  const uint32_t n_pairs = static_cast<uint32_t>(pairs_.size());
  bool ok = WriteLocked(&end, sizeof end) && WriteLocked(&n_pairs, sizeof n_pairs);
  for (const auto& [cupti, host] : pairs_) {
    ok = ok && WriteLocked(&cupti, sizeof cupti) && WriteLocked(&host, sizeof host);
  }
  const uint32_t n_names = static_cast<uint32_t>(kernel_names_.size() + op_names_.size());
  ok = ok && WriteLocked(kCuptiRecordingNamesMagic.data(), kCuptiRecordingNamesMagic.size()) &&
       WriteLocked(&op_external_kind_, sizeof op_external_kind_) && WriteLocked(&n_names, sizeof n_names);
  auto write_name = [&](uint8_t what, uint64_t key, const std::string& text) {
    const uint8_t head[4] = {what, 0, 0, 0};
    const uint32_t length = static_cast<uint32_t>(text.size());
    static constexpr char kZeros[8] = {};
    ok = ok && WriteLocked(head, sizeof head) && WriteLocked(&length, sizeof length) && WriteLocked(&key, sizeof key) &&
         WriteLocked(text.data(), text.size()) && WriteLocked(kZeros, Padded8(text.size()) - text.size());
  };
  for (const auto& [key, text] : kernel_names_) write_name(kNameKernel, key, text);
  for (const auto& [key, text] : op_names_) write_name(kNameOp, key, text);
  if (std::fclose(file_) != 0) ok = false;
  file_ = nullptr;
  if (!ok && error != nullptr) *error = "the CUPTI recording " + path_ + " is incomplete (a write failed)";
  return ok;
}

}  // namespace liveprof
