#pragma once
// Errors: AERIE_CHECK(cond, msg) throws aerie::Error carrying file and line.
#include <sstream>
#include <stdexcept>
#include <string>

namespace aerie {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message, const std::string& where = "")
      : std::runtime_error(where.empty() ? message : message + " (" + where + ")"), message_(message) {}
  // The message without the source location: what a client is shown (what() keeps the
  // location, for logs).
  const std::string& message() const { return message_; }

 private:
  std::string message_;
};

// What a client may see of an exception: an aerie::Error's message without its source
// location, any other exception's what().
std::string client_message(const std::exception& e);

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
