#pragma once
// Backend entry points behind the op entries. The CPU functions are the plain,
// deterministic, fp32-accumulating reference; the CUDA functions launch on the stream
// handle (a cudaStream_t). Host header: no CUDA includes.
#include "kernels/attention.hpp"
#include "kernels/chain_accept.hpp"
#include "kernels/embedding.hpp"
#include "kernels/future_tokens.hpp"
#include "kernels/gemm_tuning.hpp"
#include "kernels/logit_adjust.hpp"
#include "kernels/matmul.hpp"
#include "kernels/rms_norm.hpp"
#include "kernels/rope.hpp"
#include "kernels/rope_kv_write.hpp"
#include "kernels/sampling.hpp"
#include "kernels/silu_mul.hpp"
#include "kernels/topk.hpp"
#include "kernels/tree_accept.hpp"
#include "kernels/tree_draft.hpp"

namespace aerie::kernels {

#define AERIE_DECLARE_BACKEND(ns, ...)                          \
  namespace ns {                                                \
  Status embedding(const EmbeddingParams& p __VA_ARGS__);       \
  Status scatter_rows(const ScatterRowsParams& p __VA_ARGS__);  \
  Status resolve_future_ids(const ResolveFutureIdsParams& p __VA_ARGS__);      \
  Status record_future_tokens(const RecordFutureTokensParams& p __VA_ARGS__);  \
  Status rms_norm(const RmsNormParams& p __VA_ARGS__);          \
  Status rms_norm_pair(const RmsNormPairParams& p __VA_ARGS__);  \
  Status rope(const RopeParams& p __VA_ARGS__);                 \
  Status matmul(const MatmulParams& p __VA_ARGS__);             \
  Status silu_mul(const SiluMulParams& p __VA_ARGS__);          \
  Status attention(const AttentionParams& p __VA_ARGS__);       \
  Status kv_write(const KvWriteParams& p __VA_ARGS__);          \
  Status kv_move(const KvMoveParams& p __VA_ARGS__);            \
  Status sample(const SampleParams& p __VA_ARGS__);             \
  Status log_softmax(const LogSoftmaxParams& p __VA_ARGS__);    \
  Status rope_kv_write(const RopeKvWriteParams& p __VA_ARGS__);  \
  Status topk(const TopKParams& p __VA_ARGS__);                 \
  Status fill_normal(const FillNormalParams& p __VA_ARGS__);    \
  Status gate_up_silu(const GateUpSiluParams& p __VA_ARGS__);  \
  Status qkv_rope(const QkvRopeParams& p __VA_ARGS__);          \
  Status logit_adjust(const LogitAdjustParams& p __VA_ARGS__);  \
  Status tree_accept(const TreeAcceptParams& p __VA_ARGS__);    \
  Status greedy_chain_accept(const GreedyChainAcceptParams& p __VA_ARGS__);  \
  Status tree_draft_begin(const TreeDraftBeginParams& p __VA_ARGS__);    \
  Status tree_draft_expand(const TreeDraftExpandParams& p __VA_ARGS__);  \
  }

AERIE_DECLARE_BACKEND(cpu)
AERIE_DECLARE_BACKEND(cuda, , void* stream)
#undef AERIE_DECLARE_BACKEND

namespace cuda {
void set_gemv_max_rows(int rows);
int gemv_max_rows();
void set_gemv_chunked_rows(int64_t rows);
GemmTuningCounts gemm_tuning_counts();
}

}  // namespace aerie::kernels
