#include <algorithm>
#include <cstdlib>
#include <string>

#include "kernels/error.hpp"
#include "parallel/process_group.hpp"

namespace aerie::parallel {

namespace {

// A world of one rank: every collective is the identity.
class SingleProcessGroup final : public ProcessGroup {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void all_reduce_sum(std::span<float>) override {}
  std::vector<int64_t> all_gather(int64_t value) override { return {value}; }
  void all_gather_bytes(std::span<const uint8_t> mine, std::span<uint8_t> all) override {
    AERIE_CHECK(all.size() == mine.size(), "all_gather_bytes: " << all.size() << " bytes for " << mine.size() << " from 1 rank");
    std::copy(mine.begin(), mine.end(), all.begin());
  }
  void broadcast(std::span<uint8_t>, int root) override { AERIE_CHECK(root == 0, "broadcast root " << root << " of 1 rank"); }
  void barrier() override {}
  std::unique_ptr<ProcessGroup> split(int, int) override { return std::make_unique<SingleProcessGroup>(); }
};

}  // namespace

std::unique_ptr<ProcessGroup> make_single_process_group() { return std::make_unique<SingleProcessGroup>(); }

bool launched_by_mpirun() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMI_SIZE") != nullptr ||
         std::getenv("PMIX_RANK") != nullptr;
}

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
