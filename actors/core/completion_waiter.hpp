#pragma once
// CompletionWaiter: a thread that waits, in order, for the marks of work a worker enqueued on
// its device (StreamEvent) and calls `notify` after each one has run. The worker's actor
// enqueues batch N + 1 while N runs and must not block on N itself (it would not see N + 1
// arrive); this thread blocks instead and tells the actor when N's result can be collected.
//
// The waiter may be destroyed by its own thread: `notify` holds the actor only for the send,
// and when that was the actor's last reference, the actor (and with it this waiter) is
// destroyed inside `notify`. The thread therefore owns the state it uses (`Shared`), and a
// destructor running on the thread itself lets the thread finish instead of joining it.
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
  struct Shared {
    std::function<void()> notify;
    std::mutex mu;
    std::condition_variable cv;
    std::deque<std::shared_ptr<const StreamEvent>> marks;
    bool stop = false;
  };
  static void loop(Shared& s);
  std::shared_ptr<Shared> shared_;
  std::thread thread_;
};

}  // namespace aerie::core
