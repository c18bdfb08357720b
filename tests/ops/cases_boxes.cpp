// Detection ops: box_iou and nms on random boxes, tied scores and zero- or
// negative-area boxes, f32 and f64, from 0 to 5,000 boxes; batched_nms;
// ssd_match with tied IoUs; encode_boxes, decode_boxes and l2_normalize with
// gradients.
//
// box_iou and nms make the same correctly rounded operations in the same order
// on the CPU and on CUDA (kernels/cpu/boxes.cpp compiles without contracted
// multiply-adds): the devices must agree bit for bit. box_iou's bound against
// f64: the areas and the intersection round three times, the union
// a1 + a2 − inter twice more on magnitudes M = |a1| + |a2| + inter, the
// division once: |iou|·(5u + 4u·M/|union|). nms's keep list depends on IoUs
// compared with a threshold, which f64 may decide the other way: only the
// devices are compared. ssd_match decides on its input IoUs, the same numbers
// in f64. The box codes combine coordinates up to 260 over widths of at least
// 2 (every term at most 10·260/2 = 1300, a few roundings each); l2_normalize
// sums c squares of one sign (γ_c relative), and its gradient's dot product
// y·dy is bounded below.
#include <cmath>
#include <initializer_list>
#include <string>

#include "ops/cases.h"

namespace tcv::testing {
namespace {

const std::vector<DType> kFloat = {DType::f32, DType::f64};

/// n boxes in a 200-pixel square, widths and heights in [2, 60); `grid` snaps
/// corners to 10 px and allows zero and negative widths and heights.
Tensor random_boxes(int64_t n, uint64_t seed, bool grid) {
  Generator g(seed);
  Tensor xy = uniform({n, 2}, 0.0, 200.0, {.dtype = DType::f64}, &g);
  Tensor wh = uniform({n, 2}, 2.0, 60.0, {.dtype = DType::f64}, &g);
  if (grid) {
    xy = ops::mul(randint(0, 20, {n, 2}, {.dtype = DType::i64}, &g).to(DType::f64), 10.0);
    wh = ops::mul(randint(-1, 4, {n, 2}, {.dtype = DType::i64}, &g).to(DType::f64), 10.0);
  }
  return ops::cat({xy, ops::add(xy, wh)}, 1).contiguous();
}

/// Scores in (0, 1); `ties` draws them from {0, 0.2, ..., 0.8}.
Tensor random_scores(int64_t n, uint64_t seed, bool ties) {
  Generator g(seed + 1000);
  if (ties) return ops::mul(randint(0, 5, {n}, {.dtype = DType::i64}, &g).to(DType::f64), 0.2);
  return rand({n}, {.dtype = DType::f64}, &g);
}

/// The pieces of a case name, one after the other.
std::string joined(std::initializer_list<std::string> parts) {
  std::string s;
  for (const std::string& p : parts) s += p;
  return s;
}

Tensor col(const Tensor& t, int64_t i) {
  return t.select(1, i);
}

BoundFn box_iou_bound() {
  return [](const BoundArgs& a) {
    NoGradGuard ng;
    const double u = unit_roundoff(a.in_dtypes[0]);
    const Tensor& p = a.inputs[0];
    const Tensor& q = a.inputs[1];
    auto first = [&](int64_t i) { return col(p, i).unsqueeze(1); };   // (N, 1)
    auto second = [&](int64_t i) { return col(q, i).unsqueeze(0); };  // (1, M)
    const Tensor a1 = ops::mul(ops::sub(first(2), first(0)), ops::sub(first(3), first(1)));
    const Tensor a2 = ops::mul(ops::sub(second(2), second(0)), ops::sub(second(3), second(1)));
    const Tensor w =
        ops::relu(ops::sub(ops::minimum(first(2), second(2)), ops::maximum(first(0), second(0))));
    const Tensor h =
        ops::relu(ops::sub(ops::minimum(first(3), second(3)), ops::maximum(first(1), second(1))));
    const Tensor inter = ops::mul(w, h);
    const Tensor uni = ops::sub(ops::add(a1, a2), inter);
    const Tensor m = ops::add(ops::add(ops::abs(a1), ops::abs(a2)), inter);
    const Tensor rel = ops::add(ops::mul(ops::div(m, ops::abs(uni)), 4 * u), 5 * u);
    return Bounds{.outputs = {ops::mul(ops::abs(a.outputs[0]), rel)}, .grads = {}};
  };
}

/// x (..., c, ...) / max(‖x‖, eps) along dim, norms above eps: y within
/// (γ_c + 2u)|y| (a sum of c squares, a square root, a division); dx =
/// (dy − y·s)/n, s = Σ y·dy, within (|Δy||s| + |y|(γ_c Σ|y||dy| + Σ|Δy||dy|)
/// + 2u(|dy| + |y·s|))/n + |dx|(γ_c + 2u).
BoundFn l2_normalize_bound(int64_t dim) {
  return [dim](const BoundArgs& a) {
    NoGradGuard ng;
    const DType dt = a.in_dtypes[0];
    const double u = unit_roundoff(dt);
    const Tensor& x = a.inputs[0];
    const int64_t d = x.wrap_dim(dim, "l2_normalize_bound");
    const double g = gamma_n(x.size(d) + 2, dt);
    const Tensor y = a.outputs[0];
    const Tensor by = ops::mul(ops::abs(y), g + 2 * u);
    Bounds b{.outputs = {by}, .grads = {Tensor()}};
    if (!a.dy[0].defined()) return b;
    const Tensor dy = a.dy[0];
    const Tensor n = ops::sqrt(ops::sum(ops::square(x), {d}, true));
    const Tensor s = ops::sum(ops::mul(y, dy), {d}, true);
    const Tensor ds = ops::add(ops::mul(ops::sum(ops::abs(ops::mul(y, dy)), {d}, true), g),
                               ops::sum(ops::mul(by, ops::abs(dy)), {d}, true));
    Tensor e = ops::add(ops::mul(by, ops::abs(s)), ops::mul(ops::abs(y), ds));
    e = ops::add(e, ops::mul(ops::add(ops::abs(dy), ops::abs(ops::mul(y, s))), 2 * u));
    b.grads[0] = ops::add(ops::div(e, n), ops::mul(ops::abs(a.grads[0]), g + 2 * u));
    return b;
  };
}

/// Boxes (n, 4) from their corners xy (n, 2) and sizes wh (n, 2).
Tensor xyxy(const Tensor& xy, const Tensor& wh) {
  return ops::cat({xy, ops::add(xy, wh)}, 1);
}

}  // namespace

void register_boxes_cases(OpRegistry& r) {
  for (const bool grid : {false, true})
    r.add(
        {.op = "box_iou",
         .name = grid ? "300x1000_grid" : "300x1000",
         .inputs = {{.value = random_boxes(300, 1, grid)}, {.value = random_boxes(1000, 2, grid)}},
         .fn = [](const In& v) { return ops::box_iou(v[0], v[1]); },
         .dtypes = kFloat,
         .check = Check::parity_only,
         .tol = {.bound = box_iou_bound(), .devices = Agreement::bit_equal}});
  r.add({.op = "box_iou",
         .name = "empty",
         .inputs = {{.value = random_boxes(0, 3, false)}, {.value = random_boxes(5, 4, false)}},
         .fn = [](const In& v) { return ops::box_iou(v[0], v[1]); },
         .dtypes = {DType::f32},
         .check = Check::parity_only,
         .tol = {.devices = Agreement::bit_equal}});

  for (const int64_t n : {0, 1, 7, 64, 65, 500, 5000})
    for (const bool grid : {false, true})
      for (const bool ties : {false, true})
        for (const double thr : {0.0, 0.3, 0.5, 0.7}) {
          const uint64_t seed = static_cast<uint64_t>(n * 31 + grid * 7 + ties * 3) + 11;
          r.add({.op = "nms",
                 .name = joined({"n", std::to_string(n), grid ? "_grid" : "", ties ? "_ties" : "",
                                 "_thr", std::to_string(thr).substr(0, 3)}),
                 .inputs = {{.value = random_boxes(n, seed, grid)},
                            {.value = random_scores(n, seed, ties)}},
                 .fn = [thr](const In& v) { return ops::nms(v[0], v[1], thr); },
                 .dtypes = kFloat,
                 .check = Check::parity_only,
                 .tol = {.devices = Agreement::bit_equal},
                 .reference = Reference::none});
        }
  for (const int64_t n : {100, 4000})
    r.add({.op = "batched_nms",
           .name = joined({"n", std::to_string(n), "_20_classes"}),
           .inputs = {{.value = random_boxes(n, 9, false)},
                      {.value = random_scores(n, 9, false)},
                      {.value = random_indices({n}, 20, 5 + static_cast<uint64_t>(n))}},
           .fn = [](const In& v) { return ops::batched_nms(v[0], v[1], v[2], 0.45); },
           .dtypes = {DType::f32},
           .check = Check::parity_only,
           .tol = {.devices = Agreement::bit_equal},
           .reference = Reference::none});

  // Grid boxes give many equal IoUs: first maxima must agree.
  for (const bool grid : {false, true})
    r.add({.op = "ssd_match",
           .name = grid ? "12x3000_grid" : "12x3000",
           .inputs = {{.value =
                           ops::box_iou(random_boxes(12, 3, grid), random_boxes(3000, 4, grid))}},
           .fn =
               [](const In& v) {
                 return std::vector<Tensor>{ops::ssd_match(v[0], 0.5), ops::ssd_match(v[0], 0.1)};
               },
           .dtypes = kFloat,
           .check = Check::parity_only});
  r.add({.op = "ssd_match",
         .name = "no_ground_truth",
         .inputs = {{.value = zeros({0, 5}, {.dtype = DType::f64})}},
         .fn = [](const In& v) { return ops::ssd_match(v[0], 0.5); },
         .dtypes = {DType::f32},
         .check = Check::parity_only});

  // Box codes: boxes and anchors from corners in [0, 200) and sizes in [2, 60).
  const Tol coding{.ulps = 8, .scale = 1300};
  r.add({.op = "encode_boxes",
         .name = "3_boxes",
         .inputs = {{.shape = {3, 2}, .lo = 0, .hi = 20},
                    {.shape = {3, 2}, .lo = 2, .hi = 20},
                    {.shape = {3, 2}, .lo = 0, .hi = 20},
                    {.shape = {3, 2}, .lo = 2, .hi = 20}},
         .fn = [](const In& v) { return ops::encode_boxes(xyxy(v[0], v[1]), xyxy(v[2], v[3])); },
         .tol = coding});
  r.add({.op = "encode_boxes",
         .name = "500_boxes",
         .inputs = {{.shape = {500, 2}, .lo = 0, .hi = 200},
                    {.shape = {500, 2}, .lo = 2, .hi = 60},
                    {.shape = {500, 2}, .lo = 0, .hi = 200},
                    {.shape = {500, 2}, .lo = 2, .hi = 60}},
         .fn = [](const In& v) { return ops::encode_boxes(xyxy(v[0], v[1]), xyxy(v[2], v[3])); },
         .check = Check::parity_only,
         .tol = coding});
  r.add({.op = "encode_boxes",
         .name = "other_weights",
         .inputs = {{.shape = {7, 2}, .lo = 0, .hi = 200},
                    {.shape = {7, 2}, .lo = 2, .hi = 60},
                    {.shape = {7, 2}, .lo = 0, .hi = 200},
                    {.shape = {7, 2}, .lo = 2, .hi = 60}},
         .fn =
             [](const In& v) {
               return ops::encode_boxes(xyxy(v[0], v[1]), xyxy(v[2], v[3]),
                                        {.x = 1, .y = 1, .w = 1, .h = 1});
             },
         .check = Check::parity_only,
         .tol = coding});
  r.add({.op = "decode_boxes",
         .name = "3_codes",
         .inputs = {{.shape = {3, 4}, .lo = -0.5, .hi = 0.5},
                    {.shape = {3, 2}, .lo = 0, .hi = 20},
                    {.shape = {3, 2}, .lo = 2, .hi = 20}},
         .fn = [](const In& v) { return ops::decode_boxes(v[0], xyxy(v[1], v[2])); },
         .tol = coding});
  r.add({.op = "decode_boxes",
         .name = "500_codes_fixed_anchors",
         .inputs = {{.shape = {500, 4}, .lo = -2, .hi = 2},
                    {.shape = {500, 2}, .lo = 0, .hi = 200, .grad = false},
                    {.shape = {500, 2}, .lo = 2, .hi = 60, .grad = false}},
         .fn = [](const In& v) { return ops::decode_boxes(v[0], xyxy(v[1], v[2])); },
         .check = Check::parity_only,
         .tol = coding});
  // dw past log(1000/16): clamped before exp (no gradient there).
  r.add({.op = "decode_boxes",
         .name = "clamped_sizes",
         .inputs = {{.shape = {20, 4}, .lo = 15, .hi = 30},
                    {.shape = {20, 2}, .lo = 0, .hi = 20, .grad = false},
                    {.shape = {20, 2}, .lo = 2, .hi = 4, .grad = false}},
         .fn = [](const In& v) { return ops::decode_boxes(v[0], xyxy(v[1], v[2])); },
         .check = Check::parity_only,
         .tol = {.ulps = 8, .scale = 1300 * 63}});

  for (const DType dt : kFloat) {
    const std::string tag = dt == DType::f32 ? "_f32" : "_f64";
    r.add({.op = "l2_normalize",
           .name = "conv4_3" + tag,
           .inputs = {{.shape = {2, 512, 5, 5}, .lo = -2, .hi = 2}},
           .fn = [](const In& v) { return ops::l2_normalize(v[0], 1); },
           .dtypes = {dt},
           .check = Check::parity_only,
           .tol = {.bound = l2_normalize_bound(1)}});
    r.add({.op = "l2_normalize",
           .name = "last_dim_eps_0.5" + tag,
           .inputs = {{.shape = {300, 7}, .lo = 0.3, .hi = 0.9}},
           .fn = [](const In& v) { return ops::l2_normalize(v[0], -1, 0.5); },
           .dtypes = {dt},
           .check = Check::parity_only,
           .tol = {.bound = l2_normalize_bound(-1)}});
  }
  r.add({.op = "l2_normalize",
         .name = "dim3",
         .inputs = {{.shape = {2, 3, 2, 5}}},
         .fn = [](const In& v) { return ops::l2_normalize(v[0], 3); },
         .tol = {.bound = l2_normalize_bound(3)}});
  // Both sides of eps (0.3): positions [0, :, 0, 0] scaled far below it, where
  // the output is x / eps and the norm gets no gradient.
  {
    Tensor scale = full({2, 4, 3, 2}, 0.5, {.dtype = DType::f64});
    scale.select(0, 0).select(1, 0).select(1, 0).fill_(0.005);
    r.add({.op = "l2_normalize",
           .name = "both_sides_of_eps",
           .inputs = {{.shape = {2, 4, 3, 2}}, {.value = scale}},
           .fn = [](const In& v) { return ops::l2_normalize(ops::mul(v[0], v[1]), 1, 0.3); },
           .dtypes = {DType::f64},
           .grad = {.kink = 1e-4},
           // 4 squares summed, a root, two divisions: 12 ulps; the gradient's
           // terms are at most |dy|(1 + |y|²)/0.3 < 10.
           .tol = {.ulps = 12, .grad_ulps = 24, .grad_scale = 10}});
  }
}

}  // namespace tcv::testing
