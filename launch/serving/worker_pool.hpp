#pragma once
// WorkerPool: threads for HTTP handlers, started as they are needed up to a cap. Handlers
// block on the engine for a request's whole life, so the pool grows to as many requests as
// are in progress (up to the cap); more wait in order for a thread to come free.
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace aerie::launch {

class WorkerPool {
 public:
  explicit WorkerPool(size_t max_threads);
  ~WorkerPool();  // runs what was submitted, then joins
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;
  void submit(std::function<void()> task);
  size_t threads() const;

 private:
  void work();
  const size_t max_threads_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  std::vector<std::thread> threads_;
  size_t idle_ = 0;
  bool stopping_ = false;
};

}  // namespace aerie::launch
