#include "dist/device_communicator.h"

#include "core/build_config.h"
#include "core/error.h"

#if BERTRAIN_HAS_NCCL
#include <nccl.h>
#endif

namespace bertrain {

#if BERTRAIN_HAS_NCCL

namespace {

#define BERTRAIN_NCCL_CHECK(call, who)                                                          \
  do {                                                                                          \
    const ncclResult_t nccl_status_ = (call);                                                   \
    if (nccl_status_ != ncclSuccess) {                                                          \
      BERTRAIN_FAIL(who << ": NCCL: " #call " failed: " << ncclGetErrorString(nccl_status_));  \
    }                                                                                           \
  } while (0)

class Nccl final : public DeviceCommunicator {
 public:
  Nccl(Communicator& host, double timeout_s) : where_(host.where()), timeout_s_(timeout_s) {
    BERTRAIN_CHECK(timeout_s > 0, "the collective timeout must be positive, got " << timeout_s);
    ncclUniqueId id{};
    if (host.rank() == 0) BERTRAIN_NCCL_CHECK(ncclGetUniqueId(&id), where_);
    host.broadcast_bytes(&id, sizeof id, 0);
    BERTRAIN_NCCL_CHECK(ncclCommInitRank(&comm_, host.size(), id, host.rank()), where_);
  }
  ~Nccl() override {
    if (comm_ != nullptr) ncclCommDestroy(comm_);
  }

  void allreduce_sum(float* data, std::size_t n, CudaStream stream) override {
    BERTRAIN_NCCL_CHECK(ncclAllReduce(data, data, n, ncclFloat32, ncclSum, comm_, stream), where_);
  }
  void allreduce_sum(bf16* data, std::size_t n, CudaStream stream) override {
    BERTRAIN_NCCL_CHECK(ncclAllReduce(data, data, n, ncclBfloat16, ncclSum, comm_, stream), where_);
  }

  void check(double waited_s) override {
    BERTRAIN_CHECK(comm_ != nullptr, where_ << ": the NCCL communicator was aborted earlier");
    ncclResult_t async = ncclSuccess;
    BERTRAIN_NCCL_CHECK(ncclCommGetAsyncError(comm_, &async), where_);
    if (async != ncclSuccess && async != ncclInProgress) {
      abort_communicator();
      BERTRAIN_FAIL(where_ << ": NCCL collective failed: " << ncclGetErrorString(async));
    }
    if (waited_s > timeout_s_) {
      abort_communicator();
      BERTRAIN_FAIL(where_ << ": a GPU collective did not finish within " << timeout_s_
                           << " s (a peer rank died or hangs; --collective-timeout sets the limit); NCCL aborted");
    }
  }

 private:
  void abort_communicator() {
    ncclCommAbort(comm_);
    comm_ = nullptr;
  }

  std::string where_;
  double timeout_s_;
  ncclComm_t comm_ = nullptr;
};

}  // namespace

std::unique_ptr<DeviceCommunicator> make_device_communicator(Communicator& host, int /*device: already current*/,
                                                             double timeout_s) {
  return std::make_unique<Nccl>(host, timeout_s);
}

#else

std::unique_ptr<DeviceCommunicator> make_device_communicator(Communicator& host, int, double) {
  BERTRAIN_FAIL(host.where() << ": GPU training with " << host.size()
                             << " ranks needs NCCL, and this build has none (install NCCL and configure with "
                                "-DBERTRAIN_NCCL=ON), or train on the CPU with --device cpu");
}

#endif

}  // namespace bertrain
