#include "import/chunk_reader.h"

#include <doctest/doctest.h>
#include <zlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace liveprof::chunk_reader_test {
namespace {

// A file in the temporary directory, removed with the object.
struct TempFile {
  std::string path;
  explicit TempFile(const std::string& name)
      : path((std::filesystem::temp_directory_path() / ("liveprof_" + name)).string()) {}
  ~TempFile() { std::remove(path.c_str()); }
  void Write(const std::string& bytes) const { std::ofstream(path, std::ios::binary) << bytes; }
};

std::string Gzip(const std::string& text) {
  z_stream z{};
  REQUIRE(deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) == Z_OK);
  std::string out(deflateBound(&z, text.size()) + 64, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  z.avail_in = static_cast<uInt>(text.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  REQUIRE(deflate(&z, Z_FINISH) == Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

std::string ReadAll(ChunkReader& r, bool* ok) {
  std::string all;
  std::string_view chunk;
  for (;;) {
    *ok = r.Next(&chunk);
    if (!*ok || chunk.empty()) return all;
    CHECK(chunk.size() <= 4096);
    all.append(chunk);
  }
}

std::string Text(size_t n) {
  std::string s;
  for (size_t i = 0; s.size() < n; ++i)
    s += "{\"name\":\"op" + std::to_string(i) + "\",\"ts\":" + std::to_string(i * 7) + "},";
  s.resize(n);
  return s;
}

TEST_CASE("import: a plain file comes in chunks of at most the chunk size") {
  TempFile f("plain.json");
  const std::string text = Text(50'000);
  f.Write(text);
  ChunkReader r(4096);
  REQUIRE(r.Open(f.path));
  CHECK(!r.gzip());
  bool ok = false;
  CHECK(ReadAll(r, &ok) == text);
  CHECK(ok);
  CHECK(r.bytes_out() == text.size());
}

TEST_CASE("import: gzip is recognised by its bytes and inflated, members follow each other") {
  TempFile f("trace.json.gz");
  const std::string a = Text(30'000), b = Text(20'000);
  f.Write(Gzip(a) + Gzip(b));
  ChunkReader r(4096);
  REQUIRE(r.Open(f.path));
  CHECK(r.gzip());
  bool ok = false;
  CHECK(ReadAll(r, &ok) == a + b);
  CHECK(ok);
}

TEST_CASE("import: a truncated or corrupt gzip is an error that says where") {
  const std::string text = Text(100'000);
  const std::string gz = Gzip(text);
  {
    TempFile f("cut.json.gz");
    f.Write(gz.substr(0, gz.size() / 2));
    ChunkReader r(4096);
    REQUIRE(r.Open(f.path));
    bool ok = true;
    const std::string got = ReadAll(r, &ok);
    CHECK(!ok);
    CHECK(r.error().find("truncated gzip") != std::string::npos);
    CHECK(r.error().find("byte " + std::to_string(gz.size() / 2)) != std::string::npos);
    CHECK(text.starts_with(got));  // what came out before the cut is the text.
  }
  {
    TempFile f("bad.json.gz");
    std::string bad = gz;
    for (size_t i = 20; i < 60; ++i) bad[i] = static_cast<char>(bad[i] ^ 0x5a);
    f.Write(bad);
    ChunkReader r(4096);
    REQUIRE(r.Open(f.path));
    bool ok = true;
    ReadAll(r, &ok);
    CHECK(!ok);
    CHECK(r.error().find("gzip at compressed byte") != std::string::npos);
  }
  ChunkReader missing;
  CHECK(!missing.Open("/nonexistent/liveprof.json"));
  CHECK(missing.error() == "/nonexistent/liveprof.json: No such file or directory");
}

}  // namespace
}  // namespace liveprof::chunk_reader_test
