#pragma once
// Logging for every layer, through spdlog (to stderr): a level set by --log-level or the
// AERIE_LOG_LEVEL environment variable (debug, info, warning, error; default warning, so
// a plain run prints only what goes wrong), and a prefix naming the rank under mpirun.
//   AERIE_LOG_DEBUG("step " << id << " bucket " << b);   // built only when debug is on
#include <functional>
#include <sstream>
#include <string>

namespace aerie::log {

enum class Level { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

// Throws aerie::Error for a name that is not a level.
Level parse_level(const std::string& name);
void set_level(Level level);
// AERIE_LOG_LEVEL, when set (an unknown value is reported once and ignored); called by
// the first enabled() on its own.
void init_from_env();
bool enabled(Level level);
// "rank N: " before every line from now on (-1: none).
void set_rank(int rank);
void write(Level level, const std::string& line);
// Tests: every line written from now on also goes to `sink` (an empty function stops it).
void set_test_sink(std::function<void(Level, const std::string&)> sink);

}  // namespace aerie::log

#define AERIE_LOG_AT(level, expr)                          \
  do {                                                     \
    if (::aerie::log::enabled(level)) {                    \
      std::ostringstream aerie_log_os_;                    \
      aerie_log_os_ << expr;                               \
      ::aerie::log::write(level, aerie_log_os_.str());     \
    }                                                      \
  } while (0)
#define AERIE_LOG_DEBUG(expr) AERIE_LOG_AT(::aerie::log::Level::kDebug, expr)
#define AERIE_LOG_INFO(expr) AERIE_LOG_AT(::aerie::log::Level::kInfo, expr)
#define AERIE_LOG_WARNING(expr) AERIE_LOG_AT(::aerie::log::Level::kWarning, expr)
#define AERIE_LOG_ERROR(expr) AERIE_LOG_AT(::aerie::log::Level::kError, expr)
