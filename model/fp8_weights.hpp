#pragma once
// Weight-only FP8 (E4M3) quantization with one scale per output row, for draft models
// (--speculative-draft-model-quantization fp8, as sglang's option names it): a row's scale is
// its largest magnitude / 448, so each row spans the format's whole range. The copy sits beside
// the weight as loaded: products of up to 16 rows read its bytes (half of bf16's) and apply the
// scale to each finished sum, larger ones the weight (kernels/matmul.hpp). Made once at load.
#include <cstdint>
#include <string>

#include "kernels/buffer.hpp"

namespace aerie::model {

struct Fp8Rows {
  Buffer values;  // [n, k] f8e4m3, on the weight's device
  Buffer scales;  // [n] f32
};

// Quantizes a [n, k] floating weight on the CPU or the GPU (the work is done on the host).
Fp8Rows quantize_fp8_rows(const Buffer& w);

// The host core: n rows of k floats into n * k codes and n scales. A row of zeros gets scale 1;
// a non-finite weight throws, naming its row (counted from first_row, for callers that go in blocks).
void quantize_fp8_rows(const float* w, int64_t n, int64_t k, uint8_t* codes, float* scales, int64_t first_row = 0);

// --speculative-draft-model-quantization (sglang's flag and names): "" keeps the weights as
// loaded; "fp8" gives an EAGLE head's products FP8 copies (above); "w8a8_int8" gives them Q8_0
// blocks over int8 activations on the CPU (kernels/cpu/int8_block_gemm.hpp), the target's
// products untouched. Anything else throws, naming the accepted values.
enum class DraftQuantization { kNone, kFp8, kW8A8Int8 };
DraftQuantization parse_draft_quantization(const std::string& name);

}  // namespace aerie::model
