// Communication hooks (dist/comm_hook.h): CommFuture's steps, the process
// group's byte counter, and each built-in hook against its f64 reference
// (tests/dist/hook_reference.h) on 2-3 thread ranks over the in-process
// FakeGroup (which sums in f64): called directly on buckets, and inside DDP
// with no_sync accumulation and SyncBatchNorm, its wire bytes counted exactly.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <thread>

#include "dist/comm_hook.h"
#include "dist/ddp.h"
#include "dist/fake_group.h"
#include "dist/hook_reference.h"
#include "dist/thread_ranks.h"
#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/rng.h"
#include "layers/batch_norm.h"
#include "layers/conv.h"
#include "layers/linear.h"
#include "layers/sync_batch_norm.h"
#include "support/cuda_compare.h"
#include "support/gradcheck.h"

namespace tcv::dist {
namespace {

using testing::accumulate_step;
using testing::FakeGroup;
using testing::FakeWorld;
using testing::PowerSGDReference;
using testing::run_ranks;
using testing::Vec;

using testing::compression_bound;
using testing::kU32;
using testing::kUbf16;
using testing::kUf16;
using testing::powersgd_bound;

// A Work that finishes when the test says so (or fails with `error`).
struct ManualWork final : Work {
  bool done = false;
  std::string error;
  void wait() override {
    ASSERT_TRUE(done) << "a blocking wait on a work the test has not finished";
    if (!error.empty()) throw Error(error);
  }
  bool is_completed() override { return done; }
};

TEST(CommFuture, PollRunsLocalStepsOnlyAndCollectivesRunWhenIssued) {
  auto w1 = std::make_shared<ManualWork>(), w2 = std::make_shared<ManualWork>();
  std::vector<std::string> log;
  auto f = std::make_shared<CommFuture>(w1);
  f->then([&] { log.push_back("unpack"); })
      .then_collective([&]() -> WorkPtr {
        log.push_back("second collective");
        return w2;
      })
      .then([&] { log.push_back("decompress"); });
  EXPECT_FALSE(f->collectives_issued());
  EXPECT_FALSE(f->poll());  // w1 still running
  EXPECT_TRUE(log.empty());
  w1->done = true;
  EXPECT_FALSE(f->poll());  // runs "unpack", stops before the collective step
  EXPECT_EQ(log, std::vector<std::string>{"unpack"});
  f->issue_collectives();
  EXPECT_TRUE(f->collectives_issued());
  EXPECT_EQ(log.size(), 2u);
  EXPECT_FALSE(f->poll());
  EXPECT_FALSE(f->is_completed());
  w2->done = true;
  EXPECT_TRUE(f->poll());
  EXPECT_TRUE(f->is_completed());
  EXPECT_EQ(log, (std::vector<std::string>{"unpack", "second collective", "decompress"}));
  f->wait();
}

TEST(CommFuture, AFailedCollectiveFailsEveryLaterWaitAndSkipsTheSteps) {
  auto w = std::make_shared<ManualWork>();
  w->done = true;
  w->error = "[gloo] lost rank 1";
  bool ran = false;
  auto f = std::make_shared<CommFuture>(w);
  f->then([&] { ran = true; });
  EXPECT_THROW(f->wait(), Error);
  EXPECT_THROW(f->wait(), Error);
  EXPECT_TRUE(f->is_completed());
  EXPECT_FALSE(ran);
}

TEST(CommFuture, WhenAllWaitsForEach) {
  auto a = std::make_shared<ManualWork>(), b = std::make_shared<ManualWork>();
  WorkPtr all = when_all({a, nullptr, b});
  a->done = true;
  EXPECT_FALSE(all->is_completed());
  b->done = true;
  EXPECT_TRUE(all->is_completed());
  EXPECT_EQ(when_all({nullptr}), nullptr);
  EXPECT_EQ(when_all({a}), a);
}

TEST(ProcessGroupStats, CountsEachCollectivesPayload) {
  run_ranks(2, [](int, std::shared_ptr<FakeGroup> g) {
    EXPECT_EQ(g->stats().collectives, 0);
    g->all_reduce(zeros({10}), ReduceOp::sum)->wait();           // 40 bytes
    g->broadcast(zeros({3}, {.dtype = DType::f64}), 0)->wait();  // 24
    g->all_gather(zeros({8}, {.dtype = DType::i64}), zeros({4}, {.dtype = DType::i64}))->wait();
    g->barrier()->wait();  // 0
    EXPECT_EQ(g->stats().collectives, 4);
    EXPECT_EQ(g->stats().bytes, 40 + 24 + 32);
    g->reset_stats();
    EXPECT_EQ(g->stats().bytes, 0);
  });
}

// ---- hooks on buckets, called directly -----------------------------------------

// A bucket with these parameter shapes over a fresh buffer on `device`.
GradBucket make_bucket(int64_t index, const std::vector<Shape>& shapes, bool is_last,
                       Device device = kCPU) {
  std::vector<std::string> names;
  std::vector<int64_t> offsets;
  int64_t n = 0;
  for (const Shape& s : shapes) {
    names.push_back("p" + std::to_string(names.size()));
    offsets.push_back(n);
    n += shape_numel(s);
  }
  return GradBucket(index, zeros({n}, {.device = device}), names, shapes, offsets, is_last);
}

// Values over six decades (so relative bounds are exercised), per rank and step.
Tensor spread_values(int64_t n, uint64_t seed) {
  Generator g(seed);
  const Tensor mant = randn({n}, {}, &g);
  const Tensor dec = uniform({n}, -3.0, 3.0, {}, &g);
  return ops::mul(mant, ops::exp(ops::mul(dec, std::log(10.0))));
}

TEST(CommHooks, AllreduceIsTheExactMean) {
  const std::vector<Shape> shapes = {{4, 3}, {5}};
  std::vector<Vec> in(3), out(3);
  for (int r = 0; r < 3; ++r) in[r] = spread_values(17, 10 + r).to_vector<double>();
  run_ranks(3, [&](int r, std::shared_ptr<FakeGroup> g) {
    GradBucket b = make_bucket(0, shapes, true);
    Tensor(b.buffer()).copy_(from_vector(in[r]));
    allreduce_hook()->run(*g, b)->wait();
    out[r] = b.buffer().to_vector<double>();
    EXPECT_EQ(g->stats().bytes, 17 * 4);
  });
  const Vec want = testing::mean_over_ranks(in);
  for (int r = 0; r < 3; ++r)
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_EQ(out[r][i], static_cast<double>(static_cast<float>(want[i]))) << r << " " << i;
}

// bf16 / fp16 within the bound of hook_reference.h (compression_bound).
void check_compression(DType wire, int world, Device device = kCPU) {
  const double u = wire == DType::bf16 ? kUbf16 : kUf16;
  const double abs = wire == DType::f16 ? testing::kF16Subnormal : 0.0;
  const std::vector<Shape> shapes = {{64, 9}, {64}, {10, 64}, {10}};
  const int64_t n = 64 * 9 + 64 + 640 + 10;
  std::vector<Vec> in(world), out(world);
  for (int r = 0; r < world; ++r) in[r] = spread_values(n, 100 + r).to_vector<double>();
  run_ranks(world, [&](int r, std::shared_ptr<FakeGroup> g) {
    GradBucket b = make_bucket(0, shapes, true, device);
    Tensor(b.buffer()).copy_(from_vector(in[r]).to(device));
    auto hook = wire == DType::bf16 ? bf16_compress_hook() : fp16_compress_hook();
    hook->run(*g, b)->wait();
    out[r] = b.buffer().to_vector<double>();
    EXPECT_EQ(g->stats().collectives, 1);
    EXPECT_EQ(g->stats().bytes, n * 2);  // half of f32's
  });
  const Vec mean = testing::mean_over_ranks(in);
  double worst = 0;  // error / bound
  for (size_t i = 0; i < mean.size(); ++i) {
    double a = 0;
    for (int r = 0; r < world; ++r) a += std::abs(in[r][i]) / world;
    const double bound = compression_bound(u, a, mean[i], abs);
    for (int r = 0; r < world; ++r) worst = std::max(worst, std::abs(out[r][i] - mean[i]) / bound);
  }
  EXPECT_LE(worst, 1.0) << dtype_name(wire) << " world " << world;
  EXPECT_GT(worst, 0.05) << "the bound is loose";
}

TEST(CommHooks, Bf16WithinItsRoundingBound) {
  check_compression(DType::bf16, 2);
  check_compression(DType::bf16, 3);
}
TEST(CommHooks, Fp16WithinItsRoundingBound) {
  check_compression(DType::f16, 2);
  check_compression(DType::f16, 3);
}

struct PowerSGDCase {
  PowerSGDOptions opts;
  int world;
};

// Calls the hook on two buckets for `steps` steps on thread ranks and
// compares the buckets, P, Q and each rank's error with the reference after
// every step. Returns the largest error / bound seen.
double check_powersgd(const PowerSGDCase& c, int steps, Device device = kCPU) {
  // Bucket 0 repeats a shape (grouped, in first-appearance order) and has
  // vectors; bucket 1 has a matrix too small to compress at rank >= 2.
  const std::vector<std::vector<Shape>> buckets = {
      {{16, 3, 3, 3}, {16}, {12, 16}, {16, 3, 3, 3}, {12}}, {{5, 7}, {40, 24}, {40}}};
  int64_t max_dims = 0;
  for (const auto& shapes : buckets)
    for (const Shape& s : shapes) {
      const int64_t n = s[0], m = shape_numel(s) / s[0];
      max_dims = std::max(max_dims, n + m + std::min({n, m, c.opts.matrix_approximation_rank}));
    }
  // in[step][bucket][rank]: correlated across ranks (a shared part) and steps.
  std::vector<std::vector<std::vector<Vec>>> in(steps);
  for (int s = 0; s < steps; ++s)
    for (size_t b = 0; b < buckets.size(); ++b) {
      int64_t n = 0;
      for (const Shape& sh : buckets[b]) n += shape_numel(sh);
      Generator shared(1000 + b);
      const Tensor common = randn({n}, {}, &shared);
      for (int r = 0; r < c.world; ++r) {
        Generator g(7 * s + 100 * b + 10000 * r + 1);
        in[s].resize(buckets.size());
        in[s][b].push_back(ops::add(common, ops::mul(randn({n}, {}, &g), 0.5)).to_vector<double>());
      }
    }
  // What each rank saw: out[step][bucket][rank], and its state after each step.
  struct State {
    Vec p, q, error;
  };
  std::vector<std::vector<std::vector<Vec>>> out(
      steps, std::vector<std::vector<Vec>>(buckets.size(), std::vector<Vec>(c.world)));
  std::vector<std::vector<std::vector<State>>> state(
      steps, std::vector<std::vector<State>>(buckets.size(), std::vector<State>(c.world)));
  std::vector<int64_t> bytes(steps, 0);
  run_ranks(c.world, [&](int r, std::shared_ptr<FakeGroup> g) {
    auto hook = powersgd_hook(c.opts);
    for (int s = 0; s < steps; ++s) {
      const CommStats before = g->stats();
      std::vector<CommFuturePtr> futures;
      std::vector<GradBucket> bs;
      for (size_t b = 0; b < buckets.size(); ++b) {
        bs.push_back(
            make_bucket(static_cast<int64_t>(b), buckets[b], b + 1 == buckets.size(), device));
        Tensor(bs.back().buffer()).copy_(from_vector(in[s][b][r]).to(device));
      }
      // As the reducer drives them: each bucket's collectives issued in full
      // before the next bucket starts, then everything waited for.
      for (size_t b = 0; b < buckets.size(); ++b) {
        if (b > 0) futures.back()->issue_collectives();
        futures.push_back(hook->run(*g, bs[b]));
      }
      for (auto& f : futures) f->wait();
      if (r == 0) bytes[s] = g->stats().bytes - before.bytes;
      for (size_t b = 0; b < buckets.size(); ++b) {
        out[s][b][r] = bs[b].buffer().to_vector<double>();
        auto vec = [](const Tensor& t) { return t.defined() ? t.to_vector<double>() : Vec(); };
        state[s][b][r] = {vec(hook->p_memory(b)), vec(hook->q_memory(b)), vec(hook->error(b))};
      }
    }
  });

  PowerSGDReference ref(c.opts, c.world);
  double worst = 0;
  int64_t compressed = 0;
  for (int s = 0; s < steps; ++s) {
    const bool compressing = s >= c.opts.start_powerSGD_iter;
    compressed += compressing;
    int64_t want_bytes = 0;
    for (size_t b = 0; b < buckets.size(); ++b) {
      const auto want =
          ref.run(static_cast<int64_t>(b), b + 1 == buckets.size(), buckets[b], in[s][b]);
      const auto& mem = ref.memory(static_cast<int64_t>(b));
      const double bound =
          compressing ? powersgd_bound(compressed, max_dims, ref.kappa()) : 2 * kU32;
      const std::string at = "step " + std::to_string(s) + " bucket " + std::to_string(b);
      for (int r = 0; r < c.world; ++r) {
        const double e = testing::max_rel_diff(out[s][b][r], want[r]) / bound;
        EXPECT_LE(e, 1.0) << at << " rank " << r << " output";
        worst = std::max(worst, e);
        if (!compressing) continue;
        const State& st = state[s][b][r];
        const std::pair<const Vec*, const Vec*> pairs[] = {
            {&st.p, &mem.p},
            {&st.q, &mem.q},
            {&st.error, c.opts.use_error_feedback ? &mem.error[r] : &st.error}};
        const char* names[] = {"P", "Q", "error"};
        for (int k = 0; k < 3; ++k) {
          const double ek = testing::max_rel_diff(*pairs[k].first, *pairs[k].second) / bound;
          EXPECT_LE(ek, 1.0) << at << " rank " << r << " " << names[k];
          worst = std::max(worst, ek);
        }
      }
      // Bytes: the uncompressed tensors, the P's and the Q's (f32), or the bucket.
      int64_t numel = 0;
      for (const Shape& sh : buckets[b]) {
        const int64_t n = sh[0], m = shape_numel(sh) / n;
        const int64_t rk = std::min({n, m, c.opts.matrix_approximation_rank});
        const bool comp = static_cast<double>((n + m) * rk) * c.opts.min_compression_rate <
                          static_cast<double>(n * m);
        numel += compressing && comp ? (n + m) * rk : n * m;
      }
      want_bytes += numel * 4;
    }
    EXPECT_EQ(bytes[s], want_bytes) << "step " << s;
  }
  EXPECT_EQ(ref.iter(), steps);
  return worst;
}

TEST(PowerSGD, ErrorFeedbackAndWarmStartMatchTheF64Reference) {
  PowerSGDOptions o;
  o.matrix_approximation_rank = 2;
  o.start_powerSGD_iter = 2;
  const double worst = check_powersgd({o, 2}, 6);
  EXPECT_GT(worst, 1e-3) << "the bound is loose";
}
TEST(PowerSGD, ThreeRanksRankOneNoWarmStart) {
  PowerSGDOptions o;
  o.matrix_approximation_rank = 1;
  o.start_powerSGD_iter = 2;
  o.warm_start = false;
  o.random_seed = 5;
  check_powersgd({o, 3}, 5);
}
TEST(PowerSGD, NoStateFromTheFirstStepWithEpsilonAndLowCompressionRate) {
  PowerSGDOptions o;
  o.matrix_approximation_rank = 4;
  o.start_powerSGD_iter = 0;
  o.use_error_feedback = false;
  o.warm_start = false;
  o.min_compression_rate = 1.0;
  o.orthogonalization_epsilon = 1e-8;
  check_powersgd({o, 2}, 3);
}

// The same hooks on CUDA buckets (engine ops only: cuBLAS GEMMs in f32, no
// TF32), against the same reference and bounds.
TEST(CommHooks, CudaBf16AndFp16WithinTheirBounds) {
  TCV_REQUIRE_CUDA();
  check_compression(DType::bf16, 2, Device(DeviceType::CUDA, 0));
  check_compression(DType::f16, 3, Device(DeviceType::CUDA, 0));
}
TEST(PowerSGD, CudaMatchesTheF64Reference) {
  TCV_REQUIRE_CUDA();
  PowerSGDOptions o;
  o.matrix_approximation_rank = 2;
  o.start_powerSGD_iter = 2;
  check_powersgd({o, 2}, 6, Device(DeviceType::CUDA, 0));
  o.warm_start = false;
  o.matrix_approximation_rank = 3;
  check_powersgd({o, 3}, 4, Device(DeviceType::CUDA, 0));
}

TEST(PowerSGD, StateRulesAreNamedErrors) {
  PowerSGDOptions o;
  o.start_powerSGD_iter = 1;
  const std::string msg = tcv::testing::error_of([&] { PowerSGDHook h(o); });
  EXPECT_NE(msg.find("start_powerSGD_iter must be > 1"), std::string::npos) << msg;
  o.start_powerSGD_iter = 10;
  o.matrix_approximation_rank = 0;
  EXPECT_NE(tcv::testing::error_of([&] { PowerSGDHook h(o); }).find("matrix_approximation_rank"),
            std::string::npos);
  EXPECT_NE(tcv::testing::error_of([] {
              make_builtin_comm_hook("fp8");
            }).find("valid: none, bf16, fp16, powersgd"),
            std::string::npos);
  EXPECT_EQ(make_builtin_comm_hook("none"), nullptr);
  EXPECT_EQ(make_builtin_comm_hook("powersgd", {.matrix_approximation_rank = 4})->name(),
            "powersgd rank 4");
}

TEST(PowerSGD, OrthogonalizeMatchesGramSchmidt) {
  Tensor m = randn({7, 3});
  Vec ref = m.to_vector<double>();
  testing::gram_schmidt(ref, 7, 3, 0.0);
  orthogonalize_(m);
  tcv::testing::expect_close(m.to(DType::f64), from_vector(ref, {7, 3}), 1e-6, 1e-5, "Q");
  // Non-contiguous views (P's and Q's are slices of one buffer) work in place.
  Tensor flat = randn({2 * 12});
  Tensor view = flat.narrow(0, 12, 12).view({4, 3});
  Vec ref2 = view.to_vector<double>();
  testing::gram_schmidt(ref2, 4, 3, 0.0);
  orthogonalize_(view);
  tcv::testing::expect_close(flat.narrow(0, 12, 12).to(DType::f64), from_vector(ref2), 1e-6, 1e-5,
                             "view");
}

// ---- hooks inside DDP: no_sync accumulation, SyncBatchNorm ---------------------

// conv-BN-relu, conv(stride 2)-BN-relu, global average pool, fc.
struct SmallCnn : nn::Module {
  std::shared_ptr<nn::Conv2d> conv1, conv2;
  std::shared_ptr<nn::BatchNorm2d> bn1, bn2;
  std::shared_ptr<nn::Linear> fc;
  SmallCnn() {
    conv1 = register_module("conv1",
                            std::make_shared<nn::Conv2d>(1, 8, 3, nn::Conv2dOptions{.padding = 1}));
    bn1 = register_module("bn1", std::make_shared<nn::BatchNorm2d>(8));
    conv2 = register_module("conv2", std::make_shared<nn::Conv2d>(
                                         8, 16, 3, nn::Conv2dOptions{.stride = 2, .padding = 1}));
    bn2 = register_module("bn2", std::make_shared<nn::BatchNorm2d>(16));
    fc = register_module("fc", std::make_shared<nn::Linear>(16, 5));
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = ops::relu(bn1->forward(conv1->forward(x)));
    h = ops::relu(bn2->forward(conv2->forward(h)));
    return fc->forward(ops::mean(h, {2, 3}));
  }
  std::string type_name() const override { return "SmallCnn"; }
};

// One call of the hook as a rank saw it.
struct Record {
  int64_t index = 0;
  bool is_last = false;
  std::vector<Shape> shapes;
  Vec in, out;
};

// `inner`, recording each bucket before and after it.
std::shared_ptr<CommHook> recording(std::shared_ptr<CommHook> inner, std::vector<Record>& log) {
  return make_comm_hook(
      inner->name(),
      [inner, &log](ProcessGroup& g, const GradBucket& b) {
        log.push_back({b.index(), b.is_last(), b.shapes(), b.buffer().to_vector<double>(), {}});
        const size_t k = log.size() - 1;
        const Tensor buf = b.buffer();
        CommFuturePtr f = inner->run(g, b);
        f->then([&log, k, buf] { log[k].out = buf.to_vector<double>(); });
        return f;
      },
      inner->keeps_bucket_state_from());
}

struct DdpRun {
  std::vector<std::vector<Record>> logs;  // per rank
  std::vector<std::vector<StepStats>> stats;
  std::vector<std::vector<std::vector<double>>> params;  // per rank, at the end
};

// `world` thread ranks train SmallCnn (SyncBatchNorm when asked) for `steps`
// SGD steps of `micro` micro-batches (the first micro - 1 under no_sync),
// with make_hook()'s hook recorded.
DdpRun run_ddp(int world, const std::function<std::shared_ptr<CommHook>()>& make_hook, bool sync_bn,
               int micro, int steps) {
  const int64_t b = 3;
  manual_seed(42);
  std::vector<Tensor> xs, ys;
  for (int s = 0; s < steps * micro; ++s) {
    xs.push_back(randn({world * b, 1, 8, 8}));
    ys.push_back(ops::cast(ops::clamp(uniform({world * b}, 0, 5), 0, 4.99), DType::i64));
  }
  std::vector<std::shared_ptr<SmallCnn>> nets;
  for (int r = 0; r < world; ++r) {
    manual_seed(7);
    nets.push_back(std::make_shared<SmallCnn>());
  }
  DdpRun run;
  run.logs.resize(world);
  run.stats.resize(world);
  run.params.resize(world);
  run_ranks(world, [&](int r, std::shared_ptr<FakeGroup> g) {
    if (sync_bn) nn::convert_sync_batchnorm(*nets[r], sync_bn_group(g));
    DDPOptions o;
    o.reducer.bucket_cap_mb = 0.003;  // conv2.weight (4.5 KiB) alone, the rest in 2 more
    o.reducer.first_bucket_mb = 0.0003;
    DDP ddp(nets[r], g, o);
    if (auto hook = make_hook()) ddp.register_comm_hook(recording(hook, run.logs[r]));
    for (int s = 0; s < steps; ++s) {
      accumulate_step(ddp, xs, ys, s, micro, r, b, [](const Tensor& out, const Tensor& y) {
        return ops::cross_entropy(out, y);
      });
      run.stats[r].push_back(ddp.reducer().last_stats());
      NoGradGuard ng;
      for (Tensor& p : nets[r]->parameters()) {
        p.detach().add_(p.grad(), -0.1);
        p.grad().zero_();
      }
    }
    for (const Tensor& p : nets[r]->parameters()) run.params[r].push_back(p.to_vector<double>());
  });
  return run;
}

// Every rank called the hook on the same buckets, and ends with the same model.
void check_consistent(const DdpRun& run) {
  for (size_t r = 1; r < run.logs.size(); ++r) {
    ASSERT_EQ(run.logs[r].size(), run.logs[0].size());
    for (size_t k = 0; k < run.logs[0].size(); ++k) {
      EXPECT_EQ(run.logs[r][k].index, run.logs[0][k].index);
      EXPECT_EQ(run.logs[r][k].shapes, run.logs[0][k].shapes);
    }
    EXPECT_EQ(run.params[r], run.params[0]) << "rank " << r << " diverged from rank 0";
  }
}

void check_compression_in_ddp(DType wire, bool sync_bn, int micro) {
  const double u = wire == DType::bf16 ? kUbf16 : kUf16;
  const DdpRun run = run_ddp(
      2, [&] { return wire == DType::bf16 ? bf16_compress_hook() : fp16_compress_hook(); }, sync_bn,
      micro, 3);
  check_consistent(run);
  ASSERT_EQ(run.stats[0].back().num_buckets, 3);
  ASSERT_EQ(run.logs[0].size(), 9u);  // 3 buckets x 3 steps
  for (size_t k = 0; k < run.logs[0].size(); ++k) {
    const Vec mean = testing::mean_over_ranks({run.logs[0][k].in, run.logs[1][k].in});
    for (size_t i = 0; i < mean.size(); ++i) {
      const double a = (std::abs(run.logs[0][k].in[i]) + std::abs(run.logs[1][k].in[i])) / 2;
      const double bound =
          compression_bound(u, a, mean[i], wire == DType::f16 ? testing::kF16Subnormal : 0.0);
      ASSERT_LE(std::abs(run.logs[0][k].out[i] - mean[i]), bound) << k << " " << i;
    }
  }
  // Bytes: 2 per gradient element, counted per bucket; SyncBatchNorm's not included.
  int64_t numel = 0;
  for (const auto& p : run.params[0]) numel += static_cast<int64_t>(p.size());
  for (const StepStats& s : run.stats[0]) {
    EXPECT_EQ(s.bytes, 2 * numel);
    EXPECT_EQ(s.bucket_bytes, 4 * numel);
    EXPECT_EQ(s.collectives, 3);
  }
}

TEST(DDPHooks, Bf16WithNoSyncAndSyncBatchNorm) {
  check_compression_in_ddp(DType::bf16, true, 2);
}
TEST(DDPHooks, Fp16WithNoSyncAndSyncBatchNorm) {
  check_compression_in_ddp(DType::f16, true, 2);
}
TEST(DDPHooks, Fp16PlainBatchNorm) {
  check_compression_in_ddp(DType::f16, false, 1);
}

void check_powersgd_in_ddp(bool sync_bn, int micro) {
  PowerSGDOptions o;
  o.matrix_approximation_rank = 2;
  o.start_powerSGD_iter = 2;
  o.min_compression_rate = 1.5;
  const int steps = 5, world = 2;
  const DdpRun run = run_ddp(
      world, [&] { return powersgd_hook(o); }, sync_bn, micro, steps);
  check_consistent(run);
  // What the hook received on each rank, through the reference: same buckets out.
  PowerSGDReference ref(o, world);
  int64_t compressed = 0, max_dims = 0;
  size_t k = 0;
  for (int s = 0; s < steps; ++s) {
    compressed += s >= o.start_powerSGD_iter;
    int64_t want_bytes = 0;
    for (; k < run.logs[0].size(); ++k) {
      const Record& r0 = run.logs[0][k];
      std::vector<Vec> in;
      for (int r = 0; r < world; ++r) in.push_back(run.logs[r][k].in);
      const auto want = ref.run(r0.index, r0.is_last, r0.shapes, in);
      int64_t numel = 0;
      for (const Shape& sh : r0.shapes) {
        const int64_t n = sh[0], m = shape_numel(sh) / n, rk = std::min<int64_t>({n, m, 2});
        max_dims = std::max(max_dims, n + m + rk);
        const bool comp = (n + m) * rk * 1.5 < n * m;
        numel += s >= o.start_powerSGD_iter && comp ? (n + m) * rk : n * m;
      }
      want_bytes += 4 * numel;
      const double bound =
          s >= o.start_powerSGD_iter ? powersgd_bound(compressed, max_dims, ref.kappa()) : 2 * kU32;
      for (int r = 0; r < world; ++r)
        EXPECT_LE(testing::max_rel_diff(run.logs[r][k].out, want[r]), bound)
            << "step " << s << " bucket " << r0.index << " rank " << r;
      if (r0.is_last) {
        ++k;
        break;
      }
    }
    EXPECT_EQ(run.stats[0][s].bytes, want_bytes) << "step " << s;
    if (s >= o.start_powerSGD_iter) {
      EXPECT_LT(run.stats[0][s].bytes * 2, run.stats[0][s].bucket_bytes);
    }
  }
  EXPECT_EQ(k, run.logs[0].size());
}

TEST(DDPHooks, PowerSGDWithNoSyncAndSyncBatchNorm) {
  check_powersgd_in_ddp(true, 2);
}
TEST(DDPHooks, PowerSGDPlainBatchNorm) {
  check_powersgd_in_ddp(false, 1);
}

TEST(DDPHooks, AllreduceHookEqualsTheDefault) {
  const DdpRun with = run_ddp(
      2, [] { return allreduce_hook(); }, true, 2, 3);
  const DdpRun without = run_ddp(
      2, [] { return std::shared_ptr<CommHook>(); }, true, 2, 3);
  check_consistent(with);
  EXPECT_EQ(with.params, without.params);
  for (size_t s = 0; s < 3; ++s) {
    EXPECT_EQ(with.stats[0][s].bytes, without.stats[0][s].bytes);
    EXPECT_EQ(without.stats[0][s].bytes, without.stats[0][s].bucket_bytes);
  }
}

// docs/api.md's example of a hook of one's own: equals the default on thread ranks.
TEST(DDPHooks, ALambdaHookAsInTheDocs) {
  const DdpRun f64 = run_ddp(
      2,
      [] {
        return make_comm_hook("f64", [](ProcessGroup& g, const GradBucket& b) {
          Tensor wire = b.buffer().to(DType::f64);
          auto f = std::make_shared<CommFuture>(g.all_reduce(wire, ReduceOp::avg));
          f->then([buf = b.buffer(), wire]() mutable { buf.copy_(wire); });
          return f;
        });
      },
      false, 2, 3);
  const DdpRun plain = run_ddp(
      2, [] { return std::shared_ptr<CommHook>(); }, false, 2, 3);
  check_consistent(f64);
  EXPECT_EQ(f64.params, plain.params);  // the FakeGroup sums in f64 either way
  EXPECT_EQ(f64.stats[0].back().bytes, 2 * f64.stats[0].back().bucket_bytes);
}

TEST(DDPHooks, RegisterOnceAndBeforeTheFirstBackward) {
  run_ranks(1, [](int, std::shared_ptr<FakeGroup> g) {
    manual_seed(1);
    auto net = std::make_shared<SmallCnn>();
    DDP ddp(net, g);
    ddp.register_comm_hook(bf16_compress_hook());
    EXPECT_NE(tcv::testing::error_of([&] {
                ddp.register_comm_hook(fp16_compress_hook());
              }).find("only be called once"),
              std::string::npos);
    DDP late(std::make_shared<SmallCnn>(), g);
    ops::sum(late.forward(randn({2, 1, 8, 8}))).backward();
    EXPECT_NE(tcv::testing::error_of([&] {
                late.register_comm_hook(fp16_compress_hook());
              }).find("before the first backward"),
              std::string::npos);
  });
}

// A hook whose then() step starts a collective is refused: ranks could issue
// it at different points.
TEST(DDPHooks, CollectiveInALocalStepIsAnError) {
  run_ranks(1, [](int, std::shared_ptr<FakeGroup> g) {
    manual_seed(1);
    DDP ddp(std::make_shared<SmallCnn>(), g);
    ddp.register_comm_hook("bad", [](ProcessGroup& pg, const GradBucket& b) {
      auto f = std::make_shared<CommFuture>(pg.all_reduce(b.buffer(), ReduceOp::avg));
      f->then([&pg, b] { pg.all_reduce(b.buffer(), ReduceOp::avg)->wait(); });
      return f;
    });
    const std::string msg = tcv::testing::error_of([&] {
      ops::sum(ddp.forward(randn({2, 1, 8, 8}))).backward();
    });
    EXPECT_NE(msg.find("then_collective"), std::string::npos) << msg;
  });
}

}  // namespace
}  // namespace tcv::dist
