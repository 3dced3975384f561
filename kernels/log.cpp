#include "kernels/log.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <cstdlib>
#include <mutex>

#include "kernels/error.hpp"

namespace aerie::log {

namespace {

std::atomic<int> g_level{static_cast<int>(Level::kWarning)};
std::atomic<int> g_rank{-1};
std::once_flag g_env_once;
std::mutex g_sink_mutex;
std::function<void(Level, const std::string&)> g_sink;

spdlog::logger& logger() {
  // stderr, unbuffered, one line per call (spdlog's sinks are thread-safe).
  static std::shared_ptr<spdlog::logger> l = [] {
    auto made = spdlog::stderr_color_mt("aerie");
    made->set_pattern("[%H:%M:%S.%e] [%^%l%$] %v");
    made->set_level(spdlog::level::trace);  // the level is ours (enabled()), not spdlog's
    return made;
  }();
  return *l;
}

}  // namespace

Level parse_level(const std::string& name) {
  if (name == "debug") return Level::kDebug;
  if (name == "info") return Level::kInfo;
  if (name == "warning" || name == "warn") return Level::kWarning;
  if (name == "error") return Level::kError;
  AERIE_FAIL("unknown log level '" << name << "' (debug, info, warning or error)");
}

void set_level(Level level) {
  std::call_once(g_env_once, [] {});  // an explicit level wins over the environment
  g_level = static_cast<int>(level);
}

void init_from_env() {
  std::call_once(g_env_once, [] {
    const char* v = std::getenv("AERIE_LOG_LEVEL");
    if (!v || !*v) return;
    try {
      g_level = static_cast<int>(parse_level(v));
    } catch (const Error& e) {
      logger().warn("AERIE_LOG_LEVEL: {}", e.message());
    }
  });
}

bool enabled(Level level) {
  init_from_env();
  return static_cast<int>(level) >= g_level.load(std::memory_order_relaxed);
}

void set_rank(int rank) { g_rank = rank; }

void set_test_sink(std::function<void(Level, const std::string&)> sink) {
  std::lock_guard<std::mutex> lock(g_sink_mutex);
  g_sink = std::move(sink);
}

void write(Level level, const std::string& line) {
  const int rank = g_rank.load();
  const std::string text = rank >= 0 ? "rank " + std::to_string(rank) + ": " + line : line;
  {
    std::lock_guard<std::mutex> lock(g_sink_mutex);
    if (g_sink) g_sink(level, text);
  }
  switch (level) {
    case Level::kDebug: logger().debug("{}", text); break;
    case Level::kInfo: logger().info("{}", text); break;
    case Level::kWarning: logger().warn("{}", text); break;
    case Level::kError: logger().error("{}", text); break;
  }
}

}  // namespace aerie::log
