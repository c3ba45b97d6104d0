// The runtime behind emu_cuda.h: the fibre scheduler that runs a block's threads, barriers and warp collectives,
// shared memory, and host memory standing in for device memory (with guard bytes). Developer tool only
// (tests/cuda_emulation/README.md).
//
// Why fibres (ucontext) rather than OS threads: a kernel's threads must be able to stop at a barrier and let the
// others catch up, thousands of times per block, and the order in which they resume must be random but
// reproducible (EMU_SEED). One host thread runs everything, so a run is deterministic for a given seed.
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <vector>

#include "emu_cuda.h"

namespace emu {

uint3 thread_idx, block_idx;
dim3 block_dim, grid_dim;

namespace {

// The emulated device: an sm_90-class GPU with 227 KiB of opt-in shared memory per block (EMU_MAX_SMEM overrides
// it, e.g. 166912 for an A100's 163 KiB, to exercise a launcher's fallback to smaller tiles).
constexpr int kComputeMajor = 9, kComputeMinor = 0;
constexpr std::size_t kStaticSharedLimit = 48 * 1024;
constexpr std::size_t kFiberStack = 512 * 1024;
constexpr std::size_t kSharedGuard = 256;  // guard bytes after dynamic shared memory and after each static variable
constexpr std::size_t kSharedArena = 1 << 20;  // room for static variables, their alignment and guards
constexpr unsigned char kGuardByte = 0xa5;

std::mt19937_64& scheduler_rng() {
  static std::mt19937_64 rng([] {
    const char* s = std::getenv("EMU_SEED");
    return s != nullptr ? std::strtoull(s, nullptr, 0) : 20261122ULL;
  }());
  return rng;
}

// ---- Fibres and barriers ------------------------------------------------------------------------------------------

enum class Wait { kNone, kBlock, kWarp };

struct Fiber {
  ucontext_t context;
  unsigned char* stack = nullptr;  // mmap'd, with a PROT_NONE guard page below it: an overflow faults
  bool done = false;
  Wait waiting = Wait::kNone;
};

struct Barrier {
  int size = 0, arrived = 0;
  std::vector<int> waiters;
};

ucontext_t scheduler_context;
std::vector<Fiber> fibers;
std::vector<Barrier> warp_barriers;
Barrier block_barrier;
std::vector<uint64_t> exchange_slots;  // a warp collective's values, one per thread
int current = 0;                       // the thread running now
bool in_kernel = false;
const std::function<void()>* kernel_body = nullptr;

struct LaunchSite {
  const char* kernel = nullptr;
  const char* file = "";
  int line = 0;
} last_launch;  // kept after the launch, so that a fault found later names the kernel that ran last

// Shared memory of the block running now: the dynamic part at the base, then the static __shared__ variables.
std::vector<unsigned char> shared_storage;
unsigned char* shared_base = nullptr;
std::size_t dynamic_bytes = 0;
std::size_t static_end = 0;    // offset from shared_base of the first free byte after the static variables
std::size_t static_bytes = 0;  // the static variables' bytes, without alignment and guards
struct StaticVariable {
  std::size_t offset, bytes;
};
std::map<const void*, StaticVariable> static_variables;  // by declaration
std::map<const void*, int> dynamic_shared_opt_ins;       // by kernel: cudaFuncSetAttribute's bytes

void switch_to_scheduler() { swapcontext(&fibers[current].context, &scheduler_context); }

int warp_of(int t) { return t / 32; }
int warp_size_of(int t) { return std::min(32, static_cast<int>(block_dim.x) - 32 * warp_of(t)); }
unsigned warp_mask_of(int t) {
  const int n = warp_size_of(t);
  return n == 32 ? 0xffffffffu : (1u << n) - 1u;
}

void release(Barrier& b) {
  for (int t : b.waiters) fibers[t].waiting = Wait::kNone;
  b.waiters.clear();
  b.arrived = 0;
}

// Arrives at `b`; the last thread to arrive releases the others and carries on, the others wait.
void arrive(Barrier& b, Wait kind) {
  if (++b.arrived == b.size) {
    release(b);
    return;
  }
  fibers[current].waiting = kind;
  b.waiters.push_back(current);
  switch_to_scheduler();
}

// CUDA's warp collectives wait only for the lanes that have not exited; __syncthreads waits for every thread of
// the block (a thread that returned before a __syncthreads the others reach is a reported deadlock, although the
// hardware often tolerates it).
void thread_returned() {
  fibers[current].done = true;
  Barrier& w = warp_barriers[warp_of(current)];
  if (--w.size > 0 && w.arrived == w.size) release(w);
}

void fiber_entry() {
  try {
    (*kernel_body)();
  } catch (...) {
    fail("a C++ exception escaped the kernel");
  }
  thread_returned();
  swapcontext(&fibers[current].context, &scheduler_context);
}

// A warp collective names every lane (0xffffffff, also for the short last warp of a block) or exactly the lanes the
// warp has; other partial masks are not emulated.
void check_warp_mask(unsigned mask, const char* what) {
  if (mask != 0xffffffffu && mask != warp_mask_of(current)) {
    char message[160];
    std::snprintf(message, sizeof message,
                  "%s with mask 0x%08x: only the mask of every thread of the warp (0x%08x) is emulated", what, mask,
                  warp_mask_of(current));
    fail(message);
  }
}

[[noreturn]] void deadlock() {
  int finished = 0, at_block = 0, at_warp = 0;
  for (int t = 0; t < static_cast<int>(block_dim.x); ++t) {
    if (fibers[t].done) ++finished;
    else if (fibers[t].waiting == Wait::kBlock) ++at_block;
    else ++at_warp;
  }
  char message[256];
  std::snprintf(message, sizeof message,
                "deadlock: %d threads wait at __syncthreads, %d at a warp barrier or collective, %d have returned "
                "(a barrier that not every thread of the block or warp reaches)",
                at_block, at_warp, finished);
  fail(message);
}

void check_guard(const unsigned char* p, std::size_t n, const char* what) {
  for (std::size_t i = 0; i < n; ++i) {
    if (p[i] != kGuardByte) fail(what);
  }
}

void run_block(int threads) {
  shared_storage.assign(256 + dynamic_bytes + kSharedGuard + kSharedArena, 0xff);  // NaN in fp32 and bf16
  shared_base = reinterpret_cast<unsigned char*>(
      (reinterpret_cast<std::uintptr_t>(shared_storage.data()) + 255) / 256 * 256);
  std::memset(shared_base + dynamic_bytes, kGuardByte, kSharedGuard);
  static_end = dynamic_bytes + kSharedGuard;
  static_bytes = 0;
  static_variables.clear();

  warp_barriers.assign(static_cast<std::size_t>((threads + 31) / 32), Barrier{});
  for (int w = 0; w < static_cast<int>(warp_barriers.size()); ++w) warp_barriers[w].size = warp_size_of(32 * w);
  block_barrier = Barrier{};
  block_barrier.size = threads;
  exchange_slots.assign(static_cast<std::size_t>(threads), 0);

  for (int t = 0; t < threads; ++t) {
    Fiber& f = fibers[t];
    f.done = false;
    f.waiting = Wait::kNone;
    getcontext(&f.context);
    f.context.uc_stack.ss_sp = f.stack;
    f.context.uc_stack.ss_size = kFiberStack;
    f.context.uc_link = &scheduler_context;
    makecontext(&f.context, fiber_entry, 0);
  }

  // Rounds: every thread that is not waiting runs until it waits or returns, in a fresh random order each round.
  std::vector<int> order(static_cast<std::size_t>(threads));
  for (int t = 0; t < threads; ++t) order[t] = t;
  for (;;) {
    bool ran = false, all_done = true;
    std::shuffle(order.begin(), order.end(), scheduler_rng());
    for (int t : order) {
      Fiber& f = fibers[t];
      if (f.done) continue;
      all_done = false;
      if (f.waiting != Wait::kNone) continue;
      ran = true;
      current = t;
      thread_idx = uint3{static_cast<unsigned>(t), 0, 0};
      swapcontext(&scheduler_context, &f.context);
    }
    if (all_done) break;
    if (!ran) deadlock();
  }

  check_guard(shared_base + dynamic_bytes, kSharedGuard, "write past the end of dynamic shared memory");
  for (const auto& v : static_variables) {
    check_guard(shared_base + v.second.offset + v.second.bytes, kSharedGuard,
                "write past the end of a __shared__ variable");
  }
}

void ensure_fibers(int threads) {
  const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  while (static_cast<int>(fibers.size()) < threads) {
    void* m = mmap(nullptr, kFiberStack + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) fail("cannot map a fibre stack");
    mprotect(m, page, PROT_NONE);
    fibers.emplace_back();
    fibers.back().stack = static_cast<unsigned char*>(m) + page;
  }
}

// The sticky error a bad launch configuration leaves for cudaGetLastError, as on the hardware.
cudaError_t last_error = cudaSuccess;
void check_device_memory_guards();

}  // namespace

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "EMULATION FAILURE: %s\n", what);
  if (in_kernel) {
    std::fprintf(stderr, "  in %s launched at %s:%d, block (%u, %u, %u) of (%u, %u, %u), thread %u of %u\n",
                 last_launch.kernel, last_launch.file, last_launch.line, block_idx.x, block_idx.y, block_idx.z,
                 grid_dim.x, grid_dim.y, grid_dim.z, thread_idx.x, block_dim.x);
  } else if (last_launch.kernel != nullptr) {
    std::fprintf(stderr, "  found after the kernel launched last: %s at %s:%d\n", last_launch.kernel,
                 last_launch.file, last_launch.line);
  }
  std::fflush(stderr);
  std::abort();
}

int lane_id() { return current % 32; }

void syncthreads() { arrive(block_barrier, Wait::kBlock); }

void syncwarp(unsigned mask) {
  check_warp_mask(mask, "__syncwarp");
  arrive(warp_barriers[warp_of(current)], Wait::kWarp);
}

// Publish, wait for the warp, read, wait again (so that no lane overwrites its slot in the next collective while
// another lane still reads this one).
uint64_t exchange(uint64_t bits, unsigned mask, int source_lane) {
  check_warp_mask(mask, "shuffle");
  if (source_lane >= warp_size_of(current)) fail("shuffle from a lane the warp does not have");
  const int first = current - current % 32;
  exchange_slots[current] = bits;
  arrive(warp_barriers[warp_of(current)], Wait::kWarp);
  if (fibers[first + source_lane].done) fail("shuffle from a lane that has returned (an undefined value)");
  const uint64_t got = exchange_slots[first + source_lane];
  arrive(warp_barriers[warp_of(current)], Wait::kWarp);
  return got;
}

void warp_gather(const void* mine, std::size_t bytes, void* all) {
  if (warp_size_of(current) != 32) fail("a whole-warp instruction (mma, ldmatrix) in a warp of fewer than 32 threads");
  const int first = current - current % 32;
  exchange_slots[current] = reinterpret_cast<std::uintptr_t>(mine);  // the fibre's stack stays put while it waits
  arrive(warp_barriers[warp_of(current)], Wait::kWarp);
  for (int l = 0; l < 32; ++l) {
    if (fibers[first + l].done) fail("a whole-warp instruction (mma, ldmatrix) with a lane that has returned");
    std::memcpy(static_cast<unsigned char*>(all) + l * bytes, reinterpret_cast<const void*>(exchange_slots[first + l]),
                bytes);
  }
  arrive(warp_barriers[warp_of(current)], Wait::kWarp);
}

unsigned ballot(unsigned mask, bool predicate) {
  check_warp_mask(mask, "__ballot_sync");
  const int first = current - current % 32;
  exchange_slots[current] = predicate ? 1 : 0;
  arrive(warp_barriers[warp_of(current)], Wait::kWarp);
  unsigned result = 0;
  for (int l = 0; l < warp_size_of(current); ++l) {
    if (!fibers[first + l].done) result |= static_cast<unsigned>(exchange_slots[first + l]) << l;
  }
  arrive(warp_barriers[warp_of(current)], Wait::kWarp);
  return result;
}

unsigned char* dynamic_shared(std::size_t alignment) {
  if (alignment > 256) fail("extern __shared__ aligned to more than 256 bytes");
  return shared_base;
}

// The first thread to reach a declaration places the variable; the others get the same address.
unsigned char* static_shared(const void* declaration, std::size_t bytes, std::size_t alignment) {
  auto it = static_variables.find(declaration);
  if (it == static_variables.end()) {
    if (alignment > 256) fail("__shared__ variable aligned to more than 256 bytes");
    const std::size_t offset = (static_end + alignment - 1) / alignment * alignment;
    static_end = offset + bytes + kSharedGuard;
    static_bytes += bytes;
    if (static_bytes > kStaticSharedLimit) fail("static __shared__ variables over 48 KiB");
    if (static_bytes + dynamic_bytes > static_cast<std::size_t>(max_dynamic_shared_bytes())) {
      fail("static plus dynamic shared memory over the device's limit");
    }
    if (static_end > dynamic_bytes + kSharedGuard + kSharedArena) fail("too many __shared__ variables to emulate");
    std::memset(shared_base + offset + bytes, kGuardByte, kSharedGuard);
    it = static_variables.emplace(declaration, StaticVariable{offset, bytes}).first;
  }
  return shared_base + it->second.offset;
}

void allow_dynamic_shared(const void* kernel, int bytes) { dynamic_shared_opt_ins[kernel] = bytes; }

int max_dynamic_shared_bytes() {
  static const int limit = [] {
    const char* s = std::getenv("EMU_MAX_SMEM");
    return s != nullptr ? std::atoi(s) : 232448;
  }();
  return limit;
}

void run_grid(const char* kernel_name, const char* file, int line, const void* kernel, dim3 grid, dim3 block,
              std::size_t shared_bytes, const std::function<void()>& body) {
  last_launch = LaunchSite{kernel_name, file, line};
  // Bad configurations fail the launch (cudaGetLastError reports them), as on the hardware.
  if (block.y != 1 || block.z != 1) {
    std::fprintf(stderr, "emulation: %s (%s:%d): only one-dimensional blocks are emulated\n", kernel_name, file,
                 line);
    last_error = cudaErrorInvalidConfiguration;
    return;
  }
  if (block.x == 0 || block.x > 1024 || grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.y > 65535 ||
      grid.z > 65535) {
    last_error = cudaErrorInvalidConfiguration;
    return;
  }
  // Above 48 KiB a kernel must have opted in (cudaFuncSetAttribute) to at least this much.
  if (shared_bytes > kStaticSharedLimit) {
    const auto it = dynamic_shared_opt_ins.find(kernel);
    if (it == dynamic_shared_opt_ins.end() || static_cast<std::size_t>(it->second) < shared_bytes) {
      std::fprintf(stderr,
                   "emulation: %s (%s:%d): %zu bytes of dynamic shared memory without the opt-in to that much\n",
                   kernel_name, file, line, shared_bytes);
      last_error = cudaErrorInvalidValue;
      return;
    }
  }
  const int threads = static_cast<int>(block.x);
  ensure_fibers(threads);
  kernel_body = &body;
  grid_dim = grid;
  block_dim = block;
  dynamic_bytes = shared_bytes;

  // Blocks one at a time, in a random order: a kernel that assumes an order between blocks shows it.
  std::vector<uint3> blocks;
  blocks.reserve(static_cast<std::size_t>(grid.x) * grid.y * grid.z);
  for (unsigned z = 0; z < grid.z; ++z) {
    for (unsigned y = 0; y < grid.y; ++y) {
      for (unsigned x = 0; x < grid.x; ++x) blocks.push_back(uint3{x, y, z});
    }
  }
  std::shuffle(blocks.begin(), blocks.end(), scheduler_rng());
  in_kernel = true;
  for (const uint3& b : blocks) {
    block_idx = b;
    run_block(threads);
  }
  in_kernel = false;
  check_device_memory_guards();
}

}  // namespace emu

// ---- Device memory: host memory with guard bytes on both sides, checked after every launch and free ----------------

namespace {

constexpr std::size_t kGuard = 1024;
constexpr unsigned char kDeviceGuardByte = 0x5a;

struct Allocation {
  unsigned char* raw;
  std::size_t bytes;
};
std::map<const unsigned char*, Allocation>& allocations() {  // by the pointer handed out
  static std::map<const unsigned char*, Allocation> m;
  return m;
}

void check_allocation(const unsigned char* p, const Allocation& a) {
  for (std::size_t i = 0; i < kGuard; ++i) {
    if (p[-static_cast<std::ptrdiff_t>(kGuard) + static_cast<std::ptrdiff_t>(i)] != kDeviceGuardByte) {
      emu::fail("write before the start of a device allocation");
    }
    if (p[a.bytes + i] != kDeviceGuardByte) emu::fail("write past the end of a device allocation");
  }
}

// True when [p, p + bytes) lies inside one allocation.
bool inside_allocation(const void* p, std::size_t bytes) {
  const auto* c = static_cast<const unsigned char*>(p);
  auto it = allocations().upper_bound(c);
  if (it == allocations().begin()) return false;
  --it;
  return c >= it->first && c + bytes <= it->first + it->second.bytes;
}

cudaError_t check_copy(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind) {
  if (bytes == 0) return cudaSuccess;
  const bool dst_device = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  const bool src_device = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  if ((dst_device && !inside_allocation(dst, bytes)) || (src_device && !inside_allocation(src, bytes))) {
    std::fprintf(stderr, "emulation: cudaMemcpy of %zu bytes outside a device allocation\n", bytes);
    return cudaErrorInvalidValue;
  }
  return cudaSuccess;
}

}  // namespace

namespace emu {
namespace {
void check_device_memory_guards() {
  for (const auto& a : allocations()) check_allocation(a.first, a.second);
}
}  // namespace
bool in_device_allocation(const void* p, std::size_t bytes) { return inside_allocation(p, bytes); }

// ---- Stream capture ------------------------------------------------------------------------------------------------
// One capture at a time (bertrain's GraphCache captures one stream): what is enqueued on the captured stream is
// recorded; work on any other stream meanwhile is a loud failure (CUDA would run it eagerly, but GraphCache's
// contract is that the captured work stays on its stream, and a graph that missed some of it would replay wrong).
namespace {
cudaStream_t capturing = nullptr;
bool capture_active = false;
std::vector<std::function<void()>> captured;
}  // namespace

void enqueue(cudaStream_t stream, std::function<void()> work) {
  if (capture_active) {
    if (stream != capturing) fail("work enqueued on another stream while a stream is captured");
    captured.push_back(std::move(work));
    return;
  }
  work();
}

bool capture_underway() { return capture_active; }
}  // namespace emu

struct CUgraph_st {
  std::vector<std::function<void()>> work;
};
struct CUgraphExec_st {
  std::vector<std::function<void()>> work;
};
struct CUevent_st {
  bool recorded = false;
  bool timing = true;                           // not cudaEventDisableTiming
  std::chrono::steady_clock::time_point when;  // of the last recording
};

const char* cudaGetErrorString(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "no error (emulated)";
    case cudaErrorInvalidValue: return "invalid argument (emulated)";
    case cudaErrorMemoryAllocation: return "out of memory (emulated)";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument (emulated)";
    case cudaErrorInvalidDevice: return "invalid device ordinal (emulated)";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle (emulated)";
    case cudaErrorNotReady: return "device not ready (emulated)";
    case cudaErrorLaunchOutOfResources: return "too many resources requested for launch (emulated)";
    case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing (emulated)";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected (emulated)";
    case cudaErrorInsufficientDriver: return "CUDA driver version is insufficient for CUDA runtime version (emulated)";
  }
  return "unknown error (emulated)";
}
cudaError_t cudaGetLastError() {
  const cudaError_t e = emu::last_error;
  emu::last_error = cudaSuccess;
  return e;
}
cudaError_t cudaPeekAtLastError() { return emu::last_error; }

cudaError_t cudaGetDeviceCount(int* count) {
  *count = 1;
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int* device) {
  *device = 0;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) { return device == 0 ? cudaSuccess : cudaErrorInvalidDevice; }
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (device != 0) return cudaErrorInvalidDevice;
  *prop = cudaDeviceProp{};
  std::snprintf(prop->name, sizeof prop->name, "bertrain CUDA emulation (CPU)");
  prop->totalGlobalMem = std::size_t{16} << 30;
  prop->sharedMemPerBlock = emu::kStaticSharedLimit;
  prop->sharedMemPerBlockOptin = static_cast<std::size_t>(emu::max_dynamic_shared_bytes());
  prop->major = emu::kComputeMajor;
  prop->minor = emu::kComputeMinor;
  prop->multiProcessorCount = 1;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = 1024;
  prop->l2CacheSize = 0;  // no cache is emulated
  return cudaSuccess;
}
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  if (device != 0) return cudaErrorInvalidDevice;
  switch (attr) {
    case cudaDevAttrMaxSharedMemoryPerBlock: *value = static_cast<int>(emu::kStaticSharedLimit); break;
    case cudaDevAttrComputeCapabilityMajor: *value = emu::kComputeMajor; break;
    case cudaDevAttrComputeCapabilityMinor: *value = emu::kComputeMinor; break;
    case cudaDevAttrMultiProcessorCount: *value = 1; break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = emu::max_dynamic_shared_bytes(); break;
    case cudaDevAttrMemoryClockRate: *value = 0; break;
    case cudaDevAttrGlobalMemoryBusWidth: *value = 0; break;
    case cudaDevAttrClockRate: *value = 0; break;
  }
  return cudaSuccess;
}
cudaError_t cudaRuntimeGetVersion(int* version) {
  *version = 0;
  return cudaSuccess;
}
cudaError_t cudaDriverGetVersion(int* version) {
  *version = 0;
  return cudaSuccess;
}
cudaError_t cudaMemGetInfo(std::size_t* free_bytes, std::size_t* total_bytes) {
  std::size_t used = 0;
  for (const auto& a : allocations()) used += a.second.bytes;
  *total_bytes = std::size_t{16} << 30;
  *free_bytes = used < *total_bytes ? *total_bytes - used : 0;
  return cudaSuccess;
}

cudaError_t cudaMalloc(void** p, std::size_t bytes) {
  if (emu::capture_underway()) return cudaErrorStreamCaptureUnsupported;
  const std::size_t rounded = (bytes + 255) / 256 * 256;
  auto* raw = static_cast<unsigned char*>(std::aligned_alloc(256, kGuard + rounded + kGuard));
  if (raw == nullptr) return cudaErrorMemoryAllocation;
  unsigned char* user = raw + kGuard;
  std::memset(raw, kDeviceGuardByte, kGuard);
  std::memset(user, 0xff, bytes);  // NaN in fp32 and bf16: never-written device memory poisons what reads it
  std::memset(user + bytes, kDeviceGuardByte, kGuard + rounded - bytes);
  allocations()[user] = Allocation{raw, bytes};
  *p = user;
  return cudaSuccess;
}
cudaError_t cudaFree(void* p) {
  if (p == nullptr) return cudaSuccess;
  auto it = allocations().find(static_cast<unsigned char*>(p));
  if (it == allocations().end()) return cudaErrorInvalidValue;
  check_allocation(it->first, it->second);
  std::free(it->second.raw);
  allocations().erase(it);
  return cudaSuccess;
}
cudaError_t cudaMallocHost(void** p, std::size_t bytes) {
  *p = std::malloc(bytes > 0 ? bytes : 1);
  return *p != nullptr ? cudaSuccess : cudaErrorMemoryAllocation;
}
cudaError_t cudaFreeHost(void* p) {
  std::free(p);
  return cudaSuccess;
}
// The synchronous calls (and allocations) are illegal while a stream is captured, as in CUDA's global and
// thread-local capture modes.
cudaError_t cudaMemcpy(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind) {
  if (emu::capture_underway()) return cudaErrorStreamCaptureUnsupported;
  const cudaError_t e = check_copy(dst, src, bytes, kind);
  if (e == cudaSuccess && bytes > 0) std::memmove(dst, src, bytes);
  return e;
}
cudaError_t cudaMemcpyAsync(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind, cudaStream_t stream) {
  const cudaError_t e = check_copy(dst, src, bytes, kind);
  if (e == cudaSuccess && bytes > 0) emu::enqueue(stream, [=] { std::memmove(dst, src, bytes); });
  return e;
}
cudaError_t cudaMemsetAsync(void* p, int value, std::size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return cudaSuccess;
  if (!inside_allocation(p, bytes)) {
    std::fprintf(stderr, "emulation: cudaMemset of %zu bytes outside a device allocation\n", bytes);
    return cudaErrorInvalidValue;
  }
  emu::enqueue(stream, [=] { std::memset(p, value, bytes); });
  return cudaSuccess;
}
cudaError_t cudaMemset(void* p, int value, std::size_t bytes) {
  if (emu::capture_underway()) return cudaErrorStreamCaptureUnsupported;
  return cudaMemsetAsync(p, value, bytes, nullptr);
}
cudaError_t cudaDeviceSynchronize() {
  if (emu::capture_underway()) return cudaErrorStreamCaptureUnsupported;
  emu::check_device_memory_guards();
  return cudaSuccess;
}

// Streams are distinct non-null handles, so code that compares or stores them behaves; work on them is synchronous.
cudaError_t cudaStreamCreate(cudaStream_t* stream) { return cudaStreamCreateWithFlags(stream, cudaStreamDefault); }
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned) {
  *stream = reinterpret_cast<cudaStream_t>(new char);
  return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  delete reinterpret_cast<char*>(stream);
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaDeviceSynchronize(); }

cudaError_t cudaEventCreate(cudaEvent_t* event) { return cudaEventCreateWithFlags(event, cudaEventDefault); }
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned flags) {
  *event = new CUevent_st;
  (*event)->timing = (flags & cudaEventDisableTiming) == 0;
  return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t event) {
  delete event;
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  if (event == nullptr) return cudaErrorInvalidResourceHandle;
  emu::enqueue(stream, [event] {
    event->recorded = true;
    event->when = std::chrono::steady_clock::now();
  });
  return cudaSuccess;
}
// As CUDA: both events recorded, neither created with cudaEventDisableTiming.
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (start == nullptr || end == nullptr || !start->recorded || !end->recorded || !start->timing || !end->timing) {
    return cudaErrorInvalidResourceHandle;
  }
  *ms = std::chrono::duration<float, std::milli>(end->when - start->when).count();
  return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  if (emu::capture_underway()) return cudaErrorStreamCaptureUnsupported;
  return event != nullptr ? cudaSuccess : cudaErrorInvalidResourceHandle;
}
cudaError_t cudaEventQuery(cudaEvent_t event) {
  if (emu::capture_underway()) return cudaErrorStreamCaptureUnsupported;
  return event != nullptr ? cudaSuccess : cudaErrorInvalidResourceHandle;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned) {
  if (event == nullptr) return cudaErrorInvalidResourceHandle;
  emu::enqueue(stream, [] {});  // everything before the event has run already; a capture checks the stream
  return cudaSuccess;
}

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode) {
  if (emu::capture_active) return cudaErrorStreamCaptureUnsupported;  // one capture at a time (see above)
  if (stream == nullptr) return cudaErrorStreamCaptureUnsupported;    // the legacy stream cannot be captured
  emu::capture_active = true;
  emu::capturing = stream;
  emu::captured.clear();
  return cudaSuccess;
}
cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  if (!emu::capture_active || stream != emu::capturing) return cudaErrorInvalidValue;
  emu::capture_active = false;
  emu::capturing = nullptr;
  *graph = new CUgraph_st{std::move(emu::captured)};
  emu::captured.clear();
  return cudaSuccess;
}
cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long) {
  if (graph == nullptr) return cudaErrorInvalidValue;
  *exec = new CUgraphExec_st{graph->work};
  return cudaSuccess;
}
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  if (exec == nullptr) return cudaErrorInvalidValue;
  for (const auto& work : exec->work) emu::enqueue(stream, work);
  return cudaSuccess;
}
cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  delete graph;
  return cudaSuccess;
}
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  delete exec;
  return cudaSuccess;
}
