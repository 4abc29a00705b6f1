// A second chance for messages with text that is not UTF-8; see
// text_repairing_parse.h.
#include "stream/text_repairing_parse.h"

#include <memory>
#include <string>
#include <vector>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>
#include <google/protobuf/dynamic_message.h>

#include "common/valid_utf8.h"
#include "gpuos_trace.pb.h"

namespace gpuos {
namespace {

using google::protobuf::DescriptorProto;
using google::protobuf::FieldDescriptor;
using google::protobuf::FieldDescriptorProto;
using google::protobuf::Message;
using google::protobuf::Reflection;

// gpuos_trace.proto as proto2 with its text fields as bytes (map keys, which
// cannot be bytes, stay proto2 strings): neither is checked for UTF-8.
struct LenientSchema {
  google::protobuf::DescriptorPool pool;
  google::protobuf::DynamicMessageFactory factory{&pool};
  bool built = false;
};

void TextAsBytes(DescriptorProto* message) {
  const bool map_entry = message->options().map_entry();
  for (FieldDescriptorProto& field : *message->mutable_field()) {
    // proto2 has no proto3 `optional`; its synthetic oneof stays, as a
    // one-field oneof, which reads the same bytes.
    field.clear_proto3_optional();
    if (field.type() == FieldDescriptorProto::TYPE_STRING && !(map_entry && field.number() == 1)) {
      field.set_type(FieldDescriptorProto::TYPE_BYTES);
    }
  }
  for (DescriptorProto& nested : *message->mutable_nested_type()) TextAsBytes(&nested);
}

LenientSchema& Lenient() {
  static LenientSchema* schema = [] {
    auto* s = new LenientSchema();
    google::protobuf::FileDescriptorProto file;
    v1::Record::descriptor()->file()->CopyTo(&file);
    file.set_syntax("proto2");
    for (DescriptorProto& message : *file.mutable_message_type()) TextAsBytes(&message);
    s->built = s->pool.BuildFile(file) != nullptr;
    return s;
  }();
  return *schema;
}

void RepairText(Message* message) {
  const Reflection* reflection = message->GetReflection();
  std::vector<const FieldDescriptor*> fields;
  reflection->ListFields(*message, &fields);
  std::string scratch;
  for (const FieldDescriptor* field : fields) {
    const bool text = field->type() == FieldDescriptor::TYPE_BYTES || field->type() == FieldDescriptor::TYPE_STRING;
    if (text && field->is_repeated()) {
      for (int i = 0; i < reflection->FieldSize(*message, field); ++i) {
        const std::string& value = reflection->GetRepeatedStringReference(*message, field, i, &scratch);
        if (!IsValidUtf8(value)) reflection->SetRepeatedString(message, field, i, ValidUtf8(value));
      }
    } else if (text) {
      const std::string& value = reflection->GetStringReference(*message, field, &scratch);
      if (!IsValidUtf8(value)) reflection->SetString(message, field, ValidUtf8(value));
    } else if (field->type() == FieldDescriptor::TYPE_MESSAGE && field->is_repeated()) {
      for (int i = 0; i < reflection->FieldSize(*message, field); ++i) {
        RepairText(reflection->MutableRepeatedMessage(message, field, i));
      }
    } else if (field->type() == FieldDescriptor::TYPE_MESSAGE) {
      RepairText(reflection->MutableMessage(message, field));
    }
  }
}

}  // namespace

bool ParseRepairingText(std::string_view bytes, Message* message) {
  if (message->ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) return true;
  LenientSchema& lenient = Lenient();
  if (!lenient.built) return false;
  const google::protobuf::Descriptor* type = lenient.pool.FindMessageTypeByName(message->GetDescriptor()->full_name());
  if (type == nullptr) return false;
  std::unique_ptr<Message> twin(lenient.factory.GetPrototype(type)->New());
  if (!twin->ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) return false;
  RepairText(twin.get());
  return message->ParseFromString(twin->SerializeAsString());
}

}  // namespace gpuos
