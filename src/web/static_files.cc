#include "web/static_files.h"

#include <boost/url/grammar/charset.hpp>
#include <boost/url/parse.hpp>
#include <boost/url/pct_string_view.hpp>
#include <boost/url/rfc/pchars.hpp>

#include <algorithm>
#include <array>
#include <cstdio>
#include <optional>
#include <system_error>
#include <utility>

namespace liveprof {

namespace fs = std::filesystem;
namespace urls = boost::urls;

namespace {

// RFC 3986: path = *( pchar / "/" ), query = *( pchar / "/" / "?" ), less
// '%', which must start a pct-encoded triplet.
constexpr urls::grammar::lut_chars kPathChars = urls::pchars + '/';
constexpr urls::grammar::lut_chars kQueryChars = kPathChars + '?';

StaticResolution Refuse(int status, std::string error) {
  StaticResolution r;
  r.status = status;
  r.error = std::move(error);
  return r;
}

// True when `path` is `root` or lies under it (both canonical).
bool IsInside(const fs::path& root, const fs::path& path) {
  auto r = root.begin();
  auto p = path.begin();
  for (; r != root.end(); ++r, ++p) {
    if (p == path.end() || *r != *p) return false;
  }
  return true;
}

}  // namespace

std::optional<std::string> PercentDecode(std::string_view text) {
  const urls::result<urls::pct_string_view> pct = urls::make_pct_string_view(text);
  if (!pct) return std::nullopt;
  return pct->decode();
}

std::optional<UrlSyntaxError> FindUrlSyntaxError(std::string_view text, bool query) {
  const urls::grammar::lut_chars& allowed = query ? kQueryChars : kPathChars;
  const char* const end = text.data() + text.size();
  for (const char* p = text.data();; p += 3) {
    p = urls::grammar::find_if_not(p, end, allowed);
    if (p == end) return std::nullopt;
    const size_t offset = static_cast<size_t>(p - text.data());
    if (*p != '%') {
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02X", static_cast<unsigned char>(*p));
      const bool printable = *p > ' ' && *p < 0x7f;
      return UrlSyntaxError{offset, (printable ? "'" + std::string(1, *p) + "' (" + hex + ")" : std::string(hex)) +
                                        " must be percent-encoded"};
    }
    const std::string_view escape = text.substr(offset, 3);
    if (!urls::make_pct_string_view(escape)) {
      return UrlSyntaxError{offset, "malformed %-escape '" + std::string(escape) + "'"};
    }
  }
}

StaticResolution ResolveStaticPath(const fs::path& root, std::string_view target) {
  // The path part: no query, no fragment (a client should not send one).
  const std::string_view raw = target.substr(0, target.find_first_of("?#"));
  if (raw.size() > kMaxStaticPathBytes) {
    return Refuse(400, "path is " + std::to_string(raw.size()) + " bytes, over the limit of " +
                           std::to_string(kMaxStaticPathBytes));
  }
  if (raw.empty() || raw.front() != '/') return Refuse(400, "path must start with '/'");
  if (raw.find('\\') != std::string_view::npos) return Refuse(400, "backslash in the path");
  const urls::result<urls::url_view> url = urls::parse_origin_form(raw);
  if (!url) {
    const std::optional<UrlSyntaxError> why = FindUrlSyntaxError(raw, false);
    return Refuse(400, why ? why->message + " in the path, at byte " + std::to_string(why->offset)
                           : "not a URL path: " + url.error().message());
  }
  const std::string decoded = url->encoded_path().decode();
  if (decoded.find('\0') != std::string::npos) return Refuse(400, "NUL byte in the path");
  if (decoded.find('\\') != std::string::npos) return Refuse(400, "backslash in the path");

  // Segments after the leading '/': none may be empty ("//etc/passwd",
  // "/%2Fetc"), "." or ".."; a trailing '/' names a directory.
  fs::path relative;
  std::string_view rest = std::string_view(decoded).substr(1);
  while (!rest.empty()) {
    const size_t slash = rest.find('/');
    const std::string_view segment = rest.substr(0, slash);
    if (segment.empty()) return Refuse(400, "empty segment in the path (\"//\")");
    if (segment == "." || segment == "..") return Refuse(400, "'.' or '..' segment in the path");
    relative /= fs::path(std::string(segment));
    if (slash == std::string_view::npos) break;
    rest.remove_prefix(slash + 1);
  }
  // Each segment is a plain name, so `relative` is relative; say so anyway.
  if (relative.is_absolute() || relative.has_root_name()) return Refuse(400, "absolute path");

  std::error_code ec;
  const fs::path canonical_root = fs::canonical(root, ec);
  if (ec) return Refuse(404, "the static directory is missing: " + ec.message());
  fs::path candidate = canonical_root / relative;
  if (relative.empty() || fs::is_directory(candidate, ec)) {
    candidate /= "index.html";
  } else if (decoded.back() == '/') {
    return Refuse(404, "not found (not a directory)");
  }
  // Symbolic links are followed: one that leads out of the root is refused
  // whether or not its target exists.
  const fs::path resolved = fs::weakly_canonical(candidate, ec);
  if (ec) return Refuse(404, "not found: " + ec.message());
  if (!IsInside(canonical_root, resolved)) return Refuse(403, "outside the static directory");
  const fs::file_status status = fs::status(resolved, ec);
  if (ec || !fs::exists(status)) return Refuse(404, "not found");
  if (!fs::is_regular_file(status)) return Refuse(404, "not a file");
  StaticResolution found;
  found.path = resolved;
  return found;
}

std::string_view MimeType(const fs::path& path) {
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 11> kTypes = {{
      {".html", "text/html; charset=utf-8"},
      {".js", "text/javascript; charset=utf-8"},
      {".mjs", "text/javascript; charset=utf-8"},
      {".css", "text/css; charset=utf-8"},
      {".json", "application/json"},
      {".svg", "image/svg+xml"},
      {".png", "image/png"},
      {".ico", "image/x-icon"},
      {".map", "application/json"},
      {".txt", "text/plain; charset=utf-8"},
      {".wasm", "application/wasm"},
  }};
  std::string ext = path.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; });
  for (const auto& [e, type] : kTypes) {
    if (e == ext) return type;
  }
  return "application/octet-stream";
}

}  // namespace liveprof
