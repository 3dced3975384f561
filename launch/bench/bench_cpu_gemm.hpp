#pragma once
// aerie-bench cpu-gemm: the CPU small-batch kernel (kernels/cpu/small_batch_gemm.hpp) alone,
// y = x w^T for 1-16 activation rows, on each instruction set the CPU has, over f32 weights, their bf16
// roundings (a draft head's) or GGUF blocks of the same shape (kernels/weight_blocks.hpp; random quants and scales): what a
// decode step (1 row) and a verify (chain steps + 1 rows) pay for their products, as a ratio to
// the same run's first row count (one row: a decode step's product) and as the weight bytes
// read per second (the blocks' own bytes for blocks). Blocks also run through the products over
// int8 activations on AMX where the CPU has it and n is whole groups of 16 (an amx-i8 row;
// kernels/cpu/int8_block_gemm.hpp).
#include <cstdint>
#include <string>
#include <vector>

namespace aerie::launch {

struct CpuGemmBenchOptions {
  std::vector<int64_t> rows = {1, 2, 3, 4, 6, 8};
  std::vector<int64_t> k = {576, 1536};  // SmolLM2: the hidden size, the MLP's width
  int64_t megabytes = 448;               // of f32 weights per product (their shape, for blocks too)
  int64_t n = 0;                         // weight rows; 0: from megabytes
  std::vector<std::string> weights = {"f32"};  // f32, bf16, q4_0, q4_1, q8_0
  int64_t reps = 10;                     // the fastest of these, interleaved
  std::string json_path;
};

int run_cpu_gemm_bench(const CpuGemmBenchOptions& options);

}  // namespace aerie::launch
