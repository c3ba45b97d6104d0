// GPU vs CPU twin: BERT input embeddings over ragged packed batches (forward and the sort-based deterministic
// backward), the classification losses and the Adam / AdamW update.
//
// What is guaranteed, and so what is checked:
//   - embedding forward: bit-identical to the CPU twin, float and bf16 (the GPU performs the same float additions
//     in the same order; bf16 inputs are pre-rounded so the float twin sees the same values, and a bf16 output is
//     the twin's float result rounded once, like float_to_bf16).
//   - embedding backward: every table row used by at most kEmbeddingGradientChunk tokens bit-identical to the CPU
//     twin (the same additions in token order); longer rows (chunk sums added in a fixed order) within the
//     summation-order tolerance derived at long_row_tolerance; every row bit-identical between two runs.
//   - losses: a block-wide sum in another order and CUDA's expf / logf / log1pf: a few float ulps (tolerances
//     below, derived where they are used).
//   - Adam: bit-identical to the uncontracted float arithmetic of adam_update_cpu (reference below); within
//     a stated bound of adam_update_cpu as built, which GCC compiles with FMA contraction (see adam.cu).
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "core/bf16.h"
#include "core/cuda/device_buffer.h"
#include "core/cuda/gpu_context.h"
#include "kernels/adam.h"
#include "kernels/embedding.h"
#include "kernels/loss.h"
#include "kernels/packed.h"
#include "tests/cuda/gpu_test.h"
#include "tests/tolerance.h"

namespace bertrain {
namespace {

using bertrain::testing::all_close;
using bertrain::testing::bf16_rounded;
using bertrain::testing::describe_lengths;
using bertrain::testing::longest_of;
using bertrain::testing::mixed_lengths;
using bertrain::testing::poison;
using bertrain::testing::random_floats;
using bertrain::testing::row_offsets;
using bertrain::testing::to_bf16;

// Uploads with cudaMemcpy (legacy stream) may still be in flight when a kernel starts on the context's
// non-blocking stream, and downloads do not wait for that stream: fence around every launch sequence.
void device_sync() { BERTRAIN_CUDA_CHECK(cudaDeviceSynchronize()); }


uint32_t bits_of(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}
uint32_t bits_of(bf16 x) { return x.bits; }
float value_of(float x) { return x; }
float value_of(bf16 x) { return bf16_to_float(x); }

// Bit-for-bit equality of two arrays; the failure names the first differing element and counts them all.
template <typename T>
::testing::AssertionResult bitwise_equal(const std::string& what, const T* got, const T* ref, std::size_t n) {
  std::size_t mismatches = 0, first = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (bits_of(got[i]) != bits_of(ref[i])) {
      if (mismatches == 0) first = i;
      ++mismatches;
    }
  }
  if (mismatches == 0) return ::testing::AssertionSuccess();
  std::ostringstream os;
  os.precision(9);
  os << what << ": " << mismatches << " of " << n << " elements differ; first at " << first << ": got "
     << value_of(got[first]) << " (0x" << std::hex << bits_of(got[first]) << std::dec << "), expected "
     << value_of(ref[first]) << " (0x" << std::hex << bits_of(ref[first]) << std::dec << ")";
  return ::testing::AssertionFailure() << os.str();
}

template <typename T>
::testing::AssertionResult bitwise_equal(const std::string& what, const std::vector<T>& got,
                                         const std::vector<T>& ref) {
  if (got.size() != ref.size()) {
    return ::testing::AssertionFailure() << what << ": " << got.size() << " elements, expected " << ref.size();
  }
  return bitwise_equal(what, got.data(), ref.data(), got.size());
}

// ---- embeddings ------------------------------------------------------------------------------------

// A packed batch (rows of `lengths` tokens back to back) and the embedding tables it reads. Every row is at most
// max_pos long (the CUDA backward trusts the host's check_row_offsets).
struct EmbeddingCase {
  std::vector<int> lengths;
  int hidden, vocab, max_pos, type_vocab;
  bool with_types;
  double zero_fraction;  // share of tokens with id 0: one long run of equal ids
  int batch() const { return static_cast<int>(lengths.size()); }
  int tokens() const { return row_offsets(lengths).back(); }
  std::string name() const {
    std::ostringstream os;
    os << describe_lengths(lengths) << ", H" << hidden << " V" << vocab << " P" << max_pos << " TV" << type_vocab
       << (with_types ? " types" : " no-types") << " zeros" << zero_fraction;
    return os.str();
  }
};

// Every launch branch: one token; hidden 32 / 33 / 300 / 768 / 1000 (one partial warp, several column
// loops of the 256-thread blocks); runs of equal ids shorter than, equal to and much longer than the
// 8-row batch and the 256-key scan chunk (a vocabulary of 1, 2 or 5, or 90% zeros); a run reaching the
// last sorted position; the largest id vocab - 1 (the top radix bit); the SciBERT vocabulary; positions
// and types no token uses (zero rows). Ragged rows: every row of length 1, mixed lengths 1..512 (the position
// gradient sums a different number of rows at each position), one row, 64 rows of mixed lengths, and a row as
// long as the position table.
const std::vector<EmbeddingCase>& embedding_cases() {
  static const std::vector<EmbeddingCase> cases = {
      {{1}, 32, 5, 4, 2, false, 0.0},
      {std::vector<int>(8, 1), 768, 5, 16, 2, true, 0.0},
      {{7, 3, 7}, 768, 5, 16, 2, true, 0.0},
      {{33, 1, 20, 33}, 33, 7, 40, 3, true, 0.0},
      {{170, 512, 1, 73, 2, 511}, 1000, 3000, 512, 2, true, 0.2},
      {{128, 64}, 768, 31090, 512, 2, false, 0.5},
      {mixed_lengths(64, 128, 17), 32, 1, 128, 2, true, 0.0},
      {mixed_lengths(8, 130, 19), 300, 2, 130, 2, true, 0.9},
      {std::vector<int>(5, 1), 32, 31090, 512, 2, true, 0.0},
      {{512}, 64, 31090, 512, 2, true, 0.0},
  };
  return cases;
}

struct EmbeddingInputs {
  std::vector<int32_t> ids, types, cu_seqlens, positions;
  std::vector<float> word, pos, type, dout;
};

// Ids: zero_fraction of them 0, of the rest half from the first 5 ids (many tokens share an id) and half
// uniform over the vocabulary; the last token takes id vocab - 1. Token types use only 0 and 1, so with
// type_vocab 3 the last row of dtype must stay zero. Positions in row order (embedding_positions_cpu, BERT's).
// Values are bf16-representable so one set of inputs drives both the float and the bf16 kernels.
EmbeddingInputs make_embedding_inputs(const EmbeddingCase& c, uint32_t seed, bool forward) {
  const int tokens = c.tokens();
  EmbeddingInputs in;
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::uniform_int_distribution<int> any_id(0, c.vocab - 1), small_id(0, std::min(c.vocab, 5) - 1), type(0, 1);
  in.ids.resize(tokens);
  in.types.resize(tokens);
  for (int t = 0; t < tokens; ++t) {
    if (unit(gen) < c.zero_fraction) {
      in.ids[t] = 0;
    } else {
      in.ids[t] = unit(gen) < 0.5 ? small_id(gen) : any_id(gen);
    }
    in.types[t] = std::min(type(gen), c.type_vocab - 1);
  }
  in.ids[tokens - 1] = c.vocab - 1;
  in.cu_seqlens = row_offsets(c.lengths);
  in.positions.resize(tokens);
  embedding_positions_cpu(in.positions.data(), in.ids.data(), in.cu_seqlens.data(), c.batch(), -1);
  const std::size_t h = static_cast<std::size_t>(c.hidden);
  if (forward) {
    in.word = bf16_rounded(random_floats(c.vocab * h, seed + 1));
    in.pos = bf16_rounded(random_floats(c.max_pos * h, seed + 2));
    in.type = bf16_rounded(random_floats(c.type_vocab * h, seed + 3));
  } else {
    in.dout = bf16_rounded(random_floats(tokens * h, seed + 4));
  }
  return in;
}

std::vector<float> as_floats(const std::vector<float>& x) { return x; }
std::vector<float> as_floats(const std::vector<bf16>& x) { return bertrain::testing::to_float(x); }

template <typename T>
std::vector<T> as_storage(const std::vector<float>& x);
template <>
std::vector<float> as_storage<float>(const std::vector<float>& x) {
  return x;
}
template <>
std::vector<bf16> as_storage<bf16>(const std::vector<float>& x) {
  return to_bf16(x);
}

template <typename T>
void check_embedding_forward(const EmbeddingCase& c, uint32_t seed, CudaStream stream) {
  SCOPED_TRACE(c.name());
  const EmbeddingInputs in = make_embedding_inputs(c, seed, true);
  const int tokens = c.tokens();
  ASSERT_LE(longest_of(c.lengths), c.max_pos) << "a case's rows must fit the position table";
  const int32_t* cpu_types = c.with_types ? in.types.data() : nullptr;
  std::vector<float> ref(static_cast<std::size_t>(tokens) * c.hidden);
  embedding_forward_cpu<float>(ref.data(), in.ids.data(), in.positions.data(), cpu_types, in.word.data(),
                               in.pos.data(), in.type.data(), tokens, c.hidden, c.vocab, c.max_pos, c.type_vocab);

  DeviceBuffer<int32_t> ids(in.ids), types(in.types), positions(in.positions);
  DeviceBuffer<T> word(as_storage<T>(in.word)), pos(as_storage<T>(in.pos)), type(as_storage<T>(in.type));
  DeviceBuffer<T> out(ref.size());
  poison(out);
  device_sync();
  embedding_forward_cuda<T>(out.data(), ids.data(), positions.data(), c.with_types ? types.data() : nullptr,
                            word.data(), pos.data(), type.data(), tokens, c.hidden, stream);
  device_sync();
  // float: the same two float additions. bf16: the same float sum, rounded once to bf16.
  EXPECT_TRUE(bitwise_equal("embedding forward", out.download(), as_storage<T>(ref)));
}

// A table row summed from `count` tokens in chunks: both the CPU's sequential sum and the GPU's chunk sums round
// once per addition, a random walk of about √count roundings of the running sum (|sum| ≈ √count · 0.6 for these
// inputs in [-1, 1]): for 4096 tokens about 1e-4, for 32768 tokens about 4e-4. atol 2e-7 · count (8e-4 and 6.6e-3)
// leaves a margin of 5 to 15 and is still far below one token's contribution (0.5 on average), so a token lost or
// added twice fails.
struct RowTolerance {
  double atol, rtol;
};
RowTolerance long_row_tolerance(long count) { return {2e-7 * static_cast<double>(count) + 1e-5, 1e-5}; }

// Table gradient `got` against the CPU's `ref` row by row ([rows, hidden]): a row of at most kEmbeddingGradientChunk
// tokens (counts[row]) bit for bit, a longer one within long_row_tolerance. Names the first failing row.
::testing::AssertionResult table_matches(const std::string& what, const std::vector<float>& got,
                                         const std::vector<float>& ref, const std::vector<long>& counts, int hidden) {
  const std::size_t h = static_cast<std::size_t>(hidden);
  if (got.size() != ref.size() || ref.size() != counts.size() * h) {
    return ::testing::AssertionFailure() << what << ": sizes " << got.size() << " / " << ref.size();
  }
  std::size_t exact_rows = 0, long_rows = 0;
  for (std::size_t row = 0; row < counts.size(); ++row) {
    const float* g = got.data() + row * h;
    const float* r = ref.data() + row * h;
    if (counts[row] <= kEmbeddingGradientChunk) {
      ++exact_rows;
      const ::testing::AssertionResult same = bitwise_equal(what + " row " + std::to_string(row) + " (" +
                                                                std::to_string(counts[row]) + " tokens)",
                                                            g, r, h);
      if (!same) return same;
    } else {
      ++long_rows;
      const RowTolerance tol = long_row_tolerance(counts[row]);
      const ::testing::AssertionResult near =
          all_close(what + " row " + std::to_string(row) + " (" + std::to_string(counts[row]) + " tokens)", g, r, h,
                    tol.atol, tol.rtol);
      if (!near) return near;
    }
  }
  return ::testing::AssertionSuccess() << what << ": " << exact_rows << " rows bit-identical, " << long_rows
                                       << " long rows within tolerance";
}

// Returns how many tokens share the most frequent id (the longest run the word-gradient kernel summed).
template <typename T>
long check_embedding_backward(const EmbeddingCase& c, uint32_t seed, std::size_t scratch_offset, CudaStream stream) {
  SCOPED_TRACE(c.name());
  const EmbeddingInputs in = make_embedding_inputs(c, seed, false);
  const int tokens = c.tokens();
  const std::size_t h = static_cast<std::size_t>(c.hidden);
  const int32_t* cpu_types = c.with_types ? in.types.data() : nullptr;
  std::vector<float> dword_ref(c.vocab * h), dpos_ref(c.max_pos * h), dtype_ref(c.type_vocab * h);
  embedding_backward_cpu<float>(dword_ref.data(), dpos_ref.data(), dtype_ref.data(), in.dout.data(), in.ids.data(),
                                in.positions.data(), cpu_types, tokens, c.hidden, c.vocab, c.max_pos, c.type_vocab, -1,
                                -1);
  // Tokens per table row: ids, positions (rows longer than the position), types (all 0 without types).
  std::vector<long> uses(c.vocab, 0), position_uses(c.max_pos, 0), type_uses(c.type_vocab, 0);
  for (int32_t id : in.ids) ++uses[id];
  for (int32_t p : in.positions) ++position_uses[p];
  for (int t = 0; t < tokens; ++t) ++type_uses[c.with_types ? in.types[t] : 0];
  const long longest_run = *std::max_element(uses.begin(), uses.end());

  DeviceBuffer<int32_t> ids(in.ids), types(in.types), positions(in.positions);
  DeviceBuffer<T> dout(as_storage<T>(in.dout));
  const std::size_t scratch_bytes = embedding_backward_scratch_bytes(tokens, c.hidden);
  // The scratch may start anywhere (scratch_offset bytes into an allocation): the launcher aligns it.
  DeviceBuffer<unsigned char> scratch(scratch_bytes + scratch_offset);
  poison(scratch);

  std::vector<float> first[3];
  for (int run = 0; run < 2; ++run) {
    DeviceBuffer<float> dword(dword_ref.size()), dpos(dpos_ref.size()), dtype(dtype_ref.size());
    poison(dword);
    poison(dpos);
    poison(dtype);
    device_sync();
    embedding_backward_cuda<T>(dword.data(), dpos.data(), dtype.data(), dout.data(), ids.data(), positions.data(),
                               c.with_types ? types.data() : nullptr, tokens, c.hidden, c.vocab, c.max_pos,
                               c.type_vocab, -1, -1, scratch.data() + scratch_offset, scratch_bytes, stream);
    device_sync();
    std::vector<float> got[3] = {dword.download(), dpos.download(), dtype.download()};
    if (run == 0) {
      // Rows of at most one chunk: the same float additions in the same (token) order as the CPU twin. dpos[s] sums
      // the tokens at position s of the rows longer than s, in row order, which is token order.
      EXPECT_TRUE(table_matches("dword", got[0], dword_ref, uses, c.hidden));
      EXPECT_TRUE(table_matches("dpos", got[1], dpos_ref, position_uses, c.hidden));
      EXPECT_TRUE(table_matches("dtype", got[2], dtype_ref, type_uses, c.hidden));
      for (int k = 0; k < 3; ++k) first[k] = std::move(got[k]);
    } else {
      // Deterministic: a second run (scratch left dirty by the first) reproduces every bit.
      EXPECT_TRUE(bitwise_equal("dword, second run", got[0], first[0]));
      EXPECT_TRUE(bitwise_equal("dpos, second run", got[1], first[1]));
      EXPECT_TRUE(bitwise_equal("dtype, second run", got[2], first[2]));
    }
  }
  return longest_run;
}

// The cases must exercise what the test claims: an id shared by more tokens than the 256-key chunk the
// run-end scan reads at a time.
void expect_long_run(long longest_run) {
  EXPECT_GT(longest_run, 256) << "no embedding case has a run of equal ids longer than one scan chunk";
}

TEST(CudaEmbedding, ForwardFloatBitIdenticalToCpu) {
  BERTRAIN_REQUIRE_GPU();
  GpuContext ctx(0, 0);
  uint32_t seed = 100;
  for (const EmbeddingCase& c : embedding_cases()) check_embedding_forward<float>(c, seed++, ctx.stream());
}

TEST(CudaEmbedding, ForwardBf16IsCpuSumRoundedOnce) {
  BERTRAIN_REQUIRE_GPU();
  GpuContext ctx(0, 0);
  uint32_t seed = 200;
  for (const EmbeddingCase& c : embedding_cases()) check_embedding_forward<bf16>(c, seed++, ctx.stream());
}

TEST(CudaEmbedding, BackwardFloatBitIdenticalToCpuAndDeterministic) {
  BERTRAIN_REQUIRE_GPU();
  GpuContext ctx(0, 0);
  uint32_t seed = 300;
  long longest_run = 0;
  for (const EmbeddingCase& c : embedding_cases()) {
    longest_run = std::max(longest_run, check_embedding_backward<float>(c, seed++, 0, ctx.stream()));
  }
  expect_long_run(longest_run);
}

TEST(CudaEmbedding, BackwardBf16BitIdenticalToCpuAndDeterministic) {
  BERTRAIN_REQUIRE_GPU();
  GpuContext ctx(0, 0);
  uint32_t seed = 400;
  // An unaligned scratch start (4 bytes into the allocation) checks the launcher's alignment slack.
  long longest_run = 0;
  for (const EmbeddingCase& c : embedding_cases()) {
    longest_run = std::max(longest_run, check_embedding_backward<bf16>(c, seed++, 4, ctx.stream()));
  }
  expect_long_run(longest_run);
}

// Segments far longer than a chunk: one id on 60% of 16 rows of 512 tokens (about 4900 tokens, 39 chunks), every
// position shared by 16 rows, two token types of about 4096 tokens each; 64 rows of 512 (T = 32768) without token
// types (a type row of 32768 tokens, 256 chunks); and the single-column kernels (H = 33) on 4608 tokens.
TEST(CudaEmbedding, BackwardLongSegmentsMatchCpu) {
  BERTRAIN_REQUIRE_GPU();
  GpuContext ctx(0, 0);
  const std::vector<EmbeddingCase> cases = {
      {std::vector<int>(16, 512), 768, 31090, 512, 2, true, 0.6},
      {std::vector<int>(64, 512), 768, 31090, 512, 2, false, 0.3},
      {std::vector<int>(9, 512), 33, 50, 512, 2, true, 0.5},
  };
  uint32_t seed = 500;
  long longest_run = 0;
  for (const EmbeddingCase& c : cases) {
    longest_run = std::max(longest_run, check_embedding_backward<float>(c, seed++, 0, ctx.stream()));
    longest_run = std::max(longest_run, check_embedding_backward<bf16>(c, seed++, 4, ctx.stream()));
  }
  EXPECT_GT(longest_run, 4096) << "no id is repeated more than 4096 times";
}

// RoBERTa's positions (from padding_idx + 1, literal padding tokens at padding_idx, taking no place) and its padding
// rows, without a token-type table as DistilBERT: the positions the CPU's integers, the forward and backward the CPU
// twin's results bit for bit (rows of at most one chunk). Rows of 300 and 129 tokens span several of the position
// kernel's chunks; the one-token row is a padding token alone.
TEST(CudaEmbedding, PaddingPositionsWithoutTypeTableMatchCpu) {
  BERTRAIN_REQUIRE_GPU();
  GpuContext ctx(0, 0);
  const std::vector<int> lengths = {5, 3, 300, 129, 1, 128};
  const int hidden = 32, vocab = 9, pad = 1, batch = static_cast<int>(lengths.size());
  const int max_pos = pad + 1 + 300;
  const std::vector<int32_t> cu = row_offsets(lengths);
  const int tokens = cu.back();
  std::vector<int32_t> ids(tokens), positions(tokens);
  for (int t = 0; t < tokens; ++t) ids[t] = (t * 5 + 3) % vocab;  // every 9th token is the padding id
  ids[cu[4]] = pad;
  embedding_positions_cpu(positions.data(), ids.data(), cu.data(), batch, pad);
  const std::size_t h = hidden;
  const std::vector<float> word = bf16_rounded(random_floats(vocab * h, 7)), pos = bf16_rounded(random_floats(max_pos * h, 8));
  const std::vector<float> dout = bf16_rounded(random_floats(tokens * h, 9));

  DeviceBuffer<int32_t> d_ids(ids), d_cu(cu), d_positions(tokens);
  embedding_positions_cuda(d_positions.data(), d_ids.data(), d_cu.data(), batch, pad, ctx.stream());
  device_sync();
  EXPECT_EQ(d_positions.download(), positions);
  embedding_positions_cuda(d_positions.data(), d_ids.data(), d_cu.data(), batch, -1, ctx.stream());
  std::vector<int32_t> in_order(tokens);
  embedding_positions_cpu(in_order.data(), ids.data(), cu.data(), batch, -1);
  device_sync();
  EXPECT_EQ(d_positions.download(), in_order);
  d_positions.upload(positions.data(), positions.size());

  std::vector<float> ref(tokens * h);
  embedding_forward_cpu<float>(ref.data(), ids.data(), positions.data(), nullptr, word.data(), pos.data(),
                               static_cast<const float*>(nullptr), tokens, hidden, vocab, max_pos, 0);
  DeviceBuffer<float> d_word(word), d_pos(pos), out(tokens * h);
  embedding_forward_cuda<float>(out.data(), d_ids.data(), d_positions.data(), nullptr, d_word.data(), d_pos.data(),
                                static_cast<const float*>(nullptr), tokens, hidden, ctx.stream());
  device_sync();
  EXPECT_TRUE(bitwise_equal("forward, RoBERTa positions, no types", out.download(), ref));

  std::vector<float> dword_ref(vocab * h), dpos_ref(max_pos * h);
  embedding_backward_cpu<float>(dword_ref.data(), dpos_ref.data(), nullptr, dout.data(), ids.data(), positions.data(),
                                nullptr, tokens, hidden, vocab, max_pos, 0, pad, pad);
  const std::size_t scratch_bytes = embedding_backward_scratch_bytes(tokens, hidden);
  DeviceBuffer<unsigned char> scratch(scratch_bytes);
  DeviceBuffer<float> d_dout(dout), dword(vocab * h), dpos(max_pos * h);
  poison(dword);
  poison(dpos);
  device_sync();
  embedding_backward_cuda<float>(dword.data(), dpos.data(), nullptr, d_dout.data(), d_ids.data(), d_positions.data(),
                                 nullptr, tokens, hidden, vocab, max_pos, 0, pad, pad, scratch.data(), scratch_bytes,
                                 ctx.stream());
  device_sync();
  EXPECT_TRUE(bitwise_equal("dword, padding rows, no types", dword.download(), dword_ref));
  EXPECT_TRUE(bitwise_equal("dpos, padding rows, no types", dpos.download(), dpos_ref));
  // The padding rows are zero, and would not be without padding_idx (the CPU twin, checked above, says which).
  const std::vector<float> got = dword.download();
  EXPECT_TRUE(std::all_of(got.begin() + pad * h, got.begin() + (pad + 1) * h, [](float x) { return x == 0.0f; }));
}

TEST(CudaEmbedding, BackwardRejectsTooSmallScratch) {
  BERTRAIN_REQUIRE_GPU();
  GpuContext ctx(0, 0);
  const int seq = 64, hidden = 32, vocab = 10, tokens = 100;
  DeviceBuffer<int32_t> ids(std::vector<int32_t>(tokens, 3)), positions(std::vector<int32_t>(tokens, 0));
  DeviceBuffer<float> dout(static_cast<std::size_t>(tokens) * hidden), dword(vocab * hidden), dpos(seq * hidden),
      dtype(2 * hidden);
  DeviceBuffer<unsigned char> scratch(64);
  EXPECT_THROW(embedding_backward_cuda<float>(dword.data(), dpos.data(), dtype.data(), dout.data(), ids.data(),
                                              positions.data(), nullptr, tokens, hidden, vocab, seq, 2, -1, -1,
                                              scratch.data(), 64, ctx.stream()),
               Error);
}

// ---- losses ----------------------------------------------------------------------------------------

struct LossCase {
  int batch, classes;
};

const std::vector<LossCase>& loss_cases() {
  static const std::vector<LossCase> cases = {{1, 1}, {1, 4}, {3, 7}, {257, 3}, {300, 4}, {300, 7}};
  return cases;
}

struct LossInputs {
  std::vector<float> logits, targets, weights;
  float max_weight = 1.0f;
};

// Logits in [-6, 6] (saturated sigmoids and softmaxes included), bf16-representable. Targets one-hot, or
// (soft) non-negative values that need not sum to 1, so the Σ_c y term of the CE gradient matters.
LossInputs make_loss_inputs(const LossCase& c, bool soft_targets, uint32_t seed) {
  LossInputs in;
  const std::size_t n = static_cast<std::size_t>(c.batch) * c.classes;
  in.logits = bf16_rounded(random_floats(n, seed, -6.0f, 6.0f));
  if (soft_targets) {
    in.targets = random_floats(n, seed + 1, 0.0f, 0.7f);
  } else {
    in.targets.assign(n, 0.0f);
    std::mt19937 gen(seed + 1);
    std::uniform_int_distribution<int> label(0, c.classes - 1);
    for (int b = 0; b < c.batch; ++b) in.targets[static_cast<std::size_t>(b) * c.classes + label(gen)] = 1.0f;
  }
  in.weights = random_floats(c.classes, seed + 2, 0.5f, 3.0f);
  in.max_weight = *std::max_element(in.weights.begin(), in.weights.end());
  return in;
}

template <typename T>
void check_loss(LossKind kind, const LossCase& c, bool weighted, bool soft_targets, float loss_scale, uint32_t seed,
                CudaStream stream) {
  std::ostringstream name;
  name << (kind == LossKind::kBce ? "BCE" : "CE") << " B" << c.batch << " C" << c.classes
       << (weighted ? " weighted" : "") << (soft_targets ? " soft" : " one-hot") << " scale " << loss_scale;
  SCOPED_TRACE(name.str());
  const LossInputs in = make_loss_inputs(c, soft_targets, seed);
  const std::size_t n = in.logits.size();
  const float* cpu_weights = weighted ? in.weights.data() : nullptr;
  std::vector<float> dref(n);
  const float ref_loss = loss_scale * classification_loss_cpu<float>(kind, dref.data(), in.logits.data(),
                                                                     in.targets.data(), cpu_weights, c.batch,
                                                                     c.classes);
  for (float& d : dref) d *= loss_scale;

  DeviceBuffer<T> logits(as_storage<T>(in.logits)), dlogits(n);
  DeviceBuffer<float> targets(in.targets), weights(in.weights), loss(1);
  poison(dlogits);
  poison(loss);
  device_sync();
  classification_loss_cuda<T>(kind, loss.data(), dlogits.data(), logits.data(), targets.data(),
                              weighted ? weights.data() : nullptr, c.batch, c.classes, loss_scale, stream);
  device_sync();
  const float got_loss = loss.download()[0];
  const std::vector<float> got = as_floats(dlogits.download());

  // The loss: every per-element (BCE) or per-row (CE) term is >= 0, so reordering the sum of at most 2100
  // terms moves it by a few float ulps of the total; expf / log1pf / logf are within 2 ulp of glibc.
  // 3e-5 relative is ~250 ulps: room for both, far below any formula or scaling error.
  EXPECT_TRUE(all_close("loss", &got_loss, &ref_loss, 1, 1e-7 * loss_scale, 3e-5));

  // The gradient: BCE w·(sigmoid - y)/(B·C) and CE (softmax·Σy - y)/B subtract nearly equal numbers when a
  // prediction saturates, so the error is absolute, in ulps of the probability (<= 1): sigmoid from expf
  // (2 ulp) and a division; softmax = exp(x - log_sum) with log_sum up to ~8 (one ulp of it, ~1e-6, is a
  // 1e-6 relative error of the softmax). atol 4e-6 of the gradient's scale, loss_scale·w/(B·C) (BCE) or
  // loss_scale·max(1, Σy)/B (CE), plus 1e-5 relative; a wrong formula, weight or scale is off by O(1).
  // bf16 dlogits are rounded once more on store: 2^-9 relative, so rtol 8e-3 (4×) for bf16.
  double grad_scale;
  if (kind == LossKind::kBce) {
    grad_scale = static_cast<double>(loss_scale) * (weighted ? in.max_weight : 1.0f) / static_cast<double>(n);
  } else {
    grad_scale = static_cast<double>(loss_scale) * (soft_targets ? 0.7 * c.classes + 1.0 : 1.0) / c.batch;
  }
  const double rtol = std::is_same<T, bf16>::value ? 8e-3 : 1e-5;
  EXPECT_TRUE(all_close("dlogits", got.data(), dref.data(), n, 4e-6 * grad_scale, rtol));

  // dlogits may be null (loss only): the loss is unchanged.
  poison(loss);
  device_sync();
  classification_loss_cuda<T>(kind, loss.data(), static_cast<T*>(nullptr), logits.data(), targets.data(),
                              weighted ? weights.data() : nullptr, c.batch, c.classes, loss_scale, stream);
  device_sync();
  const float loss_only = loss.download()[0];
  EXPECT_TRUE(all_close("loss without dlogits", &loss_only, &got_loss, 1, 0.0, 1e-6));
}

template <typename T>
void check_all_losses() {
  GpuContext ctx(0, 0);
  const CudaStream stream = ctx.stream();
  uint32_t seed = 500;
  for (const LossCase& c : loss_cases()) {
    for (float scale : {1.0f, 1024.0f, 0.25f}) {
      check_loss<T>(LossKind::kBce, c, false, false, scale, seed++, stream);
      check_loss<T>(LossKind::kBce, c, true, false, scale, seed++, stream);
      check_loss<T>(LossKind::kBce, c, true, true, scale, seed++, stream);
      check_loss<T>(LossKind::kSoftmaxCrossEntropy, c, false, false, scale, seed++, stream);
      check_loss<T>(LossKind::kSoftmaxCrossEntropy, c, false, true, scale, seed++, stream);
    }
  }
}

TEST(CudaLoss, FloatMatchesCpu) {
  BERTRAIN_REQUIRE_GPU();
  check_all_losses<float>();
}

TEST(CudaLoss, Bf16LogitsMatchCpu) {
  BERTRAIN_REQUIRE_GPU();
  check_all_losses<bf16>();
}

TEST(CudaLoss, CrossEntropyRejectsClassWeights) {
  BERTRAIN_REQUIRE_GPU();
  GpuContext ctx(0, 0);
  DeviceBuffer<float> logits(4), targets(4), weights(2), loss(1);
  EXPECT_THROW(classification_loss_cuda<float>(LossKind::kSoftmaxCrossEntropy, loss.data(), nullptr, logits.data(),
                                               targets.data(), weights.data(), 2, 2, 1.0f, ctx.stream()),
               Error);
}

// ---- Adam ------------------------------------------------------------------------------------------

// adam_update_cpu<float>'s arithmetic with every product rounded to float before it is added: the volatile
// store keeps GCC (which contracts a·b + c into an FMA under our -std=c++17 -march=native flags) from fusing
// it. This is what adam_update_cuda computes, bit for bit.
float product(float a, float b) {
  const volatile float r = a * b;
  return r;
}

void adam_reference(float* param, float* m, float* v, const float* grad, std::size_t n, const AdamHyper& hyper,
                    long step, float grad_scale = 1.0f, const uint32_t* decay_mask = nullptr) {
  const double bias_correction1 = 1.0 - std::pow(hyper.beta1, static_cast<double>(step));
  const double bias_correction2 = 1.0 - std::pow(hyper.beta2, static_cast<double>(step));
  const float step_size = static_cast<float>(hyper.lr / bias_correction1);
  const float bias_correction2_sqrt = static_cast<float>(std::sqrt(bias_correction2));
  const float beta2 = static_cast<float>(hyper.beta2), eps = static_cast<float>(hyper.eps);
  const float one_minus_beta1 = static_cast<float>(1.0 - hyper.beta1);
  const float one_minus_beta2 = static_cast<float>(1.0 - hyper.beta2);
  const volatile double lr_times_decay = hyper.lr * hyper.weight_decay;
  const float decay = static_cast<float>(1.0 - lr_times_decay);
  for (std::size_t i = 0; i < n; ++i) {
    float p = param[i];
    const bool decayed = decay_mask == nullptr || ((decay_mask[i / 32] >> (i % 32)) & 1u) != 0;
    if (hyper.weight_decay > 0.0 && decayed) p = product(p, decay);
    const float g = product(grad[i], grad_scale);
    const float mi = m[i] + product(one_minus_beta1, g - m[i]);
    const float vi = product(v[i], beta2) + product(product(one_minus_beta2, g), g);
    const float denom = std::sqrt(vi) / bias_correction2_sqrt + eps;  // no product: nothing to contract
    param[i] = p - product(step_size, mi / denom);
    m[i] = mi;
    v[i] = vi;
  }
}

struct AdamState {
  std::vector<float> param, m, v;
};

// Gradients of step `step`: uniform in [-1, 1], every 7th from element 3 scaled by 1e-4 (small second
// moments) and every 13th from element 5 zero (there m = v = 0 and only the decay moves the parameter).
std::vector<float> adam_grad(std::size_t n, long step, uint32_t seed) {
  std::vector<float> g = random_floats(n, seed + static_cast<uint32_t>(step) * 7919u);
  for (std::size_t i = 3; i < n; i += 7) g[i] *= 1e-4f;
  for (std::size_t i = 5; i < n; i += 13) g[i] = 0.0f;
  return g;
}

AdamState adam_initial(std::size_t n, uint32_t seed) {
  return {random_floats(n, seed), std::vector<float>(n, 0.0f), std::vector<float>(n, 0.0f)};
}

constexpr long kAdamSteps = 5;
// One element, a thousand (a partial block), a million and three (several grid-stride passes would need
// more than 65536·256 elements; this one covers a full grid with a ragged end).
const std::size_t kAdamSizes[] = {1, 1000, (std::size_t{1} << 20) + 3};
uint32_t adam_seed(std::size_t n) { return static_cast<uint32_t>(n) + 11; }

// The uncontracted reference against the CPU twin as built (GCC fuses products into FMAs), kAdamSteps steps
// from the same state, |param| <= 1, |g| <= 1, lr 1e-3. Per step a fused multiply-add skips one rounding of
// a product, so each quantity moves by about one ulp of its operands, and the differences carry over:
//   m = m + (1 - beta1)(g - m) cancels when g ≈ -9m, so its error is absolute, ~ulp(max|m|) ≤ 6e-8 per
//     step: atol 1.5e-7 (observed max 6e-8 over 5 steps), rtol 1e-6;
//   v = v·beta2 + (1 - beta2)·g² adds positive terms: ≤ 1 ulp relative per step, rtol 2e-6 (observed
//     3.6e-7), atol 1e-14 for the v = 0 of zero gradients;
//   param moves by 1 ulp of itself (≤ 1.2e-7) plus lr times the relative error of m/denom, which the
//     cancellation in m also makes absolute: atol 3e-7 (observed max 1.2e-7), rtol 4e-7.
// Any real error in the update (a wrong scalar, a missing bias correction or decay) moves the parameters
// by 1e-3-relative amounts of the update at least and fails; bit-identity with the reference is the
// precise check, this one says how far the contracted CPU build may be.
void expect_adam_close(const std::string& what, const AdamState& got, const AdamState& ref) {
  const std::size_t n = ref.param.size();
  EXPECT_TRUE(all_close(what + " param", got.param.data(), ref.param.data(), n, 3e-7, 4e-7));
  EXPECT_TRUE(all_close(what + " m", got.m.data(), ref.m.data(), n, 1.5e-7, 1e-6));
  EXPECT_TRUE(all_close(what + " v", got.v.data(), ref.v.data(), n, 1e-14, 2e-6));
}

// Trainer's grouping in miniature: every third element (from 1) is not decayed, as biases and LayerNorm weights.
std::vector<uint32_t> adam_decay_mask(std::size_t n) {
  std::vector<uint32_t> mask((n + 31) / 32, 0u);
  for (std::size_t i = 0; i < n; ++i) {
    if (i % 3 != 1) mask[i / 32] |= 1u << (i % 32);
  }
  return mask;
}

AdamHyper adam_hyper(double weight_decay) {
  AdamHyper hyper;
  hyper.lr = 1e-3;
  hyper.weight_decay = weight_decay;
  return hyper;
}

// Runs without a GPU: the reference the GPU kernel is held to bit for bit is the CPU twin's arithmetic.
// A gradient scale below 1 (clipping) is a product more for the contracted twin to fuse: within the same bounds.
TEST(AdamReference, UncontractedReferenceMatchesCpuTwin) {
  for (std::size_t n : kAdamSizes) {
  for (double weight_decay : {0.0, 0.01}) {
  for (float grad_scale : {1.0f, 0.37f}) {
    SCOPED_TRACE("n " + std::to_string(n) + ", weight_decay " + std::to_string(weight_decay) + ", grad_scale " +
                 std::to_string(grad_scale));
    const AdamHyper hyper = adam_hyper(weight_decay);
    const uint32_t seed = adam_seed(n);
    AdamState ref = adam_initial(n, seed), twin = ref;
    for (long step = 1; step <= kAdamSteps; ++step) {
      const std::vector<float> g = adam_grad(n, step, seed);
      adam_reference(ref.param.data(), ref.m.data(), ref.v.data(), g.data(), n, hyper, step, grad_scale);
      adam_update_cpu<float>(twin.param.data(), twin.m.data(), twin.v.data(), g.data(), n, hyper, step, grad_scale);
    }
#if defined(__FP_FAST_FMAF)
    // This build has FMA instructions, so GCC may have contracted the twin: close, not identical.
    expect_adam_close("reference vs contracted CPU twin", ref, twin);
#else
    // No FMA instructions: nothing to contract, the twin is the reference.
    EXPECT_TRUE(bitwise_equal("reference vs CPU twin param", ref.param, twin.param));
    EXPECT_TRUE(bitwise_equal("reference vs CPU twin m", ref.m, twin.m));
    EXPECT_TRUE(bitwise_equal("reference vs CPU twin v", ref.v, twin.v));
#endif
    // The updates must not be lost in the comparison: the parameters moved by far more than the tolerance.
    const AdamState initial = adam_initial(n, seed);
    double moved = 0;
    for (std::size_t i = 0; i < n; ++i) moved = std::max(moved, std::abs(double(ref.param[i]) - initial.param[i]));
    EXPECT_GT(moved, 5e-4) << "largest parameter change";
  }
  }
  }
}

// Gradient clipping (--max-grad-norm) as the GPU step runs it: Σ g² on the device, the factor derived there.
enum class AdamClip { kNone, kWithinTheNorm, kClipped };

TEST(CudaAdam, BitIdenticalToReferenceAndCloseToCpuTwin) {
  BERTRAIN_REQUIRE_GPU();
  GpuContext ctx(0, 0);
  for (std::size_t n : kAdamSizes) {
  // Weight decay 0, 0.01 on every element, 0.01 where the mask says (Trainer's groups).
  for (const auto& [weight_decay, masked] : {std::pair{0.0, false}, std::pair{0.01, false}, std::pair{0.01, true}}) {
    for (AdamClip clip : {AdamClip::kNone, AdamClip::kWithinTheNorm, AdamClip::kClipped}) {
      SCOPED_TRACE("n " + std::to_string(n) + ", weight_decay " + std::to_string(weight_decay) + ", clip " +
                   std::to_string(static_cast<int>(clip)) + (masked ? ", masked" : ""));
      const AdamHyper hyper = adam_hyper(weight_decay);
      const uint32_t seed = adam_seed(n);
      AdamState ref = adam_initial(n, seed), twin = ref;
      DeviceBuffer<float> param(ref.param), m(ref.m), v(ref.v), grad(n), sum_of_squares(1);
      DeviceBuffer<bf16> copy(n);
      const std::vector<uint32_t> host_mask = adam_decay_mask(n);
      const DeviceBuffer<uint32_t> mask(host_mask);
      const uint32_t* cpu_mask = masked ? host_mask.data() : nullptr;
      for (long step = 1; step <= kAdamSteps; ++step) {
        const std::vector<float> g = adam_grad(n, step, seed);
        // The step's Σ g² as the device would hold it, and a max norm above it or at a quarter of its norm.
        double sum = 0;
        for (float x : g) sum += static_cast<double>(x) * x;
        const float sum_f = static_cast<float>(sum), norm_f = std::sqrt(sum_f);
        const float max_norm = clip == AdamClip::kClipped ? 0.25f * norm_f : 2.0f * norm_f;
        const float scale = clip == AdamClip::kNone ? 1.0f : clip_grad_scale(max_norm, norm_f);
        if (clip == AdamClip::kClipped) {
          ASSERT_LT(scale, 0.3f);
        } else if (clip == AdamClip::kWithinTheNorm) {
          ASSERT_EQ(scale, 1.0f);
        }
        adam_reference(ref.param.data(), ref.m.data(), ref.v.data(), g.data(), n, hyper, step, scale, cpu_mask);
        adam_update_cpu<float>(twin.param.data(), twin.m.data(), twin.v.data(), g.data(), n, hyper, step, scale,
                               cpu_mask);
        grad.upload(g.data(), n);
        sum_of_squares.upload(&sum_f, 1);
        poison(copy);
        device_sync();
        const DeviceGradClip device_clip =
            clip == AdamClip::kNone ? DeviceGradClip{} : DeviceGradClip{sum_of_squares.data(), max_norm};
        // The bf16 copy on odd steps; null (no copy) on even ones.
        const bool with_copy = step % 2 == 1;
        adam_update_cuda(param.data(), m.data(), v.data(), grad.data(), with_copy ? copy.data() : nullptr, n, hyper,
                         step, device_clip, masked ? mask.data() : nullptr, ctx.stream());
        device_sync();
        const AdamState got{param.download(), m.download(), v.download()};
        const std::string at = "step " + std::to_string(step);
        ASSERT_TRUE(bitwise_equal(at + " param", got.param, ref.param));
        ASSERT_TRUE(bitwise_equal(at + " m", got.m, ref.m));
        ASSERT_TRUE(bitwise_equal(at + " v", got.v, ref.v));
        if (with_copy) {
          ASSERT_TRUE(bitwise_equal(at + " param_copy", copy.download(), to_bf16(ref.param)));
        }
      }
      const AdamState got{param.download(), m.download(), v.download()};
      expect_adam_close("GPU vs CPU twin", got, twin);
    }
  }
  }
}

TEST(CudaAdam, RejectsStepZero) {
  BERTRAIN_REQUIRE_GPU();
  DeviceBuffer<float> x(4);
  EXPECT_THROW(adam_update_cuda(x.data(), x.data(), x.data(), x.data(), nullptr, 4, AdamHyper{}, 0, {}, nullptr,
                                nullptr),
               Error);
}

}  // namespace
}  // namespace bertrain
