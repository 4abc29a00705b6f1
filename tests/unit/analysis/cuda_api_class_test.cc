// ClassifyCudaApi and StripCudaApiSuffixes on the names CUPTI gives runtime
// and driver API calls.
#include "analysis/cuda_api_class.h"

#include <string>

#include "gtest/gtest.h"

namespace gpuos {
namespace {

TEST(CudaApiClassTest, StripsVersionAndPerThreadSuffixes) {
  EXPECT_EQ(StripCudaApiSuffixes("cudaLaunchKernel_v7000"), "cudaLaunchKernel");
  EXPECT_EQ(StripCudaApiSuffixes("cuMemcpyHtoD_v2"), "cuMemcpyHtoD");
  EXPECT_EQ(StripCudaApiSuffixes("cudaLaunchKernel_ptsz_v7000"), "cudaLaunchKernel");
  EXPECT_EQ(StripCudaApiSuffixes("cuMemcpyHtoDAsync_v2_ptsz"), "cuMemcpyHtoDAsync");
  EXPECT_EQ(StripCudaApiSuffixes("cuLaunchKernel"), "cuLaunchKernel");
  // Only a "_v" followed by digits at the very end is a version.
  EXPECT_EQ(StripCudaApiSuffixes("cudaMemcpy_v"), "cudaMemcpy_v");
  EXPECT_EQ(StripCudaApiSuffixes("cudaFoo_vx2"), "cudaFoo_vx2");
  EXPECT_EQ(StripCudaApiSuffixes("cudaMemcpy2D_v3020"), "cudaMemcpy2D");
  // A name that is nothing but a suffix is left alone rather than emptied.
  EXPECT_EQ(StripCudaApiSuffixes("_v2"), "_v2");
  EXPECT_EQ(StripCudaApiSuffixes(""), "");
}

TEST(CudaApiClassTest, Launches) {
  for (const char* name : {"cudaLaunchKernel_v7000", "cudaLaunchKernel_ptsz_v7000", "cuLaunchKernel",
                           "cuLaunchKernelEx", "cudaLaunchKernelExC_v11060", "cudaLaunchCooperativeKernel_v9000",
                           "cudaGraphLaunch_v10000", "cuGraphLaunch", "cudaLaunch_v3020", "cuLaunchGrid"}) {
    EXPECT_EQ(ClassifyCudaApi(name), CudaApiClass::kLaunch) << name;
  }
}

TEST(CudaApiClassTest, Synchronization) {
  for (const char* name : {"cudaStreamSynchronize_v3020", "cudaDeviceSynchronize_v3020", "cudaEventSynchronize_v3020",
                           "cudaThreadSynchronize_v3020", "cuCtxSynchronize", "cuStreamSynchronize_ptsz",
                           "cuEventSynchronize"}) {
    EXPECT_EQ(ClassifyCudaApi(name), CudaApiClass::kSync) << name;
  }
  // A stream waits, not the CPU.
  EXPECT_EQ(ClassifyCudaApi("cudaStreamWaitEvent_v3020"), CudaApiClass::kOther);
  EXPECT_EQ(ClassifyCudaApi("cuStreamWaitEvent_ptsz"), CudaApiClass::kOther);
  EXPECT_EQ(ClassifyCudaApi("cudaStreamQuery_v3020"), CudaApiClass::kOther);
}

TEST(CudaApiClassTest, CopiesAndMemsets) {
  for (const char* name : {"cudaMemcpy_v3020", "cudaMemcpyAsync_v3020", "cudaMemcpy2DAsync_v3020",
                           "cudaMemcpyToSymbol_v3020", "cudaMemcpyPeerAsync_v4000", "cuMemcpyHtoD_v2",
                           "cuMemcpyHtoDAsync_v2_ptsz", "cuMemcpyDtoH_v2", "cuMemcpy"}) {
    EXPECT_EQ(ClassifyCudaApi(name), CudaApiClass::kMemcpy) << name;
  }
  for (const char* name : {"cudaMemset_v3020", "cudaMemsetAsync_v3020", "cuMemsetD8_v2", "cuMemsetD32Async"}) {
    EXPECT_EQ(ClassifyCudaApi(name), CudaApiClass::kMemset) << name;
  }
}

TEST(CudaApiClassTest, AllocationsAndFreesButNotTheStreamOrderedOnes) {
  for (const char* name : {"cudaMalloc_v3020", "cudaFree_v3020", "cudaHostAlloc_v3020", "cudaMallocHost_v3020",
                           "cudaFreeHost_v3020", "cudaMallocManaged_v6000", "cudaMallocPitch_v3020",
                           "cuMemAlloc_v2", "cuMemFree_v2", "cuMemAllocHost_v2", "cuMemHostAlloc", "cuMemFreeHost",
                           "cuMemCreate", "cuMemRelease", "cuMemMap", "cuMemUnmap", "cuMemAddressReserve",
                           "cuMemAddressFree"}) {
    EXPECT_EQ(ClassifyCudaApi(name), CudaApiClass::kAllocate) << name;
  }
  for (const char* name : {"cudaMallocAsync_v11020", "cudaFreeAsync_v11020", "cudaMallocFromPoolAsync_v11020",
                           "cuMemAllocAsync", "cuMemFreeAsync_ptsz", "cuMemAllocFromPoolAsync", "cudaMemGetInfo_v3020",
                           "cuMemGetAddressRange_v2", "cuMemSetAccess"}) {
    EXPECT_EQ(ClassifyCudaApi(name), CudaApiClass::kOther) << name;
  }
  EXPECT_STREQ(CudaApiClassName(CudaApiClass::kAllocate), "allocate");
}

TEST(CudaApiClassTest, EverythingElseIsOther) {
  for (const char* name : {"cudaEventRecord_v3020",
                           "cudaGetDevice_v3020", "cuCtxGetCurrent", "cudaGraphInstantiate_v10000",
                           "cudaStreamBeginCapture_v10000", "cudaMemPrefetchAsync_v8000", ""}) {
    EXPECT_EQ(ClassifyCudaApi(name), CudaApiClass::kOther) << name;
  }
  EXPECT_STREQ(CudaApiClassName(ClassifyCudaApi("cudaLaunchKernel_v7000")), "launch");
  EXPECT_STREQ(CudaApiClassName(CudaApiClass::kOther), "other");
}

TEST(CudaApiClassTest, OnlyTheDriversHostToDeviceCopiesNameTheirDirection) {
  for (const char* name : {"cuMemcpyHtoD_v2", "cuMemcpyHtoDAsync_v2", "cuMemcpyHtoDAsync_v2_ptsz",
                           "cuMemcpyHtoDAsync 64 B"}) {
    EXPECT_TRUE(NamesCopyToDevice(name)) << name;
  }
  for (const char* name : {"cuMemcpyDtoH_v2", "cuMemcpyHtoA_v2", "cuMemcpyDtoD_v2", "cudaMemcpyAsync_v3020",
                           "cudaMemcpy_v3020", "cuMemcpy", "memcpy HTOD 64 B", ""}) {
    EXPECT_FALSE(NamesCopyToDevice(name)) << name;
  }
}

}  // namespace
}  // namespace gpuos
