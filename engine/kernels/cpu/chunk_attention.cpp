// Attention of query rows over the paged KV pool, many rows per chunk of keys: the rows of prompts (causal)
// and the rows of generated tokens (decode, speculative verify) alike.
//
// chunk_attention(q, k_cache, v_cache, seq_slots, seq_begins, row_seqs, row_ends, scale) -> (N, H * D)
//   q           (N, H, D)   one row per query token, float32 or bfloat16 (any row and head strides)
//   k/v         (S, KVH, D) one pool layer, slot-indexed, q's dtype
//   seq_slots   (M,) int64  the key slots of every sequence, concatenated; sequence s starts at seq_begins[s]
//   row_seqs    (N,) int64  the sequence of each row; a sequence's rows are consecutive, in position order
//   row_ends    (N,) int64  row n attends the first row_ends[n] keys of its sequence (position + 1 when causal)
//
// Contract: a row's result depends only on its query and its keys, never on the rows around it. A row walks
// its keys in chunks of CHUNK positions from its sequence's first key. Per chunk c: its scores are float32 dot
// products over head_dim in dimension order (keys across the 16 lanes); its probabilities are exp(score - m_c),
// m_c the chunk's own max; their sum s_c and the value sums a_c start at +0 for the chunk. The chunks are then
// merged in chunk order: (M, S, A) = chunk 0's, then M' = max(M, m_c), S = S e^(M-M') + s_c e^(m_c-M'), A
// likewise; the output A / S is rounded once to q's dtype. Whether a task merges chunk after chunk as it goes
// or stores each chunk's (m_c, s_c, a_c) for a merge afterwards (to spread one row's chunks over threads), the
// operations and their order are the same.
//
// Rows are processed in tiles that share each chunk's keys (laid out once, chunk_blocks.h): the rows of one
// sequence, or short runs of rows of several sequences whose slots are the same over the chunk (a cached
// prefix: the cascade). A row that sees fewer keys than the others of its tile gets probability exactly 0 for
// the rest, which adds exactly nothing (its value sums start at +0 and never become -0; the one exception
// would be a value sum in the denormal range, which vdpbf16ps flushes to zero on every step). So the bits do
// not depend on the tile, the batch, the thread count or whether the keys were cached: a prompt's rows get the
// same bits alone, in chunks, or as suffixes behind a cached prefix, and a decode row the same bits at any
// batch size.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include "chunk_blocks.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#if defined(RADIXGATE_VEC16)
namespace {

using namespace radixgate;
using namespace radixgate::chunk;

constexpr int64_t TILE_ROWS = 64;      // query rows (tokens) per tile
constexpr int64_t SHORT_ROWS = 8;      // segments up to this long may share a tile with other sequences'
constexpr int64_t INLINE_WORK = 2048;  // keys x kv heads below which the calling thread does it all
constexpr int64_t SPLIT_TASKS = 4;     // per thread: with fewer tile tasks, tiles split into chunk tasks
constexpr int64_t HEAD_BLOCK = 2 * QB;  // query heads taken through a chunk's three steps at a time

struct Segment {  // consecutive rows of one sequence
  int64_t seq, first_row, num_rows, longest;  // longest: the keys its last row sees
};

struct Tile {
  int64_t first_seg, num_segs;  // segments[first_seg, first_seg + num_segs) of the tile order
  int64_t first_local, num_rows;  // rows [first_local, first_local + num_rows) of the tile order
  int64_t cost, num_chunks;
  int64_t partials;  // offset of its chunks' stored (m, s, a) when split into chunk tasks, else -1
};

template <typename T>
struct Context {
  const T* q;
  int64_t q_row_stride, q_head_stride, n_kv, group, d, n_heads;
  float scale;
  const void *k_cache, *v_cache;
  const int64_t *slots, *seq_begins;
  const Segment* segments;  // in tile order
  const int64_t* rows;      // the query rows in tile order
  const int64_t* ends;      // their key counts
  T* out;
};

struct Scratch {  // one task's buffers, for nq = rows x G query heads; each thread keeps its memory
  float *qf, *kt, *vf, *s, *cm, *cs, *ca, *run_max, *run_sum, *acc;
  uint16_t* p2;
  void size_for(int64_t nq, int64_t d) {
    static thread_local std::vector<float> buf;  // grown, never shrunk: no allocation or zeroing per call
    const int64_t need = nq * d + d * CHUNK + CHUNK * d + nq * CHUNK + nq * CHUNK / 2 + 4 * nq + 2 * nq * d + 64;
    if (static_cast<int64_t>(buf.size()) < need) buf.resize(need);
    qf = buf.data();      // (nq, D) scaled float32, or (nq, D/2) bfloat16 pairs
    kt = qf + nq * d;     // the chunk's keys and values (lay_out_chunk)
    vf = kt + d * CHUNK;
    s = vf + CHUNK * d;   // (nq, CHUNK) scores, then probabilities
    p2 = reinterpret_cast<uint16_t*>(s + nq * CHUNK);  // (nq, CHUNK) bfloat16 probabilities
    cm = s + nq * CHUNK + nq * CHUNK / 2;  // the chunk's max, sum and value sums per query head
    cs = cm + nq;
    run_max = cs + nq;  // the merged state
    run_sum = run_max + nq;
    ca = run_sum + nq;
    acc = ca + nq * d;
  }
};

// One row's scores of a chunk (its first `valid` keys visible; `scale` multiplies them first) -> its
// probabilities exp(score - the chunk's max), 0 past `valid`, in place (paired: to p2 in bfloat16 instead);
// the chunk's max and the probabilities' sum to m and s.
inline void chunk_softmax(float* row, int64_t valid, int64_t nk16, float scale, float& m, float& s, uint16_t* p2) {
  const f32x16 sv = set16(scale);
  f32x16 top = set16(-INFINITY);
  const int64_t full = valid / 16 * 16;
  for (int64_t kb = 0; kb < full; kb += 16) top = max16(top, load16(row + kb));
  if (full < valid) top = max16(top, load_first16(row + full, valid - full, -INFINITY));
  m = reduce_max16(top) * scale;  // = the max of the scaled scores: rounding x * scale (> 0) keeps their order
  const f32x16 neg_m = set16(-m);
  f32x16 sum = zero16();
  for (int64_t kb = 0; kb < nk16; kb += 16) {
    f32x16 e = zero16();
    if (kb + 16 <= valid) {
      e = exp16_nonpositive(fma16(load16(row + kb), sv, neg_m));
    } else if (kb < valid) {
      e = keep_first16(exp16_nonpositive(fma16(load16(row + kb), sv, neg_m)), valid - kb);
    }
    if (p2 != nullptr) {  // the paired value sums read only the bfloat16 copy
#if defined(__AVX512BF16__)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(p2 + kb), (__m256i)_mm512_cvtneps_pbh(e));
#endif
    } else {
      store16(row + kb, e);
    }
    sum = add16(sum, e);
  }
  s = reduce_add16(sum);
}

// The merged state (M, S, A) of a row's chunks so far, extended by the next chunk's (m, s, a).
inline void merge_chunk(float& M, float& S, float* A, float m, float s, const float* a, int64_t d) {
  const float top = std::max(M, m);
  const float wa = exp_nonpositive1(M - top), wc = exp_nonpositive1(m - top);
  M = top;
  S = std::fma(s, wc, S * wa);
  const f32x16 va = set16(wa), vc = set16(wc);
  for (int64_t i = 0; i < d; i += 16) store16(A + i, fma16(load16(a + i), vc, mul16(load16(A + i), va)));
}

// The tile's query rows for kv head h to sc.qf: scaled float32, or (paired) bfloat16 pairs as they are.
template <typename T>
void load_queries(const Context<T>& cx, const Tile& tile, int64_t h, Scratch& sc) {
  const int64_t d = cx.d, g = cx.group;
  for (int64_t r = 0; r < tile.num_rows; ++r)
    for (int64_t j = 0; j < g; ++j) {
      const T* src = cx.q + cx.rows[tile.first_local + r] * cx.q_row_stride + (h * g + j) * cx.q_head_stride;
      const int64_t qi = r * g + j;
      if constexpr (paired_for<T>) {
        std::memcpy(reinterpret_cast<uint32_t*>(sc.qf) + qi * d / 2, src, d * sizeof(T));
      } else {
        for (int64_t i = 0; i < d; ++i) sc.qf[qi * d + i] = to_float(src[i]) * cx.scale;
      }
    }
}

// Query heads [q0, q0 + nq) of the tile (all seeing keys of the chunk at `start`, laid out in sc): each one's
// chunk max, sum and value sums to sc.cm, sc.cs, sc.ca.
template <typename T>
void attend_heads(const Context<T>& cx, const int64_t* ends, int64_t q0, int64_t nq, int64_t start, int64_t nk,
                  Scratch& sc) {
  constexpr bool paired = paired_for<T>;
  const int64_t d = cx.d, g = cx.group, nk16 = (nk + 15) / 16 * 16;
#if defined(__AVX512BF16__)
  if constexpr (paired) {
    const auto* q2 = reinterpret_cast<const uint32_t*>(sc.qf) + q0 * d / 2;
    for (int64_t kb = 0; kb < nk16; kb += 16)
      pair_scores_for(nq, q2, d / 2, reinterpret_cast<const uint32_t*>(sc.kt), sc.s + q0 * CHUNK, kb);
  }
#endif
  if constexpr (!paired)
    for (int64_t kb = 0; kb < nk16; kb += 16) scores_for(nq, sc.qf + q0 * d, d, sc.kt, sc.s + q0 * CHUNK, kb);
  for (int64_t qi = q0; qi < q0 + nq; ++qi)
    chunk_softmax(sc.s + qi * CHUNK, std::min(nk, ends[qi / g] - start), nk16, paired ? cx.scale : 1.0f, sc.cm[qi],
                  sc.cs[qi], paired ? sc.p2 + qi * CHUNK : nullptr);
  std::fill(sc.ca + q0 * d, sc.ca + (q0 + nq) * d, 0.0f);
#if defined(__AVX512BF16__)
  if constexpr (paired) {
    pair_values_all(nq, reinterpret_cast<const uint32_t*>(sc.p2 + q0 * CHUNK), reinterpret_cast<const uint32_t*>(sc.vf),
                    d, (nk + 1) / 2, sc.ca + q0 * d);
  }
#endif
  if constexpr (!paired)
    for (int64_t v = 0; v < d; v += 16) values_for(nq, sc.s + q0 * CHUNK, sc.vf + v, d, nk, sc.ca + q0 * d + v);
}

// Tile rows [r0, r1), all seeing keys of the chunk at `start`: HEAD_BLOCK query heads at a time, so that their
// scores and probabilities stay in L1 between the three steps.
template <typename T>
void attend_rows(const Context<T>& cx, const int64_t* ends, int64_t r0, int64_t r1, int64_t start, int64_t nk,
                 Scratch& sc) {
  const int64_t q_end = r1 * cx.group;
  for (int64_t q0 = r0 * cx.group; q0 < q_end; q0 += HEAD_BLOCK)
    attend_heads(cx, ends, q0, std::min(HEAD_BLOCK, q_end - q0), start, nk, sc);
}

// Chunk c of a tile for kv head h: every tile row that sees keys there gets its (m_c, s_c, a_c) in sc.
// Segments whose slots are the same over the whole chunk share one layout of it.
template <typename T>
void attend_chunk(const Context<T>& cx, const Tile& tile, int64_t h, int64_t c, Scratch& sc) {
  const int64_t start = c * CHUNK;
  const int64_t* ends = cx.ends + tile.first_local;
  const Segment* segs = cx.segments + tile.first_seg;
  const Pool pool{cx.k_cache, cx.v_cache, cx.n_kv, h, cx.d};
  for (int64_t si = 0, local = 0; si < tile.num_segs;) {
    if (segs[si].longest <= start) {
      local += segs[si].num_rows;
      ++si;
      continue;
    }
    const int64_t nk = std::min(CHUNK, segs[si].longest - start);
    const int64_t* chunk_slots = cx.slots + cx.seq_begins[segs[si].seq] + start;
    int64_t sj = si + 1, end = local + segs[si].num_rows;
    while (nk == CHUNK && sj < tile.num_segs && segs[sj].longest >= start + CHUNK &&
           std::memcmp(cx.slots + cx.seq_begins[segs[sj].seq] + start, chunk_slots, CHUNK * sizeof(int64_t)) == 0)
      end += segs[sj++].num_rows;
    lay_out_chunk<T>(pool, chunk_slots, nk, (nk + 15) / 16 * 16, sc.kt, sc.vf);
    for (int64_t r = local; r < end;) {  // runs of rows that see the chunk (a segment's first rows may not)
      while (r < end && ends[r] <= start) ++r;
      const int64_t r0 = r;
      while (r < end && ends[r] > start) ++r;
      if (r > r0) attend_rows(cx, ends, r0, r, start, nk, sc);
    }
    local = end;
    si = sj;
  }
}

template <typename T>
void write_row(const Context<T>& cx, const Tile& tile, int64_t h, int64_t qi, const float* a, float sum) {
  const int64_t d = cx.d, r = qi / cx.group, j = qi % cx.group;
  T* dst = cx.out + cx.rows[tile.first_local + r] * cx.n_heads * d + (h * cx.group + j) * d;
  for (int64_t i = 0; i < d; ++i) dst[i] = static_cast<T>(a[i] / sum);
}

// A whole tile for kv head h, merging chunk after chunk, the output written.
template <typename T>
void run_tile(const Context<T>& cx, const Tile& tile, int64_t h, Scratch& sc) {
  const int64_t d = cx.d, g = cx.group, nq = tile.num_rows * g;
  const int64_t* ends = cx.ends + tile.first_local;
  load_queries(cx, tile, h, sc);
  for (int64_t c = 0; c < tile.num_chunks; ++c) {
    attend_chunk(cx, tile, h, c, sc);
    for (int64_t qi = 0; qi < nq; ++qi) {
      if (ends[qi / g] <= c * CHUNK) continue;
      if (c == 0) {
        sc.run_max[qi] = sc.cm[qi];
        sc.run_sum[qi] = sc.cs[qi];
        std::memcpy(sc.acc + qi * d, sc.ca + qi * d, d * sizeof(float));
      } else {
        merge_chunk(sc.run_max[qi], sc.run_sum[qi], sc.acc + qi * d, sc.cm[qi], sc.cs[qi], sc.ca + qi * d, d);
      }
    }
  }
  for (int64_t qi = 0; qi < nq; ++qi) write_row(cx, tile, h, qi, sc.acc + qi * d, sc.run_sum[qi]);
}

// Stored chunk states of a split tile: (m, s, a) per (kv head, query head, chunk)
inline float* partial_at(std::vector<float>& partials, const Tile& tile, int64_t nq, int64_t h, int64_t qi, int64_t c,
                         int64_t d) {
  return partials.data() + tile.partials + ((h * nq + qi) * tile.num_chunks + c) * (d + 2);
}

// Chunk c of a split tile for kv head h, its states stored.
template <typename T>
void run_tile_chunk(const Context<T>& cx, const Tile& tile, int64_t h, int64_t c, Scratch& sc,
                    std::vector<float>& partials) {
  const int64_t d = cx.d, g = cx.group, nq = tile.num_rows * g;
  const int64_t* ends = cx.ends + tile.first_local;
  load_queries(cx, tile, h, sc);
  attend_chunk(cx, tile, h, c, sc);
  for (int64_t qi = 0; qi < nq; ++qi) {
    if (ends[qi / g] <= c * CHUNK) continue;
    float* p = partial_at(partials, tile, nq, h, qi, c, d);
    p[0] = sc.cm[qi];
    p[1] = sc.cs[qi];
    std::memcpy(p + 2, sc.ca + qi * d, d * sizeof(float));
  }
}

// The stored chunk states of a split tile merged in chunk order, the output written.
template <typename T>
void merge_split_tile(const Context<T>& cx, const Tile& tile, std::vector<float>& partials, std::vector<float>& acc) {
  const int64_t d = cx.d, g = cx.group, nq = tile.num_rows * g;
  acc.resize(d);
  for (int64_t h = 0; h < cx.n_kv; ++h)
    for (int64_t qi = 0; qi < nq; ++qi) {
      const int64_t row_chunks = (cx.ends[tile.first_local + qi / g] + CHUNK - 1) / CHUNK;
      const float* p = partial_at(partials, tile, nq, h, qi, 0, d);
      float run_max = p[0], run_sum = p[1];
      std::memcpy(acc.data(), p + 2, d * sizeof(float));
      for (int64_t c = 1; c < row_chunks; ++c) {
        p = partial_at(partials, tile, nq, h, qi, c, d);
        merge_chunk(run_max, run_sum, acc.data(), p[0], p[1], p + 2, d);
      }
      write_row(cx, tile, h, qi, acc.data(), run_sum);
    }
}

struct Plan {  // the tiles and the order they are run in
  std::vector<Segment> segments;  // in tile order
  std::vector<Tile> tiles;
  std::vector<int64_t> rows, ends;  // the query rows in tile order and their key counts
};

// Rows -> segments (consecutive rows of one sequence, at most TILE_ROWS); short segments of sequences whose
// first CHUNK slots agree are tiled together (a family, longest first, TILE_ROWS rows a tile); every other
// segment is a tile of its own.
Plan plan_tiles(int64_t n_rows, const int64_t* slots, const int64_t* seq_begins, const int64_t* row_seqs,
                const int64_t* row_ends) {
  std::vector<Segment> all;
  for (int64_t n = 0; n < n_rows;) {
    int64_t m = n + 1;
    while (m < n_rows && m - n < TILE_ROWS && row_seqs[m] == row_seqs[n]) ++m;
    all.push_back({row_seqs[n], n, m - n, row_ends[m - 1]});
    n = m;
  }
  auto first_chunk = [&](const Segment& s) { return slots + seq_begins[s.seq]; };
  auto joins = [&](const Segment& s) { return s.num_rows <= SHORT_ROWS && s.longest >= CHUNK; };
  std::vector<int64_t> order(all.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(i);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    const Segment &x = all[a], &y = all[b];
    if (joins(x) != joins(y)) return joins(x);
    if (!joins(x)) return false;
    const auto [at_x, at_y] = std::mismatch(first_chunk(x), first_chunk(x) + CHUNK, first_chunk(y));
    if (at_x != first_chunk(x) + CHUNK) return *at_x < *at_y;
    return x.longest > y.longest;
  });
  Plan plan;
  for (size_t i = 0; i < order.size(); ++i) {
    const Segment& s = all[order[i]];
    const bool same_family = joins(s) && !plan.tiles.empty() && i > 0 && joins(all[order[i - 1]]) &&
                             std::equal(first_chunk(s), first_chunk(s) + CHUNK, first_chunk(all[order[i - 1]])) &&
                             plan.tiles.back().num_rows + s.num_rows <= TILE_ROWS;
    if (!same_family)
      plan.tiles.push_back({static_cast<int64_t>(plan.segments.size()), 0, static_cast<int64_t>(plan.rows.size()), 0,
                            0, 0, -1});
    Tile& tile = plan.tiles.back();
    plan.segments.push_back(s);
    tile.num_segs += 1;
    tile.num_rows += s.num_rows;
    tile.num_chunks = std::max(tile.num_chunks, (s.longest + CHUNK - 1) / CHUNK);
    for (int64_t r = s.first_row; r < s.first_row + s.num_rows; ++r) {
      plan.rows.push_back(r);
      plan.ends.push_back(row_ends[r]);
      tile.cost += row_ends[r];
    }
  }
  return plan;
}

template <typename T>
void run(const at::Tensor& q, const at::Tensor& k_cache, const at::Tensor& v_cache, const int64_t* slots,
         const int64_t* seq_begins, const int64_t* row_seqs, const int64_t* row_ends, float scale, at::Tensor& out) {
  const int64_t n_rows = q.size(0), n_kv = k_cache.size(1), d = q.size(2), g = q.size(1) / n_kv;
  Plan plan = plan_tiles(n_rows, slots, seq_begins, row_seqs, row_ends);
  int64_t work = 0;
  for (const Tile& tile : plan.tiles) work += tile.cost * n_kv;
  const int64_t threads = work < INLINE_WORK ? 1 : at::get_num_threads();
  const int64_t n_tiles = static_cast<int64_t>(plan.tiles.size());
  // too few tile tasks for the threads: tiles of more than one chunk run a task per chunk, merged afterwards
  const bool split = threads > 1 && n_tiles * n_kv < SPLIT_TASKS * threads;
  int64_t num_partials = 0;
  if (split)
    for (Tile& tile : plan.tiles)
      if (tile.num_chunks > 1) {
        tile.partials = num_partials;
        num_partials += n_kv * tile.num_rows * g * tile.num_chunks * (d + 2);
      }
  std::vector<float> partials(num_partials);
  std::vector<int64_t> by_cost(n_tiles);  // the costliest tiles first: the last ones fill the threads' gaps
  for (int64_t i = 0; i < n_tiles; ++i) by_cost[i] = i;
  std::stable_sort(by_cost.begin(), by_cost.end(),
                   [&](int64_t a, int64_t b) { return plan.tiles[a].cost > plan.tiles[b].cost; });
  struct Task {
    int64_t tile, h, chunk;  // chunk -1: the whole tile
  };
  std::vector<Task> tasks;
  for (int64_t t : by_cost) {
    const Tile& tile = plan.tiles[t];
    for (int64_t c = 0; c < (tile.partials >= 0 ? tile.num_chunks : 1); ++c)
      for (int64_t h = 0; h < n_kv; ++h) tasks.push_back({t, h, tile.partials >= 0 ? c : -1});
  }
  const Context<T> cx{q.data_ptr<T>(), q.stride(0), q.stride(1), n_kv, g, d, q.size(1), scale,
                      k_cache.data_ptr<T>(), v_cache.data_ptr<T>(), slots, seq_begins, plan.segments.data(),
                      plan.rows.data(), plan.ends.data(), out.data_ptr<T>()};
  const int64_t n_tasks = static_cast<int64_t>(tasks.size());
  std::atomic<int64_t> next{0};
  auto work_off = [&](int64_t, int64_t) {
    Scratch sc;
    for (int64_t i = next++; i < n_tasks; i = next++) {
      const Tile& tile = plan.tiles[tasks[i].tile];
      sc.size_for(tile.num_rows * g, d);
      if (tasks[i].chunk < 0) {
        run_tile(cx, tile, tasks[i].h, sc);
      } else {
        run_tile_chunk(cx, tile, tasks[i].h, tasks[i].chunk, sc, partials);
      }
    }
  };
  const int64_t workers = std::min(threads, n_tasks);
  if (workers <= 1) {
    work_off(0, 1);
  } else {
    at::parallel_for(0, workers, 1, work_off);
  }
  std::vector<float> acc;
  for (const Tile& tile : plan.tiles)
    if (tile.partials >= 0) merge_split_tile(cx, tile, partials, acc);
}

}  // namespace

bool chunk_attention_available() { return true; }

at::Tensor chunk_attention(const at::Tensor& q, const at::Tensor& k_cache, const at::Tensor& v_cache,
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
  for (int64_t n = 0, n_rows = q.size(0); n < n_rows; ++n) {
    TORCH_CHECK(0 <= rp[n] && rp[n] < n_seqs, "row ", n, " names no sequence");
    TORCH_CHECK(0 < ep[n] && bp[rp[n]] + ep[n] <= n_slots, "row ", n, " has no keys or overruns the slots");
    if (n > 0 && rp[n] == rp[n - 1])
      TORCH_CHECK(ep[n] >= ep[n - 1], "rows of a sequence must come in position order");
  }
  radixgate::check_slots_in_pool(sp, n_slots, k_cache);
  at::Tensor out = at::empty({q.size(0), q.size(1) * q.size(2)}, q.options());
  if (q.size(0) == 0) return out;
  if (q.scalar_type() == at::kFloat) {
    run<float>(q, k_cache, v_cache, sp, bp, rp, ep, static_cast<float>(scale), out);
  } else if (q.scalar_type() == at::kBFloat16) {
    run<c10::BFloat16>(q, k_cache, v_cache, sp, bp, rp, ep, static_cast<float>(scale), out);
  } else {
    TORCH_CHECK(false, "chunk_attention takes float32 or bfloat16, not ", q.scalar_type());
  }
  return out;
}
#else
bool chunk_attention_available() { return false; }

at::Tensor chunk_attention(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
                            const at::Tensor&, const at::Tensor&, const at::Tensor&, double) {
  TORCH_CHECK(false, "chunk_attention needs AVX2 + FMA or AVX-512");
}
#endif
