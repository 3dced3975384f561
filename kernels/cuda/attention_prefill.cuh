#pragma once
// Prefill attention on the tensor cores (kernels/cuda/ops_attention_prefill.cu), for the
// batches attention_prefill_on_tensor_cores() accepts. CUDA-only header.
#include "kernels/attention.hpp"

namespace aerie::kernels::cuda {

Status attention_prefill(const AttentionParams& p, void* stream);

}  // namespace aerie::kernels::cuda
