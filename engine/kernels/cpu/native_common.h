// Helpers shared by radixgate's native CPU kernels (engine.kernels.cpu.native builds them).
#pragma once

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <algorithm>

#include <cstdint>
#include <cstring>
#include <type_traits>

#if (defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))) && defined(__F16C__)
#define RADIXGATE_VEC16 1  // f32x16 below: one AVX-512 register, or two AVX2 ones
#include <immintrin.h>
#endif

namespace radixgate {

// The checks every attention kernel makes of its query rows and its pool layer: q (N, H, D) with a dense
// head_dim, k/v (S, KVH, D) contiguous, one dtype, H a multiple of KVH.
inline void check_attention_inputs(const at::Tensor& q, const at::Tensor& k_cache, const at::Tensor& v_cache) {
  TORCH_CHECK(q.dim() == 3 && k_cache.dim() == 3 && v_cache.sizes() == k_cache.sizes(), "bad shapes");
  TORCH_CHECK(q.stride(2) == 1 && k_cache.is_contiguous() && v_cache.is_contiguous(),
              "the pool must be contiguous and q's head_dim dense");
  TORCH_CHECK(q.scalar_type() == k_cache.scalar_type() && v_cache.scalar_type() == k_cache.scalar_type(),
              "q and the pool must share a dtype");
  TORCH_CHECK(q.size(2) == k_cache.size(2) && q.size(1) % k_cache.size(1) == 0, "head shapes do not match");
}

// every slot of a (contiguous int64) slot list names a row of the pool; one pass, no per-slot calls
inline void check_slots_in_pool(const int64_t* slots, int64_t n, const at::Tensor& k_cache) {
  const int64_t pool_slots = k_cache.size(0);
  for (int64_t i = 0; i < n; ++i)
    TORCH_CHECK(0 <= slots[i] && slots[i] < pool_slots, "slot ", slots[i], " is outside the pool");
}

inline float to_float(float v) { return v; }
inline float to_float(c10::BFloat16 v) {  // exact: a bfloat16 is the top half of a float32
  const uint32_t bits = static_cast<uint32_t>(v.x) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}
inline float to_float(c10::Half v) { return static_cast<float>(v); }  // exact

// The float32 sum of 32 values in a fixed tree: value l plus value l + 16, then halves of what is left (the
// min term of int4_rows, which must not depend on how a row is tiled)
template <typename T>
inline float group_sum32(const T* x) {
  float lanes[16];
  for (int l = 0; l < 16; ++l) lanes[l] = to_float(x[l]) + to_float(x[l + 16]);
  for (int width = 8; width > 0; width /= 2)
    for (int l = 0; l < width; ++l) lanes[l] += lanes[l + width];
  return lanes[0];
}

#if defined(RADIXGATE_VEC16)
// f32x16: 16 float32 lanes, the width every kernel's lane-wise arithmetic is written for. Each helper does the
// same lane-wise operation on either backend, so a kernel's bits depend on its own order of operations only;
// the horizontal sums (reduce_add16, reduce_max16) are fixed trees on each backend.
// 8 lanes (one AVX register, on either backend): float32 as they are, bfloat16 widened exactly
inline __m256 widen8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 widen8(const c10::BFloat16* p) {
  const __m128i half = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(half), 16));
}
inline __m256 widen8(const c10::Half* p) {  // exact (F16C)
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline __m256 widen8(const uint8_t* p) {  // exact
  return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}
#if defined(__AVX512F__)
using f32x16 = __m512;
inline f32x16 zero16() { return _mm512_setzero_ps(); }
inline f32x16 set16(float v) { return _mm512_set1_ps(v); }
inline f32x16 load16(const float* p) { return _mm512_loadu_ps(p); }
inline f32x16 load16(const c10::BFloat16* p) {  // exact widening
  const __m256i half = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(half), 16));
}
inline f32x16 load16(const c10::Half* p) {  // exact widening
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
inline f32x16 load16(const int8_t* p) {  // exact widening
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}
inline f32x16 load16(const uint8_t* p) {  // exact widening
  return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}
inline void store16(float* p, f32x16 v) { _mm512_storeu_ps(p, v); }
inline f32x16 add16(f32x16 a, f32x16 b) { return _mm512_add_ps(a, b); }
inline f32x16 sub16(f32x16 a, f32x16 b) { return _mm512_sub_ps(a, b); }
inline f32x16 mul16(f32x16 a, f32x16 b) { return _mm512_mul_ps(a, b); }
inline f32x16 max16(f32x16 a, f32x16 b) { return _mm512_max_ps(a, b); }
inline f32x16 min16(f32x16 a, f32x16 b) { return _mm512_min_ps(a, b); }
inline f32x16 div16(f32x16 a, f32x16 b) { return _mm512_div_ps(a, b); }
// 16 lanes to bfloat16, each rounded to nearest even as c10::BFloat16 rounds one float (NaN -> 0x7FC0)
inline void store16(c10::BFloat16* p, f32x16 v) {
  const __m512i bits = _mm512_castps_si512(v);
  const __m512i bias = _mm512_add_epi32(_mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1)),
                                        _mm512_set1_epi32(0x7FFF));
  __m512i half = _mm512_srli_epi32(_mm512_add_epi32(bits, bias), 16);
  half = _mm512_mask_mov_epi32(half, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), _mm512_set1_epi32(0x7FC0));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtepi32_epi16(half));
}
inline f32x16 fma16(f32x16 a, f32x16 b, f32x16 c) { return _mm512_fmadd_ps(a, b, c); }     // a b + c
inline f32x16 fnma16(f32x16 a, f32x16 b, f32x16 c) { return _mm512_fnmadd_ps(a, b, c); }   // c - a b
inline float reduce_add16(f32x16 v) { return _mm512_reduce_add_ps(v); }
inline float reduce_max16(f32x16 v) { return _mm512_reduce_max_ps(v); }
// 16 pairs of bfloat16 (32 values, pair l = lane l): the first and the second of each pair, widened
inline void widen_pairs16(const c10::BFloat16* p, f32x16& first, f32x16& second) {
  const __m512i raw = _mm512_loadu_si512(p);
  first = _mm512_castsi512_ps(_mm512_slli_epi32(raw, 16));
  second = _mm512_castsi512_ps(_mm512_and_si512(raw, _mm512_set1_epi32(static_cast<int32_t>(0xFFFF0000u))));
}
// 16 bytes (byte l = lane l): the low and the high nibble of each, as floats
inline void nibbles16(const uint8_t* p, f32x16& low, f32x16& high) {
  const __m512i bytes = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  low = _mm512_cvtepi32_ps(_mm512_and_si512(bytes, _mm512_set1_epi32(0xF)));
  high = _mm512_cvtepi32_ps(_mm512_srli_epi32(bytes, 4));
}
// 2^n for integral float lanes n (in the normal range)
inline f32x16 pow2_16(f32x16 n) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23));
}
inline f32x16 floor16(f32x16 v) { return _mm512_roundscale_ps(v, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC); }
#else
struct f32x16 {
  __m256 lo, hi;
};
inline f32x16 zero16() { return {_mm256_setzero_ps(), _mm256_setzero_ps()}; }
inline f32x16 set16(float v) { return {_mm256_set1_ps(v), _mm256_set1_ps(v)}; }
inline f32x16 load16(const float* p) { return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
inline f32x16 load16(const c10::BFloat16* p) { return {widen8(p), widen8(p + 8)}; }
inline f32x16 load16(const c10::Half* p) { return {widen8(p), widen8(p + 8)}; }
inline __m256 widen8(const int8_t* p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}
inline f32x16 load16(const int8_t* p) { return {widen8(p), widen8(p + 8)}; }
inline f32x16 load16(const uint8_t* p) { return {widen8(p), widen8(p + 8)}; }
inline void store16(float* p, f32x16 v) {
  _mm256_storeu_ps(p, v.lo);
  _mm256_storeu_ps(p + 8, v.hi);
}
inline f32x16 add16(f32x16 a, f32x16 b) { return {_mm256_add_ps(a.lo, b.lo), _mm256_add_ps(a.hi, b.hi)}; }
inline f32x16 sub16(f32x16 a, f32x16 b) { return {_mm256_sub_ps(a.lo, b.lo), _mm256_sub_ps(a.hi, b.hi)}; }
inline f32x16 mul16(f32x16 a, f32x16 b) { return {_mm256_mul_ps(a.lo, b.lo), _mm256_mul_ps(a.hi, b.hi)}; }
inline f32x16 max16(f32x16 a, f32x16 b) { return {_mm256_max_ps(a.lo, b.lo), _mm256_max_ps(a.hi, b.hi)}; }
inline f32x16 min16(f32x16 a, f32x16 b) { return {_mm256_min_ps(a.lo, b.lo), _mm256_min_ps(a.hi, b.hi)}; }
inline f32x16 div16(f32x16 a, f32x16 b) { return {_mm256_div_ps(a.lo, b.lo), _mm256_div_ps(a.hi, b.hi)}; }
inline __m256i bf16_bits8(__m256 v) {  // round to nearest even as c10::BFloat16 does (NaN -> 0x7FC0), in 32-bit lanes
  const __m256i bits = _mm256_castps_si256(v);
  const __m256i bias = _mm256_add_epi32(_mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1)),
                                        _mm256_set1_epi32(0x7FFF));
  const __m256i half = _mm256_srli_epi32(_mm256_add_epi32(bits, bias), 16);
  return _mm256_blendv_epi8(half, _mm256_set1_epi32(0x7FC0), _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)));
}
inline void store16(c10::BFloat16* p, f32x16 v) {
  const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(bf16_bits8(v.lo), bf16_bits8(v.hi)), 0xD8);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), packed);
}
inline f32x16 fma16(f32x16 a, f32x16 b, f32x16 c) {
  return {_mm256_fmadd_ps(a.lo, b.lo, c.lo), _mm256_fmadd_ps(a.hi, b.hi, c.hi)};
}
inline f32x16 fnma16(f32x16 a, f32x16 b, f32x16 c) {
  return {_mm256_fnmadd_ps(a.lo, b.lo, c.lo), _mm256_fnmadd_ps(a.hi, b.hi, c.hi)};
}
inline float reduce_add16(f32x16 v) {  // lanes l + (l + 8), then halves of what is left: a fixed tree
  __m256 s = _mm256_add_ps(v.lo, v.hi);
  __m128 h = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
  h = _mm_add_ps(h, _mm_movehl_ps(h, h));
  h = _mm_add_ss(h, _mm_movehdup_ps(h));
  return _mm_cvtss_f32(h);
}
inline float reduce_max16(f32x16 v) {
  __m256 s = _mm256_max_ps(v.lo, v.hi);
  __m128 h = _mm_max_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
  h = _mm_max_ps(h, _mm_movehl_ps(h, h));
  h = _mm_max_ss(h, _mm_movehdup_ps(h));
  return _mm_cvtss_f32(h);
}
inline void widen_pairs16(const c10::BFloat16* p, f32x16& first, f32x16& second) {
  const __m256i mask = _mm256_set1_epi32(static_cast<int32_t>(0xFFFF0000u));
  const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  const __m256i hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 16));
  first = {_mm256_castsi256_ps(_mm256_slli_epi32(lo, 16)), _mm256_castsi256_ps(_mm256_slli_epi32(hi, 16))};
  second = {_mm256_castsi256_ps(_mm256_and_si256(lo, mask)), _mm256_castsi256_ps(_mm256_and_si256(hi, mask))};
}
inline void nibbles16(const uint8_t* p, f32x16& low, f32x16& high) {
  const __m256i nib = _mm256_set1_epi32(0xF);
  const __m256i a = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  const __m256i b = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 8)));
  low = {_mm256_cvtepi32_ps(_mm256_and_si256(a, nib)), _mm256_cvtepi32_ps(_mm256_and_si256(b, nib))};
  high = {_mm256_cvtepi32_ps(_mm256_srli_epi32(a, 4)), _mm256_cvtepi32_ps(_mm256_srli_epi32(b, 4))};
}
inline __m256 pow2_8(__m256 n) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23));
}
inline f32x16 pow2_16(f32x16 n) { return {pow2_8(n.lo), pow2_8(n.hi)}; }
inline f32x16 floor16(f32x16 v) { return {_mm256_floor_ps(v.lo), _mm256_floor_ps(v.hi)}; }
#endif

// the first ``count`` (0..16) lanes of p, the others ``fill``
inline f32x16 load_first16(const float* p, int64_t count, float fill) {
  alignas(64) float lanes[16];
  for (int64_t l = 0; l < 16; ++l) lanes[l] = l < count ? p[l] : fill;
  return load16(lanes);
}

// v with lanes from ``count`` on set to zero
inline f32x16 keep_first16(f32x16 v, int64_t count) {
  alignas(64) float lanes[16];
  store16(lanes, v);
  for (int64_t l = count; l < 16; ++l) lanes[l] = 0.0f;
  return load16(lanes);
}

// exp(x) for lanes x <= 0 (scores minus their max), float32, ~2 ulp (decode_attention.cpp's exp_nonpositive,
// the same steps on 16 lanes)
inline f32x16 exp16_nonpositive(f32x16 x) {
  x = max16(x, set16(-87.0f));
  const f32x16 n = floor16(fma16(x, set16(1.44269504088896341f), set16(0.5f)));
  const f32x16 r = fma16(n, set16(2.12194440e-4f), fnma16(n, set16(0.693359375f), x));
  f32x16 p = set16(1.9875691500e-4f);
  p = fma16(p, r, set16(1.3981999507e-3f));
  p = fma16(p, r, set16(8.3334519073e-3f));
  p = fma16(p, r, set16(4.1665795894e-2f));
  p = fma16(p, r, set16(1.6666665459e-1f));
  p = fma16(p, r, set16(5.0000001201e-1f));
  p = fma16(mul16(p, r), r, add16(r, set16(1.0f)));
  return mul16(p, pow2_16(n));
}

// exp(x) for lanes of any sign, float32, ~2 ulp: x clamped to [-87, 88], where the steps above hold either way
inline f32x16 exp16(f32x16 x) { return exp16_nonpositive(min16(x, set16(88.0f))); }

// the first ``count`` (1..16) float32 lanes of ``acc`` to dst, each rounded once to T
template <typename T>
inline void store_lanes(T* dst, f32x16 acc, int64_t count) {
  if constexpr (std::is_same_v<T, float>) {
    if (count == 16) {
      store16(dst, acc);
      return;
    }
  }
  alignas(64) float lanes[16];
  store16(lanes, acc);
  for (int64_t l = 0; l < count; ++l) dst[l] = static_cast<T>(lanes[l]);
}
#endif

// The lane-packed row products (dense_rows, int4_rows) walk their output in tiles: tasks of up to
// TILE_BLOCKS blocks of 16 outputs spread over the threads, rows TILE_ROWS at a time within each.
// ``tile.template operator()<R, C>(r, b)`` computes rows [r, r + R) x blocks [b, b + C). The tile shape never
// changes a row's arithmetic. AVX2 has half the registers of AVX-512 at half the width, so its tiles are
// 2 x 2 (the accumulators stay in registers).
#if defined(__AVX512F__) || !defined(RADIXGATE_VEC16)
constexpr int64_t TILE_BLOCKS = 4;
constexpr int64_t TILE_ROWS = 4;
#else
constexpr int64_t TILE_BLOCKS = 2;
constexpr int64_t TILE_ROWS = 2;
#endif

template <int R, typename Tile>
inline void tile_blocks(const Tile& tile, int64_t r, int64_t b, int64_t blocks) {
  switch (blocks) {
    case 4: tile.template operator()<R, 4>(r, b); break;
    case 3: tile.template operator()<R, 3>(r, b); break;
    case 2: tile.template operator()<R, 2>(r, b); break;
    default: tile.template operator()<R, 1>(r, b); break;
  }
}

// MAX_ROWS (1..4): rows per tile where a kernel's registers allow more than TILE_ROWS
template <int64_t MAX_ROWS = TILE_ROWS, typename Tile>
void for_each_tile(int64_t rows, int64_t num_blocks, const Tile& tile) {
  static_assert(1 <= MAX_ROWS && MAX_ROWS <= 4, "tiles hold 1 to 4 rows");
  const int64_t tasks = (num_blocks + TILE_BLOCKS - 1) / TILE_BLOCKS;
  at::parallel_for(0, tasks, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t task = lo; task < hi; ++task) {
      const int64_t b = task * TILE_BLOCKS, blocks = std::min(TILE_BLOCKS, num_blocks - b);
      for (int64_t r = 0; r < rows;) {
        switch (std::min<int64_t>(MAX_ROWS, rows - r)) {
          case 4: tile_blocks<4>(tile, r, b, blocks); r += 4; break;
          case 3: tile_blocks<3>(tile, r, b, blocks); r += 3; break;
          case 2: tile_blocks<2>(tile, r, b, blocks); r += 2; break;
          default: tile_blocks<1>(tile, r, b, blocks); r += 1; break;
        }
      }
    }
  });
}

#if defined(RADIXGATE_VEC16)
// acc[i][c] += the float32 products of rows [r, r + R) of x (rows of k inputs) with blocks [b, b + C) of a
// lane-packed weight W (float32 or int8; block c's input j at w + (b + c) * block_stride + 16 j), each summed
// in slices of ``slice`` inputs, the slices added in order (a chain's rounding error grows with its length).
// With ``scales`` (group_scales.h: ``scales.lanes16(block, t)`` the 16 scales of block's slice t), each slice's
// sum is multiplied by its scales as it is added (one fused multiply-add). x: float32, or bfloat16 widened
// exactly.
struct NoScales {
  static constexpr bool ANY = false;
  f32x16 lanes16(int64_t, int64_t) const { return zero16(); }
};
template <int R, int C, typename W, typename X = float, typename Scales = NoScales>
inline void add_sliced_products(f32x16 (&acc)[R][C], const X* x, int64_t k, const W* w, int64_t block_stride,
                                int64_t b, int64_t r, int64_t slice, const Scales& scales = Scales{}) {
  for (int64_t k0 = 0; k0 < k; k0 += slice) {
    f32x16 part[R][C];
    for (int i = 0; i < R; ++i)
      for (int c = 0; c < C; ++c) part[i][c] = zero16();
    for (int64_t j = k0; j < std::min(k, k0 + slice); ++j) {
      f32x16 wv[C];
      for (int c = 0; c < C; ++c) wv[c] = load16(w + (b + c) * block_stride + j * 16);
      for (int i = 0; i < R; ++i) {
        const f32x16 xv = set16(to_float(x[(r + i) * k + j]));
        for (int c = 0; c < C; ++c) part[i][c] = fma16(xv, wv[c], part[i][c]);
      }
    }
    for (int c = 0; c < C; ++c) {
      if constexpr (Scales::ANY) {
        const f32x16 sv = scales.lanes16(b + c, k0 / slice);
        for (int i = 0; i < R; ++i) acc[i][c] = fma16(part[i][c], sv, acc[i][c]);
      } else {
        for (int i = 0; i < R; ++i) acc[i][c] = add16(acc[i][c], part[i][c]);
      }
    }
  }
}

// a tile's accumulators (one lane per output) to rows [r, r + R) x blocks [b, b + C) of out (rows of n)
template <int R, int C, typename T>
inline void store_tile(f32x16 (&acc)[R][C], T* out, int64_t r, int64_t b, int64_t n) {
  for (int i = 0; i < R; ++i)
    for (int c = 0; c < C; ++c) {
      const int64_t first = (b + c) * 16, count = std::min<int64_t>(16, n - first);
      if (count > 0) store_lanes(out + (r + i) * n + first, acc[i][c], count);
    }
}
#endif

}  // namespace radixgate
