// Known CUDA work for tests/gpu/run_gpu_checks.sh: a fixed number of kernel
// launches, copies of each kind, memsets, synchronisations and NVTX ranges,
// so that a trace of it can be checked count for count.  Ends by printing
// what it did as one JSON line ("KNOWN_WORK_EXPECT {...}") that the checker
// reads, so the numbers live in one place.  Exits non-zero on any CUDA error.
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#define CHECK(call)                                                                      \
  do {                                                                                   \
    cudaError_t status_ = (call);                                                        \
    if (status_ != cudaSuccess) {                                                        \
      fprintf(stderr, "cuda_known_work: %s failed: %s\n", #call, cudaGetErrorString(status_)); \
      exit(1);                                                                           \
    }                                                                                    \
  } while (0)

// C++ names on purpose: the trace must show them demangled.
__global__ void known_add_one(float* x, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += 1.0f;
}

__global__ void known_scale(float* x, float factor, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= factor;
}

namespace {

constexpr int kLaunchesPerKernel = 1000;
constexpr int kSyncCopiesPerKind = 100;  // pageable/pinned x HtoD/DtoH
constexpr int kAsyncCopiesEachWay = 20;  // pinned, on a stream
constexpr int kDeviceCopies = 10;        // DtoD, on a stream
constexpr size_t kBytes = size_t{1} << 20;
constexpr int kBlock = 256;

}  // namespace

int main() {
  const int pid = static_cast<int>(getpid());
  const long tid = syscall(SYS_gettid);
  const int n = static_cast<int>(kBytes / sizeof(float));
  const int grid = (n + kBlock - 1) / kBlock;

  float* device_a = nullptr;
  float* device_b = nullptr;
  CHECK(cudaMalloc(&device_a, kBytes));
  CHECK(cudaMalloc(&device_b, kBytes));
  void* pageable = malloc(kBytes);
  if (pageable == nullptr) return 1;
  memset(pageable, 1, kBytes);  // fault the pages in before timing anything
  void* pinned_a = nullptr;
  void* pinned_b = nullptr;
  CHECK(cudaMallocHost(&pinned_a, kBytes));
  CHECK(cudaMallocHost(&pinned_b, kBytes));
  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaEvent_t event;
  CHECK(cudaEventCreate(&event));
  CHECK(cudaMemset(device_a, 0, kBytes));

  nvtxRangePushA("known:kernels");
  for (int i = 0; i < kLaunchesPerKernel; ++i) {
    known_add_one<<<grid, kBlock>>>(device_a, n);
    known_scale<<<grid, kBlock>>>(device_a, 0.5f, n);
  }
  CHECK(cudaGetLastError());  // not traced: must not appear
  CHECK(cudaDeviceSynchronize());
  nvtxRangePop();

  nvtxRangePushA("known:copies");
  for (int i = 0; i < kSyncCopiesPerKind; ++i) {
    CHECK(cudaMemcpy(device_b, pageable, kBytes, cudaMemcpyHostToDevice));
  }
  for (int i = 0; i < kSyncCopiesPerKind; ++i) {
    CHECK(cudaMemcpy(pageable, device_b, kBytes, cudaMemcpyDeviceToHost));
  }
  for (int i = 0; i < kSyncCopiesPerKind; ++i) {
    CHECK(cudaMemcpy(device_b, pinned_a, kBytes, cudaMemcpyHostToDevice));
  }
  for (int i = 0; i < kSyncCopiesPerKind; ++i) {
    CHECK(cudaMemcpy(pinned_a, device_b, kBytes, cudaMemcpyDeviceToHost));
  }
  for (int i = 0; i < kAsyncCopiesEachWay; ++i) {
    CHECK(cudaMemcpyAsync(device_b, pinned_a, kBytes, cudaMemcpyHostToDevice, stream));
  }
  for (int i = 0; i < kAsyncCopiesEachWay; ++i) {
    CHECK(cudaMemcpyAsync(pinned_b, device_b, kBytes, cudaMemcpyDeviceToHost, stream));
  }
  for (int i = 0; i < kDeviceCopies; ++i) {
    CHECK(cudaMemcpyAsync(device_a, device_b, kBytes, cudaMemcpyDeviceToDevice, stream));
  }
  CHECK(cudaStreamSynchronize(stream));
  CHECK(cudaMemsetAsync(device_b, 0x5A, kBytes, stream));
  CHECK(cudaStreamSynchronize(stream));
  nvtxRangePop();

  nvtxRangePushA("known:sync");
  for (int i = 0; i < 2; ++i) {
    CHECK(cudaEventRecord(event, stream));  // not traced
    CHECK(cudaEventSynchronize(event));
  }
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaDeviceSynchronize());
  nvtxRangePop();

  // A fork after CUDA is up, like a DataLoader worker: the child never
  // touches CUDA and must exit cleanly through exit() and atexit handlers.
  fflush(stdout);
  const pid_t child = fork();
  if (child == 0) {
    usleep(100 * 1000);
    exit(0);
  }
  int child_status = -1;
  if (child < 0 || waitpid(child, &child_status, 0) != child) {
    fprintf(stderr, "cuda_known_work: fork/waitpid failed\n");
    return 1;
  }

  CHECK(cudaEventDestroy(event));
  CHECK(cudaStreamDestroy(stream));
  CHECK(cudaFreeHost(pinned_a));
  CHECK(cudaFreeHost(pinned_b));
  CHECK(cudaFree(device_a));
  CHECK(cudaFree(device_b));
  free(pageable);

  printf("cuda_known_work: pid %d tid %ld\n", pid, tid);
  printf("  %d launches each of known_add_one and known_scale (grid %d x %d)\n",
         kLaunchesPerKernel, grid, kBlock);
  printf("  %d sync copies of %zu bytes each way, pageable and pinned\n", kSyncCopiesPerKind,
         kBytes);
  printf("  %d async pinned copies each way, %d async DtoD, 1 memset + 1 memsetAsync\n",
         kAsyncCopiesEachWay, kDeviceCopies);
  printf("  3 cudaDeviceSynchronize, 2 cudaStreamSynchronize, 2 cudaEventSynchronize\n");
  printf("  fork child exit status %d\n", child_status);
  // The checker's expectations.  Names are as the trace should show them.
  printf(
      "KNOWN_WORK_EXPECT {\"pid\": %d, \"tid\": %ld, \"bytes\": %zu,"
      " \"kernels\": {\"known_add_one(float*, int)\": %d, \"known_scale(float*, float, int)\": %d},"
      " \"memcpy\": ["
      "{\"direction\": \"MEMCPY_HTOD\", \"src\": \"MEMORY_PAGEABLE\", \"dst\": \"MEMORY_DEVICE\", \"async\": false, \"count\": %d},"
      "{\"direction\": \"MEMCPY_DTOH\", \"src\": \"MEMORY_DEVICE\", \"dst\": \"MEMORY_PAGEABLE\", \"async\": false, \"count\": %d},"
      "{\"direction\": \"MEMCPY_HTOD\", \"src\": \"MEMORY_PINNED\", \"dst\": \"MEMORY_DEVICE\", \"async\": false, \"count\": %d},"
      "{\"direction\": \"MEMCPY_DTOH\", \"src\": \"MEMORY_DEVICE\", \"dst\": \"MEMORY_PINNED\", \"async\": false, \"count\": %d},"
      "{\"direction\": \"MEMCPY_HTOD\", \"src\": \"MEMORY_PINNED\", \"dst\": \"MEMORY_DEVICE\", \"async\": true, \"count\": %d},"
      "{\"direction\": \"MEMCPY_DTOH\", \"src\": \"MEMORY_DEVICE\", \"dst\": \"MEMORY_PINNED\", \"async\": true, \"count\": %d},"
      "{\"direction\": \"MEMCPY_DTOD\", \"src\": \"MEMORY_DEVICE\", \"dst\": \"MEMORY_DEVICE\", \"async\": true, \"count\": %d}],"
      " \"memset\": [{\"value\": 0, \"async\": false, \"count\": 1}, {\"value\": 90, \"async\": true, \"count\": 1}],"
      " \"sync\": {\"CONTEXT\": 3, \"STREAM\": 2, \"EVENT\": 2},"
      " \"api\": {\"LaunchKernel\": %d, \"cudaMemcpy\": %d, \"cudaMemcpyAsync\": %d, \"cudaMemset\": 1,"
      " \"cudaMemsetAsync\": 1, \"cudaDeviceSynchronize\": 3, \"cudaStreamSynchronize\": 2,"
      " \"cudaEventSynchronize\": 2, \"cudaMalloc\": 2, \"cudaMallocHost\": 2, \"cudaFree\": 2,"
      " \"cudaFreeHost\": 2},"
      " \"api_absent\": [\"cudaGetLastError\", \"cudaEventRecord\", \"cudaEventCreate\","
      " \"cudaStreamCreateWithFlags\", \"cudaEventDestroy\", \"cudaStreamDestroy\"],"
      " \"nvtx\": [\"known:kernels\", \"known:copies\", \"known:sync\"],"
      " \"fork_child_status\": %d}\n",
      pid, tid, kBytes, kLaunchesPerKernel, kLaunchesPerKernel, kSyncCopiesPerKind,
      kSyncCopiesPerKind, kSyncCopiesPerKind, kSyncCopiesPerKind, kAsyncCopiesEachWay,
      kAsyncCopiesEachWay, kDeviceCopies, 2 * kLaunchesPerKernel, 4 * kSyncCopiesPerKind,
      2 * kAsyncCopiesEachWay + kDeviceCopies, child_status);
  return child_status == 0 ? 0 : 1;
}
