// How the CPU convolutions choose their algorithm (tcv::ConvAlgo): a
// setting the kernels read and the engine, the config and tcv-bench set.
// Below every folder of the tree, like tcv/core/dtype.h.
#pragma once

#include <cstdint>
#include <string>

namespace tcv {

/// How f32 convolutions choose their algorithm.
///  - automatic: tcv's Winograd F(2x2, 3x3) (kernels/cpu/winograd.h) for the
///    forward and backward-data passes of 3x3 stride-1 layers with whole
///    channel blocks, at least 128 2x2 output tiles over the batch and at most
///    4096x512 channels, dilated ones too where each of the d x d phases of
///    the output is at least 4x4 (the dilated ResNets of DeepLabV3 and
///    PSPNet), and its F(3x3, 2x2) for their weight gradients up to 512x512
///    channels (1.2-2.4x faster than direct per pass on AVX2); the three
///    passes of 3x3 stride-2 layers with padding 1 split by the parity of
///    their inputs (25 products for 2x2 outputs where direct takes 36;
///    1.1-1.7x faster per pass on ResNet-18-CIFAR's); oneDNN's direct
///    kernels everywhere else. Every element stays
///    within the bound of the algorithm that ran it: direct's
///    |error| <= γ_K · Σ|terms| (K the terms of one sum: C·R·S forward, K·R·S
///    backward-data, N·OH·OW backward-weights; the bound of any summation
///    order on any CPU), or Winograd's γ_(C+8) · M (γ_(T+6) · M over T tiles
///    for the weight gradient), M the same transforms on magnitudes. A
///    forward or backward-data output of these kernels reads only its own
///    window, so one whose window is all zero (a zero region of the maps or
///    the gradients, after a ReLU or in an image's padding) is exactly 0; the
///    weight gradient's transforms mix a tile's taps, so a weight element
///    whose own terms are all zero can get rounding noise instead. On the 3x3
///    layers of the models tcv trains they err about as direct convolution
///    does (build/bench/tcv-conv-accuracy; README, Benchmarks;
///    docs/conv_accuracy.md). oneDNN's Winograd F(4x4, 3x3) is not used:
///    its transforms mix the values of a whole 6x6 tile into every output, so
///    an element whose terms are all zero gets its neighbours' rounding
///    errors instead of an exact 0, in every pass, and forward and
///    backward-data its error is about 10x direct's elsewhere.
///  - direct: always direct convolution, as PyTorch's CPU path does.
///  - winograd: oneDNN's Winograd F(4x4, 3x3) for each pass of a 3x3
///    stride-1 undilated layer whose input and output channels are whole
///    16-channel blocks and whose output is at least 8x8 (1.4-2.6x faster
///    than direct on AVX-512 at training batches of 1-4 images), unless that
///    pass's Winograd scratchpad would pass 512 MiB or oneDNN has no Winograd
///    kernel for it (CPUs without AVX-512); as automatic everywhere else.
///    (On SSD's box heads, 1024 -> 24 channels at 19x19, oneDNN's
///    Winograd backward-weights pass took 1.2-1.4 s of a training step, where
///    direct kernels of that size take milliseconds; on 5x5 maps and smaller
///    it is 2-8x slower than direct.)
/// The default is automatic, or the value of TCV_CONV_ALGO (auto | direct |
/// winograd); tcv-train's train.conv_algo sets it for a run. (Defined with the CPU convolutions,
/// kernels/cpu/conv.cpp.)
enum class ConvAlgo : uint8_t { automatic, direct, winograd };

/// The choice for this process (all threads), and the current one.
void set_conv_algo(ConvAlgo algo);
ConvAlgo get_conv_algo();
/// Parses "auto", "direct" or "winograd"; throws naming `what` otherwise.
ConvAlgo parse_conv_algo(const std::string& text, const std::string& what);
/// "auto", "direct" or "winograd".
const char* conv_algo_name(ConvAlgo algo);

}  // namespace tcv
