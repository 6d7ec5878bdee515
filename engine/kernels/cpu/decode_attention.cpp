// Attention of single query rows over the paged KV pool, for generated tokens (decode and verify rows).
//
// decode_attention(q, k_cache, v_cache, slots, begins, ends, scale) -> (N, H * D)
//   q        (N, H, D)        one row per query token, float32 or bfloat16 (any row and head strides)
//   k/v      (S, KVH, D)      one pool layer, slot-indexed, q's dtype
//   slots    (M,) int64       key slots of every row, concatenated
//   begins/ends (N,) int64   row n attends keys slots[begins[n] : ends[n]] (in order, ends > begins)
//
// Contract: a row's result depends only on its query and its keys. Keys are cut into chunks of CHUNK
// positions counted from begins[n]; each (row, kv head, chunk) is one task with a float32 softmax partial
// (max, sum, weighted values); partials are merged in chunk order. Every reduction runs over fixed lanes
// in a fixed order, so the bits do not depend on the batch, the thread count or buffer addresses.
// Scores, probabilities and the value sum stay float32; the output is rounded once to q's dtype.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include "native_common.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace {

using radixgate::to_float;

constexpr int64_t CHUNK = 256;  // keys per task
constexpr int LANES = 16;       // the fixed width of every reduction


template <typename T>
inline void load_row(const T* src, float* dst, int64_t d) {
  for (int64_t i = 0; i < d; ++i) dst[i] = to_float(src[i]);
}

// exp(x) for x <= 0 (scores minus their max), float32, ~2 ulp; branch-free so that loops over it vectorize.
inline float exp_nonpositive(float x) {
  x = std::max(x, -87.0f);
  const float n = std::floor(x * 1.44269504088896341f + 0.5f);
  const float r = (x - n * 0.693359375f) + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return p * scale;
}

// sum of x[0:n] over LANES fixed lanes, then the lanes pairwise in a fixed tree
inline float lane_sum(const float* x, int64_t n) {
  float acc[LANES] = {0};
  int64_t i = 0;
  for (; i + LANES <= n; i += LANES)
    for (int l = 0; l < LANES; ++l) acc[l] += x[i + l];
  for (int l = 0; i + l < n; ++l) acc[l] += x[i + l];
  for (int width = LANES / 2; width > 0; width /= 2)
    for (int l = 0; l < width; ++l) acc[l] += acc[l + width];
  return acc[0];
}

// dot product of two float rows over LANES fixed lanes (d is a multiple of LANES for every model served)
inline float lane_dot(const float* a, const float* b, int64_t d) {
  float acc[LANES] = {0};
  int64_t i = 0;
  for (; i + LANES <= d; i += LANES)
    for (int l = 0; l < LANES; ++l) acc[l] += a[i + l] * b[i + l];
  for (int l = 0; i + l < d; ++l) acc[l] += a[i + l] * b[i + l];
  for (int width = LANES / 2; width > 0; width /= 2)
    for (int l = 0; l < width; ++l) acc[l] += acc[l + width];
  return acc[0];
}

struct Partial {  // one task's softmax state per query head of its group: max, sum, weighted values (G, D)
  float* max;
  float* sum;
  float* values;
};

#if defined(RADIXGATE_VEC16)
using radixgate::f32x16;
using namespace radixgate;

constexpr int64_t MAX_VECTORS = 8;  // head_dim up to 128 on this path
constexpr int64_t MAX_GROUP = 8;    // query heads per kv head on this path

inline bool fast_path_applies(int64_t d, int64_t group) {
  return d % 16 == 0 && d / 16 <= MAX_VECTORS && group <= MAX_GROUP;
}

// The vector chunk: scores as one 16-lane product per key (reduced by the same tree every time), exp on 16
// lanes, the sum and the values accumulated lane-wise in key order.
template <typename T>
void attend_chunk_fast(const float* q, const T* k_cache, const T* v_cache, const int64_t* slots, int64_t num_keys,
                       int64_t kv_head, int64_t num_kv_heads, int64_t group, int64_t d, float* scores, Partial out) {
  const int64_t nv = d / 16;
  f32x16 qv[MAX_GROUP * MAX_VECTORS];
  for (int64_t g = 0; g < group; ++g)
    for (int64_t v = 0; v < nv; ++v) qv[g * nv + v] = load16(q + g * d + v * 16);
  for (int64_t j = 0; j < num_keys; ++j) {
    const T* key = k_cache + (slots[j] * num_kv_heads + kv_head) * d;
    f32x16 kv[MAX_VECTORS];
    for (int64_t v = 0; v < nv; ++v) kv[v] = load16(key + v * 16);
    for (int64_t g = 0; g < group; ++g) {
      f32x16 acc = mul16(qv[g * nv], kv[0]);
      for (int64_t v = 1; v < nv; ++v) acc = fma16(qv[g * nv + v], kv[v], acc);
      scores[g * num_keys + j] = reduce_add16(acc);
    }
  }
  const int64_t full = num_keys / 16 * 16, tail = num_keys - full;
  for (int64_t g = 0; g < group; ++g) {
    float* s = scores + g * num_keys;
    f32x16 top = set16(-INFINITY);
    for (int64_t j = 0; j < full; j += 16) top = max16(top, load16(s + j));
    if (tail) top = max16(top, load_first16(s + full, tail, -INFINITY));
    const float m = reduce_max16(top);
    const f32x16 mv = set16(m);
    f32x16 sum = zero16();
    for (int64_t j = 0; j < full; j += 16) {
      const f32x16 e = exp16_nonpositive(sub16(load16(s + j), mv));
      store16(s + j, e);
      sum = add16(sum, e);
    }
    if (tail) {
      const f32x16 e = keep_first16(exp16_nonpositive(sub16(load_first16(s + full, tail, 0.0f), mv)), tail);
      alignas(64) float lanes[16];
      store16(lanes, e);
      std::memcpy(s + full, lanes, tail * sizeof(float));
      sum = add16(sum, e);
    }
    out.max[g] = m;
    out.sum[g] = reduce_add16(sum);
  }
  f32x16 acc[MAX_GROUP * MAX_VECTORS];
  for (int64_t i = 0; i < group * nv; ++i) acc[i] = zero16();
  for (int64_t j = 0; j < num_keys; ++j) {
    const T* value = v_cache + (slots[j] * num_kv_heads + kv_head) * d;
    f32x16 vv[MAX_VECTORS];
    for (int64_t v = 0; v < nv; ++v) vv[v] = load16(value + v * 16);
    for (int64_t g = 0; g < group; ++g) {
      const f32x16 p = set16(scores[g * num_keys + j]);
      for (int64_t v = 0; v < nv; ++v) acc[g * nv + v] = fma16(p, vv[v], acc[g * nv + v]);
    }
  }
  for (int64_t g = 0; g < group; ++g)
    for (int64_t v = 0; v < nv; ++v) store16(out.values + g * d + v * 16, acc[g * nv + v]);
}
#else
inline bool fast_path_applies(int64_t, int64_t) { return false; }
template <typename T>
void attend_chunk_fast(const float*, const T*, const T*, const int64_t*, int64_t, int64_t, int64_t, int64_t, int64_t,
                       float*, Partial) {}
#endif

// The portable chunk: the same steps on LANES fixed lanes, for CPUs without AVX2 and odd head shapes.
template <typename T>
void attend_chunk(const float* q, const T* k_cache, const T* v_cache, const int64_t* slots, int64_t num_keys,
                  int64_t kv_head, int64_t num_kv_heads, int64_t group, int64_t d, float* scores, float* row,
                  Partial out) {
  for (int64_t j = 0; j < num_keys; ++j) {
    load_row(k_cache + (slots[j] * num_kv_heads + kv_head) * d, row, d);
    for (int64_t g = 0; g < group; ++g) scores[g * num_keys + j] = lane_dot(q + g * d, row, d);
  }
  for (int64_t g = 0; g < group; ++g) {
    float* s = scores + g * num_keys;
    const float top = *std::max_element(s, s + num_keys);
    for (int64_t j = 0; j < num_keys; ++j) s[j] = exp_nonpositive(s[j] - top);
    out.max[g] = top;
    out.sum[g] = lane_sum(s, num_keys);
  }
  std::fill(out.values, out.values + group * d, 0.0f);
  for (int64_t j = 0; j < num_keys; ++j) {
    load_row(v_cache + (slots[j] * num_kv_heads + kv_head) * d, row, d);
    for (int64_t g = 0; g < group; ++g) {
      const float p = scores[g * num_keys + j];
      float* acc = out.values + g * d;
      for (int64_t i = 0; i < d; ++i) acc[i] += p * row[i];
    }
  }
}

template <typename T>
void run(const at::Tensor& q, const at::Tensor& k_cache, const at::Tensor& v_cache, const int64_t* slots,
         const int64_t* begins, const int64_t* ends, float scale, at::Tensor& out) {
  const int64_t n_rows = q.size(0), n_heads = q.size(1), d = q.size(2), n_kv = k_cache.size(1);
  const int64_t group = n_heads / n_kv;
  std::vector<int64_t> first_task(n_rows + 1, 0);  // tasks of row n: [first_task[n], first_task[n+1]) per kv head
  int64_t total_keys = 0;
  for (int64_t n = 0; n < n_rows; ++n) {
    const int64_t len = ends[n] - begins[n];
    total_keys += len;
    first_task[n + 1] = first_task[n] + (len + CHUNK - 1) / CHUNK;
  }
  const int64_t chunks = first_task[n_rows], n_tasks = chunks * n_kv;
  std::vector<float> maxes(n_tasks * group), sums(n_tasks * group), values(n_tasks * group * d);
  std::vector<int64_t> task_row(chunks);
  for (int64_t n = 0; n < n_rows; ++n)
    for (int64_t c = first_task[n]; c < first_task[n + 1]; ++c) task_row[c] = n;
  const T* qp = q.data_ptr<T>();
  const int64_t q_row_stride = q.stride(0), q_head_stride = q.stride(1);
  const T* kp = k_cache.data_ptr<T>();
  const T* vp = v_cache.data_ptr<T>();
  // small steps run on the calling thread: waking the pool costs more than the work
  const int64_t grain = total_keys * n_kv < 2048 ? n_tasks : 1;
  const bool fast = fast_path_applies(d, group);
  at::parallel_for(0, n_tasks, grain, [&](int64_t lo, int64_t hi) {
    std::vector<float> qf(group * d), scores(group * CHUNK), row(d);
    for (int64_t task = lo; task < hi; ++task) {
      const int64_t chunk = task / n_kv, h = task % n_kv, n = task_row[chunk];
      const int64_t start = begins[n] + (chunk - first_task[n]) * CHUNK;
      const int64_t num_keys = std::min(CHUNK, ends[n] - start);
      for (int64_t g = 0; g < group; ++g) {
        const T* src = qp + n * q_row_stride + (h * group + g) * q_head_stride;
        for (int64_t i = 0; i < d; ++i) qf[g * d + i] = to_float(src[i]) * scale;
      }
      Partial part{maxes.data() + task * group, sums.data() + task * group, values.data() + task * group * d};
      if (fast) {
        attend_chunk_fast(qf.data(), kp, vp, slots + start, num_keys, h, n_kv, group, d, scores.data(), part);
      } else {
        attend_chunk(qf.data(), kp, vp, slots + start, num_keys, h, n_kv, group, d, scores.data(), row.data(), part);
      }
    }
  });
  T* op = out.data_ptr<T>();
  std::vector<float> acc(d);
  for (int64_t n = 0; n < n_rows; ++n) {
    for (int64_t h = 0; h < n_kv; ++h) {
      for (int64_t g = 0; g < group; ++g) {
        float top = -INFINITY;
        for (int64_t c = first_task[n]; c < first_task[n + 1]; ++c) top = std::max(top, maxes[(c * n_kv + h) * group + g]);
        float total = 0.0f;
        std::fill(acc.begin(), acc.end(), 0.0f);
        for (int64_t c = first_task[n]; c < first_task[n + 1]; ++c) {  // merge in chunk order
          const int64_t at = (c * n_kv + h) * group + g;
          const float weight = exp_nonpositive(maxes[at] - top);
          total += sums[at] * weight;
          const float* v = values.data() + at * d;
          for (int64_t i = 0; i < d; ++i) acc[i] += v[i] * weight;
        }
        T* dst = op + n * n_heads * d + (h * group + g) * d;
        for (int64_t i = 0; i < d; ++i) dst[i] = static_cast<T>(acc[i] / total);
      }
    }
  }
}

}  // namespace

at::Tensor decode_attention(const at::Tensor& q, const at::Tensor& k_cache, const at::Tensor& v_cache,
                            const at::Tensor& slots, const at::Tensor& begins, const at::Tensor& ends, double scale) {
  radixgate::check_attention_inputs(q, k_cache, v_cache);
  TORCH_CHECK(slots.scalar_type() == at::kLong && begins.scalar_type() == at::kLong && ends.scalar_type() == at::kLong,
              "slots, begins and ends must be int64");
  TORCH_CHECK(begins.numel() == q.size(0) && ends.numel() == q.size(0), "one (begin, end) per query row");
  auto sl = slots.contiguous(), b = begins.contiguous(), e = ends.contiguous();
  const int64_t* bp = b.data_ptr<int64_t>();
  const int64_t* ep = e.data_ptr<int64_t>();
  for (int64_t n = 0, n_rows = q.size(0), n_slots = sl.numel(); n < n_rows; ++n)
    TORCH_CHECK(0 <= bp[n] && bp[n] < ep[n] && ep[n] <= n_slots, "row ", n, " has no keys or overruns slots");
  const int64_t* sp = sl.data_ptr<int64_t>();
  radixgate::check_slots_in_pool(sp, sl.numel(), k_cache);
  at::Tensor out = at::empty({q.size(0), q.size(1) * q.size(2)}, q.options());
  if (q.scalar_type() == at::kFloat) {
    run<float>(q, k_cache, v_cache, sp, bp, ep, static_cast<float>(scale), out);
  } else if (q.scalar_type() == at::kBFloat16) {
    run<c10::BFloat16>(q, k_cache, v_cache, sp, bp, ep, static_cast<float>(scale), out);
  } else {
    TORCH_CHECK(false, "decode_attention takes float32 or bfloat16, not ", q.scalar_type());
  }
  return out;
}
