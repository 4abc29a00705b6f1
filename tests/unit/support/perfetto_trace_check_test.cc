// Tests of PerfettoTraceChecker, the rule book the exporter's tests hold
// their output to: a valid hand-built trace passes, and each kind of broken
// trace is caught (a checker that never complains would prove nothing).
#include <string>
#include <vector>

#include "support/perfetto_trace_check.h"
#include "gtest/gtest.h"
#include "perfetto_trace.pb.h"

namespace gpuos {
namespace {

namespace pp = ::perfetto::protos;

class TraceBuilder {
 public:
  pp::TracePacket& Packet(uint64_t ts, uint32_t flags = 0, uint32_t seq = 1) {
    pp::TracePacket& p = *trace_.add_packet();
    p.set_timestamp(ts);
    p.set_trusted_packet_sequence_id(seq);
    if (first_[seq]) {
      flags |= pp::TracePacket::SEQ_INCREMENTAL_STATE_CLEARED;
      first_[seq] = false;
    }
    if (flags != 0) p.set_sequence_flags(flags);
    return p;
  }
  void Thread(uint64_t uuid, int pid, int tid, const std::string& name) {
    pp::TrackDescriptor* d = Packet(0).mutable_track_descriptor();
    d->set_uuid(uuid);
    d->set_name(name);
    d->mutable_thread()->set_pid(pid);
    d->mutable_thread()->set_tid(tid);
    d->mutable_thread()->set_thread_name(name);
  }
  void CounterTrack(uint64_t uuid, const std::string& name) {
    pp::TrackDescriptor* d = Packet(0).mutable_track_descriptor();
    d->set_uuid(uuid);
    d->set_name(name);
    d->mutable_counter();
  }
  pp::TrackEvent& Event(uint64_t ts, uint64_t track, pp::TrackEvent::Type type, uint64_t name_iid,
                        const std::string& intern_name = "") {
    pp::TracePacket& p = Packet(ts, pp::TracePacket::SEQ_NEEDS_INCREMENTAL_STATE);
    if (!intern_name.empty()) {
      pp::EventName* n = p.mutable_interned_data()->add_event_names();
      n->set_iid(name_iid);
      n->set_name(intern_name);
    }
    pp::TrackEvent& e = *p.mutable_track_event();
    e.set_type(type);
    e.set_track_uuid(track);
    if (name_iid != 0) e.set_name_iid(name_iid);
    return e;
  }
  PerfettoTraceCheck Check() const {
    PerfettoTraceChecker checker;
    for (const pp::TracePacket& p : trace_.packet()) checker.Add(p);
    return checker.Finish();
  }
  pp::Trace trace_;

 private:
  bool first_[3] = {true, true, true};
};

// A small valid trace every test starts from.
TraceBuilder Valid() {
  TraceBuilder b;
  b.Thread(1, 10, 10, "main");
  b.CounterTrack(2, "busy");
  b.Event(100, 1, pp::TrackEvent::TYPE_SLICE_BEGIN, 1, "outer").add_flow_ids(77);
  b.Event(110, 1, pp::TrackEvent::TYPE_SLICE_BEGIN, 2, "inner");
  b.Event(120, 1, pp::TrackEvent::TYPE_SLICE_END, 0);
  b.Event(130, 1, pp::TrackEvent::TYPE_INSTANT, 2).add_terminating_flow_ids(77);
  b.Event(140, 1, pp::TrackEvent::TYPE_SLICE_END, 0);
  b.Event(150, 2, pp::TrackEvent::TYPE_COUNTER, 0).set_double_counter_value(3.5);
  return b;
}

TEST(PerfettoTraceCheckTest, ValidTracePasses) {
  PerfettoTraceCheck check = Valid().Check();
  EXPECT_TRUE(check.ok()) << ::testing::PrintToString(check.violations);
  EXPECT_EQ(check.slices, 2u);
  EXPECT_EQ(check.instants, 1u);
  EXPECT_EQ(check.flows, 1u);
  EXPECT_EQ(check.thread_tracks, 1u);
  EXPECT_EQ(check.counter_values_by_track.at("busy"), 1u);
  EXPECT_EQ(check.events_by_name.at("inner"), 2u);
}

void ExpectViolation(const TraceBuilder& b, const std::string& needle) {
  PerfettoTraceCheck check = b.Check();
  EXPECT_FALSE(check.ok()) << "expected: " << needle;
  bool found = false;
  for (const std::string& v : check.violations) found |= v.find(needle) != std::string::npos;
  EXPECT_TRUE(found) << needle << " not in " << ::testing::PrintToString(check.violations);
}

TEST(PerfettoTraceCheckTest, CatchesEventsOnUndescribedTracks) {
  TraceBuilder b = Valid();
  b.Event(200, 9, pp::TrackEvent::TYPE_INSTANT, 1);
  ExpectViolation(b, "before its descriptor");
}

TEST(PerfettoTraceCheckTest, CatchesUnbalancedSlices) {
  TraceBuilder b = Valid();
  b.Event(200, 1, pp::TrackEvent::TYPE_SLICE_END, 0);
  ExpectViolation(b, "SLICE_END without an open slice");
  TraceBuilder open = Valid();
  open.Event(200, 1, pp::TrackEvent::TYPE_SLICE_BEGIN, 1);
  ExpectViolation(open, "left open");
}

TEST(PerfettoTraceCheckTest, CatchesTimeGoingBackwards) {
  TraceBuilder b = Valid();
  b.Event(50, 1, pp::TrackEvent::TYPE_INSTANT, 1);
  ExpectViolation(b, "goes back in time");
}

TEST(PerfettoTraceCheckTest, CatchesDanglingFlows) {
  TraceBuilder b = Valid();
  b.Event(200, 1, pp::TrackEvent::TYPE_INSTANT, 1).add_flow_ids(5);
  ExpectViolation(b, "flow 5 has 1 start(s) and 0 end(s)");
}

TEST(PerfettoTraceCheckTest, CatchesUninternedAndRedefinedNames) {
  TraceBuilder b = Valid();
  b.Event(200, 1, pp::TrackEvent::TYPE_INSTANT, 42);
  ExpectViolation(b, "event name iid 42 not interned");
  TraceBuilder redefined = Valid();
  redefined.Event(200, 1, pp::TrackEvent::TYPE_INSTANT, 1, "other");
  ExpectViolation(redefined, "redefined");
  // Interned names do not carry over to another sequence.
  TraceBuilder other = Valid();
  pp::TracePacket& p = other.Packet(300, pp::TracePacket::SEQ_NEEDS_INCREMENTAL_STATE, 2);
  p.mutable_track_event()->set_type(pp::TrackEvent::TYPE_INSTANT);
  p.mutable_track_event()->set_track_uuid(1);
  p.mutable_track_event()->set_name_iid(1);
  ExpectViolation(other, "not interned on this sequence");
}

TEST(PerfettoTraceCheckTest, CatchesCountersAndSlicesOnTheWrongTracks) {
  TraceBuilder b = Valid();
  b.Event(200, 2, pp::TrackEvent::TYPE_INSTANT, 1);
  ExpectViolation(b, "slice on counter track");
  TraceBuilder c = Valid();
  c.Event(200, 1, pp::TrackEvent::TYPE_COUNTER, 0).set_counter_value(1);
  ExpectViolation(c, "counter value on slice track");
}

TEST(PerfettoTraceCheckTest, CatchesDescriptorsWithoutIdentity) {
  TraceBuilder b = Valid();
  pp::TrackDescriptor* d = b.Packet(200).mutable_track_descriptor();
  d->set_uuid(5);
  d->set_name("anon");
  d->mutable_thread()->set_pid(10);
  ExpectViolation(b, "without pid and tid");
}

}  // namespace
}  // namespace gpuos
