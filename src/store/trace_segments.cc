#include "store/trace_segments.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>

namespace liveprof {
namespace {

constexpr char kMagic[8] = {'L', 'P', 'S', 'E', 'G', 0, 0, 0};
constexpr size_t kHeaderBytes = 16;
constexpr uint64_t kOffsetMask = (uint64_t{1} << 40) - 1;

void PutU32(char* p, uint32_t v) { std::memcpy(p, &v, 4); }  // the machines we run on are little-endian.
uint32_t GetU32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

uint32_t Checksum(uint8_t type, std::string_view a, std::string_view b = {}) {
  uLong crc = crc32(0L, &type, 1);
  // (never with a null buffer: crc32 then returns its initial value)
  if (!a.empty()) crc = crc32(crc, reinterpret_cast<const Bytef*>(a.data()), static_cast<uInt>(a.size()));
  if (!b.empty()) crc = crc32(crc, reinterpret_cast<const Bytef*>(b.data()), static_cast<uInt>(b.size()));
  return static_cast<uint32_t>(crc);
}

// The segment number in a file name "seg-NNNNNNNN.lps" (8 digits), or 0.
uint32_t NumberOf(const std::string& name) {
  if (name.size() != 16 || !name.starts_with("seg-") || !name.ends_with(".lps")) return 0;
  uint32_t n = 0;
  for (size_t i = 4; i < 12; ++i) {
    if (name[i] < '0' || name[i] > '9') return 0;
    n = n * 10 + static_cast<uint32_t>(name[i] - '0');
  }
  return n;
}

// The segment numbers in `dir`, sorted; false with `ec` if it cannot be read.
bool ListSegments(const std::string& dir, std::vector<uint32_t>* numbers, std::error_code& ec) {
  for (auto it = std::filesystem::directory_iterator(dir, ec); !ec && it != std::filesystem::directory_iterator();
       it.increment(ec)) {
    if (const uint32_t n = NumberOf(it->path().filename().string()); n != 0) numbers->push_back(n);
  }
  std::sort(numbers->begin(), numbers->end());
  return !ec;
}

std::string Errno() { return std::strerror(errno); }

}  // namespace

SegmentLog::SegmentLog(std::string dir, uint64_t segment_bytes) : dir_(std::move(dir)), segment_bytes_(segment_bytes) {}

SegmentLog::~SegmentLog() {
  for (auto& [number, s] : segments_) {
    if (s.fd >= 0) ::close(s.fd);
  }
}

std::string SegmentLog::PathOf(uint32_t number) const {
  char name[32];
  std::snprintf(name, sizeof name, "/seg-%08u.lps", number);
  return dir_ + name;
}

void SegmentLog::Fail(const std::string& what) {
  if (!failed_) {
    error_ = what;
    // Said once on the console too (not only in /api/trace's spill_error).
    std::fprintf(stderr, "liveprof: the trace folder takes no more events: %s (the live views go on)\n", what.c_str());
  }
  failed_ = true;
  pending_.clear();
}

bool SegmentLog::Create(std::string* error) {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) {
    *error = "cannot create the trace folder '" + dir_ + "': " + ec.message();
    return false;
  }
  std::vector<uint32_t> numbers;
  if (!ListSegments(dir_, &numbers, ec)) {
    *error = "cannot list the trace folder '" + dir_ + "': " + ec.message();
    return false;
  }
  if (!numbers.empty()) {
    *error = "the trace folder '" + dir_ + "' holds a run already ('liveprof open " + dir_ +
             "' shows it); give a new folder";
    return false;
  }
  if (!StartSegment(1)) {
    *error = error_;
    return false;
  }
  return true;
}

bool SegmentLog::StartSegment(uint32_t number) {
  const std::string path = PathOf(number);
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    Fail("cannot create the segment '" + path + "': " + Errno());
    return false;
  }
  segments_[number] = Segment{fd, 0};
  current_ = number;
  KeepFewFds();
  char header[kHeaderBytes] = {};
  std::memcpy(header, kMagic, 8);
  PutU32(header + 8, kVersion);
  PutU32(header + 12, number);
  pending_.assign(header, kHeaderBytes);
  return true;
}

bool SegmentLog::Full(size_t body_size) const {
  const uint64_t used = segments_.at(current_).bytes + pending_.size();
  return used > kHeaderBytes && used + kRecordHead + body_size > segment_bytes_;
}

void SegmentLog::Rotate() {
  if (failed_ || !Flush()) return;
  StartSegment(current_ + 1);
}

uint64_t SegmentLog::Add(Record type, std::string_view head, std::string_view tail) {
  if (failed_) return kNowhere;
  const uint64_t pos = uint64_t{current_} << 40 | (segments_.at(current_).bytes + pending_.size());
  char prefix[kRecordHead];
  PutU32(prefix, static_cast<uint32_t>(head.size() + tail.size()));
  PutU32(prefix + 4, Checksum(static_cast<uint8_t>(type), head, tail));
  prefix[8] = static_cast<char>(type);
  pending_.append(prefix, kRecordHead);
  pending_.append(head);
  pending_.append(tail);
  return pos;
}

bool SegmentLog::Flush() {
  if (failed_) return false;
  if (pending_.empty()) return true;
  Segment& s = segments_.at(current_);
  size_t done = 0;
  while (done < pending_.size()) {
    const ssize_t n = ::write(s.fd, pending_.data() + done, pending_.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      Fail("writing '" + PathOf(current_) + "': " + (n < 0 ? Errno() : std::string("no progress")));
      return false;
    }
    done += static_cast<size_t>(n);
  }
  s.bytes += pending_.size();
  disk_bytes_ += pending_.size();
  pending_.clear();
  return true;
}

bool SegmentLog::Durable(uint64_t pos) const {
  if (pos == kNowhere) return false;
  const uint32_t seg = SegmentOf(pos);
  const auto it = segments_.find(seg);
  return it != segments_.end() && (pos & kOffsetMask) < it->second.bytes;
}

void SegmentLog::KeepFewFds() {
  // The newest kOpenFds segments keep theirs; an older one is opened per read.
  size_t newer = 0;
  for (auto it = segments_.rbegin(); it != segments_.rend(); ++it) {
    if (++newer > kOpenFds && it->second.fd >= 0 && it->first != current_) {
      ::close(it->second.fd);
      it->second.fd = -1;
    }
  }
}

std::string_view SegmentLog::Read(uint64_t pos, size_t body_size, std::string* buffer) const {
  const auto it = segments_.find(SegmentOf(pos));
  if (it == segments_.end() || body_size == 0) return {};
  buffer->resize(kRecordHead + body_size);
  int fd = it->second.fd;
  if (fd < 0) fd = ::open(PathOf(it->first).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  const ssize_t n = ::pread(fd, buffer->data(), buffer->size(), static_cast<off_t>(pos & kOffsetMask));
  if (fd != it->second.fd) ::close(fd);
  if (n != static_cast<ssize_t>(buffer->size()) || GetU32(buffer->data()) != body_size) return {};
  const std::string_view body(buffer->data() + kRecordHead, body_size);
  const auto type = static_cast<uint8_t>((*buffer)[8]);
  return Checksum(type, body) == GetU32(buffer->data() + 4) ? body : std::string_view();
}

void SegmentLog::Delete(uint32_t number) {
  const auto it = segments_.find(number);
  if (it == segments_.end() || number == current_) return;
  if (it->second.fd >= 0) ::close(it->second.fd);
  ::unlink(PathOf(number).c_str());
  disk_bytes_ -= it->second.bytes;
  segments_.erase(it);
}

bool SegmentLog::Open(const RecordFn& fn, std::vector<std::string>* problems, std::string* error) {
  std::error_code ec;
  std::vector<uint32_t> numbers;
  if (!ListSegments(dir_, &numbers, ec)) {
    *error = "the folder '" + dir_ + "' holds no trace segments: " + ec.message();
    return false;
  }
  if (numbers.empty()) {
    *error = "the folder '" + dir_ + "' holds no trace segments (seg-NNNNNNNN.lps)";
    return false;
  }
  failed_ = true;  // read-only: Add takes nothing.
  error_ = "opened read-only";
  std::string data;
  for (const uint32_t number : numbers) {
    const std::string path = PathOf(number);
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      problems->push_back(path + ": cannot open: " + Errno());
      continue;
    }
    const off_t size = ::lseek(fd, 0, SEEK_END);
    data.resize(size > 0 ? static_cast<size_t>(size) : 0);
    if (size < 0 || ::pread(fd, data.data(), data.size(), 0) != static_cast<ssize_t>(data.size())) {
      problems->push_back(path + ": cannot read: " + Errno());
      ::close(fd);
      continue;
    }
    segments_[number] = Segment{fd, data.size()};
    disk_bytes_ += data.size();
    current_ = number;
    KeepFewFds();
    if (data.size() < kHeaderBytes) {  // a kill as the segment began: nothing in it.
      if (!data.empty()) problems->push_back(path + ": cut short in its header: the run stopped as it began it");
      continue;
    }
    if (const uint32_t version = GetU32(data.data() + 8); std::memcmp(data.data(), kMagic, 8) != 0 ||
                                                          version < kOldestVersion || version > kVersion ||
                                                          GetU32(data.data() + 12) != number) {
      problems->push_back(path + ": not liveprof segment " + std::to_string(number) + " of format version " +
                          std::to_string(kOldestVersion) + " to " + std::to_string(kVersion));
      continue;
    }
    size_t at = kHeaderBytes;
    while (at < data.size()) {
      const size_t left = data.size() - at;
      const uint32_t body = left >= kRecordHead ? GetU32(data.data() + at) : 0;
      if (left < kRecordHead || body > left - kRecordHead) {
        problems->push_back(path + ": the last record, at byte " + std::to_string(at) + ", is cut short (" +
                            std::to_string(left) + " bytes left): it was being written when the run stopped");
        break;
      }
      const auto type = static_cast<uint8_t>(data[at + 8]);
      const std::string_view bytes(data.data() + at + kRecordHead, body);
      if (Checksum(type, bytes) != GetU32(data.data() + at + 4)) {
        problems->push_back(path + ": the record at byte " + std::to_string(at) +
                            " fails its checksum; the rest of this segment is skipped");
        break;
      }
      fn(static_cast<Record>(type), bytes, uint64_t{number} << 40 | at);
      at += kRecordHead + body;
    }
  }
  return true;
}

}  // namespace liveprof
