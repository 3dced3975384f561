#pragma once
// How the actor system's thread pool polls, given where the model computes.
//
// CAF 0.17's work-stealing pool has no wake-up on enqueue: an idle worker polls its queue,
// first in a busy loop, then every 50 us for ~25 ms, then every 10 ms. The actors on a step's
// path (Schedulers, TP group workers, the DP coordinator, target and draft workers) are
// detached threads that block instead and wake when a message arrives; the pool carries the
// Router and the frontends. On a GPU host that polling costs
// nothing anyone needs (H200: SmolLM2 and 8B decoding equal with other settings, measured).
// When the model computes on the CPU, the pool's threads wake ~20,000 times a second each on
// the cores the products run on: on a 2-core machine SmolLM2 decoding gained 9-21% with one
// pool thread that settles into 1-ms polls after half a millisecond idle (docs/cpu-backend.md).
#include <caf/actor_system_config.hpp>

#include "kernels/tensor.hpp"

namespace aerie::actors {

// The pool settings Aerie uses when the model computes on `compute` (CUDA: CAF's defaults;
// also on the CPU with AERIE_CAF_POOL_DEFAULTS set, for measuring).
void configure_actor_pool(caf::actor_system_config& cfg, Device compute);

}  // namespace aerie::actors
