// CUDA_CHECK(call): for the benchmarks' main(): prints the failing call and
// CUDA's error, named by the program, and returns 1.
#ifndef GPUOS_BENCH_CUDA_CHECK_H
#define GPUOS_BENCH_CUDA_CHECK_H

#include <cuda_runtime.h>
#include <errno.h>  // program_invocation_short_name (glibc)

#include <cstdio>

#define CUDA_CHECK(call)                                                            \
  do {                                                                              \
    cudaError_t err_ = (call);                                                      \
    if (err_ != cudaSuccess) {                                                      \
      fprintf(stderr, "%s: %s: %s\n", program_invocation_short_name, #call,         \
              cudaGetErrorString(err_));                                            \
      return 1;                                                                     \
    }                                                                               \
  } while (0)

#endif  // GPUOS_BENCH_CUDA_CHECK_H
