#include <algorithm>
#include <cstdio>
#include <cstdlib>

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
  [[noreturn]] void abort(int code) override {
    std::fflush(nullptr);
    std::_Exit(code);
  }
  std::unique_ptr<ProcessGroup> split(int, int) override { return std::make_unique<SingleProcessGroup>(); }
};

}  // namespace

std::unique_ptr<ProcessGroup> make_single_process_group() { return std::make_unique<SingleProcessGroup>(); }

bool launched_by_mpirun() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMI_SIZE") != nullptr ||
         std::getenv("PMIX_RANK") != nullptr;
}

}  // namespace aerie::parallel
