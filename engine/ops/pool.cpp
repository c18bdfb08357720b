// Pooling ops: max, average and adaptive average over (N, C, H, W).
#include "kernels/cpu/pool.h"
#include "engine/autograd.h"
#include "engine/backend.h"
#include "engine/ops.h"
#include "kernels/cuda/pool.h"

namespace tcv::ops {

namespace {

// PyTorch's pooling_output_shape: in ceil mode the last window must start
// inside the input or its left padding.
int64_t pooled_size(int64_t in, int64_t k, int64_t pad, int64_t stride, bool ceil_mode) {
  const int64_t num = in + 2 * pad - k + (ceil_mode ? stride - 1 : 0);
  int64_t out = (num >= 0 ? num / stride : -((-num + stride - 1) / stride)) + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

// The 16-bit floats (mixed precision): f16 and bf16 on CUDA, bf16 on the CPU
// (oneDNN's kernels where they take it, else through f32).
bool pool_dtype_ok(const Tensor& x) {
  const DType dt = x.dtype();
  return dt == DType::f32 || dt == DType::f64 || dt == DType::bf16 ||
         (x.device().is_cuda() && dt == DType::f16);
}

bool cpu_bf16(const Tensor& x) {
  return x.device().is_cpu() && x.dtype() == DType::bf16;
}

kernels::Pool2dGeom pool_geom(const char* op, const Tensor& x, const Pool2dParams& p,
                              kernels::PoolKind kind) {
  TCV_CHECK(x.dim() == 4, "[", op, "] expects 4-D input (N, C, H, W), got ", x.shape_str());
  TCV_CHECK(pool_dtype_ok(x), "[", op, "] supports f32, f64 and bf16 (and f16 on CUDA), got ",
            dtype_name(x.dtype()));
  kernels::Pool2dGeom g;
  g.n = x.size(0), g.c = x.size(1), g.h = x.size(2), g.w = x.size(3);
  g.kind = kind;
  for (int i = 0; i < 2; ++i) {
    TCV_CHECK(p.kernel[i] >= 1 && p.stride[i] >= 1 && p.padding[i] >= 0, "[", op,
              "] kernel and stride must be >= 1 and padding >= 0, got kernel (", p.kernel[0], ", ",
              p.kernel[1], "), stride (", p.stride[0], ", ", p.stride[1], "), padding (",
              p.padding[0], ", ", p.padding[1], ")");
    TCV_CHECK(p.padding[i] <= p.kernel[i] / 2, "[", op, "] padding (", p.padding[0], ", ",
              p.padding[1], ") must be at most half the kernel (", p.kernel[0], ", ", p.kernel[1],
              ")");
    g.kernel[i] = p.kernel[i];
    g.stride[i] = p.stride[i];
    g.pad[i] = p.padding[i];
  }
  g.oh = pooled_size(g.h, g.kernel[0], g.pad[0], g.stride[0], p.ceil_mode);
  g.ow = pooled_size(g.w, g.kernel[1], g.pad[1], g.stride[1], p.ceil_mode);
  TCV_CHECK(g.oh >= 1 && g.ow >= 1, "[", op, "] input ", x.shape_str(),
            " is too small for kernel (", g.kernel[0], ", ", g.kernel[1], ") with padding (",
            g.pad[0], ", ", g.pad[1], "): output would be ", g.oh, "x", g.ow);
  return g;
}

Tensor pool(const char* op, const Tensor& x, kernels::Pool2dGeom g) {
  if (cpu_bf16(x) && !kernels::cpu::pool2d_takes(g, DType::bf16))
    return pool(op, x.to(DType::f32), g).to(DType::bf16);
  // A blocked input (a CPU convolution's output) is pooled as it is and gives a
  // blocked output.
  const kernels::KTensor xs = x.desc_as_stored();  // one look at the layout
  g.blocked = xs.blocked && kernels::cpu::pool2d_blockable(g, x.dtype());
  Tensor xc = g.blocked ? x.detach() : x.detach().contiguous();
  const TensorOptions opts{.dtype = x.dtype(), .device = x.device()};
  const Shape out_shape{g.n, g.c, g.oh, g.ow};
  Tensor y = g.blocked ? empty_blocked(out_shape, x.dtype()) : empty(out_shape, opts);
  const bool grad = autograd::needs_grad({&x});
  // Max pooling keeps what routes dy to the argmax: the CPU kernels' workspace
  // or i64 indices (f64 CPU, CUDA), as opaque bytes.
  Tensor ws;
  const size_t ws_bytes = x.device().is_cpu() ? kernels::cpu::pool2d_workspace_bytes(g, x.dtype())
                                              : kernels::cuda::pool2d_workspace_bytes(g, x.dtype());
  if (grad && ws_bytes > 0)
    ws = empty({static_cast<int64_t>(ws_bytes)}, {.dtype = DType::u8, .device = x.device()});
  if (y.numel() > 0) {
    const kernels::KTensor wk = ws.defined() ? ws.strided_desc() : kernels::KTensor{};
    // strided_desc() converts a blocked input the kernel was not told about (not blockable).
    TCV_KERNEL(x.device(), pool2d_forward, g, g.blocked ? xs : xc.strided_desc(),
               y.desc_as_stored(), ws.defined() ? &wk : nullptr);
  }
  if (grad)
    autograd::record(op, {x}, {y}, [g, ws, op](std::vector<Tensor>& grads) {
      Tensor dy = g.blocked ? to_blocked(grads[0]) : grads[0].contiguous();
      const Shape in_shape{g.n, g.c, g.h, g.w};
      Tensor dx = g.blocked ? empty_blocked(in_shape, dy.dtype())
                            : empty(in_shape, {.dtype = dy.dtype(), .device = dy.device()});
      if (dy.numel() == 0) return std::vector<Tensor>{dx.zero_()};
      const kernels::KTensor wk = ws.defined() ? ws.strided_desc() : kernels::KTensor{};
      // The gradient can arrive blocked (from a convolution's backward) even when
      // the input was not: strided_desc() converts it for a row-major pass.
      TCV_KERNEL(dy.device(), pool2d_backward, g,
                 g.blocked ? dy.desc_as_stored() : dy.strided_desc(), dx.desc_as_stored(),
                 ws.defined() ? &wk : nullptr);
      return std::vector<Tensor>{dx};
    });
  return y;
}

}  // namespace

Tensor max_pool2d(const Tensor& x, const Pool2dParams& p) {
  return pool("max_pool2d", x, pool_geom("max_pool2d", x, p, kernels::PoolKind::max));
}

Tensor avg_pool2d(const Tensor& x, const Pool2dParams& p) {
  // Without padding both divisors agree; the exclude variant then also covers
  // ceil-mode overhang the way PyTorch does.
  const bool include = p.count_include_pad && (p.padding[0] > 0 || p.padding[1] > 0);
  return pool(
      "avg_pool2d", x,
      pool_geom("avg_pool2d", x, p,
                include ? kernels::PoolKind::avg_include_pad : kernels::PoolKind::avg_exclude_pad));
}

Tensor adaptive_avg_pool2d(const Tensor& x, std::array<int64_t, 2> output_size) {
  TCV_CHECK(x.dim() == 4, "[adaptive_avg_pool2d] expects 4-D input (N, C, H, W), got ",
            x.shape_str());
  TCV_CHECK(output_size[0] >= 1 && output_size[1] >= 1,
            "[adaptive_avg_pool2d] output size must be positive, got (", output_size[0], ", ",
            output_size[1], ")");
  TCV_CHECK(x.size(2) >= 1 && x.size(3) >= 1, "[adaptive_avg_pool2d] empty spatial input ",
            x.shape_str());
  TCV_CHECK(pool_dtype_ok(x),
            "[adaptive_avg_pool2d] supports f32, f64 and bf16 (and f16 on CUDA), got ",
            dtype_name(x.dtype()));
  // The CPU loops are f32/f64: bf16 goes through f32.
  if (cpu_bf16(x)) return adaptive_avg_pool2d(x.to(DType::f32), output_size).to(DType::bf16);
  const Shape in_shape = x.shape();
  Tensor xc = x.detach().contiguous();
  Tensor y = empty({x.size(0), x.size(1), output_size[0], output_size[1]},
                   {.dtype = x.dtype(), .device = x.device()});  // (N, C, OH, OW)
  if (y.numel() > 0)
    TCV_KERNEL(x.device(), adaptive_avg_pool2d_forward, xc.strided_desc(), y.strided_desc());
  if (autograd::needs_grad({&x}))
    autograd::record("adaptive_avg_pool2d", {x}, {y}, [in_shape](std::vector<Tensor>& grads) {
      Tensor dy = grads[0].contiguous();
      Tensor dx = empty(in_shape, {.dtype = dy.dtype(), .device = dy.device()});
      if (dy.numel() == 0) return std::vector<Tensor>{dx.zero_()};
      TCV_KERNEL(dy.device(), adaptive_avg_pool2d_backward, dy.strided_desc(), dx.strided_desc());
      return std::vector<Tensor>{dx};
    });
  return y;
}

}  // namespace tcv::ops
