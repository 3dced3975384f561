#pragma once
// TreeAcceptor: verification of a batch of draft trees (chains included) on the logits'
// device, greedy or by target-only speculative sampling, exact in distribution
// (kernels::tree_accept says how). Only the trees and the sampling parameters go up (one
// staged upload) and only the accepted paths and bonus tokens come back (one copy): the
// verify logits never leave the device.
#include <cstdint>
#include <span>
#include <vector>

#include "kernels/buffer.hpp"
#include "kernels/staging.hpp"
#include "model/sampler.hpp"
#include "spec/greedy_accept.hpp"

namespace aerie::spec {

class TreeAcceptor {
 public:
  explicit TreeAcceptor(Device device) : device_(device) {}
  // logits: [trees.size() * nodes, vocab] f32 on the device, tree s's node i at row
  // s * nodes + i; every tree has `nodes` nodes. rows[s]: request s's sampling parameters
  // (temperature 0: greedy), its `step` the tokens it has output so far. Throws
  // aerie::Error on a malformed tree or a draft token outside the vocabulary. Synchronises.
  std::vector<TreeAcceptance> accept(const TensorView& logits, std::span<const DraftTree> trees, std::span<const model::SamplingRow> rows,
                                     const Stream& stream);

 private:
  void reserve(int64_t trees, int64_t nodes);
  Device device_;
  int64_t trees_ = 0, nodes_ = 0;  // capacity
  Buffer packed_;                  // parameters, trees and results, laid out as staging_
  Buffer workspace_;               // kernels::tree_accept's row statistics
  HostStaging staging_;
};

}  // namespace aerie::spec
