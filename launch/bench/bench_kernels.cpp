#include "launch/bench/bench_kernels.hpp"

#include <algorithm>
#include <cstdio>
#include <functional>

#include "kernels/attention.hpp"
#include "kernels/device_runtime.hpp"
#include "kernels/error.hpp"
#include "kernels/matmul.hpp"
#include "kernels/rms_norm.hpp"
#include "kernels/rope_kv_write.hpp"
#include "kernels/sampling.hpp"
#include "kernels/silu_mul.hpp"
#include "kernels/staging.hpp"
#include "kernels/topk.hpp"
#include "launch/bench/bench_timing.hpp"
#include "model/config.hpp"
#include "model/kv_cache.hpp"
#include "model/tp_shard.hpp"

namespace aerie::launch {

namespace {

constexpr int64_t kRotateBytes = int64_t{256} << 20;  // several times the 50 MB L2

Buffer random_device(std::vector<int64_t> shape, DType t, uint64_t seed, const Stream& s) {
  Buffer b(Device::kCuda, t, shape);
  AERIE_CHECK_STATUS(kernels::fill_normal({.x = b.view(), .seed = seed, .std = 0.02f}, s));
  return b;
}

// Median time of `fn(i)` over reps, i cycling over the rotation copies.
double time_ms(const Stream& s, int reps, int copies, const std::function<void(int)>& fn) {
  return bench::median(bench::stream_times_ms(s, reps, 3, [&](int i) { fn(i % copies); }));
}

}  // namespace

int run_kernel_bench(const KernelBenchOptions& o) {
  AERIE_CHECK(cuda_available(), "aerie-bench kernels needs a CUDA device");
  // With --tp-size, one rank's shard: its heads, KV heads, MLP rows and LM head rows.
  const model::TpShard shard{.rank = 0, .size = static_cast<int>(o.tp_size)};
  model::TpShard::check_divisible(model::LlamaConfig::named_shape(o.model_shape), shard.size, "the model");
  const auto c = shard.local(model::LlamaConfig::named_shape(o.model_shape));
  OwnedStream os(Device::kCuda);
  const Stream& s = os.get();
  const DType bf = DType::kBF16;
  // Copy bandwidth, read + write.
  double bw;
  {
    const int64_t n = int64_t{1} << 31;
    Buffer a(Device::kCuda, DType::kU8, {n}), b(Device::kCuda, DType::kU8, {n});
    const double ms = time_ms(s, 10, 1, [&](int) { cuda_runtime::copy_async(b.data(), a.data(), static_cast<size_t>(n), s.handle()); });
    bw = 2.0 * static_cast<double>(n) / (ms * 1e-3);
  }
  std::printf("shape %s (tp %d shard), copy bandwidth %.0f GB/s, context %lld\n", o.model_shape.c_str(), shard.size, bw / 1e9,
              static_cast<long long>(o.context));
  std::printf("%-14s %6s %10s %10s %9s\n", "op", "batch", "us", "GB/s", "of_copy");
  auto report = [&](const char* op, int64_t bs, double ms, double bytes) {
    std::printf("%-14s %6lld %10.1f %10.0f %8.1f%%\n", op, static_cast<long long>(bs), ms * 1e3, bytes / (ms * 1e-3) / 1e9,
                100.0 * bytes / (ms * 1e-3) / bw);
    std::fflush(stdout);
  };
  const int64_t H = c.hidden_size, I = c.intermediate_size, Q = c.q_size(), KV = c.kv_size();
  struct Gemm { const char* name; int64_t n, k; bool f32_out; };
  const Gemm gemms[] = {{"qkv", Q + 2 * KV, H, false}, {"o_proj", H, Q, false}, {"gate_up", 2 * I, H, false},
                        {"down", H, I, false}, {"lm_head", shard.vocab_rows(c.vocab_size), H, true}};
  const int64_t max_bs = *std::max_element(o.batch_sizes.begin(), o.batch_sizes.end());
  const int64_t slots = max_bs * o.context + 16;
  Buffer kc = random_device({slots, c.num_kv_heads, c.head_dim}, bf, 1, s), vc = random_device({slots, c.num_kv_heads, c.head_dim}, bf, 2, s);
  for (int64_t bs : o.batch_sizes) {
    for (const Gemm& g : gemms) {
      const int64_t wbytes = g.n * g.k * 2;
      const int copies = static_cast<int>(std::max<int64_t>(1, kRotateBytes / wbytes + 1));
      std::vector<Buffer> ws;
      for (int i = 0; i < copies; ++i) ws.push_back(random_device({g.n, g.k}, bf, 10 + static_cast<uint64_t>(i), s));
      Buffer x = random_device({bs, g.k}, bf, 3, s), y(Device::kCuda, g.f32_out ? DType::kF32 : bf, {bs, g.n});
      auto gemm_ms = [&] {
        return time_ms(s, o.reps, copies, [&](int i) {
          AERIE_CHECK_STATUS(kernels::matmul({.x = x.view(), .w = ws[static_cast<size_t>(i)].view(), .y = y.view()}, s));
        });
      };
      const double bytes = static_cast<double>(wbytes + bs * g.k * 2 + bs * g.n * (g.f32_out ? 4 : 2));
      report(g.name, bs, gemm_ms(), bytes);
      if (bs <= 16) {  // both paths, for the GEMV threshold
        const int saved = kernels::gemv_max_rows();
        kernels::set_gemv_max_rows(16);
        report((std::string(g.name) + "/gemv").c_str(), bs, gemm_ms(), bytes);
        kernels::set_gemv_max_rows(0);
        report((std::string(g.name) + "/cublas").c_str(), bs, gemm_ms(), bytes);
        kernels::set_gemv_max_rows(saved);
      } else if (bs <= 512) {  // both paths, for the chunked GEMV's rule (kernels/gemv_rules.hpp)
        kernels::set_gemv_chunked_rows(bs);
        report((std::string(g.name) + "/chunks").c_str(), bs, gemm_ms(), bytes);
        kernels::set_gemv_chunked_rows(0);
        report((std::string(g.name) + "/cublas").c_str(), bs, gemm_ms(), bytes);
        kernels::set_gemv_chunked_rows(-1);
      }
    }
    // Attention over a context of o.context for every sequence.
    std::vector<int32_t> qo, kvp, kvi;
    qo.push_back(0);
    kvp.push_back(0);
    for (int64_t b = 0; b < bs; ++b) {
      for (int64_t j = 0; j < o.context; ++j) kvi.push_back(static_cast<int32_t>(b * o.context + j));
      qo.push_back(static_cast<int32_t>(b + 1));
      kvp.push_back(static_cast<int32_t>(kvi.size()));
    }
    auto upload = [&](const std::vector<int32_t>& v) {
      Buffer d(Device::kCuda, DType::kI32, {static_cast<int64_t>(v.size())});
      d.copy_from_host(v.data(), d.nbytes());
      return d;
    };
    Buffer dqo = upload(qo), dkvp = upload(kvp), dkvi = upload(kvi);
    Buffer q = random_device({bs, c.num_heads, c.head_dim}, bf, 4, s), out(Device::kCuda, bf, {bs, c.num_heads, c.head_dim});
    // Split counts for about 2, 4 and 8 blocks per SM and the most the keys allow (32 per
    // split); * marks the engine's choice (attention_splits_for's policy).
    const int sms = cuda_runtime::sm_count();
    auto split_choices = [&](int64_t query_blocks) {
      std::vector<int> out;
      for (int bps : {2, 4, 8, 1 << 20}) {
        const int sp = kernels::attention_splits_for(query_blocks, c.num_kv_heads, o.context, sms, bps);
        if (std::find(out.begin(), out.end(), sp) == out.end()) out.push_back(sp);
      }
      return out;
    };
    const int chosen = kernels::attention_splits_for(bs, c.num_kv_heads, o.context, sms);
    for (int splits : split_choices(bs)) {
      Buffer part(Device::kCuda, DType::kF32, {kernels::attention_workspace_floats(bs, c.num_heads, c.head_dim, splits)});
      const double att = time_ms(s, o.reps, 1, [&](int) {
        AERIE_CHECK_STATUS(kernels::attention({.q = q.view(), .k_cache = kc.view(), .v_cache = vc.view(), .out = out.view(),
                                               .qo_indptr = dqo.view(), .kv_indptr = dkvp.view(), .kv_indices = dkvi.view(),
                                               .scale = 0.088f, .num_splits = splits, .workspace = part.view()}, s));
      });
      report(("attention/" + std::to_string(splits) + (splits == chosen ? "*" : "")).c_str(), bs, att,
             static_cast<double>(bs * o.context * KV * 2 * 2));
    }
    // A verify: one sequence whose last `bs` tokens are new (causal), as a chain of bs - 1
    // drafts is verified: every tokens-per-block count that fits (attn_verify/<splits>x<tpb>).
    if (bs > 1) {
      std::vector<int32_t> vqo = {0, static_cast<int32_t>(bs)}, vkvp = {0, static_cast<int32_t>(o.context)}, vkvi;
      for (int64_t j = 0; j < o.context; ++j) vkvi.push_back(static_cast<int32_t>(j));
      Buffer dvqo = upload(vqo), dvkvp = upload(vkvp), dvkvi = upload(vkvi);
      const int64_t group = c.num_heads / c.num_kv_heads;
      for (int tpb : {1, 2, 4, 8}) {
        if (bs % tpb != 0 || group * tpb > 32) continue;
        for (int splits : split_choices(bs / tpb)) {
          Buffer part(Device::kCuda, DType::kF32, {kernels::attention_workspace_floats(bs, c.num_heads, c.head_dim, splits)});
          const double att = time_ms(s, o.reps, 1, [&](int) {
            AERIE_CHECK_STATUS(kernels::attention({.q = q.view(), .k_cache = kc.view(), .v_cache = vc.view(), .out = out.view(),
                                                   .qo_indptr = dvqo.view(), .kv_indptr = dvkvp.view(), .kv_indices = dvkvi.view(),
                                                   .scale = 0.088f, .num_splits = splits, .workspace = part.view(),
                                                   .tokens_per_block = tpb}, s));
          });
          report(("attn_verify/" + std::to_string(splits) + "x" + std::to_string(tpb)).c_str(), bs, att,
                 static_cast<double>(o.context * KV * 2 * 2));
        }
      }
    }
    // The small per-layer ops.
    Buffer hx = random_device({bs, H}, bf, 5, s), res = random_device({bs, H}, bf, 6, s), nw = random_device({H}, bf, 7, s);
    Buffer hy(Device::kCuda, bf, {bs, H});
    report("rms_norm+res", bs, time_ms(s, o.reps, 1, [&](int) {
      AERIE_CHECK_STATUS(kernels::rms_norm({.x = hx.view(), .weight = nw.view(), .residual = res.view(), .y = hy.view()}, s));
    }), static_cast<double>(bs * H * 2 * 4));
    Buffer gu = random_device({bs, 2 * I}, bf, 8, s), act(Device::kCuda, bf, {bs, I});
    report("silu_mul", bs, time_ms(s, o.reps, 1, [&](int) {
      AERIE_CHECK_STATUS(kernels::silu_mul({.gate_up = gu.view(), .out = act.view()}, s));
    }), static_cast<double>(bs * I * 2 * 3));
    std::vector<int32_t> pos(static_cast<size_t>(bs), static_cast<int32_t>(o.context - 1)), sl(static_cast<size_t>(bs));
    for (int64_t b = 0; b < bs; ++b) sl[static_cast<size_t>(b)] = static_cast<int32_t>(b * o.context + o.context - 1);
    Buffer dpos = upload(pos), dsl = upload(sl), qkv = random_device({bs, Q + 2 * KV}, bf, 9, s);
    Buffer inv = random_device({c.head_dim / 2}, DType::kF32, 10, s);
    report("rope_kv_write", bs, time_ms(s, o.reps, 1, [&](int) {
      AERIE_CHECK_STATUS(kernels::rope_kv_write({.qkv = qkv.view(), .positions = dpos.view(), .inv_freq = inv.view(), .slots = dsl.view(),
                                                 .q_out = q.view(), .k_cache = kc.view(), .v_cache = vc.view()}, s));
    }), static_cast<double>(bs * (Q + 2 * KV) * 2 * 2));
    Buffer logits = random_device({bs, c.vocab_size}, DType::kF32, 11, s), zeros(Device::kCuda, DType::kF32, {bs});
    Buffer ones(Device::kCuda, DType::kF32, {bs}), ks(Device::kCuda, DType::kI32, {bs}), seeds(Device::kCuda, DType::kI64, {bs});
    Buffer toks(Device::kCuda, DType::kI32, {bs});
    zeros.zero();
    ks.zero();
    seeds.zero();
    AERIE_CHECK_STATUS(kernels::fill_normal({.x = ones.view(), .mean = 1.0f, .std = 0.0f}, s));
    report("sample_greedy", bs, time_ms(s, o.reps, 1, [&](int) {
      AERIE_CHECK_STATUS(kernels::sample({.logits = logits.view(), .temperature = zeros.view(), .top_p = ones.view(), .top_k = ks.view(),
                                          .min_p = zeros.view(), .seed = seeds.view(), .step = seeds.view(), .out = toks.view()}, s));
    }), static_cast<double>(bs * c.vocab_size * 4));
  }
  return 0;
}

}  // namespace aerie::launch
