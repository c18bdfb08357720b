// The kernels' geometry of a convolution, from the shapes the op sees.
#pragma once

#include "engine/ops/nn.h"
#include "kernels/cpu/conv.h"

namespace tcv::testing {

/// The geometry of conv2d(x, w, bias, p) for x (N, C, H, W) and w (K, C/groups,
/// R, S), its output size computed as the op computes it.
inline kernels::Conv2dGeom conv_geom(const Shape& x, const Shape& w,
                                     const ops::Conv2dParams& p = {}, bool bias = false) {
  kernels::Conv2dGeom g;
  g.n = x[0], g.c = x[1], g.h = x[2], g.w = x[3];
  g.k = w[0], g.r = w[2], g.s = w[3];
  for (int i = 0; i < 2; ++i) {
    g.stride[i] = p.stride[i], g.pad[i] = p.padding[i], g.dilation[i] = p.dilation[i];
  }
  g.oh = (g.h + 2 * g.pad[0] - g.dilation[0] * (g.r - 1) - 1) / g.stride[0] + 1;
  g.ow = (g.w + 2 * g.pad[1] - g.dilation[1] * (g.s - 1) - 1) / g.stride[1] + 1;
  g.groups = p.groups;
  g.has_bias = bias;
  return g;
}

/// A 3x3 convolution with padding 1 from c to k channels on (n, c, h, w).
inline kernels::Conv2dGeom conv3x3_geom(int64_t n, int64_t c, int64_t k, int64_t h, int64_t w) {
  return conv_geom({n, c, h, w}, {k, c, 3, 3}, {.padding = {1, 1}});
}

}  // namespace tcv::testing
