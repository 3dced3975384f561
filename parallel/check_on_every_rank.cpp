// check_on_every_rank (parallel/process_group.hpp): one rank's failed check fails them all.
#include <algorithm>
#include <string>
#include <vector>

#include "kernels/error.hpp"
#include "parallel/process_group.hpp"

namespace aerie::parallel {

void check_on_every_rank(ProcessGroup& group, const std::function<void()>& check) {
  constexpr size_t kMessageBytes = 1024;
  std::string error;
  try {
    check();
  } catch (const std::exception& e) {
    error = e.what();
  }
  std::vector<uint8_t> mine(kMessageBytes, 0), all(kMessageBytes * static_cast<size_t>(group.size()));
  mine[0] = error.empty() ? 0 : 1;
  std::copy_n(error.begin(), std::min(error.size(), kMessageBytes - 2), mine.begin() + 1);
  group.all_gather_bytes(mine, all);
  if (!error.empty()) AERIE_FAIL(error);
  for (int r = 0; r < group.size(); ++r) {
    const uint8_t* m = all.data() + kMessageBytes * static_cast<size_t>(r);
    if (m[0]) AERIE_FAIL("rank " << r << ": " << reinterpret_cast<const char*>(m + 1));
  }
}

}  // namespace aerie::parallel
