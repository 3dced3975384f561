#include "launch/serving/stop_matcher.hpp"

#include <algorithm>
#include <utility>

namespace aerie::launch {

StopMatcher::StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {
  stops_.erase(std::remove(stops_.begin(), stops_.end(), std::string()), stops_.end());
}

std::string StopMatcher::feed(const std::string& text) {
  if (matched_) return "";
  held_ += text;
  if (stops_.empty()) return std::exchange(held_, std::string());
  // The earliest stop string wins (the longest at the same place).
  size_t best = std::string::npos;
  for (const auto& s : stops_) {
    const size_t at = held_.find(s);
    if (at != std::string::npos && (at < best || (at == best && s.size() > matched_->size()))) best = at, matched_ = s;
  }
  if (matched_) {
    std::string out = held_.substr(0, best);
    held_.clear();
    return out;
  }
  // Keep the longest tail that is the start of some stop string.
  size_t keep = 0;
  for (const auto& s : stops_)
    for (size_t n = std::min(s.size() - 1, held_.size()); n > keep; --n)
      if (held_.compare(held_.size() - n, n, s, 0, n) == 0) {
        keep = n;
        break;
      }
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

std::string StopMatcher::flush() {
  if (matched_) return "";
  return std::exchange(held_, std::string());
}

}  // namespace aerie::launch
