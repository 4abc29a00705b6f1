// The shim's hand-written protobuf encoder against the real libprotobuf
// parser: what the shim writes must parse into exactly the fields meant,
// including proto3's skipping of defaults and negative int32s.  (Every field
// number of wire_encoder.h is checked against the generated code in
// cupti_record_encoder_test.cc.)
#include "wire_encoder.h"

#include "gpuos_trace.pb.h"
#include "gtest/gtest.h"

namespace gpuos_shim {
namespace {

TEST(ShimWireEncoderTest, NvtxRangeRoundTripsThroughLibprotobuf) {
  ProtoWriter range;
  range.Uint(field::kNvtxRangeDuration, 123456789012ull);
  range.Bytes(field::kNvtxRangeName, "step 42");
  range.Bytes(field::kNvtxRangeDomain, "dom\xc3\xa9");
  range.Uint(field::kNvtxRangeKind, 1);
  range.Uint(field::kNvtxRangeDepth, 3);
  range.Uint(field::kNvtxRangeEndTid, 99);
  range.Uint(field::kNvtxRangeColor, 0xFF00FF00u);
  range.Uint(field::kNvtxRangeCategory, 0);  // default: not written
  gpuos::v1::Event event;
  ASSERT_TRUE(event.ParseFromString(EncodeEvent(5, 6, 7, field::kEventNvtxRange, range)));
  EXPECT_EQ(event.ts_ns(), 5u);
  EXPECT_EQ(event.pid(), 6u);
  EXPECT_EQ(event.tid(), 7u);
  ASSERT_TRUE(event.has_nvtx_range());
  EXPECT_EQ(event.nvtx_range().duration_ns(), 123456789012ull);
  EXPECT_EQ(event.nvtx_range().name(), "step 42");
  EXPECT_EQ(event.nvtx_range().domain(), "dom\xc3\xa9");
  EXPECT_EQ(event.nvtx_range().kind(), gpuos::v1::NvtxRange::START_END);
  EXPECT_EQ(event.nvtx_range().depth(), 3u);
  EXPECT_EQ(event.nvtx_range().end_tid(), 99u);
  EXPECT_EQ(event.nvtx_range().color(), 0xFF00FF00u);
  EXPECT_EQ(event.nvtx_range().category(), 0u);
}

// A Latin-1 NVTX name, or one cut inside a character, would make the whole
// batch it travels in unparseable (proto3 strings must be UTF-8): Text()
// repairs it, and leaves valid text alone.
TEST(ShimWireEncoderTest, TextFieldsAlwaysParse) {
  ProtoWriter range;
  range.Text(field::kNvtxRangeName, "caf\xe9 \xe6\x95");
  range.Text(field::kNvtxRangeDomain, "dom\xc3\xa9");
  gpuos::v1::Event event;
  ASSERT_TRUE(event.ParseFromString(EncodeEvent(5, 6, 7, field::kEventNvtxRange, range)));
  EXPECT_EQ(event.nvtx_range().name(), "caf\xef\xbf\xbd \xef\xbf\xbd\xef\xbf\xbd");
  EXPECT_EQ(event.nvtx_range().domain(), "dom\xc3\xa9");

  ProtoWriter raw;  // what Bytes() alone made of it: refused by the agent
  raw.Bytes(field::kNvtxRangeName, "caf\xe9");
  EXPECT_FALSE(event.ParseFromString(EncodeEvent(5, 6, 7, field::kEventNvtxRange, raw)));
}

TEST(ShimWireEncoderTest, EmptyPayloadStillSelectsTheOneofMember) {
  ProtoWriter empty;
  gpuos::v1::Event event;
  ASSERT_TRUE(event.ParseFromString(EncodeEvent(0, 0, 0, field::kEventNvtxMark, empty)));
  EXPECT_TRUE(event.has_nvtx_mark());
}

TEST(ShimWireEncoderTest, NegativeInt32AndLargeValues) {
  ProtoWriter api;
  api.Int(field::kApiReturn, -2);
  api.Uint(field::kApiCorrelation, 0xFFFFFFFFu);
  api.Bool(field::kApiDriver, true);
  gpuos::v1::Event event;
  ASSERT_TRUE(event.ParseFromString(EncodeEvent(~0ull, 1, 2, field::kEventCudaApi, api)));
  EXPECT_EQ(event.ts_ns(), ~0ull);
  EXPECT_EQ(event.cuda_api().return_value(), -2);
  EXPECT_EQ(event.cuda_api().correlation_id(), 0xFFFFFFFFu);
  EXPECT_TRUE(event.cuda_api().driver());
}

TEST(ShimWireEncoderTest, BatchOfEventsParsesAsEventBatch) {
  ProtoWriter batch;
  for (int i = 0; i < 100; ++i) {
    ProtoWriter mark;
    mark.Bytes(field::kNvtxMarkName, std::string(static_cast<size_t>(i), 'x'));
    batch.Bytes(field::kBatchEvents, EncodeEvent(i, 1, 1, field::kEventNvtxMark, mark));
  }
  gpuos::v1::EventBatch parsed;
  ASSERT_TRUE(parsed.ParseFromString(batch.data()));
  ASSERT_EQ(parsed.events_size(), 100);
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(parsed.events(i).ts_ns(), static_cast<uint64_t>(i));
    EXPECT_EQ(parsed.events(i).nvtx_mark().name().size(), static_cast<size_t>(i));
  }
}

}  // namespace
}  // namespace gpuos_shim
