// Built only when this build has no CUDA kernels: every CUDA op says so instead of running.
#include "kernels/backends.hpp"

namespace aerie::kernels::cuda {

namespace {
Status unavailable(const char* op) {
  return Status::error(std::string(op) + ": this build of Aerie has no CUDA kernels (configure with AERIE_WITH_CUDA=ON)");
}
}  // namespace

Status embedding(const EmbeddingParams&, void*) { return unavailable("embedding"); }
Status scatter_rows(const ScatterRowsParams&, void*) { return unavailable("scatter_rows"); }
Status resolve_future_ids(const ResolveFutureIdsParams&, void*) { return unavailable("resolve_future_ids"); }
Status record_future_tokens(const RecordFutureTokensParams&, void*) { return unavailable("record_future_tokens"); }
Status logit_adjust(const LogitAdjustParams&, void*) { return unavailable("logit_adjust"); }
Status rms_norm(const RmsNormParams&, void*) { return unavailable("rms_norm"); }
Status rms_norm_pair(const RmsNormPairParams&, void*) { return unavailable("rms_norm_pair"); }
Status rope(const RopeParams&, void*) { return unavailable("rope"); }
Status matmul(const MatmulParams&, void*) { return unavailable("matmul"); }
Status silu_mul(const SiluMulParams&, void*) { return unavailable("silu_mul"); }
Status attention(const AttentionParams&, void*) { return unavailable("attention"); }
Status kv_write(const KvWriteParams&, void*) { return unavailable("kv_write"); }
Status kv_move(const KvMoveParams&, void*) { return unavailable("kv_move"); }
Status sample(const SampleParams&, void*) { return unavailable("sample"); }
Status tree_accept(const TreeAcceptParams&, void*) { return unavailable("tree_accept"); }
Status greedy_chain_accept(const GreedyChainAcceptParams&, void*) { return unavailable("greedy_chain_accept"); }
Status tree_draft_begin(const TreeDraftBeginParams&, void*) { return unavailable("tree_draft_begin"); }
Status tree_draft_expand(const TreeDraftExpandParams&, void*) { return unavailable("tree_draft_expand"); }
Status log_softmax(const LogSoftmaxParams&, void*) { return unavailable("log_softmax"); }
Status rope_kv_write(const RopeKvWriteParams&, void*) { return unavailable("rope_kv_write"); }
Status topk(const TopKParams&, void*) { return unavailable("topk"); }
Status gate_up_silu(const GateUpSiluParams&, void*) { return unavailable("gate_up_silu"); }
Status qkv_rope(const QkvRopeParams&, void*) { return unavailable("qkv_rope"); }
void set_gemv_max_rows(int) {}
int gemv_max_rows() { return 0; }
void set_gemv_chunked_rows(int64_t) {}
GemmTuningCounts gemm_tuning_counts() { return {}; }  // nothing is tuned without CUDA
Status fill_normal(const FillNormalParams&, void*) { return unavailable("fill_normal"); }

}  // namespace aerie::kernels::cuda
