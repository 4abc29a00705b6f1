/* A stand-in for the CUDA driver library, built as libcuda.so.1 in the build
 * tree only (never installed), for tests/runtime/cuda_uprobes_test.cc: it
 * exports the driver functions gpuos-trace puts uprobes on, under the
 * driver's names and with its signatures (checked against cuda.h where the
 * toolkit is installed at build time), and each does known work:
 *   - the synchronize calls sleep a known time (FAKE_CUDA_*_SLEEP_US);
 *   - cuCtxSynchronize_v2 calls cuCtxSynchronize, as a driver may call one
 *     of its entry points from another (nested probes);
 *   - the query calls return CUDA_ERROR_NOT_READY, cuLaunchKernel* return
 *     CUDA_ERROR_INVALID_HANDLE for a NULL function, cuMemcpyDtoH_v2
 *     returns CUDA_ERROR_INVALID_VALUE for 0 bytes; all else returns 0;
 *   - cuMemcpyDtoD_v2_ptds is an alias of cuMemcpyDtoD_v2 (one address,
 *     two names), and cuLaunchKernelEx_ptsz and cuMemcpy3DAsync_v2_ptsz are
 *     missing, as some driver versions lack some names.
 * Copies copy nothing.  Every function bumps its own counter, so that the
 * compiler cannot fold two of them into one address by accident. */
#define _GNU_SOURCE
#include <stddef.h>
#include <time.h>

#ifdef GPUOS_FAKE_CUDA_CHECK_HEADER
#include <cuda.h>

#include "bpf/cuda_uprobes.h"
/* The argument-struct offsets the BPF probes read by. */
_Static_assert(offsetof(CUDA_MEMCPY2D, WidthInBytes) == GPUOS_CUDA_MEMCPY2D_WIDTH_OFFSET, "2D width");
_Static_assert(offsetof(CUDA_MEMCPY2D, Height) == GPUOS_CUDA_MEMCPY2D_HEIGHT_OFFSET, "2D height");
_Static_assert(offsetof(CUDA_MEMCPY3D, WidthInBytes) == GPUOS_CUDA_MEMCPY3D_WIDTH_OFFSET, "3D width");
_Static_assert(offsetof(CUDA_MEMCPY3D, Height) == GPUOS_CUDA_MEMCPY3D_HEIGHT_OFFSET, "3D height");
_Static_assert(offsetof(CUDA_MEMCPY3D, Depth) == GPUOS_CUDA_MEMCPY3D_DEPTH_OFFSET, "3D depth");
_Static_assert(offsetof(CUlaunchConfig, gridDimX) == GPUOS_CUDA_LAUNCH_CONFIG_GRID_OFFSET, "grid");
_Static_assert(offsetof(CUlaunchConfig, blockDimX) == GPUOS_CUDA_LAUNCH_CONFIG_BLOCK_OFFSET, "block");
#else
typedef enum { CUDA_SUCCESS = 0, CUDA_ERROR_INVALID_VALUE = 1, CUDA_ERROR_INVALID_HANDLE = 400,
	       CUDA_ERROR_NOT_READY = 600 } CUresult;
typedef unsigned long long CUdeviceptr;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUctx_st *CUcontext;
typedef struct CUgraphExec_st *CUgraphExec;
typedef struct CUDA_MEMCPY2D_st CUDA_MEMCPY2D;
typedef struct CUDA_MEMCPY3D_st CUDA_MEMCPY3D;
typedef struct CUlaunchConfig_st CUlaunchConfig;
#endif

#define FAKE_CUDA_STREAM_SYNC_SLEEP_US 2000
#define FAKE_CUDA_EVENT_SYNC_SLEEP_US 1000
#define FAKE_CUDA_CTX_SYNC_SLEEP_US 3000

#define EXPORT __attribute__((visibility("default"), noinline))

enum { SLOTS = 64 };
static volatile unsigned long calls[SLOTS];

static void sleep_us(long us)
{
	struct timespec ts = { us / 1000000, (us % 1000000) * 1000 };

	while (nanosleep(&ts, &ts) != 0) {
	}
}

#define LAUNCH_ARGS                                                                      \
	CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ, \
		unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,      \
		unsigned int sharedMemBytes, CUstream hStream
#define LAUNCH_BODY(slot)                                    \
	{                                                    \
		calls[slot]++;                               \
		return f ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE; \
	}

EXPORT CUresult cuLaunchKernel(LAUNCH_ARGS, void **kernelParams, void **extra) LAUNCH_BODY(0)
EXPORT CUresult cuLaunchKernel_ptsz(LAUNCH_ARGS, void **kernelParams, void **extra) LAUNCH_BODY(1)
EXPORT CUresult cuLaunchCooperativeKernel(LAUNCH_ARGS, void **kernelParams) LAUNCH_BODY(2)
EXPORT CUresult cuLaunchCooperativeKernel_ptsz(LAUNCH_ARGS, void **kernelParams) LAUNCH_BODY(3)

EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **kernelParams,
				 void **extra) LAUNCH_BODY(4)

#define SIMPLE(slot, result) \
	{                    \
		calls[slot]++; \
		return result; \
	}

EXPORT CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream) SIMPLE(5, CUDA_SUCCESS)
EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream) SIMPLE(6, CUDA_SUCCESS)

EXPORT CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount) SIMPLE(7, CUDA_SUCCESS)
EXPORT CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount) SIMPLE(8, CUDA_SUCCESS)
EXPORT CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream)
	SIMPLE(9, CUDA_SUCCESS)
EXPORT CUresult cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream)
	SIMPLE(10, CUDA_SUCCESS)
EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
	SIMPLE(11, CUDA_SUCCESS)
EXPORT CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
	SIMPLE(12, CUDA_SUCCESS)
EXPORT CUresult cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
	SIMPLE(13, ByteCount ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE)
EXPORT CUresult cuMemcpyDtoH_v2_ptds(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
	SIMPLE(14, CUDA_SUCCESS)
EXPORT CUresult cuMemcpyDtoD_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount)
	SIMPLE(15, CUDA_SUCCESS)
/* Same address as cuMemcpyDtoD_v2 (see the top). */
EXPORT CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount)
	__attribute__((alias("cuMemcpyDtoD_v2")));
EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount,
				     CUstream hStream) SIMPLE(16, CUDA_SUCCESS)
EXPORT CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount,
					  CUstream hStream) SIMPLE(17, CUDA_SUCCESS)
EXPORT CUresult cuMemcpyDtoHAsync_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount,
				     CUstream hStream) SIMPLE(18, CUDA_SUCCESS)
EXPORT CUresult cuMemcpyDtoHAsync_v2_ptsz(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount,
					  CUstream hStream) SIMPLE(19, CUDA_SUCCESS)
EXPORT CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount,
				     CUstream hStream) SIMPLE(20, CUDA_SUCCESS)
EXPORT CUresult cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr dstDevice, CUdeviceptr srcDevice,
					  size_t ByteCount, CUstream hStream) SIMPLE(21, CUDA_SUCCESS)

EXPORT CUresult cuMemcpy2D_v2(const CUDA_MEMCPY2D *pCopy) SIMPLE(22, CUDA_SUCCESS)
EXPORT CUresult cuMemcpy2D_v2_ptds(const CUDA_MEMCPY2D *pCopy) SIMPLE(23, CUDA_SUCCESS)
EXPORT CUresult cuMemcpy2DUnaligned_v2(const CUDA_MEMCPY2D *pCopy) SIMPLE(24, CUDA_SUCCESS)
EXPORT CUresult cuMemcpy2DUnaligned_v2_ptds(const CUDA_MEMCPY2D *pCopy) SIMPLE(25, CUDA_SUCCESS)
EXPORT CUresult cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D *pCopy, CUstream hStream) SIMPLE(26, CUDA_SUCCESS)
EXPORT CUresult cuMemcpy2DAsync_v2_ptsz(const CUDA_MEMCPY2D *pCopy, CUstream hStream)
	SIMPLE(27, CUDA_SUCCESS)
EXPORT CUresult cuMemcpy3D_v2(const CUDA_MEMCPY3D *pCopy) SIMPLE(28, CUDA_SUCCESS)
EXPORT CUresult cuMemcpy3D_v2_ptds(const CUDA_MEMCPY3D *pCopy) SIMPLE(29, CUDA_SUCCESS)
EXPORT CUresult cuMemcpy3DAsync_v2(const CUDA_MEMCPY3D *pCopy, CUstream hStream) SIMPLE(30, CUDA_SUCCESS)

EXPORT CUresult cuMemsetD8_v2(CUdeviceptr dstDevice, unsigned char uc, size_t N) SIMPLE(31, CUDA_SUCCESS)
EXPORT CUresult cuMemsetD8_v2_ptds(CUdeviceptr dstDevice, unsigned char uc, size_t N)
	SIMPLE(32, CUDA_SUCCESS)
EXPORT CUresult cuMemsetD16_v2(CUdeviceptr dstDevice, unsigned short us, size_t N) SIMPLE(33, CUDA_SUCCESS)
EXPORT CUresult cuMemsetD16_v2_ptds(CUdeviceptr dstDevice, unsigned short us, size_t N)
	SIMPLE(34, CUDA_SUCCESS)
EXPORT CUresult cuMemsetD32_v2(CUdeviceptr dstDevice, unsigned int ui, size_t N) SIMPLE(35, CUDA_SUCCESS)
EXPORT CUresult cuMemsetD32_v2_ptds(CUdeviceptr dstDevice, unsigned int ui, size_t N)
	SIMPLE(36, CUDA_SUCCESS)
EXPORT CUresult cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream)
	SIMPLE(37, CUDA_SUCCESS)
EXPORT CUresult cuMemsetD8Async_ptsz(CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream)
	SIMPLE(38, CUDA_SUCCESS)
EXPORT CUresult cuMemsetD16Async(CUdeviceptr dstDevice, unsigned short us, size_t N, CUstream hStream)
	SIMPLE(39, CUDA_SUCCESS)
EXPORT CUresult cuMemsetD16Async_ptsz(CUdeviceptr dstDevice, unsigned short us, size_t N,
				      CUstream hStream) SIMPLE(40, CUDA_SUCCESS)
EXPORT CUresult cuMemsetD32Async(CUdeviceptr dstDevice, unsigned int ui, size_t N, CUstream hStream)
	SIMPLE(41, CUDA_SUCCESS)
EXPORT CUresult cuMemsetD32Async_ptsz(CUdeviceptr dstDevice, unsigned int ui, size_t N, CUstream hStream)
	SIMPLE(42, CUDA_SUCCESS)

#define SLEEPING(slot, us)     \
	{                      \
		calls[slot]++; \
		sleep_us(us);  \
		return CUDA_SUCCESS; \
	}

EXPORT CUresult cuStreamSynchronize(CUstream hStream) SLEEPING(43, FAKE_CUDA_STREAM_SYNC_SLEEP_US)
EXPORT CUresult cuStreamSynchronize_ptsz(CUstream hStream) SLEEPING(44, FAKE_CUDA_STREAM_SYNC_SLEEP_US)
EXPORT CUresult cuCtxSynchronize(void) SLEEPING(45, FAKE_CUDA_CTX_SYNC_SLEEP_US)
EXPORT CUresult cuEventSynchronize(CUevent hEvent) SLEEPING(46, FAKE_CUDA_EVENT_SYNC_SLEEP_US)

EXPORT CUresult cuCtxSynchronize_v2(CUcontext ctx)
{
	calls[47]++;
	/* Not a tail call: the nested probe test wants two frames. */
	CUresult result = cuCtxSynchronize();
	calls[47]++;
	return result;
}

EXPORT CUresult cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags)
	SIMPLE(48, CUDA_SUCCESS)
EXPORT CUresult cuStreamWaitEvent_ptsz(CUstream hStream, CUevent hEvent, unsigned int Flags)
	SIMPLE(49, CUDA_SUCCESS)
EXPORT CUresult cuStreamQuery(CUstream hStream) SIMPLE(50, CUDA_ERROR_NOT_READY)
EXPORT CUresult cuStreamQuery_ptsz(CUstream hStream) SIMPLE(51, CUDA_ERROR_NOT_READY)
EXPORT CUresult cuEventQuery(CUevent hEvent) SIMPLE(52, CUDA_ERROR_NOT_READY)
