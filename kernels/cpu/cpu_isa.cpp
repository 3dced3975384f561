#include "kernels/cpu/cpu_isa.hpp"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace aerie::kernels::cpu {

namespace {

// AERIE_CPU_ISA=avx2 or none caps the kernels at start-up (A/B on one machine); avx512 or unset: no cap.
CpuIsa cap_from_env() {
  const char* v = std::getenv("AERIE_CPU_ISA");
  if (!v || !*v) return CpuIsa::kAvx512;
  const std::string s(v);
  if (s == "avx512") return CpuIsa::kAvx512;
  if (s == "avx2") return CpuIsa::kAvx2;
  if (s == "none") return CpuIsa::kNone;
  std::fprintf(stderr, "aerie: AERIE_CPU_ISA=%s is not avx512, avx2 or none; ignored\n", v);
  return CpuIsa::kAvx512;
}

std::atomic<CpuIsa> g_cap{cap_from_env()};

}  // namespace

bool cpu_has(CpuIsa isa) {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  static const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return isa == CpuIsa::kAvx512 ? avx512 : isa == CpuIsa::kAvx2 ? avx2 : true;
#else
  return isa == CpuIsa::kNone;
#endif
}

CpuIsa cpu_isa() {
  static const CpuIsa best = cpu_has(CpuIsa::kAvx512) ? CpuIsa::kAvx512 : cpu_has(CpuIsa::kAvx2) ? CpuIsa::kAvx2 : CpuIsa::kNone;
  return std::min(best, g_cap.load(std::memory_order_relaxed));
}

CpuIsa set_cpu_isa_cap(CpuIsa cap) { return g_cap.exchange(cap, std::memory_order_relaxed); }

}  // namespace aerie::kernels::cpu
