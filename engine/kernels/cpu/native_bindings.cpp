// The Python module of radixgate's native CPU kernels (engine.kernels.cpu.native builds it); one entry per
// kernel, each documented in its own source file.
#include <torch/extension.h>

at::Tensor decode_attention(const at::Tensor& q, const at::Tensor& k_cache, const at::Tensor& v_cache,
                            const at::Tensor& slots, const at::Tensor& begins, const at::Tensor& ends, double scale);
at::Tensor chunk_attention(const at::Tensor& q, const at::Tensor& k_cache, const at::Tensor& v_cache,
                            const at::Tensor& seq_slots, const at::Tensor& seq_begins, const at::Tensor& row_seqs,
                            const at::Tensor& row_ends, double scale);
bool chunk_attention_available();
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps);
at::Tensor add_rms_norm(at::Tensor& hidden, const at::Tensor& delta, const at::Tensor& weight, double eps);
at::Tensor rotary(const at::Tensor& qkv, int64_t heads, int64_t head_dim, const at::Tensor& cos,
                  const at::Tensor& signed_sin);
at::Tensor silu_mul(const at::Tensor& gate_up);
at::Tensor dense_rows(const at::Tensor& x, const at::Tensor& packed, int64_t n);
at::Tensor int4_rows(const at::Tensor& x, const at::Tensor& q, const at::Tensor& scale_min, int64_t n);
at::Tensor int4_dot_rows(const at::Tensor& x, const at::Tensor& q, const at::Tensor& scale_min, int64_t n);
at::Tensor int8_dot_rows(const at::Tensor& x, const at::Tensor& q, const at::Tensor& scale, int64_t n);
at::Tensor int8_rows(const at::Tensor& x, const at::Tensor& q, const at::Tensor& scale, int64_t n);
at::Tensor int4_super_rows(const at::Tensor& x, const at::Tensor& q, const at::Tensor& sc_m, const at::Tensor& d_dmin,
                           int64_t n);
at::Tensor int4_super_dot_rows(const at::Tensor& x, const at::Tensor& q, const at::Tensor& sc_m,
                               const at::Tensor& d_dmin, int64_t n);
at::Tensor int8_super_rows(const at::Tensor& x, const at::Tensor& q, const at::Tensor& sc, const at::Tensor& d,
                           int64_t n);

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("decode_attention", &decode_attention, "attention of single query rows over the paged KV pool");
  m.def("chunk_attention", &chunk_attention, "attention of many query rows per chunk of keys (prompt and generated rows)");
  m.attr("has_chunk_attention") = chunk_attention_available();
  m.def("rms_norm", &rms_norm, "RMSNorm of each row, float32 inside, rounded once");
  m.def("dense_rows", &dense_rows, "x @ w.T for a few rows over a lane-packed weight, row-invariant");
  m.def("int4_rows", &int4_rows, "x @ dequant(q).T for a few rows over lane-packed int4 weights, row-invariant");
  m.def("int4_dot_rows", &int4_dot_rows,
        "x @ dequant(q).T for a few rows, int4 weights times int8-quantized activations, row-invariant");
  m.def("int8_dot_rows", &int8_dot_rows,
        "x @ (q * scale).T for a few rows, int8 weights times int8-quantized activations, row-invariant");
  m.def("int8_rows", &int8_rows, "x @ (q * scale).T for a few rows over lane-packed int8, row-invariant");
  m.def("int4_super_rows", &int4_super_rows, "int4_rows over GGUF Q4_K super-block scales, row-invariant");
  m.def("int4_super_dot_rows", &int4_super_dot_rows, "int4_dot_rows over GGUF Q4_K super-block scales, row-invariant");
  m.def("int8_super_rows", &int8_super_rows, "int8_rows over GGUF Q6_K super-block scales, row-invariant");
  m.def("rotary", &rotary, "rotary embedding of the q/k heads of fused q/k/v rows, float32 inside, rounded once");
  m.def("silu_mul", &silu_mul, "silu(gate) * up over fused gate/up rows, float32 inside, rounded once");
  m.def("add_rms_norm", &add_rms_norm, "hidden += delta (in place, rounded as torch's add), then rms_norm(hidden)");
}
