#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <iostream>

#include "data_skip.h"

namespace {

// Prints the skip marker of data_skip.h at the end of a case that skipped
// for want of ../shared/data and did not fail (std::cout: doctest does not
// capture it).
struct DataSkipListener : doctest::IReporter {
  explicit DataSkipListener(const doctest::ContextOptions&) {}
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats&) override {}
  void test_case_start(const doctest::TestCaseData&) override { liveprof::test::DataSkipReason().clear(); }
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats& stats) override {
    std::string& reason = liveprof::test::DataSkipReason();
    if (!reason.empty() && stats.testCaseSuccess) std::cout << "LIVEPROF-SKIP: " << reason << std::endl;
    reason.clear();
  }
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}
};

}  // namespace

REGISTER_LISTENER("liveprof_data_skip", 1, DataSkipListener);
