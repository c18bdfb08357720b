#include "kernels/cpu/gemm.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <tuple>

#include "kernels/cpu/dnnl_common.h"
#include "kernels/cpu/loops.h"

namespace tcv::kernels::cpu {

int blas_threads() {
  // The pthreads OpenBLAS starts one thread per core by default; with the
  // OpenMP pool that makes twice as many busy threads as cores right after
  // an elementwise loop. Follow OpenMP's count instead (OMP_NUM_THREADS).
  static const int n = [] {
    const int t = std::max(1, omp_get_max_threads());
    openblas_set_num_threads(t);
    return t;
  }();
  return n;
}

namespace {

CBLAS_TRANSPOSE cblas_trans(Trans t) {
  return t == Trans::yes ? CblasTrans : CblasNoTrans;
}

// ---------------------------------------------------------------- oneDNN

struct DnnlKey {
  int64_t m, n, k, lda, ldb, ldc;
  Trans ta, tb;
  float alpha, beta;
  DType dtype;  // of a, b and c: f32, or bf16 (accumulated in f32)
  auto tie() const { return std::tie(m, n, k, lda, ldb, ldc, ta, tb, alpha, beta, dtype); }
  bool operator<(const DnnlKey& o) const { return tie() < o.tie(); }
};

// Row-major (m, k), (k, n), (m, n) descriptors; a transposed operand is the
// same memory read with swapped strides.
struct Descs {
  dnnl::memory::desc a, b, c;
};

Descs descs(const DnnlKey& key) {
  using Dims = dnnl::memory::dims;
  const auto dt = dnnl_util::dnnl_dtype(key.dtype);
  return {dnnl::memory::desc(Dims{key.m, key.k}, dt,
                             key.ta == Trans::no ? Dims{key.lda, 1} : Dims{1, key.lda}),
          dnnl::memory::desc(Dims{key.k, key.n}, dt,
                             key.tb == Trans::no ? Dims{key.ldb, 1} : Dims{1, key.ldb}),
          dnnl::memory::desc(Dims{key.m, key.n}, dt, Dims{key.ldc, 1})};
}

// Building a primitive descriptor costs tens of microseconds: keep one
// primitive per problem (layer shapes repeat every step). Its scratchpad is
// user-managed (a per-thread buffer), so threads may run the same primitive
// at once: ranks as threads, or batches spread over OpenMP.
struct DnnlGemm {
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul prim;
};

std::shared_ptr<DnnlGemm> dnnl_primitive(const DnnlKey& key) {
  static std::mutex mu;
  static std::map<DnnlKey, std::shared_ptr<DnnlGemm>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  const Descs d = descs(key);
  dnnl::primitive_attr attr = dnnl_util::default_attr();
  if (key.alpha != 1.0f) attr.set_output_scales(0, {key.alpha});
  if (key.beta != 0.0f) {
    dnnl::post_ops po;
    po.append_sum(key.beta);
    attr.set_post_ops(po);
  }
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(d.a, d.b, d.c), attr,
                                        dnnl_util::engine());
  auto entry = std::make_shared<DnnlGemm>(DnnlGemm{pd, dnnl::matmul(pd)});
  if (cache.size() > 4096) cache.clear();  // unbounded shape streams must not grow it forever
  cache.emplace(key, entry);
  return entry;
}

// f32 or bf16 (dt) operands and result.
void gemm_dnnl(DType dt, Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, float alpha,
               const void* a, int64_t lda, const void* b, int64_t ldb, float beta, void* c,
               int64_t ldc) {
  const DnnlKey key{m, n, k, lda, ldb, ldc, ta, tb, alpha, beta, dt};
  try {
    auto g = dnnl_primitive(key);
    const Descs d = descs(key);
    dnnl::stream& stream = dnnl_util::stream();
    g->prim.execute(stream, {{DNNL_ARG_SRC, dnnl_util::wrap(d.a, const_cast<void*>(a))},
                             {DNNL_ARG_WEIGHTS, dnnl_util::wrap(d.b, const_cast<void*>(b))},
                             {DNNL_ARG_DST, dnnl_util::wrap(d.c, c)},
                             {DNNL_ARG_SCRATCHPAD, dnnl_util::scratchpad(g->pd)}});
    stream.wait();
  } catch (const dnnl::error& err) {
    dnnl_util::rethrow("gemm", err);
  }
}

// Which library runs f32 GEMMs when the caller does not say. oneDNN: it runs on
// the same OpenMP pool as every other kernel. OpenBLAS (pthreads build) brings a
// second pool, and in a training step its threads compete with OpenMP workers
// still spinning after the previous elementwise loop: the Fashion-MNIST CNN step
// (bench FmnistCnnTrainStep, 2 cores) ran 3.4x faster with oneDNN GEMMs than with
// OpenBLAS ones (1130 vs 330 images/s, same run). On an idle machine oneDNN's
// AVX-512 kernels also win on 1024^3 (210 vs 180 GFLOP/s).
constexpr GemmLib kDefaultF32 = GemmLib::onednn;

template <typename T>
void scale_c(T* c, int64_t m, int64_t n, int64_t ldc, double beta) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      c[i * ldc + j] = beta == 0.0 ? T(0) : static_cast<T>(beta * c[i * ldc + j]);
}

}  // namespace

void gemm(DType dt, Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, double alpha,
          const void* a, int64_t lda, const void* b, int64_t ldb, double beta, void* c, int64_t ldc,
          GemmLib lib) {
  if (m == 0 || n == 0) return;
  blas_threads();
  if (k == 0) {  // BLAS wants lda >= 1 even here; the product is empty anyway
    if (dt == DType::bf16)
      scale_c(static_cast<BFloat16*>(c), m, n, ldc, beta);
    else
      TCV_DISPATCH_FLOAT(dt, "gemm", scale_c(static_cast<scalar_t*>(c), m, n, ldc, beta));
    return;
  }
  // BLAS rejects a leading dimension below 1 even for a single row or column.
  lda = std::max<int64_t>(lda, 1);
  ldb = std::max<int64_t>(ldb, 1);
  ldc = std::max<int64_t>(ldc, 1);
  if (dt == DType::bf16) {  // mixed precision: oneDNN only (OpenBLAS has no bf16 here)
    TCV_CHECK(dnnl_util::bf16_in_hardware(),
              "[gemm] bf16 on the CPU needs AVX512_BF16 or AMX-BF16 instructions, which this CPU "
              "does not offer");
    gemm_dnnl(dt, ta, tb, m, n, k, static_cast<float>(alpha), a, lda, b, ldb,
              static_cast<float>(beta), c, ldc);
    return;
  }
  if (dt == DType::f32) {
    if (lib == GemmLib::automatic) lib = kDefaultF32;
    if (lib == GemmLib::onednn) {
      gemm_dnnl(dt, ta, tb, m, n, k, static_cast<float>(alpha), a, lda, b, ldb,
                static_cast<float>(beta), c, ldc);
      return;
    }
    cblas_sgemm(CblasRowMajor, cblas_trans(ta), cblas_trans(tb), static_cast<blasint>(m),
                static_cast<blasint>(n), static_cast<blasint>(k), static_cast<float>(alpha),
                static_cast<const float*>(a), static_cast<blasint>(lda),
                static_cast<const float*>(b), static_cast<blasint>(ldb), static_cast<float>(beta),
                static_cast<float*>(c), static_cast<blasint>(ldc));
    return;
  }
  TCV_CHECK(dt == DType::f64, "[gemm] not implemented for dtype ", dtype_name(dt));
  cblas_dgemm(CblasRowMajor, cblas_trans(ta), cblas_trans(tb), static_cast<blasint>(m),
              static_cast<blasint>(n), static_cast<blasint>(k), alpha,
              static_cast<const double*>(a), static_cast<blasint>(lda),
              static_cast<const double*>(b), static_cast<blasint>(ldb), beta,
              static_cast<double*>(c), static_cast<blasint>(ldc));
}

namespace {

// Problems below this many multiply-adds run single-threaded inside OpenBLAS
// (its SMP threshold), so batches of them are better spread over OpenMP.
constexpr int64_t kSmallGemm = 65536 * 4;

}  // namespace

bool gemm_operand_ok(const KTensor& t) {
  return t.ndim >= 2 && mat_layout(t).ok;
}

void matmul(const KTensor& c, const KTensor& a, const KTensor& b, double alpha, double beta,
            GemmLib lib) {
  const int nd = c.ndim;
  const int64_t m = c.sizes[nd - 2], n = c.sizes[nd - 1], k = a.sizes[nd - 1];
  const MatLayout la = mat_layout(a), lb = mat_layout(b);
  const int64_t ldc = m == 1 ? std::max<int64_t>(n, 1) : c.strides[nd - 2];
  const size_t es = dtype_size(c.dtype);
  int64_t batch = 1;
  for (int i = 0; i < nd - 2; ++i) batch *= c.sizes[i];
  if (batch == 0 || m == 0 || n == 0) return;

  bool b_shared = true;
  for (int i = 0; i < nd - 2; ++i)
    if (b.sizes[i] != 1 && b.strides[i] != 0) b_shared = false;
  if (batch == 1 ||
      (b_shared && la.trans == Trans::no && rows_fold(a, la.ld) && rows_fold(c, ldc))) {
    gemm(c.dtype, la.trans, lb.trans, batch * m, n, k, alpha, a.data, la.ld, b.data, lb.ld, beta,
         c.data, ldc, lib);
    return;
  }

  // Small GEMMs spread over OpenMP threads go to OpenBLAS, single-threaded
  // each (below its SMP threshold).
  const bool spread = m * n * k <= kSmallGemm;
  const GemmLib per_batch = spread && c.dtype == DType::f32 ? GemmLib::openblas : lib;
  auto run = [&](int64_t lo, int64_t hi) {
    for (int64_t bi = lo; bi < hi; ++bi) {
      int64_t oa = 0, ob = 0, oc = 0, rem = bi;
      for (int i = nd - 3; i >= 0; --i) {
        const int64_t idx = rem % c.sizes[i];
        rem /= c.sizes[i];
        oa += idx * a.strides[i];
        ob += idx * b.strides[i];
        oc += idx * c.strides[i];
      }
      gemm(c.dtype, la.trans, lb.trans, m, n, k, alpha, static_cast<const char*>(a.data) + oa * es,
           la.ld, static_cast<const char*>(b.data) + ob * es, lb.ld, beta,
           static_cast<char*>(c.data) + oc * es, ldc, per_batch);
    }
  };
  if (spread) {
    parallel_for(batch, 1, run);
  } else {
    run(0, batch);
  }
}

}  // namespace tcv::kernels::cpu
