// ChunkReader: a trace file's bytes, uncompressed, in chunks of bounded size,
// so that an import never holds the whole file. gzip is recognised by its
// magic bytes (whatever the file is called) and inflated with zlib; members
// of a multi-member gzip follow each other.
#ifndef LIVEPROF_IMPORT_CHUNK_READER_H_
#define LIVEPROF_IMPORT_CHUNK_READER_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace liveprof {

class ChunkReader {
 public:
  static constexpr size_t kDefaultChunkBytes = size_t{4} << 20;

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
  uint64_t file_bytes_read() const { return file_read_; }
  uint64_t bytes_out() const { return out_total_; }
  const std::string& error() const { return error_; }

 private:
  bool Fail(std::string message);
  bool NextInflated(std::string_view* chunk);

  size_t chunk_bytes_;
  std::string path_;
  std::FILE* file_ = nullptr;
  bool gzip_ = false;
  bool done_ = false;
  std::vector<char> in_;
  size_t in_pos_ = 0;
  size_t in_len_ = 0;
  std::vector<char> out_;
  uint64_t file_read_ = 0;
  uint64_t out_total_ = 0;
  struct Inflater;
  std::unique_ptr<Inflater> inflater_;
  std::string error_;
};

}  // namespace liveprof

#endif  // LIVEPROF_IMPORT_CHUNK_READER_H_
