// SegmentLog: a run's folder of append-only segment files, where the trace
// store (trace_store.h) writes every chunk it seals, so that it can let them
// go from RAM and read them back, and so that a run survives its process.
//
// A segment is `seg-NNNNNNNN.lps`: a 16-byte header ("LPSEG\0\0\0", the
// format version, the segment's number), then records:
//
//   u32 body size | u32 CRC-32 of the type byte and the body | u8 type | body
//
// little-endian. A record's position is (segment << 40) | its offset. Each
// segment starts with what its records need (the store writes the names,
// tracks and devices known so far at each new segment), so the oldest
// segments can be deleted. Writes are buffered and go out in one write() per
// Flush; a process killed after a Flush returns loses none of them (they are
// in the kernel's page cache), and a write torn by a kill fails its checksum
// when the folder is read back: the segment's records stop there.
#ifndef LIVEPROF_STORE_TRACE_SEGMENTS_H_
#define LIVEPROF_STORE_TRACE_SEGMENTS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace liveprof {

class SegmentLog {
 public:
  // kTail: events of a chunk still open, as far as they went (a process
  // killed before the chunk sealed keeps them).
  enum class Record : uint8_t { kName = 1, kTrack = 2, kDevice = 3, kChunk = 4, kTail = 5 };
  static constexpr uint64_t kNowhere = UINT64_MAX;
  // 2: chunk heads carry counter values; 3: tail records. Read: 2 and 3.
  static constexpr uint32_t kVersion = 3;
  static constexpr uint32_t kOldestVersion = 2;
  static constexpr size_t kRecordHead = 9;  // size, CRC, type.

  explicit SegmentLog(std::string dir, uint64_t segment_bytes = uint64_t{64} << 20);
  ~SegmentLog();
  SegmentLog(const SegmentLog&) = delete;
  SegmentLog& operator=(const SegmentLog&) = delete;

  // A new run: creates the folder (and its parents) if needed and refuses
  // one that holds segments already. Then the first segment is open.
  bool Create(std::string* error);

  // An existing run, read-only: calls `fn` with each record that passes its
  // check, segment by segment in order. A record that fails (torn by a kill,
  // or damaged) ends its segment; `problems` says which and where. False
  // with `error` when the folder holds no segment or cannot be read.
  using RecordFn = std::function<void(Record type, std::string_view body, uint64_t pos)>;
  bool Open(const RecordFn& fn, std::vector<std::string>* problems, std::string* error);

  // Whether a record of `body_size` bytes would take the current segment
  // past its size (never for the first record of a segment).
  bool Full(size_t body_size) const;
  // Starts the next segment (writing what is pending first).
  void Rotate();
  // Appends a record (its body: head then tail) to the pending writes and
  // returns its position (kNowhere once the log failed).
  uint64_t Add(Record type, std::string_view head, std::string_view tail = {});
  // Writes what is pending. False once a write failed (error() says why):
  // the log takes nothing more after that.
  bool Flush();
  // Whether the record at `pos` was written (Flush returned after it).
  bool Durable(uint64_t pos) const;

  // The body of the record at `pos`, `body_size` bytes, read into `buffer`
  // and checked; empty on an I/O error or a checksum mismatch. Any thread
  // (pread), while no segment starts or is deleted (the store's lock).
  std::string_view Read(uint64_t pos, size_t body_size, std::string* buffer) const;

  static uint32_t SegmentOf(uint64_t pos) { return static_cast<uint32_t>(pos >> 40); }
  uint32_t current() const { return current_; }
  // Deletes segment `number` (not the current one).
  void Delete(uint32_t number);
  uint64_t disk_bytes() const { return disk_bytes_; }
  size_t segments() const { return segments_.size(); }
  const std::string& error() const { return error_; }
  const std::string& dir() const { return dir_; }

 private:
  struct Segment {
    int fd = -1;         // -1: opened per read (an old segment).
    uint64_t bytes = 0;  // written (and, for the current one, durable).
  };
  static constexpr size_t kOpenFds = 32;  // the newest segments' fds stay open.
  std::string PathOf(uint32_t number) const;
  void KeepFewFds();
  bool StartSegment(uint32_t number);
  void Fail(const std::string& what);

  std::string dir_;
  uint64_t segment_bytes_;
  std::map<uint32_t, Segment> segments_;  // by number; read fds (and the current one's write fd).
  uint32_t current_ = 0;
  std::string pending_;  // records not written yet, for the current segment.
  uint64_t disk_bytes_ = 0;
  bool failed_ = false;
  std::string error_;
};

}  // namespace liveprof

#endif  // LIVEPROF_STORE_TRACE_SEGMENTS_H_
