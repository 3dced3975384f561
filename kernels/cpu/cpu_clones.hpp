#pragma once
// AERIE_CPU_CLONES: build a hot loop for AVX-512, AVX2 (x86-64-v3) and the baseline, picked by
// the loader for the CPU it runs on, so the binary stays portable and the loop is vectorised
// where the CPU allows. Only on x86-64 GCC/Clang; elsewhere one plain version.
#if defined(__x86_64__) && defined(__GNUC__)
#define AERIE_CPU_CLONES __attribute__((target_clones("avx512f", "arch=x86-64-v3", "default")))
#else
#define AERIE_CPU_CLONES
#endif
