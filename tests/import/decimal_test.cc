#include "import/decimal.h"

#include <doctest/doctest.h>

namespace liveprof::decimal_test {
namespace {

TEST_CASE("import: microsecond text to nanoseconds, exactly") {
  CHECK(MicrosTextToNs("0") == 0);
  CHECK(MicrosTextToNs("1") == 1000);
  CHECK(MicrosTextToNs("12.5") == 12500);
  CHECK(MicrosTextToNs("0.001") == 1);
  CHECK(MicrosTextToNs("-3.25") == -3250);
  // Kineto's timestamps: 16 digits of µs and a fraction. A double would be
  // off by up to 0.25 µs here; the text is exact.
  CHECK(MicrosTextToNs("1623143089861234.567") == 1623143089861234567);
  CHECK(MicrosTextToNs("1682725898237042") == 1682725898237042000);
  // Past the nanosecond: rounded half away from zero.
  CHECK(MicrosTextToNs("0.0005") == 1);
  CHECK(MicrosTextToNs("0.0004999") == 0);
  CHECK(MicrosTextToNs("2.0015") == 2002);
  CHECK(MicrosTextToNs("-2.0015") == -2002);
  // Exponents (Catapult's traces have some).
  CHECK(MicrosTextToNs("1.5e3") == 1500000);
  CHECK(MicrosTextToNs("25E-3") == 25);
  CHECK(MicrosTextToNs("1e+2") == 100000);
  CHECK(MicrosTextToNs("0.000") == 0);
}

TEST_CASE("import: what is not a JSON number, or does not fit, is refused") {
  for (const char* bad : {"", "-", ".5", "1.", "01", "1e", "1e+", "abc", "1.2.3", " 1", "1 ", "+1", "0x10", "NaN"}) {
    CAPTURE(bad);
    CHECK(!MicrosTextToNs(bad).has_value());
  }
  CHECK(!MicrosTextToNs("9223372036854776").has_value());  // µs beyond int64 ns.
  CHECK(MicrosTextToNs("9223372036854775").has_value());
  CHECK(!MicrosTextToNs("1e30").has_value());
}

}  // namespace
}  // namespace liveprof::decimal_test
