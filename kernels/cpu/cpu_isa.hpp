#pragma once
// Which vector instructions the CPU kernels use: the widest the CPU has (checked once), at most a
// cap that tests and benchmarks lower to run the AVX2 paths on an AVX-512 machine (at start-up:
// AERIE_CPU_ISA=avx2 or none). Every path
// gives the same bits as the others (each kernel documents its order), so the cap changes speed
// only.

namespace aerie::kernels::cpu {

enum class CpuIsa { kNone, kAvx2, kAvx512 };  // kAvx2 includes FMA

/// Whether the CPU has `isa` (kNone: always).
bool cpu_has(CpuIsa isa);

/// The widest instruction set the CPU has, at most the cap.
CpuIsa cpu_isa();

/// Caps cpu_isa() (kAvx512: no cap) and returns the cap before. For tests and benchmarks; not
/// meant to change while ops run.
CpuIsa set_cpu_isa_cap(CpuIsa cap);

}  // namespace aerie::kernels::cpu
