import type { MessageInitShape } from "@bufbuild/protobuf";
import { SandtreeError } from "@sandtree/protocol";
import type { FileRead, FileReadSchema } from "../gen/sandtree/host/v1/host_volumes_pb.js";

// The file API's messages (host_volumes.proto's File*), shared by a machine's file calls and a
// volume's: one translation each way for both.

type Range = { offset?: number; length?: number };

/** A read of `path`: all of it, or the range asked. */
export function fileRead(path: string, o: Range): MessageInitShape<typeof FileReadSchema> {
  return {
    path,
    ...(o.offset !== undefined ? { offset: BigInt(o.offset) } : {}),
    ...(o.length !== undefined ? { length: BigInt(o.length) } : {}),
  };
}

/** The range a served read asks for (none: the whole file). */
export function rangeOf(f: FileRead): Range {
  return {
    ...(f.offset !== undefined ? { offset: Number(f.offset) } : {}),
    ...(f.length !== undefined ? { length: Number(f.length) } : {}),
  };
}

/** A served file request's file part, which protobuf cannot require. */
export function fileOf<F>(f: F | undefined, field: string): F {
  if (f === undefined) throw new SandtreeError("VALIDATION_FAILED", `a file call names its file (${field})`, { field });
  return f;
}
