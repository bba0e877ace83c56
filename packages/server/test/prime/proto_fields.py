"""The wire shape of the command session: every message's fields (number, name, type, repeated,
oneof), enums and methods, as the installed prime_sandboxes encodes them (its own descriptor) and
as sandtree's generated code declares them (its FileDescriptorProto, base64 in argv[1], loaded in
a pool of its own). prime-proto.test.ts compares the two. Prints one JSON object."""

import base64
import json
import sys

from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.descriptor import FieldDescriptor
from prime_sandboxes._proto.command_session import command_session_pb2 as pb

TYPES = {v: k[len("TYPE_"):].lower() for k, v in vars(FieldDescriptor).items() if k.startswith("TYPE_")}


def message(d, out):
    out[d.full_name] = sorted(
        [
            {
                "no": f.number,
                "name": f.name,
                "type": TYPES[f.type],
                "repeated": f.is_repeated,
                "oneof": f.containing_oneof.name if f.containing_oneof and not f.containing_oneof.name.startswith("_") else None,
                "ref": (f.message_type or f.enum_type).full_name if (f.message_type or f.enum_type) else None,
            }
            for f in d.fields
        ],
        key=lambda x: x["no"],
    )
    for n in d.nested_types:
        message(n, out)


def shape(file):
    messages = {}
    for d in file.message_types_by_name.values():
        message(d, messages)
    enums = {e.full_name: {v.name: v.number for v in e.values} for e in file.enum_types_by_name.values()}
    service = file.services_by_name["CommandSession"]
    methods = {
        m.name: {
            "in": m.input_type.full_name,
            "out": m.output_type.full_name,
            "client_streaming": m.client_streaming,
            "server_streaming": m.server_streaming,
        }
        for m in service.methods
    }
    return {"service": service.full_name, "messages": messages, "enums": enums, "methods": methods}


ours = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(sys.argv[1]))
pool = descriptor_pool.DescriptorPool()
print(json.dumps({"client": shape(pb.DESCRIPTOR), "sandtree": shape(pool.Add(ours))}))
