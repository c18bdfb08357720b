// tcv-ddp-bench: times DistributedDataParallel training steps (forward,
// cross-entropy, backward with the bucketed all-reduce, SGD momentum 0.9) on
// one synthetic batch per rank. Start it under tcv-run (or torchrun):
//
//   tcv-run --nproc-per-node 2 -- tcv-ddp-bench --model fmnist_resnet --batch 64
//
// Rank 0 prints one JSON line: global images/s (median over repeats) and the
// reducer's per-step stats (buckets, comm time, the part hidden behind
// backward, the part exposed after it), on rank 0 and, per step, on the rank
// that ended backward last (which waits for no peer: its exposed time is the
// all-reduce's own tail), and the bytes its gradients put on the wire per
// step, counted by the process group: with --comm-hook bf16 | fp16 | powersgd
// (as network.comm_hook; PowerSGD from step --powersgd-start, default 2, at
// rank --powersgd-rank, default 4) beside the buckets' own bytes.
// --timeline trace.json (or TCV_TIMELINE) writes the Chrome trace of one
// timed step, the input of `tcv-bench ddp --project`; --bucket-plan cap uses
// PyTorch's bucket rule instead of the timed plan.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "dist/ddp.h"
#include "dist/env.h"
#include "engine/json.h"
#include "engine/ops.h"
#include "engine/rng.h"
#include "models/registry.h"
#include "train/optim.h"

using namespace tcv;
using Clock = std::chrono::steady_clock;

int main(int argc, char** argv) {
  std::string model_name = "fmnist_resnet";
  int64_t batch = 64, steps = 20, warmup = 5, repeats = 3, size = 28, channels = 1, classes = 10;
  double cap_mb = 25.0;
  bool sync_bn = false;
  std::string comm_hook = "none";
  dist::PowerSGDOptions psgd;
  psgd.matrix_approximation_rank = 4;
  psgd.start_powerSGD_iter = 2;
  std::string timeline;
  int64_t timeline_step = 0;
  dist::BucketPlan plan = dist::BucketPlan::timed;
  dist::BucketPlanOptions plan_opts;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&] {
      if (i + 1 >= argc) {
        std::cerr << a << " needs a value\n";
        std::exit(2);
      }
      return std::string(argv[++i]);
    };
    if (a == "--model")
      model_name = next();
    else if (a == "--batch")
      batch = std::stoll(next());
    else if (a == "--steps")
      steps = std::stoll(next());
    else if (a == "--warmup")
      warmup = std::stoll(next());
    else if (a == "--repeats")
      repeats = std::stoll(next());
    else if (a == "--image-size")
      size = std::stoll(next());
    else if (a == "--channels")
      channels = std::stoll(next());
    else if (a == "--classes")
      classes = std::stoll(next());
    else if (a == "--bucket-cap-mb")
      cap_mb = std::stod(next());
    else if (a == "--sync-bn")
      sync_bn = true;
    else if (a == "--comm-hook")
      comm_hook = next();
    else if (a == "--powersgd-rank")
      psgd.matrix_approximation_rank = std::stoll(next());
    else if (a == "--powersgd-start")
      psgd.start_powerSGD_iter = std::stoll(next());
    else if (a == "--timeline")
      timeline = next();
    else if (a == "--timeline-step")
      timeline_step = std::stoll(next());
    else if (a == "--bucket-plan") {
      const std::string v = next();
      if (v != "cap" && v != "timed") {
        std::cerr << "--bucket-plan expects cap or timed, got '" << v << "'\n";
        return 2;
      }
      plan = v == "cap" ? dist::BucketPlan::cap : dist::BucketPlan::timed;
    } else if (a == "--plan-safety") {
      plan_opts.safety = std::stod(next());
    } else if (a == "--plan-slack") {
      plan_opts.latency_slack = std::stod(next());
    } else {
      std::cerr
          << "usage: tcv-ddp-bench [--model NAME] [--batch B] [--steps N] [--warmup N] "
             "[--repeats N] [--image-size S] [--channels C] [--classes K] [--bucket-cap-mb MB] "
             "[--sync-bn] [--comm-hook none|bf16|fp16|powersgd] [--powersgd-rank R] "
             "[--powersgd-start N] [--bucket-plan cap|timed] [--timeline PATH] "
             "[--timeline-step N] [--plan-safety X] [--plan-slack X]\n";
      return 2;
    }
  }
  try {
    const dist::DistEnv env = dist::read_dist_env();
    auto store = dist::connect_job_store(env);
    auto group = dist::make_gloo_group(store, env.rank, env.world_size);

    models::register_builtin_models();
    manual_seed(0);
    auto model = models::create_model(model_name, {classes, channels});
    if (sync_bn) nn::convert_sync_batchnorm(*model, dist::sync_bn_group(group));
    dist::DDPOptions o;
    o.reducer.bucket_cap_mb = cap_mb;
    o.reducer.bucket_plan = plan;
    o.reducer.plan = plan_opts;
    o.timeline_path = timeline;
    // By default (and without TCV_TIMELINE_STEP/STEPS) the median-length one
    // of up to 9 steps in the middle of the timed ones.
    if (timeline_step > 0)
      o.timeline_step = timeline_step;
    else if (std::getenv("TCV_TIMELINE_STEP") == nullptr)
      o.timeline_step = warmup + std::max<int64_t>(1, (repeats * steps) / 2 - 4);
    if (std::getenv("TCV_TIMELINE_STEPS") == nullptr)
      o.timeline_steps = std::min<int64_t>(9, std::max<int64_t>(1, repeats * steps - 1));
    dist::DDP ddp(model, group, o);
    if (auto hook = dist::make_builtin_comm_hook(comm_hook, psgd))
      ddp.register_comm_hook(std::move(hook));
    train::SGDOptions so2;
    so2.lr = 0.01;
    so2.momentum = 0.9;
    train::SGD sgd(model->named_parameters(), so2);
    manual_seed(1 + env.rank);
    const Tensor x = randn({batch, channels, size, size});
    const double k = static_cast<double>(classes);
    const Tensor y = ops::cast(ops::clamp(uniform({batch}, 0, k), 0, k - 0.01), DType::i64);

    std::vector<dist::StepStats> stats;
    std::vector<int64_t> group_bytes;  // everything the group carried per step
    std::vector<double> step_s;        // each timed step's wall time
    auto step = [&] {
      const int64_t before = group->stats().bytes;
      const auto t0 = Clock::now();
      sgd.zero_grad(false);
      ops::cross_entropy(ddp.forward(x), y).backward();
      sgd.step();
      stats.push_back(ddp.reducer().last_stats());
      step_s.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
      group_bytes.push_back(group->stats().bytes - before);
    };
    for (int64_t i = 0; i < warmup; ++i) step();
    stats.clear();
    group_bytes.clear();
    step_s.clear();
    std::vector<double> rates;
    for (int64_t r = 0; r < repeats; ++r) {
      group->barrier()->wait();
      const auto t0 = Clock::now();
      for (int64_t i = 0; i < steps; ++i) step();
      const double s = std::chrono::duration<double>(Clock::now() - t0).count();
      rates.push_back(static_cast<double>(steps * batch * env.world_size) / s);
    }
    std::sort(rates.begin(), rates.end());
    double comm = 0, hidden = 0, exposed = 0, wait = 0, bwd = 0;
    for (const auto& s : stats) {
      comm += s.comm_s;
      hidden += s.hidden_s;
      exposed += s.exposed_s;
      wait += s.wait_s;
      bwd += s.backward_s;
    }
    const double n = static_cast<double>(std::max<size_t>(stats.size(), 1));
    // Every rank's stats, to tell communication from a peer that is behind:
    // in each step the rank that ended backward last waits for no one, so
    // what it sees after backward is the all-reduce alone.
    const auto steps_n = static_cast<int64_t>(stats.size());
    Tensor mine = zeros({3 * steps_n}, {.dtype = DType::f64});
    for (int64_t i = 0; i < steps_n; ++i) {
      mine.data<double>()[3 * i] = stats[i].comm_s;
      mine.data<double>()[3 * i + 1] = stats[i].hidden_s;
      mine.data<double>()[3 * i + 2] = stats[i].exposed_s;
    }
    Tensor all = zeros({3 * steps_n * env.world_size}, {.dtype = DType::f64});
    group->all_gather(all, mine)->wait();
    double last_comm = 0, last_hidden = 0, last_exposed = 0;
    for (int64_t i = 0; i < steps_n; ++i) {
      int64_t best = 0;
      const double* a = all.data<double>();
      for (int64_t r = 1; r < env.world_size; ++r)
        if (a[3 * (r * steps_n + i) + 2] < a[3 * (best * steps_n + i) + 2]) best = r;
      last_comm += a[3 * (best * steps_n + i)];
      last_hidden += a[3 * (best * steps_n + i) + 1];
      last_exposed += a[3 * (best * steps_n + i) + 2];
    }
    if (env.rank == 0) {
      auto round_to = [](double v, double unit) { return std::round(v / unit) * unit; };
      Json j = Json::object();
      j["model"] = model_name;
      j["world"] = env.world_size;
      j["batch_per_rank"] = batch;
      j["images_per_sec"] = round_to(rates[rates.size() / 2], 0.01);
      j["buckets"] = ddp.reducer().num_buckets();
      j["bucket_cap_mb"] = cap_mb;
      j["backward_ms"] = round_to(1e3 * bwd / n, 1e-3);
      j["comm_ms"] = round_to(1e3 * comm / n, 1e-3);
      j["hidden_ms"] = round_to(1e3 * hidden / n, 1e-3);
      j["exposed_ms"] = round_to(1e3 * exposed / n, 1e-3);
      j["wait_ms"] = round_to(1e3 * wait / n, 1e-3);
      j["hidden_fraction"] = round_to(comm > 0 ? hidden / comm : 0.0, 1e-3);
      // The same, in each step on the rank that ended backward last.
      j["last_rank_exposed_ms"] = round_to(1e3 * last_exposed / n, 1e-3);
      j["last_rank_hidden_fraction"] =
          round_to(last_comm > 0 ? last_hidden / last_comm : 0.0, 1e-3);
      j["bucket_plan"] = plan == dist::BucketPlan::cap ? "cap" : "timed";
      if (const auto& c = ddp.reducer().allreduce_cost()) {
        j["allreduce_latency_us"] = round_to(1e6 * c->latency_s, 0.01);
        j["allreduce_gbytes_per_s"] = round_to(1e-9 * c->bytes_per_s, 1e-4);
      }
      j["step_ms"] = round_to(
          1e3 * static_cast<double>(batch * env.world_size) / rates[rates.size() / 2], 1e-3);
      // The median step: what one step's timeline is compared with (the mean
      // above carries the rare steps a busy machine stalls).
      std::nth_element(step_s.begin(),
                       step_s.begin() + static_cast<std::ptrdiff_t>(step_s.size() / 2),
                       step_s.end());
      j["median_step_ms"] = round_to(1e3 * step_s[step_s.size() / 2], 1e-3);
      j["params"] = model->num_parameters();
      // Gradient bytes per step as the hook put them on the wire (the last
      // timed step; every timed step moves the same), the buckets' own bytes,
      // and everything the group carried (with the buffers' broadcast).
      j["comm_hook"] = ddp.reducer().comm_hook() ? ddp.reducer().comm_hook()->name() : "none";
      j["bytes_per_step"] = stats.back().bytes;
      j["bucket_bytes_per_step"] = stats.back().bucket_bytes;
      j["wire_ratio"] = round_to(static_cast<double>(stats.back().bucket_bytes) /
                                     static_cast<double>(std::max<int64_t>(stats.back().bytes, 1)),
                                 1e-3);
      j["group_bytes_per_step"] = group_bytes.back();
      std::printf("%s\n", json_dump(j).c_str());
      std::fflush(stdout);
    }
    group->barrier()->wait();
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "tcv-ddp-bench: " << e.what() << "\n";
    return 1;
  }
}
