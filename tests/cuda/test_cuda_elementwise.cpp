// GPU element-wise and row kernels against their CPU twins: activations (+ the fused bias), dropout (the
// CPU's mask bit for bit, flat, per sample and over the token slots of ragged packed batches), LayerNorm
// forward/backward (deterministic parameter gradients), the tensor ops (casts, y += x, sum of squares) and the
// packed-batch ops (token positions and dropout slots, [CLS] gather/scatter over ragged rows). Each kernel runs for
// T = float and T = bf16. Dropout and LayerNorm also in their mixed-precision overloads (the float residual stream
// and its gradient, with a T copy for the GEMMs), against the float CPU twins: float outputs to the float
// tolerances, T copies bit for bit.
//
// Tolerances (atol + rtol·|ref|):
// - float outputs of element-wise math: 1e-5 + 1e-5·|ref|. The CUDA math functions (erff, tanhf, expf) are
//   within 2 ulp of glibc's, and reductions over a row differ from the CPU's sequential order by a few ulp
//   of the partial sums; 1e-5 relative is about 80 ulp.
// - bf16 outputs: 1e-4 + 1e-2·|ref|. The kernel computes the CPU twin's float value from the same
//   (bf16-representable) inputs and rounds it once to bf16: 8 significant bits, at most 2^-9 ≈ 0.2% relative,
//   or 2^-8 when float-order noise moves the value across a rounding boundary; 1e-2 leaves a 2.5× margin.
// - Copies, masks, casts and single additions are exact, so they are compared bit for bit.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "core/bf16.h"
#include "core/cuda/device_buffer.h"
#include "core/cuda/gpu_context.h"
#include "core/cuda/gpu_handles.h"
#include "core/error.h"
#include "kernels/activation.h"
#include "kernels/dropout.h"
#include "kernels/layernorm.h"
#include "kernels/packed.h"
#include "kernels/tensor_ops.h"
#include "tests/cuda/gpu_test.h"
#include "tests/tolerance.h"

namespace bertrain {
namespace {

using testing::all_close;
using testing::bf16_rounded;
using testing::describe_lengths;
using testing::poison;
using testing::ragged_row_sets;
using testing::RaggedRows;
using testing::random_floats;
using testing::row_offsets;
using testing::to_bf16;
using testing::to_float;

constexpr int kMaxCols = 1024;  // the widest row these tests reduce over

// One context for the whole binary (created by the first GPU test, after BERTRAIN_REQUIRE_GPU).
GpuContext& context() {
  static GpuContext ctx(0, gpu_reduction_workspace_elements(kMaxCols));
  return ctx;
}

// The context's stream does not synchronise with the legacy stream that DeviceBuffer's cudaMemcpy uses (and
// a pageable upload may still be in flight when cudaMemcpy returns), so the tests wait for the whole device
// between uploads, launches and downloads.
void sync_all() { BERTRAIN_CUDA_CHECK(cudaDeviceSynchronize()); }

struct Tolerance {
  double atol, rtol;
};
template <typename T>
constexpr Tolerance kElementwise = std::is_same_v<T, float> ? Tolerance{1e-5, 1e-5} : Tolerance{1e-4, 1e-2};

template <typename T>
const char* type_name() {
  return std::is_same_v<T, float> ? "float" : "bf16";
}

// Random inputs in [lo, hi), rounded to bf16 when T is bf16 so that the float CPU twin sees the same values.
template <typename T>
std::vector<float> inputs(std::size_t n, uint32_t seed, float lo, float hi) {
  std::vector<float> x = random_floats(n, seed, lo, hi);
  return std::is_same_v<T, bf16> ? bf16_rounded(x) : x;
}

template <typename T>
std::vector<T> from_float(const std::vector<float>& x) {
  if constexpr (std::is_same_v<T, float>) {
    return x;
  } else {
    return to_bf16(x);
  }
}

template <typename T>
DeviceBuffer<T> upload(const std::vector<float>& x) {
  return DeviceBuffer<T>(from_float<T>(x));
}

template <typename T>
std::vector<float> download(const DeviceBuffer<T>& d) {
  if constexpr (std::is_same_v<T, float>) {
    return d.download();
  } else {
    return to_float(d.download());
  }
}

// Element-wise bit equality of got (downloaded as T) against ref rounded to T; reports the first mismatch.
template <typename T>
::testing::AssertionResult same_bits(const std::string& what, const DeviceBuffer<T>& got_dev,
                                     const std::vector<float>& ref_float) {
  const std::vector<T> got = got_dev.download(ref_float.size());
  const std::vector<T> ref = from_float<T>(ref_float);
  std::size_t mismatches = 0, first = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    if (std::memcmp(&got[i], &ref[i], sizeof(T)) != 0) {
      if (mismatches++ == 0) first = i;
    }
  }
  if (mismatches == 0) return ::testing::AssertionSuccess();
  const std::vector<float> got_float = download(got_dev);
  return ::testing::AssertionFailure() << what << " (" << type_name<T>() << "): " << mismatches << " of "
                                       << ref.size() << " elements differ; first at " << first << ": got "
                                       << got_float[first] << ", expected " << ref_float[first];
}

template <typename T>
::testing::AssertionResult close(const std::string& what, const DeviceBuffer<T>& got_dev,
                                 const std::vector<float>& ref, Tolerance tol) {
  const std::vector<float> got = download(got_dev);
  return all_close(what + " (" + type_name<T>() + ")", got.data(), ref.data(), ref.size(), tol.atol, tol.rtol);
}

// got and expected bit for bit; reports the first mismatch.
::testing::AssertionResult same_floats(const std::string& what, const std::vector<float>& got,
                                       const std::vector<float>& expected) {
  if (got.size() != expected.size()) {
    return ::testing::AssertionFailure() << what << ": " << got.size() << " elements, expected " << expected.size();
  }
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::memcmp(&got[i], &expected[i], sizeof(float)) != 0) {
      return ::testing::AssertionFailure() << what << ": element " << i << " is " << got[i] << ", expected "
                                           << expected[i];
    }
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult bit_identical(const std::string& what, const std::vector<float>& a,
                                         const std::vector<float>& b) {
  if (a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << what << " differs between two identical runs";
}


const Activation kActivations[] = {Activation::kGelu, Activation::kGeluTanh, Activation::kRelu, Activation::kTanh};

std::string activation_name(Activation act) {
  switch (act) {
    case Activation::kGelu: return "gelu";
    case Activation::kGeluTanh: return "gelu_tanh";
    case Activation::kRelu: return "relu";
    case Activation::kTanh: return "tanh";
  }
  return "?";
}

// ---- Activations --------------------------------------------------------------------------------------

template <typename T>
void check_activation(Activation act, std::size_t n, uint32_t seed) {
  SCOPED_TRACE(activation_name(act) + " n=" + std::to_string(n) + " " + type_name<T>());
  const CudaStream stream = context().stream();
  // [-5, 5]: GELU's curved region and both saturated tails.
  const std::vector<float> x = inputs<T>(n, seed, -5.0f, 5.0f);
  const std::vector<float> dy = inputs<T>(n, seed + 1, -1.0f, 1.0f);
  std::vector<float> y_ref(n), dx_ref(n);
  activation_forward_cpu(y_ref.data(), x.data(), n, act);
  activation_backward_cpu(dx_ref.data(), dy.data(), x.data(), n, act);

  DeviceBuffer<T> d_x = upload<T>(x), d_dy = upload<T>(dy), d_y(n), d_dx(n);
  poison(d_y);
  poison(d_dx);
  sync_all();
  activation_forward_cuda(d_y.data(), d_x.data(), n, act, stream);
  activation_backward_cuda(d_dx.data(), d_dy.data(), d_x.data(), n, act, stream);
  sync_all();
  EXPECT_TRUE(close("y", d_y, y_ref, kElementwise<T>));
  EXPECT_TRUE(close("dx", d_dx, dx_ref, kElementwise<T>));

  // In place: backward with dx == dy (while x is intact), then forward with y == x.
  activation_backward_cuda(d_dy.data(), d_dy.data(), d_x.data(), n, act, stream);
  activation_forward_cuda(d_x.data(), d_x.data(), n, act, stream);
  sync_all();
  EXPECT_TRUE(close("dx in place", d_dy, dx_ref, kElementwise<T>));
  EXPECT_TRUE(close("y in place", d_x, y_ref, kElementwise<T>));
}

// The kernels read and write 16-byte packs when every pointer is 16-byte aligned and single elements otherwise
// (and for the last n mod 8 (bf16) or n mod 4 (float) elements): buffers one element past an aligned address take
// the element path, and both paths must give the same bits.
template <typename T>
void check_activation_paths_agree(Activation act, std::size_t n, uint32_t seed) {
  SCOPED_TRACE(activation_name(act) + " n=" + std::to_string(n) + " " + type_name<T>());
  const CudaStream stream = context().stream();
  const std::vector<float> x = inputs<T>(n, seed, -5.0f, 5.0f), dy = inputs<T>(n, seed + 1, -1.0f, 1.0f);
  std::vector<float> x_off(1, 0.0f), dy_off(1, 0.0f);  // the same values one element further on
  x_off.insert(x_off.end(), x.begin(), x.end());
  dy_off.insert(dy_off.end(), dy.begin(), dy.end());
  DeviceBuffer<T> a_x = upload<T>(x), a_dy = upload<T>(dy), a_y(n), a_dx(n);
  DeviceBuffer<T> u_x = upload<T>(x_off), u_dy = upload<T>(dy_off), u_y(n + 1), u_dx(n + 1);
  poison(a_y);
  poison(a_dx);
  poison(u_y);
  poison(u_dx);
  sync_all();
  activation_forward_cuda(a_y.data(), a_x.data(), n, act, stream);
  activation_backward_cuda(a_dx.data(), a_dy.data(), a_x.data(), n, act, stream);
  activation_forward_cuda(u_y.data() + 1, u_x.data() + 1, n, act, stream);
  activation_backward_cuda(u_dx.data() + 1, u_dy.data() + 1, u_x.data() + 1, n, act, stream);
  sync_all();
  const std::vector<T> y = a_y.download(), dx = a_dx.download(), uy = u_y.download(), udx = u_dx.download();
  EXPECT_EQ(0, std::memcmp(y.data(), uy.data() + 1, n * sizeof(T))) << "y: the two paths differ";
  EXPECT_EQ(0, std::memcmp(dx.data(), udx.data() + 1, n * sizeof(T))) << "dx: the two paths differ";
}

TEST(CudaActivation, PackedAndElementPathsGiveTheSameBits) {
  BERTRAIN_REQUIRE_GPU();
  uint32_t seed = 300;
  for (Activation act : kActivations) {
    for (std::size_t n : {std::size_t{7}, std::size_t{8}, std::size_t{1000}, std::size_t{257 * 768 + 5}}) {
      check_activation_paths_agree<float>(act, n, ++seed);
      check_activation_paths_agree<bf16>(act, n, ++seed);
    }
  }
}

TEST(CudaActivation, ForwardAndBackwardMatchCpu) {
  BERTRAIN_REQUIRE_GPU();
  uint32_t seed = 100;
  for (Activation act : kActivations) {
    for (std::size_t n : {std::size_t{1}, std::size_t{31}, std::size_t{33}, std::size_t{1000}, std::size_t{1024},
                          std::size_t{257 * 768 + 5}}) {
      check_activation<float>(act, n, ++seed);
      check_activation<bf16>(act, n, ++seed);
    }
  }
}

template <typename T>
void check_bias_activation(Activation act, int rows, int cols, uint32_t seed) {
  SCOPED_TRACE(activation_name(act) + " rows=" + std::to_string(rows) + " cols=" + std::to_string(cols) + " " +
               type_name<T>());
  const CudaStream stream = context().stream();
  const std::size_t n = static_cast<std::size_t>(rows) * cols;
  const std::vector<float> x = inputs<T>(n, seed, -4.0f, 4.0f);
  const std::vector<float> bias = inputs<T>(static_cast<std::size_t>(cols), seed + 1, -1.0f, 1.0f);
  // CPU: the bias add (one float addition, stored as T), then the activation of the stored value.
  std::vector<float> z_ref(n), y_ref(n);
  for (std::size_t i = 0; i < n; ++i) z_ref[i] = x[i] + bias[i % cols];
  if (std::is_same_v<T, bf16>) z_ref = bf16_rounded(z_ref);
  activation_forward_cpu(y_ref.data(), z_ref.data(), n, act);

  DeviceBuffer<T> d_x = upload<T>(x), d_bias = upload<T>(bias), d_y(n);
  poison(d_y);
  sync_all();
  bias_activation_forward_cuda(d_y.data(), d_x.data(), d_bias.data(), rows, cols, act, stream);
  sync_all();
  EXPECT_TRUE(same_bits("x + bias", d_x, z_ref));
  EXPECT_TRUE(close("act(x + bias)", d_y, y_ref, kElementwise<T>));
}

TEST(CudaActivation, BiasActivationMatchesCpu) {
  BERTRAIN_REQUIRE_GPU();
  const int shapes[][2] = {{1, 1}, {3, 31}, {3, 33}, {257, 768}, {5, 1000}, {2, 1024}};
  uint32_t seed = 200;
  for (Activation act : kActivations) {
    for (const auto& s : shapes) {
      check_bias_activation<float>(act, s[0], s[1], ++seed);
      check_bias_activation<bf16>(act, s[0], s[1], ++seed);
    }
  }
}

// ---- Dropout ------------------------------------------------------------------------------------------

// A dropout case: n elements in rows of `cols` (0: one flat row), laid out as DropoutLayout{first_sample,
// max_positions, cols, slots}. With `lengths`, the rows are the T tokens of a packed batch with those row lengths and
// the slots their token slots from dropout_slots_cpu (the hidden states of the model); without, row r is logical
// row first_sample + r (the pooled [B, H]), or the tensor is flat.
struct DropoutCase {
  std::size_t n;
  int64_t first_sample;
  int max_positions;
  int cols;
  std::vector<int> lengths;  // rows of a packed batch, or empty: no token slots
  float p;
};

DropoutCase flat_case(std::size_t n, float p) { return DropoutCase{n, 0, 1, 0, {}, p}; }
DropoutCase sample_rows_case(int rows, int64_t first_sample, int cols, float p) {
  return DropoutCase{static_cast<std::size_t>(rows) * cols, first_sample, 1, cols, {}, p};
}
DropoutCase packed_case(const std::vector<int>& lengths, int64_t first_sample, int max_positions, int cols, float p) {
  const std::size_t tokens = static_cast<std::size_t>(row_offsets(lengths).back());
  return DropoutCase{tokens * cols, first_sample, max_positions, cols, lengths, p};
}

std::string describe(const DropoutCase& c) {
  std::ostringstream os;
  os << "n=" << c.n << " first_sample=" << c.first_sample << " max_positions=" << c.max_positions
     << " cols=" << c.cols << " p=" << c.p;
  if (!c.lengths.empty()) os << ", token slots of " << describe_lengths(c.lengths);
  return os.str();
}

// A case's token slots on the host (for the CPU twin) and their device copy (for the launchers, which read
// token_slots on the device), and the case's layout over either.
struct DropoutSlots {
  std::vector<int64_t> host;
  DeviceBuffer<int64_t> device;

  explicit DropoutSlots(const DropoutCase& c) {
    if (c.lengths.empty()) return;
    const std::vector<int32_t> cu = row_offsets(c.lengths);
    host.resize(static_cast<std::size_t>(cu.back()));
    dropout_slots_cpu(host.data(), cu.data(), static_cast<int>(c.lengths.size()), c.first_sample, c.max_positions);
    device = DeviceBuffer<int64_t>(host);
  }
  DropoutLayout host_layout(const DropoutCase& c) const {
    return DropoutLayout{c.first_sample, c.max_positions, c.cols, host.empty() ? nullptr : host.data()};
  }
  DropoutLayout device_layout(const DropoutCase& c) const {
    return DropoutLayout{c.first_sample, c.max_positions, c.cols, host.empty() ? nullptr : device.data()};
  }
};

// Forward, backward and in-place forward against the CPU, bit for bit (a kept element is x · the same float
// scale, one multiplication on both sides; a dropped one is +0).
template <typename T>
void check_dropout(const DropoutCase& c, uint32_t seed) {
  SCOPED_TRACE(describe(c) + " " + type_name<T>());
  const CudaStream stream = context().stream();
  const RandomKey key{0x0123456789abcdefULL, 17, 5};
  const DropoutSlots slots(c);
  const DropoutLayout host_layout = slots.host_layout(c), device_layout = slots.device_layout(c);
  // Never zero, so a zero output always means "dropped".
  const std::vector<float> x = inputs<T>(c.n, seed, 0.5f, 1.5f);
  std::vector<float> y_ref(c.n), dx_ref(c.n);
  dropout_forward_cpu(y_ref.data(), x.data(), c.n, c.p, key, host_layout);
  dropout_backward_cpu(dx_ref.data(), x.data(), c.n, c.p, key, host_layout);

  std::size_t dropped = 0;
  for (float v : y_ref) dropped += v == 0.0f;
  if (c.n >= 500) {  // the reference itself must drop some and keep some, or the comparison proves little
    EXPECT_GT(dropped, 0u);
    EXPECT_LT(dropped, c.n);
  }

  DeviceBuffer<T> d_x = upload<T>(x), d_y(c.n), d_dx(c.n);
  poison(d_y);
  poison(d_dx);
  sync_all();
  dropout_forward_cuda(d_y.data(), d_x.data(), c.n, c.p, key, device_layout, stream);
  dropout_backward_cuda(d_dx.data(), d_x.data(), c.n, c.p, key, device_layout, stream);
  sync_all();
  EXPECT_TRUE(same_bits("dropout forward", d_y, y_ref));
  EXPECT_TRUE(same_bits("dropout backward", d_dx, dx_ref));

  dropout_forward_cuda(d_x.data(), d_x.data(), c.n, c.p, key, device_layout, stream);
  sync_all();
  EXPECT_TRUE(same_bits("dropout forward in place", d_x, y_ref));
}

// Packed cases over the ragged row sets (gpu_test.h), each with its own first_sample, max_positions, width and p:
// every row of one token with first_sample > 0 and C % 4 != 0; BERT hidden states of rows 1..512 long; one row;
// 64 rows of mixed lengths at an odd width.
std::vector<DropoutCase> packed_dropout_cases() {
  struct Parameters {
    int64_t first_sample;
    int max_positions, cols;
    float p;
  };
  const Parameters parameters[] = {{5, 16, 33, 0.5f}, {0, 512, 768, 0.1f}, {3, 512, 768, 0.1f}, {9, 512, 257, 0.3f}};
  const std::vector<RaggedRows> sets = ragged_row_sets(512, 301);
  std::vector<DropoutCase> cases;
  for (std::size_t i = 0; i < sets.size(); ++i) {
    const Parameters& q = parameters[i % (sizeof parameters / sizeof parameters[0])];
    cases.push_back(packed_case(sets[i].lengths, q.first_sample, q.max_positions, q.cols, q.p));
  }
  return cases;
}

std::vector<DropoutCase> dropout_cases() {
  std::vector<DropoutCase> cases = {
      flat_case(1000, 0.1f),               // flat: element i has index i
      flat_case(1, 0.5f),                  // a single element
      sample_rows_case(7, 2, 1, 0.5f),     // one column, one row per sample
      sample_rows_case(3, 1, 31, 0.9f),    // one row per sample, odd width
      sample_rows_case(4, 9, 1000, 0.3f),  // the pooled [B, H] of a slice with first_sample > 0
      // Token slots beyond 2^34 / H: the Philox counter's high word (group >> 32) is non-zero.
      packed_case({7, 3}, 100000, 512, 768, 0.1f),
      // max_positions equal to the longest row: consecutive rows' slots are adjacent.
      packed_case({3, 1, 3, 2}, 4, 3, 1000, 0.3f),
      // More than 65536 · 256 elements: the grid-stride loop wraps.
      flat_case((std::size_t{1} << 24) + 3, 0.25f),
  };
  for (DropoutCase& c : packed_dropout_cases()) cases.push_back(std::move(c));
  return cases;
}

TEST(CudaDropout, MasksEqualTheCpuBitForBit) {
  BERTRAIN_REQUIRE_GPU();
  uint32_t seed = 300;
  for (const DropoutCase& c : dropout_cases()) {
    check_dropout<float>(c, ++seed);
    if (c.n < (std::size_t{1} << 20)) check_dropout<bf16>(c, ++seed);  // the same loop; keeps the test fast
  }
}

template <typename T>
void check_dropout_edge_probabilities() {
  SCOPED_TRACE(type_name<T>());
  const CudaStream stream = context().stream();
  const std::size_t n = 1001;
  const RandomKey key{7, 1, 2};
  const DropoutLayout layout{0, 8, 11};  // 1001 = 91 rows of 11
  const std::vector<float> x = inputs<T>(n, 31, -1.0f, 1.0f);
  DeviceBuffer<T> d_x = upload<T>(x), d_y(n);

  poison(d_y);
  sync_all();
  dropout_forward_cuda(d_y.data(), d_x.data(), n, 0.0f, key, layout, stream);  // p = 0 copies
  sync_all();
  EXPECT_TRUE(same_bits("p = 0", d_y, x));

  dropout_forward_cuda(d_x.data(), d_x.data(), n, 0.0f, key, layout, stream);  // in place: nothing to do
  sync_all();
  EXPECT_TRUE(same_bits("p = 0 in place", d_x, x));

  poison(d_y);
  sync_all();
  dropout_backward_cuda(d_y.data(), d_x.data(), n, 1.0f, key, layout, stream);  // p = 1 zeroes
  sync_all();
  EXPECT_TRUE(same_bits("p = 1", d_y, std::vector<float>(n, 0.0f)));
}

TEST(CudaDropout, ZeroAndOneProbabilities) {
  BERTRAIN_REQUIRE_GPU();
  check_dropout_edge_probabilities<float>();
  check_dropout_edge_probabilities<bf16>();
}

// ---- Dropout, mixed precision (the float residual stream and its gradient) ------------------------------
// CPU twin: dropout_forward_cpu<float> / dropout_backward_cpu<float> on the float values; T outputs are that float
// result rounded once (float_to_bf16), so every comparison is bit for bit. The inputs are NOT rounded to bf16: a
// kernel that read the float input as T would fail.

// What the mixed forward writes its T copy to: a buffer of its own, nothing, or (T = float only) the float output.
enum class CopyMode { kSeparate, kNone, kSameAsOutput };

const char* copy_mode_name(CopyMode m) {
  switch (m) {
    case CopyMode::kSeparate: return "separate copy";
    case CopyMode::kNone: return "no copy";
    case CopyMode::kSameAsOutput: return "copy is the output";
  }
  return "?";
}

template <typename T>
std::vector<CopyMode> copy_modes() {
  if (std::is_same_v<T, float>) return {CopyMode::kSeparate, CopyMode::kNone, CopyMode::kSameAsOutput};
  return {CopyMode::kSeparate, CopyMode::kNone};
}

// The T copy's pointer for `mode`: `copy`, null, or the float output itself (T = float).
template <typename T>
T* copy_pointer(CopyMode mode, DeviceBuffer<T>& copy, float* output) {
  if (mode == CopyMode::kNone) return nullptr;
  if (mode == CopyMode::kSameAsOutput) {
    if constexpr (std::is_same_v<T, float>) return output;
  }
  return copy.data();
}

template <typename T>
void check_mixed_dropout(const DropoutCase& c, CopyMode mode, bool in_place, uint32_t seed) {
  SCOPED_TRACE(describe(c) + " " + type_name<T>() + ", " + copy_mode_name(mode) + (in_place ? ", in place" : ""));
  const CudaStream stream = context().stream();
  const RandomKey key{0x0123456789abcdefULL, 17, 5};
  const DropoutSlots slots(c);
  const DropoutLayout host_layout = slots.host_layout(c), device_layout = slots.device_layout(c);
  // Never zero, so a zero output always means "dropped"; full float precision (not representable in bf16).
  const std::vector<float> x = random_floats(c.n, seed, 0.5f, 1.5f);
  std::vector<float> y_ref(c.n), dx_ref(c.n);
  dropout_forward_cpu(y_ref.data(), x.data(), c.n, c.p, key, host_layout);
  dropout_backward_cpu(dx_ref.data(), x.data(), c.n, c.p, key, host_layout);

  DeviceBuffer<float> d_x(x), d_y(c.n);
  DeviceBuffer<T> d_copy(c.n), d_dx(c.n);
  poison(d_y);
  poison(d_copy);
  poison(d_dx);
  sync_all();
  float* y = in_place ? d_x.data() : d_y.data();
  dropout_forward_cuda(y, copy_pointer(mode, d_copy, y), d_x.data(), c.n, c.p, key, device_layout, stream);
  sync_all();
  EXPECT_TRUE(same_bits("mixed dropout forward, float output", in_place ? d_x : d_y, y_ref));
  if (mode == CopyMode::kSeparate) {
    EXPECT_TRUE(same_bits("mixed dropout forward, T copy", d_copy, y_ref));
  }

  if (!in_place) {
    // Backward from the float gradient (here x) into the T input of the next GEMM; the call generic code makes.
    dropout_backward_cuda(d_dx.data(), static_cast<const float*>(d_x.data()), c.n, c.p, key, device_layout, stream);
    sync_all();
    EXPECT_TRUE(same_bits("mixed dropout backward", d_dx, dx_ref));
  }
}

TEST(CudaDropout, MixedPrecisionMasksEqualTheCpuBitForBit) {
  BERTRAIN_REQUIRE_GPU();
  uint32_t seed = 1300;
  for (const DropoutCase& c : dropout_cases()) {
    if (c.n >= (std::size_t{1} << 20)) {  // the grid-stride wrap: one run of the bf16 kernel
      check_mixed_dropout<bf16>(c, CopyMode::kSeparate, false, ++seed);
      continue;
    }
    for (bool in_place : {false, true}) {
      for (CopyMode mode : copy_modes<float>()) check_mixed_dropout<float>(c, mode, in_place, ++seed);
      for (CopyMode mode : copy_modes<bf16>()) check_mixed_dropout<bf16>(c, mode, in_place, ++seed);
    }
  }
}

template <typename T>
void check_mixed_dropout_edge_probabilities(int rows, int cols) {
  SCOPED_TRACE(std::string(type_name<T>()) + ", " + std::to_string(rows) + " rows of " + std::to_string(cols));
  const CudaStream stream = context().stream();
  const std::size_t n = static_cast<std::size_t>(rows) * cols;
  const RandomKey key{7, 1, 2};
  const DropoutLayout layout{0, 8, cols};
  const std::vector<float> x = random_floats(n, 31, -1.0f, 1.0f);
  DeviceBuffer<float> d_x(x), d_y(n);
  DeviceBuffer<T> d_copy(n), d_dx(n);

  // p = 0: the float output is x, the copy x rounded (a cast), in and out of place.
  poison(d_y);
  poison(d_copy);
  sync_all();
  dropout_forward_cuda(d_y.data(), d_copy.data(), d_x.data(), n, 0.0f, key, layout, stream);
  sync_all();
  EXPECT_TRUE(same_bits("p = 0", d_y, x));
  EXPECT_TRUE(same_bits("p = 0, T copy", d_copy, x));
  poison(d_copy);
  sync_all();
  dropout_forward_cuda(d_x.data(), d_copy.data(), d_x.data(), n, 0.0f, key, layout, stream);
  sync_all();
  EXPECT_TRUE(same_bits("p = 0 in place", d_x, x));
  EXPECT_TRUE(same_bits("p = 0 in place, T copy", d_copy, x));
  poison(d_dx);
  sync_all();
  dropout_backward_cuda(d_dx.data(), static_cast<const float*>(d_x.data()), n, 0.0f, key, layout, stream);
  sync_all();
  EXPECT_TRUE(same_bits("p = 0 backward", d_dx, x));

  // p = 1 zeroes both outputs.
  poison(d_y);
  poison(d_copy);
  poison(d_dx);
  sync_all();
  dropout_forward_cuda(d_y.data(), d_copy.data(), d_x.data(), n, 1.0f, key, layout, stream);
  dropout_backward_cuda(d_dx.data(), static_cast<const float*>(d_x.data()), n, 1.0f, key, layout, stream);
  sync_all();
  const std::vector<float> zeros(n, 0.0f);
  EXPECT_TRUE(same_bits("p = 1", d_y, zeros));
  EXPECT_TRUE(same_bits("p = 1, T copy", d_copy, zeros));
  EXPECT_TRUE(same_bits("p = 1 backward", d_dx, zeros));
}

TEST(CudaDropout, MixedPrecisionZeroAndOneProbabilities) {
  BERTRAIN_REQUIRE_GPU();
  // Rows of 11 take the element kernel, rows of 8 the group kernel (a cast of four elements at a time for p = 0).
  for (const int cols : {11, 8}) {
    const int rows = cols == 11 ? 91 : 125;
    check_mixed_dropout_edge_probabilities<float>(rows, cols);
    check_mixed_dropout_edge_probabilities<bf16>(rows, cols);
  }
}

// The kernel that draws one Philox group for four elements needs every buffer aligned to four elements; views that
// start one or two elements into their buffers (the model passes none today, the API takes any pointer) take the
// element kernel instead, with the same bits. Rows of 8, so only the alignment decides.
template <typename T>
void check_dropout_on_unaligned_views(std::size_t offset) {
  SCOPED_TRACE(std::string(type_name<T>()) + ", views " + std::to_string(offset) + " elements in");
  const CudaStream stream = context().stream();
  const std::size_t n = 96;
  const RandomKey key{0x0123456789abcdefULL, 3, 9};
  const DropoutLayout layout{3, 1, 8};  // 12 rows of 8, from sample 3
  const std::vector<float> x = inputs<T>(n + offset, 77, 0.5f, 1.5f);
  const std::vector<float> x_view(x.begin() + static_cast<std::ptrdiff_t>(offset), x.end());
  std::vector<float> y_ref(n), mixed_ref(n);
  dropout_forward_cpu(y_ref.data(), x_view.data(), n, 0.3f, key, layout);
  const std::vector<float> x_float = random_floats(n + offset, 78, 0.5f, 1.5f);  // the float stream: not rounded
  dropout_forward_cpu(mixed_ref.data(), x_float.data() + offset, n, 0.3f, key, layout);

  DeviceBuffer<T> d_x = upload<T>(x), d_y(n + offset), d_copy(n + offset);
  DeviceBuffer<float> d_stream(x_float), d_stream_out(n + offset);
  poison(d_y);
  poison(d_copy);
  poison(d_stream_out);
  sync_all();
  dropout_forward_cuda(d_y.data() + offset, d_x.data() + offset, n, 0.3f, key, layout, stream);
  dropout_forward_cuda(d_stream_out.data() + offset, d_copy.data() + offset, d_stream.data() + offset, n, 0.3f, key,
                       layout, stream);
  sync_all();
  const auto view_of = [&](const std::vector<float>& all) {
    return std::vector<float>(all.begin() + static_cast<std::ptrdiff_t>(offset), all.end());
  };
  const std::vector<float> y = view_of(download(d_y)), copy = view_of(download(d_copy)),
                           stream_out = view_of(download(d_stream_out));
  const std::vector<float> y_expected = std::is_same_v<T, bf16> ? bf16_rounded(y_ref) : y_ref;
  const std::vector<float> copy_expected = std::is_same_v<T, bf16> ? bf16_rounded(mixed_ref) : mixed_ref;
  EXPECT_TRUE(same_floats("dropout on a view", y, y_expected));
  EXPECT_TRUE(same_floats("mixed dropout on a view, float output", stream_out, mixed_ref));
  EXPECT_TRUE(same_floats("mixed dropout on a view, T copy", copy, copy_expected));
}

TEST(CudaDropout, UnalignedViewsEqualTheCpuBitForBit) {
  BERTRAIN_REQUIRE_GPU();
  for (const std::size_t offset : {1, 2}) {
    check_dropout_on_unaligned_views<float>(offset);
    check_dropout_on_unaligned_views<bf16>(offset);
  }
}

// ---- LayerNorm ----------------------------------------------------------------------------------------

// LayerNorm outputs: the float tolerance with atol 3e-5, since mean and variance are sums over up to 1024
// columns whose order differs from the CPU's (about 1e-6 on the mean for these inputs), amplified by
// rstd · gamma ≈ 1 in y.
template <typename T>
constexpr Tolerance kLayerNorm = std::is_same_v<T, float> ? Tolerance{3e-5, 1e-5} : Tolerance{1e-4, 1e-2};

// Parameter gradients sum `rows` products of O(1) values; the CPU adds them in row order, the GPU in 64 chunks.
// Their difference grows with rows (about √rows · eps · |partial sums|); 2e-6 · rows is ≥ 10× that for the
// shapes here and still far below one row's contribution (~0.1–1), so a lost or doubled row fails.
Tolerance parameter_gradient_tolerance(int rows) { return Tolerance{2e-6 * rows, 1e-5}; }

template <typename T>
void check_layernorm(int rows, int cols, bool with_residual, bool in_place, uint32_t seed) {
  SCOPED_TRACE("rows=" + std::to_string(rows) + " cols=" + std::to_string(cols) +
               (with_residual ? " residual" : " no residual") + (in_place ? " in place" : "") + " " +
               type_name<T>());
  const GpuHandles& handles = context().handles();
  const std::size_t n = static_cast<std::size_t>(rows) * cols;
  const float eps = 1e-12f;  // BERT's layer_norm_eps
  // x not centred, so the mean matters; gamma away from zero.
  const std::vector<float> x = inputs<T>(n, seed, -2.0f, 3.0f);
  const std::vector<float> residual = inputs<T>(n, seed + 1, -1.0f, 1.0f);
  const std::vector<float> gamma = inputs<T>(static_cast<std::size_t>(cols), seed + 2, 0.5f, 1.5f);
  const std::vector<float> beta = inputs<T>(static_cast<std::size_t>(cols), seed + 3, -0.5f, 0.5f);
  const std::vector<float> dy = inputs<T>(n, seed + 4, -1.0f, 1.0f);
  const float* res = with_residual ? residual.data() : nullptr;

  std::vector<float> y_ref(n), mean_ref(rows), rstd_ref(rows);
  layernorm_forward_cpu(y_ref.data(), mean_ref.data(), rstd_ref.data(), x.data(), res, gamma.data(), beta.data(),
                        rows, cols, eps);
  std::vector<float> dz_ref(n), dgamma_ref(cols), dbeta_ref(cols);
  layernorm_backward_cpu(dz_ref.data(), dgamma_ref.data(), dbeta_ref.data(), dy.data(), x.data(), res,
                         mean_ref.data(), rstd_ref.data(), gamma.data(), rows, cols);

  // Forward.
  DeviceBuffer<T> d_x = upload<T>(x), d_residual = upload<T>(residual), d_gamma = upload<T>(gamma),
                  d_beta = upload<T>(beta), d_y(n);
  DeviceBuffer<float> d_mean(rows), d_rstd(rows);
  DeviceBuffer<T> d_y_inplace = upload<T>(x);  // y == x: the forward overwrites this copy of x
  poison(d_y);
  poison(d_mean);
  poison(d_rstd);
  sync_all();
  const T* d_res = with_residual ? d_residual.data() : nullptr;
  T* y_ptr = in_place ? d_y_inplace.data() : d_y.data();
  const T* x_ptr = in_place ? d_y_inplace.data() : d_x.data();
  layernorm_forward_cuda(y_ptr, d_mean.data(), d_rstd.data(), x_ptr, d_res, d_gamma.data(), d_beta.data(), rows,
                         cols, eps, handles.stream);
  sync_all();
  EXPECT_TRUE(close("y", in_place ? d_y_inplace : d_y, y_ref, kLayerNorm<T>));
  // Statistics are float for both T and come from the same inputs.
  EXPECT_TRUE(all_close("mean", d_mean.download().data(), mean_ref.data(), mean_ref.size(), 1e-6, 1e-5));
  EXPECT_TRUE(all_close("rstd", d_rstd.download().data(), rstd_ref.data(), rstd_ref.size(), 1e-6, 1e-5));

  // Backward from the CPU's statistics (the same inputs for both), twice: the second run must reproduce the
  // first bit for bit. With in_place, dz overwrites dy, so dy is uploaded again before each run.
  d_mean.upload(mean_ref.data(), mean_ref.size());
  d_rstd.upload(rstd_ref.data(), rstd_ref.size());
  // dz = rstd · (dxhat - mean(dxhat) - ...) multiplies the rounding noise of its terms by rstd: O(1) for real
  // rows, but 1 / sqrt(eps) = 1e6 for a single column (where the exact dz is 0), so atol scales with rstd.
  float max_rstd = 1.0f;
  for (float r : rstd_ref) max_rstd = std::max(max_rstd, r);
  const Tolerance dz_tol{kLayerNorm<T>.atol * max_rstd, kLayerNorm<T>.rtol};
  std::vector<float> first_dz, first_dgamma, first_dbeta;
  for (int run = 0; run < 2; ++run) {
    DeviceBuffer<T> d_dy = upload<T>(dy), d_dz(n);
    DeviceBuffer<float> d_dgamma(cols), d_dbeta(cols);
    poison(d_dz);
    poison(d_dgamma);
    poison(d_dbeta);
    sync_all();
    T* dz_ptr = in_place ? d_dy.data() : d_dz.data();
    layernorm_backward_cuda(handles, dz_ptr, d_dgamma.data(), d_dbeta.data(), d_dy.data(), d_x.data(), d_res,
                            d_mean.data(), d_rstd.data(), d_gamma.data(), rows, cols);
    sync_all();
    const DeviceBuffer<T>& dz = in_place ? d_dy : d_dz;
    const Tolerance param_tol = parameter_gradient_tolerance(rows);
    EXPECT_TRUE(close("dz", dz, dz_ref, dz_tol));
    // Parameter gradients are float for both T: the float tolerance of a sum over rows.
    const std::vector<float> dgamma = d_dgamma.download(), dbeta = d_dbeta.download();
    EXPECT_TRUE(all_close("dgamma", dgamma.data(), dgamma_ref.data(), dgamma.size(), param_tol.atol, param_tol.rtol));
    EXPECT_TRUE(all_close("dbeta", dbeta.data(), dbeta_ref.data(), dbeta.size(), param_tol.atol, param_tol.rtol));
    if (run == 0) {
      first_dz = download(dz);
      first_dgamma = dgamma;
      first_dbeta = dbeta;
    } else {
      EXPECT_TRUE(bit_identical("dz", download(dz), first_dz));
      EXPECT_TRUE(bit_identical("dgamma", dgamma, first_dgamma));
      EXPECT_TRUE(bit_identical("dbeta", dbeta, first_dbeta));
    }
  }
}

// (rows, cols): cols below, at and above a warp, BERT's 768 and 1024, a ragged 1000; rows fewer than
// kReductionChunks (empty chunks) and 257 (several rows per chunk, a short last chunk).
const int kLayerNormShapes[][2] = {{1, 1}, {3, 31}, {3, 33}, {4, 32}, {257, 768}, {5, 1000}, {2, 1024}, {70, 97}};

TEST(CudaLayerNorm, WithResidualMatchesCpu) {
  BERTRAIN_REQUIRE_GPU();
  uint32_t seed = 400;
  for (const auto& s : kLayerNormShapes) {
    check_layernorm<float>(s[0], s[1], true, false, seed += 10);
    check_layernorm<bf16>(s[0], s[1], true, false, seed += 10);
  }
}

TEST(CudaLayerNorm, WithoutResidualMatchesCpu) {
  BERTRAIN_REQUIRE_GPU();
  uint32_t seed = 500;
  for (const auto& s : kLayerNormShapes) {
    check_layernorm<float>(s[0], s[1], false, false, seed += 10);
    check_layernorm<bf16>(s[0], s[1], false, false, seed += 10);
  }
}

TEST(CudaLayerNorm, InPlaceYEqualsXAndDzEqualsDy) {
  BERTRAIN_REQUIRE_GPU();
  uint32_t seed = 600;
  for (const auto& s : kLayerNormShapes) {
    check_layernorm<float>(s[0], s[1], true, true, seed += 10);
    check_layernorm<bf16>(s[0], s[1], true, true, seed += 10);
    check_layernorm<float>(s[0], s[1], false, true, seed += 10);
  }
}

// ---- LayerNorm, mixed precision (the float residual stream) ---------------------------------------------
// x (the sublayer output), gamma and beta in T; the residual, the output stream, dy and dz in float; a T copy of the
// output. CPU twin: layernorm_forward_cpu<float> / layernorm_backward_cpu<float> on the same values, the T copy
// being the float output rounded once. The residual and dy are NOT rounded to bf16, so a kernel that read them as
// T (or rounded the float outputs) would be off by ~2^-9 relative, far outside the float tolerances used here.

template <typename T>
void check_mixed_layernorm(int rows, int cols, bool with_residual, CopyMode mode, bool in_place, uint32_t seed) {
  SCOPED_TRACE("rows=" + std::to_string(rows) + " cols=" + std::to_string(cols) +
               (with_residual ? " residual" : " no residual") + ", " + copy_mode_name(mode) +
               (in_place ? ", in place" : "") + " " + type_name<T>());
  const GpuHandles& handles = context().handles();
  const std::size_t n = static_cast<std::size_t>(rows) * cols;
  const float eps = 1e-12f;
  const std::vector<float> x = inputs<T>(n, seed, -2.0f, 3.0f);
  const std::vector<float> residual = random_floats(n, seed + 1, -1.0f, 1.0f);
  const std::vector<float> gamma = inputs<T>(static_cast<std::size_t>(cols), seed + 2, 0.5f, 1.5f);
  const std::vector<float> beta = inputs<T>(static_cast<std::size_t>(cols), seed + 3, -0.5f, 0.5f);
  const std::vector<float> dy = random_floats(n, seed + 4, -1.0f, 1.0f);
  const float* res = with_residual ? residual.data() : nullptr;

  std::vector<float> y_ref(n), mean_ref(rows), rstd_ref(rows);
  layernorm_forward_cpu(y_ref.data(), mean_ref.data(), rstd_ref.data(), x.data(), res, gamma.data(), beta.data(),
                        rows, cols, eps);
  std::vector<float> dz_ref(n), dgamma_ref(cols), dbeta_ref(cols);
  layernorm_backward_cpu(dz_ref.data(), dgamma_ref.data(), dbeta_ref.data(), dy.data(), x.data(), res,
                         mean_ref.data(), rstd_ref.data(), gamma.data(), rows, cols);

  // Forward. In place, y overwrites (its own copy of) the residual and the T copy overwrites (its own copy of) x.
  DeviceBuffer<T> d_x = upload<T>(x), d_gamma = upload<T>(gamma), d_beta = upload<T>(beta), d_copy(n);
  DeviceBuffer<float> d_residual(residual), d_y(n), d_mean(rows), d_rstd(rows);
  poison(d_y);
  poison(d_copy);
  poison(d_mean);
  poison(d_rstd);
  sync_all();
  const bool y_over_residual = in_place && with_residual;
  float* y = y_over_residual ? d_residual.data() : d_y.data();
  DeviceBuffer<T>& copy_buffer = in_place && mode == CopyMode::kSeparate ? d_x : d_copy;
  layernorm_forward_cuda(y, copy_pointer(mode, copy_buffer, y), d_mean.data(), d_rstd.data(),
                         static_cast<const T*>(d_x.data()), with_residual ? d_residual.data() : nullptr,
                         static_cast<const T*>(d_gamma.data()), static_cast<const T*>(d_beta.data()), rows, cols, eps,
                         handles.stream);
  sync_all();
  const DeviceBuffer<float>& y_out = y_over_residual ? d_residual : d_y;
  EXPECT_TRUE(close("y (float stream)", y_out, y_ref, kLayerNorm<float>));
  if (mode == CopyMode::kSeparate) {
    // The copy is the float output rounded once: bit for bit what the host's rounding of y gives.
    EXPECT_TRUE(same_bits("y (T copy)", copy_buffer, y_out.download()));
  }
  EXPECT_TRUE(all_close("mean", d_mean.download().data(), mean_ref.data(), mean_ref.size(), 1e-6, 1e-5));
  EXPECT_TRUE(all_close("rstd", d_rstd.download().data(), rstd_ref.data(), rstd_ref.size(), 1e-6, 1e-5));

  // Backward from the CPU's statistics, twice (bit-identical), dz (=) float, optionally in place over dy. x and the
  // residual are uploaded again: the in-place forward overwrote them.
  DeviceBuffer<T> d_x2 = upload<T>(x);
  DeviceBuffer<float> d_residual2(residual);
  d_mean.upload(mean_ref.data(), mean_ref.size());
  d_rstd.upload(rstd_ref.data(), rstd_ref.size());
  float max_rstd = 1.0f;
  for (float r : rstd_ref) max_rstd = std::max(max_rstd, r);
  const Tolerance dz_tol{kLayerNorm<float>.atol * max_rstd, kLayerNorm<float>.rtol};
  std::vector<float> first_dz, first_dgamma, first_dbeta;
  for (int run = 0; run < 2; ++run) {
    DeviceBuffer<float> d_dy(dy), d_dz(n), d_dgamma(cols), d_dbeta(cols);
    poison(d_dz);
    poison(d_dgamma);
    poison(d_dbeta);
    sync_all();
    float* dz = in_place ? d_dy.data() : d_dz.data();
    // The call generic code makes for either T (the all-float template for float, the bf16 overload for bf16).
    layernorm_backward_cuda(handles, dz, d_dgamma.data(), d_dbeta.data(), static_cast<const float*>(d_dy.data()),
                            static_cast<const T*>(d_x2.data()),
                            with_residual ? static_cast<const float*>(d_residual2.data()) : nullptr,
                            static_cast<const float*>(d_mean.data()), static_cast<const float*>(d_rstd.data()),
                            static_cast<const T*>(d_gamma.data()), rows, cols);
    sync_all();
    const DeviceBuffer<float>& dz_out = in_place ? d_dy : d_dz;
    const Tolerance param_tol = parameter_gradient_tolerance(rows);
    EXPECT_TRUE(close("dz (float)", dz_out, dz_ref, dz_tol));
    const std::vector<float> dgamma = d_dgamma.download(), dbeta = d_dbeta.download();
    EXPECT_TRUE(all_close("dgamma", dgamma.data(), dgamma_ref.data(), dgamma.size(), param_tol.atol, param_tol.rtol));
    EXPECT_TRUE(all_close("dbeta", dbeta.data(), dbeta_ref.data(), dbeta.size(), param_tol.atol, param_tol.rtol));
    if (run == 0) {
      first_dz = dz_out.download();
      first_dgamma = dgamma;
      first_dbeta = dbeta;
    } else {
      EXPECT_TRUE(bit_identical("dz", dz_out.download(), first_dz));
      EXPECT_TRUE(bit_identical("dgamma", dgamma, first_dgamma));
      EXPECT_TRUE(bit_identical("dbeta", dbeta, first_dbeta));
    }
  }
}

TEST(CudaLayerNorm, MixedPrecisionWithResidualMatchesCpu) {
  BERTRAIN_REQUIRE_GPU();
  uint32_t seed = 1400;
  for (const auto& s : kLayerNormShapes) {
    for (CopyMode mode : copy_modes<float>()) check_mixed_layernorm<float>(s[0], s[1], true, mode, false, seed += 10);
    for (CopyMode mode : copy_modes<bf16>()) check_mixed_layernorm<bf16>(s[0], s[1], true, mode, false, seed += 10);
  }
}

TEST(CudaLayerNorm, MixedPrecisionWithoutResidualMatchesCpu) {
  BERTRAIN_REQUIRE_GPU();
  uint32_t seed = 1500;
  for (const auto& s : kLayerNormShapes) {
    check_mixed_layernorm<float>(s[0], s[1], false, CopyMode::kSameAsOutput, false, seed += 10);
    check_mixed_layernorm<bf16>(s[0], s[1], false, CopyMode::kSeparate, false, seed += 10);
    check_mixed_layernorm<bf16>(s[0], s[1], false, CopyMode::kNone, false, seed += 10);
  }
}

TEST(CudaLayerNorm, MixedPrecisionInPlace) {
  BERTRAIN_REQUIRE_GPU();
  uint32_t seed = 1600;
  for (const auto& s : kLayerNormShapes) {
    // y over the residual, the T copy over x, dz over dy.
    check_mixed_layernorm<float>(s[0], s[1], true, CopyMode::kSeparate, true, seed += 10);
    check_mixed_layernorm<float>(s[0], s[1], true, CopyMode::kSameAsOutput, true, seed += 10);
    check_mixed_layernorm<bf16>(s[0], s[1], true, CopyMode::kSeparate, true, seed += 10);
    check_mixed_layernorm<bf16>(s[0], s[1], false, CopyMode::kSeparate, true, seed += 10);
  }
}

// ---- Dropout + residual add + LayerNorm, fused (the float residual stream) -------------------------------------
// x (the sublayer output), gamma and beta in T; the residual, y, dy and dz in float; dx in T. CPU twin:
// dropout_residual_layernorm_forward_cpu<float> / _backward_cpu<float> on the same values, the T copy and dx being
// the twin's float results rounded once. Masks must be the CPU's bit for bit (which elements of dx are zero; dz is
// never exactly zero for these inputs and widths). Tolerances: the LayerNorm ones above (the twin sums a row in
// eight interleaved partial sums, the GPU across a warp: both within a few float ulps of the exact sums); dx is dz
// times 1 / (1 - p) and inherits dz's tolerance times that factor, plus bf16's rounding for T = bf16.

// Row lengths of a packed batch adding up to `tokens` (rows of 1..longest tokens, the last one cut to fit).
std::vector<int> lengths_adding_up_to(int tokens, int longest, uint32_t seed) {
  std::vector<int> lengths;
  int total = 0;
  for (int length : testing::mixed_lengths(tokens, longest, seed)) {
    if (total == tokens) break;
    lengths.push_back(std::min(length, tokens - total));
    total += lengths.back();
  }
  return lengths;
}

// A fused case's dropout layout: token slots of packed rows up to 512 long (P = 512, first_sample 3), or sample rows
// (first_sample 2); the host's copy of the slots for the CPU twin, the device's for the kernels.
struct CaseLayout {
  std::vector<int64_t> slots;
  DeviceBuffer<int64_t> d_slots;
  DropoutLayout host, device;
  CaseLayout(int rows, int cols, bool packed, uint32_t seed) : host{2, 1, cols}, device{2, 1, cols} {
    if (!packed) return;
    const std::vector<int> lengths = lengths_adding_up_to(rows, 96, seed);
    const std::vector<int32_t> cu = row_offsets(lengths);
    slots.resize(static_cast<std::size_t>(rows));
    dropout_slots_cpu(slots.data(), cu.data(), static_cast<int>(lengths.size()), 3, 512);
    d_slots = DeviceBuffer<int64_t>(slots);
    host = DropoutLayout{3, 512, cols, slots.data()};
    device = DropoutLayout{3, 512, cols, d_slots.data()};
  }
};

struct FusedCase {
  int rows, cols;
  float p;
  bool packed;           // token slots of packed rows (else one logical row per row, first_sample 2)
  CopyMode mode;         // the forward's T copy
  bool in_place;         // y over the residual, the T copy over x, dz over dy
  bool misaligned;       // the residual 4 bytes off 16-byte alignment: the single-column kernels
  std::string name() const {
    std::ostringstream os;
    os << "rows=" << rows << " cols=" << cols << " p=" << p << (packed ? " token slots" : " sample rows") << ", "
       << copy_mode_name(mode) << (in_place ? ", in place" : "") << (misaligned ? ", misaligned residual" : "");
    return os.str();
  }
};

// A float buffer whose data starts `offset` elements into its allocation (offset 1: not 16-byte aligned).
struct OffsetFloats {
  DeviceBuffer<float> buffer;
  std::size_t offset;
  OffsetFloats(const std::vector<float>& host, std::size_t offset_) : offset(offset_) {
    std::vector<float> padded(offset, 0.0f);
    padded.insert(padded.end(), host.begin(), host.end());
    buffer = DeviceBuffer<float>(padded);
  }
  float* data() { return buffer.data() + offset; }
  std::vector<float> download() const {
    const std::vector<float> all = buffer.download();
    return std::vector<float>(all.begin() + static_cast<std::ptrdiff_t>(offset), all.end());
  }
};

std::vector<float> zero_pattern(const std::vector<float>& v) {
  std::vector<float> z(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) z[i] = v[i] == 0.0f ? 1.0f : 0.0f;
  return z;
}

template <typename T>
void check_fused_layernorm(const FusedCase& fc, uint32_t seed) {
  SCOPED_TRACE(fc.name() + " " + type_name<T>());
  const GpuHandles& handles = context().handles();
  const int rows = fc.rows, cols = fc.cols;
  const std::size_t n = static_cast<std::size_t>(rows) * cols;
  const float eps = 1e-12f, p = fc.p;
  const RandomKey key{0x0123456789abcdefULL, 23, 7};

  const CaseLayout layouts(rows, cols, fc.packed, seed);
  const DropoutLayout &host_layout = layouts.host, &device_layout = layouts.device;

  const std::vector<float> x = inputs<T>(n, seed, -2.0f, 3.0f);
  const std::vector<float> residual = random_floats(n, seed + 1, -1.0f, 1.0f);
  const std::vector<float> gamma = inputs<T>(static_cast<std::size_t>(cols), seed + 2, 0.5f, 1.5f);
  const std::vector<float> beta = inputs<T>(static_cast<std::size_t>(cols), seed + 3, -0.5f, 0.5f);
  const std::vector<float> dy = random_floats(n, seed + 4, -1.0f, 1.0f);

  std::vector<float> y_ref(n), mean_ref(rows), rstd_ref(rows);
  dropout_residual_layernorm_forward_cpu(y_ref.data(), mean_ref.data(), rstd_ref.data(), x.data(), residual.data(),
                                         gamma.data(), beta.data(), rows, cols, eps, p, key, host_layout);
  std::vector<float> dz_ref(n), dx_ref(n), dgamma_ref(cols), dbeta_ref(cols);
  dropout_residual_layernorm_backward_cpu(dz_ref.data(), dx_ref.data(), dgamma_ref.data(), dbeta_ref.data(),
                                          dy.data(), x.data(), residual.data(), mean_ref.data(), rstd_ref.data(),
                                          gamma.data(), rows, cols, p, key, host_layout);
  std::size_t dropped = 0;
  for (float v : dx_ref) dropped += v == 0.0f;
  if (p > 0.0f && n >= 1000) {
    EXPECT_GT(dropped, 0u) << "the reference dropped nothing";
  }
  if (p == 0.0f) {
    EXPECT_EQ(dropped, 0u);
  }

  // Forward.
  DeviceBuffer<T> d_x = upload<T>(x), d_gamma = upload<T>(gamma), d_beta = upload<T>(beta), d_copy(n);
  OffsetFloats d_residual(residual, fc.misaligned ? 1 : 0);
  DeviceBuffer<float> d_y(n), d_mean(rows), d_rstd(rows);
  poison(d_y);
  poison(d_copy);
  poison(d_mean);
  poison(d_rstd);
  sync_all();
  float* y = fc.in_place ? d_residual.data() : d_y.data();
  DeviceBuffer<T>& copy_buffer = fc.in_place && fc.mode == CopyMode::kSeparate ? d_x : d_copy;
  dropout_residual_layernorm_forward_cuda(y, copy_pointer(fc.mode, copy_buffer, y), d_mean.data(), d_rstd.data(),
                                          static_cast<const T*>(d_x.data()), d_residual.data(),
                                          static_cast<const T*>(d_gamma.data()), static_cast<const T*>(d_beta.data()),
                                          rows, cols, eps, p, key, device_layout, handles.stream);
  sync_all();
  const std::vector<float> y_got = fc.in_place ? d_residual.download() : d_y.download();
  EXPECT_TRUE(all_close("y (float stream)", y_got.data(), y_ref.data(), n, kLayerNorm<float>.atol,
                        kLayerNorm<float>.rtol));
  if (fc.mode == CopyMode::kSeparate) {
    EXPECT_TRUE(same_bits("y (T copy)", copy_buffer, y_got));  // the float output rounded once
  }
  EXPECT_TRUE(all_close("mean", d_mean.download().data(), mean_ref.data(), mean_ref.size(), 1e-6, 1e-5));
  EXPECT_TRUE(all_close("rstd", d_rstd.download().data(), rstd_ref.data(), rstd_ref.size(), 1e-6, 1e-5));

  // Backward from the CPU's statistics, twice: the second run must reproduce the first bit for bit. x and the
  // residual are uploaded again (the in-place forward overwrote them).
  DeviceBuffer<T> d_x2 = upload<T>(x);
  OffsetFloats d_residual2(residual, fc.misaligned ? 1 : 0);
  d_mean.upload(mean_ref.data(), mean_ref.size());
  d_rstd.upload(rstd_ref.data(), rstd_ref.size());
  float max_rstd = 1.0f;
  for (float r : rstd_ref) max_rstd = std::max(max_rstd, r);
  const Tolerance dz_tol{kLayerNorm<float>.atol * max_rstd, kLayerNorm<float>.rtol};
  const double scale = p > 0.0f ? 1.0 / (1.0 - p) : 1.0;
  const Tolerance dx_tol{dz_tol.atol * scale + kLayerNorm<T>.atol, std::max(dz_tol.rtol, kLayerNorm<T>.rtol)};
  std::vector<float> first_dz, first_dx, first_dgamma, first_dbeta;
  for (int run = 0; run < 2; ++run) {
    DeviceBuffer<float> d_dy(dy), d_dz(n), d_dgamma(cols), d_dbeta(cols);
    DeviceBuffer<T> d_dx(n);
    poison(d_dz);
    poison(d_dx);
    poison(d_dgamma);
    poison(d_dbeta);
    sync_all();
    float* dz = fc.in_place ? d_dy.data() : d_dz.data();
    dropout_residual_layernorm_backward_cuda(handles, dz, d_dx.data(), d_dgamma.data(), d_dbeta.data(),
                                             static_cast<const float*>(d_dy.data()), static_cast<const T*>(d_x2.data()),
                                             d_residual2.data(), static_cast<const float*>(d_mean.data()),
                                             static_cast<const float*>(d_rstd.data()),
                                             static_cast<const T*>(d_gamma.data()), rows, cols, p, key, device_layout);
    sync_all();
    const std::vector<float> dz_got = fc.in_place ? d_dy.download() : d_dz.download();
    const std::vector<float> dx_got = download(d_dx);
    EXPECT_TRUE(all_close("dz (float)", dz_got.data(), dz_ref.data(), n, dz_tol.atol, dz_tol.rtol));
    EXPECT_TRUE(all_close("dx (T)", dx_got.data(), dx_ref.data(), n, dx_tol.atol, dx_tol.rtol));
    EXPECT_TRUE(bit_identical("dx zero pattern (the mask) against the CPU", zero_pattern(dx_got),
                              zero_pattern(dx_ref)));
    const Tolerance param_tol = parameter_gradient_tolerance(rows);
    const std::vector<float> dgamma = d_dgamma.download(), dbeta = d_dbeta.download();
    EXPECT_TRUE(all_close("dgamma", dgamma.data(), dgamma_ref.data(), dgamma.size(), param_tol.atol, param_tol.rtol));
    EXPECT_TRUE(all_close("dbeta", dbeta.data(), dbeta_ref.data(), dbeta.size(), param_tol.atol, param_tol.rtol));
    if (run == 0) {
      first_dz = dz_got;
      first_dx = dx_got;
      first_dgamma = dgamma;
      first_dbeta = dbeta;
    } else {
      EXPECT_TRUE(bit_identical("dz", dz_got, first_dz));
      EXPECT_TRUE(bit_identical("dx", dx_got, first_dx));
      EXPECT_TRUE(bit_identical("dgamma", dgamma, first_dgamma));
      EXPECT_TRUE(bit_identical("dbeta", dbeta, first_dbeta));
    }
  }
}

// cols: 12 (float: 4-column vectors, bf16: single columns), 13 (single columns), 384 and 768 (both vectorised);
// rows 1, 7 (one block, idle warps) and 1000 (125 backward blocks of 8 rows). Token slots and sample rows, p 0 and
// 0.1.
TEST(CudaFusedLayerNorm, MatchesCpuTwinOverShapesAndLayouts) {
  BERTRAIN_REQUIRE_GPU();
  uint32_t seed = 2000;
  for (int cols : {12, 13, 384, 768}) {
    for (int rows : {1, 7, 1000}) {
      for (bool packed : {true, false}) {
        for (float p : {0.0f, 0.1f}) {
          const FusedCase c{rows, cols, p, packed, CopyMode::kSeparate, false, false};
          check_fused_layernorm<float>(c, seed += 10);
          check_fused_layernorm<bf16>(c, seed += 10);
        }
      }
    }
  }
}

// The T copy left out or stored once (float), the in-place forms, a misaligned residual (single-column kernels
// at BERT width), p = 0.5, and rows as wide as the cached kernels take (1024) and wider (1030 and 2052: the
// uncached kernels; rows kept few enough for the test context's workspace). 5000 rows: the backward's
// kRowPartialBlocks blocks of 20 rows.
TEST(CudaFusedLayerNorm, CopyModesInPlaceAlignmentAndWidths) {
  BERTRAIN_REQUIRE_GPU();
  uint32_t seed = 3000;
  const std::vector<FusedCase> cases = {
      {7, 768, 0.1f, true, CopyMode::kNone, false, false},
      {7, 768, 0.1f, true, CopyMode::kSeparate, true, false},
      {1000, 768, 0.1f, true, CopyMode::kSeparate, false, true},
      {1000, 384, 0.5f, false, CopyMode::kSeparate, true, true},
      {64, 1024, 0.1f, true, CopyMode::kSeparate, false, false},
      {200, 1030, 0.1f, true, CopyMode::kSeparate, false, false},
      {100, 2052, 0.1f, false, CopyMode::kSeparate, true, false},
      {5000, 96, 0.1f, true, CopyMode::kSeparate, false, false},
  };
  for (const FusedCase& c : cases) {
    check_fused_layernorm<bf16>(c, seed += 10);
    FusedCase f = c;
    if (f.mode == CopyMode::kSeparate && f.in_place) f.mode = CopyMode::kSameAsOutput;  // T = float: y is the copy
    check_fused_layernorm<float>(f, seed += 10);
    check_fused_layernorm<float>(c, seed += 10);
  }
}

// The fused backward's mask (the zeros of dx) is dropout_forward_cuda's mask of ones with the same key and token
// slots: the fused kernels draw dropout.cu's stream on the device too, not only the CPU twin's.
TEST(CudaFusedLayerNorm, MaskEqualsDropoutKernelMask) {
  BERTRAIN_REQUIRE_GPU();
  const GpuHandles& handles = context().handles();
  const int rows = 300, cols = 768;
  const std::size_t n = static_cast<std::size_t>(rows) * cols;
  const RandomKey key{99, 5, 3};
  const std::vector<int> lengths = lengths_adding_up_to(rows, 128, 5);
  const std::vector<int32_t> cu = row_offsets(lengths);
  std::vector<int64_t> slots(rows);
  dropout_slots_cpu(slots.data(), cu.data(), static_cast<int>(lengths.size()), 0, 512);
  DeviceBuffer<int64_t> d_slots(slots);
  const DropoutLayout layout{0, 512, cols, d_slots.data()};
  const std::vector<float> ones(n, 1.0f);
  DeviceBuffer<float> d_ones(ones), d_mask(n);
  const std::vector<float> x = random_floats(n, 6, -1.0f, 1.0f), residual = random_floats(n, 7, -1.0f, 1.0f);
  const std::vector<float> gamma(cols, 1.0f), mean(rows, 0.0f), rstd(rows, 1.0f), dy = random_floats(n, 8, -1, 1);
  DeviceBuffer<float> d_x(x), d_residual(residual), d_gamma(gamma), d_mean(mean), d_rstd(rstd), d_dy(dy), d_dz(n),
      d_dx(n), d_dgamma(cols), d_dbeta(cols);
  sync_all();
  dropout_forward_cuda(d_mask.data(), d_ones.data(), n, 0.1f, key, layout, handles.stream);
  dropout_residual_layernorm_backward_cuda(handles, d_dz.data(), d_dx.data(), d_dgamma.data(), d_dbeta.data(),
                                           static_cast<const float*>(d_dy.data()),
                                           static_cast<const float*>(d_x.data()), d_residual.data(),
                                           static_cast<const float*>(d_mean.data()),
                                           static_cast<const float*>(d_rstd.data()),
                                           static_cast<const float*>(d_gamma.data()), rows, cols, 0.1f, key, layout);
  sync_all();
  const std::vector<float> mask = d_mask.download(), dx = d_dx.download();
  std::vector<float> kept_by_dropout(n), kept_by_fused(n);
  for (std::size_t i = 0; i < n; ++i) {
    kept_by_dropout[i] = mask[i] != 0.0f ? 1.0f : 0.0f;
    kept_by_fused[i] = dx[i] != 0.0f ? 1.0f : 0.0f;
  }
  EXPECT_TRUE(bit_identical("fused mask vs dropout_forward_cuda's", kept_by_fused, kept_by_dropout));
}

// ---- LayerNorm, then dropout, fused: the embeddings (no residual) -----------------------------------------------
// x, gamma and beta in T; y, dy and dz in float; the T copy of y. CPU twin: layernorm_forward_cpu<float> (no
// residual) then dropout_forward_cpu<float>, and backward dropout_backward_cpu<float> then
// layernorm_backward_cpu<float>, with the same key and layout. The forward's mask must be the CPU's bit for bit (the
// zeros of y: a kept y is never exactly zero for these inputs); a wrong backward mask moves dz and the parameter
// gradients by O(1), far beyond their tolerances. Tolerances: the fused LayerNorm's above, times 1 / (1 - p) (y is
// the LayerNorm's output and dz the LayerNorm's backward of dy, both scaled by it where kept).

struct LayerNormDropoutCase {
  int rows, cols;
  float p;
  bool packed;      // token slots of packed rows (else one logical row per row, first_sample 2)
  bool in_place;    // forward: the T copy over x (T = float: y over x, stored once); backward: dz over dy
  bool misaligned;  // y and dy 4 bytes off 16-byte alignment: the two-kernel composition
  std::string name() const {
    std::ostringstream os;
    os << "rows=" << rows << " cols=" << cols << " p=" << p << (packed ? " token slots" : " sample rows")
       << (in_place ? ", in place" : "") << (misaligned ? ", misaligned" : "");
    return os.str();
  }
};

template <typename T>
void check_layernorm_dropout(const LayerNormDropoutCase& lc, uint32_t seed) {
  SCOPED_TRACE(lc.name() + " " + type_name<T>());
  const GpuHandles& handles = context().handles();
  const int rows = lc.rows, cols = lc.cols;
  const std::size_t n = static_cast<std::size_t>(rows) * cols;
  const float eps = 1e-12f, p = lc.p;
  const RandomKey key{0x5eedULL, 11, 2};

  const CaseLayout layouts(rows, cols, lc.packed, seed);
  const DropoutLayout &host_layout = layouts.host, &device_layout = layouts.device;

  const std::vector<float> x = inputs<T>(n, seed, -2.0f, 3.0f);
  const std::vector<float> gamma = inputs<T>(static_cast<std::size_t>(cols), seed + 2, 0.5f, 1.5f);
  const std::vector<float> beta = inputs<T>(static_cast<std::size_t>(cols), seed + 3, -0.5f, 0.5f);
  const std::vector<float> dy = random_floats(n, seed + 4, -1.0f, 1.0f);

  std::vector<float> y_ref(n), mean_ref(rows), rstd_ref(rows);
  layernorm_forward_cpu<float>(y_ref.data(), mean_ref.data(), rstd_ref.data(), x.data(), nullptr, gamma.data(),
                               beta.data(), rows, cols, eps);
  dropout_forward_cpu(y_ref.data(), y_ref.data(), n, p, key, host_layout);
  std::vector<float> dz_ref(n), dgamma_ref(cols), dbeta_ref(cols);
  dropout_backward_cpu(dz_ref.data(), dy.data(), n, p, key, host_layout);
  layernorm_backward_cpu<float>(dz_ref.data(), dgamma_ref.data(), dbeta_ref.data(), dz_ref.data(), x.data(), nullptr,
                                mean_ref.data(), rstd_ref.data(), gamma.data(), rows, cols);
  std::size_t dropped = 0;
  for (float v : y_ref) dropped += v == 0.0f;
  if (p > 0.0f && n >= 1000) {
    EXPECT_GT(dropped, 0u) << "the reference dropped nothing";
  }
  if (p == 0.0f) {
    EXPECT_EQ(dropped, 0u);
  }
  const double scale = p > 0.0f ? 1.0 / (1.0 - p) : 1.0;

  // Forward.
  const std::size_t offset = lc.misaligned ? 1 : 0;
  DeviceBuffer<T> d_x = upload<T>(x), d_gamma = upload<T>(gamma), d_beta = upload<T>(beta), d_copy(n);
  OffsetFloats d_y(std::vector<float>(n, std::nanf("")), offset);
  DeviceBuffer<float> d_mean(rows), d_rstd(rows);
  poison(d_copy);
  poison(d_mean);
  poison(d_rstd);
  sync_all();
  float* y = d_y.data();
  T* copy = d_copy.data();
  if (lc.in_place) {
    if constexpr (std::is_same_v<T, float>) {
      y = d_x.data();  // y over x, and y is its own copy
      copy = y;
    } else {
      copy = d_x.data();
    }
  }
  layernorm_dropout_forward_cuda(y, copy, d_mean.data(), d_rstd.data(), static_cast<const T*>(d_x.data()),
                                 static_cast<const T*>(d_gamma.data()), static_cast<const T*>(d_beta.data()), rows,
                                 cols, eps, p, key, device_layout, handles.stream);
  sync_all();
  const std::vector<float> y_got = y == d_y.data() ? d_y.download() : download(d_x);  // y over x: T = float
  EXPECT_TRUE(all_close("y (float)", y_got.data(), y_ref.data(), n, kLayerNorm<float>.atol * scale,
                        kLayerNorm<float>.rtol));
  EXPECT_TRUE(bit_identical("y zero pattern (the mask) against the CPU", zero_pattern(y_got), zero_pattern(y_ref)));
  if (static_cast<const void*>(copy) != static_cast<const void*>(y)) {
    EXPECT_TRUE(same_bits("y (T copy)", copy == d_copy.data() ? d_copy : d_x, y_got));  // rounded once
  }
  EXPECT_TRUE(all_close("mean", d_mean.download().data(), mean_ref.data(), mean_ref.size(), 1e-6, 1e-5));
  EXPECT_TRUE(all_close("rstd", d_rstd.download().data(), rstd_ref.data(), rstd_ref.size(), 1e-6, 1e-5));

  // Backward from the CPU's statistics, twice: the second run must reproduce the first bit for bit.
  DeviceBuffer<T> d_x2 = upload<T>(x);
  d_mean.upload(mean_ref.data(), mean_ref.size());
  d_rstd.upload(rstd_ref.data(), rstd_ref.size());
  float max_rstd = 1.0f;
  for (float r : rstd_ref) max_rstd = std::max(max_rstd, r);
  const Tolerance dz_tol{kLayerNorm<float>.atol * max_rstd * scale, kLayerNorm<float>.rtol};
  const Tolerance param_tol = parameter_gradient_tolerance(rows);
  std::vector<float> first_dz, first_dgamma, first_dbeta;
  for (int run = 0; run < 2; ++run) {
    OffsetFloats d_dy(dy, offset);
    DeviceBuffer<float> d_dz(n), d_dgamma(cols), d_dbeta(cols);
    poison(d_dz);
    poison(d_dgamma);
    poison(d_dbeta);
    sync_all();
    float* dz = lc.in_place ? d_dy.data() : d_dz.data();
    layernorm_dropout_backward_cuda(handles, dz, d_dgamma.data(), d_dbeta.data(),
                                    static_cast<const float*>(d_dy.data()), static_cast<const T*>(d_x2.data()),
                                    static_cast<const float*>(d_mean.data()), static_cast<const float*>(d_rstd.data()),
                                    static_cast<const T*>(d_gamma.data()), rows, cols, p, key, device_layout);
    sync_all();
    const std::vector<float> dz_got = lc.in_place ? d_dy.download() : d_dz.download();
    EXPECT_TRUE(all_close("dz (float)", dz_got.data(), dz_ref.data(), n, dz_tol.atol, dz_tol.rtol));
    const std::vector<float> dgamma = d_dgamma.download(), dbeta = d_dbeta.download();
    EXPECT_TRUE(all_close("dgamma", dgamma.data(), dgamma_ref.data(), dgamma.size(), param_tol.atol * scale,
                          param_tol.rtol));
    EXPECT_TRUE(all_close("dbeta", dbeta.data(), dbeta_ref.data(), dbeta.size(), param_tol.atol * scale,
                          param_tol.rtol));
    if (run == 0) {
      first_dz = dz_got;
      first_dgamma = dgamma;
      first_dbeta = dbeta;
    } else {
      EXPECT_TRUE(bit_identical("dz", dz_got, first_dz));
      EXPECT_TRUE(bit_identical("dgamma", dgamma, first_dgamma));
      EXPECT_TRUE(bit_identical("dbeta", dbeta, first_dbeta));
    }
  }
}

// cols: 12 (float: one 4-column unit per lane's first unit, bf16: the composition), 13 (the composition), 128 (ELECTRA
// and ALBERT's embedding width), 768 and 1024 (BERT's, one kernel), 1030 (wider than registers: the composition);
// rows 1, 7 (one block, idle warps) and 1000 (125 backward blocks of 8 rows); token slots and sample rows; p 0 and
// 0.1.
TEST(CudaLayerNormDropout, MatchesCpuCompositionOverShapesAndLayouts) {
  BERTRAIN_REQUIRE_GPU();
  uint32_t seed = 5000;
  for (int cols : {12, 13, 128, 768, 1024, 1030}) {
    for (int rows : {1, 7, 1000}) {
      for (bool packed : {true, false}) {
        for (float p : {0.0f, 0.1f}) {
          if (cols > 768 && rows == 1000) continue;  // within the test context's workspace
          const LayerNormDropoutCase c{rows, cols, p, packed, false, false};
          check_layernorm_dropout<float>(c, seed += 10);
          check_layernorm_dropout<bf16>(c, seed += 10);
        }
      }
    }
  }
}

// In place (the T copy over x, y over x for float, dz over dy) through one kernel and through the composition (13
// columns), misaligned y and dy (the composition at BERT's width), p = 0.5, and 5000 rows (the backward's
// kRowPartialBlocks blocks of 20 rows).
TEST(CudaLayerNormDropout, InPlaceAlignmentAndManyRows) {
  BERTRAIN_REQUIRE_GPU();
  uint32_t seed = 6000;
  const std::vector<LayerNormDropoutCase> cases = {
      {7, 768, 0.1f, true, true, false},
      {300, 13, 0.1f, true, true, false},
      {1000, 768, 0.1f, true, false, true},
      {1000, 384, 0.5f, false, true, false},
      {1000, 384, 0.5f, false, true, true},
      {5000, 96, 0.1f, true, false, false},
  };
  for (const LayerNormDropoutCase& c : cases) {
    check_layernorm_dropout<float>(c, seed += 10);
    check_layernorm_dropout<bf16>(c, seed += 10);
  }
}

// ---- Tensor ops ---------------------------------------------------------------------------------------

float float_from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

TEST(CudaTensorOps, CastsMatchTheHostRounding) {
  BERTRAIN_REQUIRE_GPU();
  const CudaStream stream = context().stream();
  // Ties both ways, near-ties, specials, the overflow to infinity, subnormals, then random values over a wide
  // range of exponents.
  std::vector<float> x = {0.0f,
                          -0.0f,
                          1.0f + std::ldexp(1.0f, -8),
                          1.0f + 3.0f * std::ldexp(1.0f, -8),
                          -(1.0f + 3.0f * std::ldexp(1.0f, -8)),
                          1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20),
                          std::numeric_limits<float>::max(),
                          std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::denorm_min(),
                          float_from_bits(0x00418000u),  // a subnormal tie
                          float_from_bits(0x00408000u)};
  const std::size_t specials = x.size();
  const std::vector<float> mantissas = random_floats(5000, 41, -2.0f, 2.0f);
  for (std::size_t i = 0; i < mantissas.size(); ++i) {
    x.push_back(std::ldexp(mantissas[i], static_cast<int>(i % 200) - 100));
  }
  // float → bf16: the same bits as float_to_bf16 (the CPU's cast).
  std::vector<bf16> ref(x.size());
  cast_cpu(ref.data(), x.data(), x.size());
  DeviceBuffer<float> d_x(x);
  DeviceBuffer<bf16> d_h(x.size());
  poison(d_h);
  sync_all();
  cast_cuda(d_h.data(), d_x.data(), x.size(), stream);
  sync_all();
  const std::vector<bf16> got = d_h.download();
  for (std::size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(got[i].bits, ref[i].bits) << "element " << i << (i < specials ? " (special)" : "") << ": " << x[i];
  }

  // NaN stays NaN (the payload may differ between host and device).
  const std::vector<float> nans = {std::numeric_limits<float>::quiet_NaN(), float_from_bits(0x7f800001u),
                                   float_from_bits(0xffc00000u)};
  DeviceBuffer<float> d_nan(nans);
  DeviceBuffer<bf16> d_nan_h(nans.size());
  DeviceBuffer<float> d_nan_back(nans.size());
  sync_all();
  cast_cuda(d_nan_h.data(), d_nan.data(), nans.size(), stream);
  cast_cuda(d_nan_back.data(), d_nan_h.data(), nans.size(), stream);
  sync_all();
  for (float v : d_nan_back.download()) EXPECT_TRUE(std::isnan(v)) << v;

  // bf16 → float is exact: every bit pattern but NaNs comes back as the host's conversion.
  std::vector<bf16> all(65536);
  for (uint32_t b = 0; b < 65536; ++b) all[b] = bf16{static_cast<uint16_t>(b)};
  DeviceBuffer<bf16> d_all(all);
  DeviceBuffer<float> d_all_float(all.size());
  poison(d_all_float);
  sync_all();
  cast_cuda(d_all_float.data(), d_all.data(), all.size(), stream);
  sync_all();
  const std::vector<float> back = d_all_float.download();
  std::vector<float> back_ref(all.size());
  cast_cpu(back_ref.data(), all.data(), all.size());
  EXPECT_EQ(std::memcmp(back.data(), back_ref.data(), back.size() * sizeof(float)), 0);
}

template <typename T>
void check_add_inplace(std::size_t n, uint32_t seed) {
  SCOPED_TRACE("n=" + std::to_string(n) + " " + type_name<T>());
  const std::vector<float> y = inputs<T>(n, seed, -1.0f, 1.0f), x = inputs<T>(n, seed + 1, -1.0f, 1.0f);
  std::vector<float> ref = y;
  add_inplace_cpu(ref.data(), x.data(), n);  // one float addition: the device's, rounded once to T
  DeviceBuffer<T> d_y = upload<T>(y), d_x = upload<T>(x);
  sync_all();
  add_inplace_cuda(d_y.data(), d_x.data(), n, context().stream());
  sync_all();
  EXPECT_TRUE(same_bits("y += x", d_y, ref));
}

TEST(CudaTensorOps, AddInplaceMatchesCpu) {
  BERTRAIN_REQUIRE_GPU();
  uint32_t seed = 700;
  for (std::size_t n : {std::size_t{1}, std::size_t{33}, std::size_t{1000}, std::size_t{257 * 768 + 3}}) {
    check_add_inplace<float>(n, ++seed);
    check_add_inplace<bf16>(n, ++seed);
  }
  // (1 << 24) + 7 > 65536 blocks · 256 threads: the grid-stride loop wraps.
  check_add_inplace<float>((std::size_t{1} << 24) + 7, ++seed);
}

TEST(CudaTensorOps, SumOfSquaresMatchesCpuAndIsDeterministic) {
  BERTRAIN_REQUIRE_GPU();
  const GpuHandles& handles = context().handles();
  DeviceBuffer<float> d_out(1);
  // n = 0 gives 0.
  poison(d_out);
  sync_all();
  sum_of_squares_cuda(handles, d_out.data(), nullptr, 0);
  sync_all();
  EXPECT_EQ(d_out.download()[0], 0.0f);

  uint32_t seed = 900;
  // One element, a ragged tail after the float4s, one partial grid, and a grid-stride wrap (256 blocks of 1024
  // threads read 2^20 elements per sweep); each from an aligned address (float4s) and one element further on (the
  // element path).
  for (std::size_t n : {std::size_t{1}, std::size_t{1003}, std::size_t{65536}, std::size_t{5 * 1048576 + 3}}) {
    for (std::size_t offset : {std::size_t{0}, std::size_t{1}}) {
      SCOPED_TRACE("n=" + std::to_string(n) + ", offset " + std::to_string(offset));
      const std::vector<float> x = random_floats(n + offset, ++seed, -1.0f, 1.0f);
      const double ref = sum_of_squares_cpu(x.data() + offset, n);
      DeviceBuffer<float> d_x(x);
      float first = 0;
      for (int run = 0; run < 2; ++run) {
        poison(d_out);
        sync_all();
        sum_of_squares_cuda(handles, d_out.data(), d_x.data() + offset, n);
        sync_all();
        const float got = d_out.download()[0];
        // Float partial sums of ≤ n / 2^18 + 4 squares per thread, then ordered float additions: well inside 1e-5.
        EXPECT_NEAR(got, ref, 1e-5 * ref);
        if (run == 0) first = got;
        else EXPECT_EQ(std::memcmp(&got, &first, sizeof(float)), 0) << "two runs differ: " << got << " vs " << first;
      }
    }
  }
}

// ---- Packed batches (kernels/packed.h) ------------------------------------------------------------------

// Exact equality of two integer arrays; the failure names the first difference and counts them all.
template <typename I>
::testing::AssertionResult same_integers(const std::string& what, const std::vector<I>& got,
                                         const std::vector<I>& ref) {
  if (got.size() != ref.size()) {
    return ::testing::AssertionFailure() << what << ": " << got.size() << " elements, expected " << ref.size();
  }
  std::size_t mismatches = 0, first = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    if (got[i] != ref[i] && mismatches++ == 0) first = i;
  }
  if (mismatches == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << what << ": " << mismatches << " of " << ref.size()
                                       << " elements differ; first at " << first << ": got " << got[first]
                                       << ", expected " << ref[first];
}

// Dropout slots from device row offsets, exactly the CPU's.
void check_dropout_slots(const std::vector<int>& lengths, int64_t first_sample, int max_positions) {
  SCOPED_TRACE(describe_lengths(lengths) + ", first_sample " + std::to_string(first_sample) + ", max_positions " +
               std::to_string(max_positions));
  const CudaStream stream = context().stream();
  const std::vector<int32_t> cu = row_offsets(lengths);
  const int batch = static_cast<int>(lengths.size());
  const std::size_t tokens = static_cast<std::size_t>(cu.back());
  std::vector<int64_t> slots_ref(tokens);
  dropout_slots_cpu(slots_ref.data(), cu.data(), batch, first_sample, max_positions);

  DeviceBuffer<int32_t> d_cu(cu);
  DeviceBuffer<int64_t> d_slots(tokens);
  poison(d_slots);  // -1 everywhere: a token the kernel skips cannot pass
  sync_all();
  dropout_slots_cuda(d_slots.data(), d_cu.data(), batch, first_sample, max_positions, stream);
  sync_all();
  EXPECT_TRUE(same_integers("slots", d_slots.download(), slots_ref));
}

TEST(CudaPacked, DropoutSlotsMatchCpu) {
  BERTRAIN_REQUIRE_GPU();
  // Rows longer than the kernel's 128 threads (512), of one token, and many; first_sample 0, > 0, and large enough
  // that a slot overflows 32 bits (100000 · 513 > 2^25 · 1.5; with 768 columns the element index passes 2^34).
  for (const RaggedRows& rows : ragged_row_sets(512, 501)) {
    for (int64_t first_sample : {int64_t{0}, int64_t{5}, int64_t{100000}}) {
      check_dropout_slots(rows.lengths, first_sample, 512);
    }
    check_dropout_slots(rows.lengths, 7, 513);  // max_positions above the longest row and odd
  }
}

template <typename T>
void check_first_tokens(const std::vector<int>& lengths, int hidden, uint32_t seed) {
  SCOPED_TRACE(describe_lengths(lengths) + ", H " + std::to_string(hidden) + " " + type_name<T>());
  const CudaStream stream = context().stream();
  const std::vector<int32_t> cu = row_offsets(lengths);
  const int batch = static_cast<int>(lengths.size()), tokens = cu.back();
  const std::size_t th = static_cast<std::size_t>(tokens) * hidden, bh = static_cast<std::size_t>(batch) * hidden;
  const std::vector<float> token_values = inputs<T>(th, seed, -1.0f, 1.0f);
  const std::vector<float> dcls = inputs<T>(bh, seed + 1, -1.0f, 1.0f);
  std::vector<float> cls_ref(bh), dtokens_ref(th);
  gather_first_tokens_cpu(cls_ref.data(), token_values.data(), cu.data(), batch, hidden);
  scatter_first_tokens_cpu(dtokens_ref.data(), dcls.data(), cu.data(), batch, hidden);

  DeviceBuffer<int32_t> d_cu(cu);
  DeviceBuffer<T> d_tokens = upload<T>(token_values), d_dcls = upload<T>(dcls), d_cls(bh), d_dtokens(th);
  poison(d_cls);
  poison(d_dtokens);  // every element of dtokens must be written, the zeros included
  sync_all();
  gather_first_tokens_cuda(d_cls.data(), d_tokens.data(), d_cu.data(), batch, hidden, stream);
  scatter_first_tokens_cuda(d_dtokens.data(), d_dcls.data(), d_cu.data(), batch, tokens, hidden, stream);
  sync_all();
  EXPECT_TRUE(same_bits("gather_first_tokens", d_cls, cls_ref));
  EXPECT_TRUE(same_bits("scatter_first_tokens", d_dtokens, dtokens_ref));
}

TEST(CudaPacked, FirstTokensGatherAndScatterMatchCpu) {
  BERTRAIN_REQUIRE_GPU();
  uint32_t seed = 800;
  for (const RaggedRows& rows : ragged_row_sets(512, 801)) {
    for (int hidden : {1, 31, 768}) {
      check_first_tokens<float>(rows.lengths, hidden, ++seed);
      check_first_tokens<bf16>(rows.lengths, hidden, ++seed);
    }
  }
  // More than 65536 · 256 elements of dtokens: the scatter's grid-stride loop wraps (19711 tokens · 1024).
  std::vector<int> long_rows(48, 400);
  long_rows.push_back(1);
  long_rows.push_back(511);
  check_first_tokens<float>(long_rows, 1024, ++seed);
}

// ---- Host-side argument checks (no device needed: the launchers throw before any CUDA call) -------------

TEST(CudaLaunchers, RejectBadArgumentsBeforeLaunching) {
  // Never dereferenced: every call below must throw on its arguments first.
  alignas(16) float fake[4] = {};  // aligned: the fused launchers below take their one-kernel paths
  float* f = fake;
  const RandomKey key{};
  EXPECT_THROW(dropout_forward_cuda(f, f, 4, 1.5f, key, DropoutLayout{}, nullptr), Error);
  EXPECT_THROW(dropout_forward_cuda(f, f, 4, -0.1f, key, DropoutLayout{}, nullptr), Error);
  EXPECT_THROW(dropout_forward_cuda(f, f, 10, 0.5f, key, DropoutLayout{0, 1, 3}, nullptr), Error);  // 10 % 3
  EXPECT_THROW(dropout_backward_cuda(f, f, 9, 0.5f, key, DropoutLayout{0, 1, 4}, nullptr), Error);  // 9 % 4
  EXPECT_THROW(dropout_forward_cuda(f, f, 8, 0.5f, key, DropoutLayout{-1, 1, 1}, nullptr), Error);
  EXPECT_THROW(bias_activation_forward_cuda(f, f, f, 1, 4, Activation::kGelu, nullptr), Error);  // y == x
  EXPECT_THROW(bias_activation_forward_cuda(f + 1, f, f, 0, 4, Activation::kGelu, nullptr), Error);
  EXPECT_THROW(layernorm_forward_cuda(f, f, f, f, f, f, f, 0, 4, 1e-5f, nullptr), Error);
  // The packed-batch launchers: no rows, no columns, fewer tokens than rows.
  int32_t fake_offsets[3] = {0, 1, 2};
  int64_t fake_slots[2] = {};
  EXPECT_THROW(dropout_slots_cuda(fake_slots, fake_offsets, 0, 0, 512, nullptr), Error);
  EXPECT_THROW(gather_first_tokens_cuda(f, f, fake_offsets, 0, 4, nullptr), Error);
  EXPECT_THROW(gather_first_tokens_cuda(f, f, fake_offsets, 2, 0, nullptr), Error);
  EXPECT_THROW(scatter_first_tokens_cuda(f, f, fake_offsets, 2, 1, 4, nullptr), Error);
  // The mixed-precision overloads check the same things (and that a bf16 copy is not the float output itself).
  // h lies apart from f, so that each call below fails on the argument its comment names, not on h aliasing f.
  alignas(16) bf16 fake_bf16[8] = {};
  bf16* h = fake_bf16;
  EXPECT_THROW(dropout_forward_cuda(f, h, f, 4, 1.5f, key, DropoutLayout{}, nullptr), Error);
  EXPECT_THROW(dropout_forward_cuda(f, h, f, 10, 0.5f, key, DropoutLayout{0, 1, 3}, nullptr), Error);  // 10 % 3
  EXPECT_THROW(dropout_forward_cuda(f, reinterpret_cast<bf16*>(f), f, 4, 0.5f, key, DropoutLayout{}, nullptr), Error);
  EXPECT_THROW(dropout_backward_cuda(h, static_cast<const float*>(f), 9, 0.5f, key, DropoutLayout{0, 1, 4}, nullptr),
               Error);  // 9 % 4
  EXPECT_THROW(dropout_forward_cuda(f, h, f, 8, 0.5f, key, DropoutLayout{-1, 1, 1}, nullptr), Error);
  EXPECT_THROW(dropout_backward_cuda(h, static_cast<const float*>(f), 4, -0.1f, key, DropoutLayout{}, nullptr), Error);
  EXPECT_THROW(layernorm_forward_cuda(f, static_cast<float*>(nullptr), f, f, f, f, f, f, 0, 4, 1e-5f, nullptr), Error);
  EXPECT_THROW(layernorm_forward_cuda(f, h, f, f, static_cast<const bf16*>(nullptr), f, h, h, 1, 4, 1e-5f, nullptr),
               Error);  // null x
  EXPECT_THROW(layernorm_forward_cuda(f, reinterpret_cast<bf16*>(f), f, f, h, f, h, h, 1, 4, 1e-5f, nullptr), Error);
  EXPECT_THROW(scatter_first_tokens_cuda(f, f, fake_offsets, 1, 1, 0, nullptr), Error);

  // LayerNorm backward needs 2 · kReductionChunks · cols floats of workspace; gpu_reduction_workspace_elements
  // provides them.
  const int cols = 768;
  GpuHandles small;
  small.workspace = f;
  small.workspace_elements = static_cast<std::size_t>(kReductionChunks) * cols;  // one array's worth: too small
  EXPECT_THROW(layernorm_backward_cuda(small, f, f, f, f, f, f, f, f, f, 4, cols), Error);
  EXPECT_THROW(layernorm_backward_cuda(small, f, f, f, f, static_cast<const bf16*>(h), f, f, f,
                                       static_cast<const bf16*>(h), 4, cols),
               Error);
  EXPECT_GE(gpu_reduction_workspace_elements(cols), 2 * static_cast<std::size_t>(kReductionChunks) * cols);
  GpuHandles tiny;
  tiny.workspace = f;
  tiny.workspace_elements = 4;
  EXPECT_THROW(sum_of_squares_cuda(tiny, f, f, std::size_t{1} << 20), Error);

  // The fused dropout + residual + LayerNorm: p, the layout (a row of 8 split by logical rows of 4; 32 elements in
  // rows of 24), the bf16 copy over the float output, dx over dy, and a workspace below 2 · blocks · cols.
  const int fused_cols = 8;
  GpuHandles fused;
  fused.workspace = f;
  fused.workspace_elements = 4;
  EXPECT_THROW(dropout_residual_layernorm_forward_cuda(f, f, f, f, f, f, f, f, 4, fused_cols, 1e-5f, 1.5f, key,
                                                       DropoutLayout{}, nullptr),
               Error);
  EXPECT_THROW(dropout_residual_layernorm_forward_cuda(f, f, f, f, f, f, f, f, 4, fused_cols, 1e-5f, 0.1f, key,
                                                       DropoutLayout{0, 1, 4, nullptr}, nullptr),
               Error);
  EXPECT_THROW(dropout_residual_layernorm_forward_cuda(f, f, f, f, f, f, f, f, 4, fused_cols, 1e-5f, 0.1f, key,
                                                       DropoutLayout{0, 1, 24, nullptr}, nullptr),
               Error);
  EXPECT_THROW(dropout_residual_layernorm_forward_cuda(f, reinterpret_cast<bf16*>(f), f, f, static_cast<const bf16*>(h),
                                                       f, static_cast<const bf16*>(h), static_cast<const bf16*>(h), 4,
                                                       fused_cols, 1e-5f, 0.1f, key, DropoutLayout{}, nullptr),
               Error);
  EXPECT_THROW(dropout_residual_layernorm_forward_cuda(f, f, f, f, f, static_cast<const float*>(nullptr), f, f, 4,
                                                       fused_cols, 1e-5f, 0.1f, key, DropoutLayout{}, nullptr),
               Error);  // the residual is required
  EXPECT_THROW(dropout_residual_layernorm_backward_cuda(small, f, reinterpret_cast<float*>(f + 1), f, f,
                                                        static_cast<const float*>(f + 1), static_cast<const float*>(f),
                                                        f, f, f, static_cast<const float*>(f), 4, fused_cols, 0.1f, key,
                                                        DropoutLayout{}),
               Error);  // dx over dy
  EXPECT_THROW(dropout_residual_layernorm_backward_cuda(fused, f, h, f, f, f, static_cast<const bf16*>(h + 4), f, f,
                                                        f, static_cast<const bf16*>(h), 4, fused_cols, 0.1f, key,
                                                        DropoutLayout{}),
               Error);  // workspace of 4 floats
  EXPECT_GE(gpu_reduction_workspace_elements(cols), dropout_residual_layernorm_workspace_elements(cols));

  // LayerNorm then dropout: the same checks (p, the layout, the bf16 copy over the float output, null pointers, the
  // workspace of the one-pass backward).
  EXPECT_THROW(layernorm_dropout_forward_cuda(f, f, f, f, f, f, f, 4, fused_cols, 1e-5f, -0.5f, key, DropoutLayout{},
                                              nullptr),
               Error);
  EXPECT_THROW(layernorm_dropout_forward_cuda(f, f, f, f, f, f, f, 4, fused_cols, 1e-5f, 0.1f, key,
                                              DropoutLayout{0, 1, 4, nullptr}, nullptr),
               Error);
  EXPECT_THROW(layernorm_dropout_forward_cuda(f, reinterpret_cast<bf16*>(f), f, f, static_cast<const bf16*>(h),
                                              static_cast<const bf16*>(h), static_cast<const bf16*>(h), 4, fused_cols,
                                              1e-5f, 0.1f, key, DropoutLayout{}, nullptr),
               Error);
  EXPECT_THROW(layernorm_dropout_forward_cuda(f, f, f, f, static_cast<const float*>(nullptr), f, f, 4, fused_cols,
                                              1e-5f, 0.1f, key, DropoutLayout{}, nullptr),
               Error);  // null x
  EXPECT_THROW(layernorm_dropout_backward_cuda(fused, f, f, f, f, static_cast<const bf16*>(h), f, f,
                                               static_cast<const bf16*>(h), 4, fused_cols, 0.1f, key, DropoutLayout{}),
               Error);  // workspace of 4 floats
  EXPECT_THROW(layernorm_dropout_backward_cuda(fused, f + 1, f, f, static_cast<const float*>(f + 1), f, f, f, f, 4,
                                               fused_cols, 0.1f, key, DropoutLayout{}),
               Error);  // the same on the misaligned (two-kernel) path, before its first launch
  EXPECT_THROW(layernorm_dropout_backward_cuda(fused, f, f, f, f, f, f, f, f, 0, fused_cols, 0.1f, key,
                                               DropoutLayout{}),
               Error);  // no rows
}

}  // namespace
}  // namespace bertrain
