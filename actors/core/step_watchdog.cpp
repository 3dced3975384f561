#include "actors/core/step_watchdog.hpp"

#include <sstream>

#include "kernels/error.hpp"

namespace aerie::core {

StepWatchdog::StepWatchdog(std::chrono::milliseconds timeout, std::function<void(const std::string&)> on_expire)
    : timeout_(timeout), on_expire_(std::move(on_expire)) {
  AERIE_CHECK(timeout.count() > 0, "--watchdog-timeout must be positive");
  thread_ = std::thread([this] { run(); });
}

StepWatchdog::~StepWatchdog() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

// Every deadline is its arm's time plus the one timeout, so a new one is never earlier than the
// one the thread waits for: only a thread waiting with nothing armed needs waking. (Waking it at
// every step cost the Scheduler a futex call and the thread a wake-up per step, on the path
// between a batch's result and the next batch.)
void StepWatchdog::arm(int slot, std::string what) {
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    armed_[slot] = {std::chrono::steady_clock::now() + timeout_, std::move(what)};
    wake = idle_;
  }
  if (wake) cv_.notify_all();
}

void StepWatchdog::disarm(int slot) {
  std::lock_guard<std::mutex> lock(mu_);
  armed_.erase(slot);
}

void StepWatchdog::run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    if (armed_.empty() || fired_) {
      idle_ = true;
      cv_.wait(lock);
      idle_ = false;
      continue;
    }
    auto first = armed_.begin();
    for (auto it = armed_.begin(); it != armed_.end(); ++it)
      if (it->second.deadline < first->second.deadline) first = it;
    // A copy: wait_until reads the deadline again after it wakes, by when disarm() may
    // have erased the slot. Slots disarmed and armed again meanwhile hold later deadlines:
    // the loop finds them when it wakes.
    const auto deadline = first->second.deadline;
    if (std::chrono::steady_clock::now() < deadline) {
      cv_.wait_until(lock, deadline);
      continue;
    }
    std::ostringstream why;
    why << first->second.what << " did not finish within " << timeout_.count() / 1000.0 << " s (--watchdog-timeout): a rank is stuck";
    fired_ = true;  // one report: the launch is going down
    lock.unlock();
    on_expire_(why.str());
    lock.lock();
  }
}

}  // namespace aerie::core
