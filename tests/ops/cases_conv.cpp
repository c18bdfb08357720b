// conv2d: padding, stride, dilation, groups (depthwise, with a channel
// multiplier), 1x1 and rectangular kernels, with and without bias; shapes
// whose channel counts take oneDNN's blocked kernels; a transposed and a
// channels-last view as input; each gradient alone; an empty batch; kernel
// taps that read only padding (cut off the kernel before it runs).
//
// Bound: conv2d_tol (support/op_bounds.h). 16-bit: the GPU accumulates in
// f32, the CPU convolves the same rounded numbers in f32.
#include "ops/cases.h"

namespace tcv::testing {
namespace {

using Geometry = ConvGeometry;

OpCase conv_case(const Geometry& g, std::vector<DType> dtypes, Check check,
                 std::array<bool, 3> grad = {true, true, true}) {
  const ops::Conv2dParams p = g.p;
  const bool bias = g.bias;
  OpCase c{
      .op = "conv2d",
      .name = g.name,
      .inputs = {{.shape = g.x, .grad = grad[0]}, {.shape = g.w, .grad = grad[1]}},
      .fn = [p, bias](const In& v) { return ops::conv2d(v[0], v[1], bias ? v[2] : Tensor(), p); },
      .dtypes = std::move(dtypes),
      .check = check,
      .grad = {.eps = 1e-6, .atol = 1e-7, .rtol = 1e-5},
      .tol = conv2d_tol(g.x, g.w, g.p),
      .cpu16 = Cpu16::via_f32};
  if (bias) c.inputs.push_back({.shape = {g.w[0]}, .grad = grad[2]});
  return c;
}

}  // namespace

const std::vector<ConvGeometry>& conv_geometries(ConvGroup group) {
  // Small enough for the gradient check.
  static const std::vector<ConvGeometry> small = {
      {"basic_pad1", {2, 3, 7, 9}, {4, 3, 3, 3}, true, {}},
      {"stride2", {2, 3, 8, 7}, {4, 3, 3, 3}, true, {.stride = {2, 2}, .padding = {1, 1}}},
      {"dilation2", {1, 2, 9, 8}, {3, 2, 3, 3}, true, {.padding = {2, 2}, .dilation = {2, 2}}},
      {"groups2", {2, 4, 6, 6}, {6, 2, 3, 3}, true, {.padding = {1, 1}, .groups = 2}},
      {"depthwise", {2, 4, 7, 7}, {4, 1, 3, 3}, true, {.padding = {1, 1}, .groups = 4}},
      {"depthwise_mult2", {1, 3, 6, 5}, {6, 1, 3, 3}, false, {.stride = {2, 1}, .groups = 3}},
      {"no_bias", {2, 3, 5, 5}, {2, 3, 3, 3}, false, {.padding = {1, 1}}},
      {"odd_1x1", {3, 5, 3, 4}, {7, 5, 1, 1}, true, {}},
      {"odd_5x3_asym", {1, 2, 9, 6}, {3, 2, 5, 3}, true, {.stride = {2, 3}, .padding = {2, 0}}},
  };
  // The cross-device geometries: 1x1, 3x3 stride 2, 7x7 stride 2 pad 3,
  // dilation, groups, depthwise (with a multiplier), odd sizes, batch 1 and 3.
  static const std::vector<ConvGeometry> device = {
      {"1x1", {3, 5, 7, 9}, {7, 5, 1, 1}, true, {}},
      {"3x3_s2_p1", {3, 6, 13, 11}, {8, 6, 3, 3}, true, {.stride = {2, 2}, .padding = {1, 1}}},
      {"7x7_s2_p3", {1, 3, 23, 21}, {8, 3, 7, 7}, true, {.stride = {2, 2}, .padding = {3, 3}}},
      {"dilation2_wide",
       {3, 4, 11, 10},
       {5, 4, 3, 3},
       true,
       {.padding = {2, 2}, .dilation = {2, 2}}},
      {"groups2_wide", {3, 4, 9, 9}, {6, 2, 3, 3}, true, {.padding = {1, 1}, .groups = 2}},
      {"depthwise_wide", {3, 8, 15, 15}, {8, 1, 3, 3}, true, {.padding = {1, 1}, .groups = 8}},
      {"depthwise_mult2_s2",
       {1, 3, 10, 9},
       {6, 1, 3, 3},
       false,
       {.stride = {2, 2}, .padding = {1, 1}, .groups = 3}},
      {"no_bias_3x3", {1, 3, 5, 5}, {2, 3, 3, 3}, false, {.padding = {1, 1}}},
      {"odd_5x3_asym_wide",
       {3, 2, 9, 6},
       {3, 2, 5, 3},
       true,
       {.stride = {2, 3}, .padding = {2, 0}}},
  };
  // Channel counts that are multiples of 16 take oneDNN's blocked JIT kernels.
  static const std::vector<ConvGeometry> blocked = {
      {"c32_k48_pad1", {2, 32, 10, 9}, {48, 32, 3, 3}, true, {.padding = {1, 1}}},
      {"c32_stride2", {2, 32, 9, 9}, {32, 32, 3, 3}, true, {.stride = {2, 2}, .padding = {1, 1}}},
      {"c64_1x1", {2, 64, 5, 5}, {16, 64, 1, 1}, false, {}},
      {"dw32", {2, 32, 8, 8}, {32, 1, 3, 3}, true, {.padding = {1, 1}, .groups = 32}},
      {"g2_c32",
       {1, 32, 7, 7},
       {32, 16, 3, 3},
       true,
       {.padding = {2, 2}, .dilation = {2, 2}, .groups = 2}},
  };
  // Dilations so large that some kernel rows and columns read only padding at
  // every output position: conv2d cuts them off the kernel (a view of the
  // weight, whose cut taps get a zero gradient) before the kernels run.
  static const std::vector<ConvGeometry> dead_taps = {
      {"dead_taps_center_only",
       {2, 3, 5, 6},
       {4, 3, 3, 3},
       true,
       {.padding = {6, 6}, .dilation = {6, 6}}},
      {"dead_taps_rows_only",
       {2, 3, 4, 20},
       {4, 3, 3, 3},
       true,
       {.padding = {5, 5}, .dilation = {5, 5}}},
      {"dead_taps_strided",
       {1, 2, 7, 7},
       {4, 2, 3, 3},
       true,
       {.stride = {2, 2}, .padding = {8, 8}, .dilation = {8, 8}}},
      {"dead_taps_5x5_keeps_3x3",
       {1, 2, 6, 6},
       {4, 2, 5, 5},
       true,
       {.padding = {8, 8}, .dilation = {4, 4}}},
  };
  switch (group) {
    case ConvGroup::small:
      return small;
    case ConvGroup::device:
      return device;
    case ConvGroup::blocked:
      return blocked;
    case ConvGroup::dead_taps:
      return dead_taps;
  }
  return small;
}

void register_conv_cases(OpRegistry& r) {
  const std::vector<DType> f32_f64 = {DType::f32, DType::f64};
  const std::vector<DType> all = {DType::f32, DType::f64, DType::bf16, DType::f16};
  for (const Geometry& g : conv_geometries(ConvGroup::small))
    r.add(conv_case(g, f32_f64, Check::gradient_and_parity));
  for (const Geometry& g : conv_geometries(ConvGroup::dead_taps))
    r.add(conv_case(g, f32_f64, Check::gradient_and_parity));
  const std::vector<ConvGeometry>& device = conv_geometries(ConvGroup::device);
  for (const Geometry& g : device) r.add(conv_case(g, all, Check::parity_only));
  for (const Geometry& g : conv_geometries(ConvGroup::blocked))
    r.add(conv_case(g, {DType::f32}, Check::parity_only));

  // Each gradient alone: dx with the weight frozen, dweight and dbias with the input frozen.
  const Geometry& s2 = device[1];
  OpCase dx_only = conv_case(s2, {DType::f32}, Check::parity_only, {true, false, false});
  dx_only.name = "dx_only";
  r.add(dx_only);
  OpCase dw_only = conv_case(s2, {DType::f32}, Check::parity_only, {false, true, true});
  dw_only.name = "dweight_dbias_only";
  r.add(dw_only);

  // Views as input: transposed (H and W swapped) and channels-last memory.
  OpCase transposed =
      conv_case({"transposed_input", {2, 3, 9, 7}, {4, 3, 3, 3}, true, {.padding = {1, 1}}},
                {DType::f32}, Check::parity_only);
  transposed.inputs[0].layout = Layout::permuted({0, 1, 3, 2});
  r.add(transposed);
  OpCase nhwc =
      conv_case({"channels_last_view", {2, 3, 6, 5}, {4, 3, 3, 3}, false, {.padding = {1, 1}}},
                f32_f64, Check::gradient_and_parity);
  nhwc.inputs[0].layout = Layout::permuted({0, 3, 1, 2});
  r.add(nhwc);
  r.add(conv_case({"empty_batch", {0, 3, 9, 7}, {4, 3, 3, 3}, true, {.padding = {1, 1}}},
                  {DType::f32}, Check::parity_only));
}

}  // namespace tcv::testing
