#pragma once
// Philox4x32-10 (Salmon et al., SC'11): a counter-based generator, so a random number is a
// pure function of (seed, counter) and CPU and GPU draw the same one. Plain C++ that nvcc
// also compiles for the device.
#include <cstdint>

#if defined(__CUDACC__)
#define AERIE_HOST_DEVICE __host__ __device__
#else
#define AERIE_HOST_DEVICE
#endif

namespace aerie::kernels {

// A uniform number in [0, 1) with 24 random bits, keyed by seed, counted by counter.
AERIE_HOST_DEVICE inline float philox_uniform_inline(uint64_t seed, uint64_t counter) {
  uint32_t c0 = static_cast<uint32_t>(counter), c1 = static_cast<uint32_t>(counter >> 32), c2 = 0, c3 = 0;
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(0xD2511F53u) * c0;
    const uint64_t p1 = static_cast<uint64_t>(0xCD9E8D57u) * c2;
    const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
    const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
    c1 = static_cast<uint32_t>(p1);
    c3 = static_cast<uint32_t>(p0);
    c0 = n0;
    c2 = n2;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return static_cast<float>(c0 >> 8) * (1.0f / 16777216.0f);
}

}  // namespace aerie::kernels
