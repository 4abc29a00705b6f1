/* CUDA driver API calls seen by uprobes on libcuda (attach mode, when the
 * CUPTI shim cannot be put into the process): which functions are probed,
 * what each probe reads from its arguments, and the record of one call.
 * Shared by cuda_uprobes.bpf.c and the agent
 * (record/sources/cuda_uprobes_source.cc attaches by this list and names
 * the records by it). */
#ifndef GPUOS_BPF_CUDA_UPROBES_H
#define GPUOS_BPF_CUDA_UPROBES_H
#include "event_header.h"

/* What the entry probe reads from the call's arguments. */
enum gpuos_cuda_args {
	GPUOS_CUDA_ARGS_NONE = 0,
	/* cuLaunchKernel, cuLaunchCooperativeKernel: grid in args 2-4, block in 5-7. */
	GPUOS_CUDA_ARGS_LAUNCH = 1,
	/* cuLaunchKernelEx: arg 1 points to a CUlaunchConfig. */
	GPUOS_CUDA_ARGS_LAUNCH_CONFIG = 2,
	/* cuMemcpy*(dst, src, ByteCount[, stream]): bytes in arg 3. */
	GPUOS_CUDA_ARGS_BYTES_ARG3 = 3,
	/* cuMemcpy2D*(const CUDA_MEMCPY2D *): WidthInBytes * Height. */
	GPUOS_CUDA_ARGS_COPY_2D = 4,
	/* cuMemcpy3D*(const CUDA_MEMCPY3D *): WidthInBytes * Height * Depth. */
	GPUOS_CUDA_ARGS_COPY_3D = 5,
	/* cuMemsetD8/16/32*(dst, value, N[, stream]): N elements of 1, 2, 4 bytes. */
	GPUOS_CUDA_ARGS_MEMSET_8 = 6,
	GPUOS_CUDA_ARGS_MEMSET_16 = 7,
	GPUOS_CUDA_ARGS_MEMSET_32 = 8,
};

/* Offsets into the driver's argument structs (cuda.h, CUDA 11-13, LP64).
 * tests/workloads/fake_libcuda.c checks them against cuda.h where the
 * toolkit is installed at build time. */
#define GPUOS_CUDA_MEMCPY2D_WIDTH_OFFSET 112
#define GPUOS_CUDA_MEMCPY2D_HEIGHT_OFFSET 120
#define GPUOS_CUDA_MEMCPY3D_WIDTH_OFFSET 176
#define GPUOS_CUDA_MEMCPY3D_HEIGHT_OFFSET 184
#define GPUOS_CUDA_MEMCPY3D_DEPTH_OFFSET 192
#define GPUOS_CUDA_LAUNCH_CONFIG_GRID_OFFSET 0  /* gridDimX, Y, Z: unsigned int */
#define GPUOS_CUDA_LAUNCH_CONFIG_BLOCK_OFFSET 12 /* blockDimX, Y, Z */

/* The probed functions: X(name, args).  A function's id is its position in
 * this list, so the list only grows at the end.  Names are libcuda's
 * exported symbols; the _ptds/_ptsz ones are the per-thread default stream
 * entry points.  Absent symbols are skipped at attach time; two names at one
 * address are probed once, under the first name listed. */
#define GPUOS_CUDA_UPROBE_FUNCTIONS(X)                                  \
	X(cuLaunchKernel, GPUOS_CUDA_ARGS_LAUNCH)                       \
	X(cuLaunchKernel_ptsz, GPUOS_CUDA_ARGS_LAUNCH)                  \
	X(cuLaunchKernelEx, GPUOS_CUDA_ARGS_LAUNCH_CONFIG)              \
	X(cuLaunchKernelEx_ptsz, GPUOS_CUDA_ARGS_LAUNCH_CONFIG)         \
	X(cuLaunchCooperativeKernel, GPUOS_CUDA_ARGS_LAUNCH)            \
	X(cuLaunchCooperativeKernel_ptsz, GPUOS_CUDA_ARGS_LAUNCH)       \
	X(cuGraphLaunch, GPUOS_CUDA_ARGS_NONE)                          \
	X(cuGraphLaunch_ptsz, GPUOS_CUDA_ARGS_NONE)                     \
	X(cuMemcpy, GPUOS_CUDA_ARGS_BYTES_ARG3)                         \
	X(cuMemcpy_ptds, GPUOS_CUDA_ARGS_BYTES_ARG3)                    \
	X(cuMemcpyAsync, GPUOS_CUDA_ARGS_BYTES_ARG3)                    \
	X(cuMemcpyAsync_ptsz, GPUOS_CUDA_ARGS_BYTES_ARG3)               \
	X(cuMemcpyHtoD_v2, GPUOS_CUDA_ARGS_BYTES_ARG3)                  \
	X(cuMemcpyHtoD_v2_ptds, GPUOS_CUDA_ARGS_BYTES_ARG3)             \
	X(cuMemcpyDtoH_v2, GPUOS_CUDA_ARGS_BYTES_ARG3)                  \
	X(cuMemcpyDtoH_v2_ptds, GPUOS_CUDA_ARGS_BYTES_ARG3)             \
	X(cuMemcpyDtoD_v2, GPUOS_CUDA_ARGS_BYTES_ARG3)                  \
	X(cuMemcpyDtoD_v2_ptds, GPUOS_CUDA_ARGS_BYTES_ARG3)             \
	X(cuMemcpyHtoDAsync_v2, GPUOS_CUDA_ARGS_BYTES_ARG3)             \
	X(cuMemcpyHtoDAsync_v2_ptsz, GPUOS_CUDA_ARGS_BYTES_ARG3)        \
	X(cuMemcpyDtoHAsync_v2, GPUOS_CUDA_ARGS_BYTES_ARG3)             \
	X(cuMemcpyDtoHAsync_v2_ptsz, GPUOS_CUDA_ARGS_BYTES_ARG3)        \
	X(cuMemcpyDtoDAsync_v2, GPUOS_CUDA_ARGS_BYTES_ARG3)             \
	X(cuMemcpyDtoDAsync_v2_ptsz, GPUOS_CUDA_ARGS_BYTES_ARG3)        \
	X(cuMemcpy2D_v2, GPUOS_CUDA_ARGS_COPY_2D)                       \
	X(cuMemcpy2D_v2_ptds, GPUOS_CUDA_ARGS_COPY_2D)                  \
	X(cuMemcpy2DUnaligned_v2, GPUOS_CUDA_ARGS_COPY_2D)              \
	X(cuMemcpy2DUnaligned_v2_ptds, GPUOS_CUDA_ARGS_COPY_2D)         \
	X(cuMemcpy2DAsync_v2, GPUOS_CUDA_ARGS_COPY_2D)                  \
	X(cuMemcpy2DAsync_v2_ptsz, GPUOS_CUDA_ARGS_COPY_2D)             \
	X(cuMemcpy3D_v2, GPUOS_CUDA_ARGS_COPY_3D)                       \
	X(cuMemcpy3D_v2_ptds, GPUOS_CUDA_ARGS_COPY_3D)                  \
	X(cuMemcpy3DAsync_v2, GPUOS_CUDA_ARGS_COPY_3D)                  \
	X(cuMemcpy3DAsync_v2_ptsz, GPUOS_CUDA_ARGS_COPY_3D)             \
	X(cuMemsetD8_v2, GPUOS_CUDA_ARGS_MEMSET_8)                      \
	X(cuMemsetD8_v2_ptds, GPUOS_CUDA_ARGS_MEMSET_8)                 \
	X(cuMemsetD16_v2, GPUOS_CUDA_ARGS_MEMSET_16)                    \
	X(cuMemsetD16_v2_ptds, GPUOS_CUDA_ARGS_MEMSET_16)               \
	X(cuMemsetD32_v2, GPUOS_CUDA_ARGS_MEMSET_32)                    \
	X(cuMemsetD32_v2_ptds, GPUOS_CUDA_ARGS_MEMSET_32)               \
	X(cuMemsetD8Async, GPUOS_CUDA_ARGS_MEMSET_8)                    \
	X(cuMemsetD8Async_ptsz, GPUOS_CUDA_ARGS_MEMSET_8)               \
	X(cuMemsetD16Async, GPUOS_CUDA_ARGS_MEMSET_16)                  \
	X(cuMemsetD16Async_ptsz, GPUOS_CUDA_ARGS_MEMSET_16)             \
	X(cuMemsetD32Async, GPUOS_CUDA_ARGS_MEMSET_32)                  \
	X(cuMemsetD32Async_ptsz, GPUOS_CUDA_ARGS_MEMSET_32)             \
	X(cuStreamSynchronize, GPUOS_CUDA_ARGS_NONE)                    \
	X(cuStreamSynchronize_ptsz, GPUOS_CUDA_ARGS_NONE)               \
	X(cuCtxSynchronize, GPUOS_CUDA_ARGS_NONE)                       \
	X(cuCtxSynchronize_v2, GPUOS_CUDA_ARGS_NONE)                    \
	X(cuEventSynchronize, GPUOS_CUDA_ARGS_NONE)                     \
	X(cuStreamWaitEvent, GPUOS_CUDA_ARGS_NONE)                      \
	X(cuStreamWaitEvent_ptsz, GPUOS_CUDA_ARGS_NONE)                 \
	X(cuStreamQuery, GPUOS_CUDA_ARGS_NONE)                          \
	X(cuStreamQuery_ptsz, GPUOS_CUDA_ARGS_NONE)                     \
	X(cuEventQuery, GPUOS_CUDA_ARGS_NONE)

#define GPUOS_CUDA_FN_ENUM(name, args) GPUOS_CUDA_FN_##name,
enum gpuos_cuda_function {
	GPUOS_CUDA_UPROBE_FUNCTIONS(GPUOS_CUDA_FN_ENUM)
	GPUOS_CUDA_FN_COUNT
};
#undef GPUOS_CUDA_FN_ENUM

/* A probe's bpf cookie: the function id in the low 16 bits, its
 * gpuos_cuda_args above them. */
#define GPUOS_CUDA_COOKIE(function, args) ((__u64)(function) | ((__u64)(args) << 16))
#define GPUOS_CUDA_COOKIE_FUNCTION(cookie) ((__u32)((cookie) & 0xffff))
#define GPUOS_CUDA_COOKIE_ARGS(cookie) ((__u32)(((cookie) >> 16) & 0xff))

/* One call: header.ts_ns is the entry, duration runs to the return.
 * bytes: copies and memsets (0 for others, and for a copy whose argument
 * struct could not be read).  grid/block: launches (cuGraphLaunch: 0). */
struct gpuos_cuda_call_event {
	struct gpuos_event_header hdr;
	__u64 duration_ns;
	__u64 bytes;
	__s32 result; /* CUresult */
	__u32 function; /* enum gpuos_cuda_function */
	__u32 grid[3];
	__u32 block[3];
};

/* Calls a thread is inside, innermost last: a probed function the driver
 * calls from another probed one is still paired with its own return.
 * Deeper nesting than this is not recorded (the returns still pair up). */
#define GPUOS_CUDA_MAX_DEPTH 4
struct gpuos_cuda_frame {
	__u64 start_ns;
	__u64 bytes;
	__u32 function;
	__u32 grid[3];
	__u32 block[3];
	__u32 pad;
};

struct gpuos_cuda_in_flight {
	__u32 depth;
	__u32 pad;
	struct gpuos_cuda_frame frames[GPUOS_CUDA_MAX_DEPTH];
};

#endif
