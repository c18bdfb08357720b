// Matrix products on the CPU: row-major GEMM through OpenBLAS (cblas) or
// oneDNN, and a batched, broadcasting matmul over strided descriptors that
// passes transposed operands to BLAS as transpose flags instead of copying.
#pragma once

#include "kernels/base.h"
#include "kernels/gemm_layout.h"

namespace tcv::kernels {

/// Which library runs a GEMM. `automatic` is OpenBLAS (the reasons and figures
/// are in gemm.cpp; bench/bench_gemm.cpp measures both).
enum class GemmLib : uint8_t { automatic, openblas, onednn };

}  // namespace tcv::kernels

namespace tcv::kernels::cpu {

/// Row-major c (m, n) = alpha · op(a) · op(b) + beta · c, for f32, f64 and
/// bf16. op(a) is (m, k): a is stored (m, k) with leading dimension lda when ta
/// is Trans::no, (k, m) when Trans::yes; likewise b. f64 always goes to
/// OpenBLAS; bf16 (mixed precision, on CPUs with bf16 instructions) always to
/// oneDNN, accumulating in f32.
void gemm(DType dt, Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, double alpha,
          const void* a, int64_t lda, const void* b, int64_t ldb, double beta, void* c, int64_t ldc,
          GemmLib lib = GemmLib::automatic);

/// Whether the last two dims of t can go to BLAS as they are: one of them has
/// unit stride and the other a leading dimension no smaller than the row.
bool gemm_operand_ok(const KTensor& t);

/// c (B..., m, n) = alpha · a (B..., m, k) · b (B..., k, n) + beta · c.
/// The three have the same rank >= 2 and dtype (f32, f64, bf16); a's and b's batch
/// dims are already broadcast to c's (stride 0 where expanded). a and b must
/// satisfy gemm_operand_ok; c must have unit stride in its last dim.
/// A b shared by the whole batch folds the batch into one GEMM's rows.
void matmul(const KTensor& c, const KTensor& a, const KTensor& b, double alpha = 1.0,
            double beta = 0.0, GemmLib lib = GemmLib::automatic);

/// The number of threads OpenBLAS runs with: OpenMP's maximum, set once, so
/// BLAS threads and the OpenMP pool of the elementwise loops do not
/// oversubscribe the cores.
int blas_threads();

}  // namespace tcv::kernels::cpu
