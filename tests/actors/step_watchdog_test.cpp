// StepWatchdog: a step armed and never disarmed is reported once its timeout has passed, named as
// it was armed; steps disarmed in time are never reported, however often the slot is armed again;
// and a step stuck after many quick ones is still reported (the thread, waiting for an older
// deadline, finds the newer one when it wakes), as is one armed after the watchdog sat idle.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "actors/core/step_watchdog.hpp"

using namespace std::chrono_literals;
using aerie::core::StepWatchdog;

namespace {

struct Reports {
  std::mutex mu;
  std::vector<std::string> seen;
  void add(const std::string& s) {
    std::lock_guard<std::mutex> l(mu);
    seen.push_back(s);
  }
  size_t count() {
    std::lock_guard<std::mutex> l(mu);
    return seen.size();
  }
  std::string first() {
    std::lock_guard<std::mutex> l(mu);
    return seen.empty() ? "" : seen.front();
  }
};

// Waits up to `most` for a report.
bool reported_within(Reports& r, std::chrono::milliseconds most) {
  const auto until = std::chrono::steady_clock::now() + most;
  while (std::chrono::steady_clock::now() < until) {
    if (r.count() > 0) return true;
    std::this_thread::sleep_for(2ms);
  }
  return r.count() > 0;
}

}  // namespace

TEST(StepWatchdog, AStuckStepIsReportedOnceByTheNameItWasArmedWith) {
  Reports r;
  StepWatchdog w(60ms, [&](const std::string& why) { r.add(why); });
  const auto t0 = std::chrono::steady_clock::now();
  w.arm(0, "DP group 0, step 7");
  ASSERT_TRUE(reported_within(r, 2000ms));
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 60ms);
  EXPECT_NE(r.first().find("DP group 0, step 7 did not finish within 0.06 s"), std::string::npos) << r.first();
  std::this_thread::sleep_for(150ms);
  EXPECT_EQ(r.count(), 1u);  // one report
}

TEST(StepWatchdog, StepsDisarmedInTimeAreNeverReportedAndALaterStuckOneStillIs) {
  Reports r;
  StepWatchdog w(80ms, [&](const std::string& why) { r.add(why); });
  // 300 ms of quick steps on two slots: each armed again long before its timeout.
  const auto until = std::chrono::steady_clock::now() + 300ms;
  for (int step = 0; std::chrono::steady_clock::now() < until; ++step) {
    w.arm(step % 2, "step " + std::to_string(step));
    std::this_thread::sleep_for(1ms);
    w.disarm(step % 2);
  }
  EXPECT_EQ(r.count(), 0u);
  w.arm(1, "the stuck step");
  ASSERT_TRUE(reported_within(r, 2000ms));
  EXPECT_NE(r.first().find("the stuck step"), std::string::npos) << r.first();
}

TEST(StepWatchdog, AStepArmedAfterTheWatchdogSatIdleIsReported) {
  Reports r;
  StepWatchdog w(50ms, [&](const std::string& why) { r.add(why); });
  w.arm(0, "first");
  w.disarm(0);
  std::this_thread::sleep_for(120ms);  // past the first deadline: the thread waits with nothing armed
  EXPECT_EQ(r.count(), 0u);
  w.arm(3, "after idle");
  ASSERT_TRUE(reported_within(r, 2000ms));
  EXPECT_NE(r.first().find("after idle"), std::string::npos) << r.first();
}
