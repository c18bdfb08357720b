#include "support/cuda_compare.h"

#include <cmath>

#include "engine/autograd.h"
#include "engine/rng.h"
#include "support/error_bound.h"

namespace tcv::testing {

int& cuda_compare_count() {
  static int n = 0;
  return n;
}

Tensor random_input(const Shape& shape, uint64_t seed, DType dtype, bool requires_grad, double lo,
                    double hi) {
  Generator g(seed);
  Tensor t =
      is_floating(dtype)
          ? uniform(shape, lo, hi, {.dtype = DType::f64}, &g).to(dtype)
          : randint(0, dtype == DType::b8 ? 2 : 100, shape, {.dtype = DType::i64}, &g).to(dtype);
  if (requires_grad && is_floating(dtype)) t.set_requires_grad(true);
  return t;
}

namespace {

bool is_half(DType dt) {
  return dt == DType::f16 || dt == DType::bf16;
}

/// γ_terms for a result computed in `dt`, summed as `acc` says.
double gamma_for(int64_t terms, DType dt, Accumulate acc) {
  const DType sum_dt = is_half(dt) && acc == Accumulate::wide ? DType::f32 : dt;
  return gamma_n(terms, sum_dt);
}

/// A leaf copy of t on `device` (floating values converted to `floating` when
/// given), requiring grad like t.
Tensor leaf_on(const Tensor& t, Device device, std::optional<DType> floating = {}) {
  if (!t.defined()) return t;
  Tensor c = t.detach();
  if (floating && is_floating(c.dtype())) c = c.to(*floating);
  c = c.to(device);
  if (c.storage() == t.storage()) c = c.clone();
  if (t.requires_grad()) c.set_requires_grad(true);
  return c;
}

/// fn with 16-bit floating CPU inputs computed in f32 and floating outputs
/// rounded back to the 16-bit dtype (through differentiable casts).
MultiFn via_f32(const MultiFn& fn) {
  return [fn](const std::vector<Tensor>& in) {
    std::optional<DType> half;
    std::vector<Tensor> up;
    for (const Tensor& t : in) {
      if (t.defined() && t.device().is_cpu() && is_half(t.dtype())) {
        half = t.dtype();
        up.push_back(ops::cast(t, DType::f32));
      } else {
        up.push_back(t);
      }
    }
    if (!half) return fn(in);
    std::vector<Tensor> out = fn(up);
    for (Tensor& o : out)
      if (o.defined() && o.dtype() == DType::f32) o = ops::cast(o, *half);
    return out;
  };
}

struct Run {
  std::vector<Tensor> in, out, grads;
};

/// fn on leaf copies of `inputs` on `device` (floating ones converted to
/// `floating` when given).
Run forward(const MultiFn& fn, const std::vector<Tensor>& inputs, Device device,
            std::optional<DType> floating) {
  Run r;
  for (const Tensor& t : inputs) r.in.push_back(leaf_on(t, device, floating));
  r.out = fn(r.in);
  return r;
}

/// Backpropagates dy (one per output, moved to the outputs' device and dtype;
/// undefined where an output gets none) and collects the inputs' gradients.
void backward(Run& r, const std::vector<Tensor>& dy) {
  std::vector<Tensor> roots, seeds;
  for (size_t i = 0; i < r.out.size() && i < dy.size(); ++i) {
    if (!dy[i].defined() || !r.out[i].defined() || !r.out[i].requires_grad()) continue;
    roots.push_back(r.out[i]);
    seeds.push_back(dy[i].to(r.out[i].dtype()).to(r.out[i].device()));
  }
  if (!roots.empty()) autograd::backward(roots, seeds);
  for (const Tensor& t : r.in)
    r.grads.push_back(t.defined() && t.requires_grad() ? t.grad() : Tensor());
}

Run run_on(const MultiFn& fn, const std::vector<Tensor>& inputs, Device device,
           std::optional<DType> floating, const std::vector<Tensor>& dy) {
  Run r = forward(fn, inputs, device, floating);
  backward(r, dy);
  return r;
}

/// Upstream gradients for the floating outputs that require grad.
std::vector<Tensor> upstream(const std::vector<Tensor>& out, uint64_t seed) {
  Generator gen(seed);
  std::vector<Tensor> dy;
  for (const Tensor& o : out) {
    if (o.defined() && o.requires_grad() && is_floating(o.dtype()))
      dy.push_back(uniform(o.shape(), -1.0, 1.0, {.dtype = DType::f64}, &gen).to(o.dtype()));
    else
      dy.emplace_back();
  }
  return dy;
}

/// EXPECTs |actual − expected| ≤ factor·bound elementwise (NaN equals NaN, and
/// an undefined bound means equal); returns the largest |diff| / (factor·bound).
double compare(const Tensor& actual, const Tensor& expected, const Tensor& bound, double factor,
               const std::string& what) {
  EXPECT_EQ(actual.shape(), expected.shape())
      << what << ": shapes " << actual.shape_str() << " vs " << expected.shape_str();
  if (actual.shape() != expected.shape()) return INFINITY;
  EXPECT_EQ(actual.dtype(), expected.dtype()) << what << ": dtypes";
  const std::vector<double> a = actual.to(kCPU).to_vector<double>();
  const std::vector<double> e = expected.to(kCPU).to_vector<double>();
  std::vector<double> b(a.size(), 0.0);
  if (bound.defined() && !a.empty())
    b = bound.to(DType::f64).expand(expected.shape()).contiguous().to_vector<double>();
  double worst = 0.0;
  int reported = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] == e[i] || (std::isnan(a[i]) && std::isnan(e[i]))) continue;
    const double diff = std::abs(a[i] - e[i]), lim = factor * b[i];
    if (lim > 0) worst = std::max(worst, diff / lim);
    if (!(diff <= lim) && reported++ < 5)
      ADD_FAILURE() << what << ": element " << i << " is " << a[i] << ", expected " << e[i]
                    << " (|diff| " << diff << " exceeds the bound " << lim << ")";
  }
  return worst;
}

/// Σ|terms| of each output and gradient (see Sums).
Bounds magnitudes(const Tol& tol, const BoundArgs& a) {
  Bounds m;
  std::vector<Tensor> in, dy;
  for (const Tensor& t : a.leaves) {
    if (!t.defined() || !is_floating(t.dtype())) {
      in.push_back(t);
      continue;
    }
    Tensor c = t.detach().to(DType::f64);
    if (tol.sums == Sums::of_magnitudes) c = ops::abs(c);
    in.push_back(c.set_requires_grad(t.requires_grad()));
  }
  for (const Tensor& d : a.dy) dy.push_back(d.defined() ? ops::abs(d) : d);
  const Run r = run_on(a.fn, in, kCPU, std::nullopt, dy);
  for (size_t i = 0; i < r.out.size(); ++i) {
    const bool summed = tol.sums == Sums::of_magnitudes && is_floating(r.out[i].dtype());
    m.outputs.push_back(summed ? ops::abs(r.out[i].detach()) : Tensor());
  }
  for (const Tensor& g : r.grads) m.grads.push_back(g.defined() ? ops::abs(g) : g);
  return m;
}

}  // namespace

Bounds tol_bounds(const Tol& tol, const BoundArgs& a) {
  if (tol.bound) return tol.bound(a);
  Bounds sums;
  if (tol.terms > 0) sums = magnitudes(tol, a);
  NoGradGuard no_grad;
  Bounds b;
  b.outputs.resize(a.outputs.size());
  b.grads.resize(a.leaves.size());
  auto one = [&](const Tensor& exact, DType dt, double ulps, double scale, const Tensor& sum) {
    if (!exact.defined() || !is_floating(dt)) return Tensor();
    const double u = unit_roundoff(dt);
    const bool wide16 = is_half(dt) && tol.accumulate == Accumulate::wide;
    // A 16-bit result computed in f32: f32's roundings, then one more.
    if (wide16) ulps *= 1 + unit_roundoff(DType::f32) / u;
    if (wide16 && tol.terms > 0) ulps += 1;
    Tensor bound = zeros({}, {.dtype = DType::f64});
    if (ulps > 0)
      bound = ops::add(ops::mul(ops::add(ops::abs(exact.to(DType::f64)), scale), ulps * u),
                       ulps * underflow_roundoff(dt));
    if (tol.terms > 0 && sum.defined()) {
      const double g = gamma_for(tol.terms, dt, tol.accumulate) + tol.term_ulps * u;
      bound = ops::add(bound, ops::mul(sum, tol.growth * g));
    }
    return bound;
  };
  const double gu = tol.grad_ulps < 0 ? tol.ulps : tol.grad_ulps;
  const double gs = tol.grad_scale < 0 ? tol.scale : tol.grad_scale;
  for (size_t i = 0; i < a.outputs.size(); ++i)
    b.outputs[i] = one(a.outputs[i], a.out_dtypes[i], tol.ulps, tol.scale,
                       i < sums.outputs.size() ? sums.outputs[i] : Tensor());
  for (size_t i = 0; i < a.leaves.size(); ++i)
    b.grads[i] = one(a.leaf_grads[i], a.in_dtypes[i], gu, gs,
                     i < sums.grads.size() ? sums.grads[i] : Tensor());
  return b;
}

ParityResult expect_parity(const std::string& name, const MultiFn& fn,
                           const std::vector<Tensor>& inputs, const Tol& tol,
                           const ParityOptions& opts) {
  ParityResult res;
  const MultiFn cpu_fn = opts.cpu16 == Cpu16::via_f32 ? via_f32(fn) : fn;
  // The CPU run picks the upstream gradients (in each output's dtype).
  Run cpu = forward(cpu_fn, inputs, kCPU, std::nullopt);
  const std::vector<Tensor> dy =
      opts.grads ? upstream(cpu.out, opts.seed) : std::vector<Tensor>(cpu.out.size());
  backward(cpu, dy);
  bool any_root = false;
  for (const Tensor& d : dy) any_root |= d.defined();

  // Every input that requires grad must get one, on every device.
  auto expect_grads = [&](const Run& r, const std::string& where) {
    if (!opts.grads) return;
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!inputs[i].defined() || !inputs[i].requires_grad()) continue;
      EXPECT_TRUE(r.grads[i].defined())
          << name << ": input " << i << " requires grad but gets no gradient on " << where
          << (any_root ? "" : " (no output is differentiable)");
    }
  };
  expect_grads(cpu, "the cpu");

  // The exact run: floating inputs (as rounded to the dtype under test) in f64.
  bool all_f64 = true;
  for (const Tensor& t : inputs)
    if (t.defined() && is_floating(t.dtype()) && t.dtype() != DType::f64) all_f64 = false;
  for (const Tensor& o : cpu.out)
    if (o.defined() && is_floating(o.dtype()) && o.dtype() != DType::f64) all_f64 = false;
  std::vector<Tensor> dy64;
  for (const Tensor& d : dy) dy64.push_back(d.defined() ? d.to(DType::f64) : d);
  // Without the exact run (a function that takes f32 only), the bounds are
  // sized from the CPU's values: they differ from the exact ones by less than
  // the bounds themselves.
  auto as_f64 = [](Run r) {
    for (std::vector<Tensor>* ts : {&r.in, &r.out, &r.grads})
      for (Tensor& t : *ts)
        if (t.defined() && is_floating(t.dtype())) t = t.detach().to(DType::f64);
    return r;
  };
  const bool exact_run = !all_f64 && opts.against_exact;
  const Run exact = all_f64     ? cpu
                    : exact_run ? run_on(fn, inputs, kCPU, DType::f64, dy64)
                                : as_f64(cpu);
  if (exact_run) expect_grads(exact, "the exact (f64) run");

  BoundArgs args{.fn = fn, .leaves = exact.in, .leaf_grads = exact.grads, .dy = dy64};
  for (size_t i = 0; i < exact.in.size(); ++i) {
    const bool viewed = i < opts.views.size() && opts.views[i] && exact.in[i].defined();
    args.inputs.push_back(viewed ? opts.views[i](exact.in[i].detach()) : exact.in[i].detach());
    const Tensor& g = exact.grads[i];
    args.grads.push_back(viewed && g.defined() ? opts.views[i](g) : g);
  }
  args.outputs = exact.out;
  for (Tensor& o : args.outputs)
    if (o.defined()) o = o.detach();
  for (const Tensor& o : cpu.out) args.out_dtypes.push_back(o.defined() ? o.dtype() : DType::f32);
  for (const Tensor& t : inputs) args.in_dtypes.push_back(t.defined() ? t.dtype() : DType::f32);
  Bounds bounds = tol_bounds(tol, args);
  if (tol.bound) {
    // Gradient bounds of what the op sees, back onto the leaves: through the
    // view's own backward (a permutation, or a scatter into the slice).
    bounds.grads.resize(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      const bool viewed = i < opts.views.size() && opts.views[i];
      if (!viewed || !bounds.grads[i].defined() || !exact.in[i].defined()) continue;
      Tensor z = zeros(exact.in[i].shape(), {.dtype = DType::f64}).set_requires_grad(true);
      const Tensor seen = opts.views[i](z);
      ops::sum(ops::mul(seen, bounds.grads[i].to(DType::f64).expand(seen.shape()))).backward();
      bounds.grads[i] = z.grad();
    }
  }

  auto check = [&](const Run& r, const Run& ref, double factor, const std::string& where) {
    double worst = 0;
    EXPECT_EQ(r.out.size(), ref.out.size()) << name << ": number of outputs on " << where;
    for (size_t i = 0; i < r.out.size() && i < ref.out.size(); ++i) {
      if (!ref.out[i].defined()) continue;
      Tensor expected = ref.out[i].detach();
      if (expected.dtype() != r.out[i].dtype()) expected = expected.to(r.out[i].dtype());
      worst =
          std::max(worst, compare(r.out[i].detach(), expected,
                                  i < bounds.outputs.size() ? bounds.outputs[i] : Tensor(), factor,
                                  name + " output " + std::to_string(i) + " on " + where));
    }
    if (!opts.grads) return worst;
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!r.grads[i].defined() || !ref.grads[i].defined()) continue;
      Tensor expected = ref.grads[i];
      if (expected.dtype() != r.grads[i].dtype()) expected = expected.to(r.grads[i].dtype());
      worst = std::max(worst,
                       compare(r.grads[i], expected, bounds.grads[i], factor,
                               name + " gradient of input " + std::to_string(i) + " on " + where));
    }
    return worst;
  };
  if (exact_run) {
    // The CPU result against the exact one, compared in f64 (rounding the exact
    // result to the dtype would add half an ulp the bounds leave out).
    Run cpu64 = cpu;
    for (Tensor& o : cpu64.out)
      if (o.defined() && is_floating(o.dtype())) o = o.detach().to(DType::f64);
    for (Tensor& g : cpu64.grads)
      if (g.defined()) g = g.to(DType::f64);
    res.worst = check(cpu64, exact, 1.0, "cpu (against f64)");
    res.exact_checked = true;
  }

  if (!opts.against_other) return res;
  const std::optional<Device> other =
      opts.other ? opts.other
                 : (cuda_is_available() ? std::optional<Device>(Device(DeviceType::CUDA, 0))
                                        : std::nullopt);
  if (!other) return res;
  // A CPU standing in for the second device runs what the CPU runs.
  const Run dev = run_on(other->is_cpu() ? cpu_fn : fn, inputs, *other, std::nullopt, dy);
  const std::string where = other->is_cuda() ? "cuda" : "the second device";
  for (size_t i = 0; i < dev.out.size(); ++i)
    if (dev.out[i].defined())
      EXPECT_EQ(dev.out[i].device(), *other) << name << ": output " << i << " left " << where;
  expect_grads(dev, where);
  res.worst_other = check(dev, cpu, tol.devices == Agreement::bit_equal ? 0.0 : 2.0,
                          where + " (against the cpu)");
  res.other_checked = true;
  ++cuda_compare_count();
  return res;
}

ParityResult expect_parity(const std::string& name,
                           const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                           const std::vector<Tensor>& inputs, const Tol& tol,
                           const ParityOptions& opts) {
  return expect_parity(
      name, MultiFn([fn](const std::vector<Tensor>& in) { return std::vector<Tensor>{fn(in)}; }),
      inputs, tol, opts);
}

void expect_cuda_matches_cpu(const std::string& name, const MultiFn& fn,
                             const std::vector<Tensor>& inputs, const Tol& tol,
                             ParityOptions opts) {
  if (!opts.other && !cuda_is_available()) return;
  expect_parity(name, fn, inputs, tol, opts);
}

void expect_cuda_matches_cpu(const std::string& name,
                             const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                             const std::vector<Tensor>& inputs, const Tol& tol,
                             ParityOptions opts) {
  if (!opts.other && !cuda_is_available()) return;
  expect_parity(name, fn, inputs, tol, opts);
}

}  // namespace tcv::testing
