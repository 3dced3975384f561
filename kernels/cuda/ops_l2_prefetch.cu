// The host side of the L2 prefetch hints (kernels/l2_prefetch.hpp): what a launch passes its
// blocks (kernels/cuda/common.cuh, l2_prefetch_share).
#include <algorithm>
#include <cstdlib>

#include "kernels/cuda/common.cuh"
#include "kernels/env_knob.hpp"

namespace aerie::kernels::cuda {

namespace {

struct L2Policy {
  int mode = 1;
  int sites = 3;  // bit 0: attention's hints, bit 1: the norms'
  int64_t cap = 0;
  L2Policy() {
    if (std::getenv("AERIE_L2_PREFETCH")) mode = std::clamp(env_knob("AERIE_L2_PREFETCH"), 0, 2);
    if (std::getenv("AERIE_L2_PREFETCH_SITES")) sites = env_knob("AERIE_L2_PREFETCH_SITES");
    int device = 0, l2 = 0;
    cudaGetDevice(&device);
    cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device);
    const int mb = env_knob("AERIE_L2_PREFETCH_MB");
    cap = mb > 0 ? static_cast<int64_t>(mb) << 20 : static_cast<int64_t>(l2) * 3 / 4;
  }
};

}  // namespace

L2Hint l2_hint(const TensorView& t, L2Site site) {
  static const L2Policy policy;
  if (!t.defined() || policy.mode == 0 || (policy.sites & static_cast<int>(site)) == 0 || reinterpret_cast<uintptr_t>(t.data) % 16 != 0)
    return {};
  return {static_cast<const char*>(t.data), std::min(t.nbytes(), policy.cap), policy.mode};
}

}  // namespace aerie::kernels::cuda
