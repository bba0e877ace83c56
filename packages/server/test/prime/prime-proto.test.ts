import { toBinary } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import { describe, expect, it } from "vitest";
import { file_command_session_command_session } from "../../src/gen/command_session/command_session_pb.js";
import { runPrime } from "./prime-helpers.js";

// sandtree's command_session.proto was written from what the client encodes: this holds it to the
// installed client's own descriptor, field for field (numbers, names, types, oneofs), every enum
// value and every method with its streaming kind.
describe("the command session's protobuf", () => {
  it("matches the installed prime_sandboxes' descriptor", async () => {
    const ours = Buffer.from(toBinary(FileDescriptorProtoSchema, file_command_session_command_session.proto)).toString("base64");
    const r = await runPrime("proto_fields.py", [ours], { base: "http://127.0.0.1:9/unused", key: "unused" });
    expect(Object.keys(r.client.messages).length).toBeGreaterThan(20);
    expect(r.sandtree).toEqual(r.client);
  });
});
