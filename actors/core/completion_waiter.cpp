#include "actors/core/completion_waiter.hpp"

#include "kernels/log.hpp"

namespace aerie::core {

CompletionWaiter::CompletionWaiter(std::function<void()> notify) : notify_(std::move(notify)), thread_([this] { loop(); }) {}

CompletionWaiter::~CompletionWaiter() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void CompletionWaiter::watch(std::shared_ptr<const StreamEvent> done) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    marks_.push_back(std::move(done));
  }
  cv_.notify_one();
}

void CompletionWaiter::loop() {
  for (;;) {
    std::shared_ptr<const StreamEvent> mark;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stop_ || !marks_.empty(); });
      if (marks_.empty()) return;  // stopping, nothing left
      mark = std::move(marks_.front());
      marks_.pop_front();
    }
    try {
      mark->wait();
    } catch (const std::exception& e) {  // the device failed: collecting finds it again and reports it
      AERIE_LOG_WARNING("completion waiter: " << e.what());
    }
    bool stopping;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping = stop_;
    }
    if (stopping) return;
    notify_();
  }
}

}  // namespace aerie::core
