#pragma once
// Batch-invariant kernels (--enable-deterministic-inference, as sglang names it; vLLM's
// VLLM_BATCH_INVARIANT): every row of a forward is computed the same way, bit for bit, whatever
// else shares its batch — how many rows, prompt chunks or decode tokens, one token of a sequence
// or a verify's several. Greedy speculative answers then equal plain decoding's in bf16 at every
// batch size (a verify's rows are the plain steps' rows), and a request's answer does not depend
// on which requests ran beside it. Off by default: it gives up the kernels chosen per batch.
//
// What it pins (docs/deterministic-inference.md):
//  - products (CUDA, 16-bit weights and fp8 copies): one GEMV for every row count, chosen by K
//    alone (batch_invariant_gemv_kernel, kernels/gemv_rules.hpp), more rows than a launch takes
//    in chunks (16 on tensor cores, 8 on CUDA cores) it sums exactly as it sums one; CPU: the
//    small-batch kernel in chunks of 16 rows;
//  - attention (CUDA): one token a block, the decode kernel for every batch (prefill included),
//    the keys cut into splits of kAttentionMinSplitKeys whatever the batch
//    (batch_invariant_attention_splits), always merged by the combine kernel.
// A process-wide switch, set once at start-up before any forward (like set_gemv_max_rows).
#include <cstdint>

namespace aerie::kernels {

void set_batch_invariant(bool on);
bool batch_invariant();

// The split count a batch-invariant attention takes over a batch whose longest sequence holds
// max_kv_len keys: enough splits of kAttentionMinSplitKeys keys for it, at least 2 (so that
// every row goes through the same merge) and at most kMaxAttentionSplits. A row of v visible
// keys then gets splits of max(kAttentionMinSplitKeys, ceil(v / splits)) keys, which is
// kAttentionMinSplitKeys up to 64 x that many keys and a function of v alone past it.
int batch_invariant_attention_splits(int64_t max_kv_len);

}  // namespace aerie::kernels
