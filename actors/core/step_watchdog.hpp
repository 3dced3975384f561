#pragma once
// StepWatchdog: notices a step that does not come back (a rank stuck in a forward or a
// collective) and reports it once. Each Scheduler (or the DP coordinator) arms its slot when
// it sends a step and disarms it when the result comes back; a slot armed for longer than the
// timeout (--watchdog-timeout) calls on_expire with what was stuck. It runs on a thread of its
// own and holds no actor, so it never keeps an actor alive (a CAF delayed message would).
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>

namespace aerie::core {

class StepWatchdog {
 public:
  StepWatchdog(std::chrono::milliseconds timeout, std::function<void(const std::string&)> on_expire);
  ~StepWatchdog();
  StepWatchdog(const StepWatchdog&) = delete;
  StepWatchdog& operator=(const StepWatchdog&) = delete;
  // `what` names the step in the report ("DP group 1, step 40").
  void arm(int slot, std::string what);
  void disarm(int slot);
  std::chrono::milliseconds timeout() const { return timeout_; }

 private:
  void run();
  struct Armed {
    std::chrono::steady_clock::time_point deadline;
    std::string what;
  };
  const std::chrono::milliseconds timeout_;
  std::function<void(const std::string&)> on_expire_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<int, Armed> armed_;
  bool stop_ = false;
  bool fired_ = false;
  bool idle_ = false;  // the thread waits with nothing armed (or after firing): an arm wakes it
  std::thread thread_;
};

}  // namespace aerie::core
