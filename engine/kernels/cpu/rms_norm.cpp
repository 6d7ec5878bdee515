// RMSNorm of each row, alone or after a residual add, for float32 and bfloat16 rows.
//
// rms_norm(x (T, H), weight (H,), eps) -> (T, H): y = x / sqrt(mean(x^2) + eps) * weight, all in float32,
//   rounded once to x's dtype. The mean of squares runs over LANES fixed lanes in a fixed order, so a row's
//   bits depend only on that row (any batch, any thread count).
// add_rms_norm(hidden, delta, weight, eps): hidden += delta in place (the sum rounded to hidden's dtype, as
//   torch's add rounds it), then rms_norm(hidden): one pass instead of torch's ~8 ops.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include "native_common.h"

#include <cmath>
#include <cstring>

namespace {

using radixgate::to_float;

constexpr int LANES = 16;


template <typename T>
void norm_row(const T* x, const T* weight, T* out, int64_t h, float eps) {
  float acc[LANES] = {0};
  int64_t i = 0;
  for (; i + LANES <= h; i += LANES)
    for (int l = 0; l < LANES; ++l) {
      const float v = to_float(x[i + l]);
      acc[l] += v * v;
    }
  for (int l = 0; i + l < h; ++l) {
    const float v = to_float(x[i + l]);
    acc[l] += v * v;
  }
  for (int width = LANES / 2; width > 0; width /= 2)
    for (int l = 0; l < width; ++l) acc[l] += acc[l + width];
  const float inv = 1.0f / std::sqrt(acc[0] / static_cast<float>(h) + eps);
  for (int64_t j = 0; j < h; ++j) out[j] = static_cast<T>(to_float(x[j]) * inv * to_float(weight[j]));
}

template <typename T>
void add_row(T* hidden, const T* delta, int64_t h) {
  for (int64_t j = 0; j < h; ++j) hidden[j] = static_cast<T>(to_float(hidden[j]) + to_float(delta[j]));
}

void check(const at::Tensor& x, const at::Tensor& weight) {
  TORCH_CHECK(x.dim() == 2 && x.is_contiguous() && weight.dim() == 1 && weight.is_contiguous(),
              "rms_norm takes contiguous (T, H) rows and an (H,) weight");
  TORCH_CHECK(x.size(1) == weight.size(0) && x.scalar_type() == weight.scalar_type(), "weight does not match rows");
  TORCH_CHECK(x.scalar_type() == at::kFloat || x.scalar_type() == at::kBFloat16,
              "rms_norm takes float32 or bfloat16, not ", x.scalar_type());
}

template <typename T>
void run(at::Tensor* hidden, const at::Tensor* delta, const at::Tensor& x, const at::Tensor& weight, float eps,
         at::Tensor& out) {
  const int64_t rows = x.size(0), h = x.size(1);
  const T* wp = weight.data_ptr<T>();
  T* op = out.data_ptr<T>();
  const int64_t grain = rows * h < 65536 ? rows : 1;  // a few rows: no thread wake-up
  at::parallel_for(0, rows, grain, [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      if (hidden != nullptr) add_row(hidden->data_ptr<T>() + r * h, delta->data_ptr<T>() + r * h, h);
      norm_row(x.data_ptr<T>() + r * h, wp, op + r * h, h, eps);
    }
  });
}

}  // namespace

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  check(x, weight);
  at::Tensor out = at::empty_like(x);
  if (x.scalar_type() == at::kFloat) {
    run<float>(nullptr, nullptr, x, weight, static_cast<float>(eps), out);
  } else {
    run<c10::BFloat16>(nullptr, nullptr, x, weight, static_cast<float>(eps), out);
  }
  return out;
}

at::Tensor add_rms_norm(at::Tensor& hidden, const at::Tensor& delta, const at::Tensor& weight, double eps) {
  check(hidden, weight);
  TORCH_CHECK(delta.sizes() == hidden.sizes() && delta.is_contiguous() && delta.scalar_type() == hidden.scalar_type(),
              "delta must match hidden");
  at::Tensor out = at::empty_like(hidden);
  if (hidden.scalar_type() == at::kFloat) {
    run<float>(&hidden, &delta, hidden, weight, static_cast<float>(eps), out);
  } else {
    run<c10::BFloat16>(&hidden, &delta, hidden, weight, static_cast<float>(eps), out);
  }
  return out;
}
