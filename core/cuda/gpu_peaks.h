// Peak numbers achieved throughput is compared with in `bertrain bench kernels` and `bench step`
// (tools/bench_kernels/, gpu_peak_tflops in core/build_info.h): memory bandwidth from the device's memory clock and bus width, and peak
// TFLOP/s from a small datasheet table, since the CUDA runtime cannot be asked for tensor-core throughput.
// Header-only and free of CUDA headers, so that it can be checked on machines without a GPU.
#pragma once

#include <string>

namespace bertrain {

// Dense (no structured sparsity) peaks in TFLOP/s from NVIDIA's datasheets: bf16 on tensor cores with fp32
// accumulation, and fp32 on the CUDA cores (no TF32: bertrain's fp32 GEMMs run with CUBLAS_DEFAULT_MATH).
struct DatasheetPeak {
  double bf16_tensor_tflops = 0;
  double fp32_tflops = 0;
  const char* board = "";
};

// The datasheet row for a device named `device_name` (cudaDeviceProp::name), or false when unknown.
// Order matters: NVL and PCIe boards run at lower clocks than the SXM part of the same chip.
inline bool datasheet_peak(const std::string& device_name, DatasheetPeak* out) {
  auto has = [&](const char* part) { return device_name.find(part) != std::string::npos; };
  if (has("H200") && has("NVL")) *out = {835, 60, "H200 NVL"};
  else if (has("H200")) *out = {989, 67, "H200 SXM"};  // also GH200 (the same H100-class die and clocks)
  else if (has("H100") && has("NVL")) *out = {835, 60, "H100 NVL"};
  else if (has("H100") && has("PCIe")) *out = {756, 51, "H100 PCIe"};
  else if (has("H100")) *out = {989, 67, "H100 SXM"};
  else if (has("A100")) *out = {312, 19.5, "A100"};
  else return false;
  return true;
}

// Peak DRAM bandwidth in GB/s (1e9 bytes/s): two transfers per memory clock (DDR / HBM) times the bus width.
// memory_clock_khz: cudaDevAttrMemoryClockRate; bus_width_bits: cudaDevAttrGlobalMemoryBusWidth. 0 when
// either is unknown (reported as 0 by the runtime).
inline double memory_bandwidth_gbps(long long memory_clock_khz, long long bus_width_bits) {
  if (memory_clock_khz <= 0 || bus_width_bits <= 0) return 0;
  return 2.0 * static_cast<double>(memory_clock_khz) * 1e3 * static_cast<double>(bus_width_bits) / 8.0 / 1e9;
}

// FP32 lanes per SM (CUDA programming guide, "arithmetic instructions" throughput table); 0 when unknown.
inline int fp32_lanes_per_sm(int major, int minor) {
  if (major == 7) return 64;                       // Volta, Turing
  if (major == 8) return minor == 0 ? 64 : 128;    // A100: 64; GA10x, Ada: 128
  if (major == 9) return 128;                      // Hopper
  return 0;
}

// FP32 peak in TFLOP/s from the device's properties: SMs × FP32 lanes × 2 (an FMA is two flops) × clock.
// The runtime reports the boost clock, so this is the same kind of number a datasheet gives; 0 when unknown.
inline double fp32_tflops_from_clock(int sms, int major, int minor, long long clock_khz) {
  const int lanes = fp32_lanes_per_sm(major, minor);
  if (lanes == 0 || sms <= 0 || clock_khz <= 0) return 0;
  return static_cast<double>(sms) * lanes * 2.0 * static_cast<double>(clock_khz) * 1e3 / 1e12;
}

}  // namespace bertrain
