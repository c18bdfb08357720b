#include "support/op_cases.h"

#include <algorithm>
#include <set>

#include "engine/rng.h"

namespace tcv::testing {

// ---------------------------------------------------------------- Layout

Shape Layout::leaf_shape(const Shape& seen) const {
  switch (kind) {
    case Kind::contiguous:
      return seen;
    case Kind::permuted: {
      // leaf.permute(perm) has size leaf[perm[i]] in dim i.
      Shape leaf(seen.size());
      for (size_t i = 0; i < perm.size(); ++i) leaf[static_cast<size_t>(perm[i])] = seen[i];
      return leaf;
    }
    case Kind::strided: {
      Shape leaf = seen;
      leaf[static_cast<size_t>(dim)] = offset + seen[static_cast<size_t>(dim)] * step;
      return leaf;
    }
    case Kind::expanded:
      return from;
    case Kind::misaligned:
      return {offset + shape_numel(seen)};
  }
  return seen;
}

Tensor Layout::view(const Tensor& leaf, const Shape& seen) const {
  switch (kind) {
    case Kind::contiguous:
      return leaf;
    case Kind::permuted:
      return leaf.permute(perm);
    case Kind::strided: {
      const int64_t n = seen[static_cast<size_t>(dim)];
      return leaf.slice(dim, offset, offset + n * step, step);
    }
    case Kind::expanded:
      return leaf.expand(seen);
    case Kind::misaligned:
      return leaf.narrow(0, offset, shape_numel(seen)).reshape(seen);
  }
  return leaf;
}

std::string Layout::str() const {
  switch (kind) {
    case Kind::contiguous:
      return "contiguous";
    case Kind::permuted:
      return "permuted " + shape_str(perm);
    case Kind::strided:
      return "strided dim " + std::to_string(dim) + " from " + std::to_string(offset) + " step " +
             std::to_string(step);
    case Kind::expanded:
      return "expanded from " + shape_str(from);
    case Kind::misaligned:
      return "contiguous, " + std::to_string(offset) + " elements into its storage";
  }
  return "?";
}

// ---------------------------------------------------------------- cases

std::vector<Tensor> make_inputs(const OpCase& c, DType dtype) {
  std::vector<Tensor> out;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    const Input& in = c.inputs[i];
    const uint64_t seed = c.seed + 1000003ULL * (i + 1);
    // Floating data in the case's dtype, or in the input's own where it has one
    // (an f64 run, as the gradient check, has every floating input in f64).
    const DType dt = in.dtype && dtype != DType::f64 ? *in.dtype : dtype;
    if (in.value.defined()) {
      Tensor v = in.value.detach().clone();
      if (is_floating(v.dtype()) && is_floating(dt)) v = v.to(dt);
      out.push_back(v);
      continue;
    }
    const Shape leaf = in.layout.leaf_shape(in.shape);
    Generator g(seed);
    Tensor t;
    if (is_floating(dt)) {
      t = in.integers ? randint(static_cast<int64_t>(in.lo), static_cast<int64_t>(in.hi), leaf,
                                {.dtype = DType::i64}, &g)
                            .to(dt)
                      : uniform(leaf, in.lo, in.hi, {.dtype = DType::f64}, &g).to(dt);
      if (in.grad) t.set_requires_grad(true);
    } else {
      const int64_t lo = in.integers ? std::max<int64_t>(0, static_cast<int64_t>(in.lo)) : 0;
      const int64_t hi = dt == DType::b8 ? 2 : (in.integers ? static_cast<int64_t>(in.hi) : 100);
      t = randint(lo, hi, leaf, {.dtype = DType::i64}, &g).to(dt);
    }
    out.push_back(t);
  }
  return out;
}

MultiFn case_fn(const OpCase& c) {
  return [&c](const std::vector<Tensor>& leaves) {
    std::vector<Tensor> seen = leaves;
    for (size_t i = 0; i < seen.size() && i < c.inputs.size(); ++i)
      if (seen[i].defined()) seen[i] = c.inputs[i].layout.view(seen[i], c.inputs[i].shape);
    return c.fn(seen);
  };
}

int64_t gradcheck_case(const OpCase& c) {
  std::vector<Tensor> inputs = make_inputs(c, DType::f64);
  int64_t elements = 0;
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) elements += t.numel();
  EXPECT_GT(elements, 0) << c.id()
                         << ": no input requires grad; declare the case Check::parity_only";
  EXPECT_LE(elements, kGradCheckMaxElements)
      << c.id() << ": too large for the finite-difference check; declare it Check::parity_only";
  if (elements == 0 || elements > kGradCheckMaxElements) return 0;
  const MultiFn fn = case_fn(c);
  // Every floating output that requires grad, flattened into one (which ones
  // is decided once: the check also evaluates without autograd).
  std::vector<size_t> differentiable;
  const std::vector<Tensor> first = fn(inputs);
  for (size_t i = 0; i < first.size(); ++i)
    if (first[i].defined() && is_floating(first[i].dtype()) && first[i].requires_grad())
      differentiable.push_back(i);
  EXPECT_FALSE(differentiable.empty()) << c.id() << ": no output is differentiable";
  if (differentiable.empty()) return 0;
  const TensorFn one = [fn, differentiable](const std::vector<Tensor>& in) {
    const std::vector<Tensor> out = fn(in);
    std::vector<Tensor> parts;
    for (size_t i : differentiable) parts.push_back(out[i]);
    if (parts.size() == 1) return parts[0];
    for (Tensor& p : parts) p = p.reshape({-1});
    return ops::cat(parts, 0);
  };
  return check_gradients(c.id(), one, inputs, c.grad);
}

ParityResult parity_case(const OpCase& c, DType dtype, std::optional<Device> other) {
  const std::vector<Tensor> inputs = make_inputs(c, dtype);
  ParityOptions opts{.seed = c.seed ^ 0x9e3779b97f4a7c15ULL,
                     .cpu16 = c.cpu16,
                     .other = other,
                     .against_exact = c.reference == Reference::exact};
  for (const Input& in : c.inputs) {
    if (in.layout.kind == Layout::Kind::contiguous) {
      opts.views.emplace_back();
      continue;
    }
    opts.views.push_back([layout = in.layout, shape = in.shape](const Tensor& leaf) {
      return layout.view(leaf, shape);
    });
  }
  return expect_parity(c.id() + " " + dtype_name(dtype), case_fn(c), inputs, c.tol, opts);
}

// ---------------------------------------------------------------- registry

void OpRegistry::add(OpCase c) {
  // FNV-1a of the id: a case's inputs stay the same when others are added.
  uint64_t h = 1469598103934665603ULL;
  for (char ch : c.id()) h = (h ^ static_cast<unsigned char>(ch)) * 1099511628211ULL;
  c.seed = h >> 16;
  for (const OpCase& o : cases_)
    if (o.id() == c.id()) ADD_FAILURE() << "op case " << c.id() << " is declared twice";
  if (!c.fn) ADD_FAILURE() << "op case " << c.id() << " has no function";
  cases_.push_back(std::move(c));
}

void OpRegistry::exempt(const std::string& op, const std::string& why) {
  exempt_[op] = why;
}

std::vector<const OpCase*> OpRegistry::cases_of(const std::string& op) const {
  std::vector<const OpCase*> out;
  for (const OpCase& c : cases_)
    if (c.op == op) out.push_back(&c);
  return out;
}

std::vector<std::string> OpRegistry::ops() const {
  std::set<std::string> s;
  for (const OpCase& c : cases_) s.insert(c.op);
  return {s.begin(), s.end()};
}

// ---------------------------------------------------------------- helpers

Tensor random_indices(const Shape& shape, int64_t hi, uint64_t seed, DType dtype) {
  Generator g(seed);
  return randint(0, hi, shape, {.dtype = DType::i64}, &g).to(dtype);
}

Tensor random_mask(const Shape& shape, double p, uint64_t seed) {
  Generator g(seed);
  return ops::lt(uniform(shape, 0.0, 1.0, {.dtype = DType::f64}, &g), p);
}

Tensor class_targets(const Shape& shape, int64_t classes, uint64_t seed, bool with_ignored,
                     int64_t ignore) {
  Generator g(seed);
  Tensor t = randint(0, classes, shape, {.dtype = DType::i64}, &g);
  if (!with_ignored) return t;
  Tensor m = ops::lt(uniform(shape, 0.0, 1.0, {.dtype = DType::f64}, &g), 0.2);
  return ops::masked_fill(t, m, static_cast<double>(ignore));
}

}  // namespace tcv::testing
