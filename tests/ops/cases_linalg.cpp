// matmul (torch.matmul's rules: 1-D operands, batches that broadcast,
// transposed and strided operands, empty products) and linear.
//
// Bound: every result is a sum of products, within γₙ·Σ|a||b| (abs_sums) for
// the longest sum n, forward (the inner dim k) and backward (the output's rows
// or columns times the batch a broadcast operand is summed over). 16-bit
// inputs: every GEMM accumulates in f32 (the CPU computes their product in
// f32), then one rounding to the dtype.
#include "ops/cases.h"

namespace tcv::testing {
namespace {

const std::vector<DType> kHalf = {DType::bf16, DType::f16};

Tol products(int64_t n) {
  return {.ulps = 1, .terms = n + 2};
}

void add_matmul(OpRegistry& r) {
  const OpFn mm = [](const In& v) { return ops::matmul(v[0], v[1]); };
  struct Case {
    const char* name;
    Shape a, b;
    int64_t terms;  // the longest sum, forward or backward
    bool gradcheck;
  };
  const Case cases[] = {
      {"2d", {3, 4}, {4, 5}, 5, true},
      {"1d_2d", {4}, {4, 3}, 4, true},
      {"2d_1d", {3, 4}, {4}, 4, true},
      {"dot", {5}, {5}, 5, true},
      {"batched_broadcast", {2, 1, 3, 4}, {3, 4, 2}, 12, true},
      {"shared_rhs", {2, 3, 4}, {4, 5}, 6, true},
      {"shared_lhs", {3, 4}, {2, 4, 5}, 10, true},
      {"1d_batched", {4}, {2, 4, 3}, 6, true},
      {"16x32x8", {16, 32}, {32, 8}, 32, false},
      {"37x53x19", {37, 53}, {53, 19}, 53, false},
      {"1x7x1", {1, 7}, {7, 1}, 7, false},
      {"vec_mat", {13}, {13, 5}, 13, false},
      {"mat_vec", {6, 13}, {13}, 13, false},
      {"batched_vec", {3, 6, 13}, {13}, 18, false},
      {"batched", {4, 37, 53}, {4, 53, 19}, 53, false},
      {"two_batch_dims", {2, 3, 5, 7}, {2, 3, 7, 4}, 7, false},
      {"batch_times_2d", {5, 9, 11}, {11, 6}, 45, false},
      {"2d_times_batch", {9, 11}, {5, 11, 6}, 30, false},
      {"batch_dims_broadcast", {3, 1, 7, 5}, {1, 4, 5, 8}, 32, false},
      {"k_is_0", {4, 0}, {0, 3}, 1, false},
      {"m_is_0", {0, 5}, {5, 3}, 5, false},
  };
  for (const Case& c : cases)
    r.add({.op = "matmul",
           .name = c.name,
           .inputs = {{.shape = c.a}, {.shape = c.b}},
           .fn = mm,
           .check = c.gradcheck ? Check::gradient_and_parity : Check::parity_only,
           .tol = products(c.terms)});
  r.add({.op = "matmul",
         .name = "transposed_views",
         .inputs = {{.shape = {3, 4}, .layout = Layout::permuted({1, 0})},
                    {.shape = {4, 2}, .layout = Layout::permuted({1, 0})}},
         .fn = mm,
         .tol = products(4)});
  r.add({.op = "matmul",
         .name = "both_transposed",
         .inputs = {{.shape = {37, 53}, .layout = Layout::permuted({1, 0})},
                    {.shape = {53, 19}, .layout = Layout::permuted({1, 0})}},
         .fn = mm,
         .check = Check::parity_only,
         .tol = products(53)});
  r.add({.op = "matmul",
         .name = "batched_transposed",
         .inputs = {{.shape = {3, 7, 10}, .layout = Layout::permuted({0, 2, 1})},
                    {.shape = {3, 10, 8}, .layout = Layout::permuted({1, 0, 2})}},
         .fn = mm,
         .check = Check::parity_only,
         .tol = products(10)});
  // Column slices keep a leading dimension larger than the row; a step-2
  // slice has no unit stride and is copied first.
  r.add({.op = "matmul",
         .name = "sliced_columns",
         .inputs = {{.shape = {11, 13}, .layout = Layout::strided(1, 2)},
                    {.shape = {13, 9}, .layout = Layout::strided(1, 1)}},
         .fn = mm,
         .check = Check::parity_only,
         .tol = products(13)});
  r.add({.op = "matmul",
         .name = "step_2_columns",
         .inputs = {{.shape = {9, 13}, .layout = Layout::strided(1, 0, 2)}, {.shape = {13, 5}}},
         .fn = mm,
         .check = Check::parity_only,
         .tol = products(13)});
  r.add({.op = "matmul",
         .name = "permuted_batch",
         .inputs = {{.shape = {2, 3, 6, 5}, .layout = Layout::permuted({1, 0, 2, 3})},
                    {.shape = {2, 3, 5, 4}}},
         .fn = mm,
         .check = Check::parity_only,
         .tol = products(6)});
  // 16-bit: the CPU multiplies the same rounded numbers in f32.
  const Case half[] = {{"half_37x53x19", {37, 53}, {53, 19}, 53, false},
                       {"half_batched", {3, 9, 16}, {3, 16, 5}, 16, false},
                       {"half_broadcast", {4, 9, 16}, {16, 5}, 36, false}};
  for (const Case& c : half)
    r.add({.op = "matmul",
           .name = c.name,
           .inputs = {{.shape = c.a}, {.shape = c.b}},
           .fn = mm,
           .dtypes = kHalf,
           .check = Check::parity_only,
           .tol = products(c.terms),
           .cpu16 = Cpu16::via_f32});
  r.add({.op = "matmul",
         .name = "half_transposed",
         .inputs = {{.shape = {9, 16}, .layout = Layout::permuted({1, 0})}, {.shape = {16, 7}}},
         .fn = mm,
         .dtypes = kHalf,
         .check = Check::parity_only,
         .tol = products(16),
         .cpu16 = Cpu16::via_f32});
}

void add_linear(OpRegistry& r) {
  const OpFn lin = [](const In& v) { return ops::linear(v[0], v[1], v[2]); };
  const OpFn lin_nb = [](const In& v) { return ops::linear(v[0], v[1]); };
  r.add({.op = "linear",
         .name = "2d",
         .inputs = {{.shape = {5, 4}}, {.shape = {3, 4}}, {.shape = {3}}},
         .fn = lin,
         .tol = products(5)});
  r.add({.op = "linear",
         .name = "batched",
         .inputs = {{.shape = {2, 3, 4}}, {.shape = {2, 4}}, {.shape = {2}}},
         .fn = lin,
         .tol = products(6)});
  r.add({.op = "linear",
         .name = "1d",
         .inputs = {{.shape = {4}}, {.shape = {3, 4}}, {.shape = {3}}},
         .fn = lin,
         .tol = products(4)});
  r.add({.op = "linear",
         .name = "no_bias",
         .inputs = {{.shape = {3, 4}}, {.shape = {2, 4}}},
         .fn = lin_nb,
         .tol = products(4)});
  // Only the weight needs a gradient (frozen features).
  r.add({.op = "linear",
         .name = "weight_only",
         .inputs = {{.shape = {3, 4}, .grad = false},
                    {.shape = {2, 4}},
                    {.shape = {2}, .grad = false}},
         .fn = lin,
         .tol = products(4)});
  r.add({.op = "linear",
         .name = "bias_2d",
         .inputs = {{.shape = {37, 53}}, {.shape = {19, 53}}, {.shape = {19}}},
         .fn = lin,
         .check = Check::parity_only,
         .tol = products(53)});
  r.add({.op = "linear",
         .name = "bias_3d",
         .inputs = {{.shape = {4, 7, 13}}, {.shape = {6, 13}}, {.shape = {6}}},
         .fn = lin,
         .check = Check::parity_only,
         .tol = products(28)});
  r.add({.op = "linear",
         .name = "no_bias_3d",
         .inputs = {{.shape = {5, 7, 13}}, {.shape = {9, 13}}},
         .fn = lin_nb,
         .check = Check::parity_only,
         .tol = products(35)});
  r.add({.op = "linear",
         .name = "1d_input",
         .inputs = {{.shape = {13}}, {.shape = {9, 13}}, {.shape = {9}}},
         .fn = lin,
         .check = Check::parity_only,
         .tol = products(13)});
  r.add({.op = "linear",
         .name = "transposed_input",
         .inputs = {{.shape = {10, 13}, .layout = Layout::permuted({1, 0})},
                    {.shape = {9, 13}},
                    {.shape = {9}}},
         .fn = lin,
         .check = Check::parity_only,
         .tol = products(13)});
  r.add({.op = "linear",
         .name = "classifier_head",
         .inputs = {{.shape = {16, 300}}, {.shape = {10, 300}}, {.shape = {10}}},
         .fn = lin,
         .check = Check::parity_only,
         .tol = products(300)});
  r.add({.op = "linear",
         .name = "half",
         .inputs = {{.shape = {6, 5, 24}}, {.shape = {10, 24}}, {.shape = {10}}},
         .fn = lin,
         .dtypes = kHalf,
         .check = Check::parity_only,
         .tol = products(30),
         .cpu16 = Cpu16::via_f32});
}

}  // namespace

void register_linalg_cases(OpRegistry& r) {
  add_matmul(r);
  add_linear(r);
}

}  // namespace tcv::testing
