// CPU backend of kernels::greedy_chain_accept: the reference the CUDA kernel is tested against.
#include "kernels/backends.hpp"

namespace aerie::kernels::cpu {

Status greedy_chain_accept(const GreedyChainAcceptParams& p) {
  const int64_t n = p.tokens_per_request, batch = p.drafts.dim(0) / n, rows = p.last_rows.dim(0);
  const int32_t* drafts = p.drafts.ptr<int32_t>();
  const int32_t* argmax = p.argmax.ptr<int32_t>();
  int32_t* last = p.last_rows.ptr<int32_t>();
  int32_t* tokens = p.tokens.ptr<int32_t>();
  for (int64_t b = 0; b < rows; ++b) {
    if (b >= batch) {
      last[b] = static_cast<int32_t>(b * n + n - 1);
      for (int64_t j = 0; j < n; ++j) tokens[b * n + j] = 0;
      continue;
    }
    int64_t a = 0;
    while (a < n - 1 && drafts[b * n + a + 1] == argmax[b * n + a]) ++a;
    last[b] = static_cast<int32_t>(b * n + a);
    for (int64_t j = 0; j < n; ++j) tokens[b * n + j] = argmax[b * n + j];
  }
  return Status::ok();
}

}  // namespace aerie::kernels::cpu
