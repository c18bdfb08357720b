// Matrix products: one batched, broadcasting GEMM op under matmul's 1-D rules,
// and linear, whose forward and backward are one GEMM each.
#include "engine/ops/linalg.h"

#include "engine/autocast.h"
#include "engine/autograd.h"
#include "engine/backend.h"
#include "engine/ops.h"
#include "kernels/cpu/conv.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cuda/gemm.h"

namespace tcv::ops {

namespace {

// As is when BLAS (cuBLAS on a GPU) can read it (transposed views included), else a copy.
Tensor blas_ready(const Tensor& t) {
  const bool ok = t.device().is_cpu() ? kernels::cpu::gemm_operand_ok(t.strided_desc())
                                      : kernels::cuda::gemm_operand_ok(t.strided_desc());
  return ok ? t : t.contiguous();
}

void check_float_pair(const char* op, const Tensor& a, const Tensor& b) {
  TCV_CHECK(a.dtype() == b.dtype(), "[", op, "] operands ", a.shape_str(), " and ", b.shape_str(),
            " have dtypes ", dtype_name(a.dtype()), " and ", dtype_name(b.dtype()));
  TCV_CHECK(a.device() == b.device(), "[", op, "] operands on ", a.device().str(), " and ",
            b.device().str());
  // cuBLAS also takes 16-bit floats (accumulating in f32); the CPU bf16 through
  // oneDNN on CPUs with bf16 instructions, and no f16.
  const bool cpu = a.device().is_cpu();
  TCV_CHECK(a.dtype() == DType::f32 || a.dtype() == DType::f64 || a.dtype() == DType::bf16 ||
                (!cpu && a.dtype() == DType::f16),
            "[", op, "] not implemented for dtype ", dtype_name(a.dtype()), " on ",
            a.device().str());
  TCV_CHECK(!cpu || a.dtype() != DType::bf16 || kernels::cpu::bf16_supported(), "[", op,
            "] bf16 on the CPU needs AVX512_BF16 or AMX-BF16 instructions, which this CPU does "
            "not offer");
}

// out (B..., m, n) = a (B..., m, k) · b (B..., k, n) with broadcast batch dims;
// no autograd. alpha/beta as in GEMM, beta applying to `out` when given.
Tensor mm_forward(const Tensor& a, const Tensor& b, Tensor out = Tensor(), double beta = 0.0) {
  Tensor ad = a.detach(), bd = b.detach();
  const Shape ab(ad.shape().begin(), ad.shape().end() - 2);
  const Shape bb(bd.shape().begin(), bd.shape().end() - 2);
  Shape batch = broadcast_shapes(ab, bb, "matmul");
  const int64_t m = ad.size(-2), k = ad.size(-1), n = bd.size(-1);
  Shape as = batch, bs = batch, cs = batch;
  as.insert(as.end(), {m, k});
  bs.insert(bs.end(), {k, n});
  cs.insert(cs.end(), {m, n});
  if (!out.defined()) out = empty(cs, {.dtype = ad.dtype(), .device = ad.device()});
  backend::require_device("matmul", ad.device(), {&ad, &bd, &out});
  TCV_KERNEL(ad.device(), matmul, out.strided_desc(), blas_ready(ad).expand(as).strided_desc(),
             blas_ready(bd).expand(bs).strided_desc(), 1.0, beta);
  return out;
}

Tensor mT(const Tensor& t) {
  return t.transpose(-1, -2);
}

// a (..., m, k) · b (..., k, n), both at least 2-D, with autograd.
Tensor matmul_nd(const Tensor& a, const Tensor& b) {
  Tensor out = mm_forward(a, b);
  if (autograd::needs_grad({&a, &b})) {
    const bool ga = a.requires_grad(), gb = b.requires_grad();
    autograd::record("matmul", {a, b}, {out},
                     [sa = SavedTensor(gb ? a : Tensor()), sb = SavedTensor(ga ? b : Tensor()),
                      a_shape = a.shape(), b_shape = b.shape()](std::vector<Tensor>& g) {
                       Tensor da, db;
                       if (sb.defined()) da = sum_to(mm_forward(g[0], mT(sb.get())), a_shape);
                       if (sa.defined()) {
                         Tensor av = sa.get();
                         if (b_shape.size() == 2 && av.dim() > 2) {
                           // A weight shared by the batch: one (k, B·m)·(B·m, n) GEMM instead
                           // of B products summed afterwards.
                           const int64_t k = av.size(-1), n = g[0].size(-1);
                           db = mm_forward(mT(av.reshape({-1, k})), g[0].reshape({-1, n}));
                         } else {
                           db = sum_to(mm_forward(mT(av), g[0]), b_shape);
                         }
                       }
                       return std::vector<Tensor>{da, db};
                     });
  }
  return out;
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  if (autocast::needs_low({&a, &b})) return matmul(autocast::to_low(a), autocast::to_low(b));
  TCV_CHECK(a.dim() >= 1 && b.dim() >= 1, "[matmul] both operands need at least 1 dim, got ",
            a.shape_str(), " and ", b.shape_str());
  check_float_pair("matmul", a, b);
  const int64_t ka = a.size(-1), kb = b.dim() == 1 ? b.size(0) : b.size(-2);
  TCV_CHECK(ka == kb, "[matmul] shapes ", a.shape_str(), " and ", b.shape_str(),
            " cannot be multiplied (", ka, " vs ", kb, ")");
  // 1-D operands become a row (left) or a column (right), removed afterwards.
  Tensor out = matmul_nd(a.dim() == 1 ? a.unsqueeze(0) : a, b.dim() == 1 ? b.unsqueeze(1) : b);
  if (a.dim() == 1) out = out.squeeze(-2);
  if (b.dim() == 1) out = out.squeeze(-1);
  return out;
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  if (autocast::needs_low({&x, &weight, &bias}))
    return linear(autocast::to_low(x), autocast::to_low(weight), autocast::to_low(bias));
  TCV_CHECK(weight.dim() == 2, "[linear] weight must be (out, in), got ", weight.shape_str());
  TCV_CHECK(x.dim() >= 1 && x.size(-1) == weight.size(1), "[linear] input ", x.shape_str(),
            " does not end in the weight's ", weight.size(1), " input features (weight ",
            weight.shape_str(), ")");
  check_float_pair("linear", x, weight);
  const int64_t in = weight.size(1), out_f = weight.size(0);
  if (bias.defined()) {
    TCV_CHECK(bias.dim() == 1 && bias.size(0) == out_f, "[linear] bias ", bias.shape_str(),
              " does not match weight ", weight.shape_str());
    check_float_pair("linear", x, bias);
  }
  Shape out_shape = x.shape();
  out_shape.back() = out_f;
  Tensor x2 = x.detach().reshape({-1, in});  // (N, in)
  const int64_t rows = x2.size(0);
  Tensor y = empty({rows, out_f}, {.dtype = x.dtype(), .device = x.device()});  // (N, out)
  // The bias goes in as the GEMM's C with beta = 1: no separate add pass.
  if (bias.defined()) backend::copy(y, bias.detach().expand({rows, out_f}));
  mm_forward(x2, mT(weight.detach()), y, bias.defined() ? 1.0 : 0.0);
  y = y.view(out_shape);
  if (autograd::needs_grad({&x, &weight, &bias})) {
    const bool gx = x.requires_grad(), gw = weight.requires_grad();
    const bool gb = bias.defined() && bias.requires_grad();
    autograd::record(
        "linear", {x, weight, bias}, {y},
        [sx = SavedTensor(gw ? x : Tensor()), sw = SavedTensor(gx ? weight : Tensor()),
         x_shape = x.shape(), in, out_f, gb](std::vector<Tensor>& g) {
          Tensor g2 = g[0].reshape({-1, out_f});  // (N, out)
          Tensor dx, dweight, dbias;
          if (sw.defined()) dx = mm_forward(g2, sw.get()).view(x_shape);
          if (sx.defined()) dweight = mm_forward(mT(g2), sx.get().reshape({-1, in}));
          if (gb) {
            if (g2.device().is_cpu()) {
              dbias = sum(g2, {0});
            } else {
              // The column sum as a (1, N)·(N, out) GEMM: cuBLAS accumulates
              // 16-bit gradients in f32.
              Tensor ones_row = ones({1, g2.size(0)}, {.dtype = g2.dtype(), .device = g2.device()});
              dbias = mm_forward(ones_row, g2).view({out_f});
            }
          }
          return std::vector<Tensor>{dx, dweight, dbias};
        });
  }
  return y;
}

}  // namespace tcv::ops
