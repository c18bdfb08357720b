// sort and topk: values and indices along every dim of 1-D to 3-D inputs
// (outer or inner of 1, lines of 1 to 100000), ascending and descending,
// largest and smallest with k of 0, 1, 5 and n, ties (equal values keep their
// input order), every dtype, transposed, sliced, 0-d and empty inputs. Sorting
// moves values: results and gradients are exact.
#include <set>

#include "ops/cases.h"

namespace tcv::testing {
namespace {

const std::vector<DType> kAll = {DType::f32, DType::f64, DType::f16, DType::bf16,
                                 DType::i32, DType::i64, DType::u8,  DType::b8};

struct Line {
  const char* name;
  Shape x;
  int64_t dim;
};

const std::vector<Line>& lines() {
  static const std::vector<Line> l = {
      {"full_1000", {1000}, 0},       {"rows_1000", {7, 1000}, 1},
      {"columns_1000", {1000, 7}, 0}, {"r_is_1", {3, 1, 5}, 1},
      {"middle", {4, 9, 3}, 1},       {"outer", {4, 9, 3}, 0},
      {"last", {4, 9, 3}, -1},        {"one", {1}, 0},
      {"short_rows", {10000, 7}, 1},  {"middle_33", {2, 33, 65}, 1},
  };
  return l;
}

}  // namespace

void register_sort_cases(OpRegistry& r) {
  r.add(
      {.op = "sort", .name = "dim1_grad", .inputs = {{.shape = {3, 5, 2}}}, .fn = [](const In& v) {
         return ops::sort(v[0], 1);
       }});
  r.add({.op = "sort",
         .name = "descending_grad",
         .inputs = {{.shape = {4, 6}}},
         .fn = [](const In& v) { return ops::sort(v[0], -1, true); }});
  r.add({.op = "topk",
         .name = "largest_grad",
         .inputs = {{.shape = {2, 5, 3}}},
         .fn = [](const In& v) { return ops::topk(v[0], 3, 1); }});
  r.add(
      {.op = "topk", .name = "smallest_grad", .inputs = {{.shape = {3, 4}}}, .fn = [](const In& v) {
         return ops::topk(v[0], 2, -1, false);
       }});

  const std::vector<DType> tie_dtypes = {DType::f32, DType::bf16, DType::i64, DType::u8, DType::b8};
  for (const Line& l : lines()) {
    for (const bool desc : {false, true}) {
      const int64_t dim = l.dim;
      const std::string dir = desc ? "_descending" : "";
      r.add({.op = "sort",
             .name = l.name + dir,
             .inputs = {{.shape = l.x, .lo = -2, .hi = 2}},
             .fn = [dim, desc](const In& v) { return ops::sort(v[0], dim, desc); },
             .dtypes = kAll,
             .check = Check::parity_only});
      r.add({.op = "sort",
             .name = std::string(l.name) + "_ties" + dir,
             .inputs = {{.shape = l.x, .lo = 0, .hi = 3, .integers = true}},
             .fn = [dim, desc](const In& v) { return ops::sort(v[0], dim, desc); },
             .dtypes = tie_dtypes,
             .check = Check::parity_only});
    }
    const int64_t d = l.dim < 0 ? l.dim + static_cast<int64_t>(l.x.size()) : l.dim;
    const int64_t n = l.x[static_cast<size_t>(d)];
    for (const int64_t k : std::set<int64_t>{0, 1, 5, n}) {
      if (k > n) continue;
      for (const bool largest : {true, false}) {
        const int64_t dim = l.dim;
        r.add({.op = "topk",
               .name = std::string(l.name) + "_k" + std::to_string(k) +
                       (largest ? "_largest" : "_smallest"),
               .inputs = {{.shape = l.x, .lo = -2, .hi = 2}},
               .fn = [dim, k, largest](const In& v) { return ops::topk(v[0], k, dim, largest); },
               .dtypes = kAll,
               .check = Check::parity_only});
      }
    }
  }
  // Ties go to the lower index.
  for (const bool largest : {true, false})
    r.add({.op = "topk",
           .name = std::string("ties_") + (largest ? "largest" : "smallest"),
           .inputs = {{.shape = {50, 100}, .lo = 0, .hi = 3, .integers = true}},
           .fn = [largest](const In& v) { return ops::topk(v[0], 4, 1, largest); },
           .dtypes = {DType::f32},
           .check = Check::parity_only});
  r.add({.op = "sort",
         .name = "transposed",
         .inputs = {{.shape = {129, 37}, .layout = Layout::permuted({1, 0})}},
         .fn = [](const In& v) { return ops::sort(v[0], 1); },
         .check = Check::parity_only});
  r.add({.op = "topk",
         .name = "sliced",
         .inputs = {{.shape = {9, 34}, .layout = Layout::strided(1, 0, 3)}},
         .fn = [](const In& v) { return ops::topk(v[0], 3); },
         .check = Check::parity_only});
  r.add({.op = "sort",
         .name = "zero_dim",
         .inputs = {{.shape = {}}},
         .fn = [](const In& v) { return ops::sort(v[0], 0); },
         .check = Check::parity_only});
  r.add({.op = "topk",
         .name = "zero_dim",
         .inputs = {{.shape = {}}},
         .fn = [](const In& v) { return ops::topk(v[0], 1, 0); },
         .check = Check::parity_only});
  r.add({.op = "sort",
         .name = "empty",
         .inputs = {{.shape = {0, 5}}},
         .fn = [](const In& v) { return ops::sort(v[0], 1); },
         .check = Check::parity_only});
  r.add({.op = "topk",
         .name = "empty_line",
         .inputs = {{.shape = {4, 0}}},
         .fn = [](const In& v) { return ops::topk(v[0], 0, 1); },
         .check = Check::parity_only});
}

}  // namespace tcv::testing
