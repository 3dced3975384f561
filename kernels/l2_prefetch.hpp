#pragma once
// L2 prefetch hints. At small batch a decode step alternates weight products, which stream
// HBM, with kernels that read almost nothing from it (attention over a short context, the
// norms): HBM idles while they run. Such an op may carry `prefetch`, the weights the next
// product reads; on the GPU its blocks ask L2 for them (fire and forget), so the product
// finds them there. A hint changes no result; the CPU backend ignores it.
#include <cstdint>

#include "kernels/tensor.hpp"

namespace aerie::kernels {

// Up to how many rows of a forward the model passes hints: the products of up to 16 rows are
// the GEMVs, which read weights in row order, so the leading bytes are the first read.
// Larger batches' products (cuBLAS) and attention read more, and hints would only compete.
inline constexpr int64_t kL2PrefetchMaxRows = 16;
// How much of the next product a norm asks for: about what HBM moves in the few microseconds
// a norm and the end of the kernel before it take (attention, which runs longer at small
// batch, asks for all of o_proj).
inline constexpr int64_t kL2NormPrefetchBytes = int64_t{16} << 20;

// The leading `max_bytes` (all when <= 0) of a weight, as a hint, or an empty view for none.
TensorView l2_prefetch_hint(const TensorView& weight, int64_t rows, int64_t max_bytes = 0);

}  // namespace aerie::kernels
