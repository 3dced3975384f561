// Sampling (greedy, temperature, top-k, top-p, min-p), log-softmax, top-k, and the
// Philox normal fill. One block per row; everything stays on the device (graph-safe).
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/sampling_common.cuh"
#include "kernels/env_knob.hpp"
#include "kernels/philox.hpp"

namespace aerie::kernels::cuda {

namespace {

constexpr int kThreads = 1024;

constexpr int kArgmaxParts = 32;

// Stage 1 of the row maximum: block p of row b reduces slice p; partial = [b][p] (value,
// index as float bits).
__global__ void partial_argmax_kernel(const float* logits, int64_t vocab, float* partial) {
  __shared__ ArgMax scratch[32];
  pdl_begin();  // launched behind the kernel that writes the logits (an LM head)
  const int64_t b = blockIdx.x, p = blockIdx.y;
  const int64_t slice = (vocab + kArgmaxParts - 1) / kArgmaxParts;
  const int64_t begin = p * slice, end = min64(vocab, begin + slice);
  const float* row = logits + b * vocab;
  ArgMax best{-INFINITY, -1};
  for (int64_t v = begin + threadIdx.x; v < end; v += blockDim.x) best = better(best, ArgMax{row[v], static_cast<int32_t>(v)});
  best = block_argmax(best, scratch);
  if (threadIdx.x == 0) {
    partial[(b * kArgmaxParts + p) * 2] = best.v;
    partial[(b * kArgmaxParts + p) * 2 + 1] = __int_as_float(best.i);
  }
}

__global__ void sample_kernel(const float* logits, int64_t vocab, const float* temperature, const float* top_p, const int32_t* top_k,
                              const float* min_p, const int64_t* seed, const int64_t* step, int32_t* out, const float* partial,
                              const int32_t* id_map, int32_t* out_copy) {
  __shared__ float scratch[32];
  __shared__ ArgMax am_scratch[32];
  __shared__ float chunk_sums[kThreads];
  pdl_begin();
  const int64_t b = blockIdx.x;
  auto write = [&](int32_t token) {  // thread 0: the token, through the map, to each output
    if (id_map) token = id_map[token];
    out[b] = token;
    if (out_copy) out_copy[b] = token;
  };
  const float* row = logits + b * vocab;
  ArgMax best{-INFINITY, -1};
  if (partial) {
    if (threadIdx.x < kArgmaxParts)
      best = ArgMax{partial[(b * kArgmaxParts + threadIdx.x) * 2], __float_as_int(partial[(b * kArgmaxParts + threadIdx.x) * 2 + 1])};
  } else {
    best = row_argmax(row, vocab);
  }
  best = block_argmax(best, am_scratch);
  const float temp = temperature[b];
  if (!(temp > 0.0f)) {  // greedy (validated on the host: never negative or NaN)
    if (threadIdx.x == 0) write(best.i < 0 ? 0 : best.i);
    return;
  }
  const float mx = best.v, inv_t = 1.0f / temp;
  const RowFilter f = row_filter(row, vocab, mx, inv_t, top_k[b], top_p[b], min_p[b], scratch);
  __shared__ int32_t chosen;
  const float u = philox_uniform_inline(static_cast<uint64_t>(seed[b]), static_cast<uint64_t>(step[b]));
  const int32_t token = draw_in_id_order(
      vocab, [&](int64_t v) { return __expf((row[v] - mx) * inv_t) * f.inv_z; }, [&](int64_t, float p) { return p >= f.tau; },
      [&](float kept) { return u * kept; }, chunk_sums, scratch, am_scratch, &chosen);
  if (threadIdx.x == 0) write(token);
}

__global__ void log_softmax_kernel(const float* logits, float* out, int64_t vocab) {
  __shared__ float scratch[32];
  const float* row = logits + blockIdx.x * vocab;
  float mx = -INFINITY;
  for (int64_t v = threadIdx.x; v < vocab; v += blockDim.x) mx = fmaxf(mx, row[v]);
  mx = block_max(mx, scratch);
  float s = 0.0f;
  for (int64_t v = threadIdx.x; v < vocab; v += blockDim.x) s += __expf(row[v] - mx);
  s = block_sum(s, scratch);
  const float lse = mx + __logf(s);
  for (int64_t v = threadIdx.x; v < vocab; v += blockDim.x) out[blockIdx.x * vocab + v] = row[v] - lse;
}

__global__ void topk_kernel(const float* x, int64_t n, int64_t k, float* values, int32_t* indices) {
  __shared__ ArgMax scratch[32];
  const float* row = x + blockIdx.x * n;
  ArgMax prev{INFINITY, -1};
  for (int64_t r = 0; r < k; ++r) {
    ArgMax best{-INFINITY, -1};
    for (int64_t v = threadIdx.x; v < n; v += blockDim.x) {
      const float xv = row[v];
      // Only elements after `prev` in (value desc, index asc) order are still eligible.
      const bool eligible = xv < prev.v || (xv == prev.v && v > prev.i);
      if (eligible) best = better(best, ArgMax{xv, static_cast<int32_t>(v)});
    }
    best = block_argmax(best, scratch);
    if (threadIdx.x == 0) {
      values[blockIdx.x * k + r] = best.v;
      indices[blockIdx.x * k + r] = best.i;
    }
    prev = best;
  }
}

template <class T>
__global__ void fill_normal_kernel(T* x, int64_t n, uint64_t seed, float mean, float std) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float u1 = 1.0f - philox_uniform_inline(seed, static_cast<uint64_t>(i) * 2);
    const float u2 = philox_uniform_inline(seed, static_cast<uint64_t>(i) * 2 + 1);
    const float z = sqrtf(-2.0f * logf(u1)) * cosf(6.2831853071795864f * u2);
    x[i] = from_float<T>(mean + std * z);
  }
}

// One thread per entry; the entries of a row name distinct ids, so no two threads touch one
// logit. An entry outside the logits is skipped (the op entry's caller checked them).
__global__ void logit_adjust_kernel(float* logits, int64_t rows, int64_t vocab, const int32_t* row, const int32_t* id, const float* bias,
                                    const float* rep, const float* add, int64_t n) {
  const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= n || row[e] < 0 || row[e] >= rows || id[e] < 0 || id[e] >= vocab) return;
  float& x = logits[static_cast<int64_t>(row[e]) * vocab + id[e]];
  float v = x + bias[e];
  if (rep[e] != 1.0f) v = v > 0.0f ? v / rep[e] : v * rep[e];
  x = v + add[e];
}

}  // namespace

Status logit_adjust(const LogitAdjustParams& p, void* stream) {
  const int64_t n = p.ids.dim(0);
  if (n == 0) return Status::ok();
  logit_adjust_kernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, as_stream(stream)>>>(
      p.logits.ptr<float>(), p.logits.dim(0), p.logits.dim(1), p.rows.ptr<int32_t>(), p.ids.ptr<int32_t>(), p.bias.ptr<float>(), p.rep.ptr<float>(),
      p.add.ptr<float>(), n);
  return launch_status("logit_adjust");
}

Status sample(const SampleParams& p, void* stream) {
  const int64_t batch = p.logits.dim(0);
  if (batch == 0) return Status::ok();
  // Rows up to kSampleOneBlockArgmaxVocab logits: one block finds the maximum (row_argmax) and
  // the workspace's stage of many blocks would only add a launch. AERIE_SAMPLE_ONE_BLOCK_VOCAB
  // sets another bound (0: the stage whenever there is a workspace), for measuring.
  static const int64_t one_block = env_knob_or("AERIE_SAMPLE_ONE_BLOCK_VOCAB", static_cast<int>(kSampleOneBlockArgmaxVocab));
  float* partial = p.workspace.defined() && p.logits.dim(1) > one_block ? p.workspace.ptr<float>() : nullptr;
  // Both stages wait (pdl_begin) before reading anything, so each may be scheduled while the
  // kernel before it drains: a greedy draft step is mostly these gaps.
  if (partial)
    launch_pdl(partial_argmax_kernel, dim3(static_cast<unsigned>(batch), kArgmaxParts), dim3(256), 0, as_stream(stream), p.logits.ptr<float>(),
               p.logits.dim(1), partial);
  launch_pdl(sample_kernel, dim3(static_cast<unsigned>(batch)), dim3(kThreads), 0, as_stream(stream), p.logits.ptr<float>(), p.logits.dim(1),
             p.temperature.ptr<float>(), p.top_p.ptr<float>(), p.top_k.ptr<int32_t>(), p.min_p.ptr<float>(), p.seed.ptr<int64_t>(),
             p.step.ptr<int64_t>(), p.out.ptr<int32_t>(), static_cast<const float*>(partial),
             p.id_map.defined() ? p.id_map.ptr<int32_t>() : nullptr, p.out_copy.defined() ? p.out_copy.ptr<int32_t>() : nullptr);
  return launch_status("sample");
}

Status log_softmax(const LogSoftmaxParams& p, void* stream) {
  if (p.logits.dim(0) == 0) return Status::ok();
  log_softmax_kernel<<<static_cast<unsigned>(p.logits.dim(0)), 1024, 0, as_stream(stream)>>>(p.logits.ptr<float>(), p.out.ptr<float>(),
                                                                                             p.logits.dim(1));
  return launch_status("log_softmax");
}

Status topk(const TopKParams& p, void* stream) {
  if (p.x.dim(0) == 0) return Status::ok();
  topk_kernel<<<static_cast<unsigned>(p.x.dim(0)), 1024, 0, as_stream(stream)>>>(p.x.ptr<float>(), p.x.dim(1), p.values.dim(1),
                                                                                 p.values.ptr<float>(), p.indices.ptr<int32_t>());
  return launch_status("topk");
}

Status fill_normal(const FillNormalParams& p, void* stream) {
  const int64_t n = p.x.numel();
  if (n == 0) return Status::ok();
  const int64_t blocks = min64((n + 255) / 256, 65536);
  AERIE_DISPATCH_FLOAT(p.x.dtype, T, [&] {
    fill_normal_kernel<T><<<static_cast<unsigned>(blocks), 256, 0, as_stream(stream)>>>(p.x.ptr<T>(), n, p.seed, p.mean, p.std);
  });
  return launch_status("fill_normal");
}

}  // namespace aerie::kernels::cuda
