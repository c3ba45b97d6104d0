// BERT input embeddings: word + position + token type, before the embedding LayerNorm.
#pragma once

#include <cstdint>

#include "core/bf16.h"
#include "core/cuda/gpu_handles.h"

namespace bertrain {

// Tokens are packed (DESIGN.md): T tokens of B rows back to back, row b being tokens [cu_seqlens[b],
// cu_seqlens[b + 1]), and positions[t] the row of the position table that token t reads (embedding_positions).

// positions[T] (=) each token's row of the position table, numbered as transformers numbers it. padding_idx < 0
// (BERT, DistilBERT, ELECTRA): t − cu_seqlens[b], the token's index in its row. padding_idx >= 0 (RoBERTa-like:
// create_position_ids_from_input_ids): padding_idx + 1 + the number of tokens before t in its row whose id is not
// padding_idx, and padding_idx for a token whose id is (a literal padding token in a text, which takes no place).
// Host memory; the row offsets must have passed check_row_offsets (kernels/packed.h).
void embedding_positions_cpu(int32_t* positions, const int32_t* ids, const int32_t* cu_seqlens, int batch,
                             int padding_idx);

// out[T, H] (=): word[ids[t]] + pos[positions[t]] + type[token_types[t]]; token_types null means all type 0, and a
// null `type` table means the model has none (DistilBERT; type_vocab is then 0). Throws Error when an id is outside
// [0, vocab), a position outside [0, max_pos) or a token type outside [0, type_vocab).
template <typename T>
void embedding_forward_cpu(T* out, const int32_t* ids, const int32_t* positions, const int32_t* token_types,
                           const T* word, const T* pos, const T* type, int tokens, int hidden, int vocab, int max_pos,
                           int type_vocab);

// dword[vocab, H], dpos[max_pos, H], dtype[type_vocab, H]: all written (=), rows no token used are zero; dtype
// null (with type_vocab 0) when the model has no token-type table. positions as the forward read them. Rows
// word_padding_idx of dword and position_padding_idx of dpos (each -1 for none) get no gradient, as
// nn.Embedding's padding_idx: transformers gives every family's word table config.pad_token_id, and RoBERTa's
// position table too. Scatter-adds run in token order for every column, so results are deterministic. Ids,
// positions or types outside their tables throw Error.
template <typename T>
void embedding_backward_cpu(T* dword, T* dpos, T* dtype, const T* dout, const int32_t* ids, const int32_t* positions,
                            const int32_t* token_types, int tokens, int hidden, int vocab, int max_pos, int type_vocab,
                            int word_padding_idx, int position_padding_idx);

// ---- CUDA (kernels/cuda/embedding.cu). ids, positions, cu_seqlens and token types must be in range (checked on
// the host before upload: a kernel cannot throw). `type` and dtype may be null as on the CPU.
// embedding_positions_cpu on the device: one block per row.
void embedding_positions_cuda(int32_t* positions, const int32_t* ids, const int32_t* cu_seqlens, int batch,
                              int padding_idx, CudaStream stream);
// One block per token, threads over H.
template <typename T>
void embedding_forward_cuda(T* out, const int32_t* ids, const int32_t* positions, const int32_t* token_types,
                            const T* word, const T* pos, const T* type, int tokens, int hidden, CudaStream stream);
// Bytes of scratch embedding_backward_cuda needs for `tokens` tokens of `hidden` features (the sort of 3·T keys
// and the partial rows of long segments: about 2·(3·T / kEmbeddingGradientChunk)·H floats). A device query (CUB's
// sort size), no allocation.
std::size_t embedding_backward_scratch_bytes(int tokens, int hidden);
// Tokens summed per chunk by embedding_backward_cuda.
constexpr int kEmbeddingGradientChunk = 128;
// dword, dpos, dtype (=), float. Deterministic without atomics, as parallel segmented sums: the 3·T (table row,
// token) pairs are radix-sorted by row (stable: tokens ascend within a row), each row's tokens are summed in token
// order in chunks of kEmbeddingGradientChunk, a chunk per (block, column), and a row's chunk sums are added in a
// fixed order. A row used by at most kEmbeddingGradientChunk tokens is the CPU twin's sum bit for bit; longer
// rows (the [CLS] id, positions shared by many rows, the token type) differ from it by summation order only.
// The padding rows as on the CPU.
template <typename T>
void embedding_backward_cuda(float* dword, float* dpos, float* dtype, const T* dout, const int32_t* ids,
                             const int32_t* positions, const int32_t* token_types, int tokens, int hidden, int vocab,
                             int max_pos, int type_vocab, int word_padding_idx, int position_padding_idx,
                             void* scratch, std::size_t scratch_bytes, CudaStream stream);

}  // namespace bertrain
