// The Reducer and DistributedDataParallel in one process: ranks are threads
// over an in-process FakeGroup (tests/dist/fake_group.h).
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <thread>

#include "dist/ddp.h"
#include "dist/fake_group.h"
#include "dist/thread_ranks.h"
#include "engine/autograd.h"
#include "engine/json.h"
#include "engine/ops.h"
#include "engine/rng.h"
#include "layers/linear.h"
#include "support/gradcheck.h"
#include "support/run_files.h"
#include "support/temp_dir.h"

namespace tcv::dist {
namespace {

using tcv::testing::expect_close;
using testing::accumulate_step;
using testing::FakeGroup;
using testing::FakeWorld;
using testing::run_ranks;

// fc1 -> relu -> fc2, optionally with a head that forward never uses; with
// `reversed`, forward uses the modules in the opposite order of registration.
struct Net : nn::Module {
  std::shared_ptr<nn::Linear> fc1, fc2, unused;
  explicit Net(bool with_unused = false) {
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(6, 8));
    fc2 = register_module("fc2", std::make_shared<nn::Linear>(8, 3));
    if (with_unused) unused = register_module("unused", std::make_shared<nn::Linear>(8, 3));
  }
  Tensor forward(const Tensor& x) override { return fc2->forward(ops::relu(fc1->forward(x))); }
  std::string type_name() const override { return "Net"; }
};

// Registered a, b but used b then a: gradients arrive a first.
struct Reversed : nn::Module {
  std::shared_ptr<nn::Linear> a, b;
  Reversed() {
    a = register_module("a", std::make_shared<nn::Linear>(4, 4));
    b = register_module("b", std::make_shared<nn::Linear>(4, 4));
  }
  Tensor forward(const Tensor& x) override { return a->forward(ops::relu(b->forward(x))); }
  std::string type_name() const override { return "Reversed"; }
};

// Options with buckets of `mb` MiB (tiny: about one parameter per bucket).
DDPOptions small_buckets(double mb, bool find_unused = false) {
  DDPOptions o;
  o.reducer.bucket_cap_mb = mb;
  o.reducer.first_bucket_mb = mb;
  o.reducer.find_unused_parameters = find_unused;
  return o;
}

void sgd_step(nn::Module& m, double lr) {
  NoGradGuard ng;
  for (Tensor& p : m.parameters()) {
    if (!p.grad().defined()) continue;
    p.detach().add_(p.grad(), -lr);
    p.grad().zero_();  // in place: a bucket view stays one
  }
}

std::vector<Tensor> params_of(const nn::Module& m) {
  std::vector<Tensor> out;
  for (const Tensor& p : m.parameters()) out.push_back(p.detach().clone());
  return out;
}

TEST(BucketAssignment, ReverseOrderSmallFirstBucketThenCap) {
  const int64_t half_mib = 128 * 1024;  // f32 elements
  std::vector<Tensor> ps;
  for (int i = 0; i < 6; ++i) ps.push_back(zeros({half_mib}));
  std::vector<size_t> order = {5, 4, 3, 2, 1, 0};
  const size_t mib = 1 << 20;
  auto b = compute_bucket_assignment(ps, order, mib, mib + mib / 2);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0], (std::vector<size_t>{5, 4}));     // 1 MiB closes the first bucket
  EXPECT_EQ(b[1], (std::vector<size_t>{3, 2, 1}));  // then 1.5 MiB
  EXPECT_EQ(b[2], (std::vector<size_t>{0}));
}

TEST(BucketAssignment, KeyedByDtype) {
  std::vector<Tensor> ps = {zeros({10}), zeros({10}, {.dtype = DType::f64}), zeros({10})};
  auto b = compute_bucket_assignment(ps, {2, 1, 0}, 1 << 20, 1 << 20);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0], (std::vector<size_t>{2, 0}));
  EXPECT_EQ(b[1], (std::vector<size_t>{1}));
}

TEST(Reducer, GradsAreViewsIntoBuckets) {
  manual_seed(1);
  auto net = std::make_shared<Net>();
  run_ranks(1, [&](int, std::shared_ptr<FakeGroup> g) {
    DDP ddp(net, g, small_buckets(1e-4));
    EXPECT_GT(ddp.reducer().num_buckets(), 1);
    const Tensor x = randn({5, 6});
    for (int step = 0; step < 2; ++step) {
      ops::sum(ddp.forward(x)).backward();
      const auto& ps = ddp.reducer().params();
      for (size_t i = 0; i < ps.size(); ++i) {
        const Tensor gr = ps[i].second.grad();
        ASSERT_TRUE(gr.defined());
        bool inside = false;
        for (int64_t b = 0; b < ddp.reducer().num_buckets(); ++b) {
          const Tensor& buf = ddp.reducer().bucket_buffer(b);
          const auto* lo = static_cast<const char*>(buf.data_ptr());
          const auto* p = static_cast<const char*>(gr.data_ptr());
          inside = inside || (p >= lo && p + gr.nbytes() <= lo + buf.nbytes());
        }
        EXPECT_TRUE(inside) << ps[i].first << " step " << step;
      }
      sgd_step(*net, 0.1);
    }
  });
}

TEST(Reducer, LaunchesInIndexOrderAndRebuildsInReadyOrder) {
  manual_seed(2);
  auto net = std::make_shared<Reversed>();
  run_ranks(1, [&](int, std::shared_ptr<FakeGroup> g) {
    // Tiny caps: one parameter per bucket.
    DDP ddp(net, g, small_buckets(1e-6));
    Reducer& red = ddp.reducer();
    ASSERT_EQ(red.num_buckets(), 4);
    // Reverse registration order: b.bias, b.weight, a.bias, a.weight.
    EXPECT_EQ(red.params()[red.bucket_params(0)[0]].first, "b.bias");
    const Tensor x = randn({3, 4});
    ops::sum(ddp.forward(x)).backward();
    EXPECT_EQ(red.launch_order(), (std::vector<int64_t>{0, 1, 2, 3}));
    const auto ready = red.ready_order();
    ASSERT_EQ(ready.size(), 4u);
    EXPECT_EQ(red.params()[ready[0]].first.substr(0, 2), "a.");  // a's grads come first
    EXPECT_FALSE(red.buckets_rebuilt());
    sgd_step(*net, 0.1);
    ops::sum(ddp.forward(x)).backward();
    EXPECT_TRUE(red.buckets_rebuilt());
    for (int64_t b = 0; b < 4; ++b) EXPECT_EQ(red.bucket_params(b)[0], ready[b]) << b;
    EXPECT_EQ(red.launch_order(), (std::vector<int64_t>{0, 1, 2, 3}));
    // After the rebuild each bucket launches as soon as its gradient is ready.
    EXPECT_EQ(red.ready_order(), ready);
  });
}

// DDP over `world` thread-ranks vs one model trained on the union batch.
void check_equivalence(int world, bool no_sync, bool unused,
                       std::function<std::shared_ptr<CommHook>()> hook = nullptr, double tol = 1e-5,
                       int steps = 3, const std::function<void(DDPOptions&)>& adjust = {},
                       const std::function<void(int, DDP&)>& after = {}) {
  const int64_t b = 4;
  manual_seed(7);
  auto ref = std::make_shared<Net>(unused);
  std::vector<std::shared_ptr<Net>> nets;
  for (int r = 0; r < world; ++r) {
    manual_seed(100 + r);  // different inits: DDP must broadcast rank 0's
    nets.push_back(std::make_shared<Net>(unused));
  }
  nets[0]->load_state_dict(ref->state_dict());
  const int micro = no_sync ? 2 : 1;
  std::vector<Tensor> xs, ys;
  for (int s = 0; s < steps * micro; ++s) {
    xs.push_back(randn({world * b, 6}));
    ys.push_back(randn({world * b, 3}));
  }
  const double lr = 0.1;
  for (int s = 0; s < steps; ++s) {
    for (int m = 0; m < micro; ++m)
      ops::mse_loss(ref->forward(xs[s * micro + m]), ys[s * micro + m]).backward();
    sgd_step(*ref, lr);
  }
  run_ranks(world, [&](int r, std::shared_ptr<FakeGroup> g) {
    DDPOptions o = small_buckets(1e-4, unused);
    if (adjust) adjust(o);
    DDP ddp(nets[r], g, o);
    if (hook) ddp.register_comm_hook(hook());
    for (int s = 0; s < steps; ++s) {
      accumulate_step(ddp, xs, ys, s, micro, r, b,
                      [](const Tensor& out, const Tensor& y) { return ops::mse_loss(out, y); });
      sgd_step(*nets[r], lr);
    }
    if (after) after(r, ddp);
  });
  const auto want = params_of(*ref);
  for (int r = 0; r < world; ++r) {
    const auto got = params_of(*nets[r]);
    for (size_t i = 0; i < want.size(); ++i)
      expect_close(got[i], want[i], tol, tol,
                   "rank " + std::to_string(r) + " param " + std::to_string(i));
  }
}

TEST(DDPThreads, EqualsUnionBatchWorld2) {
  check_equivalence(2, false, false);
}
TEST(DDPThreads, EqualsUnionBatchWorld3) {
  check_equivalence(3, false, false);
}
TEST(DDPThreads, NoSyncAccumulates) {
  check_equivalence(2, true, false);
}
TEST(DDPThreads, FindUnusedParameters) {
  check_equivalence(2, false, true);
}
TEST(DDPThreads, Bf16CompressionIsClose) {
  check_equivalence(2, false, false, bf16_compress_hook, 2e-2);
}
TEST(DDPThreads, Fp16CompressionWithNoSyncIsClose) {
  check_equivalence(2, true, false, fp16_compress_hook, 3e-3);
}
// PowerSGD at full rank (every matrix compressed, r = min(n, m)) loses
// nothing: P spans the averaged gradient's columns, so P P^T M = M.
TEST(DDPThreads, FullRankPowerSGDEqualsTheUnionBatch) {
  check_equivalence(
      3, true, false,
      [] {
        return powersgd_hook({.matrix_approximation_rank = 8,
                              .start_powerSGD_iter = 0,
                              .min_compression_rate = 1e-3,
                              .use_error_feedback = false,
                              .warm_start = false});
      },
      1e-4);
}

// The timed plan: buckets in ready order after the first backward, cut again
// after timed_plan_steps more; every rank holds rank 0's plan, each bucket a
// run of the ready order, and training still equals one process.
TEST(DDPThreads, TimedPlanIsRankZerosCutOfTheReadyOrder) {
  std::vector<std::vector<std::vector<size_t>>> buckets(2);
  std::vector<size_t> ready0;
  check_equivalence(
      2, false, false, nullptr, 1e-5, /*steps=*/6,
      [](DDPOptions& o) {
        o.reducer.bucket_cap_mb = 25;
        o.reducer.first_bucket_mb = 1e-4;
        o.reducer.bucket_plan = BucketPlan::timed;
      },
      [&](int r, DDP& ddp) {
        Reducer& red = ddp.reducer();
        EXPECT_TRUE(red.buckets_planned());
        ASSERT_TRUE(red.allreduce_cost().has_value());
        EXPECT_GE(red.allreduce_cost()->latency_s, 0.0);
        EXPECT_GT(red.allreduce_cost()->bytes_per_s, 0.0);
        for (int64_t b = 0; b < red.num_buckets(); ++b) buckets[r].push_back(red.bucket_params(b));
        if (r == 0) ready0 = red.ready_order();
      });
  EXPECT_EQ(buckets[0], buckets[1]);
  std::vector<size_t> flat;
  for (const auto& b : buckets[0]) flat.insert(flat.end(), b.begin(), b.end());
  EXPECT_EQ(flat, ready0);
}

TEST(Reducer, TimedPlanWaitsForWarmSteps) {
  manual_seed(5);
  auto n0 = std::make_shared<Net>(), n1 = std::make_shared<Net>();
  run_ranks(2, [&](int r, std::shared_ptr<FakeGroup> g) {
    DDPOptions o;
    o.reducer.bucket_plan = BucketPlan::timed;
    DDP ddp(r == 0 ? n0 : n1, g, o);
    const Tensor x = randn({3, 6});
    std::vector<std::pair<bool, bool>> seen;  // (rebuilt, planned) at each backward
    for (int s = 0; s < 6; ++s) {
      ops::sum(ddp.forward(x)).backward();
      seen.emplace_back(ddp.reducer().buckets_rebuilt(), ddp.reducer().buckets_planned());
      EXPECT_GE(ddp.reducer().last_stats().exposed_s, 0.0);
      EXPECT_NEAR(ddp.reducer().last_stats().exposed_s + ddp.reducer().last_stats().hidden_s,
                  ddp.reducer().last_stats().comm_s, 1e-9);
    }
    // Ready order after the first, the plan after 3 more timed ones.
    const std::vector<std::pair<bool, bool>> want = {{false, false}, {true, false}, {true, false},
                                                     {true, false},  {true, true},  {true, true}};
    EXPECT_EQ(seen, want);
  });
  // A group of one rank has nothing to plan for.
  run_ranks(1, [&](int, std::shared_ptr<FakeGroup> g) {
    DDP ddp(n0, g);
    for (int s = 0; s < 6; ++s) ops::sum(ddp.forward(randn({3, 6}))).backward();
    EXPECT_TRUE(ddp.reducer().buckets_rebuilt());
    EXPECT_FALSE(ddp.reducer().buckets_planned());
    EXPECT_FALSE(ddp.reducer().allreduce_cost().has_value());
  });
}

TEST(DDPThreads, UnusedParameterWithoutFlagNamesIt) {
  manual_seed(3);
  auto n0 = std::make_shared<Net>(true), n1 = std::make_shared<Net>(true);
  std::vector<std::string> msgs(2);
  run_ranks(2, [&](int r, std::shared_ptr<FakeGroup> g) {
    DDP ddp(r == 0 ? n0 : n1, g);
    try {
      ops::sum(ddp.forward(randn({2, 6}))).backward();
    } catch (const Error& e) {
      msgs[r] = e.what();
    }
  });
  for (const auto& m : msgs) {
    EXPECT_NE(m.find("unused.weight"), std::string::npos) << m;
    EXPECT_NE(m.find("find_unused_parameters = true"), std::string::npos) << m;
  }
}

TEST(DDPThreads, DifferentModelsAreAnError) {
  auto n0 = std::make_shared<Net>(false), n1 = std::make_shared<Net>(true);
  std::vector<std::string> msgs(2);
  run_ranks(2, [&](int r, std::shared_ptr<FakeGroup> g) {
    try {
      DDP ddp(r == 0 ? n0 : n1, g);
    } catch (const Error& e) {
      msgs[r] = e.what();
    }
  });
  EXPECT_NE(msgs[0].find("different models"), std::string::npos) << msgs[0];
  EXPECT_NE(msgs[1].find("unused.weight"), std::string::npos) << msgs[1];
}

// Two thread ranks of one seeded Net, each under a DDP that records its
// timeline to `path` from step 2 on (`steps` steps, 0 for one), run `steps_of`
// (r, ddp).
template <typename Steps>
void timeline_ranks(const std::string& path, int64_t steps, Steps steps_of) {
  manual_seed(4);
  auto n0 = std::make_shared<Net>(), n1 = std::make_shared<Net>();
  run_ranks(2, [&](int r, std::shared_ptr<FakeGroup> g) {
    DDPOptions o = small_buckets(1e-4);
    o.timeline_path = path;
    o.timeline_step = 2;
    o.timeline_steps = steps;
    DDP ddp(r == 0 ? n0 : n1, g, o);
    steps_of(r, ddp);
  });
}

// With timeline_steps, one of that many steps is written: the median-length.
TEST(DDPThreads, TimelineOfTheMedianStep) {
  tcv::testing::TempDir dir("ddp_timeline");
  const std::string path = (dir.root() / "trace.json").string();
  timeline_ranks(path, 3, [&](int r, DDP& ddp) {
    // Steps 2, 3 and 4 are each complete at the next forward: written at the 5th.
    for (int s = 0; s < 5; ++s) {
      ops::sum(ddp.forward(randn({2, 6}))).backward();
      if (r == 0) {
        EXPECT_EQ(std::filesystem::exists(path), s == 4) << "step " << s + 1;
      }
    }
  });
  const int64_t step = json_int(json_parse(tcv::testing::slurp(path)).at("otherData"), "step");
  EXPECT_GE(step, 2);
  EXPECT_LE(step, 4);
}

TEST(DDPThreads, TimelineAndStats) {
  tcv::testing::TempDir dir("ddp_timeline");
  const std::string path = (dir.root() / "trace.json").string();
  timeline_ranks(path, 0, [&](int, DDP& ddp) {
    for (int s = 0; s < 3; ++s) {
      ops::sum(ddp.forward(randn({2, 6}))).backward();
      EXPECT_EQ(ddp.reducer().last_stats().num_buckets, ddp.reducer().num_buckets());
      EXPECT_GE(ddp.reducer().last_stats().comm_s, 0.0);
    }
  });
  ASSERT_TRUE(std::filesystem::exists(path));
  const std::string j = tcv::testing::slurp(path);
  EXPECT_NE(j.find("\"traceEvents\""), std::string::npos);
  EXPECT_NE(j.find("allreduce bucket 0"), std::string::npos);
  EXPECT_NE(j.find("\"forward\""), std::string::npos);
  EXPECT_NE(j.find("\"backward\""), std::string::npos);
  EXPECT_NE(j.find("\"bytes\""), std::string::npos);
  // Well-formed, as Chrome and Perfetto need: one all-reduce span per bucket.
  const Json trace = json_parse(j);
  int64_t allreduce_spans = 0;
  for (const Json& e : trace.at("traceEvents"))
    if (json_string(e, "ph") == "X" && json_int(e, "tid") == 1) ++allreduce_spans;
  EXPECT_GT(allreduce_spans, 1);
  EXPECT_EQ(allreduce_spans, json_int(trace.at("otherData"), "num_buckets"));
  // What the projection reads: the step's span, every gradient's ready time.
  const Json& other = trace.at("otherData");
  EXPECT_GT(json_double(other, "step_ms"), 0.0);
  EXPECT_EQ(json_int(other, "world"), 2);
  EXPECT_NEAR(json_double(other, "hidden_ms") + json_double(other, "exposed_ms"),
              json_double(other, "comm_ms"), 2e-3);
  ASSERT_EQ(other.at("params").size(), 4u);
  for (const Json& p : other.at("params")) {
    EXPECT_GE(json_double(p, "ready_us"), json_double(other, "backward_begin_us"));
    EXPECT_LE(json_double(p, "ready_us"), json_double(other, "backward_end_us"));
  }
}

}  // namespace
}  // namespace tcv::dist
