// conv2d: shape checks, dispatch to the CPU or CUDA kernels, and its backward.
#include "kernels/cpu/conv.h"
#include "engine/autocast.h"
#include "engine/autograd.h"
#include "engine/backend.h"
#include "engine/ops.h"
#include "engine/ops/unary_grad.h"
#include "kernels/cuda/conv.h"

namespace tcv::ops {

namespace {

kernels::Conv2dGeom conv_geom(const Tensor& x, const Tensor& weight, const Tensor& bias,
                              const Conv2dParams& p) {
  TCV_CHECK(x.dim() == 4, "[conv2d] expects 4-D input (N, C, H, W), got ", x.shape_str());
  TCV_CHECK(weight.dim() == 4, "[conv2d] weight must be 4-D (K, C/groups, R, S), got ",
            weight.shape_str());
  TCV_CHECK(p.groups >= 1, "[conv2d] groups must be >= 1, got ", p.groups);
  for (int i = 0; i < 2; ++i) {
    TCV_CHECK(p.stride[i] >= 1 && p.dilation[i] >= 1 && p.padding[i] >= 0,
              "[conv2d] stride and dilation must be >= 1 and padding >= 0, got stride (",
              p.stride[0], ", ", p.stride[1], "), padding (", p.padding[0], ", ", p.padding[1],
              "), dilation (", p.dilation[0], ", ", p.dilation[1], ")");
  }
  kernels::Conv2dGeom g;
  g.n = x.size(0), g.c = x.size(1), g.h = x.size(2), g.w = x.size(3);
  g.k = weight.size(0), g.r = weight.size(2), g.s = weight.size(3);
  g.groups = p.groups;
  TCV_CHECK(g.c % g.groups == 0 && g.k % g.groups == 0, "[conv2d] groups ", g.groups,
            " must divide input channels ", g.c, " and output channels ", g.k);
  TCV_CHECK(weight.size(1) * g.groups == g.c, "[conv2d] weight ", weight.shape_str(),
            " expects input channels ", weight.size(1) * g.groups, " (groups ", g.groups,
            "), got input ", x.shape_str());
  TCV_CHECK(x.dtype() == weight.dtype(), "[conv2d] input is ", dtype_name(x.dtype()),
            " but weight is ", dtype_name(weight.dtype()));
  // cuDNN also takes f16/bf16 (computing in f32); oneDNN bf16 on CPUs with bf16
  // instructions (kernels::cpu::bf16_supported), f16 not.
  const bool cpu = x.device().is_cpu();
  TCV_CHECK(x.dtype() == DType::f32 || x.dtype() == DType::f64 || x.dtype() == DType::bf16 ||
                (!cpu && x.dtype() == DType::f16),
            "[conv2d] supports f32, f64", cpu ? " and bf16" : ", f16 and bf16", " on ",
            x.device().str(), ", got ", dtype_name(x.dtype()));
  TCV_CHECK(!cpu || x.dtype() != DType::bf16 || kernels::cpu::bf16_supported(),
            "[conv2d] bf16 on the CPU needs AVX512_BF16 or AMX-BF16 instructions, which this CPU "
            "does not offer (use f32, or mixed precision on CUDA)");
  TCV_CHECK(x.device() == weight.device(), "[conv2d] input on ", x.device().str(),
            " but weight on ", weight.device().str());
  if (bias.defined()) {
    TCV_CHECK(bias.dim() == 1 && bias.size(0) == g.k, "[conv2d] bias ", bias.shape_str(),
              " must be (", g.k, ") for weight ", weight.shape_str());
    TCV_CHECK(bias.dtype() == x.dtype(), "[conv2d] bias is ", dtype_name(bias.dtype()),
              " but input is ", dtype_name(x.dtype()));
  }
  g.has_bias = bias.defined();
  for (int i = 0; i < 2; ++i) {
    g.stride[i] = p.stride[i];
    g.pad[i] = p.padding[i];
    g.dilation[i] = p.dilation[i];
  }
  const int64_t eff_r = (g.r - 1) * g.dilation[0] + 1, eff_s = (g.s - 1) * g.dilation[1] + 1;
  TCV_CHECK(g.h + 2 * g.pad[0] >= eff_r && g.w + 2 * g.pad[1] >= eff_s, "[conv2d] input ",
            x.shape_str(), " padded by (", g.pad[0], ", ", g.pad[1],
            ") is smaller than the dilated kernel (", eff_r, ", ", eff_s, ")");
  g.oh = (g.h + 2 * g.pad[0] - eff_r) / g.stride[0] + 1;
  g.ow = (g.w + 2 * g.pad[1] - eff_s) / g.stride[1] + 1;
  return g;
}

// The blocked layouts of g's CPU f32 and bf16 primitives, kept only for
// activations whose shape can be held blocked (none on CUDA or in f64).
kernels::cpu::ConvBlockedLayouts blocked_layouts(
    const kernels::Conv2dGeom& g, const Tensor& t,
    kernels::cpu::ConvAct act = kernels::cpu::ConvAct::none) {
  const DType dt = t.dtype();
  if (!t.device().is_cpu() || (dt != DType::f32 && dt != DType::bf16)) return {};
  kernels::cpu::ConvBlockedLayouts bl = kernels::cpu::conv2d_blocked_layouts(g, act, dt);
  const bool x_ok = blockable({g.n, g.c, g.h, g.w}, dt, kCPU);
  const bool y_ok = blockable({g.n, g.k, g.oh, g.ow}, dt, kCPU);
  bl.src &= x_ok, bl.diff_src &= x_ok, bl.bwd_src &= x_ok;
  bl.dst &= y_ok, bl.diff_dst &= y_ok, bl.bwd_diff_dst &= y_ok;
  return bl;
}

// How many kernel rows (or columns) to cut from each end because they read
// only the zero padding, for every output position: tap i reads input rows
// oy·stride − pad + i·dilation, oy in [0, out). The cut is symmetric (the
// same count off both ends), so padding stays symmetric and the output size
// is unchanged; at least one tap is kept.
int64_t dead_taps(int64_t in, int64_t out, int64_t k, int64_t stride, int64_t pad, int64_t dil) {
  auto dead = [&](int64_t i) {
    const int64_t lo = i * dil - pad, hi = (out - 1) * stride + i * dil - pad;
    return hi < 0 || lo >= in;
  };
  int64_t t = 0;
  while (k - 2 * (t + 1) >= 1 && dead(t) && dead(k - 1 - t)) ++t;
  return t;
}

using kernels::cpu::ConvAct;

// conv2d, and with act = relu conv2d_relu on the CPU: the activation runs as
// the convolution writes y, and backward masks dy with the saved y (as relu's
// backward does) before the convolution's backward. The node lets go of y as
// soon as dy is masked, so y is freed before the convolution's backward
// allocates dx and dweight, as when a separate relu node held it.
Tensor conv2d_impl(const Tensor& x, const Tensor& weight, const Tensor& bias, const Conv2dParams& p,
                   ConvAct act) {
  const kernels::Conv2dGeom g = conv_geom(x, weight, bias, p);
  // Kernel taps that only ever multiply padding add nothing: a 3x3 ASPP branch
  // of dilation 36 on a 32x32 map is a 1x1 convolution. They are cut off (a
  // view of the weight, so their gradient is zero), which also keeps oneDNN on
  // its direct kernels (its jit kernels refuse padding wider than their
  // register block and fall back to im2col + GEMM).
  if (g.oh > 0 && g.ow > 0) {
    const int64_t tr = dead_taps(g.h, g.oh, g.r, g.stride[0], g.pad[0], g.dilation[0]);
    const int64_t ts = dead_taps(g.w, g.ow, g.s, g.stride[1], g.pad[1], g.dilation[1]);
    if (tr > 0 || ts > 0) {
      Conv2dParams q = p;
      q.padding = {p.padding[0] - tr * p.dilation[0], p.padding[1] - ts * p.dilation[1]};
      if (g.r - 2 * tr == 1) q.dilation[0] = 1;
      if (g.s - 2 * ts == 1) q.dilation[1] = 1;
      return conv2d_impl(x, weight.narrow(2, tr, g.r - 2 * tr).narrow(3, ts, g.s - 2 * ts), bias, q,
                         act);
    }
  }
  backend::require_device("conv2d", x.device(), {&weight, &bias});
  Tensor xc = x.detach().contiguous();
  Tensor wc = weight.detach().contiguous();
  Tensor bc = bias.defined() ? bias.detach().contiguous() : Tensor();
  const Shape y_shape{g.n, g.k, g.oh, g.ow};
  // On the CPU in f32, activations stay in the layout oneDNN computes in.
  const kernels::cpu::ConvBlockedLayouts bl = blocked_layouts(g, x, act);
  Tensor y = bl.dst ? empty_blocked(y_shape, x.dtype())
                    : empty(y_shape, {.dtype = x.dtype(), .device = x.device()});
  if (y.numel() > 0) {
    const kernels::KTensor bk = bc.defined() ? bc.strided_desc() : kernels::KTensor{};
    if (x.device().is_cpu()) {
      // A parameter read without a graph (evaluation) keeps its values until an
      // in-place write bumps its version: the kernel may keep it in its layout.
      const kernels::cpu::WeightReuse reuse{.keep = !autograd::grad_enabled() &&
                                                    weight.requires_grad() &&
                                                    wc.storage() == weight.storage(),
                                            .version = weight.version()};
      profiler::Scope prof("conv2d_forward", x.device());
      kernels::cpu::conv2d_forward(g, bl.src ? xc.desc_as_stored() : xc.strided_desc(),
                                   wc.strided_desc(), bc.defined() ? &bk : nullptr,
                                   y.desc_as_stored(), act, reuse);
    } else {
      TCV_CHECK(act == ConvAct::none, "[conv2d_relu] the fused kernel is CPU-only, got ",
                x.device().str());
      TCV_KERNEL(x.device(), conv2d_forward, g, bl.src ? xc.desc_as_stored() : xc.strided_desc(),
                 wc.strided_desc(), bc.defined() ? &bk : nullptr, y.desc_as_stored());
    }
  }
  if (autograd::needs_grad({&x, &weight, &bias})) {
    const bool need_dx = x.requires_grad();
    const bool need_dw = weight.requires_grad();
    const bool need_db = bias.defined() && bias.requires_grad();
    // Save only what the wanted gradients read: x for dweight, weight for dx.
    autograd::record(
        act == ConvAct::relu ? "conv2d_relu" : "conv2d", {x, weight, bias}, {y},
        [g, need_dx, need_dw, need_db, sx = SavedTensor(need_dw ? xc : Tensor()),
         sw = SavedTensor(need_dx ? wc : Tensor()),
         sy =
             SavedTensor(act == ConvAct::relu ? y : Tensor())](std::vector<Tensor>& grads) mutable {
          Tensor dy = std::move(grads[0]);
          if (sy.defined()) {
            dy = unary_grad_consume(kernels::UnaryOp::relu, dy, sy.get());
            sy = SavedTensor();  // y is not read again
          }
          dy = dy.contiguous();  // (N, K, OH, OW)
          const Tensor xv = sx.defined() ? sx.get() : Tensor();
          const Tensor wv = sw.defined() ? sw.get() : Tensor();
          const TensorOptions opts{.dtype = dy.dtype(), .device = dy.device()};
          const Shape x_shape{g.n, g.c, g.h, g.w};
          const kernels::cpu::ConvBlockedLayouts bl = blocked_layouts(g, dy);
          // dy goes in blocked when every pass that reads it wants that layout.
          const bool dy_blocked = bl.diff_dst && (!need_dw || bl.bwd_diff_dst);
          Tensor dx =
              need_dx ? (bl.diff_src ? empty_blocked(x_shape, dy.dtype()) : empty(x_shape, opts))
                      : Tensor();
          Tensor dweight = need_dw ? empty({g.k, g.c / g.groups, g.r, g.s}, opts) : Tensor();
          Tensor dbias = need_db ? empty({g.k}, opts) : Tensor();
          if (dy.numel() == 0) {
            for (Tensor* t : {&dx, &dweight, &dbias})
              if (t->defined()) t->zero_();
          } else {
            const kernels::KTensor dxk = dx.defined() ? dx.desc_as_stored() : kernels::KTensor{};
            const kernels::KTensor dwk =
                dweight.defined() ? dweight.strided_desc() : kernels::KTensor{};
            const kernels::KTensor dbk =
                dbias.defined() ? dbias.strided_desc() : kernels::KTensor{};
            const kernels::KTensor xk = xv.defined()
                                            ? (bl.bwd_src ? xv.desc_as_stored() : xv.strided_desc())
                                            : kernels::KTensor{};
            const kernels::KTensor wk = wv.defined() ? wv.strided_desc() : kernels::KTensor{};
            const kernels::KTensor dyk = dy_blocked ? dy.desc_as_stored() : dy.strided_desc();
            TCV_KERNEL(dy.device(), conv2d_backward, g, xk, wk, dyk, need_dx ? &dxk : nullptr,
                       need_dw ? &dwk : nullptr, need_db ? &dbk : nullptr);
          }
          return std::vector<Tensor>{dx, dweight, dbias};
        });
  }
  return y;
}

}  // namespace

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, const Conv2dParams& p) {
  if (autocast::needs_low({&x, &weight, &bias}))  // mixed precision: conv in bf16/f16
    return conv2d(autocast::to_low(x), autocast::to_low(weight), autocast::to_low(bias), p);
  return conv2d_impl(x, weight, bias, p, ConvAct::none);
}

Tensor conv2d_relu(const Tensor& x, const Tensor& weight, const Tensor& bias,
                   const Conv2dParams& p) {
  if (autocast::needs_low({&x, &weight, &bias}))  // mixed precision: conv in bf16/f16
    return conv2d_relu(autocast::to_low(x), autocast::to_low(weight), autocast::to_low(bias), p);
  // One node on the CPU (in f32 and bf16 one pass: oneDNN's post-op); relu(conv2d) elsewhere.
  if (x.device().is_cpu() &&
      (x.dtype() == DType::f32 || x.dtype() == DType::f64 || x.dtype() == DType::bf16))
    return conv2d_impl(x, weight, bias, p, ConvAct::relu);
  return relu(conv2d(x, weight, bias, p));
}

}  // namespace tcv::ops
