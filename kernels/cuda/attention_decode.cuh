#pragma once
// Decode and verify attention on the tensor cores (kernels/cuda/ops_attention_decode.cu), for
// the batches attention_decode_on_tensor_cores() accepts. CUDA-only header.
#include "kernels/attention.hpp"

namespace aerie::kernels::cuda {

// The attention kernel alone: with p.num_splits > 1 it writes each split's partial rows to
// `partial` (attention_workspace_floats() f32, [token * q_heads + head][split][dim + 2]:
// the unnormalised output, the running max, the sum) for the caller's combine kernel.
Status attention_decode_tc(const AttentionParams& p, float* partial, void* stream);

}  // namespace aerie::kernels::cuda
