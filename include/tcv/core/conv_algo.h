// How the CPU convolutions choose oneDNN's algorithm (tcv::ConvAlgo): a
// setting the kernels read and the engine, the config and tcv-bench set.
// Below every folder of the tree, like tcv/core/dtype.h.
#pragma once

#include <cstdint>
#include <string>

namespace tcv {

/// How f32 convolutions choose oneDNN's algorithm.
///  - automatic: each pass runs the fastest algorithm whose rounding error
///    stays within direct convolution's bound, |error| <= γ_K · Σ|terms| for
///    every element (K the terms of one sum: C·R·S forward, K·R·S
///    backward-data, N·OH·OW backward-weights; the bound of any summation
///    order on any CPU), on the 3x3 layers of the models tcv trains
///    (build/bench/tcv-conv-accuracy; README, Benchmarks): today oneDNN's
///    direct kernels in every pass. Winograd F(4x4, 3x3) is not: its
///    transforms mix the values of a whole tile (6x6 inputs for 4x4 outputs
///    forward and backward-data, the 3x3 taps backward-weights), so an
///    element whose terms are all zero (a region of zeros in the maps or the
///    gradients, as after a ReLU or in an image's padding) gets its
///    neighbours' rounding errors instead of an exact 0, in every pass, and
///    forward and backward-data its error is about 10x direct's elsewhere.
///  - direct: always direct convolution, as PyTorch's CPU path does.
///  - winograd: Winograd F(4x4, 3x3) for each pass of a 3x3 stride-1
///    undilated layer whose input and output channels are whole 16-channel
///    blocks and whose output is at least 8x8 (1.4-2.6x faster than direct on
///    AVX-512 at training batches of 1-4 images), unless that pass's Winograd
///    scratchpad would pass 512 MiB or oneDNN has no Winograd kernel for it
///    (CPUs without AVX-512); direct everywhere else. (On SSD's box heads,
///    1024 -> 24 channels at 19x19, Winograd's backward-weights pass took
///    1.2-1.4 s of a training step, where direct kernels of that size take
///    milliseconds; on 5x5 maps and smaller it is 2-8x slower than direct.)
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
