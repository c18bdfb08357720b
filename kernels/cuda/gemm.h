// Matrix products on the GPU through cuBLAS, the same entry points and
// semantics as kernels/cpu/gemm.h: row-major operands (passed to cuBLAS's
// column-major GEMM by swapping them), transposed views as transpose flags,
// batch dims as strided batches (stride 0 where broadcast).
//
// Element types: f32 (CUBLAS_COMPUTE_32F; TF32 tensor cores only when
// allow_tf32() is on), f64, and f16/bf16 data with f32 accumulation.
#pragma once

#include <algorithm>
#include <climits>

#include "kernels/cpu/gemm.h"
#include "kernels/cuda/entry.h"

TCV_CUDA_HEADER_BEGIN
namespace tcv::kernels::cuda {

/// Row-major c (m, n) = alpha · op(a) · op(b) + beta · c (see kernels::cpu::gemm);
/// a, b, c are device pointers. `lib` is ignored (always cuBLAS).
TCV_CUDA_API void gemm(DType dt, Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, double alpha,
                       const void* a, int64_t lda, const void* b, int64_t ldb, double beta, void* c,
                       int64_t ldc, GemmLib lib = GemmLib::automatic) TCV_CUDA_ENTRY;

/// Whether the last two dims of t can go to cuBLAS as they are: one of them
/// has unit stride, the other a leading dimension no smaller than the row,
/// and every size and leading dimension fits cuBLAS's int. Host-only logic,
/// available in every build.
inline bool gemm_operand_ok(const KTensor& t) {
  if (t.ndim < 2 || !cpu::gemm_operand_ok(t)) return false;
  for (int i = t.ndim - 2; i < t.ndim; ++i)
    if (t.sizes[i] > INT_MAX || t.strides[i] > INT_MAX) return false;
  return true;
}

/// c (B..., m, n) = alpha · a (B..., m, k) · b (B..., k, n) + beta · c, with the
/// contract of kernels::cpu::matmul (equal ranks, batch dims broadcast with
/// stride 0, operands gemm_operand_ok, c with unit column stride), for f32,
/// f64, f16 and bf16. `lib` is ignored.
TCV_CUDA_API void matmul(const KTensor& c, const KTensor& a, const KTensor& b, double alpha = 1.0,
                         double beta = 0.0, GemmLib lib = GemmLib::automatic) TCV_CUDA_ENTRY;

}  // namespace tcv::kernels::cuda
TCV_CUDA_HEADER_END
