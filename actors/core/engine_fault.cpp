#include "actors/core/engine_fault.hpp"

namespace aerie::core {

void EngineFault::set_handler(std::function<void(const std::string&)> handler) {
  std::lock_guard<std::mutex> lock(mu_);
  handler_ = std::move(handler);
}

bool EngineFault::raise(const std::string& reason) {
  std::function<void(const std::string&)> handler;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (reason_) return false;
    reason_ = reason;
    handler = handler_;
  }
  if (handler) handler(reason);  // outside the lock: it may read reason()
  return true;
}

std::optional<std::string> EngineFault::reason() const {
  std::lock_guard<std::mutex> lock(mu_);
  return reason_;
}

}  // namespace aerie::core
