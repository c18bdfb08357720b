// Winograd convolution on the CPU's blocked f32 layout (nChw8c on AVX2,
// nChw16c on AVX-512: kernels/cpu/blocked.h), for 3x3 stride-1 layers,
// dilated or not, and 3x3 stride-2 layers with padding 1, all three passes.
//
// Forward and backward-data (itself such a convolution of dy with the flipped,
// transposed weights) are F(2x2, 3x3): each 2x2 block of outputs is computed
// from the 4x4 block of inputs around it as Aᵀ[(G g Gᵀ) ⊙ (Bᵀ d B)]A (Lavin
// and Gray, 2015), 16 products per channel pair where direct convolution
// takes 36, so 2.25x fewer multiply-adds. The transforms' coefficients are 0,
// ±1 and ±1/2, and each output reads only the 3x3 window of inputs it depends
// on (rows and columns 0-2 of the tile for the first output, 1-3 for the
// second), so an output whose window is all zero is exactly 0; the rounding
// error is at most γ_(C+8) · Σ_c |Aᵀ|[(|G| |g| |Gᵀ|) ⊙ (|Bᵀ| |d| |B|)]|A|
// (tests/support/winograd_bound.h). The filters are transformed in f64 and
// rounded once.
//
// The weight gradient is F(3x3, 2x2), the same algorithm with the roles of
// filter and output swapped: per tile, Gᵀ[(A h Aᵀ) ⊙ (Bᵀ d B)]G with h the
// tile's 2x2 output gradients, the sums over the batch's T tiles taken in the
// transformed domain (|error| <= γ_(T+6) · M on magnitudes). Its transforms
// mix a tile's taps, so a weight element whose own terms are all zero can
// come out as rounding noise instead of 0. (oneDNN's F(4x4, 3x3) mixes a whole
// 6x6 tile into every output of every pass and errs about 10x direct's.)
//
// The tiles of the whole batch are cut into blocks that fit in L2; per block,
// one thread transforms the inputs, runs the 16 matrix products (register-
// blocked: 6 rows by two channel blocks) and transforms the outputs into y,
// adding the bias and applying a ReLU where asked, or adds the products into
// its sums of the weight gradient, which are added in thread order at the end
// (from 256x256 channel pairs, one set of sums that the threads share, each
// adding the products of its own positions).
// Layers wider than 512 channels (PSPNet's 4096 -> 512) run in chunks of 512
// input and output channels, with more tiles a block so that the filters are
// read from memory once for many tiles.
//
// A layer dilated by d is d_h x d_w undilated convolutions, one per phase of
// the outputs (y mod d_h, x mod d_w), each reading the inputs of its phase:
// the tiles are taken phase by phase, their outputs and input windows d apart
// (the dilated ResNets of DeepLabV3 and PSPNet: d = 2 and 4).
//
// A stride-2 layer (the first 3x3 of a ResNet stage) is split by the parity
// of its inputs: in 1-D, y[j] = w0·x[2j] + w2·x[2j+2] + w1·x[2j+1], F(2, 2)
// over the even inputs (3 products for 2 outputs) plus w1 times the odd ones
// (2), so 25 products for a 2x2 tile of outputs from its 5x5 window where
// direct convolution takes 36 (1.44x fewer). Its backward-data takes tiles of
// 4x4 input gradients from 3x3 windows of dy, dx[2u] = w1·dy[u] and
// dx[2u+1] = w2·dy[u] + w0·dy[u+1] (again F(2, 2) and direct: 25 products for
// 16 outputs); its weight gradient is the forward's algorithm with filter and
// output swapped, as above. Their transforms' coefficients are 0 and ±1, the
// forward and backward-data outputs read only their own windows, and the same
// bounds hold with M on their matrices. The three algorithms are each three
// 1-D maps (winograd.cpp's Stride1, Stride2, Stride2Data) that the same
// blocked kernels take as a template parameter.
#pragma once

#include <cstdint>

namespace tcv::kernels::cpu {

/// One 3x3 convolution: x (n, c, h, w) and y (n, k, oh, ow), both in the
/// blocked layout, c and k whole channel blocks; weights (k, c, 3, 3)
/// row-major. Stride 1: dilation dil_h x dil_w, oh = h + 2·pad_h - 2·dil_h,
/// ow = w + 2·pad_w - 2·dil_w, 0 <= pad <= 2·dil.
struct WinogradGeom {
  int64_t n = 0, c = 0, h = 0, w = 0, k = 0, oh = 0, ow = 0;
  int64_t pad_h = 0, pad_w = 0;
  int64_t dil_h = 1, dil_w = 1;
  /// 1, or 2 for a stride-2 layer with padding 1 and no dilation
  /// (oh = (h + 1) / 2, ow = (w + 1) / 2).
  int64_t stride = 1;
};

/// The tile x tile output tiles the kernels take over a batch of n (oh, ow)
/// outputs dilated by dil_h x dil_w: per phase as many as the largest phase
/// has (2x2 tiles; stride 2's backward-data takes 4x4 tiles of input gradients).
int64_t winograd_tiles(int64_t n, int64_t oh, int64_t ow, int64_t dil_h, int64_t dil_w,
                       int64_t tile = 2);

/// y = conv(x, weight) + bias, then a ReLU when `relu`. `bias` may be null.
void winograd_forward(const WinogradGeom& g, const float* x, const float* weight, const float* bias,
                      bool relu, float* y);

/// dx (n, c, h, w) of the forward pass `g` given dy (n, k, oh, ow), both
/// blocked: conv(dy, flipped transposed weight), the same dilation d, padding
/// 2·d - pad.
void winograd_backward_data(const WinogradGeom& g, const float* dy, const float* weight, float* dx);

/// dweight (k, c, 3, 3) row-major, and dbias (k) unless null, of the forward
/// pass `g` given x and dy (both blocked): Winograd F(3x3, 2x2) (stride 2: the
/// forward's split, roles swapped), the sums over the batch's tiles taken in
/// the transformed domain.
void winograd_backward_weights(const WinogradGeom& g, const float* x, const float* dy,
                               float* dweight, float* dbias);

}  // namespace tcv::kernels::cpu
