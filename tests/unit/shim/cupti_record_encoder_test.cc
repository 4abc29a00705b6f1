// Tests of cupti_shim/cupti_record_encoder: CUPTI activity records built in
// memory, as CUPTI 13 lays them out, are encoded and then parsed back with
// the real libprotobuf, field by field.  Also checks that the shim's
// hand-written field numbers (wire_encoder.h) and CUPTI's enum numbering
// agree with the generated schema, and which API calls become events.
// Needs only the CUPTI headers, not libcupti or a GPU.
#include "cupti_record_encoder.h"

#include <cstring>
#include <string>
#include <string_view>

#include "gpuos_trace.pb.h"
#include "gtest/gtest.h"
#include "wire_encoder.h"

namespace gpuos_shim {
namespace {

using ::gpuos::v1::Event;

template <typename Record>
Record Zeroed(CUpti_ActivityKind kind) {
  Record record;
  memset(&record, 0, sizeof(record));
  record.kind = kind;
  return record;
}

// Encodes through the dispatcher, as the parser thread does, and parses.
Event EncodeAndParse(const CUpti_Activity* record, const RecordEncodeContext& context) {
  std::string bytes;
  EXPECT_EQ(EncodeActivityRecord(record, context, &bytes), RecordEncodeOutcome::kEncoded);
  Event event;
  EXPECT_TRUE(event.ParseFromString(bytes));
  return event;
}

RecordEncodeContext ContextWithPid(uint32_t pid) {
  RecordEncodeContext context;
  context.pid = pid;
  return context;
}

TEST(CuptiRecordEncoderTest, KernelCarriesEveryField) {
  auto kernel = Zeroed<CUpti_ActivityKernel10>(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  kernel.start = 1'000'000'123;
  kernel.end = 1'000'050'000;
  kernel.deviceId = 3;
  kernel.contextId = 7;
  kernel.streamId = 13;
  kernel.correlationId = 987654;
  kernel.gridX = 70000;
  kernel.gridY = 2;
  kernel.gridZ = 3;
  kernel.blockX = 256;
  kernel.blockY = 4;
  kernel.blockZ = 1;
  kernel.staticSharedMemory = 1024;
  kernel.dynamicSharedMemory = 49152;
  kernel.registersPerThread = 40;
  kernel.graphId = 5;
  kernel.graphNodeId = 0x1'0000'0002ull;  // past 32 bits
  kernel.name = "_Z6scaledPfif";

  Event event = EncodeAndParse(reinterpret_cast<CUpti_Activity*>(&kernel), ContextWithPid(4242));
  EXPECT_EQ(event.ts_ns(), 1'000'000'123u);
  EXPECT_EQ(event.pid(), 4242u);
  EXPECT_EQ(event.tid(), 0u);
  ASSERT_EQ(event.payload_case(), Event::kGpuKernel);
  const auto& k = event.gpu_kernel();
  EXPECT_EQ(k.duration_ns(), 49'877u);
  EXPECT_EQ(k.name(), "scaled(float*, int, float)");
  EXPECT_EQ(k.device(), 3u);
  EXPECT_EQ(k.context(), 7u);
  EXPECT_EQ(k.stream(), 13u);
  EXPECT_EQ(k.correlation_id(), 987654u);
  EXPECT_EQ(k.grid_x(), 70000);
  EXPECT_EQ(k.grid_y(), 2);
  EXPECT_EQ(k.grid_z(), 3);
  EXPECT_EQ(k.block_x(), 256);
  EXPECT_EQ(k.block_y(), 4);
  EXPECT_EQ(k.block_z(), 1);
  EXPECT_EQ(k.static_shared_bytes(), 1024);
  EXPECT_EQ(k.dynamic_shared_bytes(), 49152u);
  EXPECT_EQ(k.registers_per_thread(), 40u);
  EXPECT_EQ(k.graph_id(), 5u);
  EXPECT_EQ(k.graph_node_id(), 0x1'0000'0002ull);
}

TEST(CuptiRecordEncoderTest, SerialKernelKindAndNameResolver) {
  auto kernel = Zeroed<CUpti_ActivityKernel10>(CUPTI_ACTIVITY_KIND_KERNEL);
  kernel.start = 10;
  kernel.end = 20;
  kernel.name = "plain_c_kernel";
  kernel.dynamicSharedMemory = -1;  // nonsense from CUPTI must not wrap
  RecordEncodeContext context = ContextWithPid(1);
  std::string asked;
  context.kernel_name = [&asked](const char* mangled) {
    asked = mangled;
    return std::string("resolved");
  };
  Event event = EncodeAndParse(reinterpret_cast<CUpti_Activity*>(&kernel), context);
  ASSERT_EQ(event.payload_case(), Event::kGpuKernel);
  EXPECT_EQ(asked, "plain_c_kernel");
  EXPECT_EQ(event.gpu_kernel().name(), "resolved");
  EXPECT_EQ(event.gpu_kernel().dynamic_shared_bytes(), 0u);
  EXPECT_EQ(event.gpu_kernel().duration_ns(), 10u);
}

TEST(CuptiRecordEncoderTest, SyncMemcpyUsesRuntimeCorrelation) {
  auto copy = Zeroed<CUpti_ActivityMemcpy6>(CUPTI_ACTIVITY_KIND_MEMCPY);
  copy.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
  copy.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;
  copy.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  copy.flags = 0;
  copy.bytes = 1 << 20;
  copy.start = 5'000;
  copy.end = 95'000;
  copy.deviceId = 1;
  copy.contextId = 2;
  copy.streamId = 7;
  copy.correlationId = 78;
  copy.runtimeCorrelationId = 77;
  copy.graphId = 9;

  Event event = EncodeAndParse(reinterpret_cast<CUpti_Activity*>(&copy), ContextWithPid(99));
  EXPECT_EQ(event.ts_ns(), 5'000u);
  EXPECT_EQ(event.pid(), 99u);
  EXPECT_EQ(event.tid(), 0u);
  ASSERT_EQ(event.payload_case(), Event::kGpuMemcpy);
  const auto& m = event.gpu_memcpy();
  EXPECT_EQ(m.duration_ns(), 90'000u);
  EXPECT_EQ(m.bytes(), 1u << 20);
  EXPECT_EQ(m.direction(), gpuos::v1::MEMCPY_HTOD);
  EXPECT_EQ(m.src_kind(), gpuos::v1::MEMORY_PAGEABLE);
  EXPECT_EQ(m.dst_kind(), gpuos::v1::MEMORY_DEVICE);
  EXPECT_FALSE(m.async());
  EXPECT_EQ(m.device(), 1u);
  EXPECT_EQ(m.context(), 2u);
  EXPECT_EQ(m.stream(), 7u);
  EXPECT_EQ(m.correlation_id(), 77u);
  EXPECT_EQ(m.graph_id(), 9u);
  EXPECT_EQ(m.src_device(), 0u);
  EXPECT_EQ(m.dst_device(), 0u);
}

TEST(CuptiRecordEncoderTest, AsyncDriverMemcpyUsesItsOwnCorrelation) {
  auto copy = Zeroed<CUpti_ActivityMemcpy6>(CUPTI_ACTIVITY_KIND_MEMCPY);
  copy.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_DTOH;
  copy.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  copy.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
  copy.flags = CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC;
  copy.bytes = 4096;
  copy.start = 1;
  copy.end = 2;
  copy.correlationId = 555;  // issued by cuMemcpyDtoHAsync: no runtime call
  copy.runtimeCorrelationId = 0;

  Event event = EncodeAndParse(reinterpret_cast<CUpti_Activity*>(&copy), ContextWithPid(1));
  const auto& m = event.gpu_memcpy();
  EXPECT_EQ(m.direction(), gpuos::v1::MEMCPY_DTOH);
  EXPECT_EQ(m.src_kind(), gpuos::v1::MEMORY_DEVICE);
  EXPECT_EQ(m.dst_kind(), gpuos::v1::MEMORY_PINNED);
  EXPECT_TRUE(m.async());
  EXPECT_EQ(m.correlation_id(), 555u);
}

TEST(CuptiRecordEncoderTest, PeerToPeerMemcpyNamesBothDevices) {
  auto copy = Zeroed<CUpti_ActivityMemcpyPtoP4>(CUPTI_ACTIVITY_KIND_MEMCPY2);
  copy.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_PTOP;
  copy.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  copy.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  copy.flags = CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC;
  copy.bytes = 123456789;
  copy.start = 100;
  copy.end = 350;
  copy.deviceId = 0;
  copy.contextId = 1;
  copy.streamId = 22;
  copy.srcDeviceId = 2;
  copy.dstDeviceId = 5;
  copy.correlationId = 31;
  copy.graphId = 4;

  Event event = EncodeAndParse(reinterpret_cast<CUpti_Activity*>(&copy), ContextWithPid(8));
  ASSERT_EQ(event.payload_case(), Event::kGpuMemcpy);
  const auto& m = event.gpu_memcpy();
  EXPECT_EQ(event.ts_ns(), 100u);
  EXPECT_EQ(m.duration_ns(), 250u);
  EXPECT_EQ(m.bytes(), 123456789u);
  EXPECT_EQ(m.direction(), gpuos::v1::MEMCPY_PTOP);
  EXPECT_EQ(m.src_kind(), gpuos::v1::MEMORY_DEVICE);
  EXPECT_EQ(m.dst_kind(), gpuos::v1::MEMORY_DEVICE);
  EXPECT_TRUE(m.async());
  EXPECT_EQ(m.context(), 1u);
  EXPECT_EQ(m.stream(), 22u);
  EXPECT_EQ(m.src_device(), 2u);
  EXPECT_EQ(m.dst_device(), 5u);
  EXPECT_EQ(m.correlation_id(), 31u);
  EXPECT_EQ(m.graph_id(), 4u);
}

TEST(CuptiRecordEncoderTest, MemsetCarriesEveryField) {
  auto set = Zeroed<CUpti_ActivityMemset4>(CUPTI_ACTIVITY_KIND_MEMSET);
  set.value = 0xAB;
  set.bytes = 3 << 20;
  set.start = 700;
  set.end = 900;
  set.deviceId = 2;
  set.contextId = 3;
  set.streamId = 4;
  set.correlationId = 5;
  set.flags = CUPTI_ACTIVITY_FLAG_MEMSET_ASYNC;
  set.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_MANAGED;
  set.graphId = 6;

  Event event = EncodeAndParse(reinterpret_cast<CUpti_Activity*>(&set), ContextWithPid(77));
  EXPECT_EQ(event.ts_ns(), 700u);
  EXPECT_EQ(event.pid(), 77u);
  ASSERT_EQ(event.payload_case(), Event::kGpuMemset);
  const auto& m = event.gpu_memset();
  EXPECT_EQ(m.duration_ns(), 200u);
  EXPECT_EQ(m.bytes(), 3u << 20);
  EXPECT_EQ(m.value(), 0xABu);
  EXPECT_EQ(m.memory_kind(), gpuos::v1::MEMORY_MANAGED);
  EXPECT_TRUE(m.async());
  EXPECT_EQ(m.device(), 2u);
  EXPECT_EQ(m.context(), 3u);
  EXPECT_EQ(m.stream(), 4u);
  EXPECT_EQ(m.correlation_id(), 5u);
  EXPECT_EQ(m.graph_id(), 6u);
}

TEST(CuptiRecordEncoderTest, SynchronizationDropsFieldsMarkedInvalid) {
  auto sync = Zeroed<CUpti_ActivitySynchronization2>(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION);
  sync.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE;
  sync.start = 1'000;
  sync.end = 61'000;
  sync.correlationId = 42;
  sync.contextId = 1;
  sync.streamId = CUPTI_SYNCHRONIZATION_INVALID_VALUE;
  sync.cudaEventId = CUPTI_SYNCHRONIZATION_INVALID_VALUE;

  Event event = EncodeAndParse(reinterpret_cast<CUpti_Activity*>(&sync), ContextWithPid(5));
  EXPECT_EQ(event.ts_ns(), 1'000u);
  EXPECT_EQ(event.pid(), 5u);
  EXPECT_EQ(event.tid(), 0u);
  ASSERT_EQ(event.payload_case(), Event::kGpuSync);
  const auto& s = event.gpu_sync();
  EXPECT_EQ(s.duration_ns(), 60'000u);
  EXPECT_EQ(s.kind(), gpuos::v1::GpuSync::CONTEXT);
  EXPECT_EQ(s.context(), 1u);
  EXPECT_EQ(s.stream(), 0u);
  EXPECT_EQ(s.correlation_id(), 42u);
  EXPECT_EQ(s.cuda_event_id(), 0u);
}

TEST(CuptiRecordEncoderTest, EventSynchronizationKeepsEventAndStream) {
  auto sync = Zeroed<CUpti_ActivitySynchronization2>(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION);
  sync.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT;
  sync.start = 10;
  sync.end = 11;
  sync.correlationId = 43;
  sync.contextId = 1;
  sync.streamId = 14;
  sync.cudaEventId = 3;
  const Event event = EncodeAndParse(reinterpret_cast<CUpti_Activity*>(&sync), ContextWithPid(5));
  const auto& s = event.gpu_sync();
  EXPECT_EQ(s.kind(), gpuos::v1::GpuSync::STREAM_WAIT_EVENT);
  EXPECT_EQ(s.stream(), 14u);
  EXPECT_EQ(s.cuda_event_id(), 3u);
}

TEST(CuptiRecordEncoderTest, ApiCallsTakeThreadAndNameFromTheirRecord) {
  RecordEncodeContext context = ContextWithPid(1);  // not used for API records
  bool asked_driver = true;
  uint32_t asked_cbid = 0;
  context.api_name = [&](bool driver, uint32_t cbid) -> std::string_view {
    asked_driver = driver;
    asked_cbid = cbid;
    return driver ? "cuLaunchKernel" : "cudaMemcpy";
  };

  auto runtime = Zeroed<CUpti_ActivityAPI>(CUPTI_ACTIVITY_KIND_RUNTIME);
  runtime.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020;
  runtime.start = 2'000'000'000'000ull;
  runtime.end = 2'000'000'000'500ull;
  runtime.processId = 31337;
  runtime.threadId = 31340;
  runtime.correlationId = 77;
  runtime.returnValue = 700;  // cudaErrorIllegalAddress
  Event event = EncodeAndParse(reinterpret_cast<CUpti_Activity*>(&runtime), context);
  EXPECT_FALSE(asked_driver);
  EXPECT_EQ(asked_cbid, static_cast<uint32_t>(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020));
  EXPECT_EQ(event.ts_ns(), 2'000'000'000'000ull);
  EXPECT_EQ(event.pid(), 31337u);
  EXPECT_EQ(event.tid(), 31340u);
  ASSERT_EQ(event.payload_case(), Event::kCudaApi);
  const auto& a = event.cuda_api();
  EXPECT_EQ(a.duration_ns(), 500u);
  EXPECT_EQ(a.name(), "cudaMemcpy");
  EXPECT_FALSE(a.driver());
  EXPECT_EQ(a.cbid(), static_cast<uint32_t>(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020));
  EXPECT_EQ(a.correlation_id(), 77u);
  EXPECT_EQ(a.return_value(), 700);

  auto driver = Zeroed<CUpti_ActivityAPI>(CUPTI_ACTIVITY_KIND_DRIVER);
  driver.cbid = CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel;
  driver.start = 50;
  driver.end = 60;
  driver.processId = 1;
  driver.threadId = 2;
  driver.correlationId = 78;
  driver.returnValue = 0xFFFFFFFFu;  // a negative int stored unsigned
  event = EncodeAndParse(reinterpret_cast<CUpti_Activity*>(&driver), context);
  EXPECT_TRUE(asked_driver);
  EXPECT_EQ(event.cuda_api().name(), "cuLaunchKernel");
  EXPECT_TRUE(event.cuda_api().driver());
  EXPECT_EQ(event.cuda_api().cbid(), static_cast<uint32_t>(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel));
  EXPECT_EQ(event.cuda_api().return_value(), -1);
}

TEST(CuptiRecordEncoderTest, TimestampsGoThroughTheContextsClock) {
  // CUPTI's own clock (realtime-like ns), 1.7e18 against 5e9 monotonic,
  // running 100 ppm fast: start and duration both come out mapped.
  ClockConverter clock(1.0, /*min_spacing_ns=*/1);
  clock.AddReading(1'700'000'000'000'000'000ull, 5'000'000'000ull);
  clock.AddReading(1'700'000'001'000'100'000ull, 6'000'000'000ull);
  RecordEncodeContext context = ContextWithPid(9);
  context.clock = &clock;

  auto kernel = Zeroed<CUpti_ActivityKernel10>(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  kernel.start = 1'700'000'000'500'050'000ull;  // 0.5 s after the first reading
  kernel.end = kernel.start + 1'000'100;         // 1 ms, as the fast clock counts it
  Event event = EncodeAndParse(reinterpret_cast<CUpti_Activity*>(&kernel), context);
  EXPECT_EQ(event.ts_ns(), 5'500'000'000ull);
  EXPECT_EQ(event.gpu_kernel().duration_ns(), 1'000'000u);

  auto api = Zeroed<CUpti_ActivityAPI>(CUPTI_ACTIVITY_KIND_RUNTIME);
  api.start = 1'700'000'000'000'000'000ull;
  api.end = api.start + 10'001;
  event = EncodeAndParse(reinterpret_cast<CUpti_Activity*>(&api), context);
  EXPECT_EQ(event.ts_ns(), 5'000'000'000ull);
  EXPECT_EQ(event.cuda_api().duration_ns(), 10'000u);
}

// A call timed by the shim's callbacks gives byte for byte the event its
// activity record would, except that its pid is the shim's process and its
// times are never mapped (they are CLOCK_MONOTONIC already).
TEST(CuptiRecordEncoderTest, TimedApiCallsEncodeAsTheirActivityRecordWould) {
  RecordEncodeContext context = ContextWithPid(31337);
  context.api_name = [](bool driver, uint32_t) -> std::string_view {
    return driver ? "cuLaunchKernel" : "cudaLaunchKernel";
  };
  for (bool driver : {false, true}) {
    TimedApiCall call;
    call.start_ns = 5'000'000'000ull;
    call.end_ns = 5'000'004'321ull;
    call.correlation_id = 4242;
    call.cbid = driver ? static_cast<uint32_t>(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel)
                       : static_cast<uint32_t>(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000);
    call.tid = 31341;
    call.return_value = driver ? -1 : 700;
    call.driver = driver;

    auto record = Zeroed<CUpti_ActivityAPI>(driver ? CUPTI_ACTIVITY_KIND_DRIVER
                                                   : CUPTI_ACTIVITY_KIND_RUNTIME);
    record.cbid = call.cbid;
    record.start = call.start_ns;
    record.end = call.end_ns;
    record.processId = 31337;
    record.threadId = call.tid;
    record.correlationId = call.correlation_id;
    record.returnValue = static_cast<uint32_t>(call.return_value);
    std::string from_record, from_call;
    ASSERT_EQ(EncodeActivityRecord(reinterpret_cast<CUpti_Activity*>(&record), context, &from_record),
              RecordEncodeOutcome::kEncoded);
    ASSERT_EQ(EncodeTimedApiCall(call, context, &from_call), RecordEncodeOutcome::kEncoded);
    EXPECT_EQ(from_call, from_record) << (driver ? "driver" : "runtime");

    Event event;
    ASSERT_TRUE(event.ParseFromString(from_call));
    EXPECT_EQ(event.pid(), 31337u);
    EXPECT_EQ(event.tid(), 31341u);
    EXPECT_EQ(event.cuda_api().duration_ns(), 4321u);
    EXPECT_EQ(event.cuda_api().driver(), driver);
    EXPECT_EQ(event.cuda_api().return_value(), driver ? -1 : 700);
  }

  // A context clock (CUPTI's own clock mapped) is not applied.
  ClockConverter clock(1.0, /*min_spacing_ns=*/1);
  clock.AddReading(1'700'000'000'000'000'000ull, 5'000'000'000ull);
  clock.AddReading(1'700'000'001'000'000'000ull, 6'000'000'000ull);
  context.clock = &clock;
  TimedApiCall call;
  call.start_ns = 7'000'000'000ull;
  call.end_ns = 7'000'000'100ull;
  std::string bytes;
  ASSERT_EQ(EncodeTimedApiCall(call, context, &bytes), RecordEncodeOutcome::kEncoded);
  Event event;
  ASSERT_TRUE(event.ParseFromString(bytes));
  EXPECT_EQ(event.ts_ns(), 7'000'000'000ull);
  EXPECT_EQ(event.cuda_api().duration_ns(), 100u);

  call.start_ns = 0;  // never entered
  EXPECT_EQ(EncodeTimedApiCall(call, context, &bytes), RecordEncodeOutcome::kNoTimestamps);
  EXPECT_TRUE(bytes.empty());
}

TEST(CuptiRecordEncoderTest, RecordsWithoutTimestampsAreLeftOut) {
  auto kernel = Zeroed<CUpti_ActivityKernel10>(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  kernel.start = 0;
  kernel.end = 0;
  kernel.name = "k";
  std::string bytes = "stale";
  EXPECT_EQ(
      EncodeActivityRecord(reinterpret_cast<CUpti_Activity*>(&kernel), ContextWithPid(1), &bytes),
      RecordEncodeOutcome::kNoTimestamps);
  EXPECT_TRUE(bytes.empty());

  auto copy = Zeroed<CUpti_ActivityMemcpy6>(CUPTI_ACTIVITY_KIND_MEMCPY);
  copy.start = 10;
  copy.end = 0;  // started, never finished (a forced flush at exit)
  EXPECT_EQ(
      EncodeActivityRecord(reinterpret_cast<CUpti_Activity*>(&copy), ContextWithPid(1), &bytes),
      RecordEncodeOutcome::kNoTimestamps);
}

TEST(CuptiRecordEncoderTest, OtherKindsAreIgnored) {
  auto name = Zeroed<CUpti_ActivityName>(CUPTI_ACTIVITY_KIND_NAME);
  std::string bytes = "stale";
  EXPECT_EQ(
      EncodeActivityRecord(reinterpret_cast<CUpti_Activity*>(&name), ContextWithPid(1), &bytes),
      RecordEncodeOutcome::kIgnoredKind);
  EXPECT_TRUE(bytes.empty());
}

TEST(CuptiRecordEncoderTest, DemanglesOnlyMangledNames) {
  EXPECT_EQ(DemangleKernelName("_Z6scaledPfif"), "scaled(float*, int, float)");
  EXPECT_EQ(DemangleKernelName("_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_"
                               "11FillFunctorIfEENS_6detail5ArrayIPcLi1EEEEEviT0_T1_"),
            "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
            "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, "
            "at::detail::Array<char*, 1>)");
  // A C kernel named like a type code must not become "float".
  EXPECT_EQ(DemangleKernelName("f"), "f");
  EXPECT_EQ(DemangleKernelName("_Znot_really"), "_Znot_really");
  EXPECT_EQ(DemangleKernelName(nullptr), "");
}

TEST(CuptiRecordEncoderTest, TracedApisAreThoseThatMoveWorkMemoryOrTime) {
  // Names as cuptiGetCallbackName returns them: the cbid enum's suffix.
  for (std::string_view name : {"cudaLaunchKernel_v7000",
                                "cudaLaunchKernel_ptsz_v7000",
                                "cudaLaunchHostFunc_v10000",
                                "cudaGraphLaunch_v10000",
                                "cudaMemcpy_v3020",
                                "cudaMemcpyAsync_v3020",
                                "cudaMemset_v3020",
                                "cudaMalloc_v3020",
                                "cudaFree_v3020",
                                "cudaMallocHost_v3020",
                                "cudaHostAlloc_v3020",
                                "cudaFreeHost_v3020",
                                "cudaMallocAsync_v11020",
                                "cudaFreeAsync_v11020",
                                "cudaHostRegister_v4000",
                                "cudaMemPrefetchAsync_v8000",
                                "cudaDeviceSynchronize_v3020",
                                "cudaStreamSynchronize_v3020",
                                "cudaEventSynchronize_v3020",
                                "cudaStreamWaitEvent_v3020",
                                "cuLaunchKernel",
                                "cuLaunchKernelEx",
                                "cuGraphLaunch",
                                "cuMemAlloc_v2",
                                "cuMemFree_v2",
                                "cuMemAllocHost_v2",
                                "cuMemFreeHost",
                                "cuMemAllocAsync",
                                "cuMemcpyHtoDAsync_v2",
                                "cuMemcpyBatchAsync",
                                "cuMemsetD32_v2",
                                "cuMemPrefetchAsync",
                                "cuCtxSynchronize",
                                "cuStreamSynchronize",
                                "cuEventSynchronize",
                                "cuMemCreate",
                                "cuMemRelease",
                                "cuMemMap",
                                "cuMemUnmap",
                                "cuMemAddressReserve"}) {
    EXPECT_TRUE(IsTracedApiName(name)) << name;
  }
  for (std::string_view name : {"cudaGetDevice_v3020",
                                "cudaSetDevice_v3020",
                                "cudaEventQuery_v3020",
                                "cudaStreamQuery_v3020",
                                "cudaEventRecord_v3020",
                                "cudaStreamCreate_v3020",
                                "cudaGetLastError_v3020",
                                "cudaPointerGetAttributes_v4000",
                                "cudaDeviceReset_v3020",
                                "cudaMemGetInfo_v3020",
                                "cudaFuncGetAttributes_v3020",
                                "cudaOccupancyMaxActiveBlocksPerMultiprocessor_v6000",
                                "cudaGraphAddMemcpyNode_v10000",
                                "cudaGraphInstantiate_v10000",
                                "cudaStreamBeginCapture_v10000",
                                "cuModuleLoad",
                                "cuCtxGetCurrent",
                                "cuStreamQuery",
                                "cuGraphAddMemcpyNode",
                                "cuMemGetAllocationGranularity",
                                "cuMemGetInfo_v2",
                                "cuMemRetainAllocationHandle",
                                "cuMemHostGetDevicePointer_v2",
                                "cuBinaryFree",
                                ""}) {
    EXPECT_FALSE(IsTracedApiName(name)) << name;
  }
}

TEST(CuptiRecordEncoderTest, RuntimeNamesLoseCuptiVersionTags) {
  EXPECT_EQ(ApiDisplayName(false, "cudaMemcpyAsync_v3020"), "cudaMemcpyAsync");
  EXPECT_EQ(ApiDisplayName(false, "cudaLaunchKernel_ptsz_v7000"), "cudaLaunchKernel_ptsz");
  EXPECT_EQ(ApiDisplayName(false, "cudaMallocAsync_v11020"), "cudaMallocAsync");
  // Too short to be a version tag, or not one at all.
  EXPECT_EQ(ApiDisplayName(false, "cudaSomething_v2"), "cudaSomething_v2");
  EXPECT_EQ(ApiDisplayName(false, "cudaThing_vabcd"), "cudaThing_vabcd");
  EXPECT_EQ(ApiDisplayName(false, "_v3020"), "_v3020");
  // Driver names are real symbols.
  EXPECT_EQ(ApiDisplayName(true, "cuMemAlloc_v2"), "cuMemAlloc_v2");
  EXPECT_EQ(ApiDisplayName(true, "cuMemcpyHtoD_v2"), "cuMemcpyHtoD_v2");
}

// CUPTI's enums are written to the schema's enums unconverted.
TEST(CuptiRecordEncoderTest, CuptiEnumsNumberAsTheSchemaDoes) {
  namespace v1 = ::gpuos::v1;
  EXPECT_EQ(CUPTI_ACTIVITY_MEMCPY_KIND_UNKNOWN, v1::MEMCPY_UNKNOWN);
  EXPECT_EQ(CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, v1::MEMCPY_HTOD);
  EXPECT_EQ(CUPTI_ACTIVITY_MEMCPY_KIND_DTOH, v1::MEMCPY_DTOH);
  EXPECT_EQ(CUPTI_ACTIVITY_MEMCPY_KIND_HTOA, v1::MEMCPY_HTOA);
  EXPECT_EQ(CUPTI_ACTIVITY_MEMCPY_KIND_ATOH, v1::MEMCPY_ATOH);
  EXPECT_EQ(CUPTI_ACTIVITY_MEMCPY_KIND_ATOA, v1::MEMCPY_ATOA);
  EXPECT_EQ(CUPTI_ACTIVITY_MEMCPY_KIND_ATOD, v1::MEMCPY_ATOD);
  EXPECT_EQ(CUPTI_ACTIVITY_MEMCPY_KIND_DTOA, v1::MEMCPY_DTOA);
  EXPECT_EQ(CUPTI_ACTIVITY_MEMCPY_KIND_DTOD, v1::MEMCPY_DTOD);
  EXPECT_EQ(CUPTI_ACTIVITY_MEMCPY_KIND_HTOH, v1::MEMCPY_HTOH);
  EXPECT_EQ(CUPTI_ACTIVITY_MEMCPY_KIND_PTOP, v1::MEMCPY_PTOP);
  EXPECT_EQ(v1::MemcpyDirection_MAX, v1::MEMCPY_PTOP) << "a new direction needs a CUPTI value";

  EXPECT_EQ(CUPTI_ACTIVITY_MEMORY_KIND_UNKNOWN, v1::MEMORY_UNKNOWN);
  EXPECT_EQ(CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE, v1::MEMORY_PAGEABLE);
  EXPECT_EQ(CUPTI_ACTIVITY_MEMORY_KIND_PINNED, v1::MEMORY_PINNED);
  EXPECT_EQ(CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, v1::MEMORY_DEVICE);
  EXPECT_EQ(CUPTI_ACTIVITY_MEMORY_KIND_ARRAY, v1::MEMORY_ARRAY);
  EXPECT_EQ(CUPTI_ACTIVITY_MEMORY_KIND_MANAGED, v1::MEMORY_MANAGED);
  EXPECT_EQ(CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC, v1::MEMORY_DEVICE_STATIC);
  EXPECT_EQ(CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC, v1::MEMORY_MANAGED_STATIC);
  EXPECT_EQ(v1::MemoryKind_MAX, v1::MEMORY_MANAGED_STATIC);

  EXPECT_EQ(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_UNKNOWN, v1::GpuSync::UNKNOWN);
  EXPECT_EQ(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE, v1::GpuSync::EVENT);
  EXPECT_EQ(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT, v1::GpuSync::STREAM_WAIT_EVENT);
  EXPECT_EQ(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE, v1::GpuSync::STREAM);
  EXPECT_EQ(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE, v1::GpuSync::CONTEXT);
  EXPECT_EQ(v1::GpuSync::Kind_MAX, v1::GpuSync::CONTEXT);
}

// wire_encoder.h's hand-written field numbers against the generated code.
TEST(ShimWireFieldNumbersTest, MatchTheGeneratedSchema) {
  namespace v1 = ::gpuos::v1;
  using namespace field;  // NOLINT: the constants under test
  EXPECT_EQ(kBatchEvents, v1::EventBatch::kEventsFieldNumber);

  EXPECT_EQ(kEventTs, v1::Event::kTsNsFieldNumber);
  EXPECT_EQ(kEventPid, v1::Event::kPidFieldNumber);
  EXPECT_EQ(kEventTid, v1::Event::kTidFieldNumber);
  EXPECT_EQ(kEventNvtxRange, v1::Event::kNvtxRangeFieldNumber);
  EXPECT_EQ(kEventNvtxMark, v1::Event::kNvtxMarkFieldNumber);
  EXPECT_EQ(kEventCudaApi, v1::Event::kCudaApiFieldNumber);
  EXPECT_EQ(kEventGpuKernel, v1::Event::kGpuKernelFieldNumber);
  EXPECT_EQ(kEventGpuMemcpy, v1::Event::kGpuMemcpyFieldNumber);
  EXPECT_EQ(kEventGpuMemset, v1::Event::kGpuMemsetFieldNumber);
  EXPECT_EQ(kEventGpuSync, v1::Event::kGpuSyncFieldNumber);
  EXPECT_EQ(kEventShimStats, v1::Event::kShimStatsFieldNumber);
  EXPECT_EQ(kEventCaptureWindow, v1::Event::kCaptureWindowFieldNumber);

  EXPECT_EQ(kNvtxRangeDuration, v1::NvtxRange::kDurationNsFieldNumber);
  EXPECT_EQ(kNvtxRangeName, v1::NvtxRange::kNameFieldNumber);
  EXPECT_EQ(kNvtxRangeDomain, v1::NvtxRange::kDomainFieldNumber);
  EXPECT_EQ(kNvtxRangeKind, v1::NvtxRange::kKindFieldNumber);
  EXPECT_EQ(kNvtxRangeDepth, v1::NvtxRange::kDepthFieldNumber);
  EXPECT_EQ(kNvtxRangeEndTid, v1::NvtxRange::kEndTidFieldNumber);
  EXPECT_EQ(kNvtxRangeColor, v1::NvtxRange::kColorFieldNumber);
  EXPECT_EQ(kNvtxRangeCategory, v1::NvtxRange::kCategoryFieldNumber);

  EXPECT_EQ(kNvtxMarkName, v1::NvtxMark::kNameFieldNumber);
  EXPECT_EQ(kNvtxMarkDomain, v1::NvtxMark::kDomainFieldNumber);

  EXPECT_EQ(kApiDuration, v1::CudaApiCall::kDurationNsFieldNumber);
  EXPECT_EQ(kApiName, v1::CudaApiCall::kNameFieldNumber);
  EXPECT_EQ(kApiDriver, v1::CudaApiCall::kDriverFieldNumber);
  EXPECT_EQ(kApiCbid, v1::CudaApiCall::kCbidFieldNumber);
  EXPECT_EQ(kApiCorrelation, v1::CudaApiCall::kCorrelationIdFieldNumber);
  EXPECT_EQ(kApiReturn, v1::CudaApiCall::kReturnValueFieldNumber);

  EXPECT_EQ(kKernelDuration, v1::GpuKernel::kDurationNsFieldNumber);
  EXPECT_EQ(kKernelName, v1::GpuKernel::kNameFieldNumber);
  EXPECT_EQ(kKernelDevice, v1::GpuKernel::kDeviceFieldNumber);
  EXPECT_EQ(kKernelContext, v1::GpuKernel::kContextFieldNumber);
  EXPECT_EQ(kKernelStream, v1::GpuKernel::kStreamFieldNumber);
  EXPECT_EQ(kKernelCorrelation, v1::GpuKernel::kCorrelationIdFieldNumber);
  EXPECT_EQ(kKernelGridX, v1::GpuKernel::kGridXFieldNumber);
  EXPECT_EQ(kKernelGridY, v1::GpuKernel::kGridYFieldNumber);
  EXPECT_EQ(kKernelGridZ, v1::GpuKernel::kGridZFieldNumber);
  EXPECT_EQ(kKernelBlockX, v1::GpuKernel::kBlockXFieldNumber);
  EXPECT_EQ(kKernelBlockY, v1::GpuKernel::kBlockYFieldNumber);
  EXPECT_EQ(kKernelBlockZ, v1::GpuKernel::kBlockZFieldNumber);
  EXPECT_EQ(kKernelStaticShared, v1::GpuKernel::kStaticSharedBytesFieldNumber);
  EXPECT_EQ(kKernelDynamicShared, v1::GpuKernel::kDynamicSharedBytesFieldNumber);
  EXPECT_EQ(kKernelRegisters, v1::GpuKernel::kRegistersPerThreadFieldNumber);
  EXPECT_EQ(kKernelGraphId, v1::GpuKernel::kGraphIdFieldNumber);
  EXPECT_EQ(kKernelGraphNodeId, v1::GpuKernel::kGraphNodeIdFieldNumber);

  EXPECT_EQ(kMemcpyDuration, v1::GpuMemcpy::kDurationNsFieldNumber);
  EXPECT_EQ(kMemcpyBytes, v1::GpuMemcpy::kBytesFieldNumber);
  EXPECT_EQ(kMemcpyDirection, v1::GpuMemcpy::kDirectionFieldNumber);
  EXPECT_EQ(kMemcpySrcKind, v1::GpuMemcpy::kSrcKindFieldNumber);
  EXPECT_EQ(kMemcpyDstKind, v1::GpuMemcpy::kDstKindFieldNumber);
  EXPECT_EQ(kMemcpyAsync, v1::GpuMemcpy::kAsyncFieldNumber);
  EXPECT_EQ(kMemcpyDevice, v1::GpuMemcpy::kDeviceFieldNumber);
  EXPECT_EQ(kMemcpyContext, v1::GpuMemcpy::kContextFieldNumber);
  EXPECT_EQ(kMemcpyStream, v1::GpuMemcpy::kStreamFieldNumber);
  EXPECT_EQ(kMemcpyCorrelation, v1::GpuMemcpy::kCorrelationIdFieldNumber);
  EXPECT_EQ(kMemcpyGraphId, v1::GpuMemcpy::kGraphIdFieldNumber);
  EXPECT_EQ(kMemcpySrcDevice, v1::GpuMemcpy::kSrcDeviceFieldNumber);
  EXPECT_EQ(kMemcpyDstDevice, v1::GpuMemcpy::kDstDeviceFieldNumber);

  EXPECT_EQ(kMemsetDuration, v1::GpuMemset::kDurationNsFieldNumber);
  EXPECT_EQ(kMemsetBytes, v1::GpuMemset::kBytesFieldNumber);
  EXPECT_EQ(kMemsetValue, v1::GpuMemset::kValueFieldNumber);
  EXPECT_EQ(kMemsetKind, v1::GpuMemset::kMemoryKindFieldNumber);
  EXPECT_EQ(kMemsetAsync, v1::GpuMemset::kAsyncFieldNumber);
  EXPECT_EQ(kMemsetDevice, v1::GpuMemset::kDeviceFieldNumber);
  EXPECT_EQ(kMemsetContext, v1::GpuMemset::kContextFieldNumber);
  EXPECT_EQ(kMemsetStream, v1::GpuMemset::kStreamFieldNumber);
  EXPECT_EQ(kMemsetCorrelation, v1::GpuMemset::kCorrelationIdFieldNumber);
  EXPECT_EQ(kMemsetGraphId, v1::GpuMemset::kGraphIdFieldNumber);

  EXPECT_EQ(kSyncDuration, v1::GpuSync::kDurationNsFieldNumber);
  EXPECT_EQ(kSyncKind, v1::GpuSync::kKindFieldNumber);
  EXPECT_EQ(kSyncContext, v1::GpuSync::kContextFieldNumber);
  EXPECT_EQ(kSyncStream, v1::GpuSync::kStreamFieldNumber);
  EXPECT_EQ(kSyncCorrelation, v1::GpuSync::kCorrelationIdFieldNumber);
  EXPECT_EQ(kSyncEventId, v1::GpuSync::kCudaEventIdFieldNumber);

  EXPECT_EQ(kStatsSent, v1::ShimStats::kEventsSentFieldNumber);
  EXPECT_EQ(kStatsDroppedQueue, v1::ShimStats::kDroppedQueueFullFieldNumber);
  EXPECT_EQ(kStatsDroppedSend, v1::ShimStats::kDroppedSendFailedFieldNumber);
  EXPECT_EQ(kStatsCuptiDropped, v1::ShimStats::kCuptiDroppedRecordsFieldNumber);
  EXPECT_EQ(kStatsCuptiActive, v1::ShimStats::kCuptiActiveFieldNumber);
  EXPECT_EQ(kStatsCuptiStatus, v1::ShimStats::kCuptiStatusFieldNumber);
  EXPECT_EQ(kStatsNvtxActive, v1::ShimStats::kNvtxActiveFieldNumber);
}

}  // namespace
}  // namespace gpuos_shim
