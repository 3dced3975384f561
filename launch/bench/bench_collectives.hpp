#pragma once
// aerie-bench collectives: the time of one all-reduce over the ranks of an mpirun launch
// (one GPU each), NCCL alone against Aerie's communicator (the IPC one-shot kernel for bf16
// up to 2 MB), for the message sizes a decode step sends (rows x hidden in bf16), issued
// eagerly and replayed from a CUDA graph of many back-to-back calls (as a decode graph issues
// them). Also checks that both give the same sums. What decided that the IPC all-reduce
// pays (docs/performance.md).
#include <cstdint>
#include <string>
#include <vector>

namespace aerie::launch {

struct CollectiveBenchOptions {
  std::vector<int64_t> rows = {1, 8, 32, 128};
  int64_t hidden = 4096;
  int64_t calls = 64;  // all-reduces per graph (an 8B decode step has 64)
  int64_t reps = 20;
  std::string json_path;
};

int run_collective_bench(const CollectiveBenchOptions& options);

}  // namespace aerie::launch
