#include <climits>

#include "kernels/cuda/gemm.h"
#include "kernels/cuda/handles.cuh"
#include "kernels/cuda/loops.cuh"

namespace tcv::kernels::cuda {

namespace {

int as_int(int64_t v, const char* what) {
  TCV_CHECK(v >= 0 && v <= INT_MAX, "[matmul] ", what, " = ", v, " is beyond cuBLAS's int range");
  return static_cast<int>(v);
}

cudaDataType_t cuda_type(DType dt) {
  switch (dt) {
    case DType::f32:
      return CUDA_R_32F;
    case DType::f64:
      return CUDA_R_64F;
    case DType::f16:
      return CUDA_R_16F;
    case DType::bf16:
      return CUDA_R_16BF;
    default:
      TCV_THROW("[matmul] cuBLAS GEMM takes f32, f64, f16 or bf16, got ", dtype_name(dt));
  }
}

// c = beta · c (c = 0 when beta == 0, NaNs included): the product of an empty k.
void scale_c(const KTensor& c, double beta) {
  TCV_CUDA_DISPATCH_FLOAT(c.dtype, "matmul", {
    using A = acc_t<scalar_t>;
    const A b = static_cast<A>(beta);
    const bool zero = beta == 0.0;
    map<scalar_t, scalar_t>(
        c,
        [b, zero] __device__(scalar_t x) { return convert<scalar_t>(zero ? A(0) : b * to_acc(x)); },
        c);
  });
}

// `batch` row-major GEMMs c_i (m, n) = alpha · op(a_i) · op(b_i) + beta · c_i with
// a_i = a + i·sa (elements) etc. cuBLAS is column-major: row-major c is
// column-major cᵀ = op(b)ᵀ · op(a)ᵀ, so the operands swap and keep their flags.
void gemm_strided(DType dt, Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, double alpha,
                  const void* a, int64_t lda, int64_t sa, const void* b, int64_t ldb, int64_t sb,
                  double beta, void* c, int64_t ldc, int64_t sc, int64_t batch) {
  if (batch == 0 || m == 0 || n == 0) return;
  const cudaDataType_t type = cuda_type(dt);
  const cublasOperation_t opa = ta == Trans::no ? CUBLAS_OP_N : CUBLAS_OP_T;
  const cublasOperation_t opb = tb == Trans::no ? CUBLAS_OP_N : CUBLAS_OP_T;
  cublasHandle_t h = cublas_handle();
  const int im = as_int(m, "m"), in = as_int(n, "n"), ik = as_int(k, "k");
  const int ilda = as_int(lda, "lda"), ildb = as_int(ldb, "ldb"), ildc = as_int(ldc, "ldc");
  const int ibatch = as_int(batch, "batch");
  if (dt == DType::f64) {
    const double al = alpha, be = beta;
    TCV_CUBLAS_CHECK(cublas_api().gemm_strided_batched_ex(
        h, opb, opa, in, im, ik, &al, b, type, ildb, sb, a, type, ilda, sa, &be, c, type, ildc, sc,
        ibatch, CUBLAS_COMPUTE_64F, CUBLAS_GEMM_DEFAULT));
  } else {
    const float al = static_cast<float>(alpha), be = static_cast<float>(beta);
    const cublasComputeType_t compute =
        dt == DType::f32 && allow_tf32() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    TCV_CUBLAS_CHECK(cublas_api().gemm_strided_batched_ex(
        h, opb, opa, in, im, ik, &al, b, type, ildb, sb, a, type, ilda, sa, &be, c, type, ildc, sc,
        ibatch, compute, CUBLAS_GEMM_DEFAULT));
  }
}

}  // namespace

void gemm(DType dt, Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, double alpha,
          const void* a, int64_t lda, const void* b, int64_t ldb, double beta, void* c, int64_t ldc,
          GemmLib /*lib*/) {
  cuda_type(dt);
  if (m == 0 || n == 0) return;
  if (k == 0) {
    KTensor ct;
    ct.data = c;
    ct.dtype = dt;
    ct.ndim = 2;
    ct.sizes[0] = m;
    ct.sizes[1] = n;
    ct.strides[0] = ldc;
    ct.strides[1] = 1;
    scale_c(ct, beta);
    return;
  }
  gemm_strided(dt, ta, tb, m, n, k, alpha, a, lda, 0, b, ldb, 0, beta, c, ldc, 0, 1);
}

void matmul(const KTensor& c, const KTensor& a, const KTensor& b, double alpha, double beta,
            GemmLib /*lib*/) {
  const int nd = c.ndim;
  const int64_t m = c.sizes[nd - 2], n = c.sizes[nd - 1], k = a.sizes[nd - 1];
  const MatLayout la = mat_layout(a), lb = mat_layout(b);
  cuda_type(c.dtype);
  const int64_t ldc = m == 1 ? std::max<int64_t>(n, 1) : c.strides[nd - 2];
  int64_t batch = 1;
  for (int i = 0; i < nd - 2; ++i) batch *= c.sizes[i];
  if (batch == 0 || m == 0 || n == 0) return;
  if (k == 0) {
    scale_c(c, beta);
    return;
  }

  bool b_shared = true;
  for (int i = 0; i < nd - 2; ++i)
    if (b.sizes[i] != 1 && b.strides[i] != 0) b_shared = false;
  if (batch == 1 ||
      (b_shared && la.trans == Trans::no && rows_fold(a, la.ld) && rows_fold(c, ldc))) {
    // One GEMM: a b shared by the whole batch takes its rows as (B·m, k).
    gemm_strided(c.dtype, la.trans, lb.trans, batch * m, n, k, alpha, a.data, la.ld, 0, b.data,
                 lb.ld, 0, beta, c.data, ldc, 0, 1);
    return;
  }

  // Batch dims without size-1 ones, merged where all three operands walk them
  // as one (broadcast stride 0 merges with stride 0).
  int nb = 0;
  int64_t sizes[kMaxDims], sa[kMaxDims], sb[kMaxDims], sc[kMaxDims];
  for (int i = 0; i < nd - 2; ++i) {
    if (c.sizes[i] == 1) continue;
    if (nb > 0 && sa[nb - 1] == a.strides[i] * c.sizes[i] &&
        sb[nb - 1] == b.strides[i] * c.sizes[i] && sc[nb - 1] == c.strides[i] * c.sizes[i]) {
      sizes[nb - 1] *= c.sizes[i];
      sa[nb - 1] = a.strides[i];
      sb[nb - 1] = b.strides[i];
      sc[nb - 1] = c.strides[i];
    } else {
      sizes[nb] = c.sizes[i];
      sa[nb] = a.strides[i];
      sb[nb] = b.strides[i];
      sc[nb] = c.strides[i];
      ++nb;
    }
  }
  // The innermost batch dim is one strided-batched call; outer ones loop here.
  const int inner = nb - 1;
  int64_t outer = 1;
  for (int i = 0; i < inner; ++i) outer *= sizes[i];
  const size_t es = dtype_size(c.dtype);
  for (int64_t bi = 0; bi < outer; ++bi) {
    int64_t oa = 0, ob = 0, oc = 0, rem = bi;
    for (int i = inner - 1; i >= 0; --i) {
      const int64_t idx = rem % sizes[i];
      rem /= sizes[i];
      oa += idx * sa[i];
      ob += idx * sb[i];
      oc += idx * sc[i];
    }
    gemm_strided(c.dtype, la.trans, lb.trans, m, n, k, alpha,
                 static_cast<const char*>(a.data) + oa * es, la.ld, sa[inner],
                 static_cast<const char*>(b.data) + ob * es, lb.ld, sb[inner], beta,
                 static_cast<char*>(c.data) + oc * es, ldc, sc[inner], sizes[inner]);
  }
}

}  // namespace tcv::kernels::cuda
