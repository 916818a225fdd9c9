// Static files: a traversal corpus against a real directory tree in a temp
// dir (static/ with a file, a subdirectory, a symlink inside pointing outside,
// and a secret next to static/), and the media types.
#include "web/static_files.h"

#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace liveprof::static_files_test {
namespace {

namespace fs = std::filesystem;

// temp/
//   secret.txt
//   static/index.html, app.js, docs/index.html, docs/guide.txt, empty/
//   static/leak.txt -> ../secret.txt, static/out -> .. (directory)
//   static/inner.js -> app.js
class Tree {
 public:
  Tree() {
    std::string tmpl = (fs::temp_directory_path() / "liveprof_static_XXXXXX").string();
    REQUIRE(mkdtemp(tmpl.data()) != nullptr);
    dir_ = tmpl;
    root_ = dir_ / "static";
    fs::create_directories(root_ / "docs");
    fs::create_directories(root_ / "empty");
    Write(dir_ / "secret.txt", "secret");
    Write(root_ / "index.html", "<html>");
    Write(root_ / "app.js", "export {}");
    Write(root_ / "docs" / "index.html", "<html>docs");
    Write(root_ / "docs" / "guide.txt", "guide");
    fs::create_symlink("../secret.txt", root_ / "leak.txt");
    fs::create_directory_symlink("..", root_ / "out");
    fs::create_symlink("app.js", root_ / "inner.js");
  }
  ~Tree() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  const fs::path& root() const { return root_; }
  fs::path Canonical(const fs::path& relative) const { return fs::canonical(root_ / relative); }

 private:
  static void Write(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }
  fs::path dir_, root_;
};

TEST_CASE("static files: a traversal corpus never leaves static/") {
  Tree tree;
  struct Case {
    std::string target;
    int status;
    const char* error;
  };
  const Case cases[] = {
      {"../secret.txt", 400, "path must start with '/'"},
      {"/../secret.txt", 400, "'.' or '..' segment"},
      {"/%2e%2e/secret.txt", 400, "'.' or '..' segment"},
      {"/%2E%2E%2Fsecret.txt", 400, "'.' or '..' segment"},
      {"/..%2fsecret.txt", 400, "'.' or '..' segment"},
      {"/docs/%2e%2e/%2e%2e/secret.txt", 400, "'.' or '..' segment"},
      {"/docs/./guide.txt", 400, "'.' or '..' segment"},
      {"/docs/..", 400, "'.' or '..' segment"},
      {"%2e%2e/secret.txt", 400, "path must start with '/'"},
      {"//etc/passwd", 400, "empty segment"},
      {"/%2Fetc/passwd", 400, "empty segment"},
      {"%2Fetc%2Fpasswd", 400, "path must start with '/'"},
      {"/docs//guide.txt", 400, "empty segment"},
      {"/..\\secret.txt", 400, "backslash"},
      {"/docs%5c..%5csecret.txt", 400, "backslash"},
      {"/index.html%00.js", 400, "NUL byte"},
      {"/%zz", 400, "malformed %-escape"},
      {"/app.js%2", 400, "malformed %-escape"},
      {"/app.js%", 400, "malformed %-escape"},
      {"/" + std::string(kMaxStaticPathBytes, 'a'), 400, "over the limit of 1024"},
      {"", 400, "path must start with '/'"},
      {"*", 400, "path must start with '/'"},
      {"http://evil/etc/passwd", 400, "path must start with '/'"},
      // Symbolic links inside static/ that lead out of it.
      {"/leak.txt", 403, "outside the static directory"},
      {"/out/secret.txt", 403, "outside the static directory"},
      {"/out/", 403, "outside the static directory"},
      // Missing.
      {"/nope.js", 404, "not found"},
      {"/docs/nope/", 404, "not found"},
      {"/empty/", 404, "not found"},
      {"/docs/guide.txt/x", 404, "not found"},
      {"/app.js/", 404, "not a directory"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.target);
    const StaticResolution r = ResolveStaticPath(tree.root(), c.target);
    CHECK(r.status == c.status);
    CHECK_MESSAGE(r.error.find(c.error) != std::string::npos, r.error);
    CHECK(r.path.empty());
  }
}

TEST_CASE("static files: files, directories, query strings and links inside resolve") {
  Tree tree;
  const std::pair<std::string, fs::path> cases[] = {
      {"/app.js", "app.js"},
      {"/", "index.html"},
      {"/?token=abc", "index.html"},
      {"/index.html", "index.html"},
      {"/app.js?v=3&x=../../etc", "app.js"},
      {"/app.js#top", "app.js"},
      {"/docs", "docs/index.html"},
      {"/docs/", "docs/index.html"},
      {"/docs/guide.txt", "docs/guide.txt"},
      {"/d%6fcs/guide%2Etxt", "docs/guide.txt"},  // decoded once.
      {"/inner.js", "app.js"},                    // a link that stays inside.
  };
  for (const auto& entry : cases) {
    const auto& target = entry.first;
    const auto& relative = entry.second;
    CAPTURE(target);
    const StaticResolution r = ResolveStaticPath(tree.root(), target);
    CHECK(r.status == 200);
    CHECK(r.error.empty());
    CHECK(r.path == tree.Canonical(relative));
  }
  // %25 decodes once, to a literal '%': "/a%252e" names the file "a%2e".
  CHECK(ResolveStaticPath(tree.root(), "/a%252e%252e").status == 404);
  // A path of exactly the limit is looked up (and is missing).
  CHECK(ResolveStaticPath(tree.root(), "/" + std::string(kMaxStaticPathBytes - 1, 'a')).status == 404);
  // A root that does not exist serves nothing.
  CHECK(ResolveStaticPath(tree.root() / "missing", "/").status == 404);
}

TEST_CASE("static files: the path is RFC 3986 (Boost.URL), the errors say what and where") {
  Tree tree;
  const std::pair<std::string, std::string> refused[] = {
      {"/app.js%", "malformed %-escape '%' in the path, at byte 7"},
      {"/app.js%2", "malformed %-escape '%2' in the path, at byte 7"},
      {"/a%zzb", "malformed %-escape '%zz' in the path, at byte 2"},
      {"/app|js", "'|' (0x7C) must be percent-encoded in the path, at byte 4"},
      {"/a b.js", "0x20 must be percent-encoded in the path, at byte 2"},
      {"/\xC3\xA9.js", "0xC3 must be percent-encoded in the path, at byte 1"},
      {std::string("/a\0.js", 6), "0x00 must be percent-encoded in the path, at byte 2"},
      {"/a%00.js", "NUL byte in the path"},
      {"/docs\\guide.txt", "backslash in the path"},
      {"/docs%5Cguide.txt", "backslash in the path"},
  };
  for (const auto& entry : refused) {
    const auto& target = entry.first;
    const auto& error = entry.second;
    CAPTURE(target);
    const StaticResolution r = ResolveStaticPath(tree.root(), target);
    CHECK(r.status == 400);
    CHECK(r.error == error);
  }
  // The query is not the path's business: anything in it is ignored.
  CHECK(ResolveStaticPath(tree.root(), "/app.js?v=a|b%zz").path == tree.Canonical("app.js"));
  // '+' and the sub-delims are plain path characters.
  CHECK(ResolveStaticPath(tree.root(), "/a+b;c=d,e!").error == "not found");
}

TEST_CASE("static files: media types by extension") {
  CHECK(MimeType("index.html") == "text/html; charset=utf-8");
  CHECK(MimeType("a/app.js") == "text/javascript; charset=utf-8");
  CHECK(MimeType("panel.mjs") == "text/javascript; charset=utf-8");
  CHECK(MimeType("style.CSS") == "text/css; charset=utf-8");
  CHECK(MimeType("data.json") == "application/json");
  CHECK(MimeType("logo.svg") == "image/svg+xml");
  CHECK(MimeType("logo.png") == "image/png");
  CHECK(MimeType("favicon.ico") == "image/x-icon");
  CHECK(MimeType("app.js.map") == "application/json");
  CHECK(MimeType("robots.txt") == "text/plain; charset=utf-8");
  CHECK(MimeType("mod.wasm") == "application/wasm");
  CHECK(MimeType("archive.tar.gz") == "application/octet-stream");
  CHECK(MimeType("Makefile") == "application/octet-stream");
}

}  // namespace
}  // namespace liveprof::static_files_test
