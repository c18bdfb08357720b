// max_pool2d, avg_pool2d (count_include_pad on and off, ceil mode and its
// overhanging last window) and adaptive_avg_pool2d (dividing and
// non-dividing bins, up- and downsampling, global).
//
// Bounds: max pooling selects (exact) and routes dy, summed where windows
// overlap (at most R·S windows hold an input); average pooling sums a window
// of at most R·S values (the whole plane for adaptive bins) and divides,
// forward and backward (abs_sums).
#include "ops/cases.h"

namespace tcv::testing {
namespace {

enum class Kind : uint8_t { max, avg };

struct Pool {
  const char* name;
  Shape x;
  ops::Pool2dParams p;
};

OpCase pool_case(Kind kind, const Pool& c, Check check, std::vector<DType> dtypes) {
  const ops::Pool2dParams p = c.p;
  const int64_t window = p.kernel[0] * p.kernel[1];
  OpCase oc{.op = kind == Kind::max ? "max_pool2d" : "avg_pool2d",
            .name = c.name,
            .inputs = {{.shape = c.x}},
            .fn =
                [kind, p](const In& v) {
                  return kind == Kind::max ? ops::max_pool2d(v[0], p) : ops::avg_pool2d(v[0], p);
                },
            .dtypes = std::move(dtypes),
            .check = check,
            // Distinct values keep max pooling away from ties (its kinks).
            .grad = {.eps = 1e-6, .atol = 1e-7, .rtol = 1e-5, .kink = 1e-4}};
  oc.tol = kind == Kind::max ? Tol{.terms = window, .sums = Sums::routed}
                             : Tol{.ulps = 1, .terms = window + 2};
  return oc;
}

}  // namespace

void register_pool_cases(OpRegistry& r) {
  const std::vector<DType> f32_f64 = {DType::f32, DType::f64};
  const Pool small_max[] = {
      {"2x2", {2, 3, 6, 6}, {.kernel = {2, 2}, .stride = {2, 2}}},
      {"3x3_s2_p1", {2, 2, 7, 8}, {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}}},
      {"ceil", {1, 2, 7, 7}, {.kernel = {2, 2}, .stride = {2, 2}, .ceil_mode = true}},
      {"ceil_pad",
       {1, 2, 8, 7},
       {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}, .ceil_mode = true}},
      {"rect", {2, 2, 9, 5}, {.kernel = {3, 2}, .stride = {2, 1}, .padding = {1, 0}}},
  };
  for (const Pool& c : small_max)
    r.add(pool_case(Kind::max, c, Check::gradient_and_parity, f32_f64));
  const Pool small_avg[] = {
      {"2x2", {2, 3, 6, 6}, {.kernel = {2, 2}, .stride = {2, 2}}},
      {"pad_include", {2, 2, 7, 6}, {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}}},
      {"pad_exclude",
       {2, 2, 7, 6},
       {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}, .count_include_pad = false}},
      {"ceil", {1, 2, 7, 7}, {.kernel = {2, 2}, .stride = {2, 2}, .ceil_mode = true}},
      {"ceil_pad_include",
       {1, 2, 6, 8},
       {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}, .ceil_mode = true}},
      {"ceil_pad_exclude",
       {1, 2, 6, 8},
       {.kernel = {3, 3},
        .stride = {2, 2},
        .padding = {1, 1},
        .ceil_mode = true,
        .count_include_pad = false}},
  };
  for (const Pool& c : small_avg)
    r.add(pool_case(Kind::avg, c, Check::gradient_and_parity, f32_f64));

  // The cross-device parameters, over odd planes: overlapping, non-square and
  // overhanging windows, both count_include_pad settings.
  const ops::Pool2dParams params[] = {
      {},
      {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}},
      {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}, .ceil_mode = true},
      {.kernel = {3, 2}, .stride = {1, 2}, .padding = {1, 0}},
      {.kernel = {2, 2}, .stride = {2, 2}, .ceil_mode = true},
      {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}, .count_include_pad = false},
      {.kernel = {3, 3},
       .stride = {2, 2},
       .padding = {1, 1},
       .ceil_mode = true,
       .count_include_pad = false},
      {.kernel = {5, 5}, .stride = {3, 3}, .padding = {2, 2}, .ceil_mode = true},
  };
  int i = 0;
  for (const ops::Pool2dParams& p : params) {
    const std::string name = "params_" + std::to_string(i++);
    r.add(pool_case(Kind::max, {name.c_str(), {3, 4, 13, 11}, p}, Check::parity_only, f32_f64));
    r.add(pool_case(Kind::avg, {name.c_str(), {2, 3, 13, 10}, p}, Check::parity_only, f32_f64));
  }
  // oneDNN's blocked kernels (channels a multiple of 16).
  r.add(pool_case(Kind::max,
                  {"c32", {4, 32, 12, 12}, {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}}},
                  Check::parity_only, {DType::f32}));
  r.add(pool_case(
      Kind::avg,
      {"c32_ceil", {4, 32, 11, 11}, {.kernel = {2, 2}, .stride = {2, 2}, .ceil_mode = true}},
      Check::parity_only, {DType::f32}));
  const ops::Pool2dParams p331{.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}};
  for (Kind kind : {Kind::max, Kind::avg}) {
    OpCase t =
        pool_case(kind, {"transposed", {2, 3, 9, 12}, p331}, Check::parity_only, {DType::f32});
    t.inputs[0].layout = Layout::permuted({0, 1, 3, 2});
    r.add(t);
    OpCase nhwc = pool_case(kind, {"channels_last_view", {2, 3, 6, 6}, {}},
                            Check::gradient_and_parity, f32_f64);
    nhwc.inputs[0].layout = Layout::permuted({0, 3, 1, 2});
    r.add(nhwc);
  }
  r.add(
      pool_case(Kind::max, {"empty_batch", {0, 3, 9, 12}, p331}, Check::parity_only, {DType::f32}));

  // Adaptive bins: PyTorch's floor/ceil edges.
  struct Adaptive {
    const char* name;
    Shape x;
    std::array<int64_t, 2> out;
    Check check;
  };
  const Adaptive adaptive[] = {
      {"5x7_to_3x2", {2, 3, 5, 7}, {3, 2}, Check::gradient_and_parity},
      {"6x6_to_4x5", {1, 2, 6, 6}, {4, 5}, Check::gradient_and_parity},
      {"global", {2, 3, 4, 5}, {1, 1}, Check::gradient_and_parity},
      {"upsample", {1, 2, 3, 2}, {5, 4}, Check::gradient_and_parity},
      {"11x7_to_1x1", {2, 3, 11, 7}, {1, 1}, Check::parity_only},
      {"11x7_to_3x3", {2, 3, 11, 7}, {3, 3}, Check::parity_only},
      {"11x7_to_4x5", {2, 3, 11, 7}, {4, 5}, Check::parity_only},
      {"11x7_to_7x7", {2, 3, 11, 7}, {7, 7}, Check::parity_only},
      {"11x7_to_15x2", {2, 3, 11, 7}, {15, 2}, Check::parity_only},
  };
  for (const Adaptive& a : adaptive) {
    const std::array<int64_t, 2> out = a.out;
    r.add({.op = "adaptive_avg_pool2d",
           .name = a.name,
           .inputs = {{.shape = a.x}},
           .fn = [out](const In& v) { return ops::adaptive_avg_pool2d(v[0], out); },
           .check = a.check,
           .grad = {.eps = 1e-6, .atol = 1e-7, .rtol = 1e-5},
           .tol = {.ulps = 1, .terms = a.x[2] * a.x[3] + out[0] * out[1] + 2}});
  }
  r.add({.op = "adaptive_avg_pool2d",
         .name = "transposed",
         .inputs = {{.shape = {2, 3, 10, 9}, .layout = Layout::permuted({0, 1, 3, 2})}},
         .fn =
             [](const In& v) {
               return ops::adaptive_avg_pool2d(v[0], {3, 4});
             },
         .dtypes = {DType::f32},
         .check = Check::parity_only,
         .tol = {.ulps = 1, .terms = 90 + 12 + 2}});
}

}  // namespace tcv::testing
