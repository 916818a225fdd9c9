// JsonWriter: a small, fast, append-only JSON writer for the view models.
// Snapshots of every view are serialized on each tick, so this avoids a DOM:
// values go straight into one std::string. Doubles print as the shortest text
// that reads back to the same value (std::to_chars), NaN and infinities as
// null. The caller keeps the structure well formed; debug builds assert it.
//
//   JsonWriter w;
//   w.BeginObject();
//   w.Key("type"); w.String("overview");
//   w.Key("steps"); w.BeginArray(); w.Int(1); w.Int(2); w.EndArray();
//   w.EndObject();
//   std::string json = w.Take();
#ifndef LIVEPROF_BASE_JSON_WRITER_H_
#define LIVEPROF_BASE_JSON_WRITER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace liveprof {

// The pieces, for text built by hand (chrome_export.cc): a quoted, escaped
// string; a double as its shortest round-trip text, null when not finite.
void AppendJsonString(std::string* out, std::string_view s);
void AppendJsonDouble(std::string* out, double v);

class JsonWriter {
 public:
  JsonWriter() = default;
  // Starts after `prefix`, which is taken as it is (not checked): lets a
  // caller put a header before a value without copying the value afterwards.
  explicit JsonWriter(std::string prefix) : out_(std::move(prefix)) {}

  void BeginObject() { Open('{'); }
  void EndObject() { Close('}'); }
  void BeginArray() { Open('['); }
  void EndArray() { Close(']'); }
  // An object key; the next call writes its value.
  void Key(std::string_view key);

  void String(std::string_view s);
  void Int(int64_t v);
  void UInt(uint64_t v);
  void Double(double v);
  // A double rounded to `decimals` places (percentages, milliseconds).
  void Fixed(double v, int decimals);
  void Bool(bool v);
  void Null();

  // Shorthands for a key and its value.
  void KV(std::string_view k, std::string_view v) {
    Key(k);
    String(v);
  }
  void KV(std::string_view k, const char* v) {
    Key(k);
    String(v);
  }
  void KV(std::string_view k, int64_t v) {
    Key(k);
    Int(v);
  }
  void KV(std::string_view k, int v) {
    Key(k);
    Int(v);
  }
  void KV(std::string_view k, uint64_t v) {
    Key(k);
    UInt(v);
  }
  void KV(std::string_view k, uint32_t v) {
    Key(k);
    UInt(v);
  }
  void KV(std::string_view k, double v) {
    Key(k);
    Double(v);
  }
  void KV(std::string_view k, bool v) {
    Key(k);
    Bool(v);
  }

  const std::string& str() const { return out_; }
  std::string Take() { return std::move(out_); }
  void Reserve(size_t n) { out_.reserve(n); }

 private:
  void Open(char c);
  void Close(char c);
  void BeforeValue();

  std::string out_;
  // Per open container: has it a first element yet? A key sets after_key_.
  std::vector<char> has_element_;
  bool after_key_ = false;
};

// Appends `s` to `out` as one CSV field (RFC 4180: quoted when it holds a
// comma, quote or line break; quotes doubled).
void AppendCsvField(std::string* out, std::string_view s);
// Appends a double as CSV text (shortest round-trip form).
void AppendCsvNumber(std::string* out, double v);

}  // namespace liveprof

#endif  // LIVEPROF_BASE_JSON_WRITER_H_
