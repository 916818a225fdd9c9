#include "aggregators/tf/tf_op_name.h"

#include <charconv>
#include <system_error>

namespace liveprof {

namespace {

// ---------------------------------------------------------------------------
// Op-name parsing helpers (docs/semantics-tf.md §0.3).

constexpr std::string_view kDatasetType = "Dataset";

bool IsAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); }
bool IsLowerOrDigit(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

// [A-Za-z0-9.][A-Za-z0-9_./>-]*
bool IsTfOpName(std::string_view s) {
  if (s.empty() || !(IsAlnum(s[0]) || s[0] == '.')) return false;
  for (size_t i = 1; i < s.size(); ++i) {
    const char c = s[i];
    if (!(IsAlnum(c) || c == '_' || c == '.' || c == '/' || c == '>' || c == '-')) return false;
  }
  return true;
}

// [A-Z_][a-zA-Z0-9_]*
bool IsTfOpType(std::string_view s) {
  if (s.empty() || !((s[0] >= 'A' && s[0] <= 'Z') || s[0] == '_')) return false;
  for (size_t i = 1; i < s.size(); ++i) {
    if (!(IsAlnum(s[i]) || s[i] == '_')) return false;
  }
  return true;
}

// [a-z_][a-z0-9_]*(\[.*\])?   ('.' does not match a line break, as in RE2.)
bool IsJaxOpType(std::string_view s) {
  if (s.empty() || !((s[0] >= 'a' && s[0] <= 'z') || s[0] == '_')) return false;
  size_t i = 1;
  while (i < s.size() && (IsLowerOrDigit(s[i]) || s[i] == '_')) ++i;
  if (i == s.size()) return true;
  if (s[i] != '[' || s.back() != ']' || s.size() - i < 2) return false;
  return s.substr(i).find('\n') == std::string_view::npos;
}

// An int64 in decimal with an optional sign (absl::SimpleAtoi without the
// surrounding whitespace it also accepts).
bool IsInteger(std::string_view s) {
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) s.remove_prefix(1);
  if (s.empty()) return false;
  int64_t unused = 0;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), unused);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

// The last '/' segment without a numeric "_N" suffix: "model/MatMul_1" -> "MatMul".
std::string_view DeriveOpType(std::string_view full) {
  const size_t slash = full.rfind('/');
  const std::string_view op = slash == std::string_view::npos ? full : full.substr(slash + 1);
  const size_t underscore = op.rfind('_');
  if (underscore == std::string_view::npos) return op;
  if (IsInteger(op.substr(underscore + 1))) return op.substr(0, underscore);
  return op;
}

}  // namespace

bool StartsWithNoCase(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i) {
    char a = s[i];
    char b = prefix[i];
    if (a >= 'A' && a <= 'Z') a = static_cast<char>(a - 'A' + 'a');
    if (b >= 'A' && b <= 'Z') b = static_cast<char>(b - 'A' + 'a');
    if (a != b) return false;
  }
  return true;
}

// ---------------------------------------------------------------------------
// Parsing.

std::string_view OpCategoryName(OpCategory c) {
  switch (c) {
    case OpCategory::kTensorFlow: return "TensorFlow";
    case OpCategory::kJax: return "JAX";
    case OpCategory::kDataset: return "Dataset";
    case OpCategory::kMemcpyHToD: return "MemcpyHToD";
    case OpCategory::kMemcpyDToH: return "MemcpyDToH";
    case OpCategory::kMemcpyDToD: return "MemcpyDToD";
    case OpCategory::kMemcpyHToH: return "MemcpyHToH";
    case OpCategory::kUnknown: break;
  }
  return "Unknown";
}

ParsedOp ParseTfOpName(std::string_view full_name) {
  ParsedOp op;
  op.name = full_name;
  const size_t colon = full_name.find(':');
  if (colon == std::string_view::npos) {
    static constexpr struct {
      std::string_view prefix;
      OpCategory category;
      std::string_view type;
    } kMemcpy[] = {
        {"MEMCPYHToD", OpCategory::kMemcpyHToD, "MemcpyHToD"},
        {"MEMCPYDToH", OpCategory::kMemcpyDToH, "MemcpyDToH"},
        {"MEMCPYDToD", OpCategory::kMemcpyDToD, "MemcpyDToD"},
        {"MEMCPYHToH", OpCategory::kMemcpyHToH, "MemcpyHToH"},
    };
    for (const auto& m : kMemcpy) {
      if (StartsWithNoCase(full_name, m.prefix)) {
        op.category = m.category;
        op.type = m.type;
        return op;
      }
    }
    return op;  // Unknown.
  }
  const std::string_view left = full_name.substr(0, colon);
  const std::string_view right = full_name.substr(colon + 1);
  if (left == "Iterator") {
    op.category = OpCategory::kDataset;
    op.type = kDatasetType;
    return op;
  }
  if (IsTfOpName(left) && IsTfOpType(right)) {
    op.category = OpCategory::kTensorFlow;
    op.name = left;
    op.type = right;
    return op;
  }
  const std::string_view type = right.empty() ? DeriveOpType(left) : right;
  if (IsJaxOpType(type)) {
    op.category = OpCategory::kJax;
    op.name = left;
    op.type = type.substr(0, type.find('['));
    return op;
  }
  if (right.empty()) {
    op.category = OpCategory::kTensorFlow;
    op.name = left;
    op.type = type;
  }
  return op;
}

}  // namespace liveprof
