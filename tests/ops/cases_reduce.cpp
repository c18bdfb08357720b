// Reductions: sum, mean and var over dims with keepdim; max/min with indices,
// over a dim and over everything; argmax/argmin; confusion_matrix from
// logits and from labels, and accumulated in place (confusion_matrix_add_).
//
// Bounds: a sum of n terms is within γₙ·Σ|x| in any order; mean multiplies by
// a rounded 1/n (two more ulps). var is mean, subtract, square, sum, scale:
// its bound is derived below. Selection is exact and routes the gradient.
#include "ops/cases.h"

namespace tcv::testing {
namespace {

const std::vector<DType> kAllFloat = {DType::f32, DType::f64, DType::bf16, DType::f16};
const std::vector<DType> kInts = {DType::i32, DType::i64, DType::u8, DType::b8};
const std::vector<DType> kAll = {DType::f32, DType::f64, DType::bf16, DType::f16,
                                 DType::i32, DType::i64, DType::u8,   DType::b8};

struct Reduction {
  const char* name;
  Shape x;
  Shape dims;
  bool keepdim;
};

// The shapes the CPU and CUDA reductions split differently: one row, rows,
// columns, a middle dim, r = 1, several dims (a block, or apart), everything.
const std::vector<Reduction>& reductions() {
  static const std::vector<Reduction> r = {
      {"full_odd", {1000}, {0}, false},
      {"rows", {7, 1000}, {1}, false},
      {"columns_keepdim", {1000, 7}, {0}, true},
      {"r_is_1", {3, 1, 5}, {1}, false},
      {"middle", {4, 1000, 3}, {1}, false},
      {"dims_apart_keepdim", {2, 3, 4, 5}, {0, 2}, true},
      {"dims_block", {2, 3, 4, 5}, {1, 2}, false},
      {"everything", {2, 3, 4, 5}, {}, false},
      {"one_element", {1, 1}, {1}, false},
  };
  return r;
}

int64_t reduced_count(const Shape& x, const Shape& dims) {
  int64_t n = 1;
  for (size_t d = 0; d < x.size(); ++d)
    if (dims.empty() || std::find(dims.begin(), dims.end(), static_cast<int64_t>(d)) != dims.end())
      n *= x[d];
  return n;
}

// var(x) = Σ(x − m)² / (n − c), m = Σx · fl(1/n), every step rounded once in
// f32 (u), the sums within γ. With Em = γ(n+2)·mean|x| the error of m, and
// c = x − m computed with error ≤ u|c| + Em:
//   var:  (γ(n+5)·Σc² + 2·Em·Σ|c|) / (n − c)
//   dx = 2/(n − c)·(c·g − mean(c·g)) through the composite's backward:
//         2|g|/(n − c)·(3u|c| + Em + γ(n+2)·mean|c|) + 2u|dx|
BoundFn var_bound(Shape dims, int64_t correction, bool keepdim) {
  return [dims, correction, keepdim](const BoundArgs& a) {
    NoGradGuard ng;
    const DType dt = a.in_dtypes[0];
    const double u = unit_roundoff(dt);
    const Tensor x = a.inputs[0].detach();
    const int64_t n = reduced_count(x.shape(), dims);
    const double denom = static_cast<double>(n - correction);
    const Tensor m = ops::mean(x, dims, true);
    const Tensor c = ops::sub(x, m);
    const Tensor em = ops::mul(ops::mean(ops::abs(x), dims, true), gamma_n(n + 2, dt));
    Tensor bv = ops::add(ops::mul(ops::sum(ops::square(c), dims, true), gamma_n(n + 5, dt)),
                         ops::mul(ops::mul(em, ops::sum(ops::abs(c), dims, true)), 2.0));
    bv = ops::mul(bv, 1.0 / denom);
    Bounds b;
    b.outputs.push_back(keepdim ? bv : bv.reshape(a.outputs[0].shape()));
    b.grads.resize(1);
    if (a.dy[0].defined() && a.grads[0].defined()) {
      const Tensor g = ops::abs(a.dy[0]).reshape(bv.shape());
      Tensor inner = ops::add(ops::add(ops::mul(ops::abs(c), 3 * u), em),
                              ops::mul(ops::mean(ops::abs(c), dims, true), gamma_n(n + 2, dt)));
      b.grads[0] = ops::add(ops::mul(ops::mul(g, inner), 2.0 / denom),
                            ops::mul(ops::abs(a.grads[0]), 2 * u));
    }
    return b;
  };
}

void add_sum_mean_var(OpRegistry& r) {
  // The small cases the gradient check has always had.
  r.add({.op = "sum",
         .name = "dims_apart_grad",
         .inputs = {{.shape = {2, 3, 4}}},
         .fn =
             [](const In& v) {
               return ops::sum(v[0], {0, 2});
             },
         .tol = {.ulps = 1, .terms = 8}});
  r.add({.op = "sum",
         .name = "all_grad",
         .inputs = {{.shape = {3, 4}}},
         .fn = [](const In& v) { return ops::sum(v[0]); },
         .tol = {.ulps = 1, .terms = 12}});
  r.add({.op = "sum",
         .name = "transposed_grad",
         .inputs = {{.shape = {5, 4}, .layout = Layout::permuted({1, 0})}},
         .fn = [](const In& v) { return ops::sum(v[0], {1}); },
         .tol = {.ulps = 1, .terms = 4}});
  r.add({.op = "mean",
         .name = "keepdim_grad",
         .inputs = {{.shape = {2, 3, 4}}},
         .fn = [](const In& v) { return ops::mean(v[0], {1}, true); },
         .tol = {.ulps = 2, .terms = 3}});
  r.add({.op = "var",
         .name = "dim_grad",
         .inputs = {{.shape = {3, 5}}},
         .fn = [](const In& v) { return ops::var(v[0], {1}); },
         .tol = {.bound = var_bound({1}, 1, false)}});
  r.add({.op = "var",
         .name = "all_biased_grad",
         .inputs = {{.shape = {2, 3, 2}}},
         .fn = [](const In& v) { return ops::var(v[0], {}, 0); },
         .tol = {.bound = var_bound({}, 0, false)}});

  for (const Reduction& c : reductions()) {
    const int64_t n = reduced_count(c.x, c.dims);
    r.add({.op = "sum",
           .name = c.name,
           .inputs = {{.shape = c.x, .lo = -2, .hi = 2}},
           .fn = [c](const In& v) { return ops::sum(v[0], c.dims, c.keepdim); },
           .dtypes = kAllFloat,
           .check = Check::parity_only,
           .tol = {.ulps = 1, .terms = n}});
    // Integer and bool sums are exact (i64).
    r.add({.op = "sum",
           .name = std::string(c.name) + "_integers",
           .inputs = {{.shape = c.x, .grad = false}},
           .fn = [c](const In& v) { return ops::sum(v[0], c.dims, c.keepdim); },
           .dtypes = kInts,
           .check = Check::parity_only});
    r.add({.op = "mean",
           .name = c.name,
           .inputs = {{.shape = c.x, .lo = -2, .hi = 2}},
           .fn = [c](const In& v) { return ops::mean(v[0], c.dims, c.keepdim); },
           .check = Check::parity_only,
           .tol = {.ulps = 2, .terms = n}});
    if (n > 1)
      r.add({.op = "var",
             .name = c.name,
             .inputs = {{.shape = c.x, .lo = -2, .hi = 2}},
             .fn = [c](const In& v) { return ops::var(v[0], c.dims, 1, c.keepdim); },
             .check = Check::parity_only,
             .tol = {.bound = var_bound(c.dims, 1, c.keepdim)}});
  }
  r.add({.op = "sum",
         .name = "sliced",
         .inputs = {{.shape = {17, 20}, .layout = Layout::strided(1, 1, 3)}},
         .fn = [](const In& v) { return ops::sum(v[0], {0}); },
         .check = Check::parity_only,
         .tol = {.ulps = 1, .terms = 17}});
  r.add({.op = "sum",
         .name = "empty_reduction",
         .inputs = {{.shape = {0, 5}}},
         .fn = [](const In& v) { return ops::sum(v[0], {0}); },
         .check = Check::parity_only});
  r.add({.op = "sum",
         .name = "empty_output",
         .inputs = {{.shape = {5, 0}}},
         .fn = [](const In& v) { return ops::sum(v[0], {0}); },
         .check = Check::parity_only});
  r.add({.op = "sum",
         .name = "zero_dim",
         .inputs = {{.shape = {}}},
         .fn = [](const In& v) { return ops::sum(v[0]); },
         .check = Check::parity_only});
  // 0/0: NaN on every device.
  r.add({.op = "mean",
         .name = "empty_is_nan",
         .inputs = {{.shape = {0, 4}, .grad = false}},
         .fn = [](const In& v) { return ops::mean(v[0], {0}); },
         .check = Check::parity_only});
}

struct Extreme {
  const char* name;
  Shape x;
  int64_t dim;
};

const std::vector<Extreme>& extremes() {
  static const std::vector<Extreme> e = {
      {"full", {1000}, 0},         {"rows", {7, 1000}, 1},
      {"columns", {1000, 7}, 0},   {"r_is_1", {3, 1, 5}, 1},
      {"middle", {4, 1000, 3}, 1}, {"inner", {2, 3, 4, 5}, 2},
      {"last", {2, 3, 4, 5}, -1},  {"one", {1}, 0},
  };
  return e;
}

void add_extremes(OpRegistry& r) {
  const Tol routed{.terms = 1, .sums = Sums::routed};
  // Distinct random values: no ties, the maximum is differentiable.
  r.add({.op = "max",
         .name = "dim_grad",
         .inputs = {{.shape = {3, 4, 2}}},
         .fn = [](const In& v) { return ops::max(v[0], 1); },
         .tol = routed});
  r.add({.op = "max",
         .name = "dim_keepdim_grad",
         .inputs = {{.shape = {3, 4}}},
         .fn = [](const In& v) { return ops::max(v[0], 0, true); },
         .tol = routed});
  r.add({.op = "min",
         .name = "last_dim_grad",
         .inputs = {{.shape = {3, 4}}},
         .fn = [](const In& v) { return ops::min(v[0], -1); },
         .tol = routed});
  r.add({.op = "max",
         .name = "all_grad",
         .inputs = {{.shape = {3, 4}}},
         .fn = [](const In& v) { return ops::max(v[0]); },
         .tol = routed});
  r.add({.op = "min",
         .name = "all_grad",
         .inputs = {{.shape = {4, 3}, .layout = Layout::permuted({1, 0})}},
         .fn = [](const In& v) { return ops::min(v[0]); },
         .tol = routed});

  for (const Extreme& c : extremes()) {
    for (bool keep : {false, true}) {
      const std::string name = std::string(c.name) + (keep ? "_keepdim" : "");
      r.add({.op = "max",
             .name = name,
             .inputs = {{.shape = c.x, .lo = -2, .hi = 2}},
             .fn = [c, keep](const In& v) { return ops::max(v[0], c.dim, keep); },
             .dtypes = kAll,
             .check = Check::parity_only,
             .tol = routed});
      r.add({.op = "min",
             .name = name,
             .inputs = {{.shape = c.x, .lo = -2, .hi = 2}},
             .fn = [c, keep](const In& v) { return ops::min(v[0], c.dim, keep); },
             .dtypes = kAll,
             .check = Check::parity_only,
             .tol = routed});
    }
    // Ties (values in {0, 1, 2}): the first extreme, on every device.
    const std::vector<DType> tie_dtypes = {DType::f32, DType::bf16, DType::i64};
    r.add({.op = "max",
           .name = std::string(c.name) + "_ties",
           .inputs = {{.shape = c.x, .lo = 0, .hi = 3, .integers = true}},
           .fn = [c](const In& v) { return ops::max(v[0], c.dim); },
           .dtypes = tie_dtypes,
           .check = Check::parity_only,
           .tol = routed});
    r.add({.op = "argmin",
           .name = std::string(c.name) + "_ties",
           .inputs = {{.shape = c.x, .lo = 0, .hi = 3, .grad = false, .integers = true}},
           .fn = [c](const In& v) { return ops::argmin(v[0], c.dim); },
           .dtypes = tie_dtypes,
           .check = Check::parity_only});
    r.add({.op = "argmax",
           .name = std::string(c.name) + "_ties",
           .inputs = {{.shape = c.x, .lo = 0, .hi = 3, .grad = false, .integers = true}},
           .fn = [c](const In& v) { return ops::argmax(v[0], c.dim); },
           .dtypes = tie_dtypes,
           .check = Check::parity_only});
  }
  r.add({.op = "argmax",
         .name = "keepdim",
         .inputs = {{.shape = {16, 64}, .grad = false}},
         .fn = [](const In& v) { return ops::argmax(v[0], 1, true); },
         .dtypes = {DType::f32, DType::f64, DType::bf16},
         .check = Check::parity_only});
  r.add({.op = "argmin",
         .name = "transposed",
         .inputs = {{.shape = {9, 13}, .grad = false, .layout = Layout::permuted({1, 0})}},
         .fn = [](const In& v) { return ops::argmin(v[0], 0); },
         .check = Check::parity_only});
  r.add({.op = "max",
         .name = "zero_dim",
         .inputs = {{.shape = {}}},
         .fn = [](const In& v) { return ops::max(v[0], 0); },
         .check = Check::parity_only,
         .tol = routed});
  r.add({.op = "max",
         .name = "transposed",
         .inputs = {{.shape = {33, 65}, .layout = Layout::permuted({1, 0})}},
         .fn = [](const In& v) { return ops::max(v[0], 1); },
         .check = Check::parity_only,
         .tol = routed});
  r.add({.op = "max",
         .name = "empty_outer",
         .inputs = {{.shape = {0, 5}}},
         .fn = [](const In& v) { return ops::max(v[0], 1); },
         .check = Check::parity_only,
         .tol = routed});
  for (const DType dt : {DType::f32, DType::f64, DType::bf16}) {
    r.add({.op = "max",
           .name = std::string("all_") + dtype_name(dt),
           .inputs = {{.shape = {64, 129}, .lo = -2, .hi = 2}},
           .fn = [](const In& v) { return ops::max(v[0]); },
           .dtypes = {dt},
           .check = Check::parity_only,
           .tol = routed});
    r.add({.op = "min",
           .name = std::string("all_") + dtype_name(dt),
           .inputs = {{.shape = {64, 129}, .lo = -2, .hi = 2}},
           .fn = [](const In& v) { return ops::min(v[0]); },
           .dtypes = {dt},
           .check = Check::parity_only,
           .tol = routed});
  }
}

// confusion_matrix: counts of (target, prediction) pairs, exact. From logits
// the prediction is the first maximum over dim 1, which the exact run finds in
// the same rounded values; 21 classes take the CUDA kernel's shared-memory
// bins, 150 its global atomics (above 8192 bins); whole-number logits and
// bf16 make ties. About one target in five is ignore_index 255.
void add_confusion(OpRegistry& r) {
  for (const int64_t c : {int64_t(2), int64_t(21), int64_t(150)}) {
    const Shape x = c == 150 ? Shape{2, c, 23, 31} : Shape{2, c, 45, 61};
    const Shape t{x[0], x[2], x[3]};
    const Tensor target = class_targets(t, c, static_cast<uint64_t>(c), true, 255);
    r.add({.op = "confusion_matrix",
           .name = "logits_c" + std::to_string(c),
           .inputs = {{.shape = x, .grad = false}, {.value = target}},
           .fn = [c](const In& v) { return ops::confusion_matrix(v[0], v[1], c); },
           .dtypes = kAllFloat,
           .check = Check::parity_only});
    r.add({.op = "confusion_matrix",
           .name = "logits_ties_c" + std::to_string(c),
           .inputs = {{.shape = x, .lo = 0, .hi = 3, .grad = false, .integers = true},
                      {.value = target}},
           .fn = [c](const In& v) { return ops::confusion_matrix(v[0], v[1], c); },
           .dtypes = {DType::f32},
           .check = Check::parity_only});
    r.add({.op = "confusion_matrix",
           .name = "labels_c" + std::to_string(c),
           .inputs = {{.value = random_indices(t, c, static_cast<uint64_t>(c) + 1)},
                      {.value = target}},
           .fn = [c](const In& v) { return ops::confusion_matrix(v[0], v[1], c); },
           .dtypes = {DType::f32},
           .check = Check::parity_only});
    // Twice into one running total, as an evaluation accumulates its batches.
    r.add({.op = "confusion_matrix_add_",
           .name = "labels_twice_c" + std::to_string(c),
           .inputs = {{.value = random_indices(t, c, static_cast<uint64_t>(c) + 2)},
                      {.value = target}},
           .fn =
               [c](const In& v) {
                 Tensor acc = zeros({c, c}, {.dtype = DType::i64, .device = v[0].device()});
                 ops::confusion_matrix_add_(acc, v[0], v[1]);
                 ops::confusion_matrix_add_(acc, v[0], v[1]);
                 return acc;
               },
           .dtypes = {DType::f32},
           .check = Check::parity_only});
  }
  r.add(
      {.op = "confusion_matrix",
       .name = "other_ignore_index",
       .inputs = {{.shape = {3, 5, 7}, .grad = false},
                  {.value = class_targets({3, 7}, 5, 3, true, -1)}},
       .fn = [](const In& v) { return ops::confusion_matrix(v[0], v[1], 5, {.ignore_index = -1}); },
       .check = Check::parity_only});
}

}  // namespace

void register_reduce_cases(OpRegistry& r) {
  add_sum_mean_var(r);
  add_extremes(r);
  add_confusion(r);
}

}  // namespace tcv::testing
