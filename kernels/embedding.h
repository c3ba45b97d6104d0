// BERT input embeddings: word + position + token type, before the embedding LayerNorm.
#pragma once

#include <cstdint>

namespace bertrain {

// out[B*S, H] (=): word[ids[b,s]] + pos[s] + type[token_types[b,s]]; token_types null means all type 0.
// Throws Error when an id is outside [0, vocab) or a token type outside [0, type_vocab).
template <typename T>
void embedding_forward_cpu(T* out, const int32_t* ids, const int32_t* token_types, const T* word, const T* pos,
                           const T* type, int batch, int seq, int hidden, int vocab, int type_vocab);

// dword[vocab, H], dpos[max_pos, H], dtype[type_vocab, H]: all written (=), rows no token used are zero.
// Scatter-adds run in token order for every column, so results are deterministic.
template <typename T>
void embedding_backward_cpu(T* dword, T* dpos, T* dtype, const T* dout, const int32_t* ids,
                            const int32_t* token_types, int batch, int seq, int hidden, int vocab, int max_pos,
                            int type_vocab);

}  // namespace bertrain
