#include "launch/bench/bench_cpu_gemm.hpp"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <optional>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "kernels/cpu/cpu_isa.hpp"
#include "kernels/cpu/int8_block_gemm.hpp"
#include "kernels/cpu/small_batch_gemm.hpp"
#include "kernels/dtype.hpp"
#include "kernels/error.hpp"
#include "kernels/tensor.hpp"
#include "kernels/weight_blocks.hpp"
#include "launch/bench/bench_timing.hpp"

namespace aerie::launch {

namespace {

using bench::Clock;
using bench::ms_since;
using kernels::cpu::CpuIsa;

const char* isa_name(CpuIsa isa) { return isa == CpuIsa::kAvx512 ? "avx512" : "avx2"; }

// "f32" / "bf16" (nullopt) or a block format, by its GGUF name in lower case.
std::optional<kernels::BlockFormat> weight_format(const std::string& name) {
  if (name == "f32" || name == "bf16") return std::nullopt;
  for (auto f : {kernels::BlockFormat::kQ4_0, kernels::BlockFormat::kQ4_1, kernels::BlockFormat::kQ8_0}) {
    std::string lower = kernels::block_format_name(f);
    std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (name == lower) return f;
  }
  AERIE_FAIL("--weights takes f32, bf16, q4_0, q4_1 or q8_0, not '" << name << "'");
}

// n rows of k weights as blocks of format f: random quants, f16 scales (and Q4_1 minimums) of
// a few hundredths, as a model's.
std::vector<unsigned char> random_blocks(kernels::BlockFormat f, int64_t n, int64_t k, uint32_t& s) {
  std::vector<unsigned char> bytes(static_cast<size_t>(n * kernels::block_row_bytes(f, k)));
  for (auto& b : bytes) b = static_cast<unsigned char>((s = s * 1664525u + 1013904223u) >> 24);
  const int64_t bb = kernels::block_bytes(f);
  for (int64_t b = 0; b < n * k / kernels::kBlockElements; ++b) {
    const uint16_t d = float_to_f16(0.02f + static_cast<float>(b % 7) * 0.003f), m = float_to_f16(-0.1f);
    std::memcpy(bytes.data() + b * bb, &d, 2);
    if (f == kernels::BlockFormat::kQ4_1) std::memcpy(bytes.data() + b * bb + 2, &m, 2);
  }
  return bytes;
}

}  // namespace

int run_cpu_gemm_bench(const CpuGemmBenchOptions& o) {
  std::vector<CpuIsa> isas;
  for (CpuIsa isa : {CpuIsa::kAvx512, CpuIsa::kAvx2})
    if (kernels::cpu::small_batch_gemm_supports(isa)) isas.push_back(isa);
  AERIE_CHECK(!isas.empty(), "the small-batch kernel needs AVX-512 or AVX2 + FMA; this CPU has neither");
  for (int64_t r : o.rows) AERIE_CHECK(r >= 1 && r <= kernels::cpu::kSmallBatchMaxRows, "--rows takes 1 to 16");
  nlohmann::json out = nlohmann::json::array();
  std::printf("%6s %6s %5s %4s %7s %9s %8s %10s\n", "k", "n", "w", "rows", "isa", "ms", "GB/s", "vs first");
  for (int64_t k : o.k) {
    AERIE_CHECK(k >= 16, "--k must be at least 16");
    const int64_t n = o.n > 0 ? o.n : std::max<int64_t>(4, o.megabytes * (int64_t{1} << 20) / (k * 4));
    std::vector<float> w(static_cast<size_t>(n * k)), x(static_cast<size_t>(16 * k)), y(static_cast<size_t>(16 * n));
    uint32_t s = 12345;
    for (float& v : w) v = static_cast<float>((s = s * 1664525u + 1013904223u) >> 8) * (1.0f / 16777216.0f) - 0.5f;
    std::vector<uint16_t> w_bf16(w.size());
    std::transform(w.begin(), w.end(), w_bf16.begin(), float_to_bf16);
    for (float& v : x) v = static_cast<float>((s = s * 1664525u + 1013904223u) >> 8) * (1.0f / 16777216.0f) - 0.5f;
    for (const std::string& weights : o.weights) {
      const auto format = weight_format(weights);
      AERIE_CHECK(!format || k % kernels::kBlockElements == 0, "--weights " << weights << ": --k must be a multiple of 32 (whole blocks)");
      const bool bf16 = weights == "bf16";
      std::vector<unsigned char> bytes;
      kernels::WeightBlocks blocks;
      if (format) {
        bytes = random_blocks(*format, n, k, s);
        blocks = {.bytes = TensorView(bytes.data(), DType::kU8, {n, kernels::block_row_bytes(*format, k)}), .format = *format};
      }
      // The exact f32 products on each instruction set; blocks also through int8 activations on
      // AMX (kernels/cpu/int8_block_gemm.hpp: other numbers, from a tile-order copy).
      std::vector<std::string> paths;
      for (CpuIsa isa : isas) paths.push_back(isa_name(isa));
      std::vector<unsigned char> tiles;
      kernels::WeightBlocks tiled;
      if (format && n % kernels::kTileGroupRows == 0 && kernels::cpu::amx_int8_available()) {
        tiles.resize(bytes.size());
        kernels::blocks_to_tile_order(*format, bytes.data(), n, k, tiles.data());
        tiled = {.bytes = TensorView(tiles.data(), DType::kU8, {n, kernels::block_row_bytes(*format, k)}), .format = *format,
                 .layout = kernels::BlockLayout::kTiles16};
        paths.push_back("amx-i8");
      }
      std::vector<std::vector<double>> best(paths.size(), std::vector<double>(o.rows.size(), 1e30));
      for (int64_t rep = 0; rep < o.reps + 1; ++rep) {  // the first round warms up, untimed
        for (size_t a = 0; a < paths.size(); ++a)
          for (size_t i = 0; i < o.rows.size(); ++i) {
            const int64_t m = o.rows[i];
            const auto t0 = Clock::now();
            if (a >= isas.size()) kernels::cpu::int8_block_gemm_on(kernels::cpu::Int8BlockPath::kAmx, m, n, k, x.data(), tiled, y.data());
            else if (format) kernels::cpu::small_batch_gemm_on(isas[a], m, n, k, x.data(), blocks, y.data());
            else if (bf16) kernels::cpu::small_batch_gemm_on(isas[a], m, n, k, x.data(), w_bf16.data(), y.data());
            else kernels::cpu::small_batch_gemm_on(isas[a], m, n, k, x.data(), w.data(), y.data());
            if (rep > 0) best[a][i] = std::min(best[a][i], ms_since(t0));
          }
      }
      const double gb = static_cast<double>(format ? static_cast<int64_t>(bytes.size()) : n * k * (bf16 ? 2 : 4)) / 1e9;
      for (size_t a = 0; a < paths.size(); ++a)
        for (size_t i = 0; i < o.rows.size(); ++i) {
          const double ms = best[a][i], one = best[a][0];
          std::printf("%6lld %6lld %5s %4lld %7s %9.3f %8.1f %10.2f\n", static_cast<long long>(k), static_cast<long long>(n), weights.c_str(),
                      static_cast<long long>(o.rows[i]), paths[a].c_str(), ms, gb / (ms / 1e3), ms / one);
          out.push_back({{"k", k}, {"n", n}, {"weights", weights}, {"rows", o.rows[i]}, {"isa", paths[a]}, {"ms", ms},
                         {"gb_per_s", gb / (ms / 1e3)}, {"over_first_rows", ms / one}});
        }
    }
  }
  if (!o.json_path.empty()) std::ofstream(o.json_path) << out.dump(2) << "\n";
  return 0;
}

}  // namespace aerie::launch
