// Box kernels on the GPU, the same entry points and semantics as
// kernels/cpu/boxes.h. Every overlap is computed with the CPU's operations in
// the same order and no fused multiply-adds, and scores are sorted stably as
// on the CPU, so both keep the same boxes, tied scores included.
#pragma once

#include "kernels/cpu/boxes.h"
#include "kernels/cuda/entry.h"

TCV_CUDA_HEADER_BEGIN
namespace tcv::kernels::cuda {

/// out (N, M) = IoU of every pair of a (N, 4) and b (M, 4).
TCV_CUDA_API void box_iou(const KTensor& out, const KTensor& a, const KTensor& b) TCV_CUDA_ENTRY;

/// torchvision's CUDA NMS: scores sorted (stable, descending, NaN first), a
/// bitmask of the overlaps of every box with the boxes after it in 64-box
/// blocks, then one block of threads walks the blocks in order, resolving each
/// 64-box diagonal sequentially in shared memory and or-ing the masks of the
/// kept boxes into the removed set in parallel. *kept receives the number
/// kept (one small copy to the host).
TCV_CUDA_API void nms(const KTensor& keep, const KTensor& boxes, const KTensor& scores,
                      double iou_threshold, int64_t* kept) TCV_CUDA_ENTRY;

/// torchvision's SSDMatcher (see kernels/cpu/boxes.h).
TCV_CUDA_API void ssd_match(const KTensor& matches, const KTensor& iou, double threshold)
    TCV_CUDA_ENTRY;

/// y = x / max(‖x‖₂, eps) over c of (outer, c, inner); norm (outer, inner).
TCV_CUDA_API void l2_normalize(const KTensor& y, const KTensor& norm, const KTensor& x,
                               int64_t outer, int64_t c, int64_t inner, double eps) TCV_CUDA_ENTRY;

/// dx = (dy − y·Σ_c dy·y) / ‖x‖, or dy / eps where the norm was clamped.
TCV_CUDA_API void l2_normalize_backward(const KTensor& dx, const KTensor& dy, const KTensor& y,
                                        const KTensor& norm, int64_t outer, int64_t c,
                                        int64_t inner, double eps) TCV_CUDA_ENTRY;

}  // namespace tcv::kernels::cuda
TCV_CUDA_HEADER_END
