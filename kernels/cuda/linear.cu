// Fully connected layer on the GPU: cuBLASLt GEMMs whose epilogues add the bias, apply the tanh GELU and its
// derivative, and reduce bias gradients, wherever cuBLASLt has an algorithm for that GEMM; otherwise the same
// results from cublasGemmEx, a bias broadcast, the activation kernels and a deterministic two-pass column sum.
//
// Row-major to column-major. cuBLAS(Lt) computes D = α·op(A)·op(B) + β·C on column-major matrices. A row-major
// [r, c] buffer with leading dimension c is, read column-major, the c × r matrix Mᵀ. So every row-major
// product Z = X·Y is issued as its transpose Zᵀ = Yᵀ·Xᵀ, whose operands are the buffers as they lie.
// Below, "buf(r×c)" is the column-major view of a buffer (= the transpose of its row-major meaning); C and D
// are always the same buffer with the same layout.
//
//   y[rows, out] = x[rows, in] · W[out, in]ᵀ (+ b[out])                 linear_forward, linear_activation_forward
//     yᵀ (out × rows) = W · xᵀ.  W lies as Wᵀ (in × out, ld in) → opA = T gives W (out × in);
//     x lies as xᵀ (in × rows, ld in) → opB = N.  m = out, n = rows, k = in; D = y lies as yᵀ, ldd = out.
//     The bias epilogue adds a vector along D's rows (length m = out) to every column: b[out] broadcast over
//     the rows of y. GELU_AUX(_BIAS) writes the pre-activation (aux) in D's layout: pre lies as preᵀ, aux ld = out.
//   dx[rows, in] = dy[rows, out] · W[out, in]                      linear_backward, linear_activation_backward_data
//     dxᵀ (in × rows) = Wᵀ · dyᵀ.  W lies as Wᵀ (in × out, ld in) → opA = N;
//     dy lies as dyᵀ (out × rows, ld out) → opB = N.  m = in, n = rows, k = out; D = dx, ldd = in;
//     β = 1 when accumulating into dx, else 0.
//     DGELU(_BGRAD) (for dpre, the same product) multiplies D by GELU'(aux) with aux = pre[rows, in] lying as
//     preᵀ (in × rows, ld in, D's layout), and BGRAD writes the bias gradient along D's rows (length m = in):
//     dbias[c] = Σ over D's columns (the rows of dpre) of dpre[·, c].
//   dw[out, in] = dy[rows, out]ᵀ · x[rows, in]                                                   linear_backward
//     dwᵀ (in × out) = xᵀ · dy.  x lies as xᵀ (in × rows, ld in) → opA = N;
//     dy lies as dyᵀ (out × rows, ld out) → opB = T gives dy (rows × out).  m = in, n = out, k = rows;
//     D = dw lies as dwᵀ, ldd = in; β = 0. The bias gradient db[out] = Σ_rows dy is op(B) = dy (k × n) summed
//     over k: BGRADB (one value per column of D, length n = out). (BGRADA would sum op(A) = xᵀ over k.)
//
// Types: T = float → CUDA_R_32F everywhere with CUBLAS_COMPUTE_32F (cuBLASLt uses TF32 only when asked for
// CUBLAS_COMPUTE_32F_FAST_TF32, so fp32 matches the CPU); T = bf16 → CUDA_R_16BF A/B and D with fp32 compute and
// scale, except dw whose C/D are CUDA_R_32F (bf16 inputs, fp32 output), and dx in the mixed overload, whose C/D
// are CUDA_R_32F too (accumulating with β = 1 reads and writes fp32). Epilogue vectors: the forward bias has
// D's type (T); bias gradients are fp32 (cuBLASLt's default is D's type: fp32 for dw's BGRADB, asked for
// explicitly with CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE for a bf16 dpre's DGELU_BGRAD, and that combination falls
// back to a column sum if cuBLASLt has no algorithm for it). The GELU aux (pre) has D's type, T: the default.
//
// GELU epilogues. NVIDIA's cuBLAS documentation (cublasLtEpilogue_t) and cublasLt.h describe CUBLASLT_EPILOGUE_GELU*
// only as "GELU point-wise transform" and DGELU as "GELU gradient", without naming the formula. The frameworks that
// use them treat them as the tanh approximation 0.5x(1 + tanh(√(2/π)(x + 0.044715x³))): PyTorch's decomposition of
// aten._addmm_activation (whose CUDA kernel is cuBLASLt's GELU_BIAS epilogue) is gelu(approximate="tanh") for CUDA
// tensors and exact gelu for CPU ones; NVIDIA's Transformer Engine uses GELU_AUX_BIAS / DGELU_BGRAD in the GEMMs
// of the same MLPs whose unfused GELU kernels it writes in the tanh form. Not documented, so checked: only
// Activation::kGeluTanh ("gelu_new", "gelu_pytorch_tanh") is fused; BERT and SciBERT's exact erf GELU (kGelu)
// runs as bias epilogue + activation kernel. tests/cuda/test_cuda_linear_epilogues.cpp checks the fused forward
// and backward against the tanh twin and tells the epilogue's GELU from the erf one. RELU_AUX_BIAS is not used:
// its aux is a bit mask, not the pre-activation that backward reads.
//
// Algorithm cache. cublasLtMatmulAlgoGetHeuristic runs once per GEMM key (device; opA, opB; m, n, k; lda, ldb, ldd;
// A, B, D and bias types; epilogue; aux ld; the alignment of the A, B, C/D, bias and aux pointers, capped at 256
// bytes, passed to the heuristic as minimum alignments since algorithms may require more; the workspace size;
// whether split-K is excluded) and its choice, or the absence of one, is kept in a process-wide map under a
// mutex. The operation descriptor and the matrix layouts are re-initialised on the stack for every call
// (cublasLt*Init into the semi-opaque structs: no allocation), since the descriptor carries that call's bias and
// aux pointers; so a steady-state call is a mutex-guarded map lookup plus host-side descriptor set-up, with no
// allocation and no synchronisation. Packed batches change rows (= T) from step to step: each new T costs one
// heuristic query per GEMM kind (host only) and one map entry, bounded by the number of distinct T values.
//
// Determinism. The preference allows split-K only with CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE (partials in fp32,
// reduced by a separate pass in a fixed order): no in-place or output-type reduction, the cuBLASLt counterpart of
// the handle's CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION. GEMMs whose epilogue reduces a bias gradient
// take the best heuristic candidate that does not split K at all, since how a split bias-gradient reduction is
// ordered is not documented; none → the column-sum fallback.
#include "kernels/linear.h"

#include <cublasLt.h>
#include <cublas_v2.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <type_traits>

#include "kernels/cuda/common.cuh"

namespace bertrain {

namespace {

constexpr int kThreads = 256;

// Policy switches, to revisit on new hardware or cuBLAS versions.
// Fold db = Σ_rows dy into the dw GEMM (BGRADB) when cuBLASLt has a candidate without split-K. dw's GEMM is long
// in k (= rows) and small in m × n, the shape split-K exists for, so the fused candidate may be slower than the
// plain GEMM plus a column sum. BERTRAIN_FUSE_BIAS_GRAD=0 turns the fusion off for one process, to time both ways:
// on an H100 with cuBLAS 13.0 (2026-11-27) BERT-base's full-row bf16 step took 69.43 ms fused, 69.44 ms without.
bool fuse_bias_grad() {
  static const bool fuse = [] {
    const char* v = std::getenv("BERTRAIN_FUSE_BIAS_GRAD");
    return v == nullptr || std::string(v) != "0";
  }();
  return fuse;
}
// Use the forward GELU epilogue in fp32 mode too. fp32 mode exists to match the CPU twin: the epilogue met
// test_cuda_linear_epilogues's fp32 tolerance (1e-4) on an H100 with cuBLAS 13.0 (2026-11-27); if a cuBLAS version
// evaluates it less accurately, this goes false (fp32 then runs bias epilogue + activation kernel, as for the
// exact GELU).
constexpr bool kFuseGeluEpilogueInFp32 = true;
// The backward's DGELU / DGELU_BGRAD epilogues stay off in both precisions: on that H100 and cuBLAS 13.0 the
// epilogue's derivative of the tanh GELU was 0.69 % off at some inputs (fp32, one row, where dbias = dpre: 0.0042755
// against 0.0043052), its fp32 dpre missed the twin's tolerance at 300 rows (1.05e-4 against 1e-4 + 1e-5·|ref|),
// and in bf16 its bias gradients erred by up to 0.8 % of Σ|terms|, as much as two bf16 roundings. The GEMM, the
// activation-backward kernel and the column sum give the exact derivative, as for the erf GELU.
constexpr bool kFuseDGeluEpilogue = false;

// Heuristic candidates examined per GEMM key (the first usable one is taken: they come best first).
constexpr int kHeuristicCandidates = 8;

template <typename T>
bool gelu_epilogue_allowed() {
  return std::is_same_v<T, bf16> || kFuseGeluEpilogueInFp32;
}

bool valid_activation(Activation act) {
  return act == Activation::kGelu || act == Activation::kGeluTanh || act == Activation::kRelu ||
         act == Activation::kTanh;
}

// ---- Path counters (linear_path_counts_cuda) -------------------------------------------------------------------

struct PathCounters {
  std::atomic<std::uint64_t> lt_matmuls{0}, gemm_ex_fallbacks{0}, bias_epilogues{0}, gelu_epilogues{0},
      dgelu_epilogues{0}, bgrad_epilogues{0}, column_sum_fallbacks{0};
};

PathCounters& counters() {
  static PathCounters c;
  return c;
}

void count(std::atomic<std::uint64_t>& counter) { counter.fetch_add(1, std::memory_order_relaxed); }

// ---- cublasGemmEx: the fallback ---------------------------------------------------------------------------------

// C (m × n, column-major) = op(A) · op(B) + beta · C with fp32 compute (alpha = 1).
void gemm(const GpuHandles& handles, cublasOperation_t op_a, cublasOperation_t op_b, int m, int n, int k,
          const void* a, cudaDataType_t a_type, int lda, const void* b, cudaDataType_t b_type, int ldb, float beta,
          void* c, cudaDataType_t c_type, int ldc) {
  const float alpha = 1.0f;
  BERTRAIN_CUBLAS_CHECK(cublasGemmEx(handles.blas, op_a, op_b, m, n, k, &alpha, a, a_type, lda, b, b_type, ldb, &beta,
                                     c, c_type, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

// ---- cuBLASLt ---------------------------------------------------------------------------------------------------

// One GEMM D = op(A)·op(B) + beta·D (column-major, C = D) and its epilogue, as the launchers below describe it.
struct LtGemm {
  cublasOperation_t op_a = CUBLAS_OP_N, op_b = CUBLAS_OP_N;
  int m = 0, n = 0, k = 0;
  const void* a = nullptr;
  cudaDataType_t a_type = CUDA_R_32F;
  int lda = 0;
  const void* b = nullptr;
  cudaDataType_t b_type = CUDA_R_32F;
  int ldb = 0;
  void* d = nullptr;
  cudaDataType_t d_type = CUDA_R_32F;
  int ldd = 0;
  float beta = 0.0f;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void* bias = nullptr;  // BIAS: the vector added; BGRAD*: the gradient written
  cudaDataType_t bias_type = CUDA_R_32F;
  const void* aux = nullptr;   // GELU_AUX*: the pre-activation written; DGELU*: the pre-activation read
  int64_t aux_ld = 0;
  bool no_split_k = false;     // only candidates that do not split K (bias-gradient epilogues)
};

// The largest power of two dividing the address, capped at 256 (cuBLASLt's default assumed alignment).
uint32_t pointer_alignment(const void* p) {
  const auto address = reinterpret_cast<std::uintptr_t>(p);
  uint32_t alignment = 1;
  while (alignment < 256 && (address & alignment) == 0) alignment <<= 1;
  return alignment;
}

constexpr std::size_t kKeyFields = 22;
using LtKey = std::array<int64_t, kKeyFields>;

struct LtChoice {
  bool found = false;
  cublasLtMatmulAlgo_t algo{};
};

std::mutex& lt_cache_mutex() {
  static std::mutex mutex;
  return mutex;
}

std::map<LtKey, LtChoice>& lt_cache() {
  static std::map<LtKey, LtChoice> cache;
  return cache;
}

template <typename V>
void set_desc(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attribute, const V& value) {
  BERTRAIN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, attribute, &value, sizeof(value)));
}

template <typename V>
void set_preference(cublasLtMatmulPreference_t preference, cublasLtMatmulPreferenceAttributes_t attribute,
                    const V& value) {
  BERTRAIN_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(preference, attribute, &value, sizeof(value)));
}

bool splits_k(const cublasLtMatmulAlgo_t& algo) {
  int32_t splits = 1;
  std::size_t written = 0;
  const cublasStatus_t status =
      cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splits, sizeof(splits), &written);
  return status != CUBLAS_STATUS_SUCCESS || splits > 1;  // unknown counts as split
}

// The first usable heuristic candidate for this GEMM, or found = false. Host only.
LtChoice choose_algorithm(cublasLtHandle_t lt, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a_layout,
                          cublasLtMatrixLayout_t b_layout, cublasLtMatrixLayout_t d_layout, const LtGemm& g,
                          std::size_t workspace_bytes) {
  cublasLtMatmulPreferenceOpaque_t preference_storage;
  const cublasLtMatmulPreference_t preference = &preference_storage;
  BERTRAIN_CUBLAS_CHECK(cublasLtMatmulPreferenceInit(preference));
  set_preference(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, static_cast<uint64_t>(workspace_bytes));
  set_preference(preference, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                 static_cast<uint32_t>(CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE));
  set_preference(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, pointer_alignment(g.a));
  set_preference(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, pointer_alignment(g.b));
  set_preference(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, pointer_alignment(g.d));
  set_preference(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, pointer_alignment(g.d));
  cublasLtMatmulHeuristicResult_t candidates[kHeuristicCandidates] = {};
  int returned = 0;
  // NOT_SUPPORTED (no algorithm for this configuration) and INVALID_VALUE (a combination this cuBLASLt rejects,
  // e.g. an fp32 bias gradient of a bf16 D) both mean: take the fallback.
  const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(lt, desc, a_layout, b_layout, d_layout, d_layout,
                                                               preference, kHeuristicCandidates, candidates, &returned);
  LtChoice choice;
  if (status != CUBLAS_STATUS_SUCCESS) return choice;
  for (int i = 0; i < returned; ++i) {
    const cublasLtMatmulHeuristicResult_t& c = candidates[i];
    if (c.state != CUBLAS_STATUS_SUCCESS || c.workspaceSize > workspace_bytes) continue;
    if (g.no_split_k && splits_k(c.algo)) continue;
    choice.found = true;
    choice.algo = c.algo;
    break;
  }
  return choice;
}

// Runs g through cublasLtMatmul with the cached algorithm for its key; false (nothing launched) when cuBLASLt has
// none, so that the caller takes its fallback.
bool lt_gemm(const GpuHandles& handles, const LtGemm& g) {
  const auto lt = reinterpret_cast<cublasLtHandle_t>(handles.blas);
  const std::size_t workspace_bytes = handles.gemm_workspace != nullptr ? handles.gemm_workspace_bytes : 0;

  cublasLtMatmulDescOpaque_t desc_storage;
  const cublasLtMatmulDesc_t desc = &desc_storage;
  BERTRAIN_CUBLAS_CHECK(cublasLtMatmulDescInit(desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  set_desc(desc, CUBLASLT_MATMUL_DESC_TRANSA, static_cast<int32_t>(g.op_a));
  set_desc(desc, CUBLASLT_MATMUL_DESC_TRANSB, static_cast<int32_t>(g.op_b));
  set_desc(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, static_cast<uint32_t>(g.epilogue));
  if (g.bias != nullptr) {
    set_desc(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, g.bias);
    if (g.bias_type != g.d_type) set_desc(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, static_cast<int32_t>(g.bias_type));
  }
  if (g.aux != nullptr) {
    set_desc(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, g.aux);
    set_desc(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, g.aux_ld);
  }
  // The stored matrices: op(A) is m × k, so A is m × k (N) or k × m (T); op(B) is k × n likewise; D is m × n.
  cublasLtMatrixLayoutOpaque_t a_storage, b_storage, d_storage;
  const cublasLtMatrixLayout_t a_layout = &a_storage, b_layout = &b_storage, d_layout = &d_storage;
  const bool a_n = g.op_a == CUBLAS_OP_N, b_n = g.op_b == CUBLAS_OP_N;
  BERTRAIN_CUBLAS_CHECK(cublasLtMatrixLayoutInit(a_layout, g.a_type, a_n ? g.m : g.k, a_n ? g.k : g.m, g.lda));
  BERTRAIN_CUBLAS_CHECK(cublasLtMatrixLayoutInit(b_layout, g.b_type, b_n ? g.k : g.n, b_n ? g.n : g.k, g.ldb));
  BERTRAIN_CUBLAS_CHECK(cublasLtMatrixLayoutInit(d_layout, g.d_type, g.m, g.n, g.ldd));

  int device = 0;
  BERTRAIN_CUDA_CHECK(cudaGetDevice(&device));
  const LtKey key = {device,
                     g.op_a,
                     g.op_b,
                     g.m,
                     g.n,
                     g.k,
                     g.lda,
                     g.ldb,
                     g.ldd,
                     g.a_type,
                     g.b_type,
                     g.d_type,
                     static_cast<int64_t>(g.epilogue),
                     g.bias != nullptr ? static_cast<int64_t>(g.bias_type) : -1,
                     g.aux_ld,
                     pointer_alignment(g.a),
                     pointer_alignment(g.b),
                     pointer_alignment(g.d),
                     g.bias != nullptr ? pointer_alignment(g.bias) : 0,
                     g.aux != nullptr ? pointer_alignment(g.aux) : 0,
                     static_cast<int64_t>(workspace_bytes),
                     g.no_split_k ? 1 : 0};
  LtChoice choice;
  {
    const std::lock_guard<std::mutex> lock(lt_cache_mutex());
    std::map<LtKey, LtChoice>& cache = lt_cache();
    const auto found = cache.find(key);
    if (found != cache.end()) {
      choice = found->second;
    } else {
      // The heuristic sees the descriptor's bias and aux pointers (it derives their alignment from them): this
      // call's, whose alignment is part of the key.
      choice = choose_algorithm(lt, desc, a_layout, b_layout, d_layout, g, workspace_bytes);
      cache.emplace(key, choice);
    }
  }
  if (!choice.found) return false;
  const float alpha = 1.0f;
  BERTRAIN_CUBLAS_CHECK(cublasLtMatmul(lt, desc, &alpha, g.a, a_layout, g.b, b_layout, &g.beta, g.d, d_layout, g.d,
                                       d_layout, &choice.algo, handles.gemm_workspace, workspace_bytes,
                                       handles.stream));
  count(counters().lt_matmuls);
  return true;
}

// g without its epilogue: cuBLASLt when it has an algorithm, else cublasGemmEx.
void plain_gemm(const GpuHandles& handles, LtGemm g) {
  g.epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  g.bias = nullptr;
  g.aux = nullptr;
  g.aux_ld = 0;
  g.no_split_k = false;
  if (lt_gemm(handles, g)) return;
  count(counters().gemm_ex_fallbacks);
  gemm(handles, g.op_a, g.op_b, g.m, g.n, g.k, g.a, g.a_type, g.lda, g.b, g.b_type, g.ldb, g.beta, g.d, g.d_type,
       g.ldd);
}

// The three products of the mapping at the top of the file.
// yᵀ (out × rows) = W · xᵀ.
template <typename T>
LtGemm forward_gemm(T* y, const T* x, const T* w, int rows, int in, int out) {
  constexpr cudaDataType_t type = cuda::CudaDataType<T>::value;
  LtGemm g;
  g.op_a = CUBLAS_OP_T;
  g.op_b = CUBLAS_OP_N;
  g.m = out;
  g.n = rows;
  g.k = in;
  g.a = w;
  g.a_type = type;
  g.lda = in;
  g.b = x;
  g.b_type = type;
  g.ldb = in;
  g.d = y;
  g.d_type = type;
  g.ldd = out;
  return g;
}

// dxᵀ (in × rows) = Wᵀ · dyᵀ (+ dxᵀ when beta = 1); dx in DX (T, or float in the mixed overload).
template <typename T, typename DX>
LtGemm data_gemm(DX* dx, const T* dy, const T* w, int rows, int in, int out, float beta) {
  constexpr cudaDataType_t type = cuda::CudaDataType<T>::value;
  LtGemm g;
  g.op_a = CUBLAS_OP_N;
  g.op_b = CUBLAS_OP_N;
  g.m = in;
  g.n = rows;
  g.k = out;
  g.a = w;
  g.a_type = type;
  g.lda = in;
  g.b = dy;
  g.b_type = type;
  g.ldb = out;
  g.d = dx;
  g.d_type = cuda::CudaDataType<DX>::value;
  g.ldd = in;
  g.beta = beta;
  return g;
}

// dwᵀ (in × out) = xᵀ · dy, written in fp32.
template <typename T>
LtGemm weight_gemm(float* dw, const T* dy, const T* x, int rows, int in, int out) {
  constexpr cudaDataType_t type = cuda::CudaDataType<T>::value;
  LtGemm g;
  g.op_a = CUBLAS_OP_N;
  g.op_b = CUBLAS_OP_T;
  g.m = in;
  g.n = out;
  g.k = rows;
  g.a = x;
  g.a_type = type;
  g.lda = in;
  g.b = dy;
  g.b_type = type;
  g.ldb = out;
  g.d = dw;
  g.d_type = CUDA_R_32F;
  g.ldd = in;
  return g;
}

bool ranges_overlap(const void* a, std::size_t a_bytes, const void* b, std::size_t b_bytes) {
  const auto a0 = reinterpret_cast<std::uintptr_t>(a), b0 = reinterpret_cast<std::uintptr_t>(b);
  return a0 < b0 + b_bytes && b0 < a0 + a_bytes;
}

// y[rows, cols] (=) b[cols] broadcast over rows (the fallback forward GEMM then adds x·Wᵀ with β = 1).
// Grid-stride over the rows·cols elements of y.
template <typename T>
__global__ void bias_broadcast_kernel(T* y, const T* b, std::size_t n, int cols) {
  const std::size_t stride = static_cast<std::size_t>(blockDim.x) * gridDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    y[i] = b[i % static_cast<std::size_t>(cols)];
  }
}

// First pass of the column sum: partial[chunk, col] (=) Σ x[r, col] over the rows r of chunk
// [chunk·rows_per_chunk, (chunk + 1)·rows_per_chunk) ∩ [0, rows), added in row order (0 for an empty chunk).
// Grid (ceil(cols / blockDim.x), kReductionChunks): one thread per (column, chunk); a warp reads 32
// consecutive columns of a row.
template <typename T>
__global__ void column_sum_partial_kernel(float* partial, const T* x, int rows, int cols, int rows_per_chunk) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  const int chunk = blockIdx.y;
  if (col >= cols) return;
  const long long first = static_cast<long long>(chunk) * rows_per_chunk;
  const long long last = first + rows_per_chunk < rows ? first + rows_per_chunk : rows;
  float sum = 0.0f;
  for (long long r = first; r < last; ++r) sum += cuda::load(x + static_cast<std::size_t>(r) * cols + col);
  partial[static_cast<std::size_t>(chunk) * cols + col] = sum;
}

// Second pass: out[col] (=) Σ_chunk partial[chunk, col], chunks added in order 0, 1, ..., so the result
// depends only on the input. One thread per column.
__global__ void column_sum_final_kernel(float* out, const float* partial, int cols) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (col >= cols) return;
  float sum = 0.0f;
  for (int chunk = 0; chunk < kReductionChunks; ++chunk) sum += partial[static_cast<std::size_t>(chunk) * cols + col];
  out[col] = sum;
}

}  // namespace

template <typename T>
void column_sum_cuda(const GpuHandles& handles, float* out, const T* x, int rows, int cols) {
  BERTRAIN_CHECK(rows > 0 && cols > 0, "column_sum_cuda: rows " << rows << ", cols " << cols);
  BERTRAIN_CHECK(out != nullptr && x != nullptr, "column_sum_cuda: null out or x");
  const std::size_t needed = static_cast<std::size_t>(kReductionChunks) * cols;
  BERTRAIN_CHECK(handles.workspace != nullptr && handles.workspace_elements >= needed,
                 "column_sum_cuda: " << cols << " columns need " << needed
                                     << " workspace floats (kReductionChunks × cols), the context has "
                                     << handles.workspace_elements << " (size it with gpu_reduction_workspace_elements)");
  BERTRAIN_CHECK(!ranges_overlap(out, cols * sizeof(float), handles.workspace, needed * sizeof(float)),
                 "column_sum_cuda: out lies in the reduction workspace");
  const int rows_per_chunk = (rows + kReductionChunks - 1) / kReductionChunks;
  const dim3 grid((cols + kThreads - 1) / kThreads, kReductionChunks);
  column_sum_partial_kernel<T><<<grid, kThreads, 0, handles.stream>>>(handles.workspace, x, rows, cols, rows_per_chunk);
  BERTRAIN_CUDA_CHECK_LAUNCH("column_sum_partial_kernel");
  column_sum_final_kernel<<<(cols + kThreads - 1) / kThreads, kThreads, 0, handles.stream>>>(out, handles.workspace,
                                                                                             cols);
  BERTRAIN_CUDA_CHECK_LAUNCH("column_sum_final_kernel");
}

template <typename T>
void linear_forward_cuda(const GpuHandles& handles, T* y, const T* x, const T* w, const T* b, int rows, int in,
                         int out) {
  BERTRAIN_CHECK(rows > 0 && in > 0 && out > 0,
                 "linear_forward_cuda: rows " << rows << ", in " << in << ", out " << out);
  BERTRAIN_CHECK(y != nullptr && x != nullptr && w != nullptr, "linear_forward_cuda: null y, x or w");
  BERTRAIN_CHECK(handles.blas != nullptr, "linear_forward_cuda: no cuBLAS handle");
  LtGemm g = forward_gemm(y, x, w, rows, in, out);
  if (b == nullptr) {
    plain_gemm(handles, g);
    return;
  }
  g.epilogue = CUBLASLT_EPILOGUE_BIAS;
  g.bias = b;
  g.bias_type = g.d_type;
  if (lt_gemm(handles, g)) {
    count(counters().bias_epilogues);
    return;
  }
  // Fallback: y = b broadcast, then y += x·Wᵀ (β = 1).
  const std::size_t n = static_cast<std::size_t>(rows) * out;
  bias_broadcast_kernel<T><<<cuda::elementwise_blocks(n, kThreads), kThreads, 0, handles.stream>>>(y, b, n, out);
  BERTRAIN_CUDA_CHECK_LAUNCH("bias_broadcast_kernel");
  g.beta = 1.0f;
  plain_gemm(handles, g);
}

template <typename T>
void linear_activation_forward_cuda(const GpuHandles& handles, T* y, T* pre, const T* x, const T* w, const T* b,
                                    int rows, int in, int out, Activation act) {
  BERTRAIN_CHECK(rows > 0 && in > 0 && out > 0,
                 "linear_activation_forward_cuda: rows " << rows << ", in " << in << ", out " << out);
  BERTRAIN_CHECK(y != nullptr && pre != nullptr && x != nullptr && w != nullptr,
                 "linear_activation_forward_cuda: null y, pre, x or w");
  BERTRAIN_CHECK(valid_activation(act), "linear_activation_forward_cuda: unknown activation value "
                                            << static_cast<int>(act));
  const std::size_t n = static_cast<std::size_t>(rows) * out;
  BERTRAIN_CHECK(!ranges_overlap(y, n * sizeof(T), pre, n * sizeof(T)),
                 "linear_activation_forward_cuda: y overlaps pre (pre is kept for backward)");
  BERTRAIN_CHECK(handles.blas != nullptr, "linear_activation_forward_cuda: no cuBLAS handle");
  // The epilogue's aux leading dimension (out) must be a multiple of 8.
  if (act == Activation::kGeluTanh && gelu_epilogue_allowed<T>() && out % 8 == 0) {
    LtGemm g = forward_gemm(y, x, w, rows, in, out);
    g.epilogue = b != nullptr ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
    g.bias = b;
    g.bias_type = g.d_type;
    g.aux = pre;
    g.aux_ld = out;
    if (lt_gemm(handles, g)) {
      count(counters().gelu_epilogues);
      return;
    }
  }
  linear_forward_cuda<T>(handles, pre, x, w, b, rows, in, out);
  activation_forward_cuda<T>(y, pre, n, act, handles.stream);
}

template <typename T>
void linear_activation_backward_data_cuda(const GpuHandles& handles, T* dpre, float* dbias, const T* dy, const T* w,
                                          const T* pre, int rows, int in, int out, Activation act) {
  BERTRAIN_CHECK(rows > 0 && in > 0 && out > 0,
                 "linear_activation_backward_data_cuda: rows " << rows << ", in " << in << ", out " << out);
  BERTRAIN_CHECK(dpre != nullptr && dy != nullptr && w != nullptr && pre != nullptr,
                 "linear_activation_backward_data_cuda: null dpre, dy, w or pre");
  BERTRAIN_CHECK(valid_activation(act), "linear_activation_backward_data_cuda: unknown activation value "
                                            << static_cast<int>(act));
  const std::size_t n = static_cast<std::size_t>(rows) * in;
  const std::size_t dpre_bytes = n * sizeof(T);
  BERTRAIN_CHECK(!ranges_overlap(dpre, dpre_bytes, dy, static_cast<std::size_t>(rows) * out * sizeof(T)) &&
                     !ranges_overlap(dpre, dpre_bytes, w, static_cast<std::size_t>(out) * in * sizeof(T)) &&
                     !ranges_overlap(dpre, dpre_bytes, pre, n * sizeof(T)),
                 "linear_activation_backward_data_cuda: dpre overlaps dy, w or pre");
  BERTRAIN_CHECK(dbias == nullptr || !ranges_overlap(dbias, static_cast<std::size_t>(in) * sizeof(float), dpre,
                                                     dpre_bytes),
                 "linear_activation_backward_data_cuda: dbias overlaps dpre");
  BERTRAIN_CHECK(handles.blas != nullptr, "linear_activation_backward_data_cuda: no cuBLAS handle");
  const LtGemm product = data_gemm(dpre, dy, w, rows, in, out, 0.0f);
  // The epilogue's aux leading dimension (in) must be a multiple of 8. DGELU_BGRAD first; without an algorithm
  // for it (e.g. no fp32 bias gradient of a bf16 dpre), DGELU and a column sum.
  if (kFuseDGeluEpilogue && act == Activation::kGeluTanh && gelu_epilogue_allowed<T>() && in % 8 == 0) {
    for (const bool with_bgrad : {true, false}) {
      if (with_bgrad && (dbias == nullptr || !fuse_bias_grad())) continue;
      LtGemm g = product;
      g.epilogue = with_bgrad ? CUBLASLT_EPILOGUE_DGELU_BGRAD : CUBLASLT_EPILOGUE_DGELU;
      g.bias = with_bgrad ? dbias : nullptr;
      g.bias_type = CUDA_R_32F;
      g.aux = pre;
      g.aux_ld = in;
      g.no_split_k = with_bgrad;
      if (!lt_gemm(handles, g)) continue;
      count(counters().dgelu_epilogues);
      if (with_bgrad) {
        count(counters().bgrad_epilogues);
      } else if (dbias != nullptr) {
        column_sum_cuda<T>(handles, dbias, dpre, rows, in);
        count(counters().column_sum_fallbacks);
      }
      return;
    }
  }
  plain_gemm(handles, product);
  activation_backward_cuda<T>(dpre, dpre, pre, n, act, handles.stream);
  if (dbias != nullptr) {
    column_sum_cuda<T>(handles, dbias, dpre, rows, in);
    count(counters().column_sum_fallbacks);
  }
}

namespace {

// The backward behind both launchers: dx in DX (T, or float in the mixed overload), dw and db float.
template <typename T, typename DX>
void launch_linear_backward(const GpuHandles& handles, DX* dx, float* dw, float* db, const T* dy, const T* x,
                            const T* w, int rows, int in, int out, bool accumulate_dx) {
  BERTRAIN_CHECK(rows > 0 && in > 0 && out > 0,
                 "linear_backward_cuda: rows " << rows << ", in " << in << ", out " << out);
  BERTRAIN_CHECK(dw != nullptr && dy != nullptr && x != nullptr && w != nullptr,
                 "linear_backward_cuda: null dw, dy, x or w");
  BERTRAIN_CHECK(handles.blas != nullptr, "linear_backward_cuda: no cuBLAS handle");
  if (dx != nullptr) plain_gemm(handles, data_gemm(dx, dy, w, rows, in, out, accumulate_dx ? 1.0f : 0.0f));
  const LtGemm weight = weight_gemm(dw, dy, x, rows, in, out);
  if (db != nullptr && fuse_bias_grad()) {
    LtGemm g = weight;
    g.epilogue = CUBLASLT_EPILOGUE_BGRADB;
    g.bias = db;
    g.bias_type = CUDA_R_32F;
    g.no_split_k = true;
    if (lt_gemm(handles, g)) {
      count(counters().bgrad_epilogues);
      return;
    }
  }
  plain_gemm(handles, weight);
  if (db != nullptr) {
    column_sum_cuda<T>(handles, db, dy, rows, out);
    count(counters().column_sum_fallbacks);
  }
}

}  // namespace

template <typename T>
void linear_backward_cuda(const GpuHandles& handles, T* dx, float* dw, float* db, const T* dy, const T* x, const T* w,
                          int rows, int in, int out, bool accumulate_dx) {
  launch_linear_backward(handles, dx, dw, db, dy, x, w, rows, in, out, accumulate_dx);
}

void linear_backward_cuda(const GpuHandles& handles, float* dx, float* dw, float* db, const bf16* dy, const bf16* x,
                          const bf16* w, int rows, int in, int out, bool accumulate_dx) {
  launch_linear_backward(handles, dx, dw, db, dy, x, w, rows, in, out, accumulate_dx);
}

LinearPathCounts linear_path_counts_cuda() {
  const PathCounters& c = counters();
  LinearPathCounts counts;
  counts.lt_matmuls = c.lt_matmuls.load();
  counts.gemm_ex_fallbacks = c.gemm_ex_fallbacks.load();
  counts.bias_epilogues = c.bias_epilogues.load();
  counts.gelu_epilogues = c.gelu_epilogues.load();
  counts.dgelu_epilogues = c.dgelu_epilogues.load();
  counts.bgrad_epilogues = c.bgrad_epilogues.load();
  counts.column_sum_fallbacks = c.column_sum_fallbacks.load();
  return counts;
}

template void linear_forward_cuda<float>(const GpuHandles&, float*, const float*, const float*, const float*, int, int,
                                         int);
template void linear_forward_cuda<bf16>(const GpuHandles&, bf16*, const bf16*, const bf16*, const bf16*, int, int, int);
template void linear_activation_forward_cuda<float>(const GpuHandles&, float*, float*, const float*, const float*,
                                                    const float*, int, int, int, Activation);
template void linear_activation_forward_cuda<bf16>(const GpuHandles&, bf16*, bf16*, const bf16*, const bf16*,
                                                   const bf16*, int, int, int, Activation);
template void linear_activation_backward_data_cuda<float>(const GpuHandles&, float*, float*, const float*,
                                                          const float*, const float*, int, int, int, Activation);
template void linear_activation_backward_data_cuda<bf16>(const GpuHandles&, bf16*, float*, const bf16*, const bf16*,
                                                         const bf16*, int, int, int, Activation);
template void linear_backward_cuda<float>(const GpuHandles&, float*, float*, float*, const float*, const float*,
                                          const float*, int, int, int, bool);
template void linear_backward_cuda<bf16>(const GpuHandles&, bf16*, float*, float*, const bf16*, const bf16*,
                                         const bf16*, int, int, int, bool);
template void column_sum_cuda<float>(const GpuHandles&, float*, const float*, int, int);
template void column_sum_cuda<bf16>(const GpuHandles&, float*, const bf16*, int, int);

}  // namespace bertrain
