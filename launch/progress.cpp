#include "launch/progress.hpp"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <iostream>
#include <sstream>

namespace aerie::launch {

std::string format_duration(double seconds) {
  const auto s = static_cast<int64_t>(std::max(0.0, std::round(seconds)));
  char buf[32];
  if (s >= 3600) std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", static_cast<long long>(s / 3600), static_cast<long long>(s / 60 % 60),
                               static_cast<long long>(s % 60));
  else std::snprintf(buf, sizeof buf, "%lld:%02lld", static_cast<long long>(s / 60), static_cast<long long>(s % 60));
  return buf;
}

ProgressBar::ProgressBar(std::string label, int64_t total, bool enabled)
    : ProgressBar(std::move(label), total, std::cerr, ::isatty(STDERR_FILENO) != 0) {
  enabled_ = enabled;
}

ProgressBar::ProgressBar(std::string label, int64_t total, std::ostream& out, bool is_terminal)
    : label_(std::move(label)), total_(std::max<int64_t>(total, 1)), out_(&out), terminal_(is_terminal), enabled_(true) {}

ProgressBar::~ProgressBar() { finish(); }

void ProgressBar::set(int64_t done) {
  std::lock_guard<std::mutex> lock(mu_);
  done_ = std::min(done, total_);
  draw(false);
}

void ProgressBar::advance(int64_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  done_ = std::min(done_ + n, total_);
  draw(false);
}

void ProgressBar::finish() {
  std::lock_guard<std::mutex> lock(mu_);
  if (finished_) return;
  finished_ = true;
  draw(true);
}

void ProgressBar::draw(bool final) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  const int64_t tenth = done_ * 10 / total_;
  if (terminal_) {
    if (!final && done_ < total_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
  } else if (!final && tenth == last_tenth_) {
    return;
  } else if (final && tenth == last_tenth_ && done_ != 0) {
    return;  // already reported
  }
  last_draw_ = now;
  last_tenth_ = tenth;
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const double rate = elapsed > 0 ? static_cast<double>(done_) / elapsed : 0.0;
  const double eta = rate > 0 ? static_cast<double>(total_ - done_) / rate : 0.0;
  constexpr int kWidth = 30;
  const int filled = static_cast<int>(kWidth * done_ / total_);
  std::ostringstream line;
  line << label_ << " [" << std::string(static_cast<size_t>(filled), '#') << std::string(static_cast<size_t>(kWidth - filled), '.')
       << "] " << done_ << "/" << total_ << "  ";
  char r[32];
  std::snprintf(r, sizeof r, "%.1f/s", rate);
  line << r << "  " << format_duration(elapsed) << " < " << format_duration(eta);
  if (terminal_) *out_ << "\r" << line.str() << "\033[K" << (final ? "\n" : "") << std::flush;
  else *out_ << line.str() << "\n" << std::flush;
}

}  // namespace aerie::launch
