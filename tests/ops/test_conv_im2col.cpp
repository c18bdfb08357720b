// The CPU's f64 convolution (im2col + OpenBLAS dgemm, which the op table's
// gradient checks and exact references run through) against the direct
// reference loops, on every conv2d geometry of the table: forward, dx,
// dweight and dbias.
#include <gtest/gtest.h>

#include "kernels/cpu/conv.h"
#include "ops/cases.h"
#include "support/conv_geom.h"

namespace tcv::testing {
namespace {

kernels::Conv2dGeom geom_of(const ConvGeometry& c) {
  return conv_geom(c.x, c.w, c.p, c.bias);
}

// Both sum the same products in f64 in another order: within γₙ·Σ|a||b| in
// f64 of each other. Inputs in [-1, 1] and at most n = 1440 terms (dweight's
// N·OH·OW of the blocked shapes; 32·9 for y): γₙ·n < 3e-10, so 1e-12 relative
// to the sums' magnitude (≤ n) plus 1e-12 absolute holds with room.
TEST(Conv2dIm2col, F64MatchesDirectLoopsOnEveryGeometry) {
  uint64_t seed = 200;
  int checked = 0;
  for (const ConvGroup group :
       {ConvGroup::small, ConvGroup::device, ConvGroup::blocked, ConvGroup::dead_taps})
    for (const ConvGeometry& c : conv_geometries(group)) {
      SCOPED_TRACE(c.name);
      const kernels::Conv2dGeom g = geom_of(c);
      Tensor x = rand_f64(c.x, ++seed, -1, 1, false), w = rand_f64(c.w, ++seed, -1, 1, false);
      Tensor b = rand_f64({c.w[0]}, ++seed, -1, 1, false);
      Tensor dy = rand_f64({g.n, g.k, g.oh, g.ow}, ++seed, -1, 1, false);
      const double tol = 1e-12 * static_cast<double>(std::max<int64_t>(
                                     {c.w[1] * c.w[2] * c.w[3], g.n * g.oh * g.ow, int64_t(1)}));
      const kernels::KTensor bk = b.strided_desc();
      Tensor y = empty(dy.shape(), {.dtype = DType::f64}), y_ref = empty_like(y);
      kernels::cpu::conv2d_forward(g, x.strided_desc(), w.strided_desc(), &bk, y.strided_desc());
      kernels::cpu::conv2d_forward_ref(g, x.strided_desc(), w.strided_desc(), &bk,
                                       y_ref.strided_desc());
      expect_close(y, y_ref, tol, 0, "y");
      Tensor dx = empty_like(x), dw = empty_like(w), db = empty_like(b);
      Tensor dx_ref = empty_like(x), dw_ref = empty_like(w), db_ref = empty_like(b);
      const kernels::KTensor dxk = dx.strided_desc(), dwk = dw.strided_desc(),
                             dbk = db.strided_desc();
      const kernels::KTensor dxr = dx_ref.strided_desc(), dwr = dw_ref.strided_desc(),
                             dbr = db_ref.strided_desc();
      kernels::cpu::conv2d_backward(g, x.strided_desc(), w.strided_desc(), dy.strided_desc(), &dxk,
                                    &dwk, c.bias ? &dbk : nullptr);
      kernels::cpu::conv2d_backward_ref(g, x.strided_desc(), w.strided_desc(), dy.strided_desc(),
                                        &dxr, &dwr, c.bias ? &dbr : nullptr);
      expect_close(dx, dx_ref, tol, 0, "dx");
      expect_close(dw, dw_ref, tol, 0, "dweight");
      if (c.bias) expect_close(db, db_ref, tol, 0, "dbias");
      ++checked;
    }
  EXPECT_GE(checked, 27);
}

}  // namespace
}  // namespace tcv::testing
