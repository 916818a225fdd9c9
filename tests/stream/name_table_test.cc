#include "stream/name_table.h"

#include <doctest/doctest.h>

#include <map>
#include <string>
#include <thread>
#include <vector>

namespace liveprof::name_table_test {

TEST_CASE("names: one id per distinct string, dense, readable back") {
  NameTable table;
  CHECK(table.Intern("") == NameTable::kEmptyId);
  const uint32_t base = table.size();
  const NameId a = table.Intern("MatMul");
  const NameId b = table.Intern(std::string_view("Relu"));
  CHECK(a == base);
  CHECK(b == base + 1);
  CHECK(table.Intern(std::string("MatMul")) == a);
  CHECK(table.Get(a) == "MatMul");
  CHECK(table.Get(b) == "Relu");
  CHECK(table.Get(b).data()[4] == '\0');  // stored NUL terminated.
  CHECK(table.size() == base + 2);
  CHECK(table.Get(NameTable::kMaxNames + 5).empty());
}

TEST_CASE("names: null and over-long names are mapped and counted, not fatal") {
  Diagnostics diag;
  NameTable table(&diag);
  CHECK(table.Intern(static_cast<const char*>(nullptr)) == NameTable::kNullId);
  CHECK(table.Get(NameTable::kNullId) == "<null>");
  CHECK(diag.Get(Diag::null_name) == 1);

  const std::string long_name(NameTable::kMaxNameBytes + 100, 'x');
  const NameId id = table.Intern(long_name);
  CHECK(table.Get(id).size() == NameTable::kMaxNameBytes);
  CHECK(diag.Get(Diag::name_truncated) == 1);
  // The cut name is one name: the same long input maps to it again.
  CHECK(table.Intern(long_name) == id);
}

TEST_CASE("names: interning from many threads gives one id per string") {
  constexpr int kThreads = 8;
  constexpr int kNamesPerThread = 3000;
  NameTable table;
  const uint32_t base = table.size();
  std::vector<std::map<std::string, NameId>> seen(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      // Half of each thread's names are shared with every other thread.
      for (int i = 0; i < kNamesPerThread; ++i) {
        const std::string name =
            i % 2 == 0 ? "shared/" + std::to_string(i) : "t" + std::to_string(t) + "/" + std::to_string(i);
        seen[t][name] = table.Intern(name);
      }
    });
  }
  for (auto& th : threads) th.join();

  std::map<std::string, NameId> all;
  for (const auto& m : seen) {
    for (const auto& [name, id] : m) {
      auto [it, inserted] = all.emplace(name, id);
      CHECK(it->second == id);  // every thread got the same id for a string.
      CHECK(table.Get(id) == name);
    }
  }
  const size_t shared = kNamesPerThread / 2;
  const size_t own = kThreads * (kNamesPerThread / 2);
  CHECK(all.size() == shared + own);
  CHECK(table.size() == base + shared + own);  // dense: no id wasted.
}

}  // namespace liveprof::name_table_test
