// Built with LIVEPROF_DISABLE_TRACING (the CMake option LIVEPROF_TRACING=OFF):
// every macro must compile, evaluate nothing it need not, and record nothing.
#include <doctest/doctest.h>

#include "producers/host_api.h"

namespace liveprof::host_api_disabled_test {

TEST_CASE("disabled build: the macros compile to nothing and record nothing") {
  const uint32_t names_before = GlobalStream().names().size();
  int calls = 0;
  auto count = [&] { return ++calls; };
  {
    LIVEPROF_STEP(1);
    LIVEPROF_SCOPE("x");
    LIVEPROF_OP("y");
    LIVEPROF_INPUT("z");
    LIVEPROF_INSTANT("i");
    LIVEPROF_COUNTER("c", count());  // unevaluated operand.
    int local = 0;
    LIVEPROF_ALLOC("a", &local, sizeof local);
    LIVEPROF_FREE("a", &local, sizeof local);
    Scope s(0);
    StepBegin(1);
    StepEnd(1);
  }
  CHECK(calls == 0);
  CHECK_FALSE(TracingEnabled());
  CHECK(GlobalStream().TotalPublished() == 0);
  CHECK(GlobalStream().Stats().empty());
  CHECK(GlobalStream().names().size() == names_before);  // nothing was even interned.
}

}  // namespace liveprof::host_api_disabled_test
