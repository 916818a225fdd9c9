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
  if (thread_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
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
  in_len_ = std::fread(in_.data(), 1, in_.size(), file_);
  file_read_ = in_len_;
  if (std::ferror(file_)) return Fail(std::strerror(errno));
  gzip_ = in_len_ >= 2 && static_cast<unsigned char>(in_[0]) == 0x1f && static_cast<unsigned char>(in_[1]) == 0x8b;
  if (gzip_) {
    inflater_ = std::make_unique<Inflater>();
    if (inflateInit2(&inflater_->z, 16 + MAX_WBITS) != Z_OK) return Fail("zlib: cannot start inflating");
    inflater_->started = true;
    free_.resize(kAhead + 1);  // kAhead queued and the one the reader holds.
    thread_ = std::thread([this] { InflateLoop(); });
  }
  return true;
}

void ChunkReader::InflateLoop() {
  for (;;) {
    std::string buffer;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !free_.empty(); });
      if (stop_) return;
      buffer = std::move(free_.back());
      free_.pop_back();
    }
    const bool ok = InflateInto(&buffer);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!ok) inflate_error_ = error_;
      if (!buffer.empty()) full_.push_back(std::move(buffer));
      if (!ok || done_) inflate_done_ = true;
    }
    cv_.notify_all();
    if (!ok || done_) return;
  }
}

bool ChunkReader::Next(std::string_view* chunk) {
  *chunk = {};
  if (gzip_) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!current_.empty() || current_.capacity() > 0) free_.push_back(std::move(current_));
    current_ = std::string();
    cv_.notify_all();
    cv_.wait(lock, [&] { return !full_.empty() || inflate_done_; });
    if (full_.empty()) {
      if (!inflate_error_.empty()) {
        error_ = inflate_error_;
        return false;
      }
      return true;  // the end.
    }
    current_ = std::move(full_.front());
    full_.pop_front();
    *chunk = current_;
    return true;
  }
  if (done_) return error_.empty();
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

bool ChunkReader::InflateInto(std::string* out) {
  z_stream& z = inflater_->z;
  out->resize(chunk_bytes_);
  z.next_out = reinterpret_cast<Bytef*>(out->data());
  z.avail_out = static_cast<uInt>(out->size());
  auto finish = [&] {
    out->resize(out->size() - z.avail_out);
    out_total_ += out->size();
  };
  while (z.avail_out > 0) {
    if (in_pos_ == in_len_) {
      in_len_ = std::fread(in_.data(), 1, in_.size(), file_);
      in_pos_ = 0;
      if (std::ferror(file_)) {
        finish();
        return Fail(std::strerror(errno));
      }
      file_read_ += in_len_;
      if (in_len_ == 0) {
        if (!inflater_->member_done) {
          const uint64_t inflated = out_total_ + (out->size() - z.avail_out);
          finish();
          return Fail("truncated gzip: the compressed data ends at byte " + std::to_string(file_read_) +
                      " inside a member (" + std::to_string(inflated) + " bytes inflated)");
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
      finish();
      return Fail("corrupt gzip at compressed byte " + std::to_string(at) + ": " +
                  (z.msg ? z.msg : "inflate error " + std::to_string(rc)));
    }
  }
  finish();
  return true;
}

}  // namespace liveprof
