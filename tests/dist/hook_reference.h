// Reference implementations of the built-in comm hooks in f64, over all ranks
// at once (tests/dist/test_comm_hook.cpp runs them beside thread ranks,
// tests/dist/test_ddp.cpp beside Gloo ranks). Written from PyTorch 1.13's
// default_hooks.py and powerSGD_hook.py, not from dist/comm_hook.cpp: plain
// loops over std::vector<double>, so they share no code with the hooks.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <vector>

#include "dist/comm_hook.h"
#include "engine/rng.h"

namespace tcv::dist::testing {

using Vec = std::vector<double>;

constexpr double kU32 = 0x1p-24;   // f32 unit roundoff
constexpr double kUbf16 = 0x1p-8;  // bf16
constexpr double kUf16 = 0x1p-11;  // f16
/// The most one rounding into f16's subnormal range is off by, times 3 roundings.
constexpr double kF16Subnormal = 3 * 0x1p-25;

/// bf16 / fp16 compression (PyTorch's order: cast, divide by W in the narrow
/// type, sum). With |fl(x) - x| <= u|x| for each rounding (u the type's unit
/// roundoff), rank r sends g_r/W (1 + d1)(1 + d2); the sum of those (summed in
/// f64 by the FakeGroup, or in f32 by Gloo's 2 ranks: exactly) is rounded once
/// more, and the copy back to f32 is exact. So,
/// with A = sum_r |g_r| / W,
///   |result - mean| <= (2u + u^2) A + u (|mean| + (2u + u^2) A) + abs,
/// `abs` covering f16's subnormals (kF16Subnormal; 0 for bf16).
inline double compression_bound(double u, double mean_abs, double mean, double abs) {
  const double e2 = 2 * u + u * u;
  return e2 * mean_abs + u * (std::abs(mean) + e2 * mean_abs) + abs;
}

/// PowerSGD's f32 result against the f64 reference. Per compressed step and
/// matrix (n x m, rank r) the f32 pipeline is: orthogonalise Q (Gram-Schmidt,
/// m-long dot products), P = M Q (m-long), sum, orthogonalise P (n-long), Q =
/// M^T P (n-long), M = P Q^T (r-long); each k-long dot product is off by at
/// most k u |a||b| (Higham's gamma_k), and Gram-Schmidt's computed factor by
/// about (n u) times the conditioning kappa of the columns (here the ratio of
/// their norms, which the reference tracks). So one step is off by about
/// (n + m + r) u kappa relative to the largest value, and error feedback and
/// warm start carry it into the next step: after s compressed steps, at most
///   4 s (n + m + r) u kappa  x max |reference|
/// (4 for the few operations outside the dot products). Biases and the
/// other tensors that are not compressed are averaged, within 2u.
inline double powersgd_bound(int64_t compressed_steps, int64_t max_dims, double kappa) {
  return 4.0 * static_cast<double>(std::max<int64_t>(compressed_steps, 1)) *
         static_cast<double>(max_dims) * kU32 * kappa;
}

/// The PowerSGD settings of the Gloo worker's "hook_powersgd*" scenarios.
inline PowerSGDOptions gloo_test_powersgd() {
  PowerSGDOptions o;
  o.matrix_approximation_rank = 2;
  o.start_powerSGD_iter = 2;
  o.min_compression_rate = 1.5;
  return o;
}

/// The exact average over the ranks (what allreduce, bf16 and fp16 approximate).
inline Vec mean_over_ranks(const std::vector<Vec>& in) {
  Vec out(in.front().size(), 0.0);
  for (const Vec& v : in)
    for (size_t i = 0; i < v.size(); ++i) out[i] += v[i];
  for (double& x : out) x /= static_cast<double>(in.size());
  return out;
}

/// Gram-Schmidt on the columns of the row-major (n, r) matrix `a`, as
/// PyTorch's _orthogonalize_gram_schmidt. Returns the largest ratio of the
/// columns' norms before normalisation (an estimate of the conditioning that
/// the f32 bound scales with).
inline double gram_schmidt(Vec& a, int64_t n, int64_t r, double eps) {
  double hi = 0, lo = INFINITY;
  for (int64_t i = 0; i < r; ++i) {
    double s = 0;
    for (int64_t k = 0; k < n; ++k) s += a[k * r + i] * a[k * r + i];
    const double norm = std::sqrt(s);
    hi = std::max(hi, norm);
    lo = std::min(lo, norm);
    for (int64_t k = 0; k < n; ++k) a[k * r + i] /= norm + eps;
    for (int64_t j = i + 1; j < r; ++j) {
      double d = 0;
      for (int64_t k = 0; k < n; ++k) d += a[k * r + i] * a[k * r + j];
      for (int64_t k = 0; k < n; ++k) a[k * r + j] -= d * a[k * r + i];
    }
  }
  return lo > 0 ? hi / lo : INFINITY;
}

/// PowerSGD over `world` ranks in f64, as powerSGD_hook with PowerSGDState
/// (batch_tensors_with_same_shape off), with the hook's random initial Qs:
/// tcv's randn (f32) from a Generator seeded per bucket by a std::mt19937_64
/// of random_seed, as dist::PowerSGDHook draws them.
class PowerSGDReference {
 public:
  struct Memory {
    std::vector<Vec> error;  // per rank
    Vec p, q;                // flat, the P's and Q's in compression order
    bool has_pq = false;
  };

  PowerSGDReference(PowerSGDOptions opts, int world)
      : opts_(opts), world_(world), rng_(opts.random_seed) {}

  /// One bucket on every rank: `in[r]` is rank r's bucket as the hook got it;
  /// returns what each rank's bucket holds after the hook.
  std::vector<Vec> run(int64_t index, bool is_last, const std::vector<Shape>& shapes,
                       std::vector<Vec> in) {
    const double w = world_;
    const size_t total = in.front().size();
    if (iter_ < opts_.start_powerSGD_iter) {
      if (is_last) ++iter_;
      Vec avg(total, 0.0);
      for (const Vec& v : in)
        for (size_t i = 0; i < total; ++i) avg[i] += v[i] / w;
      return std::vector<Vec>(world_, avg);
    }
    Memory& m = mem_[index];
    if (opts_.use_error_feedback) {
      if (!m.error.empty()) {
        for (int r = 0; r < world_; ++r)
          for (size_t i = 0; i < total; ++i) in[r][i] += m.error[r][i];
      } else {
        m.error.assign(world_, Vec(total, 0.0));
      }
    }
    const std::vector<Vec> cp = in;

    struct Mat {
      int64_t off, n, cols, r;
    };
    std::vector<std::pair<std::pair<int64_t, int64_t>, std::vector<Mat>>> by_shape;
    std::vector<std::pair<int64_t, int64_t>> rest;  // (offset, numel)
    int64_t off = 0, total_p = 0, total_q = 0;
    for (const Shape& s : shapes) {
      const int64_t numel = shape_numel(s);
      const int64_t n = s.empty() ? 1 : s[0];
      const int64_t cols = n == 0 ? 0 : numel / n;
      const int64_t r = std::min({n, cols, opts_.matrix_approximation_rank});
      if (static_cast<double>((n + cols) * r) * opts_.min_compression_rate <
          static_cast<double>(n * cols)) {
        auto it = std::find_if(by_shape.begin(), by_shape.end(),
                               [&](const auto& e) { return e.first == std::make_pair(n, cols); });
        if (it == by_shape.end()) {
          by_shape.push_back({{n, cols}, {}});
          it = std::prev(by_shape.end());
        }
        it->second.push_back({off, n, cols, r});
        total_p += n * r;
        total_q += cols * r;
      } else {
        rest.push_back({off, numel});
      }
      off += numel;
    }
    std::vector<Mat> mats;
    for (auto& [shape, ms] : by_shape) mats.insert(mats.end(), ms.begin(), ms.end());

    const bool randomize = !opts_.warm_start || !m.has_pq;
    if (randomize) {
      m.p.assign(total_p, 0.0);
      m.q.assign(total_q, 0.0);
      Generator gen(rng_() % 1000000000ULL);
      int64_t qo = 0;
      for (const Mat& a : mats) {
        const auto v = randn({a.cols, a.r}, {}, &gen).to_vector<double>();
        std::copy(v.begin(), v.end(), m.q.begin() + qo);
        qo += a.cols * a.r;
      }
    }
    {
      int64_t qo = 0;
      for (const Mat& a : mats) {
        Vec q(m.q.begin() + qo, m.q.begin() + qo + a.cols * a.r);
        kappa_ = std::max(kappa_, gram_schmidt(q, a.cols, a.r, opts_.orthogonalization_epsilon));
        std::copy(q.begin(), q.end(), m.q.begin() + qo);
        qo += a.cols * a.r;
      }
    }
    // P = sum over ranks of M Q, orthogonalised.
    std::fill(m.p.begin(), m.p.end(), 0.0);
    int64_t po = 0, qo = 0;
    for (const Mat& a : mats) {
      for (int r = 0; r < world_; ++r)
        for (int64_t i = 0; i < a.n; ++i)
          for (int64_t k = 0; k < a.r; ++k) {
            double s = 0;
            for (int64_t j = 0; j < a.cols; ++j)
              s += in[r][a.off + i * a.cols + j] * m.q[qo + j * a.r + k];
            m.p[po + i * a.r + k] += s;
          }
      Vec p(m.p.begin() + po, m.p.begin() + po + a.n * a.r);
      kappa_ = std::max(kappa_, gram_schmidt(p, a.n, a.r, opts_.orthogonalization_epsilon));
      std::copy(p.begin(), p.end(), m.p.begin() + po);
      po += a.n * a.r;
      qo += a.cols * a.r;
    }
    // Q = the average over ranks of M^T P; the result M = P Q^T.
    Vec out(total, 0.0);
    for (auto [o, numel] : rest)
      for (int64_t i = 0; i < numel; ++i) {
        double s = 0;
        for (int r = 0; r < world_; ++r) s += in[r][o + i];
        out[o + i] = s / w;
      }
    po = qo = 0;
    for (const Mat& a : mats) {
      for (int64_t j = 0; j < a.cols; ++j)
        for (int64_t k = 0; k < a.r; ++k) {
          double s = 0;
          for (int r = 0; r < world_; ++r)
            for (int64_t i = 0; i < a.n; ++i)
              s += in[r][a.off + i * a.cols + j] * m.p[po + i * a.r + k];
          m.q[qo + j * a.r + k] = s / w;
        }
      for (int64_t i = 0; i < a.n; ++i)
        for (int64_t j = 0; j < a.cols; ++j) {
          double s = 0;
          for (int64_t k = 0; k < a.r; ++k) s += m.p[po + i * a.r + k] * m.q[qo + j * a.r + k];
          out[a.off + i * a.cols + j] = s;
        }
      po += a.n * a.r;
      qo += a.cols * a.r;
    }
    if (opts_.use_error_feedback)
      for (int r = 0; r < world_; ++r)
        for (size_t i = 0; i < total; ++i) m.error[r][i] = cp[r][i] - out[i];
    m.has_pq = opts_.warm_start;
    if (!opts_.warm_start) m.p.clear(), m.q.clear();
    if (is_last) ++iter_;
    return std::vector<Vec>(world_, out);
  }

  const Memory& memory(int64_t index) { return mem_[index]; }
  int64_t iter() const { return iter_; }
  /// The largest column-norm ratio met in Gram-Schmidt so far.
  double kappa() const { return kappa_; }

 private:
  PowerSGDOptions opts_;
  int world_;
  std::mt19937_64 rng_;
  std::map<int64_t, Memory> mem_;
  int64_t iter_ = 0;
  double kappa_ = 1.0;
};

/// Largest |a - b| / scale over the elements, scale = max(|b|) (or 1 if b is zero).
inline double max_rel_diff(const Vec& a, const Vec& b) {
  double worst = 0, scale = 0;
  for (double v : b) scale = std::max(scale, std::abs(v));
  if (scale == 0) scale = 1;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    worst = std::max(worst, std::abs(a[i] - b[i]) / scale);
  return a.size() == b.size() ? worst : INFINITY;
}

}  // namespace tcv::dist::testing
