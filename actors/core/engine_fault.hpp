#pragma once
// EngineFault: the launch-wide "something is broken" latch that rank 0 raises when a rank is
// lost (launch/heartbeat via transport/heartbeat.hpp), a step overruns the watchdog
// (--watchdog-timeout), or an actor that serves requests dies. The first raise wins and runs
// the handler (Deployment's: tell the Router to fail every request with 503, turn health to
// 503, end the launch with a non-zero code after a short grace); later ones are ignored.
// Thread-safe; CAF-free.
#include <functional>
#include <mutex>
#include <optional>
#include <string>

namespace aerie::core {

class EngineFault {
 public:
  void set_handler(std::function<void(const std::string&)> handler);
  // Records the fault and runs the handler; false when a fault was raised already.
  bool raise(const std::string& reason);
  std::optional<std::string> reason() const;
  bool raised() const { return reason().has_value(); }

 private:
  mutable std::mutex mu_;
  std::optional<std::string> reason_;
  std::function<void(const std::string&)> handler_;
};

}  // namespace aerie::core
