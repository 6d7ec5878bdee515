// Dense products for a few rows at a time (generated tokens: decode and verify rows), float32 or bfloat16.
//
// dense_rows(x (M, K), packed, n) -> (M, n): y = x . w_o for the weight w (n, K) laid out by pack_lanes
//   (engine.kernels.cpu.row_linear): blocks of 16 outputs, K innermost-but-one, the 16 outputs of a block
//   across the vector lanes — float32 (n/16, K, 16); bfloat16 (n/16, K/2, 16, 2), a pair of inputs per lane
//   (K padded to even, n to a multiple of 16, both with zeros).
//
// Contract: output o of row r is one lane of one accumulator, summed over K in order, rounded once to x's
// dtype. float32 sums slices of FLOAT_SLICE inputs, each its own chain, added in order (a chain's rounding
// error grows with its length); bfloat16 adds pairs of inputs per step (the CPU's dot-product instruction
// where it has one). No horizontal reduction, and no step depends on M, on the tile a row or output lands
// in, or on the thread: a row's bits never depend on its batch. Each block of weights is read once per call
// for all rows, so a lone decode row costs one pass over the weight at memory speed, where a matmul library
// pays its per-call set-up.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include "native_common.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

namespace {

using radixgate::to_float;

constexpr int64_t LANES = 16;      // outputs per block
constexpr int64_t FLOAT_SLICE = 256;  // float32: inputs per partial sum (partials added in order)


// rows [r, r + R) x blocks [b, b + C) of 16 outputs; x holds M rows of kpad inputs (bfloat16: kpad even)
template <int R, int C, typename T>
void tile(const T* x, int64_t kpad, const T* packed, int64_t b, int64_t r, int64_t n, T* out) {
  const int64_t block_stride = kpad * LANES;  // elements per block of the packed weight
#if defined(RADIXGATE_VEC16)
  using namespace radixgate;
  f32x16 acc[R][C];
  for (int i = 0; i < R; ++i)
    for (int c = 0; c < C; ++c) acc[i][c] = zero16();
  if constexpr (std::is_same_v<T, float>) {
    add_sliced_products<R, C>(acc, x, kpad, packed, block_stride, b, r, FLOAT_SLICE);
  } else {
#if defined(__AVX512BF16__)
    for (int64_t k = 0; k < kpad; k += 2) {
      __m512bh w[C];
      for (int c = 0; c < C; ++c)
        w[c] = (__m512bh)_mm512_loadu_si512(packed + (b + c) * block_stride + k * LANES);
      for (int i = 0; i < R; ++i) {
        int32_t pair;
        std::memcpy(&pair, x + (r + i) * kpad + k, sizeof(pair));
        const __m512bh xv = (__m512bh)_mm512_set1_epi32(pair);
        for (int c = 0; c < C; ++c) acc[i][c] = _mm512_dpbf16_ps(acc[i][c], xv, w[c]);
      }
    }
#else
    for (int64_t k = 0; k < kpad; k += 2) {  // the same pairs, widened: (x0 w0 + x1 w1) added per step
      f32x16 w0[C], w1[C];
      for (int c = 0; c < C; ++c) widen_pairs16(packed + (b + c) * block_stride + k * LANES, w0[c], w1[c]);
      for (int i = 0; i < R; ++i) {
        const f32x16 x0 = set16(to_float(x[(r + i) * kpad + k]));
        const f32x16 x1 = set16(to_float(x[(r + i) * kpad + k + 1]));
        for (int c = 0; c < C; ++c) acc[i][c] = add16(acc[i][c], fma16(x1, w1[c], mul16(x0, w0[c])));
      }
    }
#endif
  }
  radixgate::store_tile<R, C>(acc, out, r, b, n);
#else
  for (int i = 0; i < R; ++i)
    for (int c = 0; c < C; ++c) {
      float acc[LANES] = {0};
      const T* w = packed + (b + c) * block_stride;
      if constexpr (std::is_same_v<T, float>) {
        for (int64_t k0 = 0; k0 < kpad; k0 += FLOAT_SLICE) {
          float part[LANES] = {0};
          for (int64_t k = k0; k < std::min(kpad, k0 + FLOAT_SLICE); ++k)
            for (int64_t l = 0; l < LANES; ++l) part[l] += x[(r + i) * kpad + k] * w[k * LANES + l];
          for (int64_t l = 0; l < LANES; ++l) acc[l] += part[l];
        }
      } else {
        for (int64_t k = 0; k < kpad; k += 2)
          for (int64_t l = 0; l < LANES; ++l)
            acc[l] += to_float(x[(r + i) * kpad + k]) * to_float(w[k * LANES + 2 * l]) +
                      to_float(x[(r + i) * kpad + k + 1]) * to_float(w[k * LANES + 2 * l + 1]);
      }
      const int64_t first = (b + c) * LANES;
      for (int64_t l = 0; l < LANES && first + l < n; ++l) out[(r + i) * n + first + l] = static_cast<T>(acc[l]);
    }
#endif
}

template <typename T>
void run(const at::Tensor& x, const at::Tensor& packed, int64_t n, at::Tensor& out) {
  const int64_t m = x.size(0), k = x.size(1), kpad = packed.size(1) * (std::is_same_v<T, float> ? 1 : 2);
  const int64_t num_blocks = packed.size(0);
  std::vector<T> xs(m * kpad, static_cast<T>(0.0f));  // rows padded to kpad inputs
  for (int64_t i = 0; i < m; ++i) std::memcpy(xs.data() + i * kpad, x.data_ptr<T>() + i * k, k * sizeof(T));
  const T* pp = packed.data_ptr<T>();
  T* op = out.data_ptr<T>();
  radixgate::for_each_tile(m, num_blocks, [&]<int R, int C>(int64_t r, int64_t b) {
    tile<R, C, T>(xs.data(), kpad, pp, b, r, n, op);
  });
}

}  // namespace

at::Tensor dense_rows(const at::Tensor& x, const at::Tensor& packed, int64_t n) {
  TORCH_CHECK(x.dim() == 2 && x.is_contiguous(), "x must be contiguous (M, K)");
  TORCH_CHECK(x.scalar_type() == packed.scalar_type() && packed.is_contiguous() && packed.dim() == 3,
              "packed must be contiguous and in x's dtype");
  const bool is_float = x.scalar_type() == at::kFloat;
  TORCH_CHECK(is_float || x.scalar_type() == at::kBFloat16, "dense_rows takes float32 or bfloat16");
  const int64_t kpad = packed.size(1) * (is_float ? 1 : 2);
  TORCH_CHECK(packed.size(2) == (is_float ? LANES : 2 * LANES) && x.size(1) <= kpad && kpad - x.size(1) < 2 &&
              packed.size(0) * LANES >= n && n > (packed.size(0) - 1) * LANES, "packed does not fit x and n");
  at::Tensor out = at::empty({x.size(0), n}, x.options());
  if (is_float) {
    run<float>(x, packed, n, out);
  } else {
    run<c10::BFloat16>(x, packed, n, out);
  }
  return out;
}
