#include "spec/greedy_accept.hpp"

#include "kernels/error.hpp"

namespace aerie::spec {

ChainAcceptance greedy_accept_chain(std::span<const int32_t> draft, std::span<const int32_t> target_argmax,
                                    int64_t batch, int64_t n) {
  AERIE_CHECK(batch >= 0 && n >= 0, "batch and draft length must be non-negative");
  AERIE_CHECK(static_cast<int64_t>(draft.size()) == batch * n, "draft holds " << draft.size() << " tokens, expected "
                                                                              << batch * n);
  AERIE_CHECK(static_cast<int64_t>(target_argmax.size()) == batch * (n + 1),
              "target_argmax holds " << target_argmax.size() << " tokens, expected " << batch * (n + 1));
  ChainAcceptance out;
  out.committed_indptr.push_back(0);
  for (int64_t b = 0; b < batch; ++b) {
    const int32_t* d = draft.data() + b * n;
    const int32_t* t = target_argmax.data() + b * (n + 1);
    int32_t accepted = 0;
    while (accepted < n && d[accepted] == t[accepted]) {
      out.committed.push_back(d[accepted]);
      ++accepted;
    }
    out.committed.push_back(t[accepted]);  // the bonus token
    out.accept_length.push_back(accepted);
    out.committed_indptr.push_back(static_cast<int32_t>(out.committed.size()));
  }
  return out;
}

}  // namespace aerie::spec
