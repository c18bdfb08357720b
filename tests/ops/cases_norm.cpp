// batch_norm (training with the running-statistics update, eval with running
// statistics, eval without them, with and without weight and bias, 2-D to
// 4-D, planes that take 4-wide loads and planes that do not, a misaligned
// and a transposed input, f16/bf16 data with f32 parameters), batch_norm_relu,
// batch_norm_relu6, dropout and dropout2d.
//
// Bounds: batch_norm_f32_bounds (support/error_bound.h) for y and every
// gradient, scaled by u/u_f32 for f64; 16-bit data adds one rounding of the
// result. The running statistics r' = (1 − m)·r + m·s are within m times the
// statistic's bound plus their own roundings. The fused relu (relu6) leaves y's
// bound as it is; where y is within its bound of a kink the mask may differ,
// which moves that element's gradient and, through the channel's means, every
// other one's: that is added to the gradients' bounds.
#include "ops/cases.h"

namespace tcv::testing {
namespace {

using Act = BatchNormCall::Act;

struct Norm {
  const char* name;
  Shape x;
  bool affine;
  bool training;
  bool running;  // running statistics given (training updates them)
};

OpCase bn_case(const Norm& n, Act act, std::vector<DType> dtypes, Check check,
               std::optional<DType> params = {}, double momentum = 0.1) {
  const double eps = 1e-5;
  const bool affine = n.affine, training = n.training, running = n.running;
  const int64_t c = n.x[1];
  OpCase oc{
      .op = act == Act::none ? "batch_norm"
                             : (act == Act::relu ? "batch_norm_relu" : "batch_norm_relu6"),
      .name = n.name,
      .inputs = {{.shape = n.x, .lo = -1, .hi = 3}},
      .fn =
          [affine, training, running, act, momentum, eps](const In& v) {
            const Tensor w = affine ? v[1] : Tensor(), b = affine ? v[2] : Tensor();
            const size_t r0 = affine ? 3 : 1;
            Tensor rm = running ? v[r0] : Tensor(), rv = running ? v[r0 + 1] : Tensor();
            Tensor y =
                act == Act::none
                    ? ops::batch_norm(v[0], w, b, rm, rv, training, momentum, eps)
                    : (act == Act::relu
                           ? ops::batch_norm_relu(v[0], w, b, rm, rv, training, momentum, eps)
                           : ops::batch_norm_relu6(v[0], w, b, rm, rv, training, momentum, eps));
            if (!running) return std::vector<Tensor>{y};
            return std::vector<Tensor>{y, rm.clone(), rv.clone()};
          },
      .dtypes = std::move(dtypes),
      .check = check,
      .grad = {.eps = 1e-6, .atol = 1e-7, .rtol = 1e-5, .kink = act == Act::none ? 0.0 : 1e-4}};
  if (affine) {
    // relu6: weights large enough that some outputs pass 6.
    const double lo = act == Act::relu6 ? 4.0 : 0.5, hi = act == Act::relu6 ? 5.0 : 1.5;
    oc.inputs.push_back({.shape = {c}, .lo = lo, .hi = hi, .dtype = params});
    oc.inputs.push_back({.shape = {c}, .lo = -0.5, .hi = 0.5, .dtype = params});
  }
  if (running) {
    oc.inputs.push_back({.shape = {c}, .lo = -0.5, .hi = 0.5, .grad = false, .dtype = params});
    oc.inputs.push_back({.shape = {c}, .lo = 0.5, .hi = 2.0, .grad = false, .dtype = params});
  }
  oc.tol = {.bound = batch_norm_bound({.affine = affine,
                                       .training = training,
                                       .running = running,
                                       .act = act,
                                       .momentum = momentum,
                                       .eps = eps})};
  return oc;
}

}  // namespace

void register_norm_cases(OpRegistry& r) {
  const std::vector<DType> f32_f64 = {DType::f32, DType::f64};
  const std::vector<DType> half = {DType::bf16, DType::f16};
  // Small: gradient-checked.
  const Norm small[] = {
      {"train_affine_4d", {3, 4, 3, 2}, true, true, true},
      {"train_plain_4d", {2, 3, 2, 3}, false, true, true},
      {"eval_affine_4d", {2, 3, 3, 3}, true, false, true},
      {"eval_plain_4d", {2, 3, 2, 2}, false, false, true},
      {"train_affine_2d", {6, 5}, true, true, true},
      {"train_affine_3d", {2, 3, 7}, true, true, true},
      {"eval_batch_stats", {2, 3, 3, 2}, true, false, false},
  };
  for (const Norm& n : small) r.add(bn_case(n, Act::none, f32_f64, Check::gradient_and_parity));
  // Planes of 35, 1, 11, 9 (scalar loads), 8 and 16 (4-wide loads), and
  // channels that take oneDNN's blocked kernels.
  const Norm wide[] = {
      {"train_plane_35", {4, 3, 7, 5}, true, true, true},
      {"train_2d", {5, 6}, true, true, true},
      {"train_plane_11", {3, 4, 11}, true, true, true},
      {"train_plane_9", {1, 2, 3, 3}, true, true, true},
      {"train_plane_8", {3, 5, 4, 2}, true, true, true},
      {"train_plain_plane_45", {2, 4, 5, 9}, false, true, true},
      {"eval_plane_42", {3, 5, 6, 7}, true, false, true},
      {"eval_plane_16", {2, 3, 4, 4}, true, false, true},
      {"eval_batch_stats_42", {3, 5, 6, 7}, true, false, false},
      {"eval_batch_stats_16", {2, 3, 4, 4}, true, false, false},
      {"train_c32", {8, 32, 7, 5}, true, true, true},
      {"eval_c32", {4, 32, 6, 6}, true, false, true},
  };
  for (const Norm& n : wide) r.add(bn_case(n, Act::none, f32_f64, Check::parity_only));
  OpCase transposed = bn_case({"train_transposed", {3, 4, 5, 6}, true, true, true}, Act::none,
                              {DType::f32}, Check::parity_only);
  transposed.inputs[0].layout = Layout::permuted({0, 1, 3, 2});
  r.add(transposed);
  // A contiguous view one element into its storage: 4-wide planes, a misaligned pointer.
  OpCase misaligned = bn_case({"train_misaligned", {2, 4, 8, 8}, true, true, true}, Act::none,
                              {DType::f32}, Check::parity_only);
  misaligned.inputs[0].layout = Layout::misaligned(1);
  r.add(misaligned);
  // Only the weight requires grad (dx and dbias not computed); eval with only dx.
  OpCase dw_only = bn_case({"train_dweight_only", {3, 4, 6, 5}, true, true, true}, Act::none,
                           {DType::f64}, Check::parity_only);
  dw_only.inputs[0].grad = dw_only.inputs[2].grad = false;
  r.add(dw_only);
  OpCase dx_only = bn_case({"eval_dx_only", {3, 4, 5, 4}, true, false, true}, Act::none,
                           {DType::f32}, Check::parity_only);
  dx_only.inputs[1].grad = dx_only.inputs[2].grad = false;
  r.add(dx_only);
  // Values 1000 ± 0.01: the variance and the normalization must not cancel.
  for (const Shape& s : {Shape{4, 3, 8, 8}, Shape{5, 2, 7}}) {
    OpCase big_mean = bn_case(
        {s.size() == 4 ? "train_large_mean_4d" : "train_large_mean_3d", s, true, true, true},
        Act::none, {DType::f32}, Check::parity_only);
    big_mean.inputs[0].lo = 999.99;
    big_mean.inputs[0].hi = 1000.01;
    r.add(big_mean);
  }
  // 16-bit data with f32 parameters and statistics, computed in f32.
  for (const Norm& n : {Norm{"half_plane_36", {4, 8, 6, 6}, true, true, true},
                        Norm{"half_plane_21", {3, 5, 7, 3}, true, true, true},
                        Norm{"half_2d", {6, 4}, true, true, true},
                        Norm{"half_eval_plane_36", {4, 8, 6, 6}, true, false, true},
                        Norm{"half_eval_2d", {6, 4}, true, false, true}})
    r.add(bn_case(n, Act::none, half, Check::parity_only, DType::f32));

  // relu and relu6 fused into the normalize pass.
  for (Act act : {Act::relu, Act::relu6}) {
    for (bool training : {true, false}) {
      const std::string mode = training ? "train" : "eval";
      r.add(bn_case({(mode + "_small").c_str(), {2, 3, 4, 5}, true, training, true}, act, f32_f64,
                    Check::gradient_and_parity));
      r.add(bn_case({(mode + "_plane_36").c_str(), {4, 8, 6, 6}, true, training, true}, act,
                    f32_f64, Check::parity_only));
      r.add(bn_case({(mode + "_plane_21").c_str(), {3, 5, 7, 3}, true, training, true}, act,
                    f32_f64, Check::parity_only));
      r.add(bn_case({(mode + "_bf16").c_str(), {3, 4, 5, 6}, true, training, true}, act,
                    {DType::bf16}, Check::parity_only, DType::f32));
    }
  }

  // dropout: a fresh generator per call, so every evaluation (and device)
  // draws the same mask; x·fl(1/(1 − p)) rounds twice.
  for (const double p : {0.1, 0.4, 0.9}) {
    r.add({.op = "dropout",
           .name = "p_" + std::to_string(p).substr(0, 3),
           .inputs = {{.shape = {6, 7}}},
           .fn =
               [p](const In& v) {
                 Generator g(7);
                 return ops::dropout(v[0], p, true, &g);
               },
           .dtypes = {DType::f32, DType::f64, DType::f16},
           .tol = {.ulps = 2}});
  }
  // dropout2d: one keep draw per (n, c) from rand((N, C)) on the tensor's
  // device, so every device drops the same channels; 4-D, 5-D and empty inputs,
  // p = 1 (all dropped).
  for (const double p : {0.1, 0.4, 1.0}) {
    r.add({.op = "dropout2d",
           .name = "p_" + std::to_string(p).substr(0, 3),
           .inputs = {{.shape = {3, 4, 2, 3}}},
           .fn =
               [p](const In& v) {
                 Generator g(9);
                 return ops::dropout2d(v[0], p, true, &g);
               },
           .dtypes = {DType::f32, DType::f64, DType::f16},
           .tol = {.ulps = 2}});
  }
  struct Channels {
    const char* name;
    Shape x;
    double p;
  };
  for (const Channels& c :
       {Channels{"4d_p0.1", {4, 33, 5, 7}, 0.1}, Channels{"4d_p0.5", {4, 33, 5, 7}, 0.5},
        Channels{"5d_p0.5", {2, 3, 4, 5, 6}, 0.5}, Channels{"empty_batch", {0, 3, 2, 2}, 0.5}})
    r.add({.op = "dropout2d",
           .name = c.name,
           .inputs = {{.shape = c.x}},
           .fn =
               [p = c.p](const In& v) {
                 Generator g(31);
                 return ops::dropout2d(v[0], p, true, &g);
               },
           .dtypes = {DType::f32, DType::f64, DType::f16},
           .check = Check::parity_only,
           .tol = {.ulps = 2}});
  r.add({.op = "dropout",
         .name = "transposed",
         .inputs = {{.shape = {20, 30}, .layout = Layout::permuted({1, 0})}},
         .fn =
             [](const In& v) {
               Generator g(5);
               return ops::dropout(v[0], 0.3, true, &g);
             },
         .check = Check::parity_only,
         .tol = {.ulps = 2}});
}

}  // namespace tcv::testing
