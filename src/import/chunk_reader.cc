#include "import/chunk_reader.h"

#include <zlib.h>

#include <cerrno>
#include <cstring>

namespace liveprof {

struct ChunkReader::Inflater {
  z_stream z{};
  bool started = false;
  bool member_done = false;  // the last member ended (Z_STREAM_END).
  ~Inflater() {
    if (started) inflateEnd(&z);
  }
};

ChunkReader::ChunkReader(size_t chunk_bytes) : chunk_bytes_(chunk_bytes < 4096 ? 4096 : chunk_bytes) {}

ChunkReader::~ChunkReader() {
  if (file_) std::fclose(file_);
}

bool ChunkReader::Fail(std::string message) {
  error_ = path_ + ": " + std::move(message);
  done_ = true;
  return false;
}

bool ChunkReader::Open(const std::string& path) {
  path_ = path;
  file_ = std::fopen(path.c_str(), "rb");
  if (!file_) return Fail(std::strerror(errno));
  in_.resize(chunk_bytes_);
  out_.resize(chunk_bytes_);
  in_len_ = std::fread(in_.data(), 1, in_.size(), file_);
  file_read_ = in_len_;
  if (std::ferror(file_)) return Fail(std::strerror(errno));
  gzip_ = in_len_ >= 2 && static_cast<unsigned char>(in_[0]) == 0x1f && static_cast<unsigned char>(in_[1]) == 0x8b;
  if (gzip_) {
    inflater_ = std::make_unique<Inflater>();
    if (inflateInit2(&inflater_->z, 16 + MAX_WBITS) != Z_OK) return Fail("zlib: cannot start inflating");
    inflater_->started = true;
  }
  return true;
}

bool ChunkReader::Next(std::string_view* chunk) {
  *chunk = {};
  if (done_) return error_.empty();
  if (gzip_) return NextInflated(chunk);
  if (in_pos_ < in_len_) {  // the first read, made by Open.
    *chunk = std::string_view(in_.data() + in_pos_, in_len_ - in_pos_);
    in_pos_ = in_len_;
    out_total_ += chunk->size();
    return true;
  }
  const size_t n = std::fread(in_.data(), 1, in_.size(), file_);
  if (std::ferror(file_)) return Fail(std::strerror(errno));
  file_read_ += n;
  out_total_ += n;
  if (n == 0) done_ = true;
  *chunk = std::string_view(in_.data(), n);
  return true;
}

bool ChunkReader::NextInflated(std::string_view* chunk) {
  z_stream& z = inflater_->z;
  z.next_out = reinterpret_cast<Bytef*>(out_.data());
  z.avail_out = static_cast<uInt>(out_.size());
  while (z.avail_out > 0) {
    if (in_pos_ == in_len_) {
      in_len_ = std::fread(in_.data(), 1, in_.size(), file_);
      in_pos_ = 0;
      if (std::ferror(file_)) return Fail(std::strerror(errno));
      file_read_ += in_len_;
      if (in_len_ == 0) {
        if (!inflater_->member_done) {
          return Fail("truncated gzip: the compressed data ends at byte " + std::to_string(file_read_) +
                      " inside a member (" + std::to_string(out_total_ + (out_.size() - z.avail_out)) +
                      " bytes inflated)");
        }
        done_ = true;
        break;
      }
    }
    if (inflater_->member_done) {
      // Another gzip member follows (or trailing zero padding, which gzip
      // itself tolerates).
      if (static_cast<unsigned char>(in_[in_pos_]) == 0) {
        ++in_pos_;
        continue;
      }
      inflateReset(&z);
      inflater_->member_done = false;
    }
    z.next_in = reinterpret_cast<Bytef*>(in_.data() + in_pos_);
    z.avail_in = static_cast<uInt>(in_len_ - in_pos_);
    const int rc = inflate(&z, Z_NO_FLUSH);
    in_pos_ = in_len_ - z.avail_in;
    if (rc == Z_STREAM_END) {
      inflater_->member_done = true;
    } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
      const uint64_t at = file_read_ - (in_len_ - in_pos_);
      return Fail("corrupt gzip at compressed byte " + std::to_string(at) + ": " +
                  (z.msg ? z.msg : "inflate error " + std::to_string(rc)));
    }
  }
  const size_t n = out_.size() - z.avail_out;
  out_total_ += n;
  *chunk = std::string_view(out_.data(), n);
  return true;
}

}  // namespace liveprof
