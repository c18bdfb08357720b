// index_select, gather, scatter_add and masked_fill: every dtype, i64 and i32
// indices, every dim, repeated indices, indices smaller than the input,
// strided, transposed and broadcast operands, empty ones.
//
// Bounds: selection and masked_fill are exact, their gradients route dy and
// sum it where an index repeats (at most the index's length). scatter_add sums
// the sources that land on one target onto x (the CPU in the dtype, step by
// step): γ of their number times Σ|terms|.
#include "ops/cases.h"

namespace tcv::testing {
namespace {

const std::vector<DType> kAll = {DType::f32, DType::f64, DType::f16, DType::bf16,
                                 DType::i32, DType::i64, DType::u8,  DType::b8};

void add_index_select(OpRegistry& r) {
  r.add({.op = "index_select",
         .name = "repeats_grad",
         .inputs = {{.shape = {2, 4, 3}}, {.value = from_vector<int64_t>({2, 0, 2, 3})}},
         .fn = [](const In& v) { return ops::index_select(v[0], 1, v[1]); },
         .tol = {.terms = 4, .sums = Sums::routed, .accumulate = Accumulate::in_dtype}});
  const Shape xs = {5, 6, 7};
  uint64_t seed = 12;
  for (const DType it : {DType::i64, DType::i32})
    for (int64_t dim : {0, 1, 2})
      r.add({.op = "index_select",
             .name = std::string(dtype_name(it)) + "_dim" + std::to_string(dim),
             // 9 indices into 5 to 7: repeats.
             .inputs = {{.shape = xs, .lo = -2, .hi = 2},
                        {.value = random_indices({9}, xs[dim], ++seed, it)}},
             .fn = [dim](const In& v) { return ops::index_select(v[0], dim, v[1]); },
             .dtypes = kAll,
             .check = Check::parity_only,
             .tol = {.terms = 9, .sums = Sums::routed, .accumulate = Accumulate::in_dtype}});
  r.add({.op = "index_select",
         .name = "strided_index",
         .inputs = {{.shape = {10, 33}},
                    {.shape = {7},
                     .layout = Layout::strided(0, 0, 3),
                     .value = random_indices({21}, 10, 15)}},
         .fn = [](const In& v) { return ops::index_select(v[0], 0, v[1]); },
         .check = Check::parity_only,
         .tol = {.terms = 7, .sums = Sums::routed, .accumulate = Accumulate::in_dtype}});
  r.add({.op = "index_select",
         .name = "transposed_input",
         .inputs = {{.shape = {33, 10}, .layout = Layout::permuted({1, 0})},
                    {.value = random_indices({4}, 10, 17)}},
         .fn = [](const In& v) { return ops::index_select(v[0], 1, v[1]); },
         .check = Check::parity_only,
         .tol = {.terms = 4, .sums = Sums::routed, .accumulate = Accumulate::in_dtype}});
  r.add({.op = "index_select",
         .name = "empty_index",
         .inputs = {{.shape = {4, 6}}, {.value = random_indices({0}, 6, 19)}},
         .fn = [](const In& v) { return ops::index_select(v[0], 1, v[1]); },
         .check = Check::parity_only});
  r.add({.op = "index_select",
         .name = "1d",
         .inputs = {{.shape = {1000}}, {.value = random_indices({777}, 1000, 21)}},
         .fn = [](const In& v) { return ops::index_select(v[0], 0, v[1]); },
         .check = Check::parity_only,
         .tol = {.terms = 777, .sums = Sums::routed, .accumulate = Accumulate::in_dtype}});
}

void add_gather_scatter(OpRegistry& r) {
  r.add(
      {.op = "gather",
       .name = "repeats_grad",
       .inputs = {{.shape = {2, 3, 3}},
                  {.value = from_vector<int64_t>({0, 2, 2, 1, 1, 1, 0, 0, 2, 2, 0, 1}, {2, 2, 3})}},
       .fn = [](const In& v) { return ops::gather(v[0], 1, v[1]); },
       .tol = {.terms = 2, .sums = Sums::routed, .accumulate = Accumulate::in_dtype}});
  r.add({.op = "scatter_add",
         .name = "both_inputs_grad",
         .inputs = {{.shape = {2, 4}},
                    {.value = from_vector<int64_t>({0, 2, 2, 1, 0, 0}, {2, 3})},
                    {.shape = {2, 3}}},
         .fn = [](const In& v) { return ops::scatter_add(v[0], 1, v[1], v[2]); },
         .dtypes = {DType::f32, DType::f64, DType::bf16},
         .tol = {.ulps = 1, .terms = 4, .accumulate = Accumulate::in_dtype}});
  // src larger than index: the extra positions get zero gradient.
  r.add({.op = "scatter_add",
         .name = "big_src_grad",
         .inputs = {{.shape = {2, 2}},
                    {.value = from_vector<int64_t>({1, 0}, {2, 1})},
                    {.shape = {3, 2}}},
         .fn = [](const In& v) { return ops::scatter_add(v[0], 0, v[1], v[2]); },
         .tol = {.ulps = 1, .terms = 2, .accumulate = Accumulate::in_dtype}});
  const Shape xs = {4, 5, 6};
  uint64_t seed = 22;
  for (const DType it : {DType::i64, DType::i32})
    for (int64_t dim : {0, 1, 2}) {
      Shape is = {3, 4, 5};  // smaller than x outside dim
      is[dim] = 8;           // and longer along it: repeats
      r.add({.op = "gather",
             .name = std::string(dtype_name(it)) + "_dim" + std::to_string(dim),
             .inputs = {{.shape = xs, .lo = -2, .hi = 2},
                        {.value = random_indices(is, xs[dim], ++seed, it)}},
             .fn = [dim](const In& v) { return ops::gather(v[0], dim, v[1]); },
             .dtypes = kAll,
             .check = Check::parity_only,
             .tol = {.terms = 8, .sums = Sums::routed, .accumulate = Accumulate::in_dtype}});
      Shape ss = xs;
      ss[dim] = 9;  // src larger than index
      is[dim] = 7;
      r.add({.op = "scatter_add",
             .name = std::string(dtype_name(it)) + "_dim" + std::to_string(dim),
             .inputs = {{.shape = xs, .lo = -2, .hi = 2},
                        {.value = random_indices(is, xs[dim], ++seed, it)},
                        {.shape = ss, .lo = -2, .hi = 2}},
             .fn = [dim](const In& v) { return ops::scatter_add(v[0], dim, v[1], v[2]); },
             .dtypes = kAll,
             .check = Check::parity_only,
             .tol = {.ulps = 1, .terms = 8, .accumulate = Accumulate::in_dtype}});
    }
  r.add({.op = "gather",
         .name = "transposed_input",
         .inputs = {{.shape = {9, 7}, .layout = Layout::permuted({1, 0})},
                    {.value = random_indices({9, 11}, 7, 25)}},
         .fn = [](const In& v) { return ops::gather(v[0], 1, v[1]); },
         .check = Check::parity_only,
         .tol = {.terms = 11, .sums = Sums::routed, .accumulate = Accumulate::in_dtype}});
  r.add({.op = "gather",
         .name = "expanded_index",
         .inputs = {{.shape = {6, 5}},
                    {.shape = {6, 3},
                     .layout = Layout::expanded({1, 3}),
                     .value = random_indices({1, 3}, 5, 27)}},
         .fn = [](const In& v) { return ops::gather(v[0], 1, v[1]); },
         .tol = {.terms = 3, .sums = Sums::routed, .accumulate = Accumulate::in_dtype}});
  r.add({.op = "gather",
         .name = "empty",
         .inputs = {{.shape = {6, 5}}, {.value = random_indices({6, 0}, 5, 29)}},
         .fn = [](const In& v) { return ops::gather(v[0], 1, v[1]); },
         .check = Check::parity_only});
  // Many sources onto few targets: heavy atomic contention on a GPU.
  r.add({.op = "scatter_add",
         .name = "contention",
         .inputs = {{.shape = {3, 8}},
                    {.value = random_indices({5000, 8}, 3, 36)},
                    {.shape = {5000, 8}}},
         .fn = [](const In& v) { return ops::scatter_add(v[0], 0, v[1], v[2]); },
         .dtypes = {DType::f32},
         .check = Check::parity_only,
         .tol = {.ulps = 1, .terms = 5001}});
  r.add({.op = "scatter_add",
         .name = "transposed_src",
         .inputs = {{.shape = {6, 5}},
                    {.value = random_indices({6, 7}, 5, 39)},
                    {.shape = {6, 7}, .layout = Layout::permuted({1, 0})}},
         .fn = [](const In& v) { return ops::scatter_add(v[0], 1, v[1], v[2]); },
         .check = Check::parity_only,
         .tol = {.ulps = 1, .terms = 8}});
  r.add({.op = "scatter_add",
         .name = "empty_index",
         .inputs = {{.shape = {6, 5}}, {.value = random_indices({0, 5}, 6, 42)}, {.shape = {0, 5}}},
         .fn = [](const In& v) { return ops::scatter_add(v[0], 0, v[1], v[2]); },
         .check = Check::parity_only});
}

void add_masked_fill(OpRegistry& r) {
  r.add({.op = "masked_fill",
         .name = "broadcast_mask_grad",
         .inputs = {{.shape = {4, 3}},
                    {.value = ops::gt(from_vector<double>({0.2, 0.7, 0.9, 0.1}, {4, 1}), 0.5)}},
         .fn = [](const In& v) { return ops::masked_fill(v[0], v[1], -3.0); }});
  for (const double value : {0.0, -1.5, 7.0}) {
    std::vector<DType> dts = kAll;
    // -1.5 is not representable in u8 (undefined in C++).
    if (value < 0) dts.erase(std::find(dts.begin(), dts.end(), DType::u8));
    r.add({.op = "masked_fill",
           .name = "value_" + std::to_string(value).substr(0, 4),
           .inputs = {{.shape = {5, 6, 7}, .lo = -2, .hi = 2},
                      {.value = random_mask({5, 1, 7}, 0.4, 44)}},
           .fn = [value](const In& v) { return ops::masked_fill(v[0], v[1], value); },
           .dtypes = dts,
           .check = Check::parity_only});
  }
  r.add({.op = "masked_fill",
         .name = "transposed",
         .inputs = {{.shape = {9, 13}, .layout = Layout::permuted({1, 0})},
                    {.value = random_mask({9, 13}, 0.5, 46)}},
         .fn = [](const In& v) { return ops::masked_fill(v[0], v[1], 3.0); },
         .check = Check::parity_only});
  r.add({.op = "masked_fill",
         .name = "empty",
         .inputs = {{.shape = {0, 4}}, {.value = random_mask({0, 4}, 0.5, 48)}},
         .fn = [](const In& v) { return ops::masked_fill(v[0], v[1], 1.0); },
         .check = Check::parity_only});
}

}  // namespace

void register_index_cases(OpRegistry& r) {
  add_index_select(r);
  add_gather_scatter(r);
  add_masked_fill(r);
}

}  // namespace tcv::testing
