#pragma once
// StopMatcher: stop strings over streamed text. It releases text as it comes, except a tail
// that could still grow into a stop string; when a stop string appears, the text before it
// is the last released and matched() names it (the stop string itself is not output, as in
// sglang and the OpenAI API).
#include <optional>
#include <string>
#include <vector>

namespace aerie::launch {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops);
  // Adds text; returns what may be output now.
  std::string feed(const std::string& text);
  // At the end of generation: the held-back tail (nothing after a match).
  std::string flush();
  const std::optional<std::string>& matched() const { return matched_; }
  bool active() const { return !stops_.empty(); }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  std::optional<std::string> matched_;
};

}  // namespace aerie::launch
