// Whole-model golden checks: the closed-form weights and inputs of
// scripts/make_golden_cls.py (formula_tensor, formula_input, sample), set on a
// tcv module, and the relative error the golden tests assert on.
#pragma once

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "engine/autograd.h"
#include "engine/serialize.h"
#include "layers/module.h"
#include "support/golden_formula.h"
#include "support/gradcheck.h"

namespace tcv::testing {

/// Tensor `name` of the golden file at `rel_path` (relative to the source
/// tree), read once per file; a missing name is an error naming both.
inline const Tensor& golden_file_tensor(const std::string& rel_path, const std::string& name) {
  static std::mutex mu;
  static std::map<std::string, std::map<std::string, Tensor>> files;
  std::lock_guard<std::mutex> lock(mu);
  auto [file, fresh] = files.try_emplace(rel_path);
  if (fresh)
    for (auto& [key, t] : load_safetensors(source_dir() + "/" + rel_path).tensors)
      file->second[key] = t;
  auto it = file->second.find(name);
  TCV_CHECK(it != file->second.end(), "golden tensor \"", name, "\" missing from ", rel_path);
  return it->second;
}

/// The script's formula_tensor(name, t) for a state_dict entry, as f32 values:
/// r = 2u(i, seed(name)) − 1; running_mean 0.1r, running_var 1 + 0.5r, weights of
/// 2+ dims sqrt(6 / fan_in)·r, 1-d "weight" 1 + 0.2r, anything else 0.1r.
inline std::vector<float> golden_formula_values(const std::string& name, const Tensor& t) {
  auto ends_with = [&](const std::string& suffix) {
    return name.size() >= suffix.size() &&
           name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  const int64_t n = t.numel(), s = golden_seed(name);
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const double r = 2.0 * golden_uniform(i, s) - 1.0;
    double x;
    if (ends_with("running_mean")) {
      x = 0.1 * r;
    } else if (ends_with("running_var")) {
      x = 1.0 + 0.5 * r;
    } else if (t.dim() >= 2) {
      x = std::sqrt(6.0 / static_cast<double>(n / t.size(0))) * r;
    } else if (ends_with("weight")) {
      x = 1.0 + 0.2 * r;
    } else {
      x = 0.1 * r;
    }
    v[static_cast<size_t>(i)] = static_cast<float>(x);
  }
  return v;
}

/// Every state_dict entry of m set by the formula (num_batches_tracked stays 0).
inline void set_golden_weights(nn::Module& m) {
  NoGradGuard no_grad;
  for (auto& [name, t] : m.state_dict()) {
    const std::string suffix = "num_batches_tracked";
    if (name.size() >= suffix.size() &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
      continue;
    t.copy_(from_vector<float>(golden_formula_values(name, t), t.shape()));
  }
}

/// The script's formula_input(shape): 2u(i, 7) − 1 as f32.
inline Tensor golden_input(const Shape& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[static_cast<size_t>(i)] = static_cast<float>(2.0 * golden_uniform(i, 7) - 1.0);
  return from_vector<float>(v, shape);
}

/// The script's sample(t): all elements up to 6000, else every k-th with k = n / 1024 + 1.
inline std::vector<double> golden_sample(const Tensor& t) {
  const std::vector<double> flat = t.contiguous().to_vector<double>();
  const size_t n = flat.size();
  const size_t k = n <= 6000 ? 1 : n / 1024 + 1;
  std::vector<double> s;
  for (size_t i = 0; i < n; i += k) s.push_back(flat[i]);
  return s;
}

/// ‖actual − expected‖∞ / ‖expected‖∞ (the absolute difference when expected is 0);
/// infinity when the sizes differ.
inline double golden_rel_error(const std::vector<double>& actual,
                               const std::vector<double>& expected) {
  if (actual.size() != expected.size()) return INFINITY;
  double diff = 0, scale = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    diff = std::max(diff, std::abs(actual[i] - expected[i]));
    scale = std::max(scale, std::abs(expected[i]));
  }
  return scale > 0 ? diff / scale : diff;
}

}  // namespace tcv::testing
