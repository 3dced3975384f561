#pragma once
// CompletionWaiter: a thread that waits, in order, for the marks of work a worker enqueued on
// its device (StreamEvent) and calls `notify` after each one has run. The worker's actor
// enqueues batch N + 1 while N runs and must not block on N itself (it would not see N + 1
// arrive); this thread blocks instead and tells the actor when N's result can be collected.
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "kernels/staging.hpp"

namespace aerie::core {

class CompletionWaiter {
 public:
  explicit CompletionWaiter(std::function<void()> notify);
  ~CompletionWaiter();  // stops after the mark it waits on (if any) has run
  CompletionWaiter(const CompletionWaiter&) = delete;
  CompletionWaiter& operator=(const CompletionWaiter&) = delete;
  // Calls notify() once `done` has run (after the marks watched before it).
  void watch(std::shared_ptr<const StreamEvent> done);

 private:
  void loop();
  std::function<void()> notify_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<const StreamEvent>> marks_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace aerie::core
