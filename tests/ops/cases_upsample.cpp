// upsample: nearest (2x, non-integer up, down, equal size) and bilinear with
// align_corners false and true (up, down, a size-1 output), odd sizes, a
// transposed input, an empty batch.
//
// Bounds: nearest copies (its index table is computed in f32 for every dtype,
// as PyTorch does) and its gradient sums the outputs that copied one input, at
// most ⌈out/in⌉ + 1 per dim. Bilinear weights each output's 4 taps; the
// weights come from a source coordinate computed in the dtype, within 3u·in of
// the exact one, so each output is off by γ₄·Σ|w·x| plus 4·2·3u·(in + 1)·max|x|,
// and each gradient sums its fan-in of w·dy the same way (|x|, |dy| ≤ 1 here).
#include "ops/cases.h"

namespace tcv::testing {
namespace {

using ops::InterpMode;

int64_t fan_in(int64_t in, int64_t out) {
  return (out + in - 1) / in + 1;
}

Tol upsample_tol(const Shape& x, std::array<int64_t, 2> size, InterpMode mode) {
  const int64_t fan = fan_in(x[2], size[0]) * fan_in(x[3], size[1]);
  if (mode == InterpMode::nearest) return {.terms = fan, .sums = Sums::routed};
  const double weight_ulps = 4 * 2 * 3 * static_cast<double>(std::max(x[2], x[3]) + 1);
  return {.ulps = weight_ulps,
          .scale = 1,
          .grad_ulps = weight_ulps * static_cast<double>(fan),
          .grad_scale = 1,
          .terms = std::max<int64_t>(fan, 4) + 1};
}

}  // namespace

void register_upsample_cases(OpRegistry& r) {
  struct Small {
    const char* name;
    std::array<int64_t, 2> size;
    InterpMode mode;
    bool align;
  };
  const Shape xs{2, 2, 3, 4};
  for (const Small& s : {Small{"nearest_up", {5, 7}, InterpMode::nearest, false},
                         Small{"nearest_2x", {6, 8}, InterpMode::nearest, false},
                         Small{"nearest_down", {2, 3}, InterpMode::nearest, false},
                         Small{"bilinear_up", {5, 7}, InterpMode::bilinear, false},
                         Small{"bilinear_up_aligned", {5, 7}, InterpMode::bilinear, true},
                         Small{"bilinear_down", {2, 3}, InterpMode::bilinear, false},
                         Small{"bilinear_down_aligned", {2, 1}, InterpMode::bilinear, true}}) {
    const Small c = s;
    r.add({.op = "upsample",
           .name = c.name,
           .inputs = {{.shape = xs}},
           .fn = [c](const In& v) { return ops::upsample(v[0], c.size, c.mode, c.align); },
           .tol = upsample_tol(xs, c.size, c.mode)});
  }
  const Shape wide{2, 3, 5, 7};
  const std::array<int64_t, 2> sizes[] = {{10, 14}, {13, 9}, {3, 4}, {5, 7}, {1, 1}};
  for (const auto& size : sizes) {
    const std::string tag = std::to_string(size[0]) + "x" + std::to_string(size[1]);
    r.add({.op = "upsample",
           .name = "nearest_" + tag,
           .inputs = {{.shape = wide}},
           .fn = [size](const In& v) { return ops::upsample(v[0], size, InterpMode::nearest); },
           .check = Check::parity_only,
           .tol = upsample_tol(wide, size, InterpMode::nearest)});
    for (const bool align : {false, true})
      r.add({.op = "upsample",
             .name = "bilinear_" + tag + (align ? "_aligned" : ""),
             .inputs = {{.shape = wide}},
             .fn =
                 [size, align](const In& v) {
                   return ops::upsample(v[0], size, InterpMode::bilinear, align);
                 },
             .check = Check::parity_only,
             .tol = upsample_tol(wide, size, InterpMode::bilinear)});
  }
  r.add({.op = "upsample",
         .name = "bilinear_transposed",
         .inputs = {{.shape = {2, 3, 4, 6}, .layout = Layout::permuted({0, 1, 3, 2})}},
         .fn =
             [](const In& v) {
               return ops::upsample(v[0], {11, 9}, InterpMode::bilinear, false);
             },
         .dtypes = {DType::f32},
         .check = Check::parity_only,
         .tol = upsample_tol({2, 3, 4, 6}, {11, 9}, InterpMode::bilinear)});
  r.add({.op = "upsample",
         .name = "nearest_empty_batch",
         .inputs = {{.shape = {0, 3, 4, 4}}},
         .fn =
             [](const In& v) {
               return ops::upsample(v[0], {8, 8}, InterpMode::nearest);
             },
         .dtypes = {DType::f32},
         .check = Check::parity_only,
         .tol = upsample_tol({0, 3, 4, 4}, {8, 8}, InterpMode::nearest)});
}

}  // namespace tcv::testing
