#include "parallel/parallel_layout.hpp"

#include "kernels/error.hpp"

namespace aerie::parallel {

void ParallelLayout::check(int world) const {
  AERIE_CHECK(tp_size >= 1 && dp_size >= 1, "--tp-size and --dp-size must be >= 1");
  if (dp_attention) {
    AERIE_CHECK(tp_size % dp_size == 0, "--enable-dp-attention needs --tp-size (" << tp_size << ") divisible by --dp-size (" << dp_size << ")");
    AERIE_CHECK(world_size() == world, "--enable-dp-attention runs on --tp-size ranks: " << tp_size << ", but this launch has " << world
                                                                                        << " (start with mpirun -np " << tp_size << ")");
    return;
  }
  AERIE_CHECK(world_size() == world, "--tp-size " << tp_size << " x --dp-size " << dp_size << " = " << world_size()
                                                  << " ranks, but this launch has " << world << " (start with mpirun -np "
                                                  << world_size() << ")");
}

ParallelGroups make_parallel_groups(ProcessGroup& world, const ParallelLayout& layout) {
  layout.check(world.size());
  const int r = world.rank();
  ParallelGroups g;
  g.layout = layout;
  if (layout.dp_attention) {
    g.tp = world.split(0, r);
    g.dp = world.split(layout.attn_tp_rank(r), layout.dp_rank(r));
  } else {
    g.tp = world.split(layout.dp_rank(r), layout.tp_rank(r));
    g.dp = world.split(layout.tp_rank(r), layout.dp_rank(r));
  }
  g.attn_tp = world.split(layout.dp_rank(r), layout.attn_tp_rank(r));
  return g;
}

}  // namespace aerie::parallel
