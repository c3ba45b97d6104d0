// The fake cuBLAS / cuBLASLt of emu_cublas.h (what it is, and why it proves nothing about cuBLAS: see there and
// README.md). Every GEMM is a plain triple loop on host memory, enqueued on its stream like a kernel, so a graph
// capture records it.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "emu_cublas.h"

struct cublasContext {
  cudaStream_t stream = nullptr;
};

cublasStatus_t cublasCreate(cublasHandle_t* handle) {
  *handle = new cublasContext;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasDestroy(cublasHandle_t handle) {
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t) {
  return handle != nullptr ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_INITIALIZED;
}
cublasStatus_t cublasSetWorkspace(cublasHandle_t handle, void*, std::size_t) {
  return handle != nullptr ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_INITIALIZED;
}

namespace {

[[noreturn]] void misuse(const char* what) {
  char message[256];
  std::snprintf(message, sizeof message, "fake cuBLAS: %s", what);
  emu::fail(message);
}

std::size_t type_bytes(cudaDataType_t t) { return t == CUDA_R_16BF ? 2 : 4; }
bool known_type(int t) { return t == CUDA_R_32F || t == CUDA_R_16BF; }

float load(const void* p, cudaDataType_t t, std::size_t i) {
  if (t == CUDA_R_16BF) return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
  return static_cast<const float*>(p)[i];
}
void store(void* p, cudaDataType_t t, std::size_t i, float x) {
  if (t == CUDA_R_16BF) static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(x);
  else static_cast<float*>(p)[i] = x;
}

// The tanh GELU and its derivative, written as kernels/cpu/activation.cpp writes them (in float), so that the
// fused epilogues and the unfused path differ only by the products' summation order.
constexpr float kSqrt2OverPi = 0.79788456080286535588f, kCubic = 0.044715f;
float gelu(float x) { return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * (x + kCubic * x * x * x))); }
float gelu_derivative(float x) {
  const float t = std::tanh(kSqrt2OverPi * (x + kCubic * x * x * x));
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * kSqrt2OverPi * (1.0f + 3.0f * kCubic * x * x);
}

// A column-major matrix as stored: rows × cols, leading dimension ld.
struct Matrix {
  const void* p;
  cudaDataType_t type;
  int64_t rows, cols, ld;
  std::size_t bytes() const {
    return rows == 0 || cols == 0 ? 0 : static_cast<std::size_t>((cols - 1) * ld + rows) * type_bytes(type);
  }
};

bool overlap(const void* a, std::size_t a_bytes, const void* b, std::size_t b_bytes) {
  const auto a0 = reinterpret_cast<std::uintptr_t>(a), b0 = reinterpret_cast<std::uintptr_t>(b);
  return a_bytes > 0 && b_bytes > 0 && a0 < b0 + b_bytes && b0 < a0 + a_bytes;
}

enum class Epilogue { kNone, kBias, kGelu, kGeluBias, kGeluAux, kGeluAuxBias, kDGelu, kDGeluBGrad, kBGradA, kBGradB };

Epilogue epilogue_of(uint32_t e) {
  switch (e) {
    case CUBLASLT_EPILOGUE_DEFAULT: return Epilogue::kNone;
    case CUBLASLT_EPILOGUE_BIAS: return Epilogue::kBias;
    case CUBLASLT_EPILOGUE_GELU: return Epilogue::kGelu;
    case CUBLASLT_EPILOGUE_GELU_BIAS: return Epilogue::kGeluBias;
    case CUBLASLT_EPILOGUE_GELU_AUX: return Epilogue::kGeluAux;
    case CUBLASLT_EPILOGUE_GELU_AUX_BIAS: return Epilogue::kGeluAuxBias;
    case CUBLASLT_EPILOGUE_DGELU: return Epilogue::kDGelu;
    case CUBLASLT_EPILOGUE_DGELU_BGRAD: return Epilogue::kDGeluBGrad;
    case CUBLASLT_EPILOGUE_BGRADA: return Epilogue::kBGradA;
    case CUBLASLT_EPILOGUE_BGRADB: return Epilogue::kBGradB;
  }
  misuse("an epilogue the fake does not have");
}

// One GEMM with its epilogue, as cuBLAS's documentation defines them: D (m × n) = alpha·op(A)·op(B) + beta·C, then
// the epilogue: BIAS adds bias[i] (length m) to row i; GELU applies the GELU after the bias, and GELU_AUX first
// stores that pre-activation in aux (D's type and shape, leading dimension aux_ld); DGELU multiplies by GELU'(aux)
// and DGELU_BGRAD then writes bias[i] = Σ_j D(i, j); BGRADA writes bias[i] = Σ_l op(A)(i, l), BGRADB bias[j] =
// Σ_l op(B)(l, j). Sums in fp32 in ascending index order; C is not read when beta is 0.
struct Gemm {
  int64_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  Matrix a{}, b{}, c{}, d{};
  float alpha = 1.0f, beta = 0.0f;
  Epilogue epilogue = Epilogue::kNone;
  void* bias = nullptr;
  cudaDataType_t bias_type = CUDA_R_32F;
  void* aux = nullptr;
  int64_t aux_ld = 0;

  bool has_bias() const {
    return epilogue == Epilogue::kBias || epilogue == Epilogue::kGeluBias || epilogue == Epilogue::kGeluAuxBias ||
           epilogue == Epilogue::kDGeluBGrad || epilogue == Epilogue::kBGradA || epilogue == Epilogue::kBGradB;
  }
  bool has_aux() const {
    return epilogue == Epilogue::kGeluAux || epilogue == Epilogue::kGeluAuxBias || epilogue == Epilogue::kDGelu ||
           epilogue == Epilogue::kDGeluBGrad;
  }
  int64_t bias_length() const { return epilogue == Epilogue::kBGradB ? n : m; }
  std::size_t aux_bytes() const {
    return static_cast<std::size_t>((n - 1) * aux_ld + m) * type_bytes(d.type);
  }

  // What cuBLAS documents as invalid: shapes that do not agree, leading dimensions below the rows. And what it
  // leaves undefined, reported loudly here: operands outside device memory, D overlapping an input.
  cublasStatus_t check() const {
    if (m <= 0 || n <= 0 || k <= 0) return CUBLAS_STATUS_INVALID_VALUE;
    if (a.rows != (trans_a ? k : m) || a.cols != (trans_a ? m : k)) return CUBLAS_STATUS_INVALID_VALUE;
    if (b.rows != (trans_b ? n : k) || b.cols != (trans_b ? k : n)) return CUBLAS_STATUS_INVALID_VALUE;
    if (d.rows != m || d.cols != n || c.rows != m || c.cols != n) return CUBLAS_STATUS_INVALID_VALUE;
    for (const Matrix* x : {&a, &b, &c, &d}) {
      if (x->ld < x->rows || x->ld < 1 || !known_type(x->type)) return CUBLAS_STATUS_INVALID_VALUE;
    }
    if (has_aux() && (aux == nullptr || aux_ld < m)) return CUBLAS_STATUS_INVALID_VALUE;
    if (has_bias() && bias == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
    if (!emu::in_device_allocation(a.p, a.bytes())) misuse("A outside a device allocation");
    if (!emu::in_device_allocation(b.p, b.bytes())) misuse("B outside a device allocation");
    if (!emu::in_device_allocation(d.p, d.bytes())) misuse("D outside a device allocation");
    if (beta != 0.0f && !emu::in_device_allocation(c.p, c.bytes())) misuse("C outside a device allocation");
    if (c.p != d.p && overlap(c.p, c.bytes(), d.p, d.bytes())) misuse("C and D overlap without being the same");
    if (c.p == d.p && (c.ld != d.ld || c.type != d.type)) misuse("C and D alias with different layouts");
    if (overlap(d.p, d.bytes(), a.p, a.bytes()) || overlap(d.p, d.bytes(), b.p, b.bytes())) {
      misuse("D overlaps A or B (cuBLAS does not compute in place)");
    }
    const std::size_t bias_bytes = static_cast<std::size_t>(bias_length()) * type_bytes(bias_type);
    if (has_bias()) {
      if (!emu::in_device_allocation(bias, bias_bytes)) misuse("the epilogue's bias outside a device allocation");
      if (overlap(bias, bias_bytes, d.p, d.bytes())) misuse("the epilogue's bias vector overlaps D");
    }
    if (has_aux()) {
      if (!emu::in_device_allocation(aux, aux_bytes())) misuse("the epilogue's aux outside a device allocation");
      if (overlap(aux, aux_bytes(), d.p, d.bytes())) misuse("the epilogue's aux matrix overlaps D");
    }
    return CUBLAS_STATUS_SUCCESS;
  }

  float op_a(int64_t i, int64_t l) const {
    return load(a.p, a.type, static_cast<std::size_t>(trans_a ? l + i * a.ld : i + l * a.ld));
  }
  float op_b(int64_t l, int64_t j) const {
    return load(b.p, b.type, static_cast<std::size_t>(trans_b ? j + l * b.ld : l + j * b.ld));
  }

  void run() const {
    void* dst = const_cast<void*>(d.p);
    std::vector<float> row_sums(static_cast<std::size_t>(m), 0.0f);
    // C is read whole before D is written, so C == D works as in place.
    std::vector<float> result(static_cast<std::size_t>(m * n));
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t i = 0; i < m; ++i) {
        float acc = 0.0f;
        for (int64_t l = 0; l < k; ++l) acc += op_a(i, l) * op_b(l, j);
        float v = alpha * acc;
        if (beta != 0.0f) v += beta * load(c.p, c.type, static_cast<std::size_t>(i + j * c.ld));
        result[static_cast<std::size_t>(i + j * m)] = v;
      }
    }
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t i = 0; i < m; ++i) {
        float v = result[static_cast<std::size_t>(i + j * m)];
        const std::size_t at_aux = static_cast<std::size_t>(i + j * aux_ld);
        switch (epilogue) {
          case Epilogue::kBias:
          case Epilogue::kGeluBias:
          case Epilogue::kGeluAuxBias:
            v += load(bias, bias_type, static_cast<std::size_t>(i));
            break;
          default:
            break;
        }
        if (epilogue == Epilogue::kGeluAux || epilogue == Epilogue::kGeluAuxBias) store(aux, d.type, at_aux, v);
        if (epilogue == Epilogue::kGelu || epilogue == Epilogue::kGeluBias || epilogue == Epilogue::kGeluAux ||
            epilogue == Epilogue::kGeluAuxBias) {
          v = gelu(v);
        }
        if (epilogue == Epilogue::kDGelu || epilogue == Epilogue::kDGeluBGrad) {
          v *= gelu_derivative(load(aux, d.type, at_aux));
        }
        if (epilogue == Epilogue::kDGeluBGrad) row_sums[static_cast<std::size_t>(i)] += v;
        store(dst, d.type, static_cast<std::size_t>(i + j * d.ld), v);
      }
    }
    if (epilogue == Epilogue::kDGeluBGrad) {
      for (int64_t i = 0; i < m; ++i) store(bias, bias_type, static_cast<std::size_t>(i), row_sums[i]);
    } else if (epilogue == Epilogue::kBGradA) {
      for (int64_t i = 0; i < m; ++i) {
        float s = 0.0f;
        for (int64_t l = 0; l < k; ++l) s += op_a(i, l);
        store(bias, bias_type, static_cast<std::size_t>(i), s);
      }
    } else if (epilogue == Epilogue::kBGradB) {
      for (int64_t j = 0; j < n; ++j) {
        float s = 0.0f;
        for (int64_t l = 0; l < k; ++l) s += op_b(l, j);
        store(bias, bias_type, static_cast<std::size_t>(j), s);
      }
    }
  }
};

cublasStatus_t enqueue_gemm(const Gemm& g, cudaStream_t stream) {
  const cublasStatus_t status = g.check();
  if (status != CUBLAS_STATUS_SUCCESS) return status;
  emu::enqueue(stream, [g] { g.run(); });
  return CUBLAS_STATUS_SUCCESS;
}

// The fake's fields inside cuBLASLt's semi-opaque structs, marked so that an uninitialised struct is caught.
constexpr uint32_t kMagic = 0xb1a5f00d;
struct Layout {
  uint32_t magic;
  cudaDataType_t type;
  int64_t rows, cols, ld;
};
struct Desc {
  uint32_t magic;
  int32_t trans_a, trans_b;
  uint32_t epilogue;
  void* bias;
  int32_t bias_type;  // -1: D's type
  void* aux;
  int64_t aux_ld;
};
struct Preference {
  uint32_t magic;
  uint64_t max_workspace;
};
static_assert(sizeof(Layout) <= sizeof(cublasLtMatrixLayoutOpaque_t), "Layout must fit the opaque struct");
static_assert(sizeof(Desc) <= sizeof(cublasLtMatmulDescOpaque_t), "Desc must fit the opaque struct");
static_assert(sizeof(Preference) <= sizeof(cublasLtMatmulPreferenceOpaque_t), "Preference must fit");

template <typename S, typename O>
S& fields(O* opaque) {
  S& s = *reinterpret_cast<S*>(opaque->data);
  if (s.magic != kMagic) misuse("a cuBLASLt descriptor used before its Init");
  return s;
}

template <typename V>
bool read_attribute(V* out, const void* buf, std::size_t size) {
  if (size != sizeof(V)) return false;
  std::memcpy(out, buf, sizeof(V));
  return true;
}

// D = alpha·op(A)·op(B) + beta·C and the epilogue, from a descriptor and layouts.
Gemm lt_gemm(const Desc& desc, const Layout& a, const Layout& b, const Layout& c, const Layout& d) {
  Gemm g;
  g.trans_a = desc.trans_a != CUBLAS_OP_N;
  g.trans_b = desc.trans_b != CUBLAS_OP_N;
  g.m = d.rows;
  g.n = d.cols;
  g.k = g.trans_a ? a.rows : a.cols;
  g.a = Matrix{nullptr, a.type, a.rows, a.cols, a.ld};
  g.b = Matrix{nullptr, b.type, b.rows, b.cols, b.ld};
  g.c = Matrix{nullptr, c.type, c.rows, c.cols, c.ld};
  g.d = Matrix{nullptr, d.type, d.rows, d.cols, d.ld};
  g.epilogue = epilogue_of(desc.epilogue);
  g.bias = desc.bias;
  g.bias_type = desc.bias_type >= 0 ? static_cast<cudaDataType_t>(desc.bias_type) : d.type;
  g.aux = desc.aux;
  g.aux_ld = desc.aux_ld;
  return g;
}

}  // namespace

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                            int k, const void* alpha, const void* A, cudaDataType_t Atype, int lda, const void* B,
                            cudaDataType_t Btype, int ldb, const void* beta, void* C, cudaDataType_t Ctype, int ldc,
                            cublasComputeType_t computeType, cublasGemmAlgo_t) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (computeType != CUBLAS_COMPUTE_32F) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (transa == CUBLAS_OP_C || transb == CUBLAS_OP_C) return CUBLAS_STATUS_NOT_SUPPORTED;
  Gemm g;
  g.m = m;
  g.n = n;
  g.k = k;
  g.trans_a = transa == CUBLAS_OP_T;
  g.trans_b = transb == CUBLAS_OP_T;
  g.a = Matrix{A, Atype, g.trans_a ? k : m, g.trans_a ? m : k, lda};
  g.b = Matrix{B, Btype, g.trans_b ? n : k, g.trans_b ? k : n, ldb};
  g.c = Matrix{C, Ctype, m, n, ldc};
  g.d = g.c;
  g.alpha = *static_cast<const float*>(alpha);  // host pointer mode, fp32 scale type: read at the call
  g.beta = *static_cast<const float*>(beta);
  return enqueue_gemm(g, handle->stream);
}

cublasStatus_t cublasLtMatrixLayoutInit(cublasLtMatrixLayout_t layout, cudaDataType type, uint64_t rows, uint64_t cols,
                                        int64_t ld) {
  if (layout == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  std::memset(layout, 0, sizeof *layout);
  *reinterpret_cast<Layout*>(layout->data) =
      Layout{kMagic, type, static_cast<int64_t>(rows), static_cast<int64_t>(cols), ld};
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescInit(cublasLtMatmulDesc_t desc, cublasComputeType_t compute, cudaDataType_t scale) {
  if (desc == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  if (compute != CUBLAS_COMPUTE_32F || scale != CUDA_R_32F) return CUBLAS_STATUS_NOT_SUPPORTED;
  std::memset(desc, 0, sizeof *desc);
  *reinterpret_cast<Desc*>(desc->data) =
      Desc{kMagic, CUBLAS_OP_N, CUBLAS_OP_N, CUBLASLT_EPILOGUE_DEFAULT, nullptr, -1, nullptr, 0};
  return CUBLAS_STATUS_SUCCESS;
}

// A value of the wrong size is CUBLAS_STATUS_INVALID_VALUE, as in cuBLASLt.
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
                                              const void* buf, std::size_t size) {
  Desc& d = fields<Desc>(desc);
  bool ok = false;
  switch (attr) {
    case CUBLASLT_MATMUL_DESC_TRANSA: ok = read_attribute(&d.trans_a, buf, size); break;
    case CUBLASLT_MATMUL_DESC_TRANSB: ok = read_attribute(&d.trans_b, buf, size); break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE: ok = read_attribute(&d.epilogue, buf, size); break;
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER: ok = read_attribute(&d.bias, buf, size); break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER: ok = read_attribute(&d.aux, buf, size); break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD: ok = read_attribute(&d.aux_ld, buf, size); break;
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: ok = read_attribute(&d.bias_type, buf, size); break;
  }
  return ok ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
}

cublasStatus_t cublasLtMatmulPreferenceInit(cublasLtMatmulPreference_t pref) {
  if (pref == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  std::memset(pref, 0, sizeof *pref);
  *reinterpret_cast<Preference*>(pref->data) = Preference{kMagic, 0};
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr, const void* buf,
                                                    std::size_t size) {
  Preference& p = fields<Preference>(pref);
  uint32_t ignored = 0;
  switch (attr) {
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES:
      return read_attribute(&p.max_workspace, buf, size) ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
    case CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES:
      return read_attribute(&ignored, buf, size) ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
  }
  return CUBLAS_STATUS_INVALID_VALUE;
}

// One candidate for every valid GEMM (no split-K, no workspace), or none at all under EMU_CUBLASLT=none, which
// sends every GEMM down linear.cu's fallbacks (cublasGemmEx, bias and activation kernels, column sums).
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                                              cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                              cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                              cublasLtMatmulPreference_t pref, int requested,
                                              cublasLtMatmulHeuristicResult_t results[], int* returned) {
  *returned = 0;
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (requested < 1) return CUBLAS_STATUS_INVALID_VALUE;
  fields<Preference>(pref);
  const Gemm g = lt_gemm(fields<Desc>(desc), fields<Layout>(a), fields<Layout>(b), fields<Layout>(c),
                         fields<Layout>(d));
  if (g.m <= 0 || g.n <= 0 || g.k <= 0 || g.a.rows != (g.trans_a ? g.k : g.m) ||
      g.b.rows != (g.trans_b ? g.n : g.k) || g.b.cols != (g.trans_b ? g.k : g.n)) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  const char* mode = std::getenv("EMU_CUBLASLT");
  if (mode != nullptr && std::strcmp(mode, "none") == 0) return CUBLAS_STATUS_NOT_SUPPORTED;
  cublasLtMatmulHeuristicResult_t& r = results[0];
  std::memset(&r, 0, sizeof r);
  r.algo.data[0] = kMagic;
  r.workspaceSize = 0;
  r.state = CUBLAS_STATUS_SUCCESS;
  r.wavesCount = 1.0f;
  *returned = 1;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulAlgoConfigGetAttribute(const cublasLtMatmulAlgo_t* algo,
                                                    cublasLtMatmulAlgoConfigAttributes_t attr, void* buf,
                                                    std::size_t size, std::size_t* written) {
  if (algo == nullptr || algo->data[0] != kMagic) return CUBLAS_STATUS_INVALID_VALUE;
  if (attr != CUBLASLT_ALGO_CONFIG_SPLITK_NUM || size != sizeof(int32_t)) return CUBLAS_STATUS_INVALID_VALUE;
  const int32_t splits = 1;
  std::memcpy(buf, &splits, sizeof splits);
  if (written != nullptr) *written = sizeof splits;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha, const void* A,
                              cublasLtMatrixLayout_t Adesc, const void* B, cublasLtMatrixLayout_t Bdesc,
                              const void* beta, const void* C, cublasLtMatrixLayout_t Cdesc, void* D,
                              cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t* algo, void*, std::size_t,
                              cudaStream_t stream) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (algo == nullptr || algo->data[0] != kMagic) return CUBLAS_STATUS_INVALID_VALUE;
  Gemm g = lt_gemm(fields<Desc>(desc), fields<Layout>(Adesc), fields<Layout>(Bdesc), fields<Layout>(Cdesc),
                   fields<Layout>(Ddesc));
  g.a.p = A;
  g.b.p = B;
  g.c.p = C;
  g.d.p = D;
  g.alpha = *static_cast<const float*>(alpha);
  g.beta = *static_cast<const float*>(beta);
  return enqueue_gemm(g, stream);
}
