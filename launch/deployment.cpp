#include "launch/deployment.hpp"

#include "launch/progress.hpp"

#include <caf/all.hpp>
#include <optional>
#include <thread>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <zmq.hpp>

#include "actors/core/target_worker_core.hpp"
#include "actors/actor_pool.hpp"
#include "actors/messages.hpp"
#include "actors/dp_coordinator_actor.hpp"
#include "actors/router_actor.hpp"
#include "actors/scheduler_actor.hpp"
#include "spec/draft_worker_core.hpp"
#include "launch/draft_builder.hpp"
#include "model/fp8_weights.hpp"
#include "actors/draft_worker_actor.hpp"
#include "actors/target_worker_actor.hpp"
#include "kernels/batch_invariant.hpp"
#include "kernels/buffer.hpp"
#include "kernels/device_runtime.hpp"
#include "kernels/error.hpp"
#include "kernels/log.hpp"
#include "spec/cuda_graph_buckets.hpp"
#include "kernels/staging.hpp"
#include "model/llama_model.hpp"
#include "parallel/communicator.hpp"
#include "parallel/parallel_layout.hpp"
#include "launch/tp_context.hpp"
#include "transport/heartbeat.hpp"
#include "transport/zmq_channel.hpp"

namespace aerie::launch {

void check_parallel_layout(int64_t tp_size, int64_t dp_size, int world_size, bool dp_attention) {
  AERIE_CHECK(tp_size >= 1 && dp_size >= 1 && tp_size <= 1024 && dp_size <= 1024, "--tp-size and --dp-size must be in [1, 1024]");
  parallel::ParallelLayout{.tp_size = static_cast<int>(tp_size), .dp_size = static_cast<int>(dp_size), .dp_attention = dp_attention}.check(
      world_size);
}

void check_tensor_parallel(const model::LlamaConfig& target, const model::LlamaConfig* draft_layer, int64_t tp_size,
                           int64_t dp_attention_groups) {
  if (dp_attention_groups > 0) {
    const int attn = static_cast<int>(tp_size / dp_attention_groups);
    model::TpShard::check_divisible(target, attn, static_cast<int>(tp_size), "the target model");
    if (draft_layer) model::TpShard::check_divisible(*draft_layer, attn, "the draft model");
    return;
  }
  model::TpShard::check_divisible(target, static_cast<int>(tp_size), "the target model");
  if (draft_layer) model::TpShard::check_divisible(*draft_layer, static_cast<int>(tp_size), "the draft model");
}

namespace {
constexpr size_t kEndpointBytes = 4096;
// After a fault, how long rank 0 keeps serving error replies before it ends the launch.
constexpr std::chrono::milliseconds kFaultExitGrace{2000};
constexpr int kFaultExitCode = 3;
}

struct Deployment::Impl {
  DeploymentOptions o;
  parallel::ProcessGroup& world;
  parallel::ParallelLayout layout;
  parallel::ParallelGroups groups;                      // this rank's TP / DP groups
  std::shared_ptr<parallel::Communicator> tp;           // tensors across the TP group (DP attention: the attention-TP group)
  std::shared_ptr<model::DpAttentionGroups> dp;         // DP attention's groups (null without it)
  model::TpShard shard;                                 // this rank's part of the model
  model::LlamaConfig config;
  std::unique_ptr<OwnedStream> stream;
  std::unique_ptr<model::KvCache> kv;
  std::unique_ptr<model::LlamaModel> model;
  std::shared_ptr<core::TargetWorkerCore> worker;
  // Speculative decoding: the draft (launch/draft_builder.hpp) and its KV cache.
  DraftChoice draft_choice;
  DraftShape draft_shape;
  DraftModel draft_weights;  // handed to the DraftWorkerCore once the pools exist
  std::unique_ptr<model::KvCache> draft_kv;
  std::shared_ptr<spec::DraftWorkerCore> draft;  // behind this rank's DraftWorker actor, or in-process (--draft-worker)
  zmq::context_t zmq_ctx;
  // Rank 0: links to the other ranks' workers. Other ranks: their own two channels.
  std::vector<std::shared_ptr<actors::RemoteWorkerLink>> links;
  std::unique_ptr<transport::ZmqReceiver> from_scheduler;
  std::unique_ptr<transport::ZmqSender> to_scheduler;
  // Liveness: each side's heartbeat channels (rank 0: one pair per other rank), then the
  // thread that runs them once every rank is up.
  std::vector<transport::HeartbeatPeer> beat_peers;
  std::unique_ptr<transport::HeartbeatThread> heartbeat;
  std::shared_ptr<core::EngineFault> fault = std::make_shared<core::EngineFault>();
  std::thread fault_exit;  // rank 0: ends the launch a grace after a fault
  std::shared_ptr<core::StepWatchdog> step_watchdog;  // rank 0: every step sent, until it comes back

  Impl(DeploymentOptions opts, parallel::ProcessGroup& w) : o(std::move(opts)), world(w) {
    // Everything that can refuse the layout runs before any weight is read.
    if (!o.log_level.empty()) log::set_level(log::parse_level(o.log_level));
    if (world.size() > 1) log::set_rank(world.rank());
    check_parallel_layout(o.tp_size, o.dp_size, world.size(), o.enable_dp_attention);
    layout = {.tp_size = static_cast<int>(o.tp_size), .dp_size = static_cast<int>(o.dp_size), .dp_attention = o.enable_dp_attention};
    AERIE_CHECK(o.mem_fraction_static > 0.0 && o.mem_fraction_static < 1.0, "--mem-fraction-static must be in (0, 1)");
    // Every graph runner of this process captures these buckets (sglang's --cuda-graph-bs and
    // --disable-cuda-graph-padding).
    spec::set_graph_bucket_policy({.sizes = o.cuda_graph_bs, .padding = !o.disable_cuda_graph_padding});
    // Before any forward or graph capture: the kernels every batch takes (kernels/batch_invariant.hpp).
    kernels::set_batch_invariant(o.enable_deterministic_inference);
    const Device device = parse_device(o.device);
    parallel::check_on_every_rank(world, [&] {
      AERIE_CHECK(device == Device::kCpu || cuda_available(), "--device cuda: no usable CUDA device on rank " << world.rank());
    });
    config = o.model_path.empty() ? model::LlamaConfig::named_shape(o.model_shape) : model::LlamaConfig::load(o.model_path);
    AERIE_CHECK(config.architecture == "LlamaForCausalLM", o.model_path << " is a " << config.architecture
                                                                       << " draft head; give it as --speculative-draft-model-path");
    if (o.context_length > 0) {
      AERIE_CHECK(o.context_length <= config.max_position_embeddings, "--context-length " << o.context_length << " exceeds the model's "
                                                                                          << config.max_position_embeddings << " positions");
      config.max_position_embeddings = o.context_length;
    }
    if (!o.speculative_algorithm.empty()) {
      draft_choice = {.algorithm = spec::parse_spec_algorithm(o.speculative_algorithm),
                      .path = o.speculative_draft_model_path,
                      .target_path = o.model_path,
                      .token_map = o.speculative_token_map,
                      .dummy = o.load_format == "dummy",
                      .seed = o.random_seed,
                      .replicated = o.speculative_draft_tp_size == 1 && o.tp_size > 1,
                      .draft_vocab = 0,
                      .quantization = model::parse_draft_quantization(o.speculative_draft_model_quantization)};
      draft_shape = resolve_draft(draft_choice, config);
    }
    check_tensor_parallel(config, o.speculative_algorithm.empty() || (draft_shape.head && draft_shape.head->replicated) ? nullptr : &draft_shape.config,
                          o.tp_size, o.enable_dp_attention ? o.dp_size : 0);
    // A rank without a GPU of its own fails here, and all the others with it.
    if (device == Device::kCuda) parallel::check_on_every_rank(world, [&] { bind_local_gpu(); });
    groups = parallel::make_parallel_groups(world, layout);
    const parallel::CommunicatorOptions comm_options{.custom_all_reduce = !o.disable_custom_all_reduce};
    if (layout.dp_attention) {
      // Attention, embedding and LM head over the attention-TP group; the MLP over every rank.
      dp = std::make_shared<model::DpAttentionGroups>();
      dp->mlp = parallel::make_communicator(*groups.tp, device, comm_options);
      dp->peers = parallel::make_communicator(*groups.dp, device, comm_options);
      dp->attn = parallel::make_communicator(*groups.attn_tp, device, comm_options);
      tp = dp->attn;
      shard = {.rank = dp->attn->rank(), .size = dp->attn->size(), .mlp_rank = dp->mlp->rank(), .mlp_size = dp->mlp->size()};
    } else {
      tp = parallel::make_communicator(*groups.tp, device, comm_options);
      shard = {.rank = groups.tp->rank(), .size = groups.tp->size()};
    }
    const DType weight_dtype = o.dtype == "auto" ? config.dtype : parse_dtype(o.dtype);
    const DType act = device == Device::kCpu ? DType::kF32 : weight_dtype;
    ProgressBar loading(o.load_format == "dummy" ? "making random weights" : "loading weights", config.num_layers, world.rank() == 0);
    const model::LoadProgress progress = [&loading](int64_t done, int64_t) { loading.set(done); };
    auto weights = o.load_format == "dummy" ? model::random_llama_weights(config, o.random_seed, device, weight_dtype, 0.02f, progress, shard)
                                            : model::load_llama_weights(o.model_path, config, device, weight_dtype, progress, shard);
    loading.finish();
    stream = std::make_unique<OwnedStream>(device);
    model = std::make_unique<model::LlamaModel>(config, std::move(weights), stream->get(), act, tp, dp);
    // The draft's weights come before the KV pools, which share what memory is left.
    if (!o.speculative_algorithm.empty())
      draft_weights = load_draft(draft_choice, draft_shape, *model, shard, tp, device, weight_dtype, act, stream->get());
    kv = std::make_unique<model::KvCache>(model->local_config(), kv_shape(device, act), device, act);
    worker = std::make_shared<core::TargetWorkerCore>(
        *model, *kv,
        core::WorkerOptions{.max_batch = o.max_running_requests,
                            // DP attention pads to the agreed bucket eagerly (its graphs are not captured yet).
                            .cuda_graph_max_bs = o.disable_cuda_graph || layout.dp_attention ? 0 : o.cuda_graph_max_bs,
                            // A speculative engine prefills in its SpecWorkerCore, with graphs of its own.
                            .prefill_graph_max_tokens = o.speculative_algorithm.empty() ? prefill_graph_max_tokens() : 0});
    if (!o.speculative_algorithm.empty()) {
      // Drafting ahead writes the next round's draft K/V past the Scheduler's slots (its pages
      // are not planned yet): the draft's cache has that many slots more.
      const bool ahead = (o.draft_ahead == "on" || (o.draft_ahead == "auto" && device == Device::kCuda)) && !layout.dp_attention &&
                         o.speculative_eagle_topk == 1 && o.speculative_num_steps >= 2 && draft_choice.algorithm != spec::SpecAlgorithm::kStandalone;
      model::KvCacheShape draft_kv_shape = kv->shape();
      if (ahead)
        draft_kv_shape.num_pages += (spec::DraftWorkerCore::draft_ahead_slots(o.max_running_requests, o.speculative_num_steps) + o.page_size - 1) / o.page_size;
      draft_kv = std::make_unique<model::KvCache>(draft_local_config(draft_shape, shard), draft_kv_shape, device, act);
      draft = std::make_shared<spec::DraftWorkerCore>(draft_choice.algorithm, std::move(draft_weights.head), std::move(draft_weights.model),
                                                      *draft_kv, *model, o.max_running_requests, o.speculative_eagle_topk);
      // Drafts (chains and trees) run as one device-side sequence; on CUDA one graph per
      // bucket (DP attention runs it eagerly, as its other forwards).
      const bool draft_graphs = device == Device::kCuda && !o.disable_cuda_graph && !layout.dp_attention;
      // One request's prompt extend replays a graph too, as the target's prefill does.
      draft->enable_draft_runners(o.speculative_num_steps, draft_graphs ? std::min(o.cuda_graph_max_bs, o.max_running_requests) : o.max_running_requests,
                                 kv->shape().usable_tokens(), draft_graphs, {}, draft_graphs ? prefill_graph_max_tokens() : 0);
      if (ahead && draft->chain_runner()) draft->enable_draft_ahead(kv->shape().num_slots());
      if (o.speculative_chain_stop_probability > 0.0) draft->set_chain_stop_probability(o.speculative_chain_stop_probability);
    }
    bootstrap_channels();
    start_heartbeats();
  }

  // The KV pool: --max-total-tokens when given; else, on CUDA, what is left of
  // mem_fraction_static of the device after the weights (as sglang sizes it); on CPU, the
  // CPU budget. Every rank takes the smallest pool of the launch: the ranks of a TP group
  // write the same slots, and rank 0's Schedulers plan every group's pages.
  model::KvCacheShape kv_shape(Device device, DType act) const {
    model::KvCacheShape shape = local_kv_shape(device, act);
    int64_t pages = shape.num_pages;
    for (int64_t p : world.all_gather(shape.num_pages)) pages = std::min(pages, p);
    shape.num_pages = pages;
    return shape;
  }
  model::KvCacheShape local_kv_shape(Device device, DType act) const {
    if (o.max_total_tokens > 0) return model::kv_shape_for_tokens(o.max_total_tokens, o.page_size);
    int64_t budget = o.cpu_kv_budget_bytes;
    if (device == Device::kCuda) {
      size_t free_bytes = 0, total_bytes = 0;
      cuda_runtime::memory_info(&free_bytes, &total_bytes);
      const int64_t used = static_cast<int64_t>(total_bytes - free_bytes);
      budget = static_cast<int64_t>(o.mem_fraction_static * static_cast<double>(total_bytes)) - used;
      AERIE_CHECK(budget > 0, "--mem-fraction-static " << o.mem_fraction_static << " leaves no room for the KV cache after the weights ("
                                                       << used / (1 << 20) << " MiB in use of " << total_bytes / (1 << 20) << " MiB)");
    }
    if (o.speculative_algorithm.empty()) return model::kv_shape_for_budget(model->local_config(), act, budget, o.page_size);
    // Target and draft pools have the same slots: split the budget by their bytes per token.
    auto per_token = [&](const model::LlamaConfig& c) { return 2 * c.num_layers * c.kv_size() * static_cast<int64_t>(dtype_size(act)); };
    const int64_t tokens = budget / (per_token(model->local_config()) + per_token(draft_local_config(draft_shape, shard)));
    AERIE_CHECK(tokens > o.page_size, "the KV budget holds no page for the target and draft caches");
    return model::kv_shape_for_tokens(tokens - o.page_size, o.page_size);
  }

  // Rank 0 binds two loopback endpoints per other rank and broadcasts them with CurveZMQ keys
  // made here (transport/curve.hpp): a server pair per bound socket, a client pair per rank.
  // The keys travel over MPI only, so a process outside the launch can neither connect to
  // rank 0's sockets (and take batches or forge results) nor read the loopback traffic.
  void bootstrap_channels() {
    const int n = world.size();
    std::vector<uint8_t> buf(kEndpointBytes * static_cast<size_t>(n), 0);
    if (world.rank() == 0) {
      for (int r = 1; r < n; ++r) {
        auto link = std::make_shared<actors::RemoteWorkerLink>();
        const transport::ChannelAuth to_auth{.own = transport::CurveKeyPair::generate(), .server_public_key = {}};
        const transport::ChannelAuth from_auth{.own = transport::CurveKeyPair::generate(), .server_public_key = {}};
        const transport::CurveKeyPair client = transport::CurveKeyPair::generate();
        link->to_worker = std::make_unique<transport::ZmqSender>(zmq_ctx, "tcp://127.0.0.1:*", true, &to_auth);
        link->from_worker =
            std::make_unique<transport::ZmqReceiver>(zmq_ctx, "tcp://127.0.0.1:*", true, transport::kDefaultMaxPayloadBytes, &from_auth);
        link->timeout = watchdog();
        link->to_worker->set_send_timeout(watchdog());
        // The heartbeat pair takes the same server keys.
        transport::HeartbeatPeer beat{.rank = r,
                                      .out = std::make_unique<transport::ZmqSender>(zmq_ctx, "tcp://127.0.0.1:*", true, &to_auth),
                                      .in = std::make_unique<transport::ZmqReceiver>(zmq_ctx, "tcp://127.0.0.1:*", true, 4096, &from_auth)};
        beat.in->watch_peer();
        const std::string eps = link->to_worker->endpoint() + "\n" + link->from_worker->endpoint() + "\n" + to_auth.own.public_key + "\n" +
                                from_auth.own.public_key + "\n" + client.public_key + "\n" + client.secret_key + "\n" + beat.out->endpoint() +
                                "\n" + beat.in->endpoint();
        beat_peers.push_back(std::move(beat));
        AERIE_CHECK(eps.size() < kEndpointBytes, "endpoint names too long");
        std::memcpy(buf.data() + kEndpointBytes * static_cast<size_t>(r), eps.data(), eps.size());
        links.push_back(std::move(link));
      }
    }
    world.broadcast(buf, 0);
    if (world.rank() != 0) {
      std::vector<std::string> parts;
      std::string line;
      std::istringstream in(std::string(reinterpret_cast<const char*>(buf.data() + kEndpointBytes * static_cast<size_t>(world.rank()))));
      while (std::getline(in, line)) parts.push_back(line);
      AERIE_CHECK(parts.size() == 8, "rank " << world.rank() << " got no endpoints and keys from rank 0");
      const transport::CurveKeyPair client{parts[4], parts[5]};
      const transport::ChannelAuth from_auth{.own = client, .server_public_key = parts[2]};
      const transport::ChannelAuth to_auth{.own = client, .server_public_key = parts[3]};
      from_scheduler = std::make_unique<transport::ZmqReceiver>(zmq_ctx, parts[0], false, transport::kDefaultMaxPayloadBytes, &from_auth);
      to_scheduler = std::make_unique<transport::ZmqSender>(zmq_ctx, parts[1], false, &to_auth);
      to_scheduler->set_send_timeout(watchdog());
      beat_peers.push_back({.rank = 0,
                            .out = std::make_unique<transport::ZmqSender>(zmq_ctx, parts[7], false, &to_auth),
                            .in = std::make_unique<transport::ZmqReceiver>(zmq_ctx, parts[6], false, 4096, &from_auth)});
    }
  }

  std::chrono::milliseconds watchdog() const { return std::chrono::milliseconds(static_cast<int64_t>(o.watchdog_timeout_s * 1000)); }

  // Heartbeats with the other ranks, from now until shutdown. Rank 0 raises the engine fault
  // for a lost rank; another rank that loses rank 0 has nobody to tell and ends the launch.
  void start_heartbeats() {
    if (beat_peers.empty()) return;
    const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(o.heartbeat_timeout_s * 1000));
    const auto interval = std::max(std::chrono::milliseconds(10), std::min(std::chrono::milliseconds(500), timeout / 5));
    auto on_lost = [this](const transport::PeerFault& f) {
      if (world.rank() == 0) {
        fault->raise(f.reason);
        return;
      }
      AERIE_LOG_ERROR("lost rank 0: " << f.reason << "; ending the launch");
      abort_communicators();
      world.abort(kFaultExitCode);
    };
    heartbeat = std::make_unique<transport::HeartbeatThread>(world.rank(), std::move(beat_peers), interval, timeout, on_lost);
  }

  // Releases forwards stuck in a collective with a lost peer (NCCL: ncclCommAbort) on a
  // thread of its own, given a moment: the launch ends right after, whether it returns or not.
  void abort_communicators() {
    std::vector<std::shared_ptr<parallel::Communicator>> comms = {tp};
    if (dp) comms.insert(comms.end(), {dp->mlp, dp->peers, dp->attn});
    std::thread([comms] {
      for (const auto& c : comms)
        if (c) c->abort();
    }).detach();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }

  // Rank 0's response to a fault: every request fails with 503 now (through the Router), health
  // turns 503, and a grace later (for the clients to read their error events) the launch ends
  // with kFaultExitCode: mpirun kills every rank and exits non-zero.
  void on_fault(const std::string& reason) {
    AERIE_LOG_ERROR("engine fault: " << reason << "; failing every request, ending the launch in "
                                     << std::chrono::duration_cast<std::chrono::milliseconds>(kFaultExitGrace).count() << " ms");
    if (router) caf::anon_send(router, actors::EngineFailed{reason});
    fault_exit = std::thread([this] {
      std::this_thread::sleep_for(kFaultExitGrace);
      AERIE_LOG_ERROR("ending the launch after an engine fault (exit code " << kFaultExitCode << ")");
      abort_communicators();
      world.abort(kFaultExitCode);
    });
    fault_exit.detach();  // it ends the process
  }

  // Rank 0's actors: one Scheduler per DP group over its worker, a Router in front.
  std::unique_ptr<caf::actor_system_config> cfg;
  std::unique_ptr<caf::actor_system> sys;
  caf::actor router;
  // DP attention: the coordinator and its Schedulers hold each other's handles, so it is
  // stopped explicitly (the actor system waits for every actor).
  caf::actor dp_coordinator;
  caf::actor local_worker;  // rank 0's TargetWorker actor
  // The rank's speculative worker reaches its DraftWorker actor through this client; it goes
  // before the actor system (its scoped actor belongs to it).
  std::unique_ptr<actors::DraftWorkerClient> draft_client;
  bool stopped = false;

  // Verifies replay CUDA graphs of their tokens per request (a chain: steps + 1; a tree: its
  // draft tokens, under the tree mask) up to the smaller of --cuda-graph-max-bs, the batch
  // size above which speculation switches off, 64 requests and kVerifyGraphMaxRows rows (each
  // bucket holds f32 logits for all its rows: 512 rows of a 128k vocabulary are 263 MB).
  static constexpr int64_t kVerifyGraphMaxRows = 512;
  core::VerifyGraphOptions verify_graph_options() const {
    if (o.disable_cuda_graph || layout.dp_attention) return {};
    const bool tree = o.speculative_eagle_topk > 1;
    const int64_t tokens = tree ? o.speculative_num_draft_tokens : o.speculative_num_steps + 1;
    const int64_t rows_cap = std::max<int64_t>(1, kVerifyGraphMaxRows / tokens);
    int64_t max_bs = std::min({o.cuda_graph_max_bs, int64_t{64}, rows_cap});
    if (o.speculative_disable_batch_size > 0) max_bs = std::min(max_bs, o.speculative_disable_batch_size);
    return {.max_bs = max_bs, .tokens_per_request = tokens,
            .max_context = std::min(config.max_position_embeddings, kv->shape().usable_tokens()), .tree = tree,
            .prefill_max_tokens = prefill_graph_max_tokens()};
  }
  // The prefill graphs' largest token count (0: none): not without graphs or under DP attention.
  int64_t prefill_graph_max_tokens() const {
    if (o.disable_cuda_graph || layout.dp_attention || model->stream().device() != Device::kCuda) return 0;
    return o.prefill_cuda_graph_max_tokens;
  }

  // Speculative decoding: the DraftWorker actor next to this rank's TargetWorker, or the draft
  // on the TargetWorker's own thread (--draft-worker; DeploymentOptions::draft_worker says why).
  void start_draft_worker(caf::actor_system& s) {
    if (!draft) return;
    const bool on_cuda = model->stream().device() == Device::kCuda;
    spec::DraftPort* port = draft.get();
    if (o.draft_worker == "actor" || (o.draft_worker == "auto" && on_cuda)) {
      caf::actor a = s.spawn<caf::detached>(actors::draft_worker_actor, draft, on_cuda ? cuda_runtime::current_device() : -1);
      draft_client = std::make_unique<actors::DraftWorkerClient>(s, a, draft->info());
      port = draft_client.get();
    }
    worker->enable_speculation(std::make_unique<core::SpecWorkerCore>(*model, *kv, *port, o.max_running_requests, verify_graph_options()));
  }

  void start_actors() {
    step_watchdog = std::make_shared<core::StepWatchdog>(watchdog(), [this](const std::string& why) { fault->raise(why); });
    cfg = std::make_unique<caf::actor_system_config>();
    actors::register_message_types(*cfg);
    actors::configure_actor_pool(*cfg, parse_device(o.device));
    sys = std::make_unique<caf::actor_system>(*cfg);
    start_draft_worker(*sys);
    std::vector<caf::actor> schedulers;
    const auto sched_opts = core::SchedulerOptions{.max_running_requests = o.max_running_requests,
                                                   .chunked_prefill_size = o.chunked_prefill_size,
                                                   .eos_token_ids = config.eos_token_ids,
                                                   .vocab_size = config.vocab_size,
                                                   .context_length = config.max_position_embeddings,
                                                   .spec_steps = o.speculative_algorithm.empty() ? -1 : o.speculative_num_steps,
                                                   .spec_topk = o.speculative_eagle_topk,
                                                   .spec_draft_tokens = o.speculative_num_draft_tokens,
                                                   .spec_disable_batch_size = o.speculative_disable_batch_size,
                                                   .overlap = !o.disable_overlap_schedule,
                                                   .spec_overlap = o.enable_spec_overlap};
    // Every actor a step passes through (Schedulers, TP group workers, the DP coordinator, the
    // workers) is detached: a message wakes its blocked thread at once, where an idle thread of
    // CAF 0.17's pool finds it at its next poll (50 us apart on a GPU host, 1 ms on the CPU): on
    // the 2-core CPU a speculative round of the tiny model waited ~0.1 ms for its Scheduler (on
    // the H200 no difference was measured; docs/performance.md). The pool keeps the Router and
    // the frontends.
    // Rank r's worker: this process's own for rank 0, else a ZeroMQ hop to rank r.
    auto rank_worker = [&](int r) {
      if (r == 0) return local_worker = sys->spawn<caf::detached>(actors::target_worker_actor, worker);
      return sys->spawn<caf::detached>(actors::remote_worker_actor, links[static_cast<size_t>(r - 1)]);
    };
    std::vector<caf::actor> group_workers;
    for (int g = 0; g < layout.dp_size; ++g) {
      if (layout.group_size() == 1) {
        group_workers.push_back(rank_worker(layout.group_leader(g)));
      } else {
        std::vector<caf::actor> ranks;
        for (int t = 0; t < layout.group_size(); ++t) ranks.push_back(rank_worker(layout.group_leader(g) + t));
        group_workers.push_back(sys->spawn<caf::detached>(actors::tp_group_worker_actor, std::move(ranks)));
      }
    }
    if (layout.dp_attention) {
      // Every group's Scheduler in lock-step behind one coordinator; every step padded to
      // the bucket schedule of --cuda-graph-max-bs (on CPU too), unless graphs are off.
      const core::DpStepOptions step_options{
          .dp_size = layout.dp_size,
          .bucket_sizes = o.disable_cuda_graph ? std::vector<int64_t>{} : spec::cuda_graph_bucket_sizes(std::min(o.cuda_graph_max_bs, o.max_running_requests)),
          .depth = o.disable_overlap_schedule || (!o.speculative_algorithm.empty() && !o.enable_spec_overlap) ? 1 : 2};
      caf::actor coordinator = sys->spawn<caf::detached>(actors::dp_coordinator_actor, group_workers, step_options, step_watchdog, fault);
      dp_coordinator = coordinator;
      for (int g = 0; g < layout.dp_size; ++g)
        schedulers.push_back(sys->spawn<caf::detached>(actors::lockstep_scheduler_actor, kv->shape(), sched_opts, coordinator,
                                        actors::SchedulerFaults{.group = g, .watchdog = step_watchdog, .fault = fault}));
      caf::anon_send(coordinator, actors::DpSchedulers{schedulers});
    } else {
      for (int g = 0; g < layout.dp_size; ++g)
        schedulers.push_back(sys->spawn<caf::detached>(actors::scheduler_actor, kv->shape(), sched_opts, group_workers[static_cast<size_t>(g)],
                                        actors::SchedulerFaults{.group = g, .watchdog = step_watchdog, .fault = fault}));
    }
    router = sys->spawn(actors::router_actor, schedulers, fault);
    fault->set_handler([this](const std::string& reason) { on_fault(reason); });
  }

  std::vector<RequestOutcome> run_rank0(const std::vector<core::GenerationRequest>& requests) {
    std::vector<RequestOutcome> out(requests.size());
    // All requests go out at once (the schedulers batch them), then every reply is awaited.
    caf::scoped_actor self{*sys};
    using Handle = decltype(self->request(router, caf::infinite, actors::SubmitRequest{}));
    std::vector<Handle> pending;
    for (size_t i = 0; i < requests.size(); ++i) pending.push_back(self->request(router, caf::infinite, actors::SubmitRequest{i, requests[i]}));
    for (size_t i = 0; i < pending.size(); ++i)
      pending[i].receive([&](actors::RequestDone& d) { out[d.rid] = {std::move(d.result), std::move(d.error)}; },
                         [&](caf::error& e) { out[i].error = sys->render(e); });
    return out;
  }

  // A rank other than 0: its TargetWorker actor behind a bridge that carries batches from
  // ZeroMQ in and results back out.
  void serve_other_rank() {
    caf::actor_system_config c;
    actors::register_message_types(c);
    actors::configure_actor_pool(c, parse_device(o.device));
    caf::actor_system s{c};
    start_draft_worker(s);
    auto w = s.spawn<caf::detached>(actors::target_worker_actor, worker);
    caf::scoped_actor bridge{s};
    for (;;) {
      auto m = from_scheduler->receive(std::chrono::seconds(1));
      if (!m) continue;
      if (std::holds_alternative<transport::Shutdown>(*m)) {
        heartbeat.reset();  // rank 0 stopped beating: the launch is ending on purpose
        break;
      }
      if (auto* b = std::get_if<transport::BatchMessage>(&*m)) {
        transport::BatchResult r;
        bridge->request(w, caf::infinite, std::move(*b))
            .receive([&](transport::BatchResult& res) { r = std::move(res); },
                     [&](caf::error& e) { r.error = s.render(e); });
        to_scheduler->send(std::move(r));
      }
    }
    stop_worker(bridge, w);
    bridge->send_exit(w, caf::exit_reason::user_shutdown);
    worker->enable_speculation(nullptr);  // its client goes with this actor system
    draft_client.reset();
  }

  // Sends this process's TargetWorker actor WorkerStop and waits for the answer (up to a
  // minute: a batch may still be in flight); false when none came.
  static bool stop_worker(caf::scoped_actor& self, const caf::actor& w) {
    bool answered = false;
    self->request(w, std::chrono::seconds(60), actors::WorkerStop{}).receive([&](actors::WorkerStop) { answered = true; }, [](caf::error&) {});
    return answered;
  }

  void shutdown() {
    if (stopped) return;
    stopped = true;
    // A rank leaving on purpose is not a lost rank: rank 0 stops watching before it says stop.
    if (world.rank() == 0) heartbeat.reset();
    if (world.rank() == 0) {
      if (dp_coordinator) caf::anon_send_exit(dp_coordinator, caf::exit_reason::user_shutdown);
      // Overlap scheduling may leave a batch in flight after the last request ended: it runs,
      // and the worker's waiter thread ends, before the worker's draft client, the actor
      // system and the model go (actors::WorkerStop says why).
      if (local_worker && !fault->reason()) {
        caf::scoped_actor self{*sys};
        if (stop_worker(self, local_worker)) worker->enable_speculation(nullptr);  // its draft client goes first
      }
      for (auto& l : links) l->to_worker->send(transport::Shutdown{.seq = 0, .reason = "done"});
    } else {
      serve_other_rank();
    }
    world.barrier();
  }
};

Deployment::Deployment(DeploymentOptions options, parallel::ProcessGroup& world)
    : impl_(std::make_unique<Impl>(std::move(options), world)) {
  if (impl_->world.rank() == 0) impl_->start_actors();
}

Deployment::~Deployment() {
  if (impl_ && impl_->world.rank() == 0 && !impl_->stopped) {
    try {
      impl_->shutdown();
    } catch (...) {  // never throw from a destructor; the other ranks' mpirun teardown follows
    }
  }
}

bool Deployment::is_rank0() const { return impl_->world.rank() == 0; }
const model::LlamaConfig& Deployment::config() const { return impl_->config; }
int64_t Deployment::kv_capacity_tokens() const { return impl_->kv->shape().usable_tokens(); }

std::vector<RequestOutcome> Deployment::run(const std::vector<core::GenerationRequest>& requests) {
  AERIE_CHECK(is_rank0(), "Deployment::run is rank 0's; other ranks call shutdown() to serve");
  return impl_->run_rank0(requests);
}

caf::actor Deployment::router() const { return impl_->router; }
std::optional<core::SpecStageTimes> Deployment::spec_stage_times() const {
  const core::SpecWorkerCore* spec = impl_->worker ? impl_->worker->speculative() : nullptr;
  if (!spec) return std::nullopt;
  return spec->stage_times();
}
std::optional<std::string> Deployment::fault() const { return impl_->fault->reason(); }
caf::actor_system& Deployment::system() { return *impl_->sys; }
void Deployment::shutdown() { impl_->shutdown(); }

}  // namespace aerie::launch
