// softmax and log_softmax along every dim of 1-D to 4-D inputs (outer or inner
// of 1, lines of 1, 7 and 1000 values, inner > 32 and the CPU's blocks of 64
// columns), transposed and sliced inputs, 0-d and empty ones; bounds from
// softmax_bounds (support/error_bound.h).
#include "ops/cases.h"

namespace tcv::testing {

void register_softmax_cases(OpRegistry& r) {
  struct Line {
    const char* name;
    Shape x;
    int64_t dim;
    Check check;
  };
  const Line lines[] = {
      {"dim0", {3, 4, 5}, 0, Check::gradient_and_parity},
      {"dim1", {3, 4, 5}, 1, Check::gradient_and_parity},
      {"dim2", {3, 4, 5}, 2, Check::gradient_and_parity},
      {"last", {3, 4, 5}, -1, Check::gradient_and_parity},
      {"full_1000", {1000}, 0, Check::parity_only},
      {"rows_1000", {7, 1000}, 1, Check::parity_only},
      {"columns_1000", {1000, 7}, 0, Check::parity_only},
      {"columns_7", {7, 1000}, 0, Check::parity_only},
      {"r_is_1", {3, 1, 5}, 1, Check::parity_only},
      {"single_column", {3, 1}, 1, Check::parity_only},
      {"one_row_33", {1, 33}, 1, Check::parity_only},
      {"middle_1000", {4, 1000, 3}, 1, Check::parity_only},
      {"4d_dim0", {2, 3, 5, 4}, 0, Check::parity_only},
      {"4d_dim1", {2, 3, 5, 4}, 1, Check::parity_only},
      {"4d_dim2", {2, 3, 5, 4}, 2, Check::parity_only},
      {"4d_dim3", {2, 3, 5, 4}, 3, Check::parity_only},
      {"inner_64", {8, 10, 64}, 1, Check::parity_only},
      {"inner_150_blocks", {2, 3, 150}, 1, Check::parity_only},
      {"4096_rows", {4096, 10}, 1, Check::parity_only},
      {"dim_minus_2", {2, 7, 37, 3}, -2, Check::parity_only},
  };
  for (const bool log : {false, true}) {
    const std::string op = log ? "log_softmax" : "softmax";
    auto fn = [log](int64_t dim) {
      return [log, dim](const In& v) {
        return log ? ops::log_softmax(v[0], dim) : ops::softmax(v[0], dim);
      };
    };
    for (const Line& l : lines)
      r.add({.op = op,
             .name = l.name,
             .inputs = {{.shape = l.x, .lo = -3, .hi = 3}},
             .fn = fn(l.dim),
             .check = l.check,
             .tol = {.bound = softmax_bound(l.dim, log)}});
    // Large logits: the maximum is subtracted first.
    r.add({.op = op,
           .name = "large_logits",
           .inputs = {{.shape = {16, 100}, .lo = -500, .hi = 500}},
           .fn = fn(1),
           .check = Check::parity_only,
           .tol = {.bound = softmax_bound(1, log)}});
    r.add({.op = op,
           .name = "transposed",
           .inputs = {{.shape = {4, 3}, .lo = -2, .hi = 2, .layout = Layout::permuted({1, 0})}},
           .fn = fn(1),
           .tol = {.bound = softmax_bound(1, log)}});
    r.add({.op = op,
           .name = "transposed_wide",
           .inputs = {{.shape = {129, 37}, .lo = -3, .hi = 3, .layout = Layout::permuted({1, 0})}},
           .fn = fn(1),
           .check = Check::parity_only,
           .tol = {.bound = softmax_bound(1, log)}});
    r.add({.op = op,
           .name = "sliced",
           .inputs = {{.shape = {9, 34}, .lo = -3, .hi = 3, .layout = Layout::strided(1, 0, 3)}},
           .fn = fn(-1),
           .check = Check::parity_only,
           .tol = {.bound = softmax_bound(-1, log)}});
    r.add({.op = op,
           .name = "zero_dim",
           .inputs = {{.shape = {}}},
           .fn = fn(0),
           .dtypes = {DType::f32},
           .check = Check::parity_only,
           .tol = {.bound = softmax_bound(0, log)}});
    r.add({.op = op,
           .name = "empty_lines",
           .inputs = {{.shape = {0, 5}}},
           .fn = fn(1),
           .dtypes = {DType::f32},
           .check = Check::parity_only,
           .tol = {.bound = softmax_bound(1, log)}});
    r.add({.op = op,
           .name = "empty_dim",
           .inputs = {{.shape = {4, 0}}},
           .fn = fn(1),
           .dtypes = {DType::f64},
           .check = Check::parity_only,
           .tol = {.bound = softmax_bound(1, log)}});
  }
}

}  // namespace tcv::testing
