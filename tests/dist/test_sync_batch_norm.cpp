// SyncBatchNorm: its gradient (f64 finite differences), and with 2 thread-ranks
// over the in-process FakeGroup, equality with BatchNorm on the union batch:
// the op (f64, fused activations, f32 blocked within the batch-norm bound,
// large means) and a whole network converted to it.
#include <gtest/gtest.h>

#include <thread>

#include "dist/ddp.h"
#include "dist/fake_group.h"
#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/rng.h"
#include "layers/conv.h"
#include "layers/sequential.h"
#include "layers/sync_batch_norm.h"
#include "models/pose/openpose.h"
#include "support/error_bound.h"
#include "support/golden_model.h"
#include "support/gradcheck.h"

namespace tcv {
namespace {

using tcv::testing::check_gradients;
using tcv::testing::expect_close;
using tcv::testing::rand_f64;

// A pretend group of 2 whose all-reduce is the identity: the sync path on local data.
nn::SyncBNGroup local_group() {
  return {2, [](const Tensor&) {}};
}

TEST(SyncBatchNorm, LocalGroupMatchesBatchNorm) {
  const Tensor x = rand_f64({3, 4, 5, 2}, 1);
  const Tensor w = rand_f64({4}, 2), b = rand_f64({4}, 3);
  Tensor rm1 = zeros({4}, {.dtype = DType::f64}), rv1 = ones({4}, {.dtype = DType::f64});
  Tensor rm2 = rm1.clone(), rv2 = rv1.clone();
  const Tensor want = ops::batch_norm(x, w, b, rm1, rv1, {.training = true});
  const Tensor got = ops::sync_batch_norm(x, w, b, rm2, rv2, local_group());
  expect_close(got, want, 1e-10, 1e-8, "y");
  expect_close(rm2, rm1, 1e-12, 1e-10, "running_mean");
  expect_close(rv2, rv1, 1e-12, 1e-10, "running_var");
}

TEST(SyncBatchNorm, HalfInputComputesInF32) {
  const Tensor x = rand_f64({3, 4, 5, 2}, 7, -2.0, 2.0, false).to(DType::bf16);
  const Tensor w = rand_f64({4}, 8, 0.5, 1.5, false).to(DType::f32);
  Tensor rm = zeros({4}), rv = ones({4});
  const Tensor got = ops::sync_batch_norm(x, w, Tensor(), rm, rv, local_group());
  EXPECT_EQ(got.dtype(), DType::bf16);
  Tensor rm2 = zeros({4}), rv2 = ones({4});
  const Tensor want = ops::batch_norm(x, w, Tensor(), rm2, rv2, {.training = true});
  expect_close(got.to(DType::f32), want.to(DType::f32), 1e-2, 1e-2, "bf16 y");
  expect_close(rm, rm2, 1e-6, 1e-5, "running_mean");
}

TEST(SyncBatchNorm, GradCheck) {
  const auto g = local_group();
  check_gradients("sync_batch_norm",
                  [&](const std::vector<Tensor>& in) {
                    return ops::sync_batch_norm(in[0], in[1], in[2], Tensor(), Tensor(), g);
                  },
                  {rand_f64({3, 2, 3, 2}, 4), rand_f64({2}, 5), rand_f64({2}, 6)});
}

using Act = ops::SyncBatchNormParams::Act;

struct RankOut {
  Tensor y, dx, dweight, dbias, running_mean, running_var;
};

// sync_batch_norm on `world` thread-ranks over the FakeGroup: rank r takes its
// equal share of the rows of x and dy (f64 or f32), in the blocked layout if
// asked, and backpropagates dy.
std::vector<RankOut> run_ranks(int world, const Tensor& x, const Tensor& dy, const Tensor& w,
                               const Tensor& b, Act act, bool blocked) {
  auto fw = std::make_shared<dist::testing::FakeWorld>(world);
  const int64_t rows = x.size(0) / world, c = x.size(1);
  std::vector<RankOut> out(world);
  std::vector<std::thread> ts;
  for (int r = 0; r < world; ++r)
    ts.emplace_back([&, r] {
      auto g = dist::sync_bn_group(std::make_shared<dist::testing::FakeGroup>(fw, r));
      Tensor xi = x.narrow(0, r * rows, rows).clone();
      if (blocked) xi = to_blocked(xi);
      xi.set_requires_grad(true);
      Tensor wi = w.clone().set_requires_grad(true), bi = b.clone().set_requires_grad(true);
      RankOut& o = out[r];
      o.running_mean = zeros({c}, {.dtype = x.dtype()});
      o.running_var = ones({c}, {.dtype = x.dtype()});
      o.y = ops::sync_batch_norm(xi, wi, bi, o.running_mean, o.running_var, *g, {.act = act});
      o.y.backward(dy.narrow(0, r * rows, rows).contiguous());
      o.dx = xi.grad();
      o.dweight = wi.grad();
      o.dbias = bi.grad();
    });
  for (auto& t : ts) t.join();
  return out;
}

TEST(SyncBatchNorm, TwoRanksEqualBatchNormOnTheUnionBatch) {
  const int world = 2;
  const Tensor x = rand_f64({6, 3, 4, 4}, 7, -1, 1, false);
  const Tensor dy = rand_f64({6, 3, 4, 4}, 8, -1, 1, false);
  const Tensor w0 = rand_f64({3}, 9, 0.5, 1.5, false), b0 = rand_f64({3}, 10, -1, 1, false);
  for (const Act act : {Act::none, Act::relu, Act::relu6}) {
    SCOPED_TRACE(static_cast<int>(act));
    // Reference on the union batch: batch_norm with the same fused activation
    // (relu6 where some outputs pass 6: weight ×4).
    const double wscale = act == Act::relu6 ? 4.0 : 1.0;
    const Tensor w = w0 * wscale;
    Tensor xr = x.clone().set_requires_grad(true), wr = w.clone().set_requires_grad(true),
           br = b0.clone().set_requires_grad(true);
    Tensor rm = zeros({3}, {.dtype = DType::f64}), rv = ones({3}, {.dtype = DType::f64});
    const auto bn = act == Act::none   ? ops::batch_norm
                    : act == Act::relu ? ops::batch_norm_relu
                                       : ops::batch_norm_relu6;
    Tensor yr = bn(xr, wr, br, rm, rv, {.training = true});
    yr.backward(dy);
    if (act == Act::relu6) {
      EXPECT_GT(ops::sum(ops::gt(yr.detach(), 5.999).to(DType::f64)).item(), 0);
    }
    const std::vector<RankOut> out = run_ranks(world, x, dy, w, b0, act, false);
    for (int r = 0; r < world; ++r) {
      expect_close(out[r].y, yr.narrow(0, r * 3, 3), 1e-10, 1e-8, "y");
      expect_close(out[r].dx, xr.grad().narrow(0, r * 3, 3), 1e-10, 1e-8, "dx");
      expect_close(out[r].running_mean, rm, 1e-12, 1e-10, "running_mean");
      expect_close(out[r].running_var, rv, 1e-12, 1e-10, "running_var");
    }
    // weight/bias gradients are local: their sum over ranks is the union's.
    expect_close(out[0].dweight + out[1].dweight, wr.grad(), 1e-10, 1e-8, "dweight");
    expect_close(out[0].dbias + out[1].dbias, br.grad(), 1e-10, 1e-8, "dbias");
  }
}

// f32 on 2 ranks, a blocked input (what the CPU convolutions write), against
// the exact (f64) union-batch result within the f32 batch-norm bound
// (support/error_bound.h: any summation order, which the split over ranks is);
// the output keeps the layout.
TEST(SyncBatchNorm, BlockedF32TwoRanksWithinTheBoundOfTheUnionBatch) {
  for (const Act act : {Act::none, Act::relu}) {
    SCOPED_TRACE(act == Act::relu ? "relu" : "none");
    const Shape shape{4, 32, 5, 6};
    const Tensor x64 = rand_f64(shape, 30, -2, 3, false).to(DType::f32).to(DType::f64);
    const Tensor dy64 = rand_f64(shape, 31, -1, 1, false).to(DType::f32).to(DType::f64);
    const Tensor w64 = rand_f64({32}, 32, 0.5, 1.5, false).to(DType::f32).to(DType::f64);
    const Tensor b64 = rand_f64({32}, 33, -0.5, 0.5, false).to(DType::f32).to(DType::f64);
    Tensor xr = x64.clone().set_requires_grad(true), wr = w64.clone().set_requires_grad(true),
           br = b64.clone().set_requires_grad(true);
    Tensor yr = (act == Act::relu ? ops::batch_norm_relu : ops::batch_norm)(
        xr, wr, br, Tensor(), Tensor(), {.training = true});
    yr.backward(dy64);
    // The relu masks dy by the exact output; the bounds are those of batch norm
    // on the masked dy (no output here is within its bound of 0).
    const Tensor dy_eff = act == Act::relu ? dy64 * ops::gt(yr.detach(), 0.0).to(DType::f64) : dy64;
    const testing::BatchNormBounds bound =
        testing::batch_norm_f32_bounds({.x = x64, .weight = w64, .bias = b64, .dy = dy_eff});
    const std::vector<RankOut> out = run_ranks(2, x64.to(DType::f32), dy64.to(DType::f32),
                                               w64.to(DType::f32), b64.to(DType::f32), act, true);
    for (int r = 0; r < 2; ++r) {
      EXPECT_TRUE(out[r].y.is_blocked());
      testing::expect_within(out[r].y.to(DType::f64), yr.narrow(0, r * 2, 2),
                             bound.y.narrow(0, r * 2, 2), "y");
      testing::expect_within(out[r].dx.to(DType::f64), xr.grad().narrow(0, r * 2, 2),
                             bound.dx.narrow(0, r * 2, 2), "dx");
    }
    testing::expect_within(out[0].dweight.to(DType::f64) + out[1].dweight.to(DType::f64), wr.grad(),
                           bound.dweight, "dweight");
    testing::expect_within(out[0].dbias.to(DType::f64) + out[1].dbias.to(DType::f64), br.grad(),
                           bound.dbias, "dbias");
  }
}

// Values 1000 ± 0.01 (f32 holds them to 6e-5), as BatchNorm.F32LargeMean-
// SmallSpreadMatchesF64: f32 on 2 ranks within 1e-5 of the same f64 run.
// Combining the ranks' means as rounded to f32 (without the part the rounding
// lost) left y 1.6e-3, dx 1.9e-4 and dweight 2.7e-3 away.
TEST(SyncBatchNorm, F32LargeMeanSmallSpreadMatchesF64) {
  const Shape shape{8, 4, 6, 6};
  const Tensor x = rand_f64(shape, 61, 1000.0 - 0.01, 1000.0 + 0.01, false).to(DType::f32);
  const Tensor dy = rand_f64(shape, 62, -1, 1, false).to(DType::f32);
  const Tensor w = rand_f64({4}, 63, 0.5, 1.5, false).to(DType::f32);
  const Tensor b = rand_f64({4}, 64, -0.1, 0.1, false).to(DType::f32);
  std::vector<std::vector<RankOut>> runs;
  for (const DType dt : {DType::f32, DType::f64})
    runs.push_back(run_ranks(2, x.to(dt), dy.to(dt), w.to(dt), b.to(dt), Act::none, false));
  // ‖f32 − f64‖∞ / ‖f64‖∞.
  const auto max_rel = [](const Tensor& a, const Tensor& ref) {
    return testing::golden_rel_error(a.to_vector<double>(), ref.to_vector<double>());
  };
  for (int r = 0; r < 2; ++r) {
    EXPECT_LT(max_rel(runs[0][r].y, runs[1][r].y), 1e-5);
    EXPECT_LT(max_rel(runs[0][r].dx, runs[1][r].dx), 1e-5);
    EXPECT_LT(max_rel(runs[0][r].dweight, runs[1][r].dweight), 1e-5);
    EXPECT_LT(max_rel(runs[0][r].dbias, runs[1][r].dbias), 1e-5);
    EXPECT_LT(max_rel(runs[0][r].running_var, runs[1][r].running_var), 1e-5);
  }
}

// A whole network: openpose_lite (BatchNorm + ReLU pairs fused, blocked
// activations on the CPU) converted to SyncBatchNorm on 2 thread-ranks, each
// with half the batch, against the unconverted network on the whole batch:
// the outputs, and the gradients summed over the ranks (what DDP all-reduces).
// Tolerance 1e-3 of the largest value: f32 rounding through about twenty
// layers (Winograd's at most 1e-4 relative each, first order), where batch
// statistics over each rank's half alone move the values by O(1).
TEST(SyncBatchNorm, TwoRankNetworkMatchesOneProcess) {
  const int64_t batch = 4;
  const Tensor x = rand_f64({batch, 3, 48, 48}, 40, -1, 1, false).to(DType::f32);
  auto reference = models::pose::openpose_lite();
  reference->train();
  const models::pose::PoseOutput ro = reference->forward_stages(x);
  const auto loss_of = [](const models::pose::PoseOutput& o) {
    Tensor l = ops::sum(ops::square(o.pafs.back())) + ops::sum(ops::square(o.heatmaps.back()));
    for (size_t s = 0; s + 1 < o.pafs.size(); ++s)
      l = l + ops::sum(o.pafs[s]) + ops::sum(o.heatmaps[s]);
    return l;
  };
  loss_of(ro).backward();
  auto fw = std::make_shared<dist::testing::FakeWorld>(2);
  std::vector<std::shared_ptr<models::pose::OpenPose>> replicas(2);
  std::vector<Tensor> outs(2);
  std::vector<std::thread> ts;
  for (int r = 0; r < 2; ++r) {
    replicas[r] = models::pose::openpose_lite();
    replicas[r]->load_state_dict(reference->state_dict());
    nn::convert_sync_batchnorm(
        *replicas[r], dist::sync_bn_group(std::make_shared<dist::testing::FakeGroup>(fw, r)));
    replicas[r]->train();
  }
  for (int r = 0; r < 2; ++r)
    ts.emplace_back([&, r] {
      const models::pose::PoseOutput o =
          replicas[r]->forward_stages(x.narrow(0, r * batch / 2, batch / 2).contiguous());
      outs[r] = o.heatmaps.back().detach();
      loss_of(o).backward();
    });
  for (auto& t : ts) t.join();
  const Tensor want = ro.heatmaps.back().detach();
  for (int r = 0; r < 2; ++r)
    expect_close(outs[r], want.narrow(0, r * batch / 2, batch / 2), 1e-4, 1e-3, "heatmaps");
  const auto params = reference->named_parameters();
  const auto p0 = replicas[0]->named_parameters(), p1 = replicas[1]->named_parameters();
  ASSERT_EQ(p0.size(), params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    SCOPED_TRACE(params[i].first);
    const Tensor g = params[i].second.grad();
    const double scale = ops::max(ops::abs(g)).item();
    expect_close(p0[i].second.grad() + p1[i].second.grad(), g, 1e-3 * scale, 1e-3, "grad");
  }
}

TEST(SyncBatchNorm, ConvertKeepsStateAndHandles) {
  auto bn = std::make_shared<nn::BatchNorm2d>(4);
  nn::Sequential seq{std::make_shared<nn::Conv2d>(2, 4, 3), bn};
  {
    NoGradGuard ng;
    bn->running_mean.fill_(0.5);
  }
  const auto before = seq.state_dict();
  EXPECT_EQ(nn::convert_sync_batchnorm(seq, std::make_shared<nn::SyncBNGroup>(local_group())), 1);
  EXPECT_EQ(bn->type_name(), "SyncBatchNorm");
  const auto after = seq.state_dict();
  ASSERT_EQ(after.size(), before.size());
  for (size_t i = 0; i < after.size(); ++i) {
    EXPECT_EQ(after[i].first, before[i].first);
    EXPECT_EQ(after[i].second.data_ptr(), before[i].second.data_ptr());
  }
  // World size 1: exactly BatchNorm2d.
  nn::SyncBatchNorm solo(4, {}, std::make_shared<nn::SyncBNGroup>(nn::SyncBNGroup{1, nullptr}));
  nn::BatchNorm2d plain(4);
  const Tensor x = randn({2, 4, 3, 3});
  expect_close(solo.forward(x), plain.forward(x), 0, 0, "world 1");
}

}  // namespace
}  // namespace tcv
