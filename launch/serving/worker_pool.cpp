#include "launch/serving/worker_pool.hpp"

#include <algorithm>

namespace aerie::launch {

WorkerPool::WorkerPool(size_t max_threads) : max_threads_(std::max<size_t>(1, max_threads)) {}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void WorkerPool::submit(std::function<void()> task) {
  std::lock_guard<std::mutex> lock(mu_);
  tasks_.push_back(std::move(task));
  // A new thread when every idle one already has a task waiting for it.
  if (tasks_.size() > idle_ && threads_.size() < max_threads_) threads_.emplace_back(&WorkerPool::work, this);
  cv_.notify_one();
}

size_t WorkerPool::threads() const {
  std::lock_guard<std::mutex> lock(mu_);
  return threads_.size();
}

void WorkerPool::work() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    ++idle_;
    cv_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
    --idle_;
    if (tasks_.empty()) return;  // stopping, nothing left
    auto task = std::move(tasks_.front());
    tasks_.pop_front();
    lock.unlock();
    task();
    lock.lock();
  }
}

}  // namespace aerie::launch
