// Pose parsing's dense ops: gaussian_filter2d (scipy's gaussian_filter in
// reflect mode) on maps larger and smaller than the filter, and peak_mask on
// maps of small integers (plateaus and equal neighbours everywhere).
//
// gaussian_filter2d is two passes of n = 2r + 1 taps with positive weights
// summing to 1: each pass rounds each tap (weights in the dtype) and each
// product once and sums n terms, the second pass carrying the first's error
// with weights that sum to 1; so the result is within (γ_2n + 4u)·filter(|x|)
// of the exact filter of the rounded inputs. Both devices sum the taps in the
// same order with separate, correctly rounded multiplies and adds: bit for
// bit. peak_mask only compares values: exact.
#include "ops/cases.h"

namespace tcv::testing {

void register_pose_cases(OpRegistry& r) {
  struct Map {
    const char* name;
    Shape shape;
    double sigma;
    Layout layout;
  };
  for (const Map& m : {Map{"19x20x31_sigma3", {19, 20, 31}, 3.0, {}},
                       Map{"2x3x11x13_sigma1.5", {2, 3, 11, 13}, 1.5, {}},
                       Map{"smaller_than_filter_2x4x5", {2, 4, 5}, 3.0, {}},
                       Map{"transposed_3x9x14", {3, 9, 14}, 2.0, Layout::permuted({0, 2, 1})}}) {
    const double sigma = m.sigma;
    const auto n = static_cast<int64_t>(ops::gaussian_taps(sigma).size());
    r.add({.op = "gaussian_filter2d",
           .name = m.name,
           .inputs = {{.shape = m.shape, .lo = -0.5, .hi = 1.5, .grad = false, .layout = m.layout}},
           .fn = [sigma](const In& v) { return ops::gaussian_filter2d(v[0], sigma); },
           .check = Check::parity_only,
           .tol = {.terms = 2 * n, .term_ulps = 4, .devices = Agreement::bit_equal}});
  }
  r.add({.op = "peak_mask",
         .name = "18x24x30_plateaus",
         .inputs = {{.shape = {18, 24, 30}, .lo = 0, .hi = 4, .grad = false, .integers = true}},
         .fn = [](const In& v) { return ops::peak_mask(v[0], 1.5); },
         .check = Check::parity_only,
         .tol = {.devices = Agreement::bit_equal}});
  r.add({.op = "peak_mask",
         .name = "strided_2x7x9",
         .inputs = {{.shape = {2, 7, 9},
                     .lo = 0,
                     .hi = 1,
                     .grad = false,
                     .layout = Layout::strided(2, 1, 2)}},
         .fn = [](const In& v) { return ops::peak_mask(v[0], 0.2); },
         .check = Check::parity_only,
         .tol = {.devices = Agreement::bit_equal}});
}

}  // namespace tcv::testing
