// Causal attention of prompt rows over the paged KV pool: many query rows of one sequence at a time.
//
// prompt_attention(q, k_cache, v_cache, seq_slots, seq_begins, row_seqs, row_ends, scale) -> (N, H * D)
//   q           (N, H, D)   one row per prompt token, float32 or bfloat16 (any row and head strides)
//   k/v         (S, KVH, D) one pool layer, slot-indexed, q's dtype
//   seq_slots   (M,) int64  the key slots of every sequence, concatenated; sequence s starts at seq_begins[s]
//   row_seqs    (N,) int64  the sequence of each row; a sequence's rows are consecutive, in position order
//   row_ends    (N,) int64  row n attends the first row_ends[n] keys of its sequence (position + 1 when causal)
//
// Contract: a row's result depends only on its query and its keys, never on the rows around it. A row walks
// its keys in chunks of CHUNK positions from its sequence's first key; per chunk its scores are float32 dot
// products over head_dim in dimension order (keys across the 16 lanes), its probabilities exp(s - running max),
// and its running (max, sum, values) are rescaled and extended chunk after chunk. Rows are processed in tiles
// that share each chunk's keys (transposed once, then every row's scores are plain multiply-adds); a row that
// sees fewer keys than the tile's longest gets probability exactly 0 for the rest, which adds exactly nothing
// (its value sums start at +0 and never become -0; the one exception would be a value sum in the denormal
// range, which vdpbf16ps flushes to zero on every step). So the bits do not depend on the tile, the batch, the
// thread count or whether the keys were cached: a prompt's rows get the same bits alone, in chunks, or as
// suffixes behind a cached prefix. Scores, probabilities and value sums stay float32; the output is rounded
// once to q's dtype.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include "native_common.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <vector>

#if defined(RADIXGATE_VEC16)
namespace {

using namespace radixgate;

constexpr int64_t CHUNK = 256;     // key positions per softmax step
constexpr int64_t TILE_ROWS = 32;  // query rows (tokens) per task
#if defined(__AVX512F__)
constexpr int QB = 12;  // query heads per register block: QB accumulators + 1 key vector in 32 registers
#else
constexpr int QB = 6;  // two AVX2 registers per f32x16: 12 + 2 of 16
#endif

inline float exp_nonpositive1(float x) {  // exp16_nonpositive on one value (lane 0)
  alignas(64) float lanes[16];
  store16(lanes, exp16_nonpositive(set16(x)));
  return lanes[0];
}

struct Tile {
  int64_t seq, first_row, num_rows, cost;
};

// C[q] (16 keys) = sum over d of Q[q][d] * Kt[d][16 keys], d in order, for NQ query heads
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

template <int NQ = QB>
inline void scores_for(int64_t nq, const float* qf, int64_t d, const float* kt, float* s, int64_t kb) {
  if constexpr (NQ > 0) {
    if (nq >= NQ) {
      for (; nq >= NQ; nq -= NQ, qf += NQ * d, s += NQ * CHUNK) score_block<NQ>(qf, d, kt + kb, s + kb, CHUNK);
    }
    if (nq > 0) scores_for<NQ - 1>(nq, qf, d, kt, s, kb);
  }
}

template <int NQ = QB>
inline void values_for(int64_t nq, const float* p, const float* vf, int64_t d, int64_t nk, float* acc) {
  if constexpr (NQ > 0) {
    if (nq >= NQ) {
      for (; nq >= NQ; nq -= NQ, p += NQ * CHUNK, acc += NQ * d) value_block<NQ>(p, CHUNK, vf, d, nk, acc, d);
    }
    if (nq > 0) values_for<NQ - 1>(nq, p, vf, d, nk, acc);
  }
}

#if defined(__AVX512BF16__)
// bfloat16 rows on AVX512-BF16: the same blocks with pairs of bfloat16 per dot step (float32 sums), twice the
// multiply-adds per instruction. Keys as (D/2, CHUNK) pairs of dimensions, values as (CHUNK/2, D) pairs of keys,
// probabilities rounded once to bfloat16 for the value sums (as a bfloat16 matmul of them would be).
constexpr bool PAIRED = true;

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
#else
constexpr bool PAIRED = false;
#endif

template <typename T>
struct Task {
  const T *q, *k_cache, *v_cache;
  int64_t q_row_stride, q_head_stride, n_kv, group, d;
  float scale;
  T* out;
  int64_t n_heads;
};

// Keys [start, start + nk) of the tile's sequence for kv head h, laid out for the score and value blocks
// (zero padded to nk16 keys): float32 keys (D, CHUNK) and values (CHUNK, D); or, paired, keys as (D/2, CHUNK)
// dimension pairs and values as (CHUNK/2, D) key pairs.
template <typename T, bool Paired>
void lay_out_chunk(const Task<T>& t, const int64_t* slots, int64_t h, int64_t nk, int64_t nk16, float* kt, float* vf) {
  const int64_t d = t.d;
  for (int64_t j = 0; j < nk16; ++j) {
    const T* key = j < nk ? t.k_cache + (slots[j] * t.n_kv + h) * d : nullptr;
    const T* value = j < nk ? t.v_cache + (slots[j] * t.n_kv + h) * d : nullptr;
    if constexpr (Paired) {
      auto* kt2 = reinterpret_cast<uint32_t*>(kt);
      auto* v2 = reinterpret_cast<uint16_t*>(vf);  // (CHUNK/2, D, 2) halves
      for (int64_t i = 0; i < d / 2; ++i) {
        uint32_t pair = 0;
        if (key) std::memcpy(&pair, key + 2 * i, sizeof(pair));
        kt2[i * CHUNK + j] = pair;
      }
      for (int64_t i = 0; i < d; ++i) v2[((j / 2) * d + i) * 2 + j % 2] = value ? value[i].x : uint16_t{0};
    } else {
      for (int64_t i = 0; i < d; ++i) kt[i * CHUNK + j] = key ? to_float(key[i]) : 0.0f;
      if (value)
        for (int64_t i = 0; i < d; i += 16) store16(vf + j * d + i, load16(value + i));
    }
  }
}

// One row's scores of one chunk (its first `valid` keys visible) -> its probabilities in place (0 past
// `valid`), its running max and sum updated, its value sums rescaled; `scale` multiplies the scores first.
// Paired: the probabilities also to `p2` in bfloat16.
inline void softmax_chunk(float* row, int64_t valid, int64_t nk16, float scale, float& run_max, float& run_sum,
                          float* acc, int64_t d, uint16_t* p2) {
  const f32x16 sv = set16(scale);
  f32x16 top = set16(-INFINITY);
  for (int64_t kb = 0; kb < valid; kb += 16)
    top = max16(top, mul16(load_first16(row + kb, valid - kb, -INFINITY), sv));
  const float m = std::max(run_max, reduce_max16(top));
  const f32x16 neg_m = set16(-m);
  f32x16 sum = zero16();
  for (int64_t kb = 0; kb < nk16; kb += 16) {
    f32x16 e = zero16();
    if (kb + 16 <= valid) {
      e = exp16_nonpositive(fma16(load16(row + kb), sv, neg_m));
    } else if (kb < valid) {
      e = keep_first16(exp16_nonpositive(fma16(load16(row + kb), sv, neg_m)), valid - kb);
    }
#if defined(__AVX512BF16__)
    if (p2) _mm256_storeu_si256(reinterpret_cast<__m256i*>(p2 + kb), (__m256i)_mm512_cvtneps_pbh(e));
#endif
    store16(row + kb, e);
    sum = add16(sum, e);
  }
  const float alpha = exp_nonpositive1(run_max - m);
  run_sum = run_sum * alpha + reduce_add16(sum);
  run_max = m;
  for (int64_t i = 0; i < d; ++i) acc[i] *= alpha;
}

// One tile of rows (consecutive positions of one sequence) and one kv head: all chunks, in order.
template <typename T>
void run_tile(const Task<T>& t, const Tile& tile, int64_t h, const int64_t* slots, const int64_t* row_ends,
              std::vector<float>& buf) {
  constexpr bool paired = PAIRED && std::is_same_v<T, c10::BFloat16>;
  const int64_t d = t.d, g = t.group, nq_all = tile.num_rows * g;
  const int64_t need = nq_all * d * 2 + d * CHUNK + CHUNK * d + nq_all * CHUNK * 2 + nq_all * 2;
  if (static_cast<int64_t>(buf.size()) < need) buf.resize(need);
  float* qf = buf.data();             // (rows * G, D) scaled float32, or (rows * G, D/2) bfloat16 pairs
  float* acc = qf + nq_all * d;       // (rows * G, D)
  float* kt = acc + nq_all * d;       // the chunk's keys (lay_out_chunk)
  float* vf = kt + d * CHUNK;         // the chunk's values
  float* s = vf + CHUNK * d;          // (rows * G, CHUNK) scores, then probabilities
  auto* p2 = reinterpret_cast<uint16_t*>(s + nq_all * CHUNK);  // (rows * G, CHUNK) bfloat16 probabilities
  float* run_max = s + nq_all * CHUNK * 2;
  float* run_sum = run_max + nq_all;
  for (int64_t r = 0; r < tile.num_rows; ++r)
    for (int64_t j = 0; j < g; ++j) {
      const T* src = t.q + (tile.first_row + r) * t.q_row_stride + (h * g + j) * t.q_head_stride;
      const int64_t qi = r * g + j;
      if constexpr (paired) {
        std::memcpy(reinterpret_cast<uint32_t*>(qf) + qi * d / 2, src, d * sizeof(T));
      } else {
        for (int64_t i = 0; i < d; ++i) qf[qi * d + i] = to_float(src[i]) * t.scale;
      }
    }
  const float score_scale = paired ? t.scale : 1.0f;
  std::fill(acc, acc + nq_all * d, 0.0f);
  std::fill(run_max, run_max + nq_all, -INFINITY);
  std::fill(run_sum, run_sum + nq_all, 0.0f);
  const int64_t* ends = row_ends + tile.first_row;
  const int64_t longest = ends[tile.num_rows - 1];
  for (int64_t start = 0; start < longest; start += CHUNK) {
    const int64_t nk = std::min(CHUNK, longest - start), nk16 = (nk + 15) / 16 * 16;
    int64_t first = 0;  // rows before this one see no key of the chunk
    while (ends[first] <= start) ++first;
    lay_out_chunk<T, paired>(t, slots + start, h, nk, nk16, kt, vf);
    const int64_t q0 = first * g, nq = nq_all - q0;
#if defined(__AVX512BF16__)
    if constexpr (paired) {
      const auto* q2 = reinterpret_cast<const uint32_t*>(qf) + q0 * d / 2;
      for (int64_t kb = 0; kb < nk16; kb += 16)
        pair_scores_for(nq, q2, d / 2, reinterpret_cast<const uint32_t*>(kt), s + q0 * CHUNK, kb);
    }
#endif
    if constexpr (!paired)
      for (int64_t kb = 0; kb < nk16; kb += 16) scores_for(nq, qf + q0 * d, d, kt, s + q0 * CHUNK, kb);
    for (int64_t qi = q0; qi < nq_all; ++qi)
      softmax_chunk(s + qi * CHUNK, std::min(nk, ends[qi / g] - start), nk16, score_scale, run_max[qi],
                    run_sum[qi], acc + qi * d, d, paired ? p2 + qi * CHUNK : nullptr);
#if defined(__AVX512BF16__)
    if constexpr (paired) {
      for (int64_t v = 0; v < d; v += 16)
        pair_values_for(nq, reinterpret_cast<const uint32_t*>(p2 + q0 * CHUNK),
                        reinterpret_cast<const uint32_t*>(vf) + v, d, (nk + 1) / 2, acc + q0 * d + v);
    }
#endif
    if constexpr (!paired)
      for (int64_t v = 0; v < d; v += 16) values_for(nq, s + q0 * CHUNK, vf + v, d, nk, acc + q0 * d + v);
  }
  for (int64_t qi = 0; qi < nq_all; ++qi) {
    const int64_t r = qi / g, j = qi % g;
    T* dst = t.out + (tile.first_row + r) * t.n_heads * d + (h * g + j) * d;
    const float* a = acc + qi * d;
    for (int64_t i = 0; i < d; ++i) dst[i] = static_cast<T>(a[i] / run_sum[qi]);
  }
}

template <typename T>
void run(const at::Tensor& q, const at::Tensor& k_cache, const at::Tensor& v_cache, const int64_t* slots,
         const int64_t* seq_begins, const int64_t* row_seqs, const int64_t* row_ends, float scale, at::Tensor& out) {
  const int64_t n_rows = q.size(0), n_kv = k_cache.size(1);
  std::vector<Tile> tiles;
  for (int64_t n = 0; n < n_rows;) {  // consecutive rows of one sequence, at most TILE_ROWS
    int64_t m = n + 1, cost = row_ends[n];
    while (m < n_rows && m - n < TILE_ROWS && row_seqs[m] == row_seqs[n]) cost += row_ends[m++];
    tiles.push_back({row_seqs[n], n, m - n, cost});
    n = m;
  }
  std::vector<int64_t> order(tiles.size());  // the longest tiles first: the last ones fill the threads' gaps
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(i);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return tiles[a].cost > tiles[b].cost; });
  Task<T> task{q.data_ptr<T>(), k_cache.data_ptr<T>(), v_cache.data_ptr<T>(), q.stride(0), q.stride(1), n_kv,
               q.size(1) / n_kv, q.size(2), scale, out.data_ptr<T>(), q.size(1)};
  const int64_t n_tasks = static_cast<int64_t>(tiles.size()) * n_kv;
  std::atomic<int64_t> next{0};
  const int64_t workers = std::min<int64_t>(at::get_num_threads(), n_tasks);
  at::parallel_for(0, workers, 1, [&](int64_t, int64_t) {
    std::vector<float> buf;
    for (int64_t i = next++; i < n_tasks; i = next++) {
      const Tile& tile = tiles[order[i / n_kv]];
      run_tile(task, tile, i % n_kv, slots + seq_begins[tile.seq], row_ends, buf);
    }
  });
}

}  // namespace

bool prompt_attention_available() { return true; }

at::Tensor prompt_attention(const at::Tensor& q, const at::Tensor& k_cache, const at::Tensor& v_cache,
                            const at::Tensor& seq_slots, const at::Tensor& seq_begins, const at::Tensor& row_seqs,
                            const at::Tensor& row_ends, double scale) {
  radixgate::check_attention_inputs(q, k_cache, v_cache);
  TORCH_CHECK(q.size(2) % 16 == 0, "head_dim must be a multiple of 16");
  for (const auto* t : {&seq_slots, &seq_begins, &row_seqs, &row_ends})
    TORCH_CHECK(t->scalar_type() == at::kLong, "slots, begins, sequences and ends must be int64");
  TORCH_CHECK(row_seqs.numel() == q.size(0) && row_ends.numel() == q.size(0), "one (sequence, end) per query row");
  auto sl = seq_slots.contiguous(), sb = seq_begins.contiguous(), rs = row_seqs.contiguous(), re = row_ends.contiguous();
  const int64_t *sp = sl.data_ptr<int64_t>(), *bp = sb.data_ptr<int64_t>(), *rp = rs.data_ptr<int64_t>(),
                *ep = re.data_ptr<int64_t>();
  const int64_t n_seqs = sb.numel(), n_slots = sl.numel();
  for (int64_t n = 0; n < q.size(0); ++n) {
    TORCH_CHECK(0 <= rp[n] && rp[n] < n_seqs, "row ", n, " names no sequence");
    TORCH_CHECK(0 < ep[n] && bp[rp[n]] + ep[n] <= n_slots, "row ", n, " has no keys or overruns the slots");
    if (n > 0 && rp[n] == rp[n - 1])
      TORCH_CHECK(ep[n] >= ep[n - 1], "rows of a sequence must come in position order");
  }
  for (int64_t i = 0; i < n_slots; ++i)
    TORCH_CHECK(0 <= sp[i] && sp[i] < k_cache.size(0), "slot ", sp[i], " is outside the pool");
  at::Tensor out = at::empty({q.size(0), q.size(1) * q.size(2)}, q.options());
  if (q.size(0) == 0) return out;
  if (q.scalar_type() == at::kFloat) {
    run<float>(q, k_cache, v_cache, sp, bp, rp, ep, static_cast<float>(scale), out);
  } else if (q.scalar_type() == at::kBFloat16) {
    run<c10::BFloat16>(q, k_cache, v_cache, sp, bp, rp, ep, static_cast<float>(scale), out);
  } else {
    TORCH_CHECK(false, "prompt_attention takes float32 or bfloat16, not ", q.scalar_type());
  }
  return out;
}
#else
bool prompt_attention_available() { return false; }

at::Tensor prompt_attention(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
                            const at::Tensor&, const at::Tensor&, const at::Tensor&, double) {
  TORCH_CHECK(false, "prompt_attention needs AVX2 + FMA or AVX-512");
}
#endif
