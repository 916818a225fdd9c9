// Static files: which file of the dashboard's directory (static/) an HTTP
// request target names, and its media type. No I/O beyond looking at the
// file system (no file is opened): the HTTP session sends the file.
//
// A target never resolves outside the root: its path must parse as RFC 3986
// origin-form (Boost.URL: no malformed %-escape, no byte that must be
// escaped), it is decoded once, refused when it holds a NUL, a backslash,
// an empty, "." or ".." segment, or is over
// kMaxStaticPathBytes, and the canonical path of what it names (symbolic
// links followed) must lie inside the canonical root.
//
// Threads: pure functions of the file system; any thread.
#ifndef LIVEPROF_WEB_STATIC_FILES_H_
#define LIVEPROF_WEB_STATIC_FILES_H_

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace liveprof {

// The longest path part of a target (before '?') that is looked up.
inline constexpr size_t kMaxStaticPathBytes = 1024;

// %XX-decoding, once ('+' stays '+'); nullopt on a malformed escape
// (Boost.URL's pct_string_view). Any thread.
std::optional<std::string> PercentDecode(std::string_view text);

// Where and why `text`, the path (or, with `query`, the query) of a request
// target, is not RFC 3986: its first malformed %-escape ("malformed %-escape
// '%zz'") or a byte it may not hold unescaped ("'|' (0x7C) must be
// percent-encoded"); nullopt when well-formed. Any thread.
struct UrlSyntaxError {
  size_t offset = 0;    // of the offending byte in `text`.
  std::string message;  // what it is, without where.
};
std::optional<UrlSyntaxError> FindUrlSyntaxError(std::string_view text, bool query);

struct StaticResolution {
  std::filesystem::path path;  // the canonical path of the file, when status is 200.
  std::string error;           // why not, when status is not 200.
  int status = 200;            // 200, 400 (malformed target), 403 (outside the root), 404.
};

// The file that `target` (the request target: "/app.js?v=3") names under
// `root`. "/" and directories map to their index.html. Any thread.
StaticResolution ResolveStaticPath(const std::filesystem::path& root, std::string_view target);

// The Content-Type for a file, from its extension (case-insensitive): html,
// js, mjs, css, json, svg, png, ico, map, txt, wasm; else
// application/octet-stream. Any thread.
std::string_view MimeType(const std::filesystem::path& path);

}  // namespace liveprof

#endif  // LIVEPROF_WEB_STATIC_FILES_H_
