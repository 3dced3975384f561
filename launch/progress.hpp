#pragma once
// ProgressBar: progress of a long job (model loading, a serving benchmark) on stderr. On a
// terminal it redraws one line ("label [#####.....] 12/64  3.2/s  0:05 < 0:10") at most
// ten times a second; into a file or pipe it writes a line at every tenth, so CI logs stay
// short. Thread-safe.
#include <chrono>
#include <cstdint>
#include <iosfwd>
#include <mutex>
#include <string>

namespace aerie::launch {

class ProgressBar {
 public:
  // enabled = false: silent (e.g. ranks other than 0, or --disable-progress).
  ProgressBar(std::string label, int64_t total, bool enabled = true);
  ProgressBar(std::string label, int64_t total, std::ostream& out, bool is_terminal);
  ~ProgressBar();
  void set(int64_t done);
  void advance(int64_t n = 1);
  void finish();  // draws the final state once

 private:
  void draw(bool final);
  std::string label_;
  int64_t total_;
  int64_t done_ = 0;
  std::ostream* out_;
  bool terminal_;
  bool enabled_;
  bool finished_ = false;
  int64_t last_tenth_ = -1;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last_draw_{};
  std::mutex mu_;
};

// "m:ss" (or "h:mm:ss").
std::string format_duration(double seconds);

}  // namespace aerie::launch
