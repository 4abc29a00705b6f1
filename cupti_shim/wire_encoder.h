// A tiny writer of the protobuf wire format, for the messages the shim sends
// (gpuos.v1.Event and its CUDA/NVTX payloads, proto/gpuos_trace.proto).
//
// Why not libprotobuf: the shim is injected into arbitrary processes. A
// static libprotobuf cannot be linked into a shared object (its TLS model
// forbids it), and a dynamic one would clash with the copy that frameworks
// such as PyTorch carry.  The agent parses what this writes with the real
// libprotobuf, and tests/unit/shim/shim_wire_encoder_test.cc checks every field
// number here against the generated code.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "../agent/common/valid_utf8.h"

namespace gpuos_shim {

class ProtoWriter {
 public:
  // Field setters skip default values (0, false, ""), as proto3 does.
  void Uint(int field, uint64_t value) {
    if (value == 0) return;
    Tag(field, 0);
    Varint(value);
  }
  // int32/int64 fields: negative values take 10 bytes, as in proto3.
  void Int(int field, int64_t value) {
    if (value == 0) return;
    Tag(field, 0);
    Varint(static_cast<uint64_t>(value));
  }
  void Bool(int field, bool value) { Uint(field, value ? 1 : 0); }
  void Bytes(int field, std::string_view value) {
    if (value.empty()) return;
    Tag(field, 2);
    Varint(value.size());
    data_.append(value.data(), value.size());
  }
  // A proto3 `string` field: made valid UTF-8 (common/valid_utf8.h says
  // why), since the agent cannot parse a message holding one that is not.
  void Text(int field, std::string_view value) {
    if (gpuos::IsValidUtf8(value)) {
      Bytes(field, value);
    } else {
      Bytes(field, gpuos::ValidUtf8(value));
    }
  }
  // A nested message, written even when empty (a oneof member must be).
  void Message(int field, const ProtoWriter& message) {
    Tag(field, 2);
    Varint(message.data_.size());
    data_.append(message.data_);
  }

  const std::string& data() const { return data_; }
  std::string& mutable_data() { return data_; }
  void Clear() { data_.clear(); }

 private:
  void Tag(int field, int wire_type) { Varint((static_cast<uint64_t>(field) << 3) | wire_type); }
  void Varint(uint64_t value) {
    while (value >= 0x80) {
      data_.push_back(static_cast<char>((value & 0x7f) | 0x80));
      value >>= 7;
    }
    data_.push_back(static_cast<char>(value));
  }
  std::string data_;
};

// Field numbers of proto/gpuos_trace.proto used by the shim.
namespace field {
// EventBatch
inline constexpr int kBatchEvents = 1;
// Event
inline constexpr int kEventTs = 1, kEventPid = 2, kEventTid = 3;
inline constexpr int kEventNvtxRange = 40, kEventNvtxMark = 41, kEventCudaApi = 42,
                     kEventGpuKernel = 43, kEventGpuMemcpy = 44, kEventGpuMemset = 45,
                     kEventGpuSync = 46, kEventShimStats = 47, kEventCaptureWindow = 48;
// NvtxRange
inline constexpr int kNvtxRangeDuration = 1, kNvtxRangeName = 2, kNvtxRangeDomain = 3,
                     kNvtxRangeKind = 4, kNvtxRangeDepth = 5, kNvtxRangeEndTid = 6,
                     kNvtxRangeColor = 7, kNvtxRangeCategory = 8;
// NvtxMark
inline constexpr int kNvtxMarkName = 1, kNvtxMarkDomain = 2;
// CudaApiCall
inline constexpr int kApiDuration = 1, kApiName = 2, kApiDriver = 3, kApiCbid = 4,
                     kApiCorrelation = 5, kApiReturn = 6;
// GpuKernel
inline constexpr int kKernelDuration = 1, kKernelName = 2, kKernelDevice = 3, kKernelContext = 4,
                     kKernelStream = 5, kKernelCorrelation = 6, kKernelGridX = 7, kKernelGridY = 8,
                     kKernelGridZ = 9, kKernelBlockX = 10, kKernelBlockY = 11, kKernelBlockZ = 12,
                     kKernelStaticShared = 13, kKernelDynamicShared = 14, kKernelRegisters = 15,
                     kKernelGraphId = 16, kKernelGraphNodeId = 17;
// GpuMemcpy
inline constexpr int kMemcpyDuration = 1, kMemcpyBytes = 2, kMemcpyDirection = 3,
                     kMemcpySrcKind = 4, kMemcpyDstKind = 5, kMemcpyAsync = 6, kMemcpyDevice = 7,
                     kMemcpyContext = 8, kMemcpyStream = 9, kMemcpyCorrelation = 10,
                     kMemcpyGraphId = 11, kMemcpySrcDevice = 12, kMemcpyDstDevice = 13;
// GpuMemset
inline constexpr int kMemsetDuration = 1, kMemsetBytes = 2, kMemsetValue = 3, kMemsetKind = 4,
                     kMemsetAsync = 5, kMemsetDevice = 6, kMemsetContext = 7, kMemsetStream = 8,
                     kMemsetCorrelation = 9, kMemsetGraphId = 10;
// GpuSync
inline constexpr int kSyncDuration = 1, kSyncKind = 2, kSyncContext = 3, kSyncStream = 4,
                     kSyncCorrelation = 5, kSyncEventId = 6;
// ShimStats
inline constexpr int kStatsSent = 1, kStatsDroppedQueue = 2, kStatsDroppedSend = 3,
                     kStatsCuptiDropped = 4, kStatsCuptiActive = 5, kStatsCuptiStatus = 6,
                     kStatsNvtxActive = 7;
// CaptureWindow
inline constexpr int kCaptureEdge = 1, kCaptureStep = 2, kCaptureReason = 3, kCaptureCuptiSubscribed = 4;
}  // namespace field

// Wraps a payload into an Event in *event (cleared first): the same bytes
// as EncodeEvent, in a writer the caller reuses.
inline void EncodeEventInto(uint64_t ts_ns, uint32_t pid, uint32_t tid, int payload_field,
                            const ProtoWriter& payload, ProtoWriter* event) {
  event->Clear();
  event->Uint(field::kEventTs, ts_ns);
  event->Uint(field::kEventPid, pid);
  event->Uint(field::kEventTid, tid);
  event->Message(payload_field, payload);
}

// Wraps a payload into an Event (ts, pid, tid, payload at `payload_field`).
inline std::string EncodeEvent(uint64_t ts_ns, uint32_t pid, uint32_t tid, int payload_field,
                               const ProtoWriter& payload) {
  ProtoWriter event;
  EncodeEventInto(ts_ns, pid, tid, payload_field, payload, &event);
  return std::move(event.mutable_data());
}

}  // namespace gpuos_shim
