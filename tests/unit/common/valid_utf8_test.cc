// common/valid_utf8.h: text from processes and the kernel is made valid
// UTF-8 before it goes into a trace, because proto3 refuses to parse a
// string field that is not -- one bad comm name made a whole batch, and
// every record after it, unreadable.
#include "common/valid_utf8.h"

#include <string>

#include "gpuos_trace.pb.h"
#include "gtest/gtest.h"

namespace gpuos {
namespace {

constexpr char kReplacement[] = "\xEF\xBF\xBD";

TEST(ValidUtf8Test, ValidTextIsUnchanged) {
  for (const std::string text : {std::string(""), std::string("python3"), std::string("pt_data_worker"),
                                 std::string("caf\xC3\xA9"), std::string("\xE6\x95\xB0\xE6\x8D\xAE"),
                                 std::string("\xF0\x9F\x9A\x80 go"), std::string("nul\0in", 6)}) {
    EXPECT_TRUE(IsValidUtf8(text)) << text;
    EXPECT_EQ(ValidUtf8(text), text);
  }
}

TEST(ValidUtf8Test, EveryBadByteBecomesOneReplacementCharacter) {
  // A comm cut at 15 bytes inside a 3-byte character.
  const std::string cut = "a\xE6\x95\xB0\xE6\x8D\xAE\xE5\x8A\xA0\xE8\xBD\xBD\xE5\x99";
  EXPECT_FALSE(IsValidUtf8(cut));
  EXPECT_EQ(ValidUtf8(cut),
            std::string("a\xE6\x95\xB0\xE6\x8D\xAE\xE5\x8A\xA0\xE8\xBD\xBD") + kReplacement + kReplacement);
  EXPECT_EQ(ValidUtf8("caf\xE9"), std::string("caf") + kReplacement);                 // Latin-1
  EXPECT_EQ(ValidUtf8("\xC0\xAF"), std::string(kReplacement) + kReplacement);         // overlong
  EXPECT_EQ(ValidUtf8("\xED\xA0\x80"), std::string(kReplacement) + kReplacement + kReplacement);  // surrogate
  EXPECT_EQ(ValidUtf8("\xF4\x90\x80\x80").size(), 4 * 3u);                            // above U+10FFFF
  EXPECT_EQ(ValidUtf8("\xFF"), kReplacement);
}

TEST(ValidUtf8Test, RepairedTextSurvivesProtobuf) {
  const std::string cut = "a\xE6\x95\xB0\xE5\x99";
  v1::Event event;
  event.mutable_process_start()->set_comm(ValidUtf8(cut));
  v1::Event back;
  EXPECT_TRUE(back.ParseFromString(event.SerializeAsString()));
  // The reason for all this: unrepaired, the event does not parse back.
  event.mutable_process_start()->set_comm(cut);
  EXPECT_FALSE(back.ParseFromString(event.SerializeAsString()));
}

}  // namespace
}  // namespace gpuos
