// One table of op cases, as ggml's test-backend-ops keeps one list for every
// backend: each op of tcv::ops declares here, once, the inputs it is checked
// on (shapes with broadcasting and non-contiguous views, dtypes, arguments),
// whether it has a gradient, its gradient-check step and tolerances, and its
// cross-device tolerance. One driver (tests/ops/test_op_table.cpp) runs every
// case through
//   - the f64 finite-difference gradient check (support/gradcheck.h),
//   - the CPU in each dtype against the exact result, within the case's bound,
//   - and, where a GPU is present, CUDA against the CPU within twice the bound
//     (support/cuda_compare.h), outputs and gradients,
// and prints one summary line per op. An op of tcv::ops without cases fails
// OpTableCoverage.EveryOpHasCases.
//
// How to add an op's cases
// ------------------------
// 1. Find the family file tests/ops/cases_<family>.cpp (elementwise, reduce,
//    linalg, conv, pool, norm, softmax, loss, shape, index, sort, upsample,
//    boxes, or a new one for a new family, e.g. cases_segmentation.cpp, with its
//    register_<family>_cases listed in tests/ops/cases.cpp).
// 2. Add one OpCase per distinct situation; the op name must be the function's
//    name in tcv::ops (the coverage check matches it against engine/ops/*.h):
//
//      r.add({.op = "box_iou",
//             .name = "3x4",
//             .inputs = {{.shape = {3, 4}, .lo = 0, .hi = 10, .grad = false},
//                        {.shape = {4, 4}, .lo = 0, .hi = 10, .grad = false}},
//             .fn = [](const In& v) { return ops::box_iou(v[0], v[1]); },
//             .dtypes = {DType::f32, DType::f64},
//             .check = Check::parity_only,
//             .tol = {.ulps = 8}});
//
//    - inputs: floating ones are drawn uniform in [lo, hi) in each dtype of
//      the case (f64 for the gradient check); `.value` gives a fixed tensor
//      (indices, targets, masks); `.layout` hands the op a permuted, strided
//      or expanded view instead of a contiguous tensor.
//    - fn sees the inputs with their layouts applied and returns the op's
//      outputs (one tensor, a pair, or a vector).
//    - check: parity_only for ops without a gradient, inputs at a kink or a
//      tie, or shapes too large for finite differences (see
//      kGradCheckMaxElements); `.grad` sets the step, tolerances and kink.
//    - tol (support/cuda_compare.h): Tol{} for exact results (data movement,
//      selection); {.ulps = k} for k roundings relative to the value;
//      {.terms = n} for sums of n terms; `.bound` for a bound of its own;
//      `.devices = Agreement::bit_equal` where CPU and CUDA make the same
//      correctly rounded operations in the same order. `.reference =
//      Reference::none` where decisions on rounded values (nms) may go the
//      other way in f64. Derive the figures from the algorithm, never from
//      what one machine gave.
// 3. Run build/tests/test_ops_op_table --gtest_filter='*box_iou*': the summary
//    line shows the cases, the elements gradient-checked and the comparisons.
//    Shapes that only a GPU kernel's own paths need (many blocks, 64-bit
//    indices, lines of 1e5) go to tests/cuda/, with the same Tol.
// A function of tcv::ops that is a pure view or a helper whose parts other
// cases check gets r.exempt(name, reason) in tests/ops/cases.cpp instead.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "support/cuda_compare.h"
#include "support/gradcheck.h"

namespace tcv::testing {

using In = std::vector<Tensor>;

/// How an input reaches the op: the tensor as drawn (contiguous), or a view of
/// a leaf laid out differently, so the op has to honour its strides.
struct Layout {
  enum class Kind : uint8_t { contiguous, permuted, strided, expanded, misaligned };
  Kind kind = Kind::contiguous;
  Shape perm{};        ///< permuted: leaf.permute(perm) is what the op sees
  int64_t dim = 0;     ///< strided: the dim taken from a longer leaf
  int64_t offset = 0;  ///< strided: elements of the leaf skipped before the first
  int64_t step = 1;    ///< strided: distance between the elements taken
  Shape from{};        ///< expanded: the leaf's shape (1 where it broadcasts)
                       ///< misaligned: `offset` elements into a 1-D leaf

  static Layout permuted(Shape perm) { return {.kind = Kind::permuted, .perm = std::move(perm)}; }
  /// leaf.slice(dim, offset, offset + n·step, step) for the op's size n along dim.
  static Layout strided(int64_t dim, int64_t offset, int64_t step = 1) {
    return {.kind = Kind::strided, .dim = dim, .offset = offset, .step = step};
  }
  static Layout expanded(Shape from) { return {.kind = Kind::expanded, .from = std::move(from)}; }
  /// Contiguous, but `offset` elements into its storage (vector loads misaligned).
  static Layout misaligned(int64_t offset) { return {.kind = Kind::misaligned, .offset = offset}; }

  /// The leaf's shape for an op that sees `seen`.
  Shape leaf_shape(const Shape& seen) const;
  /// The view of `leaf` the op sees.
  Tensor view(const Tensor& leaf, const Shape& seen) const;
  std::string str() const;
};

/// One input of a case.
struct Input {
  Shape shape{};     ///< the shape the op sees
  double lo = -1.0;  ///< floating: drawn uniform in [lo, hi)
  double hi = 1.0;
  bool grad = true;              ///< floating: a leaf that requires grad
  bool integers = false;         ///< floating: whole numbers in [lo, hi) (ties)
  std::optional<DType> dtype{};  ///< a fixed floating dtype (else the case's)
  Layout layout{};
  Tensor value{};  ///< a fixed tensor (indices, targets, masks): used as it is
                   ///< (floating values take the case's dtype, or `dtype`)
};

/// The op on its inputs: returns one tensor, a pair or a vector of tensors.
class OpFn {
 public:
  OpFn() = default;
  template <typename F>
  OpFn(F f) {  // NOLINT: implicit, so cases read `.fn = [](const In& v) { ... }`
    fn_ = [f = std::move(f)](const In& in) {
      using R = std::invoke_result_t<const F&, const In&>;
      if constexpr (std::is_same_v<R, Tensor>)
        return std::vector<Tensor>{f(in)};
      else if constexpr (std::is_same_v<R, std::pair<Tensor, Tensor>>) {
        auto [a, b] = f(in);
        return std::vector<Tensor>{a, b};
      } else
        return std::vector<Tensor>(f(in));
    };
  }
  std::vector<Tensor> operator()(const In& in) const { return fn_(in); }
  explicit operator bool() const { return static_cast<bool>(fn_); }
  const MultiFn& multi() const { return fn_; }

 private:
  MultiFn fn_;
};

enum class Check : uint8_t {
  gradient_and_parity,  ///< f64 gradient check, and the comparisons
  parity_only,          ///< no gradient check: no gradient, a kink or tie, or too large
};

/// Cases larger than this (elements of inputs that require grad) are too slow
/// for the finite-difference check: declare them parity_only.
inline constexpr int64_t kGradCheckMaxElements = 4000;

/// What the CPU's result is compared with.
enum class Reference : uint8_t {
  exact,  ///< the same function on the same rounded inputs in f64
  /// nothing: decisions on rounded values (nms's thresholds) may go the other
  /// way in f64, so only the devices are compared (Agreement::bit_equal)
  none,
};

struct OpCase {
  std::string op;    ///< the tcv::ops function checked: the coverage key
  std::string name;  ///< what sets this case apart from the op's others
  std::vector<Input> inputs;
  OpFn fn;
  std::vector<DType> dtypes{DType::f32, DType::f64};  ///< compared in each
  Check check = Check::gradient_and_parity;
  GradCheckOptions grad{};  ///< step, tolerances and kink of the gradient check
  Tol tol{};                ///< the comparisons' bound
  Cpu16 cpu16 = Cpu16::native;
  Reference reference = Reference::exact;
  uint64_t seed = 0;  ///< set by the registry from op and name

  std::string id() const { return op + "/" + name; }
};

/// The inputs of a case: CPU leaves in `dtype` (f64 for the gradient check),
/// before their layouts are applied.
std::vector<Tensor> make_inputs(const OpCase& c, DType dtype);
/// The case's function on leaves: applies each input's layout, then the op.
MultiFn case_fn(const OpCase& c);

/// The f64 finite-difference check of the case's gradients (all floating
/// outputs that require grad); returns the number of elements checked.
int64_t gradcheck_case(const OpCase& c);

/// The case in `dtype`: the CPU against the exact result, and the second
/// device (see ParityOptions::other) against the CPU.
ParityResult parity_case(const OpCase& c, DType dtype, std::optional<Device> other = {});

/// Every op's cases, and the ops exempt from needing any.
class OpRegistry {
 public:
  /// Adds a case (its seed from op and name); a duplicate id is an error.
  void add(OpCase c);
  /// An op of tcv::ops that needs no cases of its own, and why.
  void exempt(const std::string& op, const std::string& why);

  const std::vector<OpCase>& cases() const { return cases_; }
  std::vector<const OpCase*> cases_of(const std::string& op) const;
  /// The ops with cases, sorted.
  std::vector<std::string> ops() const;
  const std::map<std::string, std::string>& exemptions() const { return exempt_; }

 private:
  std::vector<OpCase> cases_;
  std::map<std::string, std::string> exempt_;
};

/// The table: every family's cases (tests/ops/cases.cpp), built once.
const OpRegistry& op_registry();

// ---- helpers for declaring cases ----

/// Seeded i64 (or `dtype`) indices uniform in [0, hi).
Tensor random_indices(const Shape& shape, int64_t hi, uint64_t seed, DType dtype = DType::i64);
/// Seeded bool mask, true with probability p.
Tensor random_mask(const Shape& shape, double p, uint64_t seed);
/// Seeded class targets in [0, classes); about one in five set to `ignore`
/// when `with_ignored`.
Tensor class_targets(const Shape& shape, int64_t classes, uint64_t seed, bool with_ignored = false,
                     int64_t ignore = -100);

}  // namespace tcv::testing
