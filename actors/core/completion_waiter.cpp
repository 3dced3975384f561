#include "actors/core/completion_waiter.hpp"

#include "kernels/log.hpp"

namespace aerie::core {

CompletionWaiter::CompletionWaiter(std::function<void()> notify)
    : shared_(std::make_shared<Shared>()) {
  shared_->notify = std::move(notify);
  // The thread keeps its own reference: it may outlive this object (see the header).
  thread_ = std::thread([s = shared_] { loop(*s); });
}

CompletionWaiter::~CompletionWaiter() {
  {
    std::lock_guard<std::mutex> lock(shared_->mu);
    shared_->stop = true;
  }
  shared_->cv.notify_all();
  if (thread_.get_id() == std::this_thread::get_id()) {
    thread_.detach();  // destroyed from inside notify(): the loop sees `stop` once notify returns
  } else {
    thread_.join();
  }
}

void CompletionWaiter::watch(std::shared_ptr<const StreamEvent> done) {
  {
    std::lock_guard<std::mutex> lock(shared_->mu);
    shared_->marks.push_back(std::move(done));
  }
  shared_->cv.notify_one();
}

void CompletionWaiter::loop(Shared& s) {
  for (;;) {
    std::shared_ptr<const StreamEvent> mark;
    {
      std::unique_lock<std::mutex> lock(s.mu);
      s.cv.wait(lock, [&s] { return s.stop || !s.marks.empty(); });
      if (s.marks.empty()) return;  // stopping, nothing left
      mark = std::move(s.marks.front());
      s.marks.pop_front();
    }
    try {
      mark->wait();
    } catch (const std::exception& e) {  // the device failed: collecting finds it again and reports it
      AERIE_LOG_WARNING("completion waiter: " << e.what());
    }
    {
      std::lock_guard<std::mutex> lock(s.mu);
      if (s.stop) return;
    }
    s.notify();
  }
}

}  // namespace aerie::core
