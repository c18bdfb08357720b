// batch_norm: known values, running-stat updates as PyTorch does them, f64
// gradient checks, and the f32 path against the f64 reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <tuple>
#include <vector>

#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/profiler.h"
#include "kernels/cpu/batch_norm.h"
#include "support/error_bound.h"
#include "support/gradcheck.h"

namespace tcv {
namespace {

using testing::check_gradients;
using testing::expect_close;
using testing::rand_f64;

TEST(BatchNorm, KnownValuesTraining) {
  // One channel holding 1, 2, 3, 4: mean 2.5, biased var 1.25.
  Tensor x = from_vector<float>({1, 2, 3, 4}, {2, 1, 2, 1});
  Tensor w = full({1}, 2.0), b = full({1}, 0.5);
  Tensor y = ops::batch_norm(x, w, b, Tensor(), Tensor(), /*training=*/true, 0.1, 0.0 + 1e-5);
  const double invstd = 1.0 / std::sqrt(1.25 + 1e-5);
  const std::vector<float> got = y.to_vector<float>();
  const double xs[] = {1, 2, 3, 4};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(got[i], (xs[i] - 2.5) * invstd * 2.0 + 0.5, 1e-5);
}

TEST(BatchNorm, RunningStatsUpdateLikePyTorch) {
  for (DType dt : {DType::f32, DType::f64}) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor x = rand_f64({4, 3, 5, 2}, 1, -2, 3, false).to(dt);
    Tensor rm = from_vector<double>({0.5, -1.0, 2.0}).to(dt);
    Tensor rv = from_vector<double>({1.0, 2.0, 0.5}).to(dt);
    const uint32_t v_mean = rm.version(), v_var = rv.version();
    ops::batch_norm(x, Tensor(), Tensor(), rm, rv, /*training=*/true, /*momentum=*/0.2);
    EXPECT_GT(rm.version(), v_mean);
    EXPECT_GT(rv.version(), v_var);
    // Closed form: momentum-weighted with the batch mean and the unbiased variance.
    const Tensor xd = x.to(DType::f64);
    const std::vector<double> mean = ops::mean(xd, {0, 2, 3}).to_vector<double>();
    const std::vector<double> uvar = ops::var(xd, {0, 2, 3}, /*correction=*/1).to_vector<double>();
    const double rm0[] = {0.5, -1.0, 2.0}, rv0[] = {1.0, 2.0, 0.5};
    const std::vector<double> rmv = rm.to_vector<double>(), rvv = rv.to_vector<double>();
    for (int c = 0; c < 3; ++c) {
      EXPECT_NEAR(rmv[c], 0.8 * rm0[c] + 0.2 * mean[c], 1e-5);
      EXPECT_NEAR(rvv[c], 0.8 * rv0[c] + 0.2 * uvar[c], 1e-5);
    }
  }
}

TEST(BatchNorm, EvalUsesRunningStats) {
  Tensor x = from_vector<float>({1, 2, 3, 4, 5, 6}, {3, 2});  // (N, C)
  Tensor rm = from_vector<float>({1, 2}), rv = from_vector<float>({4, 9});
  Tensor w = from_vector<float>({1, 2}), b = from_vector<float>({0, 1});
  Tensor y = ops::batch_norm(x, w, b, rm, rv, /*training=*/false, 0.1, 1e-5);
  const std::vector<float> got = y.to_vector<float>();
  const float xs[] = {1, 2, 3, 4, 5, 6};
  for (int i = 0; i < 6; ++i) {
    const int c = i % 2;
    const double expect = (xs[i] - (c ? 2 : 1)) / std::sqrt((c ? 9 : 4) + 1e-5) * (c ? 2 : 1) + c;
    EXPECT_NEAR(got[i], expect, 1e-5) << i;
  }
  // Eval leaves the running statistics alone.
  EXPECT_EQ(rm.to_vector<float>(), (std::vector<float>{1, 2}));
  EXPECT_EQ(rv.to_vector<float>(), (std::vector<float>{4, 9}));
}

struct Case {
  const char* name;
  Shape x;
  bool affine;
  bool training;
};

std::vector<Case> cases() {
  return {
      {"train_affine_4d", {3, 4, 3, 2}, true, true}, {"train_plain_4d", {2, 3, 2, 3}, false, true},
      {"eval_affine_4d", {2, 3, 3, 3}, true, false}, {"eval_plain_4d", {2, 3, 2, 2}, false, false},
      {"train_affine_2d", {6, 5}, true, true},       {"train_affine_3d", {2, 3, 7}, true, true}};
}

Tensor run_bn(const Case& c, const std::vector<Tensor>& in) {
  // Running statistics are fresh per call, so repeated evaluations agree.
  const int64_t ch = c.x[1];
  Tensor rm = c.training ? zeros({ch}, {.dtype = in[0].dtype()})
                         : from_vector<double>(std::vector<double>(ch, 0.1)).to(in[0].dtype());
  Tensor rv = c.training ? ones({ch}, {.dtype = in[0].dtype()})
                         : from_vector<double>(std::vector<double>(ch, 0.7)).to(in[0].dtype());
  return ops::batch_norm(in[0], c.affine ? in[1] : Tensor(), c.affine ? in[2] : Tensor(), rm, rv,
                         c.training, 0.1, 1e-5);
}

TEST(BatchNorm, GradCheckF64) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    std::vector<Tensor> in{rand_f64(c.x, 1), rand_f64({c.x[1]}, 2, 0.5, 1.5),
                           rand_f64({c.x[1]}, 3)};
    check_gradients(std::string("batch_norm/") + c.name,
                    [&](const std::vector<Tensor>& v) { return run_bn(c, v); }, in,
                    {.eps = 1e-6, .atol = 1e-7, .rtol = 1e-5});
  }
}

TEST(BatchNorm, F32MatchesReference) {
  std::vector<Case> all = cases();
  all.push_back({"train_affine_c32", {8, 32, 7, 5}, true, true});
  all.push_back({"eval_affine_c32", {4, 32, 6, 6}, true, false});
  uint64_t seed = 100;
  for (const Case& c : all) {
    SCOPED_TRACE(c.name);
    seed += 10;
    std::vector<Tensor> in64{rand_f64(c.x, seed, -2, 3), rand_f64({c.x[1]}, seed + 1, 0.5, 1.5),
                             rand_f64({c.x[1]}, seed + 2)};
    std::vector<Tensor> in32;
    for (const Tensor& t : in64) {
      Tensor f = t.detach().to(DType::f32);
      f.set_requires_grad(true);
      in32.push_back(f);
    }
    Tensor y64 = run_bn(c, in64);
    Tensor dy = rand_f64(y64.shape(), seed + 3, -1, 1, false);
    y64.backward(dy);
    Tensor y32 = run_bn(c, in32);
    y32.backward(dy.to(DType::f32));
    const int64_t ch = c.x[1];
    const testing::BatchNormBounds bound =
        testing::batch_norm_f32_bounds({.x = in64[0],
                                        .weight = c.affine ? in64[1] : Tensor(),
                                        .bias = c.affine ? in64[2] : Tensor(),
                                        .dy = dy,
                                        .training = c.training,
                                        .running_mean = full({ch}, 0.1, {.dtype = DType::f64}),
                                        .running_var = full({ch}, 0.7, {.dtype = DType::f64})});
    const std::string name = c.name;
    testing::expect_within(y32, y64, bound.y, name + " y");
    testing::expect_within(in32[0].grad(), in64[0].grad(), bound.dx, name + " dx");
    if (c.affine) {
      testing::expect_within(in32[1].grad(), in64[1].grad(), bound.dweight, name + " dweight");
      testing::expect_within(in32[2].grad(), in64[2].grad(), bound.dbias, name + " dbias");
    }
  }
}

// ‖actual − expected‖∞ / ‖expected‖∞.
double max_rel(const Tensor& actual, const Tensor& expected) {
  const std::vector<double> a = actual.to_vector<double>(), e = expected.to_vector<double>();
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::abs(a[i] - e[i]));
    scale = std::max(scale, std::abs(e[i]));
  }
  return diff / scale;
}

TEST(BatchNorm, F32LargeMeanSmallSpreadMatchesF64) {
  // Values 1000 ± 0.01 (f32 holds them to 6e-5): centring on the f32-rounded
  // mean without correcting for its rounding, or folding the mean into the
  // shift (x · scale + (b − mean · scale)), left y, dx and dweight 5e-4 to 5e-3
  // away from f64 on the same inputs.
  for (const bool training : {true, false}) {
    SCOPED_TRACE(training ? "train" : "eval");
    const Shape shape{8, 4, 6, 6};
    const Tensor x32 = rand_f64(shape, 61, 1000.0 - 0.01, 1000.0 + 0.01, false).to(DType::f32);
    const Tensor dy32 = rand_f64(shape, 62, -1, 1, false).to(DType::f32);
    const Tensor w32 = rand_f64({4}, 63, 0.5, 1.5, false).to(DType::f32);
    const Tensor b32 = rand_f64({4}, 64, -0.1, 0.1, false).to(DType::f32);
    // Eval normalizes with running statistics close to the batch's.
    const Tensor rm32 = rand_f64({4}, 65, 1000.0 - 1e-3, 1000.0 + 1e-3, false).to(DType::f32);
    const Tensor rv32 = rand_f64({4}, 66, 2e-5, 4e-5, false).to(DType::f32);
    std::vector<Tensor> y, dx, dw, db;
    for (const DType dt : {DType::f32, DType::f64}) {
      Tensor x = x32.detach().to(dt).set_requires_grad(true);
      Tensor w = w32.detach().to(dt).set_requires_grad(true);
      Tensor b = b32.detach().to(dt).set_requires_grad(true);
      Tensor out = ops::batch_norm(x, w, b, rm32.to(dt), rv32.to(dt), training, 0.1, 1e-5);
      out.backward(dy32.to(dt));
      y.push_back(out);
      dx.push_back(x.grad());
      dw.push_back(w.grad());
      db.push_back(b.grad());
    }
    EXPECT_LT(max_rel(y[0], y[1]), 1e-5);
    EXPECT_LT(max_rel(dx[0], dx[1]), 1e-5);
    EXPECT_LT(max_rel(dw[0], dw[1]), 1e-5);
    EXPECT_LT(max_rel(db[0], db[1]), 1e-5);
  }
}

// The direct loops against oneDNN's batch norm on the same f32 data.
TEST(BatchNorm, LoopsMatchOneDnn) {
  for (bool training : {true, false}) {
    SCOPED_TRACE(training ? "training" : "eval");
    const kernels::BatchNormGeom g{.n = 4, .c = 5, .l = 21, .eps = 1e-5};
    Tensor x = rand_f64({4, 5, 21}, 1, -2, 3, false).to(DType::f32);
    Tensor dy = rand_f64({4, 5, 21}, 2, -1, 1, false).to(DType::f32);
    Tensor w = rand_f64({5}, 3, 0.5, 1.5, false).to(DType::f32);
    Tensor b = rand_f64({5}, 4, -1, 1, false).to(DType::f32);
    Tensor stats[2][2], y[2], dx[2], dw[2], db[2];
    for (int impl = 0; impl < 2; ++impl) {
      for (int k = 0; k < 2; ++k)
        stats[impl][k] =
            training ? zeros({5}) : rand_f64({5}, 5 + k, 0.2, 1.0, false).to(DType::f32);
      y[impl] = empty({4, 5, 21});
      dx[impl] = empty({4, 5, 21});
      dw[impl] = empty({5});
      db[impl] = empty({5});
      const kernels::KTensor wk = w.k(), bk = b.k(), dxk = dx[impl].k(), dwk = dw[impl].k(),
                             dbk = db[impl].k();
      const kernels::KTensor mk = stats[impl][0].k(), vk = stats[impl][1].k();
      if (impl == 0) {
        if (training)
          kernels::cpu::batch_norm_forward_train(g, x.k(), &wk, &bk, y[impl].k(), mk, vk);
        else
          kernels::cpu::batch_norm_forward_eval(g, x.k(), &wk, &bk, mk, vk, y[impl].k());
        kernels::cpu::batch_norm_backward(g, training, x.k(), dy.k(), &wk, mk, vk, &dxk, &dwk,
                                          &dbk);
      } else {
        if (training)
          kernels::cpu::batch_norm_forward_train_onednn(g, x.k(), &wk, &bk, y[impl].k(), mk, vk);
        else
          kernels::cpu::batch_norm_forward_eval_onednn(g, x.k(), &wk, &bk, mk, vk, y[impl].k());
        kernels::cpu::batch_norm_backward_onednn(g, training, x.k(), dy.k(), &wk, mk, vk, &dxk,
                                                 &dwk, &dbk);
      }
    }
    // Each implementation is within the f32 bound of the exact result, so
    // they are within twice the bound of each other.
    const testing::BatchNormBounds bound = testing::batch_norm_f32_bounds(
        {.x = x.to(DType::f64),
         .weight = w.to(DType::f64),
         .bias = b.to(DType::f64),
         .dy = dy.to(DType::f64),
         .training = training,
         .running_mean = training ? Tensor() : stats[0][0].to(DType::f64),
         .running_var = training ? Tensor() : stats[0][1].to(DType::f64)});
    auto twice = [](const Tensor& t) { return ops::mul(t, 2.0); };
    if (training) {
      testing::expect_within(stats[0][0], stats[1][0], twice(bound.mean), "mean");
      testing::expect_within(stats[0][1], stats[1][1], twice(bound.var), "var");
    } else {
      EXPECT_EQ(stats[0][0].to_vector<float>(), stats[1][0].to_vector<float>());
      EXPECT_EQ(stats[0][1].to_vector<float>(), stats[1][1].to_vector<float>());
    }
    testing::expect_within(y[0], y[1], twice(bound.y), "y");
    testing::expect_within(dx[0], dx[1], twice(bound.dx), "dx");
    testing::expect_within(dw[0], dw[1], twice(bound.dweight), "dweight");
    testing::expect_within(db[0], db[1], twice(bound.dbias), "dbias");
  }
}

TEST(BatchNorm, Errors) {
  Tensor x = zeros({2, 3, 4, 4});
  EXPECT_THROW(ops::batch_norm(x, zeros({4}), Tensor(), Tensor(), Tensor(), true), Error);
  EXPECT_THROW(ops::batch_norm(zeros({1, 3}), Tensor(), Tensor(), Tensor(), Tensor(), true), Error);
  EXPECT_THROW(ops::batch_norm(zeros({3}), Tensor(), Tensor(), Tensor(), Tensor(), true), Error);
  EXPECT_THROW(ops::batch_norm(x, Tensor(), Tensor(), zeros({3}), Tensor(), true), Error);
}

// Mixed precision: an f16/bf16 input with f32 parameters and statistics is
// normalised in f32 and returned in its own dtype, exactly as casting to f32,
// normalising and casting back would do, gradients and running stats included.
TEST(BatchNorm, HalfInputComputesInF32) {
  for (DType half : {DType::bf16, DType::f16}) {
    for (bool training : {true, false}) {
      Tensor x0 = testing::rand_f64({3, 4, 5, 2}, 21, -2.0, 2.0, false).to(half);
      Tensor w0 = testing::rand_f64({4}, 22, 0.5, 1.5, false).to(DType::f32);
      Tensor b0 = testing::rand_f64({4}, 23, -0.5, 0.5, false).to(DType::f32);
      Tensor dy = testing::rand_f64({3, 4, 5, 2}, 24, -1.0, 1.0, false).to(half);
      Tensor rm_a = zeros({4}), rv_a = ones({4}), rm_b = zeros({4}), rv_b = ones({4});
      auto leaf = [](const Tensor& t) {
        Tensor c = t.clone();
        c.set_requires_grad(true);
        return c;
      };
      Tensor xa = leaf(x0), wa = leaf(w0), ba = leaf(b0);
      Tensor xb = leaf(x0), wb = leaf(w0), bb = leaf(b0);
      Tensor ya = ops::batch_norm(xa, wa, ba, rm_a, rv_a, training, 0.1, 1e-5);
      Tensor yb =
          ops::batch_norm(xb.to(DType::f32), wb, bb, rm_b, rv_b, training, 0.1, 1e-5).to(half);
      const std::string what = std::string(dtype_name(half)) + (training ? " train" : " eval");
      ASSERT_EQ(ya.dtype(), half) << what;
      testing::expect_close(ya, yb, 0, 0, what + " output");
      ya.backward(dy);
      yb.backward(dy);
      EXPECT_EQ(xa.grad().dtype(), half);
      EXPECT_EQ(wa.grad().dtype(), DType::f32);
      testing::expect_close(xa.grad(), xb.grad(), 0, 0, what + " dx");
      testing::expect_close(wa.grad(), wb.grad(), 0, 0, what + " dweight");
      testing::expect_close(ba.grad(), bb.grad(), 0, 0, what + " dbias");
      testing::expect_close(rm_a, rm_b, 0, 0, what + " running_mean");
      testing::expect_close(rv_a, rv_b, 0, 0, what + " running_var");
    }
  }
  EXPECT_NE(testing::error_of([] {
              ops::batch_norm(ones({2, 3, 4}).to(DType::bf16), ones({3}).to(DType::bf16), Tensor(),
                              Tensor(), Tensor(), true);
            }).find("needs f32"),
            std::string::npos);
}

TEST(BatchNormRelu, SameValuesAndGradientsAsReluOfBatchNorm) {
  for (const auto& [dt, training, six] :
       {std::tuple{DType::f32, true, false}, std::tuple{DType::f32, false, false},
        std::tuple{DType::f64, true, false}, std::tuple{DType::f64, false, false},
        std::tuple{DType::bf16, true, false}, std::tuple{DType::bf16, false, false},
        std::tuple{DType::f32, true, true}, std::tuple{DType::f32, false, true},
        std::tuple{DType::f64, true, true}, std::tuple{DType::bf16, true, true}}) {
    const DType pd = dt == DType::bf16 ? DType::f32 : dt;
    Tensor x0 = rand_f64({3, 4, 5, 6}, 31, -2.0, 2.0, false).to(dt);
    // relu6: weights large enough that some outputs pass 6.
    Tensor w0 = rand_f64({4}, 32, six ? 4.0 : 0.5, six ? 5.0 : 1.5, false).to(pd);
    Tensor b0 = rand_f64({4}, 33, -0.5, 0.5, false).to(pd);
    Tensor dy = rand_f64({3, 4, 5, 6}, 34, -1.0, 1.0, false).to(dt);
    auto leaf = [](const Tensor& t) {
      Tensor c = t.clone();
      c.set_requires_grad(true);
      return c;
    };
    Tensor rm_a = zeros({4}, {.dtype = pd}), rv_a = ones({4}, {.dtype = pd});
    Tensor rm_b = zeros({4}, {.dtype = pd}), rv_b = ones({4}, {.dtype = pd});
    Tensor xa = leaf(x0), wa = leaf(w0), ba = leaf(b0);
    Tensor xb = leaf(x0), wb = leaf(w0), bb = leaf(b0);
    Tensor ya = six ? ops::batch_norm_relu6(xa, wa, ba, rm_a, rv_a, training, 0.1, 1e-5)
                    : ops::batch_norm_relu(xa, wa, ba, rm_a, rv_a, training, 0.1, 1e-5);
    Tensor bn = ops::batch_norm(xb, wb, bb, rm_b, rv_b, training, 0.1, 1e-5);
    Tensor yb = six ? ops::relu6(bn) : ops::relu(bn);
    const std::string what =
        std::string(dtype_name(dt)) + (training ? " train" : " eval") + (six ? " relu6" : " relu");
    EXPECT_EQ(ya.grad_fn()->name(), six ? "batch_norm_relu6" : "batch_norm_relu");
    // About half the outputs are clamped at 0 (and some at 6): both sides are covered.
    const std::vector<double> yv = ya.to(DType::f64).to_vector<double>();
    const auto zeros_out = std::count(yv.begin(), yv.end(), 0.0);
    EXPECT_GT(zeros_out, 100) << what;
    EXPECT_LT(zeros_out, 260) << what;
    if (six) {
      EXPECT_GT(std::count(yv.begin(), yv.end(), 6.0), 5) << what;
    }
    expect_close(ya, yb, 0, 0, what + " output");
    ya.backward(dy);
    yb.backward(dy);
    expect_close(xa.grad(), xb.grad(), 0, 0, what + " dx");
    expect_close(wa.grad(), wb.grad(), 0, 0, what + " dweight");
    expect_close(ba.grad(), bb.grad(), 0, 0, what + " dbias");
    expect_close(rm_a, rm_b, 0, 0, what + " running_mean");
    expect_close(rv_a, rv_b, 0, 0, what + " running_var");
  }
}

TEST(BatchNormRelu, GradientCheckF64) {
  for (bool six : {false, true}) {
    for (bool training : {true, false}) {
      Tensor rm = rand_f64({3}, 41, -0.5, 0.5, false), rv = rand_f64({3}, 42, 0.5, 2.0, false);
      check_gradients(
          std::string(six ? "batch_norm_relu6" : "batch_norm_relu") +
              (training ? " train" : " eval"),
          [&](const std::vector<Tensor>& v) {
            return six ? ops::batch_norm_relu6(v[0], v[1], v[2], rm.clone(), rv.clone(), training,
                                               0.1, 1e-5)
                       : ops::batch_norm_relu(v[0], v[1], v[2], rm.clone(), rv.clone(), training,
                                              0.1, 1e-5);
          },
          {rand_f64({2, 3, 4, 5}, 43, -2.0, 2.0),
           rand_f64({3}, 44, six ? 4.0 : 0.5, 1.5 + six * 3.5), rand_f64({3}, 45, -0.5, 0.5)},
          {.kink = 1e-4});
    }
  }
}

TEST(BatchNorm, RunningStatsUpdateInsideTheKernel) {
  Tensor x = rand_f64({4, 3, 5, 5}, 51, -1.0, 3.0, false).to(DType::f32);
  Tensor rm = rand_f64({3}, 52, -0.5, 0.5, false).to(DType::f32);
  Tensor rv = rand_f64({3}, 53, 0.5, 2.0, false).to(DType::f32);
  const std::vector<double> rm0 = rm.to(DType::f64).to_vector<double>();
  const std::vector<double> rv0 = rv.to(DType::f64).to_vector<double>();
  const uint32_t version = rm.version();
  profiler::take();
  profiler::set_enabled(true);
  ops::batch_norm(x, Tensor(), Tensor(), rm, rv, true, 0.3, 1e-5);
  profiler::set_enabled(false);
  const auto rows = profiler::take();
  // One kernel call: no tensor ops (and on a GPU no launches) for the update.
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].name, "batch_norm_forward_train");
  EXPECT_GT(rm.version(), version);
  // r = 0.7 r + 0.3 s, the variance unbiased by n / (n - 1), n = 100.
  const Tensor xd = x.to(DType::f64);
  const std::vector<double> mean = ops::mean(xd, {0, 2, 3}).to_vector<double>();
  const std::vector<double> var = ops::var(xd, {0, 2, 3}, /*correction=*/1).to_vector<double>();
  const std::vector<float> rm1 = rm.to_vector<float>(), rv1 = rv.to_vector<float>();
  for (int c = 0; c < 3; ++c) {
    EXPECT_NEAR(rm1[c], 0.7 * rm0[c] + 0.3 * mean[c], 1e-6) << c;
    EXPECT_NEAR(rv1[c], 0.7 * rv0[c] + 0.3 * var[c], 1e-6) << c;
  }
  // Running statistics in another dtype take the tensor-op update, same values.
  Tensor rm64 = from_vector<double>(rm0, {3}), rv64 = from_vector<double>(rv0, {3});
  ops::batch_norm(x, Tensor(), Tensor(), rm64, rv64, true, 0.3, 1e-5);
  expect_close(rm64, rm.to(DType::f64), 1e-6, 0, "f64 running mean");
  expect_close(rv64, rv.to(DType::f64), 1e-6, 0, "f64 running var");
}

}  // namespace
}  // namespace tcv
