// 2-D convolution on the CPU: forward, backward-data and backward-weights.
//
// f32 runs through oneDNN (blocked layouts inside; activations may also come
// and go in nChw16c, see conv2d_blocked_layouts); f64 through im2col and
// OpenBLAS's dgemm (gradient checks, f64 runs of whole networks); the direct
// reference loops are the test oracle.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/base.h"

namespace tcv::kernels {

/// Shapes and parameters of one convolution. All tensors are contiguous NCHW:
/// x (n, c, h, w), weight (k, c/groups, r, s), bias (k), y (n, k, oh, ow).
struct Conv2dGeom {
  int64_t n = 0, c = 0, h = 0, w = 0;
  int64_t k = 0, r = 0, s = 0;
  int64_t oh = 0, ow = 0;
  int64_t stride[2] = {1, 1};
  int64_t pad[2] = {0, 0};
  int64_t dilation[2] = {1, 1};
  int64_t groups = 1;
  bool has_bias = false;
  /// Multiply-adds of one pass times two.
  double flops() const { return 2.0 * n * k * (c / groups) * r * s * oh * ow; }
};

}  // namespace tcv::kernels

namespace tcv::kernels::cpu {

/// y = conv(x, weight) + bias; `bias` may be null (or ignored when !has_bias).
void conv2d_forward(const Conv2dGeom& g, const KTensor& x, const KTensor& weight,
                    const KTensor* bias, const KTensor& y);

/// Gradients of conv2d_forward given dy (n, k, oh, ow). Each output pointer may be
/// null when that gradient is not wanted; x is read only for dweight, weight only for dx.
void conv2d_backward(const Conv2dGeom& g, const KTensor& x, const KTensor& weight,
                     const KTensor& dy, const KTensor* dx, const KTensor* dweight,
                     const KTensor* dbias);

/// Direct-loop reference (f32 or f64), the test oracle.
void conv2d_forward_ref(const Conv2dGeom& g, const KTensor& x, const KTensor& weight,
                        const KTensor* bias, const KTensor& y);
void conv2d_backward_ref(const Conv2dGeom& g, const KTensor& x, const KTensor& weight,
                         const KTensor& dy, const KTensor* dx, const KTensor* dweight,
                         const KTensor* dbias);

/// Which activations of g's f32 oneDNN primitives are in the nChw16c layout
/// (kernels/cpu/blocked.h). Exactly those may be passed to conv2d_forward and
/// conv2d_backward as KTensors with `blocked` set (dst and diff_src: are
/// written blocked); every other tensor is row-major.
struct ConvBlockedLayouts {
  bool src = false, dst = false;               // forward
  bool diff_dst = false, diff_src = false;     // backward-data
  bool bwd_src = false, bwd_diff_dst = false;  // backward-weights
};
ConvBlockedLayouts conv2d_blocked_layouts(const Conv2dGeom& g);

/// Number of distinct convolution configurations whose primitives are cached.
size_t conv2d_cache_size();

/// How f32 convolutions choose oneDNN's algorithm.
///  - automatic: oneDNN picks Winograd F(4x4, 3x3) where its heuristic expects it
///    to win (3x3 kernels, stride 1, enough images per batch; about 2x faster on
///    AVX-512, results within about 1e-6 relative of direct), direct elsewhere.
///  - direct: always direct convolution, as PyTorch's CPU path does.
/// The default is automatic, or the value of TCV_CONV_ALGO (auto | direct).
enum class ConvAlgo { automatic, direct };
void set_conv_algo(ConvAlgo algo);
ConvAlgo get_conv_algo();
/// oneDNN's implementations for `g` under the current algorithm choice, as
/// "forward / backward-data / backward-weights" (e.g. "jit_wino_4x3:avx512_core / ...").
std::string conv2d_impl_names(const Conv2dGeom& g);
/// Parses "auto" or "direct"; throws naming `what` otherwise.
ConvAlgo parse_conv_algo(const std::string& text, const std::string& what);

}  // namespace tcv::kernels::cpu
