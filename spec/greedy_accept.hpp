#pragma once
// Greedy verification of chain drafts: a request's draft tokens d_1..d_n are accepted
// while each equals the target's argmax at the position before it; the target's argmax
// after the last accepted token is the bonus token. So every verify commits between
// 1 and n + 1 tokens, exactly the tokens greedy decoding without speculation produces.
#include <cstdint>
#include <span>
#include <vector>

namespace aerie::spec {

struct ChainAcceptance {
  std::vector<int32_t> accept_length;    // [batch] accepted draft tokens (0..n)
  std::vector<int32_t> committed;        // concatenated committed tokens (accepted + bonus)
  std::vector<int32_t> committed_indptr; // [batch + 1]
};

// draft: [batch, n] row-major; target_argmax: [batch, n + 1], where target_argmax[b, i] is
// the target's argmax after the request's last committed token followed by d_1..d_i.
ChainAcceptance greedy_accept_chain(std::span<const int32_t> draft, std::span<const int32_t> target_argmax,
                                    int64_t batch, int64_t n);

}  // namespace aerie::spec
