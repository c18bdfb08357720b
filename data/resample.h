// PIL's bilinear resampling (libImaging/Resample.c): the antialiased resizes of
// data/transforms.h (Antialias::on), as torchvision's resize of a PIL image.
#pragma once

#include <cstdint>

namespace tcv::data {

/// Resamples the (h, w) window at (top, left) of every plane of `src` (C, H, W),
/// which the window lies inside, to `dst` (C, oh, ow), as PIL crops then resizes
/// with BILINEAR: a triangle filter that widens with the scale when shrinking.
/// u8 images use PIL's 22-bit fixed-point weights and rounding (equal to PIL's
/// Image.resize bit for bit); f32 images compute in double.
void pil_resized_crop(const uint8_t* src, int64_t C, int64_t H, int64_t W, int64_t top,
                      int64_t left, int64_t h, int64_t w, uint8_t* dst, int64_t oh, int64_t ow);
void pil_resized_crop(const float* src, int64_t C, int64_t H, int64_t W, int64_t top, int64_t left,
                      int64_t h, int64_t w, float* dst, int64_t oh, int64_t ow);

}  // namespace tcv::data
