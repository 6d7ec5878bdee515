// Weight-only int4 products for a few rows at a time (generated tokens: decode and verify rows).
//
// int4_rows(x (M, K), q uint8 (n/16, K/32, 16, 16), scale_min (n/16, K/32, 2, 16) float16 or float32, n) -> (M, n)
//   The weight of engine.kernels.cpu.quantized_linear: 4-bit q, one (scale, min) pair of float16 per 32 inputs
//   of an output, w = q * scale + min (GGUF's Q4_1 block: a Q4_1 model's weights come back bit for bit, since
//   q * scale is exact in float32), laid out by pack_int4_lanes (engine.kernels.cpu.row_linear): blocks of 16
//   outputs across the vector lanes; per block and group, 16 input pairs, each 16 bytes (one per output: input
//   2p in the low nibble, 2p + 1 in the high one); then the group's 16 scales and 16 mins. n is padded to a
//   multiple of 16 with zeros. float32 scales and mins carry GGUF's Q4_K blocks exactly
//   (engine.kernels.cpu.gguf_blocks: scale = d * sc and min = -dmin * m, each exact in float32).
//   y_o = sum_g scale_og * (x_g . q_og) + sum_g min_og * sum(x_g), float32, rounded once
//   (bfloat16 rows with the dot-product instruction sum x_g . (128 + q_og) and take 128 scale_og back with
//   the min term: the widened weight is one bit operation away from the packed byte).
//
// Contract: output o of row r is one lane of one accumulator; each group's dot product is summed pair after
// pair (bfloat16 rows: the CPU's bfloat16 dot-product step where it has one; else two multiply-adds), scaled and
// added to it in group order: no horizontal sums and no step that depends on M, the tile or the thread.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include "group_scales.h"
#include "native_common.h"

#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

namespace {

using radixgate::to_float;

constexpr int64_t LANES = 16;
constexpr int64_t GROUP = 32;          // inputs per (scale, min)
constexpr int64_t PAIRS = GROUP / 2;   // input pairs per group
constexpr int64_t GROUP_BYTES = PAIRS * LANES;  // nibble bytes per block and group
#if defined(__AVX512BF16__)
constexpr bool HAS_BF16_DOT = true;
#else
constexpr bool HAS_BF16_DOT = false;
#endif


// rows [r, r + R) x blocks [b, b + C); x: M rows of k inputs; sums: M rows of k / GROUP group sums
template <int R, int C, typename T, typename Scales>
void tile(const T* x, const float* sums, int64_t k, const uint8_t* q, const Scales& sz, int64_t b, int64_t r,
          int64_t n, T* out) {
  const int64_t groups = k / GROUP;
#if defined(RADIXGATE_VEC16)
  using namespace radixgate;
  f32x16 acc[R][C];
  for (int i = 0; i < R; ++i)
    for (int c = 0; c < C; ++c) acc[i][c] = zero16();
  for (int64_t g = 0; g < groups; ++g) {
    f32x16 part[R][C];
    for (int i = 0; i < R; ++i)
      for (int c = 0; c < C; ++c) part[i][c] = zero16();
    for (int64_t p = 0; p < PAIRS; ++p) {
#if defined(__AVX512BF16__)
      if constexpr (std::is_same_v<T, c10::BFloat16>) {
        // the byte (q0 | q1 << 4) -> the bfloat16 pair (128 + q0, 128 + q1): bits 0x4300 | q, exact; the
        // 128 * sum(x_g) this adds is taken back with the min term below
        __m512bh w[C];
        for (int c = 0; c < C; ++c) {
          const __m512i bytes = _mm512_cvtepu8_epi32(_mm_loadu_si128(
              reinterpret_cast<const __m128i*>(q + ((b + c) * groups + g) * GROUP_BYTES + p * LANES)));
          const __m512i nibbles = _mm512_ternarylogic_epi32(bytes, _mm512_slli_epi32(bytes, 12),
                                                            _mm512_set1_epi32(0x000F000F), 0xA8);  // (a | b) & c
          w[c] = (__m512bh)_mm512_or_si512(nibbles, _mm512_set1_epi32(0x43004300));
        }
        for (int i = 0; i < R; ++i) {
          int32_t pair;
          std::memcpy(&pair, x + (r + i) * k + g * GROUP + 2 * p, sizeof(pair));
          const __m512bh xv = (__m512bh)_mm512_set1_epi32(pair);
          for (int c = 0; c < C; ++c) part[i][c] = _mm512_dpbf16_ps(part[i][c], xv, w[c]);
        }
        continue;
      }
#endif
      f32x16 w0[C], w1[C];
      for (int c = 0; c < C; ++c) nibbles16(q + ((b + c) * groups + g) * GROUP_BYTES + p * LANES, w0[c], w1[c]);
      for (int i = 0; i < R; ++i) {
        const f32x16 x0 = set16(to_float(x[(r + i) * k + g * GROUP + 2 * p]));
        const f32x16 x1 = set16(to_float(x[(r + i) * k + g * GROUP + 2 * p + 1]));
        for (int c = 0; c < C; ++c) part[i][c] = fma16(x1, w1[c], fma16(x0, w0[c], part[i][c]));
      }
    }
    for (int c = 0; c < C; ++c) {
      const f32x16 scale = sz.lanes16(b + c, g), min = sz.min16(b + c, g);
      // min, less 128 scale where the weights came as 128 + q (bfloat16 rows)
      const f32x16 low = std::is_same_v<T, c10::BFloat16> && HAS_BF16_DOT ? fnma16(set16(128.0f), scale, min) : min;
      for (int i = 0; i < R; ++i) {
        acc[i][c] = fma16(part[i][c], scale, acc[i][c]);
        acc[i][c] = fma16(low, set16(sums[(r + i) * groups + g]), acc[i][c]);
      }
    }
  }
  radixgate::store_tile<R, C>(acc, out, r, b, n);
#else
  for (int i = 0; i < R; ++i)
    for (int c = 0; c < C; ++c) {
      float acc[LANES] = {0};
      for (int64_t g = 0; g < groups; ++g) {
        const uint8_t* qg = q + ((b + c) * groups + g) * GROUP_BYTES;
        for (int64_t l = 0; l < LANES; ++l) {
          float part = 0.0f;
          for (int64_t p = 0; p < PAIRS; ++p) {
            const uint8_t byte = qg[p * LANES + l];
            part += to_float(x[(r + i) * k + g * GROUP + 2 * p]) * static_cast<float>(byte & 0xF) +
                    to_float(x[(r + i) * k + g * GROUP + 2 * p + 1]) * static_cast<float>(byte >> 4);
          }
          const float scale = sz.scalar(b + c, g, l), min = sz.min_scalar(b + c, g, l);
          acc[l] += part * scale;
          acc[l] += min * sums[(r + i) * groups + g];
        }
      }
      const int64_t first = (b + c) * LANES;
      for (int64_t l = 0; l < LANES && first + l < n; ++l) out[(r + i) * n + first + l] = static_cast<T>(acc[l]);
    }
#endif
}

template <typename T, typename Scales>
void run(const at::Tensor& x, const at::Tensor& q, const Scales& szp, int64_t n, at::Tensor& out) {
  const int64_t m = x.size(0), k = x.size(1), groups = k / GROUP, num_blocks = q.size(0);
  const T* xp = x.data_ptr<T>();
  std::vector<float> sums(m * groups);  // sum(x_g) per row and group, in group_sum32's fixed tree
  for (int64_t i = 0; i < m; ++i)
    for (int64_t g = 0; g < groups; ++g) sums[i * groups + g] = radixgate::group_sum32(xp + i * k + g * GROUP);
  const uint8_t* qp = q.data_ptr<uint8_t>();
  T* op = out.data_ptr<T>();
  radixgate::for_each_tile(m, num_blocks, [&]<int R, int C>(int64_t r, int64_t b) {
    tile<R, C, T, Scales>(xp, sums.data(), k, qp, szp, b, r, n, op);
  });
}

template <typename Scales>
at::Tensor run_any(const at::Tensor& x, const at::Tensor& q, const Scales& scales, int64_t n) {
  at::Tensor out = at::empty({x.size(0), n}, x.options());
  if (x.scalar_type() == at::kFloat) run<float>(x, q, scales, n, out);
  else run<c10::BFloat16>(x, q, scales, n, out);
  return out;
}

void check_rows(const at::Tensor& x, const at::Tensor& q, int64_t n) {
  TORCH_CHECK(x.dim() == 2 && x.is_contiguous(), "x must be contiguous (M, K)");
  TORCH_CHECK(x.scalar_type() == at::kFloat || x.scalar_type() == at::kBFloat16, "x must be float32 or bfloat16");
  const int64_t k = x.size(1), groups = k / GROUP;
  TORCH_CHECK(k % GROUP == 0, "K must be a multiple of ", GROUP);
  TORCH_CHECK(q.scalar_type() == at::kByte && q.is_contiguous() && q.dim() == 4 && q.size(1) == groups &&
              q.size(2) == PAIRS && q.size(3) == LANES, "q must be contiguous uint8 (n/16, K/32, 16, 16)");
  TORCH_CHECK(q.size(0) * LANES >= n && n > (q.size(0) - 1) * LANES, "n does not fit the blocks");
}

}  // namespace

at::Tensor int4_rows(const at::Tensor& x, const at::Tensor& q, const at::Tensor& scale_min, int64_t n) {
  check_rows(x, q, n);
  const int64_t groups = x.size(1) / GROUP;
  const bool is_half = scale_min.scalar_type() == at::kHalf;
  TORCH_CHECK((is_half || scale_min.scalar_type() == at::kFloat) && scale_min.is_contiguous() &&
              scale_min.numel() == q.size(0) * groups * 2 * LANES,
              "scale_min must be float16 or float32 (n/16, K/32, 2, 16)");
  if (is_half) return run_any(x, q, radixgate::Scales<c10::Half, true>{scale_min.data_ptr<c10::Half>(), groups}, n);
  return run_any(x, q, radixgate::Scales<float, true>{scale_min.data_ptr<float>(), groups}, n);
}

// GGUF's Q4_K super-blocks kept as the file has them (group_scales.h): sc_m uint8 (n/16, K/32, 2, 16), each
// group's 6-bit scales then mins; d_dmin float16 (n/16, K/256, 2, 16), each super-block's d then -dmin
at::Tensor int4_super_rows(const at::Tensor& x, const at::Tensor& q, const at::Tensor& sc_m, const at::Tensor& d_dmin,
                           int64_t n) {
  check_rows(x, q, n);
  const int64_t groups = x.size(1) / GROUP;
  TORCH_CHECK(groups % 8 == 0, "K must be a multiple of 256");
  TORCH_CHECK(sc_m.scalar_type() == at::kByte && sc_m.is_contiguous() && sc_m.numel() == q.size(0) * groups * 2 * LANES,
              "sc_m must be uint8 (n/16, K/32, 2, 16)");
  TORCH_CHECK(d_dmin.scalar_type() == at::kHalf && d_dmin.is_contiguous() &&
              d_dmin.numel() == q.size(0) * (groups / 8) * 2 * LANES, "d_dmin must be float16 (n/16, K/256, 2, 16)");
  return run_any(x, q, radixgate::SuperScales<uint8_t, true>{sc_m.data_ptr<uint8_t>(), d_dmin.data_ptr<c10::Half>(),
                                                             groups, 8}, n);
}
