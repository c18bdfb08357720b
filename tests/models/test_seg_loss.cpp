// The segmentation loss: seg_weight·CE(out) + aux_weight·CE(aux) with
// ignore_index 255 and class weights, OHEM on the main output only (TorchCV's
// FSAuxOhemCELoss), no aux term without an aux output, gradients, errors.
#include <gtest/gtest.h>

#include "engine/ops.h"
#include "engine/rng.h"
#include "models/seg/loss.h"
#include "support/gradcheck.h"

namespace tcv {
namespace {

using models::seg::seg_loss;
using models::seg::SegLossKind;
using models::seg::SegOutput;
using ops::Reduction;

struct Batch {
  SegOutput out;
  Tensor target;
};

Batch batch(uint64_t seed) {
  Generator g(seed);
  Batch b;
  b.out.out = ops::mul(randn({2, 5, 6, 7}, {.dtype = DType::f64}, &g), 2.0);
  b.out.aux = ops::mul(randn({2, 5, 6, 7}, {.dtype = DType::f64}, &g), 2.0);
  b.target = randint(0, 5, {2, 6, 7}, {.dtype = DType::i64}, &g);
  b.target =
      ops::masked_fill(b.target, ops::lt(rand({2, 6, 7}, {.dtype = DType::f64}, &g), 0.2), 255);
  return b;
}

TEST(SegLoss, MainPlusWeightedAux) {
  const Batch b = batch(1);
  const auto t = seg_loss(b.out, b.target);
  const double main = ops::cross_entropy(b.out.out, b.target, Reduction::mean, 255).item();
  const double aux = ops::cross_entropy(b.out.aux, b.target, Reduction::mean, 255).item();
  EXPECT_NEAR(t.main.item(), main, 1e-14);
  EXPECT_NEAR(t.aux.item(), aux, 1e-14);
  EXPECT_NEAR(t.total.item(), main + 0.4 * aux, 1e-14);
  // Other weights, class weights.
  const Tensor w = testing::lit({1.0, 2.0, 0.5, 3.0, 1.0}, {5});
  const auto tw =
      seg_loss(b.out, b.target, {.seg_weight = 0.5, .aux_weight = 0.25, .class_weight = w});
  const double mw = ops::cross_entropy(b.out.out, b.target, Reduction::mean, 255, 0.0, w).item();
  const double aw = ops::cross_entropy(b.out.aux, b.target, Reduction::mean, 255, 0.0, w).item();
  EXPECT_NEAR(tw.total.item(), 0.5 * mw + 0.25 * aw, 1e-14);
  // No aux output: the main term alone.
  SegOutput only_main{.out = b.out.out};
  const auto tm = seg_loss(only_main, b.target);
  EXPECT_FALSE(tm.aux.defined());
  EXPECT_NEAR(tm.total.item(), main, 1e-14);
}

TEST(SegLoss, OhemOnTheMainOutputOnly) {
  const Batch b = batch(2);
  const auto t = seg_loss(b.out, b.target,
                          {.kind = SegLossKind::ohem_ce, .ohem_thresh = 0.5, .ohem_min_kept = 20});
  const double main =
      ops::ohem_cross_entropy(b.out.out, b.target, {.thresh = 0.5, .min_kept = 20}).item();
  const double aux = ops::cross_entropy(b.out.aux, b.target, Reduction::mean, 255).item();
  EXPECT_NEAR(t.main.item(), main, 1e-14);
  EXPECT_NEAR(t.total.item(), main + 0.4 * aux, 1e-14);
  EXPECT_GT(std::abs(main - ops::cross_entropy(b.out.out, b.target, Reduction::mean, 255).item()),
            1e-3);
}

TEST(SegLoss, Gradients) {
  const Batch b = batch(3);
  for (SegLossKind kind : {SegLossKind::ce, SegLossKind::ohem_ce})
    testing::check_gradients(
        kind == SegLossKind::ce ? "seg_loss ce" : "seg_loss ohem",
        [&](const std::vector<Tensor>& in) {
          return seg_loss({.out = in[0], .aux = in[1]}, b.target,
                          {.kind = kind, .ohem_thresh = 0.5, .ohem_min_kept = 20})
              .total;
        },
        {b.out.out.detach().set_requires_grad(true), b.out.aux.detach().set_requires_grad(true)});
}

TEST(SegLoss, TargetMustMatchTheOutput) {
  const Batch b = batch(4);
  const std::string err = testing::error_of([&] {
    seg_loss(b.out, zeros({2, 6, 6}, {.dtype = DType::i64}));
  });
  EXPECT_NE(err.find("[seg_loss] target (2, 6, 6) does not match the output (2, 5, 6, 7)"),
            std::string::npos)
      << err;
  const std::string bad = testing::error_of(
      [&] { seg_loss(b.out, ops::masked_fill(b.target, ops::eq(b.target, 3.0), 9)); });
  EXPECT_NE(bad.find("target 9 is out of bounds for 5 classes"), std::string::npos) << bad;
}

}  // namespace
}  // namespace tcv
