// ChunkReader: a trace file's bytes, uncompressed, in chunks of bounded size,
// so that an import never holds the whole file. gzip is recognised by its
// magic bytes (whatever the file is called) and inflated with zlib, on a
// thread of its own that stays at most kAhead chunks ahead of the reader (so
// parsing and inflating use two cores); members of a multi-member gzip follow
// each other.
#ifndef LIVEPROF_IMPORT_CHUNK_READER_H_
#define LIVEPROF_IMPORT_CHUNK_READER_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace liveprof {

class ChunkReader {
 public:
  static constexpr size_t kDefaultChunkBytes = size_t{4} << 20;
  static constexpr size_t kAhead = 3;  // inflated chunks waiting for the reader, at most.

  explicit ChunkReader(size_t chunk_bytes = kDefaultChunkBytes);
  ~ChunkReader();
  ChunkReader(const ChunkReader&) = delete;
  ChunkReader& operator=(const ChunkReader&) = delete;

  // Opens `path`; false (and error()) when it cannot be read.
  bool Open(const std::string& path);
  // The next bytes of the uncompressed text into *chunk (valid until the next
  // call); an empty chunk at the end. false on an error: error() says what
  // and at which compressed byte (a truncated or corrupt gzip).
  bool Next(std::string_view* chunk);

  bool gzip() const { return gzip_; }
  uint64_t file_bytes_read() const { return file_read_.load(std::memory_order_relaxed); }
  uint64_t bytes_out() const { return out_total_.load(std::memory_order_relaxed); }
  const std::string& error() const { return error_; }

 private:
  bool Fail(std::string message);
  // The inflating thread: fills free buffers, queues them, until the end.
  void InflateLoop();
  // Inflates up to a chunk into *out; false on an error (error_ says it).
  bool InflateInto(std::string* out);

  size_t chunk_bytes_;
  std::string path_;
  std::FILE* file_ = nullptr;
  bool gzip_ = false;
  bool done_ = false;
  std::vector<char> in_;
  size_t in_pos_ = 0;
  size_t in_len_ = 0;
  std::atomic<uint64_t> file_read_{0};
  std::atomic<uint64_t> out_total_{0};
  struct Inflater;
  std::unique_ptr<Inflater> inflater_;
  std::string error_;

  // gzip: the queue between the inflating thread and Next().
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> full_;   // inflated, in order.
  std::vector<std::string> free_;  // buffers to reuse.
  std::string current_;            // the chunk Next() handed out last.
  bool inflate_done_ = false;      // the thread has queued its last chunk.
  bool stop_ = false;              // the reader is going away.
  std::string inflate_error_;
  std::thread thread_;
};

}  // namespace liveprof

#endif  // LIVEPROF_IMPORT_CHUNK_READER_H_
