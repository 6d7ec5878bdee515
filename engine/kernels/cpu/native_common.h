// Helpers shared by radixgate's native CPU kernels (engine.kernels.cpu.native builds them).
#pragma once

#include <ATen/Parallel.h>
#include <c10/util/BFloat16.h>

#include <algorithm>

#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace radixgate {

inline float to_float(float v) { return v; }
inline float to_float(c10::BFloat16 v) {  // exact: a bfloat16 is the top half of a float32
  const uint32_t bits = static_cast<uint32_t>(v.x) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

#if defined(__AVX512F__)
// the first ``count`` (1..16) float32 lanes of ``acc`` to dst, each rounded once to T
template <typename T>
inline void store_lanes(T* dst, __m512 acc, int64_t count) {
  if constexpr (std::is_same_v<T, float>) {
    _mm512_mask_storeu_ps(dst, static_cast<__mmask16>((1u << count) - 1), acc);
  } else {
    alignas(64) float lanes[16];
    _mm512_store_ps(lanes, acc);
    for (int64_t l = 0; l < count; ++l) dst[l] = static_cast<T>(lanes[l]);
  }
}
#endif

// The lane-packed row products (dense_rows, int4_rows) walk their output in tiles: tasks of up to 4 blocks of
// 16 outputs spread over the threads, rows 4 at a time within each. ``tile.template operator()<R, C>(r, b)``
// computes rows [r, r + R) x blocks [b, b + C). The tile shape never changes a row's arithmetic.
constexpr int64_t TILE_BLOCKS = 4;
constexpr int64_t TILE_ROWS = 4;

template <int R, typename Tile>
inline void tile_blocks(const Tile& tile, int64_t r, int64_t b, int64_t blocks) {
  switch (blocks) {
    case 4: tile.template operator()<R, 4>(r, b); break;
    case 3: tile.template operator()<R, 3>(r, b); break;
    case 2: tile.template operator()<R, 2>(r, b); break;
    default: tile.template operator()<R, 1>(r, b); break;
  }
}

template <typename Tile>
void for_each_tile(int64_t rows, int64_t num_blocks, const Tile& tile) {
  const int64_t tasks = (num_blocks + TILE_BLOCKS - 1) / TILE_BLOCKS;
  at::parallel_for(0, tasks, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t task = lo; task < hi; ++task) {
      const int64_t b = task * TILE_BLOCKS, blocks = std::min(TILE_BLOCKS, num_blocks - b);
      for (int64_t r = 0; r < rows;) {
        switch (std::min<int64_t>(TILE_ROWS, rows - r)) {
          case 4: tile_blocks<4>(tile, r, b, blocks); r += 4; break;
          case 3: tile_blocks<3>(tile, r, b, blocks); r += 3; break;
          case 2: tile_blocks<2>(tile, r, b, blocks); r += 2; break;
          default: tile_blocks<1>(tile, r, b, blocks); r += 1; break;
        }
      }
    }
  });
}

#if defined(__AVX512F__)
// a tile's accumulators (one lane per output) to rows [r, r + R) x blocks [b, b + C) of out (rows of n)
template <int R, int C, typename T>
inline void store_tile(__m512 (&acc)[R][C], T* out, int64_t r, int64_t b, int64_t n) {
  for (int i = 0; i < R; ++i)
    for (int c = 0; c < C; ++c) {
      const int64_t first = (b + c) * 16, count = std::min<int64_t>(16, n - first);
      if (count > 0) store_lanes(out + (r + i) * n + first, acc[i][c], count);
    }
}
#endif

}  // namespace radixgate
