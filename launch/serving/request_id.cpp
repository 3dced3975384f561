#include "launch/serving/request_id.hpp"

#include <cstdio>
#include <mutex>
#include <random>

namespace aerie::launch {

std::string random_request_id() {
  static std::mutex mu;
  static std::random_device device;  // getrandom(2) on Linux
  uint64_t halves[2];
  {
    std::lock_guard<std::mutex> lock(mu);
    for (auto& h : halves) h = (static_cast<uint64_t>(device()) << 32) | device();
  }
  char out[33];
  std::snprintf(out, sizeof out, "%016llx%016llx", static_cast<unsigned long long>(halves[0]), static_cast<unsigned long long>(halves[1]));
  return out;
}

}  // namespace aerie::launch
