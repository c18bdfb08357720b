// SGD and AdamW against torch.optim (PyTorch 1.13, f32) over three steps of
// fixed gradients, plus state_dict round trips; the finiteness checks of the
// training loop.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "engine/ops.h"
#include "engine/serialize.h"
#include "support/gradcheck.h"
#include "support/temp_dir.h"
#include "train/optim.h"

namespace tcv {
namespace {

using Rows = std::vector<std::vector<float>>;
using MakeOpt = std::function<std::unique_ptr<train::Optimizer>(nn::StateDict)>;

const std::vector<float> kP0 = {0.5f, -1.0f, 2.0f, 0.1f};

// The gradient fed at step k (1-based), the same in the Python reference.
std::vector<float> grad_at(int k) {
  const float f = static_cast<float>(k);
  return {0.1f * f, -0.2f, 0.3f * f - 0.5f, -0.05f * f * f};
}

Tensor make_param(DType dt = DType::f32) {
  Tensor p = from_vector(kP0).to(dt);
  p.set_requires_grad(true);
  return p;
}

void set_grad_at(Tensor& p, int k) {
  p.set_grad(from_vector(grad_at(k)).to(p.dtype()));
}

void expect_row(const Tensor& p, const std::vector<float>& want, double tol,
                const std::string& what) {
  const auto got = p.to_vector<double>();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(got[i], want[i], tol + 1e-6 * std::abs(want[i])) << what << " element " << i;
}

void check_against_torch(const MakeOpt& make, const Rows& want, const std::string& name) {
  for (DType dt : {DType::f32, DType::f64}) {
    Tensor p = make_param(dt);
    auto opt = make({{"w", p}});
    for (int k = 1; k <= 3; ++k) {
      set_grad_at(p, k);
      opt->step();
      expect_row(p, want[k - 1], 1e-6,
                 name + " (" + dtype_name(dt) + ") step " + std::to_string(k));
    }
    EXPECT_EQ(opt->step_count(), 3);
  }
}

MakeOpt sgd(train::SGDOptions o) {
  return [o](nn::StateDict ps) { return std::make_unique<train::SGD>(std::move(ps), o); };
}
MakeOpt adam(train::AdamOptions o) {
  return [o](nn::StateDict ps) { return std::make_unique<train::Adam>(std::move(ps), o); };
}
MakeOpt adamw(train::AdamWOptions o) {
  return [o](nn::StateDict ps) { return std::make_unique<train::AdamW>(std::move(ps), o); };
}

TEST(SGD, PlainMatchesTorch) {
  check_against_torch(sgd({.lr = 0.1}),
                      {{0.49000001f, -0.980000019f, 2.01999998f, 0.105000004f},
                       {0.469999999f, -0.960000038f, 2.00999999f, 0.125f},
                       {0.439999998f, -0.940000057f, 1.97000003f, 0.170000002f}},
                      "sgd plain");
}

TEST(SGD, MomentumMatchesTorch) {
  check_against_torch(sgd({.lr = 0.1, .momentum = 0.9}),
                      {{0.49000001f, -0.980000019f, 2.01999998f, 0.105000004f},
                       {0.460999995f, -0.942000031f, 2.02799988f, 0.129500002f},
                       {0.404899985f, -0.887800038f, 1.99519992f, 0.196549997f}},
                      "sgd momentum");
}

TEST(SGD, DampeningAndWeightDecayMatchTorch) {
  check_against_torch(sgd({.lr = 0.1, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01}),
                      {{0.489499986f, -0.978999972f, 2.01799989f, 0.104900002f},
                       {0.461609423f, -0.941218853f, 2.02338362f, 0.127215594f},
                       {0.409092486f, -0.888368785f, 1.99040794f, 0.187685132f}},
                      "sgd dampening+wd");
}

TEST(SGD, NesterovWithWeightDecayMatchesTorch) {
  check_against_torch(sgd({.lr = 0.1, .momentum = 0.9, .weight_decay = 0.05, .nesterov = true}),
                      {{0.476249993f, -0.952499986f, 2.01900005f, 0.108550005f},
                       {0.423600614f, -0.885201216f, 1.9889195f, 0.149163783f},
                       {0.335335106f, -0.800509155f, 1.88503778f, 0.252287596f}},
                      "sgd nesterov");
}

TEST(SGD, MomentumBufferMatchesTorch) {
  Tensor p = make_param();
  train::SGD opt({{"w", p}}, {.lr = 0.1, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01});
  for (int k = 1; k <= 3; ++k) {
    set_grad_at(p, k);
    opt.step();
  }
  auto sd = opt.state_dict();
  ASSERT_EQ(sd.size(), 2u);
  EXPECT_EQ(sd[0].first, "momentum_buffer.w");
  EXPECT_EQ(sd[1].first, "step");
  EXPECT_EQ(sd[1].second.dtype(), DType::i64);
  EXPECT_EQ(sd[1].second.dim(), 0);
  EXPECT_EQ(sd[1].second.item<int64_t>(), 3);
  expect_row(sd[0].second,
             {0.5251694321632385f, -0.5285008549690247f, 0.3297562599182129f, -0.6046953797340393f},
             1e-6, "momentum buffer");
}

TEST(AdamW, DefaultsMatchTorch) {
  check_against_torch(adamw({.lr = 0.01, .weight_decay = 0.1}),
                      {{0.489500016f, -0.989000022f, 2.00800014f, 0.109899998f},
                       {0.479358703f, -0.978011072f, 2.00865555f, 0.118633866f},
                       {0.469299346f, -0.967033088f, 2.00207353f, 0.12716949f}},
                      "adamw default");
}

TEST(AdamW, CustomBetasMatchTorch) {
  check_against_torch(
      adamw({.lr = 0.1, .beta1 = 0.8, .beta2 = 0.95, .eps = 1e-6, .weight_decay = 0.0}),
      {{0.400000989f, -0.900000513f, 2.09999943f, 0.199998021f},
       {0.302367806f, -0.800001025f, 2.12124515f, 0.290445864f},
       {0.204384446f, -0.700001538f, 2.06751084f, 0.38063854f}},
      "adamw custom");
}

TEST(AdamW, MomentsMatchTorch) {
  Tensor p = make_param();
  train::AdamW opt({{"w", p}}, {.lr = 0.01, .weight_decay = 0.1});
  for (int k = 1; k <= 3; ++k) {
    set_grad_at(p, k);
    opt.step();
  }
  auto sd = opt.state_dict();
  ASSERT_EQ(sd.size(), 3u);
  EXPECT_EQ(sd[0].first, "exp_avg.w");
  EXPECT_EQ(sd[1].first, "exp_avg_sq.w");
  EXPECT_EQ(sd[2].first, "step");
  EXPECT_EQ(sd[2].second.item<int64_t>(), 3);
  expect_row(sd[0].second, {0.05610000342f, -0.05420000106f, 0.03280000016f, -0.06705000252f}, 1e-8,
             "exp_avg");
  expect_row(sd[1].second, {0.0001399400207f, 0.0001198800455f, 0.0002099100529f, 0.0002449550084f},
             1e-9, "exp_avg_sq");
}

// Two steps, save, restore into a fresh optimizer over a fresh copy of the
// parameter, third step: the same as three uninterrupted steps.
void check_round_trip(const MakeOpt& make, bool through_file) {
  Tensor a = make_param();
  auto opt_a = make({{"w", a}});
  for (int k = 1; k <= 2; ++k) {
    set_grad_at(a, k);
    opt_a->step();
  }
  nn::StateDict saved;
  for (auto& [k, t] : opt_a->state_dict()) saved.emplace_back(k, t.clone());
  if (through_file) {
    const tcv::testing::TempDir tmp("optim");
    const std::string path = tmp.path("optim_state.safetensors");
    save_safetensors(path, saved);
    saved = load_safetensors(path).tensors;
  }
  Tensor b = make_param();
  b.detach().copy_(a.detach());
  auto opt_b = make({{"w", b}});
  opt_b->load_state_dict(saved);
  EXPECT_EQ(opt_b->step_count(), 2);
  set_grad_at(a, 3);
  set_grad_at(b, 3);
  opt_a->step();
  opt_b->step();
  EXPECT_EQ(a.to_vector<float>(), b.to_vector<float>());
  EXPECT_NE(a.to_vector<float>(), kP0);
}

TEST(Optimizer, StateDictRoundTripContinuesIdentically) {
  check_round_trip(sgd({.lr = 0.1, .momentum = 0.9, .nesterov = true}), false);
  check_round_trip(adamw({.lr = 0.01}), false);
  check_round_trip(sgd({.lr = 0.1, .momentum = 0.9, .weight_decay = 1e-3}), true);
  check_round_trip(adamw({.lr = 0.05, .weight_decay = 0.2}), true);
  check_round_trip(adam({.lr = 0.05, .weight_decay = 0.2}), true);
}

TEST(Optimizer, LoadStateDictErrorsNameTheEntry) {
  Tensor p = make_param();
  train::AdamW opt({{"w", p}}, {});
  auto expect_error = [&](const nn::StateDict& sd, const std::string& needle) {
    try {
      opt.load_state_dict(sd);
      ADD_FAILURE() << "no error; expected one mentioning " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  const Tensor step = scalar_tensor(1, {.dtype = DType::i64});
  expect_error({}, "\"step\"");
  expect_error({{"step", step}, {"exp_avg.w", zeros({3})}, {"exp_avg_sq.w", zeros({4})}},
               "\"exp_avg.w\" has shape (3)");
  expect_error({{"step", step}, {"exp_avg.w", zeros({4})}}, "exp_avg_sq.w");
  expect_error({{"step", step}, {"exp_avg.v", zeros({4})}}, "unexpected keys: \"exp_avg.v\"");
  train::SGD sgd_opt({{"w", p}}, {.momentum = 0.9});
  EXPECT_THROW(sgd_opt.load_state_dict({{"step", step}, {"momentum_buffer.w", zeros({2, 2})}}),
               Error);
}

TEST(Optimizer, LoadStateDictRefusesAStepThatIsNoCount) {
  // "step" comes from a checkpoint file: a NaN, a float past int64 or the
  // largest i64 (which rounds up to 2^63 as a double) made the conversion to
  // int64 undefined behaviour; a fraction was silently cut.
  const Tensor p = zeros({4});
  for (const auto& [step, shown] : std::vector<std::pair<Tensor, std::string>>{
           {scalar_tensor(std::nan("")), "nan"},
           {scalar_tensor(1e30), "1e+30"},
           {scalar_tensor(2.5), "2.5"},
           {scalar_tensor(-1), "-1"},
           {from_vector<int64_t>({std::numeric_limits<int64_t>::max()}), "9.22337e+18"}}) {
    train::Adam opt({{"w", p}}, {});
    const std::string msg = testing::error_of([&] { opt.load_state_dict({{"step", step}}); });
    EXPECT_NE(
        msg.find("[Adam::load_state_dict] \"step\" must be a whole number in [0, 2^63), got " +
                 shown),
        std::string::npos)
        << msg;
  }
}

TEST(Optimizer, SkipsParametersWithoutGradAndZeroesGrads) {
  Tensor a = make_param(), b = make_param();
  train::SGD opt({{"a", a}, {"b", b}}, {.lr = 0.1, .momentum = 0.9});
  set_grad_at(a, 1);
  opt.step();
  EXPECT_EQ(b.to_vector<float>(), kP0);  // no grad: untouched
  EXPECT_NE(a.to_vector<float>(), kP0);
  auto sd = opt.state_dict();
  ASSERT_EQ(sd.size(), 2u);  // only a's buffer, and step
  EXPECT_EQ(sd[0].first, "momentum_buffer.a");

  opt.zero_grad(false);
  ASSERT_TRUE(a.grad().defined());
  EXPECT_EQ(a.grad().to_vector<float>(), std::vector<float>(4, 0.0f));
  opt.zero_grad();
  EXPECT_FALSE(a.grad().defined());
}

TEST(Optimizer, RejectsBadOptions) {
  EXPECT_THROW(train::SGD({{"w", make_param()}}, {.lr = 0.1, .nesterov = true}), Error);
  EXPECT_THROW(train::SGD({{"w", make_param()}}, {.lr = -1.0}), Error);
  EXPECT_THROW(train::AdamW({{"w", make_param()}}, {.beta1 = 1.0}), Error);
  EXPECT_THROW(train::SGD({{"w", make_param()}, {"w", make_param()}}, {}), Error);
}

// A parameter that is a transposed view cannot take the fused loop; the
// tensor-op path (also what other devices and dtypes use) must agree with it.
TEST(Optimizer, TensorOpPathMatchesFusedLoop) {
  for (const MakeOpt& make :
       {sgd({.lr = 0.1, .momentum = 0.9, .weight_decay = 0.05, .nesterov = true}),
        sgd({.lr = 0.1, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01}),
        adamw({.lr = 0.01, .weight_decay = 0.1}), adam({.lr = 0.01, .weight_decay = 0.1})}) {
    const std::vector<float> init = {0.5f, -1.0f, 2.0f, 0.1f, 0.3f, -0.7f};
    Tensor fused = from_vector(init, {2, 3});
    fused.set_requires_grad(true);
    Tensor strided = from_vector(init, {2, 3}).t().contiguous().t().detach();  // not contiguous
    ASSERT_FALSE(strided.is_contiguous());
    strided.set_requires_grad(true);
    auto opt_f = make({{"w", fused}});
    auto opt_s = make({{"w", strided}});
    for (int k = 1; k <= 3; ++k) {
      const float f = static_cast<float>(k);
      Tensor g =
          from_vector<float>({0.1f * f, -0.2f, 0.3f * f, -0.05f * f * f, 0.4f, -0.1f * f}, {2, 3});
      fused.set_grad(g);
      strided.set_grad(g.clone());
      opt_f->step();
      opt_s->step();
    }
    testing::expect_close(strided, fused, 1e-6, 1e-6, "tensor-op path vs fused loop");
    EXPECT_NE(fused.to_vector<float>(), init);
  }
}

TEST(Optimizer, LargeParameterTakesTheParallelPath) {
  // Big enough to be split across threads; every element must match the scalar rule.
  const int64_t n = 300000;
  Tensor p = full({n}, 1.0);
  p.set_requires_grad(true);
  p.set_grad(full({n}, 0.5));
  train::SGD opt({{"w", p}}, {.lr = 0.1, .momentum = 0.9, .weight_decay = 0.1});
  opt.step();
  opt.step();
  // step 1: d = 0.5 + 0.1 = 0.6, buf = 0.6, p = 0.94
  // step 2: d = 0.5 + 0.094 = 0.594, buf = 0.54 + 0.594 = 1.134, p = 0.94 - 0.1134 = 0.8266
  const auto v = p.to_vector<float>();
  for (int64_t i = 0; i < n; i += 9973) EXPECT_NEAR(v[i], 0.8266f, 1e-6f) << i;
  EXPECT_NEAR(v[n - 1], 0.8266f, 1e-6f);
}

// torch.optim.Adam written out in f64, one element at a time (an independent oracle).
Rows adam_reference(double lr, double b1, double b2, double eps, double wd, bool decoupled) {
  std::vector<double> p(kP0.begin(), kP0.end()), m(4, 0.0), v(4, 0.0);
  Rows out;
  for (int k = 1; k <= 3; ++k) {
    const auto g0 = grad_at(k);
    std::vector<float> row;
    for (size_t i = 0; i < 4; ++i) {
      double g = g0[i];
      if (decoupled)
        p[i] *= 1.0 - lr * wd;
      else
        g += wd * p[i];
      m[i] = b1 * m[i] + (1 - b1) * g;
      v[i] = b2 * v[i] + (1 - b2) * g * g;
      const double mh = m[i] / (1 - std::pow(b1, k)), vh = v[i] / (1 - std::pow(b2, k));
      p[i] -= lr * mh / (std::sqrt(vh) + eps);
      row.push_back(static_cast<float>(p[i]));
    }
    out.push_back(row);
  }
  return out;
}

TEST(Adam, L2WeightDecayMatchesReference) {
  const Rows want = adam_reference(0.1, 0.9, 0.999, 1e-8, 0.5, false);
  // Step 1 moves every element by lr against the sign of g + wd·p:
  // g1 + 0.5·p0 = (0.35, -0.7, 0.8, -0.0) + ... -> p0 -/+ 0.1.
  EXPECT_NEAR(want[0][0], 0.4f, 1e-6);
  EXPECT_NEAR(want[0][1], -0.9f, 1e-6);
  EXPECT_NEAR(want[0][2], 1.9f, 1e-6);
  check_against_torch(adam({.lr = 0.1, .weight_decay = 0.5}), want, "adam l2");
  check_against_torch(adam({.lr = 0.05, .beta1 = 0.8, .beta2 = 0.95, .eps = 1e-6}),
                      adam_reference(0.05, 0.8, 0.95, 1e-6, 0.0, false), "adam no wd");
  // AdamW agrees with the same oracle in decoupled mode.
  check_against_torch(adamw({.lr = 0.01, .weight_decay = 0.1}),
                      adam_reference(0.01, 0.9, 0.999, 1e-8, 0.1, true), "adamw oracle");
}

TEST(Adam, L2AndDecoupledDiffer) {
  Tensor a = make_param(), b = make_param();
  train::Adam l2({{"w", a}}, {.lr = 0.1, .weight_decay = 0.5});
  train::AdamW dec({{"w", b}}, {.lr = 0.1, .weight_decay = 0.5});
  set_grad_at(a, 1);
  set_grad_at(b, 1);
  l2.step();
  dec.step();
  EXPECT_NE(a.to_vector<float>(), b.to_vector<float>());
}

TEST(Optimizer, NoDecayGroupSkipsVectorsAndBiases) {
  // A matrix decays, a vector (bias / BN weight) does not: with zero gradients
  // plain SGD changes only the matrix, by lr·wd·p.
  Tensor w = from_vector<float>({1.0f, 2.0f, -1.0f, 4.0f}, {2, 2}), bias = from_vector(kP0);
  w.set_requires_grad(true);
  bias.set_requires_grad(true);
  train::SGD opt({{"fc.weight", w}, {"fc.bias", bias}},
                 {.lr = 0.1, .weight_decay = 0.5, .no_decay = train::NoDecay::bn_and_bias});
  ASSERT_EQ(opt.param_groups().size(), 2u);
  EXPECT_EQ(opt.param_groups()[0].name, "decay");
  EXPECT_EQ(opt.param_groups()[0].params, std::vector<size_t>{0});
  EXPECT_DOUBLE_EQ(opt.param_groups()[0].weight_decay, 0.5);
  EXPECT_EQ(opt.param_groups()[1].params, std::vector<size_t>{1});
  EXPECT_DOUBLE_EQ(opt.param_groups()[1].weight_decay, 0.0);
  w.set_grad(zeros({2, 2}));
  bias.set_grad(zeros({4}));
  opt.step();
  EXPECT_EQ(w.to_vector<float>(), (std::vector<float>{0.95f, 1.9f, -0.95f, 3.8f}));
  EXPECT_EQ(bias.to_vector<float>(), kP0);

  // Without the option, both decay; Adam honours the groups too.
  train::SGD all({{"b", bias}}, {.lr = 0.1, .weight_decay = 0.5});
  ASSERT_EQ(all.param_groups().size(), 1u);
  all.step();
  EXPECT_NEAR(bias.to_vector<float>()[0], 0.475f, 1e-7);
  Tensor v = from_vector(kP0);
  v.set_requires_grad(true);
  v.set_grad(zeros({4}));
  train::Adam adam_nd({{"v", v}},
                      {.lr = 0.1, .weight_decay = 0.5, .no_decay = train::NoDecay::bn_and_bias});
  adam_nd.step();
  EXPECT_EQ(v.to_vector<float>(), kP0);  // zero grad, no decay: m = 0, no move
}

TEST(Optimizer, ClipGradNormScalesAllGradientsTogether) {
  Tensor a = make_param(), b = make_param();
  a.set_grad(from_vector<float>({3.0f, 0.0f, 0.0f, 0.0f}));
  b.set_grad(from_vector<float>({0.0f, 4.0f, 0.0f, 0.0f}));
  const nn::StateDict ps = {{"a", a}, {"b", b}};
  EXPECT_NEAR(train::clip_grad_norm(ps, 10.0), 5.0, 1e-6);  // under the limit: unchanged
  EXPECT_EQ(a.grad().to_vector<float>()[0], 3.0f);
  EXPECT_NEAR(train::clip_grad_norm(ps, 1.0), 5.0, 1e-6);
  EXPECT_NEAR(a.grad().to_vector<float>()[0], 0.6f, 1e-6);
  EXPECT_NEAR(b.grad().to_vector<float>()[1], 0.8f, 1e-6);
  EXPECT_NEAR(train::clip_grad_norm(ps, 0.0), 1.0, 1e-5);  // 0: measures only
  EXPECT_NEAR(b.grad().to_vector<float>()[1], 0.8f, 1e-6);
}

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(Finite, OneCheckOverManyTensorsWithoutFalseAlarms) {
  const Tensor big = from_vector<float>({3.0e38f, 3.0e38f, 1.0f});  // sums and squares overflow
  const Tensor ok = from_vector<float>({0.0f, -0.0f, 1e-45f});
  EXPECT_TRUE(train::all_finite({big, ok, Tensor()}));
  EXPECT_TRUE(train::all_finite({}));
  for (float bad : {kNaN, kInf, -kInf}) {
    const Tensor t = from_vector<float>({1.0f, bad, 2.0f});
    EXPECT_FALSE(train::all_finite({ok, t})) << bad;
    EXPECT_FALSE(train::all_finite({t.to(DType::f64)})) << bad;
    EXPECT_FALSE(train::all_finite({t.to(DType::bf16)})) << bad;
    EXPECT_FALSE(train::all_finite({t.to(DType::f16)})) << bad;
    EXPECT_FALSE(train::all_finite({t.narrow(0, 1, 1)})) << bad;  // a view
    EXPECT_TRUE(train::all_finite({t.narrow(0, 0, 1), t.narrow(0, 2, 1)})) << bad;
  }
  EXPECT_TRUE(train::all_finite({from_vector<int64_t>({1, 2})}));  // integers always are
  const nn::StateDict named = {{"a", ok}, {"b", from_vector<float>({kNaN})}, {"c", big}};
  EXPECT_EQ(train::first_nonfinite(named), "b");
  EXPECT_EQ(train::first_nonfinite({{"a", ok}}), "");
}

// On the GPU: one fused pass over tensors of every floating dtype.
TEST(Finite, CudaTensorsInOneFusedCheck) {
  if (!cuda_is_available()) GTEST_SKIP() << "no CUDA device";
  const Device gpu(DeviceType::CUDA, 0);
  const Tensor big = from_vector<float>({3.0e38f, -3.0e38f}).to(gpu);  // f32 squares overflow
  std::vector<Tensor> clean = {big, big.to(DType::f64), ones({70000}).to(gpu),  // > one chunk
                               ones({3}).to(DType::bf16).to(gpu), ones({3}).to(DType::f16).to(gpu)};
  EXPECT_TRUE(train::all_finite(clean));
  for (float bad : {kNaN, kInf, -kInf})
    for (DType dt : {DType::f32, DType::f64, DType::bf16, DType::f16}) {
      std::vector<float> v(70001, 1.0f);
      v[69999] = bad;  // in the second chunk
      std::vector<Tensor> ts = clean;
      ts.push_back(from_vector<float>(v).to(dt).to(gpu));
      EXPECT_FALSE(train::all_finite(ts)) << bad << " " << dtype_name(dt);
      EXPECT_FALSE(train::all_finite({ts.back().narrow(0, 69990, 11)})) << "a view";
      EXPECT_EQ(train::first_nonfinite({{"a", clean[0]}, {"b", ts.back()}}), "b");
    }
}

// A loss that is not finite while its gradients are (here inf + w·x): seeded
// with train::nonfinite_seed(), backward makes them NaN; a finite loss keeps its
// gradients to the bit.
TEST(Finite, NonFiniteSeedCarriesTheLossIntoTheGradients) {
  const Tensor x = from_vector<float>({0.5f, -2.0f, 3.0f});
  for (const bool finite : {true, false}) {
    Tensor w = from_vector<float>({1.0f, 2.0f, 3.0f}).detach();
    w.set_requires_grad(true);
    const Tensor loss = ops::add(ops::sum(ops::mul(w, x)), finite ? 1.0 : kInf);
    loss.backward(train::nonfinite_seed(loss));
    EXPECT_EQ(train::all_finite({w.grad()}), finite);
    if (finite) {
      EXPECT_EQ(w.grad().to_vector<float>(), x.to_vector<float>());
    }
  }
}

}  // namespace
}  // namespace tcv
