#pragma once
// Status: what a kernel launcher returns. Launchers may run under CUDA-graph capture, where
// throwing across the capture is unsafe, so backend failures come back as values.
#include <string>
#include <utility>

#include "kernels/error.hpp"

namespace aerie {

struct [[nodiscard]] Status {
  bool ok_ = true;
  std::string message_;

  static Status ok() { return {}; }
  static Status error(std::string message) { return {false, std::move(message)}; }
  bool is_ok() const { return ok_; }
  const std::string& message() const { return message_; }
};

}  // namespace aerie

// Throws aerie::Error when a launcher's status is not ok.
#define AERIE_CHECK_STATUS(expr)                                \
  do {                                                          \
    ::aerie::Status aerie_status_ = (expr);                     \
    AERIE_CHECK(aerie_status_.is_ok(), aerie_status_.message()); \
  } while (0)
