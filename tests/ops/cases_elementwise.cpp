// Elementwise ops: binary ops with broadcasting, scalar overloads, unary ops,
// comparisons, where, casts and copies.
//
// Bounds (support/cuda_compare.h): IEEE +, −, ×, ÷ and √ round once; exp, log,
// tanh and sigmoid are within 2.41 ulp on the CPU (kernels/cpu/vmath.h) and 2
// on CUDA (expf, logf, tanhf), sigmoid's 1/(1 + e^-x) three more roundings, so
// 8 ulps holds for every transcendental; a gradient that multiplies the
// upstream gradient g (|g| ≤ 1) by a derivative computed from the saved output
// may lose what that output's own rounding cancels (1 − y², y(1 − y)): ulps of
// |g| on top (grad_scale 1). A broadcast operand's gradient sums m terms.
#include "ops/cases.h"

namespace tcv::testing {
namespace {

const std::vector<DType> kFloat = {DType::f32, DType::f64};
const std::vector<DType> kAllFloat = {DType::f32, DType::f64, DType::bf16, DType::f16};

// The transcendental unary ops: 8 ulps of the value; their gradients 16 ulps
// (rsqrt's −y³/2 carries y's error three times) plus 8 of |g|.
const Tol kTranscendental{.ulps = 8, .grad_ulps = 16, .grad_scale = 1};

void add_binary(OpRegistry& r) {
  // a (3, 4) with b (4): b's gradient sums 3 terms; c (3, 1) sums 4.
  const Input a{.shape = {3, 4}};
  const Input b{.shape = {4}, .lo = 0.5, .hi = 1.5};
  const Input c{.shape = {3, 1}};
  // The cross-device shapes: (4, 1, 37) with (5, 37), gradients summing 5 and 4.
  const Input wa{.shape = {4, 1, 37}, .lo = -2, .hi = 2};
  const Input wb{.shape = {5, 37}, .lo = -2, .hi = 2};
  // a + αb and a − αb round αb, then the sum: 2 ulps of |result| + |αb| (≤ α);
  // the gradients pass ±α·dy, summed over broadcast positions.
  for (const std::string op : {"add", "sub"}) {
    const bool is_add = op == "add";
    auto f = [is_add](double alpha) {
      return [is_add, alpha](const In& v) {
        return is_add ? ops::add(v[0], v[1], alpha) : ops::sub(v[0], v[1], alpha);
      };
    };
    r.add({.op = op,
           .name = "broadcast_alpha",
           .inputs = {a, is_add ? b : c},
           .fn = f(is_add ? 0.7 : 1.3),
           .tol = {.ulps = 2,
                   .scale = 1.3,
                   .grad_ulps = 1,
                   .grad_scale = 0,
                   .terms = 4,
                   .sums = Sums::routed}});
    r.add({.op = op,
           .name = "broadcast_both",
           .inputs = {wa, wb},
           .fn = f(1.0),
           .dtypes = kAllFloat,
           .check = Check::parity_only,
           .tol = {.ulps = 1, .terms = 5, .sums = Sums::routed}});
    r.add({.op = op,
           .name = "permuted_and_strided",
           .inputs = {{.shape = {5, 6}, .layout = Layout::permuted({1, 0})},
                      {.shape = {5, 6}, .layout = Layout::strided(1, 1, 2)}},
           .fn = f(1.0),
           .tol = {.ulps = 1}});
    r.add(
        {.op = op,
         .name = "integers_promoted",
         .inputs = {{.value = iota({4, 9}, DType::i64, -18)}, {.value = iota({9}, DType::i32, -4)}},
         .fn = f(1.0),
         .dtypes = {DType::i64},
         .check = Check::parity_only});
  }
  r.add({.op = "add",
         .name = "scalar",
         .inputs = {{.shape = {3, 5}}},
         .fn = [](const In& v) { return ops::add(v[0], 1.0); },
         .tol = {.ulps = 1}});
  r.add({.op = "add",
         .name = "i64_plus_f32",
         .inputs = {{.value = iota({4, 9}, DType::i64, -10)}, {.shape = {9}, .grad = false}},
         .fn = [](const In& v) { return ops::add(v[0], v[1]); },
         .dtypes = {DType::f32},
         .check = Check::parity_only,
         .tol = {.ulps = 1}});

  // a·b rounds once; a gradient sums m products dy·b.
  r.add({.op = "mul",
         .name = "broadcast_column",
         .inputs = {a, c},
         .fn = [](const In& v) { return ops::mul(v[0], v[1]); },
         .tol = {.ulps = 1, .terms = 5, .term_ulps = 1}});
  r.add({.op = "mul",
         .name = "broadcast_both",
         .inputs = {wa, wb},
         .fn = [](const In& v) { return ops::mul(v[0], v[1]); },
         .dtypes = kAllFloat,
         .check = Check::parity_only,
         .tol = {.ulps = 1, .terms = 6, .term_ulps = 1}});
  r.add({.op = "mul",
         .name = "permuted_expanded",
         .inputs = {{.shape = {4, 3, 5}, .layout = Layout::permuted({2, 0, 1})},
                    {.shape = {4, 3, 5}, .layout = Layout::expanded({1, 3, 1})}},
         .fn = [](const In& v) { return ops::mul(v[0], v[1]); },
         .tol = {.ulps = 1, .terms = 21, .term_ulps = 1}});
  r.add({.op = "mul",
         .name = "scalar",
         .inputs = {{.shape = {3, 5}}},
         .fn = [](const In& v) { return ops::mul(v[0], 2.5); },
         .tol = {.ulps = 1}});
  r.add({.op = "mul",
         .name = "integers",
         .inputs = {{.value = iota({4, 9}, DType::i64, -10)}, {.value = iota({9}, DType::i32, -4)}},
         .fn = [](const In& v) { return ops::mul(v[0], v[1]); },
         .dtypes = {DType::i64},
         .check = Check::parity_only});

  // a/b rounds once; the gradients dy/b and −dy·a/b² three times per term.
  r.add({.op = "div",
         .name = "broadcast_row",
         .inputs = {a, b},
         .fn = [](const In& v) { return ops::div(v[0], v[1]); },
         .tol = {.ulps = 1, .terms = 6, .term_ulps = 3}});
  r.add({.op = "div",
         .name = "broadcast_both",
         .inputs = {wa, {.shape = {5, 37}, .lo = 0.5, .hi = 2}},
         .fn = [](const In& v) { return ops::div(v[0], v[1]); },
         .dtypes = kAllFloat,
         .check = Check::parity_only,
         .tol = {.ulps = 1, .terms = 8, .term_ulps = 3}});
  r.add({.op = "div",
         .name = "integers_to_f32",
         .inputs = {{.value = iota({4, 9}, DType::i64, -10)}, {.value = iota({9}, DType::i32, 1)}},
         .fn = [](const In& v) { return ops::div(v[0], v[1]); },
         .dtypes = {DType::i64},
         .check = Check::parity_only,
         .tol = {.ulps = 1}});

  // powf is within 4 ulps on CUDA (<1 in glibc): 8. Its gradients take a
  // power, a log and two products per term (10 ulps) and sum m terms of at
  // most T: with a in [0.5, 2] and b in [-2, 2], |b·a^(b−1)| ≤ 16 and
  // |a^b·log a| ≤ 2.8, so a broadcast gradient is within γ_m·m·16.
  r.add({.op = "pow",
         .name = "tensor_exponent",
         .inputs = {{.shape = {3, 4}, .lo = 0.5, .hi = 2.0}, c},
         .fn = [](const In& v) { return ops::pow(v[0], v[1]); },
         .tol = {.ulps = 8, .grad_ulps = 14, .grad_scale = 4 * 16}});
  r.add({.op = "pow",
         .name = "broadcast_both",
         .inputs = {{.shape = {4, 1, 37}, .lo = 0.5, .hi = 2.0}, wb},
         .fn = [](const In& v) { return ops::pow(v[0], v[1]); },
         .dtypes = kAllFloat,
         .check = Check::parity_only,
         .tol = {.ulps = 8, .grad_ulps = 15, .grad_scale = 5 * 16}});
  r.add({.op = "pow",
         .name = "scalar_exponent",
         .inputs = {a},
         .fn = [](const In& v) { return ops::pow(v[0], 3.0); },
         .tol = {.ulps = 8, .grad_ulps = 12}});

  // Selection: exact values; the gradient routes dy (halves on ties).
  for (const std::string op : {"maximum", "minimum"}) {
    const bool is_max = op == "maximum";
    auto f = [is_max](const In& v) {
      return is_max ? ops::maximum(v[0], v[1]) : ops::minimum(v[0], v[1]);
    };
    // Operands kept apart: no tie within the finite-difference step.
    r.add({.op = op,
           .name = "apart",
           .inputs = {a, {.shape = {3, 4}, .lo = 1.5, .hi = 2.5}},
           .fn = f,
           .tol = {.ulps = 1, .terms = 1, .sums = Sums::routed}});
    r.add({.op = op,
           .name = "broadcast_both",
           .inputs = {wa, wb},
           .fn = f,
           .dtypes = kAllFloat,
           .check = Check::parity_only,
           .tol = {.ulps = 1, .terms = 5, .sums = Sums::routed}});
    r.add({.op = op,
           .name = "ties",
           .inputs = {{.shape = {6, 7}, .lo = 0, .hi = 3, .integers = true},
                      {.shape = {7}, .lo = 0, .hi = 3, .integers = true}},
           .fn = f,
           .check = Check::parity_only,
           .tol = {.ulps = 1, .terms = 6, .sums = Sums::routed}});
  }

  // relu(a + b): one rounding; the gradient routes dy where a + b > 0.
  r.add({.op = "add_relu",
         .name = "broadcast_row",
         .inputs = {a, b},
         .fn = [](const In& v) { return ops::add_relu(v[0], v[1]); },
         .grad = {.kink = 1e-4},
         .tol = {.ulps = 1, .terms = 3, .sums = Sums::routed}});
  r.add({.op = "add_relu",
         .name = "broadcast_both",
         .inputs = {wa, wb},
         .fn = [](const In& v) { return ops::add_relu(v[0], v[1]); },
         .dtypes = kAllFloat,
         .check = Check::parity_only,
         .tol = {.ulps = 1, .terms = 5, .sums = Sums::routed}});
}

void add_unary(OpRegistry& r) {
  const Input x{.shape = {2, 5}, .lo = -2, .hi = 2};
  const Input pos{.shape = {2, 5}, .lo = 0.2, .hi = 3};
  const Input wx{.shape = {7, 33}, .lo = -2, .hi = 2};
  const Input wpos{.shape = {7, 33}, .lo = 0.2, .hi = 3};
  const std::vector<DType> dts = {DType::f32, DType::f64, DType::bf16};
  using F = Tensor (*)(const Tensor&);
  struct Unary {
    const char* op;
    F f;
    bool positive;
    bool kink;
    Tol tol;
  };
  const Unary unary[] = {
      {"neg", ops::neg, false, false, {}},
      {"abs", ops::abs, false, true, {}},
      {"sign", ops::sign, false, false, {}},
      {"relu", ops::relu, false, true, {}},
      {"square", ops::square, false, false, {.ulps = 1}},
      {"exp", ops::exp, false, false, kTranscendental},
      {"log", ops::log, true, false, kTranscendental},
      {"sqrt", ops::sqrt, true, false, kTranscendental},
      {"rsqrt", ops::rsqrt, true, false, kTranscendental},
      {"sigmoid", ops::sigmoid, false, false, kTranscendental},
      {"tanh", ops::tanh, false, false, kTranscendental},
  };
  for (const Unary& u : unary) {
    const F f = u.f;
    const OpFn fn = [f](const In& v) { return f(v[0]); };
    // sign has no gradient to check (zero almost everywhere).
    if (std::string(u.op) != "sign")
      r.add({.op = u.op,
             .name = "small",
             .inputs = {u.positive ? pos : x},
             .fn = fn,
             .grad = {.kink = u.kink ? 1e-5 : 0.0},
             .tol = u.tol});
    r.add({.op = u.op,
           .name = "wide",
           .inputs = {u.positive ? wpos : wx},
           .fn = fn,
           .dtypes = dts,
           .check = Check::parity_only,
           .tol = u.tol});
    r.add({.op = u.op,
           .name = "transposed",
           .inputs = {{.shape = {6, 4},
                       .lo = u.positive ? 0.2 : -2.0,
                       .hi = u.positive ? 3.0 : 2.0,
                       .layout = Layout::permuted({1, 0})}},
           .fn = fn,
           .check = Check::parity_only,
           .tol = u.tol});
  }
  r.add({.op = "exp",
         .name = "empty",
         .inputs = {{.shape = {0, 4}}},
         .fn = [](const In& v) { return ops::exp(v[0]); },
         .check = Check::parity_only,
         .tol = kTranscendental});

  r.add({.op = "leaky_relu",
         .name = "slope_0.2",
         .inputs = {x},
         .fn = [](const In& v) { return ops::leaky_relu(v[0], 0.2); },
         .grad = {.kink = 1e-5},
         .tol = {.ulps = 2}});
  r.add({.op = "leaky_relu",
         .name = "slope_0.1_wide",
         .inputs = {wx},
         .fn = [](const In& v) { return ops::leaky_relu(v[0], 0.1); },
         .dtypes = dts,
         .check = Check::parity_only,
         .tol = {.ulps = 2}});
  // hardswish over both bends (±3): v·clamp(v + 3, 0, 6)/6 rounds three times.
  r.add({.op = "hardswish",
         .name = "both_bends",
         .inputs = {{.shape = {4, 5}, .lo = -5, .hi = 5}},
         .fn = [](const In& v) { return ops::hardswish(v[0]); },
         .dtypes = dts,
         .grad = {.kink = 1e-5},
         .tol = {.ulps = 4, .grad_ulps = 4}});
  r.add({.op = "clamp",
         .name = "both_bounds",
         .inputs = {x},
         .fn = [](const In& v) { return ops::clamp(v[0], -1, 0.5); },
         .dtypes = dts,
         .grad = {.kink = 1e-5}});
  // relu6 over both bounds.
  r.add({.op = "relu6",
         .name = "both_bounds",
         .inputs = {{.shape = {4, 5}, .lo = -3, .hi = 9}},
         .fn = [](const In& v) { return ops::relu6(v[0]); },
         .dtypes = dts,
         .grad = {.kink = 1e-5}});
  // In place, outside autograd: compared, no gradient.
  r.add({.op = "relu_",
         .name = "in_place",
         .inputs = {{.shape = {7, 9}, .grad = false}},
         .fn =
             [](const In& v) {
               Tensor t = v[0].detach().clone();
               ops::relu_(t);
               return t;
             },
         .dtypes = kAllFloat,
         .check = Check::parity_only});
}

void add_comparisons_and_copies(OpRegistry& r) {
  using F = Tensor (*)(const Tensor&, const Tensor&);
  const std::pair<const char*, F> cmp[] = {{"eq", ops::eq}, {"ne", ops::ne}, {"lt", ops::lt},
                                           {"le", ops::le}, {"gt", ops::gt}, {"ge", ops::ge}};
  for (auto [op, f] : cmp) {
    const OpFn fn = [f](const In& v) { return f(v[0], v[1]); };
    r.add({.op = op,
           .name = "broadcast",
           .inputs = {{.shape = {3, 50}, .grad = false}, {.shape = {50}, .grad = false}},
           .fn = fn,
           .dtypes = {DType::f32, DType::bf16},
           .check = Check::parity_only});
    // Integers where every relation occurs (row 0 below, row 1 equal, rows 2-3 above).
    r.add(
        {.op = op,
         .name = "integers",
         .inputs = {{.value = iota({4, 9}, DType::i64, -18)}, {.value = iota({9}, DType::i64, -9)}},
         .fn = fn,
         .dtypes = {DType::i64},
         .check = Check::parity_only});
  }
  // The scalar overloads.
  r.add({.op = "eq",
         .name = "scalar",
         .inputs = {{.shape = {5, 6}, .lo = 0, .hi = 3, .grad = false, .integers = true}},
         .fn = [](const In& v) { return ops::eq(v[0], 1.0); },
         .check = Check::parity_only});
  r.add({.op = "gt",
         .name = "scalar",
         .inputs = {{.shape = {5, 6}, .grad = false}},
         .fn = [](const In& v) { return ops::gt(v[0], 0.25); },
         .check = Check::parity_only});
  r.add({.op = "lt",
         .name = "scalar",
         .inputs = {{.shape = {5, 6}, .grad = false}},
         .fn = [](const In& v) { return ops::lt(v[0], -0.25); },
         .check = Check::parity_only});

  // where: values chosen exactly; the gradient routes dy by the condition.
  r.add({.op = "where",
         .name = "broadcast",
         .inputs = {{.value = random_mask({3, 4}, 0.5, 6)}, {.shape = {3, 4}}, {.shape = {4}}},
         .fn = [](const In& v) { return ops::where(v[0], v[1], v[2]); },
         .dtypes = kAllFloat,
         .tol = {.terms = 3, .sums = Sums::routed}});
  r.add({.op = "where",
         .name = "transposed",
         .inputs = {{.value = random_mask({9, 9}, 0.5, 7)},
                    {.shape = {9, 9}, .layout = Layout::permuted({1, 0})},
                    {.shape = {9, 9}}},
         .fn = [](const In& v) { return ops::where(v[0], v[1], v[2]); },
         .check = Check::parity_only});

  // A dtype conversion rounds once; its gradient converts back exactly. The
  // f64 → f32 → f64 round trip is differentiated with a step far above f32's
  // resolution.
  r.add({.op = "cast",
         .name = "round_trip_through_f32",
         .inputs = {{.shape = {3, 4}}},
         .fn = [](const In& v) { return ops::cast(ops::cast(v[0], DType::f32), v[0].dtype()); },
         .dtypes = {DType::f64},
         .grad = {.eps = 1e-3, .atol = 1e-4, .rtol = 1e-3},
         .tol = {.ulps = 1}});
  for (const DType to : {DType::bf16, DType::f16}) {
    r.add({.op = "cast",
           .name = std::string("f32_to_") + dtype_name(to),
           .inputs = {{.shape = {5, 7}, .lo = -2, .hi = 2}},
           .fn = [to](const In& v) { return ops::cast(v[0], to); },
           .dtypes = {DType::f32},
           .check = Check::parity_only,
           .tol = {.ulps = 1}});
  }
  r.add({.op = "cast",
         .name = "bf16_to_f32_strided",
         .inputs = {{.shape = {9}, .layout = Layout::strided(0, 1)}},
         .fn = [](const In& v) { return ops::cast(v[0], DType::f32); },
         .dtypes = {DType::bf16},
         .check = Check::parity_only,
         // Exact; the gradient is dy rounded to bf16.
         .tol = {.grad_ulps = 1}});
  r.add({.op = "cast",
         .name = "f32_to_bool",
         .inputs = {{.shape = {4, 6}, .lo = -1, .hi = 2, .grad = false, .integers = true}},
         .fn = [](const In& v) { return ops::cast(v[0], DType::b8); },
         .dtypes = {DType::f32},
         .check = Check::parity_only});
  // To the CPU and back where the case runs: a device-to-host and a
  // host-to-device copy on a GPU, and their gradients.
  r.add(
      {.op = "to_device",
       .name = "round_trip_through_cpu",
       .inputs = {{.shape = {3, 5}}},
       .fn = [](const In& v) { return ops::to_device(ops::to_device(v[0], kCPU), v[0].device()); },
       .dtypes = kAllFloat});
  r.add({.op = "clone",
         .name = "of_a_transposed_view",
         .inputs = {{.shape = {4, 6}, .layout = Layout::permuted({1, 0})}},
         .fn = [](const In& v) { return ops::clone(v[0]); },
         .dtypes = kAllFloat});
}

}  // namespace

void register_elementwise_cases(OpRegistry& r) {
  add_binary(r);
  add_unary(r);
  add_comparisons_and_copies(r);
}

}  // namespace tcv::testing
