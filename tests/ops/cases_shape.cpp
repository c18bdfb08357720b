// cat, stack and pad: data movement, exact in every dtype. The gradients are
// slices of dy, except reflect and replicate padding, whose backward folds the
// border back: each input collects up to Π(left + right + 1) values of dy
// (summed in the dtype by the CPU, step by step).
#include "ops/cases.h"

namespace tcv::testing {
namespace {

const std::vector<DType> kAll = {DType::f32, DType::f64, DType::f16, DType::bf16,
                                 DType::i32, DType::i64, DType::u8,  DType::b8};

void add_cat_stack(OpRegistry& r) {
  r.add({.op = "cat",
         .name = "dim1_three",
         .inputs = {{.shape = {2, 2, 3}}, {.shape = {2, 1, 3}}, {.shape = {2, 3, 3}}},
         .fn = [](const In& v) { return ops::cat(v, 1); }});
  r.add({.op = "cat",
         .name = "dim0",
         .inputs = {{.shape = {1, 4}}, {.shape = {3, 4}}},
         .fn = [](const In& v) {
           return ops::cat({v[0], v[1]}, 0);
         }});
  for (int64_t dim : {0, 1, 2, -1})
    r.add({.op = "cat",
           .name = "every_dtype_dim" + std::to_string(dim),
           .inputs = {{.shape = {2, 3, 4}}, {.shape = {2, 3, 4}}, {.shape = {2, 3, 4}}},
           .fn = [dim](const In& v) { return ops::cat(v, dim); },
           .dtypes = kAll,
           .check = Check::parity_only});
  // Different sizes along dim, dtypes promoted, transposed and sliced inputs.
  r.add({.op = "cat",
         .name = "mixed_views_promoted",
         .inputs = {{.shape = {3, 5}},
                    {.shape = {7, 5}, .dtype = DType::f64, .layout = Layout::permuted({1, 0})},
                    {.shape = {2, 5}, .layout = Layout::strided(1, 0, 2)}},
         .fn = [](const In& v) { return ops::cat(v, 0); },
         .dtypes = {DType::f32},
         .check = Check::parity_only});
  r.add({.op = "cat",
         .name = "skips_1d_empty",
         // The skipped (0) tensor takes no part in the graph: no gradient.
         .inputs = {{.shape = {0}, .grad = false}, {.shape = {4, 3}}, {.shape = {4, 0}}},
         .fn = [](const In& v) { return ops::cat(v, 1); },
         .check = Check::parity_only});
  r.add({.op = "stack",
         .name = "dim1",
         .inputs = {{.shape = {2, 3}}, {.shape = {2, 3}}, {.shape = {2, 3}}},
         .fn = [](const In& v) { return ops::stack(v, 1); },
         .dtypes = kAll});
  r.add({.op = "stack",
         .name = "last_transposed",
         .inputs = {{.shape = {4, 3}, .layout = Layout::permuted({1, 0})}, {.shape = {4, 3}}},
         .fn = [](const In& v) { return ops::stack(v, -1); }});
}

int64_t fan_in(const Shape& pads) {
  int64_t n = 1;
  for (size_t i = 0; i + 1 < pads.size(); i += 2)
    n *= std::max<int64_t>(0, pads[i]) + std::max<int64_t>(0, pads[i + 1]) + 1;
  return n;
}

void add_pad(OpRegistry& r) {
  using ops::PadMode;
  struct Small {
    const char* name;
    Shape pads;
    PadMode mode;
    double value;
  };
  for (const Small& s : {Small{"constant", {2, 1, 1, 2}, PadMode::constant, 0.3},
                         Small{"constant_crop", {-1, 2, 1, -1}, PadMode::constant, 0.0},
                         Small{"reflect", {3, 2, 2, 1}, PadMode::reflect, 0.0},
                         Small{"replicate", {3, 2, 2, 0, 1, 1}, PadMode::replicate, 0.0}}) {
    const Small c = s;
    r.add({.op = "pad",
           .name = c.name,
           .inputs = {{.shape = {2, 3, 4}}},
           .fn = [c](const In& v) { return ops::pad(v[0], c.pads, c.mode, c.value); },
           .dtypes = {DType::f32, DType::f64, DType::bf16},
           // The fill value is rounded to the dtype.
           .tol = {.ulps = 1,
                   .terms = fan_in(c.pads),
                   .sums = Sums::routed,
                   .accumulate = Accumulate::in_dtype}});
  }
  struct Case {
    Shape x;
    Shape pads;
  };
  const Case constant[] = {{{7}, {2, 3}},
                           {{3, 5}, {1, 0, 2, 2}},
                           {{2, 3, 5, 4}, {1, 2, 3, 1}},
                           {{2, 3, 5, 4}, {-1, 2, 0, -2}},
                           {{2, 3, 5, 4}, {1, 1, 1, 1, 1, 1}}};
  for (const Case& c : constant)
    for (const double value : {0.0, 1.5})
      r.add(
          {.op = "pad",
           .name = "constant_" + shape_str(c.x) + "_" + shape_str(c.pads) + "_value" +
                   std::to_string(value).substr(0, 3),
           .inputs = {{.shape = c.x}},
           .fn = [c, value](
                     const In& v) { return ops::pad(v[0], c.pads, ops::PadMode::constant, value); },
           .dtypes = {DType::f32, DType::f64, DType::bf16, DType::f16},
           .check = Check::parity_only,
           .tol = {.ulps = 1}});
  const Case folded[] = {{{2, 9}, {3, 2}},
                         {{2, 3, 5, 7}, {2, 3, 4, 1}},
                         {{1, 2, 4, 5, 6}, {1, 2, 3, 0, 2, 3}},
                         {{2, 3, 5, 4}, {-1, 2, 1, 0}}};
  for (const PadMode mode : {PadMode::reflect, PadMode::replicate})
    for (const Case& c : folded)
      r.add(
          {.op = "pad",
           .name = std::string(mode == PadMode::reflect ? "reflect_" : "replicate_") +
                   shape_str(c.x) + "_" + shape_str(c.pads),
           .inputs = {{.shape = c.x}},
           .fn = [c, mode](const In& v) { return ops::pad(v[0], c.pads, mode); },
           .dtypes = {DType::f32, DType::f64, DType::bf16},
           .check = Check::parity_only,
           .tol = {
               .terms = fan_in(c.pads), .sums = Sums::routed, .accumulate = Accumulate::in_dtype}});
  // Replicate pads wider than the input.
  r.add({.op = "pad",
         .name = "replicate_wide",
         .inputs = {{.shape = {2, 2, 3, 2}}},
         .fn =
             [](const In& v) {
               return ops::pad(v[0], {6, 5, 4, 7}, ops::PadMode::replicate);
             },
         .check = Check::parity_only,
         .tol = {.terms = fan_in({6, 5, 4, 7}), .sums = Sums::routed}});
  for (const DType dt : {DType::i64, DType::i32, DType::u8, DType::b8})
    r.add({.op = "pad",
           .name = std::string("constant_") + dtype_name(dt),
           .inputs = {{.shape = {2, 3, 4}}},
           .fn =
               [](const In& v) {
                 return ops::pad(v[0], {1, 2, 2, 1}, ops::PadMode::constant, 1.0);
               },
           .dtypes = {dt},
           .check = Check::parity_only});
  r.add({.op = "pad",
         .name = "reflect_i64",
         .inputs = {{.shape = {3, 5}}},
         .fn =
             [](const In& v) {
               return ops::pad(v[0], {2, 1}, ops::PadMode::reflect);
             },
         .dtypes = {DType::i64},
         .check = Check::parity_only});
  r.add({.op = "pad",
         .name = "reflect_transposed",
         .inputs = {{.shape = {5, 6}, .layout = Layout::permuted({1, 0})}},
         .fn =
             [](const In& v) {
               return ops::pad(v[0], {2, 1, 1, 2}, ops::PadMode::reflect);
             },
         .tol = {.terms = fan_in({2, 1, 1, 2}), .sums = Sums::routed}});
  r.add({.op = "pad",
         .name = "constant_to_empty_output",
         .inputs = {{.shape = {0, 3}}},
         .fn =
             [](const In& v) {
               return ops::pad(v[0], {1, 1, 0, 0}, ops::PadMode::constant, 2.0);
             },
         .dtypes = {DType::f32},
         .check = Check::parity_only});
  r.add({.op = "pad",
         .name = "constant_from_empty_input",
         .inputs = {{.shape = {0, 3}}},
         .fn =
             [](const In& v) {
               return ops::pad(v[0], {0, 0, 1, 1});
             },
         .dtypes = {DType::f32},
         .check = Check::parity_only});
}

}  // namespace

void register_shape_cases(OpRegistry& r) {
  add_cat_stack(r);
  add_pad(r);
}

}  // namespace tcv::testing
