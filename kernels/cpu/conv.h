// 2-D convolution on the CPU: forward, backward-data and backward-weights.
//
// f32 runs through oneDNN (blocked layouts inside; activations may also come
// and go in nChw16c or nChw8c, see conv2d_blocked_layouts) or, for the three
// passes of 3x3 stride-1 layers and stride-2 ones with padding 1, through tcv's
// Winograd kernels on the same layouts (kernels/cpu/winograd.h, winograd2_passes);
// bf16 through oneDNN (mixed precision, on CPUs with bf16 instructions:
// bf16_supported); f64 through im2col and
// OpenBLAS's dgemm (gradient checks, f64 runs of whole networks); the direct
// reference loops are the test oracle.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/base.h"
#include "tcv/core/conv_algo.h"

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

/// An activation applied to the convolution's output as it is written.
enum class ConvAct { none, relu };

/// conv2d_forward followed by `act`, in one pass (an f32 oneDNN post-op; f64
/// and the reference apply it after the convolution). Its backward is the
/// activation's backward, then conv2d_backward.
void conv2d_forward(const Conv2dGeom& g, const KTensor& x, const KTensor& weight,
                    const KTensor* bias, const KTensor& y, ConvAct act);

/// Whether the forward may keep `weight` in oneDNN's layout for later calls:
/// `keep` for weights that stay unchanged across calls (a model's parameters
/// in evaluation), with `version` the storage's version counter, which every
/// in-place write bumps. A later call with the same bytes and version reuses
/// the reordered copy; one with another version reorders again; one without
/// `keep` (training: the weights change every step) drops the copy.
struct WeightReuse {
  bool keep = false;
  uint64_t version = 0;
};
void conv2d_forward(const Conv2dGeom& g, const KTensor& x, const KTensor& weight,
                    const KTensor* bias, const KTensor& y, ConvAct act, WeightReuse reuse);

/// Drops the kept weights whose bytes start in [data, data + nbytes): the
/// engine calls it when a CPU storage is freed, before its bytes can be reused.
/// Cheap when nothing is kept.
void conv2d_forget_weights(const void* data, size_t nbytes);
/// Bytes of weights kept in oneDNN's layout now, and how many weights.
size_t conv2d_kept_weight_bytes();
size_t conv2d_kept_weights();

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

/// Which activations of g's oneDNN primitives of `dtype` (f32, bf16) are in the
/// blocked layout (nChw16c or nChw8c for f32, channels last for bf16:
/// kernels/cpu/blocked.h). Exactly those may be passed to conv2d_forward and
/// conv2d_backward as KTensors with `blocked` set (dst and diff_src: are
/// written blocked); every other tensor is row-major.
struct ConvBlockedLayouts {
  bool src = false, dst = false;               // forward
  bool diff_dst = false, diff_src = false;     // backward-data
  bool bwd_src = false, bwd_diff_dst = false;  // backward-weights
};
/// `act`: that of the forward pass (conv2d_forward with an activation).
ConvBlockedLayouts conv2d_blocked_layouts(const Conv2dGeom& g, ConvAct act = ConvAct::none,
                                          DType dtype = DType::f32);

/// Whether this CPU runs bf16 convolutions and matrix products in hardware
/// (AVX512_BF16 or AMX-BF16 in the ISA oneDNN dispatches to; ONEDNN_MAX_CPU_ISA
/// can lower it). The CPU kernels take bf16 tensors only then.
bool bf16_supported();

/// Number of distinct convolution configurations whose primitives are cached.
size_t conv2d_cache_size();

/// The implementations of `g`'s passes under the current algorithm choice, as
/// "forward / backward-data / backward-weights": oneDNN's names (e.g.
/// "jit_wino_4x3:avx512_core"), or "wino_2x2:tcv_avx2" (tcv_avx512) for
/// tcv's F(2x2, 3x3).
std::string conv2d_impl_names(const Conv2dGeom& g);
/// The passes of `g` that `algo` asks oneDNN to run as Winograd F(4x4, 3x3)
/// (each still runs direct where oneDNN has no Winograd kernel or its
/// scratchpad would be too large).
struct WinogradPasses {
  bool forward = false, backward_data = false, backward_weights = false;
};
WinogradPasses winograd_passes(const Conv2dGeom& g, ConvAlgo algo);

/// The passes of `g` that run tcv's Winograd kernels (kernels/cpu/winograd.h)
/// under `algo`, automatic or winograd (where oneDNN's F(4x4, 3x3) does not
/// run the pass): forward and backward-data of a 3x3 stride-1 layer, dilated
/// by d or not, with padding 0 to 2·d, or of a 3x3 stride-2 undilated layer
/// with padding 1; whole channel blocks in and out, at least
/// kWinograd2MinTiles output tiles over the batch (2x2, or backward-data's 4x4
/// at stride 2), outputs at least kWinograd2MinPhase·d high and wide where
/// dilated, and at most kWinograd2MaxFilters channel pairs (the transformed
/// filters take 64 bytes a pair, 100 at stride 2); the weight gradient where
/// the forward runs, up to kWinograd2MaxWeightFilters pairs. Each still runs
/// oneDNN's primitive where its activations would not be in the blocked layout.
struct Winograd2Passes {
  bool forward = false, backward_data = false, backward_weights = false;
};
/// Fewer tiles than this ran slower than direct (3 images of 8x8 at 512
/// channels: 0.6x): the transformed filters are read for too few of them.
constexpr int64_t kWinograd2MinTiles = 128;
/// A dilated layer's phases are (OH / d) x (OW / d) maps: at least this high
/// and wide (DeepLabV3's ASPP, d = 12 to 36 on 32x32 maps, stays direct).
constexpr int64_t kWinograd2MinPhase = 4;
/// PSPNet's 4096 -> 512 head: its transformed filters take 128 MiB.
constexpr int64_t kWinograd2MaxFilters = 4096 * 512;
/// Backward-weights (F(3x3, 2x2), kernels/cpu/winograd.h) keeps 64 bytes of
/// sums per channel pair, 100 at stride 2 (per thread below 256x256 pairs, shared by the threads
/// from there): at most this many pairs.
constexpr int64_t kWinograd2MaxWeightFilters = 512 * 512;
Winograd2Passes winograd2_passes(const Conv2dGeom& g, ConvAlgo algo);

}  // namespace tcv::kernels::cpu
