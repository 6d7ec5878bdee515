// The walk shared by the byte dot-product row kernels (int4_dot_rows, int8_dot_rows): rows quantized to int8
// per group of 32 inputs (int8_activations.h) times lane-packed integer weights, 16 outputs per block.
//
// A weight format W gives, per block and group of 32 inputs (W::GROUP_BYTES bytes at q + (block * groups +
// group) * W::GROUP_BYTES): W::dot8<R>(qg, h, x8, row_stride, dots), the exact int32 dot products of lanes
// [8h, 8h + 8) with each of R rows' 32 int8 activations (AVX2; the weight read once for the R rows), and
// W::lane_dot(qg, l, x8), lane l's with one row (the scalar fallback). Its float16 (or float32: GGUF's Q4_K
// blocks, engine.kernels.cpu.gguf_blocks) scales follow the layout (blocks, groups, W::HAS_MIN ? 2 : 1, 16): the group's 16 scales, then its 16 mins.
//   y_o = sum_g [ float(dot_og) * (scale_og * d_g) + min_og * sums_g ]   (sums_g = d_g * sum(x8); no min term
//   without HAS_MIN)
// each term added by a fused multiply-add in group order: lane-wise, the same steps on either path, so a
// row's bits depend on that row only, never on M, the tile or the thread.
#pragma once

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include "group_scales.h"
#include "int8_activations.h"
#include "native_common.h"

#include <cmath>
#include <cstdint>

#if defined(RADIXGATE_VEC16) && defined(__AVX2__)
#define RADIXGATE_DOT_VEC 1  // 8 lanes per AVX register
#endif

namespace radixgate {

constexpr int64_t DOT_LANES = 16;

// rows [r, r + R) x blocks [b, b + C)
template <typename W, int R, int C, typename T, typename Scales>
void dot_tile(const Int8Rows& rows, int64_t k, const uint8_t* q, const Scales& scales, int64_t b, int64_t r,
              int64_t n, T* out) {
  const int64_t groups = k / ACTIVATION_GROUP;
  for (int c = 0; c < C; ++c) {
    for (int64_t h = 0; h < 2; ++h) {  // lanes [8h, 8h + 8)
      float acc[R][8] = {};
#if defined(RADIXGATE_DOT_VEC)
      __m256 accv[R];
      for (int i = 0; i < R; ++i) accv[i] = _mm256_setzero_ps();
#endif
      for (int64_t g = 0; g < groups; ++g) {
        const uint8_t* qg = q + ((b + c) * groups + g) * W::GROUP_BYTES;
#if defined(RADIXGATE_DOT_VEC)
        const __m256 scale = scales.lanes8(b + c, g, h);
        __m256i dots[R];
        W::template dot8<R>(qg, h, rows.x8.data() + r * k + g * ACTIVATION_GROUP, k, dots);
        for (int i = 0; i < R; ++i) {
          const int64_t row = (r + i) * groups + g;
          const __m256 dot = _mm256_cvtepi32_ps(dots[i]);
          accv[i] = _mm256_fmadd_ps(dot, _mm256_mul_ps(scale, _mm256_set1_ps(rows.d[row])), accv[i]);
          if constexpr (W::HAS_MIN) accv[i] = _mm256_fmadd_ps(scales.min8(b + c, g, h), _mm256_set1_ps(rows.sums[row]),
                                                              accv[i]);
        }
#else
        for (int i = 0; i < R; ++i) {
          const int64_t row = (r + i) * groups + g;
          for (int l = 0; l < 8; ++l) {
            const int32_t dot = W::lane_dot(qg, 8 * h + l, rows.x8.data() + (r + i) * k + g * ACTIVATION_GROUP);
            acc[i][l] = std::fma(static_cast<float>(dot), scales.scalar(b + c, g, 8 * h + l) * rows.d[row], acc[i][l]);
            if constexpr (W::HAS_MIN) acc[i][l] = std::fma(scales.min_scalar(b + c, g, 8 * h + l), rows.sums[row], acc[i][l]);
          }
        }
#endif
      }
#if defined(RADIXGATE_DOT_VEC)
      for (int i = 0; i < R; ++i) _mm256_storeu_ps(acc[i], accv[i]);
#endif
      const int64_t first = (b + c) * DOT_LANES + 8 * h;
      for (int i = 0; i < R; ++i)
        for (int64_t l = 0; l < 8 && first + l < n; ++l) out[(r + i) * n + first + l] = static_cast<T>(acc[i][l]);
    }
  }
}

// out (M, n) = the rows of x (M, K) times the weight: quantizes x, then walks the tiles over the threads
template <typename W, typename Scales>
at::Tensor dot_rows(const at::Tensor& x, const at::Tensor& q, const Scales& sp, int64_t n) {
  at::Tensor out = at::empty({x.size(0), n}, x.options());
  const int64_t m = x.size(0), k = x.size(1), num_blocks = q.size(0);
  const uint8_t* qp = reinterpret_cast<const uint8_t*>(q.data_ptr());
  auto walk = [&]<typename T>(const T* xp, T* op) {
    const Int8Rows rows = quantize_rows(xp, m, k);
    // 4 rows a tile on either backend: a row costs a few registers here, and the unpacked weight is shared
    for_each_tile<4>(m, num_blocks, [&]<int R, int C>(int64_t r, int64_t b) {
      dot_tile<W, R, C, T, Scales>(rows, k, qp, sp, b, r, n, op);
    });
  };
  if (x.scalar_type() == at::kFloat) {
    walk(x.data_ptr<float>(), out.data_ptr<float>());
  } else {
    walk(x.data_ptr<c10::BFloat16>(), out.data_ptr<c10::BFloat16>());
  }
  return out;
}

}  // namespace radixgate
