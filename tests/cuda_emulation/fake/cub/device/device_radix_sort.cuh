// Stands in for CUB's <cub/device/device_radix_sort.cuh> in the CPU emulation (tests/cuda_emulation/README.md).
// A STAND-IN, not CUB: DeviceRadixSort::SortPairs does what CUB documents (the temporary-storage size query when
// d_temp_storage is null; a stable sort of (key, value) pairs by the key bits [begin_bit, end_bit), full keys
// written out; cudaErrorInvalidValue when temp_storage_bytes is too small), with host code on the emulated device
// memory. So an emulated test checks the kernels around the sort and the launcher's use of it (sizes, bit range,
// scratch carving, pointers), never CUB itself or its device code.
//
// Why it sorts the way it does: an 8-bit LSD radix sort that ping-pongs through alternate key and value buffers
// carved from d_temp_storage, as CUB's non-DoubleBuffer SortPairs does, so a scratch region that another part of
// the launcher also uses gets clobbered here as on the GPU. The size it asks for is its own (those buffers plus
// per-pass histograms), not CUB's: like CUB's it grows with num_items and end_bit - begin_bit, which
// kernels/cuda/embedding.cu relies on.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "../../../emu_cuda.h"

namespace cub {

struct DeviceRadixSort {
  template <typename KeyT, typename ValueT, typename NumItemsT>
  static cudaError_t SortPairs(void* d_temp_storage, std::size_t& temp_storage_bytes, const KeyT* d_keys_in,
                               KeyT* d_keys_out, const ValueT* d_values_in, ValueT* d_values_out, NumItemsT num_items,
                               int begin_bit = 0, int end_bit = sizeof(KeyT) * 8, cudaStream_t stream = nullptr) {
    // CUB flips the bits of signed and floating-point keys first; only unsigned keys are emulated.
    static_assert(std::is_integral<KeyT>::value && std::is_unsigned<KeyT>::value,
                  "the emulated SortPairs takes unsigned integer keys only");
    static_assert(std::is_trivially_copyable<ValueT>::value, "values are moved as bytes");
    (void)stream;  // every emulated operation is synchronous
    constexpr int kKeyBits = static_cast<int>(sizeof(KeyT) * 8);
    if (begin_bit < 0 || end_bit > kKeyBits || begin_bit > end_bit) {
      emu::fail("cub::DeviceRadixSort::SortPairs: bit range outside the key (undefined in CUB)");
    }
    if (num_items < 0) emu::fail("cub::DeviceRadixSort::SortPairs: negative num_items");
    const std::size_t n = static_cast<std::size_t>(num_items);
    const int passes = (end_bit - begin_bit + 7) / 8;
    const std::size_t keys_bytes = round_up(n * sizeof(KeyT)), values_bytes = round_up(n * sizeof(ValueT));
    // 255 bytes of slack: the storage may start anywhere (CUB aligns its temporaries itself).
    const std::size_t needed = 255 + keys_bytes + values_bytes + round_up(static_cast<std::size_t>(passes) * 256 * 4);
    if (d_temp_storage == nullptr) {
      temp_storage_bytes = needed;
      return cudaSuccess;
    }
    if (temp_storage_bytes < needed) return cudaErrorInvalidValue;  // as CUB's AliasTemporaries
    if (!emu::in_device_allocation(d_temp_storage, temp_storage_bytes)) {
      emu::fail("cub::DeviceRadixSort::SortPairs: temporary storage outside a device allocation");
    }
    if (n == 0) return cudaSuccess;
    if (!emu::in_device_allocation(d_keys_in, n * sizeof(KeyT)) ||
        !emu::in_device_allocation(d_keys_out, n * sizeof(KeyT)) ||
        !emu::in_device_allocation(d_values_in, n * sizeof(ValueT)) ||
        !emu::in_device_allocation(d_values_out, n * sizeof(ValueT))) {
      emu::fail("cub::DeviceRadixSort::SortPairs: keys or values outside a device allocation");
    }
    // CUB documents that the output ranges must not overlap the inputs.
    if (overlap(d_keys_in, d_keys_out, n) || overlap(d_values_in, d_values_out, n) ||
        overlap(d_keys_out, d_values_out, n)) {
      emu::fail("cub::DeviceRadixSort::SortPairs: overlapping input and output ranges");
    }

    auto* base = reinterpret_cast<unsigned char*>(round_up(reinterpret_cast<std::uintptr_t>(d_temp_storage)));
    KeyT* alt_keys = reinterpret_cast<KeyT*>(base);
    ValueT* alt_values = reinterpret_cast<ValueT*>(base + keys_bytes);
    std::memset(base, 0xff, needed - 255);  // the temporaries hold nothing a caller may rely on

    if (passes == 0) {  // an empty bit range: CUB copies
      std::memmove(d_keys_out, d_keys_in, n * sizeof(KeyT));
      std::memmove(d_values_out, d_values_in, n * sizeof(ValueT));
      return cudaSuccess;
    }
    // The last pass must land in the output: with an odd number of passes start there, else in the alternates.
    const KeyT* keys_from = d_keys_in;
    const ValueT* values_from = d_values_in;
    KeyT* keys_to = passes % 2 == 1 ? d_keys_out : alt_keys;
    ValueT* values_to = passes % 2 == 1 ? d_values_out : alt_values;
    std::vector<std::size_t> start(257);
    for (int pass = 0; pass < passes; ++pass) {
      const int shift = begin_bit + 8 * pass;
      const int bits = end_bit - shift < 8 ? end_bit - shift : 8;
      const std::uint64_t digit_mask = (std::uint64_t{1} << bits) - 1;
      auto digit = [&](KeyT k) {
        return static_cast<std::size_t>((static_cast<std::uint64_t>(k) >> shift) & digit_mask);
      };
      std::fill(start.begin(), start.end(), 0);
      for (std::size_t i = 0; i < n; ++i) ++start[digit(keys_from[i]) + 1];
      for (int d = 0; d < 256; ++d) start[d + 1] += start[d];
      for (std::size_t i = 0; i < n; ++i) {  // in input order: stable
        const std::size_t at = start[digit(keys_from[i])]++;
        keys_to[at] = keys_from[i];
        values_to[at] = values_from[i];
      }
      keys_from = keys_to;
      values_from = values_to;
      keys_to = keys_to == d_keys_out ? alt_keys : d_keys_out;
      values_to = values_to == d_values_out ? alt_values : d_values_out;
    }
    return cudaSuccess;
  }

 private:
  static std::size_t round_up(std::size_t x) { return (x + 255) / 256 * 256; }
  template <typename A, typename B>
  static bool overlap(const A* a, const B* b, std::size_t n) {
    const auto* a0 = reinterpret_cast<const unsigned char*>(a);
    const auto* b0 = reinterpret_cast<const unsigned char*>(b);
    return a0 < b0 + n * sizeof(B) && b0 < a0 + n * sizeof(A);
  }
};

}  // namespace cub
