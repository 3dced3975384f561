#pragma once
// Errors: AERIE_CHECK(cond, msg) throws aerie::Error carrying file and line.
#include <sstream>
#include <stdexcept>
#include <string>

namespace aerie {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

[[noreturn]] void throw_error(const char* file, int line, const std::string& message);

}  // namespace aerie

// The message may use stream syntax: AERIE_CHECK(n > 0, "n=" << n).
#define AERIE_CHECK(cond, msg)                                  \
  do {                                                          \
    if (!(cond)) {                                              \
      std::ostringstream aerie_check_os_;                       \
      aerie_check_os_ << msg;                                   \
      ::aerie::throw_error(__FILE__, __LINE__, aerie_check_os_.str()); \
    }                                                           \
  } while (0)

#define AERIE_FAIL(msg) AERIE_CHECK(false, msg)
