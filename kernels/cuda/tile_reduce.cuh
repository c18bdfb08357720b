// Reductions along r of a contiguous (outer, r, inner) view, shared by the
// reduce, softmax and loss kernels. A block of 256 threads is a 3-D tile:
//   x (bx threads): neighbouring columns j of inner, so loads are coalesced;
//   y (by threads): split the r rows of one column, combined in shared memory;
//   z (bz groups):  independent (outer, column block) groups packed in one block,
// with bx·by·bz = 256, all powers of two. inner == 1 gives bx = 1 and up to
// 256 threads per row; inner ≥ 32 gives 32 columns and 8 rows per group.
// Included only from .cu files.
#pragma once

#include "kernels/cuda/common.cuh"

namespace tcv::kernels::cuda {

constexpr int kTileThreads = 256;

struct Tile {
  int bx = 1, by = 1, bz = 1;
  int64_t col_blocks = 1;  // ceil(inner / bx)
  int64_t groups = 0;      // outer · col_blocks
  int blocks = 1;          // grid size (blocks grid-stride over the groups)
  dim3 block() const { return dim3(bx, by, bz); }
};

inline int pow2_at_least(int64_t v, int cap) {
  int p = 1;
  while (p < cap && p < v) p <<= 1;
  return p;
}

inline Tile make_tile(int64_t outer, int64_t r, int64_t inner) {
  Tile t;
  t.bx = pow2_at_least(inner, 32);
  t.by = pow2_at_least(r, kTileThreads / t.bx);
  t.by = std::max(t.by, 4 / t.bx);  // blockDim.z may not exceed 64
  t.bz = kTileThreads / (t.bx * t.by);
  t.col_blocks = (inner + t.bx - 1) / t.bx;
  t.groups = outer * t.col_blocks;
  const int64_t want = (t.groups + t.bz - 1) / t.bz;
  t.blocks = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(want, int64_t(1) << 24)));
  return t;
}

/// Where a thread of the tile works: its group g, the outer index o and column
/// j of that group, and whether (o, j) exists (threads outside still take part
/// in the block-wide reductions).
struct TilePos {
  int64_t g, o, j;
  bool valid;
};

__device__ __forceinline__ TilePos tile_pos(int64_t gb, int64_t col_blocks, int64_t groups,
                                            int64_t inner) {
  TilePos p;
  p.g = gb * blockDim.z + threadIdx.z;
  p.o = p.g / col_blocks;
  p.j = (p.g % col_blocks) * blockDim.x + threadIdx.x;
  p.valid = p.g < groups && p.j < inner;
  return p;
}

/// Number of block iterations of the grid-stride loop over groups.
__device__ __forceinline__ int64_t tile_iterations(int64_t groups) {
  return (groups + blockDim.z - 1) / blockDim.z;
}

/// The grid-stride loop over the tile's groups: fn(p) for each of this
/// thread's positions (return in fn skips to the next). Every thread of the
/// block makes the same calls, so block-wide reductions inside fn stay in step.
template <typename Fn>
__device__ __forceinline__ void for_each_tile(int64_t col_blocks, int64_t groups, int64_t inner,
                                              Fn fn) {
  const int64_t iters = tile_iterations(groups);
  for (int64_t gb = blockIdx.x; gb < iters; gb += gridDim.x)
    fn(tile_pos(gb, col_blocks, groups, inner));
}

/// Combines v over the by threads of each (x, z) column of the tile with
/// `combine` (a tree, so sums stay accurate) and returns the result to all of
/// them. Every thread of the block must call it; sm holds 256 S.
template <typename S, typename F>
__device__ __forceinline__ S tile_allreduce(S v, S* sm, F combine) {
  const int row = blockDim.x;
  const int idx = (threadIdx.z * blockDim.y + threadIdx.y) * row + threadIdx.x;
  sm[idx] = v;
  __syncthreads();
  for (int s = blockDim.y / 2; s > 0; s >>= 1) {
    if (static_cast<int>(threadIdx.y) < s) sm[idx] = combine(sm[idx], sm[idx + s * row]);
    __syncthreads();
  }
  const S res = sm[threadIdx.z * blockDim.y * row + threadIdx.x];
  __syncthreads();  // sm may be reused right after
  return res;
}

}  // namespace tcv::kernels::cuda

/// Shared memory for tile_allreduce of type S: `S* name`.
#define TCV_TILE_SMEM(S, name)                                        \
  __shared__ __align__(16) unsigned char name##_raw[256 * sizeof(S)]; \
  S* name = reinterpret_cast<S*>(name##_raw)
