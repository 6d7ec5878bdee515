// The building blocks of chunk_attention.cpp: one chunk of keys laid out for many query rows at once, and
// the register-blocked score and value products over it.
//
// A chunk is up to CHUNK key positions of one sequence for one kv head. lay_out_chunk copies its keys
// transposed (dimension-major, keys across the 16 lanes, so a score is a chain of multiply-adds in dimension
// order) and its values key-major. On AVX512-BF16 with bfloat16 rows (PAIRED) both hold pairs: keys as
// (D/2, CHUNK) dimension pairs, values as (CHUNK/2, D) key pairs, and each product step is one vdpbf16ps.
// Every block computes each query head's lanes from that head's own inputs only, so how many heads a block
// holds never changes a bit.
#pragma once

#include "native_common.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(RADIXGATE_VEC16)
namespace radixgate::chunk {

constexpr int64_t CHUNK = 256;  // key positions per softmax step
#if defined(__AVX512F__)
constexpr int QB = 12;  // query heads per register block: QB accumulators + 1 key vector in 32 registers
#else
constexpr int QB = 6;  // two AVX2 registers per f32x16: 12 + 2 of 16
#endif
#if defined(__AVX512BF16__)
constexpr bool PAIRED = true;
#else
constexpr bool PAIRED = false;
#endif

template <typename T>
constexpr bool paired_for = PAIRED && std::is_same_v<T, c10::BFloat16>;

inline float exp_nonpositive1(float x) {  // exp16_nonpositive on one value (lane 0)
  alignas(64) float lanes[16];
  store16(lanes, exp16_nonpositive(set16(x)));
  return lanes[0];
}

// ---- layout -------------------------------------------------------------------------------------------

inline __m256 load8_bits(const void* p) {  // 8 x 32 bits, moved as they are
  return _mm256_castsi256_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// dst[i * stride + c] = r[c] lane i for an 8 x 8 block of 32-bit values (shuffles only: bits pass unchanged)
inline void store_transposed8(__m256 (&r)[8], float* dst, int64_t stride) {
  __m256 t[8], u[8];
  for (int c = 0; c < 8; c += 2) {
    t[c] = _mm256_unpacklo_ps(r[c], r[c + 1]);
    t[c + 1] = _mm256_unpackhi_ps(r[c], r[c + 1]);
  }
  for (int c = 0; c < 8; c += 4) {
    u[c] = _mm256_shuffle_ps(t[c], t[c + 2], _MM_SHUFFLE(1, 0, 1, 0));
    u[c + 1] = _mm256_shuffle_ps(t[c], t[c + 2], _MM_SHUFFLE(3, 2, 3, 2));
    u[c + 2] = _mm256_shuffle_ps(t[c + 1], t[c + 3], _MM_SHUFFLE(1, 0, 1, 0));
    u[c + 3] = _mm256_shuffle_ps(t[c + 1], t[c + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int i = 0; i < 4; ++i) {
    _mm256_storeu_ps(dst + i * stride, _mm256_permute2f128_ps(u[i], u[i + 4], 0x20));
    _mm256_storeu_ps(dst + (i + 4) * stride, _mm256_permute2f128_ps(u[i], u[i + 4], 0x31));
  }
}

struct Pool {  // one layer of the KV pool for one kv head
  const void *k_cache, *v_cache;
  int64_t n_kv, h, d;
};

// Keys slots[0:nk] laid out in kt, zero padded to nk16 keys: float32 (D, CHUNK), or paired (D/2, CHUNK) of
// uint32 dimension pairs. Values in vf: float32 (nk, D), or paired (ceil(nk/2), D) of uint32 key pairs (the
// even key in the low half; a missing odd key is zero).
template <typename T>
void lay_out_chunk(const Pool& pool, const int64_t* slots, int64_t nk, int64_t nk16, float* kt, float* vf) {
  const int64_t d = pool.d;
  const T* keys = static_cast<const T*>(pool.k_cache);
  const T* values = static_cast<const T*>(pool.v_cache);
  auto row_of = [&](const T* base, int64_t j) { return base + (slots[j] * pool.n_kv + pool.h) * d; };
  constexpr bool paired = paired_for<T>;
  const int64_t cols = paired ? d / 2 : d;  // 32-bit columns per key
  for (int64_t j0 = 0; j0 < nk16; j0 += 8) {
    for (int64_t i0 = 0; i0 < cols; i0 += 8) {
      __m256 r[8];
      for (int c = 0; c < 8; ++c) {
        if (j0 + c >= nk) {
          r[c] = _mm256_setzero_ps();
        } else if constexpr (paired) {
          r[c] = load8_bits(row_of(keys, j0 + c) + 2 * i0);
        } else {
          r[c] = widen8(row_of(keys, j0 + c) + i0);
        }
      }
      store_transposed8(r, kt + i0 * CHUNK + j0, CHUNK);
    }
  }
  if constexpr (paired) {
    const __m256i zero = _mm256_setzero_si256();
    for (int64_t j = 0; j < nk; j += 2) {
      const T* even = row_of(values, j);
      const T* odd = j + 1 < nk ? row_of(values, j + 1) : nullptr;
      auto* dst = reinterpret_cast<uint32_t*>(vf) + (j / 2) * d;
      for (int64_t i = 0; i < d; i += 16) {
        const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(even + i));
        const __m256i b = odd ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(odd + i)) : zero;
        const __m256i lo = _mm256_unpacklo_epi16(a, b), hi = _mm256_unpackhi_epi16(a, b);  // per 128-bit half
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), _mm256_permute2x128_si256(lo, hi, 0x20));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i + 8), _mm256_permute2x128_si256(lo, hi, 0x31));
      }
    }
  } else {
    for (int64_t j = 0; j < nk; ++j)
      for (int64_t i = 0; i < d; i += 16) store16(vf + j * d + i, load16(row_of(values, j) + i));
  }
}

// ---- float32 blocks -----------------------------------------------------------------------------------

// s[q][16 keys] = sum over d of Q[q][d] * Kt[d][16 keys], d in order, for NQ query heads
template <int NQ>
inline void score_block(const float* qf, int64_t d, const float* kt, float* s, int64_t s_stride) {
  f32x16 acc[NQ];
  for (int q = 0; q < NQ; ++q) acc[q] = zero16();
  for (int64_t i = 0; i < d; ++i) {
    const f32x16 k = load16(kt + i * CHUNK);
    for (int q = 0; q < NQ; ++q) acc[q] = fma16(set16(qf[q * d + i]), k, acc[q]);
  }
  for (int q = 0; q < NQ; ++q) store16(s + q * s_stride, acc[q]);
}

// acc[q][16 dims] += sum over keys j < nk of P[q][j] * V[j][16 dims], j in order, for NQ query heads
template <int NQ>
inline void value_block(const float* p, int64_t p_stride, const float* vf, int64_t d, int64_t nk, float* acc,
                        int64_t acc_stride) {
  f32x16 c[NQ];
  for (int q = 0; q < NQ; ++q) c[q] = load16(acc + q * acc_stride);
  for (int64_t j = 0; j < nk; ++j) {
    const f32x16 v = load16(vf + j * d);
    for (int q = 0; q < NQ; ++q) c[q] = fma16(set16(p[q * p_stride + j]), v, c[q]);
  }
  for (int q = 0; q < NQ; ++q) store16(acc + q * acc_stride, c[q]);
}

// nq query heads (rows of qf) against keys [kb, kb + 16) of kt: scores to s (rows of CHUNK)
template <int NQ = QB>
inline void scores_for(int64_t nq, const float* qf, int64_t d, const float* kt, float* s, int64_t kb) {
  if constexpr (NQ > 0) {
    for (; nq >= NQ; nq -= NQ, qf += NQ * d, s += NQ * CHUNK) score_block<NQ>(qf, d, kt + kb, s + kb, CHUNK);
    if (nq > 0) scores_for<NQ - 1>(nq, qf, d, kt, s, kb);
  }
}

// nq query heads' probabilities (rows of p, CHUNK apart) times the values' dims [v, v + 16) into acc (rows of d)
template <int NQ = QB>
inline void values_for(int64_t nq, const float* p, const float* vf, int64_t d, int64_t nk, float* acc) {
  if constexpr (NQ > 0) {
    for (; nq >= NQ; nq -= NQ, p += NQ * CHUNK, acc += NQ * d) value_block<NQ>(p, CHUNK, vf, d, nk, acc, d);
    if (nq > 0) values_for<NQ - 1>(nq, p, vf, d, nk, acc);
  }
}

// ---- paired bfloat16 blocks (AVX512-BF16) -------------------------------------------------------------
#if defined(__AVX512BF16__)
template <int NQ>
inline void score_block_pairs(const uint32_t* q2, int64_t half_d, const uint32_t* kt2, float* s, int64_t s_stride) {
  __m512 acc[NQ];
  for (int q = 0; q < NQ; ++q) acc[q] = _mm512_setzero_ps();
  for (int64_t i = 0; i < half_d; ++i) {
    const __m512bh k = (__m512bh)_mm512_loadu_si512(kt2 + i * CHUNK);
    for (int q = 0; q < NQ; ++q)
      acc[q] = _mm512_dpbf16_ps(acc[q], (__m512bh)_mm512_set1_epi32(static_cast<int32_t>(q2[q * half_d + i])), k);
  }
  for (int q = 0; q < NQ; ++q) _mm512_storeu_ps(s + q * s_stride, acc[q]);
}

template <int NQ>
inline void value_block_pairs(const uint32_t* p2, int64_t p2_stride, const uint32_t* v2, int64_t d, int64_t half_nk,
                              float* acc, int64_t acc_stride) {
  __m512 c[NQ];
  for (int q = 0; q < NQ; ++q) c[q] = _mm512_loadu_ps(acc + q * acc_stride);
  for (int64_t j = 0; j < half_nk; ++j) {
    const __m512bh v = (__m512bh)_mm512_loadu_si512(v2 + j * d);
    for (int q = 0; q < NQ; ++q)
      c[q] = _mm512_dpbf16_ps(c[q], (__m512bh)_mm512_set1_epi32(static_cast<int32_t>(p2[q * p2_stride + j])), v);
  }
  for (int q = 0; q < NQ; ++q) _mm512_storeu_ps(acc + q * acc_stride, c[q]);
}

template <int NQ = QB>
inline void pair_scores_for(int64_t nq, const uint32_t* q2, int64_t half_d, const uint32_t* kt2, float* s, int64_t kb) {
  if constexpr (NQ > 0) {
    for (; nq >= NQ; nq -= NQ, q2 += NQ * half_d, s += NQ * CHUNK)
      score_block_pairs<NQ>(q2, half_d, kt2 + kb, s + kb, CHUNK);
    if (nq > 0) pair_scores_for<NQ - 1>(nq, q2, half_d, kt2, s, kb);
  }
}

template <int NQ = QB>
inline void pair_values_for(int64_t nq, const uint32_t* p2, const uint32_t* v2, int64_t d, int64_t half_nk,
                            float* acc) {
  if constexpr (NQ > 0) {
    for (; nq >= NQ; nq -= NQ, p2 += NQ * (CHUNK / 2), acc += NQ * d)
      value_block_pairs<NQ>(p2, CHUNK / 2, v2, d, half_nk, acc, d);
    if (nq > 0) pair_values_for<NQ - 1>(nq, p2, v2, d, half_nk, acc);
  }
}
// acc[q][all D] += sum over key pairs j < half_nk of P2[q][j] . V2[j][D], j in order, for NQ query heads and
// all NV = D/16 blocks of dims at once (each accumulator's steps are those of value_block_pairs)
template <int NV, int NQ>
inline void value_block_pairs_wide(const uint32_t* p2, const uint32_t* v2, int64_t half_nk, float* acc) {
  constexpr int64_t d = NV * 16;
  __m512 c[NQ][NV];
  for (int q = 0; q < NQ; ++q)
    for (int v = 0; v < NV; ++v) c[q][v] = _mm512_loadu_ps(acc + q * d + v * 16);
  for (int64_t j = 0; j < half_nk; ++j) {
    __m512bh vv[NV];
    for (int v = 0; v < NV; ++v) vv[v] = (__m512bh)_mm512_loadu_si512(v2 + j * d + v * 16);
    for (int q = 0; q < NQ; ++q) {
      const __m512bh p = (__m512bh)_mm512_set1_epi32(static_cast<int32_t>(p2[q * (CHUNK / 2) + j]));
      for (int v = 0; v < NV; ++v) c[q][v] = _mm512_dpbf16_ps(c[q][v], p, vv[v]);
    }
  }
  for (int q = 0; q < NQ; ++q)
    for (int v = 0; v < NV; ++v) _mm512_storeu_ps(acc + q * d + v * 16, c[q][v]);
}

template <int NV, int NQ = std::min(6, (31 - NV) / NV)>
inline void pair_values_wide(int64_t nq, const uint32_t* p2, const uint32_t* v2, int64_t half_nk, float* acc) {
  if constexpr (NQ > 0) {
    for (; nq >= NQ; nq -= NQ, p2 += NQ * (CHUNK / 2), acc += NQ * NV * 16)
      value_block_pairs_wide<NV, NQ>(p2, v2, half_nk, acc);
    if (nq > 0) pair_values_wide<NV, NQ - 1>(nq, p2, v2, half_nk, acc);
  }
}

// nq query heads' bfloat16 probabilities (rows CHUNK/2 pairs apart) times all of the values into acc (rows of
// d); d a multiple of 16
inline void pair_values_all(int64_t nq, const uint32_t* p2, const uint32_t* v2, int64_t d, int64_t half_nk,
                            float* acc) {
  switch (d / 16) {
    case 1: return pair_values_wide<1>(nq, p2, v2, half_nk, acc);
    case 2: return pair_values_wide<2>(nq, p2, v2, half_nk, acc);
    case 3: return pair_values_wide<3>(nq, p2, v2, half_nk, acc);
    case 4: return pair_values_wide<4>(nq, p2, v2, half_nk, acc);
    case 5: return pair_values_wide<5>(nq, p2, v2, half_nk, acc);
    case 6: return pair_values_wide<6>(nq, p2, v2, half_nk, acc);
    case 7: return pair_values_wide<7>(nq, p2, v2, half_nk, acc);
    case 8: return pair_values_wide<8>(nq, p2, v2, half_nk, acc);
    default:
      for (int64_t v = 0; v < d; v += 16) pair_values_for(nq, p2, v2 + v, d, half_nk, acc + v);
  }
}

#endif

}  // namespace radixgate::chunk
#endif
