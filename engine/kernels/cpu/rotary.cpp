// Rotary position embedding of the q and k heads of a fused q/k/v projection, for float32 and bfloat16 rows.
//
// rotary(qkv (T, W), heads, head_dim, cos (T, R), signed_sin (T, R)) -> (T, heads, head_dim)
//   The first ``heads`` heads of each row of qkv (q's, then k's), rotated in their first R channels by the
//   rotate-half convention: y_j = x_j cos_j + x_{j +- R/2} signed_sin_j (signed_sin = [-sin_1, sin_2], float32
//   tables, engine.models.rope.RotaryTable); channels from R on are copied. float32 inside, rounded once.
//   Each element depends only on its own row: the bits never depend on the batch.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include "native_common.h"

namespace {

using radixgate::to_float;


template <typename T>
void run(const at::Tensor& qkv, int64_t heads, int64_t d, const float* cos, const float* sin, int64_t r,
         at::Tensor& out) {
  const int64_t tokens = qkv.size(0), width = qkv.size(1), half = r / 2;
  const T* xp = qkv.data_ptr<T>();
  T* op = out.data_ptr<T>();
  const int64_t grain = tokens * heads * d < 32768 ? tokens * heads : 1;
  at::parallel_for(0, tokens * heads, grain, [&](int64_t lo, int64_t hi) {
    float x[1024];
    for (int64_t row = lo; row < hi; ++row) {
      const int64_t t = row / heads, h = row % heads;
      const T* src = xp + t * width + h * d;
      T* dst = op + row * d;
      for (int64_t j = 0; j < d; ++j) x[j] = to_float(src[j]);
      const float* c = cos + t * r;
      const float* s = sin + t * r;
      for (int64_t j = 0; j < half; ++j) dst[j] = static_cast<T>(x[j] * c[j] + x[j + half] * s[j]);
      for (int64_t j = half; j < r; ++j) dst[j] = static_cast<T>(x[j] * c[j] + x[j - half] * s[j]);
      for (int64_t j = r; j < d; ++j) dst[j] = src[j];
    }
  });
}

}  // namespace

at::Tensor rotary(const at::Tensor& qkv, int64_t heads, int64_t head_dim, const at::Tensor& cos,
                  const at::Tensor& signed_sin) {
  TORCH_CHECK(qkv.dim() == 2 && qkv.is_contiguous() && qkv.size(1) >= heads * head_dim, "qkv must be contiguous (T, W)");
  TORCH_CHECK(head_dim <= 1024, "head_dim over 1024");
  TORCH_CHECK(cos.scalar_type() == at::kFloat && signed_sin.scalar_type() == at::kFloat && cos.is_contiguous() &&
              signed_sin.is_contiguous() && cos.dim() == 2 && cos.sizes() == signed_sin.sizes() &&
              cos.size(0) == qkv.size(0) && cos.size(1) <= head_dim && cos.size(1) % 2 == 0,
              "cos and signed_sin must be contiguous float32 (T, R), R even and <= head_dim");
  at::Tensor out = at::empty({qkv.size(0), heads, head_dim}, qkv.options());
  if (qkv.scalar_type() == at::kFloat) {
    run<float>(qkv, heads, head_dim, cos.data_ptr<float>(), signed_sin.data_ptr<float>(), cos.size(1), out);
  } else {
    TORCH_CHECK(qkv.scalar_type() == at::kBFloat16, "rotary takes float32 or bfloat16");
    run<c10::BFloat16>(qkv, heads, head_dim, cos.data_ptr<float>(), signed_sin.data_ptr<float>(), cos.size(1), out);
  }
  return out;
}
